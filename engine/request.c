/* request.c — defaults, names and the two checks of a request, its options and its prompt (request.h). */
#include "request.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
llm_status_name(llm_status s)
{
	switch (s)
	{
		case LLM_OK:
			return "ok";
		case LLM_ERR_INVALID_PARAM:
			return "invalid parameter";
		case LLM_ERR_PROMPT_TOO_LONG:
			return "prompt too long";
		case LLM_ERR_EMPTY_PROMPT:
			return "empty prompt";
		case LLM_ERR_INVALID_TEXT:
			return "invalid text";
		case LLM_ERR_NONFINITE:
			return "non-finite logits";
		case LLM_ERR_OUT_OF_MEMORY:
			return "out of memory";
		case LLM_ERR_DUPLICATE_ID:
			return "duplicate request id";
		case LLM_ERR_BACKEND:
			return "compute backend error";
		case LLM_ERR_MODEL:
			return "model error";
	}
	return "unknown";
}

const char *
llm_finish_reason_name(llm_finish_reason r)
{
	switch (r)
	{
		case LLM_FINISH_STOP:
			return "stop";
		case LLM_FINISH_LENGTH:
			return "length";
		case LLM_FINISH_ABORT:
			return "aborted";
		case LLM_FINISH_ERROR:
			return "error";
		case LLM_FINISH_NONE:
			break;
	}
	return "none";
}

const char *
llm_priority_name(llm_priority p)
{
	switch (p)
	{
		case LLM_PRIORITY_INTERACTIVE:
			return "interactive";
		case LLM_PRIORITY_BATCH:
			return "batch";
	}
	return "unknown";
}

bool
llm_priority_from_name(const char *name, llm_priority *out)
{
	for (int p = 0; p < LLM_N_PRIORITIES; p++)
		if (name != NULL && strcmp(name, llm_priority_name((llm_priority) p)) == 0)
		{
			*out = (llm_priority) p;
			return true;
		}
	return false;
}

void
llm_sampling_params_defaults(llm_sampling_params *p)
{
	memset(p, 0, sizeof(*p));
	p->max_tokens = 256;
	p->temperature = 0.0;
	p->top_p = 1.0;
	p->top_k = 0;
	p->min_p = 0.0;
	p->repetition_penalty = 1.0;
}

void
llm_request_init(llm_request *r)
{
	memset(r, 0, sizeof(*r));
	r->mode = LLM_MODE_GENERATE;
	r->prompt_kind = LLM_PROMPT_TEXT;
	r->prompt = "";
	llm_sampling_params_defaults(&r->params);
	r->priority = LLM_PRIORITY_INTERACTIVE;
	r->session = 0;
}

static llm_status
invalid(char *err, size_t errlen, const char *msg)
{
	snprintf(err, errlen, "%s", msg);
	return LLM_ERR_INVALID_PARAM;
}

static llm_status
validate_params(const llm_sampling_params *p, char *err, size_t errlen)
{
	if (p->max_tokens < 1)
		return invalid(err, errlen, "max_tokens must be at least 1");
	if (!isfinite(p->temperature) || p->temperature < 0)
		return invalid(err, errlen, "temperature must be a finite number >= 0");
	if (!(p->top_p > 0.0 && p->top_p <= 1.0))
		return invalid(err, errlen, "top_p must be in (0, 1]");
	if (p->top_k < 0)
		return invalid(err, errlen, "top_k must be >= 0");
	if (!(p->min_p >= 0.0 && p->min_p <= 1.0))
		return invalid(err, errlen, "min_p must be in [0, 1]");
	if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0)
		return invalid(err, errlen, "repetition_penalty must be a finite number > 0");
	if (p->n_stop < 0 || (p->n_stop > 0 && p->stop == NULL))
		return invalid(err, errlen, "invalid stop list");
	if (p->n_stop > LLM_MAX_STOP_STRINGS)
	{
		snprintf(err, errlen, "at most %d stop strings are allowed", LLM_MAX_STOP_STRINGS);
		return LLM_ERR_INVALID_PARAM;
	}
	for (int i = 0; i < p->n_stop; i++)
	{
		if (p->stop[i] == NULL)
			return invalid(err, errlen, "stop strings must not be NULL");
		if (p->stop[i][0] == '\0')
			return invalid(err, errlen, "stop strings must not be empty");
		if (strlen(p->stop[i]) > LLM_MAX_STOP_LEN)
		{
			snprintf(err, errlen, "stop strings must be at most %d bytes", LLM_MAX_STOP_LEN);
			return LLM_ERR_INVALID_PARAM;
		}
	}
	if (p->debug_poison_logits < 0)
		return invalid(err, errlen, "debug_poison_logits must be >= 0");
	return LLM_OK;
}

llm_status
llm_request_validate_prompt(const llm_request *r, char *err, size_t errlen)
{
	if (r->mode != LLM_MODE_GENERATE && r->mode != LLM_MODE_SCORE && r->mode != LLM_MODE_EMBED &&
		r->mode != LLM_MODE_RENDER)
		return invalid(err, errlen, "unknown request mode");
	if (r->mode == LLM_MODE_RENDER && r->prompt_kind != LLM_PROMPT_TEXT && r->prompt_kind != LLM_PROMPT_MESSAGES)
		return invalid(err, errlen, "only a text or messages prompt is rendered with the chat template");
	if ((r->tools != NULL || r->thinking != 0 || r->no_generation_prompt) &&
		r->prompt_kind != LLM_PROMPT_TEXT && r->prompt_kind != LLM_PROMPT_MESSAGES)
		return invalid(err, errlen, "tools, enable_thinking and add_generation_prompt are for chat prompts");
	if (r->thinking < -1 || r->thinking > 1)
		return invalid(err, errlen, "unknown enable_thinking value");
	if (r->tools != NULL && memchr(r->tools, '\0', r->tools_len) != NULL)
		return invalid(err, errlen, "tools must not contain NUL bytes");
	if ((unsigned) r->pooling >= LLM_N_POOLINGS)
		return invalid(err, errlen, "unknown pooling");
	if ((unsigned) r->normalize >= LLM_N_EMBED_NORMS)
		return invalid(err, errlen, "unknown embedding normalisation");
	if (r->mode != LLM_MODE_EMBED && (r->pooling != LLM_POOLING_MODEL || r->normalize != LLM_EMBED_NORM_MODEL ||
									  r->truncate))
		return invalid(err, errlen, "pooling, normalisation and truncation apply to embeddings only");
	switch (r->prompt_kind)
	{
		case LLM_PROMPT_TEXT:
		case LLM_PROMPT_RAW:
			if (r->prompt == NULL)
				return invalid(err, errlen, "prompt is missing");
			if (r->prompt_len == 0)
			{
				/* an embedding's text is its input, not a prompt to answer */
				snprintf(err, errlen, "%s must not be empty", r->mode == LLM_MODE_EMBED ? "input" : "prompt");
				return LLM_ERR_EMPTY_PROMPT;
			}
			if (memchr(r->prompt, '\0', r->prompt_len) != NULL)
				return invalid(err, errlen, "prompt must not contain NUL bytes");
			break;
		case LLM_PROMPT_MESSAGES:
			if (r->n_messages < 1 || r->messages == NULL)
				return invalid(err, errlen, "messages must not be empty");
			if (r->n_messages > LLM_MAX_MESSAGES)
			{
				snprintf(err, errlen, "at most %d messages are allowed", LLM_MAX_MESSAGES - 1);
				return LLM_ERR_INVALID_PARAM;
			}
			for (int i = 0; i < r->n_messages; i++)
				if (r->messages[i].role == NULL || r->messages[i].content == NULL)
					return invalid(err, errlen, "message without role or content");
			break;
		case LLM_PROMPT_TOKENS:
			if (r->n_tokens < 1 || r->tokens == NULL)
			{
				snprintf(err, errlen, "prompt must not be empty");
				return LLM_ERR_EMPTY_PROMPT;
			}
			break;
		default:
			return invalid(err, errlen, "unknown prompt kind");
	}
	if (r->mode == LLM_MODE_SCORE)
	{
		if (r->n_continuations < 1 || r->continuations == NULL || r->continuation_lens == NULL)
			return invalid(err, errlen, "a scoring request needs at least one continuation");
		if (r->n_continuations > LLM_MAX_CONTINUATIONS)
		{
			snprintf(err, errlen, "at most %d continuations are allowed", LLM_MAX_CONTINUATIONS);
			return LLM_ERR_INVALID_PARAM;
		}
		for (int i = 0; i < r->n_continuations; i++)
			if (r->continuations[i] == NULL || r->continuation_lens[i] == 0)
				return invalid(err, errlen, "continuations must not be empty");
	}
	else if (r->n_continuations != 0)
		return invalid(err, errlen, "continuations are only for scoring requests");
	if (r->continuation_answers != 0)
	{
		int32_t		ends = r->n_continuations - r->continuation_answers;

		if (r->mode != LLM_MODE_SCORE || r->prompt_kind != LLM_PROMPT_TEXT)
			return invalid(err, errlen, "continuation answers are only for scoring requests with a text prompt");
		if (r->continuation_answers < 0 || ends < 1)
			return invalid(err, errlen, "continuation answers need at least one continuation before them");
		if ((int64_t) ends * r->continuation_answers > LLM_MAX_CONTINUATIONS)
		{
			snprintf(err, errlen, "at most %d scored pairs are allowed", LLM_MAX_CONTINUATIONS);
			return LLM_ERR_INVALID_PARAM;
		}
		if (r->continuation_echo)
			return invalid(err, errlen, "continuation answers are not echoed");
	}
	if (r->continuation_echo && r->mode != LLM_MODE_SCORE)
		return invalid(err, errlen, "continuation_echo is only for scoring requests");
	if (r->grammar != NULL && r->mode != LLM_MODE_GENERATE)
		return invalid(err, errlen, "a grammar is only for generating requests");
	return LLM_OK;
}

llm_status
llm_request_validate_options(const llm_request *r, char *err, size_t errlen)
{
	llm_status	st;

	if (r->prompt_kind == LLM_PROMPT_TEXT || r->prompt_kind == LLM_PROMPT_RAW)
	{
		if (r->prompt_kind == LLM_PROMPT_RAW && r->system != NULL)
			return invalid(err, errlen, "system cannot be combined with raw => true");
		if (r->system != NULL && memchr(r->system, '\0', r->system_len) != NULL)
			return invalid(err, errlen, "system must not contain NUL bytes");
	}
	if ((st = validate_params(&r->params, err, errlen)) != LLM_OK)
		return st;
	if ((unsigned) r->priority >= LLM_N_PRIORITIES)
		return invalid(err, errlen, "priority must be 'interactive' or 'batch'");
	if (r->grammar != NULL)
	{
		if (r->grammar_len < 1)
			return invalid(err, errlen, "grammar source is empty");
		if (r->params.n_stop > 0)
			return invalid(err, errlen, "stop cannot be combined with choices, regex or json_schema");
		if (r->params.ignore_eos)
			return invalid(err, errlen, "ignore_eos cannot be combined with choices, regex or json_schema");
	}
	if (r->model != NULL && strlen(r->model) > LLM_MAX_MODEL_ALIAS)
	{
		snprintf(err, errlen, "model must be at most %d bytes", LLM_MAX_MODEL_ALIAS);
		return LLM_ERR_INVALID_PARAM;
	}
	return LLM_OK;
}

llm_status
llm_request_validate(const llm_request *r, char *err, size_t errlen)
{
	llm_status	st;

	if ((st = llm_request_validate_prompt(r, err, errlen)) != LLM_OK)
		return st;
	return llm_request_validate_options(r, err, errlen);
}

/* Bytes of a copy of n bytes at the arena's next 8-byte boundary (copy_into keeps that alignment). */
static size_t
copy_size(size_t n)
{
	return (n + 8) & ~(size_t) 7;
}

/* n bytes of src at *at (NUL-terminated), *at advanced; the copy. */
static void *
copy_into(char **at, const void *src, size_t n)
{
	char	   *dst = *at;

	if (n > 0)
		memcpy(dst, src, n);
	dst[n] = '\0';
	*at += copy_size(n);
	return dst;
}

llm_request *
llm_request_copy(const llm_request *r)
{
	size_t		total = copy_size(sizeof(llm_request));
	llm_request *c;
	char	   *at;

	/* pass 1: the size; pass 2 below copies in the same order */
	if (r->prompt)
		total += copy_size(r->prompt_len);
	if (r->system)
		total += copy_size(r->system_len);
	if (r->messages)
	{
		total += copy_size(sizeof(llm_chat_message) * (size_t) r->n_messages);
		for (int32_t i = 0; i < r->n_messages; i++)
			total += copy_size(r->messages[i].role ? strlen(r->messages[i].role) : 0) +
				copy_size(r->messages[i].content_len);
	}
	if (r->tokens)
		total += copy_size(sizeof(int32_t) * (size_t) r->n_tokens);
	if (r->params.stop)
	{
		total += copy_size(sizeof(char *) * (size_t) r->params.n_stop);
		for (int i = 0; i < r->params.n_stop; i++)
			total += copy_size(strlen(r->params.stop[i]));
	}
	if (r->continuations)
	{
		total += copy_size(sizeof(char *) * (size_t) r->n_continuations) +
			copy_size(sizeof(size_t) * (size_t) r->n_continuations);
		for (int32_t k = 0; k < r->n_continuations; k++)
			total += copy_size(r->continuation_lens[k]);
	}
	if (r->grammar)
		total += copy_size(r->grammar_len);
	if (r->model)
		total += copy_size(strlen(r->model));
	if (r->tools)
		total += copy_size(r->tools_len);

	c = malloc(total);
	if (c == NULL)
		return NULL;
	*c = *r;
	at = (char *) c + copy_size(sizeof(llm_request));
	if (r->prompt)
		c->prompt = copy_into(&at, r->prompt, r->prompt_len);
	if (r->system)
		c->system = copy_into(&at, r->system, r->system_len);
	if (r->messages)
	{
		llm_chat_message *m = copy_into(&at, r->messages, sizeof(llm_chat_message) * (size_t) r->n_messages);

		for (int32_t i = 0; i < r->n_messages; i++)
		{
			m[i].role = copy_into(&at, r->messages[i].role ? r->messages[i].role : "",
								  r->messages[i].role ? strlen(r->messages[i].role) : 0);
			if (r->messages[i].role == NULL)
				m[i].role = NULL;
			m[i].content = copy_into(&at, r->messages[i].content, r->messages[i].content_len);
		}
		c->messages = m;
	}
	if (r->tokens)
		c->tokens = copy_into(&at, r->tokens, sizeof(int32_t) * (size_t) r->n_tokens);
	if (r->params.stop)
	{
		const char **stop = copy_into(&at, r->params.stop, sizeof(char *) * (size_t) r->params.n_stop);

		for (int i = 0; i < r->params.n_stop; i++)
			stop[i] = copy_into(&at, r->params.stop[i], strlen(r->params.stop[i]));
		c->params.stop = stop;
	}
	if (r->continuations)
	{
		const char **cont = copy_into(&at, r->continuations, sizeof(char *) * (size_t) r->n_continuations);

		c->continuation_lens = copy_into(&at, r->continuation_lens,
										 sizeof(size_t) * (size_t) r->n_continuations);
		for (int32_t k = 0; k < r->n_continuations; k++)
			cont[k] = copy_into(&at, r->continuations[k], r->continuation_lens[k]);
		c->continuations = cont;
	}
	if (r->grammar)
		c->grammar = copy_into(&at, r->grammar, r->grammar_len);
	if (r->model)
		c->model = copy_into(&at, r->model, strlen(r->model));
	if (r->tools)
		c->tools = copy_into(&at, r->tools, r->tools_len);
	return c;
}
