/*
 * lp_grammar.c — the grammar store and the grammar logits processor
 * (lp_grammar.h).
 */
#include "lp_grammar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* mask-time histogram: 8 buckets per octave of nanoseconds, 1 ns .. 2^32 ns */
#define HIST_PER_OCTAVE	8
#define HIST_BUCKETS	(32 * HIST_PER_OCTAVE)

typedef struct grammar_entry
{
	struct grammar_entry *next;	/* hash chain */
	uint64_t	hash;
	char	   *src;
	size_t		len;
	llm_grammar *g;
	int32_t		refs;			/* processors using it */
	uint64_t	last_use;		/* store tick of the last processor made from it */
} grammar_entry;

#define N_CHAINS 128

struct llm_grammar_store
{
	const llm_tokenizer *tok;
	llm_token_index *index;		/* NULL until the first grammar */
	llm_mask_cache *masks;
	grammar_entry *chains[N_CHAINS];
	int32_t		n_entries;
	size_t		bytes;
	uint64_t	tick;
	llm_grammar_store_stats st;
	int64_t		hist[HIST_BUCKETS];
	double		mask_ns_total;
};

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t
source_hash(const char *s, size_t n)
{
	uint64_t	h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
	{
		h ^= (uint8_t) s[i];
		h *= 1099511628211ull;
	}
	h ^= h >> 31;
	return h;
}

llm_grammar_store *
llm_grammar_store_create(const llm_tokenizer *t)
{
	llm_grammar_store *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->tok = t;
	return s;
}

static void
entry_free(grammar_entry *en)
{
	llm_grammar_free(en->g);
	free(en->src);
	free(en);
}

void
llm_grammar_store_free(llm_grammar_store *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < N_CHAINS; i++)
		while (s->chains[i])
		{
			grammar_entry *en = s->chains[i];

			s->chains[i] = en->next;
			entry_free(en);
		}
	llm_mask_cache_free(s->masks);
	llm_token_index_free(s->index);
	free(s);
}

/* Evict unused entries, least recently used first, while over a bound. */
static void
evict(llm_grammar_store *s)
{
	while (s->n_entries > LLM_GRAMMAR_STORE_MAX || s->bytes > LLM_GRAMMAR_STORE_BYTES)
	{
		grammar_entry **victim = NULL;

		for (int i = 0; i < N_CHAINS; i++)
			for (grammar_entry **p = &s->chains[i]; *p; p = &(*p)->next)
				if ((*p)->refs == 0 && (victim == NULL || (*p)->last_use < (*victim)->last_use))
					victim = p;
		if (victim == NULL)
			return;				/* everything is in use */
		{
			grammar_entry *en = *victim;

			*victim = en->next;
			s->n_entries--;
			s->bytes -= llm_grammar_memory(en->g);
			s->st.evictions++;
			entry_free(en);
		}
	}
}

static llm_status
grammar_status(llm_grammar_status gs)
{
	switch (gs)
	{
		case LLM_GRAMMAR_OK:
			return LLM_OK;
		case LLM_GRAMMAR_INVALID:
			return LLM_ERR_INVALID_PARAM;
		case LLM_GRAMMAR_TOO_LARGE:
			return LLM_ERR_PROMPT_TOO_LONG;
		case LLM_GRAMMAR_NO_MEMORY:
			break;
	}
	return LLM_ERR_OUT_OF_MEMORY;
}

/* The token index and mask cache, made at the first grammar. */
static llm_status
ensure_index(llm_grammar_store *s, char *err, size_t errlen)
{
	double		t0;

	if (s->index != NULL)
		return LLM_OK;
	t0 = now_ns();
	s->index = llm_token_index_from_tokenizer(s->tok, err, errlen);
	if (s->index == NULL)
		return LLM_ERR_OUT_OF_MEMORY;
	s->masks = llm_mask_cache_create(s->index, LLM_GRAMMAR_MASK_CACHE_BYTES);
	if (s->masks == NULL)
	{
		llm_token_index_free(s->index);
		s->index = NULL;
		snprintf(err, errlen, "out of memory building the grammar mask cache");
		return LLM_ERR_OUT_OF_MEMORY;
	}
	s->st.index_ms = (now_ns() - t0) / 1e6;
	return LLM_OK;
}

/* The entry of src, compiled on a miss; its reference taken. */
static llm_status
entry_get(llm_grammar_store *s, const char *src, size_t len, grammar_entry **out, char *err, size_t errlen)
{
	uint64_t	h = source_hash(src, len);
	grammar_entry *en;
	llm_grammar *g;
	llm_grammar_status gs;
	double		t0,
				ms;

	for (en = s->chains[h % N_CHAINS]; en; en = en->next)
		if (en->hash == h && en->len == len && memcmp(en->src, src, len) == 0)
		{
			en->refs++;
			en->last_use = ++s->tick;
			s->st.hits++;
			*out = en;
			return LLM_OK;
		}
	t0 = now_ns();
	gs = llm_grammar_compile_source(src, len, &g, err, errlen);
	if (gs != LLM_GRAMMAR_OK)
		return grammar_status(gs);
	ms = (now_ns() - t0) / 1e6;
	s->st.compiles++;
	s->st.compile_ms_total += ms;
	if (ms > s->st.compile_ms_max)
		s->st.compile_ms_max = ms;
	en = calloc(1, sizeof(*en));
	if (en != NULL)
		en->src = malloc(len);
	if (en == NULL || en->src == NULL)
	{
		free(en);
		llm_grammar_free(g);
		snprintf(err, errlen, "out of memory keeping the grammar");
		return LLM_ERR_OUT_OF_MEMORY;
	}
	memcpy(en->src, src, len);
	en->len = len;
	en->hash = h;
	en->g = g;
	en->refs = 1;
	en->last_use = ++s->tick;
	en->next = s->chains[h % N_CHAINS];
	s->chains[h % N_CHAINS] = en;
	s->n_entries++;
	s->bytes += llm_grammar_memory(g);
	evict(s);
	*out = en;
	return LLM_OK;
}

static void
record_mask_time(llm_grammar_store *s, double ns)
{
	int			b = 0;

	if (ns >= 1.0)
		b = (int) floor(log2(ns) * HIST_PER_OCTAVE);
	if (b >= HIST_BUCKETS)
		b = HIST_BUCKETS - 1;
	s->hist[b]++;
	s->st.n_masked++;
	s->mask_ns_total += ns;
}

/* The q-quantile of the recorded mask times, in microseconds (bucket's geometric middle). */
static double
hist_quantile(const llm_grammar_store *s, double q)
{
	int64_t		need,
				seen = 0;

	if (s->st.n_masked == 0)
		return 0.0;
	need = (int64_t) ceil(q * (double) s->st.n_masked);
	if (need < 1)
		need = 1;
	for (int b = 0; b < HIST_BUCKETS; b++)
	{
		seen += s->hist[b];
		if (seen >= need)
			return exp2((b + 0.5) / HIST_PER_OCTAVE) / 1e3;
	}
	return exp2((double) HIST_BUCKETS / HIST_PER_OCTAVE) / 1e3;
}

void
llm_grammar_store_get_stats(const llm_grammar_store *s, llm_grammar_store_stats *out)
{
	*out = s->st;
	out->n_grammars = s->n_entries;
	out->grammar_bytes = s->bytes;
	if (s->masks)
		llm_mask_cache_get_stats(s->masks, &out->masks);
	else
		memset(&out->masks, 0, sizeof(out->masks));
	out->mask_us_mean = s->st.n_masked ? s->mask_ns_total / (double) s->st.n_masked / 1e3 : 0.0;
	out->mask_us_p50 = hist_quantile(s, 0.50);
	out->mask_us_p99 = hist_quantile(s, 0.99);
}

/* ---------- the processor ---------- */

typedef struct lp_grammar
{
	llm_logits_processor base;
	llm_grammar_store *store;
	grammar_entry *entry;
	llm_grammar_state state;
} lp_grammar;

static int
lp_grammar_apply(llm_logits_processor *lp, float *row, int32_t n_vocab, const int32_t *tokens,
				 int32_t n_tokens, float *work)
{
	lp_grammar *p = (lp_grammar *) lp;
	llm_grammar_store *s = p->store;
	double		t0 = now_ns();
	int32_t		n_allowed = 0;
	const uint32_t *mask;

	if (n_vocab != llm_token_index_n_vocab(s->index))
		return -1;
	mask = llm_mask_cache_get(s->masks, p->entry->g, p->state, &n_allowed);
	if (mask == NULL || n_allowed == 0)
		return -1;
	llm_grammar_mask_apply(mask, n_vocab, row);
	record_mask_time(s, now_ns() - t0);
	return 0;
}

static int
lp_grammar_accept(llm_logits_processor *lp, int32_t token)
{
	lp_grammar *p = (lp_grammar *) lp;
	llm_grammar_state next;

	if (llm_tokenizer_is_eog(p->store->tok, token))
		return llm_grammar_is_accepting(p->entry->g, p->state) ? 0 : -1;
	next = llm_grammar_advance_token(p->store->index, p->entry->g, p->state, token);
	if (next == LLM_GRAMMAR_DEAD)
		return -1;
	p->state = next;
	return 0;
}

static bool
lp_grammar_complete(const llm_logits_processor *lp)
{
	const lp_grammar *p = (const lp_grammar *) lp;

	return llm_grammar_is_accepting(p->entry->g, p->state) &&
		!llm_grammar_can_continue(p->entry->g, p->state);
}

static void
lp_grammar_destroy(llm_logits_processor *lp)
{
	lp_grammar *p = (lp_grammar *) lp;

	p->entry->refs--;
	p->entry->last_use = ++p->store->tick;
	evict(p->store);
	free(p);
}

static const llm_logits_processor_ops lp_grammar_ops = {
	.name = "grammar",
	.apply = lp_grammar_apply,
	.accept = lp_grammar_accept,
	.destroy = lp_grammar_destroy,
	.complete = lp_grammar_complete,
};

llm_status
llm_lp_grammar(llm_grammar_store *s, const char *src, size_t len, llm_logits_processor **out,
			   char *err, size_t errlen)
{
	lp_grammar *p;
	llm_status	st;
	grammar_entry *en;

	*out = NULL;
	if ((st = ensure_index(s, err, errlen)) != LLM_OK)
		return st;
	if ((st = entry_get(s, src, len, &en, err, errlen)) != LLM_OK)
		return st;
	p = malloc(sizeof(*p));
	if (p == NULL)
	{
		en->refs--;
		snprintf(err, errlen, "out of memory");
		return LLM_ERR_OUT_OF_MEMORY;
	}
	p->base.ops = &lp_grammar_ops;
	p->store = s;
	p->entry = en;
	p->state = llm_grammar_start(en->g);
	*out = &p->base;
	return LLM_OK;
}
