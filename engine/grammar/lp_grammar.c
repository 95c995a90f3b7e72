/*
 * lp_grammar.c — the grammar store, its compile thread (a job thread,
 * engine/util/job_thread.h) and the grammar logits processor
 * (lp_grammar.h).
 */
#include "lp_grammar.h"
#include "engine/util/hash.h"
#include "engine/util/job_thread.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* mask-time histogram: 8 buckets per octave of nanoseconds, 1 ns .. 2^32 ns */
#define HIST_PER_OCTAVE	8
#define HIST_BUCKETS	(32 * HIST_PER_OCTAVE)

/* a compile's error message (JSON paths and offsets included) */
#define JOB_ERR_LEN		2048

struct grammar_entry;

/*
 * One compile.  The driver fills store, entry, src and len and queues it;
 * the compile thread writes g, gs, ms and err (and, for the first job, the
 * token index it built first); the driver reads them after taking the job
 * from the thread.
 */
typedef struct compile_job
{
	llm_job		base;			/* first: the job thread's view of it */
	struct llm_grammar_store *store;	/* the compile thread reads tok and index_built */
	struct grammar_entry *entry;	/* the driver's: never dereferenced by the compile thread */
	const char *src;			/* the entry's source */
	size_t		len;
	llm_grammar *g;
	llm_grammar_status gs;
	double		ms;
	llm_token_index *ix;		/* built by this job (the first), not taken over yet */
	llm_mask_cache *mc;
	double		ix_ms;
	char		err[JOB_ERR_LEN];
} compile_job;

typedef enum entry_state
{
	ENTRY_PENDING,				/* its compile is queued, running or not collected */
	ENTRY_READY,				/* g compiled */
	ENTRY_FAILED				/* job holds the error; out of the hash chains */
} entry_state;

/* Driver thread only. */
typedef struct grammar_entry
{
	struct grammar_entry *next;	/* hash chain (PENDING and READY entries) */
	uint64_t	hash;
	char	   *src;
	size_t		len;
	entry_state state;
	llm_grammar *g;				/* READY */
	compile_job *job;			/* PENDING: queued or finished; FAILED: the failed one */
	int32_t		refs;			/* references: waiting requests and processors */
	uint64_t	last_use;		/* store tick of the last request or processor end */
	double		t_queued;		/* ms (monotonic) its compile was queued */
} grammar_entry;

#define N_CHAINS 128

struct llm_grammar_store
{
	/* driver thread only */
	const llm_tokenizer *tok;
	llm_token_index *index;		/* NULL until the first compile is collected */
	llm_mask_cache *masks;
	grammar_entry *chains[N_CHAINS];
	int32_t		n_entries;		/* in the chains: PENDING and READY */
	int32_t		n_pending;
	int32_t		n_waiting;		/* references not yet taken or released */
	size_t		bytes;			/* of READY grammars */
	uint64_t	tick;
	llm_grammar_store_stats st;
	int64_t		hist[HIST_BUCKETS];
	double		mask_ns_total;
	llm_job_thread *compiler;	/* the compile thread and its queue */

	/* the compile thread only */
	bool		index_built;	/* handed over with the job that built it */
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
	uint64_t	h = llm_fnv1a64(s, n);

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
	s->compiler = llm_job_thread_create("grammar compile", 0);
	if (s->compiler == NULL)
	{
		free(s);
		return NULL;
	}
	return s;
}

static void
entry_free(grammar_entry *en)
{
	llm_grammar_free(en->g);
	if (en->state == ENTRY_FAILED)
		free(en->job);
	free(en->src);
	free(en);
}

/* A job's memory and what its compile made, once nothing will collect it. */
static void
job_discard(llm_job *base)
{
	compile_job *job = (compile_job *) base;

	llm_mask_cache_free(job->mc);
	llm_token_index_free(job->ix);
	llm_grammar_free(job->g);
	job->entry->job = NULL;
	free(job);
}

void
llm_grammar_store_free(llm_grammar_store *s)
{
	if (s == NULL)
		return;
	/* a compile in progress runs to its end (lp_grammar.h, Shutdown); the jobs not collected are discarded */
	llm_job_thread_free(s->compiler);
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

/* Evict unused READY entries, least recently used first, while over a bound. */
static void
evict(llm_grammar_store *s)
{
	while (s->n_entries > LLM_GRAMMAR_STORE_MAX || s->bytes > LLM_GRAMMAR_STORE_BYTES)
	{
		grammar_entry **victim = NULL;

		for (int i = 0; i < N_CHAINS; i++)
			for (grammar_entry **p = &s->chains[i]; *p; p = &(*p)->next)
				if ((*p)->refs == 0 && (*p)->state == ENTRY_READY &&
					(victim == NULL || (*p)->last_use < (*victim)->last_use))
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

/* ---------- the compile thread ---------- */

/*
 * One job on the compile thread: the token index first when no job built
 * it yet (into the job, for the driver to take over), then the compile.
 */
static void
compile_job_run(llm_job *base)
{
	compile_job *job = (compile_job *) base;
	llm_grammar_store *s = job->store;
	double		t0 = now_ns();

	if (!s->index_built)
	{
		job->ix = llm_token_index_from_tokenizer(s->tok, job->err, sizeof(job->err));
		if (job->ix != NULL && (job->mc = llm_mask_cache_create(job->ix, LLM_GRAMMAR_MASK_CACHE_BYTES)) == NULL)
		{
			llm_token_index_free(job->ix);
			job->ix = NULL;
			snprintf(job->err, sizeof(job->err), "out of memory building the grammar mask cache");
		}
		if (job->ix == NULL)
		{
			job->gs = LLM_GRAMMAR_NO_MEMORY;
			return;
		}
		s->index_built = true;
		job->ix_ms = (now_ns() - t0) / 1e6;
		t0 = now_ns();
	}
	job->gs = llm_grammar_compile_source(job->src, job->len, &job->g, job->err, sizeof(job->err));
	if (job->gs != LLM_GRAMMAR_OK)
		job->g = NULL;
	job->ms = (now_ns() - t0) / 1e6;
}

/* ---------- entries and references (driver thread) ---------- */

static void
chain_unlink(llm_grammar_store *s, grammar_entry *en)
{
	for (grammar_entry **p = &s->chains[en->hash % N_CHAINS]; *p; p = &(*p)->next)
		if (*p == en)
		{
			*p = en->next;
			s->n_entries--;
			return;
		}
}

/* Drop one reference; an unused READY entry stays cached (LRU), an unused FAILED one goes. */
static void
entry_unref(llm_grammar_store *s, grammar_entry *en)
{
	en->refs--;
	if (en->state == ENTRY_FAILED)
	{
		if (en->refs == 0)
			entry_free(en);
		return;
	}
	en->last_use = ++s->tick;
	evict(s);
}

llm_status
llm_grammar_store_request(llm_grammar_store *s, const char *src, size_t len, llm_grammar_ref **out,
						  char *err, size_t errlen)
{
	uint64_t	h = source_hash(src, len);
	grammar_entry *en;
	compile_job *job;

	*out = NULL;
	for (en = s->chains[h % N_CHAINS]; en; en = en->next)
		if (en->hash == h && en->len == len && memcmp(en->src, src, len) == 0)
		{
			en->refs++;
			en->last_use = ++s->tick;
			s->n_waiting++;
			s->st.hits++;
			*out = (llm_grammar_ref *) en;
			return LLM_OK;
		}
	if (llm_job_thread_start(s->compiler, err, errlen) != 0)
		return LLM_ERR_OUT_OF_MEMORY;
	en = calloc(1, sizeof(*en));
	job = calloc(1, sizeof(*job));
	if (en != NULL)
		en->src = malloc(len > 0 ? len : 1);
	if (en == NULL || en->src == NULL || job == NULL)
	{
		if (en != NULL)
			free(en->src);
		free(en);
		free(job);
		snprintf(err, errlen, "out of memory keeping the grammar");
		return LLM_ERR_OUT_OF_MEMORY;
	}
	memcpy(en->src, src, len);
	en->len = len;
	en->hash = h;
	en->state = ENTRY_PENDING;
	en->job = job;
	en->refs = 1;
	en->last_use = ++s->tick;
	en->t_queued = now_ns() / 1e6;
	en->next = s->chains[h % N_CHAINS];
	s->chains[h % N_CHAINS] = en;
	s->n_entries++;
	s->n_pending++;
	s->n_waiting++;
	job->base.run = compile_job_run;
	job->base.discard = job_discard;
	job->store = s;
	job->entry = en;
	job->src = en->src;
	job->len = len;
	/* the thread is running (llm_job_thread_start above): the push cannot fail */
	(void) llm_job_thread_push(s->compiler, &job->base, err, errlen);
	evict(s);
	*out = (llm_grammar_ref *) en;
	return LLM_OK;
}

bool
llm_grammar_ref_ready(const llm_grammar_ref *ref)
{
	return ((const grammar_entry *) ref)->state != ENTRY_PENDING;
}

void
llm_grammar_store_release(llm_grammar_store *s, llm_grammar_ref *ref)
{
	s->n_waiting--;
	entry_unref(s, (grammar_entry *) ref);
}

/* A finished job's result into its entry. */
static void
collect(llm_grammar_store *s, compile_job *job)
{
	grammar_entry *en = job->entry;
	double		waited = now_ns() / 1e6 - en->t_queued;

	s->n_pending--;
	if (waited > s->st.wait_ms_max)
		s->st.wait_ms_max = waited;
	if (job->gs == LLM_GRAMMAR_OK)
	{
		en->state = ENTRY_READY;
		en->g = job->g;
		en->job = NULL;
		s->bytes += llm_grammar_memory(en->g);
		s->st.compiles++;
		s->st.compile_ms_total += job->ms;
		if (job->ms > s->st.compile_ms_max)
			s->st.compile_ms_max = job->ms;
		free(job);
		return;
	}
	/* not kept: the next request for this source compiles it again */
	en->state = ENTRY_FAILED;
	s->st.compile_failures++;
	chain_unlink(s, en);
	if (en->refs == 0)
		entry_free(en);
}

int
llm_grammar_store_poll(llm_grammar_store *s)
{
	llm_job    *done = llm_job_thread_take(s->compiler);
	int			n = 0;

	if (done == NULL)
		return 0;
	/* the token index comes with the job that built it (the first that could) */
	for (llm_job *j = done; j != NULL; j = j->next)
	{
		compile_job *job = (compile_job *) j;

		if (job->ix != NULL)
		{
			s->index = job->ix;
			s->masks = job->mc;
			s->st.index_ms = job->ix_ms;
			job->ix = NULL;
			job->mc = NULL;
		}
	}
	while (done)
	{
		compile_job *job = (compile_job *) done;

		done = done->next;
		collect(s, job);
		n++;
	}
	evict(s);
	return n;
}

bool
llm_grammar_store_wait(llm_grammar_store *s, double max_ms)
{
	/* nothing queued or running: only an uncollected finished compile counts, without waiting */
	return llm_job_thread_wait(s->compiler, s->n_pending == 0 ? 0 : max_ms);
}

void
llm_grammar_store_debug_hold(llm_grammar_store *s, bool hold)
{
	llm_job_thread_debug_hold(s->compiler, hold);
}

bool
llm_grammar_store_debug_drain(llm_grammar_store *s)
{
	if (!llm_job_thread_debug_drain(s->compiler))
		return false;
	llm_grammar_store_poll(s);
	return true;
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
	out->n_grammars = s->n_entries - s->n_pending;
	out->grammar_bytes = s->bytes;
	out->compiles_pending = s->n_pending;
	out->requests_waiting = s->n_waiting;
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

	entry_unref(p->store, p->entry);
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
llm_lp_grammar_take(llm_grammar_store *s, llm_grammar_ref *ref, llm_logits_processor **out,
					char *err, size_t errlen)
{
	grammar_entry *en = (grammar_entry *) ref;
	lp_grammar *p;
	llm_status	st;

	*out = NULL;
	if (en->state == ENTRY_PENDING)
	{
		snprintf(err, errlen, "the grammar is not compiled yet");
		return LLM_ERR_INVALID_PARAM;
	}
	s->n_waiting--;
	if (en->state == ENTRY_FAILED)
	{
		st = grammar_status(en->job->gs);
		snprintf(err, errlen, "%s", en->job->err);
		entry_unref(s, en);
		return st;
	}
	p = malloc(sizeof(*p));
	if (p == NULL)
	{
		entry_unref(s, en);
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
