/*
 * backend_cpu.h — CPU-backend extras beyond backend.h (tests, diagnostics).
 * Every function takes a backend made by llm_backend_cpu_create and fails
 * (-1, NULL or "none") for any other; call them between ops, never during
 * one.
 */
#ifndef LLM_BACKEND_CPU_H
#define LLM_BACKEND_CPU_H

#include "kernels/backend.h"

/*
 * Choose the kernel implementation of a CPU backend: LLM_IMPL_BEST
 * (default), LLM_IMPL_SCALAR, LLM_IMPL_AVX2 or LLM_IMPL_AVX512VNNI
 * (dispatch.h).  Returns -1 (with last_error set for a CPU backend) when b
 * is not a CPU backend or the CPU lacks the instructions.  Call it before
 * load_weight: weights already repacked for the packed AVX512-VNNI kernels
 * (quant_packed.c) keep them (their results are the same).
 */
int			llm_backend_cpu_set_impl(llm_backend *b, int impl);

/*
 * Name of the kernel implementation in use: "scalar", "avx2" or
 * "avx512vnni" (static string), with "+amx-bf16" once an encoder's F16
 * matrices were loaded in the AMX form (load_weight_encoder).
 */
const char *llm_backend_cpu_impl_name(llm_backend *b);

/*
 * Mark, for the current step, the token rows that llama.cpp would compute in
 * a batch of one token (decode of a single stream): flags[n_tokens], nonzero
 * = use ggml_vec_dot_f16's reduction order for that row's attention instead
 * of the multi-token (tinyBLAS) order (quant.h llm_attn_args).  Call after
 * begin_step; begin_step resets all rows to the multi-token order; flags
 * NULL also resets.  With decode tokens marked, single-stream greedy output
 * is bit-identical to llama.cpp's (no flash attention).  The choice is per
 * row, so results still never depend on which rows share a batch.
 */
int			llm_backend_cpu_set_single_rows(llm_backend *b, const uint8_t *flags);

/*
 * Decode rows (one-token order) whose key count reaches min_keys run their
 * attention in parallel pieces when the step has too few (token, KV head)
 * pairs for the threads (quant.h llm_attn_split; default 512 keys).  The
 * result is the same either way; tests lower it to cover the split.
 */
int			llm_backend_cpu_set_split_keys(llm_backend *b, int min_keys);

/*
 * The K (is_v false) or V cache array of a layer: [n_blocks][n_kv_heads]
 * [block_size] rows of llm_kv_row_bytes (quant.h; fp16 values at
 * llm_kv_row_offset for an F16 cache, q8_0 blocks for Q8_0); NULL before
 * kv_init or for a bad layer.  For tests and debugging.
 */
const void *llm_backend_cpu_kv(llm_backend *b, int layer, bool is_v);

#endif
