/*
 * test_sampler.c — sampler edges: greedy is argmax whatever seed/top_p,
 * seeded draws reproduce, filters keep the right sets, empirical frequencies
 * follow the softmax, the repetition penalty ahead of it (its bit-exact
 * arithmetic: test_logits_processor.c; request validation: test_request.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/sample/logits_processor.h"
#include "engine/sample/sampler.h"
#include "unit.h"

#define V 1000

static void
fill_logits(float *l, unsigned seed)
{
	srand(seed);
	for (int i = 0; i < V; i++)
		l[i] = (float) (rand() % 2000) / 200.0f - 5.0f;
}

/* The lane-wise scans against the plain loops they replace: ties, tails, non-finite values. */
static void
test_scans(void)
{
	bool		arg_ok = true,
				fin_ok = true;

	srand(99);
	for (int trial = 0; trial < 2000; trial++)
	{
		int			n = 1 + rand() % 100;
		float		x[100];
		int			naive = 0;
		bool		finite = true;

		for (int i = 0; i < n; i++)
			x[i] = (float) (rand() % 7);	/* many ties */
		if (trial % 3 == 0)
			x[rand() % n] = (trial % 2) ? INFINITY : NAN;
		for (int i = 0; i < n; i++)
		{
			if (!isfinite(x[i]))
				finite = false;
			if (x[i] > x[naive])
				naive = i;
		}
		if (llm_logits_all_finite(x, n) != finite)
			fin_ok = false;
		if (finite && llm_argmax(x, n) != naive)
			arg_ok = false;
	}
	CHECK(arg_ok, "argmax: first index of the maximum, as the plain scan (2000 arrays with ties)");
	CHECK(fin_ok, "all_finite: finds an infinity or NaN at any position, tails included");
}

int
main(void)
{
	llm_sampler_scratch s;
	float		base[V],
				l[V];
	llm_rng		r1,
				r2;
	int			am;

	test_scans();
	CHECK(llm_sampler_scratch_init(&s, V) == 0, "scratch init");
	fill_logits(base, 7);
	am = llm_argmax(base, V);

	/* greedy: temperature 0 ignores seed, top_p, top_k */
	{
		int			ok = 1;

		for (uint64_t seed = 0; seed < 20; seed++)
		{
			llm_rng_seed(&r1, seed);
			memcpy(l, base, sizeof(l));
			ok &= llm_sample(&s, l, 0.0, (int) seed % 5, 0.1 + seed * 0.04, 0.0, &r1) == am;
		}
		CHECK(ok, "temperature 0 is argmax for any seed/top_k/top_p");
	}
	{
		float		tie[V] = {0};

		tie[10] = tie[20] = 3.0f;
		llm_rng_seed(&r1, 1);
		CHECK(llm_sample(&s, tie, 0.0, 0, 1.0, 0.0, &r1) == 10, "argmax ties go to the lowest id");
	}
	/* seeded reproducibility, and independence of streams */
	{
		int			same = 1,
					diff = 0;

		llm_rng_seed(&r1, 42);
		llm_rng_seed(&r2, 42);
		for (int i = 0; i < 50; i++)
		{
			int			a,
						b;

			memcpy(l, base, sizeof(l));
			a = llm_sample(&s, l, 0.8, 0, 0.95, 0.0, &r1);
			memcpy(l, base, sizeof(l));
			b = llm_sample(&s, l, 0.8, 0, 0.95, 0.0, &r2);
			same &= (a == b);
		}
		CHECK(same, "same seed, same draws");
		llm_rng_seed(&r1, 42);
		llm_rng_seed(&r2, 43);
		for (int i = 0; i < 50; i++)
		{
			memcpy(l, base, sizeof(l));
			int			a = llm_sample(&s, l, 1.5, 0, 1.0, 0.0, &r1);

			memcpy(l, base, sizeof(l));
			diff += a != llm_sample(&s, l, 1.5, 0, 1.0, 0.0, &r2);
		}
		CHECK(diff > 10, "different seeds differ (%d/50 draws)", diff);
	}
	/* top_k = 1 and tiny top_p collapse to argmax */
	{
		int			ok = 1;

		llm_rng_seed(&r1, 3);
		for (int i = 0; i < 30; i++)
		{
			memcpy(l, base, sizeof(l));
			ok &= llm_sample(&s, l, 1.0, 1, 1.0, 0.0, &r1) == am;
			memcpy(l, base, sizeof(l));
			ok &= llm_sample(&s, l, 1.0, 0, 1e-6, 0.0, &r1) == am;
			memcpy(l, base, sizeof(l));
			ok &= llm_sample(&s, l, 1.0, 0, 1.0, 1.0, &r1) == am;
		}
		CHECK(ok, "top_k=1, top_p->0 and min_p=1 give argmax");
	}
	/* top_k = 3 only ever draws the 3 best */
	{
		float		small[V];
		int			ok = 1;

		for (int i = 0; i < V; i++)
			small[i] = -10.0f;
		small[5] = 1.0f;
		small[6] = 0.9f;
		small[7] = 0.8f;
		small[8] = 0.7f;
		llm_rng_seed(&r1, 9);
		for (int i = 0; i < 300; i++)
		{
			int			t;

			memcpy(l, small, sizeof(l));
			t = llm_sample(&s, l, 1.0, 3, 1.0, 0.0, &r1);
			ok &= (t == 5 || t == 6 || t == 7);
		}
		CHECK(ok, "top_k=3 draws only from the 3 best");
	}
	/* empirical frequencies follow softmax (two-token distribution) */
	{
		float		two[V];
		int			hits = 0,
					N = 20000;
		double		expect = 1.0 / (1.0 + exp(-1.0));	/* p(token 1) with logits 1 vs 0 */

		for (int i = 0; i < V; i++)
			two[i] = -1e9f;
		two[1] = 1.0f;
		two[2] = 0.0f;
		llm_rng_seed(&r1, 11);
		for (int i = 0; i < N; i++)
		{
			memcpy(l, two, sizeof(l));
			hits += llm_sample(&s, l, 1.0, 0, 1.0, 0.0, &r1) == 1;
		}
		/* 5 sigma of a binomial */
		CHECK(fabs((double) hits / N - expect) < 5 * sqrt(expect * (1 - expect) / N),
			  "frequency %.4f matches softmax %.4f", (double) hits / N, expect);
	}
	/* repetition penalty (a logits processor before the sampler) lowers a seen token below its rival */
	{
		float		two[V],
					work[V];
		int32_t		seen[3] = {1, 1, 1};
		llm_lp_chain chain;
		llm_sampling_params sp;
		const llm_logits_processor *failed = NULL;

		llm_sampling_params_defaults(&sp);
		sp.repetition_penalty = 1.5;
		for (int i = 0; i < V; i++)
			two[i] = -5.0f;
		two[1] = 2.0f;
		two[2] = 1.5f;
		llm_rng_seed(&r1, 1);
		memcpy(l, two, sizeof(l));
		llm_lp_chain_build(&chain, &sp);
		llm_lp_chain_apply(&chain, l, V, seen, 3, work, &failed);
		CHECK(chain.n == 1 && llm_sample(&s, l, 0.0, 0, 1.0, 0.0, &r1) == 2,
			  "repetition penalty 1.5 makes the seen token lose (applied once per distinct id)");
		CHECK(fabsf(l[1] - 2.0f / 1.5f) < 1e-6f, "penalised logit divided once: %g", l[1]);
		llm_lp_chain_free(&chain);
	}
	/* non-finite detection */
	memcpy(l, base, sizeof(l));
	CHECK(llm_logits_all_finite(l, V), "finite logits pass");
	l[17] = NAN;
	CHECK(!llm_logits_all_finite(l, V), "NaN detected");
	l[17] = INFINITY;
	CHECK(!llm_logits_all_finite(l, V), "inf detected");

	llm_sampler_scratch_free(&s);
	return unit_done();
}
