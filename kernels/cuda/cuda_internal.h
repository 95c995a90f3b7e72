/*
 * cuda_internal.h — definitions shared by the CUDA backend's translation
 * units (backend_cuda.cu: host side; kernels_*.cu: device code and launch
 * wrappers).  Not installed, not seen by the engine.
 *
 * Every launch wrapper returns the cudaError_t of the launch
 * (cudaGetLastError after <<<>>>); the host side turns it into the backend's
 * error string.  Nothing here aborts.
 */
#ifndef LLM_CUDA_INTERNAL_H
#define LLM_CUDA_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

/* Quantization block of Q4_0/Q4_1/Q8_0 (elements). */
#define CU_QK 32

/*
 * Attention work partition.  ATTN_SPLIT keys form one split of the split-K
 * decode kernel; it is a constant so that the reduction order for a query
 * depends only on its own position, never on the batch (backend.h
 * batch-invariance contract).  ATTN_TILE keys are staged in shared memory at
 * a time; ATTN_MAX_GROUP bounds n_heads / n_kv_heads (GQA group).
 */
#define ATTN_SPLIT		128
#define ATTN_TILE		64
#define ATTN_MAX_GROUP	8
#define PREFILL_BQ		64		/* query rows per prefill CTA */

/* Weight formats a cuda_weight may carry besides its fp16 copy. */
enum cu_qform
{
	CU_QFORM_NONE = 0,
	CU_QFORM_Q4_0,				/* qs nibbles + dm.x = d */
	CU_QFORM_Q4_1,				/* qs nibbles + dm = (d, m) */
	CU_QFORM_Q8_0				/* qs int8 + dm.x = d */
};

/*
 * A weight on the device.  f16: the matrix dequantized to fp16, row-major
 * [n_rows][n_cols] (cuBLAS path and GEMV of types without a repacked form).
 * For Q4_0/Q4_1/Q8_0 also a repacked copy of the original blocks with the
 * same numbers (d, m and quants unchanged) in a layout that gives the GEMV
 * 16-byte coalesced loads: qs [n_rows][n_cols/2] (4-bit, ggml nibble order:
 * low nibbles elements 0..15 of a block, high nibbles 16..31) or
 * [n_rows][n_cols] (int8); dm [n_rows][n_cols/32] half2.  raw: the GGUF
 * bytes, kept only for types the embedding gather cannot read from the other
 * copies (k-quants, BF16, F32).
 */
typedef struct cuda_weight
{
	uint32_t	type;
	int64_t		n_rows;
	int64_t		n_cols;
	size_t		row_bytes;		/* GGUF bytes per row */
	__half	   *f16;
	int			qform;
	uint8_t    *qs;
	__half2    *dm;
	uint8_t    *raw;
} cuda_weight;

/* Device pointers of the current step (one device buffer; see backend_cuda.cu). */
typedef struct cuda_step_dev
{
	const int32_t *token_ids;	/* [n_tokens] */
	const int32_t *positions;	/* [n_tokens] */
	const int32_t *slots;		/* [n_tokens] */
	const int32_t *tok_seq;		/* [n_tokens] sequence of each token */
	const int32_t *block_tables;	/* [n_seqs][max_blocks] */
	const int32_t *out_rows;	/* [n_out] */
	const int32_t *dec_items;	/* [n_dec_items][2]: (token row, split index) */
	const int32_t *dec_tokens;	/* [n_dec_tokens]: token row */
	const int32_t *dec_item0;	/* [n_dec_tokens]: first item of the token */
	const int32_t *dec_nsplit;	/* [n_dec_tokens]: its number of splits */
	const int32_t *pf_tiles;	/* [n_pf_tiles][3]: (sequence, first row, rows) */
	int			n_tokens;
	int			n_seqs;
	int			max_blocks;
	int			n_out;
	int			n_dec_items;
	int			n_dec_tokens;
	int			n_pf_tiles;
} cuda_step_dev;

/* KV cache geometry and the layer's arrays. */
typedef struct cuda_kv_layer
{
	__half	   *k;				/* [n_blocks][block_size][n_kv_heads][head_dim] */
	__half	   *v;
	int			n_kv_heads;
	int			head_dim;
	int			block_size;
} cuda_kv_layer;

#ifdef __cplusplus
extern "C"
{
#endif

/* ---- kernels_basic.cu ---- */
cudaError_t cu_dequant_to_f16(cudaStream_t st, uint32_t type, const uint8_t *raw, size_t row_bytes,
							  int64_t n_rows, int64_t n_cols, __half *f16);
cudaError_t cu_repack(cudaStream_t st, uint32_t type, const uint8_t *raw, size_t row_bytes,
					  int64_t n_rows, int64_t n_cols, uint8_t *qs, __half2 *dm);
cudaError_t cu_embed(cudaStream_t st, const cuda_weight *w, const int32_t *token_ids, int n_tokens,
					 float *out);
cudaError_t cu_rmsnorm(cudaStream_t st, float *residual, const float *delta, const float *x,
					   const float *w, float *out, int n, int dim, float eps);
cudaError_t cu_add(cudaStream_t st, float *residual, const float *delta, size_t n);
/* out[r][i] = x[r][i] + bias[i] for r < n_rows, i < n (backend.h add_broadcast); out may equal x. */
cudaError_t cu_add_broadcast(cudaStream_t st, const float *x, const float *bias, float *out, size_t n_rows,
							 size_t n);
cudaError_t cu_silu_mul(cudaStream_t st, const float *gate, const float *up, float *out, size_t n);
/* GeGLU through the binary16 GELU table gelu16 [65536] (backend.h gelu_mul; the CPU backend's table). */
cudaError_t cu_gelu_mul(cudaStream_t st, const __half *gelu16, const float *gate, const float *up, float *out,
						size_t n);
/* x *= s. */
cudaError_t cu_scale(cudaStream_t st, float *x, float s, size_t n);
/* x = tanhf(x * (1 / cap)) * cap (device tanhf: not bit-identical to libm's). */
cudaError_t cu_softcap(cudaStream_t st, float *x, float cap, size_t n);
cudaError_t cu_gather_rows(cudaStream_t st, const float *x, float *out, const int32_t *rows,
						   int n_out, int dim);
cudaError_t cu_f32_to_f16(cudaStream_t st, const float *x, __half *y, size_t n);
/* mode: LLM_ROPE_NORMAL (adjacent pairs) or LLM_ROPE_NEOX (halves), backend.h. */
cudaError_t cu_rope_store_kv(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
							 float *q, float *k, const float *v, int n_heads, float theta_scale, int mode);
/*
 * backend.h rope_store_kv_opts: the first n_rot values of each head
 * rotated (mode NORMAL or NEOX; LLM_ROPE_NONE: none) by pair i's angle
 * freq_scale * (pos * theta_scale^i / ff[i]) (ff: freq_factors [n_rot/2]
 * device memory, or NULL), cos and sin times mscale; then k and v stored.
 */
cudaError_t cu_rope_store_kv_opts(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
								  float *q, float *k, const float *v, int n_heads, float theta_scale,
								  int mode, int n_rot, const float *freq_factors, float freq_scale,
								  float mscale);

/* ---- kernels_gemv.cu ---- */
/* y[t][r] = W[r] . x[t] for t < n with a per-(row, token) reduction order independent of n. */
cudaError_t cu_gemv(cudaStream_t st, const cuda_weight *w, const float *x, float *y, int n);

/* ---- kernels_attention.cu ---- */
/* Shared-memory opt-in of the attention kernels; call once per device. */
cudaError_t cu_attention_setup(void);
bool		cu_attention_head_dim_ok(int head_dim);
/*
 * window: keys per query as backend.h's attention op (0 = all): the query
 * at position p reads keys max(0, p - window + 1)..p.
 */
/* softcap > 0: scores soft-capped (backend.h attention_softcap); 0 = none. */
cudaError_t cu_attention_decode(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
								const float *q, float *out, float *partials, int n_heads, float scale,
								int window, float softcap);
cudaError_t cu_attention_prefill(cudaStream_t st, const cuda_kv_layer *kv, const cuda_step_dev *sd,
								 const float *q, float *out, int n_heads, float scale, int window,
								 float softcap);

#ifdef __cplusplus
}
#endif

#endif
