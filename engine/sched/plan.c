/*
 * plan.c — one step's plan (scheduler.h): class by class, running
 * sequences first and then admission, within the step caps (the shared
 * step cap from the step-time model, the short-step cap, batch prefill and
 * prefill caps), preempting later classes for the first; and its commit.
 */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

static void
preempt(llm_sched *s, llm_seq *victim, int32_t *preempted_cls)
{
	sched_remove_from(s->running, &s->n_running, victim);
	sched_release_blocks(s, victim);
	victim->n_preemptions++;
	s->n_preemptions++;
	s->plan.n_preempted++;
	if (victim->flow->cls < *preempted_cls)
		*preempted_cls = victim->flow->cls;
	/* head of its flow's queue: it keeps its place ahead of newer requests (room grown at plan start) */
	(void) sched_enqueue(s, victim, true);
}

static int
add_entry(llm_sched *s, llm_seq *seq, int32_t n, int32_t n_draft)
{
	llm_sched_plan *p = &s->plan;
	llm_sched_entry *e;
	int32_t		own = n - n_draft;

	if (sched_grow((void **) &p->entries, &s->cap_entries, p->n_entries + 1, sizeof(llm_sched_entry)))
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

	if (sched_grow((void **) &p->unfittable, &s->cap_unfittable, p->n_unfittable + 1, sizeof(llm_seq *)))
		return -1;
	p->unfittable[p->n_unfittable++] = seq;
	return 0;
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

/* Per-class state of one plan. */
typedef struct class_plan
{
	int32_t		cls;
	int32_t		left;			/* tokens the class may still take */
	int32_t		prefill_left;	/* prefill tokens it may still take; -1 = no cap */
	int32_t		whole_left;		/* tokens whole sequences may still take (no short-step cap) */
} class_plan;

/*
 * Whole sequences (an encoder's inputs, scheduler.h "Encoder inputs"):
 * the prefill caps (batch_prefill_tokens, prefill_cap) bound the chunks a
 * prefill is cut into and the short-step cap the tokens a chunked batch
 * step carries, but a whole sequence is never cut and may already fill a
 * step alone (as its first entry), so several share the step up to the
 * class's tokens without those caps (cp->whole_left: the budget and the
 * shared-step cap), neither limited nor counted by the prefill caps.
 */
static int32_t
take(class_plan *cp, int32_t want, bool prefill, bool whole)
{
	int32_t		n;

	if (whole)
		return want < cp->whole_left ? want : cp->whole_left;
	n = want < cp->left ? want : cp->left;
	if (prefill && cp->prefill_left >= 0 && n > cp->prefill_left)
		n = cp->prefill_left;
	return n;
}

static void
consume(llm_sched *s, class_plan *cp, int32_t *budget, int32_t n, bool prefill, bool whole)
{
	*budget -= n;
	cp->left = cp->left > n ? cp->left - n : 0;	/* a whole sequence may overshoot */
	cp->whole_left = cp->whole_left > n ? cp->whole_left - n : 0;
	if (prefill && !whole && cp->prefill_left >= 0)
		cp->prefill_left = cp->prefill_left > n ? cp->prefill_left - n : 0;
}

/* Whether the class may take more tokens this step (whole sequences past the short-step cap). */
static bool
class_open(const class_plan *cp)
{
	return cp->left > 0 || cp->whole_left > 0;
}

/* Step 1 for one class: its running sequences in service order. */
static int
plan_running(llm_sched *s, class_plan *cp, int32_t n_order, int32_t *budget, int32_t *preempted_cls)
{
	llm_sched_plan *p = &s->plan;
	bool		released_waiting = false;

	for (int32_t k = 0; k < n_order && class_open(cp); k++)
	{
		llm_seq    *seq = s->order[k];
		int32_t		n,
					d = 0;
		bool		prefill;

		if (seq->flow->cls != cp->cls || seq->state != LLM_SEQ_RUNNING || seq->planned_in == s->step)
			continue;
		if (seq->n_tokens - seq->n_computed > 1)
			sched_extend_cached_prefix(s, seq);	/* still prefilling: catch up with the cache */
		prefill = seq->n_tokens - seq->n_computed > 1;
		n = take(cp, seq->n_tokens - seq->n_computed, prefill, seq->whole);
		if (seq->whole && n < seq->n_tokens - seq->n_computed)
			continue;			/* not computed in parts (it runs only in its admission step) */
		if (n <= 0)
			continue;
		if (n == 1 && !prefill && seq->n_draft > 0)
		{
			d = seq->n_draft < cp->left - 1 ? seq->n_draft : cp->left - 1;
			/* a draft never preempts: without room for it, plain decoding */
			if (d > 0 && !sched_ensure_blocks(s, seq, seq->n_computed + n + d))
			{
				sched_trim_blocks(s, seq, seq->n_computed);
				d = 0;
			}
		}
		while (!sched_ensure_blocks(s, seq, seq->n_computed + n))
		{
			llm_seq    *victim = pick_victim(s, n_order, cp->cls);

			if (victim == NULL || victim == seq)
			{
				if (s->n_running == 1 && p->n_entries == 0 && !released_waiting)
				{
					/* alone: the other blocks held are waiting sequences' attached prefixes */
					sched_release_waiting_blocks(s, NULL);
					released_waiting = true;
					continue;
				}
				if (s->n_running == 1 && p->n_entries == 0)
				{
					/* alone and still does not fit: the pool is too small for it */
					sched_remove_from(s->running, &s->n_running, seq);
					sched_release_blocks(s, seq);
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
		consume(s, cp, budget, n + d, prefill, seq->whole);
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
	while (class_open(cp) && *preempted_cls > cp->cls)
	{
		sched_flow *f = sched_next_flow(s, cp->cls);
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
		sched_extend_cached_prefix(s, seq);
		if (sched_next_block_in_flight(s, seq))
		{
			f->cursor++;
			continue;
		}
		prefill = seq->n_tokens - seq->n_computed > 1;
		n = take(cp, seq->n_tokens - seq->n_computed, prefill, seq->whole);
		if (seq->whole && n < seq->n_tokens - seq->n_computed)
		{
			/* all of it or nothing: over the class's caps only as the step's first entry */
			if (p->n_entries > 0 || seq->n_tokens - seq->n_computed > *budget)
			{
				f->cursor++;
				continue;
			}
			n = seq->n_tokens - seq->n_computed;
		}
		if (n <= 0)
			break;
		if (!sched_ensure_blocks(s, seq, seq->n_computed + n))
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
				sched_release_waiting_blocks(s, seq);
				if (!sched_ensure_blocks(s, seq, seq->n_computed + n))
				{
					/* it can never fit */
					sched_release_blocks(s, seq);
					sched_dequeue(s, seq);
					if (mark_unfittable(s, seq))
						return -1;
					continue;
				}
			}
			else
				break;			/* keep what it has attached; retry next step */
		}
		sched_dequeue(s, seq);
		seq->state = LLM_SEQ_RUNNING;
		seq->admitted_once = true;
		s->running[s->n_running++] = seq;
		if (add_entry(s, seq, n, 0))
			return -1;
		consume(s, cp, budget, n, prefill, seq->whole);
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
	if (sched_grow((void **) &s->running, &s->cap_running, total + 1, sizeof(llm_seq *)) ||
		sched_grow((void **) &s->order, &s->cap_order, n_order + 1, sizeof(llm_seq *)))
		return -1;
	for (int32_t i = 0; i < s->n_flows; i++)
	{
		sched_flow *f = s->flows[i];

		if (sched_grow((void **) &f->waiting, &f->cap_waiting, f->n_members + 1, sizeof(llm_seq *)))
			return -1;
		f->planned = 0;
	}
	memcpy(s->order, s->running, (size_t) n_order * sizeof(llm_seq *));
	qsort(s->order, (size_t) n_order, sizeof(llm_seq *), sched_service_cmp);

	for (int32_t c = 0; c < LLM_SCHED_N_CLASSES && budget > 0; c++)
	{
		class_plan	cp = {c, budget, -1, budget};
		int32_t		decoding = 0;

		if (c == 1)
			first_tokens = p->n_tokens;
		if (s->n_class[c] == 0)
			continue;
		if (c > 0 && p->n_tokens > 0 && s->cfg.shared_step_tokens != 0)
		{
			int32_t		rest = step_cap(s, p->n_tokens) - p->n_tokens;

			cp.left = rest < 0 ? 0 : (rest < budget ? rest : budget);
			cp.whole_left = cp.left;
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
		sched_register_full_blocks(s, seq);
		sched_release_local_window(s, seq, seq->n_computed);
	}
}
