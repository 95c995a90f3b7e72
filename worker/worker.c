/*
 * worker.c — the llm background worker: its main loop, signals and exit;
 * the models it serves (engines, their loading and reloading) are
 * models.c's.
 *
 * Loop: reload config on SIGHUP (models.c reloads what changed) ->
 * attach/drop channels named in the registry (server.c) -> hand
 * every received request to the intake (intake.c: decode, route by model
 * alias, queue in that model's engine) -> take the asynchronous requests
 * of the result store (intake_async, channel/mailbox.h; routed the same
 * way) -> one engine step of every model with work (models.c), its events
 * routed by the intake to the channels' outboxes (and the asynchronous
 * requests' ends kept aside) -> publish statistics (stats_publish.c) ->
 * store the asynchronous ends -> send outboxes without blocking -> sleep on
 * the latch when idle.  Publishing before answering makes the statistics
 * agree with every answer a backend can have received.
 *
 * It never crashes on bad input or a bad model: a model that cannot be loaded
 * leaves the worker up answering every request with an ERROR naming the file
 * and the reason, until a configuration reload loads it.  Guard rails: a
 * KV cache over the engine's share of memory (llm_engine_check_kv_budget)
 * is refused the same way before anything is loaded; a thread count above
 * the CPUs is clamped by the engine, with a WARNING here; and a reload that
 * changes a serving model's file or settings first checks the new
 * configuration (and, where both fit, builds it) beside the old engine
 * (models.c): one that cannot be used leaves the old model serving, its
 * requests untouched, with a WARNING and the error, naming the setting, in
 * llm_model_info().  An ereport(ERROR)
 * in this process has no handler above it and so becomes FATAL, i.e. a clean
 * proc_exit(1) and a restart after bgw_restart_time, never a crash-restart of
 * the server.  The engine is plain C (malloc'd memory, its own compute
 * threads with signals blocked) and never calls into PostgreSQL.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"

#include "engine/engine.h"
#include "common/settings.h"
#include "intake.h"
#include "common/model_list.h"
#include "models.h"
#include "common/registry.h"
#include "channel/mailbox.h"
#include "common/stats.h"
#include "channel/server.h"

/* the worker's entry point, named in its registration (pg/llm.c) */
extern PGDLLEXPORT void llm_worker_main(Datum arg);

static volatile sig_atomic_t got_sigterm = false;

static MemoryContext worker_cxt;

static void
worker_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	got_sigterm = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

static void
reload_config(void)
{
	llm_engine *engines[LLM_MAX_MODELS];

	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	models_reload();
	llm_stats_publish(engines, models_engines(engines));
}

/* Publish the statistics of every served model. */
static void
publish_stats(void)
{
	llm_engine *engines[LLM_MAX_MODELS];

	llm_stats_publish(engines, models_engines(engines));
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
		for (int row = 0; row < LLM_MAX_MODELS; row++)
			llm_shared->models[row].state = LLM_MODEL_NONE;
		llm_stats_worker_gone_locked();
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

	intake_init(llm_shared->n_slots, worker_cxt, models_route);
	llm_async_attach();
	wch_init(llm_shared->n_slots, generation, worker_cxt, intake_abort_slot);
	models_init(worker_cxt, intake_fail_engine);

	while (!got_sigterm)
	{
		bool		busy;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		wch_scan();
		drain_requests();
		intake_async(generation);	/* llm_submit's requests (channel/mailbox.h) */
		llm_async_sweep();
		publish_stats();		/* show new/aborted requests before a long step */
		intake_async_deliver();

		busy = models_step(intake_on_event);

		/*
		 * the statistics first, then the answers: a backend whose call
		 * returns (or whose llm_submit result is stored) already sees the
		 * request counted in llm_stat, llm_models and llm_usage, its KV
		 * blocks released
		 */
		publish_stats();
		intake_async_deliver();
		wch_flush_all();

		if (!busy && !got_sigterm)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000L, PG_WAIT_EXTENSION);
	}

	/* exit 1: restart after bgw_restart_time (pg_terminate_backend); at shutdown nothing restarts */
	proc_exit(1);
}
