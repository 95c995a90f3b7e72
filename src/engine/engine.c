/*
 * engine.c — requests, steps and events on top of the model, scheduler,
 * block pool and sampler (see engine.h).
 */
#define _GNU_SOURCE
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "backend.h"
#include "backend_loader.h"
#include "gguf.h"
#include "kv_block_pool.h"
#include "model.h"
#include "quant_types.h"
#include "sampler.h"
#include "scheduler.h"
#include "tokenizer.h"

/* A request living in the engine, from submission to its final event. */
typedef struct live_request
{
	uint64_t	id;
	void	   *user_data;
	llm_seq		seq;
	llm_sampling_params params;
	char	  **stop;			/* owned copies of params.stop */
	size_t		max_stop_len;
	llm_rng		rng;
	llm_detok	detok;
	char	   *text;			/* generated text so far (NUL-terminated) */
	size_t		text_len;
	size_t		text_cap;
	size_t		emitted;		/* bytes of text already sent as TEXT events */
	int64_t		max_len;		/* finish at this many tokens (prompt + output) */
	int32_t		n_generated;
	double		t_add;
	double		t_first;
} live_request;

struct llm_engine
{
	llm_engine_config cfg;
	char	   *model_path;
	gguf_file  *gguf;
	llm_tokenizer *tok;
	llm_chat_template chat;
	llm_backend *backend;
	llm_model  *model;
	const llm_model_config *mc;
	llm_block_pool *pool;
	llm_sched  *sched;
	llm_sampler_scratch sampler;
	int32_t		n_ctx;
	uint64_t	model_identity; /* mixed into every prefix-cache salt */
	float	   *logits;			/* [cap_out][n_vocab] host */
	int32_t		cap_out;
	/* step description arrays */
	int32_t    *d_tokens, *d_pos, *d_slots, *d_seq_start, *d_seq_kv_len, *d_block_tables, *d_out_rows;
	uint8_t    *d_decode;		/* [cap_d_tokens] generated-token flags */
	int32_t		cap_d_tokens, cap_d_seqs, cap_d_tables;
	/* live requests by id: open addressing, NULL empty, TOMB deleted */
	live_request **table;
	uint32_t	table_mask;
	int32_t		n_live;
	int32_t		n_tomb;
	int			poison_logits;
	llm_engine_stats stats;
};

#define TOMB ((live_request *) (uintptr_t) 1)

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
grow_i32(int32_t **arr, int32_t *cap, int64_t need)
{
	int64_t		c = *cap ? *cap : 64;
	void	   *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	if (c > INT32_MAX)
		return -1;
	p = realloc(*arr, (size_t) c * sizeof(int32_t));
	if (p == NULL)
		return -1;
	*arr = p;
	*cap = (int32_t) c;
	return 0;
}

void
llm_engine_config_defaults(llm_engine_config *c)
{
	memset(c, 0, sizeof(*c));
	c->device = "auto";
	c->n_threads = 0;
	c->n_ctx = 0;
	c->block_size = 16;
	c->kv_cache_bytes = 0;
	c->max_batched_tokens = 512;
	c->max_running = 64;
	c->prefix_caching = true;
}

static bool
str_equal(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool
llm_engine_config_equal(const llm_engine_config *a, const llm_engine_config *b)
{
	return str_equal(a->model_path, b->model_path) &&
		str_equal(a->device ? a->device : "auto", b->device ? b->device : "auto") &&
		a->n_threads == b->n_threads &&
		a->n_ctx == b->n_ctx &&
		a->block_size == b->block_size &&
		a->kv_cache_bytes == b->kv_cache_bytes &&
		a->max_batched_tokens == b->max_batched_tokens &&
		a->max_running == b->max_running &&
		a->prefix_caching == b->prefix_caching;
}

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

llm_engine *
llm_engine_create(const llm_engine_config *c, char *err, size_t errlen)
{
	llm_engine *e;
	llm_kv_geometry g;
	size_t		block_bytes;
	int64_t		kv_bytes;

	if (c == NULL || c->model_path == NULL || c->model_path[0] == '\0')
	{
		snprintf(err, errlen, "no model file given");
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	e->cfg = *c;
	e->model_path = strdup(c->model_path);
	e->cfg.model_path = e->model_path;
	if (e->cfg.block_size <= 0)
		e->cfg.block_size = 16;
	if (e->cfg.max_batched_tokens <= 0)
		e->cfg.max_batched_tokens = 512;
	if (e->cfg.max_running <= 0)
		e->cfg.max_running = 64;
	if (table_rehash(e, 64))
		goto oom;

	e->gguf = gguf_open(c->model_path, err, errlen);
	if (e->gguf == NULL)
		goto fail;
	if (model_file_identity(c->model_path, &e->model_identity) != 0)
	{
		snprintf(err, errlen, "could not read model file \"%s\" to identify it", c->model_path);
		goto fail;
	}
	e->tok = llm_tokenizer_create(e->gguf, err, errlen);
	if (e->tok == NULL)
		goto fail;
	if (llm_chat_template_init(&e->chat, e->gguf, e->tok, err, errlen) != 0)
		goto fail;

	e->backend = llm_backend_open(c->device, c->n_threads, err, errlen);
	if (e->backend == NULL)
		goto fail;
	e->model = llm_model_load(e->gguf, e->backend, err, errlen);
	if (e->model == NULL)
		goto fail;
	e->mc = llm_model_get_config(e->model);
	if (llm_tokenizer_n_vocab(e->tok) != e->mc->n_vocab)
	{
		snprintf(err, errlen, "tokenizer vocabulary (%d) does not match the model (%d)",
				 llm_tokenizer_n_vocab(e->tok), e->mc->n_vocab);
		goto fail;
	}
	e->n_ctx = c->n_ctx > 0 ? c->n_ctx : e->mc->n_ctx_train;
	if (e->n_ctx < 2)
	{
		snprintf(err, errlen, "context length %d too small", e->n_ctx);
		goto fail;
	}

	g.n_layers = e->mc->n_layers;
	g.n_kv_heads = e->mc->n_kv_heads;
	g.head_dim = e->mc->head_dim;
	g.block_size = e->cfg.block_size;
	g.n_blocks = 1;
	block_bytes = llm_kv_block_bytes(&g);
	kv_bytes = c->kv_cache_bytes;
	if (kv_bytes <= 0)
	{
		int64_t		want = (int64_t) e->cfg.max_running * e->n_ctx / e->cfg.block_size * (int64_t) block_bytes;

		kv_bytes = want < ((int64_t) 1 << 30) ? want : ((int64_t) 1 << 30);
	}
	g.n_blocks = (int) (kv_bytes / (int64_t) block_bytes);
	if (g.n_blocks < 2)
	{
		snprintf(err, errlen, "KV cache budget of %lld bytes holds fewer than 2 blocks of %zu bytes",
				 (long long) kv_bytes, block_bytes);
		goto fail;
	}
	if (e->backend->ops->kv_init(e->backend, &g) != 0)
	{
		snprintf(err, errlen, "KV cache: %s", e->backend->ops->last_error(e->backend));
		goto fail;
	}
	e->pool = llm_block_pool_create(g.n_blocks, g.block_size);
	if (e->pool == NULL)
		goto oom;
	{
		llm_sched_config sc = {
			.max_batched_tokens = e->cfg.max_batched_tokens,
			.max_running = e->cfg.max_running,
			.prefix_caching = e->cfg.prefix_caching,
		};

		e->sched = llm_sched_create(e->pool, &sc);
		if (e->sched == NULL)
			goto oom;
	}
	if (llm_sampler_scratch_init(&e->sampler, e->mc->n_vocab))
		goto oom;
	e->stats.kv_blocks_total = g.n_blocks;
	return e;

oom:
	snprintf(err, errlen, "out of memory");
fail:
	llm_engine_destroy(e);
	return NULL;
}

static void
request_free(live_request *r)
{
	if (r == NULL)
		return;
	llm_seq_free(&r->seq);
	if (r->stop)
		for (int i = 0; i < r->params.n_stop; i++)
			free(r->stop[i]);
	free(r->stop);
	free(r->text);
	free(r);
}

void
llm_engine_destroy(llm_engine *e)
{
	if (e == NULL)
		return;
	if (e->table)
	{
		for (uint32_t i = 0; i <= e->table_mask; i++)
			if (e->table[i] != NULL && e->table[i] != TOMB)
			{
				if (e->sched)
					llm_sched_remove(e->sched, &e->table[i]->seq);
				request_free(e->table[i]);
			}
		free(e->table);
	}
	llm_sched_destroy(e->sched);
	llm_block_pool_destroy(e->pool);
	llm_sampler_scratch_free(&e->sampler);
	llm_model_free(e->model);
	if (e->backend)
		e->backend->ops->destroy(e->backend);
	llm_chat_template_free(&e->chat);
	llm_tokenizer_destroy(e->tok);
	if (e->gguf)
		gguf_close(e->gguf);
	free(e->logits);
	free(e->d_tokens);
	free(e->d_pos);
	free(e->d_slots);
	free(e->d_seq_start);
	free(e->d_seq_kv_len);
	free(e->d_block_tables);
	free(e->d_out_rows);
	free(e->d_decode);
	free(e->model_path);
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
	return e->n_ctx;
}

int32_t
llm_engine_n_vocab(const llm_engine *e)
{
	return e->mc->n_vocab;
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
							 "\"max_batched_tokens\": %d, \"max_running\": %d, \"prefix_caching\": %s}",
							 m->arch, name, m->n_layers, m->dim, m->n_heads, m->n_kv_heads,
							 m->head_dim, m->ffn_dim, m->n_vocab, m->n_ctx_train, e->n_ctx,
							 m->rope_theta, m->rms_eps, wt, m->tied_output ? "true" : "false",
							 fam, e->backend->ops->name, e->backend->n_threads, e->cfg.block_size,
							 llm_block_pool_n_blocks(e->pool), e->cfg.max_batched_tokens,
							 e->cfg.max_running, e->cfg.prefix_caching ? "true" : "false");
}

/* ---------- requests ---------- */

llm_status
llm_engine_add_request(llm_engine *e, uint64_t id, const int32_t *prompt, int32_t n,
					   const llm_sampling_params *p, void *user_data, char *err, size_t errlen)
{
	live_request *r;
	llm_status	st;

	if (n <= 0 || prompt == NULL)
	{
		snprintf(err, errlen, "prompt is empty");
		return LLM_ERR_EMPTY_PROMPT;
	}
	{
		llm_request check;

		llm_request_init(&check);
		check.prompt_kind = LLM_PROMPT_TOKENS;
		check.tokens = prompt;
		check.n_tokens = n;
		check.params = *p;
		if ((st = llm_request_validate(&check, err, errlen)) != LLM_OK)
			return st;
	}
	if (n >= e->n_ctx)
	{
		snprintf(err, errlen, "prompt of %d tokens does not fit the context length of %d tokens "
				 "(at most %d prompt tokens)", n, e->n_ctx, e->n_ctx - 1);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	for (int32_t i = 0; i < n; i++)
		if (prompt[i] < 0 || prompt[i] >= e->mc->n_vocab)
		{
			snprintf(err, errlen, "token id %d out of range [0, %d)", prompt[i], e->mc->n_vocab);
			return LLM_ERR_INVALID_PARAM;
		}
	if (table_get(e, id) != NULL)
	{
		snprintf(err, errlen, "request id %llu is already live", (unsigned long long) id);
		return LLM_ERR_DUPLICATE_ID;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		goto oom;
	r->id = id;
	r->user_data = user_data;
	r->params = *p;
	r->params.stop = NULL;
	if (p->n_stop > 0)
	{
		r->stop = calloc(p->n_stop, sizeof(char *));
		if (r->stop == NULL)
			goto oom;
		for (int i = 0; i < p->n_stop; i++)
		{
			size_t		len = strlen(p->stop[i]);

			if ((r->stop[i] = strdup(p->stop[i])) == NULL)
				goto oom;
			if (len > r->max_stop_len)
				r->max_stop_len = len;
		}
	}
	r->seq.tokens = malloc((size_t) (n + 16) * sizeof(int32_t));
	if (r->seq.tokens == NULL)
		goto oom;
	memcpy(r->seq.tokens, prompt, (size_t) n * sizeof(int32_t));
	r->seq.n_tokens = n;
	r->seq.cap_tokens = n + 16;
	r->seq.n_prompt = n;
	r->seq.cache_salt = llm_prefix_salt(e->model_identity, p->cache_salt);
	r->seq.owner = r;
	r->max_len = (int64_t) n + p->max_tokens;
	if (r->max_len > e->n_ctx)
		r->max_len = e->n_ctx;
	llm_rng_seed(&r->rng, p->has_seed ? p->seed : ((uint64_t) id * 0x9e3779b97f4a7c15ULL) ^ (uint64_t) (now_ms() * 1e3));
	llm_detok_init(&r->detok);
	r->text_cap = 256;
	r->text = malloc(r->text_cap);
	if (r->text == NULL)
		goto oom;
	r->text[0] = '\0';
	r->t_add = now_ms();
	if (table_put(e, r) != 0)
		goto oom;
	if (llm_sched_add(e->sched, &r->seq) != 0)
	{
		table_del(e, id);
		goto oom;
	}
	e->stats.prompt_tokens += n;
	return LLM_OK;

oom:
	request_free(r);
	snprintf(err, errlen, "out of memory queueing request");
	return LLM_ERR_OUT_OF_MEMORY;
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

/* The prompt of req as token ids (malloc'd); -1 + err. */
static int64_t
prompt_ids(const llm_engine *e, const llm_request *req, int32_t **ids, char *err, size_t errlen)
{
	switch (req->prompt_kind)
	{
		case LLM_PROMPT_RAW:
			return llm_engine_tokenize(e, req->prompt, req->prompt_len, ids, err, errlen);
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
	snprintf(err, errlen, "unknown prompt kind");
	return -1;
}

llm_status
llm_engine_submit(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
				  char *err, size_t errlen)
{
	llm_status	st;
	int32_t    *ids = NULL;
	int64_t		n;

	if ((st = llm_request_validate(req, err, errlen)) != LLM_OK)
		return st;
	if (req->mode == LLM_MODE_SCORE)
	{
		snprintf(err, errlen, "scoring requests are not supported by this engine");
		return LLM_ERR_INVALID_PARAM;
	}
	err[0] = '\0';
	n = prompt_ids(e, req, &ids, err, errlen);
	if (n < 0)
	{
		if (err[0] == '\0')
			snprintf(err, errlen, "could not tokenize the prompt");
		return LLM_ERR_INVALID_PARAM;
	}
	if (n == 0)
	{
		free(ids);
		snprintf(err, errlen, "prompt must not be empty");
		return LLM_ERR_EMPTY_PROMPT;
	}
	if (n > INT32_MAX || n >= e->n_ctx)
	{
		snprintf(err, errlen, "prompt of %lld tokens does not fit the context length of %d tokens "
				 "(at most %d prompt tokens)", (long long) n, e->n_ctx, e->n_ctx - 1);
		free(ids);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	if (req->params.debug_poison_logits > 0)
		e->poison_logits = req->params.debug_poison_logits;
	st = llm_engine_add_request(e, id, ids, (int32_t) n, &req->params, user_data, err, errlen);
	free(ids);
	return st;
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

static void
drop_request(llm_engine *e, live_request *r)
{
	llm_sched_remove(e->sched, &r->seq);
	table_del(e, r->id);
	request_free(r);
}

bool
llm_engine_abort(llm_engine *e, uint64_t id)
{
	live_request *r = table_get(e, id);

	if (r == NULL)
		return false;
	drop_request(e, r);
	return true;
}

bool
llm_engine_has_work(const llm_engine *e)
{
	return e->n_live > 0;
}

static void
fill_usage(const live_request *r, llm_usage *u, double t_now)
{
	u->prompt_tokens = r->seq.n_prompt;
	u->cached_tokens = r->seq.n_cached_tokens;
	u->completion_tokens = r->n_generated;
	u->ttft_ms = r->n_generated > 0 ? r->t_first - r->t_add : 0.0;
	u->total_ms = t_now - r->t_add;
	u->n_preemptions = r->seq.n_preemptions;
}

static void
emit_error(llm_engine *e, live_request *r, llm_status st, const char *msg, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = LLM_EVENT_ERROR;
	ev.request_id = r->id;
	ev.user_data = r->user_data;
	ev.status = st;
	ev.text = msg;
	ev.text_len = strlen(msg);
	ev.token_id = -1;
	fill_usage(r, &ev.usage, now_ms());
	cb(&ev, arg);
	drop_request(e, r);
}

static void
emit_finish(llm_engine *e, live_request *r, llm_finish_reason why, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = LLM_EVENT_FINISHED;
	ev.request_id = r->id;
	ev.user_data = r->user_data;
	ev.finish_reason = why;
	ev.token_id = -1;
	fill_usage(r, &ev.usage, now_ms());
	cb(&ev, arg);
	drop_request(e, r);
}

static int
text_append(live_request *r, const char *s, size_t n)
{
	if (r->text_len + n + 1 > r->text_cap)
	{
		size_t		c = r->text_cap * 2;
		char	   *p;

		while (c < r->text_len + n + 1)
			c *= 2;
		p = realloc(r->text, c);
		if (p == NULL)
			return -1;
		r->text = p;
		r->text_cap = c;
	}
	memcpy(r->text + r->text_len, s, n);
	r->text_len += n;
	r->text[r->text_len] = '\0';
	return 0;
}

/*
 * Stop-string handling on the text: returns the offset of the earliest match
 * starting in the newly added region, or -1; *safe gets how many bytes can
 * be emitted now (all but a tail that may still grow into a stop string).
 */
static int64_t
find_stop(const live_request *r, size_t old_len, size_t *safe)
{
	int64_t		best = -1;
	size_t		hold = 0;

	*safe = r->text_len;
	if (r->params.n_stop == 0)
		return -1;
	for (int i = 0; i < r->params.n_stop; i++)
	{
		const char *st = r->stop[i];
		size_t		sl = strlen(st);
		size_t		from = old_len >= sl - 1 ? old_len - (sl - 1) : 0;
		const char *hit;

		if (sl <= r->text_len)
		{
			hit = memmem(r->text + from, r->text_len - from, st, sl);
			if (hit && (best < 0 || hit - r->text < best))
				best = hit - r->text;
		}
		/* longest suffix of text that is a proper prefix of st */
		for (size_t k = (sl - 1 < r->text_len ? sl - 1 : r->text_len); k > hold; k--)
			if (memcmp(r->text + r->text_len - k, st, k) == 0)
			{
				hold = k;
				break;
			}
	}
	*safe = r->text_len - hold;
	return best;
}

static void
emit_text(live_request *r, size_t upto, int32_t token, llm_event_cb cb, void *arg)
{
	llm_event	ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = LLM_EVENT_TEXT;
	ev.request_id = r->id;
	ev.user_data = r->user_data;
	ev.token_id = token;
	if (upto > r->emitted)
	{
		ev.text = r->text + r->emitted;
		ev.text_len = upto - r->emitted;
		r->emitted = upto;
	}
	else
		ev.text = "";
	cb(&ev, arg);
}

/* Handle one sampled token; may finish (and free) the request. */
static void
accept_token(llm_engine *e, live_request *r, int32_t tok, llm_event_cb cb, void *arg)
{
	char		buf[256];
	int			nb;
	size_t		old_len = r->text_len;
	size_t		safe;
	int64_t		stop_at;
	double		t = now_ms();

	if (r->n_generated == 0)
		r->t_first = t;
	r->n_generated++;
	e->stats.completion_tokens++;
	if (llm_seq_append(&r->seq, tok) != 0)
	{
		emit_error(e, r, LLM_ERR_OUT_OF_MEMORY, "out of memory", cb, arg);
		return;
	}
	if (!r->params.ignore_eos && llm_tokenizer_is_eog(e->tok, tok))
	{
		nb = llm_detok_flush(&r->detok, buf, sizeof(buf));
		if (nb > 0)
			text_append(r, buf, (size_t) nb);
		stop_at = find_stop(r, old_len, &safe);
		emit_text(r, stop_at >= 0 ? (size_t) stop_at : r->text_len, tok, cb, arg);
		emit_finish(e, r, LLM_FINISH_STOP, cb, arg);
		return;
	}
	nb = llm_detok_push(e->tok, &r->detok, tok, buf, sizeof(buf));
	if (nb > 0 && text_append(r, buf, (size_t) nb) != 0)
	{
		emit_error(e, r, LLM_ERR_OUT_OF_MEMORY, "out of memory", cb, arg);
		return;
	}
	stop_at = find_stop(r, old_len, &safe);
	if (stop_at >= 0)
	{
		r->text_len = (size_t) stop_at;
		r->text[r->text_len] = '\0';
		emit_text(r, r->text_len, tok, cb, arg);
		emit_finish(e, r, LLM_FINISH_STOP, cb, arg);
		return;
	}
	if (r->seq.n_tokens >= r->max_len)
	{
		nb = llm_detok_flush(&r->detok, buf, sizeof(buf));
		if (nb > 0)
			text_append(r, buf, (size_t) nb);
		emit_text(r, r->text_len, tok, cb, arg);
		emit_finish(e, r, LLM_FINISH_LENGTH, cb, arg);
		return;
	}
	emit_text(r, safe, tok, cb, arg);
}

/* ---------- the step ---------- */

static int
build_step(llm_engine *e, const llm_sched_plan *p, llm_step_desc *d)
{
	int32_t		bs = e->cfg.block_size;
	int32_t		t = 0,
				n_out = 0;

	if (p->n_tokens > e->cap_d_tokens)
	{
		int32_t		c;

		c = e->cap_d_tokens;
		if (grow_i32(&e->d_tokens, &c, p->n_tokens))
			return -1;
		c = e->cap_d_tokens;
		if (grow_i32(&e->d_pos, &c, p->n_tokens))
			return -1;
		c = e->cap_d_tokens;
		if (grow_i32(&e->d_slots, &c, p->n_tokens))
			return -1;
		{
			uint8_t    *f = realloc(e->d_decode, (size_t) c);

			if (f == NULL)
				return -1;
			e->d_decode = f;
		}
		e->cap_d_tokens = c;
	}
	if (p->n_entries + 1 > e->cap_d_seqs)
	{
		int32_t		c;

		c = e->cap_d_seqs;
		if (grow_i32(&e->d_seq_start, &c, p->n_entries + 1))
			return -1;
		c = e->cap_d_seqs;
		if (grow_i32(&e->d_seq_kv_len, &c, p->n_entries + 1))
			return -1;
		c = e->cap_d_seqs;
		if (grow_i32(&e->d_out_rows, &c, p->n_entries + 1))
			return -1;
		e->cap_d_seqs = c;
	}
	if (grow_i32(&e->d_block_tables, &e->cap_d_tables,
				 (int64_t) p->n_entries * (p->max_blocks > 0 ? p->max_blocks : 1)))
		return -1;
	for (int32_t i = 0; i < p->n_entries; i++)
	{
		const llm_sched_entry *en = &p->entries[i];
		const llm_seq *s = en->seq;

		e->d_seq_start[i] = t;
		e->d_seq_kv_len[i] = en->start + en->n;
		for (int32_t k = 0; k < en->n; k++, t++)
		{
			int32_t		pos = en->start + k;

			e->d_tokens[t] = s->tokens[pos];
			e->d_pos[t] = pos;
			e->d_slots[t] = s->blocks[pos / bs] * bs + pos % bs;
			e->d_decode[t] = pos >= s->n_prompt;
		}
		memcpy(&e->d_block_tables[(size_t) i * p->max_blocks], s->blocks, (size_t) s->n_blocks * sizeof(int32_t));
		for (int32_t k = s->n_blocks; k < p->max_blocks; k++)
			e->d_block_tables[(size_t) i * p->max_blocks + k] = 0;
		if (en->sample)
			e->d_out_rows[n_out++] = t - 1;
	}
	e->d_seq_start[p->n_entries] = t;
	d->n_tokens = t;
	d->n_seqs = p->n_entries;
	d->token_ids = e->d_tokens;
	d->positions = e->d_pos;
	d->slots = e->d_slots;
	d->seq_start = e->d_seq_start;
	d->seq_kv_len = e->d_seq_kv_len;
	d->block_tables = e->d_block_tables;
	d->max_blocks_per_seq = p->max_blocks;
	d->out_rows = e->d_out_rows;
	d->n_out = n_out;
	d->decode_rows = e->d_decode;
	if (n_out > e->cap_out)
	{
		float	   *l = realloc(e->logits, (size_t) n_out * e->mc->n_vocab * sizeof(float));

		if (l == NULL)
			return -1;
		e->logits = l;
		e->cap_out = n_out;
	}
	return 0;
}

static void
fail_all(llm_engine *e, llm_status st, const char *msg, llm_event_cb cb, void *arg)
{
	for (uint32_t i = 0; i <= e->table_mask; i++)
	{
		live_request *r = e->table[i];

		if (r != NULL && r != TOMB)
			emit_error(e, r, st, msg, cb, arg);
	}
}

llm_status
llm_engine_step(llm_engine *e, llm_event_cb cb, void *cb_arg)
{
	llm_sched_plan *p;
	llm_step_desc d;
	char		err[512];
	int32_t		row = 0;

	if (llm_sched_plan_step(e->sched, &p) != 0)
	{
		fail_all(e, LLM_ERR_OUT_OF_MEMORY, "out of memory while scheduling", cb, cb_arg);
		return LLM_ERR_OUT_OF_MEMORY;
	}
	for (int32_t i = 0; i < p->n_unfittable; i++)
	{
		live_request *r = p->unfittable[i]->owner;

		snprintf(err, sizeof(err), "sequence of %d tokens does not fit the KV cache (%d blocks of %d tokens); "
				 "raise llm.kv_cache_size", r->seq.n_tokens + 1,
				 llm_block_pool_n_blocks(e->pool), e->cfg.block_size);
		emit_error(e, r, LLM_ERR_OUT_OF_MEMORY, err, cb, cb_arg);
	}
	e->stats.n_preemptions = llm_sched_n_preemptions(e->sched);
	if (p->n_entries == 0)
		return LLM_OK;
	if (build_step(e, p, &d) != 0)
	{
		fail_all(e, LLM_ERR_OUT_OF_MEMORY, "out of memory building a step", cb, cb_arg);
		return LLM_ERR_OUT_OF_MEMORY;
	}
	if (llm_model_forward(e->model, &d, e->logits, err, sizeof(err)) != 0)
	{
		fail_all(e, LLM_ERR_BACKEND, err, cb, cb_arg);
		return LLM_ERR_BACKEND;
	}
	llm_sched_commit(e->sched, p);

	e->stats.n_steps++;
	e->stats.last_batch_seqs = p->n_entries;
	e->stats.last_batch_tokens = p->n_tokens;
	if (p->n_entries > e->stats.max_batch_seqs)
		e->stats.max_batch_seqs = p->n_entries;

	for (int32_t i = 0; i < p->n_entries; i++)
	{
		llm_sched_entry *en = &p->entries[i];
		live_request *r = en->seq->owner;
		float	   *lg;
		int32_t		tok;

		if (!en->sample)
			continue;
		lg = e->logits + (size_t) row++ * e->mc->n_vocab;
		if (e->poison_logits > 0)
		{
			e->poison_logits--;
			lg[0] = NAN;
		}
		if (!llm_logits_all_finite(lg, e->mc->n_vocab))
		{
			emit_error(e, r, LLM_ERR_NONFINITE, "non-finite logits produced by the model", cb, cb_arg);
			continue;
		}
		tok = llm_sample(&e->sampler, lg, r->params.temperature, r->params.top_k, r->params.top_p,
						 r->params.min_p, r->params.repetition_penalty,
						 r->seq.tokens, r->seq.n_tokens, &r->rng);
		accept_token(e, r, tok, cb, cb_arg);
	}
	return LLM_OK;
}

void
llm_engine_get_stats(const llm_engine *e, llm_engine_stats *out)
{
	*out = e->stats;
	out->n_waiting = llm_sched_n_waiting(e->sched);
	out->n_running = llm_sched_n_running(e->sched);
	out->kv_blocks_total = llm_block_pool_n_blocks(e->pool);
	out->kv_blocks_used = out->kv_blocks_total - llm_block_pool_n_free(e->pool);
	out->kv_blocks_cached = llm_block_pool_n_cached_free(e->pool);
	out->n_preemptions = llm_sched_n_preemptions(e->sched);
	llm_sched_prefix_stats(e->sched, &out->prefix_queries, &out->cached_prompt_tokens);
}

void
llm_engine_debug_poison_logits(llm_engine *e, int n)
{
	e->poison_logits = n;
}

llm_status
llm_engine_debug_prompt_logits(llm_engine *e, const int32_t *ids, int32_t n, float *out,
							   char *err, size_t errlen)
{
	llm_seq		seq;
	llm_sched_plan plan;
	llm_sched_entry en;
	llm_step_desc d;
	int32_t		bs = e->cfg.block_size;
	int32_t		nb = (n + bs - 1) / bs;
	llm_status	st = LLM_OK;

	if (e->n_live > 0)
	{
		snprintf(err, errlen, "engine busy");
		return LLM_ERR_INVALID_PARAM;
	}
	if (n <= 0 || n >= e->n_ctx)
	{
		snprintf(err, errlen, "prompt length %d out of range", n);
		return LLM_ERR_PROMPT_TOO_LONG;
	}
	memset(&seq, 0, sizeof(seq));
	seq.tokens = (int32_t *) ids;
	seq.n_tokens = n;
	seq.n_prompt = n;
	seq.blocks = malloc((size_t) nb * sizeof(int32_t));
	if (seq.blocks == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	for (; seq.n_blocks < nb; seq.n_blocks++)
		if ((seq.blocks[seq.n_blocks] = llm_block_alloc(e->pool)) < 0)
		{
			snprintf(err, errlen, "KV cache too small");
			st = LLM_ERR_OUT_OF_MEMORY;
			goto done;
		}
	memset(&plan, 0, sizeof(plan));
	en.seq = &seq;
	en.start = 0;
	en.n = n;
	en.sample = true;
	plan.entries = &en;
	plan.n_entries = 1;
	plan.n_tokens = n;
	plan.max_blocks = nb;
	if (build_step(e, &plan, &d) != 0)
	{
		st = LLM_ERR_OUT_OF_MEMORY;
		goto done;
	}
	if (llm_model_forward(e->model, &d, e->logits, err, errlen) != 0)
	{
		st = LLM_ERR_BACKEND;
		goto done;
	}
	memcpy(out, e->logits, (size_t) e->mc->n_vocab * sizeof(float));
done:
	for (int32_t i = seq.n_blocks - 1; i >= 0; i--)
		llm_block_release(e->pool, seq.blocks[i]);
	free(seq.blocks);
	return st;
}
