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

Datum
pg_llm_join(PG_FUNCTION_ARGS)
{
	const LlmArgMap *map = llm_arg_map(fcinfo);
	LlmCall		call;
	char	   *input;
	char	   *prompt;
	int		   *pos;			/* the sent candidates' positions (0-based) */
	int			n = 0;
	int			n_chunks;
	uint64	   *ids;
	LlmResult **results;
	Datum	   *matches;
	int			n_matches = 0;
	bool		failed = false;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	input = llm_text_to_utf8(PG_GETARG_TEXT_PP(0));
	if (input[0] == '\0')
		invalid_input("the input must not be empty");
	llm_call_read(map, fcinfo->args, PG_NARGS(), &call);
	if (call.question == NULL)
		invalid_input("question must not be NULL");
	if (call.question[0] == '\0')
		invalid_input("question must not be empty");

	pos = palloc(sizeof(int) * Max(call.n_candidates, 1));
	for (int i = 0; i < call.n_candidates; i++)
		if (call.candidates[i] != NULL && call.candidates[i][0] != '\0')
			pos[n++] = i;
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT4OID));

	prompt = llm_prompt_join(input, call.question);
	n_chunks = (n + LLM_JOIN_CHUNK - 1) / LLM_JOIN_CHUNK;
	ids = palloc0(sizeof(uint64) * n_chunks);
	results = palloc0(sizeof(LlmResult *) * n_chunks);
	for (int c = 0; c < n_chunks; c++)
	{
		int			first = c * LLM_JOIN_CHUNK;
		int			m = Min(n - first, LLM_JOIN_CHUNK);
		const char **conts = palloc(sizeof(char *) * (m + LLM_FILTER_N_ANSWERS));
		size_t	   *lens = palloc(sizeof(size_t) * (m + LLM_FILTER_N_ANSWERS));

		for (int j = 0; j < m + LLM_FILTER_N_ANSWERS; j++)
		{
			conts[j] = j < m ? call.candidates[pos[first + j]] : llm_filter_answers[j - m];
			lens[j] = strlen(conts[j]);
		}
		call.req.mode = LLM_MODE_SCORE;
		call.req.n_continuations = m + LLM_FILTER_N_ANSWERS;
		call.req.continuations = conts;
		call.req.continuation_lens = lens;
		call.req.continuation_eot = true;
		call.req.continuation_echo = false;
		call.req.continuation_answers = LLM_FILTER_N_ANSWERS;
		results[c] = llm_call_set_prompt_utf8(&call, prompt);
		if (results[c] == NULL)
			ids[c] = llm_submit(&call.req);
	}

	matches = palloc(sizeof(Datum) * n);
	for (int c = 0; c < n_chunks; c++)
	{
		int			first = c * LLM_JOIN_CHUNK;
		int			m = Min(n - first, LLM_JOIN_CHUNK);

		if (ids[c] != 0)
		{
			llm_wait_request(ids[c]);
			results[c] = llm_take_result(ids[c]);
		}
		if (!llm_result_usable(results[c], call.on_error_null))
		{
			failed = true;
			continue;
		}
		if (results[c]->n_scores != m * LLM_FILTER_N_ANSWERS)
			elog(ERROR, "llm: join result with %d scores for %d candidates", results[c]->n_scores, m);
		for (int j = 0; j < m; j++)
			if (llm_yes_no_scores(results[c]->scores + j * LLM_FILTER_N_ANSWERS))
				matches[n_matches++] = Int32GetDatum(pos[first + j] + 1);
	}
	if (failed)
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(construct_array(matches, n_matches, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}
