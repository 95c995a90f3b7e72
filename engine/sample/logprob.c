/* logprob.c — log-softmax of one logits row at one token (logprob.h). */
#include "logprob.h"

#include <math.h>

double
llm_logprob(const float *row, int32_t n, int32_t token)
{
	float		m = row[0];
	double		sum = 0.0;

	for (int32_t i = 1; i < n; i++)
		if (row[i] > m)
			m = row[i];
	for (int32_t i = 0; i < n; i++)
		sum += exp((double) row[i] - (double) m);
	return ((double) row[token] - (double) m) - log(sum);
}
