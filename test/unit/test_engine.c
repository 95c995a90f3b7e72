/*
 * test_engine.c — the engine end to end on the real model (CPU backend):
 * batch invariance (alone vs in a batch of 16, under several prefill chunk
 * sizes, after preemption in a tiny KV pool, with prefix caching on/off),
 * seeded sampling independent of batch company, stop strings across token
 * boundaries, length limits at max_tokens and at the context, request
 * errors, aborts and KV-block leaks, non-finite logits; several logits rows
 * of one sequence in one step; the repetition penalty as a logits processor;
 * the KV cache type (f16, q8_0).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "unit.h"

#define MAXTOK 512
#define ENGINE_TEST_MAXTOK MAXTOK
#define ENGINE_TEST_KEEP_FLUSH_IDS	/* a flush event's -1 is kept in ids */
#include "engine_test_util.h"

typedef engine_result result;

static const char *prompts[16] = {
	"What is the capital of Australia?",
	"Write a haiku about databases.",
	"Explain what a B-tree index is in two sentences.",
	"My invoice was charged twice this month, order #44812. Please help.",
	"List three prime numbers greater than 100.",
	"Translate 'good morning' into Spanish and German.",
	"Why is the sky blue?",
	"Summarize: The router drops the Wi-Fi connection every evening around 8pm and only a reboot fixes it.",
	"Give me a SQL query that counts rows per day in a table called events.",
	"Hi!",
	"What does HTTP status 503 mean?",
	"Describe a cat to someone who has never seen one, in one paragraph of about sixty words, mentioning its whiskers, its tail and the way it sleeps in the sun.",
	"Is 17 a prime number? Answer yes or no.",
	"Name the planets of the solar system in order.",
	"How do I reset my password if I no longer have access to my email?",
	"Tell me a fun fact about octopuses.",
};

static const char *model_path;

static llm_engine *
make_engine(int max_batched, int64_t kv_bytes, bool prefix, int n_ctx)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 2;
	c.max_batched_tokens = max_batched;
	c.kv_cache_bytes = kv_bytes;
	c.prefix_caching = prefix;
	c.n_ctx = n_ctx;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine: %s\n", err);
	return e;
}

static int32_t *
chat_ids(llm_engine *e, const char *text, int32_t *n)
{
	static int32_t buf[4096];
	char		err[256];
	llm_chat_message m = {"user", text, strlen(text)};
	int64_t		got = llm_chat_apply(llm_engine_chat_template(e), llm_engine_tokenizer(e), &m, 1,
									 buf, 4096, err, sizeof(err));

	*n = (int32_t) got;
	return buf;
}

static void
run_all(llm_engine *e)
{
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
}

/* Generate greedy for prompts[idx[0..n)] all queued at once. */
static void
generate(llm_engine *e, const int *idx, int n, result *out, int max_tokens, double temp, uint64_t seed)
{
	char		err[256];

	for (int i = 0; i < n; i++)
	{
		llm_sampling_params p;
		int32_t		np;
		int32_t    *ids = chat_ids(e, prompts[idx[i]], &np);

		llm_sampling_params_defaults(&p);
		p.max_tokens = max_tokens;
		p.temperature = temp;
		p.top_p = temp > 0 ? 0.95 : 1.0;
		p.has_seed = true;
		p.seed = seed;
		memset(&out[i], 0, sizeof(result));
		if (llm_engine_add_request(e, 1000 + i, ids, np, &p, &out[i], err, sizeof(err)) != LLM_OK)
			printf("# add_request: %s\n", err);
	}
	run_all(e);
}

static bool
same(const result *a, const result *b)
{
	return a->n == b->n && memcmp(a->ids, b->ids, a->n * sizeof(int32_t)) == 0;
}

static void
test_batch_invariance(void)
{
	llm_engine *e = make_engine(512, 0, false, 0);
	result	   *alone = calloc(16, sizeof(result));
	result	   *batch = calloc(16, sizeof(result));
	int			all[16];
	int			ok;
	llm_engine_stats st;

	if (!CHECK(e != NULL, "engine loads the model"))
		return;
	for (int i = 0; i < 16; i++)
	{
		all[i] = i;
		generate(e, &i, 1, &alone[i], 24, 0.0, 0);
	}
	CHECK(alone[0].done && alone[0].kind == LLM_EVENT_FINISHED && alone[0].n > 0,
		  "greedy generation finishes: \"%s\"", alone[0].text);
	CHECK(strstr(alone[0].text, "Canberra") != NULL, "the real model answers (llama.cpp gives \"The capital of Australia is Canberra.\")");
	generate(e, all, 16, batch, 24, 0.0, 0);
	ok = 1;
	for (int i = 0; i < 16; i++)
		ok &= same(&alone[i], &batch[i]);
	llm_engine_get_stats(e, &st);
	CHECK(ok, "16 prompts in one continuous batch: tokens bit-identical to each alone");
	CHECK(st.max_batch_seqs >= 16, "the batch really held 16 sequences (max %d)", st.max_batch_seqs);
	CHECK(st.kv_blocks_used == 0, "KV blocks back to 0 after the batch (%d)", st.kv_blocks_used);
	llm_engine_destroy(e);

	/* chunked prefill at several chunk sizes */
	{
		int			chunks[] = {7, 33, 96};

		for (int c = 0; c < 3; c++)
		{
			e = make_engine(chunks[c], 0, false, 0);
			generate(e, all, 16, batch, 24, 0.0, 0);
			ok = 1;
			for (int i = 0; i < 16; i++)
				ok &= same(&alone[i], &batch[i]);
			CHECK(ok, "max_batched_tokens %d (chunked prefill): identical tokens", chunks[c]);
			llm_engine_destroy(e);
		}
	}
	/* tiny KV pool forces preemption by recompute */
	{
		/* 30 layers * 2 * 16 tokens * 3 heads * 64 * 2 bytes = 368640 bytes per block */
		e = make_engine(512, (int64_t) 368640 * 40, false, 0);
		generate(e, all, 16, batch, 24, 0.0, 0);
		llm_engine_get_stats(e, &st);
		ok = 1;
		for (int i = 0; i < 16; i++)
			ok &= same(&alone[i], &batch[i]) && batch[i].kind == LLM_EVENT_FINISHED;
		CHECK(st.n_preemptions > 0, "tiny KV pool (40 blocks) preempted %lld times", (long long) st.n_preemptions);
		CHECK(ok, "after preemption: identical tokens");
		CHECK(st.kv_blocks_used == 0, "KV blocks back to 0");
		llm_engine_destroy(e);
	}
	/* prefix caching: identical output, cached tokens reported on repeat */
	{
		int			idx = 11;

		e = make_engine(512, 0, true, 0);
		generate(e, &idx, 1, &batch[0], 24, 0.0, 0);
		generate(e, &idx, 1, &batch[1], 24, 0.0, 0);
		CHECK(same(&alone[11], &batch[0]) && same(&alone[11], &batch[1]),
			  "prefix caching on: identical tokens, cold and warm");
		CHECK(batch[1].usage.cached_tokens > 0 && batch[1].usage.cached_tokens < batch[1].usage.prompt_tokens,
			  "warm repeat served %d of %d prompt tokens from the prefix cache",
			  batch[1].usage.cached_tokens, batch[1].usage.prompt_tokens);
		generate(e, all, 16, batch, 24, 0.0, 0);
		ok = 1;
		for (int i = 0; i < 16; i++)
			ok &= same(&alone[i], &batch[i]);
		CHECK(ok, "16-prompt batch sharing the system-prompt prefix: identical tokens");
		llm_engine_destroy(e);
	}
	/* seeded sampling does not depend on the batch company */
	{
		int			i3 = 3;

		e = make_engine(512, 0, false, 0);
		generate(e, &i3, 1, &alone[0], 24, 0.8, 42);
		generate(e, all, 16, batch, 24, 0.8, 42);
		CHECK(same(&alone[0], &batch[3]), "temperature 0.8 seed 42: same tokens alone and among 16");
		llm_engine_destroy(e);
	}
	free(alone);
	free(batch);
}

/*
 * Several logits rows of one sequence in one step: every row of a prefill
 * equals the last row of the prefill that ends there.
 */
static void
test_multirow_logits(void)
{
	llm_engine *e = make_engine(512, 0, false, 0);
	int32_t		np,
				V;
	int32_t    *ids;
	float	   *rows,
			   *one;
	char		err[256];
	int			bad = 0,
				bad_tail = 0;
	llm_engine_stats st;

	if (!CHECK(e != NULL, "engine for multi-row logits"))
		return;
	V = llm_engine_n_vocab(e);
	ids = chat_ids(e, prompts[7], &np);
	rows = malloc((size_t) np * V * sizeof(float));
	one = malloc((size_t) V * sizeof(float));
	CHECK(llm_engine_debug_prompt_logits_rows(e, ids, np, 0, rows, err, sizeof(err)) == LLM_OK,
		  "one prefill of %d tokens returns the logits of all its rows: %s", np, err);
	for (int32_t p = 0; p < np; p++)
	{
		if (llm_engine_debug_prompt_logits(e, ids, p + 1, one, err, sizeof(err)) != LLM_OK)
			bad++;
		else if (memcmp(one, rows + (size_t) p * V, (size_t) V * sizeof(float)) != 0)
			bad++;
	}
	CHECK(bad == 0, "each of the %d rows is bit-identical to the last row of the prefill ending there (%d differ)",
		  np, bad);
	if (llm_engine_debug_prompt_logits_rows(e, ids, np, np - 5, rows, err, sizeof(err)) == LLM_OK)
		for (int32_t p = np - 5; p < np; p++)
		{
			llm_engine_debug_prompt_logits(e, ids, p + 1, one, err, sizeof(err));
			bad_tail += memcmp(one, rows + (size_t) (p - (np - 5)) * V, (size_t) V * sizeof(float)) != 0;
		}
	else
		bad_tail = 1;
	CHECK(bad_tail == 0, "rows from %d on: the last 5 rows, in order", np - 5);
	CHECK(llm_engine_debug_prompt_logits_rows(e, ids, np, np, rows, err, sizeof(err)) == LLM_ERR_INVALID_PARAM,
		  "first row past the prompt refused: %s", err);
	llm_engine_get_stats(e, &st);
	CHECK(st.kv_blocks_used == 0, "debug prefills leave no KV blocks behind");
	free(rows);
	free(one);
	llm_engine_destroy(e);
}

/*
 * The repetition penalty runs in the logits-processor stage: it changes the
 * output, and a request's penalised output does not depend on its batch
 * company (a processor reads only its own request's tokens).
 */
static void
test_penalty_stage(void)
{
	llm_engine *e = make_engine(512, 0, false, 0);
	result	   *plain = calloc(4, sizeof(result)),
			   *alone = calloc(4, sizeof(result)),
			   *batch = calloc(16, sizeof(result));
	char		err[256];
	int			ok = 1,
				differ = 0;

	if (!CHECK(e != NULL, "engine for the penalty stage"))
		return;
	for (int pass = 0; pass < 3; pass++)
	{
		int			n = pass == 2 ? 16 : 4;
		result	   *out = pass == 0 ? plain : pass == 1 ? alone : batch;

		for (int i = 0; i < n; i++)
		{
			llm_request q;

			llm_request_init(&q);
			q.prompt = prompts[i];
			q.prompt_len = strlen(prompts[i]);
			q.params.max_tokens = 32;
			q.params.ignore_eos = true;
			q.params.repetition_penalty = pass == 0 ? 1.0 : 1.3;
			if (i % 2 == 1 || pass == 2)
			{
				q.params.temperature = i % 2 ? 0.7 : 0.0;
				q.params.has_seed = true;
				q.params.seed = 1234 + i;
			}
			memset(&out[i], 0, sizeof(result));
			if (llm_engine_submit(e, 3000 + i, &q, &out[i], err, sizeof(err)) != LLM_OK)
				printf("# submit: %s\n", err);
			if (pass < 2)
				run_all(e);
		}
		run_all(e);
	}
	for (int i = 0; i < 4; i++)
	{
		ok &= alone[i].kind == LLM_EVENT_FINISHED && same(&alone[i], &batch[i]);
		differ += !same(&plain[i], &alone[i]);
	}
	CHECK(differ > 0, "repetition penalty 1.3 changes %d of 4 outputs", differ);
	CHECK(ok, "penalised greedy and seeded outputs: identical alone and among 16");
	free(plain);
	free(alone);
	free(batch);
	llm_engine_destroy(e);
}

static void
test_limits_and_errors(void)
{
	llm_engine *e = make_engine(512, 0, true, 256);
	result		r;
	char		err[256];
	llm_sampling_params p;
	int32_t		np;
	int32_t    *ids;
	int32_t		big[300];
	llm_engine_stats st;

	if (!CHECK(e != NULL, "engine with context 256"))
		return;
	llm_sampling_params_defaults(&p);
	ids = chat_ids(e, prompts[11], &np);

	/* max_tokens */
	p.max_tokens = 5;
	p.ignore_eos = true;
	memset(&r, 0, sizeof(r));
	llm_engine_add_request(e, 1, ids, np, &p, &r, err, sizeof(err));
	run_all(e);
	CHECK(r.why == LLM_FINISH_LENGTH && r.usage.completion_tokens == 5, "max_tokens 5: finish 'length' after 5 tokens");

	/* huge max_tokens stops at the context */
	p.max_tokens = 2147483647;
	memset(&r, 0, sizeof(r));
	CHECK(llm_engine_add_request(e, 2, ids, np, &p, &r, err, sizeof(err)) == LLM_OK, "max_tokens INT_MAX accepted");
	run_all(e);
	CHECK(r.why == LLM_FINISH_LENGTH && r.usage.prompt_tokens + r.usage.completion_tokens == 256,
		  "stops at the context: %d + %d tokens", r.usage.prompt_tokens, r.usage.completion_tokens);

	/* prompt over the context */
	for (int i = 0; i < 300; i++)
		big[i] = 1000 + i;
	CHECK(llm_engine_add_request(e, 3, big, 256, &p, &r, err, sizeof(err)) == LLM_ERR_PROMPT_TOO_LONG,
		  "prompt of n_ctx tokens rejected: %s", err);
	p.max_tokens = 100;
	memset(&r, 0, sizeof(r));
	CHECK(llm_engine_add_request(e, 4, big, 255, &p, &r, err, sizeof(err)) == LLM_OK,
		  "prompt of n_ctx-1 tokens accepted");
	run_all(e);
	CHECK(r.why == LLM_FINISH_LENGTH && r.usage.completion_tokens == 1, "n_ctx-1 prompt: one token, then 'length'");
	CHECK(llm_engine_add_request(e, 5, big, 0, &p, &r, err, sizeof(err)) == LLM_ERR_EMPTY_PROMPT, "empty prompt rejected");
	big[0] = -1;
	CHECK(llm_engine_add_request(e, 6, big, 3, &p, &r, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "bad token id rejected");
	big[0] = 1000;

	/* stop strings: take a piece of the greedy output as the stop string */
	{
		result		full,
					cut;
		llm_sampling_params q;
		const char *stop[1];
		char		piece[16];
		char	   *at;

		llm_sampling_params_defaults(&q);
		q.max_tokens = 40;
		memset(&full, 0, sizeof(full));
		llm_engine_add_request(e, 7, ids, np, &q, &full, err, sizeof(err));
		run_all(e);
		/* a 5-byte piece from the middle, likely spanning a token boundary */
		if (CHECK(full.len > 30, "reference output long enough (%zu bytes)", full.len))
		{
			memcpy(piece, full.text + 20, 5);
			piece[5] = '\0';
			at = strstr(full.text, piece);
			stop[0] = piece;
			q.stop = stop;
			q.n_stop = 1;
			memset(&cut, 0, sizeof(cut));
			llm_engine_add_request(e, 8, ids, np, &q, &cut, err, sizeof(err));
			run_all(e);
			CHECK(cut.why == LLM_FINISH_STOP && cut.len == (size_t) (at - full.text) &&
				  memcmp(cut.text, full.text, cut.len) == 0,
				  "stop string \"%s\" ends the text before it (%zu bytes), stop not included", piece, cut.len);
		}
	}

	/* abort while running: blocks return */
	{
		result		a;

		p.max_tokens = 50;
		memset(&a, 0, sizeof(a));
		llm_engine_add_request(e, 9, ids, np, &p, &a, err, sizeof(err));
		for (int i = 0; i < 3; i++)
			llm_engine_step(e, engine_collect, NULL);
		llm_engine_get_stats(e, &st);
		CHECK(st.kv_blocks_used > 0, "running request holds KV blocks (%d)", st.kv_blocks_used);
		CHECK(llm_engine_abort(e, 9), "abort a running request");
		CHECK(!llm_engine_abort(e, 9), "second abort: unknown id");
		llm_engine_get_stats(e, &st);
		CHECK(st.kv_blocks_used == 0 && !llm_engine_has_work(e), "after abort: no work, KV blocks used 0");
	}
	/* many add/abort cycles: no leak */
	{
		int			ok = 1;
		result		a;

		for (int i = 0; i < 200; i++)
		{
			memset(&a, 0, sizeof(a));
			llm_engine_add_request(e, 100 + i, ids, np, &p, &a, err, sizeof(err));
			if (i % 3 == 0)
				llm_engine_step(e, engine_collect, NULL);
			ok &= llm_engine_abort(e, 100 + i);
		}
		llm_engine_get_stats(e, &st);
		CHECK(ok && st.kv_blocks_used == 0 && st.n_waiting == 0 && st.n_running == 0,
			  "200 add/abort cycles: nothing left behind");
	}
	/* duplicate ids */
	{
		result		a,
					b;

		memset(&a, 0, sizeof(a));
		llm_engine_add_request(e, 77, ids, np, &p, &a, err, sizeof(err));
		CHECK(llm_engine_add_request(e, 77, ids, np, &p, &b, err, sizeof(err)) == LLM_ERR_DUPLICATE_ID,
			  "duplicate live id rejected");
		llm_engine_abort(e, 77);
	}
	/* non-finite logits: per-request error, other requests unaffected */
	{
		result		a,
					b;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		p.max_tokens = 4;
		llm_engine_add_request(e, 200, ids, np, &p, &a, err, sizeof(err));
		llm_engine_add_request(e, 201, ids, np, &p, &b, err, sizeof(err));
		llm_engine_debug_poison_logits(e, 1);
		run_all(e);
		CHECK(a.kind == LLM_EVENT_ERROR && a.status == LLM_ERR_NONFINITE && a.n == 0,
			  "poisoned logits: ERROR \"%s\", no token emitted", a.error);
		CHECK(b.kind == LLM_EVENT_FINISHED && b.usage.completion_tokens == 4, "the other request completes");
	}
	llm_engine_destroy(e);
}

/*
 * The KV cache type: the configuration's default, check and equality; a
 * q8_0 pool of the same budget holds 64/34 times the f16 blocks; a q8_0
 * engine serves, batch-invariant and through the prefix cache.  q8_0 text
 * is not compared with f16 text (it may differ): the agreement is printed.
 */
static void
test_kv_cache_dtype(void)
{
	const int64_t budget = (int64_t) 8 << 20;
	llm_engine_config c,
				d;
	llm_engine *f16,
			   *q8;
	llm_engine_stats sf,
				sq;
	char		err[512];
	static char json[8192];
	static result alone[4],
				together[4],
				ref[4],
				again;
	int			idx[4] = {0, 2, 6, 12};
	int			same_batch = 0,
				same_f16 = 0;

	llm_engine_config_defaults(&c);
	CHECK(c.kv_cache_dtype != NULL && strcmp(c.kv_cache_dtype, "f16") == 0, "default KV cache type f16");
	d = c;
	d.kv_cache_dtype = NULL;
	CHECK(llm_engine_config_equal(&c, &d), "NULL KV cache type equals \"f16\"");
	d.kv_cache_dtype = "q8_0";
	CHECK(!llm_engine_config_equal(&c, &d), "f16 and q8_0 configurations differ (a reload rebuilds the pool)");

	c.model_path = model_path;
	c.kv_cache_dtype = "q4_0";
	CHECK(llm_engine_create(&c, err, sizeof(err)) == NULL && strstr(err, "kv_cache_dtype") != NULL,
		  "unknown KV cache type rejected: %s", err);

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 2;
	c.n_ctx = 512;
	c.kv_cache_bytes = budget;
	f16 = llm_engine_create(&c, err, sizeof(err));
	if (!CHECK(f16 != NULL, "f16 engine: %s", f16 ? "" : err))
		return;
	c.kv_cache_dtype = "q8_0";
	q8 = llm_engine_create(&c, err, sizeof(err));
	if (!CHECK(q8 != NULL, "q8_0 engine: %s", q8 ? "" : err))
	{
		llm_engine_destroy(f16);
		return;
	}
	c.kv_cache_dtype = NULL;	/* the engine keeps its own copy of the name */
	llm_engine_get_config(q8, &d);
	CHECK(d.kv_cache_dtype != NULL && strcmp(d.kv_cache_dtype, "q8_0") == 0, "resolved config names q8_0");
	llm_engine_model_info_json(q8, json, sizeof(json));
	CHECK(strstr(json, "\"kv_cache_dtype\": \"q8_0\"") != NULL, "model info names the q8_0 KV cache");
	llm_engine_model_info_json(f16, json, sizeof(json));
	CHECK(strstr(json, "\"kv_cache_dtype\": \"f16\"") != NULL, "model info names the f16 KV cache");

	llm_engine_get_stats(f16, &sf);
	llm_engine_get_stats(q8, &sq);
	{
		llm_engine_config rf,
					rq;
		int64_t		bf,
					bq;

		llm_engine_get_config(f16, &rf);
		llm_engine_get_config(q8, &rq);
		bf = rf.kv_cache_bytes / sf.kv_blocks_total;
		bq = rq.kv_cache_bytes / sq.kv_blocks_total;
		CHECK(bq * 64 == bf * 34 && sq.kv_blocks_total == budget / bq && sf.kv_blocks_total == budget / bf,
			  "same budget: %d q8_0 blocks of %lld bytes, %d f16 blocks of %lld bytes (34/64)",
			  sq.kv_blocks_total, (long long) bq, sf.kv_blocks_total, (long long) bf);
	}

	for (int i = 0; i < 4; i++)
		generate(q8, &idx[i], 1, &alone[i], 24, 0.0, 1);
	generate(q8, idx, 4, together, 24, 0.0, 1);
	generate(f16, idx, 4, ref, 24, 0.0, 1);
	for (int i = 0; i < 4; i++)
	{
		same_batch += alone[i].done && alone[i].kind == LLM_EVENT_FINISHED && alone[i].n > 0 &&
			same(&alone[i], &together[i]);
		same_f16 += same(&together[i], &ref[i]);
	}
	CHECK(same_batch == 4, "q8_0 cache: 4 greedy outputs alone equal the same in one batch (%d of 4)", same_batch);
	printf("# q8_0 vs f16 greedy, 24 tokens: %d of 4 identical\n", same_f16);

	/* the prompt again: served from q8_0 blocks of the prefix cache, same tokens */
	generate(q8, &idx[1], 1, &again, 24, 0.0, 1);
	CHECK(again.usage.cached_tokens > 0 && same(&again, &alone[1]),
		  "q8_0 prefix-cache hit (%d cached tokens) gives the same output", again.usage.cached_tokens);
	llm_engine_get_stats(q8, &sq);
	CHECK(sq.kv_blocks_used == 0, "q8_0 engine: no KV blocks left in use");
	llm_engine_destroy(q8);
	llm_engine_destroy(f16);
}

int
main(void)
{
	model_path = getenv("LLM_TEST_MODEL");
	if (model_path == NULL)
		model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	test_batch_invariance();
	test_multirow_logits();
	test_penalty_stage();
	test_limits_and_errors();
	test_kv_cache_dtype();
	return unit_done();
}
