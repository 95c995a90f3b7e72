/*
 * sched_internal.h — the scheduler's state, shared by its files and by
 * nothing else (scheduler.h is the contract):
 *
 *   scheduler.c  the object: create / destroy, sequences joining and
 *                leaving (llm_sched_add / llm_sched_remove), counters
 *   fair.c       flows and fair share: a flow per (class, session), its
 *                FIFO of waiting sequences, service and the class clocks,
 *                the service order and the next flow to admit from
 *   blocks.c     block tables: allocation, the local window, prefix-cache
 *                attach and registration, in-flight sharing, fork, drafts
 *   plan.c       one step's plan: class by class, step caps (shared step,
 *                short steps, prefill caps), preemption, commit
 *
 * Calls point down: plan.c -> fair.c, blocks.c; scheduler.c -> fair.c,
 * blocks.c; fair.c and blocks.c call neither plan.c nor each other.
 * Single-threaded like the scheduler itself (its owner's thread).
 */
#ifndef LLM_SCHED_INTERNAL_H
#define LLM_SCHED_INTERNAL_H

#include "scheduler.h"

#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * A flow: the live sequences of one (class, session).  Its waiting ones are
 * a FIFO (a preempted one goes back to the front); service counts the token
 * rows computed for it, starting from its class's clock when it becomes
 * active.
 */
typedef struct sched_flow
{
	int32_t		cls;
	uint64_t	session;
	int64_t		service;
	int32_t		n_members;		/* waiting + running */
	llm_seq   **waiting;
	int32_t		n_waiting;
	int32_t		cap_waiting;
	/* per step */
	int64_t		planned;		/* tokens planned for it in this step */
	int32_t		cursor;			/* next waiting sequence to try in this step */
} sched_flow;

struct llm_sched
{
	llm_block_pool *pool;
	llm_sched_config cfg;
	int32_t		block_size;
	/* running: in no particular order (the plan sorts a copy) */
	llm_seq   **running;
	int32_t		n_running;
	int32_t		cap_running;
	int32_t		n_waiting;		/* over all flows */
	sched_flow **flows;			/* live flows (at least one member) */
	int32_t		n_flows;
	int32_t		cap_flows;
	int64_t		clock[LLM_SCHED_N_CLASSES];	/* least service of the class's active flows */
	int32_t		n_class[LLM_SCHED_N_CLASSES];	/* live sequences per class */
	llm_seq   **order;			/* the plan's service order of running */
	int32_t		cap_order;
	uint64_t	step;
	double		cost_fixed_ms;	/* llm_sched_set_step_cost */
	double		cost_per_token_ms;
	double		batch_cap;		/* llm_sched_note_batch_step; 0 = no cap */
	uint64_t	next_arrival;
	int64_t		n_preemptions;
	int64_t		prefix_query_tokens;
	int64_t		prefix_hit_tokens;
	llm_sched_plan plan;
	int32_t		cap_entries;
	int32_t		cap_unfittable;
	/* extend_cached_prefix's scratch: the global chain found, its hashes */
	int32_t    *hit_ids;
	uint64_t   *hit_hash;
	int32_t		cap_hit;
};

/* Grow *arr (elements of elem bytes, capacity *cap) to hold need; 0, or -1 when out of memory. */
static inline int
sched_grow(void **arr, int32_t *cap, int32_t need, size_t elem)
{
	int32_t		c = *cap ? *cap : 16;
	void	   *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*arr, (size_t) c * elem);
	if (p == NULL)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}
/* Take seq out of arr[0..*n) keeping the order; false when it is not there. */
static inline bool
sched_remove_from(llm_seq **arr, int32_t *n, llm_seq *seq)
{
	for (int32_t i = 0; i < *n; i++)
		if (arr[i] == seq)
		{
			memmove(&arr[i], &arr[i + 1], (size_t) (*n - i - 1) * sizeof(llm_seq *));
			(*n)--;
			return true;
		}
	return false;
}

/* ---------- fair.c ---------- */

/* The flow of seq's class and session, created at its class's clock if none is live; NULL when out of memory. */
sched_flow *sched_join_flow(llm_sched *s, llm_seq *seq);
/* One member fewer; the flow is freed with its last member. */
void		sched_leave_flow(llm_sched *s, sched_flow *f);
/* Queue seq in its flow: at the tail, or at the head (a preempted sequence keeps its place).  -1 when out of memory. */
int			sched_enqueue(llm_sched *s, llm_seq *seq, bool front);
/* Take waiting seq out of its flow's queue (the step's cursor follows). */
void		sched_dequeue(llm_sched *s, llm_seq *seq);
/* qsort order of llm_seq pointers: earlier class, then less-served flow, then earlier arrival. */
int			sched_service_cmp(const void *pa, const void *pb);
/* The class-cls flow to admit from next, or NULL when none of that class waits past its cursor. */
sched_flow *sched_next_flow(const llm_sched *s, int32_t cls);

/* ---------- blocks.c ---------- */

static inline bool
local_on(const llm_sched *s)
{
	return s->cfg.local_pool != NULL;
}

/* Release seq's local blocks no query from position pos on reads. */
void		sched_release_local_window(llm_sched *s, llm_seq *seq, int32_t pos);
/* Release all of seq's blocks (tail first) and forget its progress. */
void		sched_release_blocks(llm_sched *s, llm_seq *seq);
/* Make seq's block table cover n_tokens tokens; false when the pool runs dry. */
bool		sched_ensure_blocks(llm_sched *s, llm_seq *seq, int32_t n_tokens);
/* Extend seq's verified chain of cached blocks as far as the prefix cache allows. */
void		sched_extend_cached_prefix(llm_sched *s, llm_seq *seq);
/* Whether an entry already in this step's plan fills the block waiting seq would prefill next. */
bool		sched_next_block_in_flight(const llm_sched *s, const llm_seq *seq);
/* Release seq's blocks past those holding its first n_tokens tokens. */
void		sched_trim_blocks(llm_sched *s, llm_seq *seq, int32_t n_tokens);
/* Drop the cached prefixes attached to waiting sequences other than keep (blocks stay cached). */
void		sched_release_waiting_blocks(llm_sched *s, const llm_seq *keep);
/* Register seq's newly completed full blocks in the prefix cache. */
void		sched_register_full_blocks(llm_sched *s, llm_seq *seq);

#endif
