/* request.c — defaults, names and the one check of a request (request.h). */
#include "request.h"

#include <math.h>
#include <stdio.h>
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
llm_request_validate(const llm_request *r, char *err, size_t errlen)
{
	llm_status	st;

	if (r->mode != LLM_MODE_GENERATE && r->mode != LLM_MODE_SCORE)
		return invalid(err, errlen, "unknown request mode");
	switch (r->prompt_kind)
	{
		case LLM_PROMPT_TEXT:
		case LLM_PROMPT_RAW:
			if (r->prompt == NULL)
				return invalid(err, errlen, "prompt is missing");
			if (r->prompt_len == 0)
			{
				snprintf(err, errlen, "prompt must not be empty");
				return LLM_ERR_EMPTY_PROMPT;
			}
			if (memchr(r->prompt, '\0', r->prompt_len) != NULL)
				return invalid(err, errlen, "prompt must not contain NUL bytes");
			if (r->prompt_kind == LLM_PROMPT_RAW && r->system != NULL)
				return invalid(err, errlen, "system cannot be combined with raw => true");
			if (r->system != NULL && memchr(r->system, '\0', r->system_len) != NULL)
				return invalid(err, errlen, "system must not contain NUL bytes");
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
	if ((st = validate_params(&r->params, err, errlen)) != LLM_OK)
		return st;
	if ((unsigned) r->priority >= LLM_N_PRIORITIES)
		return invalid(err, errlen, "priority must be 'interactive' or 'batch'");
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
	if (r->continuation_echo && r->mode != LLM_MODE_SCORE)
		return invalid(err, errlen, "continuation_echo is only for scoring requests");
	if (r->grammar != NULL)
	{
		if (r->mode != LLM_MODE_GENERATE)
			return invalid(err, errlen, "a grammar is only for generating requests");
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
