/*
 * test_logprob.c — log-softmax of one logits row at one token (logprob.h),
 * without a model: agrees with the textbook formula where that is exact
 * enough, stays finite where the textbook formula overflows, and the
 * probabilities of a row sum to 1.
 */
#include <math.h>
#include <stdlib.h>

#include "engine/sample/logprob.h"
#include "unit.h"

#define V 5000

int
main(void)
{
	static float row[V];
	double		naive_err = 0.0,
				mass = 0.0,
				s = 0.0;

	srand(5);
	for (int i = 0; i < V; i++)
		row[i] = (float) (rand() % 4000) / 200.0f - 10.0f;
	for (int i = 0; i < V; i++)
		s += exp((double) row[i]);
	for (int t = 0; t < V; t += 97)
	{
		double		d = fabs(llm_logprob(row, V, t) - (row[t] - log(s)));

		if (d > naive_err)
			naive_err = d;
	}
	CHECK(naive_err < 1e-12, "moderate logits: equals log(exp(x_t) / sum exp(x)) (max difference %g)", naive_err);
	for (int t = 0; t < V; t++)
		mass += exp(llm_logprob(row, V, t));
	CHECK(fabs(mass - 1.0) < 1e-9, "probabilities of a row sum to 1 (%.15f)", mass);

	/* exp(1e4) overflows a double: the maximum must be subtracted */
	for (int i = 0; i < V; i++)
		row[i] = 1e4f + (float) (i % 3);
	row[7] = 2e4f;
	CHECK(llm_logprob(row, V, 7) == 0.0 && isfinite(llm_logprob(row, V, 8)) && llm_logprob(row, V, 8) == 1e4f + 2 - 2e4f,
		  "huge logits: the dominant token has log-probability 0, the others %g", llm_logprob(row, V, 8));
	for (int i = 0; i < V; i++)
		row[i] = -3e4f;
	CHECK(fabs(llm_logprob(row, V, 3) + log((double) V)) < 1e-12, "a flat row of very negative logits: log(1/V)");
	return unit_done();
}
