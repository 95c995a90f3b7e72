/*
 * arch_qwen2.c — the Qwen2 architecture (general.architecture "qwen2":
 * Qwen2 / Qwen2.5 dense models and the DeepSeek-R1 distills built on them):
 * tables for model_tensors.c, graph options for model_graph.c.
 *
 * Reference: llama.cpp's LLM_ARCH_QWEN2 (llama-cpp-python 0.3.36's vendored
 * llama.cpp: src/models/qwen2.cpp; llama-model.cpp create_tensor_qkv).
 *
 * Hyper-parameters (GGUF keys "qwen2.*"): LLM_HP_DECODER_ROWS (the RMS
 * epsilon required, as llama.cpp's get_key); attention.key_length and
 * rope.dimension_count must equal embedding_length / head_count (qwen2.cpp
 * asserts n_embd_head == n_rot); rope.scaling.type "none" or "linear" with
 * rope.scaling.factor (llama.cpp's rope_freq_scale); "yarn" (Qwen2.5's long
 * context setting) and any other type are refused with the key named.
 *
 * Tensors: token_embd, output_norm, output (absent: tied), per layer
 * attn_norm, attn_q/k/v (+ their .bias: Qwen2 has them, llama.cpp loads
 * them as optional), attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down.
 * Refused: attn_output.bias (qwen2.cpp's loader does not load it), a
 * fused attn_qkv, expert routing (qwen2moe is its own architecture) and
 * FFN biases.
 *
 * Graph (qwen2.cpp): the llama graph with the Q/K/V biases added after the
 * projections (ggml_add: add_broadcast) and NEOX RoPE (LLAMA_ROPE_TYPE_NEOX
 * for LLM_ARCH_QWEN2 in llama_model_rope_type): the split halves pair
 * (x[i], x[i + head_dim/2]).  Attention scale 1/sqrt(head_dim).
 */
#include "model_arch.h"

#include <stddef.h>

static const llm_hparam_spec qwen2_hparams[] = {
	LLM_HP_DECODER_ROWS,
	LLM_HP_SCALING("rope.scaling.type", "none,linear"),
	LLM_HP("rope.scaling.factor", LLM_HP_FLOAT, false, rope_scale_factor, 0.0f),
};

static const llm_tensor_spec qwen2_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_UNSUPPORTED_ROWS,
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_output.bias"),
	LLM_T_DECODER_LAYER_ROWS,
	LLM_T_QKV_BIAS_ROWS,
};

const llm_arch llm_arch_qwen2 = {
	.name = "qwen2",
	.hparams = qwen2_hparams,
	.n_hparams = LLM_ARRAY_LEN(qwen2_hparams),
	.tensors = qwen2_tensors,
	.n_tensors = LLM_ARRAY_LEN(qwen2_tensors),
	.graph = {.norm = LLM_NORM_RMS, .ffn_act = LLM_ACT_SILU, .rope_mode = LLM_ROPE_NEOX},
};
