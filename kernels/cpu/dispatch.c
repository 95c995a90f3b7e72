/*
 * dispatch.c — which CPU kernel implementation runs (dispatch.h).
 *
 * The CPU's instruction sets are read once (pthread_once, on the first call
 * of any function here) into a table of what this CPU can run and the best
 * implementation; lookups afterwards only read it.  Detection is the only
 * thing this file does that depends on the CPU: the kernels themselves live
 * in quant.c (scalar), quant_avx2.c, quant_packed.c, quant_packed_avx2.c
 * and attn_avx2.c (vector), elementwise.c and row_scan.c (both).
 *
 * Dependencies between the files of kernels/cpu (A -> B: A calls a
 * function defined in B); the graph is acyclic, and no file calls one
 * listed above it:
 *
 *   cpu_backend.c  -> cpu_elementwise.c, cpu_matmul.c, cpu_attention.c,
 *                     cpu_attention_rows.c (its op
 *                     table), dispatch.c, quant.c, threadpool.c, huge_pages.c,
 *                     row_scan.c, amx_bf16.c
 *   cpu_elementwise.c -> elementwise.c, threadpool.c
 *   cpu_matmul.c   -> quant_kforms.c, dispatch.c, quant.c, quant_types.c, threadpool.c,
 *                     amx_bf16.c
 *   cpu_attention.c -> dispatch.c, quant.c, threadpool.c
 *   cpu_attention_rows.c -> threadpool.c, attn_rows_block.c
 *   amx_bf16.c     -> quant.c
 *   attn_rows_block.c -> (nothing in kernels/cpu)
 *   dispatch.c     -> quant_more.c, quant_packed.c, quant_packed_avx2.c, attn_avx2.c,
 *                     quant_avx2.c, quant_q5_0.c, elementwise.c, row_scan.c, quant.c
 *   quant_more.c   -> quant_more_avx2.c, quant_more_avx512.c (their tables),
 *                     quant_avx2.c, quant.c, dequant_more.c
 *   quant_kforms.c -> quant_q6k_vnni.c, quant_avx2.c, quant.c (the row forms of Q4_K / Q6_K)
 *   quant_packed.c -> quant_q4k_packed.c, quant_q6k_packed.c, quant_avx2.c
 *   quant_q4k_packed.c, quant_packed_avx2.c -> quant_avx2.c
 *   quant_q6k_packed.c -> quant_q6k_wide.c (its wide form), quant_q6k_vnni.c
 *   quant_q6k_wide.c -> quant.c (inline helpers of quant.h only)
 *   quant_avx2.c   -> quant_q6k_vnni.c (the VNNI implementation's Q6_K)
 *   quant_q6k_vnni.c -> quant.c
 *   attn_avx2.c    -> quant.c (inline helpers of quant.h only)
 *   quant_avx2.c, quant_q5_0.c, elementwise.c -> quant.c
 *   quant_more_avx2.c, quant_more_avx512.c -> quant.c, dequant_more.c
 *   quant.c <-> dequant_more.c: one function, llm_dequantize_row, whose
 *                     quant_more.h types dequant_more.c decodes (with
 *                     quant.c's fp16 conversion)
 *   threadpool.c, huge_pages.c, row_scan.c -> (nothing in kernels/cpu)
 *
 * Headers follow the same graph: quant.h declares quant.c and
 * quant_kforms.c (and the types
 * and inline helpers every kernel shares), quant_x86.h the vector
 * kernels' files, dispatch.h this file; simd_x86.h and quant_tile.inc are
 * inline code of the vector kernels; cpu_internal.h declares the ops of
 * the four cpu_*.c op files for cpu_backend.c's table (and the state and
 * inline helpers the four share).
 */
#include "dispatch.h"
#include "quant.h"
#include "quant_x86.h"
#include "quant_more.h"

#include <pthread.h>

typedef struct cpu_features
{
	bool		avx2;			/* AVX2 + FMA + F16C */
	bool		avx512vnni;		/* also AVX512F/VL/VNNI */
	bool		packed;			/* also AVX512BW: the packed kernels */
	int			best;			/* LLM_IMPL_* that LLM_IMPL_BEST means */
	/* Q5_0 AVX2 tiles joined to each implementation's Q8_0 activations (quant_q5_0.c) */
	bool		have_q5_0;
	llm_qkernel q5_0[2];		/* [0] with the AVX2, [1] with the VNNI Q8_0 kernel */
} cpu_features;

static cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

static void
detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	features.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
		__builtin_cpu_supports("f16c");
	features.avx512vnni = features.avx2 && __builtin_cpu_supports("avx512f") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
	features.packed = features.avx512vnni && __builtin_cpu_supports("avx512bw");
#endif
	features.best = features.avx512vnni ? LLM_IMPL_AVX512VNNI :
		features.avx2 ? LLM_IMPL_AVX2 : LLM_IMPL_SCALAR;
	/*
	 * Both take the AVX2 Q8_0 groups of 4 for batched matmuls: the VNNI
	 * Q8_0 kernel quantizes activations the same way, so the x4 tiles
	 * (plain AVX2) serve it too (where AVX512BW is there, the packed rows
	 * below instead).
	 */
	if (features.avx2)
		features.have_q5_0 =
			llm_qkernel_q5_0_avx2(llm_qkernel_avx2_get(LLM_TYPE_Q8_0, false),
								  llm_qkernel_packed_avx2_get(LLM_TYPE_Q8_0), &features.q5_0[0]) &&
			llm_qkernel_q5_0_avx2(llm_qkernel_avx2_get(LLM_TYPE_Q8_0, true),
								  llm_qkernel_packed_avx2_get(LLM_TYPE_Q8_0), &features.q5_0[1]);
	/*
	 * With AVX512BW the VNNI one converts into the packed Q8_0 rows instead
	 * (quant_packed.c): the same activations, and its 512-bit tiles take
	 * half the vector instructions of the AVX2 groups of 4.
	 */
	if (features.have_q5_0 && features.packed && features.q5_0[1].batch_kernel != NULL)
	{
		features.q5_0[1].batch_kernel = llm_qkernel_packed_vnni_get(LLM_TYPE_Q8_0);
		features.q5_0[1].batch_convert = llm_convert_q5_0_q8_0_packed;
		/* 4 tokens already run 2x faster converted than on the AVX2 tile (bench/kernel_tiles.c) */
		features.q5_0[1].batch_min_tokens = 4;
	}
}

static inline const cpu_features *
cpu(void)
{
	pthread_once(&features_once, detect);
	return &features;
}

/* impl with LLM_IMPL_BEST resolved; -1 when this CPU cannot run it. */
static int
resolve(int impl)
{
	const cpu_features *f = cpu();

	switch (impl)
	{
		case LLM_IMPL_BEST:
			return f->best;
		case LLM_IMPL_SCALAR:
			return impl;
		case LLM_IMPL_AVX2:
			return f->avx2 ? impl : -1;
		case LLM_IMPL_AVX512VNNI:
			return f->avx512vnni ? impl : -1;
		default:
			return -1;
	}
}

bool
llm_cpu_has_avx2(void)
{
	return cpu()->avx2;
}

bool
llm_cpu_has_avx512vnni(void)
{
	return cpu()->avx512vnni;
}

const llm_qkernel *
llm_qkernel_get(uint32_t t, int impl)
{
	int			r = resolve(impl);
	const llm_qkernel *more = llm_qkernel_more_get(t, r);

	if (more != NULL)
		return more;
	if (t == LLM_TYPE_Q5_0 && (r == LLM_IMPL_AVX2 || r == LLM_IMPL_AVX512VNNI))
		return cpu()->have_q5_0 ? &cpu()->q5_0[r == LLM_IMPL_AVX512VNNI] : NULL;
	switch (r)
	{
		case LLM_IMPL_SCALAR:
			return llm_qkernel_scalar_get(t);
		case LLM_IMPL_AVX2:
			return llm_qkernel_avx2_get(t, false);
		case LLM_IMPL_AVX512VNNI:
			return llm_qkernel_avx2_get(t, true);
		default:
			return NULL;
	}
}

const llm_qkernel *
llm_qkernel_packed_get(uint32_t t, int impl)
{
	int			r = resolve(impl);

	if (r == LLM_IMPL_AVX512VNNI)
		return cpu()->packed ? llm_qkernel_packed_vnni_get(t) : NULL;
	if (r == LLM_IMPL_AVX2)
		return llm_qkernel_packed_avx2_get(t);
	return NULL;
}

/* Attention and SwiGLU have one vector version (AVX2), used by the AVX2 and VNNI implementations. */
llm_attn_fn
llm_attn_kernel_get(int impl)
{
	int			r = resolve(impl);

	if (r == LLM_IMPL_SCALAR)
		return llm_attn_scalar;
	return r < 0 ? NULL : llm_attn_kernel_avx2_get();
}

llm_attn_block_fn
llm_attn_block_kernel_get(int impl)
{
	int			r = resolve(impl);

	if (r == LLM_IMPL_SCALAR)
		return llm_attn_block_scalar;
	return r < 0 ? NULL : llm_attn_block_avx2_get();
}

const llm_attn_split *
llm_attn_split_get(int impl)
{
	int			r = resolve(impl);

	return r == LLM_IMPL_AVX2 || r == LLM_IMPL_AVX512VNNI ? llm_attn_split_avx2_get() : NULL;
}

llm_swiglu_fn
llm_swiglu_get(int impl)
{
	int			r = resolve(impl);

	if (r == LLM_IMPL_SCALAR)
		return llm_swiglu_scalar;
	return r < 0 ? NULL : llm_swiglu_avx2_get();
}

llm_geglu_fn
llm_geglu_get(int impl)
{
	int			r = resolve(impl);

	return r < 0 ? NULL : llm_geglu_kernel(r != LLM_IMPL_SCALAR);
}

llm_scale_fn
llm_scale_get(int impl)
{
	int			r = resolve(impl);

	return r < 0 ? NULL : llm_scale_kernel(r != LLM_IMPL_SCALAR);
}

llm_add_row_fn
llm_add_row_get(int impl)
{
	int			r = resolve(impl);

	return r < 0 ? NULL : llm_add_row_kernel(r != LLM_IMPL_SCALAR);
}

llm_attn_rows_fn
llm_attn_rows_get(int impl)
{
	int			r = resolve(impl);

	if (r < 0)
		return NULL;
#if defined(__x86_64__) || defined(__i386__)
	if (r == LLM_IMPL_AVX512VNNI)
		return llm_attention_rows_one_avx512;
#endif
	return llm_attention_rows_one;
}

llm_row_scan_fn
llm_row_scan_get(int impl)
{
	int			r = resolve(impl);

	return r < 0 ? NULL : llm_row_scan_kernel(r != LLM_IMPL_SCALAR);
}

void
llm_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n)
{
	if (cpu()->avx2)
	{
		llm_fp16_to_fp32_row_f16c(src, dst, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		dst[i] = llm_fp16_to_fp32(src[i]);
}

void
llm_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n)
{
	if (cpu()->avx2)
	{
		llm_fp32_to_fp16_row_f16c(src, dst, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		dst[i] = llm_fp32_to_fp16(src[i]);
}
