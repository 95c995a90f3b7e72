/*
 * scheduler.c — the scheduler object (scheduler.h; the parts are listed in
 * sched_internal.h): create and destroy, sequences joining and leaving,
 * counters.
 */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

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
	if (sched_grow((void **) &seq->tokens, &seq->cap_tokens, seq->n_tokens + 1, sizeof(int32_t)))
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

int
llm_sched_add(llm_sched *s, llm_seq *seq)
{
	sched_flow *f = sched_join_flow(s, seq);

	if (f == NULL)
		return -1;
	seq->flow = f;
	f->n_members++;
	if (sched_enqueue(s, seq, false) != 0)
	{
		sched_leave_flow(s, f);
		seq->flow = NULL;
		return -1;
	}
	s->n_class[f->cls]++;
	seq->arrival = s->next_arrival++;
	seq->n_computed = 0;
	seq->planned_in = 0;
	return 0;
}

void
llm_sched_remove(llm_sched *s, llm_seq *seq)
{
	if (seq->state == LLM_SEQ_RUNNING)
		sched_remove_from(s->running, &s->n_running, seq);
	else if (seq->state == LLM_SEQ_WAITING && seq->flow != NULL)
		sched_dequeue(s, seq);
	sched_release_blocks(s, seq);
	if (seq->flow != NULL && seq->state != LLM_SEQ_DETACHED)
	{
		s->n_class[seq->flow->cls]--;
		sched_leave_flow(s, seq->flow);
		seq->flow = NULL;
	}
	seq->state = LLM_SEQ_DETACHED;
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
llm_sched_n_preemptions(const llm_sched *s)
{
	return s->n_preemptions;
}
