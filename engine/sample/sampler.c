/* sampler.c — see sampler.h. */
#include "sampler.h"
#include "engine/util/hash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void
llm_rng_seed(llm_rng *r, uint64_t seed)
{
	uint64_t	z = seed;

	for (int i = 0; i < 4; i++)
	{
		/* splitmix64 (Vigna), the recommended seeding of xoshiro */
		r->s[i] = llm_mix64(z += 0x9e3779b97f4a7c15ULL);
	}
}

double
llm_rng_uniform(llm_rng *r)
{
	/* xoshiro256** (Blackman & Vigna 2018) */
	uint64_t   *s = r->s;
	uint64_t	result = rotl(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return (double) (result >> 11) * 0x1.0p-53;
}

int
llm_sampler_scratch_init(llm_sampler_scratch *s, int32_t n_vocab)
{
	s->n_vocab = n_vocab;
	s->idx = malloc((size_t) n_vocab * sizeof(int32_t));
	s->prob = malloc((size_t) n_vocab * sizeof(float));
	if (!s->idx || !s->prob)
	{
		llm_sampler_scratch_free(s);
		return -1;
	}
	return 0;
}

void
llm_sampler_scratch_free(llm_sampler_scratch *s)
{
	free(s->idx);
	free(s->prob);
	s->idx = NULL;
	s->prob = NULL;
}

/*
 * Both scans run once per sampled row over the whole vocabulary on the
 * worker's main thread while the compute threads wait, so they are written
 * in 8 independent lanes that the compiler turns into vector code.
 */
#define SCAN_LANES 8

bool
llm_logits_all_finite(const float *logits, int32_t n)
{
	float		zero[SCAN_LANES] = {0};
	int32_t		i = 0;

	/* x * 0 is 0 for every finite x and NaN for an infinity or a NaN */
	for (; i + SCAN_LANES <= n; i += SCAN_LANES)
		for (int k = 0; k < SCAN_LANES; k++)
			zero[k] += logits[i + k] * 0.0f;
	for (; i < n; i++)
		zero[0] += logits[i] * 0.0f;
	for (int k = 0; k < SCAN_LANES; k++)
		if (zero[k] != 0.0f)
			return false;
	return true;
}

int32_t
llm_argmax(const float *logits, int32_t n)
{
	float		m[SCAN_LANES];
	int32_t		at[SCAN_LANES];
	int32_t		i = 0,
				best = 0;

	if (n < SCAN_LANES)
	{
		for (i = 1; i < n; i++)
			if (logits[i] > logits[best])
				best = i;
		return best;
	}
	/* per lane: the largest value and its first index */
	for (int k = 0; k < SCAN_LANES; k++)
	{
		m[k] = logits[k];
		at[k] = k;
	}
	for (i = SCAN_LANES; i + SCAN_LANES <= n; i += SCAN_LANES)
		for (int k = 0; k < SCAN_LANES; k++)
		{
			bool		gt = logits[i + k] > m[k];

			m[k] = gt ? logits[i + k] : m[k];
			at[k] = gt ? i + k : at[k];
		}
	/* the first index holding the maximum, as the plain scan finds it */
	best = at[0];
	for (int k = 1; k < SCAN_LANES; k++)
		if (m[k] > logits[best] || (m[k] == logits[best] && at[k] < best))
			best = at[k];
	for (; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

/* Sort candidates by probability, descending; ties by id for determinism. */
static const float *sort_prob;

static int
cmp_prob_desc(const void *a, const void *b)
{
	int32_t		ia = *(const int32_t *) a,
				ib = *(const int32_t *) b;

	if (sort_prob[ia] > sort_prob[ib])
		return -1;
	if (sort_prob[ia] < sort_prob[ib])
		return 1;
	return (ia > ib) - (ia < ib);
}

int32_t
llm_sample(llm_sampler_scratch *s, float *logits, double temperature, int32_t top_k,
		   double top_p, double min_p, llm_rng *rng)
{
	int32_t		n = s->n_vocab;
	int32_t		n_cand = 0;
	float		max_logit = -INFINITY;
	float		p_max;
	double		sum = 0.0,
				u,
				acc;
	float	   *prob = s->prob;
	int32_t    *idx = s->idx;

	if (temperature <= 0.0)
		return llm_argmax(logits, n);

	for (int32_t i = 0; i < n; i++)
	{
		float		l = (float) (logits[i] / temperature);

		logits[i] = l;
		if (l > max_logit)
			max_logit = l;
	}
	for (int32_t i = 0; i < n; i++)
	{
		prob[i] = expf(logits[i] - max_logit);
		sum += prob[i];
	}
	for (int32_t i = 0; i < n; i++)
		prob[i] = (float) (prob[i] / sum);
	p_max = prob[llm_argmax(logits, n)];

	if (top_k <= 0 && top_p >= 1.0 && min_p <= 0.0)
	{
		/* no filter: draw over the whole vocabulary in id order */
		u = llm_rng_uniform(rng);
		acc = 0.0;
		for (int32_t i = 0; i < n; i++)
		{
			acc += prob[i];
			if (u < acc)
				return i;
		}
		return llm_argmax(logits, n);
	}

	/*
	 * Filters need the candidates in probability order.  Sorting 50k ids per
	 * token is slow, so collect those above a threshold that is lowered until
	 * the set provably contains everything the filters can keep.
	 */
	{
		float		thresh = min_p > 0.0 ? (float) (min_p * p_max) : p_max * 1e-4f;

		for (;;)
		{
			double		mass = 0.0;
			bool		enough;

			n_cand = 0;
			for (int32_t i = 0; i < n; i++)
				if (prob[i] >= thresh)
				{
					idx[n_cand++] = i;
					mass += prob[i];
				}
			enough = (top_k <= 0 || n_cand >= top_k) && (top_p >= 1.0 || mass >= top_p);
			if (min_p > 0.0 && top_k <= 0)
				enough = true;	/* min-p alone defines the set exactly */
			if (enough || thresh == 0.0f)
				break;
			thresh = thresh > 1e-30f ? thresh * 1e-4f : 0.0f;
		}
	}
	sort_prob = prob;
	qsort(idx, n_cand, sizeof(int32_t), cmp_prob_desc);

	if (top_k > 0 && top_k < n_cand)
		n_cand = top_k;
	if (top_p < 1.0)
	{
		double		mass = 0.0,
					cum = 0.0;

		for (int32_t i = 0; i < n_cand; i++)
			mass += prob[idx[i]];
		for (int32_t i = 0; i < n_cand; i++)
		{
			cum += prob[idx[i]] / mass;
			if (cum >= top_p)
			{
				n_cand = i + 1;
				break;
			}
		}
	}
	if (min_p > 0.0)
	{
		float		thresh = (float) (min_p * prob[idx[0]]);
		int32_t		keep = 1;

		while (keep < n_cand && prob[idx[keep]] >= thresh)
			keep++;
		n_cand = keep;
	}
	sum = 0.0;
	for (int32_t i = 0; i < n_cand; i++)
		sum += prob[idx[i]];
	u = llm_rng_uniform(rng) * sum;
	acc = 0.0;
	for (int32_t i = 0; i < n_cand; i++)
	{
		acc += prob[idx[i]];
		if (u < acc)
			return idx[i];
	}
	return idx[n_cand - 1];
}
