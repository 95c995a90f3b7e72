/*
 * arch_llama.c — the llama architecture (general.architecture "llama";
 * also SmolLM2, Llama 2/3 and others written as llama by llama.cpp's
 * converter).
 *
 * Sources:
 *  - hyper-parameters: GGUF keys llama.block_count, .embedding_length,
 *    .attention.head_count, .attention.head_count_kv (default: head_count),
 *    .feed_forward_length, .context_length, .rope.freq_base (default 10000),
 *    .attention.layer_norm_rms_epsilon (default 1e-5), as llama.cpp's loader
 *    reads them for LLM_ARCH_LLAMA; .attention.key_length and
 *    .rope.dimension_count must equal dim / head_count (no partial RoPE) and
 *    .rope.scaling.type must be absent or "none" (no RoPE scaling);
 *  - tensors: token_embd, output_norm, output (absent: tied to the
 *    embedding) and per layer blk.N.{attn_norm, attn_q, attn_k, attn_v,
 *    attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}.weight, llama.cpp's
 *    LLM_ARCH_LLAMA tensor names;
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
 *
 * Each RMSNorm is fused with the residual add before it (add_rmsnorm), and
 * the next layer's attention norm (or the final norm) with the FFN's add.
 */
#include "model_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct llama_layer
{
	float	   *attn_norm;
	float	   *ffn_norm;
	llm_weight	wq, wk, wv, wo;
	llm_weight	w_gate, w_up, w_down;
} llama_layer;

static int
llama_read_config(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;
	const char *a = c->arch;
	gguf_str	s;
	char		key[96];

	if (llm_model_get_i32(f, a, "block_count", &c->n_layers, true, err, errlen) ||
		llm_model_get_i32(f, a, "embedding_length", &c->dim, true, err, errlen) ||
		llm_model_get_i32(f, a, "attention.head_count", &c->n_heads, true, err, errlen) ||
		llm_model_get_i32(f, a, "feed_forward_length", &c->ffn_dim, true, err, errlen) ||
		llm_model_get_i32(f, a, "context_length", &c->n_ctx_train, true, err, errlen))
		return -1;
	c->n_kv_heads = c->n_heads;
	if (llm_model_get_i32(f, a, "attention.head_count_kv", &c->n_kv_heads, false, err, errlen))
		return -1;
	if (c->dim % c->n_heads != 0 || c->n_heads % c->n_kv_heads != 0)
	{
		snprintf(err, errlen, "inconsistent head counts: dim %d, heads %d, kv heads %d",
				 c->dim, c->n_heads, c->n_kv_heads);
		return -1;
	}
	c->head_dim = c->dim / c->n_heads;
	{
		int32_t		kl = c->head_dim;
		int32_t		rd = c->head_dim;

		if (llm_model_get_i32(f, a, "attention.key_length", &kl, false, err, errlen) ||
			llm_model_get_i32(f, a, "rope.dimension_count", &rd, false, err, errlen))
			return -1;
		if (kl != c->head_dim || rd != c->head_dim || (c->head_dim % 2) != 0)
		{
			snprintf(err, errlen, "unsupported head geometry (head_dim %d, key_length %d, rope dims %d)",
					 c->head_dim, kl, rd);
			return -1;
		}
	}
	c->rope_theta = 10000.0f;
	(void) llm_model_get_f32(f, a, "rope.freq_base", &c->rope_theta);
	c->rms_eps = 1e-5f;
	(void) llm_model_get_f32(f, a, "attention.layer_norm_rms_epsilon", &c->rms_eps);
	snprintf(key, sizeof(key), "%s.rope.scaling.type", a);
	if (gguf_get_str(f, key, &s) && !gguf_str_eq(s, "none"))
	{
		snprintf(err, errlen, "RoPE scaling \"%.*s\" is not supported", (int) s.len, s.ptr);
		return -1;
	}
	if (!(c->rope_theta > 0.0f) || !(c->rms_eps > 0.0f))
	{
		snprintf(err, errlen, "invalid rope theta or RMS epsilon");
		return -1;
	}
	c->attn_scale = 1.0f / sqrtf((float) c->head_dim);
	if (llm_model_alloc_layers(m, err, errlen) != 0)
		return -1;
	for (int l = 0; l < c->n_layers; l++)
	{
		m->layer_cfg[l].attn_window = 0;
		m->layer_cfg[l].rope_theta = c->rope_theta;
	}
	return 0;
}

static int
llama_load(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;
	const int64_t q_dim = (int64_t) c->n_heads * c->head_dim;
	const int64_t kv_dim = (int64_t) c->n_kv_heads * c->head_dim;
	llama_layer *layers;
	char		name[128];

	if (llm_model_load_head(m, f, err, errlen) != 0)
		return -1;
	layers = calloc((size_t) c->n_layers, sizeof(llama_layer));
	if (layers == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->arch_state = layers;
	for (int l = 0; l < c->n_layers; l++)
	{
		llama_layer *L = &layers[l];

#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%d.%s", l, suffix), name)
		if ((L->attn_norm = llm_model_load_vector(m, f, BLK("attn_norm.weight"), c->dim, err, errlen)) == NULL ||
			(L->ffn_norm = llm_model_load_vector(m, f, BLK("ffn_norm.weight"), c->dim, err, errlen)) == NULL ||
			llm_model_load_matrix(m, f, BLK("attn_q.weight"), c->dim, q_dim, &L->wq, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("attn_k.weight"), c->dim, kv_dim, &L->wk, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("attn_v.weight"), c->dim, kv_dim, &L->wv, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("attn_output.weight"), q_dim, c->dim, &L->wo, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("ffn_gate.weight"), c->dim, c->ffn_dim, &L->w_gate, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("ffn_up.weight"), c->dim, c->ffn_dim, &L->w_up, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("ffn_down.weight"), c->ffn_dim, c->dim, &L->w_down, err, errlen))
			return -1;
#undef BLK
	}
	c->weight_type = layers[0].wq.type;
	return 0;
}

static void
llama_free_state(llm_model *m)
{
	llama_layer *layers = m->arch_state;

	if (layers == NULL)
		return;
	for (int l = 0; l < m->cfg.n_layers; l++)
	{
		llama_layer *L = &layers[l];
		llm_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};

		for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
			llm_model_free_weight(m, ws[i]);
		llm_model_free_vector(m, &L->attn_norm);
		llm_model_free_vector(m, &L->ffn_norm);
	}
	free(layers);
	m->arch_state = NULL;
}

static int
llama_forward(llm_model *m, const llm_step_desc *d)
{
	const llm_model_config *c = &m->cfg;
	const llama_layer *layers = m->arch_state;
	llm_backend *b = m->b;
	const llm_backend_ops *o = b->ops;
	llm_activations *a = &m->act;
	const int	n = d->n_tokens;

#define TRY(call) do { if ((call) != 0) return -1; } while (0)
	TRY(o->embed(b, &m->tok_embd, a->x));
	TRY(o->rmsnorm(b, a->x, layers[0].attn_norm, a->h, n, c->dim, c->rms_eps));
	for (int l = 0; l < c->n_layers; l++)
	{
		const llama_layer *L = &layers[l];
		const float *next_norm = (l + 1 < c->n_layers) ? layers[l + 1].attn_norm : m->output_norm;

		/* attention block */
		{
			const llm_weight *w[3] = {&L->wq, &L->wk, &L->wv};
			float	   *y[3] = {a->q, a->k, a->v};

			TRY(llm_model_matmul_multi(b, w, 3, a->h, y, n));
		}
		TRY(o->rope_store_kv(b, l, a->q, a->k, a->v, c->n_heads, c->layer[l].rope_theta));
		TRY(o->attention(b, l, a->q, a->attn, c->n_heads, c->attn_scale, c->layer[l].attn_window));
		TRY(o->matmul(b, &L->wo, a->attn, a->tmp, n));
		TRY(o->add_rmsnorm(b, a->x, a->tmp, L->ffn_norm, a->h, n, c->dim, c->rms_eps));

		/* SwiGLU feed-forward block */
		{
			const llm_weight *w[2] = {&L->w_gate, &L->w_up};
			float	   *y[2] = {a->gate, a->up};

			TRY(llm_model_matmul_multi(b, w, 2, a->h, y, n));
		}
		TRY(o->silu_mul(b, a->gate, a->up, a->gate, (size_t) n * c->ffn_dim));
		TRY(o->matmul(b, &L->w_down, a->gate, a->tmp, n));
		/* residual add, then the next layer's attention norm (or the final norm) */
		TRY(o->add_rmsnorm(b, a->x, a->tmp, next_norm, a->h, n, c->dim, c->rms_eps));
	}
#undef TRY
	return 0;
}

const llm_arch llm_arch_llama = {
	.name = "llama",
	.read_config = llama_read_config,
	.load = llama_load,
	.forward = llama_forward,
	.free_state = llama_free_state,
};
