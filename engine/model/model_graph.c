/*
 * model_graph.c — the one graph builder: a pre-norm decoder (or encoder)
 * block stack whose differences between architectures are options
 * (model_arch.h llm_graph_opts, per-layer llm_layer_config, optional
 * tensors).  One step:
 *
 *   x = embed(tokens)                      [* sqrt(dim): embed_scale] [* embedding_scale]
 *   h = Norm(x) * attn_norm [+ attn_norm_b]
 *   per layer l:
 *     q, k, v = Wq h, Wk h, Wv h [+ bq, bk, bv: bias rows, add_broadcast]
 *       (a fused QKV or gate/up matrix is loaded as its parts: the same rows)
 *     [q = RMSNorm_head(q) * q_norm, k = RMSNorm_head(k) * k_norm]  (rows loaded)
 *     RoPE of the layer's mode (normal pairs, NEOX halves, none) and base on
 *       q and k over rope_dims values of each head [/ rope_freqs]
 *     [q = q * attn_scale: q_prescale, then the softmax scale is 1]
 *     a = Wo attention(q; causal or bidirectional, the layer's window,
 *       [scores soft-capped: attn_logit_softcap]) [+ bo]
 *     [a = RMSNorm(a) * post_attn_norm] [a = a * residual_scale]
 *     x = x + a; h = Norm(x) * ffn_norm [+ ffn_norm_b]
 *     f = Wdown (act(Wgate h) * Wup h)     act: SiLU or GELU (tanh)
 *     [f = RMSNorm(f) * post_ffw_norm] [f = f * residual_scale]
 *     x = x + f; h = Norm(x) * (next layer's attn_norm, or output_norm)
 *   (model.c applies the output projection and the final soft-cap)
 * Norm is RMSNorm or, with LLM_NORM_LAYER, LayerNorm with its bias; the
 * per-head and post norms are RMSNorms.  With RMSNorm the residual add and
 * the next norm are one op (add_rmsnorm), which changes no value.
 *
 * Two attention paths.  The cached path serves every causal layer:
 * rope_store_kv / _mode for normal or NEOX RoPE on the whole head without
 * factors or scaling (llama and Gemma 3, op for op as their reference
 * graphs), rope_store_kv_opts for the rest (partial rotary dims,
 * frequency factors, linear scaling, LongRoPE's factors and attention
 * factor, a layer without RoPE); attention over the paged cache, or
 * attention_softcap when the scores are soft-capped.  A bidirectional
 * (encoder) graph runs on the step-local path (rope_rows, then
 * attention_rows over the step's own k and v, nothing cached), which is
 * exact only when every key a query sees is in the step: llm_graph_check_step
 * refuses other steps with an error naming the option.
 *
 * The post-norm encoder (graph option post_norm, BERT) is a second block
 * order over the same ops, forward_post_norm below:
 *
 *   x = LayerNorm(embed(tokens) [+ token type row 0] [+ position row])
 *         * token_embd_norm + b
 *   per layer:
 *     q, k, v = Wq x + bq, Wk x + bk, Wv x + bv
 *     a = Wo attention(q; bidirectional, step-local) + bo
 *     x = LayerNorm(a + x) * attn_out_norm + b
 *     f = Wdown act(Wup x + b_up) + b_down    act: erf GELU
 *     x = LayerNorm(f + x) * layer_out_norm + b
 *   the last x is the final hidden state (m->act.h); there is no output norm
 * Biases are applied when their rows loaded them (add_broadcast).
 */
#include "model_arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Why layer l runs on the step-local path; NULL = the cached path. */
static const char *
local_reason(const llm_model *m, int l)
{
	if (m->arch->graph.bidirectional)
		return "bidirectional attention";
	return NULL;
}

/* The RoPE of layer l as rope_store_kv_opts takes it. */
static llm_rope_opts
layer_rope(const llm_model *m, int l)
{
	const llm_hparams *hp = &m->hp;
	llm_rope_opts ro;

	ro.mode = m->cfg.layer[l].rope_mode;
	ro.n_rot = hp->rope_dims;
	ro.theta = m->cfg.layer[l].rope_theta;
	/* llama.cpp: rope_freq_scale = 1 / rope.scaling.factor for linear scaling (its default type) */
	ro.freq_scale = hp->rope_scaling == LLM_ROPE_SCALING_LINEAR && hp->rope_scale_factor > 0.0f ?
		1.0f / hp->rope_scale_factor : 1.0f;
	ro.mscale = hp->rope_attn_factor > 0.0f ? hp->rope_attn_factor : 1.0f;
	ro.freq_factors = m->rope_ff;
	return ro;
}

/*
 * Why layer l's cached RoPE needs rope_store_kv_opts (NULL: rope_store_kv
 * or rope_store_kv_mode do it, op for op as before the options).
 */
static const char *
rope_opts_reason(const llm_model *m, int l)
{
	const llm_rope_opts ro = layer_rope(m, l);

	if (ro.mode == LLM_ROPE_NONE)
		return "a layer without RoPE";
	if (ro.n_rot != m->cfg.head_dim)
		return "partial rotary dimensions";
	if (m->rope_freqs != NULL || m->rope_long != NULL)
		return "RoPE frequency factors";
	if (ro.freq_scale != 1.0f || ro.mscale != 1.0f)
		return "RoPE scaling";
	return NULL;
}

static int
need_op(const llm_model *m, const void *op, const char *name, const char *why, char *err, size_t errlen)
{
	if (op != NULL)
		return 0;
	snprintf(err, errlen, "the %s backend has no %s op, which the %s graph needs for %s",
			 m->b->ops->name, name, m->arch->name, why);
	return -1;
}

int
llm_graph_check(const llm_model *m, char *err, size_t errlen)
{
	const llm_backend_ops *o = m->b->ops;
	const llm_graph_opts *g = &m->arch->graph;

	if (g->norm == LLM_NORM_LAYER &&
		need_op(m, (const void *) o->layernorm, "layernorm", "LayerNorm", err, errlen))
		return -1;
	if (g->ffn_act == LLM_ACT_GELU && need_op(m, (const void *) o->gelu_mul, "gelu_mul", "GeGLU", err, errlen))
		return -1;
	if (g->ffn_act == LLM_ACT_GELU_ERF && need_op(m, (const void *) o->gelu_erf, "gelu_erf", "GELU", err, errlen))
		return -1;
	if (g->post_norm &&
		((m->pos_embd.data != NULL || m->type_embd.data != NULL) &&
		 need_op(m, (const void *) o->add_table_rows, "add_table_rows", "its input embeddings", err, errlen)))
		return -1;
	if (g->post_norm && need_op(m, (const void *) o->add_broadcast, "add_broadcast", "its biases", err, errlen))
		return -1;
	if ((g->embed_scale || g->q_prescale || m->hp.embedding_scale != 0.0f || m->hp.residual_scale != 0.0f ||
		 m->cfg.logit_scale > 0.0f) &&
		need_op(m, (const void *) o->scale, "scale", "its scaling", err, errlen))
		return -1;
	for (int l = 0; l < m->cfg.n_layers; l++)
		if (m->layers[l].wq.data == NULL || m->layers[l].wk.data == NULL || m->layers[l].wv.data == NULL)
		{
			/* a table with a fused row and separate rows, both optional, found neither */
			snprintf(err, errlen, "layer %d: no Q, K and V weights (blk.%d.attn_qkv.weight or "
					 "blk.%d.attn_q/k/v.weight)", l, l, l);
			return -1;
		}
	for (int l = 0; l < m->cfg.n_layers; l++)
		if ((m->layers[l].bq || m->layers[l].bk || m->layers[l].bv || m->layers[l].bo) &&
			need_op(m, (const void *) o->add_broadcast, "add_broadcast", "its bias rows", err, errlen))
			return -1;
	for (int l = 0; l < m->cfg.n_layers; l++)
	{
		const char *why = local_reason(m, l);

		if (why == NULL)
		{
			const char *ropt = rope_opts_reason(m, l);

			if (ropt != NULL &&
				need_op(m, (const void *) o->rope_store_kv_opts, "rope_store_kv_opts", ropt, err, errlen))
				return -1;
			if (ropt == NULL && m->cfg.layer[l].rope_mode == LLM_ROPE_NEOX &&
				need_op(m, (const void *) o->rope_store_kv_mode, "rope_store_kv_mode", "NEOX RoPE", err, errlen))
				return -1;
			if (m->hp.attn_logit_softcap > 0.0f &&
				need_op(m, (const void *) o->attention_softcap, "attention_softcap",
						"attention logit soft-capping", err, errlen))
				return -1;
			continue;
		}
		if (need_op(m, (const void *) o->rope_rows, "rope_rows", why, err, errlen) ||
			need_op(m, (const void *) o->attention_rows, "attention_rows", why, err, errlen))
			return -1;
	}
	return 0;
}

bool
llm_graph_whole_sequences(const llm_model *m)
{
	for (int l = 0; l < m->cfg.n_layers; l++)
		if (local_reason(m, l) != NULL)
			return true;
	return false;
}

int
llm_graph_check_step(const llm_model *m, const llm_step_desc *d, char *err, size_t errlen)
{
	const char *why = NULL;

	for (int l = 0; l < m->cfg.n_layers && why == NULL; l++)
		why = local_reason(m, l);
	if (why == NULL)
		return 0;
	for (int s = 0; s < d->n_seqs; s++)
	{
		int			rows = d->seq_start[s + 1] - d->seq_start[s];

		if (d->seq_kv_len[s] != rows)
		{
			snprintf(err, errlen, "the %s graph computes %s within one step: sequence %d has %d keys "
					 "but %d rows in this step (a sequence must be given whole)",
					 m->arch->name, why, s, d->seq_kv_len[s], rows);
			return -1;
		}
	}
	return 0;
}

/* out = Norm(x) * w [+ bias] (RMSNorm or LayerNorm). */
static int
norm(const llm_model *m, const float *x, const float *w, const float *bias, float *out, int n)
{
	const llm_backend_ops *o = m->b->ops;

	if (m->arch->graph.norm == LLM_NORM_LAYER)
		return o->layernorm(m->b, x, w, bias, out, n, m->cfg.dim, m->cfg.rms_eps);
	return o->rmsnorm(m->b, x, w, out, n, m->cfg.dim, m->cfg.rms_eps);
}

/* x += delta; out = Norm(x) * w [+ bias]. */
static int
add_norm(const llm_model *m, float *x, const float *delta, const float *w, const float *bias, float *out, int n)
{
	const llm_backend_ops *o = m->b->ops;

	if (m->arch->graph.norm == LLM_NORM_LAYER)
		return o->add(m->b, x, delta, n, m->cfg.dim) ||
			o->layernorm(m->b, x, w, bias, out, n, m->cfg.dim, m->cfg.rms_eps) ? -1 : 0;
	return o->add_rmsnorm(m->b, x, delta, w, out, n, m->cfg.dim, m->cfg.rms_eps);
}

/* q, k, v of layer l (in m->act) through RoPE and attention into m->act.attn. */
static int
attention_block(llm_model *m, const llm_step_desc *d, int l)
{
	const llm_model_config *c = &m->cfg;
	const llm_layer_config *lc = &c->layer[l];
	const llm_graph_opts *g = &m->arch->graph;
	llm_backend *b = m->b;
	const llm_backend_ops *o = b->ops;
	llm_activations *a = &m->act;
	const size_t q_elems = (size_t) d->n_tokens * c->n_heads * c->head_dim;
	const float scale = g->q_prescale ? 1.0f : c->attn_scale;

	if (local_reason(m, l) == NULL)
	{
		if (rope_opts_reason(m, l) != NULL)
		{
			const llm_rope_opts ro = layer_rope(m, l);

			if (o->rope_store_kv_opts(b, l, a->q, a->k, a->v, c->n_heads, &ro) != 0)
				return -1;
		}
		else if (lc->rope_mode == LLM_ROPE_NORMAL)
		{
			if (o->rope_store_kv(b, l, a->q, a->k, a->v, c->n_heads, lc->rope_theta) != 0)
				return -1;
		}
		else if (o->rope_store_kv_mode(b, l, a->q, a->k, a->v, c->n_heads, lc->rope_theta, lc->rope_mode) != 0)
			return -1;
		if (g->q_prescale && o->scale(b, a->q, c->attn_scale, q_elems) != 0)
			return -1;
		if (m->hp.attn_logit_softcap > 0.0f)
			return o->attention_softcap(b, l, a->q, a->attn, c->n_heads, scale, lc->attn_window,
										m->hp.attn_logit_softcap);
		return o->attention(b, l, a->q, a->attn, c->n_heads, scale, lc->attn_window);
	}
	else
	{
		llm_attn_opts ao;

		if (lc->rope_mode != LLM_ROPE_NONE &&
			(o->rope_rows(b, d, a->q, c->n_heads, c->head_dim, lc->rope_theta, m->hp.rope_dims,
						  m->rope_ff, lc->rope_mode) != 0 ||
			 o->rope_rows(b, d, a->k, c->n_kv_heads, c->head_dim, lc->rope_theta, m->hp.rope_dims,
						  m->rope_ff, lc->rope_mode) != 0))
			return -1;
		if (g->q_prescale && o->scale(b, a->q, c->attn_scale, q_elems) != 0)
			return -1;
		memset(&ao, 0, sizeof(ao));
		ao.scale = scale;
		ao.softcap = m->hp.attn_logit_softcap;
		ao.window = lc->attn_window;
		ao.causal = !g->bidirectional;
		return o->attention_rows(b, d, a->q, a->k, a->v, a->attn, c->n_heads, c->n_kv_heads, c->head_dim, &ao);
	}
}

/* y = y + bias over n rows of width w, when the bias row was loaded. */
static int
bias_add(const llm_model *m, float *y, const float *bias, int n, int w)
{
	return bias != NULL ? m->b->ops->add_broadcast(m->b, y, bias, y, n, w) : 0;
}

/* The post-norm encoder stack (graph option post_norm); see the header. */
static int
forward_post_norm(llm_model *m, const llm_step_desc *d)
{
	const llm_model_config *c = &m->cfg;
	const llm_layer_weights *layers = m->layers;
	llm_backend *b = m->b;
	const llm_backend_ops *o = b->ops;
	llm_activations *a = &m->act;
	const int	n = d->n_tokens;
	const int	qd = c->n_heads * c->head_dim,
				kvd = c->n_kv_heads * c->head_dim;

#define TRY(call) do { if ((call) != 0) return -1; } while (0)
	/* token + type row 0 + position, in that order (llama.cpp's bert graph, HF BertEmbeddings) */
	TRY(o->embed(b, &m->tok_embd, a->x));
	if (m->type_embd.data != NULL)
		TRY(o->add_table_rows(b, &m->type_embd, false, 0, a->x));
	if (m->pos_embd.data != NULL)
		TRY(o->add_table_rows(b, &m->pos_embd, true, 0, a->x));
	TRY(o->layernorm(b, a->x, m->tok_norm, m->tok_norm_b, a->h, n, c->dim, c->rms_eps));
	for (int l = 0; l < c->n_layers; l++)
	{
		const llm_layer_weights *L = &layers[l];

		{
			const llm_weight *w[3] = {&L->wq, &L->wk, &L->wv};
			float	   *y[3] = {a->q, a->k, a->v};

			TRY(llm_model_matmul_multi(b, w, 3, a->h, y, n));
		}
		TRY(bias_add(m, a->q, L->bq, n, qd));
		TRY(bias_add(m, a->k, L->bk, n, kvd));
		TRY(bias_add(m, a->v, L->bv, n, kvd));
		TRY(attention_block(m, d, l));
		TRY(o->matmul(b, &L->wo, a->attn, a->tmp, n));
		TRY(bias_add(m, a->tmp, L->bo, n, c->dim));
		TRY(o->add(b, a->tmp, a->h, n, c->dim));
		TRY(o->layernorm(b, a->tmp, L->attn_out_norm, L->attn_out_norm_b, a->h, n, c->dim, c->rms_eps));

		TRY(o->matmul(b, &L->w_up, a->h, a->up, n));
		TRY(bias_add(m, a->up, L->b_up, n, c->ffn_dim));
		TRY(o->gelu_erf(b, a->up, a->up, (size_t) n * c->ffn_dim));
		TRY(o->matmul(b, &L->w_down, a->up, a->tmp, n));
		TRY(bias_add(m, a->tmp, L->b_down, n, c->dim));
		TRY(o->add(b, a->tmp, a->h, n, c->dim));
		TRY(o->layernorm(b, a->tmp, L->layer_out_norm, L->layer_out_norm_b, a->h, n, c->dim, c->rms_eps));
	}
#undef TRY
	return 0;
}

int
llm_graph_forward(llm_model *m, const llm_step_desc *d)
{
	const llm_model_config *c = &m->cfg;
	const llm_graph_opts *g = &m->arch->graph;
	const llm_layer_weights *layers = m->layers;
	llm_backend *b = m->b;
	const llm_backend_ops *o = b->ops;
	llm_activations *a = &m->act;
	const int	n = d->n_tokens;

	if (g->post_norm)
		return forward_post_norm(m, d);
#define TRY(call) do { if ((call) != 0) return -1; } while (0)
	TRY(o->embed(b, &m->tok_embd, a->x));
	if (g->embed_scale)
		TRY(o->scale(b, a->x, sqrtf((float) c->dim), (size_t) n * c->dim));
	if (m->hp.embedding_scale != 0.0f)
		TRY(o->scale(b, a->x, m->hp.embedding_scale, (size_t) n * c->dim));
	TRY(norm(m, a->x, layers[0].attn_norm, layers[0].attn_norm_b, a->h, n));
	for (int l = 0; l < c->n_layers; l++)
	{
		const llm_layer_weights *L = &layers[l];
		const bool	last = l + 1 == c->n_layers;
		const float *next_norm = last ? m->output_norm : layers[l + 1].attn_norm;
		const float *next_bias = last ? m->output_norm_b : layers[l + 1].attn_norm_b;

		/* attention block */
		{
			const llm_weight *w[3] = {&L->wq, &L->wk, &L->wv};
			float	   *y[3] = {a->q, a->k, a->v};

			TRY(llm_model_matmul_multi(b, w, 3, a->h, y, n));
		}
		if (L->bq)
			TRY(o->add_broadcast(b, a->q, L->bq, a->q, n, c->n_heads * c->head_dim));
		if (L->bk)
			TRY(o->add_broadcast(b, a->k, L->bk, a->k, n, c->n_kv_heads * c->head_dim));
		if (L->bv)
			TRY(o->add_broadcast(b, a->v, L->bv, a->v, n, c->n_kv_heads * c->head_dim));
		if (L->q_norm)
			TRY(o->rmsnorm(b, a->q, L->q_norm, a->q, n * c->n_heads, c->head_dim, c->rms_eps));
		if (L->k_norm)
			TRY(o->rmsnorm(b, a->k, L->k_norm, a->k, n * c->n_kv_heads, c->head_dim, c->rms_eps));
		TRY(attention_block(m, d, l));
		TRY(o->matmul(b, &L->wo, a->attn, a->tmp, n));
		if (last && o->tail_rows != NULL)
			TRY(o->tail_rows(b));
		if (L->bo)
			TRY(o->add_broadcast(b, a->tmp, L->bo, a->tmp, n, c->dim));
		if (L->post_attn_norm)
			TRY(o->rmsnorm(b, a->tmp, L->post_attn_norm, a->tmp, n, c->dim, c->rms_eps));
		if (m->hp.residual_scale != 0.0f)
			TRY(o->scale(b, a->tmp, m->hp.residual_scale, (size_t) n * c->dim));
		TRY(add_norm(m, a->x, a->tmp, L->ffn_norm, L->ffn_norm_b, a->h, n));

		/* gated feed-forward block */
		{
			const llm_weight *w[2] = {&L->w_gate, &L->w_up};
			float	   *y[2] = {a->gate, a->up};

			TRY(llm_model_matmul_multi(b, w, 2, a->h, y, n));
		}
		if (g->ffn_act == LLM_ACT_GELU)
			TRY(o->gelu_mul(b, a->gate, a->up, a->gate, (size_t) n * c->ffn_dim));
		else
			TRY(o->silu_mul(b, a->gate, a->up, a->gate, (size_t) n * c->ffn_dim));
		TRY(o->matmul(b, &L->w_down, a->gate, a->tmp, n));
		if (L->post_ffw_norm)
			TRY(o->rmsnorm(b, a->tmp, L->post_ffw_norm, a->tmp, n, c->dim, c->rms_eps));
		if (m->hp.residual_scale != 0.0f)
			TRY(o->scale(b, a->tmp, m->hp.residual_scale, (size_t) n * c->dim));
		/* residual add, then the next layer's attention norm (or the final norm) */
		TRY(add_norm(m, a->x, a->tmp, next_norm, next_bias, a->h, n));
	}
#undef TRY
	return 0;
}

int
llm_model_matmul_multi(llm_backend *b, const llm_weight *const *w, int n_w, const float *x, float *const *y, int n)
{
	if (b->ops->matmul_multi != NULL)
		return b->ops->matmul_multi(b, w, n_w, x, y, n);
	for (int i = 0; i < n_w; i++)
		if (b->ops->matmul(b, w[i], x, y[i], n) != 0)
			return -1;
	return 0;
}
