/*
 * submit.c — the submission entry points (engine.h: llm_engine_submit,
 * llm_engine_tokenize_request, llm_engine_add_request): checks, then a
 * small prompt tokenized inline and submitted (requests.c), a large one
 * queued for the tokenizer thread (a job thread at nice +10) behind a
 * stand-in, and admitted at the start of a step (engine_tokenize_admit).
 */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "backend_loader.h"
#include "kernels/cpu/backend_cpu.h"
#include "engine/grammar/json_min.h"
#include "kernels/quant_types.h"

/* ---------- checks before tokenizing ---------- */

/*
 * The bytes of text req's prompt is made of: the prompt and system texts,
 * or the messages' contents (0 for token ids); *longest: its longest
 * continuation's, *all: all of its continuations'.
 */
static uint64_t
prompt_text_bytes(const llm_request *req, uint64_t *longest, uint64_t *all)
{
	uint64_t	bytes = 0;

	*longest = *all = 0;
	switch (req->prompt_kind)
	{
		case LLM_PROMPT_RAW:
			bytes = req->prompt_len;
			break;
		case LLM_PROMPT_TEXT:
			bytes = (uint64_t) req->prompt_len + (req->system != NULL ? req->system_len : 0);
			break;
		case LLM_PROMPT_MESSAGES:
			for (int i = 0; i < req->n_messages; i++)
				bytes += req->messages[i].content_len;
			break;
		case LLM_PROMPT_TOKENS:
			return 0;
	}
	if (req->mode == LLM_MODE_SCORE)
		for (int k = 0; k < req->n_continuations; k++)
		{
			*all += req->continuation_lens[k];
			if (req->continuation_lens[k] > *longest)
				*longest = req->continuation_lens[k];
		}
	return bytes;
}

/*
 * A prompt that cannot fit the context, known from its size alone: the
 * prompt and system texts (or the messages) and the longest continuation
 * have at least bytes / llm_tokenizer_max_token_bytes tokens.  Refused
 * before it is tokenized, so a prompt of megabytes never keeps the
 * tokenizer thread busy only to be refused.
 */
static llm_status
prompt_size_fits(const llm_engine *e, const llm_request *req, char *err, size_t errlen)
{
	int32_t		per_token = llm_tokenizer_max_token_bytes(e->tok);
	uint64_t	longest,
				all;
	uint64_t	bytes = prompt_text_bytes(req, &longest, &all);
	uint64_t	at_least;

	/* a truncated EMBED prompt is cut after tokenizing, whatever its size */
	if (req->prompt_kind == LLM_PROMPT_TOKENS || per_token < 1 || req->truncate)
		return LLM_OK;
	at_least = (bytes + longest) / (uint64_t) per_token;
	/* an EMBED prompt may fill the context (no generated token follows it) */
	if (at_least < (uint64_t) e->cfg.n_ctx + (req->mode == LLM_MODE_EMBED ? 1 : 0))
		return LLM_OK;
	snprintf(err, errlen, "prompt of %llu bytes does not fit the context length of %d tokens "
			 "(it has at least %llu tokens: no token of the model stands for more than %d bytes)",
			 (unsigned long long) (bytes + longest), e->cfg.n_ctx, (unsigned long long) at_least, per_token);
	return LLM_ERR_PROMPT_TOO_LONG;
}

/* ---------- the tokenizer thread ---------- */


static void
tokenize_job_run(llm_job *base)
{
	tokenize_job *job = (tokenize_job *) base;

	if (atomic_load(&job->dropped))
		return;					/* nobody waits for it: collected and freed unseen */
	if (!job->text_only)
	{
		engine_tokenize_request(job->e, job->req, &job->out);
		return;
	}
	job->out.n = llm_engine_tokenize(job->e, job->req->prompt, job->req->prompt_len, &job->out.ids,
									 job->out.err, sizeof(job->out.err));
	if (job->out.n < 0 && job->out.err[0] == '\0')
		snprintf(job->out.err, sizeof(job->out.err), "could not tokenize the text");
}

static void
tokenize_job_free(llm_job *base)
{
	tokenize_job *job = (tokenize_job *) base;

	engine_tokenized_free(&job->out);
	free(job->req);
	free(job);
}


/*
 * Queue req (validated, its size checked) for the tokenizer thread: a
 * stand-in takes id in the table now, the request is submitted over its
 * ids in engine_tokenize_admit.
 */
static llm_status
submit_async(llm_engine *e, uint64_t id, const llm_request *req, void *user_data, bool text_only,
			 char *err, size_t errlen)
{
	tokenize_job *job;
	live_request *r;

	if (engine_table_get(e, id) != NULL)
	{
		snprintf(err, errlen, "request id %llu is already live", (unsigned long long) id);
		return LLM_ERR_DUPLICATE_ID;
	}
	job = calloc(1, sizeof(*job));
	r = engine_request_new(id, user_data, req, 0, 1);
	if (job == NULL || r == NULL || (job->req = llm_request_copy(req)) == NULL)
		goto oom;
	job->base.run = tokenize_job_run;
	job->base.discard = tokenize_job_free;
	job->e = e;
	job->text_only = text_only;
	job->owner = r;
	r->seqs[0].state = LLM_SEQ_DETACHED;
	r->seqs[0].owner = r;
	r->tokenize_only = text_only;
	r->t_add = engine_now_ms();
	if (engine_table_put(e, r) != 0)
		goto oom;
	if (llm_job_thread_push(e->tokenizer, &job->base, err, errlen) != 0)
	{
		engine_table_del(e, id);
		engine_request_free(r);
		tokenize_job_free(&job->base);
		return LLM_ERR_OUT_OF_MEMORY;
	}
	r->tok_job = job;
	e->n_tokenize_jobs++;
	e->n_tokenizing++;
	return LLM_OK;
oom:
	engine_request_free(r);
	if (job != NULL)
		tokenize_job_free(&job->base);
	snprintf(err, errlen, "out of memory queueing request");
	return LLM_ERR_OUT_OF_MEMORY;
}

/* A finished job whose stand-in still waits: its request submitted over the ids, or failed. */
static void
admit_tokenized(llm_engine *e, tokenize_job *job, llm_event_cb cb, void *arg)
{
	live_request *r = job->owner;
	llm_status	st;
	char		err[1100];

	r->tok_job = NULL;
	e->n_tokenizing--;
	if (r->tokenize_only)
	{
		if (job->out.n < 0)
			engine_output_error(r, LLM_ERR_INVALID_TEXT, job->out.err, cb, arg);
		else
			engine_output_tokens(r, job->out.ids, job->out.n, cb, arg);
		engine_drop_request(e, r);
		return;
	}
	/* the request built from the ids takes the stand-in's place under its id */
	engine_table_del(e, r->id);
	err[0] = '\0';
	st = engine_submit_ids(e, r->id, job->req, r->user_data, &job->out, err, sizeof(err));
	if (st != LLM_OK)
		engine_output_error(r, st, err[0] ? err : llm_status_name(st), cb, arg);
	engine_request_free(r);
}

void
engine_tokenize_admit(llm_engine *e, llm_event_cb cb, void *arg)
{
	llm_job *done;

	if (e->n_tokenize_jobs == 0)
		return;
	done = llm_job_thread_take(e->tokenizer);
	if (done == NULL && e->n_tokenizing > 0 &&
		llm_sched_n_waiting(e->sched) + llm_sched_n_running(e->sched) == 0 &&
		llm_job_thread_wait(e->tokenizer, ENGINE_GRAMMAR_IDLE_MS))
		done = llm_job_thread_take(e->tokenizer);
	while (done != NULL)
	{
		tokenize_job *job = (tokenize_job *) done;

		done = done->next;
		e->n_tokenize_jobs--;
		if (job->owner != NULL)
			admit_tokenized(e, job, cb, arg);
		tokenize_job_free(&job->base);
	}
}

/* ---------- submission: the entry points ---------- */

llm_status
llm_engine_submit(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
				  char *err, size_t errlen)
{
	llm_status	st;
	tokenized	t;
	uint64_t	longest,
				all;

	if ((st = llm_request_validate(req, err, errlen)) != LLM_OK)
		return st;
	if (req->mode == LLM_MODE_RENDER)
	{
		snprintf(err, errlen, "a render request runs no model: llm_engine_render answers it");
		return LLM_ERR_INVALID_PARAM;
	}
	if (req->mode == LLM_MODE_SCORE && req->continuation_eot && e->end_of_turn < 0)
	{
		snprintf(err, errlen, "continuation_eot: the model has no end-of-turn token");
		return LLM_ERR_INVALID_PARAM;
	}
	if ((st = prompt_size_fits(e, req, err, errlen)) != LLM_OK)
		return st;
	if (req->prompt_kind != LLM_PROMPT_TOKENS &&
		prompt_text_bytes(req, &longest, &all) + all >= e->tokenize_inline_bytes)
		return submit_async(e, id, req, user_data, false, err, errlen);
	err[0] = '\0';
	engine_tokenize_request(e, req, &t);
	st = engine_submit_ids(e, id, req, user_data, &t, err, errlen);
	engine_tokenized_free(&t);
	return st;
}

llm_status
llm_engine_tokenize_request(llm_engine *e, uint64_t id, const char *text, size_t len, void *user_data,
							int32_t **ids, int64_t *n, char *err, size_t errlen)
{
	llm_request q;

	*ids = NULL;
	*n = -1;
	if (len < e->tokenize_inline_bytes)
	{
		err[0] = '\0';
		*n = llm_engine_tokenize(e, text, len, ids, err, errlen);
		if (*n >= 0)
			return LLM_OK;
		if (err[0] == '\0')
			snprintf(err, errlen, "could not tokenize the text");
		return LLM_ERR_INVALID_TEXT;
	}
	llm_request_init(&q);
	q.prompt_kind = LLM_PROMPT_RAW;
	q.prompt = text;
	q.prompt_len = len;
	return submit_async(e, id, &q, user_data, true, err, errlen);
}

llm_status
llm_engine_add_request(llm_engine *e, uint64_t id, const int32_t *prompt, int32_t n,
					   const llm_sampling_params *p, void *user_data, char *err, size_t errlen)
{
	llm_request req;

	llm_request_init(&req);
	req.prompt_kind = LLM_PROMPT_TOKENS;
	req.tokens = prompt;
	req.n_tokens = n;
	req.params = *p;
	return llm_engine_submit(e, id, &req, user_data, err, errlen);
}
