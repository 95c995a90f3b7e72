/*
 * test_shared_threads.c — engines on the process's shared compute-thread
 * pool (llm_engine_config.shared_threads, several models in one worker):
 * the pool is shared per thread count and reference-counted, two engines
 * stepped in turn on it give every request the greedy tokens of the same
 * engine alone, and destroying one engine leaves the other's pool working.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "kernels/cpu/threadpool.h"
#include "unit.h"

static const char *model_path;

typedef struct collected
{
	int32_t		tokens[2][64];
	int			n[2];
} collected;

static void
on_event(const llm_event *ev, void *arg)
{
	collected  *c = arg;
	int			k = (int) ev->request_id - 1;

	if (ev->kind == LLM_EVENT_TEXT && ev->token_id >= 0 && k >= 0 && k < 2 && c->n[k] < 64)
		c->tokens[k][c->n[k]++] = ev->token_id;
}

static llm_engine *
open_engine(bool shared)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.device = "cpu";
	c.n_threads = 2;
	c.n_ctx = 512;
	c.kv_cache_bytes = 16 << 20;
	c.shared_threads = shared;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# %s\n", err);
	return e;
}

static void
submit_two(llm_engine *e)
{
	llm_request r;
	char		err[256];

	for (int k = 0; k < 2; k++)
	{
		llm_request_init(&r);
		r.prompt_kind = LLM_PROMPT_RAW;
		r.prompt = k == 0 ? "The lighthouse keeper opened the door and" : "1, 2, 3, 4, 5,";
		r.prompt_len = strlen(r.prompt);
		r.params.max_tokens = 24;
		r.params.ignore_eos = true;
		if (llm_engine_submit(e, k + 1, &r, NULL, err, sizeof(err)) != LLM_OK)
			printf("# submit: %s\n", err);
	}
}

int
main(void)
{
	llm_engine *alone,
			   *a,
			   *b;
	collected	ref,
				ca,
				cb;
	char		err[128];
	llm_threadpool *p1,
			   *p2,
			   *p3;

	model_path = getenv("LLM_TEST_MODEL");
	if (model_path == NULL)
		model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

	p1 = llm_threadpool_acquire_shared(2, err, sizeof(err));
	p2 = llm_threadpool_acquire_shared(2, err, sizeof(err));
	p3 = llm_threadpool_acquire_shared(3, err, sizeof(err));
	CHECK(p1 != NULL && p1 == p2, "one shared pool per thread count");
	CHECK(p3 != NULL && p3 != p1 && llm_threadpool_size(p3) == 3, "another thread count, another pool");
	llm_threadpool_release_shared(p3);
	llm_threadpool_release_shared(p2);
	llm_threadpool_release_shared(p1);

	memset(&ref, 0, sizeof(ref));
	alone = open_engine(false);
	CHECK(alone != NULL, "engine with a pool of its own");
	if (alone == NULL)
		return unit_done();
	submit_two(alone);
	while (llm_engine_has_work(alone))
		llm_engine_step(alone, on_event, &ref);
	llm_engine_destroy(alone);
	CHECK(ref.n[0] == 24 && ref.n[1] == 24, "alone: 24 tokens per request");

	a = open_engine(true);
	b = open_engine(true);
	CHECK(a != NULL && b != NULL, "two engines on the shared pool");
	if (a == NULL || b == NULL)
		return unit_done();
	memset(&ca, 0, sizeof(ca));
	memset(&cb, 0, sizeof(cb));
	submit_two(a);
	submit_two(b);
	while (llm_engine_has_work(a) || llm_engine_has_work(b))
	{
		if (llm_engine_has_work(a))
			llm_engine_step(a, on_event, &ca);
		if (llm_engine_has_work(b))
			llm_engine_step(b, on_event, &cb);
	}
	CHECK(memcmp(&ca, &ref, sizeof(ref)) == 0, "engine A, stepped in turn with B: the tokens of an engine alone");
	CHECK(memcmp(&cb, &ref, sizeof(ref)) == 0, "engine B, stepped in turn with A: the tokens of an engine alone");

	/* A goes away: B keeps the pool (its reference) and serves the same tokens */
	llm_engine_destroy(a);
	memset(&cb, 0, sizeof(cb));
	submit_two(b);
	while (llm_engine_has_work(b))
		llm_engine_step(b, on_event, &cb);
	CHECK(memcmp(&cb, &ref, sizeof(ref)) == 0, "after A is destroyed, B still serves the same tokens");
	llm_engine_destroy(b);
	return unit_done();
}
