/*
 * sql_embed.c — embeddings from SQL (sql_embed.h): llm_embed (text and
 * text[]), llm_similarity, llm_rerank, llm_chunk and llm_cosine_distance.
 *
 * An embedding is an EMBED request (request.h): the input as raw text, one
 * prefill, the vector the engine pools from its final hidden states.  Every
 * function that needs several embeddings submits them all before waiting,
 * so they share the worker's batches; llm_embed(text) is batched across
 * rows by the LLM Batch node through its function-table row (sql_args.c).
 * Cosine arithmetic is in double precision over the real[] elements.
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"

#include "channel/client.h"
#include "common/model_list.h"
#include "sql_embed.h"
#include "sql_result.h"
#include "common/utf8_text.h"

PG_FUNCTION_INFO_V1(pg_llm_embed);
PG_FUNCTION_INFO_V1(pg_llm_embed_array);
PG_FUNCTION_INFO_V1(pg_llm_similarity);
PG_FUNCTION_INFO_V1(pg_llm_rerank);
PG_FUNCTION_INFO_V1(pg_llm_chunk);
PG_FUNCTION_INFO_V1(pg_llm_cosine_distance);

/* ---------- one embedding call ---------- */

void
llm_call_make_embed(LlmCall *call)
{
	call->raw = true;
	call->req.mode = LLM_MODE_EMBED;
}

bool
llm_call_build_embed(const LlmArgMap *map, const NullableDatum *args, int nargs,
					 LlmCall *call, LlmResult **refused)
{
	*refused = NULL;
	if (nargs < 1 || args[0].isnull)
		return false;
	llm_call_read(map, args, nargs, call);
	llm_call_make_embed(call);
	*refused = llm_call_set_prompt(call, DatumGetTextPP(args[0].value));
	return true;
}

Datum
llm_vector_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull)
{
	Datum	   *elems;

	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	if (res->vector == NULL || res->n_vector < 1)
		elog(ERROR, "llm: embedding request finished without a vector");
	elems = palloc(sizeof(Datum) * res->n_vector);
	for (int i = 0; i < res->n_vector; i++)
		elems[i] = Float4GetDatum(res->vector[i]);
	return PointerGetDatum(construct_array(elems, res->n_vector, FLOAT4OID, sizeof(float4),
										   true, TYPALIGN_INT));
}

/* The result of a request sent with llm_submit, waited for. */
static LlmResult *
wait_result(uint64 id)
{
	llm_wait_request(id);
	return llm_take_result(id);
}

/*
 * n embeddings of utf8 texts (NULL ones skipped: results[i] NULL) under
 * call's options, all submitted before the first wait.  A text refused
 * before sending (empty) is a failed result like one the worker refuses.
 */
static LlmResult **
embed_many(LlmCall *call, const char *const *utf8, int n)
{
	uint64	   *ids = palloc0(sizeof(uint64) * Max(n, 1));
	LlmResult **results = palloc0(sizeof(LlmResult *) * Max(n, 1));

	llm_call_make_embed(call);
	for (int i = 0; i < n; i++)
	{
		if (utf8[i] == NULL)
			continue;
		results[i] = llm_call_set_prompt_utf8(call, utf8[i]);
		if (results[i] == NULL)
			ids[i] = llm_submit(&call->req);
	}
	for (int i = 0; i < n; i++)
		if (ids[i] != 0)
			results[i] = wait_result(ids[i]);
	return results;
}

/* llm_embed(input text, model, truncate, on_error) -> real[]: the input's embedding */
Datum
pg_llm_embed(PG_FUNCTION_ARGS)
{
	const LlmArgMap *map = llm_arg_map(fcinfo);
	LlmCall		call;
	LlmResult  *res;
	Datum		result;
	bool		isnull;

	if (!llm_call_build_embed(map, fcinfo->args, PG_NARGS(), &call, &res))
		PG_RETURN_NULL();
	if (res == NULL)
		res = wait_result(llm_submit(&call.req));
	result = llm_vector_value(res, NULL, call.on_error_null, &isnull);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/* The elements of a one-dimensional text[] as UTF-8 (NULL elements NULL); ERROR 22023 if not 1-D. */
static const char **
utf8_elements(ArrayType *arr, const char *argname, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	const char **out;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = nulls[i] ? NULL : llm_text_to_utf8(DatumGetTextPP(elems[i]));
	return out;
}

/*
 * llm_embed(inputs text[], model, truncate, on_error) -> real[][]: row i
 * is the embedding of inputs[i]; a NULL input (or a failure under
 * on_error => 'null') is a row of NULLs; NULL when no input has an
 * embedding (a two-dimensional array needs a width); an empty array gives
 * an empty array.  All inputs are submitted before the first wait.
 */
Datum
pg_llm_embed_array(PG_FUNCTION_ARGS)
{
	LlmCall		call;
	const char **texts;
	int			n;
	LlmResult **results;
	int			dim = 0;
	Datum	   *out;
	bool	   *out_nulls;
	int			dims[2];
	int			lbs[2] = {1, 1};

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	llm_call_read(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call);
	llm_call_set_batch(&call);
	texts = utf8_elements(PG_GETARG_ARRAYTYPE_P(0), "inputs", &n);
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(FLOAT4OID));
	results = embed_many(&call, texts, n);
	for (int i = 0; i < n; i++)
	{
		if (results[i] == NULL || !llm_result_usable(results[i], call.on_error_null))
		{
			results[i] = NULL;
			continue;
		}
		if (dim != 0 && results[i]->n_vector != dim)
			elog(ERROR, "llm: embeddings of one model with different lengths");
		dim = results[i]->n_vector;
	}
	if (dim == 0)
		PG_RETURN_NULL();
	out = palloc(sizeof(Datum) * n * dim);
	out_nulls = palloc0(sizeof(bool) * n * dim);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < dim; j++)
		{
			out_nulls[i * dim + j] = results[i] == NULL;
			out[i * dim + j] = results[i] ? Float4GetDatum(results[i]->vector[j]) : (Datum) 0;
		}
	dims[0] = n;
	dims[1] = dim;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(out, out_nulls, 2, dims, lbs, FLOAT4OID,
											 sizeof(float4), true, TYPALIGN_INT));
}

/* ---------- cosine ---------- */

/* Cosine similarity of two vectors of n floats; NaN when either has norm 0. */
static double
cosine(const float *a, const float *b, int n)
{
	double		dot = 0,
				na = 0,
				nb = 0;

	for (int i = 0; i < n; i++)
	{
		dot += (double) a[i] * b[i];
		na += (double) a[i] * a[i];
		nb += (double) b[i] * b[i];
	}
	if (na == 0 || nb == 0)
		return get_float8_nan();
	return dot / (sqrt(na) * sqrt(nb));
}

/* A one-dimensional real[] without NULLs as floats (ERROR 22004 / 22023 otherwise). */
static float *
array_floats(ArrayType *arr, int *n)
{
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an embedding must be a one-dimensional array")));
	if (array_contains_nulls(arr))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("an embedding must not contain NULL elements")));
	*n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	return (float *) ARR_DATA_PTR(arr);
}

/*
 * llm_cosine_distance(real[], real[]) -> float8: 1 - cosine similarity,
 * as pgvector's <=> on vector (0 same direction, 2 opposite; NaN when
 * either has norm 0).  ERROR 22000 for different lengths.
 */
Datum
pg_llm_cosine_distance(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *b = PG_GETARG_ARRAYTYPE_P(1);
	int			na,
				nb;
	const float *fa = array_floats(a, &na);
	const float *fb = array_floats(b, &nb);

	if (na != nb)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("embeddings of different lengths: %d and %d", na, nb)));
	if (na == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("an embedding must not be empty")));
	PG_RETURN_FLOAT8(1.0 - cosine(fa, fb, na));
}

/*
 * llm_similarity(a text, b text, model) -> float8: the cosine similarity of
 * the two texts' embeddings, both submitted before waiting.  NULL if either
 * is NULL.
 */
Datum
pg_llm_similarity(PG_FUNCTION_ARGS)
{
	LlmCall		call;
	const char *texts[2];
	LlmResult **res;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	llm_call_read(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call);
	texts[0] = llm_text_to_utf8(PG_GETARG_TEXT_PP(0));
	texts[1] = llm_text_to_utf8(PG_GETARG_TEXT_PP(1));
	res = embed_many(&call, texts, 2);
	for (int i = 0; i < 2; i++)
		(void) llm_result_usable(res[i], false);
	if (res[0]->n_vector != res[1]->n_vector)
		elog(ERROR, "llm: embeddings of one model with different lengths");
	PG_RETURN_FLOAT8(cosine(res[0]->vector, res[1]->vector, res[0]->n_vector));
}

/*
 * llm_rerank(query text, documents text[], model) -> setof (index int,
 * score float8): each document's cosine similarity with the query (by
 * embeddings, all submitted at once), best first; index is the document's
 * position in documents (from its lower bound).  A NULL document has score
 * NULL and comes last; a NULL query or documents gives no rows.
 */
typedef struct RerankRow
{
	int			index;
	double		score;
	bool		isnull;
} RerankRow;

static int
rerank_cmp(const void *pa, const void *pb)
{
	const RerankRow *a = pa;
	const RerankRow *b = pb;

	if (a->isnull != b->isnull)
		return a->isnull ? 1 : -1;
	if (!a->isnull && a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->index - b->index;
}

Datum
pg_llm_rerank(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmCall		call;
	ArrayType  *docs;
	const char **texts;
	int			n;
	LlmResult **res;
	RerankRow  *rows;
	int			lb;

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		return (Datum) 0;
	llm_call_read(llm_arg_map(fcinfo), fcinfo->args, PG_NARGS(), &call);
	llm_call_set_batch(&call);
	docs = PG_GETARG_ARRAYTYPE_P(1);
	texts = utf8_elements(docs, "documents", &n);
	if (n == 0)
		return (Datum) 0;
	lb = ARR_LBOUND(docs)[0];
	/* the query is element n of one submission */
	texts = repalloc(texts, sizeof(char *) * (n + 1));
	texts[n] = llm_text_to_utf8(PG_GETARG_TEXT_PP(0));
	res = embed_many(&call, texts, n + 1);
	(void) llm_result_usable(res[n], false);
	rows = palloc(sizeof(RerankRow) * n);
	for (int i = 0; i < n; i++)
	{
		rows[i].index = lb + i;
		rows[i].isnull = res[i] == NULL;
		rows[i].score = 0;
		if (res[i] == NULL)
			continue;
		(void) llm_result_usable(res[i], false);
		if (res[i]->n_vector != res[n]->n_vector)
			elog(ERROR, "llm: embeddings of one model with different lengths");
		rows[i].score = cosine(res[n]->vector, res[i]->vector, res[n]->n_vector);
	}
	qsort(rows, n, sizeof(RerankRow), rerank_cmp);
	for (int i = 0; i < n; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, rows[i].isnull};

		values[0] = Int32GetDatum(rows[i].index);
		values[1] = Float8GetDatum(rows[i].score);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ---------- chunks ---------- */

/*
 * A unit of llm_chunk: bytes [start, end) of the UTF-8 text, its leading
 * whitespace included (so units are contiguous, and a pre-tokenizer that
 * splits at whitespace tokenizes each unit as it tokenizes it inside the
 * text), and its token count.
 */
typedef struct ChunkUnit
{
	int			start;
	int			end;
	int			n_tokens;
	int32	   *tokens;
} ChunkUnit;

/*
 * The text's units: sentences (ending after '.', '!' or '?' followed by
 * whitespace) and paragraphs (ending at a blank line); a text without
 * either is one unit.
 */
static ChunkUnit *
split_units(const char *s, int len, int *n_units)
{
	ChunkUnit  *units = palloc(sizeof(ChunkUnit) * 16);
	int			cap = 16;
	int			n = 0;
	int			start = 0;

	for (int i = 0; i < len; i++)
	{
		bool		cut = false;

		if ((s[i] == '.' || s[i] == '!' || s[i] == '?') && i + 1 < len &&
			(s[i + 1] == ' ' || s[i + 1] == '\n' || s[i + 1] == '\t' || s[i + 1] == '\r'))
			cut = true;
		else if (s[i] == '\n' && i + 1 < len && s[i + 1] == '\n')
			cut = true;
		if (!cut || i + 1 <= start)
			continue;
		if (n == cap)
		{
			cap *= 2;
			units = repalloc(units, sizeof(ChunkUnit) * cap);
		}
		units[n].start = start;
		units[n].end = i + 1;
		n++;
		start = i + 1;
	}
	if (start < len)
	{
		if (n == cap)
			units = repalloc(units, sizeof(ChunkUnit) * (cap + 1));
		units[n].start = start;
		units[n].end = len;
		n++;
	}
	*n_units = n;
	return units;
}

/* A chunk's text: bytes [start, end) of s without leading and trailing whitespace; NULL when empty. */
static text *
chunk_text(const char *s, int start, int end)
{
	while (start < end && isspace((unsigned char) s[start]))
		start++;
	while (end > start && isspace((unsigned char) s[end - 1]))
		end--;
	if (end <= start)
		return NULL;
	return llm_utf8_to_text(s + start, end - start);
}

/*
 * A set of text values materialized: InitMaterializedSRF wants a row type,
 * and a scalar set-returning function called in a target list has no
 * expected descriptor, so the one-column descriptor is made here.
 */
static void
init_text_srf(FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext old;
	TupleDesc	desc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	desc = CreateTemplateTupleDesc(1);
	TupleDescInitEntry(desc, (AttrNumber) 1, "llm_chunk", TEXTOID, -1, 0);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = BlessTupleDesc(desc);
	MemoryContextSwitchTo(old);
}

static void
put_chunk(ReturnSetInfo *rsinfo, text *t)
{
	Datum		v = PointerGetDatum(t);
	bool		isnull = false;

	if (t != NULL)
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &v, &isnull);
}

/*
 * llm_chunk(input text, max_tokens int, overlap int, model text) -> setof
 * text: input in pieces of at most max_tokens tokens of the model's
 * tokenizer (as llm_tokenize counts them: no special tokens), cut at
 * sentence and paragraph ends, each piece as many whole units as fit; the
 * next piece starts with the previous piece's last whole units that fit in
 * overlap tokens.  A unit longer than max_tokens alone is cut into windows
 * of max_tokens tokens (overlap tokens shared), detokenized.  Every unit's
 * tokens are requested at once.
 */
Datum
pg_llm_chunk(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *s;
	int			len;
	int32		max_tokens = PG_GETARG_INT32(1);
	int32		overlap = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	const char *model = NULL;
	ChunkUnit  *units;
	int			n;
	uint64	   *ids;
	int			first;

	init_text_srf(fcinfo);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		return (Datum) 0;
	if (max_tokens < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_tokens must be at least 1, not %d", max_tokens)));
	if (overlap < 0 || overlap >= max_tokens)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("overlap must be between 0 and max_tokens - 1 (%d), not %d",
						max_tokens - 1, overlap)));
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
	{
		char	   *alias = text_to_cstring(PG_GETARG_TEXT_PP(3));

		llm_model_alias_check(alias);
		model = alias;
	}
	s = llm_text_to_utf8(PG_GETARG_TEXT_PP(0));
	len = strlen(s);
	units = split_units(s, len, &n);
	ids = palloc0(sizeof(uint64) * Max(n, 1));
	for (int i = 0; i < n; i++)
		ids[i] = llm_submit_tokenize(model, s + units[i].start, units[i].end - units[i].start);
	for (int i = 0; i < n; i++)
	{
		LlmResult  *res = wait_result(ids[i]);

		if (res->failed)
			llm_raise_result(res);
		units[i].n_tokens = res->n_tokens;
		units[i].tokens = res->tokens;
	}

	first = 0;
	while (first < n)
	{
		int			last = first;
		int			total = units[first].n_tokens;
		int			next;
		int			kept;

		if (total > max_tokens)
		{
			/* one unit over the limit: windows of its tokens */
			int			step = max_tokens - overlap;

			for (int at = 0; at < total; at += step)
			{
				int			k = Min(max_tokens, total - at);
				LlmResult  *res = wait_result(llm_submit_detokenize(model, units[first].tokens + at, k));

				if (res->failed)
					llm_raise_result(res);
				put_chunk(rsinfo, chunk_text(res->text, 0, res->text_len));
				if (at + k >= total)
					break;
			}
			first++;
			continue;
		}
		while (last + 1 < n && total + units[last + 1].n_tokens <= max_tokens)
			total += units[++last].n_tokens;
		put_chunk(rsinfo, chunk_text(s, units[first].start, units[last].end));
		if (last + 1 >= n)
			break;
		/* the next piece starts with the whole units of this one that fit in overlap */
		next = last + 1;
		kept = 0;
		while (next - 1 > first && kept + units[next - 1].n_tokens <= overlap &&
			   kept + units[next - 1].n_tokens + units[last + 1].n_tokens <= max_tokens)
			kept += units[--next].n_tokens;
		first = next;
	}
	return (Datum) 0;
}
