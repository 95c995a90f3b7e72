/*
 * row_scan.c — the row scan of row_scan.h: the scalar reference and its
 * AVX2 twin.  Depends on nothing else in kernels/cpu.
 *
 * The AVX2 scan keeps 32 lanes (4 vectors of 8), each with the largest
 * element it has seen and that element's first index (a strict > compare,
 * so a later equal element never replaces an earlier one), and a
 * finiteness sum of x * 0 (0 for every finite x, NaN for an infinity or a
 * NaN, and NaN stays NaN).  The row's maximum is then the largest lane
 * maximum, and its first index the lowest lane index holding it: every
 * occurrence of the maximum lies in a lane whose own maximum it is, and
 * that lane's index is its first occurrence.  The elements past the last
 * whole 32 come after all of those, in order.  For a finite row that is
 * exactly the scalar scan's answer.
 */
#include "row_scan.h"

#include <math.h>

static void
scan_scalar(const float *x, int64_t n, llm_row_scan *out)
{
	int32_t		best = 0;
	bool		finite = isfinite(x[0]);

	for (int64_t i = 1; i < n; i++)
	{
		if (!isfinite(x[i]))
			finite = false;
		if (x[i] > x[best])
			best = (int32_t) i;
	}
	out->max = x[best];
	out->argmax = best;
	out->finite = finite;
}

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

/* avx2 only: no FMA target, so nothing is contracted (x * 0 + sum is exact either way) */
#define TGT __attribute__((target("avx2")))
#define SCAN_LANES 32

static TGT void
scan_avx2(const float *x, int64_t n, llm_row_scan *out)
{
	const __m256 zero = _mm256_setzero_ps();
	const __m256i step = _mm256_set1_epi32(SCAN_LANES);
	__m256		m[4],
				z[4];
	__m256i		at[4],
				cur[4];
	float		mv[SCAN_LANES];
	int32_t		ai[SCAN_LANES];
	float		best_v;
	int32_t		best_i;
	bool		finite;
	int64_t		i;

	if (n < SCAN_LANES)
	{
		scan_scalar(x, n, out);
		return;
	}
	for (int k = 0; k < 4; k++)
	{
		m[k] = _mm256_loadu_ps(x + 8 * k);
		z[k] = _mm256_mul_ps(m[k], zero);
		cur[k] = _mm256_add_epi32(_mm256_set1_epi32(8 * k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		at[k] = cur[k];
	}
	for (i = SCAN_LANES; i + SCAN_LANES <= n; i += SCAN_LANES)
		for (int k = 0; k < 4; k++)
		{
			__m256		v = _mm256_loadu_ps(x + i + 8 * k);
			__m256		gt = _mm256_cmp_ps(v, m[k], _CMP_GT_OQ);

			cur[k] = _mm256_add_epi32(cur[k], step);
			m[k] = _mm256_blendv_ps(m[k], v, gt);
			at[k] = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at[k]),
														 _mm256_castsi256_ps(cur[k]), gt));
			z[k] = _mm256_add_ps(z[k], _mm256_mul_ps(v, zero));
		}
	for (int k = 0; k < 4; k++)
	{
		_mm256_storeu_ps(mv + 8 * k, m[k]);
		_mm256_storeu_si256((__m256i *) (ai + 8 * k), at[k]);
	}
	best_v = mv[0];
	best_i = ai[0];
	for (int c = 1; c < SCAN_LANES; c++)
		if (mv[c] > best_v || (mv[c] == best_v && ai[c] < best_i))
		{
			best_v = mv[c];
			best_i = ai[c];
		}
	finite = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_add_ps(_mm256_add_ps(z[0], z[1]), _mm256_add_ps(z[2], z[3])),
											  zero, _CMP_EQ_OQ)) == 0xFF;
	for (; i < n; i++)
	{
		if (!isfinite(x[i]))
			finite = false;
		if (x[i] > best_v)
		{
			best_v = x[i];
			best_i = (int32_t) i;
		}
	}
	out->max = best_v;
	out->argmax = best_i;
	out->finite = finite;
}

llm_row_scan_fn
llm_row_scan_kernel(bool avx2)
{
	return avx2 ? scan_avx2 : scan_scalar;
}

#else							/* not x86 */

llm_row_scan_fn
llm_row_scan_kernel(bool avx2)
{
	return scan_scalar;
}

#endif
