/*
 * stats.h — the worker's statistics in shared memory: their layout, their
 * locking rule, and the two sides that touch them.
 *
 * Layout: LlmStats (behind the llm_stat view, and its usage table behind
 * the llm_usage view) and LlmRecentRequests (behind llm_recent_requests())
 * live in the registry (registry.h, LlmShared.stats and .recent).
 *
 * Locking (pg_stat_statements style, one lock for everything since it is
 * touched at most once per engine step): every field of LlmStats and
 * LlmRecentRequests is guarded by the registry's LWLock, llm_shared->lock.
 *   - the worker (worker/stats_publish.c) is the only writer of the
 *     counters, rings and records: it takes the lock LW_EXCLUSIVE once per
 *     loop iteration to publish what it noted since, and once more when its
 *     buffer of records fills within one iteration;
 *   - llm_stat_reset() (stats_views.c) takes it LW_EXCLUSIVE to zero the
 *     cumulative fields, the rings and the records;
 *   - readers (llm_stat(), llm_recent_requests(), stats_views.c) copy what they
 *     need under LW_SHARED and compute outside the lock;
 *   - the worker's exit zeroes the instantaneous fields under LW_EXCLUSIVE.
 *
 * Worker side: the request intake and event routing note what happened to
 * each request (finished with its usage, failed, aborted) and each engine
 * step; the main loop publishes once per iteration.  Noting takes the lock
 * only to flush its buffer of records when it is full.
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
	int64		requests;
	int64		prompt_tokens;
	int64		cached_tokens;
	int64		completion_tokens;
	double		busy_ms;		/* compute time attributed to its requests (llm_usage.busy_ms) */
	int64		class_requests[LLM_N_PRIORITIES];	/* requests by class (request.h llm_priority) */
	TimestampTz last_noted;
	int64		second[LLM_USAGE_WINDOW];	/* Unix second each bucket counts */
	int64		tokens[LLM_USAGE_WINDOW];	/* tokens noted in that second */
} LlmRoleUsage;

typedef struct LlmStats
{
	/* instantaneous, copied from the engine at each publish */
	int32		requests_running;
	int32		requests_waiting;
	int32		batch_size;		/* sequences in the last step */
	int32		max_batch_size; /* since start or llm_stat_reset() */
	int32		kv_blocks_used;
	int32		kv_blocks_cached;
	int32		kv_blocks_total;
	/* cumulative, since start or llm_stat_reset() */
	int64		requests_finished;
	int64		requests_failed;
	int64		requests_aborted;
	int64		prompt_tokens;
	int64		cached_tokens;
	int64		prefix_query_tokens;	/* prompt tokens looked up in the prefix cache */
	int64		prefix_hit_tokens;	/* of those, served from cached blocks */
	int64		completion_tokens;
	int64		steps;
	int64		preemptions;
	TimestampTz reset_time;
	LlmLatencyRing ttft;
	LlmLatencyRing tpot;
	/* cumulative since start or llm_stat_reset(), except the windows (never reset) */
	LlmRoleUsage usage[LLM_USAGE_ENTRIES];
} LlmStats;

/*
 * One served model's statistics (a row of the llm_models view, in the
 * registry's model table, registry.h), under the same lock and written by
 * the same publish as LlmStats; llm_stat sums every model.  Cumulative
 * fields count since the model's row was taken (the worker start, or the
 * alias's first appearance in llm.models) or llm_stat_reset(); a reload of
 * the model keeps them.
 */
typedef struct LlmModelStats
{
	/* instantaneous */
	int32		requests_running;
	int32		requests_waiting;
	int32		batch_size;
	int32		max_batch_size;
	int32		kv_blocks_used;
	int32		kv_blocks_cached;
	int32		kv_blocks_total;
	/* cumulative */
	int64		requests_finished;
	int64		requests_failed;
	int64		requests_aborted;
	int64		prompt_tokens;
	int64		completion_tokens;
	int64		steps;
} LlmModelStats;

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

/* The worker exits: no requests run any more (caller holds the lock exclusively). */
extern void llm_stats_worker_gone_locked(LlmStats *s);

#endif
