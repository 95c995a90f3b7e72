/*
 * on_error.c — the statement-level WARNING summary of on_error => 'null'
 * failures (on_error.h): executor hooks track the executor nesting level
 * (also what tells mailbox.c that a query finished),
 * ExecutorEnd at level 0 emits the summary, a pre-commit callback emits what
 * was noted outside any executor, an abort forgets it.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "utils/memutils.h"

#include "on_error.h"
#include "channel/mailbox.h"

static ExecutorRun_hook_type prev_ExecutorRun = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

static int	exec_nesting = 0;
static int64 null_failures = 0;
static int	first_failure_sqlstate = 0;
static char *first_failure_message = NULL;	/* TopMemoryContext */

void
llm_note_null_failure(int sqlstate, const char *message)
{
	if (null_failures++ == 0)
	{
		first_failure_sqlstate = sqlstate;
		first_failure_message = MemoryContextStrdup(TopMemoryContext, message);
	}
}

static void
reset_failures(void)
{
	null_failures = 0;
	first_failure_sqlstate = 0;
	if (first_failure_message)
		pfree(first_failure_message);
	first_failure_message = NULL;
}

static void
emit_failure_summary(void)
{
	int64		n = null_failures;
	int			sqlstate = first_failure_sqlstate;
	char	   *msg;

	if (n == 0)
		return;
	msg = pstrdup(first_failure_message ? first_failure_message : "unknown error");
	reset_failures();
	if (n == 1)
		ereport(WARNING,
				(errcode(sqlstate),
				 errmsg("llm request failed, returning NULL: %s", msg)));
	else
		ereport(WARNING,
				(errcode(sqlstate),
				 errmsg("%lld llm requests failed, returning NULL", (long long) n),
				 errdetail("First failure: %s", msg)));
}

static void
on_error_ExecutorRun(QueryDesc *queryDesc, ScanDirection direction, uint64 count,
				  bool execute_once)
{
	exec_nesting++;
	PG_TRY();
	{
		if (prev_ExecutorRun)
			prev_ExecutorRun(queryDesc, direction, count, execute_once);
		else
			standard_ExecutorRun(queryDesc, direction, count, execute_once);
	}
	PG_FINALLY();
	{
		exec_nesting--;
	}
	PG_END_TRY();
}

static void
on_error_ExecutorFinish(QueryDesc *queryDesc)
{
	exec_nesting++;
	PG_TRY();
	{
		if (prev_ExecutorFinish)
			prev_ExecutorFinish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
	}
	PG_FINALLY();
	{
		exec_nesting--;
	}
	PG_END_TRY();
	/* the query finished: the asynchronous ids it made are returned */
	llm_async_query_finished(exec_nesting);
}

int
llm_exec_nesting(void)
{
	return exec_nesting;
}

static void
on_error_ExecutorEnd(QueryDesc *queryDesc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	if (exec_nesting == 0)
		emit_failure_summary();
}

static void
on_error_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* failures outside any executor run (PL/pgSQL simple expressions) */
			emit_failure_summary();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			reset_failures();
			exec_nesting = 0;
			break;
		default:
			break;
	}
}

void
llm_on_error_init(void)
{
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = on_error_ExecutorRun;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = on_error_ExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = on_error_ExecutorEnd;
	RegisterXactCallback(on_error_xact_callback, NULL);
}
