/*
 * arch_gemma3.c — the Gemma 3 architecture (general.architecture
 * "gemma3": Gemma 3 270M / 1B text models and larger ones' text stacks):
 * its tables for model_tensors.c, its graph options for model_graph.c
 * (RMSNorm, GeGLU, NEOX RoPE, embedding scale, q pre-scaled; the q/k and
 * post norms are rows) and a config hook for the sliding-window pattern
 * and the attention-scale rule.
 *
 * Reference: llama.cpp's LLM_ARCH_GEMMA3 (llama-cpp-python 0.3.36's
 * vendored llama.cpp: src/models/gemma3.cpp for the hyper-parameters,
 * tensors and graph; llama-hparams.cpp for the sliding-window pattern;
 * llama-model.cpp for the per-layer RoPE base).
 *
 * Hyper-parameters (GGUF keys "gemma3.*", read as llama.cpp reads them):
 *  - block_count, embedding_length, attention.head_count,
 *    feed_forward_length, context_length, attention.layer_norm_rms_epsilon:
 *    required;
 *  - attention.head_count_kv: default head_count;
 *  - attention.key_length: default embedding_length / head_count;
 *    attention.value_length and rope.dimension_count: default key_length and
 *    must equal it (one head size for Q, K and V; RoPE on the whole head);
 *  - rope.freq_base: the global layers' base, default 10000;
 *  - attention.sliding_window: the local layers' window in keys (the
 *    query's own included: a query at p sees p - window + 1 .. p, llama.cpp's
 *    LLAMA_SWA_TYPE_STANDARD); absent or 0: every layer global;
 *  - attention.sliding_window_pattern: a per-layer array (true = local) or
 *    a period n (layer l local iff l % n < n - 1; n = 0: all local);
 *    absent: llama.cpp's HARD-CODED period 6 (5 local : 1 global);
 *  - rope.freq_base_swa: the local layers' base; absent: llama.cpp's
 *    HARD-CODED 10000 (hparams.rope_freq_base_train_swa's default);
 *  - final_logit_softcapping: default 0 (none); when positive, model.c caps
 *    the logits;
 *  - the attention scale is not read from the file: llama.cpp HARD-CODES
 *    1/sqrt(key_length), or 1/sqrt(embedding_length / head_count) for the
 *    62-layer model (Gemma 3 27B), after gemma_pytorch's config;
 *  - the embedding scale sqrt(embedding_length) is HARD-CODED in the graph.
 *  Refused: rope.scaling.type other than "none" (Gemma 3 4B and larger use
 *  linear scaling on their global layers; the backend has no frequency
 *  scale), a fused blk.N.attn_qkv and Q/K/V/output biases (llama.cpp's
 *  loader would take them; Gemma files have none).
 *
 * Tensors: token_embd, output_norm, output (absent, as in the Gemma files:
 * tied to the embedding) and per layer blk.N.{attn_norm, attn_q, attn_k,
 * attn_v, attn_q_norm, attn_k_norm, attn_output, post_attention_norm,
 * ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm}.weight (llama.cpp's
 * LLM_TENSOR_* names for LLM_ARCH_GEMMA3).  The GGUF converter stores every
 * RMSNorm weight as 1 + w (Gemma's norm multiplies by 1 + w): the stored
 * vector is the multiplier and is used as is, as llama.cpp does.
 *
 * Graph (llama.cpp's gemma3 graph, same operations in the same order,
 * which is model_graph.c's builder with these options and rows):
 *   x = embed(tokens) * sqrt(dim)                      (ggml_scale)
 *   per layer l:
 *     h = RMSNorm(x) * attn_norm
 *     q, k, v = Wq h, Wk h, Wv h
 *     q = RMSNorm_head(q) * attn_q_norm, k = RMSNorm_head(k) * attn_k_norm
 *       (over each head's head_dim values)
 *     RoPE NEOX mode (halves) on q, k with the layer's base; k, v to the cache
 *     q = q * attn_scale                               (ggml_scale; softmax scale 1)
 *     a = Wo attention(q, window of the layer: local or all keys)
 *     x = x + RMSNorm(a) * post_attention_norm
 *     h = RMSNorm(x) * ffn_norm
 *     f = Wdown (gelu_tanh(Wgate h) * Wup h)           (GeGLU, ggml's fp16 table)
 *     x = x + RMSNorm(f) * post_ffw_norm
 *   final: h = RMSNorm(x) * output_norm (model.c: output projection, soft-cap)
 * Every RMSNorm is ggml's (backend.h rmsnorm).  The residual add and the
 * next norm are fused (add_rmsnorm), which changes no value.
 */
#include "model_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* llama.cpp's defaults where the file says nothing (see the header). */
#define GEMMA3_SWA_PERIOD		6
#define GEMMA3_ROPE_BASE_SWA	10000.0f
#define GEMMA3_27B_LAYERS		62

static const llm_hparam_spec gemma3_hparams[] = {
	LLM_HP("block_count", LLM_HP_INT, true, n_layers, 0),
	LLM_HP("embedding_length", LLM_HP_INT, true, dim, 0),
	LLM_HP("attention.head_count", LLM_HP_INT, true, n_heads, 0),
	LLM_HP("feed_forward_length", LLM_HP_INT, true, ffn_dim, 0),
	LLM_HP("context_length", LLM_HP_INT, true, n_ctx_train, 0),
	LLM_HP("attention.layer_norm_rms_epsilon", LLM_HP_FLOAT, true, norm_eps, 0.0f),
	LLM_HP("attention.head_count_kv", LLM_HP_INT, false, n_kv_heads, 0),
	LLM_HP("attention.key_length", LLM_HP_INT, false, key_length, 0),
	LLM_HP("attention.value_length", LLM_HP_INT, false, value_length, 0),
	LLM_HP("rope.dimension_count", LLM_HP_INT, false, rope_dims, 0),
	LLM_HP("rope.freq_base", LLM_HP_FLOAT, false, rope_theta, 10000.0f),
	LLM_HP("rope.freq_base_swa", LLM_HP_FLOAT, false, rope_theta_swa, GEMMA3_ROPE_BASE_SWA),
	LLM_HP_NONE_ONLY("rope.scaling.type", "RoPE scaling"),
	LLM_HP("final_logit_softcapping", LLM_HP_FLOAT, false, final_logit_softcap, 0.0f),
	LLM_HP("attention.sliding_window", LLM_HP_INT0, false, sliding_window, 0),
};

static const llm_tensor_spec gemma3_tensors[] = {
	LLM_T_HEAD_ROWS,
	/* tensors llama.cpp's loader would accept but this graph does not compute with */
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_q.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_k.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_v.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_output.bias"),
	LLM_T_LAYER_VECTOR("blk.%d.attn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, attn_norm),
	LLM_T_LAYER_VECTOR("blk.%d.attn_q_norm.weight", LLM_T_REQUIRED, LLM_D_HEAD, q_norm),
	LLM_T_LAYER_VECTOR("blk.%d.attn_k_norm.weight", LLM_T_REQUIRED, LLM_D_HEAD, k_norm),
	LLM_T_LAYER_VECTOR("blk.%d.post_attention_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, post_attn_norm),
	LLM_T_LAYER_VECTOR("blk.%d.ffn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, ffn_norm),
	LLM_T_LAYER_VECTOR("blk.%d.post_ffw_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, post_ffw_norm),
	LLM_T_LAYER_MATRIX("blk.%d.attn_q.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_Q, wq),
	LLM_T_LAYER_MATRIX("blk.%d.attn_k.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_KV, wk),
	LLM_T_LAYER_MATRIX("blk.%d.attn_v.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_KV, wv),
	LLM_T_LAYER_MATRIX("blk.%d.attn_output.weight", LLM_T_REQUIRED, LLM_D_Q, LLM_D_DIM, wo),
	LLM_T_LAYER_MATRIX("blk.%d.ffn_gate.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_FFN, w_gate),
	LLM_T_LAYER_MATRIX("blk.%d.ffn_up.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_FFN, w_up),
	LLM_T_LAYER_MATRIX("blk.%d.ffn_down.weight", LLM_T_REQUIRED, LLM_D_FFN, LLM_D_DIM, w_down),
};

/* Which layers are local: the pattern key (array or period), else the period given. */
static int
read_swa_pattern(llm_model *m, const gguf_file *f, int64_t period, bool *local, char *err, size_t errlen)
{
	const llm_model_config *c = &m->cfg;
	char		key[96];
	const gguf_kv *kv;

	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", c->arch);
	kv = gguf_find_kv(f, key);
	if (kv != NULL && kv->type == GGUF_VT_ARRAY)
	{
		if (kv->arr_n != (uint64_t) c->n_layers ||
			(kv->arr_type != GGUF_VT_BOOL && kv->arr_type != GGUF_VT_UINT8 &&
			 kv->arr_type != GGUF_VT_INT32 && kv->arr_type != GGUF_VT_UINT32))
		{
			snprintf(err, errlen, "GGUF metadata %s: expected %d booleans", key, c->n_layers);
			return -1;
		}
		for (int l = 0; l < c->n_layers; l++)
			local[l] = gguf_arr_int(kv, (uint64_t) l) != 0;
		return 0;
	}
	if (kv != NULL && (!gguf_get_int(f, key, &period) || period < 0 || period > (1 << 24)))
	{
		snprintf(err, errlen, "GGUF metadata %s: not a layer period", key);
		return -1;
	}
	for (int l = 0; l < c->n_layers; l++)
		local[l] = period == 0 || (l % period < period - 1);
	return 0;
}

int
llm_arch_swa_layers(llm_model *m, const gguf_file *f, int default_period, float theta_swa,
					char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;
	const int32_t window = m->hp.sliding_window;
	bool	   *local;

	local = calloc((size_t) c->n_layers, sizeof(bool));
	if (local == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (window > 0 && read_swa_pattern(m, f, default_period, local, err, errlen) != 0)
	{
		free(local);
		return -1;
	}
	for (int l = 0; l < c->n_layers; l++)
	{
		bool		is_local = window > 0 && local[l];

		m->layer_cfg[l].attn_window = is_local ? window : 0;
		m->layer_cfg[l].rope_theta = is_local ? theta_swa : c->rope_theta;
	}
	free(local);
	return 0;
}

/* The sliding-window layers (window and base) and the attention-scale rule. */
static int
gemma3_config(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;

	if (!(m->hp.rope_theta_swa > 0.0f))
	{
		snprintf(err, errlen, "invalid RoPE base, RMS epsilon or logit soft-cap");
		return -1;
	}
	c->attn_scale = c->n_layers == GEMMA3_27B_LAYERS ?
		1.0f / sqrtf((float) (c->dim / c->n_heads)) : 1.0f / sqrtf((float) c->head_dim);
	return llm_arch_swa_layers(m, f, GEMMA3_SWA_PERIOD, m->hp.rope_theta_swa, err, errlen);
}

const llm_arch llm_arch_gemma3 = {
	.name = "gemma3",
	.hparams = gemma3_hparams,
	.n_hparams = LLM_ARRAY_LEN(gemma3_hparams),
	.tensors = gemma3_tensors,
	.n_tensors = LLM_ARRAY_LEN(gemma3_tensors),
	.graph = {
		.norm = LLM_NORM_RMS,
		.ffn_act = LLM_ACT_GELU,
		.rope_mode = LLM_ROPE_NEOX,
		.embed_scale = true,
		.q_prescale = true,
	},
	.config = gemma3_config,
};
