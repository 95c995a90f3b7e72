/*
 * blocks.c — the sequences' block tables over the pool(s): allocation and
 * release, the local window (sliding-window layers' own group), prefix-cache
 * attach (extend_cached_prefix) and registration of full blocks, in-flight
 * sharing within a step, fork of a prompt sequence, speculative drafts.
 */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

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
void
sched_release_local_window(llm_sched *s, llm_seq *seq, int32_t pos)
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

void
sched_release_blocks(llm_sched *s, llm_seq *seq)
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

/* Make seq's block table cover n_tokens tokens; false when the pool runs dry. */
bool
sched_ensure_blocks(llm_sched *s, llm_seq *seq, int32_t n_tokens)
{
	int32_t		need = (n_tokens + s->block_size - 1) / s->block_size;

	if (sched_grow((void **) &seq->blocks, &seq->cap_blocks, need, sizeof(int32_t)) ||
		(local_on(s) && sched_grow((void **) &seq->lblocks, &seq->cap_lblocks, need, sizeof(int32_t))))
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

/* Prefix caching applies to seq: on for every sequence, or forced for it; never for a whole one. */
static bool
prefix_on(const llm_sched *s, const llm_seq *seq)
{
	return !seq->whole && (s->cfg.prefix_caching || seq->share_prefix);
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
void
sched_extend_cached_prefix(llm_sched *s, llm_seq *seq)
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
	if (sched_grow((void **) &s->hit_ids, &s->cap_hit, max_blocks - k0, sizeof(int32_t)))
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
	if (sched_grow((void **) &seq->blocks, &seq->cap_blocks, k, sizeof(int32_t)) ||
		(local_on(s) && sched_grow((void **) &seq->lblocks, &seq->cap_lblocks, k, sizeof(int32_t))))
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
		sched_release_local_window(s, seq, k * bs);
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
bool
sched_next_block_in_flight(const llm_sched *s, const llm_seq *seq)
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

/* Release seq's blocks past those holding its first n_tokens tokens. */
void
sched_trim_blocks(llm_sched *s, llm_seq *seq, int32_t n_tokens)
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

/* Drop the cached prefixes attached to waiting sequences other than keep (blocks stay cached). */
void
sched_release_waiting_blocks(llm_sched *s, const llm_seq *keep)
{
	for (int32_t i = 0; i < s->n_flows; i++)
		for (int32_t j = 0; j < s->flows[i]->n_waiting; j++)
		{
			llm_seq    *w = s->flows[i]->waiting[j];

			if (w != keep && w->n_blocks > 0)
				sched_release_blocks(s, w);
		}
}

/* Register seq's newly completed full blocks; where another sequence registered the same block first, switch to it. */
void
sched_register_full_blocks(llm_sched *s, llm_seq *seq)
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
	if (sched_grow((void **) &seq->blocks, &seq->cap_blocks, nb, sizeof(int32_t)) ||
		(local_on(s) && sched_grow((void **) &seq->lblocks, &seq->cap_lblocks, nb, sizeof(int32_t))))
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
		sched_register_full_blocks(s, seq);
		sched_release_local_window(s, seq, seq->n_computed);
	}
	sched_trim_blocks(s, seq, seq->n_computed > seq->n_tokens - 1 ? seq->n_computed : seq->n_tokens - 1);
}

void
llm_sched_prefix_stats(const llm_sched *s, int64_t *queried, int64_t *hit)
{
	*queried = s->prefix_query_tokens;
	*hit = s->prefix_hit_tokens;
}
