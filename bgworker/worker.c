/*
 * worker.c — the llm background worker: its main loop, and the loading and
 * reloading of the engine (model, KV cache, scheduler) it owns.
 *
 * Loop: reload config on SIGHUP -> attach/drop channels named in the
 * registry (worker_channel.c) -> hand every received request to the intake
 * (intake.c: decode, queue in the engine) -> one engine step if there is
 * work, its events routed by the intake to the channels' outboxes -> send
 * outboxes without blocking -> publish statistics (stats_publish.c) -> sleep
 * on the latch when idle.
 *
 * It never crashes on bad input or a bad model: a model that cannot be loaded
 * leaves the worker up answering every request with an ERROR naming the file
 * and the reason, until a configuration reload loads it.  An ereport(ERROR)
 * in this process has no handler above it and so becomes FATAL, i.e. a clean
 * proc_exit(1) and a restart after bgw_restart_time, never a crash-restart of
 * the server.  The engine is plain C (malloc'd memory, its own compute
 * threads with signals blocked) and never calls into PostgreSQL.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"

#include "engine.h"
#include "engine_config.h"
#include "intake.h"
#include "registry.h"
#include "stats.h"
#include "worker_channel.h"

/* the worker's entry point, named in its registration (src/llm.c) */
extern PGDLLEXPORT void llm_worker_main(Datum arg);

static volatile sig_atomic_t got_sigterm = false;

static MemoryContext worker_cxt;
static llm_engine *engine = NULL;
/* the config the engine was created from (or failed to be), strings in loaded_cxt */
static llm_engine_config loaded;
static MemoryContext loaded_cxt = NULL;
static int	model_sqlstate;
static char model_error[LLM_MODEL_ERROR_LEN];

static void
worker_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	got_sigterm = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

/* ---------- model loading ---------- */

static void
set_model_state(LlmModelState state)
{
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	llm_shared->model_state = state;
	strlcpy(llm_shared->model_path, loaded.model_path, MAXPGPATH);
	llm_shared->model_sqlstate = model_sqlstate;
	strlcpy(llm_shared->model_error, state == LLM_MODEL_FAILED ? model_error : "",
			LLM_MODEL_ERROR_LEN);
	strlcpy(llm_shared->device, loaded.device, sizeof(llm_shared->device));
	if (state == LLM_MODEL_READY)
	{
		size_t		need;

		llm_shared->n_ctx = llm_engine_n_ctx(engine);
		need = llm_engine_model_info_json(engine, llm_shared->model_info, LLM_MODEL_INFO_LEN);
		if (need >= LLM_MODEL_INFO_LEN)
			strlcpy(llm_shared->model_info, "{}", LLM_MODEL_INFO_LEN);
	}
	else
	{
		llm_shared->n_ctx = 0;
		llm_shared->model_info[0] = '\0';
	}
	LWLockRelease(llm_shared->lock);
	llm_stats_note_change();
}

/* The config the GUCs describe now, in a context of its own. */
static MemoryContext
current_config(llm_engine_config *c)
{
	MemoryContext cxt = AllocSetContextCreate(worker_cxt, "llm worker config",
											  ALLOCSET_SMALL_SIZES);

	llm_engine_config_from_gucs(c, cxt);
	return cxt;
}

/* (Re)create the engine from config c (adopted, with its context); failure is recorded, not raised. */
static void
load_engine(const llm_engine_config *c, MemoryContext cxt)
{
	struct stat st;
	char		err[LLM_MODEL_ERROR_LEN];

	if (engine)
	{
		llm_engine_destroy(engine);
		engine = NULL;
	}
	intake_set_engine(NULL, 0, NULL);
	if (loaded_cxt)
		MemoryContextDelete(loaded_cxt);
	loaded = *c;
	loaded_cxt = cxt;
	model_error[0] = '\0';
	model_sqlstate = 0;
	set_model_state(LLM_MODEL_LOADING);
	set_ps_display("loading model");

	if (loaded.model_path[0] == '\0')
	{
		model_sqlstate = ERRCODE_UNDEFINED_FILE;
		snprintf(model_error, sizeof(model_error), "llm.model is empty");
	}
	else if (stat(loaded.model_path, &st) != 0)
	{
		model_sqlstate = ERRCODE_UNDEFINED_FILE;
		snprintf(model_error, sizeof(model_error), "could not access model file \"%s\": %m",
				 loaded.model_path);
	}
	else
	{
		err[0] = '\0';
		engine = llm_engine_create(&loaded, err, sizeof(err));
		if (engine == NULL)
		{
			model_sqlstate = ERRCODE_INTERNAL_ERROR;
			snprintf(model_error, sizeof(model_error), "could not load model file \"%s\": %s",
					 loaded.model_path, err[0] ? err : "unknown error");
		}
	}

	intake_set_engine(engine, model_sqlstate, model_error);
	if (engine)
	{
		set_model_state(LLM_MODEL_READY);
		ereport(LOG,
				(errmsg("llm worker loaded model \"%s\" (device %s, context %d tokens)",
						loaded.model_path, loaded.device, llm_engine_n_ctx(engine))));
		set_ps_display("ready");
	}
	else
	{
		set_model_state(LLM_MODEL_FAILED);
		ereport(WARNING,
				(errmsg("llm worker: %s", model_error),
				 errhint("Fix llm.model and reload the configuration (SELECT pg_reload_conf()).")));
		set_ps_display("model failed");
	}
	llm_stats_engine_replaced();
}

static void
reload_config(void)
{
	llm_engine_config now;
	MemoryContext cxt;

	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	cxt = current_config(&now);
	if (engine != NULL && llm_engine_config_equal(&now, &loaded))
	{
		MemoryContextDelete(cxt);
		return;
	}
	/* changed settings, or a failed model to retry */
	if (engine != NULL)
		intake_fail_all(ERRCODE_OPERATOR_INTERVENTION,
						"request aborted: the llm worker is reloading its model after a configuration change");
	llm_stats_publish(engine);
	load_engine(&now, cxt);
}

/* ---------- lifecycle ---------- */

/* Runs before the DSM mappings go: unregister and wake every waiting backend. */
static void
worker_exit(int code, Datum arg)
{
	Latch	  **latches;
	int			n = 0;

	if (llm_shared == NULL)
		return;
	LWLockReleaseAll();			/* exiting on FATAL: never while holding the registry lock */
	latches = malloc(sizeof(Latch *) * Max(llm_shared->n_slots, 1));
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	if (llm_shared->worker_pid == MyProcPid)
	{
		llm_shared->worker_pid = 0;
		llm_shared->worker_latch = NULL;
		llm_shared->model_state = LLM_MODEL_NONE;
		llm_stats_worker_gone_locked(&llm_shared->stats);
	}
	for (int i = 0; i < llm_shared->n_slots && latches; i++)
		if (llm_shared->slots[i].handle != DSM_HANDLE_INVALID && llm_shared->slots[i].latch)
			latches[n++] = llm_shared->slots[i].latch;
	LWLockRelease(llm_shared->lock);
	for (int i = 0; i < n; i++)
		SetLatch(latches[i]);
	free(latches);
}

/* Hand every request message the channels hold now to the intake. */
static void
drain_requests(void)
{
	for (int slot = 0; slot < llm_shared->n_slots; slot++)
	{
		const void *data;
		Size		len;

		while (wch_receive(slot, &data, &len))
			intake_message(slot, data, len);
	}
}

void
llm_worker_main(Datum arg)
{
	llm_engine_config first;
	MemoryContext first_cxt;
	uint32		generation;

	pqsignal(SIGTERM, worker_sigterm);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGINT, SIG_IGN);	/* a cancel must not kill the worker */
	BackgroundWorkerUnblockSignals();

	/* shared catalogs only: puts us in pg_stat_activity, pg_terminate_backend works */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	if (llm_shared == NULL)
		ereport(FATAL, (errmsg("llm worker: shared memory registry missing")));

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "llm worker", ALLOCSET_DEFAULT_SIZES);

	before_shmem_exit(worker_exit, (Datum) 0);
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	generation = ++llm_shared->generation;
	llm_shared->worker_pid = MyProcPid;
	llm_shared->worker_latch = MyLatch;
	LWLockRelease(llm_shared->lock);

	intake_init(llm_shared->n_slots, worker_cxt);
	wch_init(llm_shared->n_slots, generation, worker_cxt, intake_abort_slot);

	first_cxt = current_config(&first);
	load_engine(&first, first_cxt);

	while (!got_sigterm)
	{
		bool		busy;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		wch_scan();
		drain_requests();
		llm_stats_publish(engine);	/* show new/aborted requests before a long step */

		busy = engine != NULL && llm_engine_has_work(engine);
		if (busy)
		{
			llm_status st = llm_engine_step(engine, intake_on_event, NULL);

			llm_stats_note_step();
			if (st != LLM_OK)
				ereport(WARNING,
						(errmsg("llm worker: engine step failed: %s; its requests were failed",
								llm_status_name(st))));
		}

		wch_flush_all();
		llm_stats_publish(engine);

		if (!busy && !got_sigterm)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000L, PG_WAIT_EXTENSION);
	}

	/* exit 1: restart after bgw_restart_time (pg_terminate_backend); at shutdown nothing restarts */
	proc_exit(1);
}
