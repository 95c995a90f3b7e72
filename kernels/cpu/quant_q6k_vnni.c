/*
 * quant_q6k_vnni.c — the Q6_K kernel of the AVX512-VNNI implementation
 * (GGUF layout): both Q6_K row forms (quant.h "Row forms": the
 * ggml_vec_dot_q6_K_q8_K order, and the tiled order of wide batches) with
 * the integer work in 512-bit vpdpbusd, bit-identical to quant_avx2.c's
 * dot_q6_K and quant_kforms.c's wide form.
 *
 * The float steps depend on 8 int32 lanes per super-block (vec-dot form:
 * lane l is converted and accumulated on its own, then the 8 lanes are
 * summed by llm_hsum8), so the lanes are reproduced exactly: in the AVX2
 * kernel lane l of 32 elements' product vector holds elements 4l .. 4l+3
 * (maddubs pairs, then madd by the scale of their 16-element half), summed
 * over the super-block's 8 vectors, minus 32 * (bsums[2l] * sc[2l] +
 * bsums[2l+1] * sc[2l+1]).  Here one vpdpbusd takes two such vectors (64
 * elements: lanes 0..7 and 8..15), its lane sums (|s| <= 4 * 63 * 128,
 * int16 range) are scaled by one vpmaddwd against (scale, 0) pairs, and the
 * two halves of the accumulator add to the AVX2 lanes (exact).
 *
 * Needs AVX512F/VL/BW/VNNI (checked by llm_qkernel_q6_K_vnni_get;
 * quant_avx2.c's llm_qkernel_avx2_get hands it out for the VNNI
 * implementation).  Depends on quant.c only.
 */
#include "quant.h"
#include "quant_x86.h"
#include "simd_x86.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT_6 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define INL_6 static inline __attribute__((always_inline)) TGT_6

#define Q6V_TOKS 8

enum
{
	FORM_VEC,					/* 8 float lanes per row: fma(d_a * d, lanes, acc), llm_hsum8 */
	FORM_WIDE					/* per super-block: fma(float(sum) * d, d_a, acc) */
};

/* The super-block's 6-bit values as 4 vectors of 64: [h][pair of 32-element vectors]. */
INL_6 void
unpack6(const llm_block_q6_K *x, __m512i q[4])
{
	const __m512i m15 = _mm512_set1_epi8(15),
				m3 = _mm512_set1_epi8(3);

	for (int h = 0; h < 2; h++)
	{
		const __m512i l = _mm512_loadu_si512((const void *) (x->ql + 64 * h));
		const __m256i bh = _mm256_loadu_si256((const __m256i *) (x->qh + 32 * h));
		const __m512i hb = _mm512_inserti64x4(_mm512_castsi256_si512(bh), _mm256_srli_epi16(bh, 2), 1);

		q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m15),
								   _mm512_slli_epi16(_mm512_and_si512(hb, m3), 4));
		q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m15),
									   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4), m3), 4));
	}
}

/* (scale, 0) per lane: lanes 4j .. 4j+3 take scale 4i + j of the block (vector pair i). */
INL_6 void
scales6(const llm_block_q6_K *x, __m512i s[4])
{
	const __m128i sc = _mm_loadu_si128((const __m128i *) x->scales);
	const __m512i lo16 = _mm512_set1_epi32(0xFFFF);

	for (int i = 0; i < 4; i++)
	{
		const __m128i idx = _mm_set_epi8(4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3,
										 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2,
										 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1,
										 4 * i, 4 * i, 4 * i, 4 * i);

		s[i] = _mm512_and_si512(_mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc, idx)), lo16);
	}
}

/*
 * Rows x T tokens (T a constant after inlining); out[t * os + r].  Per
 * (row, token, super-block): the 8 AVX2 lanes of sumi - sub, then the
 * form's float steps.
 */
INL_6 void
q6_kernel(const int form, int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,
		  float *out, size_t os, const int T)
{
	const int64_t nb = n / LLM_QK_K;
	const int8_t *aq[Q6V_TOKS];
	const float *ad[Q6V_TOKS];
	const int16_t *bsums[Q6V_TOKS];

	#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
	{
		aq[t] = (const int8_t *) ((const char *) a + (size_t) t * as);
		ad[t] = llm_act_d(aq[t], n);
		bsums[t] = (const int16_t *) (ad[t] + nb);
	}
	for (int r = 0; r < nr; r++)
	{
		const llm_block_q6_K *x = (const llm_block_q6_K *) ((const char *) w + (size_t) r * ws);
		__m256		acc[Q6V_TOKS];
		__m128		acc1[Q6V_TOKS];

		#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
		{
			acc[t] = _mm256_setzero_ps();
			acc1[t] = _mm_setzero_ps();
		}
		for (int64_t b = 0; b < nb; b++)
		{
			const float xd = _cvtsh_ss(x[b].d);
			const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x[b].scales));
			__m512i		q[4],
						s[4];

			if (T == 1)
				for (int l = 0; l < (int) sizeof(llm_block_q6_K); l += 64)
					_mm_prefetch((const char *) (x + b + 2) + l, _MM_HINT_T0);
			unpack6(&x[b], q);
			scales6(&x[b], s);
			#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
			{
				const int8_t *y = aq[t] + b * LLM_QK_K;
				const __m256i bs = _mm256_loadu_si256((const __m256i *) (bsums[t] + b * 16));
				const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
				__m512i		z = _mm512_setzero_si512();
				__m256i		sumi;

				#pragma GCC unroll 4
				for (int i = 0; i < 4; i++)
				{
					__m512i		p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[i],
														_mm512_loadu_si512((const void *) (y + 64 * i)));

					z = _mm512_add_epi32(z, _mm512_madd_epi16(p, s[i]));
				}
				sumi = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1)),
										sub);
				if (form == FORM_VEC)
					acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(ad[t][b] * xd), _mm256_cvtepi32_ps(sumi), acc[t]);
				else
				{
					__m128i		h = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
					__m128		rr;

					h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
					h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
					rr = _mm_mul_ss(_mm_set_ss((float) _mm_cvtsi128_si32(h)), _mm_set_ss(xd));
					acc1[t] = _mm_fmadd_ss(rr, _mm_set_ss(ad[t][b]), acc1[t]);
				}
			}
		}
		#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			out[(size_t) t * os + r] = form == FORM_VEC ? llm_hsum8(acc[t]) : _mm_cvtss_f32(acc1[t]);
	}
}

INL_6 void
q6_tile(const int form, int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
		float *out, size_t os)
{
	for (int t0 = 0; t0 < nt; t0 += Q6V_TOKS)
	{
		const char *at = (const char *) a + (size_t) t0 * as;
		float	   *ot = out + (size_t) t0 * os;

		switch (nt - t0 < Q6V_TOKS ? nt - t0 : Q6V_TOKS)
		{
			case 1:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 1);
				break;
			case 2:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 2);
				break;
			case 3:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 3);
				break;
			case 4:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 4);
				break;
			case 5:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 5);
				break;
			case 6:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 6);
				break;
			case 7:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 7);
				break;
			default:
				q6_kernel(form, n, w, ws, nr, at, as, ot, os, 8);
				break;
		}
	}
}

static TGT_6 void
tile_q6_K_vnni(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
			   float *out, size_t os)
{
	q6_tile(FORM_VEC, n, w, ws, nr, a, as, nt, out, os);
}

static TGT_6 void
tile_q6_K_wide_vnni(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
					float *out, size_t os)
{
	q6_tile(FORM_WIDE, n, w, ws, nr, a, as, nt, out, os);
}

static TGT_6 float
dot_q6_K_vnni(int64_t n, const void *w, const void *a)
{
	float		r;

	q6_kernel(FORM_VEC, n, w, 0, 1, a, 0, &r, 0, 1);
	return r;
}

static llm_qkernel q6_K_vnni;

static void
init_q6_K_vnni(void)
{
	/* the activations of every Q8_K kernel (quant.c), so matmul_multi shares them */
	q6_K_vnni.weight_type = LLM_TYPE_Q6_K;
	q6_K_vnni.act_type = LLM_TYPE_Q8_K;
	q6_K_vnni.block_elems = LLM_QK_K;
	q6_K_vnni.act_row_bytes = llm_act_bytes_q8_K;
	q6_K_vnni.quantize_act = llm_quantize_act_q8_K;
	q6_K_vnni.row_group = 1;
	q6_K_vnni.impl = "avx512vnni";
	q6_K_vnni.dot = dot_q6_K_vnni;
	q6_K_vnni.dot_tile = tile_q6_K_vnni;
	q6_K_vnni.tile_rows = 1;
	q6_K_vnni.tile_tokens = Q6V_TOKS;
}

const llm_qkernel *
llm_qkernel_q6_K_vnni_get(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vnni"))
		return NULL;
	pthread_once(&once, init_q6_K_vnni);
	return q6_K_vnni.dot != NULL ? &q6_K_vnni : NULL;
}

llm_dot_tile_fn
llm_q6_K_wide_vnni_tile(void)
{
	return tile_q6_K_wide_vnni;
}

#else

const llm_qkernel *
llm_qkernel_q6_K_vnni_get(void)
{
	return NULL;
}

llm_dot_tile_fn
llm_q6_K_wide_vnni_tile(void)
{
	return NULL;
}

#endif
