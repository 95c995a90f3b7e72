/*
 * row_scan.h — one pass over a row of floats (row_scan.c): whether every
 * element is finite, and the lowest index of its largest element; a scalar
 * reference and an AVX2 twin with the same answers.
 *
 * This is what the engine asks of every logits row of a step: the
 * non-finite check before the row's logits processors, and the argmax
 * that a greedy row without processors samples (engine/sample/sampler.c's
 * llm_logits_all_finite and llm_argmax give the same answers).  The CPU
 * backend runs the rows of a step on its threads (backend.h scan_rows),
 * each row cut into pieces whose scans llm_row_scan_join combines in piece
 * order.
 *
 * For a row whose elements are all finite, argmax is the lowest index i
 * with x[i] >= x[j] for every j (-0.0 and +0.0 are equal) and max is
 * x[argmax]; for any other row finite is false and max / argmax are
 * unspecified (the caller fails such a row without looking at them).
 */
#ifndef LLM_CPU_ROW_SCAN_H
#define LLM_CPU_ROW_SCAN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct llm_row_scan
{
	float		max;			/* x[argmax] */
	int32_t		argmax;			/* lowest index of the largest element */
	bool		finite;			/* every element finite */
} llm_row_scan;

/* The scan of x[0 .. n), 1 <= n < 2^31. */
typedef void (*llm_row_scan_fn) (const float *x, int64_t n, llm_row_scan *out);

/* avx2 false: the scalar reference; true: AVX2 (the caller checked the CPU). */
llm_row_scan_fn llm_row_scan_kernel(bool avx2);

/*
 * acc becomes the scan of acc's elements followed by next's, next's
 * elements starting at index offset of the joined row: finite of both, and
 * next's maximum only if strictly larger (ties keep the earlier index).
 */
static inline void
llm_row_scan_join(llm_row_scan *acc, const llm_row_scan *next, int32_t offset)
{
	acc->finite = acc->finite && next->finite;
	if (next->max > acc->max)
	{
		acc->max = next->max;
		acc->argmax = offset + next->argmax;
	}
}

#endif
