/*
 * model.c — llama forward pass over the compute backend (see model.h).
 *
 * Tensor names and hyper-parameter keys follow llama.cpp's GGUF conventions
 * (gguf-py/gguf/constants.py, src/llama-model.cpp); the graph follows
 * src/models/llama.cpp: x = embed; per layer h = RMSNorm(x); attention with
 * RoPE and GQA; x += Wo attn; h = RMSNorm(x); x += Wdown(silu(Wgate h) * Wup h);
 * logits = Wout RMSNorm(x).
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant_types.h"

typedef struct llm_layer
{
	float	   *attn_norm;
	float	   *ffn_norm;
	llm_weight	wq, wk, wv, wo;
	llm_weight	w_gate, w_up, w_down;
} llm_layer;

struct llm_model
{
	llm_model_config cfg;
	llm_backend *b;
	llm_weight	tok_embd;
	llm_weight	output;			/* == tok_embd contents when tied (loaded once) */
	float	   *output_norm;
	llm_layer  *layers;

	/* activation buffers (backend memory), sized for cap_tokens rows */
	int			cap_tokens;
	int			cap_out;
	float	   *x, *h, *q, *k, *v, *attn, *tmp, *gate, *up;
	float	   *out_h, *logits_dev;
};

static int
get_i32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out, bool required,
		char *err, size_t errlen)
{
	char		key[160];
	int64_t		v;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	if (!gguf_get_int(f, key, &v))
	{
		if (required)
			snprintf(err, errlen, "GGUF metadata key %s missing or not an integer", key);
		return required ? -1 : 0;
	}
	if (v <= 0 || v > (1 << 24))
	{
		snprintf(err, errlen, "GGUF metadata %s = %lld out of range", key, (long long) v);
		return -1;
	}
	*out = (int32_t) v;
	return 0;
}

/* Find tensor name with expected [ne0, ne1] (ne1 = 1 for vectors). */
static const gguf_tensor *
find_checked(const gguf_file *f, const char *name, int64_t ne0, int64_t ne1, bool required,
			 char *err, size_t errlen)
{
	const gguf_tensor *t = gguf_find_tensor(f, name);

	if (t == NULL)
	{
		if (required)
			snprintf(err, errlen, "tensor %s missing from GGUF file", name);
		return NULL;
	}
	if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
	{
		snprintf(err, errlen, "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
				 name, (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2],
				 (long long) t->ne[3], (long long) ne0, (long long) ne1);
		return NULL;
	}
	return t;
}

static int
load_matrix(llm_model *m, const gguf_file *f, const char *name, int64_t n_cols, int64_t n_rows,
			llm_weight *out, char *err, size_t errlen)
{
	const gguf_tensor *t = find_checked(f, name, n_cols, n_rows, true, err, errlen);
	llm_weight	host;

	if (t == NULL)
		return -1;
	memset(&host, 0, sizeof(host));
	host.type = t->type;
	host.n_rows = n_rows;
	host.n_cols = n_cols;
	host.row_bytes = llm_type_row_bytes(t->type, n_cols);
	host.data = t->data;
	if (m->b->ops->load_weight(m->b, &host, out) != 0)
	{
		snprintf(err, errlen, "tensor %s (%s): %s", name,
				 llm_type_get(t->type) ? llm_type_get(t->type)->name : "?",
				 m->b->ops->last_error(m->b));
		return -1;
	}
	return 0;
}

static float *
load_norm(llm_model *m, const gguf_file *f, const char *name, int64_t n, char *err, size_t errlen)
{
	const gguf_tensor *t = find_checked(f, name, n, 1, true, err, errlen);
	float	   *dev;

	if (t == NULL)
		return NULL;
	if (t->type != LLM_TYPE_F32)
	{
		snprintf(err, errlen, "tensor %s: norm weights must be F32", name);
		return NULL;
	}
	dev = m->b->ops->load_vector(m->b, (const float *) t->data, (size_t) n);
	if (dev == NULL)
		snprintf(err, errlen, "tensor %s: %s", name, m->b->ops->last_error(m->b));
	return dev;
}

static int
read_config(const gguf_file *f, llm_model_config *c, char *err, size_t errlen)
{
	gguf_str	s;
	double		d;
	const gguf_kv *toks;

	memset(c, 0, sizeof(*c));
	if (!gguf_get_str(f, "general.architecture", &s) || s.len == 0 || s.len >= sizeof(c->arch))
	{
		snprintf(err, errlen, "GGUF metadata general.architecture missing");
		return -1;
	}
	memcpy(c->arch, s.ptr, s.len);
	if (strcmp(c->arch, "llama") != 0)
	{
		snprintf(err, errlen, "unsupported model architecture \"%s\" (supported: llama)", c->arch);
		return -1;
	}
	if (gguf_get_str(f, "general.name", &s))
		snprintf(c->name, sizeof(c->name), "%.*s", (int) (s.len < 127 ? s.len : 127), s.ptr);

	if (get_i32(f, c->arch, "block_count", &c->n_layers, true, err, errlen) ||
		get_i32(f, c->arch, "embedding_length", &c->dim, true, err, errlen) ||
		get_i32(f, c->arch, "attention.head_count", &c->n_heads, true, err, errlen) ||
		get_i32(f, c->arch, "feed_forward_length", &c->ffn_dim, true, err, errlen) ||
		get_i32(f, c->arch, "context_length", &c->n_ctx_train, true, err, errlen))
		return -1;
	c->n_kv_heads = c->n_heads;
	if (get_i32(f, c->arch, "attention.head_count_kv", &c->n_kv_heads, false, err, errlen))
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

		if (get_i32(f, c->arch, "attention.key_length", &kl, false, err, errlen) ||
			get_i32(f, c->arch, "rope.dimension_count", &rd, false, err, errlen))
			return -1;
		if (kl != c->head_dim || rd != c->head_dim || (c->head_dim % 2) != 0)
		{
			snprintf(err, errlen, "unsupported head geometry (head_dim %d, key_length %d, rope dims %d)",
					 c->head_dim, kl, rd);
			return -1;
		}
	}
	c->rope_theta = 10000.0f;
	{
		char		key[96];

		snprintf(key, sizeof(key), "%s.rope.freq_base", c->arch);
		if (gguf_get_float(f, key, &d))
			c->rope_theta = (float) d;
		snprintf(key, sizeof(key), "%s.attention.layer_norm_rms_epsilon", c->arch);
		c->rms_eps = 1e-5f;
		if (gguf_get_float(f, key, &d))
			c->rms_eps = (float) d;
		snprintf(key, sizeof(key), "%s.rope.scaling.type", c->arch);
		if (gguf_get_str(f, key, &s) && !gguf_str_eq(s, "none"))
		{
			snprintf(err, errlen, "RoPE scaling \"%.*s\" is not supported", (int) s.len, s.ptr);
			return -1;
		}
	}
	if (!(c->rope_theta > 0.0f) || !(c->rms_eps > 0.0f))
	{
		snprintf(err, errlen, "invalid rope theta or RMS epsilon");
		return -1;
	}
	toks = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING);
	if (toks == NULL || toks->arr_n == 0 || toks->arr_n > (1u << 24))
	{
		snprintf(err, errlen, "GGUF metadata tokenizer.ggml.tokens missing");
		return -1;
	}
	c->n_vocab = (int32_t) toks->arr_n;
	return 0;
}

llm_model *
llm_model_load(const gguf_file *f, llm_backend *b, char *err, size_t errlen)
{
	llm_model  *m = calloc(1, sizeof(llm_model));
	llm_model_config *c;
	char		name[128];
	int64_t		q_dim, kv_dim;

	if (m == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->b = b;
	c = &m->cfg;
	if (read_config(f, c, err, errlen) != 0)
		goto fail;
	q_dim = (int64_t) c->n_heads * c->head_dim;
	kv_dim = (int64_t) c->n_kv_heads * c->head_dim;

	if (load_matrix(m, f, "token_embd.weight", c->dim, c->n_vocab, &m->tok_embd, err, errlen))
		goto fail;
	if (gguf_find_tensor(f, "output.weight") != NULL)
	{
		if (load_matrix(m, f, "output.weight", c->dim, c->n_vocab, &m->output, err, errlen))
			goto fail;
	}
	else
	{
		c->tied_output = 1;
		m->output = m->tok_embd;
	}
	if ((m->output_norm = load_norm(m, f, "output_norm.weight", c->dim, err, errlen)) == NULL)
		goto fail;

	m->layers = calloc((size_t) c->n_layers, sizeof(llm_layer));
	if (m->layers == NULL)
	{
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (int l = 0; l < c->n_layers; l++)
	{
		llm_layer  *L = &m->layers[l];

#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%d.%s", l, suffix), name)
		if ((L->attn_norm = load_norm(m, f, BLK("attn_norm.weight"), c->dim, err, errlen)) == NULL ||
			(L->ffn_norm = load_norm(m, f, BLK("ffn_norm.weight"), c->dim, err, errlen)) == NULL ||
			load_matrix(m, f, BLK("attn_q.weight"), c->dim, q_dim, &L->wq, err, errlen) ||
			load_matrix(m, f, BLK("attn_k.weight"), c->dim, kv_dim, &L->wk, err, errlen) ||
			load_matrix(m, f, BLK("attn_v.weight"), c->dim, kv_dim, &L->wv, err, errlen) ||
			load_matrix(m, f, BLK("attn_output.weight"), q_dim, c->dim, &L->wo, err, errlen) ||
			load_matrix(m, f, BLK("ffn_gate.weight"), c->dim, c->ffn_dim, &L->w_gate, err, errlen) ||
			load_matrix(m, f, BLK("ffn_up.weight"), c->dim, c->ffn_dim, &L->w_up, err, errlen) ||
			load_matrix(m, f, BLK("ffn_down.weight"), c->ffn_dim, c->dim, &L->w_down, err, errlen))
			goto fail;
#undef BLK
	}
	c->weight_type = m->layers[0].wq.type;
	return m;

fail:
	llm_model_free(m);
	return NULL;
}

static void
free_activations(llm_model *m)
{
	float	  **bufs[] = {&m->x, &m->h, &m->q, &m->k, &m->v, &m->attn, &m->tmp, &m->gate, &m->up,
	&m->out_h, &m->logits_dev};

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
	{
		if (*bufs[i])
			m->b->ops->free_f32(m->b, *bufs[i]);
		*bufs[i] = NULL;
	}
	m->cap_tokens = 0;
	m->cap_out = 0;
}

void
llm_model_free(llm_model *m)
{
	llm_backend *b;

	if (m == NULL)
		return;
	b = m->b;
	free_activations(m);
	if (m->layers)
	{
		for (int l = 0; l < m->cfg.n_layers; l++)
		{
			llm_layer  *L = &m->layers[l];
			llm_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};

			for (size_t i = 0; i < 7; i++)
				if (ws[i]->data)
					b->ops->free_weight(b, ws[i]);
			if (L->attn_norm)
				b->ops->free_f32(b, L->attn_norm);
			if (L->ffn_norm)
				b->ops->free_f32(b, L->ffn_norm);
		}
		free(m->layers);
	}
	if (m->output_norm)
		b->ops->free_f32(b, m->output_norm);
	if (!m->cfg.tied_output && m->output.data)
		b->ops->free_weight(b, &m->output);
	if (m->tok_embd.data)
		b->ops->free_weight(b, &m->tok_embd);
	free(m);
}

const llm_model_config *
llm_model_get_config(const llm_model *m)
{
	return &m->cfg;
}

static int
ensure_activations(llm_model *m, int n_tokens, int n_out)
{
	const llm_model_config *c = &m->cfg;
	llm_backend *b = m->b;
	int			cap = m->cap_tokens;
	int			cap_out = m->cap_out;

	if (n_tokens <= cap && n_out <= cap_out)
		return 0;
	if (n_tokens > cap)
		cap = n_tokens;
	if (n_out > cap_out)
		cap_out = n_out;
	free_activations(m);
	{
		size_t		T = (size_t) cap;
		size_t		qd = (size_t) c->n_heads * c->head_dim;
		size_t		kvd = (size_t) c->n_kv_heads * c->head_dim;

		m->x = b->ops->alloc_f32(b, T * c->dim);
		m->h = b->ops->alloc_f32(b, T * c->dim);
		m->q = b->ops->alloc_f32(b, T * qd);
		m->k = b->ops->alloc_f32(b, T * kvd);
		m->v = b->ops->alloc_f32(b, T * kvd);
		m->attn = b->ops->alloc_f32(b, T * qd);
		m->tmp = b->ops->alloc_f32(b, T * c->dim);
		m->gate = b->ops->alloc_f32(b, T * c->ffn_dim);
		m->up = b->ops->alloc_f32(b, T * c->ffn_dim);
		m->out_h = b->ops->alloc_f32(b, (size_t) cap_out * c->dim);
		m->logits_dev = b->ops->alloc_f32(b, (size_t) cap_out * c->n_vocab);
	}
	if (!m->x || !m->h || !m->q || !m->k || !m->v || !m->attn || !m->tmp || !m->gate ||
		!m->up || !m->out_h || !m->logits_dev)
	{
		free_activations(m);
		return -1;
	}
	m->cap_tokens = cap;
	m->cap_out = cap_out;
	return 0;
}

/* Several weights of one input through the backend's matmul_multi, or one matmul each. */
static int
matmul_multi(llm_backend *b, const llm_weight *const *w, int n_w, const float *x, float *const *y, int n)
{
	if (b->ops->matmul_multi != NULL)
		return b->ops->matmul_multi(b, w, n_w, x, y, n);
	for (int i = 0; i < n_w; i++)
		if (b->ops->matmul(b, w[i], x, y[i], n) != 0)
			return -1;
	return 0;
}

int
llm_model_forward(llm_model *m, const llm_step_desc *d, float *logits, char *err, size_t errlen)
{
	const llm_model_config *c = &m->cfg;
	llm_backend *b = m->b;
	const llm_backend_ops *o = b->ops;
	int			n = d->n_tokens;
	float		scale = 1.0f / sqrtf((float) c->head_dim);

	if (n <= 0 || d->n_out < 0)
	{
		snprintf(err, errlen, "empty forward step");
		return -1;
	}
	if (ensure_activations(m, n, d->n_out > 0 ? d->n_out : 1) != 0)
	{
		snprintf(err, errlen, "out of memory for activations of %d tokens", n);
		return -1;
	}

#define TRY(call) do { if ((call) != 0) goto backend_fail; } while (0)
	TRY(o->begin_step(b, d));
	TRY(o->embed(b, &m->tok_embd, m->x));
	TRY(o->rmsnorm(b, m->x, m->layers[0].attn_norm, m->h, n, c->dim, c->rms_eps));
	for (int l = 0; l < c->n_layers; l++)
	{
		llm_layer  *L = &m->layers[l];
		const float *next_norm = (l + 1 < c->n_layers) ? m->layers[l + 1].attn_norm : m->output_norm;

		/* attention block */
		{
			const llm_weight *w[3] = {&L->wq, &L->wk, &L->wv};
			float	   *y[3] = {m->q, m->k, m->v};

			TRY(matmul_multi(b, w, 3, m->h, y, n));
		}
		TRY(o->rope_store_kv(b, l, m->q, m->k, m->v, c->n_heads, c->rope_theta));
		TRY(o->attention(b, l, m->q, m->attn, c->n_heads, scale));
		TRY(o->matmul(b, &L->wo, m->attn, m->tmp, n));
		TRY(o->add_rmsnorm(b, m->x, m->tmp, L->ffn_norm, m->h, n, c->dim, c->rms_eps));

		/* SwiGLU feed-forward block */
		{
			const llm_weight *w[2] = {&L->w_gate, &L->w_up};
			float	   *y[2] = {m->gate, m->up};

			TRY(matmul_multi(b, w, 2, m->h, y, n));
		}
		TRY(o->silu_mul(b, m->gate, m->up, m->gate, (size_t) n * c->ffn_dim));
		TRY(o->matmul(b, &L->w_down, m->gate, m->tmp, n));
		/* residual add, then the next layer's attention norm (or the final norm) */
		TRY(o->add_rmsnorm(b, m->x, m->tmp, next_norm, m->h, n, c->dim, c->rms_eps));
	}
	if (d->n_out > 0)
	{
		TRY(o->gather_rows(b, m->h, m->out_h, c->dim));
		TRY(o->matmul(b, &m->output, m->out_h, m->logits_dev, d->n_out));
		TRY(o->download(b, logits, m->logits_dev, (size_t) d->n_out * c->n_vocab));
	}
	TRY(o->sync(b));
#undef TRY
	return 0;

backend_fail:
	snprintf(err, errlen, "%s backend: %s", o->name, o->last_error(b));
	return -1;
}
