/*
 * arch_gemma2.c — the Gemma 2 architecture (general.architecture
 * "gemma2"): tables for model_tensors.c, graph options for model_graph.c
 * (RMSNorm, GeGLU, NEOX RoPE, embedding scale, q pre-scaled; the post norms
 * are rows) and a config hook for the alternating sliding window and the
 * attention-scale rule.
 *
 * Reference: llama.cpp's LLM_ARCH_GEMMA2 (llama-cpp-python 0.3.36's vendored
 * llama.cpp: src/models/gemma2.cpp; llama-hparams.h for the soft-cap
 * defaults; llama-graph.cpp build_attn_mha for the attention soft-cap
 * without flash attention).
 *
 * Hyper-parameters (GGUF keys "gemma2.*"): LLM_HP_DECODER_ROWS;
 *  - attn_logit_softcapping: default 50 (llama.cpp's hparams default;
 *    gemma2.cpp sets attn_soft_cap on): scores s become tanh(s / cap) * cap
 *    before the softmax (the cached attention_softcap op);
 *  - final_logit_softcapping: default 30, applied to the logits (model.c);
 *  - attention.sliding_window: default 4096 (gemma2.cpp's n_swa);
 *    attention.sliding_window_pattern: default period 2 (layers 0, 2, 4 ...
 *    local, the odd ones global);
 *  - rope.freq_base_swa: the local layers' base, default rope.freq_base;
 *  - attention scale, HARD-CODED as in gemma2.cpp (after gemma_pytorch):
 *    1/sqrt(key_length), or 1/sqrt(embedding_length / head_count) for the
 *    46-layer model (Gemma 2 27B), applied to q before attention
 *    (ggml_scale), the softmax scale 1;
 *  - rope.scaling.type must be absent or "none".
 *
 * Tensors: token_embd, output_norm, output (absent, as in every Gemma 2
 * file: the embedding, as gemma2.cpp always uses), per layer attn_norm,
 * attn_q/k/v, attn_output, post_attention_norm, ffn_norm, ffn_gate, ffn_up,
 * ffn_down, post_ffw_norm.  The stored RMSNorm weights are the multipliers
 * (1 + w, written so by the converter), used as is.
 *
 * Graph (gemma2.cpp):
 *   x = embed(tokens) * sqrt(dim)
 *   per layer: h = RMSNorm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h
 *     NEOX RoPE (the layer's base); q = q * attn_scale
 *     a = Wo attention(q, scores soft-capped, the layer's window)
 *     x = x + RMSNorm(a) * post_attention_norm
 *     f = Wdown (gelu_tanh(Wgate (RMSNorm(x) * ffn_norm)) * Wup ...)
 *     x = x + RMSNorm(f) * post_ffw_norm
 *   final: RMSNorm(x) * output_norm; logits soft-capped (model.c)
 */
#include "model_arch.h"

#include <math.h>
#include <stdio.h>

#define GEMMA2_SWA_PERIOD	2
#define GEMMA2_WINDOW		4096
#define GEMMA2_27B_LAYERS	46

static const llm_hparam_spec gemma2_hparams[] = {
	LLM_HP_DECODER_ROWS,
	LLM_HP("rope.freq_base_swa", LLM_HP_FLOAT, false, rope_theta_swa, 0.0f),
	LLM_HP_NONE_ONLY("rope.scaling.type", "RoPE scaling"),
	LLM_HP("attn_logit_softcapping", LLM_HP_FLOAT, false, attn_logit_softcap, 50.0f),
	LLM_HP("final_logit_softcapping", LLM_HP_FLOAT, false, final_logit_softcap, 30.0f),
	LLM_HP("attention.sliding_window", LLM_HP_INT0, false, sliding_window, GEMMA2_WINDOW),
};

static const llm_tensor_spec gemma2_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_UNSUPPORTED_ROWS,
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_q.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_k.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_v.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_output.bias"),
	LLM_T_DECODER_LAYER_ROWS,
	LLM_T_LAYER_VECTOR("blk.%d.post_attention_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, post_attn_norm),
	LLM_T_LAYER_VECTOR("blk.%d.post_ffw_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, post_ffw_norm),
};

static int
gemma2_config(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;

	if (m->hp.rope_theta_swa == 0.0f)
		m->hp.rope_theta_swa = m->hp.rope_theta;
	if (!(m->hp.rope_theta_swa > 0.0f))
	{
		snprintf(err, errlen, "invalid RoPE base, RMS epsilon or logit soft-cap");
		return -1;
	}
	c->attn_scale = c->n_layers == GEMMA2_27B_LAYERS ?
		1.0f / sqrtf((float) (c->dim / c->n_heads)) : 1.0f / sqrtf((float) c->head_dim);
	return llm_arch_swa_layers(m, f, GEMMA2_SWA_PERIOD, m->hp.rope_theta_swa, err, errlen);
}

const llm_arch llm_arch_gemma2 = {
	.name = "gemma2",
	.hparams = gemma2_hparams,
	.n_hparams = LLM_ARRAY_LEN(gemma2_hparams),
	.tensors = gemma2_tensors,
	.n_tensors = LLM_ARRAY_LEN(gemma2_tensors),
	.graph = {
		.norm = LLM_NORM_RMS,
		.ffn_act = LLM_ACT_GELU,
		.rope_mode = LLM_ROPE_NEOX,
		.embed_scale = true,
		.q_prescale = true,
	},
	.config = gemma2_config,
};
