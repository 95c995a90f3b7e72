/*
 * attn_avx2.c — attention kernels of the CPU backend with AVX2 + FMA + F16C
 * (quant_x86.h; the arithmetic is defined in quant.h, llm_attn_args and
 * llm_attn_block_args, and reproduced from quant.c's scalar reference
 * bit for bit):
 *
 *   attend_avx2        one query token, the query heads of one KV head
 *                      (GQA): scores 4 keys at a time, the softmax, V sums
 *                      lane row by lane row with each V chunk converted
 *                      once for all the group's heads; both reduction
 *                      orders (multi-token and one-token)
 *   split_avx2         the same one-token attention in the pieces of
 *                      llm_attn_split (a decode row over a long context):
 *                      scores of key ranges, which record the keys' row
 *                      offsets for the V pieces, softmax per head, V sums
 *                      of head_dim ranges
 *   attend_block_avx2  a block of up to LLM_ATTN_QBLOCK queries of one
 *                      sequence at consecutive positions (prompt rows),
 *                      multi-token order: FlashAttention-style tiles of
 *                      (query heads x 16 keys) for K.Q and of (query, lane
 *                      row, 16 dims) x 64 keys for V.P, every K and V row
 *                      read from the cache and converted to fp32 once per
 *                      block instead of once per query
 *
 * Why the block kernel keeps its queries' scores between the K and the V
 * pass instead of an online softmax: the probabilities are
 * fp16(exp(s - max) * (1 / sum)) with the maximum and the sum over all of a
 * query's keys (llama.cpp's non-flash path, which the golden logits
 * follow), so no V product can start before the last score is known;
 * rescaling partial sums as FlashAttention does would round differently.
 * The scores of a block (n_q x group rows of the keys' span, 288 KiB for
 * 4 x 3 heads over 6,144 keys) stay in L2 between the passes.
 *
 * Key blocks are aligned on absolute positions (multiples of 16, the
 * softmax sum's chunks and the V lane rows of quant.h), and a query's
 * arithmetic never depends on the other queries of its block, so results
 * are independent of blocking and chunking (batch invariance, backend.h).
 *
 * No expression here may be of the form a*b+c in plain C (GCC would
 * contract it into an FMA); fused operations are written explicitly.
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

INL __m256
load_f16(const void *p, int64_t i)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) p + i)));
}

/*
 * Values c .. c + 7 of a cached row (c a multiple of 8) as floats: fp16, or
 * d * q of the row's q8_0 block (quant.h llm_kv_value; q8 a constant after
 * inlining).
 */
INL __m256
load_kv8(const uint8_t *row, int c, const bool q8)
{
	if (q8)
	{
		const llm_block_q8_0 *b = (const llm_block_q8_0 *) row + c / LLM_QK;
		__m128i		q = _mm_loadl_epi64((const __m128i *) (b->qs + c % LLM_QK));

		return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->d)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
	}
	return load_f16(row, c);
}

/* ---- one query (decode rows; prompt rows of the scalar backend too) ---- */

/* _mm512_reduce_add_ps order of 16 floats (see quant.c reduce16) */
INL float
reduce16_8x2(__m256 lo, __m256 hi)
{
	__m256		t3 = _mm256_add_ps(hi, lo);
	__m128		t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
	__m128		t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));

	return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

/*
 * reduce16 of 4 keys: t[jj] holds lanes 0..7 + lanes 8..15 of key jj's
 * accumulator (the first step of the 16-lane reduction); finish each as
 * ((x0+x2)+(x1+x3)) with x_i = t[i] + t[i+4].
 */
INL __m128
reduce16_4keys_v(const __m256 t[4])
{
	__m256		s01 = _mm256_add_ps(_mm256_permute2f128_ps(t[0], t[1], 0x31),
									_mm256_permute2f128_ps(t[0], t[1], 0x20));
	__m256		s23 = _mm256_add_ps(_mm256_permute2f128_ps(t[2], t[3], 0x31),
									_mm256_permute2f128_ps(t[2], t[3], 0x20));
	__m256		q01 = _mm256_add_ps(s01, _mm256_shuffle_ps(s01, s01, _MM_SHUFFLE(1, 0, 3, 2)));
	__m256		q23 = _mm256_add_ps(s23, _mm256_shuffle_ps(s23, s23, _MM_SHUFFLE(1, 0, 3, 2)));
	__m256		r01 = _mm256_add_ps(q01, _mm256_movehdup_ps(q01));
	__m256		r23 = _mm256_add_ps(q23, _mm256_movehdup_ps(q23));
	/* key 0 / 1 in lanes 0 / 4 of r01, keys 2 / 3 likewise in r23 */
	__m256		u = _mm256_shuffle_ps(r01, r23, _MM_SHUFFLE(0, 0, 0, 0));

	return _mm_blend_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1), 0xA);
}

INL void
reduce16_4keys(const __m256 t[4], float out[4])
{
	_mm_storeu_ps(out, reduce16_4keys_v(t));
}

/* Prefetch one cache row of head_dim fp16 values (hint: _MM_HINT_T0 / T1). */
#define PREFETCH_ROW(p, bytes, hint) \
	do { \
		for (int pf_ = 0; pf_ < (bytes); pf_ += 64) \
			_mm_prefetch((const char *) (p) + pf_, hint); \
	} while (0)

/* Lane rows' keys per V span (v_sums): the span's V rows stay in L2 while its lane rows run. */
#ifndef V_SPAN_ROWS
#define V_SPAN_ROWS 8
#endif

/* Keys ahead whose K row (into L1) and V row (into L2) are prefetched. */
#ifndef ATTN_PREFETCH_KEYS
#define ATTN_PREFETCH_KEYS 12
#endif

/*
 * V sums of heads h0..h0+HG-1 (HG <= 4 a constant after inlining), dims
 * c0..c1-1 (multiples of 16): lane row l of head h = sum over keys j >=
 * first_key with j = l mod R (absolute positions), ascending, of
 * v_j * p_hj, one fma chain per element.  rowoff and scores are indexed by
 * j - jb.  Keys go by in spans of V_SPAN_ROWS x R (aligned on absolute
 * positions): the next span's rows are prefetched in memory order, a few
 * per lane row, while, lane row by lane row, this span's V_SPAN_ROWS keys
 * of each row run with the sums of the group's
 * heads in registers, each 16-element chunk of a V row converted once for
 * all of them (GQA).  A whole pass per lane row over a long context would
 * read the rows R apart, a stride no prefetcher follows.
 */
INL void
v_sums(const llm_attn_args *a, const size_t *rowoff, const float *scores, size_t npad, int jb,
	   float *vsum, const int R, const int h0, const int HG, int c0, int c1, const bool q8)
{
	/* dims per register pass: HG x DC / 8 sums + HG probabilities + one V vector in 16 registers */
	const int	DC = HG <= 3 ? 32 : 16;
	const int	hd = a->head_dim,
				n = a->n_keys,
				k0 = a->first_key,
				span = V_SPAN_ROWS * R;
	const size_t row_bytes = llm_kv_row_bytes(a->kv_dtype, hd);
	/* the bytes of a row that dims c0..c1-1 occupy (q8_0: whole blocks, with their scales) */
	const size_t b0 = q8 ? (size_t) (c0 / LLM_QK) * sizeof(llm_block_q8_0) : (size_t) c0 * 2,
				b1 = q8 ? (size_t) ((c1 + LLM_QK - 1) / LLM_QK) * sizeof(llm_block_q8_0) : (size_t) c1 * 2;

	for (int h = 0; h < HG; h++)
		for (int l = 0; l < R; l++)
			memset(vsum + ((size_t) (h0 + h) * R + l) * hd + c0, 0, (size_t) (c1 - c0) * sizeof(float));
	for (int s0 = k0 - k0 % span; s0 < n; s0 += span)
	{
		const int	js = s0 > k0 ? s0 : k0,
					je = s0 + span < n ? s0 + span : n;

		for (int l = 0; l < R; l++)
		{
			const int	jf = js + ((l - js) & (R - 1));

			/*
			 * the next span's rows into L2, V_SPAN_ROWS of them per lane
			 * row in memory order: spread over the span's work rather than
			 * in one burst at its start, which queued behind one another
			 */
			for (int j = s0 + span + l * V_SPAN_ROWS; j < s0 + span + (l + 1) * V_SPAN_ROWS && j < n; j++)
				for (size_t o = b0 & ~(size_t) 63; o < b1 && o < row_bytes; o += 64)
					_mm_prefetch((const char *) a->v_cache + rowoff[j - jb] + o, _MM_HINT_T1);
			if (jf >= je)
				continue;
			for (int c = c0; c < c1; c += DC)
			{
				const int	dc = c1 - c < DC ? c1 - c : DC;	/* 16 or DC */
				__m256		s[4][4];

				#pragma GCC unroll 4
				for (int h = 0; h < HG; h++)
				{
					const float *acc = vsum + ((size_t) (h0 + h) * R + l) * hd + c;

					#pragma GCC unroll 4
					for (int k = 0; k < DC / 8; k++)
						s[h][k] = k * 8 < dc ? _mm256_loadu_ps(acc + 8 * k) : _mm256_setzero_ps();
				}
				for (int j = jf; j < je; j += R)
				{
					const uint8_t *v = a->v_cache + rowoff[j - jb];
					__m256		pj[4];

					#pragma GCC unroll 4
					for (int h = 0; h < HG; h++)
						pj[h] = _mm256_broadcast_ss(scores + (size_t) (h0 + h) * npad + (j - jb));
					#pragma GCC unroll 4
					for (int k = 0; k < DC / 8; k++)
					{
						__m256		vk;

						if (k * 8 >= dc)
							break;
						vk = load_kv8(v, c + 8 * k, q8);
						#pragma GCC unroll 4
						for (int h = 0; h < HG; h++)
							s[h][k] = _mm256_fmadd_ps(vk, pj[h], s[h][k]);
					}
				}
				#pragma GCC unroll 4
				for (int h = 0; h < HG; h++)
				{
					float	   *acc = vsum + ((size_t) (h0 + h) * R + l) * hd + c;

					#pragma GCC unroll 4
					for (int k = 0; k < DC / 8; k++)
						if (k * 8 < dc)
							_mm256_storeu_ps(acc + 8 * k, s[h][k]);
				}
			}
		}
	}
}

/* v_sums of every head, HG <= 4 at a time */
INL void
v_sums_all(const llm_attn_args *a, const size_t *rowoff, const float *scores, size_t npad, int jb,
		   float *vsum, int c0, int c1, const bool q8)
{
	const int	R = a->single ? 64 : 16,
				G = a->group;

	for (int h0 = 0; h0 < G; h0 += 4)
	{
		const int	hg = G - h0 < 4 ? G - h0 : 4;

		switch (hg)
		{
			case 1: v_sums(a, rowoff, scores, npad, jb, vsum, R, h0, 1, c0, c1, q8); break;
			case 2: v_sums(a, rowoff, scores, npad, jb, vsum, R, h0, 2, c0, c1, q8); break;
			case 3: v_sums(a, rowoff, scores, npad, jb, vsum, R, h0, 3, c0, c1, q8); break;
			default: v_sums(a, rowoff, scores, npad, jb, vsum, R, h0, 4, c0, c1, q8); break;
		}
	}
}

/* out[h][d] for dims c0..c1-1 = reduce16 over the 16 lane rows (single: rows combined (v0+v2)+(v1+v3) first) */
INL void
v_out(const llm_attn_args *a, const float *vsum, int c0, int c1)
{
	const int	hd = a->head_dim,
				R = a->single ? 64 : 16;

	for (int h = 0; h < a->group; h++)
	{
		const float *vs = vsum + (size_t) h * R * hd;

		for (int c = c0; c < c1; c += 8)
		{
			__m256		t3[8],
						t6[4],
						row[16];

			for (int l = 0; l < 16; l++)
			{
				if (a->single)
					row[l] = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(vs + l * hd + c),
														 _mm256_loadu_ps(vs + (32 + l) * hd + c)),
										   _mm256_add_ps(_mm256_loadu_ps(vs + (16 + l) * hd + c),
														 _mm256_loadu_ps(vs + (48 + l) * hd + c)));
				else
					row[l] = _mm256_loadu_ps(vs + l * hd + c);
			}
			for (int l = 0; l < 8; l++)
				t3[l] = _mm256_add_ps(row[l + 8], row[l]);
			for (int l = 0; l < 4; l++)
				t6[l] = _mm256_add_ps(t3[l + 4], t3[l]);
			_mm256_storeu_ps(a->out + (size_t) h * hd + c,
							 _mm256_add_ps(_mm256_add_ps(t6[0], t6[2]), _mm256_add_ps(t6[1], t6[3])));
		}
	}
}

/* The K row at byte offset off into L1 (a key ATTN_PREFETCH_KEYS ahead), and its V row into L2 for a V pass on this thread. */
INL void
prefetch_key_ahead(const llm_attn_args *a, size_t off, int row_bytes, const bool prefetch_v)
{
	PREFETCH_ROW(a->k_cache + off, row_bytes, _MM_HINT_T0);
	if (prefetch_v)
		PREFETCH_ROW(a->v_cache + off, row_bytes, _MM_HINT_T1);
}

/*
 * k_scores of one-token rows with head_dim 64 (the one-token order below:
 * per head and key v[i] = k[8i..8i+7] * q[8i..8i+7] as an fma with zero,
 * the fixed tree of the 8 vectors, reduce16_4keys_v of 4 keys, times
 * scale).  Each K row is converted once into 8 registers and used for every
 * head of the group straight from there, Q read from L1: the generic loop
 * stores the converted rows and loads them back once per head, twice the
 * loads per product, which bounded decode attention over long contexts.
 * The arithmetic is the generic loop's, operation for operation.
 */
#define K64_MAX_GROUP 16

INL void
k_scores_single64(const llm_attn_args *a, const size_t *rowoff, int rowbase, float *scores, size_t npad, int jb,
				  int js, int je, const bool prefetch_v, const bool q8)
{
	const int	G = a->group;
	const int	row_bytes = (int) llm_kv_row_bytes(a->kv_dtype, 64);
	__m256		t[K64_MAX_GROUP][4];

	for (int j0 = js; j0 < je; j0 += 4)
	{
		const int	nk = je - j0 < 4 ? je - j0 : 4;
		const int	r0 = j0 - jb;

		for (int jj = 0; jj < 4; jj++)
		{
			__m256		k[8];

			if (j0 + jj + ATTN_PREFETCH_KEYS < je)
				prefetch_key_ahead(a, rowoff[j0 + jj + ATTN_PREFETCH_KEYS - rowbase], row_bytes, prefetch_v);
			if (jj < nk)
			{
				const uint8_t *kr = a->k_cache + rowoff[j0 + jj - rowbase];

				#pragma GCC unroll 8
				for (int i = 0; i < 8; i++)
					k[i] = load_kv8(kr, 8 * i, q8);
			}
			else
			{
				for (int i = 0; i < 8; i++)
					k[i] = _mm256_setzero_ps();
			}
			for (int h = 0; h < G; h++)
			{
				const float *q = a->q + (size_t) h * 64;
				__m256		v[8];

				#pragma GCC unroll 8
				for (int i = 0; i < 8; i++)
					v[i] = _mm256_fmadd_ps(k[i], _mm256_loadu_ps(q + 8 * i), _mm256_setzero_ps());
				t[h][jj] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[3], v[7]), _mm256_add_ps(v[1], v[5])),
										 _mm256_add_ps(_mm256_add_ps(v[2], v[6]), _mm256_add_ps(v[0], v[4])));
			}
		}
		for (int h = 0; h < G; h++)
			_mm_storeu_ps(scores + h * npad + r0, _mm_mul_ps(reduce16_4keys_v(t[h]), _mm_set1_ps(a->scale)));
	}
}

/*
 * Scores of keys js..je-1 (js a multiple of 4; rows before first_key still
 * exist and get masked scores) of every head into scores[h * npad + j - jb],
 * 4 keys at a time (rows past je are zero and their scores unused); rowoff
 * is indexed by j - rowbase.  prefetch_v: also fetch the V rows into L2
 * for a V pass on this thread.
 */
INL void
k_scores(const llm_attn_args *a, const size_t *rowoff, int rowbase, float *scores, size_t npad, int jb,
		 int js, int je, float *kv, const bool prefetch_v, const bool q8)
{
	const int	hd = a->head_dim,
				G = a->group;
	const int	row_bytes = (int) llm_kv_row_bytes(a->kv_dtype, hd);

	int			j0 = js;

	for (int j = js; j < je && j < js + ATTN_PREFETCH_KEYS; j++)
		PREFETCH_ROW(a->k_cache + rowoff[j - rowbase], row_bytes, _MM_HINT_T0);
	if (a->single && hd == 64 && G <= K64_MAX_GROUP)
	{
		k_scores_single64(a, rowoff, rowbase, scores, npad, jb, js, je, prefetch_v, q8);
		return;
	}
	for (; j0 < je; j0 += 4)
	{
		int			nk = je - j0 < 4 ? je - j0 : 4;
		int			r0 = j0 - jb;

		for (int jj = 0; jj < 4; jj++)
		{
			if (j0 + jj + ATTN_PREFETCH_KEYS < je)
				prefetch_key_ahead(a, rowoff[j0 + jj + ATTN_PREFETCH_KEYS - rowbase], row_bytes, prefetch_v);
			if (jj < nk)
			{
				const uint8_t *k = a->k_cache + rowoff[j0 + jj - rowbase];

				if (hd == 64)
				{
					#pragma GCC unroll 8
					for (int c = 0; c < 64; c += 8)
						_mm256_storeu_ps(kv + jj * 64 + c, load_kv8(k, c, q8));
				}
				else
					for (int c = 0; c < hd; c += 8)
						_mm256_storeu_ps(kv + jj * hd + c, load_kv8(k, c, q8));
			}
			else
				memset(kv + jj * hd, 0, (size_t) hd * sizeof(float));
		}
		for (int h = 0; h < G; h++)
		{
			const float *q = a->q + (size_t) h * hd;
			__m256		t[4];
			float		r[4];

			if (!a->single)
			{
				__m256		lo[4],
							hi[4];

				for (int jj = 0; jj < 4; jj++)
					lo[jj] = hi[jj] = _mm256_setzero_ps();
				for (int c = 0; c < hd; c += 16)
				{
					__m256		qlo = _mm256_loadu_ps(q + c),
								qhi = _mm256_loadu_ps(q + c + 8);

					for (int jj = 0; jj < 4; jj++)
					{
						lo[jj] = _mm256_fmadd_ps(_mm256_loadu_ps(kv + jj * hd + c), qlo, lo[jj]);
						hi[jj] = _mm256_fmadd_ps(_mm256_loadu_ps(kv + jj * hd + c + 8), qhi, hi[jj]);
					}
				}
				for (int jj = 0; jj < 4; jj++)
					t[jj] = _mm256_add_ps(hi[jj], lo[jj]);
				_mm_storeu_ps(scores + h * npad + r0, _mm_mul_ps(reduce16_4keys_v(t), _mm_set1_ps(a->scale)));
			}
			else if (hd % 64 == 0)
			{
				/*
				 * ggml_vec_dot_f16: 4 x 16 lanes over steps of 64, then
				 * (v0+v2)+(v1+v3); head_dim a multiple of 64, so the double
				 * sum of the tail is empty and the score is r * scale
				 */
				#pragma GCC unroll 4
				for (int jj = 0; jj < 4; jj++)
				{
					__m256		v[8];
					const float *kr = kv + jj * hd;

					#pragma GCC unroll 8
					for (int i = 0; i < 8; i++)
						v[i] = _mm256_fmadd_ps(_mm256_loadu_ps(kr + 8 * i), _mm256_loadu_ps(q + 8 * i), _mm256_setzero_ps());
					for (int c = 64; c < hd; c += 64)
						#pragma GCC unroll 8
						for (int i = 0; i < 8; i++)
							v[i] = _mm256_fmadd_ps(_mm256_loadu_ps(kr + c + 8 * i), _mm256_loadu_ps(q + c + 8 * i), v[i]);
					/* v[2j], v[2j+1] = lanes 0..7, 8..15 of accumulator j */
					t[jj] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[3], v[7]), _mm256_add_ps(v[1], v[5])),
										  _mm256_add_ps(_mm256_add_ps(v[2], v[6]), _mm256_add_ps(v[0], v[4])));
				}
				_mm_storeu_ps(scores + h * npad + r0, _mm_mul_ps(reduce16_4keys_v(t), _mm_set1_ps(a->scale)));
			}
			else
			{
				/* the same with a tail past the last multiple of 64, added element by element in double */
				const int	np = hd & ~63;

				for (int jj = 0; jj < 4; jj++)
				{
					__m256		v[8];
					const float *kr = kv + jj * hd;

					for (int i = 0; i < 8; i++)
						v[i] = _mm256_setzero_ps();
					for (int c = 0; c < np; c += 64)
						for (int i = 0; i < 8; i++)
							v[i] = _mm256_fmadd_ps(_mm256_loadu_ps(kr + c + 8 * i), _mm256_loadu_ps(q + c + 8 * i), v[i]);
					t[jj] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[3], v[7]), _mm256_add_ps(v[1], v[5])),
										  _mm256_add_ps(_mm256_add_ps(v[2], v[6]), _mm256_add_ps(v[0], v[4])));
				}
				reduce16_4keys(t, r);
				for (int jj = 0; jj < 4; jj++)
				{
					double		sum = r[jj];

					for (int i = np; i < hd; i++)
						sum += (double) (kv[jj * hd + i] * q[i]);
					scores[h * npad + r0 + jj] = (float) sum * a->scale;
				}
			}
		}
	}
}

/*
 * Softmax of one head's scores as ggml_vec_soft_max_f32 over entries
 * r0..r1-1 of sc[npad] (the others are masked: p = 0); probabilities
 * rounded to fp16, as llama.cpp feeds them to the fp16 V product.
 */
INL void
softmax_row(float *sc, size_t npad, int r0, int r1)
{
	__m256		mx = _mm256_set1_ps(-INFINITY);
	float		m,
				inv;
	double		sum = 0.0;

	for (int r = 0; r < r0; r++)
		sc[r] = -INFINITY;
	for (int r = r1; r < (int) npad; r++)
		sc[r] = -INFINITY;
	for (size_t j = 0; j < npad; j += 8)
		mx = _mm256_max_ps(mx, _mm256_loadu_ps(sc + j));
	{
		__m128		m4 = _mm_max_ps(_mm256_extractf128_ps(mx, 1), _mm256_castps256_ps128(mx));

		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		m = _mm_cvtss_f32(m4);
	}
	/*
	 * exp and the sum in one pass, chunk after chunk of 16 (the double sum's
	 * order); masked entries are -inf and give exp = +0 exactly, the value
	 * the reference gives them
	 */
	for (size_t j = 0; j < npad; j += 16)
	{
		__m256		e0 = llm_expf8(_mm256_sub_ps(_mm256_loadu_ps(sc + j), _mm256_set1_ps(m))),
					e1 = llm_expf8(_mm256_sub_ps(_mm256_loadu_ps(sc + j + 8), _mm256_set1_ps(m)));

		_mm256_storeu_ps(sc + j, e0);
		_mm256_storeu_ps(sc + j + 8, e1);
		sum += (double) reduce16_8x2(e0, e1);
	}
	inv = (float) (1.0 / sum);
	{
		__m256		iv = _mm256_set1_ps(inv);

		for (size_t j = 0; j < npad; j += 8)
			_mm256_storeu_ps(sc + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(sc + j), iv),
																	  _MM_FROUND_TO_NEAREST_INT)));
	}
}

/*
 * Cache byte offsets of keys js..je-1 into rowoff[j - rowbase]: one row
 * index per cache block, then the block's rows one after another.
 */
static inline void
row_offsets(const llm_attn_args *a, size_t *rowoff, int rowbase, int js, int je)
{
	const size_t rb = llm_kv_row_bytes(a->kv_dtype, a->head_dim);

	for (int j = js; j < je;)
	{
		const int	blk = j / a->block_size,
					end = (blk + 1) * a->block_size < je ? (blk + 1) * a->block_size : je;
		size_t		o = llm_kv_row_index(a->block_table[blk], j % a->block_size, a->kv_head, a->n_kv_heads,
										 a->block_size) * rb;

		for (; j < end; j++, o += rb)
			rowoff[j - rowbase] = o;
	}
}

/*
 * Keys are indexed by r = j - jb, jb the first key rounded down to a multiple
 * of 16 (the softmax sum's chunks are aligned on absolute positions, see
 * quant.h); scores are computed 4 keys at a time from first_key rounded down
 * to a multiple of 4, and entries before first_key are then masked.
 */
INL void
attend_impl(const llm_attn_args *a, const bool q8)
{
	const int	hd = a->head_dim,
				n = a->n_keys,
				k0 = a->first_key,
				jb = k0 & ~15,
				ks = k0 & ~3,
				G = a->group;
	const size_t npad = ((size_t) (n - jb) + 15) & ~(size_t) 15;
	const int	row_bytes = (int) llm_kv_row_bytes(a->kv_dtype, hd);
	size_t	   *rowoff = (size_t *) a->scratch;	/* [npad] cache byte offset of key jb + r */
	float	   *scores = a->scratch + 2 * npad;
	float	   *vsum = scores + (size_t) G * npad;	/* [G][64][hd] */
	float	   *kv = vsum + (size_t) G * 64 * hd;	/* [8][hd] converted rows */

	/*
	 * The cache rows of one sequence lie in blocks scattered over the pool:
	 * their offsets once, so that both passes can prefetch ahead (the rows
	 * are cold: every layer of every sequence reads its own).
	 */
	row_offsets(a, rowoff, jb, ks, n);
	k_scores(a, rowoff, jb, scores, npad, jb, ks, n, kv, true, q8);
	for (int h = 0; h < G; h++)
	{
		if (a->softcap > 0.0f)
			llm_attn_softcap_row(scores + h * npad, k0 - jb, n - jb, a->softcap, a->cap_scale);
		softmax_row(scores + h * npad, npad, k0 - jb, n - jb);
	}
	/*
	 * V sums: key j accumulates into lane row j % R (R = 16 tinyBLAS, 64
	 * vec_dot_f16; absolute j), keys in ascending order from first_key.
	 * Computed lane row by lane row with the sums in registers (the
	 * [G][R][hd] array is written once, instead of read and written for
	 * every key).
	 */
	for (int j = k0; j < k0 + ATTN_PREFETCH_KEYS && j < n; j++)
		PREFETCH_ROW(a->v_cache + rowoff[j - jb], row_bytes, _MM_HINT_T0);
	v_sums_all(a, rowoff, scores, npad, jb, vsum, 0, hd, q8);
	v_out(a, vsum, 0, hd);
}

/* ---- one query split over threads (llm_attn_split) ---- */

INL void
split_scores_impl(const llm_attn_args *a, float *scores, size_t *rowoff, int js, int je, const bool q8)
{
	const int	jb = a->first_key & ~15;
	const size_t npad = llm_attn_split_npad(a);
	float	   *kv = a->scratch;

	row_offsets(a, rowoff, jb, js, je);
	/* no V prefetch: the V pieces may run on the other core, and fetching V here measured slower */
	k_scores(a, rowoff, jb, scores, npad, jb, js, je, kv, false, q8);
}

static TGT void
split_scores(const llm_attn_args *a, float *scores, size_t *rowoff, int js, int je)
{
	if (a->kv_dtype == LLM_KV_Q8_0)
		split_scores_impl(a, scores, rowoff, js, je, true);
	else
		split_scores_impl(a, scores, rowoff, js, je, false);
}

static TGT void
split_softmax(const llm_attn_args *a, float *scores, int h)
{
	const int	jb = a->first_key & ~15;
	const size_t npad = llm_attn_split_npad(a);

	if (a->softcap > 0.0f)
		llm_attn_softcap_row(scores + (size_t) h * npad, a->first_key - jb, a->n_keys - jb, a->softcap,
							 a->cap_scale);
	softmax_row(scores + (size_t) h * npad, npad, a->first_key - jb, a->n_keys - jb);
}

INL void
split_values_impl(const llm_attn_args *a, const float *scores, const size_t *rowoff, int c0, int c1, const bool q8)
{
	const int	jb = a->first_key & ~15,
				hd = a->head_dim;
	const size_t npad = llm_attn_split_npad(a);
	const int	row_bytes = (int) llm_kv_row_bytes(a->kv_dtype, hd);
	float	   *vsum = a->scratch;	/* [G][64][hd] */

	for (int j = a->first_key; j < a->first_key + ATTN_PREFETCH_KEYS && j < a->n_keys; j++)
		PREFETCH_ROW(a->v_cache + rowoff[j - jb], row_bytes, _MM_HINT_T0);
	v_sums_all(a, rowoff, scores, npad, jb, vsum, c0, c1, q8);
	v_out(a, vsum, c0, c1);
}

static TGT void
split_values(const llm_attn_args *a, const float *scores, const size_t *rowoff, int c0, int c1)
{
	if (a->kv_dtype == LLM_KV_Q8_0)
		split_values_impl(a, scores, rowoff, c0, c1, true);
	else
		split_values_impl(a, scores, rowoff, c0, c1, false);
}

static const llm_attn_split split_avx2 = {split_scores, split_softmax, split_values};

static TGT void
attend_avx2(const llm_attn_args *a)
{
	if (a->kv_dtype == LLM_KV_Q8_0)
		attend_impl(a, true);
	else
		attend_impl(a, false);
}

/* ---- a block of queries at consecutive positions (prompt rows) ---- */

/* keys whose V rows are converted at once (32 KiB for head_dim 64; at most LLM_ATTN_BLOCK_VKEYS, the scratch) */
#ifndef V_SPAN
#define V_SPAN 128
#endif

/*
 * The reduce16 inputs t (lanes 0-7 + lanes 8-15 of a (head, key)'s 16-lane
 * accumulator) of A <= 3 query heads (rows q, q + hd, ...) against the key
 * pair k0, k1 (fp32 rows): per (head, key) 16 lanes of fma chains over
 * head_dim, as attend_avx2's multi-token scores.  t[2a], t[2a + 1]: head a.
 */
INL void
qk_pair_t(const float *q, const float *k0, const float *k1, int hd, __m256 *t, const int A)
{
	__m256		lo[3][2],
				hi[3][2];

	#pragma GCC unroll 3
	for (int a = 0; a < A; a++)
		lo[a][0] = lo[a][1] = hi[a][0] = hi[a][1] = _mm256_setzero_ps();
	for (int c = 0; c < hd; c += 16)
	{
		__m256		ka = _mm256_loadu_ps(k0 + c),
					kb = _mm256_loadu_ps(k1 + c);

		#pragma GCC unroll 3
		for (int a = 0; a < A; a++)
		{
			__m256		qv = _mm256_loadu_ps(q + (size_t) a * hd + c);

			lo[a][0] = _mm256_fmadd_ps(ka, qv, lo[a][0]);
			lo[a][1] = _mm256_fmadd_ps(kb, qv, lo[a][1]);
		}
		ka = _mm256_loadu_ps(k0 + c + 8);
		kb = _mm256_loadu_ps(k1 + c + 8);
		#pragma GCC unroll 3
		for (int a = 0; a < A; a++)
		{
			__m256		qv = _mm256_loadu_ps(q + (size_t) a * hd + c + 8);

			hi[a][0] = _mm256_fmadd_ps(ka, qv, hi[a][0]);
			hi[a][1] = _mm256_fmadd_ps(kb, qv, hi[a][1]);
		}
	}
	#pragma GCC unroll 3
	for (int a = 0; a < A; a++)
	{
		t[2 * a] = _mm256_add_ps(hi[a][0], lo[a][0]);
		t[2 * a + 1] = _mm256_add_ps(hi[a][1], lo[a][1]);
	}
}

/*
 * Scores of A <= 3 query heads against 4 consecutive keys (fp32 rows k,
 * k + hd, ...): reduce16 of each (head, key) times scale, stored as 4
 * floats at s + a * sstride.
 */
INL void
qk_quad(const float *q, const float *k, int hd, float scale, float *s, size_t sstride, const int A)
{
	__m256		t01[6],
				t23[6];

	qk_pair_t(q, k, k + hd, hd, t01, A);
	qk_pair_t(q, k + 2 * hd, k + 3 * hd, hd, t23, A);
	#pragma GCC unroll 3
	for (int a = 0; a < A; a++)
	{
		__m256		t[4] = {t01[2 * a], t01[2 * a + 1], t23[2 * a], t23[2 * a + 1]};

		_mm_storeu_ps(s + (size_t) a * sstride, _mm_mul_ps(reduce16_4keys_v(t), _mm_set1_ps(scale)));
	}
}

/*
 * V sums of HG <= 4 heads of one query over keys j = jf, jf + 16, ... <= je
 * (one lane row), dims c .. c + 15: acc[h] (in memory, the lane row of head
 * h) = fma(v_j, p_hj, acc[h]) key after key.
 */
INL void
pv_lane(const float *vf, int vbase, const float *const *p, int pbase, float *const *acc, int jf, int je,
		int hd, int c, const int HG)
{
	__m256		s[4][2];

	#pragma GCC unroll 4
	for (int h = 0; h < HG; h++)
	{
		s[h][0] = _mm256_loadu_ps(acc[h] + c);
		s[h][1] = _mm256_loadu_ps(acc[h] + c + 8);
	}
	for (int j = jf; j <= je; j += 16)
	{
		const float *v = vf + (size_t) (j - vbase) * hd + c;
		__m256		v0 = _mm256_loadu_ps(v),
					v1 = _mm256_loadu_ps(v + 8);

		#pragma GCC unroll 4
		for (int h = 0; h < HG; h++)
		{
			__m256		pj = _mm256_broadcast_ss(p[h] + (j - pbase));

			s[h][0] = _mm256_fmadd_ps(v0, pj, s[h][0]);
			s[h][1] = _mm256_fmadd_ps(v1, pj, s[h][1]);
		}
	}
	#pragma GCC unroll 4
	for (int h = 0; h < HG; h++)
	{
		_mm256_storeu_ps(acc[h] + c, s[h][0]);
		_mm256_storeu_ps(acc[h] + c + 8, s[h][1]);
	}
}

/*
 * Scratch (floats): row offsets of keys jb.. [npad] as size_t, K rows
 * [16][hd], V rows [V_SPAN][hd], scores [Q][npad] (index j - jb; Q =
 * n_q * group, row i * group + h), V sums [Q][16][hd].  jb = the first
 * query's first key rounded down to a multiple of 16.
 */
INL void
attend_block_impl(const llm_attn_block_args *a, const bool q8)
{
	const int	hd = a->head_dim,
				G = a->group,
				nq = a->n_q,
				Q = nq * G;
	const int	row_bytes = (int) llm_kv_row_bytes(a->kv_dtype, hd);
	int			lo[LLM_ATTN_QBLOCK],
				hi[LLM_ATTN_QBLOCK];

	for (int i = 0; i < nq; i++)
	{
		hi[i] = a->pos0 + i;
		lo[i] = a->window > 0 && hi[i] + 1 > a->window ? hi[i] + 1 - a->window : 0;
	}

	const int	jlo = lo[0],
				jhi = hi[nq - 1],
				jb = jlo & ~15;
	const size_t npad = ((size_t) (jhi + 1 - jb) + 15) & ~(size_t) 15;
	size_t	   *rowoff = (size_t *) a->scratch;
	float	   *kf = a->scratch + 2 * npad;
	float	   *vf = kf + 16 * (size_t) hd;
	float	   *scores = vf + V_SPAN * (size_t) hd;
	float	   *vsum = scores + (size_t) Q * npad;

	/* the keys' cache rows (blocks scattered over the pool): offsets once */
	{
		int			blk = jlo / a->block_size,
					off = jlo % a->block_size;

		for (int j = jlo; j <= jhi; j++)
		{
			rowoff[j - jb] = llm_kv_row_index(a->block_table[blk], off, a->kv_head, a->n_kv_heads,
											  a->block_size) * (size_t) row_bytes;
			if (++off == a->block_size)
			{
				off = 0;
				blk++;
			}
		}
	}

	/* K pass: per key block of 16, its rows converted once, then every query head */
	for (int j0 = jb; j0 <= jhi; j0 += 16)
	{
		const int	ks = j0 > jlo ? j0 : jlo,
					ke = j0 + 15 < jhi ? j0 + 15 : jhi;

		for (int j = ks; j <= ke; j++)
		{
			const uint8_t *k = a->k_cache + rowoff[j - jb];

			if (j + 16 <= jhi)
				PREFETCH_ROW(a->k_cache + rowoff[j + 16 - jb], row_bytes, _MM_HINT_T0);
			for (int c = 0; c < hd; c += 8)
				_mm256_storeu_ps(kf + (size_t) (j - j0) * hd + c, load_kv8(k, c, q8));
		}
		for (int a0 = 0; a0 < Q; a0 += 3)
		{
			const float *q = a->q + (size_t) a0 * hd;
			float	   *s = scores + (size_t) a0 * npad;

			/* 4 keys from a multiple of 4; keys outside ks..ke only give masked scores */
			for (int k = (ks - j0) & ~3; k <= ke - j0; k += 4)
			{
				const float *kk = kf + (size_t) k * hd;
				float	   *sk = s + (j0 + k - jb);

				switch (Q - a0 < 3 ? Q - a0 : 3)
				{
					case 1:
						qk_quad(q, kk, hd, a->scale, sk, npad, 1);
						break;
					case 2:
						qk_quad(q, kk, hd, a->scale, sk, npad, 2);
						break;
					default:
						qk_quad(q, kk, hd, a->scale, sk, npad, 3);
						break;
				}
			}
		}
	}

	/* softmax per query head over its keys, as attend_avx2 (ggml_vec_soft_max_f32) */
	for (int i = 0; i < nq; i++)
		for (int h = 0; h < G; h++)
		{
			if (a->softcap > 0.0f)
				llm_attn_softcap_row(scores + (size_t) (i * G + h) * npad, lo[i] - jb, hi[i] - jb + 1,
									 a->softcap, a->cap_scale);
			softmax_row(scores + (size_t) (i * G + h) * npad, npad, lo[i] - jb, hi[i] - jb + 1);
		}

	/*
	 * V pass: per span of V_SPAN keys, the V rows converted once; per query,
	 * lane row l (keys j = l mod 16, absolute) and 16 dims, the sums of up to
	 * 4 heads in registers across the span's keys.
	 */
	memset(vsum, 0, (size_t) Q * 16 * hd * sizeof(float));
	for (int s0 = jb; s0 <= jhi; s0 += V_SPAN)
	{
		const int	ss = s0 > jlo ? s0 : jlo,
					se = s0 + V_SPAN - 1 < jhi ? s0 + V_SPAN - 1 : jhi;

		for (int j = ss; j <= se; j++)
		{
			const uint8_t *v = a->v_cache + rowoff[j - jb];

			if (j + V_SPAN <= jhi)
				PREFETCH_ROW(a->v_cache + rowoff[j + V_SPAN - jb], row_bytes, _MM_HINT_T1);
			for (int c = 0; c < hd; c += 8)
				_mm256_storeu_ps(vf + (size_t) (j - s0) * hd + c, load_kv8(v, c, q8));
		}
		for (int i = 0; i < nq; i++)
		{
			const int	js = ss > lo[i] ? ss : lo[i],
						je = se < hi[i] ? se : hi[i];

			if (js > je)
				continue;
			for (int h0 = 0; h0 < G; h0 += 4)
			{
				const int	hg = G - h0 < 4 ? G - h0 : 4;
				const float *p[4];

				for (int h = 0; h < hg; h++)
					p[h] = scores + (size_t) (i * G + h0 + h) * npad;
				for (int l = 0; l < 16; l++)
				{
					const int	jf = js + ((l - js) & 15);
					float	   *acc[4];

					if (jf > je)
						continue;
					for (int h = 0; h < hg; h++)
						acc[h] = vsum + ((size_t) (i * G + h0 + h) * 16 + l) * hd;
					for (int c = 0; c < hd; c += 16)
						switch (hg)
						{
							case 1:
								pv_lane(vf, s0, p, jb, acc, jf, je, hd, c, 1);
								break;
							case 2:
								pv_lane(vf, s0, p, jb, acc, jf, je, hd, c, 2);
								break;
							case 3:
								pv_lane(vf, s0, p, jb, acc, jf, je, hd, c, 3);
								break;
							default:
								pv_lane(vf, s0, p, jb, acc, jf, je, hd, c, 4);
								break;
						}
				}
			}
		}
	}

	/* out[d] = reduce16 over the 16 lane rows */
	for (int qh = 0; qh < Q; qh++)
	{
		const float *vs = vsum + (size_t) qh * 16 * hd;

		for (int c = 0; c < hd; c += 8)
		{
			__m256		t3[8],
						t6[4];

			for (int l = 0; l < 8; l++)
				t3[l] = _mm256_add_ps(_mm256_loadu_ps(vs + (l + 8) * hd + c), _mm256_loadu_ps(vs + l * hd + c));
			for (int l = 0; l < 4; l++)
				t6[l] = _mm256_add_ps(t3[l + 4], t3[l]);
			_mm256_storeu_ps(a->out + (size_t) (qh / G) * a->out_stride + (size_t) (qh % G) * hd + c,
							 _mm256_add_ps(_mm256_add_ps(t6[0], t6[2]), _mm256_add_ps(t6[1], t6[3])));
		}
	}
}

static TGT void
attend_block_avx2(const llm_attn_block_args *a)
{
	if (a->kv_dtype == LLM_KV_Q8_0)
		attend_block_impl(a, true);
	else
		attend_block_impl(a, false);
}

llm_attn_fn
llm_attn_kernel_avx2_get(void)
{
	return attend_avx2;
}

llm_attn_block_fn
llm_attn_block_avx2_get(void)
{
	return attend_block_avx2;
}

const llm_attn_split *
llm_attn_split_avx2_get(void)
{
	return &split_avx2;
}

#else							/* not x86 */

llm_attn_fn
llm_attn_kernel_avx2_get(void)
{
	return NULL;
}

llm_attn_block_fn
llm_attn_block_avx2_get(void)
{
	return NULL;
}

const llm_attn_split *
llm_attn_split_avx2_get(void)
{
	return NULL;
}

#endif
