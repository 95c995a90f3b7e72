/*
 * arch_gemma3.c — the Gemma 3 architecture (general.architecture
 * "gemma3": Gemma 3 270M / 1B text models and larger ones' text stacks).
 *
 * Reference: llama.cpp's LLM_ARCH_GEMMA3 (llama-cpp-python 0.3.36's
 * vendored llama.cpp: src/models/gemma3.cpp for the hyper-parameters,
 * tensors and graph; llama-hparams.cpp for the sliding-window pattern;
 * llama-model.cpp for the per-layer RoPE base).
 *
 * Hyper-parameters (GGUF keys "gemma3.*", read as llama.cpp reads them):
 *  - block_count, embedding_length, attention.head_count,
 *    feed_forward_length, context_length, attention.layer_norm_rms_epsilon:
 *    required;
 *  - attention.head_count_kv: default head_count;
 *  - attention.key_length: default embedding_length / head_count;
 *    attention.value_length and rope.dimension_count: default key_length and
 *    must equal it (one head size for Q, K and V; RoPE on the whole head);
 *  - rope.freq_base: the global layers' base, default 10000;
 *  - attention.sliding_window: the local layers' window in keys (the
 *    query's own included: a query at p sees p - window + 1 .. p, llama.cpp's
 *    LLAMA_SWA_TYPE_STANDARD); absent or 0: every layer global;
 *  - attention.sliding_window_pattern: a per-layer array (true = local) or
 *    a period n (layer l local iff l % n < n - 1; n = 0: all local);
 *    absent: llama.cpp's HARD-CODED period 6 (5 local : 1 global);
 *  - rope.freq_base_swa: the local layers' base; absent: llama.cpp's
 *    HARD-CODED 10000 (hparams.rope_freq_base_train_swa's default);
 *  - final_logit_softcapping: default 0 (none); when positive, model.c caps
 *    the logits;
 *  - the attention scale is not read from the file: llama.cpp HARD-CODES
 *    1/sqrt(key_length), or 1/sqrt(embedding_length / head_count) for the
 *    62-layer model (Gemma 3 27B), after gemma_pytorch's config;
 *  - the embedding scale sqrt(embedding_length) is HARD-CODED in the graph.
 *  Refused: rope.scaling.type other than "none" (Gemma 3 4B and larger use
 *  linear scaling on their global layers; the backend has no frequency
 *  scale), a fused blk.N.attn_qkv and Q/K/V/output biases (llama.cpp's
 *  loader would take them; Gemma files have none).
 *
 * Tensors: token_embd, output_norm, output (absent, as in the Gemma files:
 * tied to the embedding) and per layer blk.N.{attn_norm, attn_q, attn_k,
 * attn_v, attn_q_norm, attn_k_norm, attn_output, post_attention_norm,
 * ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm}.weight (llama.cpp's
 * LLM_TENSOR_* names for LLM_ARCH_GEMMA3).  The GGUF converter stores every
 * RMSNorm weight as 1 + w (Gemma's norm multiplies by 1 + w): the stored
 * vector is the multiplier and is used as is, as llama.cpp does.
 *
 * Graph (llama.cpp's gemma3 graph, same operations in the same order):
 *   x = embed(tokens) * sqrt(dim)                      (ggml_scale)
 *   per layer l:
 *     h = RMSNorm(x) * attn_norm
 *     q, k, v = Wq h, Wk h, Wv h
 *     q = RMSNorm_head(q) * attn_q_norm, k = RMSNorm_head(k) * attn_k_norm
 *       (over each head's head_dim values)
 *     RoPE NEOX mode (halves) on q, k with the layer's base; k, v to the cache
 *     q = q * attn_scale                               (ggml_scale; softmax scale 1)
 *     a = Wo attention(q, window of the layer: local or all keys)
 *     x = x + RMSNorm(a) * post_attention_norm
 *     h = RMSNorm(x) * ffn_norm
 *     f = Wdown (gelu_tanh(Wgate h) * Wup h)           (GeGLU, ggml's fp16 table)
 *     x = x + RMSNorm(f) * post_ffw_norm
 *   final: h = RMSNorm(x) * output_norm (model.c: output projection, soft-cap)
 * Every RMSNorm is ggml's (backend.h rmsnorm).  The residual add and the
 * next norm are fused (add_rmsnorm), which changes no value.
 */
#include "model_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's defaults where the file says nothing (see the header). */
#define GEMMA3_SWA_PERIOD		6
#define GEMMA3_ROPE_BASE_SWA	10000.0f
#define GEMMA3_27B_LAYERS		62

typedef struct gemma3_layer
{
	float	   *attn_norm;
	float	   *q_norm;			/* [head_dim] */
	float	   *k_norm;			/* [head_dim] */
	float	   *post_attn_norm;
	float	   *ffn_norm;
	float	   *post_ffw_norm;
	llm_weight	wq, wk, wv, wo;
	llm_weight	w_gate, w_up, w_down;
} gemma3_layer;

typedef struct gemma3_state
{
	float		embed_scale;	/* sqrt(dim) */
	gemma3_layer *layers;		/* [n_layers] */
} gemma3_state;

/* Which layers are local: the pattern key (array or period), else period 6. */
static int
read_swa_pattern(llm_model *m, const gguf_file *f, bool *local, char *err, size_t errlen)
{
	const llm_model_config *c = &m->cfg;
	char		key[96];
	const gguf_kv *kv;
	int64_t		period = GEMMA3_SWA_PERIOD;

	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", c->arch);
	kv = gguf_find_kv(f, key);
	if (kv != NULL && kv->type == GGUF_VT_ARRAY)
	{
		if (kv->arr_n != (uint64_t) c->n_layers ||
			(kv->arr_type != GGUF_VT_BOOL && kv->arr_type != GGUF_VT_UINT8 &&
			 kv->arr_type != GGUF_VT_INT32 && kv->arr_type != GGUF_VT_UINT32))
		{
			snprintf(err, errlen, "GGUF metadata %s: expected %d booleans", key, c->n_layers);
			return -1;
		}
		for (int l = 0; l < c->n_layers; l++)
			local[l] = gguf_arr_int(kv, (uint64_t) l) != 0;
		return 0;
	}
	if (kv != NULL && (!gguf_get_int(f, key, &period) || period < 0 || period > (1 << 24)))
	{
		snprintf(err, errlen, "GGUF metadata %s: not a layer period", key);
		return -1;
	}
	for (int l = 0; l < c->n_layers; l++)
		local[l] = period == 0 || (l % period < period - 1);
	return 0;
}

static int
gemma3_read_config(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;
	const char *a = c->arch;
	int32_t		window = 0;
	float		theta_swa = GEMMA3_ROPE_BASE_SWA;
	bool	   *local;
	gguf_str	s;
	char		key[96];

	if (llm_model_get_i32(f, a, "block_count", &c->n_layers, true, err, errlen) ||
		llm_model_get_i32(f, a, "embedding_length", &c->dim, true, err, errlen) ||
		llm_model_get_i32(f, a, "attention.head_count", &c->n_heads, true, err, errlen) ||
		llm_model_get_i32(f, a, "feed_forward_length", &c->ffn_dim, true, err, errlen) ||
		llm_model_get_i32(f, a, "context_length", &c->n_ctx_train, true, err, errlen))
		return -1;
	if (!llm_model_get_f32(f, a, "attention.layer_norm_rms_epsilon", &c->rms_eps))
	{
		snprintf(err, errlen, "GGUF metadata %s.attention.layer_norm_rms_epsilon missing", a);
		return -1;
	}
	c->n_kv_heads = c->n_heads;
	if (llm_model_get_i32(f, a, "attention.head_count_kv", &c->n_kv_heads, false, err, errlen))
		return -1;
	if (c->n_heads % c->n_kv_heads != 0)
	{
		snprintf(err, errlen, "inconsistent head counts: heads %d, kv heads %d", c->n_heads, c->n_kv_heads);
		return -1;
	}
	c->head_dim = c->dim / c->n_heads;
	if (llm_model_get_i32(f, a, "attention.key_length", &c->head_dim, false, err, errlen))
		return -1;
	{
		int32_t		vl = c->head_dim;
		int32_t		rd = c->head_dim;

		if (llm_model_get_i32(f, a, "attention.value_length", &vl, false, err, errlen) ||
			llm_model_get_i32(f, a, "rope.dimension_count", &rd, false, err, errlen))
			return -1;
		if (vl != c->head_dim || rd != c->head_dim || c->head_dim % 2 != 0)
		{
			snprintf(err, errlen, "unsupported head geometry (key_length %d, value_length %d, rope dims %d)",
					 c->head_dim, vl, rd);
			return -1;
		}
	}
	c->rope_theta = 10000.0f;
	(void) llm_model_get_f32(f, a, "rope.freq_base", &c->rope_theta);
	(void) llm_model_get_f32(f, a, "rope.freq_base_swa", &theta_swa);
	snprintf(key, sizeof(key), "%s.rope.scaling.type", a);
	if (gguf_get_str(f, key, &s) && !gguf_str_eq(s, "none"))
	{
		snprintf(err, errlen, "RoPE scaling \"%.*s\" is not supported", (int) s.len, s.ptr);
		return -1;
	}
	c->final_logit_softcap = 0.0f;
	(void) llm_model_get_f32(f, a, "final_logit_softcapping", &c->final_logit_softcap);
	if (!(c->rope_theta > 0.0f) || !(theta_swa > 0.0f) || !(c->rms_eps > 0.0f) ||
		!(c->final_logit_softcap >= 0.0f))
	{
		snprintf(err, errlen, "invalid RoPE base, RMS epsilon or logit soft-cap");
		return -1;
	}
	c->attn_scale = c->n_layers == GEMMA3_27B_LAYERS ?
		1.0f / sqrtf((float) (c->dim / c->n_heads)) : 1.0f / sqrtf((float) c->head_dim);

	if (llm_model_alloc_layers(m, err, errlen) != 0)
		return -1;
	snprintf(key, sizeof(key), "%s.attention.sliding_window", a);
	if (gguf_find_kv(f, key) != NULL)
	{
		int64_t		w;

		if (!gguf_get_int(f, key, &w) || w < 0 || w > (1 << 24))
		{
			snprintf(err, errlen, "GGUF metadata %s: not a window size", key);
			return -1;
		}
		window = (int32_t) w;
	}
	local = calloc((size_t) c->n_layers, sizeof(bool));
	if (local == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (window > 0 && read_swa_pattern(m, f, local, err, errlen) != 0)
	{
		free(local);
		return -1;
	}
	for (int l = 0; l < c->n_layers; l++)
	{
		bool		is_local = window > 0 && local[l];

		m->layer_cfg[l].attn_window = is_local ? window : 0;
		m->layer_cfg[l].rope_theta = is_local ? theta_swa : c->rope_theta;
	}
	free(local);
	return 0;
}

/* Tensors llama.cpp's loader would accept but this graph does not compute with. */
static int
refuse_extras(const gguf_file *f, int l, char *err, size_t errlen)
{
	static const char *const extras[] = {
		"attn_qkv.weight", "attn_qkv.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias",
	};
	char		name[128];

	for (size_t i = 0; i < sizeof(extras) / sizeof(extras[0]); i++)
	{
		snprintf(name, sizeof(name), "blk.%d.%s", l, extras[i]);
		if (gguf_find_tensor(f, name) != NULL)
		{
			snprintf(err, errlen, "tensor %s is not supported by the gemma3 graph", name);
			return -1;
		}
	}
	return 0;
}

static int
gemma3_load(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;
	const int64_t q_dim = (int64_t) c->n_heads * c->head_dim;
	const int64_t kv_dim = (int64_t) c->n_kv_heads * c->head_dim;
	gemma3_state *st;
	char		name[128];

	if (llm_model_load_head(m, f, err, errlen) != 0)
		return -1;
	st = calloc(1, sizeof(gemma3_state));
	if (st == NULL || (st->layers = calloc((size_t) c->n_layers, sizeof(gemma3_layer))) == NULL)
	{
		free(st);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->arch_state = st;
	st->embed_scale = sqrtf((float) c->dim);
	for (int l = 0; l < c->n_layers; l++)
	{
		gemma3_layer *L = &st->layers[l];

		if (refuse_extras(f, l, err, errlen) != 0)
			return -1;
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%d.%s", l, suffix), name)
#define VEC(field, suffix, n) \
		((L->field = llm_model_load_vector(m, f, BLK(suffix), (n), err, errlen)) == NULL)
		if (VEC(attn_norm, "attn_norm.weight", c->dim) ||
			VEC(q_norm, "attn_q_norm.weight", c->head_dim) ||
			VEC(k_norm, "attn_k_norm.weight", c->head_dim) ||
			VEC(post_attn_norm, "post_attention_norm.weight", c->dim) ||
			VEC(ffn_norm, "ffn_norm.weight", c->dim) ||
			VEC(post_ffw_norm, "post_ffw_norm.weight", c->dim) ||
			llm_model_load_matrix(m, f, BLK("attn_q.weight"), c->dim, q_dim, &L->wq, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("attn_k.weight"), c->dim, kv_dim, &L->wk, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("attn_v.weight"), c->dim, kv_dim, &L->wv, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("attn_output.weight"), q_dim, c->dim, &L->wo, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("ffn_gate.weight"), c->dim, c->ffn_dim, &L->w_gate, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("ffn_up.weight"), c->dim, c->ffn_dim, &L->w_up, err, errlen) ||
			llm_model_load_matrix(m, f, BLK("ffn_down.weight"), c->ffn_dim, c->dim, &L->w_down, err, errlen))
			return -1;
#undef VEC
#undef BLK
	}
	c->weight_type = st->layers[0].wq.type;
	return 0;
}

static void
gemma3_free_state(llm_model *m)
{
	gemma3_state *st = m->arch_state;

	if (st == NULL)
		return;
	for (int l = 0; st->layers != NULL && l < m->cfg.n_layers; l++)
	{
		gemma3_layer *L = &st->layers[l];
		llm_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
		float	  **vs[] = {&L->attn_norm, &L->q_norm, &L->k_norm, &L->post_attn_norm, &L->ffn_norm,
		&L->post_ffw_norm};

		for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
			llm_model_free_weight(m, ws[i]);
		for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++)
			llm_model_free_vector(m, vs[i]);
	}
	free(st->layers);
	free(st);
	m->arch_state = NULL;
}

static int
gemma3_forward(llm_model *m, const llm_step_desc *d)
{
	const llm_model_config *c = &m->cfg;
	const gemma3_state *st = m->arch_state;
	const gemma3_layer *layers = st->layers;
	llm_backend *b = m->b;
	const llm_backend_ops *o = b->ops;
	llm_activations *a = &m->act;
	const int	n = d->n_tokens;
	const size_t q_elems = (size_t) n * c->n_heads * c->head_dim;

#define TRY(call) do { if ((call) != 0) return -1; } while (0)
	TRY(o->embed(b, &m->tok_embd, a->x));
	TRY(o->scale(b, a->x, st->embed_scale, (size_t) n * c->dim));
	TRY(o->rmsnorm(b, a->x, layers[0].attn_norm, a->h, n, c->dim, c->rms_eps));
	for (int l = 0; l < c->n_layers; l++)
	{
		const gemma3_layer *L = &layers[l];
		const float *next_norm = (l + 1 < c->n_layers) ? layers[l + 1].attn_norm : m->output_norm;

		/* attention block */
		{
			const llm_weight *w[3] = {&L->wq, &L->wk, &L->wv};
			float	   *y[3] = {a->q, a->k, a->v};

			TRY(llm_model_matmul_multi(b, w, 3, a->h, y, n));
		}
		TRY(o->rmsnorm(b, a->q, L->q_norm, a->q, n * c->n_heads, c->head_dim, c->rms_eps));
		TRY(o->rmsnorm(b, a->k, L->k_norm, a->k, n * c->n_kv_heads, c->head_dim, c->rms_eps));
		TRY(o->rope_store_kv_mode(b, l, a->q, a->k, a->v, c->n_heads, c->layer[l].rope_theta, LLM_ROPE_NEOX));
		TRY(o->scale(b, a->q, c->attn_scale, q_elems));
		TRY(o->attention(b, l, a->q, a->attn, c->n_heads, 1.0f, c->layer[l].attn_window));
		TRY(o->matmul(b, &L->wo, a->attn, a->tmp, n));
		TRY(o->rmsnorm(b, a->tmp, L->post_attn_norm, a->tmp, n, c->dim, c->rms_eps));
		TRY(o->add_rmsnorm(b, a->x, a->tmp, L->ffn_norm, a->h, n, c->dim, c->rms_eps));

		/* GeGLU feed-forward block */
		{
			const llm_weight *w[2] = {&L->w_gate, &L->w_up};
			float	   *y[2] = {a->gate, a->up};

			TRY(llm_model_matmul_multi(b, w, 2, a->h, y, n));
		}
		TRY(o->gelu_mul(b, a->gate, a->up, a->gate, (size_t) n * c->ffn_dim));
		TRY(o->matmul(b, &L->w_down, a->gate, a->tmp, n));
		TRY(o->rmsnorm(b, a->tmp, L->post_ffw_norm, a->tmp, n, c->dim, c->rms_eps));
		/* residual add, then the next layer's attention norm (or the final norm) */
		TRY(o->add_rmsnorm(b, a->x, a->tmp, next_norm, a->h, n, c->dim, c->rms_eps));
	}
#undef TRY
	return 0;
}

const llm_arch llm_arch_gemma3 = {
	.name = "gemma3",
	.read_config = gemma3_read_config,
	.load = gemma3_load,
	.forward = gemma3_forward,
	.free_state = gemma3_free_state,
};
