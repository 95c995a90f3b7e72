/*
 * model.h — a decoder-only transformer over the compute backend: loaded from
 * a GGUF file, run one forward step at a time.
 *
 * The architecture is the file's general.architecture; each supported one is
 * a table (hyper-parameters, tensors, graph options) in a file
 * arch_<arch>.c, read by one loader and run by one graph builder
 * (model_arch.h is that seam).  Supported: llama, gemma3, qwen2, qwen3, phi3, gemma2, granite,
 * smollm3.  An unknown architecture fails to load with an
 * error naming it and the supported ones.
 *
 * The forward pass takes a flat batch of tokens from many sequences
 * (llm_step_desc) with their positions, KV slots and block tables, and
 * returns logits for the requested rows (any rows, several per sequence
 * allowed).  What the backend computes for a row depends only on that row's
 * token, position and its sequence's KV contents (backend.h batch
 * invariance), so a row's logits are the same in any batch or chunking.
 */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stdint.h>
#include <stddef.h>
#include "engine/gguf/gguf.h"
#include "kernels/backend.h"

/* What may differ from one layer to the next (filled by the architecture). */
typedef struct llm_layer_config
{
	/*
	 * Keys a query attends to: the attn_window most recent positions, its
	 * own included (a sliding-window layer); 0 = every earlier position (a
	 * global layer).  Passed to the backend's attention op as its window.
	 */
	int32_t		attn_window;
	float		rope_theta;		/* RoPE base frequency of this layer */
	/* RoPE rotation of this layer: LLM_ROPE_NORMAL, LLM_ROPE_NEOX (backend.h) or -1 = none */
	int32_t		rope_mode;
} llm_layer_config;

typedef struct llm_model_config
{
	char		arch[32];		/* general.architecture */
	char		name[128];		/* general.name (may be empty) */
	int32_t		n_layers;
	int32_t		dim;			/* embedding length */
	int32_t		n_heads;
	int32_t		n_kv_heads;		/* divides n_heads (GQA group = n_heads / n_kv_heads) */
	int32_t		head_dim;		/* of queries, keys and values; even */
	int32_t		ffn_dim;
	int32_t		n_vocab;
	int32_t		n_ctx_train;	/* context length the model was trained for */
	float		rope_theta;		/* the file's RoPE base (layer[l].rope_theta may differ) */
	float		rms_eps;
	int			tied_output;	/* output projection = token embedding */
	uint32_t	weight_type;	/* llm_type of attn_q of layer 0, for model info */
	float		attn_scale;		/* factor of the attention scores q.k (llama: 1/sqrt(head_dim)) */
	/* [n_layers]; owned by the model, valid until llm_model_free */
	const llm_layer_config *layer;
	/*
	 * Final logit soft-capping: logits = cap * tanh(logits / cap) after the
	 * output projection (model.c); 0 = none.
	 */
	float		final_logit_softcap;
	/* Logit scale: logits * (1 / logit_scale) after the output projection, before the soft-cap; 0 = none. */
	float		logit_scale;
	/*
	 * Embeddings.  pooling_type: the pooling the file declares
	 * (<arch>.pooling_type, llama.cpp's values LLM_MODEL_POOLING_*), or -1
	 * when it declares none.  embed_max_tokens: the input limit the model
	 * is used with for embeddings (<arch>.embedding.max_seq_length, written
	 * by tools/convert_bert_gguf.py from sentence-transformers'
	 * max_seq_length; may be below n_ctx_train), 0 when the file has none.
	 * no_output: the model has no output projection (an embedding model):
	 * a step may ask it for HIDDEN rows only.  whole_sequences: its graph
	 * attends within the step only (model_graph.c's step-local path), so a
	 * sequence must be computed in one step, from its first token.
	 */
	int32_t		pooling_type;
	int32_t		embed_max_tokens;
	int			no_output;
	int			whole_sequences;
} llm_model_config;

/* llm_model_config.pooling_type: the values of llama.cpp's <arch>.pooling_type. */
enum
{
	LLM_MODEL_POOLING_NONE = 0,
	LLM_MODEL_POOLING_MEAN = 1,
	LLM_MODEL_POOLING_CLS = 2,
	LLM_MODEL_POOLING_LAST = 3
};

typedef struct llm_model llm_model;

/*
 * Read the config and load every tensor through the backend; NULL + err on
 * failure (a bad or unsupported file, or a backend that rejects a weight).
 */
llm_model  *llm_model_load(const gguf_file *f, llm_backend *b, char *err, size_t errlen);
/*
 * llm_model_load, and with encoder_fast an encoder's (graph bidirectional)
 * layer matrices go through the backend's load_weight_encoder: its faster
 * arithmetic, not llama.cpp's bits (backend.h; llm.encoder_arithmetic
 * 'auto').  A decoder, or encoder_fast false, loads as llm_model_load.
 */
llm_model  *llm_model_load_opts(const gguf_file *f, llm_backend *b, bool encoder_fast, char *err, size_t errlen);
/*
 * llm_model_load without the tensors: the architecture known and the
 * hyper-parameters read and checked (llm_model_get_config), no weight
 * allocated on the backend; for checking a configuration before loading
 * it.  Free with llm_model_free; never forward it.
 */
llm_model  *llm_model_read(const gguf_file *f, llm_backend *b, char *err, size_t errlen);
void		llm_model_free(llm_model *m);

/*
 * The longest context a sequence will have (the engine's n_ctx): a model
 * with LongRoPE factors (rope_factors_long / _short) uses the long ones
 * when it exceeds the file's rope.scaling.original_context_length (as
 * llama.cpp's n_ctx_seq > n_ctx_orig_yarn), else the short ones (the
 * default after load).  No effect on other models.
 */
void		llm_model_set_context(llm_model *m, int n_ctx);
const llm_model_config *llm_model_get_config(const llm_model *m);

/*
 * Run one forward step described by d (positions, slots and block tables
 * already valid for the backend's KV cache).  Writes d->n_out rows of
 * n_vocab fp32 logits to logits (host memory, [n_out][n_vocab]): row j is
 * that of token row d->out_rows[j].  Returns 0, or -1 with err (empty step,
 * out of memory, backend failure).  llm_model_forward_out with every row
 * of kind LLM_OUT_LOGITS.
 */
int			llm_model_forward(llm_model *m, const llm_step_desc *d, float *logits,
							  char *err, size_t errlen);

/*
 * What an output row of a step returns: its logits (n_vocab floats, after
 * the output projection and the soft-cap), or the final hidden state of its
 * token (dim floats: the residual stream after the final norm, the input of
 * the output projection) for an embedding.
 */
typedef enum llm_out_kind
{
	LLM_OUT_LOGITS = 0,
	LLM_OUT_HIDDEN = 1
} llm_out_kind;

/*
 * Where a step's output rows go, by kind.  kind: [d->n_out] an llm_out_kind
 * per output row, or NULL for every row LOGITS.  The LOGITS rows, in
 * out_rows order, fill logits [n_logits][n_vocab]; the HIDDEN rows, in
 * out_rows order, fill hidden [n_hidden][dim] (host memory; either may be
 * NULL when its count is 0).  A row's values depend only on its token row
 * (batch invariance), never on the kinds of the other rows: a LOGITS row is
 * bit-identical to what llm_model_forward gives for it, a HIDDEN row to the
 * same row's hidden state in any other step.
 */
typedef struct llm_forward_out
{
	const uint8_t *kind;
	float	   *logits;
	float	   *hidden;
} llm_forward_out;

/* llm_model_forward with per-row output kinds (llm_forward_out); 0 or -1 + err. */
int			llm_model_forward_out(llm_model *m, const llm_step_desc *d, const llm_forward_out *out,
								  char *err, size_t errlen);

/*
 * For n rows of logits that llm_model_forward just wrote to logits (host
 * memory, [n][n_vocab]): finite[j] = every element of row j finite (as
 * llm_logits_all_finite), argmax[j] = for a finite row its lowest index of
 * the largest logit (as llm_argmax), computed on the backend's threads
 * (backend.h scan_rows).  Returns 0, or -1 when the backend cannot scan
 * host rows (then nothing is written and the caller scans).
 */
int			llm_model_scan_logits(llm_model *m, const float *logits, int n, int32_t *argmax, uint8_t *finite);

#endif
