/*
 * sql_api.c — the SQL functions of pg_llm that talk to the worker:
 * llm_generate (text and text[]), llm_complete, llm_chat, llm_tokenize,
 * llm_detokenize.  Arguments are checked here, before anything is sent, and
 * raise ERROR 22023 (invalid_parameter_value) naming the argument; a NULL
 * optional argument means its default.  Text goes to the worker as UTF-8 and
 * comes back converted to the database encoding.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "batch_scan.h"
#include "channel.h"
#include "llm.h"

PG_FUNCTION_INFO_V1(pg_llm_generate);
PG_FUNCTION_INFO_V1(pg_llm_generate_array);
PG_FUNCTION_INFO_V1(pg_llm_complete);
PG_FUNCTION_INFO_V1(pg_llm_chat);
PG_FUNCTION_INFO_V1(pg_llm_tokenize);
PG_FUNCTION_INFO_V1(pg_llm_detokenize);

/* Generation options shared by every generating function. */
typedef struct GenOptions
{
	LlmGenRequest req;
	bool		on_error_null;	/* on_error => 'null' */
} GenOptions;

/* NUL-terminated UTF-8 copy of a text datum. */
static char *
text_to_utf8(text *t)
{
	char	   *s = text_to_cstring(t);

	return pg_server_to_any(s, strlen(s), PG_UTF8);
}

/*
 * A text datum in the database encoding from (valid) UTF-8 bytes.  Characters
 * the database encoding cannot represent become '?' rather than failing the
 * whole generation: model output is not under the caller's control.
 */
static text *
utf8_to_text(const char *s, int len)
{
	int			db_encoding = GetDatabaseEncoding();
	Oid			proc;
	StringInfoData out;

	if (db_encoding == PG_UTF8 || db_encoding == PG_SQL_ASCII)
	{
		(void) pg_verify_mbstr(PG_UTF8, s, len, false);
		return cstring_to_text_with_len(s, len);
	}
	proc = FindDefaultConversionProc(PG_UTF8, db_encoding);
	if (!OidIsValid(proc))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("no conversion from UTF8 to %s", GetDatabaseEncodingName())));
	initStringInfo(&out);
	while (len > 0)
	{
		int			converted;
		int			char_len;

		enlargeStringInfo(&out, len * MAX_CONVERSION_GROWTH + 1);
		converted = pg_do_encoding_conversion_buf(proc, PG_UTF8, db_encoding,
												  (unsigned char *) s, len,
												  (unsigned char *) out.data + out.len,
												  out.maxlen - out.len, true);
		out.len += strlen(out.data + out.len);
		s += converted;
		len -= converted;
		if (len <= 0)
			break;
		/* s starts with a character the database encoding lacks */
		appendStringInfoChar(&out, '?');
		char_len = Min(pg_utf_mblen((const unsigned char *) s), len);
		s += char_len;
		len -= char_len;
	}
	return cstring_to_text_with_len(out.data, out.len);
}

#define ARG_OR(i, getter, dflt) (PG_ARGISNULL(i) ? (dflt) : getter(i))

static void
invalid_arg(const char *msg)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", msg)));
}

/*
 * Read and check the options following the prompt/messages argument.
 * Positions from `first`: max_tokens, temperature, top_p, top_k, min_p,
 * repetition_penalty, seed, stop, system, [raw,] on_error.
 */
static void
parse_options(FunctionCallInfo fcinfo, int first, bool has_raw, LlmRequestKind kind, GenOptions *o)
{
	LlmGenRequest *r = &o->req;
	int			a = first;
	int			on_error_arg;

	memset(o, 0, sizeof(*o));
	r->kind = kind;
	r->max_tokens = ARG_OR(a, PG_GETARG_INT32, 256);
	r->temperature = ARG_OR(a + 1, PG_GETARG_FLOAT8, 0.0);
	r->top_p = ARG_OR(a + 2, PG_GETARG_FLOAT8, 1.0);
	r->top_k = ARG_OR(a + 3, PG_GETARG_INT32, 0);
	r->min_p = ARG_OR(a + 4, PG_GETARG_FLOAT8, 0.0);
	r->repetition_penalty = ARG_OR(a + 5, PG_GETARG_FLOAT8, 1.0);
	r->has_seed = !PG_ARGISNULL(a + 6);
	r->seed = r->has_seed ? (uint64) PG_GETARG_INT64(a + 6) : 0;

	if (r->max_tokens < 1)
		invalid_arg("max_tokens must be at least 1");
	if (isnan(r->temperature) || isinf(r->temperature) || r->temperature < 0)
		invalid_arg("temperature must be a finite number >= 0");
	if (isnan(r->top_p) || r->top_p <= 0 || r->top_p > 1)
		invalid_arg("top_p must be in (0, 1]");
	if (r->top_k < 0)
		invalid_arg("top_k must be >= 0");
	if (isnan(r->min_p) || r->min_p < 0 || r->min_p > 1)
		invalid_arg("min_p must be in [0, 1]");
	if (isnan(r->repetition_penalty) || isinf(r->repetition_penalty) || r->repetition_penalty <= 0)
		invalid_arg("repetition_penalty must be a finite number > 0");

	if (!PG_ARGISNULL(a + 7))
	{
		ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(a + 7);
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (ARR_NDIM(arr) > 1)
			invalid_arg("stop must be a one-dimensional array");
		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		if (n > LLM_MAX_STOP_STRINGS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("at most %d stop strings are allowed", LLM_MAX_STOP_STRINGS)));
		r->stop = palloc(sizeof(char *) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			if (nulls[i])
				invalid_arg("stop strings must not be NULL");
			r->stop[i] = text_to_utf8(DatumGetTextPP(elems[i]));
			if (r->stop[i][0] == '\0')
				invalid_arg("stop strings must not be empty");
			if (strlen(r->stop[i]) > LLM_MAX_STOP_LEN)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("stop strings must be at most %d bytes", LLM_MAX_STOP_LEN)));
		}
		r->n_stop = n;
	}
	if (!PG_ARGISNULL(a + 8))
		r->system = text_to_utf8(PG_GETARG_TEXT_PP(a + 8));

	if (has_raw)
	{
		r->raw = ARG_OR(a + 9, PG_GETARG_BOOL, false);
		on_error_arg = a + 10;
	}
	else
		on_error_arg = a + 9;
	if (r->raw && r->system != NULL)
		invalid_arg("system cannot be combined with raw => true");

	if (!PG_ARGISNULL(on_error_arg))
	{
		char	   *mode = text_to_cstring(PG_GETARG_TEXT_PP(on_error_arg));

		if (strcmp(mode, "null") == 0)
			o->on_error_null = true;
		else if (strcmp(mode, "raise") != 0)
			invalid_arg("on_error must be 'raise' or 'null'");
	}
}

/* Raise a failed result as an ERROR with the worker's SQLSTATE. */
static void
raise_result(const LlmResult *res)
{
	ereport(ERROR,
			(errcode(res->sqlstate),
			 errmsg("%s", text_to_cstring(utf8_to_text(res->message, strlen(res->message))))));
}

/*
 * on_error => 'null': a per-row failure becomes NULL; the failures of one
 * statement are reported by one WARNING at its end (batch_scan.c).
 */
static void
warn_result(const LlmResult *res)
{
	llm_note_null_failure(res->sqlstate,
						  text_to_cstring(utf8_to_text(res->message, strlen(res->message))));
}

/* A failed result for a prompt rejected before sending. */
static LlmResult *
local_failure(int sqlstate, const char *message)
{
	LlmResult  *res = palloc0(sizeof(LlmResult));

	res->failed = true;
	res->sqlstate = sqlstate;
	res->message = pstrdup(message);
	return res;
}

/*
 * Run one GENERATE request for prompt (already in opts) and wait.  An empty
 * prompt is refused here (ERROR 22023 "prompt must not be empty").
 */
static LlmResult *
generate_one(GenOptions *o, text *prompt)
{
	uint64		id;

	o->req.prompt = text_to_utf8(prompt);
	if (o->req.prompt[0] == '\0')
		return local_failure(ERRCODE_INVALID_PARAMETER_VALUE, "prompt must not be empty");
	id = llm_submit_generate(&o->req);
	llm_wait_request(id);
	return llm_take_result(id);
}

/* Returns true when res is usable; raises or warns according to on_error. */
static bool
check_result(const GenOptions *o, const LlmResult *res)
{
	if (!res->failed)
		return true;
	if (o->on_error_null)
	{
		warn_result(res);
		return false;
	}
	raise_result(res);
	return false;				/* unreachable */
}

/*
 * llm_generate(prompt text, max_tokens, temperature, top_p, top_k, min_p,
 *              repetition_penalty, seed, stop, system, raw, on_error) -> text
 */
Datum
pg_llm_generate(PG_FUNCTION_ARGS)
{
	LlmGenRequest req;
	bool		on_error_null;
	LlmResult  *res;
	Datum		result;
	bool		isnull;

	if (!llm_generate_build_request(fcinfo, &req, &on_error_null, &res))
		PG_RETURN_NULL();
	if (res == NULL)
	{
		uint64		id = llm_submit_generate(&req);

		llm_wait_request(id);
		res = llm_take_result(id);
	}
	result = llm_generate_result_datum(res, on_error_null, &isnull);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/*
 * The request of one llm_generate(text, ...) call, built from fcinfo's 12
 * arguments exactly as the function does (shared by the function and the
 * batch scan node, batch_scan.c).  Returns false for a NULL prompt (the
 * result is NULL; options are then not checked, like the function).  Raises
 * ERROR 22023 for invalid options.  *local is set to a failed result for a
 * prompt refused before sending (empty), else NULL.
 */
bool
llm_generate_build_request(FunctionCallInfo fcinfo, LlmGenRequest *req,
						   bool *on_error_null, LlmResult **local)
{
	GenOptions	o;

	*local = NULL;
	if (PG_ARGISNULL(0))
		return false;
	parse_options(fcinfo, 1, true, LLM_REQ_GENERATE, &o);
	o.req.prompt = text_to_utf8(PG_GETARG_TEXT_PP(0));
	if (o.req.prompt[0] == '\0')
		*local = local_failure(ERRCODE_INVALID_PARAMETER_VALUE, "prompt must not be empty");
	*req = o.req;
	*on_error_null = o.on_error_null;
	return true;
}

/*
 * llm_generate's value for a finished result: the text in the database
 * encoding; a failure raises its ERROR, or with on_error_null is noted for
 * the statement's WARNING summary and gives *isnull.
 */
Datum
llm_generate_result_datum(const LlmResult *res, bool on_error_null, bool *isnull)
{
	GenOptions	o;

	memset(&o, 0, sizeof(o));
	o.on_error_null = on_error_null;
	*isnull = !check_result(&o, res);
	if (*isnull)
		return (Datum) 0;
	return PointerGetDatum(utf8_to_text(res->text, res->text_len));
}

/*
 * llm_complete(same arguments) -> record (text, finish_reason, prompt_tokens,
 * cached_tokens, completion_tokens, ttft_ms, total_ms).  With on_error =>
 * 'null' a failure gives text NULL and finish_reason 'error'.
 */
Datum
pg_llm_complete(PG_FUNCTION_ARGS)
{
	GenOptions	o;
	LlmResult  *res;
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7];

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "llm_complete must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	parse_options(fcinfo, 1, true, LLM_REQ_GENERATE, &o);
	res = generate_one(&o, PG_GETARG_TEXT_PP(0));

	memset(nulls, 0, sizeof(nulls));
	if (!check_result(&o, res))
	{
		for (int i = 0; i < 7; i++)
			nulls[i] = true;
		nulls[1] = false;
		values[1] = CStringGetTextDatum("error");
	}
	else
	{
		values[0] = PointerGetDatum(utf8_to_text(res->text, res->text_len));
		values[1] = CStringGetTextDatum(res->finish_reason);
		values[2] = Int32GetDatum(res->prompt_tokens);
		values[3] = Int32GetDatum(res->cached_tokens);
		values[4] = Int32GetDatum(res->completion_tokens);
		values[5] = Float8GetDatum(res->ttft_ms);
		values[6] = Float8GetDatum(res->total_ms);
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
	GenOptions	o;
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
	parse_options(fcinfo, 1, true, LLM_REQ_GENERATE, &o);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(TEXTOID));

	ids = palloc0(sizeof(uint64) * n);
	results = palloc0(sizeof(LlmResult *) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			continue;
		o.req.prompt = text_to_utf8(DatumGetTextPP(elems[i]));
		if (o.req.prompt[0] == '\0')
		{
			results[i] = local_failure(ERRCODE_INVALID_PARAMETER_VALUE, "prompt must not be empty");
			if (!o.on_error_null)
				raise_result(results[i]);	/* before submitting anything */
			continue;
		}
		ids[i] = llm_submit_generate(&o.req);
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
		if (results[i] == NULL || !check_result(&o, results[i]))
		{
			out_nulls[i] = true;
			out[i] = (Datum) 0;
		}
		else
			out[i] = PointerGetDatum(utf8_to_text(results[i]->text, results[i]->text_len));
	}
	for (int d = 0; d < ARR_NDIM(arr); d++)
		lbs[d] = ARR_LBOUND(arr)[d];
	result = construct_md_array(out, out_nulls, ARR_NDIM(arr), ARR_DIMS(arr), lbs,
								TEXTOID, -1, false, TYPALIGN_INT);
	PG_RETURN_ARRAYTYPE_P(result);
}

/* A string member of a jsonb object, UTF-8; NULL if missing or not a string. */
static char *
jsonb_object_string(JsonbContainer *obj, const char *key)
{
	JsonbValue	v;
	char	   *s;

	if (getKeyJsonValueFromContainer(obj, key, strlen(key), &v) == NULL || v.type != jbvString)
		return NULL;
	s = pnstrdup(v.val.string.val, v.val.string.len);
	return pg_server_to_any(s, strlen(s), PG_UTF8);
}

/*
 * llm_chat(messages jsonb, max_tokens, temperature, top_p, top_k, min_p,
 *          repetition_penalty, seed, stop, system, on_error) -> text
 * messages: [{"role": "system"|"user"|"assistant", "content": "..."}, ...]
 * (OpenAI style); system, if given, is put before them.
 */
Datum
pg_llm_chat(PG_FUNCTION_ARGS)
{
	GenOptions	o;
	Jsonb	   *jb;
	int			n;
	int			k = 0;
	uint64		id;
	LlmResult  *res;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	jb = PG_GETARG_JSONB_P(0);
	parse_options(fcinfo, 1, false, LLM_REQ_CHAT, &o);

	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		invalid_arg("messages must be a JSON array of {\"role\": ..., \"content\": ...} objects");
	n = JB_ROOT_COUNT(jb);
	if (n == 0)
		invalid_arg("messages must not be empty");
	if (n + 1 > LLM_MAX_MESSAGES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("at most %d messages are allowed", LLM_MAX_MESSAGES - 1)));

	o.req.roles = palloc(sizeof(char *) * (n + 1));
	o.req.contents = palloc(sizeof(char *) * (n + 1));
	if (o.req.system)
	{
		o.req.roles[k] = "system";
		o.req.contents[k] = o.req.system;
		k++;
	}
	for (int i = 0; i < n; i++)
	{
		JsonbValue *elem = getIthJsonbValueFromContainer(&jb->root, i);
		char	   *role;
		char	   *content;

		if (elem == NULL || elem->type != jbvBinary ||
			!JsonContainerIsObject(elem->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %d is not a JSON object", i + 1)));
		role = jsonb_object_string(elem->val.binary.data, "role");
		content = jsonb_object_string(elem->val.binary.data, "content");
		if (role == NULL || content == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %d must have string \"role\" and \"content\" members", i + 1)));
		if (strcmp(role, "system") != 0 && strcmp(role, "user") != 0 &&
			strcmp(role, "assistant") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %d has unknown role \"%s\"", i + 1, role),
					 errhint("Roles are \"system\", \"user\" and \"assistant\".")));
		o.req.roles[k] = role;
		o.req.contents[k] = content;
		k++;
	}
	o.req.n_messages = k;
	o.req.system = NULL;

	id = llm_submit_generate(&o.req);
	llm_wait_request(id);
	res = llm_take_result(id);
	if (!check_result(&o, res))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(utf8_to_text(res->text, res->text_len));
}

/* llm_tokenize(text) -> int[]: the model's token ids of text as plain text (no template, no BOS). */
Datum
pg_llm_tokenize(PG_FUNCTION_ARGS)
{
	char	   *s = text_to_utf8(PG_GETARG_TEXT_PP(0));
	uint64		id;
	LlmResult  *res;
	Datum	   *elems;

	id = llm_submit_tokenize(s, strlen(s));
	llm_wait_request(id);
	res = llm_take_result(id);
	if (res->failed)
		raise_result(res);
	elems = palloc(sizeof(Datum) * Max(res->n_tokens, 1));
	for (int i = 0; i < res->n_tokens; i++)
		elems[i] = Int32GetDatum(res->tokens[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, res->n_tokens, INT4OID, 4, true, TYPALIGN_INT));
}

/* llm_detokenize(int[]) -> text: the text of token ids (special tokens as their text). */
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
	id = llm_submit_detokenize(ids, n);
	llm_wait_request(id);
	res = llm_take_result(id);
	if (res->failed)
		raise_result(res);
	PG_RETURN_TEXT_P(utf8_to_text(res->text, res->text_len));
}
