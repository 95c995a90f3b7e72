/*
 * kernels_attention.cu — causal GQA attention over the paged fp16 KV cache
 * ([n_blocks][block_size][n_kv_heads][head_dim] per layer, backend.h).
 *
 * Two kernels:
 *
 *  - split-K "decode" kernel (attn_split_kernel + attn_combine_kernel): one
 *    CTA per (query token, split of ATTN_SPLIT keys, kv head); the CTA
 *    handles every query head of the GQA group, so each K/V row is loaded
 *    from memory once for the whole group (one pass over the sequence's
 *    blocks).  Keys are staged ATTN_TILE at a time in shared memory; an
 *    online softmax (Milakov & Gimelshein 2018) keeps (max, sum, acc) per
 *    head; the combine kernel merges the splits in split order.  The split
 *    size is a constant, so a query's reduction order depends only on its own
 *    position: results are independent of the batch (the deterministic mode
 *    sends every token, prefill ones too, through this kernel).  With a
 *    window, a split's keys start at max(split start, p - window + 1); a
 *    split wholly before the window leaves the empty partial (m = -inf,
 *    l = 0, acc = 0), which the combine kernel weighs by exactly 0.
 *
 *  - FlashAttention-style prefill kernel (Dao et al., "FlashAttention",
 *    NeurIPS 2022; "FlashAttention-2", 2023): one CTA per (64 query rows of a
 *    sequence, query head); Q.K^T and P.V on the tensor cores through WMMA
 *    (fp16 operands, fp32 accumulation), scores and the output accumulator in
 *    shared memory, online softmax per row; no score matrix in global memory.
 *    With a window, key tiles start at the tile (aligned to 64 keys) of the
 *    first row's window start and each row masks the keys outside its own
 *    window; a tile with no key for a row leaves that row's state unchanged.
 *
 * Numerics as the CPU backend: the query is rounded to fp16 (llama.cpp
 * converts Q to the K-cache type before K.Q), scores in fp32 times scale,
 * softmax with max subtraction and expf.  The prefill kernel also rounds the
 * softmax weights to fp16 for P.V (as FlashAttention does).
 *
 * Compile-verified only (no GPU on the development machine); see docs/GPU.md.
 */
#include "cuda_internal.h"

#include <mma.h>
#include <math.h>

using namespace nvcuda;

#define ATTN_THREADS 128

/* ------------------------------------------------------------------------
 * split-K decode kernel
 * ------------------------------------------------------------------------ */

template <int HD>
struct split_cfg
{
	static constexpr int TILE = HD <= 128 ? ATTN_TILE : ATTN_TILE / 2;	/* static smem < 48 KB */
	static constexpr int KPAD = HD + 8;	/* halves; 16-byte pad: conflict-free uint4 rows */
	static constexpr int NI = (ATTN_MAX_GROUP * HD / 2 + ATTN_THREADS - 1) / ATTN_THREADS;
	static constexpr int PSTRIDE = HD + 2;	/* floats per head in a partial: acc[HD], m, l */
};

__device__ __forceinline__ float
warp_max(float v)
{
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
	return v;
}

__device__ __forceinline__ float
warp_sum(float v)
{
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
	return v;
}

/* Address of key `key` of kv head kvh in a layer array, through the block table. */
__device__ __forceinline__ size_t
kv_offset(const int32_t *bt, int key, int block_size, int n_kv, int kvh, int hd)
{
	size_t		slot = (size_t) bt[key / block_size] * block_size + key % block_size;

	return (slot * n_kv + kvh) * hd;
}

/*
 * A key's score from its dot product a: a * scale, or with attention
 * logit soft-capping (softcap > 0, backend.h attention_softcap) tanhf(a *
 * (1 / softcap)) * softcap, then times scale (llama.cpp's order without
 * flash attention).  Device tanhf: not bit-identical to the CPU's libm.
 */
static __device__ __forceinline__ float
attn_score(float a, float scale, float softcap)
{
	if (softcap > 0.0f)
		a = __fmul_rn(tanhf(__fmul_rn(a, __frcp_rn(softcap))), softcap);
	return __fmul_rn(a, scale);
}

template <int HD>
__global__ void __launch_bounds__(ATTN_THREADS)
attn_split_kernel(const __half *__restrict__ K, const __half *__restrict__ V, const float *__restrict__ q,
				  const int32_t *__restrict__ items, const int32_t *__restrict__ positions,
				  const int32_t *__restrict__ tok_seq, const int32_t *__restrict__ block_tables,
				  int max_blocks, int block_size, int n_kv, int n_heads, float scale, int window, float softcap,
				  float *__restrict__ part)
{
	typedef split_cfg<HD> C;
	__shared__ __align__(16) __half Ks[C::TILE][C::KPAD];
	__shared__ __align__(16) __half Vs[C::TILE][C::KPAD];
	__shared__ __align__(16) float qs[ATTN_MAX_GROUP][HD];
	__shared__ float ps[ATTN_MAX_GROUP][C::TILE];
	__shared__ float m_run[ATTN_MAX_GROUP],
				l_run[ATTN_MAX_GROUP],
				alpha_s[ATTN_MAX_GROUP];

	const int	tid = threadIdx.x,
				warp = tid >> 5,
				lane = tid & 31;
	const int	item = blockIdx.x,
				kvh = blockIdx.y;
	const int	t = items[2 * item],
				split = items[2 * item + 1];
	const int	G = n_heads / n_kv;
	const int	pos = positions[t];
	const int	k_lo = window > 0 ? max(0, pos - window + 1) : 0;
	const int	k_begin = max(split * ATTN_SPLIT, k_lo);
	const int	k_end = min(split * ATTN_SPLIT + ATTN_SPLIT, pos + 1);
	const int32_t *bt = block_tables + (size_t) tok_seq[t] * max_blocks;
	float2		acc[C::NI];

	for (int i = tid; i < G * HD; i += ATTN_THREADS)
	{
		int			h = i / HD,
					d = i % HD;

		qs[h][d] = __half2float(__float2half_rn(q[((size_t) t * n_heads + kvh * G + h) * HD + d]));
	}
	if (tid < G)
	{
		m_run[tid] = -INFINITY;
		l_run[tid] = 0.0f;
	}
#pragma unroll
	for (int i = 0; i < C::NI; i++)
		acc[i] = make_float2(0.0f, 0.0f);

	for (int kt = k_begin; kt < k_end; kt += C::TILE)
	{
		const int	nk = min(C::TILE, k_end - kt);

		__syncthreads();		/* previous tile consumed; q and m/l visible */
		for (int idx = tid; idx < C::TILE * (HD / 8); idx += ATTN_THREADS)
		{
			int			row = idx / (HD / 8),
						c = idx % (HD / 8);
			uint4		kk = make_uint4(0, 0, 0, 0),
						vv = make_uint4(0, 0, 0, 0);

			if (row < nk)
			{
				size_t		off = kv_offset(bt, kt + row, block_size, n_kv, kvh, HD) + c * 8;

				kk = *(const uint4 *) (K + off);
				vv = *(const uint4 *) (V + off);
			}
			*(uint4 *) &Ks[row][c * 8] = kk;
			*(uint4 *) &Vs[row][c * 8] = vv;
		}
		__syncthreads();

		/* scores: (head, key) pairs, dot over HD in order */
		for (int p = tid; p < G * C::TILE; p += ATTN_THREADS)
		{
			int			h = p / C::TILE,
						key = p % C::TILE;
			float		s = -INFINITY;

			if (key < nk)
			{
				float		a = 0.0f;

#pragma unroll 4
				for (int c = 0; c < HD / 8; c++)
				{
					uint4		raw = *(const uint4 *) &Ks[key][c * 8];
					const __half2 *k2 = (const __half2 *) &raw;

#pragma unroll
					for (int j = 0; j < 4; j++)
					{
						float2		kf = __half22float2(k2[j]);

						a = fmaf(qs[h][c * 8 + 2 * j], kf.x, a);
						a = fmaf(qs[h][c * 8 + 2 * j + 1], kf.y, a);
					}
				}
				s = attn_score(a, scale, softcap);
			}
			ps[h][key] = s;
		}
		__syncthreads();

		/* online softmax update, one warp per head */
		for (int h = warp; h < G; h += ATTN_THREADS / 32)
		{
			float		sv[C::TILE / 32];
			float		mx = -INFINITY,
						sum = 0.0f,
						m_old,
						m_new;

#pragma unroll
			for (int j = 0; j < C::TILE / 32; j++)
			{
				sv[j] = ps[h][lane + 32 * j];
				mx = fmaxf(mx, sv[j]);
			}
			mx = warp_max(mx);
			m_old = m_run[h];
			m_new = fmaxf(m_old, mx);	/* finite: the tile has >= 1 key */
#pragma unroll
			for (int j = 0; j < C::TILE / 32; j++)
			{
				float		e = sv[j] == -INFINITY ? 0.0f : expf(sv[j] - m_new);

				ps[h][lane + 32 * j] = e;
				sum = __fadd_rn(sum, e);
			}
			sum = warp_sum(sum);
			if (lane == 0)
			{
				float		a = expf(m_old - m_new);	/* m_old = -inf: 0 */

				alpha_s[h] = a;
				l_run[h] = fmaf(l_run[h], a, sum);
				m_run[h] = m_new;
			}
		}
		__syncthreads();

		/* acc = acc * alpha + sum_key p * V[key] */
#pragma unroll
		for (int i = 0; i < C::NI; i++)
		{
			int			j = tid + ATTN_THREADS * i;
			int			h = j / (HD / 2),
						dp = j % (HD / 2);

			if (h < G)
			{
				float		a = alpha_s[h];
				float2		o = make_float2(__fmul_rn(acc[i].x, a), __fmul_rn(acc[i].y, a));

				for (int key = 0; key < nk; key++)
				{
					float		p = ps[h][key];
					float2		vf = __half22float2(*(const __half2 *) &Vs[key][2 * dp]);

					o.x = fmaf(p, vf.x, o.x);
					o.y = fmaf(p, vf.y, o.y);
				}
				acc[i] = o;
			}
		}
	}
	__syncthreads();

	{
		float	   *pp = part + ((size_t) item * n_kv + kvh) * ATTN_MAX_GROUP * C::PSTRIDE;

#pragma unroll
		for (int i = 0; i < C::NI; i++)
		{
			int			j = tid + ATTN_THREADS * i;
			int			h = j / (HD / 2),
						dp = j % (HD / 2);

			if (h < G)
			{
				pp[h * C::PSTRIDE + 2 * dp] = acc[i].x;
				pp[h * C::PSTRIDE + 2 * dp + 1] = acc[i].y;
			}
		}
		if (tid < G)
		{
			pp[tid * C::PSTRIDE + HD] = m_run[tid];
			pp[tid * C::PSTRIDE + HD + 1] = l_run[tid];
		}
	}
}

/*
 * Merge a token's splits in split order: M = max m_s, L = sum l_s e^(m_s-M),
 * out = (sum acc_s e^(m_s-M)) * (1/L).  With one split the weights are
 * exactly 1, so the result equals acc * (1/l).
 */
template <int HD>
__global__ void
attn_combine_kernel(const float *__restrict__ part, const int32_t *__restrict__ dec_tokens,
					const int32_t *__restrict__ item0, const int32_t *__restrict__ nsplit,
					int n_kv, int n_heads, float *__restrict__ out)
{
	typedef split_cfg<HD> C;
	const int	dt = blockIdx.x,
				h = blockIdx.y;
	const int	G = n_heads / n_kv;
	const int	kvh = h / G,
				hg = h % G;
	const int	t = dec_tokens[dt],
				ns = nsplit[dt];
	const size_t stride = (size_t) n_kv * ATTN_MAX_GROUP * C::PSTRIDE;
	const float *p0 = part + ((size_t) item0[dt] * n_kv + kvh) * ATTN_MAX_GROUP * C::PSTRIDE + hg * C::PSTRIDE;
	float		M = -INFINITY,
				L = 0.0f,
				inv;

	for (int s = 0; s < ns; s++)
		M = fmaxf(M, p0[s * stride + HD]);
	for (int s = 0; s < ns; s++)
		L = fmaf(p0[s * stride + HD + 1], expf(p0[s * stride + HD] - M), L);
	inv = 1.0f / L;
	for (int d = threadIdx.x; d < HD; d += blockDim.x)
	{
		float		o = 0.0f;

		for (int s = 0; s < ns; s++)
			o = fmaf(p0[s * stride + d], expf(p0[s * stride + HD] - M), o);
		out[((size_t) t * n_heads + h) * HD + d] = __fmul_rn(o, inv);
	}
}

/* ------------------------------------------------------------------------
 * FlashAttention-style prefill kernel (WMMA)
 * ------------------------------------------------------------------------ */

template <int HD>
struct prefill_cfg
{
	static constexpr int BQ = PREFILL_BQ;
	static constexpr int BK = 64;
	static constexpr int QLD = HD + 8;	/* halves */
	static constexpr int SLD = BK + 4;	/* floats */
	static constexpr int PLD = BK + 8;	/* halves */
	static constexpr int OLD = HD + 4;	/* floats */
	static constexpr size_t Q_OFF = 0;
	static constexpr size_t K_OFF = Q_OFF + (size_t) BQ * QLD * 2;
	static constexpr size_t V_OFF = K_OFF + (size_t) BK * QLD * 2;
	static constexpr size_t S_OFF = V_OFF + (size_t) BK * QLD * 2;
	static constexpr size_t P_OFF = S_OFF + (size_t) BQ * SLD * 4;
	static constexpr size_t O_OFF = P_OFF + (size_t) BQ * PLD * 2;
	static constexpr size_t M_OFF = O_OFF + (size_t) BQ * OLD * 4;
	static constexpr size_t L_OFF = M_OFF + (size_t) BQ * 4;
	static constexpr size_t POS_OFF = L_OFF + (size_t) BQ * 4;
	static constexpr size_t BYTES = POS_OFF + (size_t) BQ * 4;
};

template <int HD>
__global__ void __launch_bounds__(ATTN_THREADS)
attn_prefill_kernel(const __half *__restrict__ K, const __half *__restrict__ V, const float *__restrict__ q,
					float *__restrict__ out, const int32_t *__restrict__ tiles,
					const int32_t *__restrict__ positions, const int32_t *__restrict__ block_tables,
					int max_blocks, int block_size, int n_kv, int n_heads, float scale, int window, float softcap)
{
	typedef prefill_cfg<HD> C;
	extern __shared__ __align__(128) unsigned char smem[];
	__half	   *Qs = (__half *) (smem + C::Q_OFF);
	__half	   *Ks = (__half *) (smem + C::K_OFF);
	__half	   *Vs = (__half *) (smem + C::V_OFF);
	float	   *S = (float *) (smem + C::S_OFF);
	__half	   *P = (__half *) (smem + C::P_OFF);
	float	   *O = (float *) (smem + C::O_OFF);
	float	   *m_s = (float *) (smem + C::M_OFF);
	float	   *l_s = (float *) (smem + C::L_OFF);
	int		   *qpos = (int *) (smem + C::POS_OFF);

	const int	tid = threadIdx.x,
				warp = tid >> 5,
				lane = tid & 31;
	const int	h = blockIdx.y;
	const int	G = n_heads / n_kv;
	const int	kvh = h / G;
	const int	seq = tiles[3 * blockIdx.x],
				row0 = tiles[3 * blockIdx.x + 1],
				nq = tiles[3 * blockIdx.x + 2];
	const int32_t *bt = block_tables + (size_t) seq * max_blocks;
	int			n_keys = 0,
				k_first = 0;

	for (int i = tid; i < C::BQ * HD; i += ATTN_THREADS)
	{
		int			r = i / HD,
					d = i % HD;
		float		v = r < nq ? q[((size_t) (row0 + r) * n_heads + h) * HD + d] : 0.0f;

		Qs[r * C::QLD + d] = __float2half_rn(v);
	}
	for (int r = tid; r < C::BQ; r += ATTN_THREADS)
	{
		qpos[r] = r < nq ? positions[row0 + r] : -1;
		m_s[r] = -INFINITY;
		l_s[r] = 0.0f;
	}
	for (int i = tid; i < C::BQ * C::OLD; i += ATTN_THREADS)
		O[i] = 0.0f;
	__syncthreads();
	for (int r = 0; r < nq; r++)
		n_keys = max(n_keys, qpos[r] + 1);
	if (window > 0)
	{
		k_first = n_keys;
		for (int r = 0; r < nq; r++)
			k_first = min(k_first, max(0, qpos[r] - window + 1));
		k_first -= k_first % C::BK;
	}

	for (int kt = k_first; kt < n_keys; kt += C::BK)
	{
		const int	nk = min(C::BK, n_keys - kt);

		__syncthreads();		/* every warp is done with the previous K/V tile */
		for (int idx = tid; idx < C::BK * (HD / 8); idx += ATTN_THREADS)
		{
			int			row = idx / (HD / 8),
						c = idx % (HD / 8);
			uint4		kk = make_uint4(0, 0, 0, 0),
						vv = make_uint4(0, 0, 0, 0);

			if (row < nk)
			{
				size_t		off = kv_offset(bt, kt + row, block_size, n_kv, kvh, HD) + c * 8;

				kk = *(const uint4 *) (K + off);
				vv = *(const uint4 *) (V + off);
			}
			*(uint4 *) &Ks[row * C::QLD + c * 8] = kk;
			*(uint4 *) &Vs[row * C::QLD + c * 8] = vv;
		}
		__syncthreads();

		/* S[16 rows of this warp][BK] = Q K^T */
#pragma unroll
		for (int c = 0; c < C::BK / 16; c++)
		{
			wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;

			wmma::fill_fragment(sf, 0.0f);
#pragma unroll
			for (int k0 = 0; k0 < HD; k0 += 16)
			{
				wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
				wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;

				wmma::load_matrix_sync(a, Qs + 16 * warp * C::QLD + k0, C::QLD);
				wmma::load_matrix_sync(b, Ks + 16 * c * C::QLD + k0, C::QLD);
				wmma::mma_sync(sf, a, b, sf);
			}
			wmma::store_matrix_sync(S + 16 * warp * C::SLD + 16 * c, sf, C::SLD, wmma::mem_row_major);
		}
		__syncwarp();

		/* online softmax of the warp's rows; P = fp16 weights; O rows rescaled */
		for (int rr = 0; rr < 16; rr++)
		{
			const int	r = 16 * warp + rr;
			const int	qp = qpos[r];
			float		s[C::BK / 32],
						e[C::BK / 32];
			float		mx = -INFINITY,
						sum = 0.0f,
						m_old = m_s[r],
						m_new,
						alpha;

#pragma unroll
			for (int j = 0; j < C::BK / 32; j++)
			{
				int			kl = lane + 32 * j;
				bool		valid = kl < nk && kt + kl <= qp && (window <= 0 || kt + kl > qp - window);

				s[j] = valid ? attn_score(S[r * C::SLD + kl], scale, softcap) : -INFINITY;
				mx = fmaxf(mx, s[j]);
			}
			mx = warp_max(mx);
			m_new = fmaxf(m_old, mx);
#pragma unroll
			for (int j = 0; j < C::BK / 32; j++)
			{
				e[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - m_new);
				sum = __fadd_rn(sum, e[j]);
				P[r * C::PLD + lane + 32 * j] = __float2half_rn(e[j]);
			}
			sum = warp_sum(sum);
			alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
			for (int d = lane; d < HD; d += 32)
				O[r * C::OLD + d] = __fmul_rn(O[r * C::OLD + d], alpha);
			__syncwarp();
			if (lane == 0)
			{
				l_s[r] = fmaf(l_s[r], alpha, sum);
				m_s[r] = m_new;
			}
		}
		__syncwarp();

		/* O[16 rows][HD] += P V */
#pragma unroll
		for (int c = 0; c < HD / 16; c++)
		{
			wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;

			wmma::load_matrix_sync(of, O + 16 * warp * C::OLD + 16 * c, C::OLD, wmma::mem_row_major);
#pragma unroll
			for (int k0 = 0; k0 < C::BK; k0 += 16)
			{
				wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
				wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;

				wmma::load_matrix_sync(a, P + 16 * warp * C::PLD + k0, C::PLD);
				wmma::load_matrix_sync(b, Vs + k0 * C::QLD + 16 * c, C::QLD);
				wmma::mma_sync(of, a, b, of);
			}
			wmma::store_matrix_sync(O + 16 * warp * C::OLD + 16 * c, of, C::OLD, wmma::mem_row_major);
		}
		__syncwarp();
	}

	for (int rr = 0; rr < 16; rr++)
	{
		const int	r = 16 * warp + rr;

		if (r < nq)
		{
			float		inv = 1.0f / l_s[r];

			for (int d = lane; d < HD; d += 32)
				out[((size_t) (row0 + r) * n_heads + h) * HD + d] = __fmul_rn(O[r * C::OLD + d], inv);
		}
	}
}

/* ------------------------------------------------------------------------
 * host wrappers
 * ------------------------------------------------------------------------ */

extern "C" bool
cu_attention_head_dim_ok(int head_dim)
{
	return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

extern "C" cudaError_t
cu_attention_setup(void)
{
	cudaError_t e;

	e = cudaFuncSetAttribute(attn_prefill_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
							 (int) prefill_cfg<64>::BYTES);
	if (e == cudaSuccess)
		e = cudaFuncSetAttribute(attn_prefill_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
								 (int) prefill_cfg<128>::BYTES);
	if (e == cudaSuccess)
		e = cudaFuncSetAttribute(attn_prefill_kernel<256>, cudaFuncAttributeMaxDynamicSharedMemorySize,
								 (int) prefill_cfg<256>::BYTES);
	return e;
}

template <int HD>
static cudaError_t
launch_decode(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd, const float *q,
			  float *out, float *partials, int n_heads, float scale, int window, float softcap)
{
	dim3		g1((unsigned) sd->n_dec_items, (unsigned) kv->n_kv_heads);
	dim3		g2((unsigned) sd->n_dec_tokens, (unsigned) n_heads);
	cudaError_t e;

	attn_split_kernel<HD><<<g1, ATTN_THREADS, 0, st>>>(kv->k, kv->v, q, sd->dec_items, sd->positions,
													   sd->tok_seq, sd->block_tables, sd->max_blocks,
													   kv->block_size, kv->n_kv_heads, n_heads, scale,
													   window, softcap, partials);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	attn_combine_kernel<HD><<<g2, HD < 128 ? HD : 128, 0, st>>>(partials, sd->dec_tokens, sd->dec_item0,
																  sd->dec_nsplit, kv->n_kv_heads, n_heads, out);
	return cudaGetLastError();
}

/*
 * Attention of the step's "decode" tokens (sd->dec_*: every token in the
 * deterministic mode).  partials: n_dec_items * n_kv_heads * ATTN_MAX_GROUP *
 * (head_dim + 2) floats.
 */
extern "C" cudaError_t
cu_attention_decode(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
					const float *q, float *out, float *partials, int n_heads, float scale, int window, float softcap)
{
	if (sd->n_dec_tokens <= 0)
		return cudaSuccess;
	switch (kv->head_dim)
	{
		case 64:
			return launch_decode<64>(st, kv, sd, q, out, partials, n_heads, scale, window, softcap);
		case 128:
			return launch_decode<128>(st, kv, sd, q, out, partials, n_heads, scale, window, softcap);
		case 256:
			return launch_decode<256>(st, kv, sd, q, out, partials, n_heads, scale, window, softcap);
		default:
			return cudaErrorInvalidValue;
	}
}

template <int HD>
static cudaError_t
launch_prefill(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd, const float *q,
			   float *out, int n_heads, float scale, int window, float softcap)
{
	dim3		grid((unsigned) sd->n_pf_tiles, (unsigned) n_heads);

	attn_prefill_kernel<HD><<<grid, ATTN_THREADS, prefill_cfg<HD>::BYTES, st>>>(
		kv->k, kv->v, q, out, sd->pf_tiles, sd->positions, sd->block_tables, sd->max_blocks,
		kv->block_size, kv->n_kv_heads, n_heads, scale, window, softcap);
	return cudaGetLastError();
}

/* Attention of the step's prefill tiles (sd->pf_tiles). */
extern "C" cudaError_t
cu_attention_prefill(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
					 const float *q, float *out, int n_heads, float scale, int window, float softcap)
{
	if (sd->n_pf_tiles <= 0)
		return cudaSuccess;
	switch (kv->head_dim)
	{
		case 64:
			return launch_prefill<64>(st, kv, sd, q, out, n_heads, scale, window, softcap);
		case 128:
			return launch_prefill<128>(st, kv, sd, q, out, n_heads, scale, window, softcap);
		case 256:
			return launch_prefill<256>(st, kv, sd, q, out, n_heads, scale, window, softcap);
		default:
			return cudaErrorInvalidValue;
	}
}
