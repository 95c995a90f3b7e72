/* logits_processor.c — the processor chain and the repetition penalty (logits_processor.h). */
#include "logits_processor.h"

#include <stdlib.h>

int
llm_lp_chain_apply(const llm_lp_chain *c, float *row, int32_t n_vocab,
				   const int32_t *tokens, int32_t n_tokens, float *work,
				   const llm_logits_processor **failed)
{
	for (int32_t i = 0; i < c->n; i++)
		if (c->procs[i]->ops->apply(c->procs[i], row, n_vocab, tokens, n_tokens, work) != 0)
		{
			*failed = c->procs[i];
			return -1;
		}
	return 0;
}

int
llm_lp_chain_accept(const llm_lp_chain *c, int32_t token, const llm_logits_processor **failed)
{
	for (int32_t i = 0; i < c->n; i++)
		if (c->procs[i]->ops->accept != NULL && c->procs[i]->ops->accept(c->procs[i], token) != 0)
		{
			*failed = c->procs[i];
			return -1;
		}
	return 0;
}

bool
llm_lp_chain_complete(const llm_lp_chain *c)
{
	for (int32_t i = 0; i < c->n; i++)
		if (c->procs[i]->ops->complete != NULL && c->procs[i]->ops->complete(c->procs[i]))
			return true;
	return false;
}

void
llm_lp_chain_free(llm_lp_chain *c)
{
	for (int32_t i = 0; i < c->n; i++)
		c->procs[i]->ops->destroy(c->procs[i]);
	free(c->procs);
	c->procs = NULL;
	c->n = 0;
}

int
llm_lp_chain_add(llm_lp_chain *c, llm_logits_processor *p)
{
	llm_logits_processor **more;

	if (p == NULL)
		return -1;
	more = realloc(c->procs, (size_t) (c->n + 1) * sizeof(*more));
	if (more == NULL)
	{
		p->ops->destroy(p);
		return -1;
	}
	c->procs = more;
	c->procs[c->n++] = p;
	return 0;
}

int
llm_lp_chain_build(llm_lp_chain *c, const llm_sampling_params *p)
{
	c->procs = NULL;
	c->n = 0;
	if (p->repetition_penalty != 1.0 &&
		llm_lp_chain_add(c, llm_lp_repetition_penalty(p->repetition_penalty)) != 0)
	{
		llm_lp_chain_free(c);
		return -1;
	}
	return 0;
}

/* ---------- repetition penalty ---------- */

typedef struct rep_penalty
{
	llm_logits_processor base;
	float		penalty;
} rep_penalty;

static int
rep_penalty_apply(llm_logits_processor *lp, float *logits, int32_t n, const int32_t *tokens,
				  int32_t n_tokens, float *seen)
{
	float		pen = ((rep_penalty *) lp)->penalty;

	if (tokens == NULL || n_tokens <= 0)
		return 0;
	/* work doubles as a "seen" marker so each id is penalised once */
	for (int32_t i = 0; i < n_tokens; i++)
		if (tokens[i] >= 0 && tokens[i] < n)
			seen[tokens[i]] = 0.0f;
	for (int32_t i = 0; i < n_tokens; i++)
	{
		int32_t		t = tokens[i];

		if (t < 0 || t >= n || seen[t] != 0.0f)
			continue;
		seen[t] = 1.0f;
		logits[t] = logits[t] > 0 ? logits[t] / pen : logits[t] * pen;
	}
	return 0;
}

static void
rep_penalty_destroy(llm_logits_processor *lp)
{
	free(lp);
}

static const llm_logits_processor_ops rep_penalty_ops = {
	.name = "repetition_penalty",
	.apply = rep_penalty_apply,
	.accept = NULL,
	.destroy = rep_penalty_destroy,
};

llm_logits_processor *
llm_lp_repetition_penalty(double penalty)
{
	rep_penalty *p = malloc(sizeof(*p));

	if (p == NULL)
		return NULL;
	p->base.ops = &rep_penalty_ops;
	/* the arithmetic is float, like the row's */
	p->penalty = (float) penalty;
	return &p->base;
}
