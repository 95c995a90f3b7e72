/*
 * job_queue.h — the extension's job tables (llm_job, llm_job_queue,
 * llm_job_error; sql/llm--0.2--0.3.sql) and the statements on them that
 * the claim/write protocol needs (docs/JOBS.md).
 *
 * Keys: a row of a job's target is named by its primary key, as a text[]
 * of the key columns' output texts in index order (job_rows.h converts).
 *
 * Who runs them: every statement here runs as the owner of the job tables
 * (the extension's owner) with search_path = pg_catalog, pg_temp, whoever
 * calls (a job's role in the runner, any user in llm_enrich, the control
 * functions or a continuous job's trigger): callers have no rights on
 * these tables, and no search_path of theirs can reach into these
 * statements.  Callers need an SPI connection and a transaction.
 *
 * A claim: attempts + 1, claimed_by = the runner's token, lease_until =
 * now() + llm.job_lease_time, committed before the runner evaluates the
 * row; rows are claimed in queue order with FOR UPDATE SKIP LOCKED, so a
 * row a user transaction holds is passed over, never waited for.
 */
#ifndef LLM_JOB_QUEUE_H
#define LLM_JOB_QUEUE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/array.h"

#include "job_rows.h"

/* The schema of the extension's objects (cached per process). */
extern Oid	llm_job_schema(void);

/* Run the statements of this file as the tables' owner from here to llm_job_internal_leave. */
typedef struct LlmInternalContext
{
	Oid			save_user;
	int			save_sec;
	int			guc_level;
} LlmInternalContext;

extern void llm_job_internal_enter(LlmInternalContext *c);
extern void llm_job_internal_leave(LlmInternalContext *c);

/*
 * Execute one of this file's statements (text with $1.. of the given types,
 * prepared once per process) as the tables' owner; returns SPI's result
 * code, the rows in SPI_tuptable.
 */
extern int	llm_job_internal_exec(const char *sql, int nargs, const Oid *types,
								  const Datum *values, const char *nulls, long tcount);

/* A claimed row (the runner's copy). */
typedef struct LlmClaim
{
	Datum		key;			/* text[], in the caller's memory context */
	int			attempts;		/* this claim included */
} LlmClaim;

/* Claim up to n unclaimed (or lease-expired) rows of job for token (keys copied into cxt); returns how many. */
extern int	llm_queue_claim(int64 job, int64 token, int n, LlmClaim *out, MemoryContext cxt);

/* Lock the queue row of (job, key) if token still claims it; its attempts, or -1 if not. */
extern int	llm_queue_lock(int64 job, Datum key, int64 token);

/* Remove the row of (job, key): its result was written, or it needs none. */
extern void llm_queue_delete(int64 job, Datum key);

/*
 * The same for keys[0..n) (distinct) in one statement each: lock those
 * token still claims (claimed[i] set; returns how many); remove them.
 */
extern int	llm_queue_lock_rows(int64 job, const Datum *keys, int n, int64 token, bool *claimed);

/* The same, passing over the queue rows another transaction holds (a trigger queueing a key again). */
extern int	llm_queue_try_lock_rows(int64 job, const Datum *keys, int n, int64 token, bool *claimed);
extern void llm_queue_delete_rows(int64 job, const Datum *keys, int n);

/*
 * Give up token's claim of (job, key): it may be claimed again; refund
 * takes back the attempt the claim counted (a failure that was not the
 * row's); error, if not NULL, is kept as the row's last error.
 */
extern void llm_queue_release(int64 job, Datum key, int64 token, bool refund, const char *error);

/* Give up every claim of token on job (refund: as above). */
extern void llm_queue_release_job(int64 job, int64 token, bool refund);

/* Give up every claim of a runner other than token (the one it replaces), in every job. */
extern int64 llm_queue_release_others(int64 token);

/* Move (job, key) to llm_job_error after attempts attempts, with its last error. */
extern void llm_queue_fail(int64 job, Datum key, int attempts, const char *sqlstate, const char *error);

/* Queue keys[0..n) (text[] each) of job; a key queued already gets its attempts reset. */
extern void llm_queue_insert(int64 job, Datum *keys, int n);

/* Rows of job still queued (claimed or not). */
extern int64 llm_queue_count(int64 job);

/* ---------- llm_job ---------- */

/* Job id as a definition in cxt (for_update: its row locked), or NULL if there is none. */
extern LlmJob *llm_job_fetch(int64 id, bool for_update, MemoryContext cxt);

/* Every job in state queued, running or paused, in id order; *n set. */
extern LlmJob **llm_job_fetch_active(MemoryContext cxt, int *n);

/* Insert a job (id assigned) and return its id. */
extern int64 llm_job_insert(const LlmJob *job);

/* Id and state of a job other than except that fills (target, column) and is not done or cancelled; 0 if none. */
extern int64 llm_job_find_active(Oid target, const char *column, int64 except, LlmJobState *state);

/*
 * The same over target's partition tree: target, its partitions (all
 * levels) and its ancestors, which share its rows: the oldest such job
 * (lowest id), *on its table.  The caller holds what keeps the tree still.
 */
extern int64 llm_job_find_in_tree(Oid target, const char *column, int64 except, LlmJobState *state, Oid *on);

/*
 * Move job from state from to state to (stamping started_at, finished_at);
 * error (if not NULL) becomes last_error, clear_error empties it.  False if
 * the job was not in state from any more.  A job that ends (done, failed,
 * cancelled) with a notify channel sends NOTIFY channel, 'job <id>
 * <state>' when the transaction commits.
 */
extern bool llm_job_set_state(int64 id, LlmJobState from, LlmJobState to, const char *error,
							  bool clear_error);

/* What a runner did for job since its last report. */
typedef struct LlmJobCounts
{
	int64		done;
	int64		failed;
	int64		skipped;
	int64		skipped_by[LLM_SKIP_N];	/* skipped, by reason */
	int64		requeued;
	int64		tokens_in;
	int64		tokens_out;
	/*
	 * The hex sha256 of the model file that made the last row counted done
	 * ("" none): kept in llm_job.model_sha256, next to what the job wrote.
	 */
	char		model_sha256[65];
} LlmJobCounts;

/* Add counts to job's totals; rows_per_s (< 0: unknown) is the runner's recent rate. */
extern void llm_job_add_counts(int64 id, const LlmJobCounts *counts, double rows_per_s);

/*
 * Job id waits for its owner's token limit until until, for reason
 * (llm_jobs' throttled_until, throttled_reason); until 0: it no longer
 * waits (both NULL).
 */
extern void llm_job_set_throttled(int64 id, TimestampTz until, const char *reason);

/* Remove every queued row of job (cancelled). */
extern void llm_queue_clear(int64 job);

/* Move every failed row of job back into its queue; returns how many. */
extern int64 llm_queue_retry_failed(int64 job);

#endif
