/* scheduler.c — see scheduler.h. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

struct llm_sched
{
	llm_block_pool *pool;
	llm_sched_config cfg;
	int32_t		block_size;
	/* running: ordered by arrival; waiting: FIFO with preempted pushed in front */
	llm_seq   **running;
	int32_t		n_running;
	int32_t		cap_running;
	llm_seq   **waiting;
	int32_t		n_waiting;
	int32_t		cap_waiting;
	uint64_t	next_arrival;
	int64_t		n_preemptions;
	int64_t		prefix_query_tokens;
	int64_t		prefix_hit_tokens;
	llm_sched_plan plan;
	int32_t		cap_entries;
	int32_t		cap_unfittable;
};

static int
grow(void **arr, int32_t *cap, int32_t need, size_t elem)
{
	int32_t		c = *cap ? *cap : 16;
	void	   *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*arr, (size_t) c * elem);
	if (p == NULL)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

llm_sched  *
llm_sched_create(llm_block_pool *pool, const llm_sched_config *c)
{
	llm_sched  *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->pool = pool;
	s->cfg = *c;
	s->block_size = llm_block_pool_block_size(pool);
	return s;
}

void
llm_sched_destroy(llm_sched *s)
{
	if (s == NULL)
		return;
	free(s->running);
	free(s->waiting);
	free(s->plan.entries);
	free(s->plan.unfittable);
	free(s);
}

int
llm_seq_append(llm_seq *seq, int32_t token)
{
	if (grow((void **) &seq->tokens, &seq->cap_tokens, seq->n_tokens + 1, sizeof(int32_t)))
		return -1;
	seq->tokens[seq->n_tokens++] = token;
	return 0;
}

void
llm_seq_free(llm_seq *seq)
{
	free(seq->tokens);
	free(seq->blocks);
	seq->tokens = NULL;
	seq->blocks = NULL;
}

int
llm_sched_add(llm_sched *s, llm_seq *seq)
{
	if (grow((void **) &s->waiting, &s->cap_waiting, s->n_waiting + 1, sizeof(llm_seq *)))
		return -1;
	seq->arrival = s->next_arrival++;
	seq->state = LLM_SEQ_WAITING;
	seq->n_computed = 0;
	s->waiting[s->n_waiting++] = seq;
	return 0;
}

static void
release_blocks(llm_sched *s, llm_seq *seq)
{
	/* release in reverse so a sequence's tail blocks are evicted before its head (vLLM) */
	for (int32_t i = seq->n_blocks - 1; i >= 0; i--)
		llm_block_release(s->pool, seq->blocks[i]);
	seq->n_blocks = 0;
	seq->n_computed = 0;
	seq->n_registered = 0;
	seq->last_hash = seq->cache_salt;
}

static void
remove_from(llm_seq **arr, int32_t *n, llm_seq *seq)
{
	for (int32_t i = 0; i < *n; i++)
		if (arr[i] == seq)
		{
			memmove(&arr[i], &arr[i + 1], (size_t) (*n - i - 1) * sizeof(llm_seq *));
			(*n)--;
			return;
		}
}

void
llm_sched_remove(llm_sched *s, llm_seq *seq)
{
	if (seq->state == LLM_SEQ_RUNNING)
		remove_from(s->running, &s->n_running, seq);
	else if (seq->state == LLM_SEQ_WAITING)
		remove_from(s->waiting, &s->n_waiting, seq);
	release_blocks(s, seq);
	seq->state = LLM_SEQ_DETACHED;
}

/* Make seq's block table cover n_tokens tokens; false when the pool runs dry. */
static bool
ensure_blocks(llm_sched *s, llm_seq *seq, int32_t n_tokens)
{
	int32_t		need = (n_tokens + s->block_size - 1) / s->block_size;

	if (grow((void **) &seq->blocks, &seq->cap_blocks, need, sizeof(int32_t)))
		return false;
	while (seq->n_blocks < need)
	{
		int32_t		b = llm_block_alloc(s->pool);

		if (b < 0)
			return false;
		seq->blocks[seq->n_blocks++] = b;
	}
	return true;
}

/* Leading prompt tokens of block k of seq (the rest of it are generated tokens). */
static int32_t
block_prompt_rows(const llm_seq *seq, int32_t k, int32_t bs)
{
	int32_t		rows = seq->n_prompt - k * bs;

	return rows < 0 ? 0 : (rows > bs ? bs : rows);
}

static int32_t
min_i32(int32_t a, int32_t b)
{
	return a < b ? a : b;
}

/* Prefix caching applies to seq: on for every sequence, or forced for it. */
static bool
prefix_on(const llm_sched *s, const llm_seq *seq)
{
	return s->cfg.prefix_caching || seq->share_prefix;
}

/*
 * Extend seq's verified chain of cached blocks as far as the prefix cache
 * allows: at admission (no blocks yet: the longest cached prefix) and on
 * every later step while it still prefills, so a request admitted together
 * with another one carrying the same prefix picks up the blocks that one has
 * filled meanwhile (its own partly computed block is dropped for the cached
 * one).  Every token whose logits are wanted stays uncomputed so its logits
 * exist.  Prompt tokens served this way on the first pass count as hits (in
 * the statistics only while prefix caching is on: a scoring request sharing
 * its prompt among its own sequences is not a cache hit).
 */
static void
extend_cached_prefix(llm_sched *s, llm_seq *seq)
{
	int32_t		bs = s->block_size;
	int32_t		max_blocks = llm_seq_first_logits(seq) / bs;
	int32_t		k,
				k0;

	if (seq->n_blocks == 0)
	{
		seq->n_registered = 0;
		seq->last_hash = seq->cache_salt;
	}
	if (!prefix_on(s, seq))
		return;
	if (!seq->prefix_queried && seq->n_preemptions == 0)
	{
		seq->prefix_queried = true;
		seq->n_cached_tokens = 0;
		if (s->cfg.prefix_caching)
			s->prefix_query_tokens += seq->n_prompt;
	}
	/* only a fully registered computed prefix is a chain that can be extended */
	k0 = k = seq->n_registered;
	if (k >= max_blocks || k != seq->n_computed / bs)
		return;
	while (k < max_blocks)
	{
		const int32_t *toks = &seq->tokens[(size_t) k * bs];
		int32_t		rows = block_prompt_rows(seq, k, bs);
		uint64_t	h = llm_block_hash(seq->last_hash, toks, bs, rows);
		int32_t		b = llm_block_lookup(s->pool, h, k > 0 ? seq->blocks[k - 1] : -1, toks, rows);

		if (b < 0)
			break;
		if (k < seq->n_blocks)
		{
			/* a private block not (fully) computed yet: the cached one replaces it */
			llm_block_release(s->pool, seq->blocks[k]);
			seq->blocks[k] = b;
		}
		else
		{
			if (grow((void **) &seq->blocks, &seq->cap_blocks, k + 1, sizeof(int32_t)))
			{
				llm_block_release(s->pool, b);
				break;
			}
			seq->blocks[seq->n_blocks++] = b;
		}
		seq->last_hash = h;
		k++;
	}
	if (k == k0)
		return;
	seq->n_registered = k;
	seq->n_computed = k * bs;
	if (seq->n_preemptions == 0)
	{
		int32_t		hit = min_i32(k * bs, seq->n_prompt) - min_i32(k0 * bs, seq->n_prompt);

		seq->n_cached_tokens += hit;
		if (s->cfg.prefix_caching)
			s->prefix_hit_tokens += hit;
	}
}

/*
 * True when an entry already in this step's plan fills, from the same salt
 * and tokens, the block that waiting seq would prefill next: seq then waits
 * a step and takes that block from the cache instead of computing a copy
 * (SGLang's in-batch prefix sharing; vLLM computes both).
 */
static bool
next_block_in_flight(const llm_sched *s, const llm_seq *seq)
{
	int32_t		bs = s->block_size;
	int32_t		end = (seq->n_registered + 1) * bs;

	if (!prefix_on(s, seq) || seq->n_computed != seq->n_registered * bs ||
		end > llm_seq_first_logits(seq))
		return false;
	for (int32_t i = 0; i < s->plan.n_entries; i++)
	{
		const llm_sched_entry *e = &s->plan.entries[i];
		const llm_seq *o = e->seq;

		if (o == seq || o->cache_salt != seq->cache_salt || o->n_tokens < end ||
			e->start >= end || e->start + e->n < end ||
			min_i32(o->n_prompt, end) != min_i32(seq->n_prompt, end))
			continue;
		if (memcmp(o->tokens, seq->tokens, (size_t) end * sizeof(int32_t)) == 0)
			return true;
	}
	return false;
}

static void
preempt(llm_sched *s, llm_seq *victim)
{
	remove_from(s->running, &s->n_running, victim);
	release_blocks(s, victim);
	victim->state = LLM_SEQ_WAITING;
	victim->n_preemptions++;
	s->n_preemptions++;
	s->plan.n_preempted++;
	/* head of the waiting queue: it keeps its place ahead of newer requests */
	memmove(&s->waiting[1], &s->waiting[0], (size_t) s->n_waiting * sizeof(llm_seq *));
	s->waiting[0] = victim;
	s->n_waiting++;
}

static int
add_entry(llm_sched *s, llm_seq *seq, int32_t n)
{
	llm_sched_plan *p = &s->plan;
	llm_sched_entry *e;

	if (grow((void **) &p->entries, &s->cap_entries, p->n_entries + 1, sizeof(llm_sched_entry)))
		return -1;
	e = &p->entries[p->n_entries++];
	e->seq = seq;
	e->start = seq->n_computed;
	e->n = n;
	e->sample = (seq->n_computed + n == seq->n_tokens);
	e->logits_from = llm_seq_first_logits(seq);
	if (e->logits_from < e->start)
		e->logits_from = e->start;
	if (e->logits_from > e->start + n)
		e->logits_from = e->start + n;
	p->n_tokens += n;
	p->n_logits += e->start + n - e->logits_from;
	if (seq->n_blocks > p->max_blocks)
		p->max_blocks = seq->n_blocks;
	return 0;
}

static int
mark_unfittable(llm_sched *s, llm_seq *seq)
{
	llm_sched_plan *p = &s->plan;

	if (grow((void **) &p->unfittable, &s->cap_unfittable, p->n_unfittable + 1, sizeof(llm_seq *)))
		return -1;
	p->unfittable[p->n_unfittable++] = seq;
	return 0;
}

int
llm_sched_plan_step(llm_sched *s, llm_sched_plan **out)
{
	llm_sched_plan *p = &s->plan;
	int32_t		budget = s->cfg.max_batched_tokens;
	int32_t		i;

	p->n_entries = 0;
	p->n_tokens = 0;
	p->n_logits = 0;
	p->max_blocks = 0;
	p->n_unfittable = 0;
	p->n_preempted = 0;
	/* preemption moves running -> waiting and admission waiting -> running */
	if (grow((void **) &s->waiting, &s->cap_waiting, s->n_waiting + s->n_running + 1, sizeof(llm_seq *)) ||
		grow((void **) &s->running, &s->cap_running, s->n_waiting + s->n_running + 1, sizeof(llm_seq *)))
		return -1;

	/* 1. running sequences, oldest first */
	for (i = 0; i < s->n_running && budget > 0;)
	{
		llm_seq    *seq = s->running[i];
		int32_t		n;

		if (seq->n_tokens - seq->n_computed > 1)
			extend_cached_prefix(s, seq);	/* still prefilling: catch up with the cache */
		n = seq->n_tokens - seq->n_computed;
		if (n > budget)
			n = budget;
		if (n <= 0)
		{
			i++;
			continue;
		}
		while (!ensure_blocks(s, seq, seq->n_computed + n))
		{
			llm_seq    *victim = s->running[s->n_running - 1];

			if (victim == seq)
			{
				if (s->n_running == 1 && p->n_entries == 0)
				{
					/* alone and still does not fit: the pool is too small for it */
					remove_from(s->running, &s->n_running, seq);
					release_blocks(s, seq);
					seq->state = LLM_SEQ_WAITING;	/* engine removes it */
					if (mark_unfittable(s, seq))
						return -1;
				}
				else
					preempt(s, seq);
				seq = NULL;
				break;
			}
			preempt(s, victim);
		}
		if (seq == NULL)
			continue;			/* running[i] now holds the next sequence */
		if (add_entry(s, seq, n))
			return -1;
		budget -= n;
		i++;
	}

	/*
	 * 2. admit waiting sequences in order while budget and max_running allow
	 * (none after a preemption); one whose next block another entry is
	 * filling this step is passed over until the next step.
	 */
	for (i = 0; budget > 0 && i < s->n_waiting && s->n_running < s->cfg.max_running &&
		 p->n_preempted == 0;)
	{
		llm_seq    *seq = s->waiting[i];
		int32_t		n;

		extend_cached_prefix(s, seq);
		if (next_block_in_flight(s, seq))
		{
			i++;
			continue;
		}
		n = seq->n_tokens - seq->n_computed;
		if (n > budget)
			n = budget;
		if (!ensure_blocks(s, seq, seq->n_computed + n))
		{
			if (s->n_running == 0 && p->n_entries == 0 && i == 0)
			{
				/* nothing else holds blocks: it can never fit */
				release_blocks(s, seq);
				remove_from(s->waiting, &s->n_waiting, seq);
				if (mark_unfittable(s, seq))
					return -1;
				continue;
			}
			/* keep what it has attached; retry next step */
			break;
		}
		remove_from(s->waiting, &s->n_waiting, seq);
		seq->state = LLM_SEQ_RUNNING;
		seq->admitted_once = true;
		s->running[s->n_running++] = seq;	/* arrival order: waiting head is the oldest... */
		/* keep running sorted by arrival so preemption picks the latest */
		for (int32_t j = s->n_running - 1; j > 0 && s->running[j - 1]->arrival > s->running[j]->arrival; j--)
		{
			llm_seq    *t = s->running[j];

			s->running[j] = s->running[j - 1];
			s->running[j - 1] = t;
		}
		if (add_entry(s, seq, n))
			return -1;
		budget -= n;
	}
	*out = p;
	return 0;
}

void
llm_sched_commit(llm_sched *s, llm_sched_plan *p)
{
	int32_t		bs = s->block_size;

	for (int32_t i = 0; i < p->n_entries; i++)
	{
		llm_seq    *seq = p->entries[i].seq;

		seq->n_computed = p->entries[i].start + p->entries[i].n;
		if (!prefix_on(s, seq))
			continue;
		/*
		 * Register newly completed full blocks under the chained hash; where
		 * another sequence registered the same block first, switch to it.
		 */
		while (seq->n_registered < seq->n_blocks &&
			   (seq->n_registered + 1) * bs <= seq->n_computed)
		{
			int32_t		k = seq->n_registered;
			const int32_t *toks = &seq->tokens[(size_t) k * bs];
			int32_t		rows = block_prompt_rows(seq, k, bs);
			uint64_t	h = llm_block_hash(seq->last_hash, toks, bs, rows);

			seq->blocks[k] = llm_block_register(s->pool, seq->blocks[k], h,
												k > 0 ? seq->blocks[k - 1] : -1, toks, rows);
			seq->last_hash = h;
			seq->n_registered++;
		}
	}
}

int32_t
llm_sched_n_waiting(const llm_sched *s)
{
	return s->n_waiting;
}

int32_t
llm_sched_n_running(const llm_sched *s)
{
	return s->n_running;
}

int64_t
llm_sched_n_preemptions(const llm_sched *s)
{
	return s->n_preemptions;
}

void
llm_sched_prefix_stats(const llm_sched *s, int64_t *queried, int64_t *hit)
{
	*queried = s->prefix_query_tokens;
	*hit = s->prefix_hit_tokens;
}
