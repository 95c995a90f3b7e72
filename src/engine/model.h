/*
 * model.h — llama-architecture transformer over the compute backend.
 *
 * Hyper-parameters and tensors come from GGUF metadata (llama.* keys,
 * blk.N.* tensors) as llama.cpp's src/llama-model.cpp reads them.  The forward
 * pass takes a flat batch of tokens from many sequences (llm_step_desc) with
 * their positions, KV slots and block tables, and returns logits for the
 * requested rows: pre-norm blocks with RMSNorm, RoPE, GQA attention over the
 * paged KV cache, SwiGLU FFN, final RMSNorm, output projection (tied to the
 * token embedding when output.weight is absent).
 */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stdint.h>
#include <stddef.h>
#include "gguf.h"
#include "backend.h"

typedef struct llm_model_config
{
	char		arch[32];		/* general.architecture */
	char		name[128];		/* general.name (may be empty) */
	int32_t		n_layers;
	int32_t		dim;			/* embedding length */
	int32_t		n_heads;
	int32_t		n_kv_heads;
	int32_t		head_dim;
	int32_t		ffn_dim;
	int32_t		n_vocab;
	int32_t		n_ctx_train;	/* context length the model was trained for */
	float		rope_theta;
	float		rms_eps;
	int			tied_output;	/* output projection = token embedding */
	uint32_t	weight_type;	/* llm_type of attn_q of layer 0, for model info */
} llm_model_config;

typedef struct llm_model llm_model;

/* Read the config and load every tensor through the backend; NULL + err on failure. */
llm_model  *llm_model_load(const gguf_file *f, llm_backend *b, char *err, size_t errlen);
void		llm_model_free(llm_model *m);
const llm_model_config *llm_model_get_config(const llm_model *m);

/*
 * Run one forward step described by d (positions, slots and block tables
 * already valid for the backend's KV cache).  Writes d->n_out rows of
 * n_vocab fp32 logits to logits (host memory, [n_out][n_vocab]).  Returns 0,
 * or -1 with err (backend failure).
 */
int			llm_model_forward(llm_model *m, const llm_step_desc *d, float *logits,
							  char *err, size_t errlen);

#endif
