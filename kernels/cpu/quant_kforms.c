/*
 * quant_kforms.c — the row forms of the Q4_K and Q6_K kernels (quant.h,
 * "Row forms"): the float reduction orders llama.cpp's CPU backend uses for
 * these weights besides ggml_vec_dot_*_q8_K, in scalar code and AVX2 twins
 * with the same operations (bit-identical).
 *
 * The integer part is the same everywhere: per 32-element sub-block j of a
 * super-block, dot_j = sum of q * q8 (Q4_K: q in 0..15; Q6_K: two 16-element
 * halves, q - 32), scaled by the sub-block's 6- or 8-bit scale; Q4_K's mins
 * as min_j * (sum of the sub-block's 32 activation quants).  These sums are
 * exact in int32, so only where they turn into floats matters:
 *
 *   Q4_K, a matrix of rows % 8 == 0 (llama.cpp repacks it into groups of 8
 *   rows, block_q4_Kx8, on AVX2 and AVX512 CPUs, and never calls
 *   ggml_vec_dot_q4_K_q8_K for it), with dw = fp16(d) * d_a and
 *   dm = fp16(dmin) * d_a per super-block:
 *     one row (ggml_gemv_q4_K_8x8_q8_K): per super-block
 *       acc = fma(float(sum_j scale_j dot_j), dw, acc)
 *       accm = fma(float(sum_j min_j bsum_j), dm, accm)
 *     a row of a group of 4 (ggml_gemm_q4_K_8x8_q8_K, AVX512 and AVX2
 *     alike): the same per pair of sub-blocks (2c, 2c+1), c = 0..3
 *     result acc - accm.
 *   Q6_K, and Q4_K of other row counts, in a batch of 8 rows or more (the
 *     tiled K-quant matmul of ggml-cpu's tiled/, AVX512-VNNI microkernel as
 *     GCC compiles it: its buf + r * d1 is contracted to one FMA), per
 *     super-block, from acc = 0:
 *       Q6_K: r = float(sum_j scale_j dot_j) * fp16(d)
 *       Q4_K: r = fma(-fp16(dmin), float(sum_j min_j bsum_j),
 *                     float(sum_j scale_j dot_j) * fp16(d))
 *       acc = fma(r, d_a, acc)
 *     (smaller batches: ggml_vec_dot_*_q8_K, the base kernels).
 *
 * IQ4_NL and Q2_K matrices of rows % 8 == 0 get quant_more.c's kernels of
 * llama.cpp's repacked GEMV/GEMM (IQ4_NL: one order for every token; Q2_K:
 * a grouped form, as Q4_K); the wide forms of Q3_K, Q5_K and IQ4_XS are
 * carried by their kernels (quant_more.h).
 *
 * No expression of the form a*b+c is written in plain C in the AVX2
 * functions (GCC would contract it); fused operations are explicit.
 */
#include "quant.h"
#include "quant_more.h"
#include "quant_x86.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- scalar ---- */

/* Q4_K super-block: per sub-block pair c the scaled dot and the min term. */
static void
q4_K_pairs(const llm_block_q4_K *x, const int8_t *y, const int16_t *bs, int isum[4], int imin[4])
{
	uint8_t		sc[8],
				mn[8];

	llm_q4_K_scales_mins(x->scales, sc, mn);
	for (int c = 0; c < 4; c++)
	{
		const uint8_t *q4 = x->qs + 32 * c;
		const int8_t *y8 = y + 64 * c;
		int			sl = 0,
					sh = 0;

		for (int e = 0; e < 32; e++)
		{
			sl += (q4[e] & 0xF) * y8[e];
			sh += (q4[e] >> 4) * y8[32 + e];
		}
		isum[c] = sc[2 * c] * sl + sc[2 * c + 1] * sh;
		imin[c] = mn[2 * c] * (bs[4 * c] + bs[4 * c + 1]) + mn[2 * c + 1] * (bs[4 * c + 2] + bs[4 * c + 3]);
	}
}

/* Q4_K float orders (see the header) */
enum
{
	Q4K_GEMV,					/* one FMA per super-block */
	Q4K_GEMM,					/* one FMA per sub-block pair */
	Q4K_TILED					/* tiled: (s * d - dmin * m) * d_a per super-block */
};

static inline float
dot_q4_K_form(int64_t n, const void *w, const void *a, int form)
{
	const llm_block_q4_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const int16_t *bsums = (const int16_t *) (ad + n / LLM_QK_K);
	float		acc = 0.0f,
				accm = 0.0f;

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		const float dw = llm_fp16_to_fp32(x[b].d) * ad[b];
		const float dm = llm_fp16_to_fp32(x[b].dmin) * ad[b];
		int			isum[4],
					imin[4];

		q4_K_pairs(&x[b], aq + b * LLM_QK_K, bsums + b * 16, isum, imin);
		if (form == Q4K_GEMM)
			for (int c = 0; c < 4; c++)
			{
				acc = fmaf((float) isum[c], dw, acc);
				accm = fmaf((float) imin[c], dm, accm);
			}
		else if (form == Q4K_GEMV)
		{
			acc = fmaf((float) (isum[0] + isum[1] + isum[2] + isum[3]), dw, acc);
			accm = fmaf((float) (imin[0] + imin[1] + imin[2] + imin[3]), dm, accm);
		}
		else
		{
			float		r = fmaf(-llm_fp16_to_fp32(x[b].dmin), (float) (imin[0] + imin[1] + imin[2] + imin[3]),
								 (float) (isum[0] + isum[1] + isum[2] + isum[3]) * llm_fp16_to_fp32(x[b].d));

			acc = fmaf(r, ad[b], acc);
		}
	}
	return acc - accm;
}

static float
dot_q4_K_gemv(int64_t n, const void *w, const void *a)
{
	return dot_q4_K_form(n, w, a, Q4K_GEMV);
}

static float
dot_q4_K_gemm(int64_t n, const void *w, const void *a)
{
	return dot_q4_K_form(n, w, a, Q4K_GEMM);
}

static float
dot_q4_K_tiled(int64_t n, const void *w, const void *a)
{
	return dot_q4_K_form(n, w, a, Q4K_TILED);
}

/* Q6_K super-block: sum over its 16 sub-blocks of scale * sum((q - 32) * q8). */
static int
q6_K_block_sum(const llm_block_q6_K *x, const int8_t *y)
{
	int			s = 0;

	for (int h = 0; h < 2; h++)
	{
		const uint8_t *ql = x->ql + 64 * h;
		const uint8_t *qh = x->qh + 32 * h;
		const int8_t *yh = y + 128 * h;

		for (int c = 0; c < 4; c++)
			for (int half = 0; half < 2; half++)
			{
				int			t = 0;

				for (int e = 16 * half; e < 16 * half + 16; e++)
				{
					int			lo = (c & 1) ? ql[32 + e] : ql[e];
					int			q = ((c & 2) ? (lo >> 4) : (lo & 0xF)) | (((qh[e] >> (2 * c)) & 3) << 4);

					t += (q - 32) * yh[32 * c + e];
				}
				s += x->scales[8 * h + 2 * c + half] * t;
			}
	}
	return s;
}

static float
dot_q6_K_wide(int64_t n, const void *w, const void *a)
{
	const llm_block_q6_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	float		acc = 0.0f;

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		float		r = (float) q6_K_block_sum(&x[b], aq + b * LLM_QK_K) * llm_fp16_to_fp32(x[b].d);

		acc = fmaf(r, ad[b], acc);
	}
	return acc;
}

#define DEFINE_TILE_LOOP(name, attr, dotfn) \
static attr void \
name(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride, \
	 int nt, float *out, size_t out_stride) \
{ \
	for (int t = 0; t < nt; t++) \
		for (int r = 0; r < nr; r++) \
			out[t * out_stride + r] = dotfn(n, (const char *) w + r * w_stride, \
											(const char *) a + t * a_stride); \
}

DEFINE_TILE_LOOP(tile_q4_K_gemv, , dot_q4_K_gemv)
DEFINE_TILE_LOOP(tile_q4_K_gemm, , dot_q4_K_gemm)
DEFINE_TILE_LOOP(tile_q4_K_tiled, , dot_q4_K_tiled)
DEFINE_TILE_LOOP(tile_q6_K_wide, , dot_q6_K_wide)

/* ---- AVX2 ---- */

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "simd_x86.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

INL int
hsum_i32(__m256i v)
{
	__m128i		s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));

	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
	return _mm_cvtsi128_si32(s);
}

INL float
dot_q4_K_form_avx2(int64_t n, const void *w, const void *a, int form)
{
	const llm_block_q4_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const int16_t *bsums = (const int16_t *) (ad + n / LLM_QK_K);
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m128		acc = _mm_setzero_ps(),
				accm = _mm_setzero_ps();

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		const __m128 dw = _mm_set_ss(_cvtsh_ss(x[b].d) * ad[b]);
		const __m128 dm = _mm_set_ss(_cvtsh_ss(x[b].dmin) * ad[b]);
		uint8_t		sc[8],
					mn[8];
		int			isum[4],
					imin[4];
		const uint8_t *q4 = x[b].qs;
		const int8_t *q8 = aq + b * LLM_QK_K;
		const int16_t *bs = bsums + b * 16;

		llm_q4_K_scales_mins(x[b].scales, sc, mn);
		for (int c = 0; c < 4; c++)
		{
			__m256i		bits = _mm256_loadu_si256((const __m256i *) (q4 + 32 * c));
			__m256i		lo = _mm256_and_si256(bits, m4);
			__m256i		hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
			__m256i		yl = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c));
			__m256i		yh = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c + 32));
			__m256i		pl = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c]), _mm256_maddubs_epi16(lo, yl));
			__m256i		ph = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c + 1]), _mm256_maddubs_epi16(hi, yh));

			isum[c] = hsum_i32(_mm256_add_epi32(pl, ph));
			imin[c] = mn[2 * c] * (bs[4 * c] + bs[4 * c + 1]) + mn[2 * c + 1] * (bs[4 * c + 2] + bs[4 * c + 3]);
		}
		if (form == Q4K_GEMM)
			for (int c = 0; c < 4; c++)
			{
				acc = _mm_fmadd_ss(_mm_set_ss((float) isum[c]), dw, acc);
				accm = _mm_fmadd_ss(_mm_set_ss((float) imin[c]), dm, accm);
			}
		else if (form == Q4K_GEMV)
		{
			acc = _mm_fmadd_ss(_mm_set_ss((float) (isum[0] + isum[1] + isum[2] + isum[3])), dw, acc);
			accm = _mm_fmadd_ss(_mm_set_ss((float) (imin[0] + imin[1] + imin[2] + imin[3])), dm, accm);
		}
		else
		{
			__m128		s = _mm_mul_ss(_mm_set_ss((float) (isum[0] + isum[1] + isum[2] + isum[3])),
									   _mm_set_ss(_cvtsh_ss(x[b].d)));
			__m128		r = _mm_fnmadd_ss(_mm_set_ss(_cvtsh_ss(x[b].dmin)),
										  _mm_set_ss((float) (imin[0] + imin[1] + imin[2] + imin[3])), s);

			acc = _mm_fmadd_ss(r, _mm_set_ss(ad[b]), acc);
		}
	}
	return _mm_cvtss_f32(_mm_sub_ss(acc, accm));
}

static TGT float
dot_q4_K_gemv_avx2(int64_t n, const void *w, const void *a)
{
	return dot_q4_K_form_avx2(n, w, a, Q4K_GEMV);
}



static TGT float
dot_q6_K_wide_avx2(int64_t n, const void *w, const void *a)
{
	const llm_block_q6_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const int16_t *bsums = (const int16_t *) (ad + n / LLM_QK_K);
	__m128		acc = _mm_setzero_ps();

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		const int8_t *q8 = aq + b * LLM_QK_K;
		const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x[b].scales));
		const __m256i bs = _mm256_loadu_si256((const __m256i *) (bsums + b * 16));
		const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
		__m256i		sumi = _mm256_setzero_si256();

		for (int h = 0; h < 2; h++)
		{
			const uint8_t *ql = x[b].ql + 64 * h;
			const uint8_t *qh = x[b].qh + 32 * h;
			const int8_t *y = q8 + 128 * h;
			__m256i		q[4];

			llm_q6_K_unpack_avx2(ql, qh, q);
			for (int c = 0; c < 4; c++)
			{
				int			s0 = x[b].scales[8 * h + 2 * c];
				int			s1 = x[b].scales[8 * h + 2 * c + 1];
				__m256i		scv = _mm256_set_m128i(_mm_set1_epi16((short) s1), _mm_set1_epi16((short) s0));
				__m256i		p = _mm256_maddubs_epi16(q[c], _mm256_loadu_si256((const __m256i *) (y + 32 * c)));

				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scv, p));
			}
		}
		{
			__m128		r = _mm_mul_ss(_mm_set_ss((float) hsum_i32(_mm256_sub_epi32(sumi, sub))),
									   _mm_set_ss(_cvtsh_ss(x[b].d)));

			acc = _mm_fmadd_ss(r, _mm_set_ss(ad[b]), acc);
		}
	}
	return _mm_cvtss_f32(acc);
}

/* The 4 totals of the 8 int32 lanes of v0..v3, in that order (exact). */
INL __m128i
sums4(__m256i v0, __m256i v1, __m256i v2, __m256i v3)
{
	__m256i		c = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));

	return _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
}

/*
 * Q4_K tile in one of the three orders: each weight row against up to 4
 * activation rows at a time, its nibbles unpacked once per block for all of
 * them; per (row, token) the operations of dot_q4_K_form_avx2 (the integer
 * sums are exact in any order, the float steps are the same).
 */
INL void
tile_q4_K_form_avx2(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride,
					int nt, float *out, size_t out_stride, int form)
{
	const __m256i m4 = _mm256_set1_epi8(0xF);
	const int64_t nb = n / LLM_QK_K;

	for (int r = 0; r < nr; r++)
	{
		const llm_block_q4_K *x = (const llm_block_q4_K *) ((const char *) w + (size_t) r * w_stride);

		for (int t0 = 0; t0 < nt; t0 += 4)
		{
			const int	tn = nt - t0 < 4 ? nt - t0 : 4;
			__m128		acc[4],
						accm[4];

			for (int t = 0; t < 4; t++)
				acc[t] = accm[t] = _mm_setzero_ps();
			for (int64_t b = 0; b < nb; b++)
			{
				uint8_t		sc[8],
							mn[8];
				__m256i		lo[4],
							hi[4];
				const float wd = _cvtsh_ss(x[b].d),
							wm = _cvtsh_ss(x[b].dmin);

				llm_q4_K_scales_mins(x[b].scales, sc, mn);
				for (int c = 0; c < 4; c++)
				{
					__m256i		bits = _mm256_loadu_si256((const __m256i *) (x[b].qs + 32 * c));

					lo[c] = _mm256_and_si256(bits, m4);
					hi[c] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
				}
				for (int t = 0; t < tn; t++)
				{
					const char *at = (const char *) a + (size_t) (t0 + t) * a_stride;
					const float *ad = llm_act_d(at, n);
					const int16_t *bs = (const int16_t *) (ad + nb) + b * 16;
					const int8_t *q8 = (const int8_t *) at + b * LLM_QK_K;
					__m256i		v[4];
					int			isum[4],
								imin[4];

					for (int c = 0; c < 4; c++)
					{
						__m256i		yl = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c));
						__m256i		yh = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c + 32));

						v[c] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c]), _mm256_maddubs_epi16(lo[c], yl)),
												_mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c + 1]), _mm256_maddubs_epi16(hi[c], yh)));
						imin[c] = mn[2 * c] * (bs[4 * c] + bs[4 * c + 1]) + mn[2 * c + 1] * (bs[4 * c + 2] + bs[4 * c + 3]);
					}
					_mm_storeu_si128((__m128i *) isum, sums4(v[0], v[1], v[2], v[3]));
					if (form == Q4K_GEMM)
					{
						const __m128 dw = _mm_set_ss(wd * ad[b]),
									dm = _mm_set_ss(wm * ad[b]);

						for (int c = 0; c < 4; c++)
						{
							acc[t] = _mm_fmadd_ss(_mm_set_ss((float) isum[c]), dw, acc[t]);
							accm[t] = _mm_fmadd_ss(_mm_set_ss((float) imin[c]), dm, accm[t]);
						}
					}
					else if (form == Q4K_GEMV)
					{
						acc[t] = _mm_fmadd_ss(_mm_set_ss((float) (isum[0] + isum[1] + isum[2] + isum[3])),
											  _mm_set_ss(wd * ad[b]), acc[t]);
						accm[t] = _mm_fmadd_ss(_mm_set_ss((float) (imin[0] + imin[1] + imin[2] + imin[3])),
											   _mm_set_ss(wm * ad[b]), accm[t]);
					}
					else
					{
						__m128		sd = _mm_mul_ss(_mm_set_ss((float) (isum[0] + isum[1] + isum[2] + isum[3])),
													_mm_set_ss(wd));
						__m128		rr = _mm_fnmadd_ss(_mm_set_ss(wm),
													   _mm_set_ss((float) (imin[0] + imin[1] + imin[2] + imin[3])), sd);

						acc[t] = _mm_fmadd_ss(rr, _mm_set_ss(ad[b]), acc[t]);
					}
				}
			}
			for (int t = 0; t < tn; t++)
				out[(size_t) (t0 + t) * out_stride + r] = _mm_cvtss_f32(_mm_sub_ss(acc[t], accm[t]));
		}
	}
}

static TGT void
tile_q4_K_gemv_avx2(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride,
					int nt, float *out, size_t out_stride)
{
	tile_q4_K_form_avx2(n, w, w_stride, nr, a, a_stride, nt, out, out_stride, Q4K_GEMV);
}

static TGT void
tile_q4_K_gemm_avx2(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride,
					int nt, float *out, size_t out_stride)
{
	tile_q4_K_form_avx2(n, w, w_stride, nr, a, a_stride, nt, out, out_stride, Q4K_GEMM);
}

static TGT void
tile_q4_K_tiled_avx2(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride,
					 int nt, float *out, size_t out_stride)
{
	tile_q4_K_form_avx2(n, w, w_stride, nr, a, a_stride, nt, out, out_stride, Q4K_TILED);
}
DEFINE_TILE_LOOP(tile_q6_K_wide_avx2, TGT, dot_q6_K_wide_avx2)

#define HAVE_KFORMS_AVX2 1
#endif

/* ---- the kernels ---- */

typedef struct kform
{
	llm_qkernel k;
	llm_dot_tile_fn tile;		/* the other form */
	uint8_t		mask;			/* LLM_ROW_* flags selecting it */
} kform;

static pthread_once_t kforms_once = PTHREAD_ONCE_INIT;
static const llm_qkernel *base_q4_K[3],
		   *base_q6_K[3];	/* [0] scalar, [1] AVX2 (also the AVX512-VNNI dispatch's Q4_K), [2] Q6_K AVX512-VNNI */
static kform kf_q4_K[3],
			kf_q4_K_rows[3],	/* Q4_K of other row counts (not repacked) */
			kf_q6_K[3];

/* Q4_K rows in groups of 8: one-row GEMV form, GEMM form for grouped rows. */
static void
set_q4_K(kform *f, const llm_qkernel *base, float (*gemv) (int64_t, const void *, const void *),
		 llm_dot_tile_fn gemv_tile, llm_dot_tile_fn gemm_tile, int tile_tokens)
{
	f->k = *base;
	f->k.dot = gemv;
	f->k.dot_tile = gemv_tile;
	f->k.tile_rows = 1;
	f->k.tile_tokens = tile_tokens;
	f->tile = gemm_tile;
	f->mask = LLM_ROW_GROUPED;
}

/* Q6_K, Q4_K not repacked: ggml_vec_dot_*_q8_K as base has it, the tiled form for wide batches. */
static void
set_wide(kform *f, const llm_qkernel *base, llm_dot_tile_fn wide_tile)
{
	f->k = *base;
	f->tile = wide_tile;
	f->mask = LLM_ROW_WIDE;
}

static void
kforms_init(void)
{
	base_q4_K[0] = llm_qkernel_scalar_get(LLM_TYPE_Q4_K);
	base_q6_K[0] = llm_qkernel_scalar_get(LLM_TYPE_Q6_K);
	set_q4_K(&kf_q4_K[0], base_q4_K[0], dot_q4_K_gemv, tile_q4_K_gemv, tile_q4_K_gemm, 1);
	set_wide(&kf_q6_K[0], base_q6_K[0], tile_q6_K_wide);
	set_wide(&kf_q4_K_rows[0], base_q4_K[0], tile_q4_K_tiled);
#ifdef HAVE_KFORMS_AVX2
	base_q4_K[1] = llm_qkernel_avx2_get(LLM_TYPE_Q4_K, false);
	base_q6_K[1] = llm_qkernel_avx2_get(LLM_TYPE_Q6_K, false);
	if (base_q4_K[1] != NULL)
	{
		set_q4_K(&kf_q4_K[1], base_q4_K[1], dot_q4_K_gemv_avx2, tile_q4_K_gemv_avx2, tile_q4_K_gemm_avx2, 4);
		set_wide(&kf_q4_K_rows[1], base_q4_K[1], tile_q4_K_tiled_avx2);
	}
	if (base_q6_K[1] != NULL)
		set_wide(&kf_q6_K[1], base_q6_K[1], tile_q6_K_wide_avx2);
	base_q6_K[2] = llm_qkernel_q6_K_vnni_get();
	if (base_q6_K[2] != NULL)
		set_wide(&kf_q6_K[2], base_q6_K[2], llm_q6_K_wide_vnni_tile());
#endif
}

const llm_qkernel *
llm_qkernel_kform(const llm_qkernel *base, int64_t n_rows)
{
	if (base == NULL)
		return NULL;
	if (base->weight_type == LLM_TYPE_IQ4_NL || base->weight_type == LLM_TYPE_Q2_K)
		return n_rows % 8 == 0 ? llm_qkernel_more_rows8(base) : base;
	pthread_once(&kforms_once, kforms_init);
	for (int i = 0; i < 3; i++)
	{
		if (base_q4_K[i] != NULL && base == base_q4_K[i])
			return n_rows % 8 == 0 ? &kf_q4_K[i].k : &kf_q4_K_rows[i].k;
		if (base_q6_K[i] != NULL && base == base_q6_K[i])
			return &kf_q6_K[i].k;
	}
	return base;
}

uint8_t
llm_qkernel_form(const llm_qkernel *k, llm_dot_tile_fn *tile)
{
	const kform *all[7] = {&kf_q4_K[0], &kf_q4_K[1], &kf_q4_K_rows[0], &kf_q4_K_rows[1], &kf_q6_K[0], &kf_q6_K[1],
	&kf_q6_K[2]};

	if (k != NULL && k->form_mask != 0)
	{
		*tile = k->form_tile;
		return k->form_mask;
	}

	for (int i = 0; i < 7; i++)
		if (k == &all[i]->k && all[i]->tile != NULL)
		{
			*tile = all[i]->tile;
			return all[i]->mask;
		}
	*tile = NULL;
	return 0;
}
