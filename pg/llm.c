/*
 * llm.c — module entry point of pg_llm: defines the settings of every
 * module, installs their hooks, requests the shared-memory registry
 * (registry.c) and the other shared structures, and registers the
 * background worker that owns the model and the job launcher.
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

#include "pg/batch/batch_scan.h"
#include "channel/client.h"
#include "common/settings.h"
#include "common/job_registry.h"
#include "common/model_list.h"
#include "pg/sql/on_error.h"
#include "common/progress.h"
#include "common/quota.h"
#include "common/registry.h"
#include "channel/mailbox.h"
#include "pg/sql/sql_args.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Register a static worker of this library: name is also its bgw_type. */
static void
register_static_worker(const char *name, const char *function, BgWorkerStartTime start, int restart_s)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = start;
	worker.bgw_restart_time = restart_s;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "llm");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "%s", name);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * The llm worker.  A database connection (to shared catalogs only) puts it
 * in the proc array, so it shows in pg_stat_activity and
 * pg_terminate_backend() works on it; it never runs a transaction.
 */
static void
llm_register_worker(void)
{
	register_static_worker("llm worker", "llm_worker_main", BgWorkerStart_ConsistentState, 2);
}

/*
 * The job launcher (jobs/job_launcher.c): after recovery only, so a hot
 * standby runs no jobs and a promoted one starts them.  It starts one
 * runner per database with jobs as dynamic workers.
 */
static void
llm_register_job_launcher(void)
{
	register_static_worker("llm job launcher", "llm_job_launcher_main", BgWorkerStart_RecoveryFinished, 5);
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
	llm_quota_define_gucs();
	llm_channel_define_gucs();
	llm_result_store_define_gucs();
	llm_jobs_define_gucs();
	/* before the prefix is reserved, or a llm.batch_window in the file is dropped */
	llm_batch_init();			/* llm.batch_window, the planner hook (batch_scan.c) */
	MarkGUCPrefixReserved("llm");
	llm_on_error_init();		/* the statement's on_error => 'null' summary (on_error.c) */
	llm_progress_request();		/* llm_progress's slots (progress.c) */
	llm_result_store_request();	/* llm_submit's store (mailbox.c) */
	llm_quota_request();		/* the token limit's ledger (quota.c) */
	llm_job_registry_request();	/* databases with jobs (job_registry.c) */
	llm_registry_request();
	llm_register_worker();
	llm_register_job_launcher();
}
