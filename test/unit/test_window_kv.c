/*
 * test_window_kv.c — the scheduler's local KV group (scheduler.h): the
 * sliding-window layers' blocks released as the window passes, never
 * leaked after finish, abort or preemption, and prefix-cache hits that
 * use the local blocks of the window tail only while they are cached (no
 * model: the test plays it, appending a deterministic token after every
 * sampling step).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/sched/kv_block_pool.h"
#include "engine/sched/scheduler.h"
#include "unit.h"

#define BS 16
#define WIN 64

typedef struct world
{
	llm_block_pool *g;
	llm_block_pool *l;
	llm_sched  *s;
} world;

static void
world_open(world *w, int n_global, int n_local, int budget, int max_running, bool prefix)
{
	llm_sched_config cfg = {.max_batched_tokens = budget, .max_running = max_running,
	.prefix_caching = prefix};

	w->g = llm_block_pool_create(n_global, BS);
	w->l = llm_block_pool_create(n_local, BS);
	cfg.local_pool = w->l;
	cfg.local_window = WIN;
	w->s = llm_sched_create(w->g, &cfg);
}

static void
world_close(world *w)
{
	llm_sched_destroy(w->s);
	llm_block_pool_destroy(w->g);
	llm_block_pool_destroy(w->l);
}

static bool
pools_ok(const world *w)
{
	char		err[256];

	if (llm_block_pool_check(w->g, err, sizeof(err)) != 0 || llm_block_pool_check(w->l, err, sizeof(err)) != 0)
	{
		printf("# pool check: %s\n", err);
		return false;
	}
	return true;
}

static void
seq_init(llm_seq *q, int n_prompt, int base)
{
	memset(q, 0, sizeof(*q));
	for (int k = 0; k < n_prompt; k++)
		llm_seq_append(q, base + k);
	q->n_prompt = n_prompt;
}

/* Local blocks seq holds, and whether its table is -1 exactly below l_lo. */
static int
held_local(const llm_seq *q, bool *shape_ok)
{
	int			n = 0;

	for (int k = 0; k < q->n_blocks; k++)
	{
		if ((k < q->l_lo) != (q->lblocks[k] < 0))
			*shape_ok = false;
		n += q->lblocks[k] >= 0;
	}
	return n;
}

/*
 * One step: plan, check every entry's local blocks cover its queries'
 * windows, commit, append a token to each sampled sequence below its
 * length.  Returns the plan's entries, -1 on a broken invariant.
 */
static int
step(world *w, llm_seq **qs, const int *len, int nq, int *n_preempted)
{
	llm_sched_plan *p;
	bool		ok = true;

	if (llm_sched_plan_step(w->s, &p) != 0)
		return -1;
	*n_preempted += p->n_preempted;
	if (p->n_unfittable > 0)
		ok = false;				/* every test sequence fits its pools */
	for (int i = 0; i < p->n_entries; i++)
	{
		const llm_sched_entry *e = &p->entries[i];
		int			lo = e->start - WIN + 1;

		for (int k = (lo > 0 ? lo : 0) / BS; k * BS < e->start + e->n; k++)
			if (k >= e->seq->n_blocks || e->seq->lblocks[k] < 0 ||
				llm_block_refcount(w->l, e->seq->lblocks[k]) < 1)
				ok = false;
	}
	llm_sched_commit(w->s, p);
	for (int i = 0; i < p->n_entries; i++)
	{
		llm_seq    *q = p->entries[i].seq;

		for (int j = 0; j < nq; j++)
			if (qs[j] == q && p->entries[i].sample && q->n_tokens < len[j])
				llm_seq_append(q, 7 + q->n_tokens % 13);
	}
	return ok ? p->n_entries : -1;
}

static bool
finished(llm_seq *const *qs, const int *len, int nq)
{
	for (int j = 0; j < nq; j++)
		if (qs[j]->n_tokens < len[j] || qs[j]->n_computed < len[j] - 1)
			return false;
	return true;
}

/* One long sequence: its local blocks are released as the window passes. */
static void
test_window_release(void)
{
	world		w;
	llm_seq		q;
	llm_seq    *qs[1] = {&q};
	int			len[1] = {420},
				pre = 0,
				most = 0,
				steps = 0;
	bool		ok = true,
				shape = true,
				freed_in_step = true;
	int32_t		bound = llm_sched_local_blocks_bound(WIN, BS, 0);

	world_open(&w, 64, 64, 48, 4, false);
	seq_init(&q, 300, 1000);
	llm_sched_add(w.s, &q);
	while (!finished(qs, len, 1) && steps++ < 2000)
	{
		int			held,
					first;

		if (step(&w, qs, len, 1, &pre) < 0)
			ok = false;
		held = held_local(&q, &shape);
		first = q.n_computed - WIN + 1 > 0 ? (q.n_computed - WIN + 1) / BS : 0;
		if (q.l_lo != first)
			freed_in_step = false;
		if (held > most)
			most = held;
		if (llm_block_pool_n_blocks(w.l) - llm_block_pool_n_free(w.l) != held)
			ok = false;
	}
	CHECK(ok && steps < 2000, "420 tokens in %d steps, every query's window in held local blocks", steps);
	CHECK(shape, "local table: -1 below l_lo, a block from it on");
	CHECK(freed_in_step, "after every step the local blocks behind the next query's window are released");
	CHECK(most <= bound && most >= WIN / BS, "local blocks held between steps at most %d (bound %d)", most, bound);
	CHECK(q.n_blocks == (q.n_computed + BS - 1) / BS &&
		  llm_block_pool_n_free(w.g) == 64 - q.n_blocks,
		  "global table keeps every position (%d blocks)", q.n_blocks);
	llm_sched_remove(w.s, &q);
	CHECK(llm_block_pool_n_free(w.g) == 64 && llm_block_pool_n_free(w.l) == 64 && pools_ok(&w),
		  "finish: every block of both pools free, pools consistent");
	llm_seq_free(&q);
	world_close(&w);
}

/* Abort mid-prefill and mid-decode: nothing leaks. */
static void
test_abort(void)
{
	world		w;
	llm_seq		a,
				b;
	llm_seq    *qs[2] = {&a, &b};
	int			len[2] = {500, 500},
				pre = 0;

	world_open(&w, 80, 40, 64, 4, true);
	seq_init(&a, 200, 1);
	seq_init(&b, 260, 5000);
	llm_sched_add(w.s, &a);
	llm_sched_add(w.s, &b);
	for (int i = 0; i < 3; i++)
		step(&w, qs, len, 2, &pre);
	CHECK(a.n_computed > 0 && a.n_computed < 200, "a is mid-prefill (%d of 200)", a.n_computed);
	llm_sched_remove(w.s, &a);
	for (int i = 0; i < 8; i++)
		step(&w, qs, len, 2, &pre);
	CHECK(b.n_computed >= 260, "b decodes (%d computed)", b.n_computed);
	llm_sched_remove(w.s, &b);
	CHECK(llm_block_pool_n_free(w.g) == 80 && llm_block_pool_n_free(w.l) == 40 && pools_ok(&w),
		  "abort: every block of both pools free, pools consistent");
	llm_seq_free(&a);
	llm_seq_free(&b);
	world_close(&w);
}

/* A global pool too small for three: preemption, and no leak. */
static void
test_preemption(void)
{
	world		w;
	llm_seq		q[3];
	llm_seq    *qs[3] = {&q[0], &q[1], &q[2]};
	int			len[3] = {260, 250, 240},
				pre = 0,
				steps = 0;
	bool		ok = true,
				shape = true;

	world_open(&w, 40, 60, 64, 4, true);
	for (int i = 0; i < 3; i++)
	{
		seq_init(&q[i], 200 - 10 * i, 100000 * (i + 1));
		llm_sched_add(w.s, &q[i]);
	}
	int			n_done = 0;

	while (n_done < 3 && steps++ < 5000)
	{
		int			held = 0;

		if (step(&w, qs, len, 3, &pre) < 0)
			ok = false;
		for (int i = 0; i < 3; i++)
			held += held_local(&q[i], &shape);
		if (llm_block_pool_n_blocks(w.l) - llm_block_pool_n_free(w.l) != held)
			ok = false;
		/* a finished sequence leaves, so the preempted ones can run */
		for (int i = 0; i < 3; i++)
			if (q[i].state != LLM_SEQ_DETACHED && finished(&qs[i], &len[i], 1))
			{
				llm_sched_remove(w.s, &q[i]);
				n_done++;
			}
	}
	CHECK(ok && shape && steps < 5000, "three sequences done in %d steps, local accounting exact", steps);
	CHECK(pre > 0, "the global pool forced %d preemptions", pre);
	CHECK(llm_block_pool_n_free(w.g) == 40 && llm_block_pool_n_free(w.l) == 60 && pools_ok(&w),
		  "after preemption and finish: every block free, pools consistent");
	for (int i = 0; i < 3; i++)
		llm_seq_free(&q[i]);
	world_close(&w);
}

/*
 * Prefix cache: a second sequence with the same prompt attaches the cached
 * prefix with the first one's local window tail; once the local blocks are
 * evicted (by another sequence), the global chain alone is not used.
 */
static void
test_prefix_hit(void)
{
	world		w;
	llm_seq		a,
				b,
				c;
	llm_seq    *qa[1] = {&a},
			   *qc[1] = {&c};
	int			la[1] = {204},
				lc[1] = {400},
				pre = 0,
				steps = 0;
	int32_t		tail[16];
	int			first = (192 - WIN + 1) / BS;
	llm_sched_plan *p;
	bool		same = true;

	world_open(&w, 200, 24, 64, 4, true);
	seq_init(&a, 200, 1);
	llm_sched_add(w.s, &a);
	while (!finished(qa, la, 1) && steps++ < 100)
		step(&w, qa, la, 1, &pre);
	for (int k = first; k < 12; k++)
		tail[k] = a.lblocks[k];
	llm_sched_remove(w.s, &a);
	CHECK(llm_block_pool_n_cached_free(w.l) > 0 && pools_ok(&w), "a's local full blocks stay cached (%d)",
		  llm_block_pool_n_cached_free(w.l));

	/* b: the same 200 prompt tokens and 40 more */
	seq_init(&b, 200, 1);
	for (int k = 0; k < 40; k++)
		llm_seq_append(&b, 9000 + k);
	b.n_prompt = 240;
	llm_sched_add(w.s, &b);
	llm_sched_plan_step(w.s, &p);
	CHECK(p->n_entries == 1 && p->entries[0].start == 192, "b starts at the cached prefix (token %d)",
		  p->n_entries ? p->entries[0].start : -1);
	for (int k = first; k < 12; k++)
		same &= b.lblocks[k] == tail[k];
	CHECK(same && b.l_lo == first, "b holds a's cached local blocks of the window tail (%d..11), nothing below",
		  first);
	llm_sched_commit(w.s, p);
	llm_sched_remove(w.s, &b);

	/* c: other tokens, long enough to cycle every local block through the LRU */
	seq_init(&c, 380, 70000);
	llm_sched_add(w.s, &c);
	steps = 0;
	while (!finished(qc, lc, 1) && steps++ < 200)
		step(&w, qc, lc, 1, &pre);
	llm_sched_remove(w.s, &c);
	{
		/* the global chain of a's first block is still cached */
		uint64_t	h = llm_block_hash(0, a.tokens, BS, BS);
		int32_t		g0 = llm_block_lookup(w.g, h, -1, a.tokens, BS);

		CHECK(g0 >= 0, "a's global blocks are still cached");
		if (g0 >= 0)
			llm_block_release(w.g, g0);
	}
	llm_seq_free(&b);
	seq_init(&b, 200, 1);
	for (int k = 0; k < 40; k++)
		llm_seq_append(&b, 9000 + k);
	b.n_prompt = 240;
	llm_sched_add(w.s, &b);
	llm_sched_plan_step(w.s, &p);
	CHECK(p->n_entries == 1 && p->entries[0].start == 0,
		  "local tail evicted: the global chain alone is not attached (b starts at %d)",
		  p->n_entries ? p->entries[0].start : -1);
	llm_sched_commit(w.s, p);
	llm_sched_remove(w.s, &b);
	CHECK(llm_block_pool_n_free(w.g) == 200 && llm_block_pool_n_free(w.l) == 24 && pools_ok(&w),
		  "every block free, pools consistent");
	llm_seq_free(&a);
	llm_seq_free(&b);
	llm_seq_free(&c);
	world_close(&w);
}

int
main(void)
{
	test_window_release();
	test_abort();
	test_preemption();
	test_prefix_hit();
	return unit_done();
}
