/*
 * quant_x86.h — the vector kernels of the CPU backend (quant_avx2.c,
 * quant_packed.c, quant_packed_avx2.c, attn_avx2.c), as dispatch.c and the
 * tests reach them.
 *
 * Nothing here checks the CPU: the caller (dispatch.c) hands these out only
 * after detecting the instructions they need; calling one on a CPU without
 * them faults.  On other architectures the getters return NULL and the row
 * conversions are the scalar ones.  Each kernel performs the operations of
 * its scalar twin in quant.c in the same order (bit-identical results).
 */
#ifndef LLM_CPU_QUANT_X86_H
#define LLM_CPU_QUANT_X86_H

#include <stdbool.h>
#include <stdint.h>

#include "quant.h"

/*
 * quant_avx2.c (AVX2 + FMA + F16C): the matmul kernel of weight type t, or
 * NULL; with vnni, the Q4_0 / Q4_1 / Q8_0 integer tiles use 256-bit
 * vpdpbusd (AVX512F/VL/VNNI also needed), the other types stay AVX2.
 */
const llm_qkernel *llm_qkernel_avx2_get(uint32_t t, bool vnni);

/*
 * quant_f16_avx512.c (AVX512F): the F16 tile of the VNNI implementation,
 * register-blocked over 4 rows x 3 tokens (llm_dot_tile_fn's contract),
 * bit-identical to quant_avx2.c's dot_f16 per (row, token).
 */
void		llm_tile_f16_avx512(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
								size_t a_stride, int nt, float *out, size_t out_stride);

/* quant_avx2.c: SwiGLU. */
llm_swiglu_fn llm_swiglu_avx2_get(void);

/* attn_avx2.c: attention of one query (quant.h llm_attn_args) and of a block of queries (llm_attn_block_args). */
llm_attn_fn llm_attn_kernel_avx2_get(void);
llm_attn_block_fn llm_attn_block_avx2_get(void);
const llm_attn_split *llm_attn_split_avx2_get(void);

/* quant_avx2.c: fp16 <-> fp32 rows with F16C (round-nearest-even, as quant.h's scalar ones). */
void		llm_fp16_to_fp32_row_f16c(const uint16_t *src, float *dst, int64_t n);
void		llm_fp32_to_fp16_row_f16c(const float *src, uint16_t *dst, int64_t n);

/*
 * quant_q5_0.c (AVX2 + FMA + F16C): the Q5_0 kernel into *out, with the
 * activation quantization of q8_0 (a Q8_0 kernel of the implementation it
 * joins, so that matmul_multi shares one quantization between Q5_0 and
 * Q8_0 weights).  q8_0_x4, if not NULL, is quant_packed_avx2.c's Q8_0
 * kernel (groups of 4 rows, the same activations): batched matmuls convert
 * Q5_0 rows into its layout and run its tiles (quant.h batch_kernel).
 * false on other architectures or a non-Q8_0 q8_0.
 */
bool		llm_qkernel_q5_0_avx2(const llm_qkernel *q8_0, const llm_qkernel *q8_0_x4, llm_qkernel *out);

/*
 * quant_packed.c (AVX512F/VL/BW/VNNI): the kernel of weight type t over
 * repacked rows (Q4_1, Q8_0), or NULL.  Its activations are those of
 * llm_qkernel_avx2_get(t, true).
 */
const llm_qkernel *llm_qkernel_packed_vnni_get(uint32_t t);

/*
 * quant_packed.c (AVX512F/VL/BW): nr Q5_0 rows of n elements (a multiple
 * of 32) at w, rows w_stride bytes apart -> dst, nr rows of
 * llm_type_row_bytes(LLM_TYPE_Q8_0, n) bytes in the packed Q8_0 layout of
 * llm_qkernel_packed_vnni_get(LLM_TYPE_Q8_0), whose tiles then give the
 * Q5_0 dot products' bits (quant.h batch_convert).
 */
void		llm_convert_q5_0_q8_0_packed(int64_t n, const void *w, size_t w_stride, int nr, void *dst);

/*
 * quant_q4k_packed.c (AVX512F/VL/BW/VNNI): the Q4_K kernel over rows
 * repacked in groups of 8 (matrices of a multiple of 8 rows), with its two
 * row forms (one-row GEMV, grouped GEMM: quant.h "Row forms"), or NULL.
 * Its activations are those of llm_qkernel_avx2_get(LLM_TYPE_Q4_K, true).
 */
const llm_qkernel *llm_qkernel_q4_K_x8_vnni_get(void);

/*
 * quant_q6k_packed.c (AVX512F/VL/BW/VNNI): the Q6_K kernel over rows
 * repacked in groups of 8 (matrices of a multiple of 8 rows), with its two
 * row forms (ggml_vec_dot order, the wide tiled order for LLM_ROW_WIDE), or
 * NULL.  Its activations are those of llm_qkernel_q6_K_vnni_get().
 */
const llm_qkernel *llm_qkernel_q6_K_x8_vnni_get(void);

/*
 * quant_q6k_wide.c (AVX512F/VL/BW/VNNI): the wide form (quant.h "Row
 * forms") of Q6_K rows in quant_q6k_packed.c's groups of 8, 16 rows in
 * vector lanes (llm_dot_tile_fn's contract; nr a multiple of 8, w at a
 * group's first row, any nt), bit-identical to quant_kforms.c's scalar
 * wide form.  Each call unpacks its rows once for all its tokens, so it
 * pays from a few tokens on; quant_q6k_packed.c's wide tile hands it tiles
 * of Q6KW_MIN_TOKENS tokens or more.
 */
#define LLM_Q6K_WIDE_TOKENS 32	/* tokens per pass over a call's rows; the packed kernel's tile_tokens */
void		llm_tile_q6_K_x8_wide_avx512(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
										 size_t a_stride, int nt, float *out, size_t out_stride);

/*
 * quant_q6k_vnni.c (AVX512F/VL/BW/VNNI, checked there): the Q6_K kernel of
 * the VNNI implementation (GGUF layout, ggml_vec_dot_q6_K_q8_K's order,
 * bit-identical to the AVX2 one), or NULL on a CPU without those; and its
 * tile in the wide form (quant.h "Row forms"), as quant_kforms.c's.
 */
const llm_qkernel *llm_qkernel_q6_K_vnni_get(void);
llm_dot_tile_fn llm_q6_K_wide_vnni_tile(void);

/*
 * quant_packed_avx2.c (AVX2 + FMA + F16C): the kernel of weight type t over
 * weights repacked in groups of 4 rows (Q4_1, Q8_0), or NULL.  Its
 * activations are those of llm_qkernel_avx2_get(t, false).
 */
const llm_qkernel *llm_qkernel_packed_avx2_get(uint32_t t);

#endif
