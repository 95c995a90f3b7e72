/*
 * quant.c — scalar code of the CPU backend (quant.h): fp16/bf16
 * conversion, dequantization, activation quantizers and the weight x
 * activation dot products.  The reference weight quantizers (tests and
 * tools) are quant_ref.c; exp, SwiGLU and attention, attn_scalar.c.
 *
 * Formats: GGUF / ggml's block structs.  Arithmetic mirrors the AVX2 branch
 * of llama.cpp's x86 CPU kernels: every dot product accumulates per-block
 * integer sums in 8 "lanes" exactly as the AVX2 code's 8 int32 lanes do,
 * scales them with one fused multiply-add per lane and block, and reduces
 * the lanes in the order of ggml's hsum_float_8.  The AVX2 versions
 * (quant_avx2.c) perform the same operations, so scalar and AVX2 results
 * are bit-identical.  See quant.h for the table of types.
 *
 * This file depends on no other file of kernels/cpu (dispatch.c states the
 * whole graph): it is plain C for any CPU.
 */
#include "quant.h"
#include "quant_more.h"

#include <math.h>
#include <string.h>
#include <float.h>

/* ------------------------------------------------------------------------
 * fp16 / bf16
 * ------------------------------------------------------------------------ */

/* IEEE 754 binary16 -> binary32; exact for every input. */
float
llm_fp16_to_fp32(uint16_t h)
{
	uint32_t	sign = (uint32_t) (h & 0x8000) << 16;
	uint32_t	e = (h >> 10) & 0x1f;
	uint32_t	m = h & 0x3ff;

	if (e == 0)
	{
		/* zero or subnormal: m * 2^-24, exact in float */
		float		v = (float) m * 0x1p-24f;

		return bits_f32(f32_bits(v) | sign);
	}
	if (e == 31)
		return bits_f32(sign | 0x7f800000 | (m << 13));
	return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/*
 * binary32 -> binary16 with round-to-nearest-even, as the F16C instruction
 * vcvtps2ph with rounding mode 0 does (overflow -> inf, NaN -> quiet NaN
 * keeping the top payload bits, subnormals rounded, not flushed).
 */
uint16_t
llm_fp32_to_fp16(float f)
{
	uint32_t	x = f32_bits(f);
	uint32_t	sign = (x >> 16) & 0x8000;
	uint32_t	r,
				rem;

	x &= 0x7fffffff;
	if (x > 0x7f800000)			/* NaN */
		return (uint16_t) (sign | 0x7e00 | ((x >> 13) & 0x3ff));
	if (x >= 0x477ff000)		/* >= 65520 rounds to inf; inf stays inf */
		return (uint16_t) (sign | 0x7c00);
	if (x < 0x38800000)
	{
		/* result is a half subnormal (or zero): units of 2^-24 */
		uint32_t	e = x >> 23;
		uint32_t	m,
					shift,
					half;

		if (e < 101)			/* below 2^-25: rounds to zero */
			return (uint16_t) sign;
		m = (x & 0x7fffff) | 0x800000;
		shift = 126 - e;		/* 14 .. 25 */
		r = m >> shift;
		rem = m & ((1u << shift) - 1);
		half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t) (sign | r);
	}
	r = (x >> 13) - ((127 - 15) << 10);
	rem = x & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
		r++;					/* a carry into the exponent is correct */
	return (uint16_t) (sign | r);
}

float
llm_bf16_to_fp32(uint16_t h)
{
	return bits_f32((uint32_t) h << 16);
}

/* As ggml's ggml_compute_fp32_to_bf16: RNE, NaN forced quiet. */
uint16_t
llm_fp32_to_bf16(float f)
{
	uint32_t	u = f32_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t) ((u >> 16) | 64);
	return (uint16_t) ((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* ------------------------------------------------------------------------
 * Dequantization (ggml's dequantize_row_* formulas)
 * ------------------------------------------------------------------------ */

/* Element j (0..31) of a Q5_0 block as a signed integer -16..15. */
static inline int
q5_0_value(const llm_block_q5_0 *x, int j)
{
	uint32_t	qh = (uint32_t) x->qh[0] | (uint32_t) x->qh[1] << 8 | (uint32_t) x->qh[2] << 16 |
		(uint32_t) x->qh[3] << 24;
	int			lo = j < 16 ? (x->qs[j] & 0xF) : (x->qs[j - 16] >> 4);

	return (lo | (int) ((qh >> j) & 1) << 4) - 16;
}

bool
llm_dequantize_row(uint32_t t, const void *src, float *dst, int64_t n)
{
	switch (t)
	{
		case LLM_TYPE_F32:
			memcpy(dst, src, (size_t) n * sizeof(float));
			return true;
		case LLM_TYPE_F16:
			for (int64_t i = 0; i < n; i++)
				dst[i] = llm_fp16_to_fp32(((const uint16_t *) src)[i]);
			return true;
		case LLM_TYPE_BF16:
			for (int64_t i = 0; i < n; i++)
				dst[i] = llm_bf16_to_fp32(((const uint16_t *) src)[i]);
			return true;
		case LLM_TYPE_Q4_0:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const llm_block_q4_0 *x = (const llm_block_q4_0 *) src + b;
				float		d = llm_fp16_to_fp32(x->d);

				for (int j = 0; j < 16; j++)
				{
					dst[b * 32 + j] = ((x->qs[j] & 0xF) - 8) * d;
					dst[b * 32 + j + 16] = ((x->qs[j] >> 4) - 8) * d;
				}
			}
			return true;
		case LLM_TYPE_Q4_1:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const llm_block_q4_1 *x = (const llm_block_q4_1 *) src + b;
				float		d = llm_fp16_to_fp32(x->d);
				float		m = llm_fp16_to_fp32(x->m);

				for (int j = 0; j < 16; j++)
				{
					dst[b * 32 + j] = (x->qs[j] & 0xF) * d + m;
					dst[b * 32 + j + 16] = (x->qs[j] >> 4) * d + m;
				}
			}
			return true;
		case LLM_TYPE_Q8_0:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const llm_block_q8_0 *x = (const llm_block_q8_0 *) src + b;
				float		d = llm_fp16_to_fp32(x->d);

				for (int j = 0; j < 32; j++)
					dst[b * 32 + j] = x->qs[j] * d;
			}
			return true;
		case LLM_TYPE_Q5_0:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const llm_block_q5_0 *x = (const llm_block_q5_0 *) src + b;
				float		d = llm_fp16_to_fp32(x->d);

				for (int j = 0; j < 32; j++)
					dst[b * 32 + j] = q5_0_value(x, j) * d;
			}
			return true;
		case LLM_TYPE_Q4_K:
			for (int64_t b = 0; b < n / LLM_QK_K; b++)
			{
				const llm_block_q4_K *x = (const llm_block_q4_K *) src + b;
				float		d = llm_fp16_to_fp32(x->d);
				float		dmin = llm_fp16_to_fp32(x->dmin);
				float	   *y = dst + b * LLM_QK_K;

				for (int c = 0; c < 4; c++)
				{
					uint8_t		sc,
								m;
					float		d1,
								m1,
								d2,
								m2;

					llm_get_scale_min_k4(2 * c, x->scales, &sc, &m);
					d1 = d * sc;
					m1 = dmin * m;
					llm_get_scale_min_k4(2 * c + 1, x->scales, &sc, &m);
					d2 = d * sc;
					m2 = dmin * m;
					for (int l = 0; l < 32; l++)
					{
						y[64 * c + l] = d1 * (x->qs[32 * c + l] & 0xF) - m1;
						y[64 * c + 32 + l] = d2 * (x->qs[32 * c + l] >> 4) - m2;
					}
				}
			}
			return true;
		case LLM_TYPE_Q6_K:
			for (int64_t b = 0; b < n / LLM_QK_K; b++)
			{
				const llm_block_q6_K *x = (const llm_block_q6_K *) src + b;
				float		d = llm_fp16_to_fp32(x->d);
				float	   *y = dst + b * LLM_QK_K;

				for (int h = 0; h < 2; h++)
				{
					const uint8_t *ql = x->ql + 64 * h;
					const uint8_t *qh = x->qh + 32 * h;
					const int8_t *sc = x->scales + 8 * h;

					for (int l = 0; l < 32; l++)
					{
						int			is = l / 16;
						int			q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
						int			q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
						int			q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
						int			q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;

						y[128 * h + l] = d * sc[is + 0] * q1;
						y[128 * h + l + 32] = d * sc[is + 2] * q2;
						y[128 * h + l + 64] = d * sc[is + 4] * q3;
						y[128 * h + l + 96] = d * sc[is + 6] * q4;
					}
				}
			}
			return true;
		default:
			/* the types of quant_more.h */
			return llm_dequantize_row_more(t, src, dst, n);
	}
}

/* ------------------------------------------------------------------------
 * Activation quantizers (scalar)
 * ------------------------------------------------------------------------ */

static inline size_t
pad64(size_t b)
{
	return (b + 63) & ~(size_t) 63;
}

size_t
llm_act_bytes_q8_0(int64_t n)
{
	return pad64((size_t) n + (size_t) (n / LLM_QK) * sizeof(float));
}

size_t
llm_act_bytes_q8_1(int64_t n)
{
	return pad64((size_t) n + 2 * (size_t) (n / LLM_QK) * sizeof(float));
}

size_t
llm_act_bytes_q8_K(int64_t n)
{
	return pad64((size_t) n + (size_t) (n / LLM_QK_K) * sizeof(float) +
				 (size_t) (n / 16) * sizeof(int16_t));
}

static size_t
act_bytes_f32(int64_t n)
{
	return pad64((size_t) n * sizeof(float));
}

static size_t
act_bytes_16(int64_t n)
{
	return pad64((size_t) n * sizeof(uint16_t));
}

/*
 * Round half to even for |v| < 2^22 without libm (the float magic-number
 * trick ggml's nearest_int uses; AVX _mm256_round_ps(.., nearest) agrees).
 */
static inline int
round_even(float v)
{
	float		r = v + 12582912.0f;
	uint32_t	u = f32_bits(r);

	return (int) (u & 0x007fffff) - 0x00400000;
}

/*
 * Q8_0 / Q8_1 block of 32: d = amax/127, q = round_even(x * (127/amax)),
 * scale stored as fp16 (ggml's x86 quantize_row_q8_0 / quantize_row_q8_1).
 */
static void
quantize_act_q8(const float *x, void *dst, int64_t n, bool with_sum)
{
	int8_t	   *qs = dst;
	float	   *d_out = (float *) llm_act_d(dst, n);
	float	   *s_out = d_out + n / LLM_QK;

	for (int64_t b = 0; b < n / LLM_QK; b++)
	{
		const float *xb = x + b * LLM_QK;
		float		amax = 0,
					d,
					id;
		int			sum = 0;

		for (int j = 0; j < 32; j++)
		{
			float		a = fabsf(xb[j]);

			amax = a > amax ? a : amax;
		}
		d = amax / 127.0f;
		id = amax != 0.0f ? 127.0f / amax : 0.0f;
		for (int j = 0; j < 32; j++)
		{
			int			q = clampi(round_even(xb[j] * id), -128, 127);

			qs[b * LLM_QK + j] = (int8_t) q;
			sum += q;
		}
		d_out[b] = llm_fp16_to_fp32(llm_fp32_to_fp16(d));
		if (with_sum)
			s_out[b] = llm_fp16_to_fp32(llm_fp32_to_fp16(d * (float) sum));
	}
}

static void
quantize_act_q8_0(const float *x, void *dst, int64_t n)
{
	quantize_act_q8(x, dst, n, false);
}

/* KV rows: the activation quantizer's blocks, stored as ggml's block_q8_0 (fp16 d, 32 quants). */
void
llm_kv_quantize_q8_0(const float *x, void *dst, int n)
{
	float		actbuf[(4096 + 4096 / LLM_QK * sizeof(float) + 64) / sizeof(float)];
	int8_t	   *act = (int8_t *) actbuf;
	llm_block_q8_0 *y = dst;

	for (int b0 = 0; b0 < n; b0 += 4096)
	{
		int			m = n - b0 < 4096 ? n - b0 : 4096;
		const float *d = llm_act_d(act, m);

		quantize_act_q8(x + b0, act, m, false);
		for (int b = 0; b < m / LLM_QK; b++)
		{
			y[b0 / LLM_QK + b].d = llm_fp32_to_fp16(d[b]);
			memcpy(y[b0 / LLM_QK + b].qs, act + b * LLM_QK, LLM_QK);
		}
	}
}

float
llm_kv_value(const uint8_t *row, int kv_dtype, int i)
{
	if (kv_dtype == LLM_KV_Q8_0)
	{
		const llm_block_q8_0 *b = (const llm_block_q8_0 *) row + i / LLM_QK;

		return llm_fp16_to_fp32(b->d) * (float) b->qs[i % LLM_QK];
	}
	return llm_fp16_to_fp32(((const uint16_t *) row)[i]);
}

static void
quantize_act_q8_1(const float *x, void *dst, int64_t n)
{
	quantize_act_q8(x, dst, n, true);
}

/*
 * Q8_K super-block of 256 (ggml's quantize_row_q8_K_ref, which its x86
 * backend uses): iscale = -127/max with max the signed value of largest
 * magnitude, q = min(127, round_even(iscale*x)), d = 1/iscale kept as float,
 * bsums = sums of 16 consecutive q.
 */
void
llm_quantize_act_q8_K(const float *x, void *dst, int64_t n)
{
	int8_t	   *qs = dst;
	float	   *d_out = (float *) llm_act_d(dst, n);
	int16_t    *bsums = (int16_t *) (d_out + n / LLM_QK_K);

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		const float *xb = x + b * LLM_QK_K;
		int8_t	   *q = qs + b * LLM_QK_K;
		float		amax = 0,
					maxv = 0,
					iscale;

		for (int j = 0; j < LLM_QK_K; j++)
		{
			float		a = fabsf(xb[j]);

			if (a > amax)
			{
				amax = a;
				maxv = xb[j];
			}
		}
		if (amax == 0)
		{
			d_out[b] = 0;
			memset(q, 0, LLM_QK_K);
			memset(bsums + b * 16, 0, 16 * sizeof(int16_t));
			continue;
		}
		iscale = -127.0f / maxv;
		for (int j = 0; j < LLM_QK_K; j++)
		{
			int			v = round_even(iscale * xb[j]);

			q[j] = (int8_t) (v > 127 ? 127 : v);
		}
		for (int g = 0; g < 16; g++)
		{
			int			sum = 0;

			for (int l = 0; l < 16; l++)
				sum += q[16 * g + l];
			bsums[b * 16 + g] = (int16_t) sum;
		}
		d_out[b] = 1.0f / iscale;
	}
}

static void
convert_act_f32(const float *x, void *dst, int64_t n)
{
	memcpy(dst, x, (size_t) n * sizeof(float));
}

static void
convert_act_f16(const float *x, void *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		((uint16_t *) dst)[i] = llm_fp32_to_fp16(x[i]);
}

static void
convert_act_bf16(const float *x, void *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		((uint16_t *) dst)[i] = llm_fp32_to_bf16(x[i]);
}

/* ------------------------------------------------------------------------
 * Scalar dot products (mirror the AVX2 lane structure; see file header)
 * ------------------------------------------------------------------------ */

/* ggml hsum_float_8: (a0+a4 + a2+a6) + (a1+a5 + a3+a7) in that association. */
static inline float
hsum8(const float a[8])
{
	float		r0 = a[0] + a[4],
				r1 = a[1] + a[5],
				r2 = a[2] + a[6],
				r3 = a[3] + a[7];

	return (r0 + r2) + (r1 + r3);
}

static float
dot_q4_0_q8_0(int64_t n, const void *w, const void *a)
{
	const llm_block_q4_0 *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	float		acc[8] = {0};

	for (int64_t b = 0; b < n / LLM_QK; b++)
	{
		float		d = llm_fp16_to_fp32(x[b].d) * ad[b];
		const int8_t *y = aq + b * LLM_QK;

		for (int l = 0; l < 8; l++)
		{
			int			s = 0;

			for (int e = 4 * l; e < 4 * l + 4; e++)
			{
				int			q = e < 16 ? (x[b].qs[e] & 0xF) : (x[b].qs[e - 16] >> 4);

				s += (q - 8) * y[e];
			}
			acc[l] = fmaf(d, (float) s, acc[l]);
		}
	}
	return hsum8(acc);
}

static float
dot_q4_1_q8_1(int64_t n, const void *w, const void *a)
{
	const llm_block_q4_1 *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const float *as = llm_act_s(a, n, LLM_QK);
	float		acc[8] = {0};
	float		summs = 0;

	for (int64_t b = 0; b < n / LLM_QK; b++)
	{
		float		d = llm_fp16_to_fp32(x[b].d) * ad[b];
		const int8_t *y = aq + b * LLM_QK;

		summs = fmaf(llm_fp16_to_fp32(x[b].m), as[b], summs);
		for (int l = 0; l < 8; l++)
		{
			int			s = 0;

			for (int e = 4 * l; e < 4 * l + 4; e++)
			{
				int			q = e < 16 ? (x[b].qs[e] & 0xF) : (x[b].qs[e - 16] >> 4);

				s += q * y[e];
			}
			acc[l] = fmaf(d, (float) s, acc[l]);
		}
	}
	return hsum8(acc) + summs;
}

static float
dot_q5_0_q8_0(int64_t n, const void *w, const void *a)
{
	const llm_block_q5_0 *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	float		acc[8] = {0};

	for (int64_t b = 0; b < n / LLM_QK; b++)
	{
		float		d = llm_fp16_to_fp32(x[b].d) * ad[b];
		const int8_t *y = aq + b * LLM_QK;

		for (int l = 0; l < 8; l++)
		{
			int			s = 0;

			for (int e = 4 * l; e < 4 * l + 4; e++)
				s += q5_0_value(&x[b], e) * y[e];
			acc[l] = fmaf(d, (float) s, acc[l]);
		}
	}
	return hsum8(acc);
}

static float
dot_q8_0_q8_0(int64_t n, const void *w, const void *a)
{
	const llm_block_q8_0 *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	float		acc[8] = {0};

	for (int64_t b = 0; b < n / LLM_QK; b++)
	{
		float		d = llm_fp16_to_fp32(x[b].d) * ad[b];
		const int8_t *y = aq + b * LLM_QK;

		for (int l = 0; l < 8; l++)
		{
			int			s = 0;

			for (int e = 4 * l; e < 4 * l + 4; e++)
				s += x[b].qs[e] * y[e];
			acc[l] = fmaf(d, (float) s, acc[l]);
		}
	}
	return hsum8(acc);
}

static float
dot_q4_K_q8_K(int64_t n, const void *w, const void *a)
{
	const llm_block_q4_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const int16_t *bsums = (const int16_t *) (ad + n / LLM_QK_K);
	float		acc[8] = {0};
	float		acc_m[4] = {0};

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		float		d = ad[b] * llm_fp16_to_fp32(x[b].d);
		float		dmin = -ad[b] * llm_fp16_to_fp32(x[b].dmin);
		const int8_t *y = aq + b * LLM_QK_K;
		const int16_t *bs = bsums + b * 16;
		uint8_t		sc[8],
					mn[8];
		int			q8s[8];
		int			sumi[8] = {0};

		for (int j = 0; j < 8; j++)
		{
			llm_get_scale_min_k4(j, x[b].scales, &sc[j], &mn[j]);
			q8s[j] = bs[2 * j] + bs[2 * j + 1];
		}
		for (int l = 0; l < 4; l++)
		{
			int			prod = mn[2 * l] * q8s[2 * l] + mn[2 * l + 1] * q8s[2 * l + 1];

			acc_m[l] = fmaf(dmin, (float) prod, acc_m[l]);
		}
		for (int c = 0; c < 4; c++)
		{
			const uint8_t *q4 = x[b].qs + 32 * c;
			const int8_t *y8 = y + 64 * c;

			for (int k = 0; k < 8; k++)
			{
				int			sl = 0,
							sh = 0;

				for (int e = 4 * k; e < 4 * k + 4; e++)
				{
					sl += (q4[e] & 0xF) * y8[e];
					sh += (q4[e] >> 4) * y8[32 + e];
				}
				sumi[k] += sc[2 * c] * sl + sc[2 * c + 1] * sh;
			}
		}
		for (int k = 0; k < 8; k++)
			acc[k] = fmaf(d, (float) sumi[k], acc[k]);
	}
	return hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

static float
dot_q6_K_q8_K(int64_t n, const void *w, const void *a)
{
	const llm_block_q6_K *x = w;
	const int8_t *aq = a;
	const float *ad = llm_act_d(a, n);
	const int16_t *bsums = (const int16_t *) (ad + n / LLM_QK_K);
	float		acc[8] = {0};

	for (int64_t b = 0; b < n / LLM_QK_K; b++)
	{
		float		d = ad[b] * llm_fp16_to_fp32(x[b].d);
		const int8_t *sc = x[b].scales;
		const int16_t *bs = bsums + b * 16;
		int			sumi[8] = {0};

		for (int h = 0; h < 2; h++)
		{
			const uint8_t *ql = x[b].ql + 64 * h;
			const uint8_t *qh = x[b].qh + 32 * h;
			const int8_t *y = aq + b * LLM_QK_K + 128 * h;

			for (int c = 0; c < 4; c++)
			{
				for (int k = 0; k < 8; k++)
				{
					int			s = 0;
					int			scale = sc[8 * h + 2 * c + (k >= 4)];

					for (int e = 4 * k; e < 4 * k + 4; e++)
					{
						int			lo = (c & 1) ? ql[32 + e] : ql[e];
						int			q = ((c & 2) ? (lo >> 4) : (lo & 0xF)) |
							(((qh[e] >> (2 * c)) & 3) << 4);

						s += q * y[32 * c + e];
					}
					sumi[k] += scale * s;
				}
			}
		}
		for (int k = 0; k < 8; k++)
		{
			sumi[k] -= 32 * (bs[2 * k] * sc[2 * k] + bs[2 * k + 1] * sc[2 * k + 1]);
			acc[k] = fmaf(d, (float) sumi[k], acc[k]);
		}
	}
	return hsum8(acc);
}

/*
 * Float weight types: 4 accumulators of 8 lanes over steps of 32 elements
 * (element i goes to accumulator (i/8)%4, lane i%8), combined as
 * (a0+a1)+(a2+a3) lane-wise, then hsum8.  n is a multiple of 32.
 */
#define DEFINE_DOT_FLOAT(name, wtype, wconv, atype, aconv) \
static float \
name(int64_t n, const void *w, const void *a) \
{ \
	const wtype *x = w; \
	const atype *y = a; \
	float		acc[4][8] = {{0}}; \
	float		sum[8]; \
	for (int64_t i = 0; i < n; i += 32) \
		for (int k = 0; k < 4; k++) \
			for (int l = 0; l < 8; l++) \
				acc[k][l] = fmaf(wconv(x[i + 8 * k + l]), aconv(y[i + 8 * k + l]), acc[k][l]); \
	for (int l = 0; l < 8; l++) \
		sum[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]); \
	return hsum8(sum); \
}

#define IDENT(v) (v)
DEFINE_DOT_FLOAT(dot_f32_f32, float, IDENT, float, IDENT)
DEFINE_DOT_FLOAT(dot_f16_f16, uint16_t, llm_fp16_to_fp32, uint16_t, llm_fp16_to_fp32)
DEFINE_DOT_FLOAT(dot_bf16_bf16, uint16_t, llm_bf16_to_fp32, uint16_t, llm_bf16_to_fp32)

/* Tile by repeated single dot products (scalar kernels). */
#define DEFINE_TILE_LOOP(name, dotfn) \
static void \
name(int64_t n, const void *w, size_t w_stride, int nr, const void *a, size_t a_stride, \
	 int nt, float *out, size_t out_stride) \
{ \
	for (int t = 0; t < nt; t++) \
		for (int r = 0; r < nr; r++) \
			out[t * out_stride + r] = dotfn(n, (const char *) w + r * w_stride, \
											(const char *) a + t * a_stride); \
}

DEFINE_TILE_LOOP(tile_q4_0, dot_q4_0_q8_0)
DEFINE_TILE_LOOP(tile_q4_1, dot_q4_1_q8_1)
DEFINE_TILE_LOOP(tile_q8_0, dot_q8_0_q8_0)
DEFINE_TILE_LOOP(tile_q5_0, dot_q5_0_q8_0)
DEFINE_TILE_LOOP(tile_q4_K, dot_q4_K_q8_K)
DEFINE_TILE_LOOP(tile_q6_K, dot_q6_K_q8_K)
DEFINE_TILE_LOOP(tile_f32, dot_f32_f32)
DEFINE_TILE_LOOP(tile_f16, dot_f16_f16)
DEFINE_TILE_LOOP(tile_bf16, dot_bf16_bf16)

static const llm_qkernel scalar_kernels[] = {
	{LLM_TYPE_F32, LLM_TYPE_F32, 32, "scalar", act_bytes_f32, convert_act_f32, dot_f32_f32, tile_f32, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_F16, LLM_TYPE_F16, 32, "scalar", act_bytes_16, convert_act_f16, dot_f16_f16, tile_f16, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_BF16, LLM_TYPE_BF16, 32, "scalar", act_bytes_16, convert_act_bf16, dot_bf16_bf16, tile_bf16, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_0, LLM_TYPE_Q8_0, 32, "scalar", llm_act_bytes_q8_0, quantize_act_q8_0, dot_q4_0_q8_0, tile_q4_0, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_1, LLM_TYPE_Q8_1, 32, "scalar", llm_act_bytes_q8_1, quantize_act_q8_1, dot_q4_1_q8_1, tile_q4_1, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, 32, "scalar", llm_act_bytes_q8_0, quantize_act_q8_0, dot_q8_0_q8_0, tile_q8_0, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q5_0, LLM_TYPE_Q8_0, 32, "scalar", llm_act_bytes_q8_0, quantize_act_q8_0, dot_q5_0_q8_0, tile_q5_0, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q4_K, LLM_TYPE_Q8_K, 256, "scalar", llm_act_bytes_q8_K, llm_quantize_act_q8_K, dot_q4_K_q8_K, tile_q4_K, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
	{LLM_TYPE_Q6_K, LLM_TYPE_Q8_K, 256, "scalar", llm_act_bytes_q8_K, llm_quantize_act_q8_K, dot_q6_K_q8_K, tile_q6_K, 1, 1, NULL, NULL, 1, NULL, NULL, 0, NULL, 0},
};

const llm_qkernel *
llm_qkernel_scalar_get(uint32_t t)
{
	for (size_t i = 0; i < sizeof(scalar_kernels) / sizeof(scalar_kernels[0]); i++)
		if (scalar_kernels[i].weight_type == t)
			return &scalar_kernels[i];
	return NULL;
}
