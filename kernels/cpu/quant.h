/*
 * quant.h — block formats, fp16/bf16 conversion, activation quantizers,
 * weight-row x activation dot products, attention and SwiGLU of the CPU
 * backend: the types every CPU kernel shares and the scalar reference code
 * (quant.c).  The vector twins are in quant_x86.h; which one runs is chosen
 * in dispatch.h.
 *
 * Block layouts are those of GGUF / ggml (ggml's block_q4_0 ... structs).
 * The numerics mirror llama.cpp's x86 CPU backend (the AVX2/AVX512 branches
 * of its ggml_vec_dot_* and quantize_row_q8_* functions, which compute the
 * same integers and the same float operations) so that greedy decoding
 * agrees with it:
 *
 *   weight type   activations converted to   dot product
 *   F32           F32                         fp32 FMA, 4 x 8 lanes
 *   F16           F16 (round-nearest-even)    f16*f16 in fp32 FMA, 4 x 8 lanes
 *   BF16          BF16 (round-nearest-even)   bf16*bf16 in fp32 FMA, 4 x 8 lanes
 *   Q4_0, Q8_0    Q8_0                        per block 8 int32 lanes, fp32 FMA
 *   Q5_0          Q8_0                        the same (ggml_vec_dot_q5_0_q8_0)
 *   Q4_1          Q8_1 (d and s = d*sum(q))   same, plus sum of m*s
 *   Q4_K, Q6_K    Q8_K                        per super-block 8 int32 lanes
 *
 * The integer types are bit-identical to ggml's quantize_row_q8_* and
 * ggml_vec_dot_*_q8_* (checked against the oracle library by
 * test/unit/test_kernels.c).  F16 weights follow llama.cpp in converting the
 * activations to fp16 (BF16 likewise to bf16) but accumulate in our own
 * fixed order, not ggml's; the SmolLM2 model has no such matrices.
 *
 * Activation rounding is round-half-to-even of x * (127 / amax) with
 * d = amax / 127 (what ggml's AVX quantize_row_q8_0/q8_1 do; Q8_K follows
 * quantize_row_q8_K_ref).  The scalar code reproduces the SIMD code's lane
 * decomposition and float operation order exactly, so scalar, AVX2 and
 * AVX512-VNNI kernels give bit-identical results.
 *
 * Activation rows are kept in an internal layout (llm_act_*), not ggml's
 * block structs: quants contiguous, scales as floats holding the exact fp16
 * values ggml would store.  Only the values matter for the numerics.
 */
#ifndef LLM_CPU_QUANT_H
#define LLM_CPU_QUANT_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/quant_types.h"

/* Bit-level helpers of the scalar files (quant.c, quant_ref.c, attn_scalar.c). */
static inline uint32_t
f32_bits(float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float
bits_f32(uint32_t u)
{
	float		f;

	memcpy(&f, &u, 4);
	return f;
}

static inline int
clampi(int v, int lo, int hi)
{
	return v < lo ? lo : (v > hi ? hi : v);
}

#define LLM_QK 32				/* elements of a Q4_0/Q4_1/Q8_0/Q8_1 block */
#define LLM_QK_K 256			/* elements of a k-quant super-block */

/* ggml's block structs; fp16 fields hold IEEE half bits. */
typedef struct
{
	uint16_t	d;
	uint8_t		qs[LLM_QK / 2];
} llm_block_q4_0;

typedef struct
{
	uint16_t	d;
	uint16_t	m;
	uint8_t		qs[LLM_QK / 2];
} llm_block_q4_1;

typedef struct
{
	uint16_t	d;
	int8_t		qs[LLM_QK];
} llm_block_q8_0;

/* element j: ((qs[j % 16] >> (4 * (j >= 16))) & 0xF | ((qh >> j) & 1) << 4) - 16 */
typedef struct
{
	uint16_t	d;
	uint8_t		qh[4];			/* bit j: the fifth bit of element j */
	uint8_t		qs[LLM_QK / 2];
} llm_block_q5_0;

typedef struct
{
	uint16_t	d;
	uint16_t	dmin;
	uint8_t		scales[12];		/* 8 scales and 8 mins, 6 bits each */
	uint8_t		qs[LLM_QK_K / 2];
} llm_block_q4_K;

typedef struct
{
	uint8_t		ql[LLM_QK_K / 2];	/* low 4 bits */
	uint8_t		qh[LLM_QK_K / 4];	/* high 2 bits */
	int8_t		scales[LLM_QK_K / 16];
	uint16_t	d;
} llm_block_q6_K;

/* ---- fp16 / bf16 ---- */

/* IEEE binary16 bits -> float (exact). */
float		llm_fp16_to_fp32(uint16_t h);

/* float -> binary16 bits, round-to-nearest-even, overflow to inf, NaN kept quiet. */
uint16_t	llm_fp32_to_fp16(float f);

/* bfloat16 bits -> float (exact). */
float		llm_bf16_to_fp32(uint16_t h);

/* float -> bfloat16, round-to-nearest-even; NaN stays NaN (as ggml_compute_fp32_to_bf16). */
uint16_t	llm_fp32_to_bf16(float f);

/* ---- whole rows, any supported type ---- */

/*
 * dst[0..n) = dequantized row of type t (ggml dequantize_row_* formulas).
 * n must be a multiple of the type's block size.  Returns false for an
 * unsupported type.
 */
bool		llm_dequantize_row(uint32_t t, const void *src, float *dst, int64_t n);

/*
 * Reference quantizer for building test weights: src[0..n) -> one row of
 * type t.  Simple round-to-nearest schemes (not llama.cpp's error-minimising
 * searches); produce valid blocks of every supported type.
 */
bool		llm_quantize_row_ref(uint32_t t, const float *src, void *dst, int64_t n);

/* ---- matmul kernels ---- */

/*
 * Activation layout for integer types, one row of n elements:
 *   int8_t  qs[n]
 *   float   d[n / blk]        scale per block (exact fp16 value for Q8_0/Q8_1)
 *   float   s[n / blk]        Q8_1 only: fp16(d * sum(q)) per block
 *   int16_t bsums[n / 16]     Q8_K only: sums of 16 consecutive quants
 * For F32/F16/BF16 weights the activation row is float / fp16 / bf16 values.
 * Rows are padded to 64 bytes (llm_qkernel.act_row_bytes).
 */

/* Computes out[t * out_stride + r] = dot(weight row r, activation row t), r < nr, t < nt. */
typedef void (*llm_dot_tile_fn) (int64_t n, const void *w, size_t w_stride, int nr,
								 const void *a, size_t a_stride, int nt,
								 float *out, size_t out_stride);

typedef struct llm_qkernel
{
	uint32_t	weight_type;
	uint32_t	act_type;		/* LLM_TYPE_{F32,F16,BF16,Q8_0,Q8_1,Q8_K} */
	int			block_elems;	/* n_cols must be a multiple of this */
	const char *impl;			/* "scalar", "avx2", "avx512vnni", "avx512vnni-packed" */
	size_t		(*act_row_bytes) (int64_t n);
	void		(*quantize_act) (const float *x, void *dst, int64_t n);
	/* one weight row x one activation row */
	float		(*dot) (int64_t n, const void *w, const void *a);
	/* a tile; same per-(row, token) arithmetic as dot (bit-identical) */
	llm_dot_tile_fn dot_tile;
	int			tile_rows;		/* preferred tile shape of dot_tile */
	int			tile_tokens;

	/*
	 * Kernels over repacked weights (llm_qkernel_packed_get) only: a GGUF
	 * matrix of n_rows rows of n elements -> the packed matrix of the same
	 * size (false: shape unsupported, use the GGUF-layout kernel), and row
	 * `row` of a packed matrix back to its GGUF row.  NULL for GGUF-layout
	 * kernels.
	 */
	bool		(*repack) (const void *src, void *dst, int64_t n_rows, int64_t n);
	void		(*unpack) (const void *w, int64_t row, void *dst, int64_t n);

	/*
	 * Rows stored interleaved in groups of row_group (0 or 1: every row on
	 * its own).  With groups, dot_tile is called with w at a group's first
	 * row and nr a multiple of row_group, and dot is NULL (a row has no
	 * layout of its own); matmuls tile rows in whole groups and leave the
	 * prefetch of the rows ahead to the kernel (it streams its groups in
	 * order and prefetches a few super-blocks ahead in every pass).
	 */
	int			row_group;

	/*
	 * Batched matmuls, optional (NULL: none): with at least
	 * batch_min_tokens activation rows, a matmul converts the weight rows
	 * it is about to use, a few at a time, with batch_convert into a scratch
	 * in batch_kernel's layout and runs batch_kernel's tiles there, so that
	 * a block is unpacked once for every token of the batch rather than
	 * once per tile.  batch_convert(n, w, w_stride, nr, dst): nr GGUF rows
	 * of n elements at w (a multiple of batch_kernel->row_group) -> dst,
	 * nr rows of llm_type_row_bytes(batch_kernel->weight_type, n) bytes in
	 * batch_kernel's layout.  batch_kernel takes this kernel's activations
	 * and its results are bit-identical to this kernel's dot on the GGUF
	 * rows.
	 */
	const struct llm_qkernel *batch_kernel;
	void		(*batch_convert) (int64_t n, const void *w, size_t w_stride, int nr, void *dst);
	int			batch_min_tokens;

	/*
	 * Kernels that carry their own row forms (quant.h "Row forms"; packed
	 * kernels, whose rows llm_qkernel_kform cannot wrap): the other form's
	 * tile and the LLM_ROW_* flags selecting it, as llm_qkernel_form
	 * returns them.  NULL / 0: none (or given by llm_qkernel_kform).
	 */
	llm_dot_tile_fn form_tile;
	uint8_t		form_mask;
} llm_qkernel;

/*
 * Row forms.  llama.cpp's CPU backend reduces some weight types in another
 * float order depending on how many rows its matmul has, so one token's
 * result depends on the batch llama.cpp ran it in (backend.h LLM_ROW_*
 * says which batch that is, as a property of the token).  For such a weight,
 * llm_qkernel_kform(base, n_rows) gives the kernel of its rows
 * (quant_kforms.c, scalar and AVX2, bit-identical):
 *   Q4_K, n_rows % 8 == 0 (repacked by llama.cpp): dot = one row of its
 *         GEMV, the other form its GEMM (LLM_ROW_GROUPED);
 *   Q4_K, other row counts, and Q6_K: dot = ggml_vec_dot_*_q8_K (base),
 *         the other form its tiled matmul (LLM_ROW_WIDE);
 *   Q3_K, Q5_K, IQ4_XS (quant_more.h; their kernels carry the form):
 *         the same two forms.
 * Any other kernel is returned as is.  llm_qkernel_form(k, &tile): the
 * flags that select k's other form (0: k has none) and its tile, which
 * takes the same activations and arguments as k->dot_tile; an activation
 * row whose step flags meet them is computed by that tile instead.
 */
const llm_qkernel *llm_qkernel_kform(const llm_qkernel *base, int64_t n_rows);
uint8_t		llm_qkernel_form(const llm_qkernel *k, llm_dot_tile_fn *tile);

/*
 * The scalar kernel of weight type t (the reference every other
 * implementation reproduces bit for bit), or NULL for an unsupported type.
 */
const llm_qkernel *llm_qkernel_scalar_get(uint32_t t);

/*
 * Attention of one token for the `group` query heads sharing one KV head
 * (GQA), over keys first_key..n_keys-1 of a paged fp16 cache (first_key > 0:
 * a sliding window; the caller derives both bounds from the query's
 * position alone, so results never depend on batching or chunking).  The
 * arithmetic is that of llama.cpp's CPU backend without flash attention for
 * batches of two or more tokens (K.Q and V.P through llamafile's tinyBLAS on
 * AVX512, softmax by ggml_vec_soft_max_f32), identical in the scalar and
 * AVX2 versions:
 *   reduce16(x) = _mm512_reduce_add_ps order of 16 floats
 *   score_j = reduce16(lanes) * scale, lane l = fma chain over c of
 *             k_j[16c+l] * q[16c+l]
 *   m = max_j score_j;  e_j = llm_expf(score_j - m)
 *   sum = double sum over chunks of 16 keys of reduce16 of the chunk, the
 *         chunks aligned on absolute key positions (multiples of 16) and
 *         zero outside first_key..n_keys-1
 *   p_j = fp16(e_j * (float)(1.0 / sum))
 *   out[d] = reduce16(lanes), lane l = fma chain over keys j = l mod 16
 *            (absolute j, in key order) of v_j[d] * p_j
 * Hence a windowed result is bit for bit that of full causal attention whose
 * keys before first_key have probability exactly 0 (a masked softmax).
 * With `single` set, K.Q and V.P follow instead ggml_vec_dot_f16, which
 * llama.cpp uses for a batch of one token (decode): 64 lanes (4 vectors of
 * 16) with fma chains over steps of 64, combined as (v0+v2)+(v1+v3), then
 * reduce16 (V lanes j mod 64); K.Q elements past the last multiple of 64 are
 * added one by one in double.  head_dim is a multiple of 16;
 * 0 <= first_key < n_keys.
 */
typedef struct llm_attn_args
{
	const float *q;				/* [group][head_dim], values already rounded to fp16 */
	float	   *out;			/* [group][head_dim] */
	int			group;
	int			head_dim;
	int			first_key;		/* first key attended to (0: full causal) */
	int			n_keys;			/* keys end here: the query's position + 1 */
	float		scale;
	const uint8_t *k_cache;		/* layer K / V arrays (bytes), rows at llm_kv_row_index */
	const uint8_t *v_cache;
	int			kv_dtype;		/* llm_kv_dtype of their rows (llm_kv_value) */
	int			n_kv_heads;
	int			kv_head;		/* the KV head of this group */
	const int32_t *block_table; /* the sequence's block ids */
	int			block_size;
	int			single;			/* 1: llama.cpp's one-token-batch order (see above) */
	float	   *scratch;		/* llm_attn_scratch_floats(group, head_dim, n_keys) floats */
	/*
	 * softcap > 0: attention logit soft-capping (llama.cpp without flash
	 * attention): the scores above, computed with scale = 1 / softcap,
	 * become (tanhf(score) * softcap) * cap_scale before the softmax
	 * (llm_attn_softcap_row); 0: none (cap_scale unused).
	 */
	float		softcap;
	float		cap_scale;
} llm_attn_args;

typedef void (*llm_attn_fn) (const llm_attn_args *a);

/*
 * Index of the cached row (head_dim values) of KV head kv_head at position
 * off of cache block `block`.  Layout per layer: rows
 * [n_blocks][n_kv_heads][block_size], so that the rows one attention head
 * reads from a block are contiguous (prefetch-friendly).
 */
static inline size_t
llm_kv_row_index(int32_t block, int off, int kv_head, int n_kv_heads, int block_size)
{
	return ((size_t) block * (size_t) n_kv_heads + (size_t) kv_head) * (size_t) block_size + (size_t) off;
}

/* Bytes of one cached row: fp16 values, or head_dim / 32 blocks of llm_block_q8_0. */
static inline size_t
llm_kv_row_bytes(int kv_dtype, int head_dim)
{
	return kv_dtype == LLM_KV_Q8_0 ? (size_t) (head_dim / LLM_QK) * sizeof(llm_block_q8_0) :
		(size_t) head_dim * sizeof(uint16_t);
}

/* Offset in fp16 elements of a row of an F16 cache (llm_kv_row_index * head_dim). */
static inline size_t
llm_kv_row_offset(int32_t block, int off, int kv_head, int n_kv_heads, int block_size, int head_dim)
{
	return llm_kv_row_index(block, off, kv_head, n_kv_heads, block_size) * (size_t) head_dim;
}

/* Byte offset of key j's row of the sequence whose block table attention args a carry. */
static inline size_t
llm_attn_key_offset(const llm_attn_args *a, int j)
{
	return llm_kv_row_index(a->block_table[j / a->block_size], j % a->block_size, a->kv_head,
							a->n_kv_heads, a->block_size) * llm_kv_row_bytes(a->kv_dtype, a->head_dim);
}

/*
 * Value i of a cached row as float: the fp16 value, or d * q of its q8_0
 * block (exact in float: an 11-bit times an 8-bit integer significand).
 * Attention over a Q8_0 cache is the arithmetic of an F16 cache holding
 * these values.
 */
float		llm_kv_value(const uint8_t *row, int kv_dtype, int i);

/*
 * The row of n values (n a multiple of 32) as q8_0 blocks: per block d =
 * amax / 127 stored as fp16, q = x * (127 / amax) rounded half to even (the
 * rounding of the activation quantizer; all zero for an all-zero block).
 */
void		llm_kv_quantize_q8_0(const float *x, void *dst, int n);

/*
 * One query's attention (llm_attn_fn, any order) cut into parallel pieces
 * for a decode row over a long context, where one (token, KV head) is too
 * few work items for the threads: scores of key ranges, the softmax of
 * each head, and the V sums of head_dim ranges (each output element's lane
 * chains whole).  Run in that order, every piece of a phase finished
 * before any piece of the next starts, they give bit for bit llm_attn_fn's
 * result.  Shared by the pieces: scores, [group][llm_attn_split_npad(a)]
 * floats, and rowoff, [llm_attn_split_npad(a)] cache byte offsets (index
 * j - (first_key & ~15), written by the scores pieces for their keys, read
 * by the values pieces); a->scratch is the running thread's
 * (llm_attn_scratch_floats).
 *   scores:  keys js .. je - 1, js a multiple of 4 at or below first_key's
 *            multiple of 4 for the first range, the ranges tiling
 *            (first_key & ~3) .. n_keys - 1
 *   softmax: head h's row (all scores written)
 *   values:  out[h][c0 .. c1 - 1] of every head, c0, c1 multiples of 16
 */
typedef struct llm_attn_split
{
	void		(*scores) (const llm_attn_args *a, float *scores, size_t *rowoff, int js, int je);
	void		(*softmax) (const llm_attn_args *a, float *scores, int h);
	void		(*values) (const llm_attn_args *a, const float *scores, const size_t *rowoff, int c0, int c1);
} llm_attn_split;

/* Row length of llm_attn_split's scores: keys from first_key & ~15 to n_keys, rounded up to 16. */
static inline size_t
llm_attn_split_npad(const llm_attn_args *a)
{
	return ((size_t) (a->n_keys - (a->first_key & ~15)) + 15) & ~(size_t) 15;
}

/*
 * Soft-capping of scores sc[r0 .. r1-1]: sc = (tanhf(sc) * cap) * post
 * (ggml_tanh, ggml_scale by the cap, then the softmax's scale).  One
 * scalar function for every kernel, so they stay bit-identical.
 */
void		llm_attn_softcap_row(float *sc, int r0, int r1, float cap, float post);

/* Scratch floats an llm_attn_fn needs for up to n_keys keys (any first_key). */
size_t		llm_attn_scratch_floats(int group, int head_dim, int n_keys);

/* The scalar attention kernel (the reference). */
void		llm_attn_scalar(const llm_attn_args *a);

/*
 * Attention of a block of n_q <= LLM_ATTN_QBLOCK queries of one sequence
 * at consecutive positions pos0 .. pos0 + n_q - 1, each for the `group`
 * query heads of one KV head, in llama.cpp's multi-token order (single =
 * 0 above).  Query i reads keys lo_i .. pos0 + i, lo_i = 0 or, with a
 * window w > 0, max(0, pos0 + i - w + 1).  Each query's result is bit for
 * bit that of llm_attn_fn with those bounds: the block only shares the
 * reading and fp16 -> fp32 conversion of the K and V rows among its
 * queries (FlashAttention-style tiling: key blocks of 16 aligned on
 * absolute positions, so neither the block nor the chunking of a prompt
 * changes a result).  The exact softmax needs each query's maximum and sum
 * over all its keys before its first V product, so scores of the block's
 * queries are kept in scratch (n_q x group rows of the keys' span) between
 * the K and the V pass; see kernels/cpu/attn_avx2.c.
 */
#define LLM_ATTN_QBLOCK 4
#define LLM_ATTN_BLOCK_VKEYS 256	/* keys whose V rows the block kernel converts at once */

typedef struct llm_attn_block_args
{
	const float *q;				/* [n_q][group][head_dim], values already rounded to fp16 */
	float	   *out;			/* query i's [group][head_dim] at out + i * out_stride */
	size_t		out_stride;
	int			n_q;			/* 1 .. LLM_ATTN_QBLOCK */
	int			pos0;			/* position of query 0 */
	int			window;			/* 0: full causal */
	int			group;
	int			head_dim;
	float		scale;
	const uint8_t *k_cache;		/* as llm_attn_args */
	const uint8_t *v_cache;
	int			kv_dtype;
	int			n_kv_heads;
	int			kv_head;
	const int32_t *block_table;
	int			block_size;
	float	   *scratch;		/* llm_attn_block_scratch_floats(n_q, group, head_dim, pos0 + n_q) floats */
	float		softcap;		/* as llm_attn_args */
	float		cap_scale;
} llm_attn_block_args;

typedef void (*llm_attn_block_fn) (const llm_attn_block_args *a);

/* Scratch floats an llm_attn_block_fn needs for n_q queries whose last key is n_keys - 1. */
size_t		llm_attn_block_scratch_floats(int n_q, int group, int head_dim, int n_keys);

/* The scalar block kernel (the reference): llm_attn_scalar query by query. */
void		llm_attn_block_scalar(const llm_attn_block_args *a);

/*
 * exp(x) exactly as ggml's ggml_v_expf of an AVX512 build (max error about
 * 2 ulp): what llama.cpp's softmax and SiLU use.
 */
float		llm_expf(float x);

/*
 * out[i] = silu(gate[i]) * up[i] with silu(x) = x / (1 + llm_expf(-x)),
 * bit-identical to ggml_vec_swiglu_f32 of an AVX512 build.  out may alias.
 */
typedef void (*llm_swiglu_fn) (const float *gate, const float *up, float *out, int64_t n);

/* The scalar SwiGLU kernel (the reference). */
void		llm_swiglu_scalar(const float *gate, const float *up, float *out, int64_t n);

/* ---- quant.c internals the vector kernels (quant_x86.h) reuse ---- */
size_t		llm_act_bytes_q8_0(int64_t n);
size_t		llm_act_bytes_q8_1(int64_t n);
size_t		llm_act_bytes_q8_K(int64_t n);
void		llm_quantize_act_q8_K(const float *x, void *dst, int64_t n);

/*
 * The 6-bit scale and min of sub-block j (0..7) of a Q4_K block's 12 scale
 * bytes q (ggml's get_scale_min_k4).  Inline: the AVX2 dot product calls it
 * eight times per block.
 */
static inline void
llm_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
	if (j < 4)
	{
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	}
	else
	{
		*d = (uint8_t) ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t) ((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

/*
 * All 8 scales and 8 mins of a Q4_K block at once, as llm_get_scale_min_k4
 * gives them one by one (ggml's AVX2 kernel's utmp masks, on the bytes as
 * little-endian words, as GGUF is): sc[j] and mn[j], j = 0..7.  The vector
 * kernels decode a block's scales with it.
 */
static inline void
llm_q4_K_scales_mins(const uint8_t *q, uint8_t *sc, uint8_t *mn)
{
	const uint32_t kmask1 = 0x3f3f3f3f,
				kmask2 = 0x0f0f0f0f,
				kmask3 = 0x03030303;
	uint32_t	u[3],
				lo,
				hi;

	memcpy(u, q, 12);
	/* scales 0-3 and mins 0-3: the low 6 bits of bytes 0-3 and 4-7 */
	lo = u[0] & kmask1;
	memcpy(sc, &lo, 4);
	lo = u[1] & kmask1;
	memcpy(mn, &lo, 4);
	/* scales 4-7: low nibbles of bytes 8-11 | top 2 bits of bytes 0-3 << 4; mins: high nibbles | bytes 4-7's */
	hi = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
	memcpy(sc + 4, &hi, 4);
	hi = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
	memcpy(mn + 4, &hi, 4);
}

/* Pointers into an activation row of n elements (layout above). */
static inline const float *
llm_act_d(const void *a, int64_t n)
{
	return (const float *) ((const char *) a + ((n + 3) & ~(int64_t) 3));
}

static inline const float *
llm_act_s(const void *a, int64_t n, int blk)
{
	return llm_act_d(a, n) + n / blk;
}

#endif
