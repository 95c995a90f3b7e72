/*
 * test_scheduler.c — block pool invariants, prefix-cache lookups, and the
 * scheduler under memory pressure (no model: the test plays the model,
 * appending a deterministic "sampled" token after every sampling step).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/sched/kv_block_pool.h"
#include "engine/sched/scheduler.h"
#include "unit.h"

static void
test_pool_basics(void)
{
	llm_block_pool *p = llm_block_pool_create(8, 4);
	int32_t		ids[8];
	char		err[256];
	int			ok = 1;

	CHECK(p != NULL, "pool created");
	for (int i = 0; i < 8; i++)
		ids[i] = llm_block_alloc(p);
	for (int i = 0; i < 8; i++)
		for (int j = i + 1; j < 8; j++)
			ok &= ids[i] != ids[j] && ids[i] >= 0;
	CHECK(ok, "8 distinct blocks allocated");
	CHECK(llm_block_alloc(p) == -1, "9th allocation fails cleanly");
	CHECK(llm_block_pool_n_free(p) == 0, "no free blocks");
	llm_block_retain(p, ids[3]);
	llm_block_release(p, ids[3]);
	CHECK(llm_block_refcount(p, ids[3]) == 1, "retain/release balance");
	for (int i = 0; i < 8; i++)
		llm_block_release(p, ids[i]);
	CHECK(llm_block_pool_n_free(p) == 8, "all released");
	/* LRU: the first released comes back first */
	CHECK(llm_block_alloc(p) == ids[0], "LRU order on reuse");
	CHECK(llm_block_pool_check(p, err, sizeof(err)) == 0, "pool consistent: %s", err);
	llm_block_pool_destroy(p);
}

static void
test_prefix_cache(void)
{
	llm_block_pool *p = llm_block_pool_create(4, 4);
	int32_t		t1[4] = {1, 2, 3, 4},
				t2[4] = {5, 6, 7, 8},
				t3[4] = {1, 2, 3, 5};
	uint64_t	h1 = llm_block_hash(0, t1, 4, 4),
				h2 = llm_block_hash(h1, t2, 4, 4);
	int32_t		a = llm_block_alloc(p),
				b = llm_block_alloc(p);
	char		err[256];

	CHECK(llm_block_register(p, a, h1, -1, t1, 4) == a, "first registration keeps the block");
	CHECK(llm_block_register(p, b, h2, a, t2, 4) == b, "child registered");
	CHECK(llm_block_lookup(p, h1, -1, t1, 4) == a, "hit on first block");
	llm_block_release(p, a);	/* drop the lookup's reference */
	CHECK(llm_block_lookup(p, h1, -1, t3, 4) == -1, "same hash, other tokens: miss (tokens verified)");
	CHECK(llm_block_lookup(p, llm_block_hash(1, t1, 4, 4), -1, t1, 4) == -1, "other salt: miss");
	CHECK(llm_block_lookup(p, h2, b, t2, 4) == -1, "wrong parent: miss");
	CHECK(llm_block_lookup(p, h1, -1, t1, 3) == -1, "same hash and tokens, other prompt-row count: miss");
	CHECK(llm_block_hash(0, t1, 4, 4) != llm_block_hash(0, t1, 4, 3), "prompt-row count changes the hash");
	CHECK(llm_prefix_salt(1, 0) != llm_prefix_salt(2, 0) && llm_prefix_salt(1, 0) != llm_prefix_salt(1, 1),
		  "salt depends on model identity and isolation key");
	llm_block_release(p, a);
	llm_block_release(p, b);
	CHECK(llm_block_pool_n_cached_free(p) == 2, "released blocks stay cached");
	CHECK(llm_block_lookup(p, h1, -1, t1, 4) == a, "cached free block hit and revived");
	CHECK(llm_block_refcount(p, a) == 1, "revived block referenced once");
	llm_block_release(p, a);
	/* exhaust the pool: cached blocks are evicted, their hashes gone */
	for (int i = 0; i < 4; i++)
		CHECK(llm_block_alloc(p) >= 0, "alloc %d under eviction", i);
	CHECK(llm_block_pool_n_cached_free(p) == 0, "all cached blocks evicted");
	CHECK(llm_block_lookup(p, h1, -1, t1, 4) == -1, "evicted block's hash never matches again");
	CHECK(llm_block_pool_check(p, err, sizeof(err)) == 0, "pool consistent: %s", err);
	llm_block_pool_destroy(p);
}

/* Two private copies of one block: the second registration converges on the first. */
static void
test_register_dedup(void)
{
	llm_block_pool *p = llm_block_pool_create(4, 4);
	int32_t		t1[4] = {1, 2, 3, 4},
				t2[4] = {5, 6, 7, 8};
	uint64_t	h1 = llm_block_hash(7, t1, 4, 4),
				h2 = llm_block_hash(h1, t2, 4, 4);
	int32_t		a = llm_block_alloc(p),
				b = llm_block_alloc(p),
				c,
				got;
	char		err[256];

	CHECK(llm_block_register(p, a, h1, -1, t1, 4) == a, "first copy registered");
	got = llm_block_register(p, b, h1, -1, t1, 4);
	CHECK(got == a && llm_block_refcount(p, a) == 2 && llm_block_refcount(p, b) == 0,
		  "second copy swapped for the first (got %d, refs %d/%d)", got, llm_block_refcount(p, a),
		  llm_block_refcount(p, b));
	CHECK(llm_block_pool_n_cached_free(p) == 0 && llm_block_pool_n_free(p) == 3,
		  "the dropped copy is free and not cached");
	/* the second sequence's next block chains onto the shared one and is found */
	c = llm_block_alloc(p);
	CHECK(llm_block_register(p, c, h2, a, t2, 4) == c, "child of the shared block registered");
	got = llm_block_lookup(p, h2, a, t2, 4);
	CHECK(got == c, "later lookup follows the converged chain");
	llm_block_release(p, got);
	/* a block someone else also holds is never swapped away */
	{
		int32_t		d = llm_block_alloc(p);

		llm_block_retain(p, d);
		CHECK(llm_block_register(p, d, h1, -1, t1, 4) == d && llm_block_refcount(p, d) == 2,
			  "shared private block stays (no dedup)");
		llm_block_release(p, d);
		llm_block_release(p, d);
	}
	llm_block_release(p, a);
	llm_block_release(p, a);
	llm_block_release(p, c);
	CHECK(llm_block_pool_n_free(p) == 4, "all free again");
	CHECK(llm_block_pool_check(p, err, sizeof(err)) == 0, "pool consistent: %s", err);
	llm_block_pool_destroy(p);
}

typedef struct sim
{
	llm_seq		seq;
	int			max_new;
	int			n_new;
	bool		done;
	bool		failed;
} sim;

/*
 * Run n_seqs sequences to completion; returns steps taken (or -1 on a broken
 * invariant); *n_failed gets how many the scheduler reported as never fitting.
 */
static int
run_sim(int n_blocks, int block_size, int budget, int max_running, bool prefix, int n_seqs,
		int *preemptions, bool shared_prefix, int *n_failed)
{
	llm_block_pool *pool = llm_block_pool_create(n_blocks, block_size);
	llm_sched_config cfg = {.max_batched_tokens = budget, .max_running = max_running, .prefix_caching = prefix};
	llm_sched  *s = llm_sched_create(pool, &cfg);
	sim		   *sims = calloc(n_seqs, sizeof(sim));
	int			steps = 0,
				live = n_seqs;
	char		err[256];
	bool		bad = false;

	for (int i = 0; i < n_seqs; i++)
	{
		int			n = 5 + (i * 7) % 23;

		for (int k = 0; k < n; k++)
			llm_seq_append(&sims[i].seq, shared_prefix && k < 12 ? 100 + k : 1000 * i + k);
		sims[i].seq.n_prompt = n;
		sims[i].seq.owner = &sims[i];
		sims[i].max_new = 3 + (i * 5) % 17;
		llm_sched_add(s, &sims[i].seq);
	}
	while (live > 0 && steps < 100000)
	{
		llm_sched_plan *p;

		if (llm_sched_plan_step(s, &p) != 0)
		{
			bad = true;
			break;
		}
		steps++;
		for (int i = 0; i < p->n_unfittable; i++)
		{
			sim		   *x = p->unfittable[i]->owner;

			llm_sched_remove(s, &x->seq);
			x->failed = x->done = true;
			(*n_failed)++;
			live--;
		}
		if (p->n_tokens > budget || llm_sched_n_running(s) > max_running)
			bad = true;
		for (int i = 0; i < p->n_entries; i++)
		{
			llm_sched_entry *e = &p->entries[i];

			/* block table covers the tokens computed; written blocks are private */
			if (e->seq->n_blocks * block_size < e->start + e->n)
				bad = true;
			for (int t = e->start; t < e->start + e->n; t++)
				if (llm_block_refcount(pool, e->seq->blocks[t / block_size]) != 1)
					bad = true;
		}
		llm_sched_commit(s, p);
		for (int i = 0; i < p->n_entries; i++)
		{
			llm_sched_entry *e = &p->entries[i];
			sim		   *x = e->seq->owner;

			if (!e->sample)
				continue;
			llm_seq_append(&x->seq, 7 * x->n_new + 1);
			if (++x->n_new == x->max_new)
			{
				llm_sched_remove(s, &x->seq);
				x->done = true;
				live--;
			}
		}
		if (llm_block_pool_check(pool, err, sizeof(err)) != 0)
			bad = true;
	}
	*preemptions = (int) llm_sched_n_preemptions(s);
	if (live != 0 || llm_block_pool_n_free(pool) != n_blocks)
		bad = true;
	for (int i = 0; i < n_seqs; i++)
	{
		if (!sims[i].failed && sims[i].seq.n_tokens != sims[i].seq.n_prompt + sims[i].max_new)
			bad = true;
		llm_seq_free(&sims[i].seq);
	}
	free(sims);
	llm_sched_destroy(s);
	llm_block_pool_destroy(pool);
	return bad ? -1 : steps;
}

/*
 * Drive the given sequences (already filled with prompts) to max_new tokens
 * each, all added at once; returns the tokens computed by the forward passes
 * (-1 on a broken invariant).  Sampled tokens depend only on the sequence's
 * own tokens, as with greedy decoding.
 */
static long
drive(llm_sched *s, llm_block_pool *pool, sim *sims, int n, int budget)
{
	long		computed = 0;
	int			live = n,
				steps = 0;
	char		err[256];

	for (int i = 0; i < n; i++)
	{
		sims[i].seq.owner = &sims[i];
		llm_sched_add(s, &sims[i].seq);
	}
	while (live > 0 && steps++ < 100000)
	{
		llm_sched_plan *p;

		if (llm_sched_plan_step(s, &p) != 0 || p->n_unfittable > 0 || p->n_tokens > budget)
			return -1;
		for (int i = 0; i < p->n_entries; i++)
		{
			llm_sched_entry *e = &p->entries[i];

			for (int t = e->start; t < e->start + e->n; t++)
				if (llm_block_refcount(pool, e->seq->blocks[t / llm_block_pool_block_size(pool)]) != 1)
					return -1;	/* a shared block would be overwritten */
			computed += e->n;
		}
		llm_sched_commit(s, p);
		for (int i = 0; i < p->n_entries; i++)
		{
			llm_sched_entry *e = &p->entries[i];
			sim		   *x = e->seq->owner;
			uint32_t	h = 17;

			if (!e->sample)
				continue;
			for (int t = 0; t < x->seq.n_tokens; t++)
				h = h * 31 + (uint32_t) x->seq.tokens[t];
			llm_seq_append(&x->seq, (int32_t) (h % 1000));
			if (++x->n_new == x->max_new)
			{
				llm_sched_remove(s, &x->seq);
				x->done = true;
				live--;
			}
		}
		if (llm_block_pool_check(pool, err, sizeof(err)) != 0)
			return -1;
	}
	return live == 0 ? computed : -1;
}

static void
fill_prompt(sim *x, const int32_t *shared, int n_shared, int tail_seed, int n_tail, int max_new)
{
	memset(x, 0, sizeof(*x));
	for (int k = 0; k < n_shared; k++)
		llm_seq_append(&x->seq, shared[k]);
	for (int k = 0; k < n_tail; k++)
		llm_seq_append(&x->seq, 5000 + tail_seed * 100 + k);
	x->seq.n_prompt = n_shared + n_tail;
	x->max_new = max_new;
}

/*
 * Requests sharing a prefix that arrive together: the later ones wait for
 * the first to fill the shared blocks and then take them from the cache, so
 * the prefix is computed once; a later request repeating one of them hits
 * its whole chain, shared part and own tail; the salt separates tenants.
 */
static void
test_concurrent_shared_prefix(void)
{
	int32_t		shared[26];
	sim			sims[9];
	int			budgets[] = {512, 10, 3};

	for (int k = 0; k < 26; k++)
		shared[k] = 200 + k;
	for (int b = 0; b < 3; b++)
	{
		llm_block_pool *pool = llm_block_pool_create(128, 4);
		llm_sched_config cfg = {.max_batched_tokens = budgets[b], .max_running = 16, .prefix_caching = true};
		llm_sched  *s = llm_sched_create(pool, &cfg);
		long		computed;
		int			cached = 0;
		int64_t		queried,
					hit;

		/* 8 prompts: 26 shared tokens (6 full blocks + 2) then 7 own tokens */
		for (int i = 0; i < 8; i++)
			fill_prompt(&sims[i], shared, 26, i, 7, 3);
		computed = drive(s, pool, sims, 8, budgets[b]);
		for (int i = 1; i < 8; i++)
			cached += sims[i].seq.n_cached_tokens;
		CHECK(computed > 0 && sims[0].seq.n_cached_tokens == 0 && cached == 7 * 24,
			  "budget %d: 8 concurrent prompts sharing 6 blocks: later 7 served %d tokens from the cache (want %d), computed %ld",
			  budgets[b], cached, 7 * 24, computed);
		CHECK(computed == 8 * 33 - 7 * 24 + 8 * 2,
			  "budget %d: the shared prefix was computed once (%ld tokens computed, want %d)",
			  budgets[b], computed, 8 * 33 - 7 * 24 + 8 * 2);
		llm_sched_prefix_stats(s, &queried, &hit);
		CHECK(queried == 8 * 33 && hit == 7 * 24, "budget %d: stats: %lld queried, %lld hit",
			  budgets[b], (long long) queried, (long long) hit);
		for (int i = 0; i < 8; i++)
			llm_seq_free(&sims[i].seq);

		/* a repeat of prompt 5 hits the chain through its own tail: 8 full blocks of 33 tokens */
		fill_prompt(&sims[8], shared, 26, 5, 7, 2);
		computed = drive(s, pool, &sims[8], 1, budgets[b]);
		CHECK(sims[8].seq.n_cached_tokens == 32 && computed == 1 + 1,
			  "budget %d: repeat of a concurrent prompt served %d tokens (want 32), computed %ld",
			  budgets[b], sims[8].seq.n_cached_tokens, computed);
		llm_seq_free(&sims[8].seq);

		/* another tenant's salt: no hit */
		fill_prompt(&sims[8], shared, 26, 5, 7, 1);
		sims[8].seq.cache_salt = 99;
		computed = drive(s, pool, &sims[8], 1, budgets[b]);
		CHECK(sims[8].seq.n_cached_tokens == 0 && computed == 33,
			  "budget %d: same prompt under another salt: no hit (%d cached)", budgets[b],
			  sims[8].seq.n_cached_tokens);
		llm_seq_free(&sims[8].seq);
		CHECK(llm_block_pool_n_free(pool) == 128, "budget %d: no block leaked", budgets[b]);
		llm_sched_destroy(s);
		llm_block_pool_destroy(pool);
	}
}

/*
 * Blocks holding generated tokens are cached only for a prompt with the same
 * prompt/generated split: a follow-up prompt that contains an earlier
 * answer reuses the earlier prompt's blocks, not the answer's.
 */
static void
test_generated_blocks(void)
{
	int32_t		shared[8];
	sim			x[2];
	llm_block_pool *pool = llm_block_pool_create(64, 4);
	llm_sched_config cfg = {.max_batched_tokens = 512, .max_running = 16, .prefix_caching = true};
	llm_sched  *s = llm_sched_create(pool, &cfg);

	for (int k = 0; k < 8; k++)
		shared[k] = 300 + k;
	fill_prompt(&x[0], shared, 8, 0, 0, 9);
	CHECK(drive(s, pool, &x[0], 1, 512) > 0, "8-token prompt + 9 generated");
	/* follow-up: the first 16 tokens of that conversation as a prompt, then 3 more */
	fill_prompt(&x[1], x[0].seq.tokens, 16, 1, 3, 1);
	CHECK(drive(s, pool, &x[1], 1, 512) > 0, "follow-up completes");
	CHECK(x[1].seq.n_cached_tokens == 8,
		  "follow-up reuses only the 2 prompt blocks (%d cached, want 8)", x[1].seq.n_cached_tokens);
	llm_seq_free(&x[0].seq);
	llm_seq_free(&x[1].seq);
	llm_sched_destroy(s);
	llm_block_pool_destroy(pool);
}

/*
 * Several logits rows per sequence: a sequence that wants the logits of its
 * last k tokens gets entries whose logits_from covers exactly those rows
 * (over chunks), and those tokens are never served from the prefix cache;
 * share_prefix lets sequences of one request share blocks with prefix
 * caching off, under their own salt only.
 */
static void
test_tail_logits(void)
{
	int32_t		toks[20];
	int			budgets[] = {512, 5};

	for (int k = 0; k < 20; k++)
		toks[k] = 400 + k;
	for (int b = 0; b < 2; b++)
	{
		llm_block_pool *pool = llm_block_pool_create(64, 4);
		llm_sched_config cfg = {.max_batched_tokens = budgets[b], .max_running = 16, .prefix_caching = true};
		llm_sched  *s = llm_sched_create(pool, &cfg);
		sim			x[2];
		llm_sched_plan *p;
		int32_t		rows = 0,
					first_start = -1;
		bool		shape_ok = true;

		/* a generating sequence computes and registers the 20 tokens */
		fill_prompt(&x[0], toks, 20, 0, 0, 1);
		CHECK(drive(s, pool, &x[0], 1, budgets[b]) == 20, "budget %d: 20-token prompt computed", budgets[b]);
		/* the same tokens, logits wanted for the last 9 (tokens 11..19) */
		fill_prompt(&x[1], toks, 20, 0, 0, 0);
		x[1].seq.n_tail_logits = 9;
		x[1].seq.owner = &x[1];
		llm_sched_add(s, &x[1].seq);
		while (x[1].seq.n_computed < 20 && llm_sched_plan_step(s, &p) == 0 && p->n_entries == 1)
		{
			llm_sched_entry *e = &p->entries[0];
			int32_t		want_from = e->start > 11 ? e->start : 11;

			if (first_start < 0)
				first_start = e->start;
			if (want_from > e->start + e->n)
				want_from = e->start + e->n;
			shape_ok &= e->logits_from == want_from && p->n_logits == e->start + e->n - e->logits_from;
			rows += p->n_logits;
			llm_sched_commit(s, p);
		}
		CHECK(first_start == 8, "budget %d: cached prefix stops at the block holding the first wanted token "
			  "(computing from %d, want 8)", budgets[b], first_start);
		CHECK(shape_ok && rows == 9, "budget %d: entries ask for exactly tokens 11..19 (%d rows)", budgets[b], rows);
		llm_sched_remove(s, &x[1].seq);
		llm_seq_free(&x[0].seq);
		llm_seq_free(&x[1].seq);
		CHECK(llm_block_pool_n_free(pool) == 64, "budget %d: no block leaked", budgets[b]);
		llm_sched_destroy(s);
		llm_block_pool_destroy(pool);
	}
	/* prefix caching off: only share_prefix sequences of the same salt share */
	{
		llm_block_pool *pool = llm_block_pool_create(64, 4);
		llm_sched_config cfg = {.max_batched_tokens = 512, .max_running = 16, .prefix_caching = false};
		llm_sched  *s = llm_sched_create(pool, &cfg);
		sim			x[3];
		long		computed;
		int64_t		queried,
					hit;

		for (int i = 0; i < 3; i++)
		{
			fill_prompt(&x[i], toks, 20, 0, 0, 1);
			x[i].seq.share_prefix = i < 2;
			x[i].seq.cache_salt = i < 2 ? 77 : 0;
		}
		computed = drive(s, pool, &x[0], 1, 512) + drive(s, pool, &x[1], 1, 512) + drive(s, pool, &x[2], 1, 512);
		CHECK(x[1].seq.n_cached_tokens == 16 && x[2].seq.n_cached_tokens == 0 && computed == 20 + 4 + 20,
			  "caching off: the sibling shares 16 tokens, an ordinary sequence none (%ld computed)", computed);
		llm_sched_prefix_stats(s, &queried, &hit);
		CHECK(queried == 0 && hit == 0, "caching off: prefix statistics stay 0");
		for (int i = 0; i < 3; i++)
			llm_seq_free(&x[i].seq);
		llm_sched_destroy(s);
		llm_block_pool_destroy(pool);
	}
}

static void
test_scheduler(void)
{
	int			pre = 0;
	int			steps;

	int			failed = 0;

	steps = run_sim(256, 4, 64, 16, false, 40, &pre, false, &failed);
	CHECK(steps > 0 && failed == 0, "40 sequences complete with a roomy pool (%d steps, %d preemptions)", steps, pre);
	steps = run_sim(24, 4, 64, 16, false, 40, &pre, false, &failed);
	CHECK(steps > 0 && pre > 0 && failed == 0,
		  "tiny pool: all complete, preemption exercised (%d steps, %d preemptions)", steps, pre);
	steps = run_sim(24, 4, 7, 3, true, 40, &pre, true, &failed);
	CHECK(steps > 0 && failed == 0,
		  "tiny pool + tiny budget + prefix caching + shared prefixes (%d steps, %d preemptions)", steps, pre);
	steps = run_sim(4, 4, 64, 16, false, 5, &pre, false, &failed);
	CHECK(steps > 0 && failed > 0 && failed < 5,
		  "pool smaller than some sequences: those fail cleanly, the others complete, no leak or hang "
		  "(%d steps, %d failed)", steps, failed);
	failed = 0;
	steps = run_sim(64, 16, 1, 64, true, 10, &pre, true, &failed);
	CHECK(steps > 0 && failed == 0, "budget of 1 token per step (pure chunking) completes (%d steps)", steps);
}

int
main(void)
{
	test_pool_basics();
	test_prefix_cache();
	test_register_dedup();
	test_concurrent_shared_prefix();
	test_generated_blocks();
	test_tail_logits();
	test_scheduler();
	return unit_done();
}
