/*
 * quant_q6k_packed.c — Q6_K matmul over rows repacked at load into groups
 * of 8 interleaved rows, for CPUs with AVX512F/VL/BW/VNNI, in both Q6_K row
 * forms (quant.h "Row forms": the ggml_vec_dot_q6_K_q8_K order for tokens
 * without LLM_ROW_WIDE, the tiled order of wide batches for the others),
 * for matrices of a multiple of 8 rows.  Results are bit-identical to the
 * GGUF-layout kernels (quant_q6k_vnni.c, quant_avx2.c, the scalar forms).
 *
 * Why: the GGUF-layout kernel runs one row per 512-bit vector (two of the
 * row's 32-element vectors side by side), scales each vpdpbusd result by
 * its own vpmaddwd (half the integer multiplies) and folds the 8 int32
 * lanes of every (row, token, super-block) into one 256-bit FMA after a
 * 512 -> 256 reduction, a 256-bit bsums product and a scalar d_a * d.
 * Here one vector holds one 32-element vector of two rows, the lane sums
 * of two vectors share one vpdpwssd (scale and accumulate), and the
 * correction, the conversion and the FMA of a super-block serve two rows
 * at once.
 *
 * The float steps need exactly the AVX2 kernel's 8 int32 lanes per
 * (row, token, super-block) (quant_q6k_vnni.c says which): lane l holds
 * elements 4l .. 4l+3 of each of the super-block's 8 vectors of 32, times
 * the scale of their 16-element half, minus 32 * (bsums[2l] * sc[2l] +
 * bsums[2l+1] * sc[2l+1]).  Here lane (p, l) of a vector (p: which of the
 * two rows, l = 0..7) is that lane of row 2P + p; vpdpbusd's 4-element
 * lane sums of vectors 2m and 2m + 1 (|s| <= 4 * 63 * 128, int16 range)
 * are put side by side as an int16 pair (one masked vpshufb) and one
 * vpdpwssd adds sum * scale for both; the correction is one more vpdpwssd
 * of the bsums against -32 * scales.  So every int32 lane is the same
 * integer (integer sums, no overflow: their order is free).  Float
 * steps per lane are the scalar form's: vec-dot form fma(d_a * d, lane,
 * acc) then llm_hsum8 of the row's 8 lanes; wide form the lanes summed as
 * integers, then fma(float(sum) * d, d_a, acc).
 *
 * Layout of a group of 8 rows (rows 8g .. 8g+7; the group keeps the GGUF
 * size, 8 x row_bytes, at the first row's offset), per super-block b,
 * 1680 bytes (= 8 x sizeof(llm_block_q6_K)) at group + 1680 b:
 *   uint8  q[4][2][3][64]   pair P (rows 2P, 2P+1), half h (elements
 *                           128h ..), part: ql[64h .. 64h+31],
 *                           ql[64h+32 .. 64h+63], qh[32h .. 32h+31]; each
 *                           part's 64 bytes are row 2P's 32 then row
 *                           2P+1's
 *   int8   scales[8][16]    row r's 16 scales
 *   uint16 d[8]             row r's fp16 d
 * So one 64-byte load of each part gives two rows' bytes in the two 256-bit
 * halves, and the 6-bit values of vector 4h + k of both rows come out of
 * the three parts with the GGUF kernel's masks and shifts.
 */
#include "quant.h"
#include "quant_x86.h"
#include "simd_x86.h"

#include <pthread.h>
#include <string.h>

#define Q6KP_ROWS 8
#define Q6KP_BLOCK (Q6KP_ROWS * sizeof(llm_block_q6_K))	/* bytes per super-block of a group */
#define Q6KP_SC 1536			/* offset of the scales in a group's super-block */
#define Q6KP_D 1664				/* offset of the d values */
#define Q6KP_TOKS 8				/* tokens per pass over a group */

/* ---- layout (plain C: repack at load, unpack for embedding lookups) ---- */

/* Offset in a group's super-block of part `part` (0: ql lo, 1: ql hi, 2: qh) of half h, row r. */
static inline size_t
q_off(int r, int h, int part)
{
	return (size_t) 384 * (r / 2) + 192 * h + 64 * part + 32 * (r % 2);
}

static bool
repack_q6_K_x8(const void *src, void *dst, int64_t n_rows, int64_t n)
{
	const int64_t nb = n / LLM_QK_K;
	const size_t rb = (size_t) nb * sizeof(llm_block_q6_K);

	if (n % LLM_QK_K != 0 || n_rows % Q6KP_ROWS != 0)
		return false;
	for (int64_t g = 0; g < n_rows / Q6KP_ROWS; g++)
	{
		const char *gs = (const char *) src + (size_t) g * Q6KP_ROWS * rb;
		uint8_t    *gd = (uint8_t *) dst + (size_t) g * Q6KP_ROWS * rb;

		for (int64_t b = 0; b < nb; b++)
		{
			uint8_t    *o = gd + (size_t) b * Q6KP_BLOCK;

			for (int r = 0; r < Q6KP_ROWS; r++)
			{
				const llm_block_q6_K *x = (const llm_block_q6_K *) (gs + (size_t) r * rb) + b;

				for (int h = 0; h < 2; h++)
				{
					memcpy(o + q_off(r, h, 0), x->ql + 64 * h, 32);
					memcpy(o + q_off(r, h, 1), x->ql + 64 * h + 32, 32);
					memcpy(o + q_off(r, h, 2), x->qh + 32 * h, 32);
				}
				memcpy(o + Q6KP_SC + 16 * r, x->scales, 16);
				memcpy(o + Q6KP_D + 2 * r, &x->d, 2);
			}
		}
	}
	return true;
}

static void
unpack_q6_K_x8(const void *w, int64_t row, void *dst, int64_t n)
{
	const int64_t nb = n / LLM_QK_K;
	const size_t rb = (size_t) nb * sizeof(llm_block_q6_K);
	const uint8_t *g = (const uint8_t *) w + (size_t) (row / Q6KP_ROWS) * Q6KP_ROWS * rb;
	const int	r = (int) (row % Q6KP_ROWS);
	llm_block_q6_K *x = dst;

	for (int64_t b = 0; b < nb; b++)
	{
		const uint8_t *o = g + (size_t) b * Q6KP_BLOCK;

		for (int h = 0; h < 2; h++)
		{
			memcpy(x[b].ql + 64 * h, o + q_off(r, h, 0), 32);
			memcpy(x[b].ql + 64 * h + 32, o + q_off(r, h, 1), 32);
			memcpy(x[b].qh + 32 * h, o + q_off(r, h, 2), 32);
		}
		memcpy(x[b].scales, o + Q6KP_SC + 16 * r, 16);
		memcpy(&x[b].d, o + Q6KP_D + 2 * r, 2);
	}
}

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT_Q __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define INL_Q static inline __attribute__((always_inline)) TGT_Q

/* Bytes ahead of the super-block being read that every pass prefetches (rows streamed from DRAM). */
#define Q6KP_PREFETCH (2 * Q6KP_BLOCK)

enum
{
	FORM_VEC,					/* 8 float lanes per row: fma(d_a * d, lanes, acc), llm_hsum8 */
	FORM_WIDE					/* per super-block: fma(float(sum) * d, d_a, acc) */
};

/*
 * vpermw indices: dword lane k = (p, l) of sel_pair[m] (p = k / 8, l =
 * k % 8) holds, as the int16 pair (word 2k, word 2k + 1), words 16p + 2i +
 * l / 4 for i = 2m and i = 2m + 1 of the pair's 32 scales: row 2P + p's
 * scales of the 16-element halves of vectors 2m and 2m + 1 that lane l
 * meets.  lo_to_hi: the pshufb indices putting each dword's low word in
 * its high word (bytes 2, 3 <- bytes 0, 1).
 */
static int16_t sel_pair[4][32] __attribute__((aligned(64)));
static uint8_t lo_to_hi[64] __attribute__((aligned(64)));

static void
init_tables(void)
{
	for (int m = 0; m < 4; m++)
		for (int k = 0; k < 16; k++)
			for (int j = 0; j < 2; j++)
				sel_pair[m][2 * k + j] = (int16_t) (16 * (k / 8) + 2 * (2 * m + j) + (k % 8) / 4);
	for (int b = 0; b < 64; b++)
		lo_to_hi[b] = (uint8_t) (((b % 16) & ~3) + (b & 1));	/* within the 128-bit lane */
}

/*
 * One group of 8 rows x T tokens (T a constant after inlining); out[t * os
 * + r] = the form's result of row r and token t.  acc[P][t]: lanes 0..7 row
 * 2P, lanes 8..15 row 2P + 1 (vec-dot form: the 8 float lanes; wide form:
 * lane 0 and lane 8).
 */
INL_Q void
group_kernel(const int form, int64_t n, const uint8_t *g, const char *a, size_t as, float *out, size_t os,
			 const int T)
{
	const int64_t nb = n / LLM_QK_K;
	const __m512i m15 = _mm512_set1_epi8(15),
				m3 = _mm512_set1_epi8(3);
	const __m512i pair_d[4] = {
		_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
		_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
		_mm512_set_epi32(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
		_mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6)
	};
	const __m512i lo_hi = _mm512_load_si512((const void *) lo_to_hi);
	const int8_t *aq[Q6KP_TOKS];
	const float *ad[Q6KP_TOKS];
	const int16_t *abs[Q6KP_TOKS];
	__m512		acc[4][Q6KP_TOKS];

	#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
	{
		aq[t] = (const int8_t *) (a + (size_t) t * as);
		ad[t] = llm_act_d(aq[t], n);
		abs[t] = (const int16_t *) (ad[t] + nb);
		for (int P = 0; P < 4; P++)
			acc[P][t] = _mm512_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++)
	{
		const uint8_t *o = g + (size_t) b * Q6KP_BLOCK;
		const __m512 xd8 = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (o + Q6KP_D))));

		#pragma GCC unroll 1
		for (int P = 0; P < 4; P++)
		{
			const uint8_t *qp = o + 384 * P;
			const __m512i sc = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *) (o + Q6KP_SC + 32 * P)));
			/* -32 * sc: |.| <= 4096 */
			const __m512i nsc32 = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sc, 5));
			const __m512 xd = _mm512_permutexvar_ps(pair_d[P], xd8);
			__m512i		v[8],
						s[4];

			/* this pass's share of the lines two super-blocks ahead */
			for (int l = 0; l < 7; l++)
				_mm_prefetch((const char *) o + Q6KP_PREFETCH + 64 * (7 * P + l), _MM_HINT_T0);
			#pragma GCC unroll 2
			for (int h = 0; h < 2; h++)
			{
				const __m512i la = _mm512_loadu_si512((const void *) (qp + 192 * h)),
							lb = _mm512_loadu_si512((const void *) (qp + 192 * h + 64)),
							hb = _mm512_loadu_si512((const void *) (qp + 192 * h + 128));

				v[4 * h] = _mm512_or_si512(_mm512_and_si512(la, m15),
										   _mm512_slli_epi16(_mm512_and_si512(hb, m3), 4));
				v[4 * h + 1] = _mm512_or_si512(_mm512_and_si512(lb, m15),
											   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 2), m3), 4));
				v[4 * h + 2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(la, 4), m15),
											   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4), m3), 4));
				v[4 * h + 3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lb, 4), m15),
											   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 6), m3), 4));
			}
			#pragma GCC unroll 4
			for (int m = 0; m < 4; m++)
				s[m] = _mm512_permutexvar_epi16(_mm512_load_si512((const void *) sel_pair[m]), sc);
			#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
			{
				const int8_t *y = aq[t] + b * LLM_QK_K;
				const __m512i bs = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (abs[t] + b * 16)));
				__m512i		z = _mm512_setzero_si512();

				/*
				 * vectors 2m and 2m + 1: their 4-element lane sums (int16
				 * range) side by side as an int16 pair, times their scales
				 */
				#pragma GCC unroll 4
				for (int m = 0; m < 4; m++)
				{
					const __m512i y0 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (y + 64 * m))),
								y1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (y + 64 * m + 32)));
					const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[2 * m], y0),
								p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[2 * m + 1], y1);

					z = _mm512_dpwssd_epi32(z, _mm512_mask_shuffle_epi8(p0, 0xCCCCCCCCCCCCCCCCull, p1, lo_hi), s[m]);
				}
				z = _mm512_dpwssd_epi32(z, bs, nsc32);
				if (form == FORM_VEC)
					acc[P][t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(ad[t][b]), xd), _mm512_cvtepi32_ps(z),
												acc[P][t]);
				else
				{
					/* lanes 0 and 8: the row's 8 lanes summed (exact) */
					z = _mm512_add_epi32(z, _mm512_shuffle_i64x2(z, z, 0xB1));
					z = _mm512_add_epi32(z, _mm512_shuffle_epi32(z, 0x4E));
					z = _mm512_add_epi32(z, _mm512_shuffle_epi32(z, 0xB1));
					acc[P][t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(z), xd), _mm512_set1_ps(ad[t][b]),
												acc[P][t]);
				}
			}
		}
	}
	#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
		for (int P = 0; P < 4; P++)
		{
			float	   *op = out + (size_t) t * os + 2 * P;

			if (form == FORM_VEC)
			{
				op[0] = llm_hsum8(_mm512_castps512_ps256(acc[P][t]));
				op[1] = llm_hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[P][t]), 1)));
			}
			else
			{
				op[0] = _mm512_cvtss_f32(acc[P][t]);
				op[1] = _mm_cvtss_f32(_mm512_extractf32x4_ps(acc[P][t], 2));
			}
		}
}

/* Whole groups x any number of tokens (Q6KP_TOKS at a time: group_tile.inc's passes of 8). */
#if Q6KP_TOKS != 8
#error "group_tile.inc passes 8 tokens at a time"
#endif
#define GROUP_TILE_ROWS Q6KP_ROWS
#define GROUP_TILE_INL INL_Q
#include "group_tile.inc"

static TGT_Q void
tile_q6_K_x8_vec(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
				 float *out, size_t os)
{
	tile_form(FORM_VEC, n, w, ws, nr, a, as, nt, out, os);
}

/*
 * The wide form: tiles of Q6KW_MIN_TOKENS tokens or more in quant_q6k_wide.c
 * (rows in vector lanes, unpacked once per call), fewer here (no unpacking
 * to amortize).  The same bits either way.
 */
#ifndef Q6KW_MIN_TOKENS
#define Q6KW_MIN_TOKENS 4
#endif

static TGT_Q void
tile_q6_K_x8_wide(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
				  float *out, size_t os)
{
	if (nt >= Q6KW_MIN_TOKENS)
		llm_tile_q6_K_x8_wide_avx512(n, w, ws, nr, a, as, nt, out, os);
	else
		tile_form(FORM_WIDE, n, w, ws, nr, a, as, nt, out, os);
}

static llm_qkernel q6_K_x8;

static void
init_q6_K_x8(void)
{
	const llm_qkernel *base = llm_qkernel_q6_K_vnni_get();

	if (base == NULL)
		return;
	init_tables();
	q6_K_x8 = *base;			/* its activations (Q8_K), shared with the other K-quant kernels */
	q6_K_x8.impl = "avx512vnni-packed";
	q6_K_x8.dot = NULL;			/* a row has no layout of its own */
	q6_K_x8.dot_tile = tile_q6_K_x8_vec;
	q6_K_x8.tile_rows = 2 * Q6KP_ROWS;
	/*
	 * Tiles of up to 32 tokens: the wide form (quant_q6k_wide.c) unpacks a
	 * call's rows once for all its tokens; the one-row form runs them 8 at
	 * a time (group_tile.inc), as in tiles of 8.
	 */
	q6_K_x8.tile_tokens = LLM_Q6K_WIDE_TOKENS;
	q6_K_x8.repack = repack_q6_K_x8;
	q6_K_x8.unpack = unpack_q6_K_x8;
	q6_K_x8.row_group = Q6KP_ROWS;
	q6_K_x8.batch_kernel = NULL;
	q6_K_x8.batch_convert = NULL;
	q6_K_x8.batch_min_tokens = 0;
	q6_K_x8.form_tile = tile_q6_K_x8_wide;
	q6_K_x8.form_mask = LLM_ROW_WIDE;
}

const llm_qkernel *
llm_qkernel_q6_K_x8_vnni_get(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_q6_K_x8);
	return q6_K_x8.dot_tile != NULL ? &q6_K_x8 : NULL;
}

#else							/* not x86 */

const llm_qkernel *
llm_qkernel_q6_K_x8_vnni_get(void)
{
	(void) repack_q6_K_x8;
	(void) unpack_q6_K_x8;
	return NULL;
}

#endif
