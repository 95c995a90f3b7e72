/*
 * logprob.h — the log-probability of a token under one logits row, for
 * SCORE requests (what the model's own distribution says, no processors).
 *
 * log softmax(row)[token] = (row[token] - m) - log(sum_i exp(row[i] - m)),
 * m = max_i row[i]: subtracting the maximum keeps every exp() in (0, 1],
 * so nothing overflows; the differences and the sum are float64 (the row
 * stays fp32 as the model produced it), summed in index order so a row gives
 * the same value wherever it was computed.
 */
#ifndef LLM_LOGPROB_H
#define LLM_LOGPROB_H

#include <stdint.h>

/* Natural log-probability of token (in [0, n)) under row [n], all finite; <= 0. */
double		llm_logprob(const float *row, int32_t n, int32_t token);

#endif
