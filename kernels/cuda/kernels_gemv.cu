/*
 * kernels_gemv.cu — batch-invariant matrix-vector kernels of the CUDA backend.
 *
 * y[t][r] = sum_k W[r][k] * x[t][k] with fp32 activations (not quantized, so
 * more accurate than the CPU backend's Q8 activations) and fp32 accumulation.
 * One warp owns one weight row; lane l walks the 32-element blocks
 * l, l+32, l+64, ... in order, keeping one accumulator per token, and the 32
 * lane sums are combined by a fixed xor-shuffle tree.  A CTA handles
 * GEMV_NT tokens; the arithmetic of a (row, token) pair is the same whatever
 * the number of tokens or the token's place in the batch, which makes this
 * the matmul of the deterministic mode (backend.h batch-invariance contract)
 * and the fast path for decode steps with few tokens (weights read in their
 * quantized form: 0.56-1.06 bytes per weight instead of 2).
 *
 * Weight forms: repacked Q4_0 / Q4_1 / Q8_0 (cuda_internal.h) with the block
 * formula applied as d * sum(q x) [+ m * sum(x)], or the fp16 copy for every
 * other type.
 *
 * Compile-verified only (no GPU on the development machine); see docs/GPU.md.
 */
#include "cuda_internal.h"

#define GEMV_NT 4				/* tokens per CTA */
#define GEMV_WARPS 4			/* rows per CTA (one per warp) */

enum
{
	GF_F16 = 0,
	GF_Q4_0 = CU_QFORM_Q4_0,
	GF_Q4_1 = CU_QFORM_Q4_1,
	GF_Q8_0 = CU_QFORM_Q8_0
};

template <int FORM>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_kernel(const uint8_t *__restrict__ qs, const __half2 *__restrict__ dm, const __half *__restrict__ f16,
			int64_t n_rows, int64_t n_cols, const float *__restrict__ x, float *__restrict__ y, int n)
{
	const int	lane = threadIdx.x & 31;
	const int64_t r = (int64_t) blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
	const int	t0 = blockIdx.y * GEMV_NT;
	const int	nt = min(GEMV_NT, n - t0);
	const int64_t nb = n_cols / 32;
	float		acc[GEMV_NT];

	if (r >= n_rows)
		return;
#pragma unroll
	for (int tt = 0; tt < GEMV_NT; tt++)
		acc[tt] = 0.0f;

	for (int64_t b = lane; b < nb; b += 32)
	{
		float		wv[32];
		float		d = 0.0f,
					m = 0.0f;

		if (FORM == GF_Q4_0 || FORM == GF_Q4_1)
		{
			uint4		raw = *(const uint4 *) (qs + r * (n_cols / 2) + b * 16);
			unsigned	words[4] = {raw.x, raw.y, raw.z, raw.w};
			float2		s = __half22float2(dm[r * nb + b]);

			d = s.x;
			m = s.y;
#pragma unroll
			for (int j = 0; j < 16; j++)
			{
				unsigned	byte = (words[j / 4] >> (8 * (j % 4))) & 0xFF;

				wv[j] = (float) ((int) (byte & 0xF) - (FORM == GF_Q4_0 ? 8 : 0));
				wv[j + 16] = (float) ((int) (byte >> 4) - (FORM == GF_Q4_0 ? 8 : 0));
			}
		}
		else if (FORM == GF_Q8_0)
		{
			const uint4 *p = (const uint4 *) (qs + r * n_cols + b * 32);
			uint4		r0 = p[0],
						r1 = p[1];
			unsigned	words[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};

			d = __low2float(dm[r * nb + b]);
#pragma unroll
			for (int j = 0; j < 32; j++)
				wv[j] = (float) (int8_t) ((words[j / 4] >> (8 * (j % 4))) & 0xFF);
		}
		else
		{
			const uint4 *p = (const uint4 *) (f16 + r * n_cols + b * 32);

#pragma unroll
			for (int c = 0; c < 4; c++)
			{
				uint4		raw = p[c];
				const __half2 *h2 = (const __half2 *) &raw;

#pragma unroll
				for (int j = 0; j < 4; j++)
				{
					float2		f = __half22float2(h2[j]);

					wv[8 * c + 2 * j] = f.x;
					wv[8 * c + 2 * j + 1] = f.y;
				}
			}
		}

#pragma unroll
		for (int tt = 0; tt < GEMV_NT; tt++)
		{
			if (tt < nt)
			{
				const float4 *xp = (const float4 *) (x + (size_t) (t0 + tt) * n_cols + b * 32);
				float		s1 = 0.0f,
							s2 = 0.0f;

#pragma unroll
				for (int j4 = 0; j4 < 8; j4++)
				{
					float4		xv = xp[j4];

					s1 = fmaf(wv[4 * j4 + 0], xv.x, s1);
					s1 = fmaf(wv[4 * j4 + 1], xv.y, s1);
					s1 = fmaf(wv[4 * j4 + 2], xv.z, s1);
					s1 = fmaf(wv[4 * j4 + 3], xv.w, s1);
					if (FORM == GF_Q4_1)
						s2 = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(s2, xv.x), xv.y), xv.z), xv.w);
				}
				if (FORM == GF_Q4_1)
					acc[tt] = fmaf(d, s1, fmaf(m, s2, acc[tt]));
				else if (FORM == GF_F16)
					acc[tt] = __fadd_rn(acc[tt], s1);
				else
					acc[tt] = fmaf(d, s1, acc[tt]);
			}
		}
	}

#pragma unroll
	for (int tt = 0; tt < GEMV_NT; tt++)
	{
#pragma unroll
		for (int off = 16; off > 0; off >>= 1)
			acc[tt] = __fadd_rn(acc[tt], __shfl_xor_sync(0xffffffffu, acc[tt], off));
	}
	if (lane == 0)
	{
#pragma unroll
		for (int tt = 0; tt < GEMV_NT; tt++)
			if (tt < nt)
				y[(size_t) (t0 + tt) * n_rows + r] = acc[tt];
	}
}

/*
 * Launch: rows in CTAs of GEMV_WARPS, tokens in CTAs of GEMV_NT.  x must be
 * 16-byte aligned with n_cols a multiple of 32 (checked by the host side), and
 * must not overlap y.
 */
extern "C" cudaError_t
cu_gemv(cudaStream_t st, const cuda_weight *w, const float *x, float *y, int n)
{
	dim3		grid((unsigned) ((w->n_rows + GEMV_WARPS - 1) / GEMV_WARPS),
					 (unsigned) ((n + GEMV_NT - 1) / GEMV_NT));
	dim3		block(GEMV_WARPS * 32);

	if (n <= 0)
		return cudaSuccess;
	switch (w->qform)
	{
		case CU_QFORM_Q4_0:
			gemv_kernel<GF_Q4_0><<<grid, block, 0, st>>>(w->qs, w->dm, NULL, w->n_rows, w->n_cols, x, y, n);
			break;
		case CU_QFORM_Q4_1:
			gemv_kernel<GF_Q4_1><<<grid, block, 0, st>>>(w->qs, w->dm, NULL, w->n_rows, w->n_cols, x, y, n);
			break;
		case CU_QFORM_Q8_0:
			gemv_kernel<GF_Q8_0><<<grid, block, 0, st>>>(w->qs, w->dm, NULL, w->n_rows, w->n_cols, x, y, n);
			break;
		default:
			gemv_kernel<GF_F16><<<grid, block, 0, st>>>(NULL, NULL, w->f16, w->n_rows, w->n_cols, x, y, n);
			break;
	}
	return cudaGetLastError();
}
