/*
 * model_tensors.c — the one reader of an architecture's tables
 * (model_arch.h): hyper-parameter rows into llm_hparams and the config
 * derived from them, tensor rows through the backend into llm_model and
 * llm_layer_weights, and their release.  No architecture has code here.
 *
 * GGUF conventions (keys "<arch>.<name>", tensors token_embd / output_norm /
 * output / blk.N.*) are those llama.cpp writes and reads.
 */
#include "model_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant_types.h"

#define MAX_COUNT (1 << 24)

/* ------------------------------------------------------------------------
 * hyper-parameters
 * ------------------------------------------------------------------------ */

static int
read_hparam(llm_model *m, const gguf_file *f, const llm_hparam_spec *r, char *err, size_t errlen)
{
	char		key[160];
	char	   *field = (char *) &m->hp + r->field;

	snprintf(key, sizeof(key), "%s.%s", m->cfg.arch, r->key);
	if (r->type == LLM_HP_STR_NONE)
	{
		gguf_str	s;

		if (gguf_get_str(f, key, &s) && !gguf_str_eq(s, "none"))
		{
			snprintf(err, errlen, "GGUF metadata %s: %s \"%.*s\" is not supported", key, r->what, (int) s.len,
					 s.ptr);
			return -1;
		}
		return 0;
	}
	if (r->type == LLM_HP_ROPE_SCALING)
	{
		static const char *const names[] = {"none", "linear", "longrope"};
		gguf_str	s;
		int			v = -1;

		*(int32_t *) field = (int32_t) r->def;
		if (gguf_find_kv(f, key) == NULL)
			return 0;
		if (!gguf_get_str(f, key, &s))
		{
			snprintf(err, errlen, "GGUF metadata key %s is not a string", key);
			return -1;
		}
		for (int i = 0; i < LLM_ARRAY_LEN(names); i++)
		{
			size_t		n = strlen(names[i]);
			const char *at = strstr(r->what, names[i]);

			/* a whole name of the row's comma list */
			if (gguf_str_eq(s, names[i]) && at != NULL && (at == r->what || at[-1] == ',') &&
				(at[n] == ',' || at[n] == '\0'))
				v = i;
		}
		if (v < 0)
		{
			snprintf(err, errlen, "GGUF metadata %s: RoPE scaling \"%.*s\" is not supported (supported: %s)",
					 key, (int) s.len, s.ptr, r->what);
			return -1;
		}
		*(int32_t *) field = v;
		return 0;
	}
	if (gguf_find_kv(f, key) == NULL)
	{
		if (r->required)
		{
			if (r->type == LLM_HP_FLOAT)
				snprintf(err, errlen, "GGUF metadata %s missing", key);
			else
				snprintf(err, errlen, "GGUF metadata key %s missing or not an integer", key);
			return -1;
		}
		if (r->type == LLM_HP_FLOAT)
			*(float *) field = r->def;
		else
			*(int32_t *) field = (int32_t) r->def;
		return 0;
	}
	if (r->type == LLM_HP_FLOAT)
	{
		double		d;

		if (!gguf_get_float(f, key, &d))
		{
			snprintf(err, errlen, "GGUF metadata key %s is not a number", key);
			return -1;
		}
		*(float *) field = (float) d;
	}
	else
	{
		int64_t		v;

		if (!gguf_get_int(f, key, &v))
		{
			snprintf(err, errlen, "GGUF metadata key %s missing or not an integer", key);
			return -1;
		}
		if (v < (r->type == LLM_HP_INT0 ? 0 : 1) || v > MAX_COUNT)
		{
			snprintf(err, errlen, "GGUF metadata %s = %lld out of range", key, (long long) v);
			return -1;
		}
		*(int32_t *) field = (int32_t) v;
	}
	return 0;
}

int
llm_model_alloc_layers(llm_model *m, char *err, size_t errlen)
{
	free(m->layer_cfg);
	m->layer_cfg = calloc((size_t) (m->cfg.n_layers > 0 ? m->cfg.n_layers : 1), sizeof(llm_layer_config));
	m->cfg.layer = m->layer_cfg;
	if (m->layer_cfg == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* The derived integers (model_arch.h llm_hparams) and the head geometry rules. */
static int
derive_geometry(llm_model *m, char *err, size_t errlen)
{
	llm_hparams *hp = &m->hp;

	if (hp->n_heads <= 0 || hp->dim <= 0)
	{
		snprintf(err, errlen, "%s: incomplete model config", m->cfg.arch);
		return -1;
	}
	if (hp->n_kv_heads == 0)
		hp->n_kv_heads = hp->n_heads;
	if (hp->key_length == 0)
	{
		if (hp->dim % hp->n_heads != 0)
		{
			snprintf(err, errlen, "inconsistent head counts: dim %d, heads %d, kv heads %d",
					 hp->dim, hp->n_heads, hp->n_kv_heads);
			return -1;
		}
		hp->key_length = hp->dim / hp->n_heads;
	}
	if (hp->value_length == 0)
		hp->value_length = hp->key_length;
	if (hp->rope_dims == 0)
		hp->rope_dims = hp->key_length;
	/* one head size for Q, K and V; RoPE on the whole head unless the graph rotates part of it */
	if (hp->value_length != hp->key_length || hp->key_length % 2 != 0 || hp->rope_dims % 2 != 0 ||
		hp->rope_dims > hp->key_length ||
		(!m->arch->graph.partial_rotary && hp->rope_dims != hp->key_length))
	{
		snprintf(err, errlen, "unsupported head geometry (key_length %d, value_length %d, rope dims %d)",
				 hp->key_length, hp->value_length, hp->rope_dims);
		return -1;
	}
	return 0;
}

int
llm_model_read_hparams(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	const llm_arch *a = m->arch;
	llm_model_config *c = &m->cfg;
	llm_hparams *hp = &m->hp;

	memset(hp, 0, sizeof(*hp));
	for (int i = 0; i < a->n_hparams; i++)
		if (read_hparam(m, f, &a->hparams[i], err, errlen) != 0)
			return -1;
	if (derive_geometry(m, err, errlen) != 0)
		return -1;
	c->n_layers = hp->n_layers;
	c->dim = hp->dim;
	c->n_heads = hp->n_heads;
	c->n_kv_heads = hp->n_kv_heads;
	c->head_dim = hp->key_length;
	c->ffn_dim = hp->ffn_dim;
	c->n_ctx_train = hp->n_ctx_train;
	c->rope_theta = hp->rope_theta;
	c->rms_eps = hp->norm_eps;
	c->final_logit_softcap = hp->final_logit_softcap;
	c->attn_scale = hp->attention_scale != 0.0f ? hp->attention_scale : 1.0f / sqrtf((float) c->head_dim);
	c->logit_scale = hp->logit_scale;
	if (!(hp->rope_theta > 0.0f) || !(hp->norm_eps > 0.0f) || !(hp->final_logit_softcap >= 0.0f) ||
		!(hp->attn_logit_softcap >= 0.0f))
	{
		snprintf(err, errlen, "invalid RoPE base, norm epsilon or logit soft-cap");
		return -1;
	}
	if (!(hp->rope_scale_factor >= 0.0f) || !(hp->rope_attn_factor >= 0.0f) || !(hp->logit_scale >= 0.0f) ||
		!isfinite(hp->embedding_scale) || !isfinite(hp->residual_scale) || !(hp->attention_scale >= 0.0f))
	{
		snprintf(err, errlen, "invalid RoPE scaling factor, attention factor or scale multiplier");
		return -1;
	}
	if (llm_model_alloc_layers(m, err, errlen) != 0)
		return -1;
	for (int l = 0; l < c->n_layers; l++)
	{
		m->layer_cfg[l].attn_window = 0;
		m->layer_cfg[l].rope_theta = c->rope_theta;
		m->layer_cfg[l].rope_mode = a->graph.rope_mode;
	}
	return a->config ? a->config(m, f, err, errlen) : 0;
}

/* ------------------------------------------------------------------------
 * tensors
 * ------------------------------------------------------------------------ */

static int64_t
dim_value(const llm_model *m, llm_tensor_dim d)
{
	const llm_model_config *c = &m->cfg;

	switch (d)
	{
		case LLM_D_DIM:
			return c->dim;
		case LLM_D_Q:
			return (int64_t) c->n_heads * c->head_dim;
		case LLM_D_KV:
			return (int64_t) c->n_kv_heads * c->head_dim;
		case LLM_D_FFN:
			return c->ffn_dim;
		case LLM_D_HEAD:
			return c->head_dim;
		case LLM_D_VOCAB:
			return c->n_vocab;
		case LLM_D_ROPE_HALF:
			return m->hp.rope_dims / 2;
		case LLM_D_ONE:
			return 1;
		case LLM_D_CTX_TRAIN:
			return c->n_ctx_train;
		case LLM_D_TOKEN_TYPES:
			return m->hp.n_token_types;
	}
	return -1;
}

/* Find tensor name with expected [ne0, ne1] (ne1 = 1 for vectors). */
static const gguf_tensor *
find_checked(const gguf_file *f, const char *name, int64_t ne0, int64_t ne1, char *err, size_t errlen)
{
	const gguf_tensor *t = gguf_find_tensor(f, name);

	if (t == NULL)
	{
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

/* A row of every layer (its name has "%d"). */
static bool
per_layer(const llm_tensor_spec *r)
{
	return strstr(r->name, "%d") != NULL;
}

/*
 * A layer matrix of an encoder loaded with encoder_fast (llm_model_load_opts)
 * goes through the backend's load_weight_encoder, every other matrix
 * through load_weight.
 */
static int
backend_load(llm_model *m, bool layer, const llm_weight *host, llm_weight *out)
{
	const llm_backend_ops *o = m->b->ops;

	if (layer && m->encoder_fast && m->arch->graph.bidirectional && o->load_weight_encoder != NULL)
		return o->load_weight_encoder(m->b, host, out);
	return o->load_weight(m->b, host, out);
}

static int
load_matrix(llm_model *m, const gguf_tensor *t, const char *name, bool layer, llm_weight *out, char *err,
			size_t errlen)
{
	llm_weight	host;

	memset(&host, 0, sizeof(host));
	host.type = t->type;
	host.n_rows = t->ne[1];
	host.n_cols = t->ne[0];
	host.row_bytes = llm_type_row_bytes(t->type, t->ne[0]);
	host.data = t->data;
	if (backend_load(m, layer, &host, out) != 0)
	{
		snprintf(err, errlen, "tensor %s (%s): %s", name,
				 llm_type_get(t->type) ? llm_type_get(t->type)->name : "?",
				 m->b->ops->last_error(m->b));
		return -1;
	}
	return 0;
}

static int
load_vector(llm_model *m, const gguf_tensor *t, const char *name, float **out, char *err, size_t errlen)
{
	if (t->type != LLM_TYPE_F32)
	{
		snprintf(err, errlen, "tensor %s: norm weights must be F32", name);
		return -1;
	}
	*out = m->b->ops->load_vector(m->b, (const float *) t->data, (size_t) t->ne[0]);
	if (*out == NULL)
	{
		snprintf(err, errlen, "tensor %s: %s", name, m->b->ops->last_error(m->b));
		return -1;
	}
	return 0;
}

/* A fused matrix's rows cut into its parts' weights (llm_tensor_spec.n_parts). */
static int
load_fused(llm_model *m, const gguf_file *f, const llm_tensor_spec *r, const char *name, char *base,
		   char *err, size_t errlen)
{
	int64_t		rows = 0,
				first = 0;
	const gguf_tensor *t;

	for (int i = 0; i < r->n_parts; i++)
		rows += dim_value(m, r->parts[i]);
	t = find_checked(f, name, dim_value(m, r->ne[0]), rows, err, errlen);
	if (t == NULL)
		return -1;
	for (int i = 0; i < r->n_parts; i++)
	{
		const int64_t n = dim_value(m, r->parts[i]);
		llm_weight	host;

		memset(&host, 0, sizeof(host));
		host.type = t->type;
		host.n_rows = n;
		host.n_cols = t->ne[0];
		host.row_bytes = llm_type_row_bytes(t->type, t->ne[0]);
		host.data = (const char *) t->data + (size_t) first * host.row_bytes;
		if (backend_load(m, per_layer(r), &host, (llm_weight *) (base + r->part_field[i])) != 0)
		{
			snprintf(err, errlen, "tensor %s (%s), rows %lld..%lld: %s", name,
					 llm_type_get(t->type) ? llm_type_get(t->type)->name : "?", (long long) first,
					 (long long) (first + n - 1), m->b->ops->last_error(m->b));
			return -1;
		}
		first += n;
	}
	return 0;
}

/* One row's tensor (name formatted) into the field at base + r->field. */
static int
load_row(llm_model *m, const gguf_file *f, const llm_tensor_spec *r, const char *name, char *base,
		 char *err, size_t errlen)
{
	const gguf_tensor *t;

	if (r->need == LLM_T_REFUSED)
	{
		if (gguf_find_tensor(f, name) != NULL)
		{
			snprintf(err, errlen, "tensor %s is not supported by the %s graph", name, m->arch->name);
			return -1;
		}
		return 0;
	}
	if (r->need != LLM_T_REQUIRED && gguf_find_tensor(f, name) == NULL)
	{
		if (r->need == LLM_T_TIED)
		{
			/* the output projection shares the embedding (loaded once, freed once) */
			m->cfg.tied_output = 1;
			*(llm_weight *) (base + r->field) = m->tok_embd;
		}
		return 0;
	}
	if (r->n_parts > 0)
		return load_fused(m, f, r, name, base, err, errlen);
	t = find_checked(f, name, dim_value(m, r->ne[0]), dim_value(m, r->ne[1]), err, errlen);
	if (t == NULL)
		return -1;
	if (r->vector)
		return load_vector(m, t, name, (float **) (base + r->field), err, errlen);
	return load_matrix(m, t, name, per_layer(r), (llm_weight *) (base + r->field), err, errlen);
}


int
llm_model_load_tensors(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	const llm_arch *a = m->arch;
	char		name[128];

	for (int i = 0; i < a->n_tensors; i++)
		if (!per_layer(&a->tensors[i]) &&
			load_row(m, f, &a->tensors[i], a->tensors[i].name, (char *) m, err, errlen) != 0)
			return -1;
	m->layers = calloc((size_t) m->cfg.n_layers, sizeof(llm_layer_weights));
	if (m->layers == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int l = 0; l < m->cfg.n_layers; l++)
	{
		/* refused rows first: a file the graph would misread loads nothing of the layer */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < a->n_tensors; i++)
			{
				const llm_tensor_spec *r = &a->tensors[i];

				if (!per_layer(r) || (r->need == LLM_T_REFUSED) != (pass == 0))
					continue;
				snprintf(name, sizeof(name), r->name, l);
				if (load_row(m, f, r, name, (char *) &m->layers[l], err, errlen) != 0)
					return -1;
			}
	}
	m->cfg.weight_type = m->layers[0].wq.type;
	m->rope_ff = m->rope_freqs != NULL ? m->rope_freqs : m->rope_short;
	if ((m->rope_long == NULL) != (m->rope_short == NULL))
	{
		snprintf(err, errlen, "tensors rope_factors_long.weight and rope_factors_short.weight must come together");
		return -1;
	}
	return 0;
}

static void
free_weight(llm_model *m, llm_weight *w)
{
	if (w->data)
		m->b->ops->free_weight(m->b, w);
	memset(w, 0, sizeof(*w));
}

static void
free_vector(llm_model *m, float **v)
{
	if (*v)
		m->b->ops->free_f32(m->b, *v);
	*v = NULL;
}

static void
free_row(llm_model *m, const llm_tensor_spec *r, char *base)
{
	if (r->need == LLM_T_REFUSED)
		return;
	if (r->n_parts > 0)
	{
		for (int i = 0; i < r->n_parts; i++)
			free_weight(m, (llm_weight *) (base + r->part_field[i]));
		return;
	}
	if (r->vector)
		free_vector(m, (float **) (base + r->field));
	else if (r->need == LLM_T_TIED && m->cfg.tied_output)
		memset(base + r->field, 0, sizeof(llm_weight));	/* the embedding's, freed by its own row */
	else
		free_weight(m, (llm_weight *) (base + r->field));
}

void
llm_model_free_tensors(llm_model *m)
{
	const llm_arch *a = m->arch;

	if (a == NULL)
		return;
	for (int l = 0; m->layers != NULL && l < m->cfg.n_layers; l++)
		for (int i = 0; i < a->n_tensors; i++)
			if (per_layer(&a->tensors[i]))
				free_row(m, &a->tensors[i], (char *) &m->layers[l]);
	free(m->layers);
	m->layers = NULL;
	/* tied output first: it must not free the embedding's memory */
	for (int i = 0; i < a->n_tensors; i++)
		if (!per_layer(&a->tensors[i]) && a->tensors[i].need == LLM_T_TIED)
			free_row(m, &a->tensors[i], (char *) m);
	for (int i = 0; i < a->n_tensors; i++)
		if (!per_layer(&a->tensors[i]) && a->tensors[i].need != LLM_T_TIED)
			free_row(m, &a->tensors[i], (char *) m);
}
