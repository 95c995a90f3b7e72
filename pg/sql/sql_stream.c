/*
 * sql_stream.c — llm_generate_stream and llm_chat_stream: a generation
 * returned as rows while the worker produces it (docs/STREAMING.md).
 *
 * Each is a value-per-call set-returning function with the result columns
 * (delta text, finish_reason text, prompt_tokens int, completion_tokens
 * int).  The first call submits the request like llm_generate / llm_chat
 * (the same argument table, the same checks); every call then returns the
 * text that arrived since the previous row (llm_take_text: whole channel
 * messages, which the worker cuts at character boundaries), waiting on the
 * channel only while nothing has arrived.  After the request's final
 * message one more row carries the usage: delta '' (so the deltas'
 * concatenation is llm_generate's text), finish_reason, prompt_tokens and
 * completion_tokens; on every other row those three are NULL.
 *
 * Where the rows go: in a target list (and through a cursor) each row goes
 * out when it is asked for, so a FETCH returns as soon as the worker has
 * sent a delta; in FROM, PostgreSQL materialises a set-returning function
 * whole before the first row.
 *
 * Ending early: when the executor is shut down before the last row (CLOSE
 * of the cursor, a LIMIT reached in a query that then ends, a rescan) the
 * expression context's shutdown callback aborts the request, which the
 * worker drops at its next step, freeing its KV blocks.  An error or cancel
 * ends the (sub)transaction, whose abort aborts the request (client.h).  A
 * failure after rows were sent raises its error from the FETCH that finds
 * it; with on_error => 'null' it is instead a last row with delta NULL and
 * finish_reason 'error'.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "channel/client.h"
#include "common/utf8_text.h"
#include "sql_args.h"
#include "sql_result.h"

PG_FUNCTION_INFO_V1(pg_llm_generate_stream);
PG_FUNCTION_INFO_V1(pg_llm_chat_stream);

#define STREAM_COLS 4

/* One stream, in the function's multi-call memory. */
typedef struct StreamState
{
	uint64		id;				/* the request while it may still run; 0 after */
	bool		on_error_null;
	bool		callback;		/* the shutdown callback is registered */
	LlmResult  *final;			/* the request's end (or its refusal), for the last row */
	bool		last_sent;		/* the row of final went out */
	ExprContext *econtext;
} StreamState;

/* The executor stops asking (cursor closed, query ended or rescanned): the request is dropped. */
static void
stream_shutdown(Datum arg)
{
	StreamState *st = (StreamState *) DatumGetPointer(arg);

	st->callback = false;
	if (st->id != 0)
		llm_abort_request(st->id);
	st->id = 0;
}

typedef enum StreamKind
{
	STREAM_TEXT,
	STREAM_MESSAGES
} StreamKind;

/*
 * The first call: read the call as llm_generate / llm_chat reads it and
 * submit it.  False for a NULL first argument (no rows).
 */
static bool
stream_start(FunctionCallInfo fcinfo, StreamKind kind, StreamState *st, MemoryContext mcxt)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const LlmArgMap *map = llm_arg_map_for(fcinfo->flinfo->fn_oid, mcxt);
	LlmCall		call;
	LlmResult  *refused = NULL;

	if (kind == STREAM_TEXT)
	{
		if (!llm_call_build_text(map, fcinfo->args, PG_NARGS(), &call, &refused))
			return false;
	}
	else
	{
		if (PG_ARGISNULL(0))
			return false;
		llm_call_read(map, fcinfo->args, PG_NARGS(), &call);
		llm_call_set_messages_jsonb(&call, PG_GETARG_JSONB_P(0));
	}
	st->on_error_null = call.on_error_null;
	if (refused != NULL)
	{
		st->final = refused;
		return true;
	}
	st->id = llm_submit(&call.req);
	st->econtext = rsinfo->econtext;
	RegisterExprContextCallback(st->econtext, stream_shutdown, PointerGetDatum(st));
	st->callback = true;
	return true;
}

static Datum
stream_row(FuncCallContext *funcctx, Datum delta, bool delta_null, const LlmResult *final)
{
	Datum		values[STREAM_COLS];
	bool		nulls[STREAM_COLS] = {delta_null, true, true, true};

	values[0] = delta;
	if (final != NULL)
	{
		nulls[1] = false;
		if (final->failed)
			values[1] = CStringGetTextDatum(llm_finish_reason_name(LLM_FINISH_ERROR));
		else
		{
			values[1] = CStringGetTextDatum(llm_finish_reason_name(final->finish_reason));
			values[2] = Int32GetDatum(final->usage.prompt_tokens);
			values[3] = Int32GetDatum(final->usage.completion_tokens);
			nulls[2] = nulls[3] = false;
		}
	}
	return HeapTupleGetDatum(heap_form_tuple(funcctx->tuple_desc, values, nulls));
}

static Datum
stream_call(FunctionCallInfo fcinfo, StreamKind kind)
{
	FuncCallContext *funcctx;
	StreamState *st;
	StringInfoData buf;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;
		TupleDesc	tupdesc;
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		bool		started;

		if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) || rsinfo->econtext == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("set-valued function called in context that cannot accept a set")));
		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE ||
			tupdesc->natts != STREAM_COLS)
			elog(ERROR, "a streaming llm function must return (delta, finish_reason, prompt_tokens, completion_tokens)");
		funcctx->tuple_desc = BlessTupleDesc(tupdesc);
		st = palloc0(sizeof(StreamState));
		funcctx->user_fctx = st;
		started = stream_start(fcinfo, kind, st, funcctx->multi_call_memory_ctx);
		MemoryContextSwitchTo(old);
		if (!started)
			SRF_RETURN_DONE(funcctx);
	}
	funcctx = SRF_PERCALL_SETUP();
	st = funcctx->user_fctx;

	initStringInfo(&buf);
	while (st->final == NULL)
	{
		if (llm_take_text(st->id, &buf))
			SRF_RETURN_NEXT(funcctx, stream_row(funcctx, PointerGetDatum(llm_utf8_to_text(buf.data, buf.len)),
												false, NULL));
		if (llm_request_is_done(st->id))
		{
			MemoryContext old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);

			st->final = llm_take_result(st->id);
			st->id = 0;
			MemoryContextSwitchTo(old);
			break;
		}
		llm_channel_poll(true);
	}

	if (!st->last_sent)
	{
		LlmResult  *res = st->final;

		/* a failure raises here, after the rows already sent, unless on_error => 'null' */
		if (!llm_result_usable(res, st->on_error_null))
		{
			st->last_sent = true;
			SRF_RETURN_NEXT(funcctx, stream_row(funcctx, (Datum) 0, true, res));
		}
		/* text that came with the final message is a delta of its own */
		if (res->text_len > 0)
		{
			Datum		d = PointerGetDatum(llm_utf8_to_text(res->text, res->text_len));

			res->text_len = 0;
			SRF_RETURN_NEXT(funcctx, stream_row(funcctx, d, false, NULL));
		}
		st->last_sent = true;
		SRF_RETURN_NEXT(funcctx, stream_row(funcctx, CStringGetTextDatum(""), false, res));
	}
	if (st->callback)
	{
		UnregisterExprContextCallback(st->econtext, stream_shutdown, PointerGetDatum(st));
		st->callback = false;
	}
	SRF_RETURN_DONE(funcctx);
}

/*
 * llm_generate_stream(prompt text, the options of llm_generate) -> setof
 * (delta, finish_reason, prompt_tokens, completion_tokens)
 */
Datum
pg_llm_generate_stream(PG_FUNCTION_ARGS)
{
	return stream_call(fcinfo, STREAM_TEXT);
}

/*
 * llm_chat_stream(messages jsonb, the options of llm_chat) -> the same
 * rows as llm_generate_stream
 */
Datum
pg_llm_chat_stream(PG_FUNCTION_ARGS)
{
	return stream_call(fcinfo, STREAM_MESSAGES);
}
