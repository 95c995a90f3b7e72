/*
 * scheduler.h — iteration-level scheduling of sequences over the paged KV cache.
 *
 * Classes and fair share.  Every sequence has a class (priority: 0 is
 * served first, like a nice value; the engine's are llm_priority) and a
 * session; the sequences of one (class, session) pair form a flow, which
 * keeps its waiting sequences in a FIFO and counts the token rows computed
 * for it (its service).  Each step is planned class by class, the first
 * class first:
 *   1. the class's running sequences, in service order (flow with the
 *      least service first, then arrival), each get their next token
 *      (decode, plus any draft tokens, below) or their next prefill chunk
 *      while the token budget (max_batched_tokens) allows;
 *   2. then the class's waiting sequences are admitted with chunked
 *      prefill: each time from the flow with the least service (counting
 *      what this step already gives it), in that flow's FIFO order, while
 *      the budget and the running slots allow.  A class after the first
 *      leaves reserved_running slots of max_running free, so a sequence of
 *      the first class finds a slot at the next step; a sequence of the
 *      first class that finds no slot, or no free block, preempts a running
 *      sequence of a later class instead of waiting.
 * While the step holds work of an earlier class, the later classes together
 * get only what is left of a cap on the step's total tokens, so a step
 * carrying an interactive request stays about as short as that request
 * alone would make it: shared_step_tokens when > 0 (0 = no cap); when -1,
 * from the step-time model the owner keeps current (llm_sched_set_step_cost:
 * a step of n tokens takes fixed + per_token * n), the total that takes at
 * most shared_step_slowdown percent longer than the earlier classes' t
 * tokens alone: t + s (t + fixed / per_token) with s = shared_step_slowdown
 * / 100 (at least t + 1, so the later classes still move; t + 3 while
 * there is no model).  A newly active flow starts at the
 * least service of its class's active flows, so coming back after a pause
 * earns no burst.  With every sequence in one class and one session the
 * plan is the FIFO one.
 *
 * Short steps: a request of the first class that arrives while a step runs
 * waits for that step (its owner reads requests between steps), so the
 * later classes together take at most a cap of tokens in every step, which
 * the owner steers towards a step time it wants: after each step of only
 * later classes' work (n tokens in ms) it calls llm_sched_note_batch_step
 * with the target, and the cap moves a quarter of the way to n * target /
 * ms, the tokens that step's own rate fits in the target (down only after
 * a step over the target: a shorter one may just have had less work;
 * measured, not the step-time model's slope: steps all about the cap's
 * size leave the slope unknown, and a wrong slope fed back through the cap
 * can shrink it step after step).  It never goes below LLM_SCHED_BATCH_STEP_FLOOR nor
 * above max_batched_tokens; a target of 0 removes it.  On two CPU cores,
 * where a step's time grows with its tokens, the batch class then runs
 * more, shorter steps at about the same tokens per second; a GPU's flat
 * step time puts the cap at max_batched_tokens, i.e. none.
 *
 * Batch prefill per step: the prefill chunks of a class after the first
 * take at most batch_prefill_tokens tokens of each step (0 = no cap),
 * whatever else is in it.  A request of the first class that arrives while
 * a step runs waits for that step; without the cap a step where batch
 * sequences join carries up to max_batched_tokens of prefill and lasts
 * several decode-only steps.  With it every batch step is about one
 * decode step plus one bounded chunk: the bulk's time per output token is
 * also the most an arriving request waits (Short steps, above, bound it in
 * milliseconds).  Waiting batch sequences still
 * join at batch_prefill_tokens per step, so the class never starves.
 *
 * Encoder inputs (whole sequences, below): the prefill caps bound the
 * chunks a prefill is cut into and the short-step cap the tokens of a
 * chunked batch step; a whole sequence is never cut, and one may already
 * fill a step alone (as its first entry), so those caps neither limit nor
 * count whole sequences: several share a step up to the class's tokens
 * (max_batched_tokens, and the shared-step cap beside interactive work),
 * each attending only to its own rows.  An interactive request then waits
 * at most one step of max_batched_tokens, as behind one long input.
 *
 * Prefill while decoding: when a class has at least prefill_cap_decodes
 * sequences decoding, its prefill chunks (of running and admitted
 * sequences) take at most prefill_cap tokens of the step (0 = no cap), so
 * steps full of decodes do not also carry long prefill chunks.
 *
 * Preemption: when a running sequence needs a block and none is free, the
 * running sequence that is worst in service order and not yet in the plan
 * (latest class, most-served flow, latest arrival) is preempted by
 * recompute: its blocks are released (full ones stay in the prefix cache)
 * and it goes back to the head of its flow's queue with all its tokens
 * (prompt + generated) to prefill again.  A sequence never preempts one of
 * an earlier class: it preempts itself.  After a preemption of its own
 * class or an earlier one, a class admits nothing more this step.
 *
 * Admission attaches the longest verified cached prefix, capped so every
 * token whose logits the owner wants is recomputed (the last one, or more:
 * see n_tail_logits); a prefilling
 * sequence keeps extending it each step with blocks others have filled
 * meanwhile, and a waiting one whose next block is being filled this step by
 * another entry waits a step to share it (SGLang-style).  Full blocks are
 * registered at commit; a block identical to one already registered is
 * swapped for it, so concurrent prefills converge on one chain.
 *
 * Forks (copy-on-write of a computed prefix): a waiting sequence whose
 * fork_from is still in the scheduler is passed over at admission; once
 * that sequence has computed the shared prefix, the owner forks the waiting
 * one from it (llm_sched_fork: full blocks shared, the partly filled last
 * block a private block the owner fills with the backend's block copy), so
 * it computes only its own tokens.  A scoring request's continuations fork
 * from its prompt's sequence this way.
 *
 * Draft tokens (speculative decoding): a decoding sequence may carry
 * n_draft proposed tokens after its last one.  The plan computes them in
 * the same entry (n_draft of its n rows, each with a logits row), with KV
 * slots allocated for them, or drops them when the budget or the pool is
 * short (a draft never preempts anyone).  Commit counts only the
 * sequence's own tokens as computed; the owner then tells
 * llm_sched_accept_drafts how many drafts it verified: those become
 * computed (and their full blocks cacheable), and blocks holding only
 * rejected drafts are released.  Nothing unverified is ever registered in
 * the prefix cache.
 *
 * The local group (a model with sliding-window layers, config local_pool):
 * their KV lives in a second pool with its own block ids, and each sequence
 * has a second block table, lblocks, indexed by the same logical block as
 * blocks.  A local block is held only while some query of the sequence may
 * still read it: block k is released once the sequence's next position p
 * has (k + 1) * block_size <= p - local_window + 1 (its entry becomes -1);
 * so a sequence holds about local_window / block_size + 2 local blocks
 * however long it grows, while blocks keeps every position (the global
 * layers read them all).  Every allocation takes one block of each pool, a
 * short pool preempts like the other.  Local full blocks are registered too
 * in their pool's prefix cache, anchored on the global block of the same
 * index (kv_block_pool.h), and evicted by their own pool's LRU.  A cached
 * prefix is attached only up to the last block boundary P whose window tail
 * (the local blocks of positions P - local_window + 1 .. P - 1) is still
 * cached, so a hit never relies on dropped local KV; the rest is recomputed.
 *
 * Follows Orca (Yu et al., OSDI 2022), vLLM's v1 scheduler
 * (vllm/v1/core/sched/scheduler.py), Sarathi-Serve's chunked prefill
 * (Agrawal et al., OSDI 2024), and for the shares start-time fair queueing
 * over token service (Goyal et al., SIGCOMM 1996; the virtual token
 * counter of Sheng et al., "Fairness in Serving Large Language Models",
 * OSDI 2024).  Plain C, not thread-safe.
 */
#ifndef LLM_SCHEDULER_H
#define LLM_SCHEDULER_H

#include <stdint.h>
#include <stdbool.h>
#include "kv_block_pool.h"

/* Number of classes; a sequence's priority is clamped into [0, LLM_SCHED_N_CLASSES). */
#define LLM_SCHED_N_CLASSES 2

struct sched_flow;

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
	/*
	 * Computed in one step or not at all (an encoder's sequence: its graph
	 * attends among the step's own rows, and its keys never reach the KV
	 * cache): admitted only with all its tokens, beside other entries
	 * while they fit the class's tokens (the prefill and short-step caps
	 * do not apply to it: "Encoder inputs"), over them (never max_batched_tokens,
	 * which the owner keeps it under) only as the first entry of the step,
	 * and passed over until then; never looked up in nor registered in
	 * the prefix cache.
	 */
	bool		whole;
	void	   *owner;			/* the engine's request */

	/* set by the owner before llm_sched_add, read-only afterwards */
	int32_t		priority;		/* class: 0 first */
	uint64_t	session;		/* fair-share key within the class */
	/*
	 * Draft tokens proposed to follow tokens[n_tokens - 1], written by the
	 * owner before llm_sched_plan_step (n_draft 0: none) and valid until
	 * llm_sched_accept_drafts; the plan may take fewer (entry n_draft).
	 */
	const int32_t *draft;
	int32_t		n_draft;

	/* scheduler-owned */
	struct sched_flow *flow;
	uint64_t	planned_in;		/* step the sequence was last planned in */
	/*
	 * The local group's block table (only with a local pool): n_blocks
	 * entries by logical block, -1 below l_lo (released behind the
	 * window), a local block id from l_lo on.
	 */
	int32_t    *lblocks;
	int32_t		cap_lblocks;
	int32_t		l_lo;

	/*
	 * Set by the owner (NULL: none): the sequence whose computed prefix
	 * this one takes with llm_sched_fork.  While fork_from is in the
	 * scheduler (waiting or running), admission passes this sequence over;
	 * the owner clears it once it has forked, or given up forking (this
	 * one then computes its prefix itself).
	 */
	const struct llm_seq *fork_from;
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
	 * Draft tokens among the n (the last ones, at positions
	 * seq->n_tokens .. seq->n_tokens + n_draft - 1: seq->draft[0..n_draft));
	 * each has a logits row.
	 */
	int32_t		n_draft;
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
	int32_t		n_first_tokens;	/* tokens of the first class's entries */
} llm_sched_plan;

typedef struct llm_sched llm_sched;

typedef struct llm_sched_config
{
	int32_t		max_batched_tokens;
	int32_t		max_running;
	bool		prefix_caching;
	/* the policies above; 0 = off for each */
	int32_t		reserved_running;	/* slots classes after the first leave free */
	int32_t		shared_step_tokens; /* step total while an earlier class has work in it; -1 = from the cost model */
	int32_t		prefill_cap;	/* prefill tokens per step of a class with many decodes */
	int32_t		prefill_cap_decodes;	/* ... from this many decoding sequences on */
	int32_t		batch_prefill_tokens;	/* prefill tokens per step of each class after the first */
	/*
	 * The local group: the pool of the sliding-window layers' blocks (same
	 * block size, not owned) and their largest window; NULL / 0: one group.
	 */
	llm_block_pool *local_pool;
	int32_t		local_window;
	int32_t		shared_step_slowdown;	/* percent batch work may add to an interactive step (-1 cap) */
} llm_sched_config;

llm_sched  *llm_sched_create(llm_block_pool *pool, const llm_sched_config *c);
void		llm_sched_destroy(llm_sched *s);

/* Queue seq (tokens filled in, n_computed 0, no blocks) at the tail of waiting. */
int			llm_sched_add(llm_sched *s, llm_seq *seq);
/* Remove seq wherever it is and release its blocks. */
void		llm_sched_remove(llm_sched *s, llm_seq *seq);

/*
 * The step-time model shared_step_tokens -1 uses: a step of n tokens takes
 * about fixed_ms + per_token_ms * n (per_token_ms <= 0: no model).
 */
void		llm_sched_set_step_cost(llm_sched *s, double fixed_ms, double per_token_ms);

/*
 * Short steps: the fewest tokens the cap allows.  A step of this many
 * tokens is several times a step of one on a CPU (about 80 against 6 ms on
 * two AVX2 cores), so the fixed cost of the extra steps stays a small part
 * of the batch classes' time even when a loaded host makes every step slow.
 */
#define LLM_SCHED_BATCH_STEP_FLOOR 32

/*
 * A step of only later classes' work computed n tokens in ms; target_ms is
 * the step time the owner wants for such steps (0: no cap).  See "Short
 * steps"; llm_sched_batch_step_tokens is the cap now (0: none).
 */
void		llm_sched_note_batch_step(llm_sched *s, int32_t n, double ms, double target_ms);
int32_t		llm_sched_batch_step_tokens(const llm_sched *s);

/* Plan one step; the plan stays valid until the next call. Returns 0 or -1 (OOM). */
int			llm_sched_plan_step(llm_sched *s, llm_sched_plan **plan);
/*
 * After the forward succeeded: advance n_computed over each entry's own
 * tokens (drafts excluded), register full blocks, count each flow's
 * service.
 */
void		llm_sched_commit(llm_sched *s, llm_sched_plan *plan);

/*
 * After commit, for an entry that carried drafts: the first n_accepted of
 * them (0 <= n_accepted <= entry n_draft) were verified, i.e. equal the
 * tokens the owner has appended since.  They count as computed (full blocks
 * registered); blocks past the computed tokens are released.  No-op for a
 * sequence no longer in the scheduler.
 */
void		llm_sched_accept_drafts(llm_sched *s, llm_seq *seq, int32_t n_accepted);

/*
 * Copy-on-write fork: waiting seq, which holds no blocks, takes the K/V of
 * the c = src->n_computed tokens of running src instead of computing them.
 * Those tokens must equal seq's first c, be prompt rows of both, come
 * before seq's first logits row (c <= llm_seq_first_logits), under the
 * same cache_salt.  The full blocks among them are shared (retained, as a
 * prefix-cache hit shares them; with the local group their local blocks
 * too, from src's first held one); the partly filled last block, if any,
 * becomes a new private block of seq (and of its local table), which the
 * owner must fill from src's block (*copy: ids per pool, -1 for none;
 * backend.h copy_blocks) before the next forward.  seq then has c tokens
 * computed and src's registered blocks as its chain; the copied block is
 * registered in the prefix cache only once full, token-verified, as any
 * block.  Its prompt is not a prefix-cache query (statistics).  false,
 * changing nothing, when a pool has no free block for the copy or the
 * conditions do not hold: seq then computes the prefix as usual.  A forked
 * sequence is an ordinary one: preemption releases its blocks and it
 * recomputes.
 */
typedef struct llm_sched_block_copy
{
	int32_t		src,
				dst;			/* global pool; -1: none (c a multiple of block_size) */
	int32_t		src_local,
				dst_local;		/* local pool; -1: none */
} llm_sched_block_copy;

bool		llm_sched_fork(llm_sched *s, llm_seq *seq, const llm_seq *src, llm_sched_block_copy *copy);

int32_t		llm_sched_n_waiting(const llm_sched *s);
int32_t		llm_sched_n_running(const llm_sched *s);
/* Sequences (waiting + running) of class cls. */
int32_t		llm_sched_n_class(const llm_sched *s, int32_t cls);
/* Token rows computed so far for the flow of (cls, session); 0 if none is live. */
int64_t		llm_sched_flow_service(const llm_sched *s, int32_t cls, uint64_t session);
int64_t		llm_sched_n_preemptions(const llm_sched *s);
/* Cumulative prompt tokens looked up in the prefix cache, and those that hit. */
void		llm_sched_prefix_stats(const llm_sched *s, int64_t *queried, int64_t *hit);

/*
 * Local blocks one sequence holds at most with the local group while a
 * step computes n of its tokens: the blocks of positions p0 - local_window
 * + 1 .. p0 + n - 1 (p0 its first query), at most ceil((local_window - 2) /
 * block_size) + 2 + ceil(n / block_size).  Summed over a step's running
 * sequences: at most max_running * (bound(0) + 1) + ceil(max_batched_tokens
 * / block_size) (the ceil of each chunk adds at most one block per
 * sequence); only waiting sequences' attached prefixes come on top.
 */
int32_t		llm_sched_local_blocks_bound(int32_t local_window, int32_t block_size, int32_t n);

/* Append a token to seq (grows the array); -1 on OOM. */
int			llm_seq_append(llm_seq *seq, int32_t token);
void		llm_seq_free(llm_seq *seq);

#endif
