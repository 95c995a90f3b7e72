/*
 * test_sched_encoder.c — whole sequences (an encoder's inputs) in the
 * batch class: several share a step up to max_batched_tokens, the batch
 * prefill cap and the short-step cap neither cut nor limit them (a whole
 * input may fill a step alone anyway), the shared-step cap still bounds
 * them beside interactive work, a whole sequence is never split.  Chunked
 * prefills of the same class stay under the batch prefill cap and the
 * short-step cap.  No model: the test plays the engine (commit, then
 * remove every sequence computed to its end).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/sched/kv_block_pool.h"
#include "engine/sched/scheduler.h"
#include "unit.h"

#define MAXSEQ 32

typedef struct run_shape
{
	int			steps;
	int			max_entries;	/* entries of the fullest step */
	int			max_tokens;		/* tokens of the fullest step */
	int			first_entries;	/* entries of the first step */
	bool		split;			/* a whole sequence planned in part */
	bool		over;			/* a step over max_batched_tokens */
	bool		all_done;
} run_shape;

/*
 * n sequences of len[i] tokens, class cls, whole or not, driven to the end
 * under cfg; batch_cap_tokens > 0 sets the short-step cap first (one noted
 * batch step of that many tokens at the target time).
 */
static run_shape
run(const llm_sched_config *cfg, int n, const int *len, const int *cls, bool whole, int batch_cap_tokens)
{
	llm_block_pool *pool = llm_block_pool_create(1024, 16);
	llm_sched  *s = llm_sched_create(pool, cfg);
	llm_seq		seqs[MAXSEQ];
	run_shape	r;
	int			live = n;

	memset(&r, 0, sizeof(r));
	memset(seqs, 0, sizeof(seqs));
	if (batch_cap_tokens > 0)
		llm_sched_note_batch_step(s, batch_cap_tokens, 100.0, 100.0);
	for (int i = 0; i < n; i++)
	{
		for (int k = 0; k < len[i]; k++)
			llm_seq_append(&seqs[i], 1000 + 37 * i + k);
		seqs[i].n_prompt = len[i];
		seqs[i].whole = whole;
		seqs[i].priority = cls[i];
		seqs[i].session = 1;
		seqs[i].owner = &seqs[i];
		llm_sched_add(s, &seqs[i]);
	}
	while (live > 0 && r.steps < 10000)
	{
		llm_sched_plan *p;

		if (llm_sched_plan_step(s, &p) != 0 || p->n_entries == 0)
			break;
		r.steps++;
		if (r.steps == 1)
			r.first_entries = p->n_entries;
		if (p->n_entries > r.max_entries)
			r.max_entries = p->n_entries;
		if (p->n_tokens > r.max_tokens)
			r.max_tokens = p->n_tokens;
		if (p->n_tokens > cfg->max_batched_tokens)
			r.over = true;
		for (int i = 0; i < p->n_entries; i++)
			if (whole && (p->entries[i].start != 0 || p->entries[i].n != p->entries[i].seq->n_tokens))
				r.split = true;
		llm_sched_commit(s, p);
		for (int i = 0; i < n; i++)
			if (seqs[i].state == LLM_SEQ_RUNNING && seqs[i].n_computed == seqs[i].n_tokens)
			{
				llm_sched_remove(s, &seqs[i]);
				live--;
			}
	}
	r.all_done = live == 0 && llm_block_pool_n_free(pool) == 1024;
	for (int i = 0; i < n; i++)
		llm_seq_free(&seqs[i]);
	llm_sched_destroy(s);
	llm_block_pool_destroy(pool);
	return r;
}

int
main(void)
{
	llm_sched_config cfg = {.max_batched_tokens = 512, .max_running = 64, .batch_prefill_tokens = 128};
	int			len[MAXSEQ],
				batch[MAXSEQ],
				inter[MAXSEQ];
	run_shape	r;

	for (int i = 0; i < MAXSEQ; i++)
	{
		len[i] = 110;
		batch[i] = 1;
		inter[i] = 0;
	}

	/* 16 inputs of 110 tokens, batch class, prefill cap 128: four per 512-token step */
	r = run(&cfg, 16, len, batch, true, 0);
	CHECK(r.all_done && !r.split && !r.over, "batch class: every whole input computed in one entry, "
		  "no step over 512 tokens, no block leaked");
	CHECK(r.first_entries == 4 && r.max_tokens == 440 && r.steps == 4,
		  "batch class: 4 inputs of 110 tokens share each step despite the 128-token batch prefill cap "
		  "(first step %d entries, fullest %d tokens, %d steps)", r.first_entries, r.max_tokens, r.steps);

	/* the same in the interactive class (no batch caps there) */
	r = run(&cfg, 16, len, inter, true, 0);
	CHECK(r.all_done && !r.split && r.first_entries == 4 && r.steps == 4,
		  "interactive class: 4 inputs a step (%d entries, %d steps)", r.first_entries, r.steps);

	/* a 100-token short-step cap: whole inputs still 4 a step */
	r = run(&cfg, 16, len, batch, true, 100);
	CHECK(r.all_done && !r.split && r.max_entries == 4 && r.steps == 4 && !r.over,
		  "short-step cap 100: whole inputs still 4 a step (fullest %d entries, %d tokens, %d steps)",
		  r.max_entries, r.max_tokens, r.steps);

	/* beside interactive work the shared-step cap (250) bounds them: 30 + 2 x 110 in the first step */
	{
		llm_sched_config sh = cfg;
		int			l2[9] = {30, 110, 110, 110, 110, 110, 110, 110, 110},
					c2[9] = {0, 1, 1, 1, 1, 1, 1, 1, 1};

		sh.shared_step_tokens = 250;
		r = run(&sh, 9, l2, c2, true, 0);
		CHECK(r.all_done && !r.split && r.first_entries == 3,
			  "shared-step cap 250 with a 30-token interactive input: 2 batch inputs beside it (%d entries)",
			  r.first_entries);
	}

	/* inputs of 300 tokens: one a step (two would pass max_batched_tokens) */
	for (int i = 0; i < 3; i++)
		len[i] = 300;
	r = run(&cfg, 3, len, batch, true, 0);
	CHECK(r.all_done && !r.split && r.max_entries == 1 && r.steps == 3 && !r.over,
		  "inputs of 300 tokens: one per step, whole (%d entries, %d steps)", r.max_entries, r.steps);

	/* chunked prefills of the batch class keep the 128-token cap, and the short-step cap */
	for (int i = 0; i < 4; i++)
		len[i] = 110;
	r = run(&cfg, 4, len, batch, false, 0);
	CHECK(r.all_done && r.max_tokens == 128,
		  "not whole: batch prefill at most 128 tokens a step (fullest %d)", r.max_tokens);
	r = run(&cfg, 4, len, batch, false, 100);
	CHECK(r.all_done && r.max_tokens == 100,
		  "not whole, short-step cap 100: at most 100 tokens a step (fullest %d)", r.max_tokens);
	return unit_done();
}
