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
 *      current llm.max_priority) or share an identical one of the job
 *      (job_shared.c), or settle the row; commit;
 *   4. exit when no job is active, nothing is in flight and no wake came
 *      (job_registry.h), else sleep on the latch.
 * Before the pass, the notifications of this database's asynchronous
 * requests that ended (llm_submit(..., notify => ...), mailbox.h) are sent,
 * each batch in a transaction of its own (send_notifications); the worker
 * wakes the runner for them, or has the launcher start one.
 *
 *
 * The write protocol of finished rows and its failures: job_write.c; the
 * jobs and the claiming of their rows: job_claim.c; the runner's state and
 * guarded steps: runner_state.c; what they share: job_runner.h.
 */
#include "job_runner.h"
#include "pg/sql/sql_embed.h"

#include "channel/mailbox.h"
#include "commands/async.h"

extern PGDLLEXPORT void llm_job_runner_main(Datum arg);

/* the last pass of transaction A: its time and the wake counter it answered */
static TimestampTz pass_at = 0;
static uint64 pass_seq = 0;

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
	runner_refresh_jobs();
	foreach(lc, runner_jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (rj->def->state != LLM_JOB_QUEUED && rj->def->state != LLM_JOB_RUNNING)
			continue;
		if (runner_job_ready(rj))
			runnable = lappend(runnable, rj);
	}
	foreach(lc, runnable)
	{
		RunnerJob  *rj = lfirst(lc);

		if (!runner_job_failed(rj))
			runner_write_job_results(rj, now);
		if (!runner_job_failed(rj))
			runner_drop_vanished_rows(rj);
	}
	runner_forget_failed_rows();
	runner_claim_rows(runnable);
	foreach(lc, runnable)
	{
		RunnerJob  *rj = lfirst(lc);

		if (runner_job_failed(rj))
			;					/* its rows are given back; refresh_jobs drops it */
		else if (rj->in_flight == 0 && !rj->def->continuous && llm_queue_count(rj->def->id) == 0)
		{
			LlmJobState from = rj->def->state;

			if (llm_job_set_state(rj->def->id, from, LLM_JOB_DONE, NULL, false))
				rj->def->state = LLM_JOB_DONE;
		}
		else
			active = true;
		runner_report_counts(rj);
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
	/* an embedding column: the row's embedding of the prompt's text (sql_embed.h) */
	if (job->out_kind != LLM_JOB_OUT_TEXT)
		llm_call_make_embed(&call);
	s->refused = llm_call_set_prompt(&call, cstring_to_text(row.prompt));
	/*
	 * under the owner's token limit as it is now: a row that does not fit
	 * waits, it does not fail; or an identical call of the job's answers it
	 */
	if (s->refused == NULL && runner_submit_shared(r, &call.req, &s->throttled_until))
		r->prompt = row.prompt;
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

	dlist_foreach(look, &runner_rows)
		if (dlist_container(RunnerRow, node, look.cur)->state == ROW_CLAIMED)
			any = true;
	if (!any)
		return;
	foreach(lc, runner_jobs)
		((RunnerJob *) lfirst(lc))->ceiling_read = false;
	begin_transaction("llm job runner: submitting rows");
	dlist_foreach_modify(it, &runner_rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);
		RunnerJob  *rj = r->job;
		SubmitStep	s = {r, LLM_SKIP_NONE, NULL, 0};
		ErrorData  *err;

		if (r->state != ROW_CLAIMED || runner_job_failed(rj))
			continue;
		if (runner_throttled(rj, GetCurrentTimestamp()))
		{
			/* back to the queue, attempt given back, until the window has room */
			llm_queue_release(rj->def->id, r->key, runner_token, true, NULL);
			runner_row_forget(r);
			continue;
		}
		if (r->attempts > rj->def->max_attempts)
		{
			/* its earlier attempts ended with the runner */
			r->attempts--;
			runner_row_failed(r, ERRCODE_ADMIN_SHUTDOWN,
					   psprintf("the job runner stopped while working on this row %d times", r->attempts));
			continue;
		}
		err = runner_guarded(submit_step, &s);
		if (err != NULL)
		{
			if (runner_job_level(err->sqlerrcode))
				runner_fail_job(rj, err->message);
			else if (runner_transient(err->sqlerrcode))
			{
				llm_queue_release(rj->def->id, r->key, runner_token, true, NULL);
				rj->exhausted = false;
				runner_row_forget(r);
			}
			else
				runner_row_failed(r, err->sqlerrcode, err->message);
		}
		else if (s.skipped != LLM_SKIP_NONE)
		{
			runner_count_skip(rj, s.skipped);
			runner_row_forget(r);
		}
		else if (s.refused != NULL)
			runner_row_failed(r, s.refused->sqlstate, s.refused->message);
		else if (s.throttled_until != 0)
		{
			rj->throttled_until = s.throttled_until;
			llm_queue_release(rj->def->id, r->key, runner_token, true, NULL);
			runner_row_forget(r);
		}
		else if (rj->throttle_shown)
		{
			/* a row went out: the job is no longer held back */
			runner_show_throttle(rj, false);
		}
	}
	foreach(lc, runner_jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (runner_throttled(rj, GetCurrentTimestamp()) && !rj->throttle_shown && !runner_job_failed(rj))
			runner_show_throttle(rj, true);
	}
	runner_forget_failed_rows();
	foreach(lc, runner_jobs)
		runner_report_counts(lfirst(lc));
	end_transaction();
}

/* Take the answers that arrived (a vanished llm worker fails every request: handled as transient). */
static void
receive_results(void)
{
	dlist_iter	it;
	MemoryContext old;

	if (runner_n_rows == 0)
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
	dlist_foreach(it, &runner_rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->state == ROW_RUNNING && runner_answer_ready(r))
			runner_take_answer(r);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Rows could be claimed (runner_claim_rows): a job whose last claim was not short
 * of rows, and fewer than llm.batch_window in flight, or fewer than the cap
 * and that job below its share.
 */
static bool
claim_wanted(void)
{
	ListCell   *lc;
	int			share;

	if (runner_n_rows >= runner_window_cap())
		return false;
	share = runner_job_share();
	foreach(lc, runner_jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (runner_job_active(rj) && !rj->exhausted && !runner_throttled(rj, GetCurrentTimestamp()) &&
			(runner_n_rows < runner_window_size() || rj->in_flight < share))
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
		foreach(lc, runner_jobs)
			((RunnerJob *) lfirst(lc))->exhausted = false;
		return true;
	}
	if (claim_wanted())
		return true;
	dlist_foreach(it, &runner_rows)
		if (runner_write_due(dlist_container(RunnerRow, node, it.cur), now))
			return true;
	return false;
}

/*
 * NOTIFY the channels of this database's ended asynchronous requests:
 * payload '<id> <status>', nothing of the prompt or the text (any role may
 * LISTEN on any channel).  Delivered when the transaction commits, to the
 * sessions listening then; a notification whose transaction fails is lost
 * (the result itself stays in the store until its time to live).
 */
static void
send_notifications(void)
{
	LlmAsyncNotice notes[64];
	bool		more = true;

	while (more)
	{
		int			n = llm_async_take_notices(MyDatabaseId, notes, lengthof(notes), &more);

		if (n == 0)
			break;
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		pgstat_report_activity(STATE_RUNNING, "llm job runner: notifying");
		for (int i = 0; i < n; i++)
			Async_Notify(notes[i].channel,
						 psprintf(UINT64_FORMAT " %s", notes[i].id, llm_async_state_name(notes[i].state)));
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
	}
}

static long
next_timeout(void)
{
	dlist_iter	it;
	TimestampTz now = GetCurrentTimestamp();
	long		timeout = llm_job_naptime_ms - (long) ((now - pass_at) / 1000);
	ListCell   *lc;

	/* a job held back by its owner's token limit is claimed from again when the window has room */
	foreach(lc, runner_jobs)
	{
		RunnerJob  *rj = lfirst(lc);

		if (runner_throttled(rj, now))
			timeout = Min(timeout, (long) ((rj->throttled_until - now) / 1000) + 1);
	}

	dlist_foreach(it, &runner_rows)
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

	foreach(lc, runner_jobs)
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
	dlist_init(&runner_rows);
	CacheRegisterRelcacheCallback(relcache_changed, (Datum) 0);
	runner_token = (int64) GetCurrentTimestamp();

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
	if (llm_queue_release_others(runner_token) > 0)
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
		send_notifications();
		receive_results();
		now = GetCurrentTimestamp();
		if (pass_wanted(seq, now))
		{
			pass_at = now;
			pass_seq = seq;
			active = write_and_claim();
			submit_claimed();
		}
		if (!active && runner_n_rows == 0)
		{
			if (llm_job_registry_runner_done(database, seq))
				proc_exit(0);
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 next_timeout(), PG_WAIT_EXTENSION);
	}
}
