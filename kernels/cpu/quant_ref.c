/*
 * quant_ref.c — reference weight quantizers (quant.h: llm_quantize_row_ref):
 * float rows into GGUF blocks as ggml's reference quantizers make them, for
 * the tests and tools that build weights; never on a serving path.
 */
#include "quant.h"

#include <math.h>
#include <string.h>
#include <float.h>

/* ------------------------------------------------------------------------
 * Reference weight quantizers (for tests and tools; not speed-critical)
 * ------------------------------------------------------------------------ */

static void
quantize_q4_K_block(const float *x, llm_block_q4_K *y)
{
	float		scale[8],
				minv[8],
				max_scale = 0,
				max_min = 0;
	uint8_t		sc[8],
				mq[8];
	float		d,
				dmin;

	for (int j = 0; j < 8; j++)
	{
		float		lo = x[32 * j],
					hi = x[32 * j];

		for (int l = 1; l < 32; l++)
		{
			lo = fminf(lo, x[32 * j + l]);
			hi = fmaxf(hi, x[32 * j + l]);
		}
		if (lo > 0)
			lo = 0;				/* x = d*sc*q - dmin*m with m >= 0 */
		scale[j] = (hi - lo) / 15.0f;
		minv[j] = -lo;
		if (scale[j] > max_scale)
			max_scale = scale[j];
		if (minv[j] > max_min)
			max_min = minv[j];
	}
	d = max_scale / 63.0f;
	dmin = max_min / 63.0f;
	y->d = llm_fp32_to_fp16(d);
	y->dmin = llm_fp32_to_fp16(dmin);
	d = llm_fp16_to_fp32(y->d);
	dmin = llm_fp16_to_fp32(y->dmin);
	for (int j = 0; j < 8; j++)
	{
		sc[j] = (uint8_t) (d > 0 ? clampi((int) lroundf(scale[j] / d), 0, 63) : 0);
		mq[j] = (uint8_t) (dmin > 0 ? clampi((int) lroundf(minv[j] / dmin), 0, 63) : 0);
	}
	memset(y->scales, 0, sizeof(y->scales));
	for (int j = 0; j < 8; j++)
	{
		if (j < 4)
		{
			y->scales[j] |= sc[j];
			y->scales[j + 4] |= mq[j];
		}
		else
		{
			y->scales[j + 4] = (uint8_t) ((sc[j] & 0xF) | ((mq[j] & 0xF) << 4));
			y->scales[j - 4] |= (uint8_t) ((sc[j] >> 4) << 6);
			y->scales[j] |= (uint8_t) ((mq[j] >> 4) << 6);
		}
	}
	for (int c = 0; c < 4; c++)
	{
		for (int l = 0; l < 32; l++)
		{
			int			q[2];

			for (int h = 0; h < 2; h++)
			{
				int			j = 2 * c + h;
				float		dj = d * sc[j];
				float		mj = dmin * mq[j];

				q[h] = dj > 0 ? clampi((int) lroundf((x[32 * j + l] + mj) / dj), 0, 15) : 0;
			}
			y->qs[32 * c + l] = (uint8_t) (q[0] | (q[1] << 4));
		}
	}
}

static void
quantize_q6_K_block(const float *x, llm_block_q6_K *y)
{
	float		sub[16],
				max_sub = 0,
				d;
	int8_t		sc[16];

	for (int j = 0; j < 16; j++)
	{
		float		amax = 0;

		for (int l = 0; l < 16; l++)
			amax = fmaxf(amax, fabsf(x[16 * j + l]));
		sub[j] = amax / 31.0f;
		if (sub[j] > max_sub)
			max_sub = sub[j];
	}
	d = max_sub / 127.0f;
	y->d = llm_fp32_to_fp16(d);
	d = llm_fp16_to_fp32(y->d);
	for (int j = 0; j < 16; j++)
	{
		sc[j] = (int8_t) (d > 0 ? clampi((int) lroundf(sub[j] / d), 0, 127) : 0);
		y->scales[j] = sc[j];
	}
	for (int h = 0; h < 2; h++)
	{
		for (int l = 0; l < 32; l++)
		{
			int			q[4];

			for (int c = 0; c < 4; c++)
			{
				int			e = 128 * h + 32 * c + l;
				float		dj = d * sc[e / 16];

				q[c] = (dj > 0 ? clampi((int) lroundf(x[e] / dj), -32, 31) : 0) + 32;
			}
			y->ql[64 * h + l] = (uint8_t) ((q[0] & 0xF) | ((q[2] & 0xF) << 4));
			y->ql[64 * h + l + 32] = (uint8_t) ((q[1] & 0xF) | ((q[3] & 0xF) << 4));
			y->qh[32 * h + l] = (uint8_t) ((q[0] >> 4) | ((q[1] >> 4) << 2) |
										   ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6));
		}
	}
}

bool
llm_quantize_row_ref(uint32_t t, const float *src, void *dst, int64_t n)
{
	const llm_type_info *ti = llm_type_get(t);

	if (ti == NULL || n % ti->block_elems != 0)
		return false;
	switch (t)
	{
		case LLM_TYPE_F32:
			memcpy(dst, src, (size_t) n * sizeof(float));
			return true;
		case LLM_TYPE_F16:
			for (int64_t i = 0; i < n; i++)
				((uint16_t *) dst)[i] = llm_fp32_to_fp16(src[i]);
			return true;
		case LLM_TYPE_BF16:
			for (int64_t i = 0; i < n; i++)
				((uint16_t *) dst)[i] = llm_fp32_to_bf16(src[i]);
			return true;
		case LLM_TYPE_Q4_0:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const float *x = src + b * LLM_QK;
				llm_block_q4_0 *y = (llm_block_q4_0 *) dst + b;
				float		amax = 0,
							maxv = 0,
							d,
							id;

				for (int j = 0; j < 32; j++)
					if (fabsf(x[j]) > amax)
					{
						amax = fabsf(x[j]);
						maxv = x[j];
					}
				d = maxv / -8.0f;
				y->d = llm_fp32_to_fp16(d);
				d = llm_fp16_to_fp32(y->d);
				id = d != 0 ? 1.0f / d : 0.0f;
				for (int j = 0; j < 16; j++)
				{
					int			q0 = clampi((int) lroundf(x[j] * id) + 8, 0, 15);
					int			q1 = clampi((int) lroundf(x[j + 16] * id) + 8, 0, 15);

					y->qs[j] = (uint8_t) (q0 | (q1 << 4));
				}
			}
			return true;
		case LLM_TYPE_Q4_1:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const float *x = src + b * LLM_QK;
				llm_block_q4_1 *y = (llm_block_q4_1 *) dst + b;
				float		lo = FLT_MAX,
							hi = -FLT_MAX,
							d,
							id,
							m;

				for (int j = 0; j < 32; j++)
				{
					lo = fminf(lo, x[j]);
					hi = fmaxf(hi, x[j]);
				}
				y->d = llm_fp32_to_fp16((hi - lo) / 15.0f);
				y->m = llm_fp32_to_fp16(lo);
				d = llm_fp16_to_fp32(y->d);
				m = llm_fp16_to_fp32(y->m);
				id = d != 0 ? 1.0f / d : 0.0f;
				for (int j = 0; j < 16; j++)
				{
					int			q0 = clampi((int) lroundf((x[j] - m) * id), 0, 15);
					int			q1 = clampi((int) lroundf((x[j + 16] - m) * id), 0, 15);

					y->qs[j] = (uint8_t) (q0 | (q1 << 4));
				}
			}
			return true;
		case LLM_TYPE_Q8_0:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const float *x = src + b * LLM_QK;
				llm_block_q8_0 *y = (llm_block_q8_0 *) dst + b;
				float		amax = 0,
							d,
							id;

				for (int j = 0; j < 32; j++)
					amax = fmaxf(amax, fabsf(x[j]));
				d = amax / 127.0f;
				y->d = llm_fp32_to_fp16(d);
				id = d != 0 ? 1.0f / d : 0.0f;
				for (int j = 0; j < 32; j++)
					y->qs[j] = (int8_t) clampi((int) lroundf(x[j] * id), -127, 127);
			}
			return true;
		case LLM_TYPE_Q5_0:
			for (int64_t b = 0; b < n / LLM_QK; b++)
			{
				const float *x = src + b * LLM_QK;
				llm_block_q5_0 *y = (llm_block_q5_0 *) dst + b;
				float		amax = 0,
							maxv = 0,
							d,
							id;
				uint32_t	qh = 0;

				for (int j = 0; j < 32; j++)
					if (fabsf(x[j]) > amax)
					{
						amax = fabsf(x[j]);
						maxv = x[j];
					}
				d = maxv / -16.0f;
				y->d = llm_fp32_to_fp16(d);
				d = llm_fp16_to_fp32(y->d);
				id = d != 0 ? 1.0f / d : 0.0f;
				for (int j = 0; j < 16; j++)
				{
					int			q0 = clampi((int) lroundf(x[j] * id) + 16, 0, 31);
					int			q1 = clampi((int) lroundf(x[j + 16] * id) + 16, 0, 31);

					y->qs[j] = (uint8_t) ((q0 & 0xF) | ((q1 & 0xF) << 4));
					qh |= (uint32_t) (q0 >> 4) << j;
					qh |= (uint32_t) (q1 >> 4) << (j + 16);
				}
				for (int k = 0; k < 4; k++)
					y->qh[k] = (uint8_t) (qh >> (8 * k));
			}
			return true;
		case LLM_TYPE_Q4_K:
			for (int64_t b = 0; b < n / LLM_QK_K; b++)
				quantize_q4_K_block(src + b * LLM_QK_K, (llm_block_q4_K *) dst + b);
			return true;
		case LLM_TYPE_Q6_K:
			for (int64_t b = 0; b < n / LLM_QK_K; b++)
				quantize_q6_K_block(src + b * LLM_QK_K, (llm_block_q6_K *) dst + b);
			return true;
		default:
			return false;
	}
}
