/*
 * quant_packed.c — Q4_1 and Q8_0 matmul tiles over rows repacked at load
 * time, for CPUs with AVX512F/VL/BW/VNNI (256-bit vectors, 32 registers).
 *
 * Why: in a batched decode step the GGUF-layout tiles (quant_tile.inc) are
 * bound by vector instruction throughput, not memory: per (row, token,
 * block) they issue vpdpbusd, a conversion, the scale product d_w * d_a and
 * an FMA, plus per-block unpacking of the row.  With the scales of a row
 * stored contiguously, the products d_w * d_a of 8 blocks are one vector
 * multiply, and the FMA takes its scale as an embedded broadcast from
 * memory; with the nibbles of two blocks interleaved in one 32-byte vector,
 * unpacking costs 3 instructions per 2 blocks.  The arithmetic per (row,
 * token, block) is exactly that of the GGUF tiles (and of llama.cpp's
 * ggml_vec_dot_q4_1_q8_1 / ggml_vec_dot_q8_0_q8_0 on AVX2/AVX512), so the
 * results are bit-identical to them.  Q8_0 tiles of two tokens or more
 * run on 512-bit vectors, two tokens per vector (q8_0_zmm_kernel), the
 * same per-lane arithmetic with half the instructions; this file also
 * converts Q5_0 rows into the packed Q8_0 layout for batched matmuls
 * (llm_convert_q5_0_q8_0_packed, quant.h batch_convert).
 *
 * Depends on quant_avx2.c only (each packed kernel takes the activations
 * of the GGUF-layout VNNI kernel of its type); the instruction-set check is
 * dispatch.c's.
 *
 * Packed rows have the GGUF row size (row_bytes) and n a multiple of 64:
 *   Q4_1: uint16 d[nb]; uint16 m[nb]; uint8 qs[nb/2][32]
 *         qs[p][j] = e(2p, j) | e(2p + 1, j) << 4, e(b, j) = element j of
 *         block b (0..15), i.e. the two blocks' elements in order
 *   Q8_0: uint16 d[nb]; uint8 qs[nb][32] = element + 128 (unsigned, for
 *         vpdpbusd; the bias is removed exactly in the integer sum)
 * nb = n / 32.
 */
#include "quant.h"
#include "quant_x86.h"
#include "simd_x86.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT_P __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define INL_P static inline __attribute__((always_inline)) TGT_P

#define PMAXR 4
#define PMAXT 4
/*
 * Software prefetch distance in each row's quants (bytes): rows streamed
 * from DRAM (decode, the output projection) need it, as in quant_tile.inc.
 */
#define PREFETCH_AHEAD 384
#define GROUP 8					/* blocks whose scale products are one vector multiply */

/* ---- layouts ---- */

static int
nibble(const llm_block_q4_1 *b, int j)
{
	return j < 16 ? (b->qs[j] & 0x0F) : (b->qs[j - 16] >> 4);
}

static bool
repack_row_q4_1(const void *src, void *dst, int64_t n)
{
	const llm_block_q4_1 *x = src;
	int64_t		nb = n / LLM_QK;
	uint16_t   *d = dst,
			   *m = d + nb;
	uint8_t    *qs = (uint8_t *) (m + nb);

	if (n % (2 * LLM_QK) != 0)
		return false;
	for (int64_t b = 0; b < nb; b++)
	{
		d[b] = x[b].d;
		m[b] = x[b].m;
	}
	for (int64_t p = 0; p < nb / 2; p++)
		for (int j = 0; j < LLM_QK; j++)
			qs[p * 32 + j] = (uint8_t) (nibble(&x[2 * p], j) | nibble(&x[2 * p + 1], j) << 4);
	return true;
}

static void
unpack_row_q4_1(const void *src, void *dst, int64_t n)
{
	int64_t		nb = n / LLM_QK;
	const uint16_t *d = src,
			   *m = d + nb;
	const uint8_t *qs = (const uint8_t *) (m + nb);
	llm_block_q4_1 *x = dst;

	for (int64_t b = 0; b < nb; b++)
	{
		const uint8_t *p = qs + (b / 2) * 32;
		int			sh = (b % 2) * 4;

		x[b].d = d[b];
		x[b].m = m[b];
		for (int j = 0; j < 16; j++)
			x[b].qs[j] = (uint8_t) (((p[j] >> sh) & 0x0F) | ((p[j + 16] >> sh) & 0x0F) << 4);
	}
}

static bool
repack_row_q8_0(const void *src, void *dst, int64_t n)
{
	const llm_block_q8_0 *x = src;
	int64_t		nb = n / LLM_QK;
	uint16_t   *d = dst;
	uint8_t    *qs = (uint8_t *) (d + nb);

	if (n % (2 * LLM_QK) != 0)
		return false;
	for (int64_t b = 0; b < nb; b++)
	{
		d[b] = x[b].d;
		for (int j = 0; j < LLM_QK; j++)
			qs[b * 32 + j] = (uint8_t) (x[b].qs[j] + 128);
	}
	return true;
}

static void
unpack_row_q8_0(const void *src, void *dst, int64_t n)
{
	int64_t		nb = n / LLM_QK;
	const uint16_t *d = src;
	const uint8_t *qs = (const uint8_t *) (d + nb);
	llm_block_q8_0 *x = dst;

	for (int64_t b = 0; b < nb; b++)
	{
		x[b].d = d[b];
		for (int j = 0; j < LLM_QK; j++)
			x[b].qs[j] = (int8_t) (qs[b * 32 + j] - 128);
	}
}

/* Whole matrices (llm_qkernel.repack / unpack): row by row, rows keep the GGUF row size. */
#define DEFINE_MATRIX_REPACK(type, block) \
static bool \
repack_##type(const void *src, void *dst, int64_t n_rows, int64_t n) \
{ \
	const size_t rb = (size_t) (n / LLM_QK) * sizeof(block); \
\
	if (n % (2 * LLM_QK) != 0) \
		return false; \
	for (int64_t r = 0; r < n_rows; r++) \
		repack_row_##type((const char *) src + r * rb, (char *) dst + r * rb, n); \
	return true; \
} \
\
static void \
unpack_##type(const void *w, int64_t row, void *dst, int64_t n) \
{ \
	unpack_row_##type((const char *) w + row * (int64_t) ((n / LLM_QK) * sizeof(block)), dst, n); \
}

DEFINE_MATRIX_REPACK(q4_1, llm_block_q4_1)
DEFINE_MATRIX_REPACK(q8_0, llm_block_q8_0)

/*
 * Q5_0 rows -> packed Q8_0 rows (the batch path of Q5_0 weights, quant.h
 * batch_convert): a Q5_0 weight is the signed byte (nibble | fifth bit
 * << 4) - 16 with the block's fp16 scale, so the packed byte is that + 128
 * = nibble | (fifth bit ? 0x80 : 0x70) and the scale is copied as is.  The
 * packed Q8_0 dot of a converted row is then the Q5_0 dot's arithmetic
 * (the same exact int32 lane sums, fma(d_w * d_a, lanes, acc) per block,
 * hsum8): the same bits.  Any n multiple of 32 (the tiles need no pairs).
 */
void
llm_convert_q5_0_q8_0_packed(int64_t n, const void *w, size_t ws, int nr, void *dst)
	TGT_P;

void
llm_convert_q5_0_q8_0_packed(int64_t n, const void *w, size_t ws, int nr, void *dst)
{
	const int64_t nb = n / LLM_QK;
	const size_t drb = (size_t) nb * sizeof(llm_block_q8_0);

	for (int r = 0; r < nr; r++)
	{
		const llm_block_q5_0 *x = (const llm_block_q5_0 *) ((const char *) w + (size_t) r * ws);
		uint16_t   *d = (uint16_t *) ((char *) dst + (size_t) r * drb);
		uint8_t    *qs = (uint8_t *) (d + nb);

		for (int64_t b = 0; b < nb; b++)
		{
			__m128i		q = _mm_loadu_si128((const __m128i *) x[b].qs);
			/* byte j < 16: low nibble of qs[j], byte j >= 16: high nibble of qs[j - 16] */
			__m256i		nib = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q),
																	   _mm_srli_epi16(q, 4), 1),
											   _mm256_set1_epi8(0x0F));
			uint32_t	qh;

			memcpy(&qh, x[b].qh, sizeof(qh));
			d[b] = x[b].d;
			_mm256_storeu_si256((__m256i *) (qs + b * LLM_QK),
								_mm256_or_si256(nib, _mm256_mask_blend_epi8((__mmask32) qh, _mm256_set1_epi8(0x70),
																			_mm256_set1_epi8((char) 0x80))));
		}
	}
}

/* ---- kernels ---- */

/* 8 int32 lane sums of 4 u8 x s8 products each, as float */
INL_P __m256
dot_lanes(__m256i u, const int8_t *s)
{
	return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u,
												  _mm256_loadu_si256((const __m256i *) s)));
}

/*
 * R packed weight rows x T activation rows; per (r, t) and block, in block
 * order: acc = fma(d_w * d_a, lanes, acc) (Q4_1 also ms = fma(m, s, ms));
 * out = llm_hsum8(acc) (+ ms).  R, T and q4 are constants after inlining.
 */
INL_P void
packed_kernel(const bool q4, int64_t n, const void *w, size_t ws, const void *a, size_t as,
			  float *out, size_t os, const int R, const int T)
{
	const int64_t nb = n / LLM_QK;
	__m256		acc[PMAXR][PMAXT];
	/* Q4_1: ms[r][t] = running sum of m*s (in memory: the registers go to acc) */
	float		ms[PMAXR][4] __attribute__((aligned(16)));
	float		s4buf[4][GROUP] __attribute__((aligned(32)));	/* s of 4 tokens per block */
	const uint16_t *wd[PMAXR];
	const uint8_t *wq[PMAXR];
	const int8_t *aq[PMAXT];
	const float *ad[PMAXT];
	const float *asum[PMAXT];
	float		sc[PMAXR][PMAXT][GROUP] __attribute__((aligned(32)));
	float		mf[PMAXR][GROUP] __attribute__((aligned(32)));

	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
	{
		wd[r] = (const uint16_t *) ((const char *) w + r * ws);
		wq[r] = (const uint8_t *) (wd[r] + (q4 ? 2 : 1) * nb);
		_mm_store_ps(ms[r], _mm_setzero_ps());
	}
	#pragma GCC unroll 4
	for (int t = 0; t < T; t++)
	{
		const char *at = (const char *) a + t * as;

		aq[t] = (const int8_t *) at;
		ad[t] = llm_act_d(at, n);
		asum[t] = ad[t] + nb;
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			acc[r][t] = _mm256_setzero_ps();
	}
	for (int64_t g = 0; g < nb; g += GROUP)
	{
		const int	ng = nb - g < GROUP ? (int) (nb - g) : GROUP;
		const __mmask8 lanes = (__mmask8) ((1u << ng) - 1);

		/* the scale products of this group's blocks, one multiply per (r, t) */
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
		{
			__m256		dw = _mm256_cvtph_ps(_mm_maskz_loadu_epi16(lanes, wd[r] + g));

			if (q4)
				_mm256_store_ps(mf[r], _mm256_cvtph_ps(_mm_maskz_loadu_epi16(lanes, wd[r] + nb + g)));
			#pragma GCC unroll 4
			for (int t = 0; t < T; t++)
				_mm256_store_ps(sc[r][t], _mm256_mul_ps(dw, _mm256_maskz_loadu_ps(lanes, ad[t] + g)));
		}
		if (q4)
		{
			/* m*s of the group's blocks, in block order per (r, t) */
			{
				/* s of (token t, block k) -> s4buf[k % 4][(k / 4) * 4 + t]: a 4 x 8 transpose */
				__m256		st[4],
							lo01,
							hi01,
							lo23,
							hi23;

				#pragma GCC unroll 4
				for (int t = 0; t < 4; t++)
					st[t] = t < T ? _mm256_maskz_loadu_ps(lanes, asum[t] + g) : _mm256_setzero_ps();
				lo01 = _mm256_unpacklo_ps(st[0], st[1]);
				hi01 = _mm256_unpackhi_ps(st[0], st[1]);
				lo23 = _mm256_unpacklo_ps(st[2], st[3]);
				hi23 = _mm256_unpackhi_ps(st[2], st[3]);
				_mm256_store_ps(s4buf[0], _mm256_shuffle_ps(lo01, lo23, 0x44));
				_mm256_store_ps(s4buf[1], _mm256_shuffle_ps(lo01, lo23, 0xEE));
				_mm256_store_ps(s4buf[2], _mm256_shuffle_ps(hi01, hi23, 0x44));
				_mm256_store_ps(s4buf[3], _mm256_shuffle_ps(hi01, hi23, 0xEE));
			}
			#pragma GCC unroll 4
			for (int r = 0; r < R; r++)
			{
				__m128		m4 = _mm_load_ps(ms[r]);

				for (int k = 0; k < ng; k++)
					m4 = _mm_fmadd_ps(_mm_set1_ps(mf[r][k]), _mm_load_ps(s4buf[k % 4] + (k / 4) * 4), m4);
				_mm_store_ps(ms[r], m4);
			}
			/* block pairs: low nibbles = block ib, high nibbles = block ib + 1 */
			for (int k = 0; k < ng; k++)
			{
				const int64_t ib = g + k;
				__m256i		x[PMAXR];

				#pragma GCC unroll 4
				for (int r = 0; r < R; r++)
				{
					__m256i		v = _mm256_loadu_si256((const __m256i *) (wq[r] + (ib / 2) * 32));

					if (k % 4 == 0)	/* a 64-byte line holds 4 blocks */
						_mm_prefetch((const char *) wq[r] + ib * 16 + PREFETCH_AHEAD, _MM_HINT_T0);
					x[r] = _mm256_and_si256(k & 1 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
				}
				#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					#pragma GCC unroll 4
					for (int r = 0; r < R; r++)
						acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(sc[r][t][k]),
													dot_lanes(x[r], aq[t] + ib * LLM_QK), acc[r][t]);
			}
		}
		else
		{
			for (int k = 0; k < ng; k++)
			{
				const int64_t ib = g + k;
				__m256i		xu[PMAXR];

				#pragma GCC unroll 4
				for (int r = 0; r < R; r++)
				{
					xu[r] = _mm256_loadu_si256((const __m256i *) (wq[r] + ib * LLM_QK));
					_mm_prefetch((const char *) wq[r] + ib * LLM_QK + PREFETCH_AHEAD, _MM_HINT_T0);
				}
				#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
				{
					__m256i		qy = _mm256_loadu_si256((const __m256i *) (aq[t] + ib * LLM_QK));
					/* -128 * (sum of each lane's 4 qy): removes the +128 of the packed weights */
					__m256i		bias = _mm256_sub_epi32(_mm256_setzero_si256(),
														_mm256_dpbusd_epi32(_mm256_setzero_si256(),
																			_mm256_set1_epi8((char) 0x80), qy));

					#pragma GCC unroll 4
					for (int r = 0; r < R; r++)
						acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(sc[r][t][k]),
													_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(bias, xu[r], qy)),
													acc[r][t]);
				}
			}
		}
	}
	if (T == 4)
	{
		/*
		 * hsum8 of a row's 4 tokens at once: b_t = lo + hi halves, then the
		 * 4 x 4 transpose gives (b0 + b2) + (b1 + b3) lane by lane, the same
		 * additions in the same order as hsum8.
		 */
		#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
		{
			__m128		b[4],
						res;
			float		v[4] __attribute__((aligned(16)));

			#pragma GCC unroll 4
			for (int t = 0; t < 4; t++)
				b[t] = _mm_add_ps(_mm256_extractf128_ps(acc[r][t], 1), _mm256_castps256_ps128(acc[r][t]));
			_MM_TRANSPOSE4_PS(b[0], b[1], b[2], b[3]);
			res = _mm_add_ps(_mm_add_ps(b[0], b[2]), _mm_add_ps(b[1], b[3]));
			if (q4)
				res = _mm_add_ps(res, _mm_load_ps(ms[r]));
			_mm_store_ps(v, res);
			#pragma GCC unroll 4
			for (int t = 0; t < 4; t++)
				out[t * os + r] = v[t];
		}
		return;
	}
	#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
	{
		#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
		{
			float		v = llm_hsum8(acc[r][t]);

			if (q4)
				v = v + ms[r][t];
			out[t * os + r] = v;
		}
	}
}

/*
 * Q8_0 tiles of 2 tokens or more with 512-bit vectors (ZMAXR rows x 2 *
 * ZMAXP tokens).  A vector holds the 8 int32 lane sums of one row and two
 * tokens, interleaved: lane 2i is token 2p's lane i, lane 2i + 1 token
 * 2p + 1's (each weight dword duplicated by one vpermd per row and block,
 * the two tokens' activations interleaved by one vpermt2d per token pair
 * and block).  Interleaving makes the scale operand of a (row, pair,
 * block) the pair (d_w * d_a of token 2p, of token 2p + 1) repeated, a
 * 64-bit broadcast load, so that each (row, pair, block) costs vpdpbusd,
 * a conversion and an FMA for two (row, token) sums: half the vector
 * instructions of the 256-bit tile.  Each lane still does exactly what
 * the 256-bit kernel's lane does (start -128 * sum qy, vpdpbusd, convert,
 * fma(d_w * d_a, lanes, acc) in block order; the scale products come from
 * the same multiply), and the final sums are llm_hsum8's additions on
 * each token's lanes (done in place, see the end), so the results are the
 * same bits.  An odd token count repeats its last token in the unused half
 * and drops its sums.
 */
#define ZMAXR 8
#define ZMAXP 2

INL_P void
q8_0_zmm_kernel(int64_t n, const void *w, size_t ws, const void *a, size_t as, int nt,
				float *out, size_t os, const int R, const int P)
{
	const int64_t nb = n / LLM_QK;
	/* dword i of a 32-byte vector into lanes 2i and 2i + 1 */
	const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
	/* dword i of the first vector into lane 2i, of the second into lane 2i + 1 */
	const __m512i ilv = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	const __m512i m128 = _mm512_set1_epi8((char) 0x80);
	__m512		acc[ZMAXR][ZMAXP];
	/* per (row, pair, block of the group): the two tokens' d_w * d_a, one 64-bit broadcast */
	double		sc[ZMAXR][ZMAXP][GROUP] __attribute__((aligned(64)));
	const uint16_t *wd[ZMAXR];
	const uint8_t *wq[ZMAXR];
	const int8_t *aq[2 * ZMAXP];
	const float *ad[2 * ZMAXP];

	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
	{
		wd[r] = (const uint16_t *) ((const char *) w + r * ws);
		wq[r] = (const uint8_t *) (wd[r] + nb);
	}
	#pragma GCC unroll 4
	for (int t = 0; t < 2 * P; t++)
	{
		const char *at = (const char *) a + (t < nt ? t : nt - 1) * as;

		aq[t] = (const int8_t *) at;
		ad[t] = llm_act_d(at, n);
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 2
		for (int p = 0; p < P; p++)
			acc[r][p] = _mm512_setzero_ps();
	for (int64_t g = 0; g < nb; g += GROUP)
	{
		const int	ng = nb - g < GROUP ? (int) (nb - g) : GROUP;
		const __mmask8 lanes = (__mmask8) ((1u << ng) - 1);
		__m512		da[ZMAXP];

		/* lane 2k: d_a of (token 2p, block g + k), lane 2k + 1: of token 2p + 1 */
		#pragma GCC unroll 2
		for (int p = 0; p < P; p++)
			da[p] = _mm512_permutex2var_ps(_mm512_castps256_ps512(_mm256_maskz_loadu_ps(lanes, ad[2 * p] + g)), ilv,
										   _mm512_castps256_ps512(_mm256_maskz_loadu_ps(lanes, ad[2 * p + 1] + g)));
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
		{
			__m512		dw = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(
													   _mm256_cvtph_ps(_mm_maskz_loadu_epi16(lanes, wd[r] + g))));

			#pragma GCC unroll 2
			for (int p = 0; p < P; p++)
				_mm512_store_ps((float *) sc[r][p], _mm512_mul_ps(dw, da[p]));
		}
		for (int k = 0; k < ng; k++)
		{
			const int64_t ib = g + k;
			__m512i		xu[ZMAXR];

			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
			{
				xu[r] = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(
													 _mm256_loadu_si256((const __m256i *) (wq[r] + ib * LLM_QK))));
				_mm_prefetch((const char *) wq[r] + ib * LLM_QK + PREFETCH_AHEAD, _MM_HINT_T0);
			}
			#pragma GCC unroll 2
			for (int p = 0; p < P; p++)
			{
				__m512i		qy = _mm512_permutex2var_epi32(
					_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) (aq[2 * p] + ib * LLM_QK))), ilv,
					_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) (aq[2 * p + 1] + ib * LLM_QK))));
				/* -128 * (sum of each lane's 4 qy): removes the +128 of the packed weights */
				__m512i		bias = _mm512_sub_epi32(_mm512_setzero_si512(),
													_mm512_dpbusd_epi32(_mm512_setzero_si512(), m128, qy));

				#pragma GCC unroll 8
				for (int r = 0; r < R; r++)
					acc[r][p] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(sc[r][p][k])),
												_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(bias, xu[r], qy)),
												acc[r][p]);
			}
		}
	}
	{
		/*
		 * llm_hsum8 of every token without de-interleaving, 4 vectors at a
		 * time.  hsum8 adds lanes i and i + 4, then lanes 0, 1 and 2, 3 of
		 * that, then the two values left: here lanes 2i and 2i + 8 hold
		 * lanes i and i + 4 of one token, so the same additions are the
		 * 256-bit halves, then the 128-bit halves of the result, then
		 * lanes 0, 1 and 2, 3 of each 128 bits, which leaves token 2p's sum
		 * in lane 0 and token 2p + 1's in lane 1 of each 128 bits.
		 */
		const __m512 z = _mm512_setzero_ps();
		float		u[ZMAXR * ZMAXP][4] __attribute__((aligned(64)));

		#pragma GCC unroll 4
		for (int q = 0; q < R * P; q += 4)
		{
			__m512		v[4],
						s01,
						s23,
						h;

			#pragma GCC unroll 4
			for (int i = 0; i < 4; i++)
				v[i] = q + i < R * P ? acc[(q + i) / P][(q + i) % P] : z;
			s01 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0xEE), _mm512_shuffle_f32x4(v[0], v[1], 0x44));
			s23 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0xEE), _mm512_shuffle_f32x4(v[2], v[3], 0x44));
			h = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0xDD), _mm512_shuffle_f32x4(s01, s23, 0x88));
			h = _mm512_add_ps(h, _mm512_shuffle_ps(h, h, _MM_SHUFFLE(3, 2, 3, 2)));
			_mm512_store_ps(u[q], h);
		}
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			#pragma GCC unroll 4
			for (int t = 0; t < 2 * P; t++)
				if (t < nt)
					out[t * os + r] = u[r * P + t / 2][t % 2];
	}
}

#define PACKED_DISPATCH(q4) \
	switch (nr * 8 + nt) \
	{ \
		case 4 * 8 + 4: packed_kernel(q4, n, w, ws, a, as, out, os, 4, 4); break; \
		case 4 * 8 + 3: packed_kernel(q4, n, w, ws, a, as, out, os, 4, 3); break; \
		case 4 * 8 + 2: packed_kernel(q4, n, w, ws, a, as, out, os, 4, 2); break; \
		case 4 * 8 + 1: packed_kernel(q4, n, w, ws, a, as, out, os, 4, 1); break; \
		case 3 * 8 + 4: packed_kernel(q4, n, w, ws, a, as, out, os, 3, 4); break; \
		case 3 * 8 + 1: packed_kernel(q4, n, w, ws, a, as, out, os, 3, 1); break; \
		case 2 * 8 + 4: packed_kernel(q4, n, w, ws, a, as, out, os, 2, 4); break; \
		case 2 * 8 + 3: packed_kernel(q4, n, w, ws, a, as, out, os, 2, 3); break; \
		case 2 * 8 + 2: packed_kernel(q4, n, w, ws, a, as, out, os, 2, 2); break; \
		case 2 * 8 + 1: packed_kernel(q4, n, w, ws, a, as, out, os, 2, 1); break; \
		case 1 * 8 + 4: packed_kernel(q4, n, w, ws, a, as, out, os, 1, 4); break; \
		case 1 * 8 + 1: packed_kernel(q4, n, w, ws, a, as, out, os, 1, 1); break; \
		default: \
			for (int t0 = 0; t0 < nt; t0++) \
				for (int r0 = 0; r0 < nr; r0++) \
					packed_kernel(q4, n, (const char *) w + r0 * ws, ws, (const char *) a + t0 * as, \
								  as, out + t0 * os + r0, os, 1, 1); \
	}

/* Any nr x nt: sub-tiles of at most PMAXR x PMAXT (the switch key is unique there). */
static TGT_P void
tile_q4_1_packed(int64_t n, const void *w0, size_t ws, int nr0, const void *a0, size_t as, int nt0,
				 float *out0, size_t os)
{
	for (int tb = 0; tb < nt0; tb += PMAXT)
		for (int rb = 0; rb < nr0; rb += PMAXR)
		{
			const int	nr = nr0 - rb < PMAXR ? nr0 - rb : PMAXR,
						nt = nt0 - tb < PMAXT ? nt0 - tb : PMAXT;
			const void *w = (const char *) w0 + rb * ws,
					   *a = (const char *) a0 + tb * as;
			float	   *out = out0 + tb * os + rb;

			PACKED_DISPATCH(true);
		}
}

/*
 * Any nr x nt (the batch path of Q5_0 weights passes a whole converted row
 * block): tiles of up to ZMAXR rows x 2 * ZMAXP tokens, one token alone on
 * the 256-bit kernel.
 */
static TGT_P void
tile_q8_0_packed(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
				 float *out, size_t os)
{
	for (int t0 = 0; t0 < nt; t0 += 2 * ZMAXP)
	{
		const int	tn = nt - t0 < 2 * ZMAXP ? nt - t0 : 2 * ZMAXP;
		const char *at = (const char *) a + t0 * as;

		for (int r0 = 0; r0 < nr;)
		{
			/* 8 rows, else 4 and the rest (fewer instances) */
			const int	rn = nr - r0 >= ZMAXR ? ZMAXR : nr - r0 > 4 ? 4 : nr - r0;
			const char *wr = (const char *) w + r0 * ws;
			float	   *o = out + t0 * os + r0;

			r0 += rn;
			if (tn == 1)
			{
				for (int r1 = 0; r1 < rn; r1 += 4)
					switch (rn - r1 < 4 ? rn - r1 : 4)
					{
						case 4: packed_kernel(false, n, wr + r1 * ws, ws, at, as, o + r1, os, 4, 1); break;
						case 3: packed_kernel(false, n, wr + r1 * ws, ws, at, as, o + r1, os, 3, 1); break;
						case 2: packed_kernel(false, n, wr + r1 * ws, ws, at, as, o + r1, os, 2, 1); break;
						default: packed_kernel(false, n, wr + r1 * ws, ws, at, as, o + r1, os, 1, 1); break;
					}
				continue;
			}
			switch (rn * 4 + (tn + 1) / 2)
			{
				case 8 * 4 + 2: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 8, 2); break;
				case 8 * 4 + 1: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 8, 1); break;
				case 4 * 4 + 2: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 4, 2); break;
				case 4 * 4 + 1: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 4, 1); break;
				case 3 * 4 + 2: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 3, 2); break;
				case 3 * 4 + 1: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 3, 1); break;
				case 2 * 4 + 2: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 2, 2); break;
				case 2 * 4 + 1: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 2, 1); break;
				case 1 * 4 + 2: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 1, 2); break;
				default: q8_0_zmm_kernel(n, wr, ws, at, as, tn, o, os, 1, 1); break;
			}
		}
	}
}

static TGT_P float
dot_q4_1_packed(int64_t n, const void *w, const void *a)
{
	float		r;

	packed_kernel(true, n, w, 0, a, 0, &r, 0, 1, 1);
	return r;
}

static TGT_P float
dot_q8_0_packed(int64_t n, const void *w, const void *a)
{
	float		r;

	packed_kernel(false, n, w, 0, a, 0, &r, 0, 1, 1);
	return r;
}

static llm_qkernel q4_1_packed,
			q8_0_packed;

/* A packed kernel: the GGUF-layout VNNI kernel of the type (same activations) with our tiles. */
static llm_qkernel
packed_entry(uint32_t t, float (*dot) (int64_t, const void *, const void *), llm_dot_tile_fn tile,
			 bool (*repack) (const void *, void *, int64_t, int64_t),
			 void (*unpack) (const void *, int64_t, void *, int64_t))
{
	llm_qkernel k = *llm_qkernel_avx2_get(t, true);

	k.impl = "avx512vnni-packed";
	k.dot = dot;
	k.dot_tile = tile;
	k.tile_rows = PMAXR;
	k.tile_tokens = PMAXT;
	k.repack = repack;
	k.unpack = unpack;
	k.row_group = 1;
	return k;
}

static void
init_packed(void)
{
	q4_1_packed = packed_entry(LLM_TYPE_Q4_1, dot_q4_1_packed, tile_q4_1_packed, repack_q4_1, unpack_q4_1);
	q8_0_packed = packed_entry(LLM_TYPE_Q8_0, dot_q8_0_packed, tile_q8_0_packed, repack_q8_0, unpack_q8_0);
	q8_0_packed.tile_rows = ZMAXR;	/* the 512-bit tiles' rows; tokens stay 4 (two pairs) */
}

const llm_qkernel *
llm_qkernel_packed_vnni_get(uint32_t t)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_packed);
	if (t == LLM_TYPE_Q4_K)
		return llm_qkernel_q4_K_x8_vnni_get();
	if (t == LLM_TYPE_Q6_K)
		return llm_qkernel_q6_K_x8_vnni_get();
	return t == LLM_TYPE_Q4_1 ? &q4_1_packed : t == LLM_TYPE_Q8_0 ? &q8_0_packed : NULL;
}

#else							/* not x86 */

const llm_qkernel *
llm_qkernel_packed_vnni_get(uint32_t t)
{
	return NULL;
}

/* never called: dispatch.c installs it only on AVX512BW CPUs */
void
llm_convert_q5_0_q8_0_packed(int64_t n, const void *w, size_t ws, int nr, void *dst)
{
}

#endif
