/*
 * dispatch.h — run-time choice of the CPU backend's kernel implementations.
 *
 * The instruction sets of the CPU are detected once per process (the first
 * call of any function here, thread-safe); every lookup after that is a read
 * of what was chosen then.  All implementations of a kernel give
 * bit-identical results (quant.h), so the choice changes speed only.
 *
 * Implementations (LLM_IMPL_*):
 *   scalar       quant.c, any CPU: the reference
 *   avx2         quant_avx2.c: AVX2 + FMA + F16C
 *   avx512vnni   quant_avx2.c's kernels with the integer tiles on 256-bit
 *                vpdpbusd (AVX512F/VL/VNNI)
 *                (Q6_K: quant_q6k_vnni.c, 512-bit, where AVX512BW is present)
 *   packed       Q4_1 / Q8_0 over weights repacked at load, asked for with
 *                llm_qkernel_packed_get: quant_packed.c for the avx512vnni
 *                implementation (AVX512F/VL/BW/VNNI), quant_packed_avx2.c
 *                (groups of 4 rows) for avx2; Q4_K of a multiple of 8 rows
 *                in groups of 8 (quant_q4k_packed.c, avx512vnni only)
 *   batch        a kernel's batch_kernel (quant.h): Q5_0 rows converted per
 *                matmul of 8 tokens or more into quant_packed_avx2.c's Q8_0
 *                groups, for the avx2 and avx512vnni implementations
 */
#ifndef LLM_CPU_DISPATCH_H
#define LLM_CPU_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "quant.h"
#include "elementwise.h"
#include "row_scan.h"

enum
{
	LLM_IMPL_BEST = -1,			/* the fastest this CPU runs */
	LLM_IMPL_SCALAR = 0,
	LLM_IMPL_AVX2 = 1,			/* AVX2 + FMA + F16C */
	LLM_IMPL_AVX512VNNI = 2		/* AVX2 kernels, integer tiles with 256-bit vpdpbusd */
};

/* True when the CPU has AVX2, FMA and F16C (the AVX2 kernels need all three). */
bool		llm_cpu_has_avx2(void);

/* True when it also has AVX512F/VL/VNNI. */
bool		llm_cpu_has_avx512vnni(void);

/*
 * Matmul kernel for weight type t with implementation impl (LLM_IMPL_*);
 * NULL when the type is unsupported or the CPU lacks the instructions.
 */
const llm_qkernel *llm_qkernel_get(uint32_t t, int impl);

/*
 * Kernel for weight type t over weights repacked by its repack function,
 * for implementation impl (LLM_IMPL_BEST: this CPU's best), or NULL (no
 * packed kernel of that type and implementation on this CPU):
 * LLM_IMPL_AVX512VNNI quant_packed.c (Q4_1, Q8_0, and Q4_K by
 * quant_q4k_packed.c; also needs AVX512BW), LLM_IMPL_AVX2
 * quant_packed_avx2.c (Q4_1, Q8_0).  Its results are bit-identical to the
 * GGUF-layout kernels on the unpacked rows (Q4_K: to its row forms,
 * quant.h "Row forms", which the packed kernel carries itself).
 */
const llm_qkernel *llm_qkernel_packed_get(uint32_t t, int impl);

/* Attention kernel (quant.h llm_attn_args) of implementation impl; NULL if unavailable. */
llm_attn_fn llm_attn_kernel_get(int impl);

/* Attention of a block of prompt queries (quant.h llm_attn_block_args) of implementation impl; NULL if unavailable. */
llm_attn_block_fn llm_attn_block_kernel_get(int impl);

/* One query's attention in parallel pieces (quant.h llm_attn_split) of implementation impl; NULL: none (run it whole). */
const llm_attn_split *llm_attn_split_get(int impl);

/* SwiGLU kernel (quant.h llm_swiglu_fn) of implementation impl; NULL if unavailable. */
llm_swiglu_fn llm_swiglu_get(int impl);

/* GeGLU, scale and broadcast-add kernels (elementwise.h) of implementation impl; NULL if unavailable. */
llm_geglu_fn llm_geglu_get(int impl);
llm_scale_fn llm_scale_get(int impl);
llm_add_row_fn llm_add_row_get(int impl);
/* attention_rows' kernel of one (query row, head): elementwise.h's, the VNNI implementation's AVX-512 twin. */
llm_attn_rows_fn llm_attn_rows_get(int impl);

/* The row scan (row_scan.h: finiteness and argmax) of implementation impl; NULL if unavailable. */
llm_row_scan_fn llm_row_scan_get(int impl);

/* Row conversions with F16C when the CPU has it (bit-identical to quant.h's scalar ones). */
void		llm_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);
void		llm_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n);

#endif
