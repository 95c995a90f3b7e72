/*
 * backend.h — the compute interface every backend (CPU, CUDA) implements.
 *
 * The model (engine/model*.c) drives a forward pass only through these
 * ops; it never touches device memory directly.  All activations are fp32,
 * row-major, one row per token.  The paged KV cache is owned by the backend:
 * per layer one K and one V array of n_blocks blocks of block_size
 * tokens x n_kv_heads rows of head_dim values (fp16, or q8_0 blocks:
 * llm_kv_dtype); the order inside a block is the backend's (CPU:
 * [n_kv_heads][block_size] rows, kernels/cpu/quant.h llm_kv_row_index;
 * CUDA: [block_size][n_kv_heads], fp16 only).
 * A token's KV "slot" is block_id * block_size + offset_in_block.
 *
 * Implementations: kernels/cpu (cpu_backend.c: the table), kernels/cuda
 * (build/llm_cuda.so, loaded by engine/backend_loader.c); the helpers
 * declared at the end that are the same for every backend: backend.c.
 *
 * Ops may run asynchronously (CUDA stream); llm_backend_ops.sync waits.
 * Every op returns 0 on success or -1 after writing a message retrievable by
 * ops.last_error; no op aborts the process.  Compute threads of a backend
 * never call PostgreSQL and block all signals.
 *
 * Numerics contract (batch invariance): the value computed for a token row
 * depends only on that row's inputs, its position and its sequence's KV
 * contents, never on which other rows share the batch or how a prompt was
 * chunked.  Attention for a query at position p reads keys lo..p of its
 * sequence from the cache (after this step's writes), lo = 0 or, with a
 * sliding window of w keys, max(0, p - w + 1): bounds that are absolute
 * positions, read in position order with one fixed reduction order.
 *
 * Paged KV cache as in vLLM's PagedAttention (Kwon et al., SOSP 2023).
 */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

/* A 2-D weight matrix: n_rows output features, each a row of n_cols inputs. */
typedef struct llm_weight
{
	uint32_t	type;			/* llm_type (quant_types.h) of the stored rows */
	int64_t		n_rows;			/* output features */
	int64_t		n_cols;			/* input features (GGUF ne[0]) */
	size_t		row_bytes;		/* bytes per stored row */
	const void *data;			/* backend memory (CPU: host pointer, may be the mmap) */
	void	   *backend_priv;	/* backend-owned extra state (repacked copy...) */
} llm_weight;

/*
 * Element type of the paged KV cache.  Q8_0 stores each cached row of
 * head_dim values as blocks of 32 int8 with an fp16 scale (ggml's
 * block_q8_0, as llama.cpp's q8_0 cache): half the memory and bandwidth
 * of F16, head_dim a multiple of 32.  A backend rejects a type it lacks.
 */
typedef enum llm_kv_dtype
{
	LLM_KV_F16 = 0,
	LLM_KV_Q8_0 = 1
} llm_kv_dtype;

/* Geometry of the paged KV cache; fixed for a backend's lifetime. */
typedef struct llm_kv_geometry
{
	int			n_layers;
	int			n_kv_heads;
	int			head_dim;
	int			block_size;		/* tokens per block */
	int			n_blocks;		/* blocks per layer */
	int			kv_dtype;		/* llm_kv_dtype of K and V (0: F16) */
	/*
	 * The local group: sliding-window layers whose KV lives in a slot
	 * space of its own, so blocks of positions that fell out of every
	 * window can be reused (by any sequence) while the other layers (the
	 * global group) still hold those positions.  layer_local NULL: one
	 * group, every layer in n_blocks (the fields below unused).  Else
	 * layer_local[l] 1 puts layer l in the local group of n_blocks_local
	 * blocks, and its attention calls use a window of 1..local_window keys
	 * (a larger or no window would read freed blocks: an error).  Only a
	 * backend with kv_local_group accepts it.
	 */
	const uint8_t *layer_local; /* [n_layers] or NULL */
	int			n_blocks_local; /* blocks per local layer */
	int			local_window;	/* the largest window of a local layer */
} llm_kv_geometry;

/*
 * The shape of one forward step (host arrays; the backend copies what it
 * needs in begin_step).  Tokens of a sequence are contiguous and in position
 * order; sequences are independent.
 */
/*
 * llm_step_desc.row_forms flags.  A prompt of P tokens is one llama.cpp
 * batch of P rows: its first P - P % 4 rows are LLM_ROW_GROUPED (llama.cpp
 * multiplies repacked Q4_K weights by them 4 rows at a time, GEMM, and by
 * the rest one at a time, GEMV); every row of a prompt of 8 or more tokens
 * is LLM_ROW_WIDE (llama.cpp's tiled K-quant matmul takes batches of 8 rows
 * or more).  A generated token has neither.  LLM_ROW_TAIL_ALONE: llama.cpp
 * computes the last layer's rows after attention only for the rows whose
 * logits are wanted, as a batch of their own; a prompt's last token, when
 * it is the prompt's only such row, is there a batch of one (no other form:
 * see tail_rows).
 */
#define LLM_ROW_GROUPED 0x1
#define LLM_ROW_WIDE 0x2
#define LLM_ROW_TAIL_ALONE 0x4

typedef struct llm_step_desc
{
	int			n_tokens;
	int			n_seqs;
	const int32_t *token_ids;	/* [n_tokens] */
	const int32_t *positions;	/* [n_tokens] position of each token in its sequence */
	const int32_t *slots;		/* [n_tokens] KV slot where the token's K/V is written */
	const int32_t *seq_start;	/* [n_seqs + 1] token row range of each sequence */
	const int32_t *seq_kv_len;	/* [n_seqs] KV length of the sequence after this step */
	const int32_t *block_tables;	/* [n_seqs][max_blocks_per_seq] block ids */
	int			max_blocks_per_seq;
	/*
	 * [n_out] token rows whose logits are wanted, in the order the logits
	 * come back: any rows, in any order, several of one sequence (e.g. every
	 * row of a prompt being scored or of a draft being verified), repeats
	 * allowed.  n_out may exceed n_seqs and n_tokens.
	 */
	const int32_t *out_rows;
	int			n_out;
	/*
	 * [n_tokens] or NULL: 1 for generated (not prompt) tokens.  A backend may
	 * use it to pick the reduction order llama.cpp uses for one-token decode
	 * steps, so greedy output matches the oracle; a property of the token,
	 * not of the batch, so batch invariance holds.
	 */
	const uint8_t *decode_rows;
	/*
	 * The local group's slot space (llm_kv_geometry.layer_local), NULL
	 * without one: slots_local [n_tokens] where the token's K/V is written
	 * in local layers, and block_tables_local [n_seqs][max_blocks_per_seq]
	 * local block ids by the same logical block index as block_tables.
	 * Only the entries a local layer reads must be valid: the blocks of
	 * positions max(0, p - local_window + 1) .. p of each query p of the
	 * step; the others (freed, behind every window) are ignored.
	 */
	const int32_t *slots_local;
	const int32_t *block_tables_local;
	/*
	 * [n_tokens] or NULL (all 0): LLM_ROW_* flags saying how llama.cpp's
	 * CPU backend would compute the row's matmuls when it runs the row's
	 * sequence alone, the prompt in one batch and each generated token in a
	 * batch of one.  A backend may use them to pick the reduction order of
	 * those kernels (kernels/cpu/quant.h, "Row forms"); like decode_rows, a
	 * property of the token (its prompt's length and its index there), not
	 * of the batch, so batch invariance holds.
	 */
	const uint8_t *row_forms;
} llm_step_desc;

/*
 * rope_store_kv_opts' RoPE of one layer (ggml_rope_ext without YaRN:
 * ext_factor 0).  Pair i < n_rot / 2 of a head turns by the angle
 * cos/sin(freq_scale * (theta_i / ff_i)) * mscale, theta_i = pos *
 * powf(theta, -2/n_rot)^i built by repeated float multiplication from pos
 * (ggml_rope_cache_init), ff_i = freq_factors[i] or 1 when NULL.
 */
typedef struct llm_rope_opts
{
	int			mode;			/* LLM_ROPE_NORMAL, LLM_ROPE_NEOX, or LLM_ROPE_NONE: q, k left as they are */
	int			n_rot;			/* rotated values at the start of each head: even, 2..head_dim */
	float		theta;			/* the base, > 0 */
	float		freq_scale;		/* angle factor (linear scaling: 1 / factor); 1 = none */
	float		mscale;			/* cos and sin factor (LongRoPE's attention factor); 1 = none */
	const float *freq_factors;	/* [n_rot / 2] divisors of each pair's angle (load_vector), or NULL */
} llm_rope_opts;

/* attention_rows' options. */
typedef struct llm_attn_opts
{
	float		scale;			/* factor of q . k */
	float		softcap;		/* > 0: scores capped to (-softcap, softcap) by tanh; 0 = none */
	int			window;			/* keys within this many positions (the query's own included); 0 = all */
	bool		causal;			/* false: keys after the query's position too (bidirectional) */
} llm_attn_opts;

typedef struct llm_backend llm_backend;

typedef struct llm_backend_ops
{
	const char *name;			/* "cpu", "cuda" */

	void		(*destroy) (llm_backend *b);
	const char *(*last_error) (llm_backend *b);

	/* Device memory for activations: fp32 [n] buffers.  NULL on failure. */
	float	   *(*alloc_f32) (llm_backend *b, size_t n);
	void		(*free_f32) (llm_backend *b, float *p);
	int			(*download) (llm_backend *b, float *host_dst, const float *dev_src, size_t n);

	/*
	 * Make a weight usable: host points at GGUF data (mmap, valid for the
	 * backend's lifetime); out is filled with the backend's copy or view.
	 * Rejects types the backend cannot compute with.
	 */
	int			(*load_weight) (llm_backend *b, const llm_weight *host, llm_weight *out);
	void		(*free_weight) (llm_backend *b, llm_weight *w);
	/* An fp32 vector (norm weights): returns device copy or NULL. */
	float	   *(*load_vector) (llm_backend *b, const float *host, size_t n);

	/* Allocate the paged KV cache (g->kv_dtype elements).  Called once before any step. */
	int			(*kv_init) (llm_backend *b, const llm_kv_geometry *g);

	/* Upload the step description; ops below refer to it until the next begin_step. */
	int			(*begin_step) (llm_backend *b, const llm_step_desc *d);

	/*
	 * Optional (NULL: the backend has no row forms): the ops from here to
	 * the next begin_step compute the last layer's rows after attention;
	 * rows flagged LLM_ROW_TAIL_ALONE run their matmuls in the one-row form
	 * (llama.cpp computes them there in a batch of one).
	 */
	int			(*tail_rows) (llm_backend *b);

	/* out[t] = row token_ids[t] of the embedding matrix, dequantized. [n_tokens][n_cols] */
	int			(*embed) (llm_backend *b, const llm_weight *emb, float *out);

	/* out[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w; x, out [n][dim]; may alias. */
	int			(*rmsnorm) (llm_backend *b, const float *x, const float *w, float *out, int n, int dim, float eps);

	/* residual += delta; out = rmsnorm(residual) * w.  [n][dim] */
	int			(*add_rmsnorm) (llm_backend *b, float *residual, const float *delta, const float *w, float *out, int n, int dim, float eps);

	/* residual += delta.  [n][dim] */
	int			(*add) (llm_backend *b, float *residual, const float *delta, int n, int dim);

	/*
	 * y[t] = W x[t] for t < n: x [n][w->n_cols], y [n][w->n_rows].  Quantized
	 * weights use the activation quantization llama.cpp's CPU backend uses
	 * for that type (Q8_0 or Q8_1 blocks, Q8_K for k-quants).
	 */
	int			(*matmul) (llm_backend *b, const llm_weight *w, const float *x, float *y, int n);

	/*
	 * y[i][t] = W[i] x[t] for i < n_w: several weights of one input x
	 * [n][n_cols] (Q/K/V, gate/up), y[i] [n][w[i]->n_rows], none aliasing x.
	 * Results are those of n_w matmul calls; a backend may share the
	 * activation quantization and the parallel job.  Optional: NULL means
	 * the caller makes the matmul calls.
	 */
	int			(*matmul_multi) (llm_backend *b, const llm_weight *const *w, int n_w,
								 const float *x, float *const *y, int n);

	/*
	 * RoPE (GGUF llama: rotate adjacent pairs (x[2i], x[2i+1]) by
	 * pos * theta^(-2i/head_dim), ggml "normal" mode) on q [n][n_heads][head_dim]
	 * in place and k [n][n_kv_heads][head_dim], then store k and v
	 * [n][n_kv_heads][head_dim] at the step's slots in layer's cache, as fp16
	 * or quantized to q8_0 (the cache's kv_dtype).
	 */
	int			(*rope_store_kv) (llm_backend *b, int layer, float *q, float *k, const float *v,
								  int n_heads, float rope_theta);

	/*
	 * Causal attention over the paged cache for every token of the step:
	 * out[t][h] = softmax(q[t][h] . K[lo..p] * scale) V[lo..p] with p =
	 * pos(t), using kv head h / (n_heads / n_kv_heads) (GQA); q, out
	 * [n_tokens][n_heads][head_dim].  window: the number of most recent
	 * positions a query attends to, its own included: lo = max(0, p -
	 * window + 1); 0 = all (lo = 0, full causal attention); negative is an
	 * error.  A sliding-window layer is the same op with its window; in
	 * the local group (llm_kv_geometry.layer_local) its keys come from the
	 * local slot space and block tables.
	 */
	int			(*attention) (llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale,
							  int window);

	/* out[i] = silu(gate[i]) * up[i], i < n; may alias gate. */
	int			(*silu_mul) (llm_backend *b, const float *gate, const float *up, float *out, size_t n);

	/* out[j] = x[out_rows[j]] for the step's out_rows (j < n_out): [n_out][dim]. */
	int			(*gather_rows) (llm_backend *b, const float *x, float *out, int dim);

	int			(*sync) (llm_backend *b);

	/* ---- ops added with Gemma 3 (arch_gemma3.c) ---- */

	/* x[i] = x[i] * s for i < n: one float multiply each (ggml_scale without bias). */
	int			(*scale) (llm_backend *b, float *x, float s, size_t n);

	/*
	 * out[i] = gelu(gate[i]) * up[i], i < n; may alias gate.  gelu is the
	 * tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
	 * as ggml's CPU backend evaluates it (GGML_GELU_FP16, ggml_vec_geglu_f32):
	 * gate <= -10 gives 0, gate >= 10 gives gate * up, otherwise the
	 * binary16-rounded gelu of fp16(gate), times up.
	 */
	int			(*gelu_mul) (llm_backend *b, const float *gate, const float *up, float *out, size_t n);

	/*
	 * rope_store_kv with the rotation chosen by mode (LLM_ROPE_*): NORMAL
	 * rotates adjacent pairs (x[2i], x[2i+1]) as rope_store_kv does, NEOX
	 * the halves (x[i], x[i + head_dim/2]) (ggml GGML_ROPE_TYPE_NEOX); both
	 * by pos * theta^(-2i/head_dim) with the same cos/sin values.
	 */
	int			(*rope_store_kv_mode) (llm_backend *b, int layer, float *q, float *k, const float *v,
									   int n_heads, float rope_theta, int mode);

	/*
	 * x[i] = tanh(x[i] * (1 / cap)) * cap for i < n, cap > 0: final logit
	 * soft-capping as ggml's scale, tanh (libm tanhf), scale.
	 */
	int			(*softcap) (llm_backend *b, float *x, float cap, size_t n);

	/*
	 * True when kv_init accepts a local group (llm_kv_geometry.layer_local);
	 * false: the engine keeps every layer in one group.
	 */
	bool		kv_local_group;

	/* ---- added with copy-on-write of a shared prompt's last block (engine.c SCORE requests) ---- */

	/*
	 * Copy whole KV blocks: for i < n, every slot of block src[i] (all
	 * block_size positions of every KV head, written or not) into block
	 * dst[i], K and V, in every layer of one group: LLM_KV_GROUP_GLOBAL
	 * the layers of the n_blocks arrays (every layer without a local
	 * group), LLM_KV_GROUP_LOCAL the local group's layers
	 * (llm_kv_geometry.layer_local; an error without one).  Rows are copied
	 * as stored, in the cache's kv_dtype (f16 or q8_0 bytes unchanged), so
	 * attention reads from dst exactly what it would have read from src:
	 * a sequence whose KV was copied gets the values it would have computed
	 * (batch invariance).  Ids in [0, the group's block count); no dst may
	 * equal a src or another dst (an error, nothing copied); n 0 does
	 * nothing.  Needs kv_init, not a step: it may run between steps and
	 * leaves the current step description valid; it is ordered after the
	 * ops before it and before those after (CUDA: on the backend's
	 * stream).  Optional: NULL means the engine recomputes instead.
	 */
	int			(*copy_blocks) (llm_backend *b, int group, const int32_t *src, const int32_t *dst, int n);

	/* ---- added with the logits rows read in place (model.c, step.c) ---- */

	/*
	 * True when alloc_f32's buffers are host memory and every op takes any
	 * host float array where it takes a buffer (CPU): the model then
	 * writes the logits straight into the caller's array, with no download.
	 */
	bool		host_buffers;

	/*
	 * For each row j < n of x [n][dim] (a buffer; with host_buffers any
	 * host array): finite[j] = 1 when every element of the row is finite,
	 * else 0, and for a finite row argmax[j] = the lowest index of its
	 * largest element (-0.0 and +0.0 equal), i.e. the sampler's
	 * llm_logits_all_finite and llm_argmax; argmax[j] of a row that is not
	 * finite is unspecified.  argmax and finite are host arrays, written
	 * when the op returns.  Optional: NULL means the caller scans.
	 */
	int			(*scan_rows) (llm_backend *b, const float *x, int n, int dim, int32_t *argmax, uint8_t *finite);

	/*
	 * ---- added with the architecture graph options (engine/model/model_graph.c) ----
	 * Optional: NULL means the backend lacks the op, and a model whose
	 * graph needs it fails to load (model_graph.c llm_graph_check).
	 */

	/*
	 * LayerNorm with bias: out[t] = (x[t] - mean) * (1 / sqrtf(var + eps))
	 * * w + bias (bias NULL: no add), mean and var over the dim values of
	 * row t as ggml_compute_forward_norm_f32 (double sums, float mean and
	 * variance), then ggml_mul by w and ggml_add of bias, one rounding
	 * each.  x, out [n][dim], may alias; w, bias [dim] (load_vector).
	 */
	int			(*layernorm) (llm_backend *b, const float *x, const float *w, const float *bias, float *out,
							  int n, int dim, float eps);

	/*
	 * RoPE of the step's rows in place, without the cache: x
	 * [d->n_tokens][n_heads][head_dim], row t at position d->positions[t]
	 * (d: the step given to begin_step; its host arrays are read).  The
	 * first n_rot values of each head (even, 2..head_dim) rotate, pair i
	 * (adjacent (x[2i], x[2i+1]) in LLM_ROPE_NORMAL, (x[i], x[i + n_rot/2])
	 * in LLM_ROPE_NEOX) by the angle pos * theta_i / ff[i], theta_i =
	 * theta_{i-1} * powf(rope_theta, -2/n_rot) from theta_0 = 1, ff =
	 * freq_factors ([n_rot/2], load_vector) or 1 when NULL (ggml's
	 * rope_freqs), cos/sin and the rotation's roundings as rope_store_kv
	 * (so with n_rot = head_dim and no factors the result is bit-identical
	 * to what rope_store_kv_mode does to q); values n_rot..head_dim-1 are
	 * unchanged (ggml's partial rotation).
	 */
	int			(*rope_rows) (llm_backend *b, const llm_step_desc *d, float *x, int n_heads, int head_dim,
							  float rope_theta, int n_rot, const float *freq_factors, int mode);

	/*
	 * Attention among the step's own rows, without the cache (every key
	 * a query may see is a row of this step: encoders, whole-sequence
	 * steps).  For a row t of sequence s of d (host arrays read) at
	 * position p and head h: out[t][h] = sum_u softmax_u(score(u)) v[u][g]
	 * over the rows u of s that it sees, g = h / (n_heads / n_kv_heads);
	 * score(u) = (q[t][h] . k[u][g]) * opts->scale, then when
	 * opts->softcap > 0 tanhf(score / softcap) * softcap (attention logit
	 * soft-capping).  Seen: with opts->causal the rows at positions p - w
	 * + 1 .. p (w = opts->window, 0 = unbounded), otherwise (bidirectional)
	 * every row at a position within w - 1 of p (0 = all rows of s).
	 * Dot products and sums in float in row order, the softmax
	 * max-subtracted with expf.  q, out [n_tokens][n_heads][head_dim]; k, v
	 * [n_tokens][n_kv_heads][head_dim].
	 */
	int			(*attention_rows) (llm_backend *b, const llm_step_desc *d, const float *q, const float *k,
								   const float *v, float *out, int n_heads, int n_kv_heads, int head_dim,
								   const llm_attn_opts *opts);
	/* ---- added with the broadcast add, for architectures with bias rows ---- */

	/*
	 * out[r][i] = x[r][i] + bias[i] for r < n_rows, i < n: one bias row of
	 * n floats added to every row of x [n_rows][n], out [n_rows][n]; one
	 * float addition per element (rounded once, no contraction), so every
	 * backend gives the bits of the scalar sum and a row's result depends
	 * on that row alone (batch invariance).  x, bias and out are buffers
	 * (alloc_f32 / load_vector; with host_buffers any host arrays).  out
	 * may equal x (in place) but must not otherwise overlap x or bias.
	 * n_rows 0 does nothing; n_rows < 0, n <= 0 or a NULL array with
	 * n_rows > 0 is an error.  Every backend here provides it.
	 */
	int			(*add_broadcast) (llm_backend *b, const float *x, const float *bias, float *out,
								  int n_rows, int n);

	/*
	 * ---- added with the cached path's RoPE and soft-cap options (model_graph.c) ----
	 * Optional: NULL means a model whose layers need them fails to load.
	 */

	/*
	 * rope_store_kv_mode with the layer's RoPE as *ro (llm_rope_opts): q
	 * [n][n_heads][head_dim] and k rotated in place over the first
	 * ro->n_rot values of each head (pairs as rope_rows: adjacent in
	 * NORMAL, (x[i], x[i + n_rot/2]) in NEOX; the values n_rot..head_dim-1
	 * unchanged; LLM_ROPE_NONE: nothing rotated), then k and v stored at
	 * the step's slots as rope_store_kv does.  With n_rot = head_dim, no
	 * factors, freq_scale 1 and mscale 1 the result is bit for bit
	 * rope_store_kv_mode's.  The rotation's roundings are those of
	 * rope_store_kv (ggml's fused x0*c - x1*s, x0*s + x1*c).
	 */
	int			(*rope_store_kv_opts) (llm_backend *b, int layer, float *q, float *k, const float *v,
									   int n_heads, const llm_rope_opts *ro);

	/*
	 * attention with attention logit soft-capping, as llama.cpp computes it
	 * without flash attention: for each key, s = q . k (the dot product of
	 * attention's order), then s = tanhf(s * (1 / softcap)) * softcap, then
	 * the softmax of s * scale (ggml_soft_max_ext's scale).  softcap > 0;
	 * every other argument and the reduction orders as attention.
	 */
	int			(*attention_softcap) (llm_backend *b, int layer, const float *q, float *out, int n_heads,
									  float scale, int window, float softcap);

	/*
	 * ---- added with encoders (engine/model/arch_bert.c) ----
	 * Optional: NULL means the backend lacks the op, and a model whose
	 * graph needs it fails to load (llm_graph_check).
	 */

	/*
	 * x[t][i] += row r(t) of table, dequantized, for t < the step's
	 * n_tokens, i < table->n_cols: r(t) = the step's positions[t] + offset
	 * when by_position (absolute position embeddings), else offset (one row
	 * for every token: BERT's token type 0).  One float addition per
	 * element (x + row, rounded once), so a row's result depends on that
	 * row alone.  A row index outside [0, table->n_rows) is an error
	 * (nothing is written).  x [n_tokens][n_cols] a buffer.
	 */
	int			(*add_table_rows) (llm_backend *b, const llm_weight *table, bool by_position, int32_t offset,
								   float *x);

	/*
	 * out[i] = 0.5 x (1 + erf(x / sqrt(2))), x = in[i], i < n: the exact
	 * (erf) GELU of BERT and PyTorch's nn.GELU() (no table, no tanh
	 * approximation), erf in float within a few ulp (the CPU backend: libm's
	 * erff, or glibc's vector erff where AVX2 runs); each element's result
	 * depends on its value only, not on n or its position.  out may alias
	 * in.
	 */
	int			(*gelu_erf) (llm_backend *b, const float *in, float *out, size_t n);

	/* ---- added with the encoders' arithmetic (kernels/cpu/amx_bf16.h) ---- */

	/*
	 * load_weight for a layer matrix of an encoder model whose
	 * configuration allows a faster arithmetic than llama.cpp's
	 * (llm.encoder_arithmetic 'auto'): the backend may compute this
	 * weight's matmuls in another summation and rounding (CPU: F16
	 * weights on AMX-BF16 tiles where the CPU and the kernel allow, else
	 * exactly as load_weight), so results may differ from load_weight's in
	 * low bits.  The numerics contract still holds: a row's outputs depend
	 * only on that row (batch invariance), and out->data keeps the rows as
	 * load_weight keeps them.  Optional: NULL means load_weight.
	 */
	int			(*load_weight_encoder) (llm_backend *b, const llm_weight *host, llm_weight *out);
} llm_backend_ops;


/* copy_blocks' groups. */
enum
{
	LLM_KV_GROUP_GLOBAL = 0,	/* layers whose KV lives in the n_blocks arrays */
	LLM_KV_GROUP_LOCAL = 1		/* llm_kv_geometry.layer_local's layers (n_blocks_local) */
};

/* rope_store_kv_mode's rotations (the values of ggml's rope mode). */
enum
{
	LLM_ROPE_NONE = -1,			/* no rotation (rope_store_kv_opts; layers without RoPE) */
	LLM_ROPE_NORMAL = 0,		/* adjacent pairs (llama) */
	LLM_ROPE_NEOX = 2			/* halves (GPT-NeoX, Gemma, Qwen) */
};

struct llm_backend
{
	const llm_backend_ops *ops;
	int			n_threads;
};

/* CPU backend (kernels/cpu); n_threads <= 0 means all online CPUs.  NULL + err on failure. */
llm_backend *llm_backend_cpu_create(int n_threads, char *err, size_t errlen);

/*
 * As llm_backend_cpu_create, but its compute threads are the process's
 * shared pool of that many threads (kernels/cpu/threadpool.h): every
 * backend created this way must be driven by the same one thread, one op
 * at a time (several engines stepped in turn).
 */
llm_backend *llm_backend_cpu_create_shared(int n_threads, char *err, size_t errlen);

/*
 * Bytes of KV cache one block takes across all layers (K and V, of
 * g->kv_dtype), whatever their group; 0 for an invalid geometry.  The same
 * for every backend (kernels/backend.c): the engine sizes its cache with it
 * before and whatever backend it opens.
 */
size_t		llm_kv_block_bytes(const llm_kv_geometry *g);

#endif
