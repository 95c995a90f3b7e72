/*
 * arch_phi3.c — the Phi-3 architecture (general.architecture "phi3":
 * Phi-3 / Phi-3.5 mini and medium, Phi-4-mini): tables for model_tensors.c,
 * graph options for model_graph.c.
 *
 * Reference: llama.cpp's LLM_ARCH_PHI3 (llama-cpp-python 0.3.36's vendored
 * llama.cpp: src/models/phi3.cpp; llama-model.cpp get_rope_factors;
 * llama-context.cpp for the attention factor; conversion/phi.py for the
 * keys the converter writes).
 *
 * Hyper-parameters (GGUF keys "phi3.*"): LLM_HP_DECODER_ROWS;
 *  - rope.dimension_count may be below key_length (Phi-4-mini rotates 96
 *    of 128): partial rotary, the rest of each head unrotated;
 *  - rope.scaling.original_context_length (default context_length): the
 *    context within which the short LongRoPE factors apply;
 *  - rope.scaling.attn_factor (default 1): cos and sin times it (llama.cpp's
 *    yarn_attn_factor *= rope_attn_factor; ggml_rope_ext's attn_factor);
 *  - rope.scaling.type: absent, "none", "linear" (+ factor) or "longrope";
 *    others refused with the key named;
 *  - attention.sliding_window is not read: llama.cpp's phi3 loader turns
 *    the sliding window off (the graph is every layer global).
 *
 * Tensors: token_embd, output_norm, output (absent: tied), global
 * rope_factors_long / rope_factors_short ([rope dims / 2], optional,
 * together: LongRoPE's per-pair divisors of the angle; llama.cpp picks
 * long when its per-sequence context exceeds the original context:
 * llm_model_set_context), per layer attn_norm, attn_qkv (one matrix [dim,
 * q_dim + 2 kv_dim] whose rows are Q, K, V in that order: loaded as its
 * three parts) or attn_q/k/v, attn_output, ffn_norm, ffn_up (one matrix
 * [dim, 2 ffn] whose first ffn rows are the gate and the next ffn the
 * up projection: ggml_swiglu's halves), ffn_down.  Refused: biases,
 * expert routing (phimoe is its own architecture).
 *
 * Graph (phi3.cpp): llama's with NEOX RoPE over rope.dimension_count values
 * with the LongRoPE factors and attention factor, q scaled by
 * 1/sqrt(key_length) before attention (ggml_scale; softmax scale 1), the
 * FFN silu(gate) * up of the fused matrix's halves.
 */
#include "model_arch.h"

#include <stddef.h>

static const llm_hparam_spec phi3_hparams[] = {
	LLM_HP_DECODER_ROWS,
	LLM_HP_SCALING("rope.scaling.type", "none,linear,longrope"),
	LLM_HP("rope.scaling.factor", LLM_HP_FLOAT, false, rope_scale_factor, 0.0f),
	LLM_HP("rope.scaling.attn_factor", LLM_HP_FLOAT, false, rope_attn_factor, 0.0f),
	LLM_HP("rope.scaling.original_context_length", LLM_HP_INT0, false, rope_orig_ctx, 0),
};

static const llm_tensor_spec phi3_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_UNSUPPORTED_ROWS,
	LLM_T_GLOBAL_VECTOR("rope_factors_long.weight", LLM_T_OPTIONAL, LLM_D_ROPE_HALF, rope_long),
	LLM_T_GLOBAL_VECTOR("rope_factors_short.weight", LLM_T_OPTIONAL, LLM_D_ROPE_HALF, rope_short),
	LLM_T_LAYER_REFUSED("blk.%d.attn_q.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_k.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_v.bias"),
	LLM_T_LAYER_REFUSED("blk.%d.attn_output.bias"),
	LLM_T_LAYER_VECTOR("blk.%d.attn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, attn_norm),
	LLM_T_LAYER_VECTOR("blk.%d.ffn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, ffn_norm),
	LLM_T_LAYER_FUSED3("blk.%d.attn_qkv.weight", LLM_T_OPTIONAL, LLM_D_DIM, LLM_D_Q, wq, LLM_D_KV, wk, LLM_D_KV, wv),
	LLM_T_LAYER_MATRIX("blk.%d.attn_q.weight", LLM_T_OPTIONAL, LLM_D_DIM, LLM_D_Q, wq),
	LLM_T_LAYER_MATRIX("blk.%d.attn_k.weight", LLM_T_OPTIONAL, LLM_D_DIM, LLM_D_KV, wk),
	LLM_T_LAYER_MATRIX("blk.%d.attn_v.weight", LLM_T_OPTIONAL, LLM_D_DIM, LLM_D_KV, wv),
	LLM_T_LAYER_MATRIX("blk.%d.attn_output.weight", LLM_T_REQUIRED, LLM_D_Q, LLM_D_DIM, wo),
	LLM_T_LAYER_FUSED2("blk.%d.ffn_up.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_FFN, w_gate, LLM_D_FFN, w_up),
	LLM_T_LAYER_MATRIX("blk.%d.ffn_down.weight", LLM_T_REQUIRED, LLM_D_FFN, LLM_D_DIM, w_down),
};

const llm_arch llm_arch_phi3 = {
	.name = "phi3",
	.hparams = phi3_hparams,
	.n_hparams = LLM_ARRAY_LEN(phi3_hparams),
	.tensors = phi3_tensors,
	.n_tensors = LLM_ARRAY_LEN(phi3_tensors),
	.graph = {
		.norm = LLM_NORM_RMS,
		.ffn_act = LLM_ACT_SILU,
		.rope_mode = LLM_ROPE_NEOX,
		.partial_rotary = true,
		.q_prescale = true,
	},
};
