/*
 * llm.c — module entry point of pg_llm: defines the settings of every
 * module, installs their hooks, requests the shared-memory registry
 * (registry.c) and registers the background worker that owns the model.
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
#include "utils/guc.h"

#include "batch_scan.h"
#include "channel.h"
#include "engine_config.h"
#include "model_list.h"
#include "on_error.h"
#include "registry.h"
#include "sql_args.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

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

	llm_engine_config_define_gucs();
	llm_model_list_define_gucs();
	llm_sql_args_define_gucs();
	llm_channel_define_gucs();
	/* before the prefix is reserved, or a llm.batch_window in the file is dropped */
	llm_batch_init();			/* llm.batch_window, the planner hook (batch_scan.c) */
	MarkGUCPrefixReserved("llm");
	llm_on_error_init();		/* the statement's on_error => 'null' summary (on_error.c) */
	llm_registry_request();
	llm_register_worker();
}
