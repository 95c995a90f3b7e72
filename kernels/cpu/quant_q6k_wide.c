/*
 * quant_q6k_wide.c — the wide (tiled-order) form of Q6_K rows repacked in
 * groups of 8 (quant_q6k_packed.c's layout) for batches of several tokens,
 * AVX512F/VL/BW/VNNI: 16 rows in the 16 int32 lanes of a vector, so that
 * every per-super-block step of the form, integer and float, is one vector
 * operation for 16 (row, token) pairs.
 *
 * The form (quant.h "Row forms", quant_kforms.c's dot_q6_K_wide) per row,
 * token and super-block b: S = sum over the 16 sub-blocks j of
 * scale_j * sum_{e in j} (q_e - 32) * y_e (exact in int32), then
 *     r = float(S) * fp16(d);  acc = fma(r, d_a[b], acc)   (acc from 0)
 * Only S's value matters to the float steps, and S is an exact integer,
 * so it may be formed in any order; the float steps here are those two, in
 * super-block order, in each lane (bit-identical to the scalar form).
 *
 * Per 16 rows and super-block, once per call: the rows' 6-bit values are
 * unpacked to bytes and transposed into a panel of 64 vectors, vector k
 * holding elements 4k .. 4k+3 of each row in the row's int32 lane; the
 * sub-blocks' scales become 16 int32 vectors (lane = row).  Then per token
 * and sub-block j, from acc = -32 * bsums_j (the token's sum of the
 * sub-block's 16 quants, broadcast): 4 vpdpbusd of the panel's vectors 4j
 * .. 4j+3 (unsigned 6-bit q) against the token's 4-byte groups broadcast
 * from memory (signed), so acc = sum (q - 32) * y; S += acc * scale_j
 * (vpmulld).  The panel is reused by every token of the call, 8 tokens at a
 * time in registers.  Bounds: |acc| <= 16 * 32 * 128, |scale * acc| <=
 * 2^23, |S| <= 2^27: no int32 overflow.
 *
 * Transposition: after unpacking, a pair P of rows (2P, 2P + 1) gives per
 * 32-element chunk c one vector X_P (row 2P's 8 dwords, then row 2P + 1's);
 * the 8 pairs' X_P become the chunk's 8 panel vectors Y_d (dword d of every
 * row) by three rounds of vpermt2d (pairs, quads, all eight), the index
 * vectors built once from the lanes' contents (init_wide_tables).
 *
 * Needs AVX512F/VL/BW/VNNI (the packed Q6_K kernel's getter checks them;
 * quant_q6k_packed.c calls this for tiles of Q6KW_MIN_TOKENS tokens or more).
 */
#include "quant.h"
#include "quant_x86.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define TGT_W __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define INL_W static inline __attribute__((always_inline)) TGT_W

#define QW_GROUP_ROWS 8
#define QW_BLOCK (QW_GROUP_ROWS * sizeof(llm_block_q6_K))	/* bytes per super-block of a group */
#define QW_SC 1536				/* offset of the scales in a group's super-block (quant_q6k_packed.c) */
#define QW_D 1664				/* offset of the d values */
#define QW_PASS LLM_Q6K_WIDE_TOKENS	/* tokens per pass over the super-blocks */
#define QW_REG_TOKS 8			/* tokens held in registers at a time */

/*
 * vpermt2d indices: panel rounds 1..3 (two outputs each: idx_*[0], [1]),
 * scale rounds 1..2.  Built from the lanes' contents by init_wide_tables.
 */
static int32_t idx_p1[2][16] __attribute__((aligned(64)));
static int32_t idx_p2[2][16] __attribute__((aligned(64)));
static int32_t idx_p3[2][16] __attribute__((aligned(64)));
static int32_t idx_s1[2][16] __attribute__((aligned(64)));
static int32_t idx_s2[2][16] __attribute__((aligned(64)));

/* The index of vpermt2d(a, idx, b) lane that holds `want`: a's lanes are 0..15, b's 16..31. */
static int32_t
find_lane(const int *a, const int *b, int want)
{
	for (int i = 0; i < 16; i++)
	{
		if (a[i] == want)
			return i;
		if (b[i] == want)
			return 16 + i;
	}
	return -1;					/* not reached: every round's outputs come from its inputs */
}

/*
 * Contents are labels row * 64 + dword (dword of the row's 32-element chunk
 * for the panel, of its 16 scales for the scales).  Panel round 1 takes
 * pairs P = 0, 1 (rows 0..3) to dwords 4e .. 4e+3, lane (d % 4) * 4 + row;
 * round 2 pairs of those (rows 0..7) to dwords 4e + 2f, +1, lane (d % 2) * 8
 * + row; round 3 (rows 0..15) to dword d, lane = row.  The same indices
 * serve every pair of inputs of a round (their contents differ only by a
 * row and dword offset).
 */
static void
init_wide_tables(void)
{
	int			x0[16],
				x1[16],
				z0[16],
				z1[16],
				w0[16],
				w1[16],
				y[16];

	for (int i = 0; i < 16; i++)
	{
		x0[i] = (i / 8) * 64 + i % 8;	/* X_0: row 0 dwords 0..7, row 1 dwords 0..7 */
		x1[i] = (2 + i / 8) * 64 + i % 8;
	}
	for (int e = 0; e < 2; e++)
		for (int i = 0; i < 16; i++)
		{
			int			want = (i % 4) * 64 + 4 * e + i / 4;

			idx_p1[e][i] = find_lane(x0, x1, want);
		}
	/* round 2 inputs: round 1's output e = 0 of rows 0..3 and of rows 4..7 */
	for (int i = 0; i < 16; i++)
	{
		z0[i] = (i % 4) * 64 + i / 4;
		z1[i] = (4 + i % 4) * 64 + i / 4;
	}
	for (int f = 0; f < 2; f++)
		for (int i = 0; i < 16; i++)
			idx_p2[f][i] = find_lane(z0, z1, (i % 8) * 64 + 2 * f + i / 8);
	/* round 3 inputs: round 2's output f = 0 of rows 0..7 and of rows 8..15 */
	for (int i = 0; i < 16; i++)
	{
		w0[i] = (i % 8) * 64 + i / 8;
		w1[i] = (8 + i % 8) * 64 + i / 8;
	}
	for (int g = 0; g < 2; g++)
		for (int i = 0; i < 16; i++)
			idx_p3[g][i] = find_lane(w0, w1, i * 64 + g);

	/* scales: I_m holds rows 4m .. 4m+3, 4 dwords (of 4 scales) each, lane (row % 4) * 4 + u */
	for (int i = 0; i < 16; i++)
	{
		x0[i] = (i / 4) * 64 + i % 4;
		x1[i] = (4 + i / 4) * 64 + i % 4;
	}
	for (int e = 0; e < 2; e++)
		for (int i = 0; i < 16; i++)
			idx_s1[e][i] = find_lane(x0, x1, (i % 8) * 64 + 2 * e + i / 8);
	for (int i = 0; i < 16; i++)
	{
		y[i] = (i % 8) * 64 + i / 8;
		z0[i] = (8 + i % 8) * 64 + i / 8;
	}
	for (int g = 0; g < 2; g++)
		for (int i = 0; i < 16; i++)
			idx_s2[g][i] = find_lane(y, z0, i * 64 + g);
}

/*
 * Super-block b of two groups (rows 0..7 at o0, 8..15 at o1: the groups'
 * super-block b) into the panel (W[k]: elements 4k .. 4k+3 of each row,
 * lane = row), the scales (SC[j]: sub-block j's scale of each row as int32)
 * and d (one float per row).
 */
INL_W void
build_panel(const uint8_t *o0, const uint8_t *o1, __m512i *W, __m512i *SC, __m512 *dv)
{
	const __m512i m15 = _mm512_set1_epi8(15),
				m30 = _mm512_set1_epi8(0x30);
	const __m512i p1a = _mm512_load_si512(idx_p1[0]),
				p1b = _mm512_load_si512(idx_p1[1]),
				p2a = _mm512_load_si512(idx_p2[0]),
				p2b = _mm512_load_si512(idx_p2[1]),
				p3a = _mm512_load_si512(idx_p3[0]),
				p3b = _mm512_load_si512(idx_p3[1]);

	for (int h = 0; h < 2; h++)
	{
		__m512i		tp[3][8];	/* part (ql lo, ql hi, qh) of half h, dword d of every row */

		for (int part = 0; part < 3; part++)
		{
			__m512i		x[8],
						z[8],
						v[8];

			for (int P = 0; P < 8; P++)
				x[P] = _mm512_loadu_si512((const void *) ((P < 4 ? o0 : o1) + 384 * (P % 4) + 192 * h + 64 * part));
			/* z[2i + e]: rows 4i .. 4i+3, dwords 4e .. 4e+3 */
			for (int i = 0; i < 4; i++)
			{
				z[2 * i] = _mm512_permutex2var_epi32(x[2 * i], p1a, x[2 * i + 1]);
				z[2 * i + 1] = _mm512_permutex2var_epi32(x[2 * i], p1b, x[2 * i + 1]);
			}
			/* v[4i + 2e + f]: rows 8i .. 8i+7, dwords 4e + 2f, 4e + 2f + 1 */
			for (int i = 0; i < 2; i++)
				for (int e = 0; e < 2; e++)
				{
					v[4 * i + 2 * e] = _mm512_permutex2var_epi32(z[4 * i + e], p2a, z[4 * i + 2 + e]);
					v[4 * i + 2 * e + 1] = _mm512_permutex2var_epi32(z[4 * i + e], p2b, z[4 * i + 2 + e]);
				}
			/* rows 0..15, dword 4e + 2f + g */
			for (int e = 0; e < 2; e++)
				for (int f = 0; f < 2; f++)
				{
					tp[part][4 * e + 2 * f] = _mm512_permutex2var_epi32(v[2 * e + f], p3a, v[4 + 2 * e + f]);
					tp[part][4 * e + 2 * f + 1] = _mm512_permutex2var_epi32(v[2 * e + f], p3b, v[4 + 2 * e + f]);
				}
		}
		/*
		 * Chunk c = 4h + k (elements 32c ..), dword d: quant_q6k_packed.c's
		 * unpacking, bytes 6 bits wide
		 */
		for (int d = 0; d < 8; d++)
		{
			const __m512i la = tp[0][d],
						lb = tp[1][d],
						hb = tp[2][d];

			W[8 * (4 * h + 0) + d] = _mm512_ternarylogic_epi32(la, m15, _mm512_and_si512(_mm512_slli_epi16(hb, 4), m30),
															   0xEA);
			W[8 * (4 * h + 1) + d] = _mm512_ternarylogic_epi32(lb, m15, _mm512_and_si512(_mm512_slli_epi16(hb, 2), m30),
															   0xEA);
			W[8 * (4 * h + 2) + d] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(la, 4), m15, _mm512_and_si512(hb, m30),
															   0xEA);
			W[8 * (4 * h + 3) + d] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(lb, 4), m15,
															   _mm512_and_si512(_mm512_srli_epi16(hb, 2), m30), 0xEA);
		}
	}
	/* scales: rows 4m .. 4m+3 per vector, then dword u (scales 4u .. 4u+3) of every row */
	{
		const __m512i i0 = _mm512_loadu_si512((const void *) (o0 + QW_SC)),
					i1 = _mm512_loadu_si512((const void *) (o0 + QW_SC + 64)),
					i2 = _mm512_loadu_si512((const void *) (o1 + QW_SC)),
					i3 = _mm512_loadu_si512((const void *) (o1 + QW_SC + 64));
		const __m512i s1a = _mm512_load_si512(idx_s1[0]),
					s1b = _mm512_load_si512(idx_s1[1]),
					s2a = _mm512_load_si512(idx_s2[0]),
					s2b = _mm512_load_si512(idx_s2[1]);
		/* rows 0..7 / 8..15, dwords 2e, 2e + 1 */
		const __m512i v00 = _mm512_permutex2var_epi32(i0, s1a, i1),
					v01 = _mm512_permutex2var_epi32(i0, s1b, i1),
					v10 = _mm512_permutex2var_epi32(i2, s1a, i3),
					v11 = _mm512_permutex2var_epi32(i2, s1b, i3);
		__m512i		u[4];

		u[0] = _mm512_permutex2var_epi32(v00, s2a, v10);
		u[1] = _mm512_permutex2var_epi32(v00, s2b, v10);
		u[2] = _mm512_permutex2var_epi32(v01, s2a, v11);
		u[3] = _mm512_permutex2var_epi32(v01, s2b, v11);
		for (int k = 0; k < 4; k++)
		{
			/* byte jj of each dword, sign-extended: scale 4k + jj */
			SC[4 * k + 0] = _mm512_srai_epi32(_mm512_slli_epi32(u[k], 24), 24);
			SC[4 * k + 1] = _mm512_srai_epi32(_mm512_slli_epi32(u[k], 16), 24);
			SC[4 * k + 2] = _mm512_srai_epi32(_mm512_slli_epi32(u[k], 8), 24);
			SC[4 * k + 3] = _mm512_srai_epi32(u[k], 24);
		}
	}
	*dv = _mm512_cvtph_ps(_mm256_set_m128i(_mm_loadu_si128((const __m128i *) (o1 + QW_D)),
										   _mm_loadu_si128((const __m128i *) (o0 + QW_D))));
}

/*
 * One super-block for T tokens (T a constant 1..8 after inlining): y[t]
 * the token's quants of this super-block, cb[16 t + j] its -32 * bsums_j,
 * da[t] its d; accf[t] the 16 rows' accumulators.
 */
INL_W void
wide_sb(const __m512i *W, const __m512i *SC, __m512 dv, const int8_t *const *y, const int32_t *cb,
		const float *da, __m512 *accf, const int T)
{
	__m512i		S[QW_REG_TOKS];

	#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
		S[t] = _mm512_setzero_si512();
	#pragma GCC unroll 1
	for (int j = 0; j < 16; j++)
	{
		__m512i		acc[QW_REG_TOKS];

		#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			acc[t] = _mm512_set1_epi32(cb[16 * t + j]);
		#pragma GCC unroll 4
		for (int m = 0; m < 4; m++)
		{
			const __m512i wv = W[4 * j + m];

			#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
			{
				int32_t		yv;

				memcpy(&yv, y[t] + 16 * j + 4 * m, 4);
				acc[t] = _mm512_dpbusd_epi32(acc[t], wv, _mm512_set1_epi32(yv));
			}
		}
		#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(acc[t], SC[j]));
	}
	#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
		accf[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(S[t]), dv), _mm512_set1_ps(da[t]), accf[t]);
}

/*
 * 16 rows (groups g0, g1; g1 == g0 with keep == 0x00FF for a lone group) x
 * nt tokens; out[t * os + lane] for the lanes in keep.
 */
static TGT_W void
q6_K_wide16(int64_t n, const uint8_t *g0, const uint8_t *g1, const char *a, size_t as, int nt, float *out, size_t os,
	   __mmask16 keep)
{
	const int64_t nb = n / LLM_QK_K;
	__m512i		W[64],
				SC[16];
	__m512		accf[QW_PASS];
	int32_t		cb[QW_PASS * 16] __attribute__((aligned(64)));
	const int8_t *yb[QW_PASS];

	for (int t0 = 0; t0 < nt; t0 += QW_PASS)
	{
		const int	np = nt - t0 < QW_PASS ? nt - t0 : QW_PASS;
		const char *ap = a + (size_t) t0 * as;

		for (int t = 0; t < np; t++)
			accf[t] = _mm512_setzero_ps();
		for (int64_t b = 0; b < nb; b++)
		{
			const uint8_t *o0 = g0 + (size_t) b * QW_BLOCK,
					   *o1 = g1 + (size_t) b * QW_BLOCK;
			__m512		dv;
			float		da[QW_PASS];

			/* the next super-block of both groups, while this one is unpacked */
			if (b + 1 < nb)
				for (int l = 0; l < (int) QW_BLOCK; l += 64)
				{
					_mm_prefetch((const char *) o0 + QW_BLOCK + l, _MM_HINT_T0);
					if (o1 != o0)
						_mm_prefetch((const char *) o1 + QW_BLOCK + l, _MM_HINT_T0);
				}
			build_panel(o0, o1, W, SC, &dv);
			for (int t = 0; t < np; t++)
			{
				const int8_t *aq = (const int8_t *) (ap + (size_t) t * as);
				const float *ad = llm_act_d(aq, n);
				const __m256i bs = _mm256_loadu_si256((const __m256i *) ((const int16_t *) (ad + nb) + b * 16));

				_mm512_store_si512(cb + 16 * t, _mm512_sub_epi32(_mm512_setzero_si512(),
																 _mm512_slli_epi32(_mm512_cvtepi16_epi32(bs), 5)));
				yb[t] = aq + b * LLM_QK_K;
				da[t] = ad[b];
			}
			for (int tg = 0; tg < np; tg += QW_REG_TOKS)
			{
				const int8_t *const *y = yb + tg;
				const int32_t *c = cb + 16 * tg;

				switch (np - tg < QW_REG_TOKS ? np - tg : QW_REG_TOKS)
				{
					case 1:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 1);
						break;
					case 2:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 2);
						break;
					case 3:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 3);
						break;
					case 4:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 4);
						break;
					case 5:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 5);
						break;
					case 6:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 6);
						break;
					case 7:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 7);
						break;
					default:
						wide_sb(W, SC, dv, y, c, da + tg, accf + tg, 8);
						break;
				}
			}
		}
		for (int t = 0; t < np; t++)
			_mm512_mask_storeu_ps(out + (size_t) (t0 + t) * os, keep, accf[t]);
	}
}

static pthread_once_t wide_once = PTHREAD_ONCE_INIT;

void
llm_tile_q6_K_x8_wide_avx512(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
							 float *out, size_t os)
{
	pthread_once(&wide_once, init_wide_tables);
	for (int r = 0; r < nr; r += 2 * QW_GROUP_ROWS)
	{
		const uint8_t *g0 = (const uint8_t *) w + (size_t) r * ws;
		const bool	two = nr - r >= 2 * QW_GROUP_ROWS;

		q6_K_wide16(n, g0, two ? g0 + (size_t) QW_GROUP_ROWS * ws : g0, a, as, nt, out + r, os,
			   two ? (__mmask16) 0xFFFF : (__mmask16) 0x00FF);
	}
}

#else							/* not x86 */

void
llm_tile_q6_K_x8_wide_avx512(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nt,
							 float *out, size_t os)
{
	(void) n;
	(void) w;
	(void) ws;
	(void) nr;
	(void) a;
	(void) as;
	(void) nt;
	(void) out;
	(void) os;
}

#endif
