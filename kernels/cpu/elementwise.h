/*
 * elementwise.h — element-wise kernels of the CPU backend (elementwise.c):
 * the RMS norm of a row, the GELU-gated product (GeGLU), scaling by a
 * constant, tanh soft-capping and the broadcast add of a bias row; and the
 * scalar ops of the architecture graph options (LayerNorm, RoPE and
 * attention over the step's rows).  GeGLU,
 * scale and the broadcast add have a scalar reference and an AVX2 version
 * that are bit-identical; dispatch.h hands out the one this CPU runs.  The
 * thread-pool ops over them are cpu_elementwise.c's; this file and
 * elementwise.c know nothing of a backend (the CUDA library links
 * elementwise.c for the GELU table).
 *
 * Numerics are those of ggml's CPU backend, which is what llama.cpp runs:
 *  - GELU (tanh approximation) through ggml's binary16 table
 *    (GGML_GELU_FP16): gelu(x) = 0.5 x (1 + tanhf(sqrt(2/pi) x (1 + 0.044715
 *    x^2))) evaluated in float with the one fused multiply-add GCC forms for
 *    ggml's expression under -ffp-contract=fast on an FMA target (the inner
 *    1 + (0.044715 x) x), rounded to binary16, for every binary16 input;
 *    ggml_vec_geglu_f32 then gives 0 for x <= -10, x * up for x >= 10 and
 *    table[fp16(x)] * up otherwise.  The table needs libm's tanhf, so it is
 *    the same table as llama.cpp's only with the same libm (test_gemma3_ops
 *    compares the two tables entry by entry when the oracle library is
 *    present);
 *  - scale: x * s, one rounding (ggml_vec_scale_f32);
 *  - soft-capping: tanhf(x * (1/cap)) * cap (ggml_scale, ggml_tanh, ggml_scale;
 *    libm tanhf in both versions, as ggml_vec_tanh_f32);
 *  - RMS norm: a double sum of the float squares x * x, mean = (float)
 *    (sum / dim), scale = 1 / sqrtf(mean + eps), out = (x * scale) * w
 *    (ggml_compute_forward_rms_norm_f32, then the weight multiply);
 *  - broadcast add: x + bias, one rounding (ggml_vec_add_f32 with the bias
 *    row repeated, as ggml_add broadcasts it).
 */
#ifndef LLM_CPU_ELEMENTWISE_H
#define LLM_CPU_ELEMENTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/backend.h"

/* out[i] = gelu(gate[i]) * up[i] for i < n (ggml_vec_geglu_f32); out may alias gate or up. */
typedef void (*llm_geglu_fn) (const float *gate, const float *up, float *out, int64_t n);

/* x[i] *= s for i < n. */
typedef void (*llm_scale_fn) (float *x, float s, int64_t n);

/* out[i] = x[i] + bias[i] for i < n: one float addition each; out may alias x. */
typedef void (*llm_add_row_fn) (const float *x, const float *bias, float *out, int64_t n);

/* The gelu of one float as ggml_gelu_f32 computes it (before the binary16 table rounding). */
float		llm_gelu_f32(float x);

/*
 * The table: entry h = the binary16 gelu of the binary16 value h, as float
 * (65536 entries, built once, thread-safe; never freed).
 */
const float *llm_gelu_table(void);

/* The kernels: avx2 false = the scalar reference; true = AVX2 + F16C (caller checked the CPU). */
llm_geglu_fn llm_geglu_kernel(bool avx2);
llm_scale_fn llm_scale_kernel(bool avx2);
llm_add_row_fn llm_add_row_kernel(bool avx2);

/* x[i] = tanhf(x[i] * inv_cap) * cap for i < n; inv_cap = 1.0f / cap (float division). */
void		llm_softcap_row(float *x, float cap, int64_t n);

/*
 * The CPU backend's layernorm, rope_rows and attention_rows ops (backend.h
 * states their contracts): scalar code on the calling thread over host
 * arrays, so any backend-made host buffer works; they never fail.
 */
int			llm_cpu_layernorm(llm_backend *b, const float *x, const float *w, const float *bias, float *out,
							  int n, int dim, float eps);
int			llm_cpu_rope_rows(llm_backend *b, const llm_step_desc *d, float *x, int n_heads, int head_dim,
							  float rope_theta, int n_rot, const float *freq_factors, int mode);
int			llm_cpu_attention_rows(llm_backend *b, const llm_step_desc *d, const float *q, const float *k,
								   const float *v, float *out, int n_heads, int n_kv_heads, int head_dim,
								   const llm_attn_opts *opts);
/*
 * attention_rows for query row t of sequence s of d and head h alone
 * (sc: scratch of the sequence's row count): llm_cpu_attention_rows is
 * this over every (t, h) in order; the backend's op runs the pairs on its
 * threads (cpu_attention.c) with the same results, each pair depending on
 * its own inputs only.
 */
typedef void (*llm_attn_rows_fn) (const llm_step_desc *d, int s, int t, int h, const float *q,
								  const float *k, const float *v, float *out, int n_heads, int n_kv_heads,
								  int head_dim, const llm_attn_opts *o, float *sc);
void		llm_attention_rows_one(const llm_step_desc *d, int s, int t, int h, const float *q, const float *k,
								   const float *v, float *out, int n_heads, int n_kv_heads, int head_dim,
								   const llm_attn_opts *o, float *sc);

/*
 * attn_rows_block.c: the encoders' attention for queries t0 .. t1-1 (rows
 * of the sequence whose rows are u0 .. u1-1, in blocks of 16) and head h,
 * bidirectional over the whole sequence, no window, no soft-cap, head_dim
 * a multiple of 16 up to 256; q, k, v, out as attention_rows (backend.h).
 * Another summation order and expf than llm_attention_rows_one (the
 * faster encoder arithmetic); each query's result depends on its own row
 * and its sequence only.  scratch: llm_attention_rows_block_scratch(u1 -
 * u0, head_dim) floats.  x86-64 with AVX512F only: the caller checks.
 */
size_t		llm_attention_rows_block_scratch(int n_rows, int head_dim);
void		llm_attention_rows_block_avx512(const float *q, const float *k, const float *v, float *out, int u0,
											int u1, int t0, int t1, int h, int n_heads, int n_kv_heads,
											int head_dim, float scale, float *scratch);

/*
 * attn_rows_avx512.c: llm_attention_rows_one with 512-bit vectors, the same
 * bits (it runs llm_attention_rows_one itself outside the encoders' case).
 * x86 with AVX512F only: the caller checks the CPU.
 */
void		llm_attention_rows_one_avx512(const llm_step_desc *d, int s, int t, int h, const float *q,
										  const float *k, const float *v, float *out, int n_heads,
										  int n_kv_heads, int head_dim, const llm_attn_opts *o, float *sc);
/* out[i] = (x[i] * scale) * w[i] for i < dim, the RMS norm above; out may alias x. */
void		llm_rmsnorm_row(const float *x, const float *w, float *out, int dim, float eps);

#endif
