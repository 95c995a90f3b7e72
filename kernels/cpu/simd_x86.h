/*
 * simd_x86.h — small x86 vector helpers shared by the AVX2 and the packed
 * AVX512-VNNI kernels (include after <immintrin.h>, x86 only).  The target
 * attribute is the smallest set they need; GCC inlines them into functions
 * compiled for any superset.
 */
#ifndef LLM_SIMD_X86_H
#define LLM_SIMD_X86_H

#include <immintrin.h>

/* Sum of 8 floats in ggml's hsum_float_8 order: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). */
static inline __attribute__((always_inline, target("avx2,fma,f16c"))) float
llm_hsum8(__m256 x)
{
	__m128		r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));

	r = _mm_add_ps(r, _mm_movehl_ps(r, r));
	r = _mm_add_ss(r, _mm_movehdup_ps(r));
	return _mm_cvtss_f32(r);
}

#endif
