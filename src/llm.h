/*
 * llm.h — state shared by the backend side (src/) and the background worker
 * (bgworker/): GUC variables and the registry in main shared memory.
 *
 * The registry (LlmShared) holds the worker's identity (pid, latch,
 * generation), the model status, one channel slot per backend (indexed by
 * BackendId - 1) and the counters behind the llm_stat view.  Everything in it
 * is protected by one LWLock (tranche "llm"); it is small and touched at most
 * once per engine step by the worker, so one lock is enough.
 */
#ifndef LLM_H
#define LLM_H

#include "postgres.h"

#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

/* GUCs (defined in llm.c) */
extern char *llm_model_path;
extern int	llm_device;
extern int	llm_threads;
extern int	llm_context_length;
extern int	llm_kv_cache_size_mb;
extern int	llm_block_size;
extern int	llm_max_batched_tokens;
extern int	llm_max_running_requests;
extern bool llm_prefix_caching;
extern int	llm_prefix_cache_isolation;
extern int	llm_worker_wait_timeout_ms;
extern int	llm_debug_poison_logits;

typedef enum LlmDevice
{
	LLM_DEVICE_AUTO = 0,
	LLM_DEVICE_CPU,
	LLM_DEVICE_CUDA
} LlmDevice;

extern const char *llm_device_name(int device);

/* llm.prefix_cache_isolation: whose requests may share cached KV blocks */
typedef enum LlmPrefixIsolation
{
	LLM_PREFIX_ISOLATION_NONE = 0,	/* every request */
	LLM_PREFIX_ISOLATION_ROLE,	/* requests of the same current role */
	LLM_PREFIX_ISOLATION_DATABASE	/* requests in the same database */
} LlmPrefixIsolation;

typedef enum LlmModelState
{
	LLM_MODEL_NONE = 0,			/* worker not started yet */
	LLM_MODEL_LOADING,
	LLM_MODEL_READY,
	LLM_MODEL_FAILED
} LlmModelState;

extern const char *llm_model_state_name(LlmModelState s);

typedef struct LlmChannelSlot
{
	dsm_handle	handle;			/* DSM_HANDLE_INVALID: no channel */
	uint32		generation;		/* worker generation the channel targets */
	uint64		seq;			/* bumped at every publish: tells a new segment from an old one */
	int			pid;			/* owning backend */
	Latch	   *latch;			/* owning backend's latch (woken when the worker exits) */
} LlmChannelSlot;

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
	/* instantaneous, copied from the engine after each step */
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
 * llm_recent_requests(): a ring written by the worker once per loop
 * iteration (under the registry lock), cleared by llm_stat_reset().
 */
#define LLM_RECENT_REQUESTS 4096

typedef enum LlmRequestOutcome
{
	LLM_OUTCOME_STOP = 1,		/* end-of-generation token or stop string */
	LLM_OUTCOME_LENGTH,			/* max_tokens reached */
	LLM_OUTCOME_ERROR,			/* failed (engine error, model reload, ...) */
	LLM_OUTCOME_ABORTED			/* the backend went away or cancelled */
} LlmRequestOutcome;

typedef struct LlmRequestRecord
{
	TimestampTz finished_at;
	int32		outcome;		/* LlmRequestOutcome */
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

#define LLM_MODEL_INFO_LEN	8192
#define LLM_MODEL_ERROR_LEN 1024

typedef struct LlmShared
{
	LWLock	   *lock;
	int			worker_pid;		/* 0 while no worker runs */
	Latch	   *worker_latch;
	uint32		generation;		/* bumped by every worker start */
	uint64		slots_version;	/* bumped at every slot change: worker rescans */
	LlmModelState model_state;
	int			model_sqlstate; /* FAILED: SQLSTATE to answer requests with */
	char		model_path[MAXPGPATH];
	char		model_error[LLM_MODEL_ERROR_LEN];
	int32		n_ctx;			/* READY: context length in use */
	char		device[16];		/* READY: compute device in use */
	char		model_info[LLM_MODEL_INFO_LEN]; /* READY: the engine's JSON object */
	LlmStats	stats;
	LlmRecentRequests recent;	/* read by llm_recent_requests() */
	int			n_slots;
	LlmChannelSlot slots[FLEXIBLE_ARRAY_MEMBER];
} LlmShared;

extern LlmShared *llm_shared;

/* Add one sample (under the lock, exclusive). */
extern void llm_latency_add(LlmLatencyRing *r, double ms);

/* bgworker/worker.c */
extern PGDLLEXPORT void llm_worker_main(Datum arg);

#endif
