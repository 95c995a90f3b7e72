/*
 * lp_grammar.c — the grammar store, its compile thread and the grammar
 * logits processor (lp_grammar.h).
 */
#include "lp_grammar.h"
#include "engine/util/hash.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
 * One compile.  The driver fills entry, src and len and queues it; the
 * compile thread writes g, gs, ms and err, then puts the job on the
 * finished list (store mutex); the driver reads them after taking it off.
 */
typedef struct compile_job
{
	struct compile_job *next;	/* queue or finished list (store mutex) */
	struct grammar_entry *entry;	/* the driver's: never dereferenced by the compile thread */
	const char *src;			/* the entry's source */
	size_t		len;
	llm_grammar *g;
	llm_grammar_status gs;
	double		ms;
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
	bool		thread_started;
	pthread_t	thread;

	/* shared with the compile thread: under mu (n_done also read without it) */
	pthread_mutex_t mu;
	pthread_cond_t work;		/* the compile thread waits: a job, the gate opened, stop */
	pthread_cond_t finished;	/* the driver waits: a job finished (wait, drain) */
	compile_job *queue;			/* not started, FIFO */
	compile_job **queue_tail;
	compile_job *done;			/* finished, not collected, FIFO */
	compile_job **done_tail;
	atomic_int	n_done;			/* jobs on done */
	bool		hold;			/* the gate (test seam) */
	bool		stop;
	bool		running;		/* a job is being compiled */
	bool		index_built;	/* by the compile thread; handed over in new_index */
	llm_token_index *new_index; /* built, not taken over yet */
	llm_mask_cache *new_masks;
	double		new_index_ms;
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
	pthread_condattr_t ca;

	if (s == NULL)
		return NULL;
	s->tok = t;
	s->queue_tail = &s->queue;
	s->done_tail = &s->done;
	atomic_init(&s->n_done, 0);
	if (pthread_mutex_init(&s->mu, NULL) != 0)
	{
		free(s);
		return NULL;
	}
	/* timed waits on the monotonic clock */
	if (pthread_condattr_init(&ca) != 0)
		goto fail_mu;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&s->finished, &ca) != 0)
	{
		pthread_condattr_destroy(&ca);
		goto fail_mu;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_cond_init(&s->work, NULL) != 0)
	{
		pthread_cond_destroy(&s->finished);
		goto fail_mu;
	}
	return s;
fail_mu:
	pthread_mutex_destroy(&s->mu);
	free(s);
	return NULL;
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
job_discard(compile_job *job)
{
	llm_grammar_free(job->g);
	job->entry->job = NULL;
	free(job);
}

void
llm_grammar_store_free(llm_grammar_store *s)
{
	if (s == NULL)
		return;
	if (s->thread_started)
	{
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_broadcast(&s->work);
		pthread_mutex_unlock(&s->mu);
		/* a compile in progress runs to its end (lp_grammar.h, Shutdown) */
		pthread_join(s->thread, NULL);
	}
	while (s->queue)
	{
		compile_job *job = s->queue;

		s->queue = job->next;
		job_discard(job);
	}
	while (s->done)
	{
		compile_job *job = s->done;

		s->done = job->next;
		job_discard(job);
	}
	for (int i = 0; i < N_CHAINS; i++)
		while (s->chains[i])
		{
			grammar_entry *en = s->chains[i];

			s->chains[i] = en->next;
			entry_free(en);
		}
	llm_mask_cache_free(s->new_masks);
	llm_token_index_free(s->new_index);
	llm_mask_cache_free(s->masks);
	llm_token_index_free(s->index);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->finished);
	pthread_mutex_destroy(&s->mu);
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
 * One job, without the lock: the token index first when need_index (into
 * *ix / *mc), then the compile.
 */
static void
run_job(llm_grammar_store *s, compile_job *job, bool need_index, llm_token_index **ix, llm_mask_cache **mc,
		double *ix_ms)
{
	double		t0 = now_ns();

	if (need_index)
	{
		*ix = llm_token_index_from_tokenizer(s->tok, job->err, sizeof(job->err));
		if (*ix != NULL && (*mc = llm_mask_cache_create(*ix, LLM_GRAMMAR_MASK_CACHE_BYTES)) == NULL)
		{
			llm_token_index_free(*ix);
			*ix = NULL;
			snprintf(job->err, sizeof(job->err), "out of memory building the grammar mask cache");
		}
		if (*ix == NULL)
		{
			job->gs = LLM_GRAMMAR_NO_MEMORY;
			return;
		}
		*ix_ms = (now_ns() - t0) / 1e6;
		t0 = now_ns();
	}
	job->gs = llm_grammar_compile_source(job->src, job->len, &job->g, job->err, sizeof(job->err));
	if (job->gs != LLM_GRAMMAR_OK)
		job->g = NULL;
	job->ms = (now_ns() - t0) / 1e6;
}

static void *
compile_main(void *arg)
{
	llm_grammar_store *s = arg;
	sigset_t	all;

	/* signals are the driver's (the worker's PostgreSQL handlers) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&s->mu);
	for (;;)
	{
		compile_job *job;
		bool		need_index;
		llm_token_index *ix = NULL;
		llm_mask_cache *mc = NULL;
		double		ix_ms = 0;

		while (!s->stop && (s->hold || s->queue == NULL))
			pthread_cond_wait(&s->work, &s->mu);
		if (s->stop)
			break;
		job = s->queue;
		s->queue = job->next;
		if (s->queue == NULL)
			s->queue_tail = &s->queue;
		need_index = !s->index_built;
		s->running = true;
		pthread_mutex_unlock(&s->mu);

		run_job(s, job, need_index, &ix, &mc, &ix_ms);

		pthread_mutex_lock(&s->mu);
		if (ix != NULL)
		{
			s->new_index = ix;
			s->new_masks = mc;
			s->new_index_ms = ix_ms;
			s->index_built = true;
		}
		job->next = NULL;
		*s->done_tail = job;
		s->done_tail = &job->next;
		atomic_fetch_add(&s->n_done, 1);
		s->running = false;
		pthread_cond_broadcast(&s->finished);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static llm_status
ensure_thread(llm_grammar_store *s, char *err, size_t errlen)
{
	sigset_t	all,
				old;
	int			rc;

	if (s->thread_started)
		return LLM_OK;
	/* the thread inherits the creator's mask: block everything while creating it */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&s->thread, NULL, compile_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
	{
		snprintf(err, errlen, "could not start the grammar compile thread: %s", strerror(rc));
		return LLM_ERR_OUT_OF_MEMORY;
	}
	s->thread_started = true;
	return LLM_OK;
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
	llm_status	st;

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
	if ((st = ensure_thread(s, err, errlen)) != LLM_OK)
		return st;
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
	job->entry = en;
	job->src = en->src;
	job->len = len;
	pthread_mutex_lock(&s->mu);
	*s->queue_tail = job;
	s->queue_tail = &job->next;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->mu);
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
	compile_job *done;
	int			n = 0;

	if (atomic_load(&s->n_done) == 0)
		return 0;
	pthread_mutex_lock(&s->mu);
	done = s->done;
	s->done = NULL;
	s->done_tail = &s->done;
	atomic_store(&s->n_done, 0);
	if (s->new_index != NULL)
	{
		s->index = s->new_index;
		s->masks = s->new_masks;
		s->st.index_ms = s->new_index_ms;
		s->new_index = NULL;
		s->new_masks = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	while (done)
	{
		compile_job *job = done;

		done = job->next;
		collect(s, job);
		n++;
	}
	evict(s);
	return n;
}

bool
llm_grammar_store_wait(llm_grammar_store *s, double max_ms)
{
	struct timespec until;
	bool		got;

	if (atomic_load(&s->n_done) > 0)
		return true;
	if (s->n_pending == 0)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t) (max_ms / 1e3);
	until.tv_nsec += (long) (fmod(max_ms, 1e3) * 1e6);
	if (until.tv_nsec >= 1000000000L)
	{
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mu);
	while (atomic_load(&s->n_done) == 0 &&
		   pthread_cond_timedwait(&s->finished, &s->mu, &until) != ETIMEDOUT)
		;
	got = atomic_load(&s->n_done) > 0;
	pthread_mutex_unlock(&s->mu);
	return got;
}

void
llm_grammar_store_debug_hold(llm_grammar_store *s, bool hold)
{
	pthread_mutex_lock(&s->mu);
	s->hold = hold;
	pthread_cond_broadcast(&s->work);
	pthread_mutex_unlock(&s->mu);
}

bool
llm_grammar_store_debug_drain(llm_grammar_store *s)
{
	pthread_mutex_lock(&s->mu);
	if (s->hold)
	{
		pthread_mutex_unlock(&s->mu);
		return false;
	}
	while (s->queue != NULL || s->running)
		pthread_cond_wait(&s->finished, &s->mu);
	pthread_mutex_unlock(&s->mu);
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
