/*
 * sql_api.c — the SQL functions of pg_llm that talk to the worker:
 * llm_generate (text and text[]), llm_complete, llm_chat, llm_tokenize,
 * llm_detokenize, llm_render_chat and llm_count_tokens (the chat template's
 * prompt and its size, answered without running the model), and the AI functions llm_extract, llm_classify,
 * llm_classify_scores, llm_filter (their calls are built in sql_args.c,
 * their prompts in ai_prompts.c; llm_agg is sql_agg.c).  Optional arguments are read by name and checked through
 * the argument table (sql_args.h) before anything is sent; a NULL optional
 * argument means its default.  Text goes to the worker as UTF-8 and comes
 * back converted to the database encoding.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "channel/client.h"
#include "common/model_list.h"
#include "pg/batch/batch_dedup.h"
#include "sql_args.h"
#include "sql_result.h"
#include "common/utf8_text.h"

PG_FUNCTION_INFO_V1(pg_llm_generate);
PG_FUNCTION_INFO_V1(pg_llm_generate_array);
PG_FUNCTION_INFO_V1(pg_llm_complete);
PG_FUNCTION_INFO_V1(pg_llm_chat);
PG_FUNCTION_INFO_V1(pg_llm_tokenize);
PG_FUNCTION_INFO_V1(pg_llm_detokenize);
PG_FUNCTION_INFO_V1(pg_llm_extract);
PG_FUNCTION_INFO_V1(pg_llm_classify);
PG_FUNCTION_INFO_V1(pg_llm_classify_scores);
PG_FUNCTION_INFO_V1(pg_llm_filter);
PG_FUNCTION_INFO_V1(pg_llm_render_chat);
PG_FUNCTION_INFO_V1(pg_llm_count_tokens);
PG_FUNCTION_INFO_V1(pg_llm_count_tokens_messages);

static void
invalid_arg(const char *msg)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", msg)));
}

/*
 * Send one request and wait for its result, or share an identical
 * deterministic call of this call site in this statement
 * (pg/batch/batch_dedup.h); flinfo NULL: never shared.
 */
static LlmResult *
run_request(FmgrInfo *flinfo, const llm_request *req)
{
	return llm_row_shared_run(flinfo, req);
}

/*
 * llm_generate(prompt text, max_tokens, temperature, top_p, top_k, min_p,
 *              repetition_penalty, seed, stop, system, raw, on_error) -> text
 */
Datum
pg_llm_generate(PG_FUNCTION_ARGS)
{
	LlmCall		call;
	LlmResult  *res;
	Datum		result;
	bool		isnull;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	(void) llm_call_build_text(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call, &res);
	if (res == NULL)
		res = run_request(fcinfo->flinfo, &call.req);
	result = llm_text_value(res, NULL, call.on_error_null, &isnull);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/*
 * llm_complete(same arguments) -> record (text, finish_reason, prompt_tokens,
 * cached_tokens, completion_tokens, ttft_ms, total_ms).  With on_error =>
 * 'null' a failure gives text NULL and finish_reason 'error'.
 */
Datum
pg_llm_complete(PG_FUNCTION_ARGS)
{
	LlmCall		call;
	LlmResult  *res;
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7];

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "llm_complete must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	(void) llm_call_build_text(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call, &res);
	if (res == NULL)
		res = run_request(fcinfo->flinfo, &call.req);

	memset(nulls, 0, sizeof(nulls));
	if (!llm_result_usable(res, call.on_error_null))
	{
		for (int i = 0; i < 7; i++)
			nulls[i] = true;
		nulls[1] = false;
		values[1] = CStringGetTextDatum(llm_finish_reason_name(LLM_FINISH_ERROR));
	}
	else
	{
		values[0] = PointerGetDatum(llm_utf8_to_text(res->text, res->text_len));
		values[1] = CStringGetTextDatum(llm_finish_reason_name(res->finish_reason));
		values[2] = Int32GetDatum(res->usage.prompt_tokens);
		values[3] = Int32GetDatum(res->usage.cached_tokens);
		values[4] = Int32GetDatum(res->usage.completion_tokens);
		values[5] = Float8GetDatum(res->usage.ttft_ms);
		values[6] = Float8GetDatum(res->usage.total_ms);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * llm_generate(prompts text[], same options) -> text[]: every prompt is
 * submitted before waiting, so they share the worker's batches.  NULL
 * elements give NULL; the result has the input's shape.
 */
Datum
pg_llm_generate_array(PG_FUNCTION_ARGS)
{
	LlmCall		call;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	uint64	   *ids;
	LlmResult **results;
	Datum	   *out;
	bool	   *out_nulls;
	int			lbs[MAXDIM];
	ArrayType  *result;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	arr = PG_GETARG_ARRAYTYPE_P(0);
	llm_call_read(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call);
	llm_call_set_batch(&call);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(TEXTOID));

	ids = palloc0(sizeof(uint64) * n);
	results = palloc0(sizeof(LlmResult *) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			continue;
		results[i] = llm_call_set_prompt(&call, DatumGetTextPP(elems[i]));
		if (results[i] != NULL)
		{
			if (!call.on_error_null)
				llm_raise_result(results[i]);	/* the transaction's end aborts those sent */
			continue;
		}
		ids[i] = llm_submit(&call.req);
	}

	out = palloc(sizeof(Datum) * n);
	out_nulls = palloc0(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
	{
		if (ids[i] != 0)
		{
			llm_wait_request(ids[i]);
			results[i] = llm_take_result(ids[i]);
			ids[i] = 0;
		}
		if (results[i] == NULL)
			out_nulls[i] = true;
		else
			out[i] = llm_text_value(results[i], NULL, call.on_error_null, &out_nulls[i]);
	}
	for (int d = 0; d < ARR_NDIM(arr); d++)
		lbs[d] = ARR_LBOUND(arr)[d];
	result = construct_md_array(out, out_nulls, ARR_NDIM(arr), ARR_DIMS(arr), lbs,
								TEXTOID, -1, false, TYPALIGN_INT);
	PG_RETURN_ARRAYTYPE_P(result);
}

/*
 * llm_chat(messages jsonb, max_tokens, temperature, top_p, top_k, min_p,
 *          repetition_penalty, seed, stop, system, on_error, choices, regex,
 *          json_schema, priority, model, tools, enable_thinking,
 *          strip_thinking) -> text
 * messages: [{"role": "system"|"user"|"assistant", "content": "..."}, ...]
 * (OpenAI style), read by llm_call_set_messages_jsonb.
 */
Datum
pg_llm_chat(PG_FUNCTION_ARGS)
{
	LlmCall		call;
	LlmResult  *res;
	Datum		result;
	bool		isnull;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	llm_call_read(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call);
	llm_call_set_messages_jsonb(&call, PG_GETARG_JSONB_P(0));

	res = run_request(fcinfo->flinfo, &call.req);
	result = llm_text_value(res, NULL, call.on_error_null, &isnull);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/*
 * The model => argument of llm_tokenize and llm_detokenize (second, since
 * version 0.3; a call stored before passes none): the alias, checked.
 */
static const char *
tokenizer_model(FunctionCallInfo fcinfo)
{
	char	   *alias;

	if (PG_NARGS() < 2 || PG_ARGISNULL(1))
		return NULL;
	alias = text_to_cstring(PG_GETARG_TEXT_PP(1));
	llm_model_alias_check(alias);
	return alias;
}

/* llm_tokenize(text, model) -> int[]: the model's token ids of text as plain text (no template, no BOS). */
Datum
pg_llm_tokenize(PG_FUNCTION_ARGS)
{
	char	   *s = llm_text_to_utf8(PG_GETARG_TEXT_PP(0));
	uint64		id;
	LlmResult  *res;
	Datum	   *elems;

	id = llm_submit_tokenize(tokenizer_model(fcinfo), s, strlen(s));
	llm_wait_request(id);
	res = llm_take_result(id);
	if (res->failed)
		llm_raise_result(res);
	elems = palloc(sizeof(Datum) * Max(res->n_tokens, 1));
	for (int i = 0; i < res->n_tokens; i++)
		elems[i] = Int32GetDatum(res->tokens[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, res->n_tokens, INT4OID, 4, true, TYPALIGN_INT));
}

/* llm_detokenize(int[], model) -> text: the text of token ids (special tokens as their text). */
Datum
pg_llm_detokenize(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int32	   *ids;
	uint64		id;
	LlmResult  *res;

	if (ARR_NDIM(arr) > 1)
		invalid_arg("token ids must be a one-dimensional array");
	deconstruct_array(arr, INT4OID, 4, true, TYPALIGN_INT, &elems, &nulls, &n);
	ids = palloc(sizeof(int32) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("token ids must not be NULL")));
		ids[i] = DatumGetInt32(elems[i]);
	}
	id = llm_submit_detokenize(tokenizer_model(fcinfo), ids, n);
	llm_wait_request(id);
	res = llm_take_result(id);
	if (res->failed)
		llm_raise_result(res);
	PG_RETURN_TEXT_P(llm_utf8_to_text(res->text, res->text_len));
}

/*
 * A batchable function called row by row: its call built by its
 * function-table row (the same build and value the LLM Batch node uses),
 * sent, waited for and turned into its value.  NULL first argument: NULL.
 */
static Datum
batchable_call(FunctionCallInfo fcinfo)
{
	const LlmArgMap *map = llm_arg_map(fcinfo);
	LlmCall		call;
	LlmResult  *res;
	Datum		result;
	bool		isnull;

	if (!llm_call_build_text(map, fcinfo->args, PG_NARGS(), &call, &res))
		PG_RETURN_NULL();
	if (res == NULL)
		res = run_request(fcinfo->flinfo, &call.req);
	result = llm_arg_map_function(map)->batch_value(res, call.value_arg, call.on_error_null, &isnull);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/*
 * llm_extract(input text, json_schema jsonb, instruction text, max_tokens,
 *             temperature, top_p, top_k, min_p, repetition_penalty, seed,
 *             system, on_error) -> jsonb, always valid against json_schema;
 * max_tokens NULL follows the schema's longest output (sql_args.c)
 */
Datum
pg_llm_extract(PG_FUNCTION_ARGS)
{
	return batchable_call(fcinfo);
}

/* llm_classify(input text, labels text[], instruction text, system, on_error) -> text: one of labels */
Datum
pg_llm_classify(PG_FUNCTION_ARGS)
{
	return batchable_call(fcinfo);
}

/* llm_classify_scores(the same) -> jsonb {label: probability}, summing to 1 */
Datum
pg_llm_classify_scores(PG_FUNCTION_ARGS)
{
	return batchable_call(fcinfo);
}

/* llm_filter(input text, question text, system, on_error) -> boolean */
Datum
pg_llm_filter(PG_FUNCTION_ARGS)
{
	return batchable_call(fcinfo);
}

/*
 * A RENDER request (no model run, answered at once by the worker): the
 * prompt of messages or of a text, as the chat template renders it.
 */
static LlmResult *
render_request(llm_request *req, int model_arg, FunctionCallInfo fcinfo)
{
	LlmResult  *res;
	char		err[256];

	req->mode = LLM_MODE_RENDER;
	if (PG_NARGS() > model_arg && !PG_ARGISNULL(model_arg))
	{
		char	   *alias = text_to_cstring(PG_GETARG_TEXT_PP(model_arg));

		llm_model_alias_check(alias);
		req->model = alias;
	}
	if (llm_request_validate(req, err, sizeof(err)) != LLM_OK)
		invalid_arg(err);
	res = run_request(NULL, req);
	if (res->failed)
		llm_raise_result(res);
	return res;
}

/* messages jsonb (argument 0) as the request's prompt */
static void
messages_prompt(llm_request *req, FunctionCallInfo fcinfo)
{
	Jsonb	   *jb = PG_GETARG_JSONB_P(0);
	int			n = llm_jsonb_messages_count(jb);
	llm_chat_message *msgs = palloc(sizeof(llm_chat_message) * n);

	req->prompt_kind = LLM_PROMPT_MESSAGES;
	req->n_messages = llm_jsonb_messages(jb, msgs);
	req->messages = msgs;
}

/*
 * llm_render_chat(messages jsonb, add_generation_prompt boolean, model text,
 *                 tools jsonb, enable_thinking boolean) -> text: the prompt
 * exactly as the model sees it (HF's apply_chat_template(tokenize=False)).
 */
Datum
pg_llm_render_chat(PG_FUNCTION_ARGS)
{
	llm_request req;
	LlmResult  *res;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	llm_request_init(&req);
	messages_prompt(&req, fcinfo);
	req.no_generation_prompt = !PG_ARGISNULL(1) && !PG_GETARG_BOOL(1);
	llm_read_template_args(fcinfo, &req);
	res = render_request(&req, 2, fcinfo);
	PG_RETURN_TEXT_P(llm_utf8_to_text(res->text ? res->text : "", res->text ? res->text_len : 0));
}

/*
 * llm_count_tokens(prompt text, model text, tools jsonb, enable_thinking
 * boolean) -> int: the prompt's tokens as llm_generate would be charged for
 * them with the same chat template arguments, the template included.
 */
Datum
pg_llm_count_tokens(PG_FUNCTION_ARGS)
{
	llm_request req;
	char	   *s;

	/* not STRICT: a NULL model means the default one */
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = llm_text_to_utf8(PG_GETARG_TEXT_PP(0));
	llm_request_init(&req);
	req.prompt_kind = LLM_PROMPT_TEXT;
	req.prompt = s;
	req.prompt_len = strlen(s);
	llm_read_template_args(fcinfo, &req);
	PG_RETURN_INT32(render_request(&req, 1, fcinfo)->usage.prompt_tokens);
}

/*
 * llm_count_tokens(messages jsonb, model text, tools jsonb, enable_thinking
 * boolean) -> int: as llm_chat would be charged with the same chat
 * template arguments.
 */
Datum
pg_llm_count_tokens_messages(PG_FUNCTION_ARGS)
{
	llm_request req;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	llm_request_init(&req);
	messages_prompt(&req, fcinfo);
	llm_read_template_args(fcinfo, &req);
	PG_RETURN_INT32(render_request(&req, 1, fcinfo)->usage.prompt_tokens);
}
