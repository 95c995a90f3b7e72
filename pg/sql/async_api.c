/*
 * async_api.c — the asynchronous API's SQL functions: llm_submit (a request
 * that returns its id at once and outlives the statement, the transaction
 * and the session), llm_result (fetch it, waiting or not) and llm_cancel.
 * The requests live in the result store (mailbox.h), which says who
 * may fetch them, how long results are kept and what a worker restart does.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "channel/mailbox.h"
#include "on_error.h"
#include "sql_args.h"
#include "sql_result.h"
#include "common/utf8_text.h"

PG_FUNCTION_INFO_V1(pg_llm_submit);
PG_FUNCTION_INFO_V1(pg_llm_result);
PG_FUNCTION_INFO_V1(pg_llm_cancel);
PG_FUNCTION_INFO_V1(pg_llm_async_requests);
PG_FUNCTION_INFO_V1(pg_llm_cancel_all);

/*
 * llm_submit(prompt text, the options of llm_generate) -> bigint: the id of
 * the stored request; NULL for a NULL prompt.  Invalid options and a prompt
 * refused before sending (empty) raise here, as do a full store, the
 * role's share of it and its token limit (53400); on_error applies to
 * what llm_result later finds.  If the statement making the call fails,
 * the request is dropped (mailbox.h: ids no statement returned).
 * notify => channel: NOTIFY channel, '<id> <status>' when it ends, sent by
 * the job runner of this database (mailbox.h); the channel is checked here.
 */
Datum
pg_llm_submit(PG_FUNCTION_ARGS)
{
	LlmCall		call;
	LlmResult  *refused;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	(void) llm_call_build_text(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call, &refused);
	if (refused != NULL)
		llm_raise_result(refused);
	PG_RETURN_INT64((int64) llm_async_submit(&call.req, call.on_error_null, llm_exec_nesting(),
											 llm_notify_channel_arg(fcinfo)));
}

#define LLM_RESULT_COLS 8

/*
 * llm_result(id bigint, wait boolean DEFAULT true) -> record (text,
 * finish_reason, prompt_tokens, cached_tokens, completion_tokens, ttft_ms,
 * total_ms, status): the request's outcome like llm_complete's, status
 * 'done'; a failed or cancelled request raises its error (a cancelled
 * one 55000, not 57014: that would read as the statement's own cancel and
 * escape exception handlers), or with
 * on_error => 'null' at submission gives text NULL, finish_reason 'error'
 * and status 'failed' or 'cancelled'.  With wait => false an unfinished
 * request gives NULLs and status 'queued' or 'running'.  A result can be
 * fetched again until it expires.
 */
Datum
pg_llm_result(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[LLM_RESULT_COLS];
	bool		nulls[LLM_RESULT_COLS];
	LlmAsyncResult r;
	uint64		id;
	bool		wait;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "llm_result must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	id = (uint64) PG_GETARG_INT64(0);
	wait = PG_ARGISNULL(1) ? true : PG_GETARG_BOOL(1);

	llm_async_fetch(id, wait, &r);
	for (int i = 0; i < LLM_RESULT_COLS; i++)
		nulls[i] = true;
	values[7] = CStringGetTextDatum(llm_async_state_name(r.state));
	nulls[7] = false;
	if (r.state == LLM_ASYNC_FAILED || r.state == LLM_ASYNC_CANCELLED)
	{
		LlmResult  *res;

		if (r.state == LLM_ASYNC_CANCELLED)
			res = llm_local_failure(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
									psprintf("llm request " INT64_FORMAT " was cancelled", (int64) id));
		else
			res = llm_local_failure(r.sqlstate ? r.sqlstate : ERRCODE_INTERNAL_ERROR, r.error);
		(void) llm_result_usable(res, r.on_error_null);	/* raises unless on_error => 'null' */
		values[1] = CStringGetTextDatum(llm_finish_reason_name(LLM_FINISH_ERROR));
		nulls[1] = false;
	}
	else if (r.state == LLM_ASYNC_DONE)
	{
		values[0] = PointerGetDatum(llm_utf8_to_text(r.text, r.text_len));
		values[1] = CStringGetTextDatum(llm_finish_reason_name(r.finish_reason));
		values[2] = Int32GetDatum(r.usage.prompt_tokens);
		values[3] = Int32GetDatum(r.usage.cached_tokens);
		values[4] = Int32GetDatum(r.usage.completion_tokens);
		values[5] = Float8GetDatum(r.usage.ttft_ms);
		values[6] = Float8GetDatum(r.usage.total_ms);
		for (int i = 0; i < 7; i++)
			nulls[i] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * llm_cancel(id bigint) -> boolean: cancel a queued or running request (it
 * ends 'cancelled') or drop a finished one's result; false if there is no
 * such request.
 */
Datum
pg_llm_cancel(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(llm_async_cancel((uint64) PG_GETARG_INT64(0)));
}

/*
 * llm_cancel_all() -> bigint: drop every asynchronous request of the
 * current role (queued and running ones cancelled, results discarded, the
 * entries freed); returns how many.
 */
Datum
pg_llm_cancel_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(llm_async_cancel_all());
}

#define LLM_ASYNC_REQUESTS_COLS 4

/*
 * llm_async_requests() -> setof (id bigint, status text, submitted_at
 * timestamptz, ended_at timestamptz): the current role's asynchronous
 * requests in the store, with llm_result's status names ('queued',
 * 'running', 'cancelling' for a running one cancelled, 'done', 'failed',
 * 'cancelled').
 */
Datum
pg_llm_async_requests(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmAsyncListed *list;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	n = llm_async_list(&list);
	for (int i = 0; i < n; i++)
	{
		Datum		values[LLM_ASYNC_REQUESTS_COLS];
		bool		nulls[LLM_ASYNC_REQUESTS_COLS] = {false};

		values[0] = Int64GetDatum((int64) list[i].id);
		values[1] = CStringGetTextDatum(list[i].cancelling ? "cancelling" : llm_async_state_name(list[i].state));
		values[2] = TimestampTzGetDatum(list[i].submitted_at);
		values[3] = TimestampTzGetDatum(list[i].ended_at);
		nulls[3] = list[i].ended_at == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
