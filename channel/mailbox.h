/*
 * mailbox.h — the asynchronous requests of llm_submit(): a store in
 * main shared memory, independent of the session, that holds each request
 * from its submission to the end of its result's time to live.
 *
 * Layout: LlmAsyncStore (mailbox.c) holds llm.async_max_requests
 * entries and, behind them, a DSA area created in place of
 * llm.async_memory bytes that never grows (dsa_set_size_limit).  The area
 * holds each entry's request, encoded as a SUBMIT message (protocol.h: one
 * encoding for both transports), from submission until the request ends,
 * and the text of a finished request until the entry is freed.  Failure
 * messages are kept in the entry itself (truncated to
 * LLM_ASYNC_ERROR_LEN - 1 bytes).
 *
 * Ids: unique across the server and never reused: the counter starts at the
 * store's creation time in microseconds and counts up by one per request, so
 * a restarted server starts above every id it handed out before (unless it
 * handed out more than a million per second).
 *
 * Life of an entry:
 *   FREE -> QUEUED        llm_submit (any backend; the submitter's role,
 *                         database and pid are kept with it)
 *   QUEUED -> RUNNING     the worker took it into its engine (worker
 *                         generation g)
 *   RUNNING -> DONE | FAILED   the worker, at the request's end
 *   QUEUED -> CANCELLED   llm_cancel; RUNNING: llm_cancel marks it, the
 *                         worker aborts it in its engine and sets CANCELLED
 *   DONE | FAILED | CANCELLED -> FREE   after llm.async_result_ttl since it
 *                         ended (the worker's sweep, or a submitter finding
 *                         the store full), or llm_cancel
 *   RUNNING (generation < the running worker's) -> RUNNING again: a worker
 *                         that restarted (or reloaded its model) runs it
 *                         again from its start, from the request it kept.
 * A server restart or crash empties the store.
 *
 * Who may fetch or cancel: the role that submitted (GetUserId() at
 * submission), or a superuser.  A role holds at most
 * llm.async_max_requests_per_role entries (0: half the store), so one
 * role's requests never fill the store for the others.
 *
 * Ids no statement returned: an id llm_submit gives out is returned once
 * the query whose call made it finishes (at any nesting level: the
 * client's statement, a query inside a function), or its transaction
 * commits.  A PL/pgSQL assignment that is no query (x := llm_submit(...))
 * is part of the query running the function.  When a (sub)transaction
 * aborts, the requests of the ids made in it and not returned (the failed
 * statement's) are dropped at once: a queued one is freed, a running one
 * is cancelled and freed when the worker has aborted it.  Returned ids
 * outlive the transaction.
 *
 * Token limit: each entry holds its reservation (quota.h) from submission
 * until it ends.
 *
 * Notifications: an entry submitted with a channel is marked when it ends
 * (DONE, FAILED, CANCELLED; not when it is dropped because the statement
 * that made it failed) and the job runner of its database is woken
 * (job_registry.h; the worker has no database, and NOTIFY is per
 * database): the runner takes the marked entries of its database
 * (llm_async_take_notices) and sends NOTIFY <channel>, '<id> <state>' in a
 * transaction of its own.  An entry freed before its runner took it (its
 * result dropped by llm_cancel, its time to live passed) is not notified.
 *
 * Locking: store->lock (its own LWLock tranche "llm async") guards every
 * entry field and the counters; readers copy an entry's text out while
 * holding it shared, and the chunks an entry names are freed only under it
 * exclusively.  Waiters sleep on store->cv, broadcast whenever an entry
 * ends.
 */
#ifndef LLM_RESULT_STORE_H
#define LLM_RESULT_STORE_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "engine/request.h"

#define LLM_ASYNC_ERROR_LEN 256

typedef enum LlmAsyncState
{
	LLM_ASYNC_FREE = 0,
	LLM_ASYNC_QUEUED,
	LLM_ASYNC_RUNNING,
	LLM_ASYNC_DONE,
	LLM_ASYNC_FAILED,
	LLM_ASYNC_CANCELLED
} LlmAsyncState;

extern const char *llm_async_state_name(LlmAsyncState s);

/* Define llm.async_max_requests, llm.async_memory, llm.async_result_ttl (from _PG_init). */
extern void llm_result_store_define_gucs(void);

/* Request the store's shared memory (from _PG_init, before llm_registry_request). */
extern void llm_result_store_request(void);

/* ---------- backend side (async_api.c) ---------- */

/* What llm_result() sees of an entry: copied out, text palloc'd (UTF-8). */
typedef struct LlmAsyncResult
{
	LlmAsyncState state;
	bool		on_error_null;
	char	   *text;
	int			text_len;
	llm_finish_reason finish_reason;
	llm_usage	usage;
	int			sqlstate;
	char		error[LLM_ASYNC_ERROR_LEN];
} LlmAsyncResult;

/*
 * Store req (checked by the caller) and return its id; on_error_null is
 * kept for llm_result; notify (NULL: none; checked by the caller, shorter
 * than NAMEDATALEN) is the channel to NOTIFY when it ends; exec_level is
 * the caller's executor nesting level
 * (the id counts as returned once a query at that level or below ends:
 * llm_async_query_finished).  ERROR 53400 when the store has no free entry or no
 * room for the request, the role holds its share, or the request does
 * not fit the role's token limit.
 */
extern uint64 llm_async_submit(const llm_request *req, bool on_error_null, int exec_level,
							   const char *notify);

/*
 * Copy entry id into *out.  With wait, sleep (interruptibly) until it has
 * ended; waiting while no worker runs fails after llm.worker_wait_timeout.
 * ERROR 42704 if there is no such entry (never submitted, expired,
 * cancelled and dropped), 42501 if the caller may not see it.
 */
extern void llm_async_fetch(uint64 id, bool wait, LlmAsyncResult *out);

/*
 * Cancel entry id (QUEUED or RUNNING: it ends CANCELLED) or drop its result
 * (already ended: the entry is freed).  Returns false if there is no such
 * entry; ERROR 42501 if the caller may not touch it.
 */
extern bool llm_async_cancel(uint64 id);

/*
 * Drop every entry of the current role (QUEUED and ended ones freed now,
 * RUNNING ones cancelled and freed once the worker aborted them); returns
 * how many.
 */
extern int64 llm_async_cancel_all(void);

/* One entry of the current role, as llm_async_requests() lists it. */
typedef struct LlmAsyncListed
{
	uint64		id;
	LlmAsyncState state;
	bool		cancelling;		/* RUNNING: cancelled, the worker has not aborted it yet */
	TimestampTz submitted_at;
	TimestampTz ended_at;		/* 0 until it ends */
} LlmAsyncListed;

/* The current role's entries (palloc'd array into *out); returns how many. */
extern int	llm_async_list(LlmAsyncListed **out);

/*
 * The query at executor nesting level level finished (on_error.c's
 * executor hooks): the ids its calls of llm_submit gave out are returned.
 */
extern void llm_async_query_finished(int level);

/* ---------- worker side (worker/intake.c) ---------- */

/* An entry the worker takes into its engine (see llm_async_take). */
typedef struct LlmAsyncTaken
{
	int			index;			/* the entry's position, for the calls below */
	uint64		id;
	const void *request;		/* the encoded SUBMIT message, valid until the entry ends */
	Size		request_len;
} LlmAsyncTaken;

/*
 * Attach to the store's area (once per process; the worker calls it at
 * start, backends on first use).
 */
extern void llm_async_attach(void);

/*
 * If the store changed since the last call (always true at the first call):
 * move up to max entries that are QUEUED, or RUNNING under an older worker
 * generation, to RUNNING under generation and describe them in out[];
 * returns how many.  *more is set when entries were left for the next call.
 * Entries of generation marked for cancellation are listed in cancel[]
 * (index and id; up to max) with their count in *n_cancel: the caller
 * aborts them and reports llm_async_cancelled.
 */
extern int	llm_async_take(uint32 generation, LlmAsyncTaken *out, int max, bool *more,
						   LlmAsyncTaken *cancel, int *n_cancel);

/* Entry (index, id) ended: its text (UTF-8) and usage, or a failure, or its cancellation. */
extern void llm_async_finish(int index, uint64 id, const char *text, Size len,
							 llm_finish_reason reason, const llm_usage *usage);
extern void llm_async_fail(int index, uint64 id, int sqlstate, const char *message);
extern void llm_async_cancelled(int index, uint64 id);

/* Entry (index, id) goes back to QUEUED (the engine it ran in is being replaced). */
extern void llm_async_requeue(int index, uint64 id);

/* Free the entries whose time to live has passed; at most once per second does work. */
extern void llm_async_sweep(void);

/* ---------- job runner side (jobs/job_runner.c) ---------- */

/* An ended entry whose submitter asked for a notification. */
typedef struct LlmAsyncNotice
{
	uint64		id;
	LlmAsyncState state;		/* DONE, FAILED or CANCELLED */
	char		channel[NAMEDATALEN];
} LlmAsyncNotice;

/*
 * Take up to max notifications of database's entries into out (each taken
 * once); returns how many, *more set when some were left.
 */
extern int	llm_async_take_notices(Oid database, LlmAsyncNotice *out, int max, bool *more);

#endif
