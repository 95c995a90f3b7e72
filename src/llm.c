/*
 * llm.c — module entry point of pg_llm: GUCs, the shared-memory registry and
 * the registration of the background worker that owns the model.
 *
 * The library must be in shared_preload_libraries: shared memory for the
 * registry is requested from the postmaster (shmem_request_hook, PG15) and
 * the worker is a static background worker, both only possible while the
 * postmaster loads preload libraries.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "batch_scan.h"
#include "llm.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

char	   *llm_model_path = NULL;
int			llm_device = LLM_DEVICE_AUTO;
int			llm_threads = 0;
int			llm_context_length = 0;
int			llm_kv_cache_size_mb = 0;
int			llm_block_size = 16;
int			llm_max_batched_tokens = 512;
int			llm_max_running_requests = 64;
bool		llm_prefix_caching = true;
int			llm_prefix_cache_isolation = LLM_PREFIX_ISOLATION_ROLE;
int			llm_worker_wait_timeout_ms = 30000;
int			llm_debug_poison_logits = 0;

LlmShared  *llm_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static const struct config_enum_entry llm_device_options[] = {
	{"auto", LLM_DEVICE_AUTO, false},
	{"cpu", LLM_DEVICE_CPU, false},
	{"cuda", LLM_DEVICE_CUDA, false},
	{NULL, 0, false}
};

static const struct config_enum_entry llm_prefix_isolation_options[] = {
	{"none", LLM_PREFIX_ISOLATION_NONE, false},
	{"role", LLM_PREFIX_ISOLATION_ROLE, false},
	{"database", LLM_PREFIX_ISOLATION_DATABASE, false},
	{NULL, 0, false}
};

const char *
llm_device_name(int device)
{
	switch (device)
	{
		case LLM_DEVICE_CPU:
			return "cpu";
		case LLM_DEVICE_CUDA:
			return "cuda";
		default:
			return "auto";
	}
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

/*
 * llm_latency_add — append one latency sample (ms) to a ring; caller holds
 * the registry lock exclusively.
 */
void
llm_latency_add(LlmLatencyRing *r, double ms)
{
	r->ms[r->next] = (float) ms;
	r->next = (r->next + 1) % LLM_LATENCY_RING;
	if (r->count < LLM_LATENCY_RING)
		r->count++;
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

/*
 * Default llm.model: the model `make install` puts under the share directory,
 * $sharedir/extension/llm/SmolLM2-135M-Instruct.Q4_1.gguf.
 */
static char *
llm_default_model_path(void)
{
	char		sharepath[MAXPGPATH];
	char	   *path = malloc(MAXPGPATH);

	if (path == NULL)
		return "SmolLM2-135M-Instruct.Q4_1.gguf";
	get_share_path(my_exec_path, sharepath);
	snprintf(path, MAXPGPATH, "%s/extension/llm/SmolLM2-135M-Instruct.Q4_1.gguf", sharepath);
	return path;
}

static void
llm_define_gucs(void)
{
	DefineCustomStringVariable("llm.model",
							   "Path of the GGUF model file the llm worker loads.",
							   "Reloading the configuration (SIGHUP) with a new value makes the worker load the new model; "
							   "running requests are then aborted.",
							   &llm_model_path,
							   llm_default_model_path(),
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.device",
							 "Compute device of the llm worker: auto, cpu or cuda.",
							 "auto uses CUDA when the engine was built with it and a GPU is present, else the CPU.",
							 &llm_device,
							 LLM_DEVICE_AUTO,
							 llm_device_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.threads",
							"Number of CPU compute threads of the llm worker (0 = all online CPUs).",
							NULL,
							&llm_threads,
							0, 0, 1024,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.context_length",
							"Maximum tokens per sequence, prompt plus output (0 = the model's context length).",
							"A prompt alone longer than this is an error; prompt plus max_tokens over it stops with finish reason 'length'.",
							&llm_context_length,
							0, 0, 1048576,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.kv_cache_size",
							"Memory for the paged KV cache of the llm worker (0 = automatic).",
							"Automatic: enough for max_running_requests full contexts, capped at 1 GB.",
							&llm_kv_cache_size_mb,
							0, 0, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.block_size",
							"Tokens per KV cache block (paging and prefix-caching granularity).",
							NULL,
							&llm_block_size,
							16, 1, 1024,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_batched_tokens",
							"Token budget of one engine step (decode tokens plus prefill chunks).",
							NULL,
							&llm_max_batched_tokens,
							512, 1, 1048576,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_running_requests",
							"Maximum number of requests in one engine step; more wait in a queue.",
							NULL,
							&llm_max_running_requests,
							64, 1, 65536,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.prefix_caching",
							 "Reuse KV cache blocks of identical prompt prefixes across requests.",
							 NULL,
							 &llm_prefix_caching,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.prefix_cache_isolation",
							 "Which requests may share cached prompt prefixes: none (all), role or database.",
							 "A shared prefix answers faster, so sharing lets one party detect by timing "
							 "that another sent the same prompt start; see docs/PREFIX_CACHING.md.",
							 &llm_prefix_cache_isolation,
							 LLM_PREFIX_ISOLATION_ROLE,
							 llm_prefix_isolation_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.worker_wait_timeout",
							"How long a request waits for the llm worker to be running before failing.",
							"Covers a worker that is starting or restarting after an exit.",
							&llm_worker_wait_timeout_ms,
							30000, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.debug_poison_logits",
							"Developer option: make the logits of the next N rows non-finite after this session's next generation request.",
							"Exercises the non-finite-logits error path in tests; superuser only.",
							&llm_debug_poison_logits,
							0, 0, 1000,
							PGC_SUSET, GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("llm");
}

static void
llm_register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	/*
	 * A database connection (to shared catalogs only) puts the worker in the
	 * proc array, so it shows in pg_stat_activity and pg_terminate_backend()
	 * works on it; it never runs a transaction.
	 */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 2;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "llm");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "llm_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "llm worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "llm worker");
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_llm must be loaded via shared_preload_libraries"),
				 errhint("Add 'llm' to shared_preload_libraries in postgresql.conf and restart the server.")));

	llm_define_gucs();
	llm_batch_init();			/* llm.batch_window, planner/executor hooks (batch_scan.c) */

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = llm_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = llm_shmem_startup;

	llm_register_worker();
}
