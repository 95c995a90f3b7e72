/*
 * job_registry.h — which databases need a job runner, in main shared
 * memory, and the settings of the job machinery (docs/JOBS.md).
 *
 * One entry per database that has (or may have) jobs to run: "wanted"
 * while it does, the pid and latch of its runner while one runs, a wake
 * counter bumped by every commit that gave the runner something to do.
 *
 *   - A backend whose transaction changed a job (llm_job's statement
 *     trigger) or queued rows (the continuous jobs' row triggers) calls
 *     llm_jobs_wake_at_commit(): at commit the database becomes wanted, its
 *     wake counter moves and its runner's latch is set, or the launcher's
 *     when no runner runs (background workers receive no NOTIFY).
 *   - The launcher (jobs/job_launcher.c) starts a runner for every
 *     wanted database without one, at most llm.max_job_runners at once; at
 *     its first start after the server started it marks every database
 *     that accepts connections wanted, so each runner finds out whether its
 *     database has jobs (a runner in a database without the extension or
 *     without jobs exits at once).
 *   - A runner (jobs/job_runner.c) owns its database's entry while it
 *     runs (at most one runner per database: a second one exits); it may
 *     leave only through llm_job_registry_runner_done(), which clears
 *     "wanted" unless a wake arrived since the runner last looked, so a
 *     job committed while the runner decides to exit is never stranded.
 *   - Each entry keeps since when its database has had no runner (its last
 *     runner left, or it became wanted without one): llm_jobs shows the
 *     active jobs of a database without a runner for longer than a few
 *     naptimes as stalled (llm_job_runner_state()).
 *
 * Locking: one LWLock (tranche "llm jobs") guards everything; it is taken
 * briefly, a few times per runner loop and per commit that wakes.
 */
#ifndef LLM_JOB_REGISTRY_H
#define LLM_JOB_REGISTRY_H

#include "postgres.h"

#include "storage/latch.h"

/* Databases with jobs served at once by the registry (an entry is reused once its database has none). */
#define LLM_JOB_MAX_DATABASES 256

/*
 * The least time between two starts of a runner for one database
 * (job_launcher.c), and how many naptimes past it a database with active
 * jobs may be without a runner before llm_jobs shows its jobs stalled.
 */
#define LLM_JOB_RUNNER_RESTART_MS 1000
#define LLM_JOB_STALL_NAPTIMES 3

/* settings (job_registry.c) */
extern bool llm_enable_jobs;		/* llm.enable_jobs */
extern int	llm_max_job_runners;	/* llm.max_job_runners */
extern int	llm_job_naptime_ms;		/* llm.job_naptime */
extern int	llm_job_lease_s;		/* llm.job_lease_time */

/* Define the settings above (from _PG_init). */
extern void llm_jobs_define_gucs(void);

/* Request the registry's shared memory (from _PG_init, before llm_registry_request). */
extern void llm_job_registry_request(void);

/* Wake this database's runner (or the launcher) when the current transaction commits. */
extern void llm_jobs_wake_at_commit(void);

/*
 * Wake database's runner now, or the launcher to start one (the database
 * becomes wanted): an asynchronous request of that database that asked
 * for a notification ended (mailbox.h).  Any process; takes the registry's
 * lock briefly.
 */
extern void llm_jobs_wake_database(Oid database);

/* Set in a job runner: its own commits wake nobody. */
extern bool llm_am_job_runner;

/* ---------- launcher side ---------- */

typedef struct LlmJobDatabaseState
{
	Oid			database;
	bool		wanted;
	int			runner_pid;		/* 0: no runner attached */
} LlmJobDatabaseState;

/* The launcher runs (latch set by wakes) / stops. */
extern void llm_job_registry_launcher_attach(Latch *latch);
extern void llm_job_registry_launcher_detach(void);

/* True exactly once after the server started: the launcher should mark every database wanted. */
extern bool llm_job_registry_take_probe(void);

/* Mark database wanted (the launcher's probe). */
extern void llm_job_registry_want(Oid database);

/* Database cannot take a runner (dropped, closed to connections): not wanted, unless a runner runs there. */
extern void llm_job_registry_forget(Oid database);

/* Copy the entries in use into out[LLM_JOB_MAX_DATABASES]; returns their number. */
extern int	llm_job_registry_snapshot(LlmJobDatabaseState *out);

/* ---------- runner side ---------- */

/*
 * Become database's runner; false if another live runner has it.  *seq is
 * the wake counter now.
 */
extern bool llm_job_registry_runner_attach(Oid database, uint64 *seq);

/* The wake counter of the runner's database now. */
extern uint64 llm_job_registry_wake_seq(Oid database);

/*
 * The runner found nothing to do after reading the counter as seq: if no
 * wake came since, the database is no longer wanted and the runner detaches
 * (returns true: exit now); else false (look again).
 */
extern bool llm_job_registry_runner_done(Oid database, uint64 seq);

/* The runner exits (any way): leave the entry, keeping "wanted" as it is. */
extern void llm_job_registry_runner_detach(Oid database);

#endif
