/*
 * job_claim.c — the job runner's jobs (as llm_job has them: prepared,
 * counted, failed, throttled) and the claiming of their rows into the
 * in-flight window, shared among the jobs.  The loop is job_runner.c.
 */
#include "job_runner.h"

/* the job the next claim starts from (round robin among equals) */
static int	rotate = 0;

/* ---------- jobs ---------- */

/* A row rj needs no result for (llm_job.rows_skipped and skipped_by_reason). */
void
runner_count_skip(RunnerJob *rj, LlmSkipReason reason)
{
	Assert(reason >= 0 && reason < LLM_SKIP_N);
	rj->counts.skipped++;
	rj->counts.skipped_by[reason]++;
}

void
runner_report_counts(RunnerJob *rj)
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
 * stay listed until runner_forget_failed_rows(): this is called from inside loops
 * over the rows, which must not lose their next node; until then every
 * loop passes over the rows of a failed job.
 */
void
runner_fail_job(RunnerJob *rj, const char *msg)
{
	ereport(LOG, (errmsg("llm job " INT64_FORMAT " failed: %s", rj->def->id, msg)));
	(void) llm_job_set_state(rj->def->id, rj->def->state, LLM_JOB_FAILED, msg, false);
	rj->def->state = LLM_JOB_FAILED;
	llm_queue_release_job(rj->def->id, runner_token, true);
}

bool
runner_job_failed(const RunnerJob *rj)
{
	return rj->def->state == LLM_JOB_FAILED;
}

/* Whether rj's rows wait for its owner's token limit at now. */
bool
runner_throttled(const RunnerJob *rj, TimestampTz now)
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
void
runner_show_throttle(RunnerJob *rj, bool on)
{
	ThrottleStep t = {rj, on};
	ErrorData  *err = runner_guarded(show_throttle_step, &t);

	if (err != NULL)
		ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT ": %s", rj->def->id, err->message)));
	rj->throttle_shown = on;
}

/* Forget the rows of failed jobs (aborting their requests); outside any loop over the rows. */
void
runner_forget_failed_rows(void)
{
	ListCell   *lc;

	foreach(lc, runner_jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (runner_job_failed(rj) && rj->in_flight > 0)
			runner_forget_job_rows(rj);
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
bool
runner_job_ready(RunnerJob *rj)
{
	ErrorData  *err;

	if (rj->prepared && !rj->stale && llm_model_alias_known(rj->model) &&
		SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(rj->def->owner)) &&
		SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rj->def->target)) &&
		pg_class_aclcheck(rj->def->target, rj->def->owner, ACL_SELECT | ACL_UPDATE) == ACLCHECK_OK)
		return true;
	err = runner_guarded(prepare_step, rj);
	if (err == NULL)
	{
		/* the statements on many rows at once are an optimization: without them rows go one at a time */
		err = runner_guarded(prepare_batch_step, rj);
		if (err != NULL)
		{
			rj->batch = false;
			ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT " writes its rows one at a time: %s",
									rj->def->id, err->message)));
		}
		return true;
	}
	runner_fail_job(rj, err->message);
	return false;
}

static RunnerJob *
job_by_id(int64 id)
{
	ListCell   *lc;

	foreach(lc, runner_jobs)
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
	runner_forget_job_rows(rj);
	runner_drop_shared(rj);
	llm_job_unprepare(rj->def);
	MemoryContextDelete(rj->cxt);
	pfree(rj);
}

/*
 * The active jobs as the table has them now: new ones are added; a job
 * paused, failed, cancelled or deleted by its owner gives its work up
 * (claims released with the attempt given back).
 */
void
runner_refresh_jobs(void)
{
	MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "llm runner fetch", ALLOCSET_SMALL_SIZES);
	int			n;
	LlmJob	  **active = llm_job_fetch_active(tmp, &n);
	ListCell   *lc;
	List	   *keep = NIL;
	List	   *gone = NIL;

	foreach(lc, runner_jobs)
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
			runner_jobs = lappend(runner_jobs, rj);
			MemoryContextSwitchTo(old);
		}
		rj->def->state = active[i]->state;
		rj->listed = true;
	}
	foreach(lc, runner_jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (!rj->listed || rj->def->state == LLM_JOB_PAUSED)
		{
			if (rj->in_flight > 0)
			{
				runner_forget_job_rows(rj);
				llm_queue_release_job(rj->def->id, runner_token, true);
			}
			/* a paused job's answers are not kept: its table goes with it */
			runner_drop_shared(rj);
			runner_report_counts(rj);
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
	list_free(runner_jobs);
	runner_jobs = keep;
	foreach(lc, gone)
		job_free(lfirst(lc));
	list_free(gone);
	MemoryContextDelete(tmp);
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
int
runner_window_size(void)
{
	return Max(llm_batch_window, 1);
}

int
runner_window_cap(void)
{
	return runner_window_size() + Max(runner_window_size() / 4, 1);
}

bool
runner_job_active(const RunnerJob *rj)
{
	return rj->def->state == LLM_JOB_QUEUED || rj->def->state == LLM_JOB_RUNNING;
}

/*
 * A job's share of the window: the window divided among the active jobs
 * that have rows in flight or may have rows to claim (at least one row).
 */
int
runner_job_share(void)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, runner_jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (runner_job_active(rj) && (!rj->exhausted || rj->in_flight > 0))
			n++;
	}
	return Max(runner_window_size() / Max(n, 1), 1);
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
void
runner_claim_rows(List *runnable)
{
	int			cap = runner_window_cap();
	bool		refill = runner_n_rows < runner_window_size();
	int			share = runner_job_share();
	int			n_jobs = list_length(runnable);
	int			budget;
	RunnerJob **cand;
	int		   *want;
	int			n_cand = 0;
	LlmClaim   *claims;

	if (n_jobs == 0 || runner_n_rows >= cap)
		return;
	budget = cap - runner_n_rows;
	cand = palloc(sizeof(RunnerJob *) * n_jobs);
	want = palloc(sizeof(int) * n_jobs);
	for (int k = 0; k < n_jobs; k++)
	{
		RunnerJob  *rj = list_nth(runnable, (rotate + k) % n_jobs);

		if (runner_job_failed(rj) || rj->exhausted || runner_throttled(rj, GetCurrentTimestamp()))
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
			got = llm_queue_claim(rj->def->id, runner_token, want[i], claims, runner_cxt);
			for (int j = 0; j < got; j++)
				(void) runner_row_new(rj, claims[j].key, claims[j].attempts);
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
