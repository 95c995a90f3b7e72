/*
 * scheduler.h — iteration-level scheduling of sequences over the paged KV cache.
 *
 * Each step: running sequences first, in arrival order (a decode token, or the
 * next prefill chunk), then waiting ones are admitted FIFO with chunked
 * prefill while the token budget (max_batched_tokens) and max_running allow.
 * When a running sequence needs a block and none is free, the latest-arrived
 * running sequence is preempted by recompute: its blocks are released (full
 * ones stay in the prefix cache) and it goes back to the head of the waiting
 * queue with all its tokens (prompt + generated) to prefill again.
 * Admission attaches the longest verified cached prefix, capped so every
 * token whose logits the owner wants is recomputed (the last one, or more:
 * see n_tail_logits); a prefilling
 * sequence keeps extending it each step with blocks others have filled
 * meanwhile, and a waiting one whose next block is being filled this step by
 * another entry waits a step to share it (SGLang-style).  Full blocks are
 * registered at commit; a block identical to one already registered is
 * swapped for it, so concurrent prefills converge on one chain.
 *
 * Follows Orca (Yu et al., OSDI 2022), vLLM's v1 scheduler
 * (vllm/v1/core/sched/scheduler.py) and Sarathi-Serve's chunked prefill
 * (Agrawal et al., OSDI 2024).  Plain C, not thread-safe.
 */
#ifndef LLM_SCHEDULER_H
#define LLM_SCHEDULER_H

#include <stdint.h>
#include <stdbool.h>
#include "kv_block_pool.h"

typedef enum llm_seq_state
{
	LLM_SEQ_WAITING = 0,
	LLM_SEQ_RUNNING,
	LLM_SEQ_DETACHED			/* removed from the scheduler */
} llm_seq_state;

typedef struct llm_seq
{
	uint64_t	arrival;		/* admission order key (lower = earlier) */
	llm_seq_state state;
	int32_t    *tokens;			/* prompt followed by generated tokens */
	int32_t		n_tokens;
	int32_t		cap_tokens;
	int32_t		n_prompt;
	int32_t		n_computed;		/* leading tokens whose K/V are in the cache */
	int32_t    *blocks;			/* block table */
	int32_t		n_blocks;
	int32_t		cap_blocks;
	int32_t		n_registered;	/* leading blocks already in the prefix cache */
	uint64_t	last_hash;		/* chained hash of block n_registered - 1 (or salt) */
	uint64_t	cache_salt;		/* first block's parent hash */
	int32_t		n_cached_tokens; /* prompt tokens served from the prefix cache (first pass) */
	bool		prefix_queried; /* its prompt was counted in the prefix-cache queries */
	int32_t		n_preemptions;
	bool		admitted_once;
	/*
	 * Logits are wanted for the last max(n_tail_logits, 1) known tokens: 0
	 * (or 1) for a generating sequence, whose next token is sampled from its
	 * last row; more for a scoring one, whose rows from the end of the prompt
	 * on are scored (the owner lowers it as rows are consumed, so a
	 * recompute after preemption asks only for the rest).  Those tokens are
	 * never served from the prefix cache.
	 */
	int32_t		n_tail_logits;
	/*
	 * Register and look up this sequence's full blocks even when prefix
	 * caching is off: the sequences of one scoring request share their
	 * prompt this way, under a cache_salt private to the request.
	 */
	bool		share_prefix;
	void	   *owner;			/* the engine's request */
} llm_seq;

/* First token whose logits the owner of seq wants (n_tail_logits). */
static inline int32_t
llm_seq_first_logits(const llm_seq *seq)
{
	return seq->n_tokens - (seq->n_tail_logits > 1 ? seq->n_tail_logits : 1);
}

typedef struct llm_sched_entry
{
	llm_seq    *seq;
	int32_t		start;			/* first token index computed this step */
	int32_t		n;				/* tokens computed this step */
	bool		sample;			/* the step completes the sequence's known tokens */
	/*
	 * Logits rows of this entry: tokens logits_from .. start + n - 1 (indices
	 * into seq->tokens), start + n when none.  A generating sequence gets
	 * its last token's row when sample is set; a scoring one every wanted
	 * row this chunk computes (llm_seq_first_logits).
	 */
	int32_t		logits_from;
} llm_sched_entry;

typedef struct llm_sched_plan
{
	llm_sched_entry *entries;
	int32_t		n_entries;
	int32_t		n_tokens;
	int32_t		n_logits;		/* logits rows over all entries */
	int32_t		max_blocks;		/* largest block table among entries */
	/* sequences that can never fit the KV pool: the engine fails them */
	llm_seq   **unfittable;
	int32_t		n_unfittable;
	int32_t		n_preempted;
} llm_sched_plan;

typedef struct llm_sched llm_sched;

typedef struct llm_sched_config
{
	int32_t		max_batched_tokens;
	int32_t		max_running;
	bool		prefix_caching;
} llm_sched_config;

llm_sched  *llm_sched_create(llm_block_pool *pool, const llm_sched_config *c);
void		llm_sched_destroy(llm_sched *s);

/* Queue seq (tokens filled in, n_computed 0, no blocks) at the tail of waiting. */
int			llm_sched_add(llm_sched *s, llm_seq *seq);
/* Remove seq wherever it is and release its blocks. */
void		llm_sched_remove(llm_sched *s, llm_seq *seq);

/* Plan one step; the plan stays valid until the next call. Returns 0 or -1 (OOM). */
int			llm_sched_plan_step(llm_sched *s, llm_sched_plan **plan);
/* After the forward succeeded: advance n_computed, register full blocks. */
void		llm_sched_commit(llm_sched *s, llm_sched_plan *plan);

int32_t		llm_sched_n_waiting(const llm_sched *s);
int32_t		llm_sched_n_running(const llm_sched *s);
int64_t		llm_sched_n_preemptions(const llm_sched *s);
/* Cumulative prompt tokens looked up in the prefix cache, and those that hit. */
void		llm_sched_prefix_stats(const llm_sched *s, int64_t *queried, int64_t *hit);

/* Append a token to seq (grows the array); -1 on OOM. */
int			llm_seq_append(llm_seq *seq, int32_t token);
void		llm_seq_free(llm_seq *seq);

#endif
