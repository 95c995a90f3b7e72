/*
 * attn_scalar.c — the scalar twins of the vector attention and activation
 * kernels (quant.h): ggml's exp, SwiGLU, one query token's attention over
 * its GQA group and a block of query tokens.  Plain C for any CPU; the
 * vector versions (attn_avx2.c, quant_avx2.c) perform the same operations.
 */
#include "quant.h"

#include <math.h>
#include <string.h>
#include <float.h>

/* ------------------------------------------------------------------------
 * Attention (scalar twin of quant_avx2.c attend_avx2; see quant.h)
 * ------------------------------------------------------------------------ */

/*
 * exp as ggml's vectorised ggml_v_expf of an AVX512 build (an adaptation
 * of ARM's optimized-routines expf, max error 1.45 + 0.5 ulp):
 * n = round(x / ln2) via the 1.5*2^23 shifter, b = x - n ln2 in two fused
 * steps, a degree-5 polynomial, then scaling by 2^n with one rounding
 * (scalef).  llama.cpp uses it for softmax and SiLU, so using the same
 * function keeps our activations bit-identical to the oracle's there.
 */
#define GEXP_SHIFT 0x1.8p23f
#define GEXP_LOG2E 0x1.715476p+0f
#define GEXP_LN2_HI 0x1.62e4p-1f
#define GEXP_LN2_LO 0x1.7f7d1cp-20f
#define GEXP_C1 0x1.ffffecp-1f
#define GEXP_C2 0x1.fffdb6p-2f
#define GEXP_C3 0x1.555e66p-3f
#define GEXP_C4 0x1.573e2ep-5f
#define GEXP_C5 0x1.0e4020p-7f

static inline float
pow2i(int e)					/* 2^e for -126 <= e <= 127 */
{
	return bits_f32((uint32_t) (e + 127) << 23);
}

/* j * 2^n with a single rounding, as vscalefps (|n| <= 192). */
static inline float
scale_pow2(float j, int n)
{
	if (n < -126)
		return (j * pow2i(n + 100)) * pow2i(-100);
	if (n > 127)
		return (j * pow2i(127)) * pow2i(n - 127);
	return j * pow2i(n);
}

float
llm_expf(float x)
{
	float		z = fmaf(x, GEXP_LOG2E, GEXP_SHIFT);
	float		n = z - GEXP_SHIFT;
	float		b = fmaf(-n, GEXP_LN2_LO, fmaf(-n, GEXP_LN2_HI, x));
	float		u = b * b;
	float		j = fmaf(fmaf(fmaf(GEXP_C5, b, GEXP_C4), u, fmaf(GEXP_C3, b, GEXP_C2)), u,
						 fmaf(GEXP_C1, b, 1.0f));

	if (!(fabsf(n) <= 192.0f))	/* also NaN n from x = -inf */
		return n <= 0 ? 0.0f : INFINITY;
	return scale_pow2(j, (int) n);
}

/* out = silu(gate) * up with ggml_v_silu's x / (1 + exp(-x)). */
void
llm_swiglu_scalar(const float *gate, const float *up, float *out, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
	{
		float		x = gate[i];

		out[i] = (x / (1.0f + llm_expf(0.0f - x))) * up[i];
	}
}

/* _mm512_reduce_add_ps order (GCC avx512fintrin.h) of 16 floats. */
static inline float
reduce16(const float e[16])
{
	float		t3[8],
				t6[4];

	for (int i = 0; i < 8; i++)
		t3[i] = e[i + 8] + e[i];
	for (int i = 0; i < 4; i++)
		t6[i] = t3[i + 4] + t3[i];
	return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

void
llm_attn_softcap_row(float *sc, int r0, int r1, float cap, float post)
{
	for (int r = r0; r < r1; r++)
		sc[r] = (tanhf(sc[r]) * cap) * post;
}

size_t
llm_attn_scratch_floats(int group, int head_dim, int n_keys)
{
	size_t		npad = ((size_t) n_keys + 15) & ~(size_t) 15;

	/*
	 * key row offsets [npad] (as 2 * npad floats), scores [group][npad],
	 * V sums [group][64][head_dim], rows [8][head_dim], inv [group]
	 */
	return 2 * npad + (size_t) group * npad + (size_t) group * 64 * head_dim + 8 * (size_t) head_dim +
		(size_t) group + 16;
}

/*
 * ggml_vec_dot_f16's reduction of its 4 x 16 accumulators (AVX512 build):
 * v0 += v2, v1 += v3, v0 += v1, then reduce16, as a double.
 */
static inline double
combine64(const float acc[64])
{
	float		c[16];

	for (int l = 0; l < 16; l++)
		c[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]);
	return (double) reduce16(c);
}

/*
 * Scores and probabilities live at index j - j0 for keys j >= j0, j0 the
 * first key rounded down to a multiple of 16: the softmax sum's chunks of 16
 * are aligned on absolute positions, and keys before first_key hold p = 0.
 */
void
llm_attn_scalar(const llm_attn_args *a)
{
	const int	hd = a->head_dim,
				n = a->n_keys,
				k0 = a->first_key,
				j0 = k0 & ~15,
				G = a->group;
	const size_t npad = ((size_t) (n - j0) + 15) & ~(size_t) 15;
	float	   *scores = a->scratch;
	float	   *vsum = scores + (size_t) G * npad;	/* [G][R][hd] */

	/* scores: 16 lanes over head_dim, fma chains, reduce16 (tinyBLAS order) */
	for (int j = k0; j < n; j++)
	{
		const uint8_t *k = a->k_cache + llm_attn_key_offset(a, j);

		for (int h = 0; h < G; h++)
		{
			const float *q = a->q + (size_t) h * hd;
			float		acc[64] = {0};

			if (!a->single)
			{
				for (int c = 0; c < hd; c += 16)
					for (int l = 0; l < 16; l++)
						acc[l] = fmaf(llm_kv_value(k, a->kv_dtype, c + l), q[c + l], acc[l]);
				scores[h * npad + (j - j0)] = reduce16(acc) * a->scale;
			}
			else
			{
				int			np = hd & ~63;
				double		sum;

				for (int c = 0; c < np; c += 64)
					for (int l = 0; l < 64; l++)
						acc[l] = fmaf(llm_kv_value(k, a->kv_dtype, c + l), q[c + l], acc[l]);
				sum = combine64(acc);
				for (int i = np; i < hd; i++)
					sum += (double) (llm_kv_value(k, a->kv_dtype, i) * q[i]);
				scores[h * npad + (j - j0)] = (float) sum * a->scale;
			}
		}
	}
	for (int h = 0; h < G; h++)
	{
		float	   *sc = scores + h * npad;
		float		mx = -INFINITY,
					inv;
		double		sum = 0.0;

		if (a->softcap > 0.0f)
			llm_attn_softcap_row(sc, k0 - j0, n - j0, a->softcap, a->cap_scale);

		for (int r = k0 - j0; r < n - j0; r++)
			mx = sc[r] > mx ? sc[r] : mx;
		for (int r = k0 - j0; r < n - j0; r++)
			sc[r] = llm_expf(sc[r] - mx);
		for (int r = 0; r < k0 - j0; r++)
			sc[r] = 0.0f;
		for (int r = n - j0; r < (int) npad; r++)
			sc[r] = 0.0f;
		for (size_t r0 = 0; r0 < npad; r0 += 16)
			sum += (double) reduce16(sc + r0);
		inv = (float) (1.0 / sum);
		for (int r = k0 - j0; r < n - j0; r++)
			sc[r] = llm_fp16_to_fp32(llm_fp32_to_fp16(sc[r] * inv));
	}
	/* V sums: key j accumulates into lane row j % R (R = 16, or 64 when single) */
	{
		const int	R = a->single ? 64 : 16;

		memset(vsum, 0, (size_t) G * R * hd * sizeof(float));
		for (int j = k0; j < n; j++)
		{
			const uint8_t *v = a->v_cache + llm_attn_key_offset(a, j);

			for (int h = 0; h < G; h++)
			{
				float		p = scores[h * npad + (j - j0)];
				float	   *acc = vsum + ((size_t) h * R + (j & (R - 1))) * hd;

				for (int d = 0; d < hd; d++)
					acc[d] = fmaf(llm_kv_value(v, a->kv_dtype, d), p, acc[d]);
			}
		}
		for (int h = 0; h < G; h++)
			for (int d = 0; d < hd; d++)
			{
				float		lanes[64];

				for (int l = 0; l < R; l++)
					lanes[l] = vsum[((size_t) h * R + l) * hd + d];
				a->out[(size_t) h * hd + d] = a->single ? (float) combine64(lanes) : reduce16(lanes);
			}
	}
}

size_t
llm_attn_block_scratch_floats(int n_q, int group, int head_dim, int n_keys)
{
	size_t		npad = ((size_t) n_keys + 15) & ~(size_t) 15;
	size_t		q = (size_t) n_q * (size_t) group;
	/*
	 * attn_avx2.c's block kernel: key row offsets [npad + 16] (as
	 * 2 * (npad + 16) floats), K rows [16][head_dim], V rows
	 * [LLM_ATTN_BLOCK_VKEYS][head_dim],
	 * scores [q][npad + 16], V sums [q][16][head_dim]; the scalar one runs
	 * llm_attn_scalar per query
	 */
	size_t		blk = 2 * (npad + 16) + 16 * (size_t) head_dim + LLM_ATTN_BLOCK_VKEYS * (size_t) head_dim +
		q * (npad + 16) + q * 16 * (size_t) head_dim + 64;
	size_t		one = llm_attn_scratch_floats(group, head_dim, n_keys);

	return blk > one ? blk : one;
}

void
llm_attn_block_scalar(const llm_attn_block_args *b)
{
	for (int i = 0; i < b->n_q; i++)
	{
		llm_attn_args a = {
			.q = b->q + (size_t) i * b->group * b->head_dim,
			.out = b->out + (size_t) i * b->out_stride,
			.group = b->group,
			.head_dim = b->head_dim,
			.n_keys = b->pos0 + i + 1,
			.scale = b->scale,
			.k_cache = b->k_cache,
			.v_cache = b->v_cache,
			.kv_dtype = b->kv_dtype,
			.n_kv_heads = b->n_kv_heads,
			.kv_head = b->kv_head,
			.block_table = b->block_table,
			.block_size = b->block_size,
			.single = 0,
			.scratch = b->scratch,
			.softcap = b->softcap,
			.cap_scale = b->cap_scale,
		};

		a.first_key = b->window > 0 && a.n_keys > b->window ? a.n_keys - b->window : 0;
		llm_attn_scalar(&a);
	}
}
