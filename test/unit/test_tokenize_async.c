/*
 * test_tokenize_async.c — large prompts and llm_tokenize texts tokenized on
 * the engine's tokenizer thread, on the real model (CPU backend): while a
 * large prompt is being tokenized a running request keeps producing a
 * token at every step and the large one is not admitted (no prefill, no
 * event, counted as waiting); errors found by tokenizing (a prompt too long
 * for the context, an unknown chat role, a continuation too long, invalid
 * UTF-8 in a tokenize text) come back as one ERROR event with the status
 * and message of the inline path; a tokenize request gets one TOKENS event
 * with the inline ids, its id and its user data; requests that waited come
 * back in the order they were submitted; abort and a duplicate id work
 * while a request waits; greedy outputs and scores of requests tokenized on
 * the thread equal the inline ones bit for bit; destroying the engine with
 * jobs queued returns.
 *
 * The waits are made deterministic by the tokenizer thread's gate (a test
 * seam): while held, the thread starts no job, so "still being tokenized"
 * holds for exactly the steps the test chooses.  Nothing here is timed.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "unit.h"

#define MAXTOK 256
#define ENGINE_TEST_MAXTOK MAXTOK
#include "engine_test_util.h"
#define MAXIDS 16384

typedef engine_result result;

static const char *model_path;

static llm_request
gen_request(const char *prompt, int max_tokens)
{
	llm_request q;

	llm_request_init(&q);
	q.prompt = prompt;
	q.prompt_len = strlen(prompt);
	q.params.max_tokens = max_tokens;
	return q;
}

static llm_status
submit(llm_engine *e, uint64_t id, const llm_request *q, result *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	err[0] = '\0';
	return llm_engine_submit(e, id, q, out, err, errlen);
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

/* n bytes of plain English-like text (NUL-terminated, malloc'd) */
static char *
long_text(size_t n)
{
	static const char words[] = "the keeper walked along the shore at night and counted the ships ";
	char	   *s = malloc(n + 1);

	for (size_t i = 0; i < n; i++)
		s[i] = words[i % (sizeof(words) - 1)];
	s[n] = '\0';
	return s;
}

/*
 * (a) A large prompt never holds the driver: while the tokenizer thread is
 * held, the running request gets a token at every step, only its row is
 * computed, and the large prompt waits (no event, counted as waiting).
 * Then it is admitted and finishes with the output it has when submitted
 * with nothing else running.
 */
static void
test_no_stall(void)
{
	llm_engine *e = engine_test_engine(model_path);
	static result a,
				b,
				b_alone;
	char		err[2048];
	/* about 1,200 tokens: fits the 2048-token context */
	char	   *big = long_text(6000);
	llm_request qa = gen_request("Write a long story about a lighthouse keeper and the sea.", 40);
	llm_request qb = gen_request(big, 4);
	llm_engine_stats es;
	int			steps_ok = 0,
				held_steps = 10;
	llm_status	st;

	if (e == NULL)
		return;
	/* a prompt that fits: sent to the thread by a lower threshold (the default sends only larger ones) */
	llm_engine_debug_tokenize_inline_bytes(e, 4096);
	qa.params.ignore_eos = true;
	llm_engine_debug_tokenize_hold(e, true);
	if (submit(e, 1, &qa, &a, err, sizeof(err)) != LLM_OK)
		goto out;
	llm_engine_step(e, engine_collect, NULL);
	CHECK(a.n == 1, "the plain request has its first token after one step (%d)", a.n);
	st = submit(e, 2, &qb, &b, err, sizeof(err));
	CHECK(st == LLM_OK, "a 6,000-byte prompt is accepted at once (%s)", err);
	llm_engine_get_stats(e, &es);
	CHECK(es.n_waiting == 1 && es.n_running == 1 && llm_engine_has_work(e),
		  "while it is tokenized: %d waiting, %d running", es.n_waiting, es.n_running);
	for (int i = 0; i < held_steps; i++)
	{
		int			before = a.n;
		int64_t		rows = es.computed_tokens;

		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
		llm_engine_get_stats(e, &es);
		steps_ok += a.n == before + 1 && b.n_events == 0 && es.computed_tokens - rows == 1 &&
			es.n_running == 1 && es.n_waiting == 1;
	}
	CHECK(steps_ok == held_steps, "while the thread holds the prompt: %d of %d steps gave the plain request "
		  "one token and computed only its row (the large prompt: no prefill, no event)", steps_ok, held_steps);
	llm_engine_debug_tokenize_hold(e, false);
	CHECK(llm_engine_debug_tokenize_drain(e), "drain");
	run_all(e);
	CHECK(a.done && a.why == LLM_FINISH_LENGTH && a.n == 40, "plain request: %d tokens", a.n);
	CHECK(b.done && b.kind == LLM_EVENT_FINISHED && b.n == 4 && b.request_id == 2,
		  "large prompt after the thread: %d tokens, request id %llu", b.n, (unsigned long long) b.request_id);
	/* the same large prompt tokenized inline, alone */
	llm_engine_debug_tokenize_inline_bytes(e, (size_t) 1 << 30);
	if (submit(e, 3, &qb, &b_alone, err, sizeof(err)) == LLM_OK)
	{
		llm_engine_get_stats(e, &es);
		CHECK(es.n_running + es.n_waiting == 1, "inline: queued in the scheduler at once");
		run_all(e);
		CHECK(same_ids(&b, &b_alone), "greedy tokens after the tokenizer thread == tokenized inline (%d tokens)",
			  b.n);
	}
out:
	free(big);
	llm_engine_destroy(e);
}

/* submit q on e once inline and once on the thread; the two statuses and messages must agree */
static void
check_same_error(llm_engine *e, uint64_t id, const llm_request *q, const char *what)
{
	static result r_async,
				r_inline;
	char		err_inline[2048],
				err[2048];
	llm_status	st_inline,
				st;

	llm_engine_debug_tokenize_inline_bytes(e, (size_t) 1 << 30);
	st_inline = submit(e, id, q, &r_inline, err_inline, sizeof(err_inline));
	llm_engine_debug_tokenize_inline_bytes(e, 0);
	st = submit(e, id + 1, q, &r_async, err, sizeof(err));
	CHECK(st_inline != LLM_OK && st == LLM_OK && r_async.n_events == 0,
		  "%s: inline refused (%s), on the thread accepted at once", what, llm_status_name(st_inline));
	llm_engine_debug_tokenize_drain(e);
	llm_engine_step(e, engine_collect, NULL);
	CHECK(r_async.done && r_async.n_events == 1 && r_async.kind == LLM_EVENT_ERROR &&
		  r_async.status == st_inline && strcmp(r_async.error, err_inline) == 0 && r_async.request_id == id + 1,
		  "%s: one ERROR event, %s \"%s\" == inline %s \"%s\"", what, llm_status_name(r_async.status),
		  r_async.error, llm_status_name(st_inline), err_inline);
	CHECK(!llm_engine_has_work(e), "%s: nothing left in the engine", what);
}

/* (b) errors found by tokenizing: the status and message of the inline path, as one ERROR event */
static void
test_errors(void)
{
	llm_engine *e = engine_test_engine(model_path);
	char	   *huge = long_text(20000);
	llm_request q;
	llm_chat_message msgs[2] = {{"user", "Hello there.", 12}, {"wizard", "Abracadabra.", 12}};
	const char *conts[2] = {"yes", NULL};
	size_t		lens[2] = {3, 0};
	static result t;
	char		err[2048];
	int32_t    *ids;
	int64_t		n;
	llm_status	st;

	if (e == NULL)
		return;
	/* about 4,000 tokens: under the size bound, over the context once tokenized */
	q = gen_request(huge, 4);
	check_same_error(e, 100, &q, "prompt too long for the context");
	llm_request_init(&q);
	q.prompt_kind = LLM_PROMPT_MESSAGES;
	q.messages = msgs;
	q.n_messages = 2;
	check_same_error(e, 110, &q, "unknown chat role");
	llm_request_init(&q);
	q.mode = LLM_MODE_SCORE;
	q.prompt = "Is the sea blue?";
	q.prompt_len = strlen(q.prompt);
	conts[1] = huge + 8000;		/* 12,000 bytes, about 2,400 tokens: over the 2048-token context */
	lens[1] = strlen(conts[1]);
	q.continuations = conts;
	q.continuation_lens = lens;
	q.n_continuations = 2;
	check_same_error(e, 120, &q, "continuation too long");

	/* llm_tokenize of invalid UTF-8: inline vs on the thread */
	memcpy(huge + 17000, "\xff\xfe", 2);
	llm_engine_debug_tokenize_inline_bytes(e, LLM_TOKENIZE_INLINE_BYTES);
	{
		char		err_inline[2048];

		err_inline[0] = '\0';
		n = llm_engine_tokenize(e, huge, 20000, &ids, err_inline, sizeof(err_inline));
		memset(&t, 0, sizeof(t));
		st = llm_engine_tokenize_request(e, 130, huge, 20000, &t, &ids, &n, err, sizeof(err));
		CHECK(st == LLM_OK && ids == NULL && n == -1, "a 20,000-byte text goes to the thread");
		llm_engine_debug_tokenize_drain(e);
		llm_engine_step(e, engine_collect, NULL);
		CHECK(t.done && t.n_events == 1 && t.kind == LLM_EVENT_ERROR && t.status == LLM_ERR_INVALID_TEXT &&
			  strcmp(t.error, err_inline) == 0, "invalid UTF-8: ERROR %s \"%s\" (inline: \"%s\")",
			  llm_status_name(t.status), t.error, err_inline);
	}
	free(huge);
	llm_engine_destroy(e);
}

/*
 * (c) tokenize requests: small ones answered at once, large ones by one
 * TOKENS event (the inline ids, their id and user data); waiting requests
 * come back in submission order; abort and duplicate ids while waiting.
 */
static void
test_tokenize_requests(void)
{
	llm_engine *e = engine_test_engine(model_path);
	char	   *text = long_text(40000);
	static result t1,
				t2,
				t3,
				g4;
	int32_t    *inline_ids = NULL,
			   *ids;
	int64_t		n_inline,
				n;
	char		err[2048];
	llm_status	st;
	llm_engine_stats es;
	llm_request q4 = gen_request("Say hello.", 3);

	if (e == NULL)
		return;
	n_inline = llm_engine_tokenize(e, text, 40000, &inline_ids, err, sizeof(err));
	st = llm_engine_tokenize_request(e, 1, "short text", 10, &t1, &ids, &n, err, sizeof(err));
	CHECK(st == LLM_OK && ids != NULL && n > 0 && !llm_engine_has_work(e), "a short text is tokenized at once (%lld ids)",
		  (long long) n);
	free(ids);

	llm_engine_debug_tokenize_hold(e, true);
	engine_test_n_final = 0;
	memset(&t1, 0, sizeof(t1));
	st = llm_engine_tokenize_request(e, 11, text, 40000, &t1, &ids, &n, err, sizeof(err));
	CHECK(st == LLM_OK && ids == NULL, "a 40,000-byte text goes to the thread");
	llm_engine_debug_tokenize_inline_bytes(e, 0);
	CHECK(submit(e, 12, &q4, &g4, err, sizeof(err)) == LLM_OK, "a generate request queued behind it");
	llm_engine_debug_tokenize_inline_bytes(e, LLM_TOKENIZE_INLINE_BYTES);
	memset(&t2, 0, sizeof(t2));
	st = llm_engine_tokenize_request(e, 13, text, 30000, &t2, &ids, &n, err, sizeof(err));
	memset(&t3, 0, sizeof(t3));
	st = llm_engine_tokenize_request(e, 14, text, 20000, &t3, &ids, &n, err, sizeof(err));
	st = llm_engine_tokenize_request(e, 13, text, 20000, &t3, &ids, &n, err, sizeof(err));
	CHECK(st == LLM_ERR_DUPLICATE_ID, "a duplicate id while the first waits: %s", llm_status_name(st));
	CHECK(llm_engine_abort(e, 14), "abort a waiting tokenize request");
	llm_engine_get_stats(e, &es);
	CHECK(es.n_waiting == 3 && es.n_running == 0, "waiting: %d, running: %d", es.n_waiting, es.n_running);
	for (int i = 0; i < 3; i++)
		llm_engine_step(e, engine_collect, NULL);
	CHECK(t1.n_events == 0 && t2.n_events == 0 && g4.n_events == 0, "while held: no event");
	llm_engine_debug_tokenize_hold(e, false);
	llm_engine_debug_tokenize_drain(e);
	llm_engine_step(e, engine_collect, NULL);
	CHECK(t1.done && t1.kind == LLM_EVENT_TOKENS && t1.n_events == 1 && t1.request_id == 11 &&
		  t1.n_tok_ids == n_inline && memcmp(t1.tok_ids, inline_ids, sizeof(int32_t) * (size_t) n_inline) == 0,
		  "40,000 bytes: one TOKENS event of request 11, the %lld inline ids", (long long) n_inline);
	CHECK(t2.done && t2.kind == LLM_EVENT_TOKENS && t2.request_id == 13 && t2.n_tok_ids > 0 &&
		  t2.n_tok_ids < n_inline && t1.order == 1 && t2.order == 2,
		  "30,000 bytes: TOKENS of request 13 after request 11's (%d, %d)", t1.order, t2.order);
	CHECK(t3.n_events == 0, "the aborted request: no event");
	run_all(e);
	CHECK(g4.done && g4.kind == LLM_EVENT_FINISHED && g4.n == 3, "the generate request between them ran");
	/* destroy with a job queued and the gate held */
	llm_engine_debug_tokenize_hold(e, true);
	st = llm_engine_tokenize_request(e, 20, text, 40000, &t1, &ids, &n, err, sizeof(err));
	CHECK(st == LLM_OK, "queued before destroy");
	free(t1.tok_ids);
	free(t2.tok_ids);
	free(inline_ids);
	free(text);
	llm_engine_destroy(e);
}

/*
 * (d) outputs do not depend on where the prompt was tokenized: greedy
 * tokens of TEXT, RAW and MESSAGES prompts and a SCORE request's scores
 * are the same bits with every prompt on the thread as inline.
 */
static void
test_identical(void)
{
	llm_engine *e = engine_test_engine(model_path);
	static result inl[4],
				thr[4];
	llm_chat_message msgs[2] = {{"system", "You are terse.", 14}, {"user", "Name a colour.", 14}};
	const char *conts[2] = {"Paris", "Lyon"};
	size_t		lens[2] = {5, 4};
	llm_request q[4];
	char		err[2048];
	bool		ok = true;

	if (e == NULL)
		return;
	q[0] = gen_request("What is the capital of France?", 16);
	q[1] = gen_request("The lighthouse keeper", 16);
	q[1].prompt_kind = LLM_PROMPT_RAW;
	llm_request_init(&q[2]);
	q[2].prompt_kind = LLM_PROMPT_MESSAGES;
	q[2].messages = msgs;
	q[2].n_messages = 2;
	q[2].params.max_tokens = 16;
	llm_request_init(&q[3]);
	q[3].mode = LLM_MODE_SCORE;
	q[3].prompt = "The capital of France is";
	q[3].prompt_len = strlen(q[3].prompt);
	q[3].continuations = conts;
	q[3].continuation_lens = lens;
	q[3].n_continuations = 2;
	for (int pass = 0; pass < 2; pass++)
	{
		result	   *res = pass == 0 ? inl : thr;

		llm_engine_debug_tokenize_inline_bytes(e, pass == 0 ? (size_t) 1 << 30 : 0);
		llm_engine_debug_tokenize_hold(e, pass == 1);
		for (int i = 0; i < 4; i++)
			ok &= submit(e, (uint64_t) (100 * pass + i + 1), &q[i], &res[i], err, sizeof(err)) == LLM_OK;
		if (pass == 1)
		{
			llm_engine_stats es;

			llm_engine_step(e, engine_collect, NULL);
			llm_engine_get_stats(e, &es);
			CHECK(es.n_waiting == 4 && es.n_running == 0 && thr[0].n_events + thr[3].n_events == 0,
				  "all four wait for the thread (%d waiting, %d running)", es.n_waiting, es.n_running);
			llm_engine_debug_tokenize_hold(e, false);
		}
		run_all(e);
	}
	CHECK(ok, "all submitted");
	for (int i = 0; i < 3; i++)
		CHECK(same_ids(&inl[i], &thr[i]) && inl[i].n > 0, "request %d: greedy tokens on the thread == inline (%d tokens)",
			  i, thr[i].n);
	CHECK(inl[3].n_scores == 2 && thr[3].n_scores == 2 &&
		  memcmp(inl[3].scores, thr[3].scores, sizeof(double) * 2) == 0,
		  "scores on the thread == inline bit for bit (%.6f, %.6f)", thr[3].scores[0], thr[3].scores[1]);
	llm_engine_destroy(e);
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
	test_errors();
	test_tokenize_requests();
	test_identical();
	return unit_done();
}
