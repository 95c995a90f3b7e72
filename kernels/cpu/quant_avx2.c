/*
 * quant_avx2.c — AVX2/FMA/F16C kernels of the CPU backend (quant_x86.h),
 * compiled with per-function target attributes and handed out only by
 * dispatch.c after it has detected the instructions, so the library still
 * runs on CPUs without AVX2 using the scalar code of quant.c.  Depends on
 * quant.c only (activation sizes, the Q8_K quantizer, k-quant scales).
 *
 * Each function performs exactly the operations of its scalar twin in
 * quant.c (same integer lanes, same fused multiply-adds, same reduction
 * order), which in turn mirror the AVX2 branch of llama.cpp's x86 kernels;
 * results are bit-identical.  The tile kernels compute several weight rows x several
 * activation rows at once so that a weight block, once unpacked, is reused
 * for every token of a batch; the per-(row, token) arithmetic is the same as
 * the single dot product, which keeps matmul batch invariant.
 *
 * No expression here may be of the form a*b+c in plain C: GCC would contract
 * it into an FMA in these FMA-enabled functions and break bit-identity with
 * the scalar code.  Fused operations are written explicitly.
 */
#include "quant.h"
#include "quant_x86.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "simd_x86.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

/* ---- helpers ---- */

INL float
h2f(uint16_t h)
{
	return _cvtsh_ss(h);
}


INL int
hsum_i32_8(__m256i a)
{
	__m128i		s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));

	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
	return _mm_cvtsi128_si32(s);
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15), then high (16..31). */
INL __m256i
unpack_nibbles(const uint8_t *qs)
{
	__m128i		t = _mm_loadu_si128((const __m128i *) qs);
	__m256i		b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);

	return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* unsigned x signed bytes: 8 int32 lanes, lane k = sum of bytes 4k..4k+3 products, as float */
INL __m256
mul_sum_us8(__m256i ux, __m256i sy)
{
	__m256i		p = _mm256_maddubs_epi16(ux, sy);

	return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* ---- activation quantizers ---- */

/* One block of 32 floats -> 32 int8 (round half even of x*127/amax); returns d. */
INL float
quantize_block_q8(const float *x, int8_t *q, int *sum_out)
{
	__m256		v0 = _mm256_loadu_ps(x),
				v1 = _mm256_loadu_ps(x + 8),
				v2 = _mm256_loadu_ps(x + 16),
				v3 = _mm256_loadu_ps(x + 24);
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256		m = _mm256_andnot_ps(sign, v0);
	__m128		m4;
	float		amax,
				id;
	__m256		mul;
	__m256i		i0,
				i1,
				i2,
				i3;

	m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v1));
	m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v2));
	m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v3));
	m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
	amax = _mm_cvtss_f32(m4);
	id = amax != 0.0f ? 127.0f / amax : 0.0f;
	mul = _mm256_set1_ps(id);
	i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	if (sum_out)
		*sum_out = hsum_i32_8(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
	i0 = _mm256_packs_epi32(i0, i1);
	i2 = _mm256_packs_epi32(i2, i3);
	i0 = _mm256_packs_epi16(i0, i2);
	/* packs work per 128-bit half; restore element order */
	i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	_mm256_storeu_si256((__m256i *) q, i0);
	return amax / 127.0f;
}

static TGT void
quantize_act_q8_0(const float *x, void *dst, int64_t n)
{
	int8_t	   *qs = dst;
	float	   *d_out = (float *) llm_act_d(dst, n);

	for (int64_t b = 0; b < n / LLM_QK; b++)
	{
		float		d = quantize_block_q8(x + b * LLM_QK, qs + b * LLM_QK, NULL);

		d_out[b] = _cvtsh_ss(_cvtss_sh(d, 0));
	}
}

static TGT void
quantize_act_q8_1(const float *x, void *dst, int64_t n)
{
	int8_t	   *qs = dst;
	float	   *d_out = (float *) llm_act_d(dst, n);
	float	   *s_out = d_out + n / LLM_QK;

	for (int64_t b = 0; b < n / LLM_QK; b++)
	{
		int			sum;
		float		d = quantize_block_q8(x + b * LLM_QK, qs + b * LLM_QK, &sum);

		d_out[b] = _cvtsh_ss(_cvtss_sh(d, 0));
		s_out[b] = _cvtsh_ss(_cvtss_sh(d * (float) sum, 0));
	}
}

static TGT void
convert_act_f32(const float *x, void *dst, int64_t n)
{
	memcpy(dst, x, (size_t) n * sizeof(float));
}

void		TGT
llm_fp32_to_fp16_row_f16c(const float *src, uint16_t *dst, int64_t n)
{
	int64_t		i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *) (dst + i),
						 _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		dst[i] = _cvtss_sh(src[i], 0);
}

void		TGT
llm_fp16_to_fp32_row_f16c(const uint16_t *src, float *dst, int64_t n)
{
	int64_t		i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (src + i))));
	for (; i < n; i++)
		dst[i] = _cvtsh_ss(src[i]);
}

static TGT void
convert_act_f16(const float *x, void *dst, int64_t n)
{
	llm_fp32_to_fp16_row_f16c(x, dst, n);
}

static TGT void
convert_act_bf16(const float *x, void *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		((uint16_t *) dst)[i] = llm_fp32_to_bf16(x[i]);
}

/* ---- Q4_0 / Q4_1 / Q8_0 tile kernels (quant_tile.inc) ---- */

enum
{
	W_Q4_0,
	W_Q4_1,
	W_Q8_0
};

#define MAXR 4
#define MAXT 4
/*
 * Software prefetch distance in the weight stream: decode (one token) is
 * bound by DRAM bandwidth, and prefetching a few blocks ahead of each row
 * measured 1.4x faster for the SmolLM2 shapes than relying on the hardware
 * prefetcher alone (256..384 bytes best; longer distances worse).
 */
#define PREFETCH_BYTES 384





#define TILE_TGT TGT
#define TILE_NAME(x) x##_avx2
#define TILE_MULSUM mul_sum_us8
#include "quant_tile.inc"
#undef TILE_TGT
#undef TILE_NAME
#undef TILE_MULSUM

/* AVX512-VNNI with 256-bit vectors (AVX512VL): vpdpbusd does maddubs+madd */
#define TGT_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))

static inline __attribute__((always_inline)) TGT_VNNI __m256
mul_sum_us8_vnni(__m256i ux, __m256i sy)
{
	return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ux, sy));
}

#define TILE_TGT TGT_VNNI
#define TILE_NAME(x) x##_vnni
#define TILE_MULSUM mul_sum_us8_vnni
#define TILE_VNNI
#include "quant_tile.inc"
#undef TILE_TGT
#undef TILE_NAME
#undef TILE_MULSUM
#undef TILE_VNNI

/* ---- k-quants (one row x one activation row) ---- */

static TGT float
dot_q4_K(int64_t n, const void *w, const void *a)
{
	const llm_block_q4_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const int16_t *bsums = (const int16_t *) (ad + n / LLM_QK_K);
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m256		acc = _mm256_setzero_ps();
	__m128		acc_m = _mm_setzero_ps();

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		const float d = ad[b] * h2f(x[b].d);
		const float dmin = -ad[b] * h2f(x[b].dmin);
		uint8_t		sc[8],
					mn[8];
		__m128i		q8s,
					prod;
		__m256i		sumi = _mm256_setzero_si256();
		const uint8_t *q4 = x[b].qs;
		const int8_t *q8 = aq + b * LLM_QK_K;

		llm_q4_K_scales_mins(x[b].scales, sc, mn);
		{
			__m256i		bs = _mm256_loadu_si256((const __m256i *) (bsums + b * 16));
			__m128i		mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) mn));

			q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
			prod = _mm_madd_epi16(mins, q8s);
			acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
		}
		for (int c = 0; c < 4; c++)
		{
			__m256i		bits = _mm256_loadu_si256((const __m256i *) (q4 + 32 * c));
			__m256i		lo = _mm256_and_si256(bits, m4);
			__m256i		hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
			__m256i		yl = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c));
			__m256i		yh = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c + 32));
			__m256i		pl = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c]), _mm256_maddubs_epi16(lo, yl));
			__m256i		ph = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c + 1]), _mm256_maddubs_epi16(hi, yh));

			sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
	}
	acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
	acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
	return llm_hsum8(acc) + _mm_cvtss_f32(acc_m);
}

static TGT float
dot_q6_K(int64_t n, const void *w, const void *a)
{
	const llm_block_q6_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const int16_t *bsums = (const int16_t *) (ad + n / LLM_QK_K);
	__m256		acc = _mm256_setzero_ps();

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		const float d = ad[b] * h2f(x[b].d);
		const int8_t *q8 = aq + b * LLM_QK_K;
		const __m128i scales = _mm_loadu_si128((const __m128i *) x[b].scales);
		const __m256i sc16 = _mm256_cvtepi8_epi16(scales);
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
				/* int16 lanes 0..7 (elements 0..15) use s0, 8..15 use s1 */
				__m256i		scv = _mm256_set_m128i(_mm_set1_epi16((short) s1), _mm_set1_epi16((short) s0));
				__m256i		p = _mm256_maddubs_epi16(q[c], _mm256_loadu_si256((const __m256i *) (y + 32 * c)));

				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scv, p));
			}
		}
		sumi = _mm256_sub_epi32(sumi, sub);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
	}
	return llm_hsum8(acc);
}

/* ---- float weights: 4 accumulators x 8 lanes, as the scalar code ---- */

INL __m256
load_f32(const void *p, int64_t i)
{
	return _mm256_loadu_ps((const float *) p + i);
}

INL __m256
load_f16(const void *p, int64_t i)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) p + i)));
}

INL __m256
load_bf16(const void *p, int64_t i)
{
	__m128i		h = _mm_loadu_si128((const __m128i *) ((const uint16_t *) p + i));

	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

#define DEFINE_DOT_FLOAT(name, loader) \
static TGT float \
name(int64_t n, const void *w, const void *a) \
{ \
	__m256		acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0; \
	for (int64_t i = 0; i < n; i += 32) \
	{ \
		acc0 = _mm256_fmadd_ps(loader(w, i), loader(a, i), acc0); \
		acc1 = _mm256_fmadd_ps(loader(w, i + 8), loader(a, i + 8), acc1); \
		acc2 = _mm256_fmadd_ps(loader(w, i + 16), loader(a, i + 16), acc2); \
		acc3 = _mm256_fmadd_ps(loader(w, i + 24), loader(a, i + 24), acc3); \
	} \
	return llm_hsum8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3))); \
}

DEFINE_DOT_FLOAT(dot_f32, load_f32)
DEFINE_DOT_FLOAT(dot_f16, load_f16)
DEFINE_DOT_FLOAT(dot_bf16, load_bf16)

#define DEFINE_TILE_LOOP(name, dotfn) \
static TGT void \
name(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride, \
	 int nt, float *out, size_t out_stride) \
{ \
	for (int t = 0; t < nt; t++) \
		for (int r = 0; r < nr; r++) \
			out[t * out_stride + r] = dotfn(n, (const char *) w + r * w_stride, \
											(const char *) a + t * a_stride); \
}

/*
 * Q4_K tile: each weight row against up to 4 activation rows at a time, so
 * that a block's scales and nibbles, once unpacked, serve every token.  Per
 * (row, token) the operations are dot_q4_K's in its order (integer sums are
 * exact; the float accumulators are per token), hence bit-identical to it.
 */
#define Q4K_TILE_TOKENS 4

/*
 * Tokens t0 .. t0+tn-1 of a Q8_K activation block (rows a_stride apart):
 * each token's quants, its per-block scales and its block sums, as the
 * K-quant tiles read them.
 */
static inline void
q8_K_token_rows(int64_t n, const void *a, size_t a_stride, int t0, int tn,
				const int8_t **aq, const float **ad, const int16_t **bsums)
{
	const int64_t nb = n / LLM_QK_K;

	for (int t = 0; t < tn; t++)
	{
		aq[t] = (const int8_t *) ((const char *) a + (size_t) (t0 + t) * a_stride);
		ad[t] = llm_act_d(aq[t], n);
		bsums[t] = (const int16_t *) (ad[t] + nb);
	}
}

static TGT void
tile_q4_K(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride,
		  int nt, float *out, size_t out_stride)
{
	const __m256i m4 = _mm256_set1_epi8(0xF);
	const int64_t nb = n / LLM_QK_K;

	for (int t0 = 0; t0 < nt; t0 += Q4K_TILE_TOKENS)
	{
		const int	tn = nt - t0 < Q4K_TILE_TOKENS ? nt - t0 : Q4K_TILE_TOKENS;
		const int8_t *aq[Q4K_TILE_TOKENS];
		const float *ad[Q4K_TILE_TOKENS];
		const int16_t *bsums[Q4K_TILE_TOKENS];

		q8_K_token_rows(n, a, a_stride, t0, tn, aq, ad, bsums);
		for (int r = 0; r < nr; r++)
		{
			const llm_block_q4_K *x = (const llm_block_q4_K *) ((const char *) w + (size_t) r * w_stride);
			__m256		acc[Q4K_TILE_TOKENS];
			__m128		acc_m[Q4K_TILE_TOKENS];

			for (int t = 0; t < tn; t++)
			{
				acc[t] = _mm256_setzero_ps();
				acc_m[t] = _mm_setzero_ps();
			}
			for (int64_t b = 0; b < nb; b++)
			{
				const float xd = h2f(x[b].d);
				const float xdmin = h2f(x[b].dmin);
				uint8_t		sc[8],
							mn[8];
				__m256i		lo[4],
							hi[4];
				__m128i		mins;
				const uint8_t *q4 = x[b].qs;

				llm_q4_K_scales_mins(x[b].scales, sc, mn);
				mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) mn));
				for (int c = 0; c < 4; c++)
				{
					__m256i		bits = _mm256_loadu_si256((const __m256i *) (q4 + 32 * c));

					lo[c] = _mm256_and_si256(bits, m4);
					hi[c] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
				}
				for (int t = 0; t < tn; t++)
				{
					const float d = ad[t][b] * xd;
					const float dmin = -ad[t][b] * xdmin;
					const int8_t *q8 = aq[t] + b * LLM_QK_K;
					__m256i		sumi = _mm256_setzero_si256();
					__m256i		bs = _mm256_loadu_si256((const __m256i *) (bsums[t] + b * 16));
					__m128i		q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
					__m128i		prod = _mm_madd_epi16(mins, q8s);

					acc_m[t] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m[t]);
					for (int c = 0; c < 4; c++)
					{
						__m256i		yl = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c));
						__m256i		yh = _mm256_loadu_si256((const __m256i *) (q8 + 64 * c + 32));
						__m256i		pl = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c]), _mm256_maddubs_epi16(lo[c], yl));
						__m256i		ph = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c + 1]), _mm256_maddubs_epi16(hi[c], yh));

						sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
					}
					acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[t]);
				}
			}
			for (int t = 0; t < tn; t++)
			{
				__m128		m = acc_m[t];

				m = _mm_add_ps(m, _mm_movehl_ps(m, m));
				m = _mm_add_ss(m, _mm_movehdup_ps(m));
				out[(size_t) (t0 + t) * out_stride + r] = llm_hsum8(acc[t]) + _mm_cvtss_f32(m);
			}
		}
	}
}

/*
 * Q6_K tile: each weight row against up to 4 activation rows at a time; a
 * block's 6-bit values and its 16 scale vectors are built once and serve
 * every token.  Per (row, token) the operations are dot_q6_K's (integer
 * lanes exact in any order, then sumi - sub, the conversion and one fma
 * per block into the token's accumulator), hence bit-identical to it.
 */
#define Q6K_TILE_TOKENS 4

static TGT void
tile_q6_K(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride,
		  int nt, float *out, size_t out_stride)
{
	const int64_t nb = n / LLM_QK_K;

	for (int t0 = 0; t0 < nt; t0 += Q6K_TILE_TOKENS)
	{
		const int	tn = nt - t0 < Q6K_TILE_TOKENS ? nt - t0 : Q6K_TILE_TOKENS;
		const int8_t *aq[Q6K_TILE_TOKENS];
		const float *ad[Q6K_TILE_TOKENS];
		const int16_t *bsums[Q6K_TILE_TOKENS];

		q8_K_token_rows(n, a, a_stride, t0, tn, aq, ad, bsums);
		for (int r = 0; r < nr; r++)
		{
			const llm_block_q6_K *x = (const llm_block_q6_K *) ((const char *) w + (size_t) r * w_stride);
			__m256		acc[Q6K_TILE_TOKENS];

			for (int t = 0; t < tn; t++)
				acc[t] = _mm256_setzero_ps();
			for (int64_t b = 0; b < nb; b++)
			{
				const float xd = h2f(x[b].d);
				const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x[b].scales));
				__m256i		q[8],
							scv[8];

				for (int h = 0; h < 2; h++)
				{
					const uint8_t *ql = x[b].ql + 64 * h;
					const uint8_t *qh = x[b].qh + 32 * h;
					llm_q6_K_unpack_avx2(ql, qh, q + 4 * h);
					for (int c = 0; c < 4; c++)
						scv[4 * h + c] = _mm256_set_m128i(_mm_set1_epi16((short) x[b].scales[8 * h + 2 * c + 1]),
														  _mm_set1_epi16((short) x[b].scales[8 * h + 2 * c]));
				}
				for (int t = 0; t < tn; t++)
				{
					const int8_t *y = aq[t] + b * LLM_QK_K;
					const __m256i bs = _mm256_loadu_si256((const __m256i *) (bsums[t] + b * 16));
					const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
					__m256i		sumi = _mm256_setzero_si256();

					for (int i = 0; i < 8; i++)
					{
						__m256i		p = _mm256_maddubs_epi16(q[i], _mm256_loadu_si256((const __m256i *) (y + 32 * i)));

						sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scv[i], p));
					}
					sumi = _mm256_sub_epi32(sumi, sub);
					acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(ad[t][b] * xd), _mm256_cvtepi32_ps(sumi), acc[t]);
				}
			}
			for (int t = 0; t < tn; t++)
				out[(size_t) (t0 + t) * out_stride + r] = llm_hsum8(acc[t]);
		}
	}
}

DEFINE_TILE_LOOP(tile_f32, dot_f32)
DEFINE_TILE_LOOP(tile_f16, dot_f16)
DEFINE_TILE_LOOP(tile_bf16, dot_bf16)

static size_t
act_bytes_f32(int64_t n)
{
	return ((size_t) n * 4 + 63) & ~(size_t) 63;
}

static size_t
act_bytes_16(int64_t n)
{
	return ((size_t) n * 2 + 63) & ~(size_t) 63;
}

static const llm_qkernel avx2_kernels[] = {
	{LLM_TYPE_F32, LLM_TYPE_F32, 32, "avx2", act_bytes_f32, convert_act_f32, dot_f32, tile_f32, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_F16, LLM_TYPE_F16, 32, "avx2", act_bytes_16, convert_act_f16, dot_f16, tile_f16, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_BF16, LLM_TYPE_BF16, 32, "avx2", act_bytes_16, convert_act_bf16, dot_bf16, tile_bf16, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_0, LLM_TYPE_Q8_0, 32, "avx2", llm_act_bytes_q8_0, quantize_act_q8_0, dot_q4_0_avx2, tile_q4_0_avx2, 2, 4, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_1, LLM_TYPE_Q8_1, 32, "avx2", llm_act_bytes_q8_1, quantize_act_q8_1, dot_q4_1_avx2, tile_q4_1_avx2, 2, 4, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, 32, "avx2", llm_act_bytes_q8_0, quantize_act_q8_0, dot_q8_0_avx2, tile_q8_0_avx2, 2, 4, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_K, LLM_TYPE_Q8_K, 256, "avx2", llm_act_bytes_q8_K, llm_quantize_act_q8_K, dot_q4_K, tile_q4_K, 1, Q4K_TILE_TOKENS, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q6_K, LLM_TYPE_Q8_K, 256, "avx2", llm_act_bytes_q8_K, llm_quantize_act_q8_K, dot_q6_K, tile_q6_K, 1, Q6K_TILE_TOKENS, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
};

/* ---- SwiGLU ---- */

static TGT void
swiglu_avx2(const float *gate, const float *up, float *out, int64_t n)
{
	int64_t		i = 0;

	for (; i + 8 <= n; i += 8)
	{
		__m256		x = _mm256_loadu_ps(gate + i);
		__m256		e = llm_expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));

		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)),
												_mm256_loadu_ps(up + i)));
	}
	for (; i < n; i++)
	{
		float		x = gate[i];

		out[i] = (x / (1.0f + llm_expf(0.0f - x))) * up[i];
	}
}

llm_swiglu_fn
llm_swiglu_avx2_get(void)
{
	return swiglu_avx2;
}

/*
 * The integer tile kernels with AVX512-VNNI and the F16 tile in 512-bit
 * registers (dot_f16's arithmetic); other types as AVX2.
 */
static const llm_qkernel vnni_kernels[] = {
	{LLM_TYPE_F16, LLM_TYPE_F16, 32, "avx512vnni", act_bytes_16, convert_act_f16, dot_f16, llm_tile_f16_avx512, 16, 3, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_0, LLM_TYPE_Q8_0, 32, "avx512vnni", llm_act_bytes_q8_0, quantize_act_q8_0, dot_q4_0_vnni, tile_q4_0_vnni, 2, 4, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_1, LLM_TYPE_Q8_1, 32, "avx512vnni", llm_act_bytes_q8_1, quantize_act_q8_1, dot_q4_1_vnni, tile_q4_1_vnni, 2, 4, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, 32, "avx512vnni", llm_act_bytes_q8_0, quantize_act_q8_0, dot_q8_0_vnni, tile_q8_0_vnni, 2, 4, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
};

const llm_qkernel *
llm_qkernel_avx2_get(uint32_t t, bool vnni)
{
	if (vnni && t == LLM_TYPE_Q6_K && llm_qkernel_q6_K_vnni_get() != NULL)
		return llm_qkernel_q6_K_vnni_get();
	if (vnni)
		for (size_t i = 0; i < sizeof(vnni_kernels) / sizeof(vnni_kernels[0]); i++)
			if (vnni_kernels[i].weight_type == t)
				return &vnni_kernels[i];
	for (size_t i = 0; i < sizeof(avx2_kernels) / sizeof(avx2_kernels[0]); i++)
		if (avx2_kernels[i].weight_type == t)
			return &avx2_kernels[i];
	return NULL;
}

#else							/* not x86: scalar only */

llm_swiglu_fn
llm_swiglu_avx2_get(void)
{
	return NULL;
}

const llm_qkernel *
llm_qkernel_avx2_get(uint32_t t, bool vnni)
{
	return NULL;
}

void
llm_fp32_to_fp16_row_f16c(const float *src, uint16_t *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] = llm_fp32_to_fp16(src[i]);
}

void
llm_fp16_to_fp32_row_f16c(const uint16_t *src, float *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] = llm_fp16_to_fp32(src[i]);
}

#endif
