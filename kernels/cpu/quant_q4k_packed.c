/*
 * quant_q4k_packed.c — Q4_K matmul over rows repacked at load into groups
 * of 8 interleaved rows, for CPUs with AVX512F/VL/BW/VNNI, in the two row
 * forms of quant_kforms.c for 8-row-multiple matrices (quant.h "Row forms"):
 * one-row (GEMV) for tokens without LLM_ROW_GROUPED, grouped (GEMM) for the
 * others.  Results are bit-identical to the scalar forms on the GGUF rows.
 *
 * Why: the GGUF-layout tiles unpack one row's nibbles and decode its scales
 * per super-block and reduce every (row, token) sum horizontally; here one
 * 512-bit vpdpbusd computes 8 rows x 8 elements for a token, the scales of
 * 8 rows are decoded with a few 256-bit operations per super-block, and the
 * float steps (one FMA per super-block or per sub-block pair) run on 8 rows
 * at once, one lane per row, with the same operations per lane as the
 * scalar code (so the same bits).
 *
 * Layout of a group of 8 rows (g = rows 8i .. 8i+7; the group keeps the
 * GGUF size, 8 x row_bytes, at the first row's offset), per super-block b,
 * 1152 bytes (= 8 x sizeof(llm_block_q4_K)) at group + 1152 b:
 *   uint16 d[8], dmin[8]                 row r's fp16 d and dmin
 *   uint32 u0[8], u1[8], u2[8]           row r's 12 scale bytes as 3
 *                                        little-endian words
 *   uint8  qs[16][64]                    vector v = 4c + s (c: sub-block
 *                                        pair, s: 8-element step): dword
 *                                        lane i = 2r + p holds row r's
 *                                        qs[32c + 8s + 4p .. +3]
 * So lane (r, p) of a vector's low nibbles meets activation elements
 * 64c + 8s + 4p .. +3 and its high nibbles 64c + 32 + 8s + 4p .. +3: one
 * 64-bit broadcast of the activations feeds all 8 rows.
 *
 * Integer sums (exact, so their order is free): per pair c and lane,
 * vpdpbusd accumulates 16 products of a nibble (0..15) and an activation
 * quant (-128..127), |sum| <= 30720, which fits int16; the two sub-blocks'
 * lane sums are put side by side as int16 and one vpmaddwd with the pair's
 * scales (sc[2c], sc[2c+1]) gives lane (r, p)'s share of isum_c, and the
 * two lanes of a row add to isum_c.  The mins' sums are one vpmaddwd of
 * the rows' (mn[2c], mn[2c+1]) with the activation's 32-element sums.
 */
#include "quant.h"
#include "quant_x86.h"

#include <pthread.h>
#include <string.h>

#define Q4KP_ROWS 8
#define Q4KP_BLOCK (Q4KP_ROWS * sizeof(llm_block_q4_K))	/* bytes per super-block of a group */
#define Q4KP_QS 128				/* offset of the quants in a group's super-block */
#define Q4KP_TOKS 8				/* tokens per pass over a group */

/* ---- layout (plain C: repack at load, unpack for embedding lookups) ---- */

static bool
repack_q4_K_x8(const void *src, void *dst, int64_t n_rows, int64_t n)
{
	const int64_t nb = n / LLM_QK_K;
	const size_t rb = (size_t) nb * sizeof(llm_block_q4_K);

	if (n % LLM_QK_K != 0 || n_rows % Q4KP_ROWS != 0)
		return false;
	for (int64_t g = 0; g < n_rows / Q4KP_ROWS; g++)
	{
		const char *gs = (const char *) src + (size_t) g * Q4KP_ROWS * rb;
		uint8_t    *gd = (uint8_t *) dst + (size_t) g * Q4KP_ROWS * rb;

		for (int64_t b = 0; b < nb; b++)
		{
			uint8_t    *o = gd + (size_t) b * Q4KP_BLOCK;

			for (int r = 0; r < Q4KP_ROWS; r++)
			{
				const llm_block_q4_K *x = (const llm_block_q4_K *) (gs + (size_t) r * rb) + b;

				memcpy(o + 2 * r, &x->d, 2);
				memcpy(o + 16 + 2 * r, &x->dmin, 2);
				for (int wd = 0; wd < 3; wd++)
					memcpy(o + 32 + 32 * wd + 4 * r, x->scales + 4 * wd, 4);
				for (int v = 0; v < 16; v++)
					for (int p = 0; p < 2; p++)
						memcpy(o + Q4KP_QS + 64 * v + 4 * (2 * r + p),
							   x->qs + 32 * (v / 4) + 8 * (v % 4) + 4 * p, 4);
			}
		}
	}
	return true;
}

static void
unpack_q4_K_x8(const void *w, int64_t row, void *dst, int64_t n)
{
	const int64_t nb = n / LLM_QK_K;
	const size_t rb = (size_t) nb * sizeof(llm_block_q4_K);
	const uint8_t *g = (const uint8_t *) w + (size_t) (row / Q4KP_ROWS) * Q4KP_ROWS * rb;
	const int	r = (int) (row % Q4KP_ROWS);
	llm_block_q4_K *x = dst;

	for (int64_t b = 0; b < nb; b++)
	{
		const uint8_t *o = g + (size_t) b * Q4KP_BLOCK;

		memcpy(&x[b].d, o + 2 * r, 2);
		memcpy(&x[b].dmin, o + 16 + 2 * r, 2);
		for (int wd = 0; wd < 3; wd++)
			memcpy(x[b].scales + 4 * wd, o + 32 + 32 * wd + 4 * r, 4);
		for (int v = 0; v < 16; v++)
			for (int p = 0; p < 2; p++)
				memcpy(x[b].qs + 32 * (v / 4) + 8 * (v % 4) + 4 * p,
					   o + Q4KP_QS + 64 * v + 4 * (2 * r + p), 4);
	}
}

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT_K __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define INL_K static inline __attribute__((always_inline)) TGT_K

/*
 * Bytes ahead of the vector being read that every pass prefetches: rows
 * stream from DRAM in group order, into the next groups past the tile's
 * (the matmul leaves interleaved kernels their own prefetch).
 */
#define Q4KP_PREFETCH (2 * Q4KP_BLOCK)

enum
{
	FORM_GEMV,					/* per super-block: fma(isum, d * d_a), fma(imin, dmin * d_a) */
	FORM_GEMM					/* the same per sub-block pair c = 0..3 */
};

/* Lane (r, 0) + lane (r, 1) of v, rows 0..7 (exact). */
INL_K __m256i
rows_sum(__m512i v)
{
	return _mm512_cvtepi64_epi32(_mm512_add_epi32(v, _mm512_srli_epi64(v, 32)));
}

INL_K __m512i
bcast8(const int8_t *p)
{
	int64_t		q;

	memcpy(&q, p, 8);
	return _mm512_set1_epi64(q);
}

/*
 * Lane (r, p) = row r's min sum of pair 2 * half + p: its (mn[2c], mn[2c + 1])
 * times the activation's 32-element sums (bs: the super-block's 16 sums of
 * 16; their pairwise sums are words 0..3 of each 128-bit half of hadd).
 */
INL_K __m512i
imin_pairs(__m512i zmn03, __m512i zmn47, const int16_t *bs, int half)
{
	const __m256i v = _mm256_loadu_si256((const __m256i *) bs);
	const __m256i h = _mm256_hadd_epi16(v, v);

	return half == 0 ? _mm512_madd_epi16(zmn03, _mm512_broadcastq_epi64(_mm256_castsi256_si128(h))) :
		_mm512_madd_epi16(zmn47, _mm512_broadcastq_epi64(_mm256_extracti128_si256(h, 1)));
}

/*
 * One group of 8 rows x T tokens (T a constant after inlining); out[t * os
 * + r] = the form's result of row r and token t.
 */
INL_K void
group_kernel(const int form, int64_t n, const uint8_t *g, const char *a, size_t as, float *out, size_t os,
			 const int T)
{
	const int64_t nb = n / LLM_QK_K;
	const __m256i k1 = _mm256_set1_epi32(0x3f3f3f3f),
				k2 = _mm256_set1_epi32(0x0f0f0f0f),
				k3 = _mm256_set1_epi32(0x03030303);
	const __m512i m4 = _mm512_set1_epi8(0xF);
	const int8_t *aq[Q4KP_TOKS];
	const float *ad[Q4KP_TOKS];
	const int16_t *abs[Q4KP_TOKS];
	__m256		acc[Q4KP_TOKS],
				accm[Q4KP_TOKS];

	#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
	{
		aq[t] = (const int8_t *) (a + (size_t) t * as);
		ad[t] = llm_act_d(aq[t], n);
		abs[t] = (const int16_t *) (ad[t] + nb);
		acc[t] = accm[t] = _mm256_setzero_ps();
	}
	for (int64_t b = 0; b < nb; b++)
	{
		const uint8_t *o = g + (size_t) b * Q4KP_BLOCK;
		const __m256i u0 = _mm256_loadu_si256((const __m256i *) (o + 32)),
					u1 = _mm256_loadu_si256((const __m256i *) (o + 64)),
					u2 = _mm256_loadu_si256((const __m256i *) (o + 96));

		/* dword r: bytes sc[r][0..3], mn[r][0..3], sc[r][4..7], mn[r][4..7] (llm_q4_K_scales_mins) */
		const __m256i sc03 = _mm256_and_si256(u0, k1),
					mn03 = _mm256_and_si256(u1, k1),
					sc47 = _mm256_or_si256(_mm256_and_si256(u2, k2),
										   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k3), 4)),
					mn47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k2),
										   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k3), 4));

		/* as int16, qword r = row r's 4 values: dword (r, p) = values (2p, 2p + 1) */
		const __m512i zsc03 = _mm512_cvtepu8_epi16(sc03),
					zsc47 = _mm512_cvtepu8_epi16(sc47),
					zmn03 = _mm512_cvtepu8_epi16(mn03),
					zmn47 = _mm512_cvtepu8_epi16(mn47);

		/* pair c's scales (sc[r][2c], sc[r][2c + 1]) in both lanes of row r */
		const __m512i scp[4] = {
			_mm512_shuffle_epi32(zsc03, 0xA0), _mm512_shuffle_epi32(zsc03, 0xF5),
			_mm512_shuffle_epi32(zsc47, 0xA0), _mm512_shuffle_epi32(zsc47, 0xF5)
		};
		const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) o)),
					wm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (o + 16)));
		__m512i		isum[Q4KP_TOKS];

		#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			isum[t] = _mm512_setzero_si512();
		#pragma GCC unroll 1
		for (int c = 0; c < 4; c++)
		{
			__m512i		alo[Q4KP_TOKS],
						ahi[Q4KP_TOKS];

			#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
				alo[t] = ahi[t] = _mm512_setzero_si512();
			#pragma GCC unroll 8
			for (int s = 0; s < 4; s++)
			{
				const uint8_t *vp = o + Q4KP_QS + 64 * (4 * c + s);
				__m512i		v = _mm512_loadu_si512((const void *) vp);
				__m512i		lo = _mm512_and_si512(v, m4),
							hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);

				_mm_prefetch((const char *) vp + Q4KP_PREFETCH, _MM_HINT_T0);
				#pragma GCC unroll 8
				for (int t = 0; t < T; t++)
				{
					const int8_t *y = aq[t] + b * LLM_QK_K + 64 * c + 8 * s;

					alo[t] = _mm512_dpbusd_epi32(alo[t], lo, bcast8(y));
					ahi[t] = _mm512_dpbusd_epi32(ahi[t], hi, bcast8(y + 32));
				}
			}
			#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
			{
				/* (alo, ahi) as an int16 pair per lane, times (sc[2c], sc[2c + 1]) */
				__m512i		x = _mm512_mask_blend_epi16(0xAAAAAAAAu, alo[t], _mm512_slli_epi32(ahi[t], 16));
				__m512i		part = _mm512_madd_epi16(x, scp[c]);

				if (form == FORM_GEMV)
					isum[t] = _mm512_add_epi32(isum[t], part);
				else
				{
					const __m512i im = imin_pairs(zmn03, zmn47, abs[t] + b * 16, c / 2);
					const __m256i imc = _mm512_cvtepi64_epi32(c % 2 == 0 ? im : _mm512_srli_epi64(im, 32));
					const __m256 da = _mm256_set1_ps(ad[t][b]);

					acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows_sum(part)), _mm256_mul_ps(wd, da), acc[t]);
					accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imc), _mm256_mul_ps(wm, da), accm[t]);
				}
			}
		}
		if (form == FORM_GEMV)
		{
			#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
			{
				const __m256 da = _mm256_set1_ps(ad[t][b]);

				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows_sum(isum[t])), _mm256_mul_ps(wd, da), acc[t]);
				accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows_sum(_mm512_add_epi32(imin_pairs(zmn03, zmn47, abs[t] + b * 16, 0),
																						 imin_pairs(zmn03, zmn47, abs[t] + b * 16, 1)))),
										  _mm256_mul_ps(wm, da), accm[t]);
			}
		}
	}
	#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
		_mm256_storeu_ps(out + (size_t) t * os, _mm256_sub_ps(acc[t], accm[t]));
}

/* Whole groups x any number of tokens (Q4KP_TOKS at a time: group_tile.inc's passes of 8). */
#if Q4KP_TOKS != 8
#error "group_tile.inc passes 8 tokens at a time"
#endif
#define GROUP_TILE_ROWS Q4KP_ROWS
#define GROUP_TILE_INL INL_K
#include "group_tile.inc"

static TGT_K void
tile_q4_K_x8_gemv(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
				  float *out, size_t os)
{
	tile_form(FORM_GEMV, n, w, ws, nr, a, as, nt, out, os);
}

static TGT_K void
tile_q4_K_x8_gemm(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
				  float *out, size_t os)
{
	tile_form(FORM_GEMM, n, w, ws, nr, a, as, nt, out, os);
}

static llm_qkernel q4_K_x8;

static void
init_q4_K_x8(void)
{
	const llm_qkernel *base = llm_qkernel_avx2_get(LLM_TYPE_Q4_K, true);

	if (base == NULL)
		return;
	q4_K_x8 = *base;			/* its activations (Q8_K), shared with the GGUF-layout kernels */
	q4_K_x8.impl = "avx512vnni-packed";
	q4_K_x8.dot = NULL;			/* a row has no layout of its own */
	q4_K_x8.dot_tile = tile_q4_K_x8_gemv;
	q4_K_x8.tile_rows = 2 * Q4KP_ROWS;
	q4_K_x8.tile_tokens = Q4KP_TOKS;
	q4_K_x8.repack = repack_q4_K_x8;
	q4_K_x8.unpack = unpack_q4_K_x8;
	q4_K_x8.row_group = Q4KP_ROWS;
	q4_K_x8.batch_kernel = NULL;
	q4_K_x8.batch_convert = NULL;
	q4_K_x8.batch_min_tokens = 0;
	q4_K_x8.form_tile = tile_q4_K_x8_gemm;
	q4_K_x8.form_mask = LLM_ROW_GROUPED;
}

const llm_qkernel *
llm_qkernel_q4_K_x8_vnni_get(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_q4_K_x8);
	return q4_K_x8.dot_tile != NULL ? &q4_K_x8 : NULL;
}

#else							/* not x86 */

const llm_qkernel *
llm_qkernel_q4_K_x8_vnni_get(void)
{
	(void) repack_q4_K_x8;
	(void) unpack_q4_K_x8;
	return NULL;
}

#endif
