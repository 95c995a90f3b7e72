/*
 * test_gemma3_window_kv.c — Gemma 3's sliding-window layers in the local
 * KV group (scheduler.h), on the real model: greedy output of long
 * sequences (past the 512-key window) equals that of an engine keeping
 * every position of every layer (kv_keep_windowed), alone, under chunked
 * prefill, several at once on a pool that forces preemption, and after a
 * prefix-cache hit on a prompt whose early local blocks were freed; the
 * local pool holds only about a window per sequence and nothing after.
 * Skips when the model file is missing (as test_gemma3.c).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "model_path_test_util.h"
#include "engine/sched/scheduler.h"
#include "unit.h"

#define GEN 16
#define N_CTX 4096

typedef struct result
{
	int32_t		tok[GEN + 4];
	int			n;
	bool		done;
	llm_status	status;
} result;

static void
collect(const llm_event *ev, void *cb_arg)
{
	result	   *r = ev->user_data;

	(void) cb_arg;
	if (ev->kind == LLM_EVENT_TEXT && ev->token_id >= 0 && r->n < GEN + 4)
		r->tok[r->n++] = ev->token_id;
	else if (ev->kind == LLM_EVENT_FINISHED)
		r->done = true;
	else if (ev->kind == LLM_EVENT_ERROR)
	{
		r->done = true;
		r->status = ev->status;
		printf("# error: %s\n", ev->text ? ev->text : "");
	}
}

static llm_engine *
make_engine(const char *model, bool keep, bool prefix, int max_batched, int64_t kv_bytes, int max_running)
{
	llm_engine_config cfg;
	const char *threads = getenv("LLM_TEST_THREADS");
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&cfg);
	cfg.model_path = model;
	if (threads && *threads)
		cfg.n_threads = atoi(threads);
	cfg.n_ctx = N_CTX;
	cfg.max_batched_tokens = max_batched;
	cfg.kv_cache_bytes = kv_bytes;
	cfg.prefix_caching = prefix;
	cfg.max_running = max_running;
	cfg.kv_keep_windowed = keep;
	cfg.spec_tokens = 0;
	e = llm_engine_create(&cfg, err, sizeof(err));
	if (e == NULL)
		printf("# engine: %s\n", err);
	return e;
}

/* A long text of n sentences that vary (so the model's continuation is not trivial). */
static char *
long_text(int n, int salt)
{
	static const char *const what[] = {"printer", "laptop", "router", "badge reader", "monitor", "phone"};
	static const char *const how[] = {"stops after", "restarts every", "beeps for", "freezes within"};
	size_t		cap = (size_t) n * 96 + 1,
				len = 0;
	char	   *s = malloc(cap);

	for (int i = 0; i < n; i++)
		len += (size_t) snprintf(s + len, cap - len, "Ticket %d: the %s on floor %d %s %d minutes. ",
								 1000 + i * 7 + salt, what[(i + salt) % 6], (i * 3 + salt) % 11,
								 how[(i * 5 + salt) % 4], (i * 13 + salt) % 60 + 1);
	return s;
}

static int32_t
tokens_of(llm_engine *e, const char *text, int32_t **ids)
{
	char		err[256];

	return (int32_t) llm_engine_tokenize(e, text, strlen(text), ids, err, sizeof(err));
}

typedef struct peaks
{
	int32_t		local_used;
	int32_t		used;
	int64_t		preemptions;
} peaks;

/* Submit n prompts at once, run to the end; the most KV blocks held at once into pk. */
static bool
run(llm_engine *e, int32_t *const *ids, const int32_t *n_ids, int n, result *out, peaks *pk)
{
	llm_sampling_params sp;
	char		err[256];
	static uint64_t next_id = 1;
	llm_engine_stats st;

	llm_sampling_params_defaults(&sp);
	sp.temperature = 0;
	sp.max_tokens = GEN;
	sp.ignore_eos = true;
	memset(pk, 0, sizeof(*pk));
	for (int i = 0; i < n; i++)
	{
		memset(&out[i], 0, sizeof(out[i]));
		if (llm_engine_add_request(e, next_id++, ids[i], n_ids[i], &sp, &out[i], err, sizeof(err)) != LLM_OK)
		{
			printf("# add_request: %s\n", err);
			return false;
		}
	}
	while (llm_engine_has_work(e))
	{
		if (llm_engine_step(e, collect, NULL) != LLM_OK)
			return false;
		llm_engine_get_stats(e, &st);
		if (st.kv_local_blocks_used > pk->local_used)
			pk->local_used = st.kv_local_blocks_used;
		if (st.kv_blocks_used > pk->used)
			pk->used = st.kv_blocks_used;
	}
	llm_engine_get_stats(e, &st);
	pk->preemptions = st.n_preemptions;
	for (int i = 0; i < n; i++)
		if (!out[i].done || out[i].status != LLM_OK || out[i].n != GEN)
			return false;
	return true;
}

static bool
same(const result *a, const result *b)
{
	return a->n == b->n && memcmp(a->tok, b->tok, (size_t) a->n * sizeof(int32_t)) == 0;
}

static bool
idle(llm_engine *e)
{
	llm_engine_stats st;

	llm_engine_get_stats(e, &st);
	if (st.kv_blocks_used != 0 || st.kv_local_blocks_used != 0)
		printf("# still held: %d blocks (%d local)\n", st.kv_blocks_used, st.kv_local_blocks_used);
	return st.kv_blocks_used == 0 && st.kv_local_blocks_used == 0;
}

int
main(void)
{
	char		pathbuf[4096];
	const char *model = gemma_path(pathbuf, sizeof(pathbuf));
	llm_engine *keep,
			   *win;
	int32_t    *ids[4];
	int32_t		n_ids[4];
	result		ref[4],
				got[4];
	peaks		pk;
	llm_engine_stats st;

	if (access(model, R_OK) != 0)
	{
		SKIP("Gemma 3 window KV: %s not found (make model MODEL=gemma3-270m, or set LLM_TEST_MODEL_GEMMA3)",
			 model);
		return unit_done();
	}
	keep = make_engine(model, true, false, 512, 256 << 20, 8);
	if (!CHECK(keep != NULL, "engine keeping every position"))
		return unit_done();
	llm_engine_get_stats(keep, &st);
	CHECK(st.kv_local_blocks_total == 0, "kv_keep_windowed: one KV group");
	{
		char	   *t0 = long_text(60, 0),
				   *t1 = long_text(40, 3),
				   *t2 = long_text(30, 5);

		n_ids[0] = tokens_of(keep, t0, &ids[0]);
		n_ids[1] = tokens_of(keep, t1, &ids[1]);
		n_ids[2] = tokens_of(keep, t2, &ids[2]);
		free(t0);
		free(t1);
		free(t2);
	}
	/* prompt 3: prompt 0 and a different tail, for the prefix cache */
	{
		char	   *t3 = long_text(60, 0),
				   *tail = long_text(4, 9);
		char	   *both = malloc(strlen(t3) + strlen(tail) + 1);
		int32_t    *tail_ids;
		int32_t		n_tail;

		n_tail = tokens_of(keep, tail, &tail_ids);
		ids[3] = malloc((size_t) (n_ids[0] + n_tail) * sizeof(int32_t));
		memcpy(ids[3], ids[0], (size_t) n_ids[0] * sizeof(int32_t));
		memcpy(ids[3] + n_ids[0], tail_ids, (size_t) n_tail * sizeof(int32_t));
		n_ids[3] = n_ids[0] + n_tail;
		free(tail_ids);
		free(both);
		free(t3);
		free(tail);
	}
	printf("# prompts of %d, %d, %d, %d tokens\n", n_ids[0], n_ids[1], n_ids[2], n_ids[3]);
	CHECK(n_ids[0] > 1000 && n_ids[2] > 550, "prompts well past the 512-key window");

	/* references: every position kept, each prompt alone */
	for (int i = 0; i < 4; i++)
	{
		bool		ok = run(keep, &ids[i], &n_ids[i], 1, &ref[i], &pk);

		CHECK(ok, "reference %d: %d tokens", i, ref[i].n);
	}
	llm_engine_destroy(keep);

	/* 1. one long sequence, chunked prefill of 128 */
	win = make_engine(model, false, false, 128, 256 << 20, 8);
	if (!CHECK(win != NULL, "engine with the local group"))
		return unit_done();
	llm_engine_get_stats(win, &st);
	CHECK(st.kv_local_blocks_total > 0 && st.kv_local_blocks_total < st.kv_blocks_total,
		  "a local pool of %d blocks beside %d global", st.kv_local_blocks_total,
		  st.kv_blocks_total - st.kv_local_blocks_total);
	CHECK(run(win, &ids[0], &n_ids[0], 1, &got[0], &pk) && same(&got[0], &ref[0]),
		  "long sequence, chunks of 128: identical to keeping every position");
	{
		int32_t		global = (n_ids[0] + GEN + 15) / 16;
		int32_t		bound = llm_sched_local_blocks_bound(512, 16, 128);

		CHECK(pk.local_used <= bound && pk.used - pk.local_used <= global,
			  "held at most %d local blocks (bound %d) and %d global (%d positions)", pk.local_used, bound,
			  pk.used - pk.local_used, n_ids[0] + GEN);
	}
	CHECK(idle(win), "finish: no block held in either pool");
	llm_engine_destroy(win);

	/* 2. three at once on a pool that cannot hold them: preemption */
	win = make_engine(model, false, false, 256, 24 << 20, 4);
	if (CHECK(win != NULL, "small-pool engine"))
	{
		CHECK(run(win, ids, n_ids, 3, got, &pk) && same(&got[0], &ref[0]) && same(&got[1], &ref[1]) &&
			  same(&got[2], &ref[2]), "three long sequences together: identical to each alone");
		CHECK(pk.preemptions > 0, "the small pool preempted %lld times", (long long) pk.preemptions);
		CHECK(idle(win), "after preemption and finish: no block held");
		llm_engine_destroy(win);
	}

	/* 3. prefix cache: prompt 0, then prompt 0 + a tail */
	win = make_engine(model, false, true, 512, 256 << 20, 8);
	if (CHECK(win != NULL, "prefix-caching engine"))
	{
		int64_t		hit0;

		CHECK(run(win, &ids[0], &n_ids[0], 1, &got[0], &pk) && same(&got[0], &ref[0]), "prompt 0, caching on");
		llm_engine_get_stats(win, &st);
		hit0 = st.cached_prompt_tokens;
		CHECK(run(win, &ids[3], &n_ids[3], 1, &got[3], &pk) && same(&got[3], &ref[3]),
			  "prompt 0 + tail after a prefix-cache hit: identical to no cache");
		llm_engine_get_stats(win, &st);
		CHECK(st.cached_prompt_tokens - hit0 >= n_ids[0] - 16,
			  "the hit served %lld of its %d prompt tokens, the window tail from the local cache",
			  (long long) (st.cached_prompt_tokens - hit0), n_ids[3]);
		CHECK(idle(win), "no block held after both");
		llm_engine_destroy(win);
	}
	for (int i = 0; i < 4; i++)
		free(ids[i]);
	return unit_done();
}
