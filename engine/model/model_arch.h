/*
 * model_arch.h — the seam between the architecture-neutral model code
 * (model.c: GGUF helpers, activation buffers, load/free, the forward driver,
 * the architecture table) and one file per architecture (model_<arch>.c).
 * Internal to engine/model*.c.
 *
 * Adding an architecture: a file model_<arch>.c defining one llm_arch
 * (declared at the end of this header), a row in model.c's table, and
 * whatever backend ops its graph needs (backend.h).  The header of that file states the source of every detail:
 * the GGUF keys and tensor names it reads and the reference graph it
 * reproduces.
 *
 * Life of a model:
 *   llm_model_load: model.c reads general.architecture, finds the table
 *     row, sets cfg.arch, cfg.name and cfg.n_vocab (tokenizer tokens), then
 *     calls read_config (hyper-parameters into m->cfg, per-layer values
 *     into m->layer_cfg after llm_model_alloc_layers), checks what every
 *     architecture must satisfy (model.c check_config: positive sizes,
 *     n_kv_heads dividing n_heads, even head_dim, windows >= 0, positive
 *     RoPE bases, epsilon and scale), then calls load (tensors through m->b
 *     into m->arch_state, the shared head via llm_model_load_head).
 *     Activation buffers are sized at the first forward step.
 *   llm_model_forward: model.c makes sure the activation buffers hold the
 *     step, calls begin_step, then forward, which must leave the final
 *     normed hidden state of every token row in m->act.h [n_tokens][dim];
 *     model.c gathers the out_rows, applies the output projection and
 *     downloads the logits (a backend with host buffers writes them into
 *     the caller's array).
 *   llm_model_free: free_state (also after a failed load, with whatever
 *     was loaded), then model.c frees the head, buffers and configs.
 *
 * Errors: read_config and load write err and return -1; forward returns -1
 * on a backend failure (model.c reports the backend's last_error).  Nothing
 * aborts.
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

typedef struct llm_arch llm_arch;

struct llm_model
{
	llm_model_config cfg;		/* cfg.layer == layer_cfg */
	llm_layer_config *layer_cfg;	/* [cfg.n_layers] */
	const llm_arch *arch;
	llm_backend *b;
	/* the head every architecture has: token embedding, final norm, output projection */
	llm_weight	tok_embd;
	llm_weight	output;			/* == tok_embd contents when cfg.tied_output (loaded once) */
	float	   *output_norm;	/* [dim] */
	llm_activations act;
	void	   *arch_state;		/* the architecture's tensors; NULL until load allocates it */
};

struct llm_arch
{
	const char *name;			/* general.architecture value */
	/* Hyper-parameters from GGUF into m->cfg and m->layer_cfg; 0 or -1 + err. */
	int			(*read_config) (llm_model *m, const gguf_file *f, char *err, size_t errlen);
	/* Tensors through m->b into m->arch_state (and llm_model_load_head); 0 or -1 + err. */
	int			(*load) (llm_model *m, const gguf_file *f, char *err, size_t errlen);
	/* The step's graph after begin_step, ending with the final norm in m->act.h; 0 or -1. */
	int			(*forward) (llm_model *m, const llm_step_desc *d);
	/* Release m->arch_state, however far load got (NULL included). */
	void		(*free_state) (llm_model *m);
};

/* The architectures (one per model_<arch>.c); model.c's table lists them. */
extern const llm_arch llm_arch_llama;
extern const llm_arch llm_arch_gemma3;

/* ---- helpers for the architecture files (model.c) ---- */

/*
 * Integer metadata "<arch>.<suffix>" in 1..2^24 into *out.  Absent: -1 +
 * err when required, else 0 with *out unchanged.  Present but not an
 * integer in range: -1 + err.
 */
int			llm_model_get_i32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out,
							  bool required, char *err, size_t errlen);

/* Float metadata "<arch>.<suffix>" into *out; false (out unchanged) if absent or not a number. */
bool		llm_model_get_f32(const gguf_file *f, const char *arch, const char *suffix, float *out);

/* Allocate m->layer_cfg for m->cfg.n_layers layers (zeroed) and point cfg.layer at it. */
int			llm_model_alloc_layers(llm_model *m, char *err, size_t errlen);

/*
 * Tensor `name` of shape [n_cols, n_rows] (GGUF ne[0] = n_cols) loaded
 * through the backend into *out; -1 + err if missing, misshapen or refused.
 */
int			llm_model_load_matrix(llm_model *m, const gguf_file *f, const char *name, int64_t n_cols,
								  int64_t n_rows, llm_weight *out, char *err, size_t errlen);

/* F32 vector `name` of n elements as a backend vector; NULL + err on failure. */
float	   *llm_model_load_vector(llm_model *m, const gguf_file *f, const char *name, int64_t n,
								  char *err, size_t errlen);

/*
 * token_embd.weight [dim, n_vocab], output.weight [dim, n_vocab] (absent:
 * tied to the embedding, cfg.tied_output = 1) and output_norm.weight [dim].
 */
int			llm_model_load_head(llm_model *m, const gguf_file *f, char *err, size_t errlen);

/* Release a weight / vector loaded by the helpers above (NULL data / pointer: nothing). */
void		llm_model_free_weight(llm_model *m, llm_weight *w);
void		llm_model_free_vector(llm_model *m, float **v);

/* Several weights of one input: the backend's matmul_multi, or one matmul each. */
int			llm_model_matmul_multi(llm_backend *b, const llm_weight *const *w, int n_w, const float *x,
								   float *const *y, int n);

#endif
