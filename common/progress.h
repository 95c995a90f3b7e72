/*
 * progress.h — what the running statement of each backend has asked of the
 * llm worker, behind the llm_progress view (progress.c).
 *
 * PostgreSQL's progress API (pg_stat_progress_*) has a fixed list of
 * command types, so the counters live in the library's own shared memory:
 * one LlmProgressSlot per backend, indexed by BackendId - 1.
 *
 * Statement: counters belong to the top-level statement that was running
 * when they were noted (GetCurrentStatementStartTimestamp(), the value
 * pg_stat_activity shows as query_start); the first note of a new statement
 * zeroes them.  The view shows a slot only while its backend is active in
 * that same statement (joined with pg_stat_activity on pid and
 * query_start), so a finished statement's numbers disappear with it.
 *
 * Concurrency: a slot is written only by its own backend, without a lock,
 * under a change counter (pgstat's st_changecount protocol): the writer
 * makes it odd, writes, makes it even (with write barriers); a reader
 * copies the slot and retries while the counter was odd or moved.
 *
 * Callers: client.c notes every request it submits and every final answer
 * (finished with usage, failed, aborted before its answer); the LLM Batch
 * node notes each row it returns, the calls it saved and each call of its
 * cascade.
 */
#ifndef LLM_PROGRESS_H
#define LLM_PROGRESS_H

#include "postgres.h"

#include "engine/request.h"

/* Request the slots' shared memory (from _PG_init, before llm_registry_request). */
extern void llm_progress_request(void);

/* A request was submitted / answered with usage / failed / aborted before its answer. */
extern void llm_progress_note_submitted(void);
extern void llm_progress_note_finished(const llm_usage *usage);
extern void llm_progress_note_failed(void);
extern void llm_progress_note_aborted(void);

/* The LLM Batch node returned one more row. */
extern void llm_progress_note_batch_row(void);

/*
 * The LLM Batch node saved calls: saved's LLM_COUNTERS_SAVED fields
 * (stats.h) are added to the statement's (calls_shared as each call is
 * shared, the lift's rows when the node ends).
 */
struct LlmRoleUsage;
extern void llm_progress_note_saved(const struct LlmRoleUsage *saved);

/* A model cascade of an LLM Batch node sent a call: to the small model, a sampled row's, another large one. */
typedef enum LlmCascadeCallKind
{
	LLM_CASCADE_CALL_SMALL,
	LLM_CASCADE_CALL_SAMPLE,
	LLM_CASCADE_CALL_LARGE
} LlmCascadeCallKind;
extern void llm_progress_note_cascade_call(LlmCascadeCallKind kind);

#endif
