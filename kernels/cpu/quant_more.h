/*
 * quant_more.h — the weight types beyond the SmolLM2 / Gemma 3 set: Q5_1,
 * Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS.  Block layouts are ggml's
 * block_q5_1 ... block_iq4_xs (GGUF files store them byte for byte).
 *
 *   weight type   activations   dot product
 *   Q5_1          Q8_1          ggml_vec_dot_q5_1_q8_1
 *   IQ4_NL        Q8_0          ggml_vec_dot_iq4_nl_q8_0
 *   Q2_K, Q3_K,   Q8_K          ggml_vec_dot_{q2_K,q3_K,q5_K,iq4_xs}_q8_K
 *   Q5_K, IQ4_XS
 * The pairing with activation types is llama.cpp's (its vec_dot_type of
 * each type), and the arithmetic that of the AVX2 branch of those ggml
 * functions, which its AVX-512 build runs too: products of 32-element
 * chunks summed exactly in 8 int32 lanes of 4 consecutive elements, each
 * lane scaled by its block's (or 16-element group's) scale as an integer,
 * converted to float and accumulated with one fused multiply-add per lane
 * and block (scale d = d_w * d_a), the lanes reduced in hsum_float_8's
 * order; the mins of Q5_1 / Q5_K through a scalar fused multiply-add, of
 * Q2_K through the same 8 lanes before the quants.  Results are
 * bit-identical to the oracle library's ggml_vec_dot_* functions
 * (test/unit/test_kernels_types.c).  Integer sums are exact in any order
 * and the float operations are the same in every compilation: the scalar,
 * AVX2 and AVX-512 kernels (quant_more.c, quant_more_avx2.c,
 * quant_more_avx512.c: one source, quant_more_dot.inc, compiled for each
 * instruction set without floating-point contraction) are bit-identical.
 * Q3_K, Q5_K and IQ4_XS also have the wide row form (quant.h "Row
 * forms", LLM_ROW_WIDE: llama.cpp's tiled K-quant matmul, which takes its
 * prompt batches of 8 rows or more): per super-block one exact int32 sum
 * s of the sub-blocks' scaled dot products (Q5_K: and m of its mins),
 * r = float(s) * fp16(d) (Q5_K: fma(-fp16(dmin), float(m), that)), then
 * acc = fma(r, d_a, acc).  IQ4_NL and Q2_K matrices of rows % 8 == 0,
 * which llama.cpp repacks (Q2_K: its AVX-512 build), get the kernels of
 * its GEMV/GEMM instead (llm_qkernel_more_rows8).
 * Activations are quantized by the existing kernels of the same
 * implementation (Q4_1's Q8_1, Q8_0's Q8_0, Q4_K's Q8_K), so they are
 * byte-identical to those the other types see.
 *
 * Dequantization (llm_dequantize_row_more, dequant_more.c) follows ggml's
 * dequantize_row_* operation by operation and is bit-identical to the gguf
 * Python package's dequantize (test/unit/test_quant_golden.c).
 */
#ifndef LLM_CPU_QUANT_MORE_H
#define LLM_CPU_QUANT_MORE_H

#include "quant.h"

typedef struct
{
	uint16_t	d;
	uint16_t	m;
	uint8_t		qh[4];			/* bit j: the fifth bit of element j */
	uint8_t		qs[LLM_QK / 2];	/* element j < 16: low nibble of qs[j]; j >= 16: high nibble of qs[j - 16] */
} llm_block_q5_1;

typedef struct
{
	uint8_t		scales[LLM_QK_K / 16];	/* per 16 elements: scale (low nibble), min (high nibble) */
	uint8_t		qs[LLM_QK_K / 4];	/* 2-bit quants */
	uint16_t	d;
	uint16_t	dmin;
} llm_block_q2_K;

typedef struct
{
	uint8_t		hmask[LLM_QK_K / 8];	/* high bit (set: +0, clear: -4) */
	uint8_t		qs[LLM_QK_K / 4];	/* low 2 bits */
	uint8_t		scales[12];		/* 16 scales of 6 bits, offset 32 */
	uint16_t	d;
} llm_block_q3_K;

typedef struct
{
	uint16_t	d;
	uint16_t	dmin;
	uint8_t		scales[12];		/* as Q4_K */
	uint8_t		qh[LLM_QK_K / 8];	/* fifth bits */
	uint8_t		qs[LLM_QK_K / 2];	/* low 4 bits */
} llm_block_q5_K;

typedef struct
{
	uint16_t	d;
	uint8_t		qs[LLM_QK / 2];	/* indices into llm_kvalues_iq4nl */
} llm_block_iq4_nl;

typedef struct
{
	uint16_t	d;
	uint16_t	scales_h;		/* 2 high bits of the 8 sub-block scales */
	uint8_t		scales_l[LLM_QK_K / 64];	/* 4 low bits of the 8 sub-block scales */
	uint8_t		qs[LLM_QK_K / 2];	/* indices into llm_kvalues_iq4nl */
} llm_block_iq4_xs;

/* The non-linear 4-bit code book of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
extern const int8_t llm_kvalues_iq4nl[16];

/*
 * dst[0..n) = dequantized row of type t, one of the types above; false for
 * any other type (llm_dequantize_row hands those types here).
 */
bool		llm_dequantize_row_more(uint32_t t, const void *src, float *dst, int64_t n);

/*
 * The 16 signed 6-bit-range scales of a Q3_K block (ggml's aux/kmask
 * decoding), already offset by -32: sc[g] scales elements 16g..16g+15.
 */
static inline void
llm_q3_K_scales(const uint8_t *s, int8_t sc[16])
{
	const uint32_t kmask1 = 0x03030303,
				kmask2 = 0x0f0f0f0f;
	uint32_t	aux[4],
				tmp;

	memcpy(aux, s, 12);
	tmp = aux[2];
	aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
	aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
	aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
	aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
	memcpy(sc, aux, 16);
	for (int g = 0; g < 16; g++)
		sc[g] = (int8_t) (sc[g] - 32);
}

/* Scale of IQ4_XS sub-block ib (0..7), offset by -32: -32..31. */
static inline int
llm_iq4_xs_scale(const llm_block_iq4_xs *x, int ib)
{
	int			ls = ((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x->scales_h >> (2 * ib)) & 3) << 4);

	return ls - 32;
}

/*
 * Kernels of these types for implementation impl (dispatch.h LLM_IMPL_*,
 * already resolved: SCALAR, AVX2 or AVX512VNNI); NULL for another type.
 * The caller (dispatch.c) has checked that the CPU runs impl.
 */
const llm_qkernel *llm_qkernel_more_get(uint32_t t, int impl);

/*
 * The kernel of a matrix of base's type whose row count is a multiple of 8
 * where llama.cpp computes such matrices in another order, else base
 * (llm_qkernel_kform calls it): IQ4_NL (repacked on AVX2 and AVX-512: one
 * FMA per block, every token) and Q2_K (repacked by its AVX-512 build: one
 * FMA per super-block, the grouped form LLM_ROW_GROUPED one per half).
 */
const llm_qkernel *llm_qkernel_more_rows8(const llm_qkernel *base);

/* The tables of each compilation of quant_more_dot.inc (same order of types). */
extern const llm_qkernel llm_qkernels_more_scalar[6];
extern const llm_qkernel llm_qkernels_more_avx2[6];
extern const llm_qkernel llm_qkernels_more_avx512[6];
extern const llm_qkernel llm_qkernels_more_x8_scalar[2];
extern const llm_qkernel llm_qkernels_more_x8_avx2[2];
extern const llm_qkernel llm_qkernels_more_x8_avx512[2];

#endif
