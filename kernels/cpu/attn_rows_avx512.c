/*
 * attn_rows_avx512.c — elementwise.c's llm_attention_rows_one in 512-bit
 * registers for the encoders' case (bidirectional, no window, no
 * soft-cap, head_dim a multiple of 16), bit-identical to it; other cases
 * run llm_attention_rows_one itself.
 *
 * Scores.  attn_score sums q.k in 16 running sums (element i into sum
 * i % 16, each a multiply then an add: elementwise.c is compiled without
 * FMA), then folds them 8 + 8, 4 + 4, 2 + 2, 1 + 1 and multiplies by the
 * scale.  Here one key's 16 running sums are one vector (the same
 * multiplies and adds, lane j = sum j), and 16 keys' vectors are folded
 * together by a transposing tree: each level adds the same pairs of sums
 * as attn_score's fold, two keys' halves side by side, so the last level
 * leaves 16 finished scores in one vector (key k + 4e in lane 4k + e, put
 * back in key order by one permute).  A sequence's last keys (fewer than
 * 16) take attn_score's scalar path through llm_attention_rows_one's
 * code: the same operations.
 *
 * Softmax and values: the maximum, then expf (libm, as the scalar code)
 * and the running sum of the weights in key order, and out += e * v
 * (multiply then add) a vector of head elements at a time; the same
 * operations in the same order per element.
 *
 * Needs AVX512F (cpu_attention.c uses it with the VNNI implementation).
 */
#include "elementwise.h"

#include <math.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT_A __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))
#define INL_A static inline __attribute__((always_inline)) TGT_A

/* One transposing fold level: a's and b's pairs of sums added, imm selecting halves of 256 or 128 bits. */
#define FOLD_X4(a, b, lo_imm, hi_imm) \
	_mm512_add_ps(_mm512_shuffle_f32x4((a), (b), (lo_imm)), _mm512_shuffle_f32x4((a), (b), (hi_imm)))
#define FOLD_PS(a, b, lo_imm, hi_imm) \
	_mm512_add_ps(_mm512_shuffle_ps((a), (b), (lo_imm)), _mm512_shuffle_ps((a), (b), (hi_imm)))

/*
 * The 16 running sums of 16 keys (v[u], lane j = sum j of key u) -> the 16
 * folded sums in key order.  Level 1 adds sums j and j + 8 (two keys per
 * vector, one per 256-bit half), level 2 j and j + 4 (one key per 128-bit
 * lane), levels 3 and 4 j and j + 2, then j and j + 1 within the lanes.
 */
INL_A __m512
fold16(const __m512 v[16])
{
	__m512		c[8],
				e[4],
				g[2],
				r;

	for (int m = 0; m < 8; m++)
		c[m] = FOLD_X4(v[2 * m], v[2 * m + 1], 0x44, 0xEE);
	for (int m = 0; m < 4; m++)
		e[m] = FOLD_X4(c[2 * m], c[2 * m + 1], 0x88, 0xDD);
	for (int m = 0; m < 2; m++)
		g[m] = FOLD_PS(e[2 * m], e[2 * m + 1], 0x44, 0xEE);
	r = FOLD_PS(g[0], g[1], 0x88, 0xDD);
	/* lane 4k + e holds key k + 4e */
	return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

/* Scores of keys u0 .. u0+15 (rows ks floats apart) for query qh, scaled, into sc. */
INL_A void
scores16(const float *qh, const float *k, size_t ks, int hd, float scale, float *sc)
{
	__m512		v[16];

	for (int u = 0; u < 16; u++)
	{
		const float *kh = k + (size_t) u * ks;
		__m512		acc = _mm512_setzero_ps();

		for (int i = 0; i < hd; i += 16)
			acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(qh + i), _mm512_loadu_ps(kh + i)));
		v[u] = acc;
	}
	_mm512_storeu_ps(sc, _mm512_mul_ps(fold16(v), _mm512_set1_ps(scale)));
}

/* attn_score of elementwise.c for one key (no soft-cap): the tail keys. */
INL_A float
score_one(const float *qh, const float *kh, int hd, float scale)
{
	float		acc[16] = {0};

	for (int i = 0; i < hd; i += 16)
		for (int j = 0; j < 16; j++)
			acc[j] += qh[i + j] * kh[i + j];
	for (int w = 8; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			acc[j] += acc[j + w];
	return acc[0] * scale;
}

TGT_A void
llm_attention_rows_one_avx512(const llm_step_desc *d, int s, int t, int h, const float *q, const float *k,
							  const float *v, float *out, int n_heads, int n_kv_heads, int head_dim,
							  const llm_attn_opts *o, float *sc)
{
	const int	group = n_heads / n_kv_heads;
	const int	u0 = d->seq_start[s],
				u1 = d->seq_start[s + 1];
	const int	g = h / group;
	const size_t ks = (size_t) n_kv_heads * head_dim;
	const float *qh = q + ((size_t) t * n_heads + h) * head_dim;
	float	   *oh = out + ((size_t) t * n_heads + h) * head_dim;
	float		mx = -INFINITY,
				sum = 0.0f;
	int			u = u0;

	if (o->causal || o->window > 0 || o->softcap > 0.0f || head_dim % 16 != 0 || head_dim > 256)
	{
		llm_attention_rows_one(d, s, t, h, q, k, v, out, n_heads, n_kv_heads, head_dim, o, sc);
		return;
	}
	for (; u + 16 <= u1; u += 16)
		scores16(qh, k + (size_t) u * ks + (size_t) g * head_dim, ks, head_dim, o->scale, sc + (u - u0));
	for (; u < u1; u++)
		sc[u - u0] = score_one(qh, k + (size_t) u * ks + (size_t) g * head_dim, head_dim, o->scale);
	for (u = u0; u < u1; u++)
		if (sc[u - u0] > mx)
			mx = sc[u - u0];
	{
		__m512		acc[16];
		const int	nv = head_dim / 16;

		for (int i = 0; i < nv; i++)
			acc[i] = _mm512_setzero_ps();
		for (u = u0; u < u1; u++)
		{
			const float *vh = v + (size_t) u * ks + (size_t) g * head_dim;
			const float e = expf(sc[u - u0] - mx);
			const __m512 ev = _mm512_set1_ps(e);

			sum += e;
			for (int i = 0; i < nv; i++)
				acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(ev, _mm512_loadu_ps(vh + 16 * i)));
		}
		for (int i = 0; i < nv; i++)
			_mm512_storeu_ps(oh + 16 * i, sum > 0.0f ? _mm512_div_ps(acc[i], _mm512_set1_ps(sum)) : acc[i]);
	}
}

#endif
