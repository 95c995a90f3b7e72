/*
 * sql_agg.c — llm_agg(input text, instruction text [, options jsonb]): an
 * aggregate that answers one instruction over any number of rows, whatever
 * the model's context length, by map-reduce in its final function.
 *
 * Transition: keeps a UTF-8 copy of every non-NULL input in the
 * aggregate's memory; the instruction (NOT NULL, the same on every row) and
 * the options of the first row are kept.
 *
 * Final (docs/STRUCTURED_OUTPUT.md, "llm_agg"):
 *   1. every row, the templates and the separator are tokenized (all the
 *      requests sent before the first wait): their token counts;
 *   2. the chunk budget B = n_ctx - max_tokens - the template's tokens -
 *      LLM_AGG_CHAT_MARGIN (the chat template's own tokens and the model's
 *      default system message, which the backend does not see) - the system
 *      option's tokens, lowered to the chunk_tokens option when given;
 *   3. a row longer than B is cut into pieces of B tokens (detokenized; a
 *      character split at a cut becomes U+FFFD);
 *   4. the items are packed in order into chunks of at most B tokens
 *      (their tokens plus a separator each);
 *   5. one generation per chunk, all sent together so the worker batches
 *      them, then waited for: with one chunk its answer is the result;
 *   6. otherwise the answers (each at most max_tokens tokens) are the next
 *      level's items under the combine template, and 4-5 repeat.  B >=
 *      2 (max_tokens + separator + LLM_AGG_PART_OVERHEAD) guarantees at
 *      least two answers per chunk, so each level at least halves the
 *      count (log2 levels); a smaller B is ERROR 54000 once a combine is
 *      needed.
 * A failed generation fails the aggregate (on_error => 'null': NULL and
 * the statement's WARNING).  No rows (or only NULL inputs): NULL.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "ai_prompts.h"
#include "channel/client.h"
#include "common/model_list.h"
#include "common/registry.h"
#include "sql_args.h"
#include "sql_result.h"
#include "common/utf8_text.h"

PG_FUNCTION_INFO_V1(pg_llm_agg_trans);
PG_FUNCTION_INFO_V1(pg_llm_agg_final);

/* chat-template tokens the backend cannot count: role markers and the default system message */
#define LLM_AGG_CHAT_MARGIN 64

typedef struct AggState
{
	char	   *instruction;	/* UTF-8 */
	Jsonb	   *options;		/* NULL: none */
	char	  **rows;			/* UTF-8 copies of the non-NULL inputs */
	int			n_rows;
	int			cap_rows;
} AggState;

/* One item of a level: its text and its token count. */
typedef struct AggItem
{
	char	   *text;
	int			n_tokens;
} AggItem;

/*
 * llm_agg_trans(state internal, input text, instruction text [, options jsonb]) -> internal
 */
Datum
pg_llm_agg_trans(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	MemoryContext old;
	AggState   *st;
	char	   *instruction;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "llm_agg_trans called in non-aggregate context");
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("llm_agg: instruction must not be NULL")));
	instruction = llm_text_to_utf8(PG_GETARG_TEXT_PP(2));
	old = MemoryContextSwitchTo(aggcxt);
	if (PG_ARGISNULL(0))
	{
		st = palloc0(sizeof(AggState));
		st->instruction = pstrdup(instruction);
		if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		{
			Jsonb	   *opts = PG_GETARG_JSONB_P(3);

			st->options = palloc(VARSIZE(opts));
			memcpy(st->options, opts, VARSIZE(opts));
		}
	}
	else
	{
		st = (AggState *) PG_GETARG_POINTER(0);
		if (strcmp(st->instruction, instruction) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("llm_agg: instruction must be the same for every row")));
	}
	if (!PG_ARGISNULL(1))
	{
		if (st->n_rows == st->cap_rows)
		{
			st->cap_rows = st->cap_rows ? st->cap_rows * 2 : 64;
			st->rows = st->rows ? repalloc_huge(st->rows, sizeof(char *) * st->cap_rows) :
				palloc(sizeof(char *) * st->cap_rows);
		}
		st->rows[st->n_rows++] = llm_text_to_utf8(PG_GETARG_TEXT_PP(1));
	}
	MemoryContextSwitchTo(old);
	PG_RETURN_POINTER(st);
}

/* Token counts of texts[0..n) (UTF-8), all requests sent before the first wait; ids kept when wanted. */
static void
count_tokens(const char *model, char *const *texts, int n, int *counts, int32 **ids_out)
{
	uint64	   *req = palloc(sizeof(uint64) * Max(n, 1));

	for (int i = 0; i < n; i++)
		req[i] = llm_submit_tokenize(model, texts[i], strlen(texts[i]));
	for (int i = 0; i < n; i++)
	{
		LlmResult  *res;

		llm_wait_request(req[i]);
		res = llm_take_result(req[i]);
		if (res->failed)
			llm_raise_result(res);
		counts[i] = res->n_tokens;
		if (ids_out)
			ids_out[i] = res->tokens;
	}
	pfree(req);
}

/* The context length of the model that serves the call (alias model, NULL: the default). */
static int32
model_context_length(const char *model)
{
	int32		n_ctx;

	(void) llm_registry_model_state(model, &n_ctx);
	if (n_ctx <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("llm_agg: the model is not loaded")));
	return n_ctx;
}

/*
 * Generate one answer per chunk of items (chunk k: items first[k] ..
 * first[k+1] - 1), all sent before the first wait; answers[k] gets the text
 * and its token count.  False when one failed under on_error => 'null'.
 */
static bool
generate_chunks(LlmCall *call, const char *instruction, bool combine, AggItem *items, const int *first,
				int n_chunks, AggItem *answers)
{
	uint64	   *ids = palloc0(sizeof(uint64) * n_chunks);
	LlmResult **results = palloc0(sizeof(LlmResult *) * n_chunks);
	bool		ok = true;

	for (int k = 0; k < n_chunks; k++)
	{
		int			n = first[k + 1] - first[k];
		const char **texts = palloc(sizeof(char *) * n);
		char	   *prompt;

		for (int i = 0; i < n; i++)
			texts[i] = items[first[k] + i].text;
		prompt = combine ? llm_prompt_agg_combine(instruction, texts, n) :
			llm_prompt_agg_rows(instruction, texts, n);
		results[k] = llm_call_set_prompt_utf8(call, prompt);
		if (results[k] == NULL)
			ids[k] = llm_submit(&call->req);
	}
	for (int k = 0; k < n_chunks; k++)
	{
		if (ids[k] != 0)
		{
			llm_wait_request(ids[k]);
			results[k] = llm_take_result(ids[k]);
		}
		if (!llm_result_usable(results[k], call->on_error_null))
		{
			ok = false;
			continue;
		}
		answers[k].text = results[k]->text;
		/* a generated token sequence re-tokenizes into about as many tokens; 2 spare */
		answers[k].n_tokens = results[k]->usage.completion_tokens + 2;
	}
	return ok;
}

/*
 * Pack items[0..n) in order into chunks of at most budget tokens (each item
 * its tokens + per_item); first[0..n_chunks] bounds them.  Returns n_chunks.
 */
static int
pack(const AggItem *items, int n, int budget, int per_item, int *first)
{
	int			n_chunks = 0;
	int			used = 0;

	first[0] = 0;
	for (int i = 0; i < n; i++)
	{
		int			cost = items[i].n_tokens + per_item;

		if (i > first[n_chunks] && used + cost > budget)
		{
			first[++n_chunks] = i;
			used = 0;
		}
		used += cost;
	}
	first[++n_chunks] = n;
	return n_chunks;
}

/* llm_agg_final(state internal) -> text */
Datum
pg_llm_agg_final(PG_FUNCTION_ARGS)
{
	static const char *const agg_only[] = {"chunk_tokens", NULL};
	AggState   *st;
	LlmCall		call;
	char	   *fixed[4];
	int			fixed_tokens[4];
	int			n_fixed = 3;
	int		   *counts;
	int32	  **ids;
	int			n_ctx,
				budget,
				sep,
				max_out,
				n_items = 0;
	AggItem    *items;
	int		   *first;
	bool		combine = false;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	st = (AggState *) PG_GETARG_POINTER(0);
	if (st->n_rows == 0)
		PG_RETURN_NULL();
	llm_call_read_jsonb(st->options, agg_only, &call);
	if (call.req.grammar != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("llm_agg does not take choices, regex or json_schema")));
	max_out = call.req.params.max_tokens;

	/* 1. token counts: the fixed texts, then every row */
	fixed[0] = llm_prompt_agg_rows(st->instruction, NULL, 0);
	fixed[1] = llm_prompt_agg_combine(st->instruction, NULL, 0);
	fixed[2] = LLM_AGG_SEPARATOR;
	if (call.req.system != NULL)
		fixed[n_fixed++] = (char *) call.req.system;
	count_tokens(call.req.model, fixed, n_fixed, fixed_tokens, NULL);
	counts = palloc(sizeof(int) * st->n_rows);
	ids = palloc(sizeof(int32 *) * st->n_rows);
	count_tokens(call.req.model, st->rows, st->n_rows, counts, ids);

	/* 2. the budget */
	n_ctx = model_context_length(call.req.model);
	sep = fixed_tokens[2];
	budget = n_ctx - max_out - Max(fixed_tokens[0], fixed_tokens[1]) - LLM_AGG_CHAT_MARGIN -
		(n_fixed > 3 ? fixed_tokens[3] : 0);
	if (st->options != NULL)
	{
		JsonbValue	v;

		if (JB_ROOT_IS_OBJECT(st->options) &&
			getKeyJsonValueFromContainer(&st->options->root, "chunk_tokens", 12, &v) != NULL &&
			v.type != jbvNull)
		{
			int			ct;

			if (v.type != jbvNumeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("llm_agg: chunk_tokens must be a number")));
			ct = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v.val.numeric)));
			if (ct < 1)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("llm_agg: chunk_tokens must be at least 1")));
			budget = Min(budget, ct);
		}
	}
	if (budget < 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("llm_agg: max_tokens %d leaves no room for rows in a context of %d tokens",
						max_out, n_ctx)));

	/* 3. items: the rows, those over the budget cut into pieces */
	for (int i = 0; i < st->n_rows; i++)
		n_items += counts[i] <= budget ? 1 : (counts[i] + budget - 1) / budget;
	items = palloc(sizeof(AggItem) * n_items);
	{
		int			k = 0;
		int			n_pieces = 0;
		uint64	   *pieces = palloc(sizeof(uint64) * n_items);
		int		   *piece_at = palloc(sizeof(int) * n_items);

		for (int i = 0; i < st->n_rows; i++)
		{
			if (counts[i] <= budget)
			{
				items[k].text = st->rows[i];
				items[k++].n_tokens = counts[i];
				continue;
			}
			for (int off = 0; off < counts[i]; off += budget)
			{
				int			n = Min(budget, counts[i] - off);

				pieces[n_pieces] = llm_submit_detokenize(call.req.model, ids[i] + off, n);
				piece_at[n_pieces++] = k;
				items[k].text = NULL;
				items[k++].n_tokens = n;
			}
		}
		for (int p = 0; p < n_pieces; p++)
		{
			LlmResult  *res;

			llm_wait_request(pieces[p]);
			res = llm_take_result(pieces[p]);
			if (res->failed)
				llm_raise_result(res);
			items[piece_at[p]].text = res->text;
		}
	}

	/* 4-6. levels */
	first = palloc(sizeof(int) * (n_items + 1));
	for (;;)
	{
		int			per_item = sep + (combine ? LLM_AGG_PART_OVERHEAD : 0);
		int			n_chunks = pack(items, n_items, budget, per_item, first);
		AggItem    *answers;

		if (n_chunks > 1 && budget < 2 * (max_out + 2 + sep + LLM_AGG_PART_OVERHEAD))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("llm_agg: chunks of %d tokens cannot combine two answers of max_tokens %d",
							budget, max_out),
					 errhint("Lower max_tokens or raise chunk_tokens (the context length is %d tokens).",
							 n_ctx)));
		CHECK_FOR_INTERRUPTS();
		answers = palloc(sizeof(AggItem) * n_chunks);
		if (!generate_chunks(&call, st->instruction, combine, items, first, n_chunks, answers))
			PG_RETURN_NULL();
		if (n_chunks == 1)
			PG_RETURN_TEXT_P(llm_utf8_to_text(answers[0].text, strlen(answers[0].text)));
		items = answers;
		n_items = n_chunks;
		combine = true;
	}
}
