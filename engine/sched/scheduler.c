/* scheduler.c — see scheduler.h. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/*
 * A flow: the live sequences of one (class, session).  Its waiting ones are
 * a FIFO (a preempted one goes back to the front); service counts the token
 * rows computed for it, starting from its class's clock when it becomes
 * active.
 */
typedef struct sched_flow
{
	int32_t		cls;
	uint64_t	session;
	int64_t		service;
	int32_t		n_members;		/* waiting + running */
	llm_seq   **waiting;
	int32_t		n_waiting;
	int32_t		cap_waiting;
	/* per step */
	int64_t		planned;		/* tokens planned for it in this step */
	int32_t		cursor;			/* next waiting sequence to try in this step */
} sched_flow;

struct llm_sched
{
	llm_block_pool *pool;
	llm_sched_config cfg;
	int32_t		block_size;
	/* running: in no particular order (the plan sorts a copy) */
	llm_seq   **running;
	int32_t		n_running;
	int32_t		cap_running;
	int32_t		n_waiting;		/* over all flows */
	sched_flow **flows;			/* live flows (at least one member) */
	int32_t		n_flows;
	int32_t		cap_flows;
	int64_t		clock[LLM_SCHED_N_CLASSES];	/* least service of the class's active flows */
	int32_t		n_class[LLM_SCHED_N_CLASSES];	/* live sequences per class */
	llm_seq   **order;			/* the plan's service order of running */
	int32_t		cap_order;
	uint64_t	step;
	double		cost_fixed_ms;	/* llm_sched_set_step_cost */
	double		cost_per_token_ms;
	double		batch_cap;		/* llm_sched_note_batch_step; 0 = no cap */
	uint64_t	next_arrival;
	int64_t		n_preemptions;
	int64_t		prefix_query_tokens;
	int64_t		prefix_hit_tokens;
	llm_sched_plan plan;
	int32_t		cap_entries;
	int32_t		cap_unfittable;
	/* extend_cached_prefix's scratch: the global chain found, its hashes */
	int32_t    *hit_ids;
	uint64_t   *hit_hash;
	int32_t		cap_hit;
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
	for (int32_t i = 0; i < s->n_flows; i++)
	{
		free(s->flows[i]->waiting);
		free(s->flows[i]);
	}
	free(s->flows);
	free(s->order);
	free(s->plan.entries);
	free(s->plan.unfittable);
	free(s->hit_ids);
	free(s->hit_hash);
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
	free(seq->lblocks);
	seq->tokens = NULL;
	seq->blocks = NULL;
	seq->lblocks = NULL;
}

static int32_t
seq_class(const llm_seq *seq)
{
	return seq->priority < 0 ? 0 : (seq->priority >= LLM_SCHED_N_CLASSES ? LLM_SCHED_N_CLASSES - 1 : seq->priority);
}

static sched_flow *
find_flow(const llm_sched *s, int32_t cls, uint64_t session)
{
	for (int32_t i = 0; i < s->n_flows; i++)
		if (s->flows[i]->cls == cls && s->flows[i]->session == session)
			return s->flows[i];
	return NULL;
}

/* Move class cls's clock up to the least service among its active flows (never down). */
static void
advance_clock(llm_sched *s, int32_t cls)
{
	bool		any = false;
	int64_t		least = 0;

	for (int32_t i = 0; i < s->n_flows; i++)
		if (s->flows[i]->cls == cls && (!any || s->flows[i]->service < least))
		{
			least = s->flows[i]->service;
			any = true;
		}
	if (any && least > s->clock[cls])
		s->clock[cls] = least;
}

/* The flow of seq's class and session, created at its class's clock if none is live. */
static sched_flow *
join_flow(llm_sched *s, llm_seq *seq)
{
	int32_t		cls = seq_class(seq);
	sched_flow *f = find_flow(s, cls, seq->session);

	if (f != NULL)
		return f;
	advance_clock(s, cls);
	if (grow((void **) &s->flows, &s->cap_flows, s->n_flows + 1, sizeof(sched_flow *)))
		return NULL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return NULL;
	f->cls = cls;
	f->session = seq->session;
	f->service = s->clock[cls];
	s->flows[s->n_flows++] = f;
	return f;
}

static void
leave_flow(llm_sched *s, sched_flow *f)
{
	if (--f->n_members > 0)
		return;
	for (int32_t i = 0; i < s->n_flows; i++)
		if (s->flows[i] == f)
		{
			s->flows[i] = s->flows[--s->n_flows];
			break;
		}
	free(f->waiting);
	free(f);
}

/* Queue seq in its flow: at the tail, or at the head (a preempted sequence keeps its place). */
static int
enqueue(llm_sched *s, llm_seq *seq, bool front)
{
	sched_flow *f = seq->flow;

	if (grow((void **) &f->waiting, &f->cap_waiting, f->n_waiting + 1, sizeof(llm_seq *)))
		return -1;
	if (front)
	{
		memmove(&f->waiting[1], &f->waiting[0], (size_t) f->n_waiting * sizeof(llm_seq *));
		f->waiting[0] = seq;
	}
	else
		f->waiting[f->n_waiting] = seq;
	f->n_waiting++;
	s->n_waiting++;
	seq->state = LLM_SEQ_WAITING;
	return 0;
}

int
llm_sched_add(llm_sched *s, llm_seq *seq)
{
	sched_flow *f = join_flow(s, seq);

	if (f == NULL)
		return -1;
	seq->flow = f;
	f->n_members++;
	if (enqueue(s, seq, false) != 0)
	{
		leave_flow(s, f);
		seq->flow = NULL;
		return -1;
	}
	s->n_class[f->cls]++;
	seq->arrival = s->next_arrival++;
	seq->n_computed = 0;
	seq->planned_in = 0;
	return 0;
}

static bool
local_on(const llm_sched *s)
{
	return s->cfg.local_pool != NULL;
}

/* First logical block a query at position pos reads in the local group. */
static int32_t
local_first_block(const llm_sched *s, int32_t pos)
{
	int32_t		lo = pos - s->cfg.local_window + 1;

	return lo > 0 ? lo / s->block_size : 0;
}

int32_t
llm_sched_local_blocks_bound(int32_t local_window, int32_t block_size, int32_t n)
{
	int32_t		w = local_window > 2 ? local_window - 2 : 0;

	return (w + block_size - 1) / block_size + 2 + (n + block_size - 1) / block_size;
}

/*
 * Release seq's local blocks that no query from position pos on reads
 * (oldest first, so the LRU evicts them in position order).
 */
static void
release_local_window(llm_sched *s, llm_seq *seq, int32_t pos)
{
	int32_t		first;

	if (!local_on(s))
		return;
	first = local_first_block(s, pos);
	if (first > seq->n_blocks)
		first = seq->n_blocks;
	for (; seq->l_lo < first; seq->l_lo++)
	{
		llm_block_release(s->cfg.local_pool, seq->lblocks[seq->l_lo]);
		seq->lblocks[seq->l_lo] = -1;
	}
}

static void
release_blocks(llm_sched *s, llm_seq *seq)
{
	/* release in reverse so a sequence's tail blocks are evicted before its head (vLLM) */
	if (local_on(s))
		for (int32_t i = seq->n_blocks - 1; i >= seq->l_lo; i--)
			llm_block_release(s->cfg.local_pool, seq->lblocks[i]);
	for (int32_t i = seq->n_blocks - 1; i >= 0; i--)
		llm_block_release(s->pool, seq->blocks[i]);
	seq->l_lo = 0;
	seq->n_blocks = 0;
	seq->n_computed = 0;
	seq->n_registered = 0;
	seq->last_hash = seq->cache_salt;
}

static bool
remove_from(llm_seq **arr, int32_t *n, llm_seq *seq)
{
	for (int32_t i = 0; i < *n; i++)
		if (arr[i] == seq)
		{
			memmove(&arr[i], &arr[i + 1], (size_t) (*n - i - 1) * sizeof(llm_seq *));
			(*n)--;
			return true;
		}
	return false;
}

/* Take waiting seq out of its flow's queue (the step's cursor follows). */
static void
dequeue(llm_sched *s, llm_seq *seq)
{
	sched_flow *f = seq->flow;

	for (int32_t i = 0; i < f->n_waiting; i++)
		if (f->waiting[i] == seq)
		{
			memmove(&f->waiting[i], &f->waiting[i + 1], (size_t) (f->n_waiting - i - 1) * sizeof(llm_seq *));
			f->n_waiting--;
			s->n_waiting--;
			if (i < f->cursor)
				f->cursor--;
			return;
		}
}

void
llm_sched_remove(llm_sched *s, llm_seq *seq)
{
	if (seq->state == LLM_SEQ_RUNNING)
		remove_from(s->running, &s->n_running, seq);
	else if (seq->state == LLM_SEQ_WAITING && seq->flow != NULL)
		dequeue(s, seq);
	release_blocks(s, seq);
	if (seq->flow != NULL && seq->state != LLM_SEQ_DETACHED)
	{
		s->n_class[seq->flow->cls]--;
		leave_flow(s, seq->flow);
		seq->flow = NULL;
	}
	seq->state = LLM_SEQ_DETACHED;
}

/* Make seq's block table cover n_tokens tokens; false when the pool runs dry. */
static bool
ensure_blocks(llm_sched *s, llm_seq *seq, int32_t n_tokens)
{
	int32_t		need = (n_tokens + s->block_size - 1) / s->block_size;

	if (grow((void **) &seq->blocks, &seq->cap_blocks, need, sizeof(int32_t)) ||
		(local_on(s) && grow((void **) &seq->lblocks, &seq->cap_lblocks, need, sizeof(int32_t))))
		return false;
	while (seq->n_blocks < need)
	{
		int32_t		b = llm_block_alloc(s->pool);

		if (b < 0)
			return false;
		if (local_on(s))
		{
			int32_t		lb = llm_block_alloc(s->cfg.local_pool);

			if (lb < 0)
			{
				llm_block_release(s->pool, b);
				return false;
			}
			seq->lblocks[seq->n_blocks] = lb;
		}
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
 * With the local group: whether every local block of [max(first, k0), k)
 * (first: the first block the query at k * block_size reads) is cached,
 * anchored on the global blocks the attach would hold; blocks below k0 are
 * the sequence's own (held from local_first_block(k0 * block_size) on).
 */
static bool
local_tail_cached(const llm_sched *s, const llm_seq *seq, int32_t k0, int32_t k)
{
	int32_t		bs = s->block_size;
	int32_t		j = local_first_block(s, k * bs);

	for (j = j > k0 ? j : k0; j < k; j++)
	{
		int32_t		g = s->hit_ids[j - k0];

		if (!llm_block_probe_anchored(s->cfg.local_pool, s->hit_hash[j - k0], g,
									  llm_block_generation(s->pool, g), &seq->tokens[(size_t) j * bs],
									  block_prompt_rows(seq, j, bs)))
			return false;
	}
	return true;
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
 * its prompt among its own sequences is not a cache hit).  With the local
 * group the chain found is cut back to the last point whose window tail is
 * in the local cache (local_tail_cached), whose blocks are then attached too.
 */
static void
extend_cached_prefix(llm_sched *s, llm_seq *seq)
{
	int32_t		bs = s->block_size;
	int32_t		max_blocks = llm_seq_first_logits(seq) / bs;
	int32_t		k,
				k0,
				kg,
				n_old;
	uint64_t	h = 0;

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
	if (grow((void **) &s->hit_ids, &s->cap_hit, max_blocks - k0, sizeof(int32_t)))
		return;
	{
		int32_t		cap = s->cap_hit;

		/* hit_hash follows hit_ids' capacity */
		uint64_t   *hh = realloc(s->hit_hash, (size_t) cap * sizeof(uint64_t));

		if (hh == NULL)
			return;
		s->hit_hash = hh;
	}
	/* the global chain as far as it is cached */
	h = seq->last_hash;
	while (k < max_blocks)
	{
		const int32_t *toks = &seq->tokens[(size_t) k * bs];
		int32_t		rows = block_prompt_rows(seq, k, bs);
		int32_t		parent = k > k0 ? s->hit_ids[k - 1 - k0] : (k > 0 ? seq->blocks[k - 1] : -1);
		uint64_t	hk = llm_block_hash(h, toks, bs, rows);
		int32_t		b = llm_block_lookup(s->pool, hk, parent, toks, rows);

		if (b < 0)
			break;
		s->hit_ids[k - k0] = b;
		s->hit_hash[k - k0] = hk;
		h = hk;
		k++;
	}
	kg = k;
	/* with the local group: back off to the last point whose window tail is cached */
	if (local_on(s))
		while (k > k0 && !local_tail_cached(s, seq, k0, k))
			k--;
	for (int32_t j = kg - 1; j >= k; j--)
		llm_block_release(s->pool, s->hit_ids[j - k0]);
	if (k == k0)
		return;
	n_old = seq->n_blocks;
	if (grow((void **) &seq->blocks, &seq->cap_blocks, k, sizeof(int32_t)) ||
		(local_on(s) && grow((void **) &seq->lblocks, &seq->cap_lblocks, k, sizeof(int32_t))))
	{
		for (int32_t j = k - 1; j >= k0; j--)
			llm_block_release(s->pool, s->hit_ids[j - k0]);
		return;
	}
	for (int32_t j = k0; j < k; j++)
	{
		if (j < n_old)
		{
			/* a private block not (fully) computed yet: the cached one replaces it */
			llm_block_release(s->pool, seq->blocks[j]);
		}
		else
		{
			if (local_on(s))
				seq->lblocks[j] = -1;
			seq->n_blocks++;
		}
		seq->blocks[j] = s->hit_ids[j - k0];
	}
	if (local_on(s))
	{
		int32_t		first = local_first_block(s, k * bs);

		/* the window tail from the local cache (probed above), replacing private blocks */
		for (int32_t j = first > k0 ? first : k0; j < k; j++)
		{
			int32_t		g = seq->blocks[j];
			int32_t		lb = llm_block_lookup_anchored(s->cfg.local_pool, s->hit_hash[j - k0], g,
													   llm_block_generation(s->pool, g),
													   &seq->tokens[(size_t) j * bs],
													   block_prompt_rows(seq, j, bs));

			if (seq->lblocks[j] >= 0)
				llm_block_release(s->cfg.local_pool, seq->lblocks[j]);
			seq->lblocks[j] = lb;
		}
		/* and nothing behind the window: private blocks there are dropped */
		release_local_window(s, seq, k * bs);
	}
	seq->last_hash = s->hit_hash[k - 1 - k0];
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
preempt(llm_sched *s, llm_seq *victim, int32_t *preempted_cls)
{
	remove_from(s->running, &s->n_running, victim);
	release_blocks(s, victim);
	victim->n_preemptions++;
	s->n_preemptions++;
	s->plan.n_preempted++;
	if (victim->flow->cls < *preempted_cls)
		*preempted_cls = victim->flow->cls;
	/* head of its flow's queue: it keeps its place ahead of newer requests (room grown at plan start) */
	(void) enqueue(s, victim, true);
}

/* Release seq's blocks past those holding its first n_tokens tokens. */
static void
trim_blocks(llm_sched *s, llm_seq *seq, int32_t n_tokens)
{
	int32_t		keep = (n_tokens + s->block_size - 1) / s->block_size;

	while (seq->n_blocks > keep)
	{
		seq->n_blocks--;
		if (local_on(s) && seq->n_blocks >= seq->l_lo)
			llm_block_release(s->cfg.local_pool, seq->lblocks[seq->n_blocks]);
		llm_block_release(s->pool, seq->blocks[seq->n_blocks]);
	}
	if (seq->l_lo > seq->n_blocks)
		seq->l_lo = seq->n_blocks;
}

static int
add_entry(llm_sched *s, llm_seq *seq, int32_t n, int32_t n_draft)
{
	llm_sched_plan *p = &s->plan;
	llm_sched_entry *e;
	int32_t		own = n - n_draft;

	if (grow((void **) &p->entries, &s->cap_entries, p->n_entries + 1, sizeof(llm_sched_entry)))
		return -1;
	e = &p->entries[p->n_entries++];
	e->seq = seq;
	e->start = seq->n_computed;
	e->n = n;
	e->n_draft = n_draft;
	e->sample = (seq->n_computed + own == seq->n_tokens);
	e->logits_from = llm_seq_first_logits(seq);
	if (e->logits_from < e->start)
		e->logits_from = e->start;
	if (e->logits_from > e->start + own)
		e->logits_from = e->start + own;
	p->n_tokens += n;
	p->n_logits += e->start + n - e->logits_from;
	if (seq->n_blocks > p->max_blocks)
		p->max_blocks = seq->n_blocks;
	seq->planned_in = s->step;
	seq->flow->planned += n;
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

/* Service order: earlier class, then less-served flow, then earlier arrival. */
static int
service_cmp(const void *pa, const void *pb)
{
	const llm_seq *a = *(llm_seq *const *) pa;
	const llm_seq *b = *(llm_seq *const *) pb;

	if (a->flow->cls != b->flow->cls)
		return a->flow->cls < b->flow->cls ? -1 : 1;
	if (a->flow->service != b->flow->service)
		return a->flow->service < b->flow->service ? -1 : 1;
	return (a->arrival > b->arrival) - (a->arrival < b->arrival);
}

/*
 * The running sequence to preempt: the worst in service order among those
 * not planned yet, of class at least min_cls; NULL if none.
 */
static llm_seq *
pick_victim(const llm_sched *s, int32_t n_order, int32_t min_cls)
{
	for (int32_t k = n_order - 1; k >= 0; k--)
	{
		llm_seq    *v = s->order[k];

		if (v->state == LLM_SEQ_RUNNING && v->planned_in != s->step && v->flow->cls >= min_cls)
			return v;
	}
	return NULL;
}

/* The class-cls flow to admit from next: least service counting this step's, then oldest head. */
static sched_flow *
next_flow(const llm_sched *s, int32_t cls)
{
	sched_flow *best = NULL;

	for (int32_t i = 0; i < s->n_flows; i++)
	{
		sched_flow *f = s->flows[i];

		if (f->cls != cls || f->cursor >= f->n_waiting)
			continue;
		if (best == NULL || f->service + f->planned < best->service + best->planned ||
			(f->service + f->planned == best->service + best->planned &&
			 f->waiting[f->cursor]->arrival < best->waiting[best->cursor]->arrival))
			best = f;
	}
	return best;
}

/* Drop the cached prefixes attached to waiting sequences other than keep (blocks stay cached). */
static void
release_waiting_blocks(llm_sched *s, const llm_seq *keep)
{
	for (int32_t i = 0; i < s->n_flows; i++)
		for (int32_t j = 0; j < s->flows[i]->n_waiting; j++)
		{
			llm_seq    *w = s->flows[i]->waiting[j];

			if (w != keep && w->n_blocks > 0)
				release_blocks(s, w);
		}
}

/* Per-class state of one plan. */
typedef struct class_plan
{
	int32_t		cls;
	int32_t		left;			/* tokens the class may still take */
	int32_t		prefill_left;	/* prefill tokens it may still take; -1 = no cap */
} class_plan;

static int32_t
take(class_plan *cp, int32_t want, bool prefill)
{
	int32_t		n = want < cp->left ? want : cp->left;

	if (prefill && cp->prefill_left >= 0 && n > cp->prefill_left)
		n = cp->prefill_left;
	return n;
}

static void
consume(llm_sched *s, class_plan *cp, int32_t *budget, int32_t n, bool prefill)
{
	*budget -= n;
	cp->left -= n;
	if (prefill && cp->prefill_left >= 0)
		cp->prefill_left -= n;
}

/* Step 1 for one class: its running sequences in service order. */
static int
plan_running(llm_sched *s, class_plan *cp, int32_t n_order, int32_t *budget, int32_t *preempted_cls)
{
	llm_sched_plan *p = &s->plan;
	bool		released_waiting = false;

	for (int32_t k = 0; k < n_order && cp->left > 0; k++)
	{
		llm_seq    *seq = s->order[k];
		int32_t		n,
					d = 0;
		bool		prefill;

		if (seq->flow->cls != cp->cls || seq->state != LLM_SEQ_RUNNING || seq->planned_in == s->step)
			continue;
		if (seq->n_tokens - seq->n_computed > 1)
			extend_cached_prefix(s, seq);	/* still prefilling: catch up with the cache */
		prefill = seq->n_tokens - seq->n_computed > 1;
		n = take(cp, seq->n_tokens - seq->n_computed, prefill);
		if (n <= 0)
			continue;
		if (n == 1 && !prefill && seq->n_draft > 0)
		{
			d = seq->n_draft < cp->left - 1 ? seq->n_draft : cp->left - 1;
			/* a draft never preempts: without room for it, plain decoding */
			if (d > 0 && !ensure_blocks(s, seq, seq->n_computed + n + d))
			{
				trim_blocks(s, seq, seq->n_computed);
				d = 0;
			}
		}
		while (!ensure_blocks(s, seq, seq->n_computed + n))
		{
			llm_seq    *victim = pick_victim(s, n_order, cp->cls);

			if (victim == NULL || victim == seq)
			{
				if (s->n_running == 1 && p->n_entries == 0 && !released_waiting)
				{
					/* alone: the other blocks held are waiting sequences' attached prefixes */
					release_waiting_blocks(s, NULL);
					released_waiting = true;
					continue;
				}
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
					preempt(s, seq, preempted_cls);
				seq = NULL;
				break;
			}
			preempt(s, victim, preempted_cls);
		}
		if (seq == NULL)
			continue;
		if (add_entry(s, seq, n + d, d))
			return -1;
		consume(s, cp, budget, n + d, prefill);
	}
	return 0;
}

/*
 * Step 2 for one class: admit its waiting sequences, flow by flow by least
 * service; a sequence whose next block another entry is filling this step
 * is passed over until the next step.
 */
static int
plan_admission(llm_sched *s, class_plan *cp, int32_t n_order, int32_t *budget, int32_t *preempted_cls)
{
	llm_sched_plan *p = &s->plan;
	int32_t		slots = s->cfg.max_running;

	if (cp->cls > 0 && s->cfg.reserved_running > 0)
		slots = s->cfg.max_running - s->cfg.reserved_running > 1 ? s->cfg.max_running - s->cfg.reserved_running : 1;
	for (int32_t i = 0; i < s->n_flows; i++)
		s->flows[i]->cursor = 0;
	while (cp->left > 0 && *preempted_cls > cp->cls)
	{
		sched_flow *f = next_flow(s, cp->cls);
		llm_seq    *seq;
		int32_t		n;
		bool		prefill;

		if (f == NULL)
			break;
		seq = f->waiting[f->cursor];
		if (seq->fork_from != NULL && seq->fork_from->state != LLM_SEQ_DETACHED)
		{
			/* it takes its prefix from fork_from once that one has computed it */
			f->cursor++;
			continue;
		}
		if (s->n_running >= slots)
		{
			llm_seq    *victim = pick_victim(s, n_order, cp->cls + 1);

			if (s->n_running >= s->cfg.max_running && victim != NULL)
			{
				preempt(s, victim, preempted_cls);
				continue;
			}
			if (s->n_running >= s->cfg.max_running || cp->cls > 0)
				break;
		}
		extend_cached_prefix(s, seq);
		if (next_block_in_flight(s, seq))
		{
			f->cursor++;
			continue;
		}
		prefill = seq->n_tokens - seq->n_computed > 1;
		n = take(cp, seq->n_tokens - seq->n_computed, prefill);
		if (n <= 0)
			break;
		if (!ensure_blocks(s, seq, seq->n_computed + n))
		{
			llm_seq    *victim = pick_victim(s, n_order, cp->cls + 1);

			if (victim != NULL)
			{
				preempt(s, victim, preempted_cls);
				continue;		/* the same sequence again */
			}
			if (s->n_running == 0 && p->n_entries == 0)
			{
				/* nothing runs: only other waiting sequences' cached prefixes hold blocks */
				release_waiting_blocks(s, seq);
				if (!ensure_blocks(s, seq, seq->n_computed + n))
				{
					/* it can never fit */
					release_blocks(s, seq);
					dequeue(s, seq);
					if (mark_unfittable(s, seq))
						return -1;
					continue;
				}
			}
			else
				break;			/* keep what it has attached; retry next step */
		}
		dequeue(s, seq);
		seq->state = LLM_SEQ_RUNNING;
		seq->admitted_once = true;
		s->running[s->n_running++] = seq;
		if (add_entry(s, seq, n, 0))
			return -1;
		consume(s, cp, budget, n, prefill);
	}
	return 0;
}

void
llm_sched_set_step_cost(llm_sched *s, double fixed_ms, double per_token_ms)
{
	s->cost_fixed_ms = fixed_ms > 0 ? fixed_ms : 0;
	s->cost_per_token_ms = per_token_ms;
}

/* The step's total tokens while earlier classes have t tokens in it (shared_step_tokens). */
static int32_t
step_cap(const llm_sched *s, int32_t t)
{
	double		extra;

	if (s->cfg.shared_step_tokens > 0)
		return s->cfg.shared_step_tokens;
	if (s->cost_per_token_ms <= 0)
		return t + 3;
	/* fixed + per_token * total <= (1 + slowdown / 100) (fixed + per_token * t) */
	extra = (s->cfg.shared_step_slowdown > 0 ? s->cfg.shared_step_slowdown / 100.0 : 0) *
		(s->cost_fixed_ms / s->cost_per_token_ms + t);
	if (extra < 1)
		extra = 1;
	return extra > s->cfg.max_batched_tokens ? s->cfg.max_batched_tokens : t + (int32_t) extra;
}

void
llm_sched_note_batch_step(llm_sched *s, int32_t n, double ms, double target_ms)
{
	double		est;

	if (target_ms <= 0)
	{
		s->batch_cap = 0;
		return;
	}
	if (n <= 0 || ms <= 0)
		return;
	/* the tokens this step's own rate fits in target_ms; a quarter of the way there per step */
	est = n * target_ms / ms;
	/* a step within the target says nothing against the cap: it may just have had less work */
	if (s->batch_cap > 0 && est < s->batch_cap && ms <= target_ms)
		return;
	s->batch_cap = s->batch_cap > 0 ? s->batch_cap + (est - s->batch_cap) / 4 : est;
	if (s->batch_cap < LLM_SCHED_BATCH_STEP_FLOOR)
		s->batch_cap = LLM_SCHED_BATCH_STEP_FLOOR;
	if (s->batch_cap > s->cfg.max_batched_tokens)
		s->batch_cap = s->cfg.max_batched_tokens;
}

int32_t
llm_sched_batch_step_tokens(const llm_sched *s)
{
	return s->batch_cap > 0 ? (int32_t) s->batch_cap : 0;
}

/* Tokens of the later classes together in any step (short steps); max_batched_tokens when uncapped. */
static int32_t
batch_step_cap(const llm_sched *s)
{
	return s->batch_cap > 0 ? (int32_t) s->batch_cap : s->cfg.max_batched_tokens;
}

int
llm_sched_plan_step(llm_sched *s, llm_sched_plan **out)
{
	llm_sched_plan *p = &s->plan;
	int32_t		budget = s->cfg.max_batched_tokens;
	int32_t		preempted_cls = LLM_SCHED_N_CLASSES;	/* earliest class preempted this step */
	int32_t		n_order = s->n_running;
	int32_t		total = s->n_waiting + s->n_running;
	int32_t		first_tokens = 0;	/* the first class's tokens, once its plan is done */

	s->step++;
	p->n_entries = 0;
	p->n_tokens = 0;
	p->n_logits = 0;
	p->max_blocks = 0;
	p->n_unfittable = 0;
	p->n_preempted = 0;
	/* preemption moves running -> a flow's queue, admission a queue -> running */
	if (grow((void **) &s->running, &s->cap_running, total + 1, sizeof(llm_seq *)) ||
		grow((void **) &s->order, &s->cap_order, n_order + 1, sizeof(llm_seq *)))
		return -1;
	for (int32_t i = 0; i < s->n_flows; i++)
	{
		sched_flow *f = s->flows[i];

		if (grow((void **) &f->waiting, &f->cap_waiting, f->n_members + 1, sizeof(llm_seq *)))
			return -1;
		f->planned = 0;
	}
	memcpy(s->order, s->running, (size_t) n_order * sizeof(llm_seq *));
	qsort(s->order, (size_t) n_order, sizeof(llm_seq *), service_cmp);

	for (int32_t c = 0; c < LLM_SCHED_N_CLASSES && budget > 0; c++)
	{
		class_plan	cp = {c, budget, -1};
		int32_t		decoding = 0;

		if (c == 1)
			first_tokens = p->n_tokens;
		if (s->n_class[c] == 0)
			continue;
		if (c > 0 && p->n_tokens > 0 && s->cfg.shared_step_tokens != 0)
		{
			int32_t		rest = step_cap(s, p->n_tokens) - p->n_tokens;

			cp.left = rest < 0 ? 0 : (rest < budget ? rest : budget);
		}
		if (c > 0)
		{
			/* the later classes' tokens so far count against the short-step cap */
			int32_t		rest = batch_step_cap(s) - (p->n_tokens - first_tokens);

			if (rest < cp.left)
				cp.left = rest < 0 ? 0 : rest;
		}
		if (c > 0 && s->cfg.batch_prefill_tokens > 0)
			cp.prefill_left = s->cfg.batch_prefill_tokens;
		if (s->cfg.prefill_cap > 0)
		{
			for (int32_t k = 0; k < n_order; k++)
				if (s->order[k]->flow->cls == c && s->order[k]->state == LLM_SEQ_RUNNING &&
					s->order[k]->n_tokens - s->order[k]->n_computed == 1)
					decoding++;
			if (decoding >= (s->cfg.prefill_cap_decodes > 1 ? s->cfg.prefill_cap_decodes : 1) &&
				(cp.prefill_left < 0 || s->cfg.prefill_cap < cp.prefill_left))
				cp.prefill_left = s->cfg.prefill_cap;
		}
		if (plan_running(s, &cp, n_order, &budget, &preempted_cls) != 0 ||
			plan_admission(s, &cp, n_order, &budget, &preempted_cls) != 0)
			return -1;
	}
	p->n_first_tokens = 0;
	for (int32_t i = 0; i < p->n_entries; i++)
		if (p->entries[i].seq->flow->cls == 0)
			p->n_first_tokens += p->entries[i].n;
	*out = p;
	return 0;
}

/* Register seq's newly completed full blocks; where another sequence registered the same block first, switch to it. */
static void
register_full_blocks(llm_sched *s, llm_seq *seq)
{
	int32_t		bs = s->block_size;

	if (!prefix_on(s, seq))
		return;
	while (seq->n_registered < seq->n_blocks &&
		   (seq->n_registered + 1) * bs <= seq->n_computed)
	{
		int32_t		k = seq->n_registered;
		const int32_t *toks = &seq->tokens[(size_t) k * bs];
		int32_t		rows = block_prompt_rows(seq, k, bs);
		uint64_t	h = llm_block_hash(seq->last_hash, toks, bs, rows);

		seq->blocks[k] = llm_block_register(s->pool, seq->blocks[k], h,
											k > 0 ? seq->blocks[k - 1] : -1, toks, rows);
		/* its local block, anchored on the global block the sequence now holds */
		if (local_on(s) && k >= seq->l_lo)
			seq->lblocks[k] = llm_block_register_anchored(s->cfg.local_pool, seq->lblocks[k], h, seq->blocks[k],
														  llm_block_generation(s->pool, seq->blocks[k]),
														  toks, rows);
		seq->last_hash = h;
		seq->n_registered++;
	}
}

void
llm_sched_commit(llm_sched *s, llm_sched_plan *p)
{
	for (int32_t i = 0; i < p->n_entries; i++)
	{
		llm_sched_entry *e = &p->entries[i];
		llm_seq    *seq = e->seq;

		seq->n_computed = e->start + e->n - e->n_draft;
		if (seq->flow != NULL)
			seq->flow->service += e->n;
		register_full_blocks(s, seq);
		release_local_window(s, seq, seq->n_computed);
	}
}

bool
llm_sched_fork(llm_sched *s, llm_seq *seq, const llm_seq *src, llm_sched_block_copy *copy)
{
	int32_t		bs = s->block_size;
	int32_t		c = src->n_computed;
	int32_t		nf = c / bs;
	int32_t		nb = (c + bs - 1) / bs;
	int32_t		lo = local_on(s) ? src->l_lo : 0;
	int32_t		b = -1,
				lb = -1;

	copy->src = copy->dst = copy->src_local = copy->dst_local = -1;
	if (seq->state != LLM_SEQ_WAITING || seq->flow == NULL || seq->n_blocks > 0 ||
		src->state != LLM_SEQ_RUNNING || c <= 0 || c > llm_seq_first_logits(seq) ||
		c > seq->n_prompt || c > src->n_prompt || src->n_blocks < nb || lo > nf ||
		seq->cache_salt != src->cache_salt ||
		memcmp(seq->tokens, src->tokens, (size_t) c * sizeof(int32_t)) != 0)
		return false;
	if (grow((void **) &seq->blocks, &seq->cap_blocks, nb, sizeof(int32_t)) ||
		(local_on(s) && grow((void **) &seq->lblocks, &seq->cap_lblocks, nb, sizeof(int32_t))))
		return false;
	if (nb > nf)
	{
		if ((b = llm_block_alloc(s->pool)) < 0)
			return false;
		if (local_on(s) && (lb = llm_block_alloc(s->cfg.local_pool)) < 0)
		{
			llm_block_release(s->pool, b);
			return false;
		}
	}
	for (int32_t j = 0; j < nf; j++)
	{
		llm_block_retain(s->pool, src->blocks[j]);
		seq->blocks[j] = src->blocks[j];
		if (local_on(s))
		{
			if (j >= lo)
				llm_block_retain(s->cfg.local_pool, src->lblocks[j]);
			seq->lblocks[j] = j >= lo ? src->lblocks[j] : -1;
		}
	}
	if (nb > nf)
	{
		seq->blocks[nf] = b;
		copy->src = src->blocks[nf];
		copy->dst = b;
		if (local_on(s))
		{
			seq->lblocks[nf] = lb;
			copy->src_local = src->lblocks[nf];
			copy->dst_local = lb;
		}
	}
	seq->n_blocks = nb;
	seq->l_lo = lo;
	seq->n_computed = c;
	seq->n_registered = src->n_registered;
	seq->last_hash = src->last_hash;
	if (seq->n_preemptions == 0)
	{
		seq->prefix_queried = true;
		seq->n_cached_tokens = 0;
	}
	return true;
}

void
llm_sched_accept_drafts(llm_sched *s, llm_seq *seq, int32_t n_accepted)
{
	if (seq->state != LLM_SEQ_RUNNING)
		return;
	if (n_accepted > 0)
	{
		seq->n_computed += n_accepted;
		if (seq->n_computed > seq->n_tokens)
			seq->n_computed = seq->n_tokens;
		register_full_blocks(s, seq);
		release_local_window(s, seq, seq->n_computed);
	}
	trim_blocks(s, seq, seq->n_computed > seq->n_tokens - 1 ? seq->n_computed : seq->n_tokens - 1);
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

int32_t
llm_sched_n_class(const llm_sched *s, int32_t cls)
{
	return cls >= 0 && cls < LLM_SCHED_N_CLASSES ? s->n_class[cls] : 0;
}

int64_t
llm_sched_flow_service(const llm_sched *s, int32_t cls, uint64_t session)
{
	const sched_flow *f = find_flow(s, cls, session);

	return f ? f->service : 0;
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
