/*
 * test_request.c — the checks of a request (request.h): defaults are
 * valid, every out-of-range option and every malformed shape is rejected
 * with a message naming the argument as SQL names it; a deep copy
 * (llm_request_copy) owns every string and array it points at.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/request.h"
#include "unit.h"

/* A request with every pointer field set, copied, then its sources overwritten: the copy is intact. */
static void
test_copy(void)
{
	char		prompt[] = "the prompt",
				sys[] = "be brief",
				role[] = "user",
				content[] = "hello",
				stop0[] = "END",
				cont0[] = "yes",
				cont1[] = "no",
				grammar[] = "\x02(yes|no)",
				model[] = "small";
	llm_chat_message msgs[1] = {{role, content, 5}};
	int32_t		toks[3] = {7, 8, 9};
	const char *stops[1] = {stop0};
	const char *conts[2] = {cont0, cont1};
	size_t		lens[2] = {3, 2};
	llm_request q,
			   *c;
	bool		ok;

	llm_request_init(&q);
	q.prompt = prompt;
	q.prompt_len = strlen(prompt);
	q.system = sys;
	q.system_len = strlen(sys);
	q.messages = msgs;
	q.n_messages = 1;
	q.tokens = toks;
	q.n_tokens = 3;
	q.params.stop = stops;
	q.params.n_stop = 1;
	q.continuations = conts;
	q.continuation_lens = lens;
	q.n_continuations = 2;
	q.grammar = grammar;
	q.grammar_len = strlen(grammar);
	q.model = model;
	q.params.max_tokens = 77;
	c = llm_request_copy(&q);
	CHECK(c != NULL, "copied");
	if (c == NULL)
		return;
	memset(prompt, 'x', sizeof(prompt) - 1);
	memset(sys, 'x', sizeof(sys) - 1);
	memset(role, 'x', sizeof(role) - 1);
	memset(content, 'x', sizeof(content) - 1);
	memset(stop0, 'x', sizeof(stop0) - 1);
	memset(cont0, 'x', sizeof(cont0) - 1);
	memset(grammar, 'x', sizeof(grammar) - 1);
	memset(model, 'x', sizeof(model) - 1);
	toks[1] = -1;
	lens[1] = 99;
	msgs[0].content_len = 99;
	ok = c->prompt_len == 10 && memcmp(c->prompt, "the prompt", 10) == 0 && c->prompt[10] == '\0' &&
		c->system_len == 8 && strcmp(c->system, "be brief") == 0 &&
		c->n_messages == 1 && strcmp(c->messages[0].role, "user") == 0 &&
		c->messages[0].content_len == 5 && strcmp(c->messages[0].content, "hello") == 0 &&
		c->n_tokens == 3 && c->tokens[0] == 7 && c->tokens[1] == 8 && c->tokens[2] == 9 &&
		c->params.n_stop == 1 && strcmp(c->params.stop[0], "END") == 0 &&
		c->n_continuations == 2 && c->continuation_lens[0] == 3 && c->continuation_lens[1] == 2 &&
		strcmp(c->continuations[0], "yes") == 0 && strcmp(c->continuations[1], "no") == 0 &&
		c->grammar_len == strlen("\x02(yes|no)") && memcmp(c->grammar, "\x02(yes|no)", c->grammar_len) == 0 &&
		strcmp(c->model, "small") == 0 && c->params.max_tokens == 77 && c->mode == LLM_MODE_GENERATE;
	CHECK(ok, "the copy keeps every field after its sources were overwritten");
	free(c);
}

/*
 * The two checks apart: the options' check needs no prompt (the SQL
 * functions run it before the prompt exists) and ignores the prompt's
 * defects; the prompt's check ignores the options' defects.  Each refuses
 * what is its own, with llm_request_validate's status and message.
 */
static void
test_split(const llm_request *base)
{
	char		err[256];
	llm_request q = *base;
	const char *conts[1] = {"yes"};
	size_t		lens[1] = {3};
	const char *stops[1] = {"END"};

	/* no prompt yet: the options are checked alone */
	q.prompt = NULL;
	q.prompt_len = 0;
	err[0] = '\0';
	CHECK(llm_request_validate_options(&q, err, sizeof(err)) == LLM_OK, "options of a request without a prompt: %s", err);
	CHECK(llm_request_validate_prompt(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "prompt is missing"),
		  "the prompt's check refuses the missing prompt: %s", err);
	q.prompt = "";
	CHECK(llm_request_validate_prompt(&q, err, sizeof(err)) == LLM_ERR_EMPTY_PROMPT && strstr(err, "prompt must not be empty"),
		  "the prompt's check refuses an empty prompt: %s", err);
	q.params.top_p = 0.0;
	CHECK(llm_request_validate_options(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "top_p"),
		  "a bad option refused without a prompt: %s", err);
	/* a good prompt does not hide a bad option from the options' check, nor the other way round */
	q = *base;
	q.params.top_p = 0.0;
	err[0] = '\0';
	CHECK(llm_request_validate_prompt(&q, err, sizeof(err)) == LLM_OK, "the prompt's check ignores options: %s", err);
	q = *base;
	q.prompt_len = 0;
	err[0] = '\0';
	CHECK(llm_request_validate_options(&q, err, sizeof(err)) == LLM_OK, "the options' check ignores the prompt: %s", err);
	/* raw => true with a system message is an option's defect, found by the prompt kind alone */
	q = *base;
	q.prompt = NULL;
	q.prompt_len = 0;
	q.prompt_kind = LLM_PROMPT_RAW;
	q.system = "s";
	q.system_len = 1;
	CHECK(llm_request_validate_options(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM &&
		  strcmp(err, "system cannot be combined with raw => true") == 0, "system with raw, no prompt: %s", err);
	q.prompt_kind = LLM_PROMPT_MESSAGES;
	err[0] = '\0';
	CHECK(llm_request_validate_options(&q, err, sizeof(err)) == LLM_OK, "a system option beside messages is not the options' check's: %s", err);
	/* the mode and a SCORE request's continuations are the prompt's */
	q = *base;
	q.mode = LLM_MODE_SCORE;
	err[0] = '\0';
	CHECK(llm_request_validate_options(&q, err, sizeof(err)) == LLM_OK, "options of a scoring request without continuations: %s", err);
	CHECK(llm_request_validate_prompt(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "continuation"),
		  "the prompt's check wants continuations: %s", err);
	q.continuations = conts;
	q.continuation_lens = lens;
	q.n_continuations = 1;
	q.grammar = "\x02(a|b)";
	q.grammar_len = 6;
	CHECK(llm_request_validate_prompt(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM &&
		  strcmp(err, "a grammar is only for generating requests") == 0, "grammar on a scoring request: %s", err);
	/* a grammar's exclusions are the options' */
	q = *base;
	q.grammar = "\x02(a|b)";
	q.grammar_len = 6;
	q.params.stop = stops;
	q.params.n_stop = 1;
	err[0] = '\0';
	CHECK(llm_request_validate_prompt(&q, err, sizeof(err)) == LLM_OK, "grammar with stop passes the prompt's check: %s", err);
	CHECK(llm_request_validate_options(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM &&
		  strcmp(err, "stop cannot be combined with choices, regex or json_schema") == 0, "grammar with stop: %s", err);
}

static llm_status
check(const llm_request *r, char *err, size_t errlen)
{
	err[0] = '\0';
	return llm_request_validate(r, err, errlen);
}

int
main(void)
{
	llm_request base;
	char		err[256];

	llm_request_init(&base);
	base.prompt = "hi";
	base.prompt_len = 2;
	CHECK(check(&base, err, sizeof(err)) == LLM_OK, "defaults valid: %s", err);

#define BAD(field, val, name) do { llm_request q = base; q.params.field = val; \
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, name), \
			  "invalid " #field " = " #val " rejected: %s", err); } while (0)
	BAD(max_tokens, 0, "max_tokens");
	BAD(max_tokens, -1, "max_tokens");
	BAD(temperature, -0.1, "temperature");
	BAD(temperature, NAN, "temperature");
	BAD(temperature, INFINITY, "temperature");
	BAD(top_p, 0.0, "top_p");
	BAD(top_p, 1.5, "top_p");
	BAD(top_p, NAN, "top_p");
	BAD(top_k, -1, "top_k");
	BAD(min_p, -0.5, "min_p");
	BAD(min_p, 2.0, "min_p");
	BAD(min_p, NAN, "min_p");
	BAD(repetition_penalty, 0.0, "repetition_penalty");
	BAD(repetition_penalty, INFINITY, "repetition_penalty");
	BAD(debug_poison_logits, -1, "debug_poison_logits");
	{
		llm_request q = base;
		const char *stops[LLM_MAX_STOP_STRINGS + 1];
		char		longstop[LLM_MAX_STOP_LEN + 2];

		for (int i = 0; i <= LLM_MAX_STOP_STRINGS; i++)
			stops[i] = "x";
		q.params.stop = stops;
		q.params.n_stop = LLM_MAX_STOP_STRINGS;
		CHECK(check(&q, err, sizeof(err)) == LLM_OK, "%d stop strings accepted", LLM_MAX_STOP_STRINGS);
		q.params.n_stop = LLM_MAX_STOP_STRINGS + 1;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "at most 16 stop strings"),
			  "17 stop strings rejected: %s", err);
		q.params.n_stop = 1;
		stops[0] = "";
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "must not be empty"),
			  "empty stop string rejected: %s", err);
		stops[0] = NULL;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "must not be NULL"),
			  "NULL stop string rejected: %s", err);
		memset(longstop, 'x', sizeof(longstop) - 1);
		longstop[sizeof(longstop) - 1] = '\0';
		stops[0] = longstop;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "at most 256 bytes"),
			  "257-byte stop string rejected: %s", err);
		longstop[LLM_MAX_STOP_LEN] = '\0';
		CHECK(check(&q, err, sizeof(err)) == LLM_OK, "256-byte stop string accepted: %s", err);
		q.params.n_stop = 0;
		q.params.max_tokens = 2147483647;
		CHECK(check(&q, err, sizeof(err)) == LLM_OK, "max_tokens INT_MAX accepted");
	}
	/* shapes */
	{
		llm_request q = base;

		q.prompt_len = 0;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_EMPTY_PROMPT && strstr(err, "prompt must not be empty"),
			  "empty prompt: %s", err);
		q = base;
		q.prompt = "a\0b";
		q.prompt_len = 3;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "NUL in prompt: %s", err);
		q = base;
		q.prompt_kind = LLM_PROMPT_RAW;
		q.system = "s";
		q.system_len = 1;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "raw"),
			  "system with raw: %s", err);
		q = base;
		q.prompt_kind = LLM_PROMPT_MESSAGES;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "messages must not be empty"),
			  "no messages: %s", err);
		q = base;
		q.prompt_kind = LLM_PROMPT_TOKENS;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_EMPTY_PROMPT, "no tokens: %s", err);
		q = base;
		q.prompt_kind = (llm_prompt_kind) 99;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "unknown prompt kind: %s", err);
		q = base;
		q.mode = (llm_request_mode) 7;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "unknown mode: %s", err);
	}
	/* scoring requests need continuations, generation requests have none */
	{
		llm_request q = base;
		const char *conts[2] = {"yes", ""};
		size_t		lens[2] = {3, 0};

		q.mode = LLM_MODE_SCORE;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "score without continuations: %s", err);
		q.continuations = conts;
		q.continuation_lens = lens;
		q.n_continuations = 1;
		CHECK(check(&q, err, sizeof(err)) == LLM_OK, "score with one continuation: %s", err);
		q.n_continuations = 2;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "must not be empty"),
			  "empty continuation: %s", err);
		q.n_continuations = LLM_MAX_CONTINUATIONS + 1;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "too many continuations: %s", err);
		q.mode = LLM_MODE_GENERATE;
		q.n_continuations = 1;
		CHECK(check(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "continuations on a generate request: %s", err);
	}
	/* the one encoding of how a request ended */
	CHECK(strcmp(llm_finish_reason_name(LLM_FINISH_STOP), "stop") == 0 &&
		  strcmp(llm_finish_reason_name(LLM_FINISH_LENGTH), "length") == 0 &&
		  strcmp(llm_finish_reason_name(LLM_FINISH_ABORT), "aborted") == 0 &&
		  strcmp(llm_finish_reason_name(LLM_FINISH_ERROR), "error") == 0, "finish reason names");
	test_split(&base);
	test_copy();
	return unit_done();
}
