/*
 * test_logits_processor.c — the logits-processor stage without a model: the
 * repetition penalty through the chain equals, bit for bit, the arithmetic
 * the sampler used to apply itself (reproduced below as the reference) on
 * random rows and token histories, and so does the token drawn after it;
 * the chain runs its processors in order and tells them every accepted
 * token; a failing processor is reported.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample/logits_processor.h"
#include "engine/sample/sampler.h"
#include "unit.h"

#define V 3000

/*
 * The reference: the repetition penalty as the sampler computed it before
 * the stage existed, with its scratch (prob[]) as the "seen" marker.
 */
static void
ref_penalty(float *logits, int32_t n, double repetition_penalty, const int32_t *penalty_tokens,
			int32_t n_penalty, float *prob)
{
	if (repetition_penalty != 1.0 && penalty_tokens != NULL && n_penalty > 0)
	{
		float		pen = (float) repetition_penalty;

		for (int32_t i = 0; i < n_penalty; i++)
			if (penalty_tokens[i] >= 0 && penalty_tokens[i] < n)
				prob[penalty_tokens[i]] = 0.0f;
		for (int32_t i = 0; i < n_penalty; i++)
		{
			int32_t		t = penalty_tokens[i];

			if (t < 0 || t >= n || prob[t] != 0.0f)
				continue;
			prob[t] = 1.0f;
			logits[t] = logits[t] > 0 ? logits[t] / pen : logits[t] * pen;
		}
	}
}

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t
next_u64(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static double
next_unit(void)
{
	return (double) (next_u64() >> 11) * 0x1.0p-53;
}

static void
random_row(float *row, int32_t n)
{
	for (int32_t i = 0; i < n; i++)
		row[i] = (float) ((next_unit() - 0.5) * 30.0);
	/* exact zeros and ties: the > 0 test and equal values must behave the same */
	for (int k = 0; k < 20; k++)
		row[next_u64() % n] = 0.0f;
	row[next_u64() % n] = row[0];
}

/* A history with repeats, and ids outside the vocabulary the penalty must skip. */
static int32_t
random_history(int32_t *tok, int32_t cap, int32_t n)
{
	int32_t		len = 1 + (int32_t) (next_u64() % (uint64_t) cap);

	for (int32_t i = 0; i < len; i++)
	{
		uint64_t	x = next_u64();

		if (x % 17 == 0)
			tok[i] = (x & 64) ? -1 - (int32_t) (x % 5) : n + (int32_t) (x % 5);
		else if (i > 0 && x % 3 == 0)
			tok[i] = tok[next_u64() % (uint64_t) i];
		else
			tok[i] = (int32_t) (x % (uint64_t) (x % 2 ? 40 : n));
	}
	return len;
}

static void
test_penalty_bit_exact(void)
{
	static float base[V],
				ref[V],
				got[V],
				scratch[V],
				work[V];
	static int32_t hist[600];
	llm_sampler_scratch s;
	int			rows_equal = 1,
				draws_equal = 1,
				changed = 0,
				trials = 400;

	llm_sampler_scratch_init(&s, V);
	for (int trial = 0; trial < trials; trial++)
	{
		double		pen = trial % 10 == 0 ? 1.0 : 0.05 + next_unit() * 3.0;
		int32_t		n_hist = random_history(hist, 600, V);
		llm_sampling_params sp;
		llm_lp_chain chain;
		const llm_logits_processor *failed = NULL;
		double		temp = (trial % 4 == 0) ? 0.0 : 0.2 + next_unit() * 1.5;
		int32_t		top_k = (trial % 3 == 0) ? (int32_t) (next_u64() % 50) : 0;
		double		top_p = (trial % 5 == 0) ? 0.5 + next_unit() * 0.5 : 1.0;
		double		min_p = (trial % 7 == 0) ? next_unit() * 0.2 : 0.0;
		llm_rng		r_ref,
					r_got;
		int32_t		t_ref,
					t_got;

		random_row(base, V);
		memcpy(ref, base, sizeof(ref));
		memcpy(got, base, sizeof(got));
		for (int i = 0; i < V; i++)
		{
			scratch[i] = (float) next_unit();	/* leftovers the marker must not depend on */
			work[i] = -(float) next_unit();
		}
		ref_penalty(ref, V, pen, hist, n_hist, scratch);

		llm_sampling_params_defaults(&sp);
		sp.repetition_penalty = pen;
		if (llm_lp_chain_build(&chain, &sp) != 0 ||
			llm_lp_chain_apply(&chain, got, V, hist, n_hist, work, &failed) != 0)
			rows_equal = 0;
		if ((pen == 1.0) != (chain.n == 0))
			rows_equal = 0;
		if (memcmp(ref, got, sizeof(ref)) != 0)
			rows_equal = 0;
		changed += memcmp(base, got, sizeof(base)) != 0;

		/* the draw after the stage: the same stream gives the same token */
		llm_rng_seed(&r_ref, (uint64_t) trial);
		llm_rng_seed(&r_got, (uint64_t) trial);
		t_ref = llm_sample(&s, ref, temp, top_k, top_p, min_p, &r_ref);
		t_got = llm_sample(&s, got, temp, top_k, top_p, min_p, &r_got);
		if (t_ref != t_got || memcmp(ref, got, sizeof(ref)) != 0)
			draws_equal = 0;
		llm_lp_chain_free(&chain);
	}
	CHECK(rows_equal, "repetition penalty through the chain: %d random rows bit-identical to the reference", trials);
	CHECK(changed > trials / 2, "the penalty changed %d of %d rows (penalty 1: no processor)", changed, trials);
	CHECK(draws_equal, "greedy and seeded draws after the stage equal the reference's (%d rows)", trials);
	llm_sampler_scratch_free(&s);
}

/*
 * A stateful test processor: bans the token accepted last, and adds its tag
 * to token 0 so the chain order shows in the row.
 */
typedef struct ban_last
{
	llm_logits_processor base;
	int32_t		last;
	int			n_accepted;
	float		tag;
	int			fail_apply;
	int		   *destroyed;
} ban_last;

static int
ban_apply(llm_logits_processor *lp, float *row, int32_t n, const int32_t *tokens, int32_t n_tokens,
		  float *work)
{
	ban_last   *b = (ban_last *) lp;

	(void) tokens;
	(void) n_tokens;
	(void) work;
	if (b->fail_apply)
		return -1;
	if (b->last >= 0 && b->last < n)
		row[b->last] = -INFINITY;
	row[0] = row[0] * 2.0f + b->tag;
	return 0;
}

static int
ban_accept(llm_logits_processor *lp, int32_t token)
{
	ban_last   *b = (ban_last *) lp;

	b->last = token;
	b->n_accepted++;
	return 0;
}

static void
ban_destroy(llm_logits_processor *lp)
{
	(*((ban_last *) lp)->destroyed)++;
	free(lp);
}

static const llm_logits_processor_ops ban_ops = {"ban_last", ban_apply, ban_accept, ban_destroy, NULL};

static ban_last *
ban_new(float tag, int *destroyed)
{
	ban_last   *b = calloc(1, sizeof(*b));

	b->base.ops = &ban_ops;
	b->last = -1;
	b->tag = tag;
	b->destroyed = destroyed;
	return b;
}

static void
test_chain(void)
{
	llm_lp_chain c = {NULL, 0};
	int			destroyed = 0;
	ban_last   *a = ban_new(1.0f, &destroyed),
			   *b = ban_new(10.0f, &destroyed);
	float		row[8] = {1, 5, 2, 3, 4, 0, 0, 0},
				work[8];
	int32_t		toks[1] = {1};
	const llm_logits_processor *failed = NULL;
	llm_sampler_scratch s;
	llm_rng		rng;
	int32_t		t1,
				t2;

	llm_sampler_scratch_init(&s, 8);
	llm_rng_seed(&rng, 1);
	CHECK(llm_lp_chain_add(&c, &a->base) == 0 && llm_lp_chain_add(&c, &b->base) == 0 && c.n == 2,
		  "two processors in a chain");
	CHECK(llm_lp_chain_apply(&c, row, 8, toks, 1, work, &failed) == 0 && row[0] == (1.0f * 2 + 1) * 2 + 10,
		  "processors run in chain order (token 0: %g)", row[0]);
	t1 = llm_sample(&s, row, 0.0, 0, 1.0, 0.0, &rng);
	CHECK(t1 == 0 && llm_lp_chain_accept(&c, t1, &failed) == 0 && a->n_accepted == 1 && b->last == 0,
		  "accept reaches every processor");
	{
		float		row2[8] = {1, 5, 2, 3, 4, 0, 0, 0};

		llm_lp_chain_apply(&c, row2, 8, toks, 1, work, &failed);
		t2 = llm_sample(&s, row2, 0.0, 0, 1.0, 0.0, &rng);
		CHECK(isinf(row2[0]) && row2[0] < 0 && t2 == 1,
			  "a stateful mask after accept: the accepted token is -INFINITY, the next best is drawn (%d)", t2);
	}
	b->fail_apply = 1;
	CHECK(llm_lp_chain_apply(&c, row, 8, toks, 1, work, &failed) == -1 && failed == &b->base,
		  "a failing processor is reported by name (%s)", failed ? failed->ops->name : "none");
	CHECK(llm_lp_chain_add(&c, NULL) == -1 && c.n == 2, "a failed constructor is not added");
	llm_lp_chain_free(&c);
	CHECK(destroyed == 2 && c.n == 0 && c.procs == NULL, "the chain frees its processors");
	llm_sampler_scratch_free(&s);
}

int
main(void)
{
	test_penalty_bit_exact();
	test_chain();
	return unit_done();
}
