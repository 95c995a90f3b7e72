/*
 * job_registry.c — the job databases in shared memory, wakes at commit,
 * and the job machinery's settings (job_registry.h).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "job_registry.h"
#include "registry.h"

bool		llm_enable_jobs = true;
int			llm_max_job_runners = 4;
int			llm_job_naptime_ms = 1000;
int			llm_job_lease_s = 600;
bool		llm_am_job_runner = false;

typedef struct JobDatabase
{
	Oid			database;		/* InvalidOid: entry free */
	bool		wanted;
	uint64		wake_seq;
	int			runner_pid;
	Latch	   *runner_latch;
	TimestampTz runnerless_since;	/* no runner since: its last left, or wanted without one (0: one runs) */
} JobDatabase;

typedef struct JobRegistry
{
	LWLock	   *lock;
	bool		probe_pending;	/* set at server start, taken by the launcher */
	TimestampTz created_at;		/* server start (or restart after a crash) */
	int			launcher_pid;
	Latch	   *launcher_latch;
	JobDatabase dbs[LLM_JOB_MAX_DATABASES];
} JobRegistry;

static JobRegistry *reg = NULL;
static bool wake_pending = false;
static bool callback_registered = false;

static Size
registry_size(void)
{
	return sizeof(JobRegistry);
}

static void
registry_init(void *mem, bool found)
{
	reg = mem;
	if (found)
		return;
	memset(reg, 0, sizeof(JobRegistry));
	reg->lock = &(GetNamedLWLockTranche("llm jobs"))->lock;
	reg->probe_pending = true;
	reg->created_at = GetCurrentTimestamp();
}

void
llm_job_registry_request(void)
{
	llm_registry_add_shmem("llm jobs", registry_size, registry_init, 1);
}

/* The entry of database, made if absent and make; caller holds the lock exclusively. */
static JobDatabase *
entry(Oid database, bool make)
{
	JobDatabase *free_entry = NULL;

	for (int i = 0; i < LLM_JOB_MAX_DATABASES; i++)
	{
		JobDatabase *d = &reg->dbs[i];

		if (d->database == database)
			return d;
		if (free_entry == NULL && (d->database == InvalidOid ||
								   (!d->wanted && d->runner_pid == 0)))
			free_entry = d;
	}
	if (!make)
		return NULL;
	if (free_entry == NULL)
	{
		ereport(WARNING,
				(errmsg("llm: more than %d databases have jobs; database %u waits for one to finish",
						LLM_JOB_MAX_DATABASES, database)));
		return NULL;
	}
	memset(free_entry, 0, sizeof(*free_entry));
	free_entry->database = database;
	return free_entry;
}

/*
 * d wants a runner from now on; caller holds the lock exclusively.  The
 * time a database is first left wanted without a runner is kept (the
 * stalled indication counts from it), not moved by later wakes.
 */
static void
set_wanted(JobDatabase *d)
{
	if (d->runner_pid == 0 && (!d->wanted || d->runnerless_since == 0))
		d->runnerless_since = GetCurrentTimestamp();
	d->wanted = true;
}

/* Database has work: wanted, counter moved, its runner or the launcher woken. */
static void
wake(Oid database)
{
	JobDatabase *d;
	Latch	   *latch = NULL;

	if (reg == NULL)
		return;
	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	d = entry(database, true);
	if (d != NULL)
	{
		set_wanted(d);
		d->wake_seq++;
		latch = d->runner_latch;
	}
	if (latch == NULL)
		latch = reg->launcher_latch;
	LWLockRelease(reg->lock);
	if (latch)
		SetLatch(latch);
}

static void
wake_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			if (wake_pending)
				wake(MyDatabaseId);
			wake_pending = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* a prepared transaction's jobs are found by the next wake or naptime */
			wake_pending = false;
			break;
		default:
			break;
	}
}

void
llm_jobs_wake_database(Oid database)
{
	wake(database);
}

void
llm_jobs_wake_at_commit(void)
{
	if (llm_am_job_runner)
		return;
	if (!callback_registered)
	{
		RegisterXactCallback(wake_callback, NULL);
		callback_registered = true;
	}
	wake_pending = true;
}

/* ---------- launcher ---------- */

void
llm_job_registry_launcher_attach(Latch *latch)
{
	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	reg->launcher_pid = MyProcPid;
	reg->launcher_latch = latch;
	LWLockRelease(reg->lock);
}

void
llm_job_registry_launcher_detach(void)
{
	if (reg == NULL)
		return;
	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	if (reg->launcher_pid == MyProcPid)
	{
		reg->launcher_pid = 0;
		reg->launcher_latch = NULL;
	}
	LWLockRelease(reg->lock);
}

bool
llm_job_registry_take_probe(void)
{
	bool		probe;

	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	probe = reg->probe_pending;
	reg->probe_pending = false;
	LWLockRelease(reg->lock);
	return probe;
}

void
llm_job_registry_want(Oid database)
{
	JobDatabase *d;

	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	d = entry(database, true);
	if (d != NULL)
		set_wanted(d);
	LWLockRelease(reg->lock);
}

void
llm_job_registry_forget(Oid database)
{
	JobDatabase *d;

	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	d = entry(database, false);
	if (d != NULL && d->runner_pid == 0)
		d->wanted = false;
	LWLockRelease(reg->lock);
}

int
llm_job_registry_snapshot(LlmJobDatabaseState *out)
{
	int			n = 0;

	LWLockAcquire(reg->lock, LW_SHARED);
	for (int i = 0; i < LLM_JOB_MAX_DATABASES; i++)
	{
		JobDatabase *d = &reg->dbs[i];

		if (d->database == InvalidOid || (!d->wanted && d->runner_pid == 0))
			continue;
		out[n].database = d->database;
		out[n].wanted = d->wanted;
		/* a runner that died without leaving its entry holds nothing: the launcher replaces it */
		out[n].runner_pid = d->runner_pid != 0 && BackendPidGetProc(d->runner_pid) != NULL ? d->runner_pid : 0;
		n++;
	}
	LWLockRelease(reg->lock);
	return n;
}

/* ---------- runner ---------- */

bool
llm_job_registry_runner_attach(Oid database, uint64 *seq)
{
	JobDatabase *d;
	bool		ok = false;

	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	d = entry(database, true);
	if (d != NULL && (d->runner_pid == 0 || BackendPidGetProc(d->runner_pid) == NULL))
	{
		d->runner_pid = MyProcPid;
		d->runner_latch = MyLatch;
		d->runnerless_since = 0;
		*seq = d->wake_seq;
		ok = true;
	}
	LWLockRelease(reg->lock);
	return ok;
}

uint64
llm_job_registry_wake_seq(Oid database)
{
	JobDatabase *d;
	uint64		seq = 0;

	LWLockAcquire(reg->lock, LW_SHARED);
	for (int i = 0; i < LLM_JOB_MAX_DATABASES; i++)
	{
		d = &reg->dbs[i];
		if (d->database == database)
		{
			seq = d->wake_seq;
			break;
		}
	}
	LWLockRelease(reg->lock);
	return seq;
}

bool
llm_job_registry_runner_done(Oid database, uint64 seq)
{
	JobDatabase *d;
	bool		done = true;

	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	d = entry(database, false);
	if (d != NULL && d->runner_pid == MyProcPid)
	{
		if (d->wake_seq != seq)
			done = false;
		else
		{
			d->wanted = false;
			d->runner_pid = 0;
			d->runner_latch = NULL;
			d->runnerless_since = GetCurrentTimestamp();
		}
	}
	LWLockRelease(reg->lock);
	return done;
}

void
llm_job_registry_runner_detach(Oid database)
{
	JobDatabase *d;
	Latch	   *launcher = NULL;

	if (reg == NULL)
		return;
	LWLockAcquire(reg->lock, LW_EXCLUSIVE);
	d = entry(database, false);
	if (d != NULL && d->runner_pid == MyProcPid)
	{
		d->runner_pid = 0;
		d->runner_latch = NULL;
		d->runnerless_since = GetCurrentTimestamp();
		launcher = reg->launcher_latch;
	}
	LWLockRelease(reg->lock);
	/* a runner leaving while its database is still wanted is restarted */
	if (launcher)
		SetLatch(launcher);
}

/* ---------- what llm_jobs shows ---------- */

/*
 * llm_job_runner_state(): the runner of the current database, for the
 * llm_jobs view: its pid (NULL: none runs), and since when none has run if
 * that is longer than LLM_JOB_STALL_NAPTIMES naptimes plus the launcher's
 * delay between two starts of a runner (a runner replaced at once is not a
 * stall).  The time counts from when the database was left wanted without a
 * runner, or from when its last runner left; a database the registry does
 * not know (the launcher has not looked at it since the server started) has
 * had no runner since the server started.  Whether a job needs a runner at
 * all is the view's to say (only queued or running jobs do).
 */
PG_FUNCTION_INFO_V1(pg_llm_job_runner_state);

Datum
pg_llm_job_runner_state(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {true, true};
	int			pid = 0;
	TimestampTz since = 0;
	bool		known = false;
	int64		grace_us = ((int64) LLM_JOB_STALL_NAPTIMES * llm_job_naptime_ms + LLM_JOB_RUNNER_RESTART_MS) * 1000;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "llm_job_runner_state: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (reg != NULL)
	{
		LWLockAcquire(reg->lock, LW_SHARED);
		for (int i = 0; i < LLM_JOB_MAX_DATABASES; i++)
		{
			JobDatabase *d = &reg->dbs[i];

			if (d->database == MyDatabaseId)
			{
				pid = d->runner_pid;
				since = d->runnerless_since;
				known = true;
				break;
			}
		}
		if (!known)
			since = reg->created_at;
		LWLockRelease(reg->lock);
	}
	/* a pid left by a runner that died without detaching is no runner */
	if (pid != 0 && BackendPidGetProc(pid) == NULL)
		pid = 0;
	if (pid != 0)
	{
		values[0] = Int32GetDatum(pid);
		nulls[0] = false;
	}
	/* a standby runs no jobs: they run on the primary, nothing is missing here */
	else if (since != 0 && !RecoveryInProgress() && GetCurrentTimestamp() - since > grace_us)
	{
		values[1] = TimestampTzGetDatum(since);
		nulls[1] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---------- settings ---------- */

void
llm_jobs_define_gucs(void)
{
	DefineCustomBoolVariable("llm.enable_jobs",
							 "Run the jobs of llm_enrich in background workers.",
							 "Off: the launcher starts no job runners; jobs wait, their rows stay queued.",
							 &llm_enable_jobs,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("llm.max_job_runners",
							"Job runners (one per database with jobs) running at once.",
							"Each is a background worker: budget max_worker_processes for them (README).",
							&llm_max_job_runners,
							4, 1, 1024,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("llm.job_naptime",
							"How often an idle job runner and the job launcher look for work.",
							"Commits that give them work wake them at once; this bounds the delay otherwise.",
							&llm_job_naptime_ms,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("llm.job_lease_time",
							"How long a job runner's claim on a row lasts before another runner may take the row.",
							"A restarted runner releases the claims of the runner it replaces at once.",
							&llm_job_lease_s,
							600, 1, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
}
