/*
 * quant_q5_0.c — AVX2 matmul kernels of Q5_0 weights x Q8_0 activations
 * (declared in quant_x86.h; the scalar reference is quant.c's
 * dot_q5_0_q8_0).  Depends on quant.c only (activation layout).
 *
 * Arithmetic of ggml_vec_dot_q5_0_q8_0's AVX2 branch, which the scalar
 * reference spells out: per block of 32, the weights as signed bytes -16..15
 * (low nibble | fifth bit << 4, minus 16), 8 int32 lanes each summing the
 * products of 4 consecutive elements (maddubs of |w| with sign-adjusted
 * activations, then madd), converted to float and accumulated with one fused
 * multiply-add per lane by d_w * d_a; the 8 lanes reduced in
 * hsum_float_8's order.  |w| <= 16 and |a| <= 127 keep the int16 pair sums of
 * maddubs far from saturation, so the integers are exact and every
 * implementation gives the same bits.
 *
 * The tile kernel computes R weight rows x T activation rows per call (R, T
 * <= 4, constants after inlining) so that a block, once unpacked, serves
 * every token of the tile; the per-(row, token) operations are those of the
 * single dot product, which keeps matmul batch invariant.  No expression
 * here is of the form a*b+c in plain C (GCC would contract it).
 *
 * Batched matmuls (8 tokens or more) do not use the tile: the weights are
 * signed bytes after unpacking, so a Q5_0 row is a Q8_0 row with the same
 * scales, and convert_q5_0_x4 writes the rows a matmul is about to use in
 * quant_packed_avx2.c's Q8_0 layout (groups of 4 rows), whose tiles then
 * serve every token; each block is unpacked once per batch instead of once
 * per 4 tokens (quant.h batch_kernel).  The layout is that file's; this
 * file calls none of its functions (dispatch.c joins the two kernels).
 * On CPUs with AVX512BW/VNNI, dispatch.c replaces that batch path of the
 * VNNI kernel by quant_packed.c's conversion into its packed Q8_0 rows.
 */
#include "quant.h"
#include "quant_x86.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "simd_x86.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

#define Q5_MAXR 4
#define Q5_MAXT 4
/* bytes ahead in each weight row's stream (as the other integer tiles) */
#define Q5_PREFETCH_BYTES 352
/*
 * Tokens from which a matmul converts rows to Q8_0 groups (convert_q5_0_x4)
 * rather than unpacking each block once per tile of 4 tokens.
 */
#ifndef Q5_BATCH_MIN_TOKENS
#define Q5_BATCH_MIN_TOKENS 8
#endif

/* The 32 weights of a block as signed bytes -16..15, element j in byte j. */
INL __m256i
q5_0_unpack(const llm_block_q5_0 *x)
{
	__m128i		t = _mm_loadu_si128((const __m128i *) x->qs);
	__m256i		nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
	uint32_t	qh;
	__m256i		bits;
	const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ULL);

	memcpy(&qh, x->qh, sizeof(qh));
	/* byte j = byte j / 8 of qh (a broadcast, so the in-lane shuffle reaches all four) */
	bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int) qh),
							   _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
												2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
	bits = _mm256_cmpeq_epi8(_mm256_and_si256(bits, bit), bit);	/* 0xFF where the fifth bit is set */
	/* fifth bit clear: nibble - 16, i.e. nibble | 0xF0 as a signed byte */
	return _mm256_or_si256(nib, _mm256_andnot_si256(bits, _mm256_set1_epi8((char) 0xF0)));
}

INL __m256
mul_sum_us8(__m256i ux, __m256i sy)
{
	return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ux, sy), _mm256_set1_epi16(1)));
}

static inline __attribute__((always_inline)) TGT void
q5_0_tile(int64_t n, const void *w, size_t ws, const void *a, size_t as, float *out, size_t os,
		  const int R, const int T)
{
	const int64_t nb = n / LLM_QK;
	__m256		acc[Q5_MAXR][Q5_MAXT];
	const int8_t *aq[Q5_MAXT];
	const float *ad[Q5_MAXT];

	#pragma GCC unroll 4
	for (int t = 0; t < T; t++)
	{
		aq[t] = (const int8_t *) ((const char *) a + t * as);
		ad[t] = llm_act_d((const char *) a + t * as, n);
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			acc[r][t] = _mm256_setzero_ps();
	}
	for (int64_t ib = 0; ib < nb; ib++)
	{
		__m256i		qx[Q5_MAXR],
					ax[Q5_MAXR];
		__m256		dx[Q5_MAXR];

		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
		{
			const llm_block_q5_0 *x = (const llm_block_q5_0 *) ((const char *) w + r * ws) + ib;

			_mm_prefetch((const char *) x + Q5_PREFETCH_BYTES, _MM_HINT_T0);
			dx[r] = _mm256_set1_ps(_cvtsh_ss(x->d));
			qx[r] = q5_0_unpack(x);
			ax[r] = _mm256_sign_epi8(qx[r], qx[r]);
		}
		#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
		{
			__m256i		qy = _mm256_loadu_si256((const __m256i *) (aq[t] + ib * LLM_QK));
			__m256		dy = _mm256_broadcast_ss(ad[t] + ib);

			#pragma GCC unroll 4
			for (int r = 0; r < R; r++)
				acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx[r], dy),
											mul_sum_us8(ax[r], _mm256_sign_epi8(qy, qx[r])), acc[r][t]);
		}
	}
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
			out[t * os + r] = llm_hsum8(acc[r][t]);
}

static TGT void
tile_q5_0_avx2(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
			   float *out, size_t os)
{
	switch (nr * 8 + nt)
	{
		case 1 * 8 + 1: q5_0_tile(n, w, ws, a, as, out, os, 1, 1); break;
		case 1 * 8 + 2: q5_0_tile(n, w, ws, a, as, out, os, 1, 2); break;
		case 1 * 8 + 3: q5_0_tile(n, w, ws, a, as, out, os, 1, 3); break;
		case 1 * 8 + 4: q5_0_tile(n, w, ws, a, as, out, os, 1, 4); break;
		case 2 * 8 + 1: q5_0_tile(n, w, ws, a, as, out, os, 2, 1); break;
		case 2 * 8 + 2: q5_0_tile(n, w, ws, a, as, out, os, 2, 2); break;
		case 2 * 8 + 3: q5_0_tile(n, w, ws, a, as, out, os, 2, 3); break;
		case 2 * 8 + 4: q5_0_tile(n, w, ws, a, as, out, os, 2, 4); break;
		default:
			for (int t0 = 0; t0 < nt; t0++)
				for (int r0 = 0; r0 < nr; r0++)
					q5_0_tile(n, (const char *) w + r0 * ws, ws, (const char *) a + t0 * as, as,
							  out + t0 * os + r0, os, 1, 1);
	}
}

static TGT float
dot_q5_0_avx2(int64_t n, const void *w, const void *a)
{
	float		r;

	q5_0_tile(n, w, 0, a, 0, &r, 0, 1, 1);
	return r;
}

/*
 * Batched matmuls: nr rows (a multiple of 4) -> Q8_0 rows in groups of 4
 * (quant_packed_avx2.c's layout: per group uint16 d[4][nb], then int8
 * qs[nb][4][32], block b of row r at qs[b][r]), each weight as the signed
 * byte -16..15 q5_0_unpack gives and the block's fp16 scale as is.  A
 * Q8_0 dot product of a converted row is then the Q5_0 one operation for
 * operation (|q| and sign(a, q) into maddubs, madd, the conversion and
 * fma(d_w * d_a, lanes, acc) per block, hsum8), so the results are the
 * same bits, and each block is unpacked once for every token of the batch.
 */
static TGT void
convert_q5_0_x4(int64_t n, const void *w, size_t ws, int nr, void *dst)
{
	const int64_t nb = n / LLM_QK;
	const size_t gb = (size_t) 4 * (size_t) nb * sizeof(llm_block_q8_0);	/* bytes of a group */

	for (int g = 0; g < nr / 4; g++)
	{
		uint16_t   *d = (uint16_t *) ((char *) dst + (size_t) g * gb);
		int8_t	   *qs = (int8_t *) (d + 4 * nb);

		for (int r = 0; r < 4; r++)
		{
			const llm_block_q5_0 *x = (const llm_block_q5_0 *) ((const char *) w + (size_t) (4 * g + r) * ws);

			for (int64_t b = 0; b < nb; b++)
			{
				d[r * nb + b] = x[b].d;
				_mm256_storeu_si256((__m256i *) (qs + (b * 4 + r) * LLM_QK), q5_0_unpack(&x[b]));
			}
		}
	}
}

bool
llm_qkernel_q5_0_avx2(const llm_qkernel *q8_0, const llm_qkernel *q8_0_x4, llm_qkernel *out)
{
	if (q8_0 == NULL || q8_0->act_type != LLM_TYPE_Q8_0)
		return false;
	*out = *q8_0;				/* the Q8_0 kernel's activation quantization, shared by matmul_multi */
	out->weight_type = LLM_TYPE_Q5_0;
	out->impl = "avx2";
	out->dot = dot_q5_0_avx2;
	out->dot_tile = tile_q5_0_avx2;
	out->tile_rows = 2;
	out->tile_tokens = 4;
	out->repack = NULL;
	out->unpack = NULL;
	out->row_group = 1;
	out->batch_kernel = NULL;
	out->batch_convert = NULL;
	out->batch_min_tokens = 0;
	if (q8_0_x4 != NULL && q8_0_x4->weight_type == LLM_TYPE_Q8_0 && q8_0_x4->row_group == 4 &&
		q8_0_x4->quantize_act == q8_0->quantize_act)
	{
		out->batch_kernel = q8_0_x4;
		out->batch_convert = convert_q5_0_x4;
		out->batch_min_tokens = Q5_BATCH_MIN_TOKENS;
	}
	return true;
}

#else							/* not x86 */

bool
llm_qkernel_q5_0_avx2(const llm_qkernel *q8_0, const llm_qkernel *q8_0_x4, llm_qkernel *out)
{
	return false;
}

#endif
