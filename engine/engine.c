/*
 * engine.c — the engine's request table, the lifecycle of the engine and of
 * its requests, and the public API around them (engine.h): create/destroy,
 * prompts to token ids (the one place: chat template or tokenizer; a large
 * prompt on the tokenizer thread), submission of GENERATE, SCORE and EMBED
 * requests, abort, statistics.  One step
 * lives in step.c, a request's output in output.c, the
 * configuration in config.c; what they share is engine_internal.h.
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

/* ---------- request table ---------- */

static uint32_t
id_hash(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (uint32_t) id;
}

static live_request *
table_get(const llm_engine *e, uint64_t id)
{
	for (uint32_t i = id_hash(id) & e->table_mask;; i = (i + 1) & e->table_mask)
	{
		live_request *r = e->table[i];

		if (r == NULL)
			return NULL;
		if (r != TOMB && r->id == id)
			return r;
	}
}

static int
table_rehash(llm_engine *e, uint32_t size)
{
	live_request **old = e->table;
	uint32_t	old_size = e->table ? e->table_mask + 1 : 0;
	live_request **t = calloc(size, sizeof(live_request *));

	if (t == NULL)
		return -1;
	e->table = t;
	e->table_mask = size - 1;
	e->n_tomb = 0;
	for (uint32_t i = 0; i < old_size; i++)
		if (old[i] != NULL && old[i] != TOMB)
		{
			uint32_t	j = id_hash(old[i]->id) & e->table_mask;

			while (t[j] != NULL)
				j = (j + 1) & e->table_mask;
			t[j] = old[i];
		}
	free(old);
	return 0;
}

static int
table_put(llm_engine *e, live_request *r)
{
	uint32_t	size = e->table_mask + 1;
	uint32_t	i;

	if ((uint32_t) (e->n_live + e->n_tomb + 1) * 2 > size)
	{
		uint32_t	ns = size;

		while ((uint32_t) (e->n_live + 1) * 4 > ns)
			ns *= 2;
		if (table_rehash(e, ns))
			return -1;
	}
	for (i = id_hash(r->id) & e->table_mask; e->table[i] != NULL && e->table[i] != TOMB;
		 i = (i + 1) & e->table_mask)
		;
	if (e->table[i] == TOMB)
		e->n_tomb--;
	e->table[i] = r;
	e->n_live++;
	return 0;
}

static void
table_del(llm_engine *e, uint64_t id)
{
	for (uint32_t i = id_hash(id) & e->table_mask;; i = (i + 1) & e->table_mask)
	{
		live_request *r = e->table[i];

		if (r == NULL)
			return;
		if (r != TOMB && r->id == id)
		{
			e->table[i] = TOMB;
			e->n_tomb++;
			e->n_live--;
			return;
		}
	}
}

live_request *
engine_next_live(const llm_engine *e, uint32_t *pos)
{
	for (; *pos <= e->table_mask; (*pos)++)
	{
		live_request *r = e->table[*pos];

		if (r != NULL && r != TOMB)
		{
			(*pos)++;
			return r;
		}
	}
	return NULL;
}

/* ---------- requests: memory, drop ---------- */

static void
request_free(live_request *r)
{
	if (r == NULL)
		return;
	for (int32_t k = 0; k < r->n_seqs; k++)
		llm_seq_free(&r->seqs[k]);
	free(r->seqs);
	free(r->score);
	if (r->stop)
		for (int i = 0; i < r->params.n_stop; i++)
			free(r->stop[i]);
	free(r->stop);
	llm_lp_chain_free(&r->chain);
	if (r->spec != NULL)
		llm_spec_forget(r->spec, r->spec_state);
	engine_output_free(r);
	free(r->echo);
	free(r);
}

/* Take r off the grammar_waiting list and give its reference back to the store. */
static void
grammar_wait_cancel(llm_engine *e, live_request *r)
{
	if (r->grammar_wait == NULL)
		return;
	for (live_request **p = &e->grammar_waiting; *p; p = &(*p)->next_grammar_wait)
		if (*p == r)
		{
			*p = r->next_grammar_wait;
			e->n_grammar_waiting--;
			break;
		}
	r->next_grammar_wait = NULL;
	llm_grammar_store_release(e->grammars, r->grammar_wait);
	r->grammar_wait = NULL;
}

static void tokenize_wait_cancel(llm_engine *e, live_request *r);

void
engine_drop_request(llm_engine *e, live_request *r)
{
	bool		stand_in = r->tok_job != NULL || r->tokenize_only;

	if (r->dropped)
		return;
	grammar_wait_cancel(e, r);
	tokenize_wait_cancel(e, r);
	for (int32_t k = 0; k < r->n_seqs; k++)
		llm_sched_remove(e->sched, &r->seqs[k]);
	table_del(e, r->id);
	/* a stand-in was never counted: only the request built from its ids is */
	if (r->mode == LLM_MODE_SCORE && !stand_in)
		e->n_live_score--;
	r->dropped = true;
	if (e->in_step)
	{
		r->next_dropped = e->dropped;
		e->dropped = r;
	}
	else
		request_free(r);
}

void
engine_free_dropped(llm_engine *e)
{
	while (e->dropped)
	{
		live_request *r = e->dropped;

		e->dropped = r->next_dropped;
		request_free(r);
	}
}

bool
llm_engine_abort(llm_engine *e, uint64_t id)
{
	live_request *r = table_get(e, id);

	if (r == NULL)
		return false;
	engine_drop_request(e, r);
	return true;
}

bool
llm_engine_has_work(const llm_engine *e)
{
	return e->n_live > 0;
}

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
	int32_t		id = -1;

	if (chat->family == LLM_CHAT_CHATML)
		id = llm_tokenizer_special_id(tok, "<|im_end|>");
	else if (chat->family == LLM_CHAT_GEMMA)
		id = llm_tokenizer_special_id(tok, "<end_of_turn>");
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
	if (table_rehash(e, 64))
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
	e->tokenizer = llm_offload_create("tokenizer");
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
		llm_model_load(e->gguf, e->backend, err, errlen);
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
	llm_offload_free(e->tokenizer);
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
				grammar_wait_cancel(e, r);
				r->tok_job = NULL;
				request_free(r);
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
	const char *fam = e->chat.family == LLM_CHAT_CHATML ? "chatml" :
		e->chat.family == LLM_CHAT_GEMMA ? "gemma" : "none";
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

/* ---------- prompts to token ids ---------- */

int64_t
llm_engine_tokenize(const llm_engine *e, const char *text, size_t len, int32_t **ids_out,
					char *err, size_t errlen)
{
	int64_t		cap = (int64_t) len + 8;
	int32_t    *ids = malloc((size_t) cap * sizeof(int32_t));
	int64_t		n;

	*ids_out = NULL;
	if (ids == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	n = llm_tokenize(e->tok, text, len, ids, cap, err, errlen);
	if (n > cap)
	{
		int32_t    *more = realloc(ids, (size_t) n * sizeof(int32_t));

		if (more == NULL)
		{
			free(ids);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		ids = more;
		n = llm_tokenize(e->tok, text, len, ids, n, err, errlen);
	}
	if (n < 0)
	{
		free(ids);
		return -1;
	}
	*ids_out = ids;
	return n;
}

/* Render messages with the chat template into a malloc'd id array. */
static int64_t
render_chat(const llm_engine *e, const llm_chat_message *msgs, int n_msgs, int32_t **ids_out,
			char *err, size_t errlen)
{
	size_t		text_bytes = 0;
	int64_t		cap;
	int32_t    *ids;
	int64_t		n;

	*ids_out = NULL;
	for (int i = 0; i < n_msgs; i++)
		text_bytes += msgs[i].content_len;
	cap = (int64_t) text_bytes + 16 * (n_msgs + 2) + 256;
	ids = malloc((size_t) cap * sizeof(int32_t));
	if (ids == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	n = llm_chat_apply(&e->chat, e->tok, msgs, n_msgs, ids, cap, err, errlen);
	if (n > cap)
	{
		int32_t    *more = realloc(ids, (size_t) n * sizeof(int32_t));

		if (more == NULL)
		{
			free(ids);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		ids = more;
		n = llm_chat_apply(&e->chat, e->tok, msgs, n_msgs, ids, n, err, errlen);
	}
	if (n < 0)
	{
		free(ids);
		return -1;
	}
	*ids_out = ids;
	return n;
}

/*
 * A raw prompt's ids: its text tokenized, after the BOS when the model's
 * tokenizer wants one (llm_tokenizer_add_bos: Gemma yes, SmolLM2 no), as
 * llama.cpp's tokenization with add_special gives a prompt.  Only here: text
 * tokenized for llm_tokenize() or as a scoring continuation stays BOS-free.
 */
static int64_t
raw_prompt_ids(const llm_engine *e, const char *text, size_t len, int32_t **ids_out, char *err, size_t errlen)
{
	int64_t		n = llm_engine_tokenize(e, text, len, ids_out, err, errlen);
	int32_t    *more;

	if (n < 0 || !llm_tokenizer_add_bos(e->tok))
		return n;
	more = realloc(*ids_out, (size_t) (n + 1) * sizeof(int32_t));
	if (more == NULL)
	{
		free(*ids_out);
		*ids_out = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memmove(more + 1, more, (size_t) n * sizeof(int32_t));
	more[0] = llm_tokenizer_bos(e->tok);
	*ids_out = more;
	return n + 1;
}

/* The prompt of a validated req as token ids (malloc'd); -1 + err. */
static int64_t
prompt_ids(const llm_engine *e, const llm_request *req, int32_t **ids, char *err, size_t errlen)
{
	switch (req->prompt_kind)
	{
		case LLM_PROMPT_RAW:
			return raw_prompt_ids(e, req->prompt, req->prompt_len, ids, err, errlen);
		case LLM_PROMPT_TEXT:
			{
				llm_chat_message msgs[2];
				int			n = 0;

				if (req->system != NULL)
				{
					msgs[n].role = "system";
					msgs[n].content = req->system;
					msgs[n].content_len = req->system_len;
					n++;
				}
				msgs[n].role = "user";
				msgs[n].content = req->prompt;
				msgs[n].content_len = req->prompt_len;
				n++;
				return render_chat(e, msgs, n, ids, err, errlen);
			}
		case LLM_PROMPT_MESSAGES:
			return render_chat(e, req->messages, req->n_messages, ids, err, errlen);
		case LLM_PROMPT_TOKENS:
			*ids = malloc((size_t) req->n_tokens * sizeof(int32_t));
			if (*ids == NULL)
			{
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			memcpy(*ids, req->tokens, (size_t) req->n_tokens * sizeof(int32_t));
			return req->n_tokens;
	}
	*ids = NULL;
	snprintf(err, errlen, "unknown prompt kind");
	return -1;
}

int64_t
llm_engine_prompt_ids(const llm_engine *e, const llm_request *req, int32_t **ids,
					  char *err, size_t errlen)
{
	int64_t		n;

	*ids = NULL;
	if (llm_request_validate(req, err, errlen) != LLM_OK)
		return -1;
	err[0] = '\0';
	n = prompt_ids(e, req, ids, err, errlen);
	if (n < 0 && err[0] == '\0')
		snprintf(err, errlen, "could not tokenize the prompt");
	return n;
}

int64_t
llm_engine_detokenize(const llm_engine *e, const int32_t *ids, int32_t n, char **text_out,
					  char *err, size_t errlen)
{
	int32_t		nvocab = llm_tokenizer_n_vocab(e->tok);
	size_t		cap = 256,
				len = 0;
	char	   *text = malloc(cap);
	llm_detok	dt;
	char		buf[256];
	int			w;

	*text_out = NULL;
	if (text == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	llm_detok_init(&dt);
	for (int32_t i = 0; i <= n; i++)
	{
		if (i < n)
		{
			if (ids[i] < 0 || ids[i] >= nvocab ||
				(w = llm_detok_push(e->tok, &dt, ids[i], buf, sizeof(buf))) < 0)
			{
				snprintf(err, errlen, "token id %d is out of range (vocabulary size %d)", ids[i], nvocab);
				free(text);
				return -1;
			}
		}
		else
			w = llm_detok_flush(&dt, buf, sizeof(buf));
		if (len + (size_t) w + 1 > cap)
		{
			char	   *more;

			while (len + (size_t) w + 1 > cap)
				cap *= 2;
			more = realloc(text, cap);
			if (more == NULL)
			{
				free(text);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			text = more;
		}
		memcpy(text + len, buf, (size_t) w);
		len += (size_t) w;
	}
	text[len] = '\0';
	*text_out = text;
	return (int64_t) len;
}

/* ---------- submission ---------- */

/* Continuation k's token ids (+ end of turn) into a malloc'd array (*ids, count *n). */
static llm_status
continuation_ids(const llm_engine *e, const llm_request *req, int k, int32_t **ids, int32_t *n,
				 char *err, size_t errlen)
{
	char		msg[512];
	int64_t		got = llm_engine_tokenize(e, req->continuations[k], req->continuation_lens[k], ids,
										  msg, sizeof(msg));

	if (got < 0)
	{
		snprintf(err, errlen, "continuation %d: %s", k + 1, msg);
		return LLM_ERR_INVALID_PARAM;
	}
	if (got + 1 > INT32_MAX)
	{
		free(*ids);
		snprintf(err, errlen, "continuation %d is too long", k + 1);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	if (req->continuation_eot)
	{
		int32_t    *more = realloc(*ids, (size_t) (got + 1) * sizeof(int32_t));

		if (more == NULL)
		{
			free(*ids);
			snprintf(err, errlen, "out of memory");
			return LLM_ERR_OUT_OF_MEMORY;
		}
		*ids = more;
		(*ids)[got++] = e->end_of_turn;
	}
	if (got == 0)
	{
		free(*ids);
		snprintf(err, errlen, "continuation %d has no tokens", k + 1);
		return LLM_ERR_INVALID_PARAM;
	}
	*n = (int32_t) got;
	return LLM_OK;
}

/*
 * Every token id a request's submission needs: the prompt's, and a SCORE
 * request's continuations' in order up to the first that fails.  Made by
 * tokenize_request from read-only engine state only (the tokenizer, the
 * chat template, end_of_turn), so on the driver or on the tokenizer thread
 * alike; consumed by submit_ids on the driver.
 */
typedef struct tokenized
{
	int32_t    *ids;			/* the prompt's (malloc'd) */
	int64_t		n;				/* their count; -1: the prompt failed (err) */
	int32_t   **cont;			/* SCORE: [n_continuations], the first n_cont_ok set */
	int32_t    *n_cont;
	int32_t		n_cont_ok;
	llm_status	cont_st;		/* continuation n_cont_ok's failure (err), if any */
	char		err[1100];
} tokenized;

static void
tokenized_free(tokenized *t)
{
	free(t->ids);
	if (t->cont != NULL)
		for (int32_t k = 0; k < t->n_cont_ok; k++)
			free(t->cont[k]);
	free(t->cont);
	free(t->n_cont);
	memset(t, 0, sizeof(*t));
}

/*
 * Tokenize req (validated) into t: the prompt (its error in t->err, or
 * "could not tokenize the prompt"), then, when it gave ids, a SCORE
 * request's continuations until one fails.
 */
static void
tokenize_request(const llm_engine *e, const llm_request *req, tokenized *t)
{
	memset(t, 0, sizeof(*t));
	t->n = prompt_ids(e, req, &t->ids, t->err, sizeof(t->err));
	if (t->n < 0)
	{
		if (t->err[0] == '\0')
			snprintf(t->err, sizeof(t->err), "could not tokenize the prompt");
		return;
	}
	if (req->mode != LLM_MODE_SCORE || t->n == 0)
		return;
	t->cont = calloc((size_t) req->n_continuations, sizeof(int32_t *));
	t->n_cont = calloc((size_t) req->n_continuations, sizeof(int32_t));
	if (t->cont == NULL || t->n_cont == NULL)
	{
		t->cont_st = LLM_ERR_OUT_OF_MEMORY;
		snprintf(t->err, sizeof(t->err), "out of memory queueing request");
		return;
	}
	for (int32_t k = 0; k < req->n_continuations; k++)
	{
		t->cont_st = continuation_ids(e, req, k, &t->cont[k], &t->n_cont[k], t->err, sizeof(t->err));
		if (t->cont_st != LLM_OK)
			return;
		t->n_cont_ok++;
	}
}

static live_request *
request_new(uint64_t id, void *user_data, const llm_request *req, int32_t n_prompt, int32_t n_seqs)
{
	live_request *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->id = id;
	r->user_data = user_data;
	r->mode = req->mode;
	r->params = req->params;
	r->params.stop = NULL;
	r->params.n_stop = 0;
	r->n_prompt = n_prompt;
	r->seqs = calloc((size_t) n_seqs, sizeof(llm_seq));
	if (r->seqs == NULL)
	{
		free(r);
		return NULL;
	}
	r->n_seqs = n_seqs;
	return r;
}

/*
 * The grammar processor of req, if it has a grammar, last in r's chain (so
 * no processor changes a row after the mask): now when the store holds the
 * grammar compiled, else r waits for it (r->grammar_wait; its compile runs
 * on the store's compile thread and engine_grammar_admit adds the
 * processor then).
 */
static llm_status
add_grammar(llm_engine *e, live_request *r, const llm_request *req, char *err, size_t errlen)
{
	llm_logits_processor *lp;
	llm_grammar_ref *ref;
	llm_status	st;

	if (req->grammar == NULL)
		return LLM_OK;
	st = llm_grammar_store_request(e->grammars, req->grammar, req->grammar_len, &ref, err, errlen);
	if (st != LLM_OK)
		return st;
	if (!llm_grammar_ref_ready(ref))
	{
		r->grammar_wait = ref;
		return LLM_OK;
	}
	st = llm_lp_grammar_take(e->grammars, ref, &lp, err, errlen);
	if (st != LLM_OK)
		return st;
	if (llm_lp_chain_add(&r->chain, lp) != 0)
	{
		snprintf(err, errlen, "out of memory queueing request");
		return LLM_ERR_OUT_OF_MEMORY;
	}
	return LLM_OK;
}

/* Put r, whose grammar is being compiled, at the end of the grammar_waiting list. */
static void
grammar_wait_push(llm_engine *e, live_request *r)
{
	live_request **p = &e->grammar_waiting;

	while (*p != NULL)
		p = &(*p)->next_grammar_wait;
	*p = r;
	r->next_grammar_wait = NULL;
	e->n_grammar_waiting++;
	r->seqs[0].state = LLM_SEQ_DETACHED;
}

/* The requests whose grammar is ready: into the scheduler with the processor, or failed. */
static void
admit_ready(llm_engine *e, llm_event_cb cb, void *arg)
{
	live_request **p = &e->grammar_waiting;
	live_request *r;

	while ((r = *p) != NULL)
	{
		llm_logits_processor *lp;
		llm_status	st;
		char		err[2048];

		if (!llm_grammar_ref_ready(r->grammar_wait))
		{
			p = &r->next_grammar_wait;
			continue;
		}
		*p = r->next_grammar_wait;
		r->next_grammar_wait = NULL;
		e->n_grammar_waiting--;
		st = llm_lp_grammar_take(e->grammars, r->grammar_wait, &lp, err, sizeof(err));
		r->grammar_wait = NULL;
		if (st == LLM_OK && llm_lp_chain_add(&r->chain, lp) != 0)
		{
			snprintf(err, sizeof(err), "out of memory queueing request");
			st = LLM_ERR_OUT_OF_MEMORY;
		}
		if (st == LLM_OK && llm_sched_add(e->sched, &r->seqs[0]) != 0)
		{
			snprintf(err, sizeof(err), "out of memory queueing request");
			st = LLM_ERR_OUT_OF_MEMORY;
		}
		if (st != LLM_OK)
		{
			/* the error a submission with the grammar compiled inline would have returned */
			engine_output_error(r, st, err, cb, arg);
			engine_drop_request(e, r);
		}
	}
}

void
engine_grammar_admit(llm_engine *e, llm_event_cb cb, void *arg)
{
	if (e->grammar_waiting == NULL)
		return;
	if (llm_grammar_store_poll(e->grammars) > 0)
		admit_ready(e, cb, arg);
	if (e->grammar_waiting != NULL &&
		llm_sched_n_waiting(e->sched) + llm_sched_n_running(e->sched) == 0 &&
		llm_grammar_store_wait(e->grammars, ENGINE_GRAMMAR_IDLE_MS) &&
		llm_grammar_store_poll(e->grammars) > 0)
		admit_ready(e, cb, arg);
}

/* The GENERATE request over prompt ids (owned by the caller); its status (err set). */
static llm_status
new_generate(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
			 const int32_t *ids, int32_t n, live_request **out, char *err, size_t errlen)
{
	const llm_sampling_params *p = &req->params;
	live_request *r = request_new(id, user_data, req, n, 1);
	llm_seq    *seq;
	llm_status	st;

	*out = r;
	snprintf(err, errlen, "out of memory queueing request");
	if (r == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	if (p->n_stop > 0)
	{
		r->stop = calloc(p->n_stop, sizeof(char *));
		if (r->stop == NULL)
			return LLM_ERR_OUT_OF_MEMORY;
		r->params.n_stop = p->n_stop;
		for (int i = 0; i < p->n_stop; i++)
			if ((r->stop[i] = strdup(p->stop[i])) == NULL)
				return LLM_ERR_OUT_OF_MEMORY;
		r->params.stop = (const char *const *) r->stop;
	}
	if (llm_lp_chain_build(&r->chain, p) != 0)
		return LLM_ERR_OUT_OF_MEMORY;
	if ((st = add_grammar(e, r, req, err, errlen)) != LLM_OK)
		return st;
	seq = &r->seqs[0];
	seq->tokens = malloc((size_t) (n + 16) * sizeof(int32_t));
	if (seq->tokens == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	memcpy(seq->tokens, ids, (size_t) n * sizeof(int32_t));
	seq->n_tokens = n;
	seq->cap_tokens = n + 16;
	seq->n_prompt = n;
	seq->cache_salt = llm_prefix_salt(e->model_identity, p->cache_salt);
	seq->owner = r;
	seq->priority = (int32_t) req->priority;
	seq->session = req->session;
	if (e->spec != NULL)
	{
		if (llm_spec_start(e->spec, &r->spec_state) != 0)
			return LLM_ERR_OUT_OF_MEMORY;
		r->spec = e->spec;
	}
	r->max_len = (int64_t) n + p->max_tokens;
	if (r->max_len > e->cfg.n_ctx)
		r->max_len = e->cfg.n_ctx;
	llm_rng_seed(&r->rng, p->has_seed ? p->seed :
				 ((uint64_t) id * 0x9e3779b97f4a7c15ULL) ^ (uint64_t) (engine_now_ms() * 1e3));
	if (engine_output_init(r) != 0)
		return LLM_ERR_OUT_OF_MEMORY;
	return LLM_OK;
}

/*
 * The EMBED request over prompt ids (owned by the caller): one sequence of
 * the prompt, no processors, no speculation; its last row is a hidden row
 * (step.c).  Its status (err set).
 */
static llm_status
new_embed(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
		  const int32_t *ids, int32_t n, live_request **out, char *err, size_t errlen)
{
	live_request *r = request_new(id, user_data, req, n, 1);
	llm_seq    *seq;

	*out = r;
	snprintf(err, errlen, "out of memory queueing request");
	if (r == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	seq = &r->seqs[0];
	seq->tokens = malloc((size_t) n * sizeof(int32_t));
	if (seq->tokens == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	memcpy(seq->tokens, ids, (size_t) n * sizeof(int32_t));
	seq->n_tokens = n;
	seq->cap_tokens = n;
	seq->n_prompt = n;
	seq->cache_salt = llm_prefix_salt(e->model_identity, req->params.cache_salt);
	seq->owner = r;
	seq->priority = (int32_t) req->priority;
	seq->session = req->session;
	r->max_len = n;
	return LLM_OK;
}

/* r->echo: the JSON array of req's continuations ("[\"a\",\"b\"]"); 0 or -1. */
static int
echo_continuations(live_request *r, const llm_request *req)
{
	size_t		n = 2,
				at = 1;

	for (int32_t k = 0; k < req->n_continuations; k++)
		n += llm_json_write_string(req->continuations[k], req->continuation_lens[k], NULL, 0) + 1;
	r->echo = malloc(n + 1);
	if (r->echo == NULL)
		return -1;
	r->echo[0] = '[';
	for (int32_t k = 0; k < req->n_continuations; k++)
	{
		if (k > 0)
			r->echo[at++] = ',';
		at += llm_json_write_string(req->continuations[k], req->continuation_lens[k], r->echo + at, n - at);
	}
	r->echo[at++] = ']';
	r->echo[at] = '\0';
	r->echo_len = at;
	return 0;
}

/* A SCORE request's sequence of tokens[0..n): its class, session, salt and owner from r. */
static int
score_seq_init(llm_seq *seq, live_request *r, const llm_request *req, uint64_t salt, bool share_prefix,
			   int32_t n)
{
	seq->n_tokens = n;
	seq->cap_tokens = n;
	seq->tokens = malloc((size_t) n * sizeof(int32_t));
	seq->n_prompt = n;
	seq->share_prefix = share_prefix;
	seq->cache_salt = salt;
	seq->owner = r;
	seq->priority = (int32_t) req->priority;
	seq->session = req->session;
	return seq->tokens != NULL ? 0 : -1;
}

/*
 * The SCORE request over prompt ids: one sequence per continuation (see
 * score_part), and with two or more continuations the prompt's own
 * sequence (live_request.prompt_seq) they fork from, unless the sharing
 * is PER_CONTINUATION.  Every token of those sequences counts as prompt
 * (the backend computes them in the prompt order, as
 * llm_engine_debug_prompt_logits does, and a full block of them is
 * cacheable like any prompt block).  With prefix caching off the sequences
 * still share their prompt blocks, under a salt no other request uses.
 */
static llm_status
new_score(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
		  const tokenized *t, live_request **out, char *err, size_t errlen)
{
	const int32_t *ids = t->ids;
	int32_t		n = (int32_t) t->n;
	int32_t		nc = req->n_continuations;
	bool		fork = nc > 1 && e->score_sharing != LLM_SCORE_SHARE_PER_CONTINUATION;
	live_request *r = request_new(id, user_data, req, n, nc + (fork ? 1 : 0));
	uint64_t	salt;

	*out = r;
	if (r == NULL || (r->score = calloc((size_t) nc, sizeof(score_part))) == NULL)
		goto oom;
	r->n_continuations = nc;
	if (e->cfg.prefix_caching)
		salt = llm_prefix_salt(e->model_identity, req->params.cache_salt);
	else
		salt = llm_prefix_salt(e->model_identity ^ 0x5c0e5c0e5c0e5c0eULL, ++e->n_private_salts);
	if (fork)
	{
		/* the prompt alone; its last row is the first scored row of every continuation */
		r->prompt_seq = &r->seqs[nc];
		if (score_seq_init(r->prompt_seq, r, req, salt, !e->cfg.prefix_caching, n) != 0)
			goto oom;
		memcpy(r->prompt_seq->tokens, ids, (size_t) n * sizeof(int32_t));
		r->prompt_seq->n_tail_logits = 1;
	}
	for (int32_t k = 0; k < nc; k++)
	{
		llm_seq    *seq = &r->seqs[k];
		const int32_t *cont = t->cont[k];
		int32_t		m = t->n_cont[k];

		if (k >= t->n_cont_ok)
		{
			/* the continuation that could not be tokenized */
			snprintf(err, errlen, "%s", t->err);
			return t->cont_st;
		}
		if ((int64_t) n + m > e->cfg.n_ctx)
		{
			snprintf(err, errlen, "prompt of %d tokens plus continuation %d of %d tokens does not fit "
					 "the context length of %d tokens", n, k + 1, m, e->cfg.n_ctx);
			return LLM_ERR_PROMPT_TOO_LONG;
		}
		if (score_seq_init(seq, r, req, salt, !e->cfg.prefix_caching, n + m - 1) != 0)
			goto oom;
		memcpy(seq->tokens, ids, (size_t) n * sizeof(int32_t));
		memcpy(seq->tokens + n, cont, (size_t) (m - 1) * sizeof(int32_t));
		seq->n_tail_logits = m;
		seq->fork_from = r->prompt_seq;
		r->score[k].n_targets = m;
		r->score[k].last_token = cont[m - 1];
	}
	r->n_unscored = nc;
	if (req->continuation_echo && echo_continuations(r, req) != 0)
		goto oom;
	return LLM_OK;
oom:
	snprintf(err, errlen, "out of memory queueing request");
	return LLM_ERR_OUT_OF_MEMORY;
}

/*
 * The bytes of text req's prompt is made of: the prompt and system texts,
 * or the messages' contents (0 for token ids); *longest: its longest
 * continuation's, *all: all of its continuations'.
 */
static uint64_t
prompt_text_bytes(const llm_request *req, uint64_t *longest, uint64_t *all)
{
	uint64_t	bytes = 0;

	*longest = *all = 0;
	switch (req->prompt_kind)
	{
		case LLM_PROMPT_RAW:
			bytes = req->prompt_len;
			break;
		case LLM_PROMPT_TEXT:
			bytes = (uint64_t) req->prompt_len + (req->system != NULL ? req->system_len : 0);
			break;
		case LLM_PROMPT_MESSAGES:
			for (int i = 0; i < req->n_messages; i++)
				bytes += req->messages[i].content_len;
			break;
		case LLM_PROMPT_TOKENS:
			return 0;
	}
	if (req->mode == LLM_MODE_SCORE)
		for (int k = 0; k < req->n_continuations; k++)
		{
			*all += req->continuation_lens[k];
			if (req->continuation_lens[k] > *longest)
				*longest = req->continuation_lens[k];
		}
	return bytes;
}

/*
 * A prompt that cannot fit the context, known from its size alone: the
 * prompt and system texts (or the messages) and the longest continuation
 * have at least bytes / llm_tokenizer_max_token_bytes tokens.  Refused
 * before it is tokenized, so a prompt of megabytes never keeps the
 * tokenizer thread busy only to be refused.
 */
static llm_status
prompt_size_fits(const llm_engine *e, const llm_request *req, char *err, size_t errlen)
{
	int32_t		per_token = llm_tokenizer_max_token_bytes(e->tok);
	uint64_t	longest,
				all;
	uint64_t	bytes = prompt_text_bytes(req, &longest, &all);
	uint64_t	at_least;

	if (req->prompt_kind == LLM_PROMPT_TOKENS || per_token < 1)
		return LLM_OK;
	at_least = (bytes + longest) / (uint64_t) per_token;
	/* an EMBED prompt may fill the context (no generated token follows it) */
	if (at_least < (uint64_t) e->cfg.n_ctx + (req->mode == LLM_MODE_EMBED ? 1 : 0))
		return LLM_OK;
	snprintf(err, errlen, "prompt of %llu bytes does not fit the context length of %d tokens "
			 "(it has at least %llu tokens: no token of the model stands for more than %d bytes)",
			 (unsigned long long) (bytes + longest), e->cfg.n_ctx, (unsigned long long) at_least, per_token);
	return LLM_ERR_PROMPT_TOO_LONG;
}

/*
 * The rest of a submission once req's ids are known (t, owned by the
 * caller): the checks on the ids, the request built and queued (or
 * waiting for its grammar).  The same on the driver's inline path and for
 * a request coming back from the tokenizer thread.
 */
static llm_status
submit_ids(llm_engine *e, uint64_t id, const llm_request *req, void *user_data, const tokenized *t,
		   char *err, size_t errlen)
{
	llm_status	st;
	const int32_t *ids = t->ids;
	int64_t		n = t->n;
	live_request *r = NULL;

	if (n < 0)
	{
		snprintf(err, errlen, "%s", t->err);
		return LLM_ERR_INVALID_PARAM;
	}
	if (n == 0)
	{
		snprintf(err, errlen, "prompt must not be empty");
		return LLM_ERR_EMPTY_PROMPT;
	}
	/* a generating prompt leaves room for one generated token; an embedded one needs none */
	if (n > INT32_MAX || n > e->cfg.n_ctx - (req->mode == LLM_MODE_EMBED ? 0 : 1))
	{
		int32_t		most = e->cfg.n_ctx - (req->mode == LLM_MODE_EMBED ? 0 : 1);

		snprintf(err, errlen, "prompt of %lld tokens does not fit the context length of %d tokens "
				 "(at most %d prompt tokens)", (long long) n, e->cfg.n_ctx, most);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	for (int64_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= e->mc->n_vocab)
		{
			snprintf(err, errlen, "token id %d out of range [0, %d)", ids[i], e->mc->n_vocab);
			return LLM_ERR_INVALID_PARAM;
		}
	if (table_get(e, id) != NULL)
	{
		snprintf(err, errlen, "request id %llu is already live", (unsigned long long) id);
		return LLM_ERR_DUPLICATE_ID;
	}
	if (req->mode == LLM_MODE_SCORE)
		st = new_score(e, id, req, user_data, t, &r, err, errlen);
	else if (req->mode == LLM_MODE_EMBED)
		st = new_embed(e, id, req, user_data, ids, (int32_t) n, &r, err, errlen);
	else
		st = new_generate(e, id, req, user_data, ids, (int32_t) n, &r, err, errlen);
	if (st != LLM_OK)
	{
		if (r != NULL)
			grammar_wait_cancel(e, r);
		request_free(r);
		return st;
	}
	r->t_add = engine_now_ms();
	if (table_put(e, r) != 0)
		goto oom;
	/* waiting for its grammar: its sequence joins the scheduler in engine_grammar_admit */
	if (r->grammar_wait != NULL)
		grammar_wait_push(e, r);
	/* a SCORE request's prompt sequence first: its continuations wait for it */
	for (int32_t k = -1; r->grammar_wait == NULL && k < r->n_seqs; k++)
	{
		llm_seq    *seq = k < 0 ? r->prompt_seq : &r->seqs[k];

		if (seq == NULL || (k >= 0 && seq == r->prompt_seq))
			continue;
		if (llm_sched_add(e->sched, seq) != 0)
		{
			/* removing a sequence never added only marks it detached */
			for (int32_t j = 0; j < r->n_seqs; j++)
				llm_sched_remove(e->sched, &r->seqs[j]);
			table_del(e, id);
			goto oom;
		}
	}
	if (req->params.debug_poison_logits > 0)
		e->poison_logits = req->params.debug_poison_logits;
	if (r->mode == LLM_MODE_SCORE)
		e->n_live_score++;
	e->stats.prompt_tokens += n;
	return LLM_OK;

oom:
	grammar_wait_cancel(e, r);
	request_free(r);
	snprintf(err, errlen, "out of memory queueing request");
	return LLM_ERR_OUT_OF_MEMORY;
}

/* ---------- the tokenizer thread ---------- */

/*
 * One request's tokenization on the tokenizer thread.  The thread reads
 * only req (its own copy) and the engine's read-only tokenizer, chat
 * template and end_of_turn, and writes only out; owner is the driver's.
 */
typedef struct tokenize_job
{
	llm_offload_job base;		/* first: the offload's view of the job */
	const llm_engine *e;
	llm_request *req;			/* llm_request_copy of the submitted request */
	bool		text_only;		/* llm_engine_tokenize_request: req->prompt as plain text */
	live_request *owner;		/* driver: the waiting stand-in; NULL once it was dropped */
	atomic_bool dropped;		/* set with owner = NULL: a job not started yet is skipped */
	tokenized	out;
} tokenize_job;

static void
tokenize_job_run(llm_offload_job *base)
{
	tokenize_job *job = (tokenize_job *) base;

	if (atomic_load(&job->dropped))
		return;					/* nobody waits for it: collected and freed unseen */
	if (!job->text_only)
	{
		tokenize_request(job->e, job->req, &job->out);
		return;
	}
	job->out.n = llm_engine_tokenize(job->e, job->req->prompt, job->req->prompt_len, &job->out.ids,
									 job->out.err, sizeof(job->out.err));
	if (job->out.n < 0 && job->out.err[0] == '\0')
		snprintf(job->out.err, sizeof(job->out.err), "could not tokenize the text");
}

static void
tokenize_job_free(llm_offload_job *base)
{
	tokenize_job *job = (tokenize_job *) base;

	tokenized_free(&job->out);
	free(job->req);
	free(job);
}

/* A dropped stand-in leaves its job to finish on its own: collected and freed unseen. */
static void
tokenize_wait_cancel(llm_engine *e, live_request *r)
{
	if (r->tok_job == NULL)
		return;
	r->tok_job->owner = NULL;
	atomic_store(&r->tok_job->dropped, true);
	r->tok_job = NULL;
	e->n_tokenizing--;
}

/*
 * Queue req (validated, its size checked) for the tokenizer thread: a
 * stand-in takes id in the table now, the request is submitted over its
 * ids in engine_tokenize_admit.
 */
static llm_status
submit_async(llm_engine *e, uint64_t id, const llm_request *req, void *user_data, bool text_only,
			 char *err, size_t errlen)
{
	tokenize_job *job;
	live_request *r;

	if (table_get(e, id) != NULL)
	{
		snprintf(err, errlen, "request id %llu is already live", (unsigned long long) id);
		return LLM_ERR_DUPLICATE_ID;
	}
	job = calloc(1, sizeof(*job));
	r = request_new(id, user_data, req, 0, 1);
	if (job == NULL || r == NULL || (job->req = llm_request_copy(req)) == NULL)
		goto oom;
	job->base.run = tokenize_job_run;
	job->base.discard = tokenize_job_free;
	job->e = e;
	job->text_only = text_only;
	job->owner = r;
	r->seqs[0].state = LLM_SEQ_DETACHED;
	r->seqs[0].owner = r;
	r->tokenize_only = text_only;
	r->t_add = engine_now_ms();
	if (table_put(e, r) != 0)
		goto oom;
	if (llm_offload_push(e->tokenizer, &job->base, err, errlen) != 0)
	{
		table_del(e, id);
		request_free(r);
		tokenize_job_free(&job->base);
		return LLM_ERR_OUT_OF_MEMORY;
	}
	r->tok_job = job;
	e->n_tokenize_jobs++;
	e->n_tokenizing++;
	return LLM_OK;
oom:
	request_free(r);
	if (job != NULL)
		tokenize_job_free(&job->base);
	snprintf(err, errlen, "out of memory queueing request");
	return LLM_ERR_OUT_OF_MEMORY;
}

/* A finished job whose stand-in still waits: its request submitted over the ids, or failed. */
static void
admit_tokenized(llm_engine *e, tokenize_job *job, llm_event_cb cb, void *arg)
{
	live_request *r = job->owner;
	llm_status	st;
	char		err[1100];

	r->tok_job = NULL;
	e->n_tokenizing--;
	if (r->tokenize_only)
	{
		if (job->out.n < 0)
			engine_output_error(r, LLM_ERR_INVALID_TEXT, job->out.err, cb, arg);
		else
			engine_output_tokens(r, job->out.ids, job->out.n, cb, arg);
		engine_drop_request(e, r);
		return;
	}
	/* the request built from the ids takes the stand-in's place under its id */
	table_del(e, r->id);
	err[0] = '\0';
	st = submit_ids(e, r->id, job->req, r->user_data, &job->out, err, sizeof(err));
	if (st != LLM_OK)
		engine_output_error(r, st, err[0] ? err : llm_status_name(st), cb, arg);
	request_free(r);
}

void
engine_tokenize_admit(llm_engine *e, llm_event_cb cb, void *arg)
{
	llm_offload_job *done;

	if (e->n_tokenize_jobs == 0)
		return;
	done = llm_offload_take(e->tokenizer);
	if (done == NULL && e->n_tokenizing > 0 &&
		llm_sched_n_waiting(e->sched) + llm_sched_n_running(e->sched) == 0 &&
		llm_offload_wait(e->tokenizer, ENGINE_GRAMMAR_IDLE_MS))
		done = llm_offload_take(e->tokenizer);
	while (done != NULL)
	{
		tokenize_job *job = (tokenize_job *) done;

		done = done->next;
		e->n_tokenize_jobs--;
		if (job->owner != NULL)
			admit_tokenized(e, job, cb, arg);
		tokenize_job_free(&job->base);
	}
}

/* ---------- submission: the entry points ---------- */

llm_status
llm_engine_submit(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
				  char *err, size_t errlen)
{
	llm_status	st;
	tokenized	t;
	uint64_t	longest,
				all;

	if ((st = llm_request_validate(req, err, errlen)) != LLM_OK)
		return st;
	if (req->mode == LLM_MODE_SCORE && req->continuation_eot && e->end_of_turn < 0)
	{
		snprintf(err, errlen, "continuation_eot: the model has no end-of-turn token");
		return LLM_ERR_INVALID_PARAM;
	}
	if ((st = prompt_size_fits(e, req, err, errlen)) != LLM_OK)
		return st;
	if (req->prompt_kind != LLM_PROMPT_TOKENS &&
		prompt_text_bytes(req, &longest, &all) + all >= e->tokenize_inline_bytes)
		return submit_async(e, id, req, user_data, false, err, errlen);
	err[0] = '\0';
	tokenize_request(e, req, &t);
	st = submit_ids(e, id, req, user_data, &t, err, errlen);
	tokenized_free(&t);
	return st;
}

llm_status
llm_engine_tokenize_request(llm_engine *e, uint64_t id, const char *text, size_t len, void *user_data,
							int32_t **ids, int64_t *n, char *err, size_t errlen)
{
	llm_request q;

	*ids = NULL;
	*n = -1;
	if (len < e->tokenize_inline_bytes)
	{
		err[0] = '\0';
		*n = llm_engine_tokenize(e, text, len, ids, err, errlen);
		if (*n >= 0)
			return LLM_OK;
		if (err[0] == '\0')
			snprintf(err, errlen, "could not tokenize the text");
		return LLM_ERR_INVALID_TEXT;
	}
	llm_request_init(&q);
	q.prompt_kind = LLM_PROMPT_RAW;
	q.prompt = text;
	q.prompt_len = len;
	return submit_async(e, id, &q, user_data, true, err, errlen);
}

llm_status
llm_engine_add_request(llm_engine *e, uint64_t id, const int32_t *prompt, int32_t n,
					   const llm_sampling_params *p, void *user_data, char *err, size_t errlen)
{
	llm_request req;

	llm_request_init(&req);
	req.prompt_kind = LLM_PROMPT_TOKENS;
	req.tokens = prompt;
	req.n_tokens = n;
	req.params = *p;
	return llm_engine_submit(e, id, &req, user_data, err, errlen);
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
	llm_offload_debug_hold(e->tokenizer, hold);
}

bool
llm_engine_debug_tokenize_drain(llm_engine *e)
{
	return llm_offload_debug_drain(e->tokenizer);
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
