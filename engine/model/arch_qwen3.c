/*
 * arch_qwen3.c — the Qwen3 architecture (general.architecture "qwen3": the
 * dense Qwen3 models): tables for model_tensors.c, graph options for
 * model_graph.c.
 *
 * Reference: llama.cpp's LLM_ARCH_QWEN3 (llama-cpp-python 0.3.36's vendored
 * llama.cpp: src/models/qwen3.cpp).
 *
 * Hyper-parameters (GGUF keys "qwen3.*"): LLM_HP_DECODER_ROWS;
 * attention.key_length is the head size (128 for Qwen3-0.6B with
 * embedding_length 1024 and 16 heads: Wq is [dim, heads * key_length]);
 * rope.dimension_count must equal it (qwen3.cpp asserts n_rot ==
 * n_embd_head); rope.scaling.type "none" or "linear" (+ factor), others
 * (YaRN) refused with the key named.
 *
 * Tensors: as qwen2 plus per layer attn_q_norm and attn_k_norm
 * ([key_length], required), the Q/K/V biases optional as llama.cpp's
 * create_tensor_qkv loads them.  Refused: attn_output.bias, a fused
 * attn_qkv, expert routing (qwen3moe is its own architecture), FFN biases.
 *
 * Graph (qwen3.cpp): llama's, with per-head RMSNorm of q and k (over each
 * head's key_length values, times attn_q_norm / attn_k_norm; the rows the
 * Gemma 3 graph also applies) before NEOX RoPE.  Attention scale
 * 1/sqrt(key_length).
 */
#include "model_arch.h"

#include <stddef.h>

static const llm_hparam_spec qwen3_hparams[] = {
	LLM_HP_DECODER_ROWS,
	LLM_HP_SCALING("rope.scaling.type", "none,linear"),
	LLM_HP("rope.scaling.factor", LLM_HP_FLOAT, false, rope_scale_factor, 0.0f),
};

static const llm_tensor_spec qwen3_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_UNSUPPORTED_ROWS,
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_output.bias"),
	LLM_T_DECODER_LAYER_ROWS,
	LLM_T_QKV_BIAS_ROWS,
	LLM_T_LAYER_VECTOR("blk.%d.attn_q_norm.weight", LLM_T_REQUIRED, LLM_D_HEAD, q_norm),
	LLM_T_LAYER_VECTOR("blk.%d.attn_k_norm.weight", LLM_T_REQUIRED, LLM_D_HEAD, k_norm),
};

const llm_arch llm_arch_qwen3 = {
	.name = "qwen3",
	.hparams = qwen3_hparams,
	.n_hparams = LLM_ARRAY_LEN(qwen3_hparams),
	.tensors = qwen3_tensors,
	.n_tensors = LLM_ARRAY_LEN(qwen3_tensors),
	.graph = {.norm = LLM_NORM_RMS, .ffn_act = LLM_ACT_SILU, .rope_mode = LLM_ROPE_NEOX},
};
