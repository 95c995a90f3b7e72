/*
 * test_grammar_async.c — grammars compiled on the grammar store's compile
 * thread (lp_grammar.h), on the real model (CPU backend): while a grammar
 * compiles, a running request keeps producing a token at every step and the
 * request waiting for the grammar is not admitted (no prefill, counted as
 * waiting); two requests with one source share one compile; a compile that
 * fails (a source over a limit, an unsupported construct, sent straight to
 * the engine) fails that request only, with the status and message of a
 * synchronous compile, and the others finish; aborting a request while its
 * grammar compiles leaves the finished compile cached; the greedy output of
 * a request that waited for its compile equals the output with the grammar
 * already compiled; destroying the engine with compiles queued or running
 * returns.
 *
 * The waits are made deterministic by the store's gate (a test seam): while
 * held, the compile thread starts no compile, so "the grammar is still
 * compiling" holds for exactly the steps the test chooses.  Nothing here is
 * timed.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "unit.h"

#define MAXTOK 512
#define ENGINE_TEST_MAXTOK MAXTOK
#include "engine_test_util.h"

typedef engine_result result;

static const char *model_path;

/* a string of up to 1000 characters: a compile of tens of milliseconds, 1000+ states */
static const char heavy_schema[] =
	"\x03{\"type\":\"object\",\"properties\":{\"notes\":{\"type\":\"string\",\"maxLength\":1000}},"
	"\"required\":[\"notes\"]}";

static llm_request
gen_request(const char *prompt, int max_tokens, const char *grammar, size_t grammar_len)
{
	llm_request q;

	llm_request_init(&q);
	q.prompt = prompt;
	q.prompt_len = strlen(prompt);
	q.params.max_tokens = max_tokens;
	q.grammar = grammar;
	q.grammar_len = grammar_len;
	return q;
}

static bool
submit(llm_engine *e, uint64_t id, const llm_request *q, result *out)
{
	char		err[512];
	llm_status	st;

	memset(out, 0, sizeof(*out));
	st = llm_engine_submit(e, id, q, out, err, sizeof(err));
	if (st != LLM_OK)
		printf("# submit %llu: %s\n", (unsigned long long) id, err);
	return st == LLM_OK;
}

static void
run_all(llm_engine *e)
{
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
}

static bool
same_ids(const result *a, const result *b)
{
	return a->done && b->done && a->kind == b->kind && a->why == b->why && a->n == b->n &&
		memcmp(a->ids, b->ids, sizeof(int32_t) * (size_t) a->n) == 0;
}

static bool
matches(const char *src, size_t len, const result *r)
{
	llm_grammar *g = NULL;
	char		err[256];
	bool		ok;

	if (llm_grammar_compile_source(src, len, &g, err, sizeof(err)) != LLM_GRAMMAR_OK)
		return false;
	if (r->why == LLM_FINISH_STOP)
		ok = llm_grammar_matches(g, r->text, r->len);
	else
	{
		llm_grammar_state s = llm_grammar_advance(g, llm_grammar_start(g), r->text, r->len);

		ok = s != LLM_GRAMMAR_DEAD;
	}
	llm_grammar_free(g);
	return ok;
}

/* (a) a running request is never held by a compile; the waiting one is not admitted. */
static void
test_no_stall(void)
{
	llm_engine *e = engine_test_engine(model_path);
	static result a,
				b,
				b_again,
				a_alone;
	llm_request qa = gen_request("Write a long story about a lighthouse keeper and the sea.", 48, NULL, 0);
	llm_request qb = gen_request("Take notes on this call as JSON: the customer wants a refund for March.", 32,
								 heavy_schema, sizeof(heavy_schema) - 1);
	llm_grammar_store_stats gs;
	llm_engine_stats es;
	int			steps_ok = 0,
				held_steps = 12;

	if (e == NULL)
		return;
	qa.params.ignore_eos = true;
	llm_engine_debug_grammar_hold(e, true);
	if (!submit(e, 1, &qa, &a))
		goto out;
	llm_engine_step(e, engine_collect, NULL);
	CHECK(a.n == 1, "the plain request has its first token after one step (%d)", a.n);
	if (!submit(e, 2, &qb, &b))
		goto out;
	llm_engine_grammar_stats(e, &gs);
	llm_engine_get_stats(e, &es);
	CHECK(gs.compiles_pending == 1 && gs.requests_waiting == 1 && es.n_waiting == 1 && es.n_running == 1,
		  "grammar request queued: %d compile pending, %d request waiting; engine %d waiting, %d running",
		  gs.compiles_pending, gs.requests_waiting, es.n_waiting, es.n_running);
	for (int i = 0; i < held_steps; i++)
	{
		int			before = a.n;
		int64_t		rows = es.computed_tokens;

		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
		llm_engine_get_stats(e, &es);
		llm_engine_grammar_stats(e, &gs);
		steps_ok += a.n == before + 1 && b.n_events == 0 && es.computed_tokens - rows == 1 &&
			es.n_running == 1 && es.n_waiting == 1 && gs.compiles_pending == 1;
	}
	CHECK(steps_ok == held_steps, "while the grammar compiles: %d of %d steps gave the plain request one token "
		  "and computed only its row (the waiting request got no prefill and no event)", steps_ok, held_steps);
	llm_engine_debug_grammar_hold(e, false);
	run_all(e);
	llm_engine_grammar_stats(e, &gs);
	CHECK(a.done && a.why == LLM_FINISH_LENGTH && a.n == 48, "plain request: %d tokens, %s", a.n,
		  llm_finish_reason_name(a.why));
	CHECK(b.done && b.kind == LLM_EVENT_FINISHED && b.n > 0 && matches(heavy_schema, sizeof(heavy_schema) - 1, &b),
		  "grammar request after its compile: %d tokens, %s, in the language: %s", b.n,
		  llm_finish_reason_name(b.why), b.text);
	CHECK(gs.compiles_pending == 0 && gs.requests_waiting == 0 && gs.compiles == 1 && gs.index_ms > 0 &&
		  gs.compile_ms_max > 0 && gs.wait_ms_max >= gs.compile_ms_max,
		  "stats: %lld compile (%.1f ms), token index %.1f ms, longest wait %.1f ms, nothing pending",
		  (long long) gs.compiles, gs.compile_ms_max, gs.index_ms, gs.wait_ms_max);
	/* the same request with the grammar already compiled (attached at submission), and the plain one alone */
	if (submit(e, 3, &qb, &b_again))
	{
		llm_engine_grammar_stats(e, &gs);
		CHECK(gs.requests_waiting == 0 && gs.compiles_pending == 0, "a compiled grammar is attached at submission");
		run_all(e);
		CHECK(same_ids(&b, &b_again), "greedy tokens after waiting for the compile == with the grammar compiled "
			  "(%d tokens)", b.n);
	}
	if (submit(e, 4, &qa, &a_alone))
	{
		run_all(e);
		CHECK(same_ids(&a, &a_alone), "plain request beside the waiting one == alone");
	}
out:
	llm_engine_destroy(e);
}

/* (b) two requests with one source compile it once; a step with only waiting requests returns. */
static void
test_one_compile(void)
{
	llm_engine *e = engine_test_engine(model_path);
	const char	src[] = "\x02(yes|no|maybe)(, because [a-z ]{1,30}\\.)?";
	static result c,
				d;
	llm_request qc = gen_request("Is the sky blue?", 24, src, sizeof(src) - 1);
	llm_request qd = gen_request("Is water dry?", 24, src, sizeof(src) - 1);
	llm_grammar_store_stats gs;
	int			idle_ok = 0;

	if (e == NULL)
		return;
	llm_engine_debug_grammar_hold(e, true);
	if (!submit(e, 10, &qc, &c) || !submit(e, 11, &qd, &d))
		goto out;
	llm_engine_grammar_stats(e, &gs);
	CHECK(gs.compiles_pending == 1 && gs.requests_waiting == 2 && gs.hits == 1,
		  "one source, two requests: %d compile queued, %d requests waiting, %lld joined",
		  gs.compiles_pending, gs.requests_waiting, (long long) gs.hits);
	for (int i = 0; i < 3; i++)
		idle_ok += llm_engine_step(e, engine_collect, NULL) == LLM_OK && llm_engine_has_work(e) &&
			c.n_events == 0 && d.n_events == 0;
	CHECK(idle_ok == 3, "steps with only waiting requests return, nothing admitted (%d/3)", idle_ok);
	llm_engine_debug_grammar_hold(e, false);
	run_all(e);
	llm_engine_grammar_stats(e, &gs);
	CHECK(gs.compiles == 1 && gs.compile_failures == 0 && gs.n_grammars == 1,
		  "compiled once: %lld compile(s), %d grammar held", (long long) gs.compiles, gs.n_grammars);
	CHECK(c.done && c.kind == LLM_EVENT_FINISHED && matches(src, sizeof(src) - 1, &c) &&
		  d.done && d.kind == LLM_EVENT_FINISHED && matches(src, sizeof(src) - 1, &d),
		  "both finished in the language: \"%s\", \"%s\"", c.text, d.text);
out:
	llm_engine_destroy(e);
}

/* (c) a failing compile fails its request only, with a synchronous compile's status and message. */
static void
test_failure(void)
{
	llm_engine *e = engine_test_engine(model_path);
	const char	over[] = "\x02[a-z]{1001}";
	const char	bad[] = "\x02(?=x)y";
	const char	good[] = "\x02[0-9]{3}-[0-9]{4}";
	static result f_over,
				f_bad,
				ok,
				plain;
	llm_request q;
	llm_grammar_store_stats gs;
	llm_grammar *g = NULL;
	char		want_over[512],
				want_bad[512];
	llm_grammar_status s_over = llm_grammar_compile_source(over, sizeof(over) - 1, &g, want_over, sizeof(want_over));
	llm_grammar_status s_bad = llm_grammar_compile_source(bad, sizeof(bad) - 1, &g, want_bad, sizeof(want_bad));

	if (e == NULL)
		return;
	CHECK(s_over == LLM_GRAMMAR_TOO_LARGE && s_bad == LLM_GRAMMAR_INVALID, "the sources fail a synchronous compile");
	llm_engine_debug_grammar_hold(e, true);
	q = gen_request("Count to five.", 16, NULL, 0);
	submit(e, 20, &q, &plain);
	q = gen_request("Write a phone number.", 16, over, sizeof(over) - 1);
	submit(e, 21, &q, &f_over);
	q = gen_request("Make up a phone number.", 16, good, sizeof(good) - 1);
	submit(e, 22, &q, &ok);
	q = gen_request("Say y.", 16, bad, sizeof(bad) - 1);
	submit(e, 23, &q, &f_bad);
	llm_engine_step(e, engine_collect, NULL);
	CHECK(plain.n == 1 && f_over.n_events == 0 && ok.n_events == 0 && f_bad.n_events == 0,
		  "gate held: the plain request runs, the three grammar requests wait");
	llm_engine_debug_grammar_hold(e, false);
	run_all(e);
	llm_engine_grammar_stats(e, &gs);
	CHECK(f_over.done && f_over.kind == LLM_EVENT_ERROR && f_over.n_events == 1 &&
		  f_over.status == LLM_ERR_PROMPT_TOO_LONG && strcmp(f_over.error, want_over) == 0,
		  "over a limit: one ERROR event, program limit, the compile's message: %s", f_over.error);
	CHECK(f_bad.done && f_bad.kind == LLM_EVENT_ERROR && f_bad.n_events == 1 &&
		  f_bad.status == LLM_ERR_INVALID_PARAM && strcmp(f_bad.error, want_bad) == 0,
		  "unsupported construct: one ERROR event, invalid parameter, the compile's message: %s", f_bad.error);
	CHECK(ok.done && ok.kind == LLM_EVENT_FINISHED && matches(good, sizeof(good) - 1, &ok) &&
		  plain.done && plain.kind == LLM_EVENT_FINISHED,
		  "the others finish: \"%s\" and the plain request (%d tokens)", ok.text, plain.n);
	CHECK(gs.compile_failures == 2 && gs.compiles == 1 && gs.n_grammars == 1 && gs.requests_waiting == 0,
		  "stats: %lld failures, %lld compile, failed sources not kept (%d held)",
		  (long long) gs.compile_failures, (long long) gs.compiles, gs.n_grammars);
	/* a failed source is compiled again, and fails again */
	q = gen_request("Write a phone number.", 16, over, sizeof(over) - 1);
	submit(e, 24, &q, &f_over);
	run_all(e);
	llm_engine_grammar_stats(e, &gs);
	CHECK(f_over.kind == LLM_EVENT_ERROR && gs.compile_failures == 3, "a failed source fails again when asked again");
	llm_engine_destroy(e);
}

/* (d) abort while waiting: no event, the compile finishes and stays cached. */
static void
test_abort_waiting(void)
{
	llm_engine *e = engine_test_engine(model_path);
	const char	src[] = "\x02[A-Z]{2}-[0-9]{2,4}";
	static result h,
				plain,
				j;
	llm_request q;
	llm_grammar_store_stats gs;
	llm_engine_stats es;

	if (e == NULL)
		return;
	llm_engine_debug_grammar_hold(e, true);
	q = gen_request("Name a code.", 16, src, sizeof(src) - 1);
	submit(e, 30, &q, &h);
	q = gen_request("Count to ten.", 24, NULL, 0);
	submit(e, 31, &q, &plain);
	llm_engine_step(e, engine_collect, NULL);
	CHECK(llm_engine_abort(e, 30) && !llm_engine_abort(e, 30), "a waiting request aborts once");
	llm_engine_grammar_stats(e, &gs);
	llm_engine_get_stats(e, &es);
	CHECK(gs.requests_waiting == 0 && gs.compiles_pending == 1 && es.n_waiting == 0 && es.n_running == 1,
		  "after the abort: no request waiting, the compile still pending, the plain request runs");
	llm_engine_debug_grammar_hold(e, false);
	CHECK(llm_engine_debug_grammar_drain(e), "drained with the gate open");
	llm_engine_grammar_stats(e, &gs);
	CHECK(gs.compiles == 1 && gs.compiles_pending == 0 && gs.n_grammars == 1,
		  "the aborted request's compile finished and is kept (%d held)", gs.n_grammars);
	run_all(e);
	CHECK(!h.done && h.n_events == 0 && plain.done && plain.kind == LLM_EVENT_FINISHED,
		  "no event for the aborted request; the plain one finished");
	q = gen_request("Name a code.", 16, src, sizeof(src) - 1);
	if (submit(e, 32, &q, &j))
	{
		llm_engine_grammar_stats(e, &gs);
		CHECK(gs.hits == 1 && gs.compiles == 1 && gs.requests_waiting == 0,
			  "the same source again: a hit, attached at submission, no second compile");
		run_all(e);
		CHECK(j.done && j.kind == LLM_EVENT_FINISHED && matches(src, sizeof(src) - 1, &j), "\"%s\" in the language",
			  j.text);
	}
	llm_engine_destroy(e);
}

/* Destroying the engine with a compile queued behind the gate, or running, returns. */
static void
test_destroy(void)
{
	llm_engine *e = engine_test_engine(model_path);
	static result k,
				l;
	llm_request q;

	if (e == NULL)
		return;
	llm_engine_debug_grammar_hold(e, true);
	q = gen_request("Hi", 8, heavy_schema, sizeof(heavy_schema) - 1);
	submit(e, 40, &q, &k);
	llm_engine_destroy(e);
	CHECK(k.n_events == 0, "destroyed with a compile queued: returned, no event");
	e = engine_test_engine(model_path);
	if (e == NULL)
		return;
	q = gen_request("Hi", 8, heavy_schema, sizeof(heavy_schema) - 1);
	submit(e, 41, &q, &l);
	llm_engine_destroy(e);
	CHECK(l.n_events == 0, "destroyed with a compile running or queued: joined, no event");
}

int
main(void)
{
	model_path = getenv("LLM_TEST_MODEL");
	if (model_path == NULL)
	{
		printf("# LLM_TEST_MODEL not set: engine tests skipped\n");
		return unit_done();
	}
	test_no_stall();
	test_one_compile();
	test_failure();
	test_abort_waiting();
	test_destroy();
	return unit_done();
}
