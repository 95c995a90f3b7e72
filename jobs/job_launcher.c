/*
 * job_launcher.c — the job launcher: one static background worker that
 * starts a job runner (job_runner.c) for every database that wants one
 * (common/job_registry.h), the way pg_cron's launcher and TimescaleDB's
 * scheduler serve every database of the cluster.
 *
 * It starts after recovery (BgWorkerStart_RecoveryFinished): on a hot
 * standby it never runs, after a promotion it starts and the jobs resume.
 * At its first start after the server started it marks every database that
 * accepts connections wanted, so a runner looks at each once (it exits at
 * once where there is no job).  Then it waits for wakes (a commit that gave
 * a database work, a runner that exited) and llm.job_naptime.
 *
 * Runners are dynamic background workers that are never restarted by the
 * postmaster: the launcher starts one again while its database is still
 * wanted, at most once per RESTART_DELAY_MS per database, at most
 * llm.max_job_runners at once.  A database that cannot take a connection
 * any more (dropped, datallowconn off) is no longer wanted.
 *
 * The launcher itself always exits with code 1, SIGTERM included: the
 * postmaster forgets a background worker that exits with 0, so a launcher
 * ended by pg_terminate_backend would never come back and every job would
 * stop for good.  With 1 the postmaster starts it again after its
 * bgw_restart_time; when the server shuts down the postmaster starts no
 * worker, and on the postmaster's death it exits by WL_EXIT_ON_PM_DEATH.
 * A new launcher knows no runner handle: it counts the runners the
 * registry lists as running and starts the missing ones.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "common/job_registry.h"

extern PGDLLEXPORT void llm_job_launcher_main(Datum arg);

/* the least time between two starts of a runner for one database */
#define RESTART_DELAY_MS LLM_JOB_RUNNER_RESTART_MS

typedef struct Runner
{
	Oid			database;
	BackgroundWorkerHandle *handle; /* NULL: not running (last_start kept) */
	TimestampTz last_start;
} Runner;

static Runner runners[LLM_JOB_MAX_DATABASES];
static int	n_runners = 0;
static bool no_slot_warned = false;

static void
launcher_exit(int code, Datum arg)
{
	llm_job_registry_launcher_detach();
}

static Runner *
runner_of(Oid database, bool make)
{
	for (int i = 0; i < n_runners; i++)
		if (runners[i].database == database)
			return &runners[i];
	if (!make)
		return NULL;
	if (n_runners == LLM_JOB_MAX_DATABASES)
	{
		/* forget one that is not running */
		for (int i = 0; i < n_runners; i++)
			if (runners[i].handle == NULL)
			{
				runners[i] = runners[--n_runners];
				break;
			}
		if (n_runners == LLM_JOB_MAX_DATABASES)
			return NULL;
	}
	memset(&runners[n_runners], 0, sizeof(Runner));
	runners[n_runners].database = database;
	return &runners[n_runners++];
}

/* Mark every database that accepts connections wanted (shared catalog pg_database). */
static void
probe_databases(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate && !database_is_invalid_form(db))
			llm_job_registry_want(db->oid);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Can a runner connect to database? (it exists, allows connections, is not being dropped) */
static bool
database_usable(Oid database)
{
	HeapTuple	tup;
	bool		ok = false;

	StartTransactionCommand();
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(database));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		ok = db->datallowconn && !database_is_invalid_form(db);
		ReleaseSysCache(tup);
	}
	CommitTransactionCommand();
	return ok;
}

static bool
start_runner(Runner *r)
{
	BackgroundWorker w;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "llm");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "llm_job_runner_main");
	snprintf(w.bgw_name, BGW_MAXLEN, "llm job runner for database %u", r->database);
	snprintf(w.bgw_type, BGW_MAXLEN, "llm job runner");
	w.bgw_main_arg = ObjectIdGetDatum(r->database);
	w.bgw_notify_pid = MyProcPid;
	r->last_start = GetCurrentTimestamp();
	if (!RegisterDynamicBackgroundWorker(&w, &r->handle))
	{
		r->handle = NULL;
		if (!no_slot_warned)
			ereport(WARNING,
					(errmsg("llm job launcher: no background worker slot for a job runner"),
					 errhint("Raise max_worker_processes: it must cover the llm worker, the job launcher, "
							 "llm.max_job_runners and parallel query workers.")));
		no_slot_warned = true;
		return false;
	}
	no_slot_warned = false;
	return true;
}

/* Start the runners wanted now; returns ms until a start held back by RESTART_DELAY_MS is due (-1: none). */
static long
launch(void)
{
	LlmJobDatabaseState dbs[LLM_JOB_MAX_DATABASES];
	int			n;
	int			active = 0;
	long		next = -1;
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < n_runners; i++)
	{
		pid_t		pid;

		if (runners[i].handle == NULL)
			continue;
		if (GetBackgroundWorkerPid(runners[i].handle, &pid) == BGWH_STOPPED)
		{
			pfree(runners[i].handle);
			runners[i].handle = NULL;
		}
		else
			active++;
	}
	n = llm_job_registry_snapshot(dbs);
	/* runners this launcher did not start (it restarted since) count too */
	for (int i = 0; i < n; i++)
	{
		Runner	   *r = runner_of(dbs[i].database, false);

		if (dbs[i].runner_pid != 0 && (r == NULL || r->handle == NULL))
			active++;
	}
	for (int i = 0; i < n && active < llm_max_job_runners; i++)
	{
		Runner	   *r;
		long		wait_ms;

		if (!dbs[i].wanted || dbs[i].runner_pid != 0)
			continue;
		r = runner_of(dbs[i].database, true);
		if (r == NULL || r->handle != NULL)
			continue;
		wait_ms = RESTART_DELAY_MS - (long) ((now - r->last_start) / 1000);
		if (r->last_start != 0 && wait_ms > 0)
		{
			next = next < 0 ? wait_ms : Min(next, wait_ms);
			continue;
		}
		if (!database_usable(dbs[i].database))
		{
			llm_job_registry_forget(dbs[i].database);
			continue;
		}
		if (!start_runner(r))
			break;
		active++;
	}
	return next;
}

void
llm_job_launcher_main(Datum arg)
{
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	/* no database: pg_database is a shared catalog */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	before_shmem_exit(launcher_exit, (Datum) 0);
	llm_job_registry_launcher_attach(MyLatch);
	set_ps_display("idle");

	while (!ShutdownRequestPending)
	{
		long		timeout = llm_job_naptime_ms;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (llm_enable_jobs)
		{
			long		next;

			if (llm_job_registry_take_probe())
				probe_databases();
			next = launch();
			if (next >= 0)
				timeout = Min(timeout, next);
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(timeout, 10), PG_WAIT_EXTENSION);
	}
	/* SIGTERM: pg_terminate_backend, or the server's shutdown (which restarts nothing) */
	proc_exit(1);
}
