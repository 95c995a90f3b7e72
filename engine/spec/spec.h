/*
 * spec.h — the proposer interface of speculative decoding: what the engine
 * step asks of whatever proposes draft tokens, and nothing else.  The step
 * (step.c) calls only these functions; a proposer (today prompt
 * lookup, spec_lookup.h; a draft model or n-gram tables would be others)
 * lives behind them.
 *
 * Contract:
 *   - one proposer per engine, made at engine creation, destroyed with it;
 *   - a GENERATE request gets per-request state from start() at submission
 *     (NULL is a valid state for a proposer that keeps none) and gives it
 *     back with forget() exactly once, however it ends (finished, failed,
 *     aborted, or never queued after start);
 *   - propose() is asked, before a step is planned, for at most limit
 *     tokens to follow tokens[0..n) (the request's sequence: prompt and the
 *     output accepted so far); it may return fewer, or 0;
 *   - after the step verified a draft, feedback() says how many of the
 *     proposed tokens were accepted (a prefix of the draft): a proposer
 *     that advanced state over the draft (a draft model's own KV cache)
 *     rolls back to the accepted prefix there.  A draft whose request died
 *     during the step gets no feedback (forget follows);
 *   - verification is the step's: drafts are accepted only while they equal
 *     what the request's own sampling draws, so no proposer can change a
 *     request's output, only how many rows a step computes.
 * Not thread-safe: the engine's driver thread calls everything.
 */
#ifndef LLM_SPEC_H
#define LLM_SPEC_H

#include <stddef.h>
#include <stdint.h>

/* Largest draft one proposal may hold (the engine's spec_tokens is at most this). */
#define LLM_SPEC_MAX_TOKENS		16

typedef struct llm_spec_proposer llm_spec_proposer;

typedef struct llm_spec_proposer_ops
{
	const char *name;
	/* Per-request state into *state (NULL allowed); 0, or -1 out of memory. */
	int			(*start) (llm_spec_proposer *p, void **state);
	/* Up to limit (<= LLM_SPEC_MAX_TOKENS) draft ids for tokens[0..n) into out; the count. */
	int32_t		(*propose) (llm_spec_proposer *p, void *state, const int32_t *tokens, int32_t n,
							int32_t limit, int32_t *out);
	/* accepted (0..proposed) of the last proposal's proposed tokens were accepted. */
	void		(*feedback) (llm_spec_proposer *p, void *state, int32_t proposed, int32_t accepted);
	/* The request is gone: release its state. */
	void		(*forget) (llm_spec_proposer *p, void *state);
	void		(*destroy) (llm_spec_proposer *p);
} llm_spec_proposer_ops;

/* The common head of every proposer (a proposer's own struct starts with it). */
struct llm_spec_proposer
{
	const llm_spec_proposer_ops *ops;
	int32_t		max_tokens;		/* the engine's spec_tokens: no proposal holds more */
};

static inline int
llm_spec_start(llm_spec_proposer *p, void **state)
{
	*state = NULL;
	return p->ops->start(p, state);
}

static inline int32_t
llm_spec_propose_draft(llm_spec_proposer *p, void *state, const int32_t *tokens, int32_t n,
					   int32_t limit, int32_t *out)
{
	if (limit > LLM_SPEC_MAX_TOKENS)
		limit = LLM_SPEC_MAX_TOKENS;
	return p->ops->propose(p, state, tokens, n, limit, out);
}

static inline void
llm_spec_accepted(llm_spec_proposer *p, void *state, int32_t proposed, int32_t accepted)
{
	p->ops->feedback(p, state, proposed, accepted);
}

static inline void
llm_spec_forget(llm_spec_proposer *p, void *state)
{
	p->ops->forget(p, state);
}

static inline void
llm_spec_destroy(llm_spec_proposer *p)
{
	if (p != NULL)
		p->ops->destroy(p);
}

#endif
