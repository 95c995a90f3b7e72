/*
 * test_spec_proposer.c — prompt lookup behind the proposer interface
 * (spec.h, llm_spec_lookup_create): driven through the interface over a
 * scripted run of proposals and feedback, it proposes exactly what the
 * lookup functions called directly on a state of their own propose, so
 * the engine step, which calls only the interface, drafts what it drafted
 * before; each request's state is its own; draft lengths outside
 * 1..LLM_SPEC_MAX_TOKENS make no proposer.  No model.
 */
#include <string.h>

#include "engine/spec/spec.h"
#include "engine/spec/spec_lookup.h"
#include "unit.h"

int
main(void)
{
	int32_t		seq[64];
	int32_t		a[LLM_SPEC_MAX_TOKENS],
				b[LLM_SPEC_MAX_TOKENS];
	llm_spec_proposer *p = llm_spec_lookup_create(4);
	llm_spec_state direct;
	void	   *s1 = NULL,
			   *s2 = NULL;
	int			same = 0,
				proposed = 0,
				steps = 0;

	/* a sequence that repeats itself with variations: matches of several lengths and misses */
	for (int i = 0; i < 64; i++)
		seq[i] = (i % 7 == 3) ? 100 + i : (i * 5) % 11;
	if (!CHECK(p != NULL && strcmp(p->ops->name, "prompt_lookup") == 0 && p->max_tokens == 4,
			   "prompt lookup proposer of 4 tokens"))
		return unit_done();
	CHECK(llm_spec_start(p, &s1) == 0 && s1 != NULL && llm_spec_start(p, &s2) == 0 && s2 != NULL && s1 != s2,
		  "two requests started: a state each");
	llm_spec_init(&direct, 4);
	/* request 1 through the interface, the same script on the direct functions */
	for (int n = 6; n <= 64; n++, steps++)
	{
		int32_t		na = llm_spec_propose_draft(p, s1, seq, n, 16, a);
		int32_t		nb = llm_spec_propose(&direct, seq, n, 16, b);
		/* accept a prefix that depends on the step, so the cap and the pauses move */
		int32_t		acc = na > 0 ? (n % 3 == 0 ? 0 : (n % 3 == 1 ? na : na / 2)) : 0;

		same += na == nb && memcmp(a, b, (size_t) na * sizeof(int32_t)) == 0;
		proposed += na > 0;
		if (na > 0)
		{
			llm_spec_accepted(p, s1, na, acc);
			llm_spec_feedback(&direct, nb, acc, 4);
		}
	}
	CHECK(same == steps && proposed > 5, "through the interface: the direct functions' drafts at every one of %d "
		  "steps (%d proposals)", steps, proposed);
	CHECK(memcmp(s1, &direct, sizeof(direct)) == 0, "and the same controller state after the feedback");
	/* request 2 never heard feedback: its state is its own */
	{
		llm_spec_state fresh;

		llm_spec_init(&fresh, 4);
		CHECK(memcmp(s2, &fresh, sizeof(fresh)) == 0, "the other request's state untouched");
	}
	llm_spec_forget(p, s1);
	llm_spec_forget(p, s2);
	llm_spec_destroy(p);
	CHECK(llm_spec_lookup_create(0) == NULL && llm_spec_lookup_create(LLM_SPEC_MAX_TOKENS + 1) == NULL,
		  "no proposer of 0 or of more than %d tokens", LLM_SPEC_MAX_TOKENS);
	return unit_done();
}
