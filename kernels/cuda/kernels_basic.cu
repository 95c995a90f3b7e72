/*
 * kernels_basic.cu — element-wise and row-wise kernels of the CUDA backend:
 * weight dequantization/repacking at load time, embedding gather, RMSNorm
 * (with the fused residual add), the broadcast add of a bias row, SiLU*up,
 * GELU*up, scale, tanh soft-capping, row gather, fp32->fp16, and RoPE
 * (normal and NEOX modes) fused with the paged KV-cache write.
 *
 * Numerics mirror the CPU backend (kernels/cpu: the op files cpu_*.c over
 * quant.c and elementwise.c), which follows llama.cpp's CPU backend: ggml's dequantize_row_* formulas
 * (written with __fmul_rn/__fadd_rn so that nvcc does not contract them into
 * FMAs the x86-64 baseline CPU build does not use), RMSNorm with a double sum
 * of float squares, RoPE angles built by repeated multiplication by
 * theta_scale as ggml_rope_cache_init does.
 *
 * Compile-verified only (no GPU on the development machine); see docs/GPU.md.
 */
#include "kernels/backend.h"
#include "cuda_internal.h"
#include "kernels/quant_types.h"

#include <math.h>

#define BASIC_THREADS 256

static inline unsigned
grid_for(size_t n, unsigned threads)
{
	size_t		g = (n + threads - 1) / threads;

	if (g > 65535u * 16u)
		g = 65535u * 16u;		/* grid-stride loops cover the rest */
	return g ? (unsigned) g : 1u;
}

/* ------------------------------------------------------------------------
 * GGUF block decoding (ggml's block layouts; little-endian bytes)
 * ------------------------------------------------------------------------ */

__device__ __forceinline__ float
h2f_bits(unsigned bits)
{
	return __half2float(__ushort_as_half((unsigned short) bits));
}

__device__ __forceinline__ unsigned
rd_u16(const uint8_t *p)
{
	return (unsigned) p[0] | ((unsigned) p[1] << 8);
}

#include "dequant_more.cuh"

/*
 * Element e of a GGUF row of the given type (ggml's dequantize_row_*
 * formulas, same operation order as kernels/cpu/quant.c llm_dequantize_row).
 */
__device__ float
dequant_raw_elem(uint32_t type, const uint8_t *row, int64_t e)
{
	switch (type)
	{
		case LLM_TYPE_F32:
			return ((const float *) row)[e];
		case LLM_TYPE_F16:
			return __half2float(((const __half *) row)[e]);
		case LLM_TYPE_BF16:
			return __uint_as_float((unsigned) ((const uint16_t *) row)[e] << 16);
		case LLM_TYPE_Q4_0:
			{
				const uint8_t *blk = row + (e / 32) * 18;
				int			j = (int) (e % 32);
				int			q = j < 16 ? (blk[2 + j] & 0xF) : (blk[2 + j - 16] >> 4);

				return __fmul_rn((float) (q - 8), h2f_bits(rd_u16(blk)));
			}
		case LLM_TYPE_Q4_1:
			{
				const uint8_t *blk = row + (e / 32) * 20;
				int			j = (int) (e % 32);
				int			q = j < 16 ? (blk[4 + j] & 0xF) : (blk[4 + j - 16] >> 4);

				return __fadd_rn(__fmul_rn((float) q, h2f_bits(rd_u16(blk))), h2f_bits(rd_u16(blk + 2)));
			}
		case LLM_TYPE_Q8_0:
			{
				const uint8_t *blk = row + (e / 32) * 34;

				return __fmul_rn((float) (int8_t) blk[2 + e % 32], h2f_bits(rd_u16(blk)));
			}
		case LLM_TYPE_Q5_0:
			{
				/* d, qh (4 bytes, bit j = fifth bit of element j), 16 bytes of nibbles */
				const uint8_t *blk = row + (e / 32) * 22;
				int			j = (int) (e % 32);
				unsigned	qh = (unsigned) blk[2] | ((unsigned) blk[3] << 8) | ((unsigned) blk[4] << 16) |
					((unsigned) blk[5] << 24);
				int			lo = j < 16 ? (blk[6 + j] & 0xF) : (blk[6 + j - 16] >> 4);
				int			q = (lo | (int) (((qh >> j) & 1u) << 4)) - 16;

				return __fmul_rn((float) q, h2f_bits(rd_u16(blk)));
			}
		case LLM_TYPE_Q4_K:
			{
				const uint8_t *blk = row + (e / 256) * 144;
				const uint8_t *sc = blk + 4;
				int			i = (int) (e % 256);
				int			c = i / 64,
							hi = (i % 64) / 32,
							l = i % 32,
							j = 2 * c + hi;
				int			s,
							m,
							q;
				float		d = h2f_bits(rd_u16(blk)),
							dmin = h2f_bits(rd_u16(blk + 2));

				if (j < 4)
				{
					s = sc[j] & 63;
					m = sc[j + 4] & 63;
				}
				else
				{
					s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
					m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
				}
				q = hi ? (blk[16 + 32 * c + l] >> 4) : (blk[16 + 32 * c + l] & 0xF);
				return __fsub_rn(__fmul_rn(__fmul_rn(d, (float) s), (float) q), __fmul_rn(dmin, (float) m));
			}
		case LLM_TYPE_Q6_K:
			{
				const uint8_t *blk = row + (e / 256) * 210;
				int			i = (int) (e % 256);
				int			h = i / 128,
							r = i % 128,
							quarter = r / 32,
							l = r % 32,
							is = l / 16;
				const uint8_t *ql = blk + 64 * h;
				const uint8_t *qh = blk + 128 + 32 * h;
				const int8_t *sc = (const int8_t *) (blk + 192 + 8 * h);
				int			lo = (quarter & 1) ? ql[l + 32] : ql[l];
				int			q = ((quarter & 2) ? (lo >> 4) : (lo & 0xF)) | (((qh[l] >> (2 * quarter)) & 3) << 4);

				return __fmul_rn(__fmul_rn(h2f_bits(rd_u16(blk + 208)), (float) sc[is + 2 * quarter]),
								 (float) (q - 32));
			}
		default:
			{
				float		v;

				if (dequant_more_elem(type, row, e, &v))
					return v;
				return __int_as_float(0x7fc00000);	/* unreachable: host rejects the type */
			}
	}
}

/* Element e of a row of a repacked Q4_0/Q4_1/Q8_0 weight (same numbers, same formulas). */
__device__ __forceinline__ float
dequant_repacked_elem(int qform, const uint8_t *qs, const __half2 *dm, int64_t row, int64_t n_cols, int64_t e)
{
	__half2		s = dm[row * (n_cols / 32) + e / 32];
	int			j = (int) (e % 32);

	if (qform == CU_QFORM_Q8_0)
		return __fmul_rn((float) (int8_t) qs[row * n_cols + e], __low2float(s));
	else
	{
		uint8_t		byte = qs[row * (n_cols / 2) + (e / 32) * 16 + (j % 16)];
		int			q = j < 16 ? (byte & 0xF) : (byte >> 4);

		if (qform == CU_QFORM_Q4_0)
			return __fmul_rn((float) (q - 8), __low2float(s));
		return __fadd_rn(__fmul_rn((float) q, __low2float(s)), __high2float(s));
	}
}

/* ------------------------------------------------------------------------
 * load time: dequantize to fp16, repack
 * ------------------------------------------------------------------------ */

__global__ void
dequant_f16_kernel(uint32_t type, const uint8_t *raw, size_t row_bytes, int64_t n_rows, int64_t n_cols,
				   __half *f16)
{
	int64_t		total = n_rows * n_cols;

	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < total;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		r = i / n_cols,
					e = i % n_cols;

		f16[i] = __float2half_rn(dequant_raw_elem(type, raw + r * row_bytes, e));
	}
}

/* One thread per 32-element block. */
__global__ void
repack_kernel(uint32_t type, const uint8_t *raw, size_t row_bytes, int64_t n_rows, int64_t n_cols,
			  uint8_t *qs, __half2 *dm)
{
	int64_t		nb = n_cols / 32;
	int64_t		total = n_rows * nb;

	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < total;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		r = i / nb,
					b = i % nb;
		const uint8_t *row = raw + r * row_bytes;

		if (type == LLM_TYPE_Q8_0)
		{
			const uint8_t *blk = row + b * 34;

			for (int j = 0; j < 32; j++)
				qs[r * n_cols + b * 32 + j] = blk[2 + j];
			dm[i] = __halves2half2(__ushort_as_half((unsigned short) rd_u16(blk)), __float2half(0.0f));
		}
		else if (type == LLM_TYPE_Q4_1)
		{
			const uint8_t *blk = row + b * 20;

			for (int j = 0; j < 16; j++)
				qs[r * (n_cols / 2) + b * 16 + j] = blk[4 + j];
			dm[i] = __halves2half2(__ushort_as_half((unsigned short) rd_u16(blk)),
								   __ushort_as_half((unsigned short) rd_u16(blk + 2)));
		}
		else
		{
			const uint8_t *blk = row + b * 18;

			for (int j = 0; j < 16; j++)
				qs[r * (n_cols / 2) + b * 16 + j] = blk[2 + j];
			dm[i] = __halves2half2(__ushort_as_half((unsigned short) rd_u16(blk)), __float2half(0.0f));
		}
	}
}

extern "C" cudaError_t
cu_dequant_to_f16(cudaStream_t st, uint32_t type, const uint8_t *raw, size_t row_bytes,
				  int64_t n_rows, int64_t n_cols, __half *f16)
{
	dequant_f16_kernel<<<grid_for((size_t) (n_rows * n_cols), BASIC_THREADS), BASIC_THREADS, 0, st>>>(
		type, raw, row_bytes, n_rows, n_cols, f16);
	return cudaGetLastError();
}

extern "C" cudaError_t
cu_repack(cudaStream_t st, uint32_t type, const uint8_t *raw, size_t row_bytes,
		  int64_t n_rows, int64_t n_cols, uint8_t *qs, __half2 *dm)
{
	repack_kernel<<<grid_for((size_t) (n_rows * (n_cols / 32)), BASIC_THREADS), BASIC_THREADS, 0, st>>>(
		type, raw, row_bytes, n_rows, n_cols, qs, dm);
	return cudaGetLastError();
}

/* ------------------------------------------------------------------------
 * embedding gather
 * ------------------------------------------------------------------------ */

__global__ void
embed_kernel(cuda_weight w, const int32_t *token_ids, float *out)
{
	int			t = blockIdx.x;
	int64_t		id = token_ids[t];
	float	   *o = out + (size_t) t * w.n_cols;

	for (int64_t e = threadIdx.x; e < w.n_cols; e += blockDim.x)
	{
		float		v;

		if (w.qform != CU_QFORM_NONE)
			v = dequant_repacked_elem(w.qform, w.qs, w.dm, id, w.n_cols, e);
		else if (w.type == LLM_TYPE_F16)
			v = __half2float(w.f16[id * w.n_cols + e]);
		else
			v = dequant_raw_elem(w.type, w.raw + id * w.row_bytes, e);
		o[e] = v;
	}
}

extern "C" cudaError_t
cu_embed(cudaStream_t st, const cuda_weight *w, const int32_t *token_ids, int n_tokens, float *out)
{
	if (n_tokens <= 0)
		return cudaSuccess;
	embed_kernel<<<n_tokens, BASIC_THREADS, 0, st>>>(*w, token_ids, out);
	return cudaGetLastError();
}

/* ------------------------------------------------------------------------
 * RMSNorm, fused residual add (one CTA per row)
 * ------------------------------------------------------------------------ */

/*
 * residual != NULL: residual += delta, then normalise residual; else
 * normalise x.  out == NULL: only the add.  Sum of squares in double as the
 * CPU backend (ggml rms_norm) does; the tree order is fixed, so a row's
 * result never depends on other rows.
 */
__global__ void
rmsnorm_kernel(float *residual, const float *delta, const float *x, const float *w, float *out,
			   int dim, float eps)
{
	__shared__ double red[BASIC_THREADS];
	__shared__ float s_scale;
	size_t		row = blockIdx.x;
	const float *src;
	double		acc = 0.0;

	if (residual)
	{
		float	   *res = residual + row * dim;
		const float *del = delta + row * dim;

		for (int i = threadIdx.x; i < dim; i += blockDim.x)
		{
			float		r = __fadd_rn(res[i], del[i]);

			res[i] = r;
			acc += (double) __fmul_rn(r, r);
		}
		src = res;
	}
	else
	{
		src = x + row * dim;
		for (int i = threadIdx.x; i < dim; i += blockDim.x)
		{
			float		v = src[i];

			acc += (double) __fmul_rn(v, v);
		}
	}
	if (out == NULL)
		return;
	red[threadIdx.x] = acc;
	__syncthreads();
	for (int s = BASIC_THREADS / 2; s > 0; s >>= 1)
	{
		if ((int) threadIdx.x < s)
			red[threadIdx.x] += red[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
	{
		float		mean = (float) (red[0] / dim);

		s_scale = 1.0f / sqrtf(mean + eps);
	}
	__syncthreads();
	{
		float		scale = s_scale;
		float	   *o = out + row * dim;

		/* each thread rereads only elements it wrote itself: out may alias x or delta */
		for (int i = threadIdx.x; i < dim; i += blockDim.x)
			o[i] = __fmul_rn(__fmul_rn(src[i], scale), w[i]);
	}
}

extern "C" cudaError_t
cu_rmsnorm(cudaStream_t st, float *residual, const float *delta, const float *x, const float *w,
		   float *out, int n, int dim, float eps)
{
	if (n <= 0)
		return cudaSuccess;
	rmsnorm_kernel<<<n, BASIC_THREADS, 0, st>>>(residual, delta, x, w, out, dim, eps);
	return cudaGetLastError();
}

__global__ void
add_kernel(float *residual, const float *delta, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
		residual[i] = __fadd_rn(residual[i], delta[i]);
}

extern "C" cudaError_t
cu_add(cudaStream_t st, float *residual, const float *delta, size_t n)
{
	if (n == 0)
		return cudaSuccess;
	add_kernel<<<grid_for(n, BASIC_THREADS), BASIC_THREADS, 0, st>>>(residual, delta, n);
	return cudaGetLastError();
}

/* out[r][i] = x[r][i] + bias[i]: one rounded addition, as the CPU's (backend.h add_broadcast). */
__global__ void
add_broadcast_kernel(const float *x, const float *bias, float *out, size_t total, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < total; i += (size_t) gridDim.x * blockDim.x)
		out[i] = __fadd_rn(x[i], bias[i % n]);
}

extern "C" cudaError_t
cu_add_broadcast(cudaStream_t st, const float *x, const float *bias, float *out, size_t n_rows, size_t n)
{
	size_t		total = n_rows * n;

	if (total == 0)
		return cudaSuccess;
	add_broadcast_kernel<<<grid_for(total, BASIC_THREADS), BASIC_THREADS, 0, st>>>(x, bias, out, total, n);
	return cudaGetLastError();
}

/* out = silu(gate) * up = gate / (1 + exp(-gate)) * up (ggml_vec_swiglu_f32 scalar form). */
__global__ void
silu_mul_kernel(const float *gate, const float *up, float *out, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
	{
		float		g = gate[i];

		out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]);
	}
}

extern "C" cudaError_t
cu_silu_mul(cudaStream_t st, const float *gate, const float *up, float *out, size_t n)
{
	if (n == 0)
		return cudaSuccess;
	silu_mul_kernel<<<grid_for(n, BASIC_THREADS), BASIC_THREADS, 0, st>>>(gate, up, out, n);
	return cudaGetLastError();
}

/*
 * ggml_vec_geglu_f32 with GGML_GELU_FP16: 0 for gate <= -10, gate * up for
 * gate >= 10, else the table's gelu of fp16(gate) times up.  The table is
 * the CPU backend's (host libm tanhf), so the results equal the CPU's.
 */
__global__ void
gelu_mul_kernel(const __half *gelu16, const float *gate, const float *up, float *out, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
	{
		float		x = gate[i];
		float		u = up[i];

		if (x <= -10.0f)
			out[i] = 0.0f;
		else if (x >= 10.0f)
			out[i] = __fmul_rn(x, u);
		else
			out[i] = __fmul_rn(__half2float(gelu16[__half_as_ushort(__float2half_rn(x))]), u);
	}
}

extern "C" cudaError_t
cu_gelu_mul(cudaStream_t st, const __half *gelu16, const float *gate, const float *up, float *out, size_t n)
{
	if (n == 0)
		return cudaSuccess;
	gelu_mul_kernel<<<grid_for(n, BASIC_THREADS), BASIC_THREADS, 0, st>>>(gelu16, gate, up, out, n);
	return cudaGetLastError();
}

__global__ void
scale_kernel(float *x, float s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
		x[i] = __fmul_rn(x[i], s);
}

extern "C" cudaError_t
cu_scale(cudaStream_t st, float *x, float s, size_t n)
{
	if (n == 0)
		return cudaSuccess;
	scale_kernel<<<grid_for(n, BASIC_THREADS), BASIC_THREADS, 0, st>>>(x, s, n);
	return cudaGetLastError();
}

/* ggml's scale by 1/cap (a float quotient), tanh, scale by cap. */
__global__ void
softcap_kernel(float *x, float inv_cap, float cap, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
		x[i] = __fmul_rn(tanhf(__fmul_rn(x[i], inv_cap)), cap);
}

extern "C" cudaError_t
cu_softcap(cudaStream_t st, float *x, float cap, size_t n)
{
	if (n == 0)
		return cudaSuccess;
	softcap_kernel<<<grid_for(n, BASIC_THREADS), BASIC_THREADS, 0, st>>>(x, 1.0f / cap, cap, n);
	return cudaGetLastError();
}

__global__ void
gather_rows_kernel(const float *x, float *out, const int32_t *rows, int dim)
{
	const float *src = x + (size_t) rows[blockIdx.x] * dim;
	float	   *dst = out + (size_t) blockIdx.x * dim;

	for (int i = threadIdx.x; i < dim; i += blockDim.x)
		dst[i] = src[i];
}

/* out[j] = x[rows[j]]; x and out must not overlap (the host op copies otherwise). */
extern "C" cudaError_t
cu_gather_rows(cudaStream_t st, const float *x, float *out, const int32_t *rows, int n_out, int dim)
{
	if (n_out <= 0)
		return cudaSuccess;
	gather_rows_kernel<<<n_out, BASIC_THREADS, 0, st>>>(x, out, rows, dim);
	return cudaGetLastError();
}

__global__ void
f32_to_f16_kernel(const float *x, __half *y, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
		y[i] = __float2half_rn(x[i]);
}

extern "C" cudaError_t
cu_f32_to_f16(cudaStream_t st, const float *x, __half *y, size_t n)
{
	if (n == 0)
		return cudaSuccess;
	f32_to_f16_kernel<<<grid_for(n, BASIC_THREADS), BASIC_THREADS, 0, st>>>(x, y, n);
	return cudaGetLastError();
}

/* ------------------------------------------------------------------------
 * RoPE + paged KV store (one CTA per token)
 * ------------------------------------------------------------------------ */

/*
 * ggml RoPE: pair i rotated by pos * theta_scale^i; the pair is (x[2i],
 * x[2i+1]) in normal mode, (x[i], x[i + hd/2]) in NEOX mode,
 * the angle built by i successive float multiplications (ggml_rope_cache_init
 * order), the rotation x0*c - x1*s, x0*s + x1*c written with the same fused
 * multiply-adds as the CPU backend's rope_heads.  q and k are rotated in
 * place; k (rotated) and v are stored as fp16 at the token's slot.
 */
__global__ void
rope_store_kernel(cuda_kv_layer kv, const int32_t *positions, const int32_t *slots,
				  float *q, float *k, const float *v, int n_heads, float theta_scale, int neox)
{
	const int	t = blockIdx.x;
	const int	hd = kv.head_dim,
				nkv = kv.n_kv_heads,
				half_hd = hd / 2;
	const int	pos = positions[t];
	const size_t slot = (size_t) slots[t];
	const int	n_items = (n_heads + nkv) * half_hd;

	for (int it = threadIdx.x; it < n_items; it += blockDim.x)
	{
		int			h = it / half_hd,
					i = it % half_hd;
		float		theta = (float) pos;
		float		c,
					s,
					x0,
					x1,
					r0,
					r1;
		float	   *vec;
		const int	i0 = neox ? i : 2 * i,
					i1 = neox ? i + half_hd : 2 * i + 1;

		for (int j = 0; j < i; j++)
			theta = __fmul_rn(theta, theta_scale);
		c = cosf(theta);
		s = sinf(theta);
		vec = h < n_heads ? q + ((size_t) t * n_heads + h) * hd
			: k + ((size_t) t * nkv + (h - n_heads)) * hd;
		x0 = vec[i0];
		x1 = vec[i1];
		r0 = fmaf(x0, c, -__fmul_rn(x1, s));
		r1 = fmaf(x0, s, __fmul_rn(x1, c));
		vec[i0] = r0;
		vec[i1] = r1;
		if (h >= n_heads)
		{
			__half	   *dst = kv.k + (slot * nkv + (h - n_heads)) * hd;

			dst[i0] = __float2half_rn(r0);
			dst[i1] = __float2half_rn(r1);
		}
	}
	for (int e = threadIdx.x; e < nkv * hd; e += blockDim.x)
		kv.v[slot * nkv * hd + e] = __float2half_rn(v[(size_t) t * nkv * hd + e]);
}

/*
 * rope_store_kernel with the options of rope_store_kv_opts: n_rot of the
 * head's values rotate (the rest kept), each pair's angle divided by its
 * frequency factor and times freq_scale, cos and sin times mscale
 * (ggml's rope_yarn without ext_factor); mode -1 rotates nothing.  The
 * rotation first (every q and k value of the token), then k and v stored.
 */
__global__ void
rope_store_opts_kernel(cuda_kv_layer kv, const int32_t *positions, const int32_t *slots,
					   float *q, float *k, const float *v, int n_heads, float theta_scale, int mode,
					   int n_rot, const float *ff, float freq_scale, float mscale)
{
	const int	t = blockIdx.x;
	const int	hd = kv.head_dim,
				nkv = kv.n_kv_heads,
				half_rot = n_rot / 2;
	const int	pos = positions[t];
	const size_t slot = (size_t) slots[t];
	const int	n_items = mode < 0 ? 0 : (n_heads + nkv) * half_rot;

	for (int it = threadIdx.x; it < n_items; it += blockDim.x)
	{
		int			h = it / half_rot,
					i = it % half_rot;
		float		theta = (float) pos,
					th,
					c,
					s,
					x0,
					x1;
		float	   *vec;
		const int	i0 = mode == LLM_ROPE_NEOX ? i : 2 * i,
					i1 = mode == LLM_ROPE_NEOX ? i + half_rot : 2 * i + 1;

		for (int j = 0; j < i; j++)
			theta = __fmul_rn(theta, theta_scale);
		th = __fmul_rn(freq_scale, ff != NULL ? __fdiv_rn(theta, ff[i]) : theta);
		c = __fmul_rn(cosf(th), mscale);
		s = __fmul_rn(sinf(th), mscale);
		vec = h < n_heads ? q + ((size_t) t * n_heads + h) * hd
			: k + ((size_t) t * nkv + (h - n_heads)) * hd;
		x0 = vec[i0];
		x1 = vec[i1];
		vec[i0] = fmaf(x0, c, -__fmul_rn(x1, s));
		vec[i1] = fmaf(x0, s, __fmul_rn(x1, c));
	}
	__syncthreads();
	for (int e = threadIdx.x; e < nkv * hd; e += blockDim.x)
	{
		kv.k[slot * nkv * hd + e] = __float2half_rn(k[(size_t) t * nkv * hd + e]);
		kv.v[slot * nkv * hd + e] = __float2half_rn(v[(size_t) t * nkv * hd + e]);
	}
}

extern "C" cudaError_t
cu_rope_store_kv_opts(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
					  float *q, float *k, const float *v, int n_heads, float theta_scale, int mode,
					  int n_rot, const float *freq_factors, float freq_scale, float mscale)
{
	if (sd->n_tokens <= 0)
		return cudaSuccess;
	rope_store_opts_kernel<<<sd->n_tokens, 128, 0, st>>>(*kv, sd->positions, sd->slots, q, k, v, n_heads,
														 theta_scale, mode, n_rot, freq_factors, freq_scale,
														 mscale);
	return cudaGetLastError();
}

extern "C" cudaError_t
cu_rope_store_kv(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
				 float *q, float *k, const float *v, int n_heads, float theta_scale, int mode)
{
	if (sd->n_tokens <= 0)
		return cudaSuccess;
	rope_store_kernel<<<sd->n_tokens, 128, 0, st>>>(*kv, sd->positions, sd->slots, q, k, v, n_heads, theta_scale,
													mode == LLM_ROPE_NEOX);
	return cudaGetLastError();
}
