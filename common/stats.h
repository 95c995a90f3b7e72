/*
 * stats.h — the worker's statistics in shared memory: the one list of
 * counters, their layout, their locking rule, and the two sides that touch
 * them.
 *
 * Counters: LLM_COUNTERS below is the only list of them.  It declares the
 * counter fields of every structure that counts requests (a model's
 * LlmCounters, a role's LlmRoleUsage, a backend's progress slot in
 * progress.c, and the worker's deltas between two publishes), and the code
 * that copies, sums, resets and shows them loops over it.  A new counter is
 * one row there, the code that counts it, and its column in the SQL
 * declaration of the views that show it (llm_stat and llm_models find a
 * counter's column by its name; llm_progress takes its counters in list
 * order).
 *
 * Layout: each row of the model table (registry.h, LlmShared.models[])
 * holds its model's LlmCounters (behind llm_models); LlmStats (LlmShared.stats)
 * holds the counters of requests no row holds now, the latency rings, the
 * reset time and the usage table (behind llm_usage); LlmRecentRequests
 * (LlmShared.recent) the records behind llm_recent_requests().  llm_stat is
 * computed, never stored: the sum over every row and LlmStats.other
 * (llm_counters_fold), so it always agrees with llm_models.
 *
 * Locking (pg_stat_statements style, one lock for everything since it is
 * touched at most once per engine step): every field of LlmStats,
 * LlmRecentRequests and the rows' LlmCounters is guarded by the registry's
 * LWLock, llm_shared->lock.
 *   - the worker (worker/stats_publish.c) is the only writer of the
 *     counters, rings and records: it takes the lock LW_EXCLUSIVE once per
 *     loop iteration to publish what it noted since, once more when its
 *     buffer of records or usage fills within one iteration, and when a row
 *     of the model table is cleared or given to another alias (its counters
 *     move into LlmStats.other: llm_stats_row_retired_locked);
 *   - llm_stat_reset() (stats_views.c) takes it LW_EXCLUSIVE to zero the
 *     cumulative fields, the rings and the records;
 *   - readers (llm_stat(), llm_models(), llm_usage(),
 *     llm_recent_requests(), stats_views.c) copy what they need under LW_SHARED
 *     and compute outside the lock;
 *   - the worker's exit zeroes the instantaneous fields under LW_EXCLUSIVE.
 * The progress slots (progress.h) use the same list but not this lock: each
 * is written by its own backend under a change counter.
 *
 * Worker side: the request intake and event routing note what happened to
 * each request (finished with its usage, failed, aborted) and each engine
 * step; the main loop publishes once per iteration.  Noting takes the lock
 * only to flush a full buffer.
 */
#ifndef LLM_STATS_H
#define LLM_STATS_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "engine/engine.h"
#include "channel/protocol.h"

/* Latency samples kept for mean / p99 (a ring of the most recent requests). */
#define LLM_LATENCY_RING 1024

typedef struct LlmLatencyRing
{
	int			count;			/* valid samples, <= LLM_LATENCY_RING */
	int			next;			/* write position */
	float		ms[LLM_LATENCY_RING];
} LlmLatencyRing;

/*
 * LLM_COUNTERS(X): every counter, one row each, as
 *   X(type, name, kind, model, usage, progress)
 * type: int32, int64 or double (the SQL column: int, bigint, float8).
 * kind: how the counter moves and how two of them combine:
 *   LOAD   what runs now, set from the engine at each publish, zeroed when
 *          the worker exits; llm_stat sums the models';
 *   SIZE   like LOAD, but kept when the worker exits (the last engine's);
 *   PEAK   the largest value since start or llm_stat_reset() (reset to the
 *          current value of the LOAD it is the peak of); llm_stat takes the
 *          largest of the models';
 *   COUNT  cumulative since start or llm_stat_reset(); summed.
 * model, usage, progress: Y where the counter is a field of LlmCounters (a
 * model's, llm_stat's and llm_models' counters), of LlmRoleUsage (llm_usage)
 * or of a backend's progress slot (llm_progress), N where not.
 * The order is llm_progress's column order; the other views go by name.
 */
#define LLM_COUNTERS(X) \
	X(int64, requests_submitted, COUNT, N, N, Y) \
	X(int32, requests_running, LOAD, Y, N, N) \
	X(int32, requests_waiting, LOAD, Y, N, N) \
	X(int64, requests, COUNT, N, Y, N) /* requests that ended, any way */ \
	X(int64, requests_finished, COUNT, Y, N, Y) \
	X(int64, requests_failed, COUNT, Y, N, Y) \
	X(int64, requests_aborted, COUNT, Y, N, Y) \
	X(int64, prompt_tokens, COUNT, Y, Y, Y) \
	X(int64, cached_tokens, COUNT, Y, Y, Y) \
	X(int64, prefix_query_tokens, COUNT, Y, N, N) /* prompt tokens looked up in the prefix cache */ \
	X(int64, prefix_hit_tokens, COUNT, Y, N, N) /* of those, served from cached blocks */ \
	X(int64, completion_tokens, COUNT, Y, Y, Y) \
	X(int64, continuation_tokens, COUNT, N, Y, N) /* SCORE requests' rows past the prompt (request.h) */ \
	X(double, busy_ms, COUNT, N, Y, N)	/* compute time attributed to the requests */ \
	X(int64, batch_rows, COUNT, N, N, Y)	/* rows returned by LLM Batch nodes */ \
	X(int32, batch_size, LOAD, Y, N, N) /* sequences in the last step */ \
	X(int32, max_batch_size, PEAK, Y, N, N) /* the peak of batch_size */ \
	X(int32, kv_blocks_used, LOAD, Y, N, N) \
	X(int32, kv_blocks_cached, SIZE, Y, N, N) \
	X(int32, kv_blocks_total, SIZE, Y, N, N) \
	X(int64, steps, COUNT, Y, N, N) \
	X(int64, preemptions, COUNT, Y, N, N) \
	LLM_COUNTERS_SAVED(X) \
	LLM_COUNTERS_CASCADE(X)

/*
 * Calls saved, counted by the backends (LLM Batch nodes, row-by-row calls)
 * and the job runner (never by the worker, which never sees a call that
 * was not made), in llm_usage and llm_progress:
 *   calls_shared       calls answered by an identical call's request of
 *                      the same statement, or of the same job
 *                      (llm.dedup_calls): each is a call not made, exactly;
 *   lift_rows_below    rows returned by the scans model-calling filters
 *                      were lifted from (llm.lift_filters): the rows each
 *                      filter would have been called for where PostgreSQL
 *                      placed it;
 *   lift_rows_reached  rows that reached those filters at their join (per
 *                      lifted filter, the rows its LLM Batch node read: a
 *                      second filter of one node sees at most as many).
 * lift_rows_below - lift_rows_reached is what the lift saved, before
 * sharing; it is negative where the planner's estimates were wrong.
 */
#define LLM_COUNTERS_SAVED(X) \
	X(int64, calls_shared, COUNT, N, Y, Y) \
	X(int64, lift_rows_below, COUNT, N, Y, Y) \
	X(int64, lift_rows_reached, COUNT, N, Y, Y)

/*
 * A model cascade's calls (batch_cascade.h), counted by the backend's LLM
 * Batch node as it sends them, in llm_usage (the node's totals when it
 * ends) and llm_progress (each call as it is sent).  They are requests the
 * worker also counts in requests / prompt_tokens / ...; these say which
 * part of the cascade made them:
 *   cascade_small_calls   the small model's calls (one per row with a request);
 *   cascade_sample_calls  the large model's calls of the sampled rows;
 *   cascade_large_calls   the large model's other calls (rows under the
 *                         threshold, failed small calls, too few rows).
 */
#define LLM_COUNTERS_CASCADE(X) \
	X(int64, cascade_small_calls, COUNT, N, Y, Y) \
	X(int64, cascade_sample_calls, COUNT, N, Y, Y) \
	X(int64, cascade_large_calls, COUNT, N, Y, Y)

/* The counters an LLM Batch node counts itself and notes when it ends (llm_stats_note_saved). */
#define LLM_COUNTERS_NODE(X) \
	LLM_COUNTERS_SAVED(X) \
	LLM_COUNTERS_CASCADE(X)

/* Building blocks of the expansions: Y keeps its argument, N drops it. */
#define LLM_IF_Y(...) __VA_ARGS__
#define LLM_IF_N(...)
#define LLM_IF_COUNT_COUNT(...) __VA_ARGS__
#define LLM_IF_COUNT_LOAD(...)
#define LLM_IF_COUNT_SIZE(...)
#define LLM_IF_COUNT_PEAK(...)
#define LLM_IF_LOAD_COUNT(...)
#define LLM_IF_LOAD_LOAD(...) __VA_ARGS__
#define LLM_IF_LOAD_SIZE(...)
#define LLM_IF_LOAD_PEAK(...)
#define LLM_IF_PEAK_COUNT(...)
#define LLM_IF_PEAK_LOAD(...)
#define LLM_IF_PEAK_SIZE(...)
#define LLM_IF_PEAK_PEAK(...) __VA_ARGS__

/* The counter fields of each structure (use inside a struct declaration). */
#define LLM_FIELD_MODEL(type, name, kind, m, u, p) LLM_IF_##m(type name;)
#define LLM_FIELD_USAGE(type, name, kind, m, u, p) LLM_IF_##u(type name;)
#define LLM_FIELD_PROGRESS(type, name, kind, m, u, p) LLM_IF_##p(type name;)

/*
 * One model's counters: a row of the llm_models view (in the registry's
 * model table, registry.h), LlmStats.other, and a term of llm_stat's sum.
 * A row's COUNT fields count since the row was taken (the worker start, or
 * the alias's first appearance in llm.models) or llm_stat_reset(); a reload
 * of the model keeps them.
 */
typedef struct LlmCounters
{
	LLM_COUNTERS(LLM_FIELD_MODEL)
} LlmCounters;

/* dst combined with src, as llm_stat combines models (LOAD, SIZE, COUNT: sum; PEAK: max). */
static inline void
llm_counters_fold(LlmCounters *dst, const LlmCounters *src)
{
#define LLM_FOLD_LOAD(n) dst->n += src->n;
#define LLM_FOLD_SIZE(n) dst->n += src->n;
#define LLM_FOLD_COUNT(n) dst->n += src->n;
#define LLM_FOLD_PEAK(n) dst->n = Max(dst->n, src->n);
#define LLM_FOLD(type, name, kind, m, u, p) LLM_IF_##m(LLM_FOLD_##kind(name))
	LLM_COUNTERS(LLM_FOLD)
#undef LLM_FOLD
#undef LLM_FOLD_LOAD
#undef LLM_FOLD_SIZE
#undef LLM_FOLD_COUNT
#undef LLM_FOLD_PEAK
}

/* dst += src's COUNT fields (a publish's delta, a retired row's totals). */
static inline void
llm_counters_add_counts(LlmCounters *dst, const LlmCounters *src)
{
#define LLM_ADD(type, name, kind, m, u, p) LLM_IF_##m(LLM_IF_COUNT_##kind(dst->name += src->name;))
	LLM_COUNTERS(LLM_ADD)
#undef LLM_ADD
}

/* dst takes over src's history: its COUNT fields added, its PEAK fields where larger. */
static inline void
llm_counters_add_history(LlmCounters *dst, const LlmCounters *src)
{
#define LLM_PEAK(type, name, kind, m, u, p) \
	LLM_IF_##m(LLM_IF_PEAK_##kind(dst->name = Max(dst->name, src->name);))
	llm_counters_add_counts(dst, src);
	LLM_COUNTERS(LLM_PEAK)
#undef LLM_PEAK
}

/* Zero c's COUNT fields. */
static inline void
llm_counters_zero_counts(LlmCounters *c)
{
#define LLM_ZERO(type, name, kind, m, u, p) LLM_IF_##m(LLM_IF_COUNT_##kind(c->name = 0;))
	LLM_COUNTERS(LLM_ZERO)
#undef LLM_ZERO
}

/* Zero c's LOAD fields (nothing runs). */
static inline void
llm_counters_zero_load(LlmCounters *c)
{
#define LLM_ZERO(type, name, kind, m, u, p) LLM_IF_##m(LLM_IF_LOAD_##kind(c->name = 0;))
	LLM_COUNTERS(LLM_ZERO)
#undef LLM_ZERO
}

/*
 * Token usage of one (role, database): the requests the worker took for it
 * and what they used, behind the llm_usage view; and the tokens (prompt +
 * completion) noted in each of the last LLM_USAGE_WINDOW seconds
 * (llm_usage.tokens_last_minute; the limit, llm.max_tokens_per_minute, has
 * its own ledger, quota.h).  A request is noted when it ends (finished,
 * failed or aborted: an aborted one with the tokens it had generated).
 * The table holds LLM_USAGE_ENTRIES pairs; a new pair beyond that takes the
 * entry of the pair noted least recently.
 */
#define LLM_USAGE_ENTRIES 128
#define LLM_USAGE_WINDOW 60

typedef struct LlmRoleUsage
{
	Oid			role;			/* InvalidOid: a free entry */
	Oid			database;
	LLM_COUNTERS(LLM_FIELD_USAGE)
	int64		class_requests[LLM_N_PRIORITIES];	/* requests by class (request.h llm_priority) */
	TimestampTz last_noted;
	int64		second[LLM_USAGE_WINDOW];	/* Unix second each bucket counts */
	int64		tokens[LLM_USAGE_WINDOW];	/* tokens noted in that second */
} LlmRoleUsage;

typedef struct LlmStats
{
	/*
	 * The counters of requests no row of the model table holds now: those
	 * no model took (an unknown alias, a malformed request), and those of
	 * rows since cleared or given to another alias.  COUNT and PEAK only.
	 */
	LlmCounters other;
	TimestampTz reset_time;
	LlmLatencyRing ttft;
	LlmLatencyRing tpot;
	/* cumulative since start or llm_stat_reset(), except the windows (never reset) */
	LlmRoleUsage usage[LLM_USAGE_ENTRIES];
} LlmStats;

/*
 * Per-request records of the most recent finished requests, behind
 * llm_recent_requests(): a ring, cleared by llm_stat_reset().
 */
#define LLM_RECENT_REQUESTS 4096

typedef struct LlmRequestRecord
{
	TimestampTz finished_at;
	int32		outcome;		/* llm_finish_reason: STOP, LENGTH, ABORT or ERROR */
	int32		prompt_tokens;	/* -1: unknown (error, aborted) */
	int32		cached_tokens;
	int32		completion_tokens;
	double		ttft_ms;		/* engine add -> first token; < 0: none */
	double		total_ms;		/* engine add -> finished; < 0: unknown */
	/* the submitter (protocol.h's llm_wire_client); pid 0: unknown */
	int32		pid;
	Oid			role;
	Oid			database;
} LlmRequestRecord;

typedef struct LlmRecentRequests
{
	int64		written;		/* records written since start or reset; slot = written % N */
	LlmRequestRecord rec[LLM_RECENT_REQUESTS];
} LlmRecentRequests;

/* ---------- worker side (worker/stats_publish.c) ---------- */

/*
 * What happened to one request of client (its submitter, recorded with it;
 * NULL: unknown): finished (reason STOP or LENGTH) with its usage, failed
 * (any ERROR answer of the worker), or dropped (its backend aborted it or
 * went away).  model: the row of the model table (registry.h) the request
 * went to, or -1 for a request no model took (an unknown alias, a malformed
 * request).
 */
extern void llm_stats_note_finished(int model, llm_finish_reason reason, const llm_usage *usage,
									const llm_wire_client *client);
extern void llm_stats_note_failed(int model, const llm_wire_client *client);
extern void llm_stats_note_aborted(int model, const llm_wire_client *client);

/*
 * A request of role in database, of class priority, ended: account what it
 * used (usage; NULL when only completion_tokens are known, for an aborted
 * one) to the pair.
 */
extern void llm_stats_note_usage(Oid role, Oid database, llm_priority priority, const llm_usage *usage,
								 int32 completion_tokens);

/* One engine step of model ran. */
extern void llm_stats_note_step(int model);

/* Something shown by llm_stat changed (requests queued, model state): publish next time. */
extern void llm_stats_note_change(void);

/*
 * A new engine (or none) replaces model's old one: the engine's cumulative
 * counters start from zero.  fresh: the row now serves another alias, so
 * its statistics start from zero too.
 */
extern void llm_stats_engine_replaced(int model, bool fresh);

/*
 * Publish what was noted, and each model's instantaneous numbers
 * (engines[row]: the engine of each row of the model table, NULL where no
 * engine is loaded; n rows), if anything changed since the last publish.
 */
extern void llm_stats_publish(llm_engine *const *engines, int n);

/*
 * Row of the model table is cleared or given to another alias: its
 * counters, published and pending, move into LlmStats.other, and the row's
 * start from zero (caller holds the lock exclusively).
 */
extern void llm_stats_row_retired_locked(int row);

/* The worker exits: no requests run any more (caller holds the lock exclusively). */
extern void llm_stats_worker_gone_locked(void);

/* ---------- backend side (pg/batch/batch_exec.c) ---------- */

/*
 * An LLM Batch node of the current role in this database ended having
 * counted what saved holds (its LLM_COUNTERS_NODE fields: the calls it
 * saved and its cascade's calls; the others are ignored): added to the
 * role's llm_usage entry at once, under the lock LW_EXCLUSIVE (once per
 * node, never per row).  The one exception to the worker being the only
 * writer: these fields are written by no worker.
 */
extern void llm_stats_note_saved(const LlmRoleUsage *saved);

#endif
