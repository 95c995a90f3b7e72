/*
 * spec_lookup.h — draft tokens for speculative decoding by prompt lookup,
 * and how many a request proposes.
 *
 * Proposal (Saxena, "Prompt Lookup Decoding", 2023; llama.cpp's lookup
 * decoding): the last g tokens of a sequence (prompt + output so far), for
 * g from LLM_SPEC_NGRAM_MAX down to LLM_SPEC_NGRAM_MIN, are searched for in
 * the tokens before them; at the first g with a match, the tokens that
 * followed its latest earlier occurrence are the draft.  It costs nothing
 * but a scan, and pays where the output copies from the prompt (extraction,
 * quoting, reformatting) or repeats itself.
 *
 * Length: a request proposes at most its cap, which follows its acceptance:
 * a fully accepted draft raises the cap by one (up to the engine's
 * spec_tokens), a partly accepted one sets it to one more than the tokens
 * accepted; a draft rejected outright twice in a row pauses proposing for
 * 1, 2, 4, 8, then 16 decode steps (doubling with each further rejection
 * until something is accepted).  A wasted draft costs compute in its step,
 * so a request whose drafts keep failing soon decodes as if speculation
 * were off.
 *
 * Verification is the engine step's (step.c): the drafts go through
 * the forward as extra rows of their sequence and are accepted while they
 * equal what the request's own sampling draws from each row in order, so
 * the output is the one plain decoding gives, token for token.
 *
 * Plain C; the functions above allocate nothing (the state is the
 * caller's), the proposer keeps each request's state in a block of its own.
 */
#ifndef LLM_SPEC_LOOKUP_H
#define LLM_SPEC_LOOKUP_H

#include <stdint.h>

#include "spec.h"

#define LLM_SPEC_NGRAM_MAX		4
#define LLM_SPEC_NGRAM_MIN		2

typedef struct llm_spec_state
{
	int32_t		cap;			/* draft tokens the next proposal may hold */
	int32_t		pause;			/* proposals skipped before the next one */
	int32_t		misses;			/* drafts rejected outright in a row */
} llm_spec_state;

/* A request that proposes up to k tokens. */
void		llm_spec_init(llm_spec_state *st, int32_t k);

/*
 * The draft for tokens[0..n): up to min(cap, limit) tokens into out;
 * returns how many (0: no match, paused, or limit <= 0).  A paused state
 * counts the skipped proposal down.
 */
int32_t		llm_spec_propose(llm_spec_state *st, const int32_t *tokens, int32_t n, int32_t limit,
							 int32_t *out);

/* After a verification: accepted of the proposed tokens were accepted; k as at init. */
void		llm_spec_feedback(llm_spec_state *st, int32_t proposed, int32_t accepted, int32_t k);

/*
 * Prompt lookup behind the proposer interface (spec.h): proposals of at
 * most k tokens (1..LLM_SPEC_MAX_TOKENS), an llm_spec_state per request;
 * NULL: out of memory.
 */
llm_spec_proposer *llm_spec_lookup_create(int32_t k);

#endif
