/*
 * engine_test_util.h — the event collector the engine tests share: one
 * engine_result per request (passed as the request's user_data) filled by
 * engine_collect, the engine's event callback.
 *
 * Per test, before including:
 *   ENGINE_TEST_MAXTOK           ids kept per request (default 512)
 *   ENGINE_TEST_TEXT             bytes of text kept, NUL-terminated (default 8192)
 *   ENGINE_TEST_KEEP_FLUSH_IDS   define to keep the -1 of a flush TEXT event in ids
 *                                (by default only sampled tokens are kept)
 * A TEXT event appends its token and text; the final event (FINISHED,
 * ERROR, TOKENS) sets done, order (1, 2, ... across the test; reset
 * engine_test_n_final to restart) and the outcome: kind, status, finish
 * reason, usage, scores, the error text, a TOKENS event's ids (malloc'd:
 * the test frees tok_ids).
 */
#ifndef LLM_ENGINE_TEST_UTIL_H
#define LLM_ENGINE_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#ifndef ENGINE_TEST_MAXTOK
#define ENGINE_TEST_MAXTOK 512
#endif
#ifndef ENGINE_TEST_TEXT
#define ENGINE_TEST_TEXT 8192
#endif
#define ENGINE_TEST_MAXSCORES 8

typedef struct engine_result
{
	int32_t		ids[ENGINE_TEST_MAXTOK];
	int			n;
	char		text[ENGINE_TEST_TEXT];
	size_t		len;
	int			n_text;			/* TEXT events */
	int			n_events;		/* every event */
	uint64_t	request_id;		/* of the last event */
	bool		done;
	int			order;			/* when its final event came */
	llm_event_kind kind;
	llm_status	status;
	llm_finish_reason why;
	llm_usage	usage;
	double		scores[ENGINE_TEST_MAXSCORES];
	int32_t		n_scores;		/* the final event's (may exceed ENGINE_TEST_MAXSCORES) */
	int32_t    *tok_ids;		/* TOKENS */
	int64_t		n_tok_ids;
	char		error[2048];
} engine_result;

static int	engine_test_n_final;

static void
engine_collect(const llm_event *ev, void *arg)
{
	engine_result *r = ev->user_data;

	(void) arg;
	r->n_events++;
	r->request_id = ev->request_id;
	if (ev->kind == LLM_EVENT_TEXT)
	{
		r->n_text++;
#ifdef ENGINE_TEST_KEEP_FLUSH_IDS
		if (r->n < ENGINE_TEST_MAXTOK)
#else
		if (r->n < ENGINE_TEST_MAXTOK && ev->token_id >= 0)
#endif
			r->ids[r->n++] = ev->token_id;
		if (r->len + ev->text_len < sizeof(r->text))
		{
			memcpy(r->text + r->len, ev->text, ev->text_len);
			r->len += ev->text_len;
			r->text[r->len] = '\0';
		}
		return;
	}
	r->done = true;
	r->order = ++engine_test_n_final;
	r->kind = ev->kind;
	r->status = ev->status;
	r->why = ev->finish_reason;
	r->usage = ev->usage;
	r->n_scores = ev->n_scores;
	for (int i = 0; i < ev->n_scores && i < ENGINE_TEST_MAXSCORES; i++)
		r->scores[i] = ev->scores[i];
	if (ev->kind == LLM_EVENT_ERROR)
		snprintf(r->error, sizeof(r->error), "%s", ev->text);
	if (ev->kind == LLM_EVENT_TOKENS)
	{
		r->tok_ids = malloc(sizeof(int32_t) * (size_t) (ev->n_ids > 0 ? ev->n_ids : 1));
		if (r->tok_ids != NULL)
			memcpy(r->tok_ids, ev->ids, sizeof(int32_t) * (size_t) ev->n_ids);
		r->n_tok_ids = ev->n_ids;
	}
}

/*
 * A small engine over model_path for tests that count steps: 2 threads,
 * 64 MB of KV cache, a 2,048-token context and no speculation (one token
 * per decode step, exactly).  NULL (and a diagnostic line) on failure.
 */
static inline llm_engine *
engine_test_engine(const char *model_path)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 2;
	c.kv_cache_bytes = 64 << 20;
	c.n_ctx = 2048;
	c.spec_tokens = 0;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine: %s\n", err);
	return e;
}

#endif
