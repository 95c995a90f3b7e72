/*
 * simd_x86.h — small x86 vector helpers shared by the AVX2 and the packed
 * kernels (matmul tiles, SwiGLU, attention; x86 only).  The target
 * attribute is the smallest set they need; GCC inlines them into functions
 * compiled for any superset.
 */
#ifndef LLM_SIMD_X86_H
#define LLM_SIMD_X86_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/*
 * The 6-bit values (0..63) of one half of a Q6_K block as 4 vectors of 32
 * bytes, q[c] = elements 32c .. 32c + 31 of the half, from the half's 64
 * low-nibble bytes ql and 32 high-bit bytes qh (ggml's AVX2 unpacking; the
 * Q6_K kernels of quant_avx2.c and quant_kforms.c share it).
 */
static inline __attribute__((always_inline, target("avx2,fma,f16c"))) void
llm_q6_K_unpack_avx2(const uint8_t *ql, const uint8_t *qh, __m256i q[4])
{
	const __m256i m3 = _mm256_set1_epi8(3),
				m15 = _mm256_set1_epi8(15);
	const __m256i b1 = _mm256_loadu_si256((const __m256i *) ql),
				b2 = _mm256_loadu_si256((const __m256i *) (ql + 32)),
				bh = _mm256_loadu_si256((const __m256i *) qh);

	q[0] = _mm256_or_si256(_mm256_and_si256(b1, m15), _mm256_slli_epi16(_mm256_and_si256(bh, m3), 4));
	q[1] = _mm256_or_si256(_mm256_and_si256(b2, m15),
						   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m3), 4));
	q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15),
						   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m3), 4));
	q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15),
						   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m3), 4));
}

/* Sum of 8 floats in ggml's hsum_float_8 order: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). */
static inline __attribute__((always_inline, target("avx2,fma,f16c"))) float
llm_hsum8(__m256 x)
{
	__m128		r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));

	r = _mm_add_ps(r, _mm_movehl_ps(r, r));
	r = _mm_add_ss(r, _mm_movehdup_ps(r));
	return _mm_cvtss_f32(r);
}

/* 2^e for integer lanes -126 <= e <= 127 */
static inline __attribute__((always_inline, target("avx2,fma,f16c"))) __m256
llm_pow2i8(__m256i e)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

/* llm_expf (quant.c) on 8 lanes: ggml_v_expf of an AVX512 build, with scalef emulated. */
static inline __attribute__((always_inline, target("avx2,fma,f16c"))) __m256
llm_expf8(__m256 x)
{
	const __m256 shift = _mm256_set1_ps(0x1.8p23f);
	__m256		z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
	__m256		n = _mm256_sub_ps(z, shift);
	__m256		b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
									 _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
	__m256		u = _mm256_mul_ps(b, b);
	__m256		j = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
																 _mm256_set1_ps(0x1.573e2ep-5f)), u,
										_mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
														_mm256_set1_ps(0x1.fffdb6p-2f))),
									u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
	__m256		absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
	__m256		res;

	/* common case: -126 <= n <= 127, one exact-or-once-rounded multiply */
	if (_mm256_movemask_ps(_mm256_cmp_ps(absn, _mm256_set1_ps(126.0f), _CMP_GT_OQ)) == 0 &&
		_mm256_movemask_ps(_mm256_cmp_ps(n, n, _CMP_UNORD_Q)) == 0)
		return _mm256_mul_ps(j, llm_pow2i8(_mm256_cvtps_epi32(n)));
	{
		/* (j * 2^e1) * 2^e2 with e1, e2 chosen as in quant.c scale_pow2 */
		__m256		nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-192.0f)), _mm256_set1_ps(192.0f));
		__m256i		ni = _mm256_cvtps_epi32(nc);
		__m256i		lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), ni);	/* n < -126 */
		__m256i		hi = _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127));	/* n > 127 */
		__m256i		e1 = _mm256_blendv_epi8(_mm256_blendv_epi8(ni, _mm256_set1_epi32(127), hi),
											_mm256_add_epi32(ni, _mm256_set1_epi32(100)), lo);
		__m256i		e2 = _mm256_blendv_epi8(_mm256_blendv_epi8(_mm256_setzero_si256(),
															   _mm256_sub_epi32(ni, _mm256_set1_epi32(127)), hi),
											_mm256_set1_epi32(-100), lo);
		__m256		big = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_NLE_UQ);	/* |n| > 192 or NaN */
		__m256		alt = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_NLE_UQ),
										_mm256_set1_ps(INFINITY));

		res = _mm256_mul_ps(_mm256_mul_ps(j, llm_pow2i8(e1)), llm_pow2i8(e2));
		return _mm256_blendv_ps(res, alt, big);
	}
}

#endif
