/*
 * engine.c — the engine's lifecycle and the public API around it
 * (engine.h): create (and the check of a configuration without weights),
 * destroy, what an engine reports (its tokenizer, template, sizes, notes,
 * model info), statistics and test hooks.  The request table, request
 * memory and submission by kind are requests.c; prompts to token ids,
 * prompt.c; the entry points and the tokenizer thread, submit.c; one step,
 * step.c; a request's output, output.c; the configuration, config.c.  What
 * they share is engine_internal.h.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "backend_loader.h"
#include "kernels/cpu/backend_cpu.h"
#include "engine/grammar/json_min.h"
#include "kernels/quant_types.h"

/* ---------- lifecycle ---------- */

/*
 * Identity of the model file for the prefix cache: a chained hash of its
 * size and its first and last 64 KiB (GGUF header, metadata and tensor
 * directory at the front, weights at the back), so cached KV blocks can never
 * match across models even if a pool outlived a model.  -1 if unreadable.
 */
static int
model_file_identity(const char *path, uint64_t *out)
{
	enum
	{
		SPAN = 64 * 1024
	};
	FILE	   *f = fopen(path, "rb");
	struct stat st;
	int32_t    *buf = malloc(SPAN);
	uint64_t	h;
	int			rc = -1;

	if (f == NULL || buf == NULL || fstat(fileno(f), &st) != 0)
		goto done;
	h = llm_block_hash(0, (const int32_t[2]) {(int32_t) st.st_size, (int32_t) ((uint64_t) st.st_size >> 32)}, 2, 0);
	for (int part = 0; part < 2; part++)
	{
		off_t		at = part == 0 ? 0 : (st.st_size > SPAN ? st.st_size - SPAN : 0);
		size_t		got;

		memset(buf, 0, SPAN);
		if (fseeko(f, at, SEEK_SET) != 0)
			goto done;
		got = fread(buf, 1, SPAN, f);
		h = llm_block_hash(h, buf, (int32_t) ((got + 3) / 4), part);
	}
	*out = h;
	rc = 0;
done:
	free(buf);
	if (f)
		fclose(f);
	return rc;
}

/*
 * The token that ends a turn, which continuation_eot appends: the chat
 * template's end-of-message token, else EOS when it ends generation; -1.
 */
static int32_t
find_end_of_turn(const llm_tokenizer *tok, const llm_chat_template *chat)
{
	int32_t		id = llm_chat_end_of_turn(chat, tok);

	if (id < 0)
		id = llm_tokenizer_eos(tok);
	return id >= 0 && llm_tokenizer_is_eog(tok, id) ? id : -1;
}

/*
 * The local KV group (scheduler.h): a model with both sliding-window and
 * global layers, on a backend that supports it, keeps the sliding-window
 * layers' KV in a pool of its own.  The budget (resolved to whole blocks of
 * every layer, n_eq of them) is split so that neither group is ever shorter
 * than with one group: the local pool gets what the running sequences can
 * hold at once (llm_sched_local_blocks_bound) or n_eq blocks if that is
 * less, the global pool the rest, at least n_eq blocks.  g->n_blocks comes
 * in as n_eq and leaves as the global pool's size.
 */
static int
plan_local_group(llm_engine *e, llm_kv_geometry *g)
{
	llm_kv_geometry one = *g;
	int			n_local = 0,
				window = 0,
				bs = g->block_size;
	int64_t		layer_bytes,
				n_eq = g->n_blocks,
				want,
				nl,
				ng;

	e->pool_block_bytes = (int64_t) llm_kv_block_bytes(g);
	if (e->cfg.kv_keep_windowed || !e->backend->ops->kv_local_group)
		return 0;
	for (int l = 0; l < g->n_layers; l++)
		if (e->mc->layer[l].attn_window > 0)
		{
			n_local++;
			if (e->mc->layer[l].attn_window > window)
				window = e->mc->layer[l].attn_window;
		}
	if (n_local == 0 || n_local == g->n_layers)
		return 0;
	one.n_layers = 1;
	layer_bytes = (int64_t) llm_kv_block_bytes(&one);
	want = (int64_t) e->cfg.max_running * (llm_sched_local_blocks_bound(window, bs, 0) + 1) +
		(e->cfg.max_batched_tokens + bs - 1) / bs;
	nl = want < n_eq ? want : n_eq;
	ng = (e->cfg.kv_cache_bytes - nl * n_local * layer_bytes) / ((g->n_layers - n_local) * layer_bytes);
	if (ng > INT32_MAX / bs)
		ng = INT32_MAX / bs;
	e->layer_local = malloc((size_t) g->n_layers);
	if (e->layer_local == NULL)
		return -1;
	for (int l = 0; l < g->n_layers; l++)
		e->layer_local[l] = e->mc->layer[l].attn_window > 0;
	g->layer_local = e->layer_local;
	g->n_blocks = (int) ng;
	g->n_blocks_local = (int) nl;
	g->local_window = window;
	e->pool_block_bytes = (g->n_layers - n_local) * layer_bytes;
	e->local_block_bytes = n_local * layer_bytes;
	return 0;
}

/*
 * An engine from c; with check_only, only as far as needs neither the
 * weights nor the KV cache: the model's config read (llm_model_read), the
 * configuration resolved, and returned that way, good only for its
 * config and llm_engine_destroy.  NULL + err and *field on failure.
 */
static llm_engine *
engine_build(const llm_engine_config *c, bool check_only, size_t *field, char *err, size_t errlen)
{
	llm_engine *e;
	llm_kv_geometry g;

#define AT(f) (*field = offsetof(llm_engine_config, f))
	*field = LLM_CONFIG_NO_FIELD;

	if (engine_config_check(c, field, err, errlen) != 0)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	e->cfg = *c;
	e->model_path = strdup(c->model_path);
	e->device = strdup(c->device ? c->device : "auto");
	e->chat_template = strdup(c->chat_template ? c->chat_template : "auto");
	if (e->model_path == NULL || e->device == NULL || e->chat_template == NULL)
		goto oom;
	e->cfg.model_path = e->model_path;
	e->cfg.device = e->device;
	e->cfg.chat_template = e->chat_template;
	/* a static name: the caller's string need not outlive the engine */
	e->cfg.kv_cache_dtype = engine_config_kv_dtype(c) == LLM_KV_Q8_0 ? "q8_0" : "f16";
	if (engine_table_rehash(e, 64))
		goto oom;

	/* the file: its own faults are llm.model's */
	AT(model_path);
	e->gguf = gguf_open(e->model_path, err, errlen);
	if (e->gguf == NULL)
		goto fail;
	if (model_file_identity(e->model_path, &e->model_identity) != 0)
	{
		snprintf(err, errlen, "could not read model file \"%s\" to identify it", e->model_path);
		goto fail;
	}
	e->tok = llm_tokenizer_create(e->gguf, err, errlen);
	if (e->tok == NULL)
		goto fail;
	if (strcmp(e->chat_template, "auto") == 0)
	{
		/* the file's own template: the file's fault */
		if (llm_chat_template_init(&e->chat, e->gguf, e->tok, err, errlen) != 0)
			goto fail;
	}
	else if (llm_chat_source_of(e->chat_template) != LLM_CHAT_SOURCE_NAME)
	{
		/* a template given in the configuration: refused, it fails the load (the setting's fault) */
		AT(chat_template);
		if (llm_chat_template_init_override(&e->chat, e->chat_template, e->gguf, e->tok, err, errlen) != 0)
			goto fail;
	}
	else
	{
		llm_chat_family fam = LLM_CHAT_NONE;

		/* checked by engine_config_check */
		(void) llm_chat_family_parse(e->chat_template, &fam);
		AT(chat_template);
		if (llm_chat_template_init_family(&e->chat, fam, e->tok, err, errlen) != 0)
			goto fail;
	}
	*field = LLM_CONFIG_NO_FIELD;
	e->end_of_turn = find_end_of_turn(e->tok, &e->chat);
	e->grammars = llm_grammar_store_create(e->tok);
	if (e->grammars == NULL)
		goto oom;
	e->tokenizer = llm_job_thread_create("tokenizer", ENGINE_TOKENIZER_NICE);
	if (e->tokenizer == NULL)
		goto oom;
	e->tokenize_inline_bytes = LLM_TOKENIZE_INLINE_BYTES;

	{
		int			cpus = engine_online_cpus();

		if (e->cfg.n_threads > cpus)
		{
			snprintf(e->notes, sizeof(e->notes),
					 "%d compute threads asked for, more than the %d CPUs this process may run on: using %d",
					 e->cfg.n_threads, cpus, cpus);
			e->cfg.n_threads = cpus;
		}
	}
	AT(device);
	e->backend = llm_backend_open_opts(e->cfg.device, e->cfg.n_threads, false, e->cfg.shared_threads,
									   err, errlen);
	if (e->backend == NULL)
		goto fail;
	AT(model_path);
	e->model = check_only ? llm_model_read(e->gguf, e->backend, err, errlen) :
		llm_model_load_opts(e->gguf, e->backend,
							e->cfg.encoder_arithmetic == NULL || strcmp(e->cfg.encoder_arithmetic, "auto") == 0,
							err, errlen);
	if (e->model == NULL)
		goto fail;
	e->mc = llm_model_get_config(e->model);
	if (llm_tokenizer_n_vocab(e->tok) != e->mc->n_vocab)
	{
		snprintf(err, errlen, "tokenizer vocabulary (%d) does not match the model (%d)",
				 llm_tokenizer_n_vocab(e->tok), e->mc->n_vocab);
		goto fail;
	}

	g.n_layers = e->mc->n_layers;
	g.n_kv_heads = e->mc->n_kv_heads;
	g.head_dim = e->mc->head_dim;
	g.block_size = e->cfg.block_size;
	g.n_blocks = 1;
	g.kv_dtype = engine_config_kv_dtype(&e->cfg);
	g.layer_local = NULL;
	g.n_blocks_local = 0;
	g.local_window = 0;
	if (llm_kv_block_bytes(&g) == 0)
	{
		/* a loaded model has a valid shape; q8_0 also needs whole blocks of 32 per row */
		if (g.kv_dtype == LLM_KV_Q8_0)
			AT(kv_cache_dtype);
		if (g.kv_dtype == LLM_KV_Q8_0)
			snprintf(err, errlen, "a q8_0 KV cache needs head_dim a multiple of 32; the model's is %d",
					 g.head_dim);
		else
			snprintf(err, errlen, "invalid KV cache geometry (head_dim %d, %d KV heads, %d layers)",
					 g.head_dim, g.n_kv_heads, g.n_layers);
		goto fail;
	}
	if (engine_config_resolve(&e->cfg, e->mc, e->backend, llm_kv_block_bytes(&g), field, err, errlen) != 0)
		goto fail;
	*field = LLM_CONFIG_NO_FIELD;
	llm_model_set_context(e->model, e->cfg.n_ctx);
	if (check_only)
		return e;
	g.n_blocks = (int) (e->cfg.kv_cache_bytes / (int64_t) llm_kv_block_bytes(&g));
	if (plan_local_group(e, &g) != 0)
		goto oom;
	if (e->backend->ops->kv_init(e->backend, &g) != 0)
	{
		AT(kv_cache_bytes);
		snprintf(err, errlen, "KV cache: %s", e->backend->ops->last_error(e->backend));
		goto fail;
	}
	e->pool = llm_block_pool_create(g.n_blocks, g.block_size);
	if (e->pool == NULL)
		goto oom;
	if (g.layer_local != NULL &&
		(e->local_pool = llm_block_pool_create(g.n_blocks_local, g.block_size)) == NULL)
		goto oom;
	{
		llm_sched_config sc = {
			.max_batched_tokens = e->cfg.max_batched_tokens,
			.max_running = e->cfg.max_running,
			.prefix_caching = e->cfg.prefix_caching,
			.reserved_running = e->cfg.reserved_interactive,
			.shared_step_tokens = e->cfg.interactive_step_tokens,
			.prefill_cap = e->cfg.prefill_cap,
			.prefill_cap_decodes = e->cfg.prefill_cap_decodes,
			.batch_prefill_tokens = e->cfg.batch_prefill_tokens,
			.local_pool = e->local_pool,
			.local_window = g.local_window,
			.shared_step_slowdown = e->cfg.interactive_step_slowdown,
		};

		e->sched = llm_sched_create(e->pool, &sc);
		if (e->sched == NULL)
			goto oom;
	}
	if (llm_sampler_scratch_init(&e->sampler, e->mc->n_vocab))
		goto oom;
	e->lp_work = malloc((size_t) e->mc->n_vocab * sizeof(float));
	if (e->lp_work == NULL)
		goto oom;
	e->drafted = calloc((size_t) e->cfg.spec_max_batch, sizeof(live_request *));
	if (e->drafted == NULL)
		goto oom;
	/* speculation off: no proposer, and requests keep no proposer state */
	if (e->cfg.spec_tokens > 0 && (e->spec = llm_spec_lookup_create(e->cfg.spec_tokens)) == NULL)
		goto oom;
	e->stats.kv_blocks_total = g.n_blocks + (e->local_pool ? g.n_blocks_local : 0);
	return e;

oom:
	*field = LLM_CONFIG_NO_FIELD;
	snprintf(err, errlen, "out of memory");
fail:
	llm_engine_destroy(e);
	return NULL;
#undef AT
}

llm_engine *
llm_engine_create(const llm_engine_config *c, char *err, size_t errlen)
{
	size_t		field;

	return llm_engine_create_ex(c, &field, err, errlen);
}

llm_engine *
llm_engine_create_ex(const llm_engine_config *c, size_t *field, char *err, size_t errlen)
{
	*field = LLM_CONFIG_NO_FIELD;
	if (c == NULL)
	{
		snprintf(err, errlen, "no configuration given");
		return NULL;
	}
	return engine_build(c, false, field, err, errlen);
}

int
llm_engine_check_config(const llm_engine_config *c, llm_engine_config *resolved, size_t *field,
						char *err, size_t errlen)
{
	llm_engine *e;

	*field = LLM_CONFIG_NO_FIELD;
	if (c == NULL)
	{
		snprintf(err, errlen, "no configuration given");
		return -1;
	}
	e = engine_build(c, true, field, err, errlen);
	if (e == NULL)
		return -1;
	if (resolved != NULL)
	{
		/* the strings the driver gave, not the engine's copies; "auto" as the backend's name */
		*resolved = e->cfg;
		resolved->model_path = c->model_path;
		resolved->chat_template = c->chat_template;
		resolved->device = c->device != NULL && strcmp(c->device, "auto") != 0 ? c->device :
			e->backend->ops->name;
	}
	llm_engine_destroy(e);
	return 0;
}

void
llm_engine_destroy(llm_engine *e)
{
	if (e == NULL)
		return;
	engine_free_dropped(e);
	/* first: its jobs read the tokenizer; the stand-ins in the table no longer point at them */
	llm_job_thread_free(e->tokenizer);
	e->tokenizer = NULL;
	if (e->table)
	{
		for (uint32_t i = 0; i <= e->table_mask; i++)
			if (e->table[i] != NULL && e->table[i] != TOMB)
			{
				live_request *r = e->table[i];

				if (e->sched)
					for (int32_t k = 0; k < r->n_seqs; k++)
						llm_sched_remove(e->sched, &r->seqs[k]);
				engine_grammar_wait_cancel(e, r);
				r->tok_job = NULL;
				engine_request_free(r);
			}
		free(e->table);
	}
	/* after the requests: their grammar processors hold references into it */
	llm_grammar_store_free(e->grammars);
	llm_sched_destroy(e->sched);
	llm_block_pool_destroy(e->pool);
	llm_block_pool_destroy(e->local_pool);
	free(e->layer_local);
	llm_sampler_scratch_free(&e->sampler);
	free(e->lp_work);
	free(e->drafted);
	llm_spec_destroy(e->spec);
	llm_model_free(e->model);
	if (e->backend)
		e->backend->ops->destroy(e->backend);
	llm_chat_template_free(&e->chat);
	llm_tokenizer_destroy(e->tok);
	if (e->gguf)
		gguf_close(e->gguf);
	free(e->logits);
	free(e->hidden);
	free(e->d_out_kind);
	free(e->scan_argmax);
	free(e->scan_finite);
	free(e->d_tokens);
	free(e->d_pos);
	free(e->d_slots);
	free(e->d_seq_start);
	free(e->d_seq_kv_len);
	free(e->d_block_tables);
	free(e->d_out_rows);
	free(e->d_slots_local);
	free(e->d_block_tables_local);
	free(e->d_decode);
	free(e->d_forms);
	free(e->model_path);
	free(e->device);
	free(e->chat_template);
	free(e);
}

const llm_tokenizer *
llm_engine_tokenizer(const llm_engine *e)
{
	return e->tok;
}

const char *
llm_engine_chat_refused(const llm_engine *e)
{
	return llm_chat_template_refused(&e->chat);
}

const llm_chat_template *
llm_engine_chat_template(const llm_engine *e)
{
	return &e->chat;
}

int32_t
llm_engine_n_ctx(const llm_engine *e)
{
	return e->cfg.n_ctx;
}

int32_t
llm_engine_n_vocab(const llm_engine *e)
{
	return e->mc->n_vocab;
}

int32_t
llm_engine_n_embd(const llm_engine *e)
{
	return e->mc->dim;
}

int32_t
llm_engine_embed_max_tokens(const llm_engine *e)
{
	int32_t		most = e->mc->embed_max_tokens > 0 ? e->mc->embed_max_tokens :
		e->mc->whole_sequences ? e->mc->n_ctx_train : e->cfg.n_ctx;

	if (most > e->cfg.n_ctx)
		most = e->cfg.n_ctx;
	if (e->mc->whole_sequences && most > e->cfg.max_batched_tokens)
		most = e->cfg.max_batched_tokens;
	return most;
}

llm_pooling
llm_engine_embed_pooling(const llm_engine *e)
{
	switch (e->mc->pooling_type)
	{
		case LLM_MODEL_POOLING_MEAN:
			return LLM_POOLING_MEAN;
		case LLM_MODEL_POOLING_CLS:
			return LLM_POOLING_CLS;
		default:
			return LLM_POOLING_LAST;
	}
}

bool
llm_engine_embed_normalizes(const llm_engine *e)
{
	return e->mc->pooling_type > LLM_MODEL_POOLING_NONE;
}

int64_t
llm_engine_n_params(const llm_engine *e)
{
	int64_t		n = 0;

	for (uint64_t i = 0; i < gguf_n_tensors(e->gguf); i++)
	{
		const gguf_tensor *t = gguf_tensor_at(e->gguf, i);
		int64_t		elems = 1;

		for (int d = 0; d < GGUF_MAX_DIMS; d++)
			elems *= t->ne[d];
		n += elems;
	}
	return n;
}

const char *
llm_engine_architecture(const llm_engine *e)
{
	return e->mc->arch;
}

void
llm_engine_get_config(const llm_engine *e, llm_engine_config *out)
{
	*out = e->cfg;
}

const char *
llm_engine_notes(const llm_engine *e)
{
	return e->notes;
}

const char *
llm_engine_kernels(const llm_engine *e)
{
	if (strcmp(e->backend->ops->name, "cpu") != 0)
		return e->backend->ops->name;
	return llm_backend_cpu_impl_name(e->backend);
}

int
llm_engine_check_model_file(const char *path, char *err, size_t errlen)
{
	gguf_file  *f = gguf_open(path, err, errlen);
	gguf_str	arch;
	int			rc = 0;

	if (f == NULL)
		return -1;
	if (!gguf_get_str(f, "general.architecture", &arch) || arch.len == 0)
	{
		snprintf(err, errlen, "GGUF metadata general.architecture missing");
		rc = -1;
	}
	gguf_close(f);
	return rc;
}

size_t
llm_engine_model_info_json(const llm_engine *e, char *out, size_t cap)
{
	const llm_model_config *m = e->mc;
	const char *fam = llm_chat_family_name(e->chat.family);
	const char *wt = llm_type_get(m->weight_type) ? llm_type_get(m->weight_type)->name : "?";
	char		name[256];
	size_t		j = 0;

	/* JSON-escape the model name (from the file: untrusted) */
	for (const char *p = m->name; *p && j + 7 < sizeof(name); p++)
	{
		unsigned char ch = (unsigned char) *p;

		if (ch == '"' || ch == '\\')
		{
			name[j++] = '\\';
			name[j++] = (char) ch;
		}
		else if (ch < 0x20)
			j += snprintf(name + j, sizeof(name) - j, "\\u%04x", ch);
		else
			name[j++] = (char) ch;
	}
	name[j] = '\0';
	return (size_t) snprintf(out, cap,
							 "{\"architecture\": \"%s\", \"name\": \"%s\", \"n_layers\": %d, "
							 "\"embedding_length\": %d, \"n_heads\": %d, \"n_kv_heads\": %d, "
							 "\"head_dim\": %d, \"feed_forward_length\": %d, \"n_vocab\": %d, "
							 "\"context_length_trained\": %d, \"context_length\": %d, "
							 "\"rope_theta\": %g, \"rms_eps\": %g, \"weight_type\": \"%s\", "
							 "\"tied_output\": %s, \"chat_template\": \"%s\", \"device\": \"%s\", "
							 "\"threads\": %d, \"block_size\": %d, \"kv_blocks\": %d, "
							 "\"max_batched_tokens\": %d, \"max_running\": %d, \"prefix_caching\": %s, "
							 "\"kv_cache_bytes\": %lld, \"reserved_interactive\": %d, "
							 "\"interactive_step_tokens\": %d, \"prefill_cap\": %d, \"prefill_cap_decodes\": %d, "
							 "\"speculative_tokens\": %d, \"speculative_max_batch\": %d, \"kv_cache_dtype\": \"%s\", "
							 "\"batch_prefill_tokens\": %d, \"notes\": \"%s\"}",
							 m->arch, name, m->n_layers, m->dim, m->n_heads, m->n_kv_heads,
							 m->head_dim, m->ffn_dim, m->n_vocab, m->n_ctx_train, e->cfg.n_ctx,
							 m->rope_theta, m->rms_eps, wt, m->tied_output ? "true" : "false",
							 fam, e->backend->ops->name, e->cfg.n_threads, e->cfg.block_size,
							 llm_block_pool_n_blocks(e->pool) +
							 (e->local_pool ? llm_block_pool_n_blocks(e->local_pool) : 0), e->cfg.max_batched_tokens,
							 e->cfg.max_running, e->cfg.prefix_caching ? "true" : "false",
							 (long long) e->cfg.kv_cache_bytes, e->cfg.reserved_interactive,
							 e->cfg.interactive_step_tokens, e->cfg.prefill_cap, e->cfg.prefill_cap_decodes,
							 e->cfg.spec_tokens, e->cfg.spec_max_batch, e->cfg.kv_cache_dtype,
							 e->cfg.batch_prefill_tokens, e->notes);
}

/* ---------- statistics and test hooks ---------- */

void
llm_engine_get_stats(const llm_engine *e, llm_engine_stats *out)
{
	*out = e->stats;
	out->n_waiting = llm_sched_n_waiting(e->sched);
	out->n_running = llm_sched_n_running(e->sched);
	out->n_waiting += e->n_grammar_waiting + e->n_tokenizing;	/* not in the scheduler yet */
	if (e->n_live_score > 0)
	{
		/* sequences are not requests: a SCORE request runs while any of its sequences does */
		uint32_t	pos = 0;
		live_request *r;

		out->n_running = 0;
		while ((r = engine_next_live(e, &pos)) != NULL)
			for (int32_t k = 0; k < r->n_seqs; k++)
				if (r->seqs[k].state == LLM_SEQ_RUNNING)
				{
					out->n_running++;
					break;
				}
		out->n_waiting = e->n_live - out->n_running;
	}
	out->kv_blocks_total = llm_block_pool_n_blocks(e->pool);
	out->kv_blocks_used = out->kv_blocks_total - llm_block_pool_n_free(e->pool);
	out->kv_blocks_cached = llm_block_pool_n_cached_free(e->pool);
	out->kv_bytes_total = out->kv_blocks_total * e->pool_block_bytes;
	out->kv_bytes_used = out->kv_blocks_used * e->pool_block_bytes;
	out->kv_block_bytes = e->pool_block_bytes;
	out->kv_local_block_bytes = e->local_pool != NULL ? e->local_block_bytes : 0;
	out->kv_local_blocks_total = out->kv_local_blocks_used = out->kv_local_blocks_cached = 0;
	if (e->local_pool != NULL)
	{
		out->kv_local_blocks_total = llm_block_pool_n_blocks(e->local_pool);
		out->kv_local_blocks_used = out->kv_local_blocks_total - llm_block_pool_n_free(e->local_pool);
		out->kv_local_blocks_cached = llm_block_pool_n_cached_free(e->local_pool);
		out->kv_blocks_total += out->kv_local_blocks_total;
		out->kv_blocks_used += out->kv_local_blocks_used;
		out->kv_blocks_cached += out->kv_local_blocks_cached;
		out->kv_bytes_total += out->kv_local_blocks_total * e->local_block_bytes;
		out->kv_bytes_used += out->kv_local_blocks_used * e->local_block_bytes;
	}
	out->n_preemptions = llm_sched_n_preemptions(e->sched);
	llm_sched_prefix_stats(e->sched, &out->prefix_queries, &out->cached_prompt_tokens);
}

void
llm_engine_grammar_stats(const llm_engine *e, llm_grammar_store_stats *out)
{
	llm_grammar_store_get_stats(e->grammars, out);
}

void
llm_engine_debug_grammar_hold(llm_engine *e, bool hold)
{
	llm_grammar_store_debug_hold(e->grammars, hold);
}

bool
llm_engine_debug_grammar_drain(llm_engine *e)
{
	return llm_grammar_store_debug_drain(e->grammars);
}

void
llm_engine_debug_tokenize_hold(llm_engine *e, bool hold)
{
	llm_job_thread_debug_hold(e->tokenizer, hold);
}

bool
llm_engine_debug_tokenize_drain(llm_engine *e)
{
	return llm_job_thread_debug_drain(e->tokenizer);
}

void
llm_engine_debug_tokenize_inline_bytes(llm_engine *e, size_t bytes)
{
	e->tokenize_inline_bytes = bytes;
}

void
llm_engine_debug_score_sharing(llm_engine *e, llm_score_sharing mode)
{
	e->score_sharing = mode;
}

void
llm_engine_debug_poison_logits(llm_engine *e, int n)
{
	e->poison_logits = n;
}
