/*
 * fair.c — flows and fair share (scheduler.h, "Classes and fair share"):
 * one flow per (class, session) with a FIFO of waiting sequences, the
 * service each flow received, the class clocks a new flow starts from, the
 * service order of running sequences and the next flow to admit from.
 */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

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
sched_flow *
sched_join_flow(llm_sched *s, llm_seq *seq)
{
	int32_t		cls = seq_class(seq);
	sched_flow *f = find_flow(s, cls, seq->session);

	if (f != NULL)
		return f;
	advance_clock(s, cls);
	if (sched_grow((void **) &s->flows, &s->cap_flows, s->n_flows + 1, sizeof(sched_flow *)))
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

void
sched_leave_flow(llm_sched *s, sched_flow *f)
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
int
sched_enqueue(llm_sched *s, llm_seq *seq, bool front)
{
	sched_flow *f = seq->flow;

	if (sched_grow((void **) &f->waiting, &f->cap_waiting, f->n_waiting + 1, sizeof(llm_seq *)))
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

/* Take waiting seq out of its flow's queue (the step's cursor follows). */
void
sched_dequeue(llm_sched *s, llm_seq *seq)
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

/* Service order: earlier class, then less-served flow, then earlier arrival. */
int
sched_service_cmp(const void *pa, const void *pb)
{
	const llm_seq *a = *(llm_seq *const *) pa;
	const llm_seq *b = *(llm_seq *const *) pb;

	if (a->flow->cls != b->flow->cls)
		return a->flow->cls < b->flow->cls ? -1 : 1;
	if (a->flow->service != b->flow->service)
		return a->flow->service < b->flow->service ? -1 : 1;
	return (a->arrival > b->arrival) - (a->arrival < b->arrival);
}

/* The class-cls flow to admit from next: least service counting this step's, then oldest head. */
sched_flow *
sched_next_flow(const llm_sched *s, int32_t cls)
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

int64_t
llm_sched_flow_service(const llm_sched *s, int32_t cls, uint64_t session)
{
	const sched_flow *f = find_flow(s, cls, session);

	return f ? f->service : 0;
}
