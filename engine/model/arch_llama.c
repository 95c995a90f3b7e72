/*
 * arch_llama.c — the llama architecture (general.architecture "llama";
 * also SmolLM2, Llama 2/3 and others written as llama by llama.cpp's
 * converter): its tables for model_tensors.c and its graph options for
 * model_graph.c (all zero: the llama graph is the builder's default).
 *
 * Sources:
 *  - hyper-parameters: GGUF keys llama.block_count, .embedding_length,
 *    .attention.head_count, .attention.head_count_kv (default: head_count),
 *    .feed_forward_length, .context_length, .rope.freq_base (default 10000),
 *    .attention.layer_norm_rms_epsilon (default 1e-5), as llama.cpp's loader
 *    reads them for LLM_ARCH_LLAMA; .attention.key_length (default
 *    embedding_length / head_count) and .rope.dimension_count must equal it
 *    (no partial RoPE); .rope.scaling.type must be absent or "none" (no RoPE
 *    scaling);
 *  - tensors: token_embd, output_norm, output (absent: tied to the
 *    embedding) and per layer blk.N.{attn_norm, attn_q, attn_k, attn_v,
 *    attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}.weight, llama.cpp's
 *    LLM_ARCH_LLAMA tensor names.  rope_freqs.weight (Llama 3.1's
 *    frequency factors) is not a row: such a file runs without them, as
 *    before the graph had the option (a row would move every layer to the
 *    step-local attention path, model_graph.c);
 *  - graph: llama.cpp's llama graph without its options (no RoPE scaling,
 *    no MoE, no attention temperature):
 *      x = embed(tokens)
 *      per layer: h = RMSNorm(x) * attn_norm
 *                 q, k, v = Wq h, Wk h, Wv h; RoPE "normal" mode (adjacent
 *                 pairs) on q and k with the layer's base; k, v to the cache
 *                 x += Wo attention(q, scale 1/sqrt(head_dim), all keys)
 *                 h = RMSNorm(x) * ffn_norm
 *                 x += Wdown (silu(Wgate h) * Wup h)
 *      final:     h = RMSNorm(x) * output_norm (model.c applies Woutput)
 *    Every layer is global (attn_window 0) with the file's RoPE base.
 */
#include "model_arch.h"

#include <stddef.h>

static const llm_hparam_spec llama_hparams[] = {
	LLM_HP("block_count", LLM_HP_INT, true, n_layers, 0),
	LLM_HP("embedding_length", LLM_HP_INT, true, dim, 0),
	LLM_HP("attention.head_count", LLM_HP_INT, true, n_heads, 0),
	LLM_HP("feed_forward_length", LLM_HP_INT, true, ffn_dim, 0),
	LLM_HP("context_length", LLM_HP_INT, true, n_ctx_train, 0),
	LLM_HP("attention.head_count_kv", LLM_HP_INT, false, n_kv_heads, 0),
	LLM_HP("attention.key_length", LLM_HP_INT, false, key_length, 0),
	LLM_HP("rope.dimension_count", LLM_HP_INT, false, rope_dims, 0),
	LLM_HP("rope.freq_base", LLM_HP_FLOAT, false, rope_theta, 10000.0f),
	LLM_HP("attention.layer_norm_rms_epsilon", LLM_HP_FLOAT, false, norm_eps, 1e-5f),
	LLM_HP_NONE_ONLY("rope.scaling.type", "RoPE scaling"),
};

static const llm_tensor_spec llama_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_LAYER_VECTOR("blk.%d.attn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, attn_norm),
	LLM_T_LAYER_VECTOR("blk.%d.ffn_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, ffn_norm),
	LLM_T_LAYER_MATRIX("blk.%d.attn_q.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_Q, wq),
	LLM_T_LAYER_MATRIX("blk.%d.attn_k.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_KV, wk),
	LLM_T_LAYER_MATRIX("blk.%d.attn_v.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_KV, wv),
	LLM_T_LAYER_MATRIX("blk.%d.attn_output.weight", LLM_T_REQUIRED, LLM_D_Q, LLM_D_DIM, wo),
	LLM_T_LAYER_MATRIX("blk.%d.ffn_gate.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_FFN, w_gate),
	LLM_T_LAYER_MATRIX("blk.%d.ffn_up.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_FFN, w_up),
	LLM_T_LAYER_MATRIX("blk.%d.ffn_down.weight", LLM_T_REQUIRED, LLM_D_FFN, LLM_D_DIM, w_down),
};

const llm_arch llm_arch_llama = {
	.name = "llama",
	.hparams = llama_hparams,
	.n_hparams = LLM_ARRAY_LEN(llama_hparams),
	.tensors = llama_tensors,
	.n_tensors = LLM_ARRAY_LEN(llama_tensors),
	.graph = {.norm = LLM_NORM_RMS, .ffn_act = LLM_ACT_SILU, .rope_mode = LLM_ROPE_NORMAL},
};
