/*
 * model_arch.h — the seam between the architecture-neutral model code and
 * the architectures.  Internal to engine/model*.c.
 *
 * An architecture is DATA: one llm_arch (arch_<arch>.c) holding
 *  - its hyper-parameter rows (llm_hparam_spec: GGUF key suffix, type,
 *    required or optional, default), read into llm_hparams by one reader;
 *  - its tensor rows (llm_tensor_spec: name pattern, shape in terms of
 *    hyper-parameters, required / optional / refused, global or per layer),
 *    loaded into llm_model / llm_layer_weights by one loader;
 *  - its graph options (llm_graph_opts), read by the one graph builder
 *    (model_graph.c);
 *  - optionally a config hook for what no row can say (a layer pattern, a
 *    rule tied to a model size).
 * Adding an architecture: a file arch_<arch>.c with its tables, a row in
 * model.c's list, and, when its graph differs in a way no option covers, a
 * new option in llm_graph_opts implemented in model_graph.c (and the
 * backend ops it needs, backend.h).  The file's header states the source of
 * every key, tensor name and graph detail.
 *
 * Life of a model:
 *   llm_model_load: model.c reads general.architecture, finds the arch,
 *     sets cfg.arch, cfg.name and cfg.n_vocab (tokenizer tokens), then
 *     llm_model_read_hparams (model_tensors.c) reads the rows into m->hp,
 *     derives m->cfg and the per-layer configs (every layer global, the
 *     file's RoPE base, the arch's RoPE mode) and calls the arch's config
 *     hook; model.c checks what every config must satisfy (check_config);
 *     llm_model_load_tensors loads every row through the backend and
 *     llm_graph_check (model_graph.c) refuses a graph the backend lacks ops
 *     for.  Activation buffers are sized at the first forward step.
 *   llm_model_forward: model.c makes sure the activation buffers hold the
 *     step, calls begin_step, then llm_graph_forward, which leaves the final
 *     normed hidden state of every token row in m->act.h [n_tokens][dim];
 *     model.c gathers the out_rows, applies the output projection and
 *     downloads the logits.
 *   llm_model_free: llm_model_free_tensors (every row, however far the load
 *     got), then model.c frees the buffers and configs.
 *
 * Errors: the readers and loaders write err and return -1; a graph-level
 * refusal of a step (llm_graph_check_step) writes err before begin_step;
 * llm_graph_forward returns -1 on a backend failure (model.c reports the
 * backend's last_error).  Nothing aborts.
 */
#ifndef LLM_MODEL_ARCH_H
#define LLM_MODEL_ARCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "kernels/backend.h"
#include "engine/gguf/gguf.h"
#include "model.h"

/*
 * Activation buffers in backend memory, one row per token (cap_tokens rows)
 * or per output row (cap_out rows); q_dim = n_heads * head_dim, kv_dim =
 * n_kv_heads * head_dim.  Contents do not survive a step.
 */
typedef struct llm_activations
{
	float	   *x;				/* [T][dim] residual stream */
	float	   *h;				/* [T][dim] normed input of a block; final normed state */
	float	   *q;				/* [T][q_dim] */
	float	   *k;				/* [T][kv_dim] */
	float	   *v;				/* [T][kv_dim] */
	float	   *attn;			/* [T][q_dim] attention output */
	float	   *tmp;			/* [T][dim] block output before the residual add */
	float	   *gate;			/* [T][ffn_dim] */
	float	   *up;				/* [T][ffn_dim] */
	float	   *out_h;			/* [cap_out][dim] gathered rows */
	float	   *logits;			/* [cap_out][n_vocab]; NULL with host buffers (backend.h) */
	int			cap_tokens;
	int			cap_out;
} llm_activations;

/*
 * Every hyper-parameter any architecture reads (llm_hparam_spec.field names
 * one).  An optional integer left 0 by its row is derived
 * (llm_model_read_hparams): n_kv_heads = n_heads, key_length = dim /
 * n_heads (dim must divide), value_length = rope_dims = key_length.
 */
typedef struct llm_hparams
{
	int32_t		n_layers;		/* block_count */
	int32_t		dim;			/* embedding_length */
	int32_t		n_heads;		/* attention.head_count */
	int32_t		n_kv_heads;		/* attention.head_count_kv */
	int32_t		ffn_dim;		/* feed_forward_length */
	int32_t		n_ctx_train;	/* context_length */
	int32_t		key_length;		/* attention.key_length: head_dim */
	int32_t		value_length;	/* attention.value_length: must equal key_length */
	int32_t		rope_dims;		/* rope.dimension_count: rotated dims of a head (even) */
	int32_t		sliding_window; /* attention.sliding_window: 0 = none */
	float		rope_theta;		/* rope.freq_base */
	float		rope_theta_swa; /* rope.freq_base_swa: sliding-window layers' base */
	float		norm_eps;		/* the RMS or LayerNorm epsilon */
	float		final_logit_softcap;	/* 0 = none */
	float		attn_logit_softcap;		/* 0 = none */
	int32_t		rope_scaling;	/* rope.scaling.type: llm_rope_scaling (LLM_HP_ROPE_SCALING) */
	float		rope_scale_factor;	/* rope.scaling.factor: linear scaling divides angles by it; 0 = 1 */
	float		rope_attn_factor;	/* rope.scaling.attn_factor: cos/sin factor (LongRoPE); 0 = 1 */
	int32_t		rope_orig_ctx;	/* rope.scaling.original_context_length: 0 = context_length */
	float		embedding_scale;	/* embedding_scale: x = embed * s; 0 = none */
	float		residual_scale; /* residual_scale: each block's output * s before the add; 0 = none */
	float		attention_scale;	/* attention.scale: the scores' factor; 0 = 1/sqrt(head_dim) */
	float		logit_scale;	/* logit_scale: logits * (1 / s); 0 = none */
	int32_t		n_token_types;	/* tokenizer.ggml.token_type_count (BERT; set by its config hook) */
} llm_hparams;

/* rope.scaling.type values (llm_hparams.rope_scaling): absent is NONE. */
typedef enum llm_rope_scaling
{
	LLM_ROPE_SCALING_NONE = 0,	/* "none" */
	LLM_ROPE_SCALING_LINEAR = 1,	/* "linear": angles * (1 / rope.scaling.factor) */
	LLM_ROPE_SCALING_LONGROPE = 2	/* "longrope": rope_factors_short / _long, attn_factor */
} llm_rope_scaling;

/* llm_hparam_spec.type */
typedef enum llm_hparam_type
{
	LLM_HP_INT,					/* integer in 1..2^24 into an int32_t field */
	LLM_HP_INT0,				/* integer in 0..2^24 into an int32_t field */
	LLM_HP_FLOAT,				/* number into a float field */
	LLM_HP_STR_NONE,			/* string that must be absent or "none" (no field) */
	LLM_HP_ROPE_SCALING			/* rope.scaling.type: one of the comma list in what, into an int32_t
								 * field as llm_rope_scaling; absent: def */
} llm_hparam_type;

/*
 * One hyper-parameter row: GGUF key "<arch>.<key>".  Absent: an error when
 * required, else the field = def (the derived integers above: def 0).
 * Present but not of the type, or out of range: an error.  LLM_HP_STR_NONE:
 * a value other than "none" is refused as "GGUF metadata <key>: <what>
 * \"value\" is not supported"; LLM_HP_ROPE_SCALING likewise, with the
 * accepted list.
 */
typedef struct llm_hparam_spec
{
	const char *key;
	llm_hparam_type type;
	bool		required;
	size_t		field;			/* offsetof(llm_hparams, ...); unused for LLM_HP_STR_NONE */
	float		def;
	const char *what;			/* LLM_HP_STR_NONE: the feature named in the refusal */
} llm_hparam_spec;

/* The weights of one layer; an optional row that is absent stays NULL / zero. */
typedef struct llm_layer_weights
{
	float	   *attn_norm;		/* [dim] */
	float	   *attn_norm_b;	/* [dim] LayerNorm bias */
	float	   *q_norm;			/* [head_dim] per-head RMSNorm of q */
	float	   *k_norm;			/* [head_dim] per-head RMSNorm of k */
	float	   *post_attn_norm; /* [dim] RMSNorm of the attention block's output */
	float	   *ffn_norm;		/* [dim] */
	float	   *ffn_norm_b;		/* [dim] LayerNorm bias */
	float	   *post_ffw_norm;	/* [dim] RMSNorm of the FFN block's output */
	float	   *bq;				/* [q_dim] bias of Wq h (add_broadcast) */
	float	   *bk;				/* [kv_dim] */
	float	   *bv;				/* [kv_dim] */
	float	   *bo;				/* [dim] bias of the attention output projection */
	llm_weight	wq, wk, wv, wo;
	llm_weight	w_gate, w_up, w_down;
	/* FFN biases, added after their matmul when loaded (add_broadcast) */
	float	   *b_up;			/* [ffn_dim] */
	float	   *b_down;			/* [dim] */
	/* the post-norm block's LayerNorms (graph post_norm) */
	float	   *attn_out_norm;	/* [dim] after the attention's residual add */
	float	   *attn_out_norm_b;
	float	   *layer_out_norm; /* [dim] after the FFN's residual add */
	float	   *layer_out_norm_b;
} llm_layer_weights;

/* A tensor dimension in terms of the config (llm_tensor_spec.ne). */
typedef enum llm_tensor_dim
{
	LLM_D_DIM,					/* dim */
	LLM_D_Q,					/* n_heads * head_dim */
	LLM_D_KV,					/* n_kv_heads * head_dim */
	LLM_D_FFN,					/* ffn_dim */
	LLM_D_HEAD,					/* head_dim */
	LLM_D_VOCAB,				/* n_vocab */
	LLM_D_ROPE_HALF,			/* rope_dims / 2 */
	LLM_D_ONE,					/* 1 (second dimension of a vector) */
	LLM_D_CTX_TRAIN,			/* n_ctx_train: rows of an absolute position table */
	LLM_D_TOKEN_TYPES			/* hp.n_token_types: rows of the token type table */
} llm_tensor_dim;

/* llm_tensor_spec.need */
typedef enum llm_tensor_need
{
	LLM_T_REQUIRED,				/* missing: "tensor X missing from GGUF file" */
	LLM_T_OPTIONAL,				/* missing: the field stays NULL / zero */
	LLM_T_TIED,					/* missing: the field is the token embedding (a row after token_embd) */
	LLM_T_REFUSED				/* present: "tensor X is not supported by the <arch> graph" */
} llm_tensor_need;

/*
 * One tensor row.  A name with "%d" is per layer (blk.%d.attn_q.weight,
 * field an offset into llm_layer_weights), otherwise global (field an
 * offset into llm_model).  A matrix (vector false) of GGUF shape [ne[0],
 * ne[1]] goes through load_weight into an llm_weight; a vector (ne[1]
 * LLM_D_ONE) must be F32 and goes through load_vector into a float *.
 * Rows load in table order, global rows before the layers, each layer's
 * rows in turn; refused rows of a layer are checked before its loads.
 */
typedef struct llm_tensor_spec
{
	const char *name;
	llm_tensor_need need;
	bool		vector;
	llm_tensor_dim ne[2];
	size_t		field;
	/*
	 * A fused matrix (n_parts 2 or 3; 0 otherwise): ne[1] is unused, the
	 * GGUF shape is [ne[0], sum of parts[i]] and its rows are cut, in
	 * order, into n_parts weights at part_field[i] (each loaded on its own
	 * by load_weight from the rows it holds: a row's dot product does not
	 * depend on the rows beside it, so the results are those of the fused
	 * matmul's views).  field is unused.
	 */
	int			n_parts;
	llm_tensor_dim parts[3];
	size_t		part_field[3];
} llm_tensor_spec;

/* llm_graph_opts.norm */
typedef enum llm_norm_kind
{
	LLM_NORM_RMS,				/* x * rsqrt(mean(x^2) + eps) * w (backend rmsnorm) */
	LLM_NORM_LAYER				/* (x - mean) / sqrt(var + eps) * w + b (backend layernorm) */
} llm_norm_kind;

/* llm_graph_opts.ffn_act: the gated FFN's activation of the gate. */
typedef enum llm_ffn_act
{
	LLM_ACT_SILU,				/* SwiGLU (backend silu_mul) */
	LLM_ACT_GELU,				/* GeGLU, tanh GELU (backend gelu_mul) */
	LLM_ACT_GELU_ERF			/* plain FFN only: exact erf GELU (backend gelu_erf) */
} llm_ffn_act;

/* A layer's RoPE (llm_layer_config.rope_mode): backend.h's modes, LLM_ROPE_NONE included. */

/*
 * The graph options an architecture sets (model_graph.c reads them).  Zero
 * is the llama graph: RMSNorm, SwiGLU, normal RoPE on the whole head,
 * causal attention with the scale in the softmax, no embedding scale.
 * Per-layer values (window, RoPE base and mode) live in llm_layer_config;
 * the optional norm tensors (q/k norms, post norms, LayerNorm biases) are
 * applied when their rows loaded them.
 */
typedef struct llm_graph_opts
{
	llm_norm_kind norm;
	llm_ffn_act ffn_act;
	int			rope_mode;		/* every layer's initial mode: LLM_ROPE_NORMAL, _NEOX or LLM_ROPE_NONE */
	bool		partial_rotary; /* rope.dimension_count below key_length accepted */
	bool		bidirectional;	/* every query sees every key of its sequence (encoders) */
	bool		embed_scale;	/* x = embed(tokens) * sqrt(dim) */
	bool		q_prescale;		/* q *= attn_scale before attention, softmax scale 1 */
	/*
	 * The post-norm encoder block (BERT): x = Norm(embed [+ token type row
	 * 0] [+ position row]) * token_embd_norm + b, then per layer x =
	 * Norm(x + attention) * attn_out_norm + b, x = Norm(x + FFN) *
	 * layer_out_norm + b, with a plain FFN Wdown act(Wup x + b_up) + b_down
	 * (no gate) and the projection biases; the last layer's x is the final
	 * hidden state (no output norm).  LayerNorm only; no RoPE
	 * (rope_mode LLM_ROPE_NONE).
	 */
	bool		post_norm;
	bool		no_output;		/* no output projection: hidden rows only (an embedding model) */
} llm_graph_opts;

typedef struct llm_arch
{
	const char *name;			/* general.architecture value */
	const llm_hparam_spec *hparams;
	int			n_hparams;
	const llm_tensor_spec *tensors;
	int			n_tensors;
	llm_graph_opts graph;
	/*
	 * Optional: after the rows are read and m->cfg / m->layer_cfg derived
	 * (model_tensors.c), the architecture's own rules; 0 or -1 + err.
	 */
	int			(*config) (llm_model *m, const gguf_file *f, char *err, size_t errlen);
} llm_arch;

struct llm_model
{
	llm_model_config cfg;		/* cfg.layer == layer_cfg */
	llm_layer_config *layer_cfg;	/* [cfg.n_layers] */
	llm_hparams hp;				/* the file's values as read */
	const llm_arch *arch;
	llm_backend *b;
	/* global tensors (llm_tensor_spec rows without "%d") */
	llm_weight	tok_embd;
	llm_weight	output;			/* == tok_embd contents when cfg.tied_output (loaded once) */
	float	   *output_norm;	/* [dim] */
	float	   *output_norm_b;	/* [dim] LayerNorm bias, or NULL */
	float	   *rope_freqs;		/* [rope_dims / 2] RoPE frequency divisors (rope_freqs.weight), or NULL */
	float	   *rope_long;		/* [rope_dims / 2] LongRoPE factors past the original context, or NULL */
	float	   *rope_short;		/* [rope_dims / 2] LongRoPE factors within it, or NULL */
	/*
	 * The divisors the graph uses: rope_freqs, else rope_long when the
	 * engine's context exceeds the original one (llm_model_set_context),
	 * else rope_short; NULL: none.
	 */
	const float *rope_ff;
	/* the encoder's input rows (graph post_norm) */
	llm_weight	pos_embd;		/* [dim, n_ctx_train] absolute position embeddings (F32) */
	llm_weight	type_embd;		/* [dim, n_token_types] token type embeddings; row 0 used */
	float	   *tok_norm;		/* [dim] LayerNorm of the summed input embeddings */
	float	   *tok_norm_b;		/* [dim] */
	llm_layer_weights *layers;	/* [cfg.n_layers]; NULL until the loader allocates it */
	bool		encoder_fast;	/* an encoder's layer matrices through load_weight_encoder (llm_model_load_opts) */
	llm_activations act;
};

/* The architectures (one per arch_<arch>.c); model.c's list names them. */
extern const llm_arch llm_arch_llama;
extern const llm_arch llm_arch_gemma3;
extern const llm_arch llm_arch_qwen2;
extern const llm_arch llm_arch_qwen3;
extern const llm_arch llm_arch_phi3;
extern const llm_arch llm_arch_gemma2;
extern const llm_arch llm_arch_granite;
extern const llm_arch llm_arch_smollm3;

/*
 * Gemma's sliding-window layers (arch_gemma3.c): from the file's
 * attention.sliding_window_pattern (an array or a period) or the period
 * default_period, local layers get attention.sliding_window keys and the
 * base theta_swa, the others the file's base; window 0: every layer global.
 */
int			llm_arch_swa_layers(llm_model *m, const gguf_file *f, int default_period, float theta_swa,
								char *err, size_t errlen);
extern const llm_arch llm_arch_bert;

#define LLM_ARRAY_LEN(a) ((int) (sizeof(a) / sizeof((a)[0])))

/* Rows of the tables, written as the architecture files write them. */
#define LLM_HP(key, type, required, field, def) \
	{(key), (type), (required), offsetof(llm_hparams, field), (def), NULL}
#define LLM_HP_NONE_ONLY(key, what) {(key), LLM_HP_STR_NONE, false, 0, 0.0f, (what)}
#define LLM_T_GLOBAL_MATRIX(name, need, ne0, ne1, field) \
	{(name), (need), false, {(ne0), (ne1)}, offsetof(llm_model, field), 0, {LLM_D_ONE, LLM_D_ONE, LLM_D_ONE}, {0, 0, 0}}
#define LLM_T_GLOBAL_VECTOR(name, need, n, field) \
	{(name), (need), true, {(n), LLM_D_ONE}, offsetof(llm_model, field), 0, {LLM_D_ONE, LLM_D_ONE, LLM_D_ONE}, {0, 0, 0}}
#define LLM_T_LAYER_MATRIX(name, need, ne0, ne1, field) \
	{(name), (need), false, {(ne0), (ne1)}, offsetof(llm_layer_weights, field), 0, {LLM_D_ONE, LLM_D_ONE, LLM_D_ONE}, {0, 0, 0}}
#define LLM_T_LAYER_VECTOR(name, need, n, field) \
	{(name), (need), true, {(n), LLM_D_ONE}, offsetof(llm_layer_weights, field), 0, {LLM_D_ONE, LLM_D_ONE, LLM_D_ONE}, {0, 0, 0}}
/* A refused per-layer tensor (its shape is not read). */
#define LLM_T_LAYER_REFUSED(name) {(name), LLM_T_REFUSED, true, {LLM_D_ONE, LLM_D_ONE}, 0, 0, {LLM_D_ONE, LLM_D_ONE, LLM_D_ONE}, {0, 0, 0}}
/* A refused global tensor. */
#define LLM_T_GLOBAL_REFUSED(name) {(name), LLM_T_REFUSED, true, {LLM_D_ONE, LLM_D_ONE}, 0, 0, {LLM_D_ONE, LLM_D_ONE, LLM_D_ONE}, {0, 0, 0}}
/* A fused per-layer matrix cut into two or three weights (llm_tensor_spec.n_parts). */
#define LLM_T_LAYER_FUSED2(name, need, ne0, d0, f0, d1, f1) \
	{(name), (need), false, {(ne0), LLM_D_ONE}, 0, 2, {(d0), (d1), LLM_D_ONE}, \
	 {offsetof(llm_layer_weights, f0), offsetof(llm_layer_weights, f1), 0}}
#define LLM_T_LAYER_FUSED3(name, need, ne0, d0, f0, d1, f1, d2, f2) \
	{(name), (need), false, {(ne0), LLM_D_ONE}, 0, 3, {(d0), (d1), (d2)}, \
	 {offsetof(llm_layer_weights, f0), offsetof(llm_layer_weights, f1), offsetof(llm_layer_weights, f2)}}
/*
 * rope.scaling.type accepting the comma list (names of llm_rope_scaling);
 * absent: linear, llama.cpp's default, which is no scaling unless the
 * file has rope.scaling.factor (read by a row of its own).
 */
#define LLM_HP_SCALING(key, accepted) \
	{(key), LLM_HP_ROPE_SCALING, false, offsetof(llm_hparams, rope_scaling), (float) LLM_ROPE_SCALING_LINEAR, (accepted)}

/*
 * The hyper-parameters of a llama-like decoder as llama.cpp reads them
 * (required sizes; head_count_kv, key_length, rope.dimension_count
 * derived when absent; rope.freq_base default 10000; the RMS epsilon
 * required).
 */
#define LLM_HP_DECODER_ROWS \
	LLM_HP("block_count", LLM_HP_INT, true, n_layers, 0), \
	LLM_HP("embedding_length", LLM_HP_INT, true, dim, 0), \
	LLM_HP("attention.head_count", LLM_HP_INT, true, n_heads, 0), \
	LLM_HP("feed_forward_length", LLM_HP_INT, true, ffn_dim, 0), \
	LLM_HP("context_length", LLM_HP_INT, true, n_ctx_train, 0), \
	LLM_HP("attention.head_count_kv", LLM_HP_INT, false, n_kv_heads, 0), \
	LLM_HP("attention.key_length", LLM_HP_INT, false, key_length, 0), \
	LLM_HP("attention.value_length", LLM_HP_INT, false, value_length, 0), \
	LLM_HP("rope.dimension_count", LLM_HP_INT, false, rope_dims, 0), \
	LLM_HP("rope.freq_base", LLM_HP_FLOAT, false, rope_theta, 10000.0f), \
	LLM_HP("attention.layer_norm_rms_epsilon", LLM_HP_FLOAT, true, norm_eps, 0.0f)

/* The per-layer rows of a llama-like decoder with separate Q/K/V and gate/up matrices. */
#define LLM_T_DECODER_LAYER_ROWS \
	LLM_T_LAYER_VECTOR("blk.%d.attn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, attn_norm), \
	LLM_T_LAYER_VECTOR("blk.%d.ffn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, ffn_norm), \
	LLM_T_LAYER_MATRIX("blk.%d.attn_q.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_Q, wq), \
	LLM_T_LAYER_MATRIX("blk.%d.attn_k.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_KV, wk), \
	LLM_T_LAYER_MATRIX("blk.%d.attn_v.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_KV, wv), \
	LLM_T_LAYER_MATRIX("blk.%d.attn_output.weight", LLM_T_REQUIRED, LLM_D_Q, LLM_D_DIM, wo), \
	LLM_T_LAYER_MATRIX("blk.%d.ffn_gate.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_FFN, w_gate), \
	LLM_T_LAYER_MATRIX("blk.%d.ffn_up.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_FFN, w_up), \
	LLM_T_LAYER_MATRIX("blk.%d.ffn_down.weight", LLM_T_REQUIRED, LLM_D_FFN, LLM_D_DIM, w_down)

/*
 * The Q/K/V and output bias rows llama.cpp's loader accepts for every
 * architecture built on its create_tensor_qkv (optional: absent, no add).
 */
#define LLM_T_QKV_BIAS_ROWS \
	LLM_T_LAYER_VECTOR("blk.%d.attn_q.bias", LLM_T_OPTIONAL, LLM_D_Q, bq), \
	LLM_T_LAYER_VECTOR("blk.%d.attn_k.bias", LLM_T_OPTIONAL, LLM_D_KV, bk), \
	LLM_T_LAYER_VECTOR("blk.%d.attn_v.bias", LLM_T_OPTIONAL, LLM_D_KV, bv)

/*
 * What no architecture here computes with: refused where a file has it
 * (a fused QKV bias, expert routing, output bias).
 */
#define LLM_T_UNSUPPORTED_ROWS \
	LLM_T_GLOBAL_REFUSED("output.bias"), \
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.bias"), \
	LLM_T_LAYER_REFUSED("blk.%d.ffn_gate_inp.weight"), \
	LLM_T_LAYER_REFUSED("blk.%d.ffn_gate_exps.weight"), \
	LLM_T_LAYER_REFUSED("blk.%d.ffn_up_exps.weight"), \
	LLM_T_LAYER_REFUSED("blk.%d.ffn_down_exps.weight"), \
	LLM_T_LAYER_REFUSED("blk.%d.ffn_gate.bias"), \
	LLM_T_LAYER_REFUSED("blk.%d.ffn_up.bias"), \
	LLM_T_LAYER_REFUSED("blk.%d.ffn_down.bias")

/*
 * The head every architecture has so far: token_embd [dim, n_vocab],
 * output [dim, n_vocab] (absent: tied to the embedding) and output_norm
 * [dim].
 */
#define LLM_T_HEAD_ROWS \
	LLM_T_GLOBAL_MATRIX("token_embd.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_VOCAB, tok_embd), \
	LLM_T_GLOBAL_MATRIX("output.weight", LLM_T_TIED, LLM_D_DIM, LLM_D_VOCAB, output), \
	LLM_T_GLOBAL_VECTOR("output_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, output_norm)

/*
 * llm_model_load with the given tables instead of those general.architecture
 * names (the keys are still read under general.architecture's prefix):
 * for tests that run the graph builder's options on a real file.
 */
llm_model  *llm_model_load_as(const gguf_file *f, llm_backend *b, const llm_arch *arch, char *err, size_t errlen);

/* ---- model_tensors.c: the one reader and loader of the tables ---- */

/*
 * m->arch's hyper-parameter rows into m->hp, then m->cfg (sizes, epsilon,
 * soft-caps, attention scale 1/sqrt(head_dim)) and m->layer_cfg (window 0,
 * the file's RoPE base, the arch's RoPE mode), then the arch's config
 * hook; 0 or -1 + err.
 */
int			llm_model_read_hparams(llm_model *m, const gguf_file *f, char *err, size_t errlen);

/* m->arch's tensor rows through m->b; 0 or -1 + err (what loaded is freed by llm_model_free_tensors). */
int			llm_model_load_tensors(llm_model *m, const gguf_file *f, char *err, size_t errlen);

/* Release every tensor the loader loaded (any stage of a failed load included). */
void		llm_model_free_tensors(llm_model *m);

/* Allocate m->layer_cfg for m->cfg.n_layers layers (zeroed) and point cfg.layer at it. */
int			llm_model_alloc_layers(llm_model *m, char *err, size_t errlen);

/* ---- model_graph.c: the one graph builder ---- */

/* After the load: -1 + err when the graph needs an op m->b lacks. */
int			llm_graph_check(const llm_model *m, char *err, size_t errlen);

/*
 * Before begin_step: -1 + err when the step cannot run on this graph (a
 * layer on the step-local attention path needs every sequence whole in
 * the step: no key cached before it).
 */
int			llm_graph_check_step(const llm_model *m, const llm_step_desc *d, char *err, size_t errlen);

/* True when some layer attends within the step only: every sequence must be given whole. */
bool		llm_graph_whole_sequences(const llm_model *m);

/* The step's graph after begin_step, ending with the final norm in m->act.h; 0 or -1 (backend error). */
int			llm_graph_forward(llm_model *m, const llm_step_desc *d);

/* Several weights of one input: the backend's matmul_multi, or one matmul each. */
int			llm_model_matmul_multi(llm_backend *b, const llm_weight *const *w, int n_w, const float *x,
								   float *const *y, int n);

#endif
