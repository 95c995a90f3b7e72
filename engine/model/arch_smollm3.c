/*
 * arch_smollm3.c — the SmolLM3 architecture (general.architecture
 * "smollm3"): tables for model_tensors.c, graph options for model_graph.c
 * and a config hook for its layers without RoPE.
 *
 * Reference: llama.cpp's LLM_ARCH_SMOLLM3 (llama-cpp-python 0.3.36's
 * vendored llama.cpp: src/models/smollm3.cpp).
 *
 * Hyper-parameters (GGUF keys "smollm3.*"): LLM_HP_DECODER_ROWS;
 * rope.scaling.type absent, "none" or "linear" (+ factor), others refused
 * with the key named.  The layers without RoPE are not read from the file:
 * llama.cpp HARD-CODES n_no_rope_layer_step = 4 (layer l has no RoPE when
 * (l + 1) % 4 == 0: layers 3, 7, 11, ...), which is SmolLM3-3B's
 * no_rope_layer_interval; a file's own key is ignored as llama.cpp ignores
 * it.
 *
 * Tensors: llama's (optional Q/K/V and output biases as llama.cpp's
 * create_tensor_qkv and build_attn take them).  Refused: a fused QKV,
 * expert and FFN-bias tensors.
 *
 * Graph (smollm3.cpp): llama's with normal (interleaved) RoPE on the
 * layers that have it; the others attend over unrotated q and k.
 */
#include "model_arch.h"

#include <stddef.h>

#define SMOLLM3_NO_ROPE_STEP 4

static const llm_hparam_spec smollm3_hparams[] = {
	LLM_HP_DECODER_ROWS,
	LLM_HP_SCALING("rope.scaling.type", "none,linear"),
	LLM_HP("rope.scaling.factor", LLM_HP_FLOAT, false, rope_scale_factor, 0.0f),
};

static const llm_tensor_spec smollm3_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_UNSUPPORTED_ROWS,
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_DECODER_LAYER_ROWS,
	LLM_T_QKV_BIAS_ROWS,
	LLM_T_LAYER_VECTOR("blk.%d.attn_output.bias", LLM_T_OPTIONAL, LLM_D_DIM, bo),
};

static int
smollm3_config(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	for (int l = 0; l < m->cfg.n_layers; l++)
		if ((l + 1) % SMOLLM3_NO_ROPE_STEP == 0)
			m->layer_cfg[l].rope_mode = LLM_ROPE_NONE;
	return 0;
}

const llm_arch llm_arch_smollm3 = {
	.name = "smollm3",
	.hparams = smollm3_hparams,
	.n_hparams = LLM_ARRAY_LEN(smollm3_hparams),
	.tensors = smollm3_tensors,
	.n_tensors = LLM_ARRAY_LEN(smollm3_tensors),
	.graph = {.norm = LLM_NORM_RMS, .ffn_act = LLM_ACT_SILU, .rope_mode = LLM_ROPE_NORMAL},
	.config = smollm3_config,
};
