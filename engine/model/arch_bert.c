/*
 * arch_bert.c — the BERT encoder (general.architecture "bert": sentence
 * embedding models such as all-MiniLM-L6-v2, written by llama.cpp's
 * converter or tools/convert_bert_gguf.py): its tables for
 * model_tensors.c, its graph options for model_graph.c (the post-norm
 * encoder block, LayerNorm with bias, erf GELU in a plain FFN,
 * bidirectional attention without RoPE, no output projection) and a config
 * hook for the keys no row reads.
 *
 * Reference: llama.cpp's LLM_ARCH_BERT (llama-cpp-python 0.3.36's vendored
 * llama.cpp, src/models/bert.cpp) for the keys, tensor names and block
 * order; Hugging Face's BertModel for the activation.
 *
 * Hyper-parameters (GGUF keys "bert.*"): block_count, embedding_length,
 * attention.head_count, feed_forward_length, context_length (the rows of
 * position_embd), attention.layer_norm_epsilon: required;
 * attention.head_count_kv: default head_count.  attention.causal must be
 * absent or false.  tokenizer.ggml.token_type_count (default 1, as
 * llama.cpp's loader) sizes token_types.  pooling_type and
 * embedding.max_seq_length are read for every architecture (model.c).
 *
 * Tensors (llama.cpp's names): token_embd, token_types (optional),
 * position_embd, token_embd_norm.{weight,bias}; per layer blk.N.{attn_q,
 * attn_k, attn_v, attn_output, ffn_up, ffn_down}.{weight, bias (optional)},
 * attn_output_norm.{weight,bias}, layer_output_norm.{weight,bias}.  A fused
 * attn_qkv, a ffn_gate (GeGLU BERT variants) and classifier heads are not
 * read: such files are refused by their tensor rows or load without the
 * head (cls.* are not in llama.cpp's bert files).
 *
 * Graph (model_graph.c forward_post_norm): the input embedding is token +
 * token type 0 + position (llama.cpp hard-codes type 0, "sentence A"),
 * then LayerNorm; each layer attends over the whole sequence (no mask
 * between its tokens, every token of a request is in the step: an
 * encoder's sequence is scheduled whole), adds, LayerNorms, runs the FFN,
 * adds, LayerNorms.  GELU: Hugging Face's BERT uses the exact erf GELU
 * ("gelu"); llama.cpp's bert graph uses ggml_gelu, the tanh approximation
 * through an fp16 table.  This graph follows the model's definition (erf),
 * so it agrees with sentence-transformers more closely than llama.cpp does
 * (docs/EMBEDDINGS.md has the figures).
 */
#include "model_arch.h"

#include <stdio.h>

static const llm_hparam_spec bert_hparams[] = {
	LLM_HP("block_count", LLM_HP_INT, true, n_layers, 0),
	LLM_HP("embedding_length", LLM_HP_INT, true, dim, 0),
	LLM_HP("attention.head_count", LLM_HP_INT, true, n_heads, 0),
	LLM_HP("feed_forward_length", LLM_HP_INT, true, ffn_dim, 0),
	LLM_HP("context_length", LLM_HP_INT, true, n_ctx_train, 0),
	LLM_HP("attention.head_count_kv", LLM_HP_INT, false, n_kv_heads, 0),
	LLM_HP("attention.layer_norm_epsilon", LLM_HP_FLOAT, true, norm_eps, 0.0f),
	/* no RoPE: the base is unused but must be a valid number */
	LLM_HP("rope.freq_base", LLM_HP_FLOAT, false, rope_theta, 10000.0f),
};

#define LAYER_MATRIX_BIAS(name, ne0, ne1, w, bias) \
	LLM_T_LAYER_MATRIX("blk.%d." name ".weight", LLM_T_REQUIRED, ne0, ne1, w), \
	LLM_T_LAYER_VECTOR("blk.%d." name ".bias", LLM_T_OPTIONAL, ne1, bias)

static const llm_tensor_spec bert_tensors[] = {
	LLM_T_GLOBAL_MATRIX("token_embd.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_VOCAB, tok_embd),
	LLM_T_GLOBAL_MATRIX("token_types.weight", LLM_T_OPTIONAL, LLM_D_DIM, LLM_D_TOKEN_TYPES, type_embd),
	LLM_T_GLOBAL_MATRIX("position_embd.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_CTX_TRAIN, pos_embd),
	LLM_T_GLOBAL_VECTOR("token_embd_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, tok_norm),
	LLM_T_GLOBAL_VECTOR("token_embd_norm.bias", LLM_T_REQUIRED, LLM_D_DIM, tok_norm_b),
	LLM_T_LAYER_REFUSED("blk.%d.attn_qkv.weight"),
	LLM_T_LAYER_REFUSED("blk.%d.ffn_gate.weight"),
	LAYER_MATRIX_BIAS("attn_q", LLM_D_DIM, LLM_D_Q, wq, bq),
	LAYER_MATRIX_BIAS("attn_k", LLM_D_DIM, LLM_D_KV, wk, bk),
	LAYER_MATRIX_BIAS("attn_v", LLM_D_DIM, LLM_D_KV, wv, bv),
	LAYER_MATRIX_BIAS("attn_output", LLM_D_Q, LLM_D_DIM, wo, bo),
	LLM_T_LAYER_VECTOR("blk.%d.attn_output_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, attn_out_norm),
	LLM_T_LAYER_VECTOR("blk.%d.attn_output_norm.bias", LLM_T_REQUIRED, LLM_D_DIM, attn_out_norm_b),
	LAYER_MATRIX_BIAS("ffn_up", LLM_D_DIM, LLM_D_FFN, w_up, b_up),
	LAYER_MATRIX_BIAS("ffn_down", LLM_D_FFN, LLM_D_DIM, w_down, b_down),
	LLM_T_LAYER_VECTOR("blk.%d.layer_output_norm.weight", LLM_T_REQUIRED, LLM_D_DIM, layer_out_norm),
	LLM_T_LAYER_VECTOR("blk.%d.layer_output_norm.bias", LLM_T_REQUIRED, LLM_D_DIM, layer_out_norm_b),
};

static int
bert_config(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	bool		causal;
	int64_t		types = 1;

	if (gguf_find_kv(f, "bert.attention.causal") != NULL &&
		(!gguf_get_bool(f, "bert.attention.causal", &causal) || causal))
	{
		snprintf(err, errlen, "bert.attention.causal must be false: the bert graph is bidirectional");
		return -1;
	}
	if (gguf_find_kv(f, "tokenizer.ggml.token_type_count") != NULL &&
		(!gguf_get_int(f, "tokenizer.ggml.token_type_count", &types) || types < 1 || types > 1024))
	{
		snprintf(err, errlen, "GGUF metadata tokenizer.ggml.token_type_count out of range");
		return -1;
	}
	m->hp.n_token_types = (int32_t) types;
	return 0;
}

const llm_arch llm_arch_bert = {
	.name = "bert",
	.hparams = bert_hparams,
	.n_hparams = LLM_ARRAY_LEN(bert_hparams),
	.tensors = bert_tensors,
	.n_tensors = LLM_ARRAY_LEN(bert_tensors),
	.graph = {.norm = LLM_NORM_LAYER, .ffn_act = LLM_ACT_GELU_ERF, .rope_mode = LLM_ROPE_NONE,
	.bidirectional = true, .post_norm = true, .no_output = true},
	.config = bert_config,
};
