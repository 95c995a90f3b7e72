/*
 * test_sched_fair.c — the scheduler's classes, fair share, reserves, caps
 * and draft tokens, simulated without a model (the test plays the model,
 * appending a token after every sampling step), with the invariants
 * checked every step: the token budget, the running limit, private blocks
 * under every written token, a consistent pool, nothing leaked at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/sched/kv_block_pool.h"
#include "engine/sched/scheduler.h"
#include "unit.h"

typedef struct sim
{
	llm_seq		seq;
	int			max_new;
	int			n_new;
	bool		done;
	int			first_step;		/* step of its first entry, -1 before */
	int			done_step;
	int32_t		draft[8];
} sim;

typedef struct world
{
	llm_block_pool *pool;
	llm_sched  *s;
	llm_sched_config cfg;
	sim		   *sims;
	int			n;
	int			step;
	bool		bad;
	int			max_step_tokens_with_interactive;	/* over steps holding class-0 work */
	int			max_prefill_with_decodes;	/* prefill tokens of steps with >= cap_decodes decodes */
	int			live;
	int			drafts_planned;
	int			drafts_accepted;
	/* per step, the running count of each session 1..2 of class 1 */
	int			share_gap;		/* largest |running(1) - running(2)| once both are saturated */
	int			max_batch_prefill;	/* class-1 prefill tokens of one step */
	int			max_batch_prefill_interactive;	/* ... of a step while class 0 has live sequences */
	int			batch_stalled;	/* steps without a class-1 entry while class 1 had live sequences */
	int			max_interactive_chunk;	/* largest class-0 prefill chunk */
	int			max_batch_prefill_with_decodes;	/* ... of a step with >= prefill_cap_decodes class-1 decodes */
	int			last_tokens;	/* the last step's tokens */
	int			last_interactive_tokens;	/* ... of class 0 */
} world;

static void
world_init(world *w, int n_blocks, int bs, llm_sched_config cfg, int n)
{
	memset(w, 0, sizeof(*w));
	w->pool = llm_block_pool_create(n_blocks, bs);
	w->cfg = cfg;
	w->s = llm_sched_create(w->pool, &cfg);
	w->sims = calloc((size_t) n, sizeof(sim));
	w->n = n;
}

/* Queue sim i: prompt of len tokens, max_new outputs, class and session. */
static void
add_sim(world *w, int i, int len, int max_new, int cls, uint64_t session)
{
	sim		   *x = &w->sims[i];

	memset(x, 0, sizeof(*x));
	for (int k = 0; k < len; k++)
		llm_seq_append(&x->seq, 10000 * (i + 1) + k);
	x->seq.n_prompt = len;
	x->seq.priority = cls;
	x->seq.session = session;
	x->seq.owner = x;
	x->max_new = max_new;
	x->first_step = -1;
	llm_sched_add(w->s, &x->seq);
	w->live++;
}

/*
 * One step.  With drafts, every decoding sequence proposes 3 tokens of
 * which the "model" accepts the first accept_drafts.
 */
static void
world_step(world *w, bool drafts, int accept_drafts)
{
	llm_sched_plan *p;
	char		err[256];
	int			bs = llm_block_pool_block_size(w->pool);
	bool		interactive = false;
	bool		interactive_live = llm_sched_n_class(w->s, 0) > 0;
	bool		batch_live = llm_sched_n_class(w->s, 1) > 0;
	bool		batch_planned = false;
	int			decodes = 0,
				prefill = 0,
				batch_prefill = 0,
				batch_decodes = 0;

	w->step++;
	for (int i = 0; i < w->n; i++)
	{
		sim		   *x = &w->sims[i];

		x->seq.n_draft = 0;
		if (drafts && !x->done && x->seq.state == LLM_SEQ_RUNNING && x->seq.n_tokens - x->seq.n_computed == 1 &&
			x->n_new + 4 <= x->max_new)
		{
			for (int k = 0; k < 3; k++)
				x->draft[k] = 7 * (x->n_new + k + 1) + 1;	/* what the "model" samples next */
			x->draft[accept_drafts] = -5;	/* the first rejected one */
			x->seq.draft = x->draft;
			x->seq.n_draft = 3;
		}
	}
	if (llm_sched_plan_step(w->s, &p) != 0 || p->n_unfittable > 0)
	{
		w->bad = true;
		return;
	}
	if (p->n_tokens > w->cfg.max_batched_tokens || llm_sched_n_running(w->s) > w->cfg.max_running)
		w->bad = true;
	for (int i = 0; i < p->n_entries; i++)
	{
		llm_sched_entry *e = &p->entries[i];
		sim		   *x = e->seq->owner;

		if (x->first_step < 0)
			x->first_step = w->step;
		if (e->seq->priority == 0)
			interactive = true;
		if (e->seq->priority == 1)
			batch_planned = true;
		if (e->n - e->n_draft == 1 && e->sample && e->start >= e->seq->n_prompt)
		{
			decodes++;
			if (e->seq->priority == 1)
				batch_decodes++;
		}
		else if (e->n > 1)
		{
			prefill += e->n;	/* a last chunk of one token is not capped */
			if (e->seq->priority == 1)
				batch_prefill += e->n;
			else if (e->n > w->max_interactive_chunk)
				w->max_interactive_chunk = e->n;
		}
		if (e->seq->n_blocks * bs < e->start + e->n)
			w->bad = true;
		for (int t = e->start; t < e->start + e->n; t++)
			if (llm_block_refcount(w->pool, e->seq->blocks[t / bs]) != 1)
				w->bad = true;
		if (e->n_draft > 0 && (e->start + e->n - e->logits_from != 1 + e->n_draft || !e->sample))
			w->bad = true;		/* a draft entry: one logits row per token from the last own one */
		w->drafts_planned += e->n_draft;
	}
	w->last_tokens = p->n_tokens;
	w->last_interactive_tokens = p->n_first_tokens;
	if (interactive && p->n_tokens > w->max_step_tokens_with_interactive)
		w->max_step_tokens_with_interactive = p->n_tokens;
	if (batch_prefill > w->max_batch_prefill)
		w->max_batch_prefill = batch_prefill;
	if (interactive_live && batch_prefill > w->max_batch_prefill_interactive)
		w->max_batch_prefill_interactive = batch_prefill;
	if (batch_decodes >= w->cfg.prefill_cap_decodes && batch_prefill > w->max_batch_prefill_with_decodes)
		w->max_batch_prefill_with_decodes = batch_prefill;
	if (batch_live && !batch_planned)
		w->batch_stalled++;
	if (w->cfg.prefill_cap > 0 && decodes >= w->cfg.prefill_cap_decodes && prefill > w->max_prefill_with_decodes)
		w->max_prefill_with_decodes = prefill;
	llm_sched_commit(w->s, p);
	for (int i = 0; i < p->n_entries; i++)
	{
		llm_sched_entry *e = &p->entries[i];
		sim		   *x = e->seq->owner;
		int			produced = 0;

		if (!e->sample)
			continue;
		/* the "model": tokens 7k+1; a draft is accepted while it equals them */
		for (int j = 0; j <= e->n_draft && x->n_new < x->max_new; j++)
		{
			int32_t		tok = 7 * (x->n_new + 1) + 1;

			llm_seq_append(&x->seq, tok);
			x->n_new++;
			produced++;
			if (j == e->n_draft || x->draft[j] != tok)
				break;
		}
		if (x->n_new == x->max_new)
		{
			llm_sched_remove(w->s, &x->seq);
			x->done = true;
			x->done_step = w->step;
			w->live--;
		}
		else if (e->n_draft > 0)
		{
			llm_sched_accept_drafts(w->s, &x->seq, produced - 1);
			w->drafts_accepted += produced - 1;
		}
	}
	if (llm_block_pool_check(w->pool, err, sizeof(err)) != 0)
		w->bad = true;
}

static void
world_run(world *w, int max_steps, bool drafts, int accept)
{
	while (w->live > 0 && w->step < max_steps && !w->bad)
		world_step(w, drafts, accept);
}

/* Everything done, nothing leaked; frees the world. */
static bool
world_end(world *w)
{
	bool		ok = !w->bad && w->live == 0 && llm_block_pool_n_free(w->pool) == llm_block_pool_n_blocks(w->pool);

	for (int i = 0; i < w->n; i++)
	{
		if (w->sims[i].seq.n_tokens != w->sims[i].seq.n_prompt + w->sims[i].max_new)
			ok = false;
		if (w->sims[i].seq.state != LLM_SEQ_DETACHED)
			llm_sched_remove(w->s, &w->sims[i].seq);
		llm_seq_free(&w->sims[i].seq);
	}
	free(w->sims);
	llm_sched_destroy(w->s);
	llm_block_pool_destroy(w->pool);
	return ok;
}

static int
running_of(const world *w, uint64_t session, int from, int to)
{
	int			n = 0;

	for (int i = from; i < to; i++)
		if (w->sims[i].seq.session == session && w->sims[i].seq.state == LLM_SEQ_RUNNING)
			n++;
	return n;
}

/*
 * Two bulk statements (batch class, two sessions, 40 sequences each, the
 * second queued after the first): they share the running slots evenly
 * and progress together; in one session they would run FIFO.
 */
static void
test_two_bulk_sessions(void)
{
	for (int fair = 0; fair < 2; fair++)
	{
		world		w;
		llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 16, .prefix_caching = true};
		int			gap = 0,
					first_done_a = -1,
					last_start_b = 0;

		world_init(&w, 512, 4, cfg, 80);
		for (int i = 0; i < 80; i++)
			add_sim(&w, i, 6 + i % 5, 8 + i % 7, 1, fair ? (i < 40 ? 1 : 2) : 1);
		while (w.live > 0 && w.step < 5000 && !w.bad)
		{
			int			a,
						b;

			world_step(&w, false, 0);
			a = running_of(&w, fair ? 1 : 1, 0, 40);
			b = running_of(&w, fair ? 2 : 1, 40, 80);
			/* while both still have work queued, slots are split evenly */
			if (w.step > 4 && w.sims[39].first_step < 0 && w.sims[79].first_step < 0 && abs(a - b) > gap)
				gap = abs(a - b);
		}
		for (int i = 0; i < 40; i++)
			if (first_done_a < 0 || w.sims[i].done_step < first_done_a)
				first_done_a = w.sims[i].done_step;
		for (int i = 40; i < 80; i++)
			if (w.sims[i].first_step > last_start_b)
				last_start_b = w.sims[i].first_step;
		if (fair)
		{
			CHECK(gap <= 2, "two sessions of one class: running slots split evenly (largest gap %d)", gap);
			CHECK(w.sims[40].first_step <= 2 && w.sims[79].done_step < 2 * w.sims[39].done_step,
				  "the second statement starts at once (step %d) and both progress together "
				  "(last of A done at %d, last of B at %d)",
				  w.sims[40].first_step, w.sims[39].done_step, w.sims[79].done_step);
		}
		else
			CHECK(last_start_b > first_done_a, "one session: FIFO, the later sequences wait for slots (start %d > %d)",
				  last_start_b, first_done_a);
		CHECK(world_end(&w), "%s: all complete, invariants held, nothing leaked", fair ? "two sessions" : "one session");
	}
}

/*
 * An interactive request arriving while a bulk statement fills every slot
 * it may take: it is planned at the very next step (reserved slots), the
 * steps it is in carry at most shared_step_tokens, and the bulk keeps
 * going.  Without reserved slots it preempts a batch sequence instead of
 * waiting, and a batch sequence never preempts it.
 */
static void
test_interactive_next_step(void)
{
	for (int reserve = 0; reserve < 2; reserve++)
	{
		world		w;
		llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 8, .prefix_caching = true,
		.reserved_running = reserve ? 2 : 0, .shared_step_tokens = 12};
		int			arrive;
		int			batch_running_max = 0;

		world_init(&w, 512, 4, cfg, 41);
		for (int i = 0; i < 40; i++)
			add_sim(&w, i, 9, 30, 1, 1);
		for (int k = 0; k < 20; k++)
		{
			world_step(&w, false, 0);
			if (llm_sched_n_running(w.s) > batch_running_max)
				batch_running_max = llm_sched_n_running(w.s);
		}
		arrive = w.step;
		add_sim(&w, 40, 5, 6, 0, 77);
		world_step(&w, false, 0);
		CHECK(w.sims[40].first_step == arrive + 1,
			  "reserve %d: the interactive request is planned at the next step (%d, arrived after %d)",
			  cfg.reserved_running, w.sims[40].first_step, arrive);
		CHECK(batch_running_max == cfg.max_running - cfg.reserved_running,
			  "reserve %d: batch sequences take at most %d slots (%d)", cfg.reserved_running,
			  cfg.max_running - cfg.reserved_running, batch_running_max);
		while (!w.sims[40].done && w.step < 1000 && !w.bad)
			world_step(&w, false, 0);
		CHECK(w.sims[40].done && w.sims[40].done_step - w.sims[40].first_step <= 6 &&
			  w.sims[40].seq.n_preemptions == 0,
			  "reserve %d: it finishes in one step per token (%d steps), never preempted",
			  cfg.reserved_running, w.sims[40].done_step - w.sims[40].first_step + 1);
		CHECK(w.max_step_tokens_with_interactive <= 12,
			  "reserve %d: steps holding it carry at most 12 tokens (%d)", cfg.reserved_running,
			  w.max_step_tokens_with_interactive);
		if (!reserve)
			CHECK(llm_sched_n_preemptions(w.s) >= 1, "no reserve: a batch sequence was preempted for it (%lld)",
				  (long long) llm_sched_n_preemptions(w.s));
		world_run(&w, 5000, false, 0);
		CHECK(world_end(&w), "reserve %d: everything completes, nothing leaked", cfg.reserved_running);
	}
}

/*
 * The automatic cap: from the step-time model, the total of a step holding
 * interactive work takes at most twice the time of that work alone
 * (fixed 6 ms + 2 ms per token: t interactive tokens allow 2 t + 3 in all);
 * without a model, t + 3.
 */
static void
test_step_cost_cap(void)
{
	for (int model = 0; model < 2; model++)
	{
		world		w;
		llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 40, .prefix_caching = true,
		.reserved_running = 2, .shared_step_tokens = -1};
		int			worst = 0;

		world_init(&w, 1024, 4, cfg, 31);
		if (model)
			llm_sched_set_step_cost(w.s, 6.0, 2.0);
		for (int i = 0; i < 30; i++)
			add_sim(&w, i, 5, 40, 1, 1);
		for (int k = 0; k < 10; k++)
			world_step(&w, false, 0);
		add_sim(&w, 30, 6, 8, 0, 9);
		while (!w.sims[30].done && w.step < 200 && !w.bad)
		{
			llm_sched_plan *p;
			int			t = 0;

			/* plan by hand to see each step's interactive tokens */
			if (llm_sched_plan_step(w.s, &p) != 0)
				break;
			for (int i = 0; i < p->n_entries; i++)
				if (p->entries[i].seq->priority == 0)
					t += p->entries[i].n;
			if (t > 0 && p->n_tokens - (model ? 2 * t + 3 : t + 3) > worst)
				worst = p->n_tokens - (model ? 2 * t + 3 : t + 3);
			llm_sched_commit(w.s, p);
			for (int i = 0; i < p->n_entries; i++)
			{
				llm_sched_entry *e = &p->entries[i];
				sim		   *x = e->seq->owner;

				if (!e->sample)
					continue;
				llm_seq_append(&x->seq, 7 * (x->n_new + 1) + 1);
				if (++x->n_new == x->max_new)
				{
					llm_sched_remove(w.s, &x->seq);
					x->done = true;
					w.live--;
				}
			}
			w.step++;
		}
		CHECK(w.sims[30].done && worst <= 0, "%s: steps holding interactive work stay within the cap (excess %d)",
			  model ? "cost model 6 + 2 n ms: 2 t + 3" : "no model: t + 3", worst);
		world_run(&w, 5000, false, 0);
		CHECK(world_end(&w), "%s: all complete", model ? "cost model" : "no model");
	}
}

/*
 * KV pressure: batch sequences fill a small pool; interactive ones arriving
 * then take blocks by preempting batch ones (class first), and are never
 * preempted themselves.
 */
static void
test_class_preemption(void)
{
	world		w;
	llm_sched_config cfg = {.max_batched_tokens = 32, .max_running = 16, .prefix_caching = false};
	int			pre_interactive = 0;

	world_init(&w, 40, 4, cfg, 20);
	for (int i = 0; i < 16; i++)
		add_sim(&w, i, 6, 24, 1, 1 + i % 2);
	for (int k = 0; k < 12; k++)
		world_step(&w, false, 0);
	for (int i = 16; i < 20; i++)
		add_sim(&w, i, 8, 10, 0, 100 + i);
	world_run(&w, 20000, false, 0);
	for (int i = 16; i < 20; i++)
		pre_interactive += w.sims[i].seq.n_preemptions;
	CHECK(pre_interactive == 0 && llm_sched_n_preemptions(w.s) > 0,
		  "small pool: batch sequences preempted (%lld), interactive never (%d)",
		  (long long) llm_sched_n_preemptions(w.s), pre_interactive);
	for (int i = 16; i < 20; i++)
		CHECK(w.sims[i].done_step - w.sims[i].first_step < 40, "interactive %d done within %d steps", i,
			  w.sims[i].done_step - w.sims[i].first_step + 1);
	CHECK(world_end(&w), "small pool: all complete, nothing leaked");
}

/* A flow that comes back after others ran long gets no burst: it starts at the class's least service. */
static void
test_new_flow_no_burst(void)
{
	world		w;
	llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 8, .prefix_caching = true};
	int			a_admitted_after = 0;

	world_init(&w, 512, 4, cfg, 80);
	for (int i = 0; i < 40; i++)
		add_sim(&w, i, 6, 10, 1, 1);
	for (int k = 0; k < 30; k++)
		world_step(&w, false, 0);
	for (int i = 40; i < 80; i++)
		add_sim(&w, i, 6, 10, 1, 2);
	CHECK(llm_sched_flow_service(w.s, 1, 1) > 0 &&
		  llm_sched_flow_service(w.s, 1, 2) == llm_sched_flow_service(w.s, 1, 1),
		  "a new flow starts at the class clock (%lld = %lld)", (long long) llm_sched_flow_service(w.s, 1, 2),
		  (long long) llm_sched_flow_service(w.s, 1, 1));
	for (int k = 0; k < 20; k++)
		world_step(&w, false, 0);
	for (int i = 0; i < 40; i++)
		if (w.sims[i].first_step > 30)
			a_admitted_after++;
	CHECK(a_admitted_after > 0, "the old flow is still admitted after the new one joined (%d)", a_admitted_after);
	world_run(&w, 5000, false, 0);
	CHECK(world_end(&w), "no burst: all complete");
}

/* The prefill cap: with many decodes in a step, prefill chunks take at most prefill_cap tokens. */
static void
test_prefill_cap(void)
{
	world		w;
	llm_sched_config cfg = {.max_batched_tokens = 128, .max_running = 24, .prefix_caching = true,
	.prefill_cap = 10, .prefill_cap_decodes = 8};

	world_init(&w, 1024, 4, cfg, 60);
	for (int i = 0; i < 60; i++)
		add_sim(&w, i, 30 + i % 9, 12, 1, 1);
	world_run(&w, 20000, false, 0);
	CHECK(w.max_prefill_with_decodes > 0 && w.max_prefill_with_decodes <= 10,
		  "steps with >= 8 decodes carry at most 10 prefill tokens (%d)", w.max_prefill_with_decodes);
	CHECK(world_end(&w), "prefill cap: all complete");
}

/*
 * Batch prefill per step: a bulk statement's sequences join with prefill
 * chunks of at most batch_prefill_tokens per step, before, while and after
 * interactive requests arrive; the interactive prompts are not capped
 * (each is planned whole at the step after its arrival); every step moves
 * the bulk on and all of it completes.  Without the cap the same load puts
 * longer batch chunks in a step, and with prefill_cap also on, the smaller
 * of the two holds.
 */
static void
test_batch_prefill_cap(void)
{
	for (int variant = 0; variant < 3; variant++)
	{
		world		w;
		llm_sched_config cfg = {.max_batched_tokens = 128, .max_running = 24, .prefix_caching = true,
			.reserved_running = 2, .shared_step_tokens = -1,
		.batch_prefill_tokens = variant == 1 ? 0 : 12, .prefill_cap = variant == 2 ? 5 : 0, .prefill_cap_decodes = 2};
		const char *name = variant == 0 ? "cap 12" : (variant == 1 ? "no cap" : "cap 12, prefill_cap 5");
		int			next = 60;
		bool		next_step_ok = true;

		world_init(&w, 2048, 4, cfg, 64);
		llm_sched_set_step_cost(w.s, 6.0, 2.0);
		for (int i = 0; i < 60; i++)
			add_sim(&w, i, 30 + i % 9, 12, 1, 1);
		while (w.live > 0 && w.step < 20000 && !w.bad)
		{
			if (next < 64 && w.step == 8 + 15 * (next - 60))
			{
				add_sim(&w, next, 20, 6, 0, 100 + next);
				world_step(&w, false, 0);
				if (w.sims[next].first_step != w.step)
					next_step_ok = false;
				next++;
			}
			else
				world_step(&w, false, 0);
		}
		if (variant == 1)
			CHECK(w.max_batch_prefill > 12, "%s: batch chunks of %d tokens in a step", name, w.max_batch_prefill);
		else
		{
			CHECK(w.max_batch_prefill > 0 && w.max_batch_prefill <= 12,
				  "%s: batch prefill per step at most 12 tokens (%d)", name, w.max_batch_prefill);
			CHECK(w.max_batch_prefill_interactive <= 12,
				  "%s: also while interactive requests are live (%d)", name, w.max_batch_prefill_interactive);
		}
		if (variant == 2)
			CHECK(w.max_batch_prefill_with_decodes > 0 && w.max_batch_prefill_with_decodes <= 5,
				  "%s: steps with >= 2 batch decodes carry at most 5 batch prefill tokens (%d)", name,
				  w.max_batch_prefill_with_decodes);
		CHECK(next == 64 && next_step_ok && w.max_interactive_chunk == 20,
			  "%s: each interactive request planned whole (chunk %d) at the step after it arrived", name,
			  w.max_interactive_chunk);
		CHECK(w.batch_stalled == 0, "%s: every step moved the bulk on (%d steps without it)", name, w.batch_stalled);
		CHECK(world_end(&w), "%s: all complete, nothing leaked", name);
	}
}

/*
 * Draft tokens: planned as extra rows of a decoding sequence with blocks
 * for them; the accepted ones count as computed, blocks of rejected ones are
 * released, and only verified tokens reach the prefix cache (a repeat of a
 * finished sequence's tokens finds exactly its verified full blocks).
 */
static void
test_drafts(void)
{
	for (int accept = 0; accept < 3; accept++)
	{
		world		w;
		llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 8, .prefix_caching = true};

		world_init(&w, 256, 4, cfg, 6);
		for (int i = 0; i < 6; i++)
			add_sim(&w, i, 7 + i, 20, 1, 1);
		world_run(&w, 5000, true, accept);
		CHECK(w.drafts_planned > 0 && w.drafts_accepted == (accept == 0 ? 0 : w.drafts_accepted) &&
			  (accept == 0 || w.drafts_accepted > 0),
			  "accept %d of 3: drafts planned (%d), accepted (%d)", accept, w.drafts_planned, w.drafts_accepted);
		CHECK(w.step < (accept == 2 ? 15 + 20 / 3 + 2 : 40), "accept %d: %d steps", accept, w.step);
		CHECK(world_end(&w), "accept %d: all complete, every written block private, nothing leaked", accept);
	}
	/* verified tokens only in the cache: a sequence's blocks registered are those of its verified tokens */
	{
		llm_block_pool *pool = llm_block_pool_create(64, 4);
		llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 8, .prefix_caching = true};
		llm_sched  *s = llm_sched_create(pool, &cfg);
		llm_seq		a,
					b;
		llm_sched_plan *p;
		int32_t		draft[5] = {50, 51, 52, 53, 54};

		memset(&a, 0, sizeof(a));
		for (int k = 0; k < 6; k++)
			llm_seq_append(&a, 40 + k);
		a.n_prompt = 6;
		llm_sched_add(s, &a);
		llm_sched_plan_step(s, &p);
		llm_sched_commit(s, p);
		llm_seq_append(&a, 49);	/* sampled: 7 tokens, 6 computed */
		a.draft = draft;
		a.n_draft = 5;
		llm_sched_plan_step(s, &p);
		CHECK(p->n_entries == 1 && p->entries[0].n == 6 && p->entries[0].n_draft == 5 && p->n_logits == 6 &&
			  a.n_blocks == 3, "a decode with 5 drafts: 6 rows, 6 logits, blocks for 12 tokens (%d blocks)", a.n_blocks);
		llm_sched_commit(s, p);
		CHECK(a.n_computed == 7 && a.n_registered == 1, "commit counts only the sequence's own tokens");
		/* the model accepts 50 and 51, then samples 60 */
		llm_seq_append(&a, 50);
		llm_seq_append(&a, 51);
		llm_seq_append(&a, 60);
		llm_sched_accept_drafts(s, &a, 2);
		CHECK(a.n_computed == 9 && a.n_registered == 2 && a.n_blocks == 3,
			  "2 accepted: 9 computed, 2 full blocks registered, the third kept (%d computed, %d blocks)",
			  a.n_computed, a.n_blocks);
		{
			/* a's third block holds verified 51 and rejected 52 53 54: not in the cache */
			int32_t		drafted[4] = {51, 52, 53, 54};
			uint64_t	h = llm_block_hash(a.last_hash, drafted, 4, 0);

			CHECK(llm_block_lookup(pool, h, a.blocks[1], drafted, 0) == -1,
				  "the block with rejected drafts is not in the prefix cache");
		}
		a.n_draft = 0;
		llm_sched_remove(s, &a);
		/* b = a's verified tokens as a prompt: finds a's 2 verified full blocks? only the prompt-split-equal one */
		memset(&b, 0, sizeof(b));
		for (int k = 0; k < 6; k++)
			llm_seq_append(&b, 40 + k);
		llm_seq_append(&b, 49);
		llm_seq_append(&b, 50);
		llm_seq_append(&b, 51);
		b.n_prompt = 6;
		llm_sched_add(s, &b);
		llm_sched_plan_step(s, &p);
		CHECK(p->n_entries == 1 && b.n_computed == 8 && b.n_cached_tokens == 6,
			  "the same tokens with the same prompt split find a's 2 verified blocks (%d computed, %d cached)",
			  b.n_computed, b.n_cached_tokens);
		llm_sched_commit(s, p);
		llm_sched_remove(s, &b);
		llm_seq_free(&a);
		llm_seq_free(&b);
		CHECK(llm_block_pool_n_free(pool) == 64, "drafts: no block leaked");
		llm_sched_destroy(s);
		llm_block_pool_destroy(pool);
	}
}

/* A draft never preempts: with no free block it is dropped and the sequence decodes plainly. */
static void
test_draft_without_room(void)
{
	llm_block_pool *pool = llm_block_pool_create(2, 4);
	llm_sched_config cfg = {.max_batched_tokens = 64, .max_running = 8, .prefix_caching = false};
	llm_sched  *s = llm_sched_create(pool, &cfg);
	llm_seq		a;
	llm_sched_plan *p;
	int32_t		draft[6] = {1, 2, 3, 4, 5, 6};

	memset(&a, 0, sizeof(a));
	for (int k = 0; k < 5; k++)
		llm_seq_append(&a, 40 + k);
	a.n_prompt = 5;
	llm_sched_add(s, &a);
	llm_sched_plan_step(s, &p);
	llm_sched_commit(s, p);
	llm_seq_append(&a, 9);
	a.draft = draft;
	a.n_draft = 6;			/* would need 12 tokens = 3 blocks of a 2-block pool */
	llm_sched_plan_step(s, &p);
	CHECK(p->n_entries == 1 && p->entries[0].n_draft == 0 && p->entries[0].n == 1 && p->n_preempted == 0 &&
		  a.n_blocks == 2, "no room for the draft: plain decode, nothing preempted (%d blocks)", a.n_blocks);
	llm_sched_commit(s, p);
	llm_sched_remove(s, &a);
	llm_seq_free(&a);
	CHECK(llm_block_pool_n_free(pool) == 2, "no block leaked");
	llm_sched_destroy(s);
	llm_block_pool_destroy(pool);
}

/*
 * The fairness load on a simulated clock: a step of n tokens takes 2 + n
 * ms (the cost model the scheduler is given, so the clock and the plan
 * agree).  A bulk of 60 batch sequences; an interactive request (5-token
 * prompt, 4 tokens) arrives every 150 ms and joins at the first step that
 * starts after it, so it waits for the step in progress, as the worker
 * does.  Reports the largest latency of the interactive requests, the
 * longest batch-only step, the bulk's end and the largest step tokens
 * beyond t alone among steps holding t interactive tokens.
 */
typedef struct clock_run
{
	double		max_latency;
	double		max_wait;		/* arrival -> the start of its first step */
	double		max_own;		/* the start of its first step -> its end */
	double		longest_batch_step;
	double		bulk_end;
	int			max_excess;		/* n - t - allowed, over steps holding t > 0 interactive tokens */
	int			n_interactive;
	bool		ok;
} clock_run;

static clock_run
run_on_clock(int batch_step_ms, int slowdown)
{
	world		w;
	llm_sched_config cfg = {.max_batched_tokens = 256, .max_running = 24, .prefix_caching = true,
		.reserved_running = 2, .shared_step_tokens = -1, .batch_prefill_tokens = 64,
	.shared_step_slowdown = slowdown};
	clock_run	r = {0};
	double		now = 0,
				arrival = 150,
				join = 0;
	int			next = 60;

	world_init(&w, 4096, 4, cfg, 60 + 40);
	llm_sched_set_step_cost(w.s, 2.0, 1.0);
	for (int i = 0; i < 60; i++)
		add_sim(&w, i, 30 + i % 9, 24, 1, 1);
	while (w.live > 0 && w.step < 20000 && !w.bad)
	{
		bool		bulk_live = false;
		double		dt;

		for (int i = 0; i < 60; i++)
			bulk_live |= !w.sims[i].done;
		if (bulk_live && next < 100 && now >= arrival && (next == 60 || w.sims[next - 1].done))
		{
			add_sim(&w, next, 5, 4, 0, 500);
			next++;
			join = now;
		}
		world_step(&w, false, 0);
		dt = 2.0 + w.last_tokens;
		now += dt;
		if (w.last_interactive_tokens == 0)
			llm_sched_note_batch_step(w.s, w.last_tokens, dt, batch_step_ms);
		/* from the third step on: the cap has been set from the first two */
		if (w.last_interactive_tokens == 0 && w.step >= 3 && dt > r.longest_batch_step)
			r.longest_batch_step = dt;
		if (w.last_interactive_tokens > 0)
		{
			int			t = w.last_interactive_tokens;
			int			allowed = (int) (slowdown / 100.0 * (t + 2.0));

			if (allowed < 1)
				allowed = 1;
			if (w.last_tokens - t - allowed > r.max_excess)
				r.max_excess = w.last_tokens - t - allowed;
		}
		if (next > 60 && w.sims[next - 1].done && w.sims[next - 1].done_step == w.step)
		{
			if (now - arrival > r.max_latency)
				r.max_latency = now - arrival;
			if (join - arrival > r.max_wait)
				r.max_wait = join - arrival;
			if (now - join > r.max_own)
				r.max_own = now - join;
			r.n_interactive++;
			arrival += 150;
			if (arrival < now)
				arrival = now;
		}
		if (bulk_live && r.bulk_end == 0)
		{
			bool		all = true;

			for (int i = 0; i < 60; i++)
				all &= w.sims[i].done;
			if (all)
				r.bulk_end = now;
		}
	}
	w.n = next;					/* only the requests that arrived */
	r.ok = world_end(&w);
	return r;
}

/*
 * Short steps: with a target of 40 ms on the clock 2 + n ms, every
 * batch-only step from the third on (the cap set from the steps before)
 * carries at most 38 tokens (40 ms); without it, steps of
 * decodes plus a 64-token chunk run longer.  An interactive request
 * arriving during a step waits for it, so its worst latency falls, while
 * the bulk ends at most 10% later (the step's fixed cost is paid more
 * often).  Every request completes and nothing leaks.
 */
static void
test_batch_step_cap(void)
{
	clock_run	off = run_on_clock(0, 25),
				on = run_on_clock(40, 25);

	CHECK(off.ok && on.ok && off.n_interactive >= 5 && on.n_interactive >= 5,
		  "the clock runs complete (%d and %d interactive requests)", off.n_interactive, on.n_interactive);
	CHECK(on.longest_batch_step <= 40.0 && off.longest_batch_step > 40.0,
		  "batch-only steps: longest %.0f ms with a 40 ms target, %.0f ms without", on.longest_batch_step,
		  off.longest_batch_step);
	CHECK(on.max_wait <= 40.0 && on.max_latency < off.max_latency,
		  "an interactive request waits at most 40 ms for the step in progress (%.0f; %.0f without the cap), "
		  "its worst latency falls (%.0f ms from %.0f)", on.max_wait, off.max_wait, on.max_latency,
		  off.max_latency);
	CHECK(on.bulk_end <= 1.1 * off.bulk_end, "the bulk ends at most 10%% later (%.0f ms against %.0f)",
		  on.bulk_end, off.bulk_end);
}

/*
 * The short-step cap follows the steps' own rate: on a clock of 60 + n ms
 * (a loaded host: every step slow) a 40 ms target would want fewer tokens
 * than a step is worth, and the cap stays at LLM_SCHED_BATCH_STEP_FLOOR
 * instead of shrinking further; on a flat clock, 10 + n / 100 ms (a GPU),
 * it is max_batched_tokens; a target of 0 removes it.
 */
static void
test_batch_step_floor(void)
{
	for (int variant = 0; variant < 2; variant++)
	{
		world		w;
		llm_sched_config cfg = {.max_batched_tokens = 128, .max_running = 24, .prefix_caching = true,
		.batch_prefill_tokens = 64};
		int			least = 1 << 30,
					most = 0;
		const char *name = variant == 0 ? "clock 60 + n ms" : "clock 10 + n / 100 ms";

		world_init(&w, 4096, 4, cfg, 40);
		for (int i = 0; i < 40; i++)
			add_sim(&w, i, 30 + i % 9, 12, 1, 1);
		while (w.live > 0 && w.step < 20000 && !w.bad)
		{
			world_step(&w, false, 0);
			llm_sched_note_batch_step(w.s, w.last_tokens, variant == 0 ? 60.0 + w.last_tokens :
									  10.0 + w.last_tokens / 100.0, 40.0);
			if (llm_sched_batch_step_tokens(w.s) < least)
				least = llm_sched_batch_step_tokens(w.s);
			if (w.step >= 2 && w.last_tokens > most)
				most = w.last_tokens;
		}
		if (variant == 0)
			CHECK(least == LLM_SCHED_BATCH_STEP_FLOOR && most == LLM_SCHED_BATCH_STEP_FLOOR,
				  "%s: the cap goes down to the floor of %d tokens and no further (least %d, steps of %d)", name,
				  LLM_SCHED_BATCH_STEP_FLOOR, least, most);
		else
			CHECK(least == 128 && most > 64, "%s: the cap is max_batched_tokens (least %d, largest step %d)",
				  name, least, most);
		llm_sched_note_batch_step(w.s, 10, 5.0, 0);
		CHECK(llm_sched_batch_step_tokens(w.s) == 0, "%s: a target of 0 removes the cap", name);
		CHECK(w.batch_stalled == 0 && world_end(&w), "%s: all complete, every step moved the bulk on", name);
	}
}

/*
 * The automatic shared cap with shared_step_slowdown: a step holding t
 * interactive tokens carries at most t + s (t + fixed / per_token) tokens
 * in all, at least t + 1 (s = slowdown / 100); a lower slowdown makes the
 * time from an interactive request's first step to its end shorter.
 */
static void
test_shared_step_slowdown(void)
{
	clock_run	twice = run_on_clock(40, 100),
				quarter = run_on_clock(40, 25),
				none = run_on_clock(40, 0);

	CHECK(twice.ok && quarter.ok && none.ok, "the clock runs complete");
	CHECK(twice.max_excess <= 0 && quarter.max_excess <= 0 && none.max_excess <= 0,
		  "steps with interactive work within t + s (t + 2), at least t + 1 (excess %d, %d, %d)",
		  twice.max_excess, quarter.max_excess, none.max_excess);
	CHECK(quarter.max_own < twice.max_own && none.max_own <= quarter.max_own,
		  "an interactive request's own steps, at most: %.0f ms at 100%%, %.0f at 25%%, %.0f at 0%%",
		  twice.max_own, quarter.max_own, none.max_own);
}

int
main(void)
{
	test_two_bulk_sessions();
	test_interactive_next_step();
	test_step_cost_cap();
	test_class_preemption();
	test_new_flow_no_burst();
	test_prefill_cap();
	test_batch_prefill_cap();
	test_batch_step_cap();
	test_batch_step_floor();
	test_shared_step_slowdown();
	test_drafts();
	test_draft_without_room();
	return unit_done();
}
