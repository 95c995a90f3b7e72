/*
 * arch_llama.c — the llama architecture (general.architecture "llama";
 * also SmolLM2, Llama 2/3/3.1/3.2, Mistral and Ministral and others written
 * as llama by llama.cpp's converter; Mistral's attention.sliding_window is
 * not read, as llama.cpp's llama loader does not read it): its tables for model_tensors.c and its graph options for
 * model_graph.c (all zero: the llama graph is the builder's default).
 *
 * Sources:
 *  - hyper-parameters: GGUF keys llama.block_count, .embedding_length,
 *    .attention.head_count, .attention.head_count_kv (default: head_count),
 *    .feed_forward_length, .context_length, .rope.freq_base (default 10000),
 *    .attention.layer_norm_rms_epsilon (default 1e-5), as llama.cpp's loader
 *    reads them for LLM_ARCH_LLAMA; .attention.key_length (default
 *    embedding_length / head_count) and .rope.dimension_count must equal it
 *    (no partial RoPE); .rope.scaling.type absent, "none" or "linear" with
 *    .rope.scaling.factor (angles times 1 / factor, llama.cpp's
 *    rope_freq_scale); "yarn" and any other type refused with the key named;
 *  - tensors: token_embd, output_norm, output (absent: tied to the
 *    embedding) and per layer blk.N.{attn_norm, attn_q, attn_k, attn_v,
 *    attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}.weight, llama.cpp's
 *    LLM_ARCH_LLAMA tensor names; optional rope_freqs.weight ([rope dims /
 *    2]: Llama 3.1 / 3.2's "llama3" RoPE scaling, which the converter
 *    writes as these per-pair divisors of the angle instead of a
 *    rope.scaling key; ggml_rope_ext's freq_factors), optional
 *    blk.N.attn_{q,k,v,output}.bias (create_tensor_qkv and llama.cpp's
 *    optional wo_b).  Refused: a fused attn_qkv, expert tensors (Mixtral
 *    written as llama), FFN and output biases;
 *  - graph: llama.cpp's llama graph without MoE and attention temperature:
 *      x = embed(tokens)
 *      per layer: h = RMSNorm(x) * attn_norm
 *                 q, k, v = Wq h, Wk h, Wv h [+ biases]; RoPE "normal" mode
 *                 (adjacent pairs) on q and k with the layer's base [angle
 *                 / rope_freqs[i]] [* 1 / rope.scaling.factor]; k, v to the cache
 *                 x += Wo attention(q, scale 1/sqrt(head_dim), all keys) [+ bo]
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
	LLM_HP_SCALING("rope.scaling.type", "none,linear"),
	LLM_HP("rope.scaling.factor", LLM_HP_FLOAT, false, rope_scale_factor, 0.0f),
};

static const llm_tensor_spec llama_tensors[] = {
	LLM_T_HEAD_ROWS,
	LLM_T_UNSUPPORTED_ROWS,
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_GLOBAL_VECTOR("rope_freqs.weight", LLM_T_OPTIONAL, LLM_D_ROPE_HALF, rope_freqs),
	LLM_T_QKV_BIAS_ROWS,
	LLM_T_LAYER_VECTOR("blk.%d.attn_output.bias", LLM_T_OPTIONAL, LLM_D_DIM, bo),
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
