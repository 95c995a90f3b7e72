/*
 * registry.c — the registry in main shared memory (registry.h): its size,
 * its creation at postmaster start, the names of its model states; and the
 * other shared structures of the library, requested and created with it.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "registry.h"

LlmShared  *llm_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

typedef struct ShmemUser
{
	const char *name;
	LlmShmemSizeFn size;
	LlmShmemInitFn init;
	int			n_locks;
} ShmemUser;

#define MAX_SHMEM_USERS 8
static ShmemUser shmem_users[MAX_SHMEM_USERS];
static int	n_shmem_users = 0;

void
llm_registry_add_shmem(const char *name, LlmShmemSizeFn size, LlmShmemInitFn init, int n_locks)
{
	if (n_shmem_users == MAX_SHMEM_USERS)
		elog(ERROR, "llm: too many shared memory structures");
	shmem_users[n_shmem_users].name = name;
	shmem_users[n_shmem_users].size = size;
	shmem_users[n_shmem_users].init = init;
	shmem_users[n_shmem_users].n_locks = n_locks;
	n_shmem_users++;
}

const char *
llm_model_state_name(LlmModelState s)
{
	switch (s)
	{
		case LLM_MODEL_LOADING:
			return "loading";
		case LLM_MODEL_READY:
			return "ready";
		case LLM_MODEL_FAILED:
			return "failed";
		default:
			return "not started";
	}
}

int
llm_registry_row_locked(const char *alias)
{
	if (alias == NULL)
		alias = LLM_DEFAULT_MODEL;
	for (int row = 0; row < LLM_MAX_MODELS; row++)
	{
		LlmModelRow *r = &llm_shared->models[row];

		if (r->in_use && strcmp(r->alias, alias) == 0)
			return row;
	}
	return -1;
}

LlmModelState
llm_registry_model_state(const char *alias, int32 *n_ctx)
{
	LlmModelState state = LLM_MODEL_NONE;
	int32		ctx = 0;
	int			row;

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	row = llm_registry_row_locked(alias);
	if (row >= 0)
	{
		state = llm_shared->models[row].state;
		ctx = llm_shared->models[row].n_ctx;
	}
	LWLockRelease(llm_shared->lock);
	if (n_ctx)
		*n_ctx = state == LLM_MODEL_READY ? ctx : 0;
	return state;
}

int32
llm_registry_prompt_overhead(const char *alias)
{
	int32		overhead = -1;
	int			row;

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	row = llm_registry_row_locked(alias);
	if (row >= 0 && llm_shared->models[row].state == LLM_MODEL_READY)
		overhead = llm_shared->models[row].prompt_overhead;
	LWLockRelease(llm_shared->lock);
	return overhead;
}

int32
llm_registry_embedding_width(const char *alias)
{
	int32		width = -1;
	int			row;

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	row = llm_registry_row_locked(alias);
	if (row >= 0 && llm_shared->models[row].state == LLM_MODEL_READY)
		width = llm_shared->models[row].n_embd;
	LWLockRelease(llm_shared->lock);
	return width;
}

void
llm_registry_model_sha256(const char *alias, char *out)
{
	int			row;

	out[0] = '\0';
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	row = llm_registry_row_locked(alias);
	if (row >= 0 && llm_shared->models[row].state == LLM_MODEL_READY)
		strlcpy(out, llm_shared->models[row].sha256, sizeof(llm_shared->models[row].sha256));
	LWLockRelease(llm_shared->lock);
}

static Size
llm_shmem_size(void)
{
	return add_size(offsetof(LlmShared, slots),
					mul_size(MaxBackends, sizeof(LlmChannelSlot)));
}

static void
llm_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(llm_shmem_size());
	RequestNamedLWLockTranche("llm", 1);
	for (int i = 0; i < n_shmem_users; i++)
	{
		RequestAddinShmemSpace(shmem_users[i].size());
		if (shmem_users[i].n_locks > 0)
			RequestNamedLWLockTranche(shmem_users[i].name, shmem_users[i].n_locks);
	}
}

static void
llm_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	llm_shared = ShmemInitStruct("llm registry", llm_shmem_size(), &found);
	if (!found)
	{
		memset(llm_shared, 0, llm_shmem_size());
		llm_shared->lock = &(GetNamedLWLockTranche("llm"))->lock;
		llm_shared->stats.reset_time = GetCurrentTimestamp();
		llm_shared->n_slots = MaxBackends;
		for (int i = 0; i < MaxBackends; i++)
			llm_shared->slots[i].handle = DSM_HANDLE_INVALID;
	}
	for (int i = 0; i < n_shmem_users; i++)
	{
		void	   *mem = ShmemInitStruct(shmem_users[i].name, shmem_users[i].size(), &found);

		shmem_users[i].init(mem, found);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
llm_registry_request(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = llm_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = llm_shmem_startup;
}
