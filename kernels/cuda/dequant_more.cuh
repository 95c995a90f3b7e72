/*
 * dequant_more.cuh — element e of a GGUF row of the types of
 * kernels/cpu/quant_more.h (Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS) on the
 * device: ggml's dequantize_row_* formulas with the operation order of
 * kernels/cpu/dequant_more.c (explicitly rounded operations, no
 * contraction), so the fp16 weight copies and the embedding rows hold the
 * CPU's values.  Included by kernels_basic.cu after its h2f_bits / rd_u16
 * helpers; dequant_more_elem returns false for any other type.
 */
#ifndef LLM_CUDA_DEQUANT_MORE_CUH
#define LLM_CUDA_DEQUANT_MORE_CUH

__device__ __constant__ static const int8_t cu_kvalues_iq4nl[16] = {
	-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113
};

/* 6-bit scale j (0..7) and min of a Q4_K/Q5_K scales[12] (ggml's get_scale_min_k4) */
__device__ __forceinline__ void
cu_scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
	if (j < 4)
	{
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	}
	else
	{
		*d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

__device__ __forceinline__ bool
dequant_more_elem(uint32_t type, const uint8_t *row, int64_t e, float *out)
{
	switch (type)
	{
		case LLM_TYPE_Q5_1:
			{
				/* d, m, qh[4], qs[16] */
				const uint8_t *blk = row + (e / 32) * 24;
				int			j = (int) (e % 32);
				unsigned	qh = (unsigned) blk[4] | ((unsigned) blk[5] << 8) | ((unsigned) blk[6] << 16) |
					((unsigned) blk[7] << 24);
				int			lo = j < 16 ? (blk[8 + j] & 0xF) : (blk[8 + j - 16] >> 4);
				int			q = lo | (int) (((qh >> j) & 1u) << 4);

				*out = __fadd_rn(__fmul_rn((float) q, h2f_bits(rd_u16(blk))), h2f_bits(rd_u16(blk + 2)));
				return true;
			}
		case LLM_TYPE_Q2_K:
			{
				/* scales[16], qs[64], d, dmin */
				const uint8_t *blk = row + (e / 256) * 84;
				int			i = (int) (e % 256),
							g = i / 16,
							l = i % 16;
				int			q = (blk[16 + 32 * (g / 8) + 16 * (g % 2) + l] >> (2 * ((g % 8) / 2))) & 3;
				float		dl = __fmul_rn(h2f_bits(rd_u16(blk + 80)), (float) (blk[g] & 0xF));
				float		ml = __fmul_rn(h2f_bits(rd_u16(blk + 82)), (float) (blk[g] >> 4));

				*out = __fsub_rn(__fmul_rn(dl, (float) q), ml);
				return true;
			}
		case LLM_TYPE_Q3_K:
			{
				/* hmask[32], qs[64], scales[12], d */
				const uint8_t *blk = row + (e / 256) * 110;
				const uint8_t *sc = blk + 96;
				int			i = (int) (e % 256),
							g = i / 16,
							l = i % 16;
				int			n = g / 8,
							j = (g % 8) / 2,
							half = g % 2;
				int			slo = g < 8 ? (sc[g] & 0xF) : (sc[g - 8] >> 4);
				int			shi = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
				int			lo = (blk[32 + 32 * n + 16 * half + l] >> (2 * j)) & 3;
				int			v = lo - (((blk[16 * half + l] >> (4 * n + j)) & 1) ? 0 : 4);
				float		dl = __fmul_rn(h2f_bits(rd_u16(blk + 108)), (float) ((slo | (shi << 4)) - 32));

				*out = __fmul_rn(dl, (float) v);
				return true;
			}
		case LLM_TYPE_Q5_K:
			{
				/* d, dmin, scales[12], qh[32], qs[128] */
				const uint8_t *blk = row + (e / 256) * 176;
				int			i = (int) (e % 256),
							j = i / 32,
							l = i % 32;
				int			s,
							m;
				int			q = ((blk[48 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) |
					(((blk[16 + l] >> j) & 1) << 4);

				cu_scale_min_k4(j, blk + 4, &s, &m);
				*out = __fsub_rn(__fmul_rn(__fmul_rn(h2f_bits(rd_u16(blk)), (float) s), (float) q),
								 __fmul_rn(h2f_bits(rd_u16(blk + 2)), (float) m));
				return true;
			}
		case LLM_TYPE_IQ4_NL:
			{
				/* d, qs[16] */
				const uint8_t *blk = row + (e / 32) * 18;
				int			j = (int) (e % 32);
				int			q = j < 16 ? (blk[2 + j] & 0xF) : (blk[2 + j - 16] >> 4);

				*out = __fmul_rn(h2f_bits(rd_u16(blk)), (float) cu_kvalues_iq4nl[q]);
				return true;
			}
		case LLM_TYPE_IQ4_XS:
			{
				/* d, scales_h, scales_l[4], qs[128] */
				const uint8_t *blk = row + (e / 256) * 136;
				int			i = (int) (e % 256),
							ib = i / 32,
							j = i % 32;
				unsigned	sh = rd_u16(blk + 2);
				int			ls = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (int) (((sh >> (2 * ib)) & 3u) << 4);
				int			byte = blk[8 + 16 * ib + (j % 16)];
				int			q = j < 16 ? (byte & 0xF) : (byte >> 4);

				*out = __fmul_rn(__fmul_rn(h2f_bits(rd_u16(blk)), (float) (ls - 32)), (float) cu_kvalues_iq4nl[q]);
				return true;
			}
		default:
			return false;
	}
}

#endif
