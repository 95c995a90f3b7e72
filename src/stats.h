/*
 * stats.h — the worker's statistics in shared memory: their layout, their
 * locking rule, and the two sides that touch them.
 *
 * Layout: LlmStats (behind the llm_stat view) and LlmRecentRequests (behind
 * llm_recent_requests()) live in the registry (registry.h, LlmShared.stats and
 * .recent).
 *
 * Locking (pg_stat_statements style, one lock for everything since it is
 * touched at most once per engine step): every field of LlmStats and
 * LlmRecentRequests is guarded by the registry's LWLock, llm_shared->lock.
 *   - the worker (bgworker/stats_publish.c) is the only writer of the
 *     counters, rings and records: it takes the lock LW_EXCLUSIVE once per
 *     loop iteration to publish what it noted since, and once more when its
 *     buffer of records fills within one iteration;
 *   - llm_stat_reset() (stats.c) takes it LW_EXCLUSIVE to zero the
 *     cumulative fields, the rings and the records;
 *   - readers (llm_stat(), llm_recent_requests(), stats.c) copy what they
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

#include "engine.h"

/* Latency samples kept for mean / p99 (a ring of the most recent requests). */
#define LLM_LATENCY_RING 1024

typedef struct LlmLatencyRing
{
	int			count;			/* valid samples, <= LLM_LATENCY_RING */
	int			next;			/* write position */
	float		ms[LLM_LATENCY_RING];
} LlmLatencyRing;

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
} LlmRequestRecord;

typedef struct LlmRecentRequests
{
	int64		written;		/* records written since start or reset; slot = written % N */
	LlmRequestRecord rec[LLM_RECENT_REQUESTS];
} LlmRecentRequests;

/* ---------- worker side (bgworker/stats_publish.c) ---------- */

/* A request finished (reason STOP or LENGTH) with its usage. */
extern void llm_stats_note_finished(llm_finish_reason reason, const llm_usage *usage);

/* A request failed (any ERROR answer of the worker). */
extern void llm_stats_note_failed(void);

/* A request was dropped: its backend aborted it or went away. */
extern void llm_stats_note_aborted(void);

/* One engine step ran. */
extern void llm_stats_note_step(void);

/* Something shown by llm_stat changed (requests queued, model state): publish next time. */
extern void llm_stats_note_change(void);

/* A new engine (or none) replaces the old one: its cumulative counters start from zero. */
extern void llm_stats_engine_replaced(void);

/*
 * Publish what was noted, and the engine's instantaneous numbers (e; NULL
 * when no engine is loaded), if anything changed since the last publish.
 */
extern void llm_stats_publish(const llm_engine *e);

/* The worker exits: no requests run any more (caller holds the lock exclusively). */
extern void llm_stats_worker_gone_locked(LlmStats *s);

#endif
