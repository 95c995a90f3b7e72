/* spec_lookup.c — prompt-lookup drafts and their length, and the proposer over them (spec_lookup.h). */
#include "spec_lookup.h"

#include <stdlib.h>
#include <string.h>

void
llm_spec_init(llm_spec_state *st, int32_t k)
{
	st->cap = k;
	st->pause = 0;
	st->misses = 0;
}

int32_t
llm_spec_propose(llm_spec_state *st, const int32_t *tokens, int32_t n, int32_t limit, int32_t *out)
{
	int32_t		want = st->cap < limit ? st->cap : limit;

	if (want <= 0)
		return 0;
	if (st->pause > 0)
	{
		st->pause--;
		return 0;
	}
	for (int32_t g = LLM_SPEC_NGRAM_MAX; g >= LLM_SPEC_NGRAM_MIN; g--)
	{
		const int32_t *key;

		if (n < g + 1)
			continue;
		key = tokens + n - g;
		/* latest earlier occurrence: it is followed by at least one token */
		for (int32_t i = n - g - 1; i >= 0; i--)
		{
			int32_t		m = 0;

			if (tokens[i] != key[0] || memcmp(tokens + i, key, (size_t) g * sizeof(int32_t)) != 0)
				continue;
			while (m < want && i + g + m < n)
			{
				out[m] = tokens[i + g + m];
				m++;
			}
			return m;
		}
	}
	return 0;
}

void
llm_spec_feedback(llm_spec_state *st, int32_t proposed, int32_t accepted, int32_t k)
{
	if (proposed <= 0)
		return;
	if (accepted >= proposed)
		st->cap = st->cap + 1 < k ? st->cap + 1 : k;
	else
		st->cap = accepted + 1 < k ? accepted + 1 : k;
	if (accepted > 0)
	{
		st->misses = 0;
		return;
	}
	if (++st->misses >= 2)
		st->pause = 1 << (st->misses - 2 < 4 ? st->misses - 2 : 4);
}

/* ---------- the proposer (spec.h) ---------- */

static int
lookup_start(llm_spec_proposer *p, void **state)
{
	llm_spec_state *st = malloc(sizeof(llm_spec_state));

	if (st == NULL)
		return -1;
	llm_spec_init(st, p->max_tokens);
	*state = st;
	return 0;
}

static int32_t
lookup_propose(llm_spec_proposer *p, void *state, const int32_t *tokens, int32_t n, int32_t limit,
			   int32_t *out)
{
	(void) p;
	return llm_spec_propose(state, tokens, n, limit, out);
}

/* nothing to roll back: a proposal reads the sequence, it keeps no state of its own over it */
static void
lookup_feedback(llm_spec_proposer *p, void *state, int32_t proposed, int32_t accepted)
{
	llm_spec_feedback(state, proposed, accepted, p->max_tokens);
}

static void
lookup_forget(llm_spec_proposer *p, void *state)
{
	(void) p;
	free(state);
}

static void
lookup_destroy(llm_spec_proposer *p)
{
	free(p);
}

static const llm_spec_proposer_ops lookup_ops = {
	.name = "prompt_lookup",
	.start = lookup_start,
	.propose = lookup_propose,
	.feedback = lookup_feedback,
	.forget = lookup_forget,
	.destroy = lookup_destroy,
};

llm_spec_proposer *
llm_spec_lookup_create(int32_t k)
{
	llm_spec_proposer *p;

	if (k < 1 || k > LLM_SPEC_MAX_TOKENS)
		return NULL;
	p = malloc(sizeof(*p));
	if (p == NULL)
		return NULL;
	p->ops = &lookup_ops;
	p->max_tokens = k;
	return p;
}
