/*
 * runner_state.c — the job runner's own state (job_runner.h): its jobs,
 * its rows in flight and its claim token, the rows' lifecycle, and the
 * guarded steps every write and claim runs in (a subtransaction whose
 * ERROR is classified: the job's, a transient one, or the row's).  The
 * bottom of the runner's files: job_claim.c and job_write.c build on it,
 * job_runner.c runs the loop over all three.
 */
#include "job_runner.h"

MemoryContext runner_cxt;
List	   *runner_jobs = NIL;		/* RunnerJob * */
dlist_head	runner_rows;
int			runner_n_rows = 0;
int64		runner_token;

/* ---------- rows ---------- */

RunnerRow *
runner_row_new(RunnerJob *rj, Datum key, int attempts)
{
	RunnerRow  *r = MemoryContextAllocZero(runner_cxt, sizeof(RunnerRow));

	r->job = rj;
	r->key = key;
	r->attempts = attempts;
	r->state = ROW_CLAIMED;
	dlist_push_tail(&runner_rows, &r->node);
	rj->in_flight++;
	runner_n_rows++;
	return r;
}

void
runner_row_forget(RunnerRow *r)
{
	if (r->request != 0)
		llm_abort_request(r->request);
	if (r->call != NULL)
		runner_leave_call(r);	/* its shared request goes when no other row waits on it */
	dlist_delete(&r->node);
	r->job->in_flight--;
	runner_n_rows--;
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
void
runner_forget_job_rows(RunnerJob *rj)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &runner_rows)
	{
		RunnerRow  *r = dlist_container(RunnerRow, node, it.cur);

		if (r->job == rj)
			runner_row_forget(r);
	}
}

/* ---------- guarded steps ---------- */


/*
 * Run fn(arg) in a subtransaction; on ERROR roll it back and return the
 * error (copied into runner_cxt), else NULL.  Errors of an operator's
 * intervention (cancel, shutdown) are raised on.
 */
ErrorData *
runner_guarded(StepFn fn, void *arg)
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
bool
runner_job_level(int sqlstate)
{
	return ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION ||
		sqlstate == ERRCODE_UNDEFINED_OBJECT || ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_INVALID_SCHEMA_NAME;
}

/* A failure that was not the row's: the llm worker went away or replaced its engine. */
bool
runner_transient(int sqlstate)
{
	return sqlstate == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
		ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_OPERATOR_INTERVENTION;
}
