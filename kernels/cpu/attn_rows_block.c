/*
 * attn_rows_block.c — the encoders' attention in blocks of queries, for
 * the faster encoder arithmetic (llm.encoder_arithmetic 'auto' with the
 * AMX-BF16 matmuls, cpu_attention.c): bidirectional, no window, no
 * soft-cap, head_dim a multiple of 16 up to 256.  Not the bits of
 * llm_attention_rows_one (another summation order and a vector expf);
 * within 1e-6 of a double-precision attention on inputs in [-1, 1]
 * (test_attn_rows_block).
 *
 * For the queries of one sequence and head, in blocks of 16: the head's
 * keys are transposed once into kt[d][u] (keys padded to a multiple of 16 with
 * zeros), each score is one FMA chain over d = 0 .. head_dim-1 times the
 * scale, the weights e_u = expf(s_u - max) by glibc's 16-lane vector expf
 * (keys past the sequence weigh 0), their sum 16 lane sums over the key
 * vectors in order folded by a fixed tree, and out = (sum_u e_u v_u) / sum
 * with one FMA chain per element in key order.  Each query's arithmetic
 * depends only on its own row, the sequence's keys and values and the
 * head: not on the other queries of its block, their number, or the rows
 * of other sequences (batch invariance).
 *
 * Needs AVX512F (cpu_attention.c uses it only with the AMX encoder path).
 */
#include "elementwise.h"

#include <math.h>
#include <stdbool.h>

#if defined(__x86_64__)

#include <immintrin.h>

#define TGT_B __attribute__((target("avx2,fma,avx512f,avx512vl")))

/* glibc's libmvec expf, 16 lanes (AVX-512) */
extern __m512 _ZGVeN16v_expf(__m512 x);

size_t
llm_attention_rows_block_scratch(int n_rows, int head_dim)
{
	size_t		lp = (size_t) (n_rows + 15) / 16 * 16;

	return lp * (size_t) head_dim + 16 * lp;
}

/* Queries t0 .. t1-1 (at most 16) against the transposed keys kt; e: [16][lp] scratch. */
static TGT_B void
block16(const float *q, const float *kt, const float *v, float *out, int u0, int u1, int t0, int t1, int h,
		int n_heads, int n_kv_heads, int head_dim, float scale, float *e)
{
	const int	L = u1 - u0;
	const int	nkv = (L + 15) / 16;
	const int	lp = nkv * 16;
	const int	g = h / (n_heads / n_kv_heads);
	const size_t ks = (size_t) n_kv_heads * head_dim;
	const int	nq = t1 - t0;
	const int	nv = head_dim / 16;

	/* scores: 4 queries x 4 key vectors at a time, one FMA chain over d each */
	for (int i0 = 0; i0 < nq; i0 += 4)
	{
		const int	ni = nq - i0 < 4 ? nq - i0 : 4;
		const float *qh[4];

		for (int i = 0; i < 4; i++)
			qh[i] = q + ((size_t) (t0 + i0 + (i < ni ? i : 0)) * n_heads + h) * head_dim;
		for (int j0 = 0; j0 < nkv; j0 += 4)
		{
			const int	nj = nkv - j0 < 4 ? nkv - j0 : 4;
			__m512		acc[4][4];

			for (int i = 0; i < 4; i++)
				for (int j = 0; j < 4; j++)
					acc[i][j] = _mm512_setzero_ps();
			for (int d = 0; d < head_dim; d++)
			{
				__m512		kv[4];

				for (int j = 0; j < 4; j++)
					kv[j] = j < nj ? _mm512_loadu_ps(kt + (size_t) d * lp + 16 * (j0 + j)) : _mm512_setzero_ps();
				for (int i = 0; i < 4; i++)
				{
					__m512		qb = _mm512_set1_ps(qh[i][d]);

					for (int j = 0; j < 4; j++)
						acc[i][j] = _mm512_fmadd_ps(qb, kv[j], acc[i][j]);
				}
			}
			for (int i = 0; i < ni; i++)
				for (int j = 0; j < nj; j++)
					_mm512_storeu_ps(e + (size_t) (i0 + i) * lp + 16 * (j0 + j),
									 _mm512_mul_ps(acc[i][j], _mm512_set1_ps(scale)));
		}
	}

	/* softmax weights (unnormalised) and their sums */
	float		sums[16];

	for (int i = 0; i < nq; i++)
	{
		float	   *er = e + (size_t) i * lp;
		__m512		mx = _mm512_set1_ps(-INFINITY),
					sv = _mm512_setzero_ps();
		float		m;
		const __mmask16 tail = (__mmask16) (L % 16 == 0 ? 0xffff : (1u << (L % 16)) - 1);

		for (int j = 0; j < nkv; j++)
			mx = _mm512_mask_max_ps(mx, j + 1 < nkv ? 0xffff : tail, mx, _mm512_loadu_ps(er + 16 * j));
		m = _mm512_reduce_max_ps(mx);
		for (int j = 0; j < nkv; j++)
		{
			__m512		x = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(er + 16 * j), _mm512_set1_ps(m)));

			x = _mm512_maskz_mov_ps(j + 1 < nkv ? 0xffff : tail, x);
			_mm512_storeu_ps(er + 16 * j, x);
			sv = _mm512_add_ps(sv, x);
		}
		{
			__m256		a = _mm256_add_ps(_mm512_castps512_ps256(sv),
										  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sv), 1)));
			__m128		b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));

			b = _mm_add_ps(b, _mm_movehl_ps(b, b));
			b = _mm_add_ss(b, _mm_movehdup_ps(b));
			sums[i] = _mm_cvtss_f32(b);
		}
	}

	/* values: 8 queries x 2 head vectors at a time, one FMA chain over the keys each */
	for (int i0 = 0; i0 < nq; i0 += 8)
	{
		const int	ni = nq - i0 < 8 ? nq - i0 : 8;
		const float *er[8];

		for (int i = 0; i < 8; i++)
			er[i] = e + (size_t) (i0 + (i < ni ? i : 0)) * lp;
		for (int c0 = 0; c0 < nv; c0 += 2)
		{
			const bool	two = c0 + 1 < nv;
			__m512		acc[8][2];

			for (int i = 0; i < 8; i++)
				acc[i][0] = acc[i][1] = _mm512_setzero_ps();
			for (int u = 0; u < L; u++)
			{
				const float *vh = v + (size_t) (u0 + u) * ks + (size_t) g * head_dim + 16 * c0;
				const __m512 v0 = _mm512_loadu_ps(vh),
							v1 = two ? _mm512_loadu_ps(vh + 16) : _mm512_setzero_ps();

				for (int i = 0; i < 8; i++)
				{
					__m512		w = _mm512_set1_ps(er[i][u]);

					acc[i][0] = _mm512_fmadd_ps(w, v0, acc[i][0]);
					acc[i][1] = _mm512_fmadd_ps(w, v1, acc[i][1]);
				}
			}
			for (int i = 0; i < ni; i++)
			{
				float	   *oh = out + ((size_t) (t0 + i0 + i) * n_heads + h) * head_dim + 16 * c0;
				const __m512 sv = _mm512_set1_ps(sums[i0 + i]);

				_mm512_storeu_ps(oh, sums[i0 + i] > 0.0f ? _mm512_div_ps(acc[i][0], sv) : acc[i][0]);
				if (two)
					_mm512_storeu_ps(oh + 16, sums[i0 + i] > 0.0f ? _mm512_div_ps(acc[i][1], sv) : acc[i][1]);
			}
		}
	}
}

TGT_B void
llm_attention_rows_block_avx512(const float *q, const float *k, const float *v, float *out, int u0, int u1,
								int t0, int t1, int h, int n_heads, int n_kv_heads, int head_dim, float scale,
								float *scratch)
{
	const int	L = u1 - u0;
	const int	lp = (L + 15) / 16 * 16;
	const int	g = h / (n_heads / n_kv_heads);
	const size_t ks = (size_t) n_kv_heads * head_dim;
	float	   *kt = scratch;	/* [head_dim][lp] */
	float	   *e = scratch + (size_t) head_dim * lp;	/* [16][lp] */

	/* the head's keys, transposed: 16 keys' element d gathered at a time (keys past L zero) */
	{
		const float *kg = k + (size_t) u0 * ks + (size_t) g * head_dim;
		const __m512i lane = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
												_mm512_set1_epi32((int) ks));

		for (int ub = 0; ub < lp; ub += 16)
		{
			const __mmask16 m = (__mmask16) (ub + 16 <= L ? 0xffff : (1u << (L - ub)) - 1);
			const float *kb = kg + (size_t) ub * ks;

			for (int d = 0; d < head_dim; d++)
				_mm512_storeu_ps(kt + (size_t) d * lp + ub,
								 _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lane, kb + d, 4));
		}
	}

	for (int t = t0; t < t1; t += 16)
		block16(q, kt, v, out, u0, u1, t, t + 16 < t1 ? t + 16 : t1, h, n_heads, n_kv_heads, head_dim, scale, e);
}

#endif
