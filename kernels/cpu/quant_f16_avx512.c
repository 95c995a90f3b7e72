/*
 * quant_f16_avx512.c — the F16 weight tile of the AVX512-VNNI
 * implementation: a register-blocked GEMM over 4 weight rows x 3 tokens,
 * bit-identical to quant_avx2.c's dot_f16 for every (row, token).
 *
 * dot_f16 keeps 4 accumulators of 8 float lanes: accumulator j, lane l sums
 * the products of elements i + 8j + l (i a multiple of 32) with one FMA
 * each, in increasing i; the result is llm_hsum8((acc0 + acc1) + (acc2 +
 * acc3)).  A 512-bit vector of elements i .. i+15 is accumulators 0 and 1
 * side by side, one of i+16 .. i+31 accumulators 2 and 3, so two 512-bit
 * accumulators per (row, token) run each lane's FMA sequence unchanged and
 * the final sums are the same additions.  What the tile saves is loads and
 * conversions: each converted weight vector serves 3 tokens and each
 * converted activation vector 4 rows (dot_f16 converts both operands of
 * every FMA), which is where an encoder's prefill of whole sequences spent
 * its time.
 *
 * Registers: 24 accumulators, 4 weight vectors and one activation vector
 * (of 32); each half of a 32-element step runs on its own so that only 4
 * weight vectors are live.  Tiles smaller than 4 x 3 (the matrix's last
 * rows, a step's last tokens, one-token matmuls) run dot_one, dot_f16's
 * lanes in two 512-bit accumulators.
 *
 * Needs AVX512F (quant_avx2.c hands it out with the VNNI implementation).
 */
#include "quant.h"
#include "quant_x86.h"
#include "simd_x86.h"

#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT_F __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))
#define INL_F static inline __attribute__((always_inline)) TGT_F

#define F16_TILE_ROWS 4
#define F16_TILE_TOKENS 3
/* the longest rows whose activations a call widens once (3 rows of floats on the stack: 24 KiB) */
#define F16_WIDEN_MAX 2048

INL_F __m512
load16(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p));
}

/* dot_f16's closing sums of one (row, token): (acc0 + acc1) + (acc2 + acc3), then llm_hsum8. */
INL_F __m256
upper8(__m512 x)
{
	return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
}

INL_F float
close_sum(__m512 lo, __m512 hi)
{
	__m256		a01 = _mm256_add_ps(_mm512_castps512_ps256(lo), upper8(lo));
	__m256		a23 = _mm256_add_ps(_mm512_castps512_ps256(hi), upper8(hi));

	return llm_hsum8(_mm256_add_ps(a01, a23));
}

/*
 * A full 4 x 3 tile; a_f32: the activations already widened to float rows
 * (the same values: binary16 -> binary32 is exact), else binary16 rows.
 */
#define DEFINE_TILE_4X3(name, act_t, load_act) \
static TGT_F void \
name(int64_t n, const uint16_t *w, size_t w_stride, const act_t *a, size_t a_stride, \
	 float *out, size_t out_stride) \
{ \
	__m512		c[F16_TILE_ROWS][F16_TILE_TOKENS][2]; \
	const uint16_t *wr[F16_TILE_ROWS]; \
	const act_t *at[F16_TILE_TOKENS]; \
\
	for (int r = 0; r < F16_TILE_ROWS; r++) \
		wr[r] = (const uint16_t *) ((const char *) w + (size_t) r * w_stride); \
	for (int t = 0; t < F16_TILE_TOKENS; t++) \
		at[t] = (const act_t *) ((const char *) a + (size_t) t * a_stride); \
	for (int r = 0; r < F16_TILE_ROWS; r++) \
		for (int t = 0; t < F16_TILE_TOKENS; t++) \
			c[r][t][0] = c[r][t][1] = _mm512_setzero_ps(); \
	for (int64_t i = 0; i < n; i += 32) \
	{ \
		_Pragma("GCC unroll 2") \
		for (int h = 0; h < 2; h++) \
		{ \
			__m512		wv[F16_TILE_ROWS]; \
\
			_Pragma("GCC unroll 4") \
			for (int r = 0; r < F16_TILE_ROWS; r++) \
				wv[r] = load16(wr[r] + i + 16 * h); \
			_Pragma("GCC unroll 3") \
			for (int t = 0; t < F16_TILE_TOKENS; t++) \
			{ \
				__m512		av = load_act(at[t] + i + 16 * h); \
\
				_Pragma("GCC unroll 4") \
				for (int r = 0; r < F16_TILE_ROWS; r++) \
					c[r][t][h] = _mm512_fmadd_ps(wv[r], av, c[r][t][h]); \
			} \
		} \
	} \
	for (int t = 0; t < F16_TILE_TOKENS; t++) \
		for (int r = 0; r < F16_TILE_ROWS; r++) \
			out[(size_t) t * out_stride + r] = close_sum(c[r][t][0], c[r][t][1]); \
}

INL_F __m512
load16f(const float *p)
{
	return _mm512_loadu_ps(p);
}

DEFINE_TILE_4X3(tile_4x3, uint16_t, load16)
DEFINE_TILE_4X3(tile_4x3_widened, float, load16f)

/* One (row, token): dot_f16's operations with 512-bit vectors (the same lanes). */
static TGT_F float
dot_one(int64_t n, const uint16_t *w, const uint16_t *a)
{
	__m512		lo = _mm512_setzero_ps(),
				hi = _mm512_setzero_ps();

	for (int64_t i = 0; i < n; i += 32)
	{
		lo = _mm512_fmadd_ps(load16(w + i), load16(a + i), lo);
		hi = _mm512_fmadd_ps(load16(w + i + 16), load16(a + i + 16), hi);
	}
	return close_sum(lo, hi);
}

TGT_F void
llm_tile_f16_avx512(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride,
					int nt, float *out, size_t out_stride)
{
	int			r = 0;
	int			t_full = nt - nt % F16_TILE_TOKENS;
	float		widened[F16_TILE_TOKENS * F16_WIDEN_MAX];
	bool		widen = nr >= 2 * F16_TILE_ROWS && t_full == F16_TILE_TOKENS && n <= F16_WIDEN_MAX;

	/*
	 * A call over several 4-row groups and one whole token tile (the
	 * backend's tiles of a batch: 16 rows x 3 tokens) widens the 3
	 * activation rows once for all the groups.
	 */
	if (widen)
		for (int t = 0; t < F16_TILE_TOKENS; t++)
			for (int64_t i = 0; i < n; i += 16)
				_mm512_storeu_ps(widened + (size_t) t * n + i,
								 load16((const uint16_t *) ((const char *) a + (size_t) t * a_stride) + i));
	for (; r + F16_TILE_ROWS <= nr; r += F16_TILE_ROWS)
	{
		const char *wr = (const char *) w + (size_t) r * w_stride;
		int			t = 0;

		if (widen)
		{
			tile_4x3_widened(n, (const uint16_t *) wr, w_stride, widened, (size_t) n * sizeof(float),
							 out + r, out_stride);
			t = F16_TILE_TOKENS;
		}
		for (; t + F16_TILE_TOKENS <= nt; t += F16_TILE_TOKENS)
			tile_4x3(n, (const uint16_t *) wr, w_stride,
					 (const uint16_t *) ((const char *) a + (size_t) t * a_stride), a_stride,
					 out + (size_t) t * out_stride + r, out_stride);
		for (; t < nt; t++)
			for (int q = 0; q < F16_TILE_ROWS; q++)
				out[(size_t) t * out_stride + r + q] =
					dot_one(n, (const uint16_t *) (wr + (size_t) q * w_stride),
							(const uint16_t *) ((const char *) a + (size_t) t * a_stride));
	}
	for (; r < nr; r++)
		for (int t = 0; t < nt; t++)
			out[(size_t) t * out_stride + r] =
				dot_one(n, (const uint16_t *) ((const char *) w + (size_t) r * w_stride),
						(const uint16_t *) ((const char *) a + (size_t) t * a_stride));
}

#endif
