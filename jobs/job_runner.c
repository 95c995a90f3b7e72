/*
 * job_runner.c — the job runner of one database: a dynamic background
 * worker, started by the launcher (job_launcher.c), that runs that
 * database's jobs (docs/JOBS.md) as a client of the llm worker, like any
 * backend, through its channel (channel/client.h; its requests are
 * session-level, so they span the runner's short transactions).
 *
 * Loop, each time the latch is set (the llm worker sent something, a
 * commit woke it) or llm.job_naptime passes:
 *   1. read the answers that arrived on the channel;
 *   then a pass, if one is wanted (pass_wanted: a result to write, rows to
 *   claim, a commit's wake, the naptime; the text of rows still generating
 *   arrives at every engine step and wants none):
 *   2. transaction A: look at the jobs (state changes, definitions); write
 *      the finished results by the write protocol below, all of a job's in
 *      one subtransaction with one statement per step, or, if that fails,
 *      each row in its own; abort the requests of rows no longer there
 *      (deleted, truncated, moved: skipped); move jobs queued -> running ->
 *      done; claim rows (job_queue.h) while fewer than llm.batch_window are
 *      in flight, up to a quarter more, shared among the jobs (the fewest in
 *      flight first; a job below its share of the window takes any free
 *      slot, see claim_rows); add the counts to the jobs; commit (the
 *      claims, with their attempt counted, are durable before any row is
 *      evaluated);
 *   3. transaction B: for each claimed row, read its prompt as the job's
 *      role (job_rows.h) and submit the request (the job's options, its
 *      model among them, in the batch class, never above the owner's
 *      current llm.max_priority), or settle the row; commit;
 *   4. exit when no job is active, nothing is in flight and no wake came
 *      (job_registry.h), else sleep on the latch.
 *
 * Write protocol of a finished row (transaction A; the rows of one job
 * together, each step one statement over them, in one subtransaction):
 *   lock the queue row, still claimed by this runner (else the job was
 *   cancelled or paused: the result is dropped); lock the target row
 *   (FOR UPDATE SKIP LOCKED: a row a user transaction holds is retried
 *   with the job's next write, at most DEFER_MS later, the result kept);
 *   then
 *     row gone, output no longer NULL, where clause false, prompt NULL
 *                                     -> remove the queue row (skipped,
 *                                        counted by that reason);
 *     prompt text differs from the one generated from
 *                                     -> release the claim: the row is
 *                                        generated again (requeued);
 *     else write the output, remove the queue row (done) — the write and
 *     the removal commit together, so a row is written once.
 *
 * Failures:
 *   - a request the llm worker fails for the row (prompt too long, bad
 *     output for the column's type, a trigger error on the write...) is an
 *     attempt: the row is released with its error, or after max_attempts
 *     moved to llm_job_error; the subtransaction has been rolled back, so
 *     a poison row cannot loop, and an attempt the runner did not survive
 *     counts too (attempts are counted at the claim); a row that fails a
 *     batch's statement fails the batch, whose rows are then written one
 *     at a time, so it fails alone;
 *   - a request lost because the llm worker exited or reloaded is no
 *     attempt: its claim is released with the attempt given back;
 *   - errors that no row can escape (class 42: the table, a column or a
 *     privilege is gone; the role is gone; the job's model is no longer
 *     in llm.models) fail the job, not its rows;
 *   - while the job's model is not ready (loading, failed, the llm worker
 *     down) its rows wait unclaimed;
 *   - anything else escapes to the top: the runner exits (FATAL), the
 *     launcher starts a new one, which releases this runner's claims.
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "pg/batch/batch_scan.h"
#include "channel/client.h"
#include "job_queue.h"
#include "common/job_registry.h"
#include "job_rows.h"
#include "common/model_list.h"
#include "common/quota.h"
#include "common/registry.h"
#include "pg/sql/sql_args.h"
#include "common/utf8_text.h"

extern PGDLLEXPORT void llm_job_runner_main(Datum arg);

/* how soon a write held back by a locked target row is tried again */
#define DEFER_MS 200
/* the rate shown as rows_per_s is measured over this much recent time */
#define RATE_WINDOW_MS 60000
#define RATE_SAMPLES 64

typedef struct RunnerJob
{
	LlmJob	   *def;
	MemoryContext cxt;			/* def and its strings */
	char	   *model;			/* the alias its options name (in cxt), NULL: the default model */
	bool		listed;			/* in the last fetch of active jobs */
	bool		prepared;
	bool		stale;			/* its table changed: resolve and prepare again */
	bool		batch;			/* its finished rows are written together (llm_job_prepare_batch) */
	bool		exhausted;		/* its last claim got fewer rows than asked: none to claim until a wake */
	llm_priority ceiling;		/* its owner's llm.max_priority, read once per submitting transaction */
	int			token_limit;	/* its owner's llm.max_tokens_per_minute, read with the ceiling */
	bool		ceiling_read;
	TimestampTz throttled_until;	/* its rows wait for the owner's token limit until then */
	bool		throttle_shown; /* llm_job.throttled_until is set */
	int			in_flight;
	LlmJobCounts counts;		/* since the last report */
	int64		total_done;		/* by this runner */
	TimestampTz rate_t[RATE_SAMPLES];
	int64		rate_done[RATE_SAMPLES];
	int			rate_n;
	double		rate;
} RunnerJob;

typedef enum RowState
{
	ROW_CLAIMED,				/* to read and submit (transaction B) */
	ROW_RUNNING,				/* its request in flight */
	ROW_FINISHED				/* its result taken, to write (transaction A) */
} RowState;

typedef struct RunnerRow
{
	dlist_node	node;
	RunnerJob  *job;
	RowState	state;
	Datum		key;			/* text[], in runner_cxt */
	int			attempts;		/* including this claim */
	char	   *prompt;			/* the text the request was made from */
	uint64		request;
	LlmResult  *result;
	TimestampTz retry_at;		/* a held-back write: not before */
} RunnerRow;

static MemoryContext runner_cxt;
static List *jobs = NIL;		/* RunnerJob * */
static dlist_head rows;
static int	n_rows = 0;
static int64 token;
static int	rotate = 0;
/* the last pass of transaction A: its time and the wake counter it answered */
static TimestampTz pass_at = 0;
static uint64 pass_seq = 0;

/* ---------- rows ---------- */

static RunnerRow *
row_new(RunnerJob *rj, Datum key, int attempts)
{
	RunnerRow  *r = MemoryContextAllocZero(runner_cxt, sizeof(RunnerRow));

	r->job = rj;
	r->key = key;
	r->attempts = attempts;
	r->state = ROW_CLAIMED;
	dlist_push_tail(&rows, &r->node);
	rj->in_flight++;
	n_rows++;
	return r;
}

static void
row_forget(RunnerRow *r)
{
	if (r->request != 0)
		llm_abort_request(r->request);
	dlist_delete(&r->node);
	r->job->in_flight--;
	n_rows--;
	if (r->prompt)
		pfree(r->prompt);
	if (r->result)
	{
		if (r->result->text)
			pfree(r->result->text);
		if (r->result->message)
			pfree(r->result->message);
		pfree(r->result);
	}
	pfree(DatumGetPointer(r->key));
	pfree(r);
}

/* Forget every row of rj (aborting its requests). */
static void
forget_job_rows(RunnerJob *rj)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job == rj)
			row_forget(r);
	}
}

/* ---------- guarded steps ---------- */

typedef void (*StepFn) (void *arg);

/*
 * Run fn(arg) in a subtransaction; on ERROR roll it back and return the
 * error (copied into runner_cxt), else NULL.  Errors of an operator's
 * intervention (cancel, shutdown) are raised on.
 */
static ErrorData *
guarded(StepFn fn, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *err = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(runner_cxt);
		err = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(err->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION)
			PG_RE_THROW();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return err;
}

/* An error no row can escape: the job's definition no longer runs. */
static bool
job_level(int sqlstate)
{
	return ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION ||
		sqlstate == ERRCODE_UNDEFINED_OBJECT || ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_INVALID_SCHEMA_NAME;
}

/* A failure that was not the row's: the llm worker went away or replaced its engine. */
static bool
transient(int sqlstate)
{
	return sqlstate == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
		ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_OPERATOR_INTERVENTION;
}

/* ---------- jobs ---------- */

/* A row rj needs no result for (llm_job.rows_skipped and skipped_by_reason). */
static void
count_skip(RunnerJob *rj, LlmSkipReason reason)
{
	Assert(reason >= 0 && reason < LLM_SKIP_N);
	rj->counts.skipped++;
	rj->counts.skipped_by[reason]++;
}

static void
report_counts(RunnerJob *rj)
{
	LlmJobCounts *c = &rj->counts;
	TimestampTz now = GetCurrentTimestamp();
	int			first = 0;

	if (c->done == 0 && c->failed == 0 && c->skipped == 0 && c->requeued == 0 &&
		c->tokens_in == 0 && c->tokens_out == 0)
		return;
	rj->total_done += c->done;
	if (rj->rate_n == RATE_SAMPLES)
	{
		memmove(rj->rate_t, rj->rate_t + 1, sizeof(TimestampTz) * (RATE_SAMPLES - 1));
		memmove(rj->rate_done, rj->rate_done + 1, sizeof(int64) * (RATE_SAMPLES - 1));
		rj->rate_n--;
	}
	rj->rate_t[rj->rate_n] = now;
	rj->rate_done[rj->rate_n] = rj->total_done;
	rj->rate_n++;
	while (first < rj->rate_n - 2 && now - rj->rate_t[first] > (int64) RATE_WINDOW_MS * 1000)
		first++;
	if (rj->rate_n >= 2 && now > rj->rate_t[first])
		rj->rate = (double) (rj->total_done - rj->rate_done[first]) /
			((double) (now - rj->rate_t[first]) / 1e6);
	llm_job_add_counts(rj->def->id, c, rj->rate_n >= 2 ? rj->rate : -1.0);
	memset(c, 0, sizeof(*c));
}

/*
 * The job cannot run: failed with msg, its claims given back.  Its rows
 * stay listed until forget_failed_rows(): this is called from inside loops
 * over the rows, which must not lose their next node; until then every
 * loop passes over the rows of a failed job.
 */
static void
fail_job(RunnerJob *rj, const char *msg)
{
	ereport(LOG, (errmsg("llm job " INT64_FORMAT " failed: %s", rj->def->id, msg)));
	(void) llm_job_set_state(rj->def->id, rj->def->state, LLM_JOB_FAILED, msg, false);
	rj->def->state = LLM_JOB_FAILED;
	llm_queue_release_job(rj->def->id, token, true);
}

static bool
job_failed(const RunnerJob *rj)
{
	return rj->def->state == LLM_JOB_FAILED;
}

/* Whether rj's rows wait for its owner's token limit at now. */
static bool
throttled(const RunnerJob *rj, TimestampTz now)
{
	return rj->throttled_until > now;
}

typedef struct ThrottleStep
{
	RunnerJob  *job;
	bool		on;
} ThrottleStep;

static void
show_throttle_step(void *arg)
{
	ThrottleStep *t = arg;

	if (t->on)
		llm_job_set_throttled(t->job->def->id, t->job->throttled_until,
							  psprintf("the token limit of its owner, llm.max_tokens_per_minute = %d",
									   t->job->token_limit));
	else
		llm_job_set_throttled(t->job->def->id, 0, NULL);
}

/*
 * Show in llm_jobs whether rj waits for its owner's token limit (a catalog
 * not yet updated has no column for it: the job runs on, unshown).
 */
static void
show_throttle(RunnerJob *rj, bool on)
{
	ThrottleStep t = {rj, on};
	ErrorData  *err = guarded(show_throttle_step, &t);

	if (err != NULL)
		ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT ": %s", rj->def->id, err->message)));
	rj->throttle_shown = on;
}

/* Forget the rows of failed jobs (aborting their requests); outside any loop over the rows. */
static void
forget_failed_rows(void)
{
	ListCell   *lc;

	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (job_failed(rj) && rj->in_flight > 0)
			forget_job_rows(rj);
	}
}

static void
prepare_step(void *arg)
{
	RunnerJob  *rj = arg;
	LlmJobContext c;
	char	   *problem;
	int64		other;
	LlmJobState other_state;
	Oid			other_table;

	llm_job_unprepare(rj->def);
	rj->prepared = false;
	rj->batch = false;
	problem = llm_job_resolve(rj->def, false);
	if (problem != NULL)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("%s", problem)));
	/* an alias gone from llm.models: no row of the job can run */
	llm_model_alias_check(rj->model);
	if (pg_class_aclcheck(rj->def->target, rj->def->owner, ACL_SELECT | ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the role of job " INT64_FORMAT " lost SELECT or UPDATE on its table", rj->def->id)));
	llm_job_enter(rj->def, &c);
	llm_job_prepare(rj->def, true);
	/* EXECUTE on what the prompt calls, SELECT on what it reads: the job fails, not each row */
	llm_job_check_rights(rj->def);
	llm_job_leave(&c);

	/*
	 * One job per column of a partition tree, as llm_enrich checks; a table
	 * with a job attached later as a partition of a table with one (or the
	 * reverse) makes two: the newer one yields, failing as it would have at
	 * creation (both would fill the same rows, each with its own prompt).
	 */
	other = llm_job_find_in_tree(rj->def->target, rj->def->output_column, rj->def->id, &other_state, &other_table);
	if (other != 0 && other < rj->def->id)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("job " INT64_FORMAT " (%s) already fills column \"%s\" of table %s, in the partition tree of this job's table",
						other, llm_job_state_name(other_state), rj->def->output_column, get_rel_name(other_table))));
	rj->prepared = true;
	rj->stale = false;
}

static void
prepare_batch_step(void *arg)
{
	RunnerJob  *rj = arg;
	LlmJobContext c;

	llm_job_enter(rj->def, &c);
	rj->batch = llm_job_prepare_batch(rj->def);
	llm_job_leave(&c);
}

/*
 * Ready to run rows: resolved, prepared, its role, rights and model still
 * there; else the job fails.
 */
static bool
job_ready(RunnerJob *rj)
{
	ErrorData  *err;

	if (rj->prepared && !rj->stale && llm_model_alias_known(rj->model) &&
		SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(rj->def->owner)) &&
		SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rj->def->target)) &&
		pg_class_aclcheck(rj->def->target, rj->def->owner, ACL_SELECT | ACL_UPDATE) == ACLCHECK_OK)
		return true;
	err = guarded(prepare_step, rj);
	if (err == NULL)
	{
		/* the statements on many rows at once are an optimization: without them rows go one at a time */
		err = guarded(prepare_batch_step, rj);
		if (err != NULL)
		{
			rj->batch = false;
			ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT " writes its rows one at a time: %s",
									rj->def->id, err->message)));
		}
		return true;
	}
	fail_job(rj, err->message);
	return false;
}

static RunnerJob *
job_by_id(int64 id)
{
	ListCell   *lc;

	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (rj->def->id == id)
			return rj;
	}
	return NULL;
}

static void
job_free(RunnerJob *rj)
{
	forget_job_rows(rj);
	llm_job_unprepare(rj->def);
	MemoryContextDelete(rj->cxt);
	pfree(rj);
}

/*
 * The active jobs as the table has them now: new ones are added; a job
 * paused, failed, cancelled or deleted by its owner gives its work up
 * (claims released with the attempt given back).
 */
static void
refresh_jobs(void)
{
	MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "llm runner fetch", ALLOCSET_SMALL_SIZES);
	int			n;
	LlmJob	  **active = llm_job_fetch_active(tmp, &n);
	ListCell   *lc;
	List	   *keep = NIL;
	List	   *gone = NIL;

	foreach(lc, jobs)
		((RunnerJob *) lfirst(lc))->listed = false;
	for (int i = 0; i < n; i++)
	{
		RunnerJob  *rj = job_by_id(active[i]->id);

		if (rj == NULL)
		{
			MemoryContext cxt = AllocSetContextCreate(runner_cxt, "llm runner job", ALLOCSET_SMALL_SIZES);
			MemoryContext old = MemoryContextSwitchTo(cxt);

			rj = MemoryContextAllocZero(runner_cxt, sizeof(RunnerJob));
			rj->cxt = cxt;
			rj->def = llm_job_fetch(active[i]->id, false, cxt);
			/* SPI left its own context current: the alias lives with def */
			MemoryContextSwitchTo(cxt);
			if (rj->def != NULL)
				rj->model = llm_call_options_model(rj->def->options);
			MemoryContextSwitchTo(old);
			if (rj->def == NULL)
			{
				MemoryContextDelete(cxt);
				pfree(rj);
				continue;
			}
			old = MemoryContextSwitchTo(runner_cxt);
			jobs = lappend(jobs, rj);
			MemoryContextSwitchTo(old);
		}
		rj->def->state = active[i]->state;
		rj->listed = true;
	}
	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (!rj->listed || rj->def->state == LLM_JOB_PAUSED)
		{
			if (rj->in_flight > 0)
			{
				forget_job_rows(rj);
				llm_queue_release_job(rj->def->id, token, true);
			}
			report_counts(rj);
		}
		if (rj->listed)
		{
			MemoryContext old = MemoryContextSwitchTo(runner_cxt);

			keep = lappend(keep, rj);
			MemoryContextSwitchTo(old);
		}
		else
			gone = lappend(gone, rj);
	}
	/* the relcache callback reads the list: it never holds a freed job */
	list_free(jobs);
	jobs = keep;
	foreach(lc, gone)
		job_free(lfirst(lc));
	list_free(gone);
	MemoryContextDelete(tmp);
}

/* ---------- writing ---------- */

typedef enum WriteOutcome
{
	WRITE_DONE,
	WRITE_SKIPPED,
	WRITE_STALE,
	WRITE_DEFERRED,
	WRITE_LOST					/* the claim is gone (cancelled, paused): drop the result */
} WriteOutcome;

typedef struct WriteStep
{
	RunnerRow  *row;
	WriteOutcome outcome;
	LlmSkipReason reason;		/* of WRITE_SKIPPED */
} WriteStep;

static void
write_step(void *arg)
{
	WriteStep  *w = arg;
	RunnerRow  *r = w->row;
	LlmJob	   *job = r->job->def;
	LlmJobContext c;
	LlmJobRow	now;

	if (llm_queue_lock(job->id, r->key, token) < 0)
	{
		w->outcome = WRITE_LOST;
		return;
	}
	llm_job_enter(job, &c);
	llm_job_read_row(job, r->key, true, &now, CurrentMemoryContext);
	if (!now.found)
	{
		bool		exists = llm_job_row_exists(job, r->key);

		llm_job_leave(&c);
		if (exists)
			w->outcome = WRITE_DEFERRED;
		else
		{
			llm_queue_delete(job->id, r->key);
			w->outcome = WRITE_SKIPPED;
			w->reason = LLM_SKIP_DELETED;
		}
		return;
	}
	w->reason = llm_job_row_skip_reason(&now);
	if (w->reason != LLM_SKIP_NONE)
	{
		llm_job_leave(&c);
		llm_queue_delete(job->id, r->key);
		w->outcome = WRITE_SKIPPED;
		return;
	}
	if (strcmp(now.prompt, r->prompt) != 0)
	{
		llm_job_leave(&c);
		w->outcome = WRITE_STALE;
		return;
	}
	if (llm_job_write_row(job, r->key,
						  llm_utf8_to_cstring(r->result->text, r->result->text_len)) != 1)
		elog(ERROR, "llm: the locked row of job " INT64_FORMAT " was not updated", job->id);
	llm_job_leave(&c);
	llm_queue_delete(job->id, r->key);
	w->outcome = WRITE_DONE;
}

/* A failed attempt at row r: retried, or after max_attempts moved to llm_job_error. */
static void
row_failed(RunnerRow *r, int sqlstate, const char *message)
{
	RunnerJob  *rj = r->job;

	if (r->attempts >= rj->def->max_attempts)
	{
		llm_queue_fail(rj->def->id, r->key, r->attempts, unpack_sql_state(sqlstate), message);
		rj->counts.failed++;
	}
	else
	{
		llm_queue_release(rj->def->id, r->key, token, false, message);
		rj->exhausted = false;
	}
	row_forget(r);
}

/* The effect of a committed write protocol's outcome on row r (and its job's counts). */
static void
settle_write(RunnerRow *r, WriteOutcome outcome, LlmSkipReason reason, TimestampTz now)
{
	RunnerJob  *rj = r->job;

	switch (outcome)
	{
		case WRITE_DONE:
			rj->counts.done++;
			row_forget(r);
			break;
		case WRITE_SKIPPED:
			count_skip(rj, reason);
			row_forget(r);
			break;
		case WRITE_STALE:
			rj->counts.requeued++;
			if (r->attempts >= rj->def->max_attempts)
				row_failed(r, ERRCODE_T_R_SERIALIZATION_FAILURE,
						   psprintf("the row's prompt changed while its result was in flight, %d times",
									r->attempts));
			else
			{
				llm_queue_release(rj->def->id, r->key, token, false, NULL);
				rj->exhausted = false;
				row_forget(r);
			}
			break;
		case WRITE_DEFERRED:
			r->retry_at = TimestampTzPlusMilliseconds(now, DEFER_MS);
			break;
		case WRITE_LOST:
			row_forget(r);
			break;
	}
}

/* A row's result was ready to write? (not held back by a locked target row) */
static bool
write_due(const RunnerRow *r, TimestampTz now)
{
	return r->state == ROW_FINISHED && (r->retry_at == 0 || now >= r->retry_at);
}

/* The write protocol for one finished row, in a subtransaction of its own. */
static void
write_finished(RunnerRow *r, TimestampTz now)
{
	RunnerJob  *rj = r->job;
	WriteStep	w = {r, WRITE_LOST, LLM_SKIP_NONE};
	ErrorData  *err;

	if (!write_due(r, now))
		return;
	if (r->result->failed)
	{
		if (transient(r->result->sqlstate))
		{
			llm_queue_release(rj->def->id, r->key, token, true, NULL);
			rj->exhausted = false;
			row_forget(r);
		}
		else
			row_failed(r, r->result->sqlstate,
					   llm_utf8_to_cstring(r->result->message, strlen(r->result->message)));
		return;
	}
	err = guarded(write_step, &w);
	if (err != NULL)
	{
		if (job_level(err->sqlerrcode))
			fail_job(rj, err->message);
		else
			row_failed(r, err->sqlerrcode, err->message);
		return;
	}
	settle_write(r, w.outcome, w.reason, now);
}

/*
 * The write protocol for rows[0..n) of one job at once, each step one
 * statement over all of them (job_queue.h, job_rows.h), in one
 * subtransaction; each row gets the outcome write_step would give it.
 */
typedef struct BatchStep
{
	RunnerJob  *job;
	RunnerRow **rows;
	int			n;
	WriteOutcome *outcome;
	LlmSkipReason *reason;		/* of each WRITE_SKIPPED */
} BatchStep;

static void
batch_write_step(void *arg)
{
	BatchStep  *b = arg;
	LlmJob	   *job = b->job->def;
	int			n = b->n;
	Datum	   *keys = palloc(sizeof(Datum) * n);
	bool	   *claimed = palloc(sizeof(bool) * n);
	int		   *at = palloc(sizeof(int) * n);	/* the claimed rows, as indexes into rows */
	Datum	   *ckeys = palloc(sizeof(Datum) * n);
	LlmJobRow  *now = palloc(sizeof(LlmJobRow) * n);
	int		   *missing = palloc(sizeof(int) * n);
	Datum	   *mkeys = palloc(sizeof(Datum) * n);
	bool	   *exists = palloc(sizeof(bool) * n);
	Datum	   *wkeys = palloc(sizeof(Datum) * n);
	char	  **wvalues = palloc(sizeof(char *) * n);
	Datum	   *dkeys = palloc(sizeof(Datum) * n);
	int			m = 0;
	int			n_missing = 0;
	int			n_write = 0;
	int			n_delete = 0;
	LlmJobContext c;

	for (int i = 0; i < n; i++)
	{
		keys[i] = b->rows[i]->key;
		b->outcome[i] = WRITE_LOST;
		b->reason[i] = LLM_SKIP_DELETED;
	}
	(void) llm_queue_lock_rows(job->id, keys, n, token, claimed);
	for (int i = 0; i < n; i++)
		if (claimed[i])
		{
			at[m] = i;
			ckeys[m++] = keys[i];
		}
	if (m == 0)
		return;
	llm_job_enter(job, &c);
	llm_job_lock_rows(job, ckeys, m, now, CurrentMemoryContext);
	for (int j = 0; j < m; j++)
		if (!now[j].found)
		{
			missing[n_missing] = j;
			mkeys[n_missing++] = ckeys[j];
		}
	if (n_missing > 0)
	{
		llm_job_rows_exist(job, mkeys, n_missing, exists);
		for (int k = 0; k < n_missing; k++)
			b->outcome[at[missing[k]]] = exists[k] ? WRITE_DEFERRED : WRITE_SKIPPED;
	}
	for (int j = 0; j < m; j++)
	{
		RunnerRow  *r = b->rows[at[j]];

		if (!now[j].found)
			continue;
		b->reason[at[j]] = llm_job_row_skip_reason(&now[j]);
		if (b->reason[at[j]] != LLM_SKIP_NONE)
			b->outcome[at[j]] = WRITE_SKIPPED;
		else if (strcmp(now[j].prompt, r->prompt) != 0)
			b->outcome[at[j]] = WRITE_STALE;
		else
		{
			wkeys[n_write] = ckeys[j];
			wvalues[n_write++] = llm_utf8_to_cstring(r->result->text, r->result->text_len);
			b->outcome[at[j]] = WRITE_DONE;
		}
	}
	if (n_write > 0 && llm_job_write_rows(job, wkeys, wvalues, n_write) != (uint64) n_write)
		elog(ERROR, "llm: locked rows of job " INT64_FORMAT " were not all updated", job->id);
	llm_job_leave(&c);
	for (int i = 0; i < n; i++)
		if (b->outcome[i] == WRITE_DONE || b->outcome[i] == WRITE_SKIPPED)
			dkeys[n_delete++] = keys[i];
	llm_queue_delete_rows(job->id, dkeys, n_delete);
}

/*
 * Write the finished results of job rj that are due: all its successful
 * ones together when it can (one subtransaction, a few statements, the
 * outcomes of the row protocol; rows held back by a locked target row go
 * along, which costs nothing there); if that fails for any reason, each
 * due row again in its own subtransaction, so a row that cannot be written
 * (a CHECK, a trigger, the column's type) fails alone and the job-level
 * errors are told from the row errors as for a single row.
 */
static void
write_job_results(RunnerJob *rj, TimestampTz now)
{
	dlist_iter	it;
	RunnerRow **batch;
	RunnerRow **single;
	int			n_batch = 0;
	int			n_single = 0;
	bool		any_due = false;

	dlist_foreach(it, &rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job == rj && write_due(r, now))
			any_due = true;
	}
	if (!any_due)
		return;
	batch = palloc(sizeof(RunnerRow *) * n_rows);
	single = palloc(sizeof(RunnerRow *) * n_rows);
	dlist_foreach(it, &rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job != rj || r->state != ROW_FINISHED)
			continue;
		if (rj->batch && !r->result->failed)
			batch[n_batch++] = r;
		else if (write_due(r, now))
			single[n_single++] = r;
	}
	if (n_batch == 1)
	{
		/* one row: the row's own protocol, if it is due */
		if (write_due(batch[0], now))
			single[n_single++] = batch[0];
		n_batch = 0;
	}
	if (n_batch > 0)
	{
		WriteOutcome *outcome = palloc(sizeof(WriteOutcome) * n_batch);
		LlmSkipReason *reason = palloc(sizeof(LlmSkipReason) * n_batch);
		BatchStep	b = {rj, batch, n_batch, outcome, reason};
		ErrorData  *err = guarded(batch_write_step, &b);

		if (err == NULL)
			for (int i = 0; i < n_batch; i++)
				settle_write(batch[i], outcome[i], reason[i], now);
		else
		{
			ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT ": %d rows written one at a time: %s",
									rj->def->id, n_batch, err->message)));
			for (int i = 0; i < n_batch && !job_failed(rj); i++)
				write_finished(batch[i], now);	/* passes over a row not due */
		}
		pfree(outcome);
		pfree(reason);
	}
	for (int i = 0; i < n_single && !job_failed(rj); i++)
		write_finished(single[i], now);
	pfree(batch);
	pfree(single);
}

/* ---------- rows gone while generating ---------- */

typedef struct VanishStep
{
	RunnerJob  *job;
	RunnerRow **rows;
	int			n;
	bool	   *gone;
} VanishStep;

/*
 * Which of rows[0..n) (of one job, generating) no longer exist under their
 * key, as committed: their queue rows are removed.  The queue rows are
 * locked first (those another transaction holds, queueing its key again,
 * are passed over, not waited for), then the table is read under a new
 * snapshot, so a row inserted again under the same key is either seen or
 * queued again after this commits: never lost.
 */
static void
vanish_step(void *arg)
{
	VanishStep *v = arg;
	LlmJob	   *job = v->job->def;
	int			n = v->n;
	Datum	   *keys = palloc(sizeof(Datum) * n);
	bool	   *claimed = palloc(sizeof(bool) * n);
	int		   *at = palloc(sizeof(int) * n);
	Datum	   *ckeys = palloc(sizeof(Datum) * n);
	bool	   *exists = palloc(sizeof(bool) * n);
	Datum	   *dkeys = palloc(sizeof(Datum) * n);
	int			m = 0;
	int			n_gone = 0;
	LlmJobContext c;

	for (int i = 0; i < n; i++)
	{
		keys[i] = v->rows[i]->key;
		v->gone[i] = false;
	}
	(void) llm_queue_try_lock_rows(job->id, keys, n, token, claimed);
	for (int i = 0; i < n; i++)
		if (claimed[i])
		{
			at[m] = i;
			ckeys[m++] = keys[i];
		}
	if (m == 0)
		return;
	llm_job_enter(job, &c);
	PushActiveSnapshot(GetTransactionSnapshot());

	/*
	 * A table a transaction holds locked (a TRUNCATE not yet committed) is
	 * looked at again in the next pass, not waited for: only a committed
	 * change stops a row.
	 */
	(void) set_config_option("lock_timeout", "1", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (v->job->batch)
		llm_job_rows_exist(job, ckeys, m, exists);
	else
		for (int j = 0; j < m; j++)
			exists[j] = llm_job_row_exists(job, ckeys[j]);
	PopActiveSnapshot();
	llm_job_leave(&c);
	for (int j = 0; j < m; j++)
		if (!exists[j])
		{
			v->gone[at[j]] = true;
			dkeys[n_gone++] = ckeys[j];
		}
	if (n_gone > 0)
		llm_queue_delete_rows(job->id, dkeys, n_gone);
}

/*
 * Stop generating for the rows of rj that were deleted (a DELETE, a
 * TRUNCATE, a key changed, a partition detached) while their requests run:
 * looked at in every pass, so within llm.job_naptime of the commit; their
 * requests are aborted and they count as skipped (deleted).  Any error
 * leaves them to the write protocol, which finds the same when their
 * results arrive.
 */
static void
drop_vanished_rows(RunnerJob *rj)
{
	dlist_iter	it;
	RunnerRow **running = palloc(sizeof(RunnerRow *) * Max(n_rows, 1));
	bool	   *gone = palloc(sizeof(bool) * Max(n_rows, 1));
	int			n = 0;

	dlist_foreach(it, &rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job == rj && r->state == ROW_RUNNING)
			running[n++] = r;
	}
	if (n > 0)
	{
		VanishStep	v = {rj, running, n, gone};
		ErrorData  *err = guarded(vanish_step, &v);

		if (err != NULL)
			ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT ": rows in flight not looked for: %s",
									rj->def->id, err->message)));
		else
			for (int i = 0; i < n; i++)
				if (gone[i])
				{
					count_skip(rj, LLM_SKIP_DELETED);
					row_forget(running[i]);
				}
	}
	pfree(running);
	pfree(gone);
}

/* ---------- claiming ---------- */

/*
 * The llm worker runs and serves model alias (NULL: the default model):
 * else a job's rows wait unclaimed (a model loading, failed or reloading
 * is not the rows' fault).
 */
static bool
model_ready(const char *alias)
{
	bool		running;

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	running = llm_shared->worker_pid != 0;
	LWLockRelease(llm_shared->lock);
	return running && llm_registry_model_state(alias, NULL) == LLM_MODEL_READY;
}

/*
 * The in-flight window: claims top rows up to the cap (llm.batch_window and
 * a quarter more) once fewer than llm.batch_window are in flight, so the
 * engine's batch stays full without a claim per finished row.
 */
static int
window_size(void)
{
	return Max(llm_batch_window, 1);
}

static int
window_cap(void)
{
	return window_size() + Max(window_size() / 4, 1);
}

static bool
job_active(const RunnerJob *rj)
{
	return rj->def->state == LLM_JOB_QUEUED || rj->def->state == LLM_JOB_RUNNING;
}

/*
 * A job's share of the window: the window divided among the active jobs
 * that have rows in flight or may have rows to claim (at least one row).
 */
static int
job_share(void)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (job_active(rj) && (!rj->exhausted || rj->in_flight > 0))
			n++;
	}
	return Max(window_size() / Max(n, 1), 1);
}

/*
 * Claim rows, round robin over the jobs by what they have in flight (the
 * fewest first, ties in turn): below the window, up to the cap; at or above
 * it, only jobs below their share take the free slots, so a job that
 * arrives while another holds the whole window gets the first slot a
 * finished row frees and reaches its share as more free.  A job whose claim
 * comes short has no more rows to claim (exhausted): what it did not take
 * goes to the others.
 */
static void
claim_rows(List *runnable)
{
	int			cap = window_cap();
	bool		refill = n_rows < window_size();
	int			share = job_share();
	int			n_jobs = list_length(runnable);
	int			budget;
	RunnerJob **cand;
	int		   *want;
	int			n_cand = 0;
	LlmClaim   *claims;

	if (n_jobs == 0 || n_rows >= cap)
		return;
	budget = cap - n_rows;
	cand = palloc(sizeof(RunnerJob *) * n_jobs);
	want = palloc(sizeof(int) * n_jobs);
	for (int k = 0; k < n_jobs; k++)
	{
		RunnerJob  *rj = list_nth(runnable, (rotate + k) % n_jobs);

		if (job_failed(rj) || rj->exhausted || throttled(rj, GetCurrentTimestamp()))
			continue;
		if (!refill && rj->in_flight >= share)
			continue;
		if (!model_ready(rj->model))
		{
			/* tried again at the next wake or naptime */
			rj->exhausted = true;
			continue;
		}
		cand[n_cand++] = rj;
	}
	claims = palloc(sizeof(LlmClaim) * budget);
	while (budget > 0 && n_cand > 0)
	{
		bool		short_claim = false;
		int			kept = 0;

		/* water-filling: each slot to the candidate with the fewest rows (in flight and about to be) */
		memset(want, 0, sizeof(int) * n_cand);
		for (int b = 0; b < budget; b++)
		{
			int			best = 0;

			for (int i = 1; i < n_cand; i++)
				if (cand[i]->in_flight + want[i] < cand[best]->in_flight + want[best])
					best = i;
			if (!refill && cand[best]->in_flight + want[best] >= share)
				break;
			want[best]++;
		}
		for (int i = 0; i < n_cand; i++)
		{
			RunnerJob  *rj = cand[i];
			int			got;

			if (want[i] == 0)
			{
				cand[kept++] = rj;
				continue;
			}
			got = llm_queue_claim(rj->def->id, token, want[i], claims, runner_cxt);
			for (int j = 0; j < got; j++)
				(void) row_new(rj, claims[j].key, claims[j].attempts);
			budget -= got;
			if (got > 0 && rj->def->state == LLM_JOB_QUEUED &&
				llm_job_set_state(rj->def->id, LLM_JOB_QUEUED, LLM_JOB_RUNNING, NULL, false))
				rj->def->state = LLM_JOB_RUNNING;
			if (got < want[i])
			{
				rj->exhausted = true;
				short_claim = true;
			}
			else
				cand[kept++] = rj;
		}
		n_cand = kept;
		/* another round only to give what a short job left to the others */
		if (!short_claim)
			break;
	}
	rotate++;
	pfree(claims);
	pfree(want);
	pfree(cand);
}

/* ---------- the loop ---------- */

static void
begin_transaction(const char *what)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "llm: SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, what);
}

static void
end_transaction(void)
{
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Transaction A: job states, writes, claims, counts.  Returns whether any job is active. */
static bool
write_and_claim(void)
{
	ListCell   *lc;
	List	   *runnable = NIL;
	TimestampTz now = GetCurrentTimestamp();
	bool		active = false;

	begin_transaction("llm job runner: writing results, claiming rows");
	refresh_jobs();
	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (rj->def->state != LLM_JOB_QUEUED && rj->def->state != LLM_JOB_RUNNING)
			continue;
		if (job_ready(rj))
			runnable = lappend(runnable, rj);
	}
	foreach(lc, runnable)
	{
		RunnerJob  *rj = lfirst(lc);

		if (!job_failed(rj))
			write_job_results(rj, now);
		if (!job_failed(rj))
			drop_vanished_rows(rj);
	}
	forget_failed_rows();
	claim_rows(runnable);
	foreach(lc, runnable)
	{
		RunnerJob  *rj = lfirst(lc);

		if (job_failed(rj))
			;					/* its rows are given back; refresh_jobs drops it */
		else if (rj->in_flight == 0 && !rj->def->continuous && llm_queue_count(rj->def->id) == 0)
		{
			LlmJobState from = rj->def->state;

			if (llm_job_set_state(rj->def->id, from, LLM_JOB_DONE, NULL, false))
				rj->def->state = LLM_JOB_DONE;
		}
		else
			active = true;
		report_counts(rj);
	}
	list_free(runnable);
	end_transaction();
	return active;
}

typedef struct SubmitStep
{
	RunnerRow  *row;
	LlmSkipReason skipped;		/* LLM_SKIP_NONE: submitted or refused */
	LlmResult  *refused;
	TimestampTz throttled_until;	/* non-zero: the owner's token limit holds the row back */
} SubmitStep;

static void
submit_step(void *arg)
{
	SubmitStep *s = arg;
	RunnerRow  *r = s->row;
	LlmJob	   *job = r->job->def;
	LlmJobContext c;
	LlmJobRow	row;
	LlmCall		call;

	llm_job_enter(job, &c);
	llm_job_read_row(job, r->key, false, &row, runner_cxt);
	s->skipped = llm_job_row_skip_reason(&row);
	if (s->skipped != LLM_SKIP_NONE)
	{
		llm_job_leave(&c);
		if (row.prompt)
			pfree(row.prompt);
		llm_queue_delete(job->id, r->key);
		return;
	}
	/* built as the job's role: its prefix-cache isolation and its name in llm_recent_requests */
	llm_call_read_stored(job->options, &call);
	/* a job is background work: the batch class, below interactive calls */
	llm_call_set_batch(&call);
	/* and never above its owner's ceiling as it is now (lowered since the job was created?) */
	if (!r->job->ceiling_read)
	{
		r->job->ceiling = llm_role_max_priority(job->owner);
		r->job->token_limit = llm_quota_role_limit(job->owner);
		r->job->ceiling_read = true;
	}
	llm_call_cap_priority(&call, r->job->ceiling);
	s->refused = llm_call_set_prompt(&call, cstring_to_text(row.prompt));
	/* under the owner's token limit as it is now: a row that does not fit waits, it does not fail */
	if (s->refused == NULL &&
		(r->request = llm_submit_session(&call.req, r->job->token_limit, &s->throttled_until)) != 0)
	{
		r->prompt = row.prompt;
		r->state = ROW_RUNNING;
	}
	else
		pfree(row.prompt);
	llm_job_leave(&c);
}

/* Transaction B: read and submit the claimed rows. */
static void
submit_claimed(void)
{
	dlist_mutable_iter it;
	dlist_iter	look;
	bool		any = false;
	ListCell   *lc;

	dlist_foreach(look, &rows)
		if (dlist_container(RunnerRow, node, look.cur)->state == ROW_CLAIMED)
			any = true;
	if (!any)
		return;
	foreach(lc, jobs)
		((RunnerJob *) lfirst(lc))->ceiling_read = false;
	begin_transaction("llm job runner: submitting rows");
	dlist_foreach_modify(it, &rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);
		RunnerJob  *rj = r->job;
		SubmitStep	s = {r, LLM_SKIP_NONE, NULL, 0};
		ErrorData  *err;

		if (r->state != ROW_CLAIMED || job_failed(rj))
			continue;
		if (throttled(rj, GetCurrentTimestamp()))
		{
			/* back to the queue, attempt given back, until the window has room */
			llm_queue_release(rj->def->id, r->key, token, true, NULL);
			row_forget(r);
			continue;
		}
		if (r->attempts > rj->def->max_attempts)
		{
			/* its earlier attempts ended with the runner */
			r->attempts--;
			row_failed(r, ERRCODE_ADMIN_SHUTDOWN,
					   psprintf("the job runner stopped while working on this row %d times", r->attempts));
			continue;
		}
		err = guarded(submit_step, &s);
		if (err != NULL)
		{
			if (job_level(err->sqlerrcode))
				fail_job(rj, err->message);
			else if (transient(err->sqlerrcode))
			{
				llm_queue_release(rj->def->id, r->key, token, true, NULL);
				rj->exhausted = false;
				row_forget(r);
			}
			else
				row_failed(r, err->sqlerrcode, err->message);
		}
		else if (s.skipped != LLM_SKIP_NONE)
		{
			count_skip(rj, s.skipped);
			row_forget(r);
		}
		else if (s.refused != NULL)
			row_failed(r, s.refused->sqlstate, s.refused->message);
		else if (s.throttled_until != 0)
		{
			rj->throttled_until = s.throttled_until;
			llm_queue_release(rj->def->id, r->key, token, true, NULL);
			row_forget(r);
		}
		else if (rj->throttle_shown)
		{
			/* a row went out: the job is no longer held back */
			show_throttle(rj, false);
		}
	}
	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (throttled(rj, GetCurrentTimestamp()) && !rj->throttle_shown && !job_failed(rj))
			show_throttle(rj, true);
	}
	forget_failed_rows();
	foreach(lc, jobs)
		report_counts(lfirst(lc));
	end_transaction();
}

/* Take the answers that arrived (a vanished llm worker fails every request: handled as transient). */
static void
receive_results(void)
{
	dlist_iter	it;
	MemoryContext old;

	if (n_rows == 0)
		return;
	old = MemoryContextSwitchTo(runner_cxt);
	PG_TRY();
	{
		llm_channel_poll(false);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(runner_cxt);
		FlushErrorState();
	}
	PG_END_TRY();
	dlist_foreach(it, &rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->state == ROW_RUNNING && llm_request_is_done(r->request))
		{
			r->result = llm_take_result(r->request);
			r->request = 0;
			r->state = ROW_FINISHED;
			if (!r->result->failed)
			{
				r->job->counts.tokens_in += r->result->usage.prompt_tokens;
				r->job->counts.tokens_out += r->result->usage.completion_tokens;
			}
		}
	}
	MemoryContextSwitchTo(old);
}

/*
 * Rows could be claimed (claim_rows): a job whose last claim was not short
 * of rows, and fewer than llm.batch_window in flight, or fewer than the cap
 * and that job below its share.
 */
static bool
claim_wanted(void)
{
	ListCell   *lc;
	int			share;

	if (n_rows >= window_cap())
		return false;
	share = job_share();
	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (job_active(rj) && !rj->exhausted && !throttled(rj, GetCurrentTimestamp()) &&
			(n_rows < window_size() || rj->in_flight < share))
			return true;
	}
	return false;
}

/*
 * Whether this wake needs transaction A: a result to write, rows to claim,
 * a commit's wake since the last pass (a job created or changed, rows
 * queued) or llm.job_naptime since it (leases, a model ready again, a
 * changed table).  The llm worker's text of rows still generating wakes the
 * runner at every engine step; those wakes need no transaction.
 */
static bool
pass_wanted(uint64 seq, TimestampTz now)
{
	dlist_iter	it;

	if (pass_at == 0 || seq != pass_seq || now - pass_at >= (int64) llm_job_naptime_ms * 1000)
	{
		ListCell   *lc;

		/* what the commit or the time changed is looked at again */
		foreach(lc, jobs)
			((RunnerJob *) lfirst(lc))->exhausted = false;
		return true;
	}
	if (claim_wanted())
		return true;
	dlist_foreach(it, &rows)
		if (write_due(dlist_container(RunnerRow, node, it.cur), now))
			return true;
	return false;
}

static long
next_timeout(void)
{
	dlist_iter	it;
	TimestampTz now = GetCurrentTimestamp();
	long		timeout = llm_job_naptime_ms - (long) ((now - pass_at) / 1000);
	ListCell   *lc;

	/* a job held back by its owner's token limit is claimed from again when the window has room */
	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (throttled(rj, now))
			timeout = Min(timeout, (long) ((rj->throttled_until - now) / 1000) + 1);
	}

	dlist_foreach(it, &rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->state == ROW_FINISHED)
		{
			long		ms = r->retry_at > now ? (long) ((r->retry_at - now) / 1000) : 0;

			timeout = Min(timeout, ms);
		}
	}
	return Max(timeout, 1);
}

/* Plans of a job whose table changed are prepared again before their next use. */
static void
relcache_changed(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (relid == InvalidOid || rj->def->target == relid)
			rj->stale = true;
	}
}

static void
runner_exit(int code, Datum arg)
{
	llm_job_registry_runner_detach(MyDatabaseId);
}

void
llm_job_runner_main(Datum arg)
{
	Oid			database = DatumGetObjectId(arg);
	uint64		seq;
	bool		active = true;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
	llm_am_job_runner = true;

	/* before attaching: an exit at any point after it leaves the entry (runner_exit checks the pid) */
	before_shmem_exit(runner_exit, (Datum) 0);
	if (!llm_job_registry_runner_attach(database, &seq))
		proc_exit(0);			/* another runner serves this database */
	runner_cxt = AllocSetContextCreate(TopMemoryContext, "llm job runner", ALLOCSET_DEFAULT_SIZES);
	dlist_init(&rows);
	CacheRegisterRelcacheCallback(relcache_changed, (Datum) 0);
	token = (int64) GetCurrentTimestamp();

	/* a database without the extension has no jobs */
	StartTransactionCommand();
	if (!OidIsValid(get_extension_oid("llm", true)))
	{
		CommitTransactionCommand();
		while (!llm_job_registry_runner_done(database, seq))
			seq = llm_job_registry_wake_seq(database);
		proc_exit(0);
	}
	CommitTransactionCommand();

	/* the runner this one replaces is gone: its claims are free */
	begin_transaction("llm job runner: releasing claims");
	if (llm_queue_release_others(token) > 0)
		ereport(LOG, (errmsg("llm job runner: released the claims of the previous runner")));
	end_transaction();
	set_ps_display("running");

	for (;;)
	{
		TimestampTz now;

		seq = llm_job_registry_wake_seq(database);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* the window, the naptime or the models may have changed */
			pass_at = 0;
		}

		/*
		 * llm.enable_jobs off: the jobs wait, this runner too.  It leaves as
		 * a terminated runner does: its database stays wanted, so the
		 * launcher starts a runner again once the setting is on, and that
		 * runner releases these claims; the rows in flight are generated
		 * again then.
		 */
		if (!llm_enable_jobs)
		{
			ereport(LOG,
					(errmsg("llm job runner: llm.enable_jobs is off, the jobs of this database wait")));
			proc_exit(0);
		}
		receive_results();
		now = GetCurrentTimestamp();
		if (pass_wanted(seq, now))
		{
			pass_at = now;
			pass_seq = seq;
			active = write_and_claim();
			submit_claimed();
		}
		if (!active && n_rows == 0)
		{
			if (llm_job_registry_runner_done(database, seq))
				proc_exit(0);
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 next_timeout(), PG_WAIT_EXTENSION);
	}
}
