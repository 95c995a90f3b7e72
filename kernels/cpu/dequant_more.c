/*
 * dequant_more.c — reference dequantization of the types of quant_more.h
 * (Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS): ggml's dequantize_row_*
 * formulas, operation by operation.  Built without floating-point
 * contraction (Makefile: -ffp-contract=off) so that d * q - m stays two
 * rounded operations, as in ggml and the gguf Python package.
 */
#include "quant_more.h"

const int8_t llm_kvalues_iq4nl[16] = {
	-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113
};

static void
dequant_q5_1(const llm_block_q5_1 *x, float *y, int64_t nb)
{
	for (int64_t b = 0; b < nb; b++, x++, y += LLM_QK)
	{
		float		d = llm_fp16_to_fp32(x->d);
		float		m = llm_fp16_to_fp32(x->m);
		uint32_t	qh = (uint32_t) x->qh[0] | (uint32_t) x->qh[1] << 8 |
			(uint32_t) x->qh[2] << 16 | (uint32_t) x->qh[3] << 24;

		for (int j = 0; j < 16; j++)
		{
			int			x0 = (x->qs[j] & 0xF) | (int) ((qh >> j) & 1) << 4;
			int			x1 = (x->qs[j] >> 4) | (int) ((qh >> (j + 16)) & 1) << 4;

			y[j] = (float) x0 * d + m;
			y[j + 16] = (float) x1 * d + m;
		}
	}
}

static void
dequant_q2_K(const llm_block_q2_K *x, float *y, int64_t nb)
{
	for (int64_t b = 0; b < nb; b++, x++, y += LLM_QK_K)
	{
		float		d = llm_fp16_to_fp32(x->d);
		float		dmin = llm_fp16_to_fp32(x->dmin);

		for (int g = 0; g < 16; g++)
		{
			const uint8_t *q = x->qs + 32 * (g / 8) + 16 * (g % 2);
			int			shift = 2 * ((g % 8) / 2);
			float		dl = d * (float) (x->scales[g] & 0xF);
			float		ml = dmin * (float) (x->scales[g] >> 4);

			for (int l = 0; l < 16; l++)
				y[16 * g + l] = dl * (float) ((q[l] >> shift) & 3) - ml;
		}
	}
}

static void
dequant_q3_K(const llm_block_q3_K *x, float *y, int64_t nb)
{
	for (int64_t b = 0; b < nb; b++, x++, y += LLM_QK_K)
	{
		float		d = llm_fp16_to_fp32(x->d);
		int8_t		sc[16];

		llm_q3_K_scales(x->scales, sc);
		for (int g = 0; g < 16; g++)
		{
			int			n = g / 8,
						j = (g % 8) / 2,
						half = g % 2;
			const uint8_t *q = x->qs + 32 * n + 16 * half;
			const uint8_t *hm = x->hmask + 16 * half;
			float		dl = d * (float) sc[g];

			for (int l = 0; l < 16; l++)
			{
				int			v = ((q[l] >> (2 * j)) & 3) - (((hm[l] >> (4 * n + j)) & 1) ? 0 : 4);

				y[16 * g + l] = dl * (float) v;
			}
		}
	}
}

static void
dequant_q5_K(const llm_block_q5_K *x, float *y, int64_t nb)
{
	for (int64_t b = 0; b < nb; b++, x++, y += LLM_QK_K)
	{
		float		d = llm_fp16_to_fp32(x->d);
		float		dmin = llm_fp16_to_fp32(x->dmin);
		uint8_t		sc[8],
					mn[8];

		llm_q4_K_scales_mins(x->scales, sc, mn);
		for (int j = 0; j < 8; j++)
		{
			const uint8_t *ql = x->qs + 32 * (j / 2);
			int			shift = 4 * (j % 2);
			float		dl = d * (float) sc[j];
			float		ml = dmin * (float) mn[j];

			for (int l = 0; l < 32; l++)
			{
				int			q = ((ql[l] >> shift) & 0xF) | ((x->qh[l] >> j) & 1) << 4;

				y[32 * j + l] = dl * (float) q - ml;
			}
		}
	}
}

static void
dequant_iq4_nl(const llm_block_iq4_nl *x, float *y, int64_t nb)
{
	for (int64_t b = 0; b < nb; b++, x++, y += LLM_QK)
	{
		float		d = llm_fp16_to_fp32(x->d);

		for (int j = 0; j < 16; j++)
		{
			y[j] = d * (float) llm_kvalues_iq4nl[x->qs[j] & 0xF];
			y[j + 16] = d * (float) llm_kvalues_iq4nl[x->qs[j] >> 4];
		}
	}
}

static void
dequant_iq4_xs(const llm_block_iq4_xs *x, float *y, int64_t nb)
{
	for (int64_t b = 0; b < nb; b++, x++, y += LLM_QK_K)
	{
		float		d = llm_fp16_to_fp32(x->d);

		for (int ib = 0; ib < 8; ib++)
		{
			const uint8_t *qs = x->qs + 16 * ib;
			float		dl = d * (float) llm_iq4_xs_scale(x, ib);

			for (int j = 0; j < 16; j++)
			{
				y[32 * ib + j] = dl * (float) llm_kvalues_iq4nl[qs[j] & 0xF];
				y[32 * ib + j + 16] = dl * (float) llm_kvalues_iq4nl[qs[j] >> 4];
			}
		}
	}
}

bool
llm_dequantize_row_more(uint32_t t, const void *src, float *dst, int64_t n)
{
	switch (t)
	{
		case LLM_TYPE_Q5_1:
			dequant_q5_1(src, dst, n / LLM_QK);
			return true;
		case LLM_TYPE_Q2_K:
			dequant_q2_K(src, dst, n / LLM_QK_K);
			return true;
		case LLM_TYPE_Q3_K:
			dequant_q3_K(src, dst, n / LLM_QK_K);
			return true;
		case LLM_TYPE_Q5_K:
			dequant_q5_K(src, dst, n / LLM_QK_K);
			return true;
		case LLM_TYPE_IQ4_NL:
			dequant_iq4_nl(src, dst, n / LLM_QK);
			return true;
		case LLM_TYPE_IQ4_XS:
			dequant_iq4_xs(src, dst, n / LLM_QK_K);
			return true;
		default:
			return false;
	}
}
