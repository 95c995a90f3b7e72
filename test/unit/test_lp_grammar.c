/*
 * test_lp_grammar.c — constrained decoding in the engine (lp_grammar.h) on
 * the real model (CPU backend): tagged sources compile to the same grammar
 * as their originals; every output of a choices, regex or JSON-schema
 * request is a string of its language (greedy and sampled), it finishes
 * with stop as soon as it is complete (no end-of-generation token sampled)
 * or at an end-of-generation token in an accepting state; a cut at
 * max_tokens finishes with length and leaves a live prefix; the mask allows
 * exactly what advance_token accepts; outputs are identical alone, in a
 * batch beside unconstrained requests and under small prefill chunks, and
 * unconstrained outputs do not change beside grammars; errors (a bad
 * source or one over a limit fails its request with the compile's error;
 * stop/ignore_eos with a grammar, grammar on a SCORE request refused at
 * submission); the store compiles a source once and stays within its
 * bounds; SCORE continuation_echo.  The compile thread itself:
 * test_grammar_async.c.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/grammar/json_min.h"
#include "unit.h"

#define MAXTOK 512
#define ENGINE_TEST_MAXTOK MAXTOK
#define ENGINE_TEST_KEEP_FLUSH_IDS	/* a flush event's -1 is kept in ids */
#include "engine_test_util.h"

typedef engine_result result;

static const char *model_path;

static llm_engine *
make_engine(int max_batched)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 2;
	c.max_batched_tokens = max_batched;
	c.kv_cache_bytes = 64 << 20;
	c.n_ctx = 2048;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine: %s\n", err);
	return e;
}

static void
run_all(llm_engine *e)
{
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
}

/* A compiled grammar's tagged (normalized) source, malloc'd. */
static char *
tagged(llm_grammar *g, size_t *len)
{
	const char *src = llm_grammar_source(g, len);
	char	   *copy = malloc(*len);

	memcpy(copy, src, *len);
	return copy;
}

static llm_grammar *
compile_regex(const char *re)
{
	llm_grammar *g = NULL;
	char		err[256];

	if (llm_grammar_compile_regex(re, strlen(re), &g, err, sizeof(err)) != LLM_GRAMMAR_OK)
		printf("# regex %s: %s\n", re, err);
	return g;
}

static llm_grammar *
compile_schema(const char *schema)
{
	llm_grammar *g = NULL;
	char		err[256];

	if (llm_grammar_compile_json_schema(schema, strlen(schema), &g, err, sizeof(err)) != LLM_GRAMMAR_OK)
		printf("# schema: %s\n", err);
	return g;
}

static llm_grammar *
compile_choices(const char *const *c, int n)
{
	size_t		lens[16];
	llm_grammar *g = NULL;
	char		err[256];

	for (int i = 0; i < n; i++)
		lens[i] = strlen(c[i]);
	if (llm_grammar_compile_choices(c, lens, n, &g, err, sizeof(err)) != LLM_GRAMMAR_OK)
		printf("# choices: %s\n", err);
	return g;
}

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

static llm_status
submit(llm_engine *e, uint64_t id, const llm_request *q, result *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	return llm_engine_submit(e, id, q, out, err, errlen);
}

/* Run one request alone; false if it could not be submitted. */
static bool
run_one(llm_engine *e, uint64_t id, const llm_request *q, result *out)
{
	char		err[512];
	llm_status	st = submit(e, id, q, out, err, sizeof(err));

	if (st != LLM_OK)
	{
		printf("# submit: %s\n", err);
		return false;
	}
	run_all(e);
	return out->done;
}

static void
test_tagged_sources(void)
{
	const char *labels[] = {"feature", "bug", "bugfix", "bug"};
	llm_grammar *a = compile_choices(labels, 4);
	llm_grammar *b = compile_regex("[0-9]{3}-[a-z]+");
	llm_grammar *c = compile_schema("{ \"type\" : \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}},"
									" \"required\": [\"n\"] }");
	llm_grammar *gs[3] = {a, b, c};
	char		err[256];

	for (int i = 0; i < 3; i++)
	{
		size_t		len,
					len2;
		char	   *src = tagged(gs[i], &len);
		llm_grammar *again = NULL;

		CHECK(llm_grammar_compile_source(src, len, &again, err, sizeof(err)) == LLM_GRAMMAR_OK,
			  "tagged source %d compiles", i);
		if (again)
		{
			const char *s2 = llm_grammar_source(again, &len2);

			CHECK(len2 == len && memcmp(s2, src, len) == 0 &&
				  llm_grammar_n_states(again) == llm_grammar_n_states(gs[i]),
				  "tagged source %d: same normalized source and %d states", i, llm_grammar_n_states(gs[i]));
			llm_grammar_free(again);
		}
		free(src);
	}
	CHECK(llm_grammar_matches(a, "bug", 3) && llm_grammar_matches(a, "bugfix", 6) &&
		  !llm_grammar_matches(a, "bu", 2), "choices sharing a prefix are each complete");
	{
		llm_grammar *g = NULL;
		const char	bad_tag[] = "\x09x";
		const char	short_len[] = {(char) LLM_GRAMMAR_CHOICES, 5, 0, 0, 0, 'a'};
		const char	no_choice[] = {(char) LLM_GRAMMAR_CHOICES};

		CHECK(llm_grammar_compile_source(bad_tag, 2, &g, err, sizeof(err)) == LLM_GRAMMAR_INVALID &&
			  strstr(err, "unknown kind") != NULL, "unknown tag refused: %s", err);
		CHECK(llm_grammar_compile_source(short_len, sizeof(short_len), &g, err, sizeof(err)) ==
			  LLM_GRAMMAR_INVALID, "choice longer than the source refused: %s", err);
		CHECK(llm_grammar_compile_source(no_choice, 1, &g, err, sizeof(err)) == LLM_GRAMMAR_INVALID,
			  "choices source without a choice refused: %s", err);
		CHECK(llm_grammar_compile_source("", 0, &g, err, sizeof(err)) == LLM_GRAMMAR_INVALID,
			  "empty source refused");
	}
	llm_grammar_free(a);
	llm_grammar_free(b);
	llm_grammar_free(c);
}

/* Greedy outputs under three grammar kinds: members of the language, finished as documented. */
static void
test_outputs(llm_engine *e)
{
	const char *labels[] = {"bug", "bugfix", "feature request", "question"};
	const char *schema = "{\"type\":\"object\",\"properties\":{"
		"\"product\":{\"enum\":[\"Mobile App\",\"Billing\",\"Router RX\",\"Sync\",\"Web Portal\"]},"
		"\"priority\":{\"enum\":[\"low\",\"normal\",\"high\",\"urgent\"]},"
		"\"summary\":{\"type\":\"string\",\"maxLength\":60},"
		"\"files\":{\"type\":\"integer\",\"minimum\":0},"
		"\"refund\":{\"type\":\"boolean\"}},"
		"\"required\":[\"product\",\"priority\",\"summary\",\"files\",\"refund\"]}";
	llm_grammar *gc = compile_choices(labels, 4);
	llm_grammar *gr = compile_regex("[0-9]{3}-[0-9]{4}");
	llm_grammar *gs = compile_schema(schema);
	size_t		lc,
				lr,
				ls;
	char	   *sc = tagged(gc, &lc),
			   *sr = tagged(gr, &lr),
			   *ss = tagged(gs, &ls);
	result		r;
	llm_request q;
	llm_grammar_store_stats st;

	q = gen_request("Classify this ticket: 'The app crashes every time I upload a photo.'", 32, sc, lc);
	if (run_one(e, 1, &q, &r))
	{
		CHECK(r.kind == LLM_EVENT_FINISHED && r.why == LLM_FINISH_STOP && llm_grammar_matches(gc, r.text, r.len),
			  "choices: \"%s\" is one of the labels, finished with stop", r.text);
		CHECK(r.usage.completion_tokens == r.n, "choices: %d tokens, no end-of-generation sampled when "
			  "the label cannot continue or one was", r.n);
	}
	q = gen_request("Make up a phone number.", 32, sr, lr);
	llm_engine_grammar_stats(e, &st);
	if (run_one(e, 2, &q, &r))
	{
		int64_t		before = st.n_masked;

		llm_engine_grammar_stats(e, &st);
		CHECK(r.why == LLM_FINISH_STOP && llm_grammar_matches(gr, r.text, r.len),
			  "regex: \"%s\" matches [0-9]{3}-[0-9]{4}", r.text);
		CHECK(st.n_masked - before == r.n && r.n == r.usage.completion_tokens,
			  "regex: each of the %d sampled rows masked once", r.n);
	}
	q = gen_request("Ticket: 'Since the update to 4.4.6 the app closes by itself right after the splash "
					"screen. This blocks our whole team.' Extract the ticket's fields as JSON.", 200, ss, ls);
	if (run_one(e, 3, &q, &r))
	{
		char		err[256];
		llm_json_doc *d = llm_json_parse(r.text, r.len, 16, NULL, err, sizeof(err));

		CHECK(r.why == LLM_FINISH_STOP && llm_grammar_matches(gs, r.text, r.len),
			  "schema: %s is valid against the ticket schema", r.text);
		CHECK(d != NULL && llm_json_root(d)->type == LLM_JSON_OBJECT && llm_json_root(d)->n == 5 &&
			  strcmp(llm_json_root(d)->keys[0], "product") == 0 &&
			  strcmp(llm_json_root(d)->keys[4], "refund") == 0,
			  "schema: strict JSON, five keys in schema order");
		llm_json_free(d);
	}
	/* sampled: every output of many seeds is in the language */
	{
		int			ok = 0,
					n = 12;

		for (int i = 0; i < n; i++)
		{
			q = gen_request("Extract the ticket's fields as JSON: 'I was billed twice for March.'", 200, ss, ls);
			q.params.temperature = 1.5;
			q.params.has_seed = true;
			q.params.seed = 1000 + i;
			if (run_one(e, 10 + i, &q, &r) && r.why == LLM_FINISH_STOP && llm_grammar_matches(gs, r.text, r.len))
				ok++;
			else
				printf("# seed %d: %s (%s)\n", i, r.text, llm_finish_reason_name(r.why));
		}
		CHECK(ok == n, "sampled at temperature 1.5: %d of %d outputs valid against the schema", ok, n);
	}
	/* the cut: a language whose shortest member is longer than max_tokens */
	{
		llm_grammar *gl = compile_regex("(ab ){40}");
		size_t		ll;
		char	   *sl = tagged(gl, &ll);
		llm_grammar_state s = llm_grammar_start(gl);

		q = gen_request("Write anything.", 5, sl, ll);
		if (run_one(e, 40, &q, &r))
		{
			s = llm_grammar_advance(gl, s, r.text, r.len);
			CHECK(r.why == LLM_FINISH_LENGTH && r.usage.completion_tokens == 5 &&
				  s != LLM_GRAMMAR_DEAD && !llm_grammar_is_accepting(gl, s),
				  "max_tokens before acceptance: length after 5 tokens, \"%s\" a live incomplete prefix", r.text);
		}
		free(sl);
		llm_grammar_free(gl);
	}
	/* end of generation in an accepting state that could continue */
	{
		llm_grammar *ge = compile_regex("(Yes|No)(, because [a-z ]{1,40}\\.)?");
		size_t		le;
		char	   *se = tagged(ge, &le);

		q = gen_request("Is 17 a prime number?", 64, se, le);
		if (run_one(e, 41, &q, &r))
			CHECK(r.why == LLM_FINISH_STOP && llm_grammar_matches(ge, r.text, r.len),
				  "optional tail: \"%s\" accepted, finished with stop", r.text);
		free(se);
		llm_grammar_free(ge);
	}
	free(sc);
	free(sr);
	free(ss);
	llm_grammar_free(gc);
	llm_grammar_free(gr);
	llm_grammar_free(gs);
}

/* The engine's mask is exactly the set of ids advance_token accepts (plus EOG where accepting). */
static void
test_mask_matches_advance(llm_engine *e)
{
	llm_grammar *g = compile_regex("\\{\"a\":\"[^\"]{0,5}\"\\}");
	char		err[256];
	llm_token_index *ix = llm_token_index_from_tokenizer(llm_engine_tokenizer(e), err, sizeof(err));
	int32_t		V = llm_engine_n_vocab(e);
	uint32_t   *mask = malloc(sizeof(uint32_t) * (size_t) llm_token_index_mask_words(ix));
	llm_grammar_state s = llm_grammar_start(g);
	const char *path = "{\"a\":\"\xc3";	/* stops inside a two-byte character */
	int			bad = 0;

	s = llm_grammar_advance(g, s, path, strlen(path));
	CHECK(s != LLM_GRAMMAR_DEAD, "state inside a UTF-8 character is live");
	llm_grammar_mask_compute(ix, g, s, mask);
	for (int32_t id = 0; id < V; id++)
	{
		bool		allowed = (mask[id / 32] >> (id % 32)) & 1;
		bool		adv = llm_grammar_advance_token(ix, g, s, id) != LLM_GRAMMAR_DEAD;

		if (allowed != adv)
			bad++;
	}
	CHECK(bad == 0, "mid-character state: mask == advance_token over all %d ids", V);
	{
		char		b[8];
		int			allowed_cont = 0;

		/* only continuation bytes 0x80..0xBF can follow 0xC3 */
		for (int32_t id = 0; id < V; id++)
			if ((mask[id / 32] >> (id % 32)) & 1)
			{
				int			n = llm_token_to_bytes(llm_engine_tokenizer(e), id, b, sizeof(b));

				allowed_cont += n > 0 && ((unsigned char) b[0] & 0xC0) == 0x80;
			}
		CHECK(allowed_cont > 0, "mid-character state allows %d continuation-byte tokens", allowed_cont);
	}
	free(mask);
	llm_token_index_free(ix);
	llm_grammar_free(g);
}

/* Greedy outputs alone == in a batch with and without grammars, and under chunked prefill. */
static void
test_batch_invariance(void)
{
	const char *prompts[6] = {
		"What is the capital of Australia?",
		"Extract the fields: 'My invoice was charged twice this month, order #44812.'",
		"Write a haiku about databases.",
		"Classify: 'The router drops Wi-Fi every evening.'",
		"List three prime numbers greater than 100.",
		"Extract the fields: 'Files vanished from my Photos folder after syncing.'",
	};
	const char *schema = "{\"type\":\"object\",\"properties\":{\"product\":{\"type\":\"string\",\"maxLength\":20},"
		"\"urgent\":{\"type\":\"boolean\"}},\"required\":[\"product\",\"urgent\"]}";
	const char *labels[] = {"Mobile App", "Billing", "Router RX", "Sync"};
	llm_grammar *gs = compile_schema(schema);
	llm_grammar *gc = compile_choices(labels, 4);
	size_t		ls,
				lc;
	char	   *ss = tagged(gs, &ls),
			   *sc = tagged(gc, &lc);
	const char *gsrc[6] = {NULL, ss, NULL, sc, NULL, ss};
	size_t		glen[6] = {0, ls, 0, lc, 0, ls};
	static result alone[6],
				plain[6],
				batch[6],
				chunked[6];
	llm_engine *e = make_engine(512);
	int			same_batch = 0,
				same_chunked = 0,
				same_plain = 0;

	if (e == NULL)
		return;
	for (int i = 0; i < 6; i++)
	{
		llm_request q = gen_request(prompts[i], 48, gsrc[i], glen[i]);

		run_one(e, 100 + i, &q, &alone[i]);
	}
	/* the unconstrained ones on an engine that never saw a grammar */
	llm_engine_destroy(e);
	e = make_engine(512);
	for (int i = 0; i < 6; i += 2)
	{
		llm_request q = gen_request(prompts[i], 48, NULL, 0);

		run_one(e, 200 + i, &q, &plain[i]);
		same_plain += plain[i].len == alone[i].len && memcmp(plain[i].text, alone[i].text, alone[i].len) == 0;
	}
	CHECK(same_plain == 3, "unconstrained outputs beside grammars = on a grammar-free engine (%d/3)", same_plain);
	for (int i = 0; i < 6; i++)
	{
		llm_request q = gen_request(prompts[i], 48, gsrc[i], glen[i]);
		char		err[256];

		submit(e, 300 + i, &q, &batch[i], err, sizeof(err));
	}
	run_all(e);
	llm_engine_destroy(e);
	e = make_engine(7);
	for (int i = 0; i < 6; i++)
	{
		llm_request q = gen_request(prompts[i], 48, gsrc[i], glen[i]);
		char		err[256];

		submit(e, 400 + i, &q, &chunked[i], err, sizeof(err));
	}
	run_all(e);
	for (int i = 0; i < 6; i++)
	{
		same_batch += batch[i].done && batch[i].why == alone[i].why && batch[i].n == alone[i].n &&
			memcmp(batch[i].ids, alone[i].ids, sizeof(int32_t) * alone[i].n) == 0;
		same_chunked += chunked[i].done && chunked[i].why == alone[i].why && chunked[i].n == alone[i].n &&
			memcmp(chunked[i].ids, alone[i].ids, sizeof(int32_t) * alone[i].n) == 0;
		if (gsrc[i] == ss)
			CHECK(llm_grammar_matches(gs, batch[i].text, batch[i].len), "batch: %s valid", batch[i].text);
	}
	CHECK(same_batch == 6, "greedy tokens alone == in one batch of 6 (3 with grammars): %d/6", same_batch);
	CHECK(same_chunked == 6, "greedy tokens alone == under 7-token prefill chunks: %d/6", same_chunked);
	llm_engine_destroy(e);
	free(ss);
	free(sc);
	llm_grammar_free(gs);
	llm_grammar_free(gc);
}

static void
test_errors_and_store(llm_engine *e)
{
	char		err[512];
	result		r;
	llm_request q;
	llm_status	st;
	const char	bad_regex[] = "\x02(?=x)";
	const char	too_large[] = "\x02" "a{1001}";
	const char	ok_regex[] = "\x02[a-z]{2}";
	const char *stop[] = {"\n"};
	llm_grammar_store_stats s0,
				s1;

	/* compiled on the store's compile thread: the request fails with the compile's error */
	q = gen_request("Hi", 8, bad_regex, strlen(bad_regex));
	st = submit(e, 500, &q, &r, err, sizeof(err));
	run_all(e);
	CHECK(st == LLM_OK && r.done && r.kind == LLM_EVENT_ERROR && r.status == LLM_ERR_INVALID_PARAM &&
		  r.n == 0 && strstr(r.error, "regex") != NULL, "unsupported regex refused: %s", r.error);
	q = gen_request("Hi", 8, too_large, strlen(too_large));
	st = submit(e, 501, &q, &r, err, sizeof(err));
	run_all(e);
	CHECK(st == LLM_OK && r.done && r.kind == LLM_EVENT_ERROR && r.status == LLM_ERR_PROMPT_TOO_LONG && r.n == 0,
		  "regex over a limit refused as too large: %s", r.error);
	q = gen_request("Hi", 8, ok_regex, strlen(ok_regex));
	q.params.stop = stop;
	q.params.n_stop = 1;
	st = submit(e, 502, &q, &r, err, sizeof(err));
	CHECK(st == LLM_ERR_INVALID_PARAM && strstr(err, "stop") != NULL, "stop with a grammar refused: %s", err);
	q = gen_request("Hi", 8, ok_regex, strlen(ok_regex));
	q.params.ignore_eos = true;
	st = submit(e, 503, &q, &r, err, sizeof(err));
	CHECK(st == LLM_ERR_INVALID_PARAM && strstr(err, "ignore_eos") != NULL, "ignore_eos with a grammar refused: %s",
		  err);
	{
		const char *conts[] = {"yes"};
		size_t		lens[] = {3};

		q = gen_request("Hi", 8, ok_regex, strlen(ok_regex));
		q.mode = LLM_MODE_SCORE;
		q.n_continuations = 1;
		q.continuations = conts;
		q.continuation_lens = lens;
		st = submit(e, 504, &q, &r, err, sizeof(err));
		CHECK(st == LLM_ERR_INVALID_PARAM, "grammar on a scoring request refused: %s", err);
	}
	CHECK(!llm_engine_has_work(e), "nothing queued by refused requests");

	/* the store: the same source compiles once; more than its bound of distinct ones stay bounded */
	llm_engine_grammar_stats(e, &s0);
	for (int i = 0; i < 3; i++)
	{
		q = gen_request("Say two letters.", 4, ok_regex, strlen(ok_regex));
		submit(e, 510 + i, &q, &r, err, sizeof(err));
	}
	run_all(e);
	llm_engine_grammar_stats(e, &s1);
	CHECK(s1.compiles - s0.compiles <= 1 && s1.hits - s0.hits >= 2,
		  "three requests, one source: %lld compile(s), %lld hits", (long long) (s1.compiles - s0.compiles),
		  (long long) (s1.hits - s0.hits));
	for (int i = 0; i < LLM_GRAMMAR_STORE_MAX + 8; i++)
	{
		char		src[32];

		snprintf(src, sizeof(src), "\x02x{%d}", i + 1);
		q = gen_request("Hi", 1, src, strlen(src));
		submit(e, 600 + i, &q, &r, err, sizeof(err));
		run_all(e);
	}
	llm_engine_grammar_stats(e, &s1);
	CHECK(s1.n_grammars <= LLM_GRAMMAR_STORE_MAX && s1.evictions > 0,
		  "store bounded: %d grammars held, %lld evicted", s1.n_grammars, (long long) s1.evictions);
	CHECK(s1.index_ms > 0 && s1.n_masked > 0 && s1.mask_us_p50 > 0 && s1.mask_us_p99 >= s1.mask_us_p50,
		  "stats: token index %.1f ms, %lld rows masked, p50 %.1f us, p99 %.1f us", s1.index_ms,
		  (long long) s1.n_masked, s1.mask_us_p50, s1.mask_us_p99);
}

static void
test_echo(llm_engine *e)
{
	const char *conts[] = {"bug", "say \"hi\"", "caf\xc3\xa9"};
	size_t		lens[] = {3, 8, 5};
	llm_request q;
	result		r;

	llm_request_init(&q);
	q.mode = LLM_MODE_SCORE;
	q.prompt = "Pick one.";
	q.prompt_len = strlen(q.prompt);
	q.n_continuations = 3;
	q.continuations = conts;
	q.continuation_lens = lens;
	q.continuation_eot = true;
	q.continuation_echo = true;
	if (run_one(e, 700, &q, &r))
		CHECK(r.kind == LLM_EVENT_FINISHED && r.n_scores == 3 &&
			  strcmp(r.text, "[\"bug\",\"say \\\"hi\\\"\",\"caf\xc3\xa9\"]") == 0,
			  "continuation_echo: text %s", r.text);
	q.continuation_echo = false;
	if (run_one(e, 701, &q, &r))
		CHECK(r.len == 0 && r.n_scores == 3, "without echo: no text");
	q.mode = LLM_MODE_GENERATE;
	q.n_continuations = 0;
	q.continuation_echo = true;
	{
		char		err[256];

		CHECK(submit(e, 702, &q, &r, err, sizeof(err)) == LLM_ERR_INVALID_PARAM,
			  "continuation_echo on a generating request refused: %s", err);
	}
}

int
main(void)
{
	llm_engine *e;

	model_path = getenv("LLM_TEST_MODEL");
	test_tagged_sources();
	if (model_path == NULL)
	{
		printf("# LLM_TEST_MODEL not set: engine tests skipped\n");
		return unit_done();
	}
	e = make_engine(512);
	CHECK(e != NULL, "engine created");
	if (e == NULL)
		return unit_done();
	test_outputs(e);
	test_mask_matches_advance(e);
	test_errors_and_store(e);
	test_echo(e);
	llm_engine_destroy(e);
	test_batch_invariance();
	return unit_done();
}
