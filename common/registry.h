/*
 * registry.h — the registry in main shared memory (registry.c), shared by
 * the backends (pg/, jobs/) and the background workers (worker/, jobs/).
 *
 * The registry (LlmShared) holds the worker's identity (pid, latch,
 * generation), the model table (one row per served model, the default model
 * in row LLM_DEFAULT_ROW), one channel slot per backend (indexed by
 * BackendId - 1) and the worker's statistics (stats.h).
 *
 * Locking: one LWLock (tranche "llm", llm_shared->lock) guards every field
 * after it; it is small and touched at most a few times per engine step.
 *   - worker_pid, worker_latch, generation: written by the worker at start
 *     and exit (LW_EXCLUSIVE), read by backends (LW_SHARED) to wait for it
 *     and to tell a live worker from a restarted one;
 *   - a slot: written only by its own backend (LW_EXCLUSIVE, bumping the
 *     slot's seq and slots_version), read by the worker (LW_SHARED, a copy of
 *     all slots when slots_version moved) and, for the latches, by an exiting
 *     worker;
 *   - models: see LlmModelRow; stats, recent and models[].stats: see stats.h.
 * lock itself and n_slots are set once at shared-memory initialisation.
 */
#ifndef LLM_REGISTRY_H
#define LLM_REGISTRY_H

#include "postgres.h"

#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

#include "model_list.h"
#include "stats.h"

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

#define LLM_MODEL_INFO_LEN	8192
#define LLM_MODEL_ERROR_LEN 1024

/*
 * A row of the model table: one served model (row LLM_DEFAULT_ROW: the
 * default model, llm.model, under the alias LLM_DEFAULT_MODEL; the others:
 * llm.models' entries, an alias keeping its row while it stays in the
 * list).  The default model's row is the only record of it: llm_model_info()
 * and llm_stat's model_status read it like llm_models() reads every row.
 * Written by the worker (worker/models.c: identity and state;
 * stats_publish.c: stats) under the lock exclusively, read by llm_models(),
 * llm_model_info() and llm_stat under it shared.  All zero (state NONE)
 * until the worker first takes the row.
 */
#define LLM_DEFAULT_ROW 0

typedef struct LlmModelRow
{
	bool		in_use;
	char		alias[LLM_MAX_MODEL_ALIAS + 1];
	char		path[MAXPGPATH];
	LlmModelState state;
	char		error[LLM_MODEL_ERROR_LEN];	/* FAILED: why */
	/* READY: */
	char		sha256[2 * 32 + 1];	/* hex digest of the file loaded, "" if unreadable */
	char		architecture[32];
	int64		n_params;
	int32		n_ctx;
	int32		n_embd;			/* floats of one embedding (llm_engine_n_embd) */
	/*
	 * Tokens the chat template adds around a one-byte user message (the
	 * template's markers, its default system text, a BOS): with the bytes
	 * of a request's texts, an upper bound of its prompt (quota.h).
	 */
	int32		prompt_overhead;
	char		device[16];		/* llm.device as set ("auto" is not resolved to the backend) */
	char		info[LLM_MODEL_INFO_LEN];	/* READY: the engine's JSON object ("{}" if too long) */
	LlmCounters stats;
} LlmModelRow;

typedef struct LlmShared
{
	LWLock	   *lock;
	int			worker_pid;		/* 0 while no worker runs */
	Latch	   *worker_latch;
	uint32		generation;		/* bumped by every worker start */
	uint64		slots_version;	/* bumped at every slot change: worker rescans */
	LlmStats	stats;
	LlmRecentRequests recent;	/* read by llm_recent_requests() */
	LlmModelRow models[LLM_MAX_MODELS];	/* the served models */
	int			n_slots;
	LlmChannelSlot slots[FLEXIBLE_ARRAY_MEMBER];
} LlmShared;

/* NULL until shared memory is set up (and in a process without the preloaded library). */
extern LlmShared *llm_shared;

/*
 * The row of the model table serving alias (NULL: the default model), or -1
 * when no row in use holds it.  Caller holds the lock (either mode).
 */
extern int	llm_registry_row_locked(const char *alias);

/*
 * The state of the model the worker serves as alias (NULL or "default": the
 * default model) and, when READY, its context length in *n_ctx (if not
 * NULL; else 0); LLM_MODEL_NONE for an alias no row of the model table
 * holds.  Takes the lock shared.
 */
extern LlmModelState llm_registry_model_state(const char *alias, int32 *n_ctx);

/*
 * The floats of one embedding of the model served as alias (as above), as
 * llm_embed returns it; -1 when it is not ready.  Takes the lock shared.
 */
extern int32 llm_registry_embedding_width(const char *alias);

/* The prompt_overhead of the model served as alias (as above); -1 when it is not ready. */
extern int32 llm_registry_prompt_overhead(const char *alias);

/*
 * The hex sha256 of the file the model served as alias (as above) was
 * loaded from, into out (65 bytes); "" when it is not ready or unreadable.
 */
extern void llm_registry_model_sha256(const char *alias, char *out);

/* Ask the postmaster for the registry's shared memory and lock (from _PG_init). */
extern void llm_registry_request(void);

/*
 * Another structure of the library in main shared memory, requested and set
 * up together with the registry: size() bytes (called in the postmaster once
 * the settings are loaded) under name, n_locks LWLocks in a tranche of that
 * name (GetNamedLWLockTranche(name)), and init(mem, found) called at
 * postmaster start (found false: zero the structure) and, in EXEC_BACKEND
 * builds, in every process (found true: only set the module's pointer).
 * Call from _PG_init, before llm_registry_request(); at most 8.
 */
typedef Size (*LlmShmemSizeFn) (void);
typedef void (*LlmShmemInitFn) (void *mem, bool found);
extern void llm_registry_add_shmem(const char *name, LlmShmemSizeFn size, LlmShmemInitFn init,
								   int n_locks);

#endif
