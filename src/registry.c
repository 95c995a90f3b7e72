/*
 * registry.c — the registry in main shared memory (registry.h): its size,
 * its creation at postmaster start, the names of its model states.
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
		llm_shared->model_state = LLM_MODEL_NONE;
		llm_shared->stats.reset_time = GetCurrentTimestamp();
		llm_shared->n_slots = MaxBackends;
		for (int i = 0; i < MaxBackends; i++)
			llm_shared->slots[i].handle = DSM_HANDLE_INVALID;
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
