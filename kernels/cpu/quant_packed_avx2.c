/*
 * quant_packed_avx2.c — Q4_1 and Q8_0 matmul tiles over weights repacked at
 * load time in groups of 4 rows, for CPUs with AVX2 + FMA + F16C: the AVX2
 * analogue of quant_packed.c's AVX512-VNNI tiles.
 *
 * Why: the GGUF-layout tiles (quant_tile.inc) spend, per (row, token,
 * block), a scale conversion, a broadcast and the multiply d_w * d_a beside
 * the four operations the arithmetic needs (vpmaddubsw, vpmaddwd with ones,
 * the int32 -> float conversion and the FMA), and unpack every block of a
 * row for each tile.  On Zen 3 the first two of those four share two pipes,
 * so one (row, token, block) costs at least one cycle; the extras made it
 * about two.  Here the fp16 scales of a row are contiguous, so the
 * products d_w * d_a of 8 blocks are one conversion and one multiply per
 * (row, token), and the FMA takes its scale as a broadcast load (no ALU
 * operation); Q4_1's nibbles of two blocks share one 32-byte vector (one
 * load, an AND and a shift-AND for two blocks).  With one token (decode)
 * the 4 rows of a group run together (4 independent FMA chains) from one
 * contiguous stream, so the hardware prefetcher sees a single sequential
 * read, where 4 separate rows were 4 streams.
 *
 * The arithmetic per (row, token, block) is exactly that of the GGUF tiles
 * (and of llama.cpp's ggml_vec_dot_q4_1_q8_1 / ggml_vec_dot_q8_0_q8_0 on
 * AVX2): the same integer lanes (bytes 4k..4k+3 of the block in lane k),
 * acc = fma(d_w * d_a, lanes, acc) in block order, Q4_1's ms = fma(m, s, ms)
 * in block order, out = hsum8(acc) (+ ms).  Results are bit-identical.
 *
 * Depends on quant_avx2.c only (each kernel takes the activations of the
 * GGUF-layout AVX2 kernel of its type); the instruction-set check is
 * dispatch.c's.  The Q8_0 kernel is also the batch kernel of Q5_0
 * (quant_q5_0.c converts Q5_0 rows into the Q8_0 layout below for batched
 * matmuls), so that layout is a contract of both files.
 *
 * Packed weights have the GGUF size; n_rows must be a multiple of 4 (Q4_1:
 * n a multiple of 64, Q8_0: of 32).  Group i = rows 4i..4i+3, at byte
 * 4i * row_bytes, nb = n / 32:
 *   Q4_1: uint16 d[4][nb]  (row-major: the scales of one row contiguous)
 *         uint16 m[nb][4]  (block-major: one block's 4 mins in 8 bytes)
 *         uint8  qs[nb/2][4][32]: pair p, row r, byte j =
 *                e(r, 2p, j) | e(r, 2p + 1, j) << 4 (e: element j of a block)
 *   Q8_0: uint16 d[4][nb]; int8 qs[nb][4][32] (block b, row r: its 32 quants)
 */
#include "quant.h"
#include "quant_x86.h"
#include "simd_x86.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

#define GROUP_ROWS 4			/* rows interleaved in a group */
#define CHUNK 32				/* blocks whose scale products are computed before their dot products */
/*
 * Software prefetch distance in a group stream (bytes ahead of the quants
 * being read); rows come from DRAM in decode and in the output projection.
 */
#ifndef X4_PREFETCH_AHEAD
#define X4_PREFETCH_AHEAD 1536
#endif

/* ---- layouts ---- */

static int
nibble(const llm_block_q4_1 *b, int j)
{
	return j < 16 ? (b->qs[j] & 0x0F) : (b->qs[j - 16] >> 4);
}

static bool
repack_q4_1_x4(const void *src, void *dst, int64_t n_rows, int64_t n)
{
	const int64_t nb = n / LLM_QK;
	const size_t rb = (size_t) nb * sizeof(llm_block_q4_1);

	if (n % (2 * LLM_QK) != 0 || n_rows % GROUP_ROWS != 0)
		return false;
	for (int64_t g = 0; g < n_rows / GROUP_ROWS; g++)
	{
		uint16_t   *d = (uint16_t *) ((char *) dst + (size_t) g * GROUP_ROWS * rb),
				   *m = d + GROUP_ROWS * nb;
		uint8_t    *qs = (uint8_t *) (m + GROUP_ROWS * nb);

		for (int r = 0; r < GROUP_ROWS; r++)
		{
			const llm_block_q4_1 *x = (const llm_block_q4_1 *) ((const char *) src +
																((size_t) g * GROUP_ROWS + r) * rb);

			for (int64_t b = 0; b < nb; b++)
			{
				d[r * nb + b] = x[b].d;
				m[b * GROUP_ROWS + r] = x[b].m;
			}
			for (int64_t p = 0; p < nb / 2; p++)
				for (int j = 0; j < LLM_QK; j++)
					qs[(p * GROUP_ROWS + r) * 32 + j] =
						(uint8_t) (nibble(&x[2 * p], j) | nibble(&x[2 * p + 1], j) << 4);
		}
	}
	return true;
}

static void
unpack_q4_1_x4(const void *w, int64_t row, void *dst, int64_t n)
{
	const int64_t nb = n / LLM_QK;
	const size_t rb = (size_t) nb * sizeof(llm_block_q4_1);
	const int	r = (int) (row % GROUP_ROWS);
	const uint16_t *d = (const uint16_t *) ((const char *) w + (size_t) (row - r) * rb),
			   *m = d + GROUP_ROWS * nb;
	const uint8_t *qs = (const uint8_t *) (m + GROUP_ROWS * nb);
	llm_block_q4_1 *x = dst;

	for (int64_t b = 0; b < nb; b++)
	{
		const uint8_t *p = qs + ((b / 2) * GROUP_ROWS + r) * 32;
		int			sh = (int) (b % 2) * 4;

		x[b].d = d[r * nb + b];
		x[b].m = m[b * GROUP_ROWS + r];
		for (int j = 0; j < 16; j++)
			x[b].qs[j] = (uint8_t) (((p[j] >> sh) & 0x0F) | ((p[j + 16] >> sh) & 0x0F) << 4);
	}
}

static bool
repack_q8_0_x4(const void *src, void *dst, int64_t n_rows, int64_t n)
{
	const int64_t nb = n / LLM_QK;
	const size_t rb = (size_t) nb * sizeof(llm_block_q8_0);

	if (n % LLM_QK != 0 || n_rows % GROUP_ROWS != 0)
		return false;
	for (int64_t g = 0; g < n_rows / GROUP_ROWS; g++)
	{
		uint16_t   *d = (uint16_t *) ((char *) dst + (size_t) g * GROUP_ROWS * rb);
		int8_t	   *qs = (int8_t *) (d + GROUP_ROWS * nb);

		for (int r = 0; r < GROUP_ROWS; r++)
		{
			const llm_block_q8_0 *x = (const llm_block_q8_0 *) ((const char *) src +
																((size_t) g * GROUP_ROWS + r) * rb);

			for (int64_t b = 0; b < nb; b++)
			{
				d[r * nb + b] = x[b].d;
				memcpy(qs + (b * GROUP_ROWS + r) * 32, x[b].qs, 32);
			}
		}
	}
	return true;
}

static void
unpack_q8_0_x4(const void *w, int64_t row, void *dst, int64_t n)
{
	const int64_t nb = n / LLM_QK;
	const size_t rb = (size_t) nb * sizeof(llm_block_q8_0);
	const int	r = (int) (row % GROUP_ROWS);
	const uint16_t *d = (const uint16_t *) ((const char *) w + (size_t) (row - r) * rb);
	const int8_t *qs = (const int8_t *) (d + GROUP_ROWS * nb);
	llm_block_q8_0 *x = dst;

	for (int64_t b = 0; b < nb; b++)
	{
		x[b].d = d[r * nb + b];
		memcpy(x[b].qs, qs + (b * GROUP_ROWS + r) * 32, 32);
	}
}

/* ---- kernels ---- */

/* 8 int32 lanes of 4 u8 x s8 products each, as float (vpmaddubsw + vpmaddwd, as ggml's AVX2 code) */
INL __m256
lanes_us8(__m256i ux, __m256i sy)
{
	return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ux, sy), _mm256_set1_epi16(1)));
}

/* Keep v in a register (a load GCC would otherwise repeat as a memory operand per use). */
#define IN_REG(v) __asm__("" : "+x"(v))

/*
 * The dot products of rows r0..r0+RN-1 of a group with T tokens over blocks
 * c0..c0+nc-1 (a chunk), continuing the accumulators acc (RN * T <= 8 stay
 * in registers; RN, T, q4 are constants after inlining); sc holds the
 * chunk's scale products (x4_kernel).
 */
INL void
x4_chunk(const bool q4, const uint8_t *wq, const int8_t *const *aq, int64_t c0, int nc,
		 const float (*sc)[4][CHUNK], __m256 (*acc)[4], const int r0, const int RN, const int T)
{
	const __m256i low4 = _mm256_set1_epi8(0x0F);
	__m256		a[4][4];

	#pragma GCC unroll 4
	for (int r = 0; r < RN; r++)
		#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
			a[r][t] = acc[r0 + r][t];
	if (q4)
	{
		/* block pairs: low nibbles = block 2p, high nibbles = block 2p + 1 */
		for (int k = 0; k < nc; k += 2)
		{
			const uint8_t *pq = wq + (size_t) ((c0 + k) / 2) * GROUP_ROWS * 32;
			__m256i		v[4];

			if (r0 == 0)
			{
				_mm_prefetch((const char *) pq + X4_PREFETCH_AHEAD, _MM_HINT_T0);
				_mm_prefetch((const char *) pq + X4_PREFETCH_AHEAD + 64, _MM_HINT_T0);
			}
			#pragma GCC unroll 4
			for (int r = 0; r < RN; r++)
				v[r] = _mm256_loadu_si256((const __m256i *) (pq + (r0 + r) * 32));
			#pragma GCC unroll 2
			for (int h = 0; h < 2; h++)
			{
				const int64_t b = c0 + k + h;
				__m256i		x[4];

				#pragma GCC unroll 4
				for (int r = 0; r < RN; r++)
					x[r] = _mm256_and_si256(h ? _mm256_srli_epi16(v[r], 4) : v[r], low4);
				#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
				{
					__m256i		qy = _mm256_loadu_si256((const __m256i *) (aq[t] + b * LLM_QK));

					if (RN > 1)
						IN_REG(qy);
					#pragma GCC unroll 4
					for (int r = 0; r < RN; r++)
						a[r][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[r0 + r][t][k + h]),
												  lanes_us8(x[r], qy), a[r][t]);
				}
			}
		}
	}
	else
	{
		for (int k = 0; k < nc; k++)
		{
			const int64_t b = c0 + k;
			const int8_t *pq = (const int8_t *) wq + (size_t) b * GROUP_ROWS * 32;
			__m256i		x[4],
						ax[4];

			if (r0 == 0)
			{
				_mm_prefetch((const char *) pq + X4_PREFETCH_AHEAD, _MM_HINT_T0);
				_mm_prefetch((const char *) pq + X4_PREFETCH_AHEAD + 64, _MM_HINT_T0);
			}
			#pragma GCC unroll 4
			for (int r = 0; r < RN; r++)
			{
				x[r] = _mm256_loadu_si256((const __m256i *) (pq + (r0 + r) * 32));
				ax[r] = _mm256_sign_epi8(x[r], x[r]);
			}
			#pragma GCC unroll 4
			for (int t = 0; t < T; t++)
			{
				__m256i		qy = _mm256_loadu_si256((const __m256i *) (aq[t] + b * LLM_QK));

				#pragma GCC unroll 4
				for (int r = 0; r < RN; r++)
					a[r][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[r0 + r][t][k]),
											  lanes_us8(ax[r], _mm256_sign_epi8(qy, x[r])), a[r][t]);
			}
		}
	}
	#pragma GCC unroll 4
	for (int r = 0; r < RN; r++)
		#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
			acc[r0 + r][t] = a[r][t];
}

/*
 * The 4 rows of one group x T <= 4 activation rows: out[t * os + r].
 * Per chunk of CHUNK blocks, first the scale products d_w * d_a of every
 * (row, token, block) and Q4_1's ms chains, then the dot products: for
 * T <= 2 the 4 rows at once, for 3-4 tokens two halves of 2 rows (the
 * accumulators, 8 registers at a time, wait in memory between the
 * halves).  Q4_1's ms chains (one per (row, token), fma(m, s, ms) block
 * after block as the scalar chain) run 8 per vector: ms[0] lane 4t + r for
 * tokens 0-1, ms[1] for tokens 2-3.
 */
INL void
x4_kernel(const bool q4, int64_t n, const void *w, const void *a, size_t as, float *out, size_t os,
		  const int T)
{
	const int64_t nb = n / LLM_QK;
	const uint16_t *wd = w;
	const uint16_t *wm = wd + GROUP_ROWS * nb;	/* Q4_1 */
	const uint8_t *wq = (const uint8_t *) (wd + (q4 ? 2 : 1) * GROUP_ROWS * nb);
	__m256		acc[4][4];
	__m256		ms[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
	float		sc[4][4][CHUNK] __attribute__((aligned(32)));	/* d_w * d_a of (row, token, block of the chunk) */
	const int8_t *aq[4];
	const float *ad[4];
	const float *asum[4];

	#pragma GCC unroll 4
	for (int t = 0; t < T; t++)
	{
		const char *at = (const char *) a + t * as;

		aq[t] = (const int8_t *) at;
		ad[t] = llm_act_d(at, n);
		asum[t] = ad[t] + nb;
		#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			acc[r][t] = _mm256_setzero_ps();
	}
	for (int64_t c0 = 0; c0 < nb; c0 += CHUNK)
	{
		const int	nc = nb - c0 < CHUNK ? (int) (nb - c0) : CHUNK;

		for (int g8 = 0; g8 < nc; g8 += 8)
		{
			const int64_t g = c0 + g8;
			const int	ng = nc - g8 < 8 ? nc - g8 : 8;
			const __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(ng), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
			__m256		da[4];

			/* scale products; lanes past the row end are zero */
			#pragma GCC unroll 4
			for (int t = 0; t < T; t++)
				da[t] = _mm256_maskload_ps(ad[t] + g, lm);
			#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
			{
				/* 8 scales; past the row end this reads the group's next array (never past the weight) */
				__m256		dw = _mm256_and_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (wd + r * nb + g))),
											   _mm256_castsi256_ps(lm));

				#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					_mm256_store_ps(sc[r][t] + g8, _mm256_mul_ps(dw, da[t]));
			}
			if (q4)
			{
				/*
				 * s of (token t, block k) -> s4[k % 4][(k / 4) * 4 + t] (a 4 x 8
				 * transpose), so that one 16-byte load gives a block's 4 tokens
				 */
				float		s4[4][8] __attribute__((aligned(32)));
				__m256		st[4],
							lo01,
							hi01,
							lo23,
							hi23;

				#pragma GCC unroll 4
				for (int t = 0; t < 4; t++)
					st[t] = t < T ? _mm256_maskload_ps(asum[t] + g, lm) : _mm256_setzero_ps();
				lo01 = _mm256_unpacklo_ps(st[0], st[1]);
				hi01 = _mm256_unpackhi_ps(st[0], st[1]);
				lo23 = _mm256_unpacklo_ps(st[2], st[3]);
				hi23 = _mm256_unpackhi_ps(st[2], st[3]);
				_mm256_store_ps(s4[0], _mm256_shuffle_ps(lo01, lo23, 0x44));
				_mm256_store_ps(s4[1], _mm256_shuffle_ps(lo01, lo23, 0xEE));
				_mm256_store_ps(s4[2], _mm256_shuffle_ps(hi01, hi23, 0x44));
				_mm256_store_ps(s4[3], _mm256_shuffle_ps(hi01, hi23, 0xEE));
				for (int k = 0; k < ng; k++)
				{
					__m128		m4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) (wm + (g + k) * GROUP_ROWS)));
					__m256		m8 = _mm256_set_m128(m4, m4);
					__m256		s8 = _mm256_broadcast_ps((const __m128 *) (s4[k % 4] + (k / 4) * 4));

					ms[0] = _mm256_fmadd_ps(m8, _mm256_permutevar8x32_ps(s8, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
											ms[0]);
					if (T > 2)
						ms[1] = _mm256_fmadd_ps(m8, _mm256_permutevar8x32_ps(s8, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3)),
												ms[1]);
				}
			}
		}
		if (T <= 2)
			x4_chunk(q4, wq, aq, c0, nc, (const float (*)[4][CHUNK]) sc, acc, 0, 4, T);
		else
		{
			x4_chunk(q4, wq, aq, c0, nc, (const float (*)[4][CHUNK]) sc, acc, 0, 2, T);
			x4_chunk(q4, wq, aq, c0, nc, (const float (*)[4][CHUNK]) sc, acc, 2, 2, T);
		}
	}

	/*
	 * Per token, hsum8 of the 4 rows' accumulators at once: b_r = lo + hi
	 * halves, then a 4 x 4 transpose gives (b0 + b2) + (b1 + b3) lane by
	 * lane, the additions of llm_hsum8 in its order; lanes = rows.
	 */
	#pragma GCC unroll 4
	for (int t = 0; t < T; t++)
	{
		__m128		b[4],
					res;

		#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			b[r] = _mm_add_ps(_mm256_extractf128_ps(acc[r][t], 1), _mm256_castps256_ps128(acc[r][t]));
		_MM_TRANSPOSE4_PS(b[0], b[1], b[2], b[3]);
		res = _mm_add_ps(_mm_add_ps(b[0], b[2]), _mm_add_ps(b[1], b[3]));
		if (q4)
			res = _mm_add_ps(res, t % 2 ? _mm256_extractf128_ps(ms[t / 2], 1) : _mm256_castps256_ps128(ms[t / 2]));
		_mm_storeu_ps(out + t * os, res);
	}
}

/* A tile of nr rows (whole groups: w at a group start, nr a multiple of 4) x nt tokens. */
INL void
x4_tile(const bool q4, int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
		float *out, size_t os)
{
	for (int g0 = 0; g0 < nr; g0 += GROUP_ROWS)
	{
		const void *gw = (const char *) w + (size_t) g0 * ws;

		for (int t0 = 0; t0 < nt; t0 += 4)
		{
			const void *ta = (const char *) a + (size_t) t0 * as;
			float	   *o = out + (size_t) t0 * os + g0;

			switch (nt - t0 < 4 ? nt - t0 : 4)
			{
				case 1:
					x4_kernel(q4, n, gw, ta, as, o, os, 1);
					break;
				case 2:
					x4_kernel(q4, n, gw, ta, as, o, os, 2);
					break;
				case 3:
					x4_kernel(q4, n, gw, ta, as, o, os, 3);
					break;
				default:
					x4_kernel(q4, n, gw, ta, as, o, os, 4);
					break;
			}
		}
	}
}

static TGT void
tile_q4_1_x4(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
			 float *out, size_t os)
{
	x4_tile(true, n, w, ws, nr, a, as, nt, out, os);
}

static TGT void
tile_q8_0_x4(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
			 float *out, size_t os)
{
	x4_tile(false, n, w, ws, nr, a, as, nt, out, os);
}

static llm_qkernel q4_1_x4,
			q8_0_x4;

/* A packed kernel: the GGUF-layout AVX2 kernel of the type (same activations) with our tiles. */
static llm_qkernel
x4_entry(uint32_t t, llm_dot_tile_fn tile, bool (*repack) (const void *, void *, int64_t, int64_t),
		 void (*unpack) (const void *, int64_t, void *, int64_t))
{
	llm_qkernel k = *llm_qkernel_avx2_get(t, false);

	k.impl = "avx2-packed";
	k.dot = NULL;				/* rows are interleaved: no single-row layout */
	k.dot_tile = tile;
	k.tile_rows = GROUP_ROWS;
	k.tile_tokens = 4;
	k.repack = repack;
	k.unpack = unpack;
	k.row_group = GROUP_ROWS;
	return k;
}

static void
init_x4(void)
{
	q4_1_x4 = x4_entry(LLM_TYPE_Q4_1, tile_q4_1_x4, repack_q4_1_x4, unpack_q4_1_x4);
	q8_0_x4 = x4_entry(LLM_TYPE_Q8_0, tile_q8_0_x4, repack_q8_0_x4, unpack_q8_0_x4);
}

const llm_qkernel *
llm_qkernel_packed_avx2_get(uint32_t t)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_x4);
	return t == LLM_TYPE_Q4_1 ? &q4_1_x4 : t == LLM_TYPE_Q8_0 ? &q8_0_x4 : NULL;
}

#else							/* not x86 */

const llm_qkernel *
llm_qkernel_packed_avx2_get(uint32_t t)
{
	return NULL;
}

#endif
