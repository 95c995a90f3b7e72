/*
 * test_prefix_cache.c — prefix caching on the real model: every output with
 * the cache on must be token-identical to the same prompt's greedy output
 * with the cache off.  Prompts are slices of one tokenized chat
 * conversation: exactly k blocks long, k blocks + 1, shorter than a block,
 * two prompts sharing a prefix that ends mid-block, the same prompt
 * repeated, a prompt whose blocks a flood of other prompts evicted from a
 * tiny pool, prompts under preemption, and 8 requests sharing a prefix in one
 * batch.  Also checks the reported cached-token counts and the engine's
 * prefix statistics.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "unit.h"

#define MAXTOK 64
#define ENGINE_TEST_MAXTOK MAXTOK
#include "engine_test_util.h"
#define BS 16
/* 30 layers * 2 (K, V) * 16 tokens * 3 kv heads * 64 dims * 2 bytes */
#define BLOCK_BYTES ((int64_t) 368640)

typedef engine_result result;

typedef struct prompt
{
	int32_t		ids[512];
	int32_t		n;
} prompt;

static const char *model_path;
static int32_t stream[1024];	/* the tokenized conversation the prompts are cut from */
static int32_t n_stream;
static int32_t other[1024];		/* a different conversation: tails and flood prompts */
static int32_t n_other;

static llm_engine *
make_engine(bool prefix, int64_t kv_bytes)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 2;
	c.block_size = BS;
	c.kv_cache_bytes = kv_bytes;
	c.max_running = 16;
	c.n_ctx = 1024;
	c.prefix_caching = prefix;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine: %s\n", err);
	return e;
}

/* Queue prompts p[0..n) at once (greedy, max_tokens each) and run to completion. */
static void
run_batch(llm_engine *e, const prompt *p, int n, int max_tokens, uint64_t salt, result *out)
{
	static uint64_t next_id = 1;
	char		err[256];

	for (int i = 0; i < n; i++)
	{
		llm_sampling_params sp;

		llm_sampling_params_defaults(&sp);
		sp.max_tokens = max_tokens;
		sp.temperature = 0;
		sp.ignore_eos = true;	/* fixed lengths: outputs compared token by token */
		sp.cache_salt = salt;
		memset(&out[i], 0, sizeof(result));
		if (llm_engine_add_request(e, next_id++, p[i].ids, p[i].n, &sp, &out[i], err, sizeof(err)) != LLM_OK)
			printf("# add_request: %s\n", err);
	}
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
}

static bool
same(const result *a, const result *b)
{
	return a->done && b->done && a->kind == LLM_EVENT_FINISHED && b->kind == LLM_EVENT_FINISHED &&
		a->n > 0 && a->n == b->n && memcmp(a->ids, b->ids, a->n * sizeof(int32_t)) == 0;
}

static prompt
slice(const int32_t *src, int32_t n)
{
	prompt		p;

	memcpy(p.ids, src, n * sizeof(int32_t));
	p.n = n;
	return p;
}

/* shared[0..n_shared) followed by n_tail tokens of the other conversation from offset at. */
static prompt
joined(int32_t n_shared, int32_t at, int32_t n_tail)
{
	prompt		p = slice(stream, n_shared);

	memcpy(p.ids + n_shared, other + at, n_tail * sizeof(int32_t));
	p.n = n_shared + n_tail;
	return p;
}

static int32_t
tokenize_chat(llm_engine *e, const char *text, int32_t *out, int32_t cap)
{
	char		err[256];
	llm_chat_message m = {"user", text, strlen(text)};

	return (int32_t) llm_chat_apply(llm_engine_chat_template(e), llm_engine_tokenizer(e), &m, 1,
									out, cap, err, sizeof(err));
}

/* Cache-off reference of each prompt alone. */
static void
references(llm_engine *off, const prompt *p, int n, int max_tokens, result *ref)
{
	for (int i = 0; i < n; i++)
		run_batch(off, &p[i], 1, max_tokens, 0, &ref[i]);
}

int
main(void)
{
	llm_engine *off,
			   *on;
	llm_engine_stats st;
	result		ref[16],
				got[16],
				again[16];
	prompt		p[16];
	/* lengths: k blocks, k blocks + 1, shorter than a block */
	int32_t		lens[] = {2 * BS, 2 * BS + 1, 3 * BS, 3 * BS + 1, 9, BS, BS + 1};
	int			n_lens = (int) (sizeof(lens) / sizeof(lens[0]));
	int			ok;

	model_path = getenv("LLM_TEST_MODEL");
	if (model_path == NULL)
		model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	off = make_engine(false, 0);
	if (!CHECK(off != NULL, "cache-off engine loads %s", model_path))
		return unit_done();
	n_stream = tokenize_chat(off, "Our support team receives tickets about billing, shipping, returns and "
							 "technical problems. For each ticket, read it carefully, decide which of these four "
							 "categories fits best, estimate the urgency from one to five, and write a one-sentence "
							 "summary that a busy manager can read in two seconds. Never invent facts that are not in "
							 "the ticket, keep the customer's own words where possible, and answer in English even "
							 "when the ticket is written in another language. Here is the ticket:", stream, 1024);
	n_other = tokenize_chat(off, "The router drops the Wi-Fi connection every evening around eight and only a "
							"reboot fixes it; my neighbour has the same model and no problem at all. What should I "
							"check first, and is it worth replacing the device?", other, 1024);
	if (!CHECK(n_stream > 120 && n_other > 60, "test conversations tokenized (%d and %d tokens)", n_stream, n_other))
		return unit_done();

	/* 1. exact lengths, cold then repeated */
	on = make_engine(true, 0);
	if (!CHECK(on != NULL, "cache-on engine loads"))
		return unit_done();
	for (int i = 0; i < n_lens; i++)
		p[i] = slice(stream, lens[i]);
	references(off, p, n_lens, 8, ref);
	for (int i = 0; i < n_lens; i++)
	{
		int32_t		want = (lens[i] - 1) / BS * BS;

		run_batch(on, &p[i], 1, 8, 0, &got[i]);
		run_batch(on, &p[i], 1, 8, 0, &again[i]);
		CHECK(same(&ref[i], &got[i]) && same(&ref[i], &again[i]),
			  "%d-token prompt: cache on (first and repeated) gives the cache-off tokens", lens[i]);
		CHECK(again[i].usage.cached_tokens == want,
			  "%d-token prompt repeated: %d cached tokens (want %d: full blocks, last token recomputed)",
			  lens[i], again[i].usage.cached_tokens, want);
	}
	CHECK(got[0].usage.cached_tokens == 0, "first prompt cold: nothing cached (%d)", got[0].usage.cached_tokens);

	/* 2. two prompts sharing a 40-token prefix (ends mid-block), other tails */
	p[0] = joined(40, 30, 12);
	p[1] = joined(40, 50, 9);
	references(off, p, 2, 8, ref);
	{
		llm_engine *fresh = make_engine(true, 0);

		run_batch(fresh, &p[0], 1, 8, 0, &got[0]);
		run_batch(fresh, &p[1], 1, 8, 0, &got[1]);
		CHECK(same(&ref[0], &got[0]) && same(&ref[1], &got[1]),
			  "prefix ending mid-block: both prompts give the cache-off tokens");
		CHECK(got[0].usage.cached_tokens == 0 && got[1].usage.cached_tokens == 32,
			  "second prompt reuses the 2 full shared blocks (%d cached, want 32)", got[1].usage.cached_tokens);
		/* another isolation salt: same prompt, no hit, same tokens */
		run_batch(fresh, &p[1], 1, 8, 12345, &got[2]);
		CHECK(same(&ref[1], &got[2]) && got[2].usage.cached_tokens == 0,
			  "other cache salt: no hit (%d cached), same tokens", got[2].usage.cached_tokens);
		llm_engine_destroy(fresh);
	}

	/* 3. 8 requests sharing a 100-token prefix in one batch */
	for (int i = 0; i < 8; i++)
		p[i] = joined(100, 20 + 5 * i, 6 + i);
	references(off, p, 8, 8, ref);
	{
		llm_engine *fresh = make_engine(true, 0);
		int32_t		cached = 0;

		run_batch(fresh, p, 8, 8, 0, got);
		llm_engine_get_stats(fresh, &st);
		ok = 1;
		for (int i = 0; i < 8; i++)
		{
			ok &= same(&ref[i], &got[i]);
			cached += got[i].usage.cached_tokens;
		}
		CHECK(ok, "8 requests sharing a prefix in one batch: each gives its cache-off tokens");
		CHECK(st.max_batch_seqs >= 2, "they ran batched (max %d sequences in a step)", st.max_batch_seqs);
		CHECK(cached == 7 * 96, "the 7 later ones took the 6 shared blocks from the first (%d cached, want %d)",
			  cached, 7 * 96);
		CHECK(st.prefix_queries == st.prompt_tokens && st.cached_prompt_tokens == cached,
			  "engine stats: %lld prompt tokens queried of %lld, %lld hit",
			  (long long) st.prefix_queries, (long long) st.prompt_tokens, (long long) st.cached_prompt_tokens);
		CHECK(st.kv_blocks_used == 0, "no blocks held after the batch (%d)", st.kv_blocks_used);
		llm_engine_destroy(fresh);
	}

	/* 4. eviction: a tiny pool (12 blocks), a prompt, a flood of others, the prompt again */
	{
		llm_engine *tiny = make_engine(true, BLOCK_BYTES * 12);
		prompt		flood[6];
		result		fr[6];

		p[0] = slice(stream, 70);
		references(off, p, 1, 8, ref);
		for (int i = 0; i < 6; i++)
			flood[i] = slice(other + 3 * i, 50);
		run_batch(tiny, &p[0], 1, 8, 0, &got[0]);
		run_batch(tiny, &p[0], 1, 8, 0, &got[1]);
		for (int i = 0; i < 6; i++)
			run_batch(tiny, &flood[i], 1, 8, 0, &fr[i]);
		run_batch(tiny, &p[0], 1, 8, 0, &got[2]);
		CHECK(got[1].usage.cached_tokens == 64, "tiny pool: the repeat hit first (%d cached)", got[1].usage.cached_tokens);
		CHECK(got[2].usage.cached_tokens == 0, "after a flood of 6 other prompts its blocks were evicted (%d cached)",
			  got[2].usage.cached_tokens);
		CHECK(same(&ref[0], &got[0]) && same(&ref[0], &got[1]) && same(&ref[0], &got[2]),
			  "cold, warm and after eviction: the cache-off tokens");
		llm_engine_destroy(tiny);
	}

	/* 5. preemption: 8 prompts sharing a prefix, 24 tokens each, in a 16-block pool */
	{
		llm_engine *tiny = make_engine(true, BLOCK_BYTES * 16);

		for (int i = 0; i < 8; i++)
			p[i] = joined(48, 10 + 7 * i, 5 + i);
		references(off, p, 8, 24, ref);
		run_batch(tiny, p, 8, 24, 0, got);
		llm_engine_get_stats(tiny, &st);
		ok = 1;
		for (int i = 0; i < 8; i++)
			ok &= same(&ref[i], &got[i]);
		CHECK(st.n_preemptions > 0, "16-block pool preempted %lld times", (long long) st.n_preemptions);
		CHECK(ok, "under preemption with prefix caching: each gives its cache-off tokens");
		CHECK(st.kv_blocks_used == 0, "no blocks held afterwards (%d)", st.kv_blocks_used);
		llm_engine_destroy(tiny);
	}

	/* 6. a follow-up whose prompt contains an earlier answer: identical tokens */
	{
		llm_engine *fresh = make_engine(true, 0);

		p[0] = slice(stream, 40);
		run_batch(fresh, &p[0], 1, 30, 0, &got[0]);
		/* the 40 prompt tokens + the 30 generated ones + 5 more as a new prompt */
		p[1] = p[0];
		memcpy(p[1].ids + 40, got[0].ids, 30 * sizeof(int32_t));
		memcpy(p[1].ids + 70, other + 10, 5 * sizeof(int32_t));
		p[1].n = 75;
		references(off, &p[1], 1, 8, ref);
		run_batch(fresh, &p[1], 1, 8, 0, &got[1]);
		CHECK(got[0].n == 30 && same(&ref[0], &got[1]),
			  "follow-up containing an earlier answer: the cache-off tokens (%d cached)", got[1].usage.cached_tokens);
		CHECK(got[1].usage.cached_tokens == 32,
			  "it reuses the 2 all-prompt blocks only, not blocks computed as generated tokens (%d cached)",
			  got[1].usage.cached_tokens);
		llm_engine_destroy(fresh);
	}

	llm_engine_destroy(on);
	llm_engine_destroy(off);
	return unit_done();
}
