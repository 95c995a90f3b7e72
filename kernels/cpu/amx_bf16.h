/*
 * amx_bf16.h — the encoders' F16 matmul on AMX-BF16 tiles (amx_bf16.c).
 *
 * Arithmetic.  A binary16 weight w is exactly whi + wlo, two bfloat16
 * values: whi = bf16(w) rounded to nearest even, wlo = w - whi (at most 3
 * significant bits, at least 2^-24 in magnitude when not zero, so a normal
 * bfloat16: AMX reads bfloat16 subnormals as zero and never meets one here;
 * llm_amx_split_exact checks every binary16 value).  An fp32 activation x
 * becomes xhi = bf16(x), xlo = bf16(x - xhi) (x - xhi is exact; xhi + xlo
 * is within 2^-17 |x| of x, a closer value than the binary16 rounding of
 * the exact F16 kernels).  The dot product of a weight row and an
 * activation row is then the sum over 32-element blocks k = 0, 1, ... of
 * the three tile products xhi.whi, xhi.wlo, xlo.whi (TDPBF16PS: each
 * bfloat16 product exact in fp32, accumulated in fp32, rounded to nearest
 * even), in that order, into one fp32 accumulator; xlo.wlo (below 2^-16 of
 * the product) is left out.  The result is within a few 2^-17 of each
 * product's magnitude plus the fp32 sum's rounding of the exact dot
 * product (test_amx_bf16 states and checks the bound).
 *
 * Batch invariance.  An output (token t, row r) is computed by the same
 * sequence of tile operations whatever t's and r's places in their tiles,
 * the number of tokens or the threads: token tiles are padded with zero
 * rows, weight row blocks with zero rows, K with zero columns, and every
 * element of a tile product is its own A row times its own B column, in
 * the same K order.  So a token's outputs are bit-identical alone and in
 * any batch (test_amx_bf16, test_embed_batch).
 *
 * Layouts.  Packed weight (llm_amx_pack_f16): for each block of 16 rows
 * (rows past n_rows zero), for each block of 32 columns (columns past
 * n_cols zero), the hi tile then the lo tile, each 16 column pairs x 16
 * rows of 2 bfloat16 (the B operand's VNNI layout: element [p][2c + e] is
 * row c, column 2p + e of the block): 2 KiB per (row block, column block).
 * Split activations (llm_amx_split_rows): per token tile (16 tokens; rows
 * past the batch zero, llm_amx_zero_rows), per column block (columns past
 * n_cols zero), the hi tile then the lo tile, each 16 tokens x 32
 * bfloat16 (the A operand, row = token): the same 2 KiB per (tile, column
 * block) as the weights.
 *
 * Use.  llm_amx_bf16_usable asks the kernel once per process for the tile
 * data state (arch_prctl ARCH_REQ_XCOMP_PERM) after checking CPUID and
 * XCR0, and says why not when it cannot; llm_amx_gemm may be called only
 * after it returned true.  llm_amx_gemm loads its tile configuration on the
 * calling thread and releases the tiles before it returns, so any thread
 * may call it.  Plain C; no PostgreSQL.
 */
#ifndef LLM_AMX_BF16_H
#define LLM_AMX_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LLM_AMX_TILE_ROWS 16	/* weight rows of a row block, tokens of a token tile */
#define LLM_AMX_TILE_K 32		/* columns of a column block */

/*
 * True when this CPU has AMX-TILE and AMX-BF16, the OS enables their state
 * and the kernel granted this process the tile data (asked once per
 * process; the answer is kept).  False with the reason in why otherwise
 * (why may be NULL).
 */
bool		llm_amx_bf16_usable(char *why, size_t whylen);

/* n_cols rounded up to a whole column block. */
static inline int64_t
llm_amx_kp(int64_t n_cols)
{
	return (n_cols + LLM_AMX_TILE_K - 1) / LLM_AMX_TILE_K * LLM_AMX_TILE_K;
}

/* Bytes of the packed form of an n_rows x n_cols F16 weight. */
size_t		llm_amx_packed_bytes(int64_t n_rows, int64_t n_cols);

/* w: n_rows rows of n_cols binary16 values, row_bytes apart -> dst (llm_amx_packed_bytes). */
void		llm_amx_pack_f16(const uint16_t *w, size_t row_bytes, int64_t n_rows, int64_t n_cols, uint16_t *dst);

/* The bfloat16 pair of one binary16 value (the pack's split): *hi + *lo == the value for every finite one. */
void		llm_amx_split_f16(uint16_t h, uint16_t *hi, uint16_t *lo);

/* Number of tokens n rounded up to a whole token tile. */
static inline int
llm_amx_np(int n)
{
	return (n + LLM_AMX_TILE_ROWS - 1) / LLM_AMX_TILE_ROWS * LLM_AMX_TILE_ROWS;
}

/* Bytes of the split activations of n tokens of n_cols (whole token tiles). */
size_t		llm_amx_act_bytes(int n, int64_t n_cols);

/*
 * Tokens t0 .. t1-1 of x (rows of n_cols floats) split into act (columns
 * past n_cols zero).  Rows past the batch, to llm_amx_np(n), are the
 * caller's to zero (llm_amx_zero_rows).  Needs AVX512F.
 */
void		llm_amx_split_rows(const float *x, int64_t n_cols, int t0, int t1, uint16_t *act);
void		llm_amx_zero_rows(int64_t n_cols, int t0, int t1, uint16_t *act);

/*
 * y[t * y_stride + r] = row r of the packed weight . token t, for the row
 * blocks rb0 .. rb1-1 (rows 16 rb ..), rows < n_rows and tokens < n; act:
 * the split activations of the n tokens.  Needs llm_amx_bf16_usable.
 */
void		llm_amx_gemm(const uint16_t *packed, int64_t n_rows, int64_t n_cols, int64_t rb0, int64_t rb1,
						 const uint16_t *act, int n, float *y, size_t y_stride);

#endif
