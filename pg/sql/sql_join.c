/*
 * sql_join.c — llm_join(input, question, candidates text[], ...) -> int[]:
 * the 1-based positions of the candidates for which llm_filter's answer to
 * question about input || LLM_JOIN_SEPARATOR || candidate is yes.
 *
 * One row's candidates are scored in forked requests, not one request per
 * pair: llm_filter's prompt of input + LLM_JOIN_SEPARATOR is the user
 * message's start, each candidate ends it, and each (candidate, answer)
 * pair is a sequence of the request (request.h continuation_answers) that
 * holds exactly the token ids of llm_filter's own request for that pair
 * and scores its answers exactly as llm_filter's does.  So every pair's
 * answer is llm_filter's, bit for bit on a batch-invariant backend, while
 * the row's prompt is computed once per request instead of once per pair.
 *
 * A request holds at most LLM_JOIN_CHUNK candidates (LLM_MAX_CONTINUATIONS
 * pairs of a candidate and one of llm_filter's answers); more candidates
 * are split into that many per request, all sent before the first wait.
 * Each pair's sequence must fit the context as llm_filter's request for it
 * would (54000 otherwise); the candidates of one request never share one
 * context, each forks from the row's prompt in the paged KV cache.
 *
 * Batched: llm_call_build_join is the function-table row's build, so the
 * LLM Batch node sends many rows' requests at once (docs/SEMANTIC_JOINS.md,
 * "How it runs"); the positions of the candidates sent are the call's
 * value_arg, read by llm_join_value.  A row with no candidate to send, or
 * with more than one request holds, is answered by the build itself (its
 * requests sent and waited for there), as the function does row by row.
 *
 * NULLs: a NULL input gives NULL (a LEFT JOIN LATERAL over unnest() keeps
 * the row with NULLs, an inner one drops it); NULL candidates give '{}'
 * (array_agg over no rows is NULL); a NULL or empty candidate never matches
 * and is not sent.  An empty input, a NULL or empty question, a candidates
 * array of more than one dimension are 22023, as llm_filter's.  A failed
 * request raises, or with on_error => 'null' gives NULL for the row.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"

#include "ai_prompts.h"
#include "sql_ai.h"
#include "sql_args.h"
#include "sql_result.h"
#include "common/utf8_text.h"

PG_FUNCTION_INFO_V1(pg_llm_join);

#define LLM_JOIN_CHUNK (LLM_MAX_CONTINUATIONS / LLM_FILTER_N_ANSWERS)

static void
invalid_input(const char *msg)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", msg)));
}

/* The request's continuations: candidates pos[first..first+m) of call, then llm_filter's answers. */
static void
set_chunk(LlmCall *call, const int *pos, int first, int m)
{
	const char **conts = palloc(sizeof(char *) * (m + LLM_FILTER_N_ANSWERS));
	size_t	   *lens = palloc(sizeof(size_t) * (m + LLM_FILTER_N_ANSWERS));

	for (int j = 0; j < m + LLM_FILTER_N_ANSWERS; j++)
	{
		conts[j] = j < m ? call->candidates[pos[first + j]] : llm_filter_answers[j - m];
		lens[j] = strlen(conts[j]);
	}
	call->req.mode = LLM_MODE_SCORE;
	call->req.n_continuations = m + LLM_FILTER_N_ANSWERS;
	call->req.continuations = conts;
	call->req.continuation_lens = lens;
	call->req.continuation_eot = true;
	call->req.continuation_echo = false;
	call->req.continuation_answers = LLM_FILTER_N_ANSWERS;
}

/*
 * More candidates than one request holds: one request per LLM_JOIN_CHUNK,
 * all sent before the first wait, their scores in one result (the first
 * failure instead, if any).
 */
static LlmResult *
run_chunks(LlmCall *call, const char *prompt, const int *pos, int n)
{
	int			n_chunks = (n + LLM_JOIN_CHUNK - 1) / LLM_JOIN_CHUNK;
	uint64	   *ids = palloc0(sizeof(uint64) * n_chunks);
	LlmResult **results = palloc0(sizeof(LlmResult *) * n_chunks);
	LlmResult  *all = palloc0(sizeof(LlmResult));
	LlmResult  *failure = NULL;

	for (int c = 0; c < n_chunks; c++)
	{
		int			first = c * LLM_JOIN_CHUNK;

		set_chunk(call, pos, first, Min(n - first, LLM_JOIN_CHUNK));
		results[c] = llm_call_set_prompt_utf8(call, prompt);
		if (results[c] == NULL)
			ids[c] = llm_submit(&call->req);
	}
	all->scores = palloc(sizeof(double) * n * LLM_FILTER_N_ANSWERS);
	for (int c = 0; c < n_chunks; c++)
	{
		int			m = Min(n - c * LLM_JOIN_CHUNK, LLM_JOIN_CHUNK);

		if (ids[c] != 0)
		{
			llm_wait_request(ids[c]);
			results[c] = llm_take_result(ids[c]);
		}
		if (results[c]->failed)
		{
			if (failure == NULL)
				failure = results[c];
			continue;
		}
		if (results[c]->n_scores != m * LLM_FILTER_N_ANSWERS)
			elog(ERROR, "llm: join result with %d scores for %d candidates", results[c]->n_scores, m);
		memcpy(all->scores + all->n_scores, results[c]->scores, sizeof(double) * results[c]->n_scores);
		all->n_scores += results[c]->n_scores;
	}
	return failure != NULL ? failure : all;
}

bool
llm_call_build_join(const LlmArgMap *map, const NullableDatum *args, int nargs,
					LlmCall *call, LlmResult **refused)
{
	char	   *input;
	char	   *prompt;
	int32	   *pos;			/* the sent candidates' positions (0-based) */
	int			n = 0;

	*refused = NULL;
	if (nargs < 1 || args[0].isnull)
		return false;
	input = llm_text_to_utf8(DatumGetTextPP(args[0].value));
	if (input[0] == '\0')
		invalid_input("the input must not be empty");
	llm_call_read(map, args, nargs, call);
	if (call->question == NULL)
		invalid_input("question must not be NULL");
	if (call->question[0] == '\0')
		invalid_input("question must not be empty");

	pos = palloc(sizeof(int32) * Max(call->n_candidates, 1));
	for (int i = 0; i < call->n_candidates; i++)
		if (call->candidates[i] != NULL && call->candidates[i][0] != '\0')
			pos[n++] = i;
	call->value_arg = pos;
	call->value_arg_len = sizeof(int32) * n;
	if (n == 0)
	{
		/* nothing to score: no match, no request */
		*refused = palloc0(sizeof(LlmResult));
		return true;
	}
	prompt = llm_prompt_join(input, call->question);
	if (n > LLM_JOIN_CHUNK)
	{
		*refused = run_chunks(call, prompt, pos, n);
		return true;
	}
	set_chunk(call, pos, 0, n);
	*refused = llm_call_set_prompt_utf8(call, prompt);
	return true;
}

Datum
llm_join_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull)
{
	const int32 *pos = value_arg;
	int			n = res->n_scores / LLM_FILTER_N_ANSWERS;
	Datum	   *matches;
	int			n_matches = 0;

	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	if (res->n_scores % LLM_FILTER_N_ANSWERS != 0 || (n > 0 && pos == NULL))
		elog(ERROR, "llm: join result with %d scores", res->n_scores);
	matches = palloc(sizeof(Datum) * Max(n, 1));
	for (int j = 0; j < n; j++)
		if (llm_yes_no_scores(res->scores + j * LLM_FILTER_N_ANSWERS))
			matches[n_matches++] = Int32GetDatum(pos[j] + 1);
	return PointerGetDatum(construct_array(matches, n_matches, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

/* llm_join called row by row: the build, its request sent and waited for, the value. */
Datum
pg_llm_join(PG_FUNCTION_ARGS)
{
	const LlmArgMap *map = llm_arg_map(fcinfo);
	LlmCall		call;
	LlmResult  *res;
	Datum		result;
	bool		isnull;

	if (!llm_call_build_join(map, fcinfo->args, PG_NARGS(), &call, &res))
		PG_RETURN_NULL();
	if (res == NULL)
	{
		uint64		id = llm_submit(&call.req);

		llm_wait_request(id);
		res = llm_take_result(id);
	}
	result = llm_join_value(res, call.value_arg, call.on_error_null, &isnull);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}
