/*
 * sampler.h — next-token selection from a processed logits row.
 *
 * The last stage of a sampled row (the stages before it, the request's
 * logits processors such as the repetition penalty: logits_processor.h).
 * Pipeline (vLLM's order, vllm/v1/sample/sampler.py): temperature 0 ->
 * argmax (lowest id wins ties; seed and filters ignored); else logits /
 * temperature, top-k, softmax, top-p (Holtzman et al. 2020, smallest set
 * with mass >= top_p), min-p (keep p >= min_p * p_max), renormalise, draw
 * with the request's own xoshiro256** stream so a seed reproduces whatever
 * else is in the batch.
 */
#ifndef LLM_SAMPLER_H
#define LLM_SAMPLER_H

#include <stdint.h>
#include <stdbool.h>

typedef struct llm_rng
{
	uint64_t	s[4];
} llm_rng;

/* Seed the generator (splitmix64 expansion of seed). */
void		llm_rng_seed(llm_rng *r, uint64_t seed);
/* Uniform double in [0, 1). */
double		llm_rng_uniform(llm_rng *r);

typedef struct llm_sampler_scratch
{
	int32_t		n_vocab;
	int32_t    *idx;			/* [n_vocab] candidate ids */
	float	   *prob;			/* [n_vocab] */
} llm_sampler_scratch;

int			llm_sampler_scratch_init(llm_sampler_scratch *s, int32_t n_vocab);
void		llm_sampler_scratch_free(llm_sampler_scratch *s);

/* True when every element of logits[0..n) is finite. */
bool		llm_logits_all_finite(const float *logits, int32_t n);

/*
 * Choose the next token from logits [n_vocab] (modified in place: divided by
 * the temperature; entries may be -INFINITY, at least one must be above).
 * Returns the token id.
 */
int32_t		llm_sample(llm_sampler_scratch *s, float *logits, double temperature, int32_t top_k,
					   double top_p, double min_p, llm_rng *rng);

/* Index of the largest element (lowest index on ties). */
int32_t		llm_argmax(const float *logits, int32_t n);

#endif
