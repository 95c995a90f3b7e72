/*
 * sql_ai.c — the builds of the AI functions' calls (sql_ai.h).
 */
#include "postgres.h"

#include "ai_prompts.h"
#include "sql_ai.h"
#include "common/utf8_text.h"

static void
invalid_input(const char *fmt, const char *what)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg(fmt, what)));
}

/*
 * The input text (the first argument, not NULL): an empty one is refused as
 * llm_generate refuses an empty prompt, not answered from the instructions
 * around it alone.
 */
static char *
read_input(const NullableDatum *args)
{
	char	   *input = llm_text_to_utf8(DatumGetTextPP(args[0].value));

	if (input[0] == '\0')
		invalid_input("%s must not be empty", "the input");
	return input;
}

bool
llm_call_build_extract(const LlmArgMap *map, const NullableDatum *args, int nargs,
					   LlmCall *call, LlmResult **refused)
{
	char	   *input;

	*refused = NULL;
	if (nargs < 1 || args[0].isnull)
		return false;
	input = read_input(args);
	llm_call_read(map, args, nargs, call);
	if (call->json_schema == NULL)
		invalid_input("%s must not be NULL", "json_schema");

	/*
	 * max_tokens NULL (llm_extract's default): at least the schema's
	 * longest output in bytes when it has one, so that every output can
	 * complete (a token covers at least one byte); an unbounded schema keeps
	 * the table's default.
	 */
	if (call->max_tokens_default && call->grammar_max_bytes > call->req.params.max_tokens)
		call->req.params.max_tokens = (int32) Min(call->grammar_max_bytes, (int64) PG_INT32_MAX);
	/* the output is the schema's JSON from its first byte: nothing of it is a thinking section */
	call->req.strip_thinking = false;
	*refused = llm_call_set_prompt_utf8(call, llm_prompt_extract(input, call->json_schema, call->instruction));
	return true;
}

/* A SCORE request over the call's prompt: continuations conts[0..n), each followed by the end of turn. */
static LlmResult *
set_scoring(LlmCall *call, const char *prompt, const char *const *conts, int n, bool echo)
{
	size_t	   *lens = palloc(sizeof(size_t) * n);

	for (int i = 0; i < n; i++)
		lens[i] = strlen(conts[i]);
	call->req.mode = LLM_MODE_SCORE;
	call->req.n_continuations = n;
	call->req.continuations = conts;
	call->req.continuation_lens = lens;
	call->req.continuation_eot = true;
	call->req.continuation_echo = echo;
	return llm_call_set_prompt_utf8(call, prompt);
}

bool
llm_call_build_classify(const LlmArgMap *map, const NullableDatum *args, int nargs,
						LlmCall *call, LlmResult **refused)
{
	char	   *input;

	*refused = NULL;
	if (nargs < 1 || args[0].isnull)
		return false;
	input = read_input(args);
	llm_call_read(map, args, nargs, call);
	if (call->labels == NULL)
		invalid_input("%s must not be NULL", "labels");
	if (call->n_labels == 0)
		invalid_input("%s must not be empty", "labels");
	if (call->n_labels > LLM_MAX_CONTINUATIONS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("at most %d labels are allowed", LLM_MAX_CONTINUATIONS)));
	for (int i = 0; i < call->n_labels; i++)
	{
		if (call->labels[i] == NULL)
			invalid_input("%s must not contain NULL", "labels");
		if (call->labels[i][0] == '\0')
			invalid_input("%s must not contain empty strings", "labels");
		for (int j = 0; j < i; j++)
			if (strcmp(call->labels[i], call->labels[j]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("labels must not contain duplicates: \"%s\" appears twice",
								llm_utf8_to_cstring(call->labels[i], strlen(call->labels[i])))));
	}
	*refused = set_scoring(call, llm_prompt_classify(input, call->labels, call->n_labels, call->instruction),
						   call->labels, call->n_labels, true);
	return true;
}

bool
llm_call_build_filter(const LlmArgMap *map, const NullableDatum *args, int nargs,
					  LlmCall *call, LlmResult **refused)
{
	char	   *input;

	*refused = NULL;
	if (nargs < 1 || args[0].isnull)
		return false;
	input = read_input(args);
	llm_call_read(map, args, nargs, call);
	if (call->question == NULL)
		invalid_input("%s must not be NULL", "question");
	if (call->question[0] == '\0')
		invalid_input("%s must not be empty", "question");
	*refused = set_scoring(call, llm_prompt_filter(input, call->question), llm_filter_answers,
						   LLM_FILTER_N_ANSWERS, false);
	return true;
}
