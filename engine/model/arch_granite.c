/*
 * arch_granite.c — the Granite architecture (general.architecture
 * "granite": IBM Granite 3.x dense models): tables for model_tensors.c,
 * graph options for model_graph.c and a config hook for the RoPE switch.
 *
 * Reference: llama.cpp's LLM_ARCH_GRANITE (llama-cpp-python 0.3.36's
 * vendored llama.cpp: src/models/granite.cpp; llama-graph.cpp
 * build_inp_embd for the embedding scale).
 *
 * Hyper-parameters (GGUF keys "granite.*"): LLM_HP_DECODER_ROWS and the
 * four multipliers:
 *  - logit_scale (required, as llama.cpp's get_key): logits * (1 / s);
 *  - residual_scale (default 0 = none): each block's output times s
 *    before its residual add;
 *  - embedding_scale (default 0 = none): the embeddings times s;
 *  - attention.scale (default 0 = 1/sqrt(head_dim)): the softmax scale;
 *  - rope.scaling.finetuned (default true): false means no RoPE on any
 *    layer (granite.cpp's has_rope);
 *  - rope.scaling.type absent, "none" or "linear" (+ factor); others
 *    refused with the key named.
 *
 * Tensors: llama's (token_embd, output_norm, output (absent: tied), per
 * layer attn_norm, attn_q/k/v (+ optional biases), attn_output (+ optional
 * bias), ffn_norm, ffn_gate, ffn_up, ffn_down), optional rope_freqs.
 * Refused: expert tensors (granitemoe is its own architecture), FFN biases.
 *
 * Graph (granite.cpp): llama's with normal (interleaved) RoPE, the
 * multipliers above, attention scale attention.scale.
 */
#include "model_arch.h"

#include <stddef.h>
#include <stdio.h>

static const llm_hparam_spec granite_hparams[] = {
	LLM_HP_DECODER_ROWS,
	LLM_HP_SCALING("rope.scaling.type", "none,linear"),
	LLM_HP("rope.scaling.factor", LLM_HP_FLOAT, false, rope_scale_factor, 0.0f),
	LLM_HP("logit_scale", LLM_HP_FLOAT, true, logit_scale, 0.0f),
	LLM_HP("residual_scale", LLM_HP_FLOAT, false, residual_scale, 0.0f),
	LLM_HP("embedding_scale", LLM_HP_FLOAT, false, embedding_scale, 0.0f),
	LLM_HP("attention.scale", LLM_HP_FLOAT, false, attention_scale, 0.0f),
};

static const llm_tensor_spec granite_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_UNSUPPORTED_ROWS,
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_GLOBAL_VECTOR("rope_freqs.weight", LLM_T_OPTIONAL, LLM_D_ROPE_HALF, rope_freqs),
	LLM_T_DECODER_LAYER_ROWS,
	LLM_T_QKV_BIAS_ROWS,
	LLM_T_LAYER_VECTOR("blk.%d.attn_output.bias", LLM_T_OPTIONAL, LLM_D_DIM, bo),
};

/* rope.scaling.finetuned false: no layer rotates (granite.cpp's has_rope). */
static int
granite_config(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	char		key[96];
	bool		on = true;

	snprintf(key, sizeof(key), "%s.rope.scaling.finetuned", m->cfg.arch);
	if (gguf_find_kv(f, key) != NULL && !gguf_get_bool(f, key, &on))
	{
		snprintf(err, errlen, "GGUF metadata key %s is not a boolean", key);
		return -1;
	}
	if (!on)
		for (int l = 0; l < m->cfg.n_layers; l++)
			m->layer_cfg[l].rope_mode = LLM_ROPE_NONE;
	return 0;
}

const llm_arch llm_arch_granite = {
	.name = "granite",
	.hparams = granite_hparams,
	.n_hparams = LLM_ARRAY_LEN(granite_hparams),
	.tensors = granite_tensors,
	.n_tensors = LLM_ARRAY_LEN(granite_tensors),
	.graph = {.norm = LLM_NORM_RMS, .ffn_act = LLM_ACT_SILU, .rope_mode = LLM_ROPE_NORMAL},
	.config = granite_config,
};
