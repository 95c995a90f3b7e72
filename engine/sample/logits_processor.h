/*
 * logits_processor.h — the logits-processor stage of a step: per-request
 * transforms of one logits row before the sampler draws from it.
 *
 * Order of the stages a sampled row goes through (step.c):
 *   1. forward (model.c): fp32 logits rows [n_out][n_vocab];
 *   2. the engine's non-finite check on the raw row (an ERROR for that
 *      request only);
 *   3. the request's processor chain, in chain order (this header);
 *   4. the sampler (sampler.h): temperature 0 -> argmax, else temperature,
 *      top-k, softmax, top-p, min-p, draw;
 *   5. the token is accepted: appended to the sequence, then every
 *      processor's accept() is called with it, then the output stage
 *      (output.c) detokenizes it and emits events.
 * Rows of SCORE requests skip stages 3-5: they are scored on the model's own
 * distribution (logprob.h).
 *
 * Contract of a processor:
 *   - apply() gets exactly one row: the next-token logits of the request
 *     that owns the processor, [n_vocab] fp32, all finite on entry to the
 *     first processor, and changes it in place.  It may set entries to
 *     -INFINITY (a mask) and must leave at least one above -INFINITY.
 *   - tokens[0..n_tokens) are that request's tokens so far: prompt ids
 *     followed by every accepted token, in order.  A processor reads only
 *     them, its own state and work; never another request's row, tokens or
 *     state (rows of one step are processed one request at a time, in any
 *     order, so anything else would break batch invariance).
 *   - work is [n_vocab] floats of scratch shared by all processors of the
 *     engine, undefined on entry and on return.
 *   - accept() is called once per accepted token of the request, after
 *     apply() of the row it was drawn from and after the token was appended
 *     to tokens: a stateful processor (a grammar mask) advances its state
 *     there.  NULL for stateless processors.  apply() runs once per sampled
 *     position (a recompute after preemption produces no rows for tokens
 *     already accepted), so apply/accept alternate.
 *   - apply() and accept() return 0, or -1 when the request cannot go on
 *     (out of memory, a grammar with no allowed token): the engine then ends
 *     that request with an ERROR naming the processor.
 *   - complete() (NULL: never) says, after accept(), that the output is
 *     complete and no token but end-of-generation could follow (a grammar
 *     in an accepting state with no continuation): the engine then
 *     finishes the request with "stop" without sampling that token.
 *   - A processor belongs to one request; the chain frees it with the
 *     request.  Plain C, single-threaded (the engine's driver thread).
 *
 * A new processor: implement llm_logits_processor_ops and a constructor
 * here, and add it to llm_lp_chain_build() where its option is read, in
 * the position of the pipeline it needs.
 */
#ifndef LLM_LOGITS_PROCESSOR_H
#define LLM_LOGITS_PROCESSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/request.h"

typedef struct llm_logits_processor llm_logits_processor;

typedef struct llm_logits_processor_ops
{
	const char *name;
	int			(*apply) (llm_logits_processor *p, float *row, int32_t n_vocab,
						  const int32_t *tokens, int32_t n_tokens, float *work);
	int			(*accept) (llm_logits_processor *p, int32_t token);
	void		(*destroy) (llm_logits_processor *p);
	bool		(*complete) (const llm_logits_processor *p);
} llm_logits_processor_ops;

/* Implementations embed this as their first member. */
struct llm_logits_processor
{
	const llm_logits_processor_ops *ops;
};

/* A request's processors, applied in order. */
typedef struct llm_lp_chain
{
	llm_logits_processor **procs;
	int32_t		n;
} llm_lp_chain;

/*
 * Build the chain for a GENERATE request's options (validated):
 * repetition_penalty != 1 adds the repetition penalty.  0, or -1 (out of
 * memory; the chain is left empty).
 */
int			llm_lp_chain_build(llm_lp_chain *c, const llm_sampling_params *p);
/* Append p (NULL: a failed constructor) to the chain, which then owns it; 0, or -1 (p destroyed). */
int			llm_lp_chain_add(llm_lp_chain *c, llm_logits_processor *p);
void		llm_lp_chain_free(llm_lp_chain *c);

/*
 * Run every processor over row; 0, or -1 with *failed set to the processor
 * that failed.
 */
int			llm_lp_chain_apply(const llm_lp_chain *c, float *row, int32_t n_vocab,
							   const int32_t *tokens, int32_t n_tokens, float *work,
							   const llm_logits_processor **failed);
/* Tell every processor that token was accepted; 0, or -1 with *failed set. */
int			llm_lp_chain_accept(const llm_lp_chain *c, int32_t token,
								const llm_logits_processor **failed);

/* True when a processor of the chain says the output is complete (complete()). */
bool		llm_lp_chain_complete(const llm_lp_chain *c);

/*
 * Repetition penalty (CTRL, Keskar et al. 2019), over the prompt and the
 * output: each distinct id in tokens that lies in [0, n_vocab) has its logit
 * divided by penalty when positive, multiplied by it otherwise, once.
 * penalty > 0.  NULL on out of memory.
 */
llm_logits_processor *llm_lp_repetition_penalty(double penalty);

#endif
