/*
 * model.c — the architecture-neutral part of the model (model.h): the list
 * of architectures, the checks every config must pass, load and free (the
 * tables' reader and loader are model_tensors.c), the activation buffers,
 * and the forward driver (begin_step, the graph of model_graph.c, then the
 * output head: gather the requested rows, the logits rows first when a
 * step also wants hidden states (llm_forward_out), output projection of the
 * logits rows, final logit soft-capping when the config has it, download,
 * or none with a backend whose buffers are host memory: the logits are then
 * written into the caller's array; the hidden rows downloaded as gathered),
 * and the
 * scan of the logits rows on the backend's threads (llm_model_scan_logits).
 * The architecture files and what they must do are described in
 * model_arch.h.
 *
 * GGUF conventions (keys "<arch>.<name>", tensors token_embd / output_norm /
 * output) are those llama.cpp writes and reads.
 */
#include "model.h"
#include "model_arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant_types.h"

/* Supported architectures: one row per arch_<arch>.c (its tables). */
static const llm_arch *const archs[] = {
	&llm_arch_llama,
	&llm_arch_gemma3,
	&llm_arch_qwen2,
	&llm_arch_qwen3,
	&llm_arch_phi3,
	&llm_arch_gemma2,
	&llm_arch_granite,
	&llm_arch_smollm3,
	&llm_arch_bert,
};

/*
 * Architectures llama.cpp names that this list refuses with a reason
 * rather than only "unsupported" (mixture-of-experts variants of the
 * supported ones).
 */
static const char *const moe_archs[] = {
	"qwen2moe", "qwen3moe", "granitemoe", "granitehybrid", "phimoe", "mixtral", "llama4", "deepseek",
	"deepseek2", "olmoe", "dbrx", "grok", "arctic", "jamba", "qwen3next", "gpt-oss", "ernie4_5-moe",
	"bailingmoe", "hunyuan-moe", "glm4moe", "dots1",
};

#define N_ARCHS (sizeof(archs) / sizeof(archs[0]))

static const llm_arch *
find_arch(const char *name)
{
	for (size_t i = 0; i < N_ARCHS; i++)
		if (strcmp(archs[i]->name, name) == 0)
			return archs[i];
	return NULL;
}

/* "llama, ..." into buf. */
static void
arch_names(char *buf, size_t len)
{
	size_t		o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_ARCHS && o < len; i++)
		o += (size_t) snprintf(buf + o, len - o, "%s%s", i ? ", " : "", archs[i]->name);
}

/* ------------------------------------------------------------------------
 * load / free
 * ------------------------------------------------------------------------ */

/* What every architecture's config must satisfy before tensors are loaded. */
static int
check_config(const llm_model_config *c, char *err, size_t errlen)
{
	if (c->n_layers <= 0 || c->dim <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
		c->head_dim <= 0 || c->ffn_dim <= 0 || c->n_vocab <= 0 || c->layer == NULL)
	{
		snprintf(err, errlen, "%s: incomplete model config", c->arch);
		return -1;
	}
	if (c->n_heads % c->n_kv_heads != 0 || c->head_dim % 2 != 0)
	{
		snprintf(err, errlen, "inconsistent head counts: heads %d, kv heads %d, head_dim %d",
				 c->n_heads, c->n_kv_heads, c->head_dim);
		return -1;
	}
	if (!(c->rms_eps > 0.0f) || !(c->attn_scale > 0.0f) || !(c->final_logit_softcap >= 0.0f))
	{
		snprintf(err, errlen, "invalid RMS epsilon, attention scale or logit soft-cap");
		return -1;
	}
	for (int l = 0; l < c->n_layers; l++)
		if (c->layer[l].attn_window < 0 || !(c->layer[l].rope_theta > 0.0f) ||
			(c->layer[l].rope_mode != LLM_ROPE_NORMAL && c->layer[l].rope_mode != LLM_ROPE_NEOX &&
			 c->layer[l].rope_mode != LLM_ROPE_NONE))
		{
			snprintf(err, errlen, "layer %d: invalid attention window %d, RoPE base or RoPE mode",
					 l, c->layer[l].attn_window);
			return -1;
		}
	return 0;
}

/*
 * The embedding keys any architecture may carry (model.h): <arch>.pooling_type
 * (none, mean, CLS or last; llama.cpp's RANK, a reranker's classifier head,
 * is refused) and <arch>.embedding.max_seq_length.
 */
static int
read_embedding_keys(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	llm_model_config *c = &m->cfg;
	char		key[96];
	int64_t		v;

	c->pooling_type = -1;
	snprintf(key, sizeof(key), "%s.pooling_type", c->arch);
	if (gguf_find_kv(f, key) != NULL)
	{
		if (!gguf_get_int(f, key, &v) || v < LLM_MODEL_POOLING_NONE || v > LLM_MODEL_POOLING_LAST)
		{
			snprintf(err, errlen, "GGUF metadata %s: only pooling none (0), mean (1), CLS (2) and last (3) "
					 "are supported", key);
			return -1;
		}
		c->pooling_type = (int32_t) v;
	}
	snprintf(key, sizeof(key), "%s.embedding.max_seq_length", c->arch);
	if (gguf_find_kv(f, key) != NULL)
	{
		if (!gguf_get_int(f, key, &v) || v < 1 || v > (1 << 24))
		{
			snprintf(err, errlen, "GGUF metadata %s out of range", key);
			return -1;
		}
		c->embed_max_tokens = (int32_t) v;
	}
	return 0;
}

/* The config read and checked, then, with load, every tensor through the backend. */
static llm_model *
model_open(const gguf_file *f, llm_backend *b, const llm_arch *as, bool load, bool encoder_fast, char *err,
		   size_t errlen)
{
	llm_model  *m = calloc(1, sizeof(llm_model));
	llm_model_config *c;
	gguf_str	s;
	const gguf_kv *toks;

	if (m == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->b = b;
	m->encoder_fast = encoder_fast;
	c = &m->cfg;
	if (!gguf_get_str(f, "general.architecture", &s) || s.len == 0 || s.len >= sizeof(c->arch))
	{
		snprintf(err, errlen, "GGUF metadata general.architecture missing");
		goto fail;
	}
	memcpy(c->arch, s.ptr, s.len);
	if ((m->arch = as ? as : find_arch(c->arch)) == NULL)
	{
		char		names[256];

		for (size_t i = 0; i < sizeof(moe_archs) / sizeof(moe_archs[0]); i++)
			if (strcmp(c->arch, moe_archs[i]) == 0)
			{
				snprintf(err, errlen, "unsupported model architecture \"%s\": general.architecture names a "
						 "mixture-of-experts model, which no graph here computes", c->arch);
				goto fail;
			}
		arch_names(names, sizeof(names));
		snprintf(err, errlen, "unsupported model architecture \"%s\" (supported: %s)", c->arch, names);
		goto fail;
	}
	if (gguf_get_str(f, "general.name", &s))
		snprintf(c->name, sizeof(c->name), "%.*s", (int) (s.len < 127 ? s.len : 127), s.ptr);
	toks = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING);
	if (toks == NULL || toks->arr_n == 0 || toks->arr_n > (1u << 24))
	{
		snprintf(err, errlen, "GGUF metadata tokenizer.ggml.tokens missing");
		goto fail;
	}
	c->n_vocab = (int32_t) toks->arr_n;

	if (llm_model_read_hparams(m, f, err, errlen) != 0 || check_config(c, err, errlen) != 0 ||
		read_embedding_keys(m, f, err, errlen) != 0 ||
		(load && (llm_model_load_tensors(m, f, err, errlen) != 0 || llm_graph_check(m, err, errlen) != 0)))
		goto fail;
	c->no_output = m->arch->graph.no_output;
	c->whole_sequences = llm_graph_whole_sequences(m);
	return m;

fail:
	llm_model_free(m);
	return NULL;
}

llm_model *
llm_model_load(const gguf_file *f, llm_backend *b, char *err, size_t errlen)
{
	return model_open(f, b, NULL, true, false, err, errlen);
}

llm_model *
llm_model_load_opts(const gguf_file *f, llm_backend *b, bool encoder_fast, char *err, size_t errlen)
{
	return model_open(f, b, NULL, true, encoder_fast, err, errlen);
}

llm_model *
llm_model_read(const gguf_file *f, llm_backend *b, char *err, size_t errlen)
{
	return model_open(f, b, NULL, false, false, err, errlen);
}

llm_model *
llm_model_load_as(const gguf_file *f, llm_backend *b, const llm_arch *arch, char *err, size_t errlen)
{
	return model_open(f, b, arch, true, false, err, errlen);
}

static void
free_activations(llm_model *m)
{
	llm_activations *a = &m->act;
	float	  **bufs[] = {&a->x, &a->h, &a->q, &a->k, &a->v, &a->attn, &a->tmp, &a->gate, &a->up,
	&a->out_h, &a->logits};

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
	{
		if (*bufs[i])
			m->b->ops->free_f32(m->b, *bufs[i]);
		*bufs[i] = NULL;
	}
	a->cap_tokens = 0;
	a->cap_out = 0;
}

void
llm_model_free(llm_model *m)
{
	if (m == NULL)
		return;
	free_activations(m);
	llm_model_free_tensors(m);
	free(m->layer_cfg);
	free(m);
}

void
llm_model_set_context(llm_model *m, int n_ctx)
{
	const int	orig = m->hp.rope_orig_ctx > 0 ? m->hp.rope_orig_ctx : m->hp.n_ctx_train;

	if (m->rope_freqs == NULL && m->rope_long != NULL)
		m->rope_ff = n_ctx > orig ? m->rope_long : m->rope_short;
}

const llm_model_config *
llm_model_get_config(const llm_model *m)
{
	return &m->cfg;
}

/* ------------------------------------------------------------------------
 * forward
 * ------------------------------------------------------------------------ */

static int
ensure_activations(llm_model *m, int n_tokens, int n_out)
{
	const llm_model_config *c = &m->cfg;
	llm_backend *b = m->b;
	llm_activations *a = &m->act;
	int			cap = a->cap_tokens;
	int			cap_out = a->cap_out;

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

		a->x = b->ops->alloc_f32(b, T * c->dim);
		a->h = b->ops->alloc_f32(b, T * c->dim);
		a->q = b->ops->alloc_f32(b, T * qd);
		a->k = b->ops->alloc_f32(b, T * kvd);
		a->v = b->ops->alloc_f32(b, T * kvd);
		a->attn = b->ops->alloc_f32(b, T * qd);
		a->tmp = b->ops->alloc_f32(b, T * c->dim);
		a->gate = b->ops->alloc_f32(b, T * c->ffn_dim);
		a->up = b->ops->alloc_f32(b, T * c->ffn_dim);
		a->out_h = b->ops->alloc_f32(b, (size_t) cap_out * c->dim);
		/* with host buffers the logits are written into the caller's array */
		a->logits = b->ops->host_buffers ? NULL : b->ops->alloc_f32(b, (size_t) cap_out * c->n_vocab);
	}
	if (!a->x || !a->h || !a->q || !a->k || !a->v || !a->attn || !a->tmp || !a->gate ||
		!a->up || !a->out_h || (!a->logits && !b->ops->host_buffers))
	{
		free_activations(m);
		return -1;
	}
	a->cap_tokens = cap;
	a->cap_out = cap_out;
	return 0;
}

int
llm_model_forward(llm_model *m, const llm_step_desc *d, float *logits, char *err, size_t errlen)
{
	llm_forward_out out = {NULL, logits, NULL};

	return llm_model_forward_out(m, d, &out, err, errlen);
}

/*
 * The output rows of d with the LOGITS rows first, each kind in out_rows
 * order, into order [d->n_out]; the count of LOGITS rows.  The backend
 * gathers rows in this order, so the LOGITS rows are the leading rows of
 * the gathered block and go through the output projection as one matrix,
 * and the HIDDEN rows follow it.
 */
static int
order_out_rows(const llm_step_desc *d, const uint8_t *kind, int32_t *order)
{
	int			n_logits = 0,
				k = 0;

	for (int j = 0; j < d->n_out; j++)
		if (kind[j] == LLM_OUT_LOGITS)
			order[k++] = d->out_rows[j];
	n_logits = k;
	for (int j = 0; j < d->n_out; j++)
		if (kind[j] != LLM_OUT_LOGITS)
			order[k++] = d->out_rows[j];
	return n_logits;
}

int
llm_model_forward_out(llm_model *m, const llm_step_desc *d, const llm_forward_out *out, char *err,
					  size_t errlen)
{
	const llm_model_config *c = &m->cfg;
	llm_backend *b = m->b;
	const llm_backend_ops *o = b->ops;
	llm_activations *a = &m->act;
	int			n = d->n_tokens;
	int			n_logits = d->n_out;
	int32_t    *order = NULL;
	llm_step_desc step = *d;

	if (n <= 0 || d->n_out < 0)
	{
		snprintf(err, errlen, "empty forward step");
		return -1;
	}
	if (out->kind != NULL && d->n_out > 0)
	{
		for (int j = 0; j < d->n_out; j++)
			if (out->kind[j] != LLM_OUT_LOGITS && out->kind[j] != LLM_OUT_HIDDEN)
			{
				snprintf(err, errlen, "output row %d has an unknown kind %u", j, (unsigned) out->kind[j]);
				return -1;
			}
		order = malloc((size_t) d->n_out * sizeof(int32_t));
		if (order == NULL)
		{
			snprintf(err, errlen, "out of memory for %d output rows", d->n_out);
			return -1;
		}
		n_logits = order_out_rows(d, out->kind, order);
		step.out_rows = order;
	}
	if (n_logits > 0 && c->no_output)
	{
		free(order);
		snprintf(err, errlen, "the %s model has no output projection: it gives hidden states only", c->arch);
		return -1;
	}
	if ((n_logits > 0 && out->logits == NULL) || (n_logits < d->n_out && out->hidden == NULL))
	{
		free(order);
		snprintf(err, errlen, "no host array for the step's %s rows", n_logits > 0 ? "logits" : "hidden");
		return -1;
	}
	if (llm_graph_check_step(m, d, err, errlen) != 0)
	{
		free(order);
		return -1;
	}
	if (ensure_activations(m, n, d->n_out > 0 ? d->n_out : 1) != 0)
	{
		free(order);
		snprintf(err, errlen, "out of memory for activations of %d tokens and %d output rows", n, d->n_out);
		return -1;
	}

#define TRY(call) do { if ((call) != 0) goto backend_fail; } while (0)
	TRY(o->begin_step(b, &step));
	TRY(llm_graph_forward(m, &step));
	if (d->n_out > 0)
		TRY(o->gather_rows(b, a->h, a->out_h, c->dim));
	if (n_logits > 0)
	{
		/* host buffers: the logits go straight into the caller's array (no copy) */
		float	   *lg = o->host_buffers ? out->logits : a->logits;

		TRY(o->matmul(b, &m->output, a->out_h, lg, n_logits));
		if (c->logit_scale > 0.0f)
			TRY(o->scale(b, lg, 1.0f / c->logit_scale, (size_t) n_logits * c->n_vocab));
		if (c->final_logit_softcap > 0.0f)
			TRY(o->softcap(b, lg, c->final_logit_softcap, (size_t) n_logits * c->n_vocab));
		if (lg != out->logits)
			TRY(o->download(b, out->logits, lg, (size_t) n_logits * c->n_vocab));
	}
	if (n_logits < d->n_out)
		TRY(o->download(b, out->hidden, a->out_h + (size_t) n_logits * c->dim,
						(size_t) (d->n_out - n_logits) * c->dim));
	TRY(o->sync(b));
#undef TRY
	free(order);
	return 0;

backend_fail:
	free(order);
	snprintf(err, errlen, "%s backend: %s", o->name, o->last_error(b));
	return -1;
}

int
llm_model_scan_logits(llm_model *m, const float *logits, int n, int32_t *argmax, uint8_t *finite)
{
	const llm_backend_ops *o = m->b->ops;

	if (!o->host_buffers || o->scan_rows == NULL)
		return -1;
	return o->scan_rows(m->b, logits, n, m->cfg.n_vocab, argmax, finite);
}
