/*
 * test_scheduler.c — block pool invariants, prefix-cache lookups, and the
 * scheduler under memory pressure (no model: the test plays the model,
 * appending a deterministic "sampled" token after every sampling step).
 */
#include <stdlib.h>
#include <string.h>

#include "kv_block_pool.h"
#include "scheduler.h"
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
	uint64_t	h1 = llm_block_hash(0, t1, 4),
				h2 = llm_block_hash(h1, t2, 4);
	int32_t		a = llm_block_alloc(p),
				b = llm_block_alloc(p);
	char		err[256];

	llm_block_register(p, a, h1, -1, t1);
	llm_block_register(p, b, h2, a, t2);
	CHECK(llm_block_lookup(p, h1, -1, t1) == a, "hit on first block");
	llm_block_release(p, a);	/* drop the lookup's reference */
	CHECK(llm_block_lookup(p, h1, -1, t3) == -1, "same hash, other tokens: miss (tokens verified)");
	CHECK(llm_block_lookup(p, llm_block_hash(1, t1, 4), -1, t1) == -1, "other salt: miss");
	CHECK(llm_block_lookup(p, h2, b, t2) == -1, "wrong parent: miss");
	llm_block_release(p, a);
	llm_block_release(p, b);
	CHECK(llm_block_pool_n_cached_free(p) == 2, "released blocks stay cached");
	CHECK(llm_block_lookup(p, h1, -1, t1) == a, "cached free block hit and revived");
	CHECK(llm_block_refcount(p, a) == 1, "revived block referenced once");
	llm_block_release(p, a);
	/* exhaust the pool: cached blocks are evicted, their hashes gone */
	for (int i = 0; i < 4; i++)
		CHECK(llm_block_alloc(p) >= 0, "alloc %d under eviction", i);
	CHECK(llm_block_pool_n_cached_free(p) == 0, "all cached blocks evicted");
	CHECK(llm_block_lookup(p, h1, -1, t1) == -1, "evicted block's hash never matches again");
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

/* Run n_seqs sequences to completion; returns steps taken (or -1 on a broken invariant). */
static int
run_sim(int n_blocks, int block_size, int budget, int max_running, bool prefix, int n_seqs,
		int *preemptions, bool shared_prefix)
{
	llm_block_pool *pool = llm_block_pool_create(n_blocks, block_size);
	llm_sched_config cfg = {budget, max_running, prefix};
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

static void
test_scheduler(void)
{
	int			pre = 0;
	int			steps;

	steps = run_sim(256, 4, 64, 16, false, 40, &pre, false);
	CHECK(steps > 0, "40 sequences complete with a roomy pool (%d steps, %d preemptions)", steps, pre);
	steps = run_sim(24, 4, 64, 16, false, 40, &pre, false);
	CHECK(steps > 0 && pre > 0, "tiny pool: all complete, preemption exercised (%d steps, %d preemptions)", steps, pre);
	steps = run_sim(24, 4, 7, 3, true, 40, &pre, true);
	CHECK(steps > 0, "tiny pool + tiny budget + prefix caching + shared prefixes (%d steps, %d preemptions)", steps, pre);
	steps = run_sim(4, 4, 64, 16, false, 5, &pre, false);
	CHECK(steps > 0, "pool smaller than one sequence: sequences fail cleanly, no leak or hang (%d steps)", steps);
	steps = run_sim(64, 16, 1, 64, true, 10, &pre, true);
	CHECK(steps > 0, "budget of 1 token per step (pure chunking) completes (%d steps)", steps);
}

int
main(void)
{
	test_pool_basics();
	test_prefix_cache();
	test_scheduler();
	return unit_done();
}
