/*
 * job_write.c — the job runner's writes (job_runner.c runs the loop):
 * finished results into their target rows, and the rows that vanished
 * while generating.
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
#include "job_runner.h"

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

	if (llm_queue_lock(job->id, r->key, runner_token) < 0)
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
void
runner_row_failed(RunnerRow *r, int sqlstate, const char *message)
{
	RunnerJob  *rj = r->job;

	if (r->attempts >= rj->def->max_attempts)
	{
		llm_queue_fail(rj->def->id, r->key, r->attempts, unpack_sql_state(sqlstate), message);
		rj->counts.failed++;
	}
	else
	{
		llm_queue_release(rj->def->id, r->key, runner_token, false, message);
		rj->exhausted = false;
	}
	runner_row_forget(r);
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
			/* a reload of the model aborts its requests: the result is of the file submitted to */
			if (r->model_sha256[0] != '\0')
				strlcpy(rj->counts.model_sha256, r->model_sha256, sizeof(rj->counts.model_sha256));
			runner_row_forget(r);
			break;
		case WRITE_SKIPPED:
			runner_count_skip(rj, reason);
			runner_row_forget(r);
			break;
		case WRITE_STALE:
			rj->counts.requeued++;
			if (r->attempts >= rj->def->max_attempts)
				runner_row_failed(r, ERRCODE_T_R_SERIALIZATION_FAILURE,
						   psprintf("the row's prompt changed while its result was in flight, %d times",
									r->attempts));
			else
			{
				llm_queue_release(rj->def->id, r->key, runner_token, false, NULL);
				rj->exhausted = false;
				runner_row_forget(r);
			}
			break;
		case WRITE_DEFERRED:
			r->retry_at = TimestampTzPlusMilliseconds(now, DEFER_MS);
			break;
		case WRITE_LOST:
			runner_row_forget(r);
			break;
	}
}

/* A row's result was ready to write? (not held back by a locked target row) */
bool
runner_write_due(const RunnerRow *r, TimestampTz now)
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

	if (!runner_write_due(r, now))
		return;
	if (r->result->failed)
	{
		if (runner_transient(r->result->sqlstate))
		{
			llm_queue_release(rj->def->id, r->key, runner_token, true, NULL);
			rj->exhausted = false;
			runner_row_forget(r);
		}
		else
			runner_row_failed(r, r->result->sqlstate,
					   llm_utf8_to_cstring(r->result->message, strlen(r->result->message)));
		return;
	}
	err = runner_guarded(write_step, &w);
	if (err != NULL)
	{
		if (runner_job_level(err->sqlerrcode))
			runner_fail_job(rj, err->message);
		else
			runner_row_failed(r, err->sqlerrcode, err->message);
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
	(void) llm_queue_lock_rows(job->id, keys, n, runner_token, claimed);
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
void
runner_write_job_results(RunnerJob *rj, TimestampTz now)
{
	dlist_iter	it;
	RunnerRow **batch;
	RunnerRow **single;
	int			n_batch = 0;
	int			n_single = 0;
	bool		any_due = false;

	dlist_foreach(it, &runner_rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job == rj && runner_write_due(r, now))
			any_due = true;
	}
	if (!any_due)
		return;
	batch = palloc(sizeof(RunnerRow *) * runner_n_rows);
	single = palloc(sizeof(RunnerRow *) * runner_n_rows);
	dlist_foreach(it, &runner_rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job != rj || r->state != ROW_FINISHED)
			continue;
		if (rj->batch && !r->result->failed)
			batch[n_batch++] = r;
		else if (runner_write_due(r, now))
			single[n_single++] = r;
	}
	if (n_batch == 1)
	{
		/* one row: the row's own protocol, if it is due */
		if (runner_write_due(batch[0], now))
			single[n_single++] = batch[0];
		n_batch = 0;
	}
	if (n_batch > 0)
	{
		WriteOutcome *outcome = palloc(sizeof(WriteOutcome) * n_batch);
		LlmSkipReason *reason = palloc(sizeof(LlmSkipReason) * n_batch);
		BatchStep	b = {rj, batch, n_batch, outcome, reason};
		ErrorData  *err = runner_guarded(batch_write_step, &b);

		if (err == NULL)
			for (int i = 0; i < n_batch; i++)
				settle_write(batch[i], outcome[i], reason[i], now);
		else
		{
			ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT ": %d rows written one at a time: %s",
									rj->def->id, n_batch, err->message)));
			for (int i = 0; i < n_batch && !runner_job_failed(rj); i++)
				write_finished(batch[i], now);	/* passes over a row not due */
		}
		pfree(outcome);
		pfree(reason);
	}
	for (int i = 0; i < n_single && !runner_job_failed(rj); i++)
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
	(void) llm_queue_try_lock_rows(job->id, keys, n, runner_token, claimed);
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
void
runner_drop_vanished_rows(RunnerJob *rj)
{
	dlist_iter	it;
	RunnerRow **running = palloc(sizeof(RunnerRow *) * Max(runner_n_rows, 1));
	bool	   *gone = palloc(sizeof(bool) * Max(runner_n_rows, 1));
	int			n = 0;

	dlist_foreach(it, &runner_rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job == rj && r->state == ROW_RUNNING)
			running[n++] = r;
	}
	if (n > 0)
	{
		VanishStep	v = {rj, running, n, gone};
		ErrorData  *err = runner_guarded(vanish_step, &v);

		if (err != NULL)
			ereport(DEBUG1, (errmsg("llm job " INT64_FORMAT ": rows in flight not looked for: %s",
									rj->def->id, err->message)));
		else
			for (int i = 0; i < n; i++)
				if (gone[i])
				{
					runner_count_skip(rj, LLM_SKIP_DELETED);
					runner_row_forget(running[i]);
				}
	}
	pfree(running);
	pfree(gone);
}
