/*
 * test_sched_fork.c — the scheduler's copy-on-write fork (scheduler.h
 * llm_sched_fork), no model: a sequence waiting on fork_from is passed
 * over until its source has computed the shared prefix; the fork shares
 * the full blocks (reference counts), gives the partly filled last block a
 * new private block to copy into (and, with the local group, the local
 * one, the blocks behind the window not held), counts the prefix as
 * computed and computes only the rest with every wanted logits row; a
 * pool with no free block refuses the fork, changing nothing, and the
 * sequence then recomputes from the cached full blocks; no block leaks.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/sched/kv_block_pool.h"
#include "engine/sched/scheduler.h"
#include "unit.h"

#define BS 16
#define NP 40					/* the shared prompt: 2 full blocks + 8 tokens */
#define NL 3					/* the forking sequence's own tokens */

typedef struct world
{
	llm_block_pool *g;
	llm_block_pool *l;
	llm_sched  *s;
} world;

static void
world_open(world *w, int n_global, int window)
{
	llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 4, .prefix_caching = false};

	w->g = llm_block_pool_create(n_global, BS);
	w->l = window > 0 ? llm_block_pool_create(n_global, BS) : NULL;
	cfg.local_pool = w->l;
	cfg.local_window = window;
	w->s = llm_sched_create(w->g, &cfg);
}

static bool
world_close(world *w)
{
	bool		all_free = llm_block_pool_n_free(w->g) == llm_block_pool_n_blocks(w->g) &&
		(w->l == NULL || llm_block_pool_n_free(w->l) == llm_block_pool_n_blocks(w->l));
	char		err[256];
	bool		ok = llm_block_pool_check(w->g, err, sizeof(err)) == 0 &&
		(w->l == NULL || llm_block_pool_check(w->l, err, sizeof(err)) == 0);

	if (!ok)
		printf("# pool check: %s\n", err);
	llm_sched_destroy(w->s);
	llm_block_pool_destroy(w->g);
	llm_block_pool_destroy(w->l);
	return ok && all_free;
}

/* src: the prompt alone, its last row wanted; seq: the prompt + NL tokens, rows from NP on wanted. */
static void
make_pair(llm_seq *src, llm_seq *seq)
{
	memset(src, 0, sizeof(*src));
	memset(seq, 0, sizeof(*seq));
	src->n_tokens = src->n_prompt = src->cap_tokens = NP;
	src->tokens = malloc(NP * sizeof(int32_t));
	seq->n_tokens = seq->n_prompt = seq->cap_tokens = NP + NL;
	seq->tokens = malloc((NP + NL) * sizeof(int32_t));
	for (int i = 0; i < NP + NL; i++)
	{
		if (i < NP)
			src->tokens[i] = 100 + i;
		seq->tokens[i] = 100 + i;
	}
	src->n_tail_logits = 1;
	seq->n_tail_logits = NL;
	src->share_prefix = seq->share_prefix = true;
	src->cache_salt = seq->cache_salt = 77;
	seq->fork_from = src;
}

/* Plan and commit steps until src has computed its prompt; false if seq was ever planned. */
static bool
run_source(llm_sched *s, llm_seq *src, const llm_seq *seq)
{
	bool		passed_over = true;

	for (int step = 0; step < 8 && src->n_computed < src->n_tokens; step++)
	{
		llm_sched_plan *p;

		if (llm_sched_plan_step(s, &p) != 0)
			return false;
		for (int i = 0; i < p->n_entries; i++)
			passed_over &= p->entries[i].seq != seq;
		llm_sched_commit(s, p);
	}
	return passed_over && src->n_computed == NP;
}

static void
test_fork(int window)
{
	const char *what = window ? "local group" : "one group";
	world		w;
	llm_seq		src,
				seq;
	llm_sched_block_copy c;
	llm_sched_plan *p;

	world_open(&w, 8, window);
	make_pair(&src, &seq);
	llm_sched_add(w.s, &src);
	llm_sched_add(w.s, &seq);
	CHECK(run_source(w.s, &src, &seq), "%s: the forking sequence waits while its source computes %d tokens",
		  what, NP);
	CHECK(llm_sched_fork(w.s, &seq, &src, &c), "%s: fork", what);
	CHECK(seq.n_computed == NP && seq.n_blocks == 3 && seq.blocks[0] == src.blocks[0] &&
		  seq.blocks[1] == src.blocks[1] && seq.blocks[2] != src.blocks[2] &&
		  llm_block_refcount(w.g, src.blocks[0]) == 2 && llm_block_refcount(w.g, src.blocks[1]) == 2 &&
		  llm_block_refcount(w.g, seq.blocks[2]) == 1,
		  "%s: full blocks shared (count 2), the partial block private", what);
	CHECK(c.src == src.blocks[2] && c.dst == seq.blocks[2], "%s: the copy is src's block %d into %d", what,
		  c.src, c.dst);
	if (window)
	{
		/* window 16: a query at position 40 reads from position 25 on, so local block 0 is behind it */
		CHECK(seq.l_lo == 1 && seq.lblocks[0] == -1 && seq.lblocks[1] == src.lblocks[1] &&
			  llm_block_refcount(w.l, src.lblocks[1]) == 2 && seq.lblocks[2] != src.lblocks[2] &&
			  c.src_local == src.lblocks[2] && c.dst_local == seq.lblocks[2],
			  "%s: local block 1 shared, block 0 (behind the window) not held, block 2 copied %d -> %d", what,
			  c.src_local, c.dst_local);
	}
	else
		CHECK(c.src_local == -1 && c.dst_local == -1, "%s: no local copy", what);
	{
		llm_sched_block_copy c2;

		CHECK(!llm_sched_fork(w.s, &seq, &src, &c2) && c2.dst == -1, "%s: a second fork is refused", what);
	}
	seq.fork_from = NULL;
	llm_sched_remove(w.s, &src);
	llm_sched_plan_step(w.s, &p);
	CHECK(p->n_entries == 1 && p->entries[0].seq == &seq && p->entries[0].start == NP &&
		  p->entries[0].n == NL && p->entries[0].logits_from == NP,
		  "%s: then it computes only its own %d tokens, each with its logits row (start %d, n %d, logits from %d)",
		  what, NL, p->n_entries ? p->entries[0].start : -1, p->n_entries ? p->entries[0].n : -1,
		  p->n_entries ? p->entries[0].logits_from : -1);
	llm_sched_commit(w.s, p);
	llm_sched_remove(w.s, &seq);
	llm_seq_free(&src);
	llm_seq_free(&seq);
	CHECK(world_close(&w), "%s: every block back, pools consistent", what);
}

static void
test_no_free_block(void)
{
	world		w;
	llm_seq		src,
				seq;
	llm_sched_block_copy c;
	llm_sched_plan *p;

	world_open(&w, 3, 0);
	make_pair(&src, &seq);
	llm_sched_add(w.s, &src);
	llm_sched_add(w.s, &seq);
	CHECK(run_source(w.s, &src, &seq), "3-block pool: the source fills all 3 blocks");
	CHECK(!llm_sched_fork(w.s, &seq, &src, &c) && seq.n_blocks == 0 && seq.n_computed == 0 && c.dst == -1 &&
		  llm_block_refcount(w.g, src.blocks[0]) == 1,
		  "no free block: the fork is refused and changes nothing");
	seq.fork_from = NULL;
	llm_sched_remove(w.s, &src);
	llm_sched_plan_step(w.s, &p);
	CHECK(p->n_entries == 1 && p->entries[0].start == 2 * BS && p->entries[0].n == NP + NL - 2 * BS &&
		  p->entries[0].logits_from == NP,
		  "then it recomputes past the 2 cached full blocks (start %d, n %d)",
		  p->n_entries ? p->entries[0].start : -1, p->n_entries ? p->entries[0].n : -1);
	llm_sched_commit(w.s, p);
	llm_sched_remove(w.s, &seq);
	llm_seq_free(&src);
	llm_seq_free(&seq);
	CHECK(world_close(&w), "3-block pool: every block back");
}

int
main(void)
{
	test_fork(0);
	test_fork(16);
	test_no_free_block();
	return unit_done();
}
