/*
 * test_spec.c — speculative decoding by prompt lookup on the real model:
 * output with speculation is bit-identical to plain decoding, greedy and
 * seeded (with and without the repetition penalty), alone and in one
 * continuous batch, on the golden prompts (test/golden/greedy.tsv) and on
 * extraction prompts whose answers copy from the prompt (so drafts are
 * proposed and accepted); no KV block is left behind; the proposal and
 * its length controller on hand-made sequences; speculation is off while
 * more than speculative_max_batch sequences run; after speculative runs
 * the prefix cache holds what plain decoding leaves there.  Also the cut
 * at max_tokens inside a multi-byte character (no U+FFFD).
 *
 * Env: LLM_TEST_MODEL, LLM_GOLDEN_DIR (default test/golden).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/spec/spec_lookup.h"
#include "unit.h"

#define MAXTOK 256
#define ENGINE_TEST_MAXTOK MAXTOK
#define ENGINE_TEST_KEEP_FLUSH_IDS	/* a flush event's -1 is kept in ids */
#define ENGINE_TEST_TEXT 4096
#include "engine_test_util.h"
#define MAXCASES 96

typedef engine_result run_result;

typedef struct prompt_case
{
	int32_t    *ids;			/* token ids (golden) or NULL (text) */
	int32_t		n;
	const char *text;
} prompt_case;

static const char *extraction[] = {
	"Copy the order number and the email address from this message, nothing else: "
	"\"Hello, my order #A-44812-XQ never arrived. Please write to maria.gonzalez@example.org.\"",
	"Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.",
	"Extract the product name from: 'I bought the UltraSound Pro 3000 Wireless Headphones last week "
	"and the UltraSound Pro 3000 Wireless Headphones stopped working.'",
	"List the words of this phrase one per line: alpha beta gamma delta epsilon",
};

static llm_engine *
make_engine(const char *model, int spec_tokens, int spec_max_batch, int max_running)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model;
	c.n_threads = 2;
	c.spec_tokens = spec_tokens;
	c.spec_max_batch = spec_max_batch;
	c.max_running = max_running;
	c.kv_cache_bytes = 256 << 20;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine: %s\n", err);
	return e;
}

/* Queue case i (seed 1234 + i) with its result in *out. */
static void
submit_case(llm_engine *e, const prompt_case *pc, int i, int max_tokens, double temp, double penalty,
			run_result *out)
{
	char		err[256];
	llm_request req;

	llm_request_init(&req);
	if (pc->ids)
	{
		req.prompt_kind = LLM_PROMPT_TOKENS;
		req.tokens = pc->ids;
		req.n_tokens = pc->n;
	}
	else
	{
		req.prompt_kind = LLM_PROMPT_TEXT;
		req.prompt = pc->text;
		req.prompt_len = strlen(pc->text);
	}
	req.params.max_tokens = max_tokens;
	req.params.temperature = temp;
	req.params.top_p = temp > 0 ? 0.95 : 1.0;
	req.params.repetition_penalty = penalty;
	req.params.has_seed = true;
	req.params.seed = 1234 + (uint64_t) i;
	memset(out, 0, sizeof(*out));
	if (llm_engine_submit(e, 100 + (uint64_t) i, &req, out, err, sizeof(err)) != LLM_OK)
		printf("# submit %d: %s\n", i, err);
}

/* Run cases[0..n) all queued at once (batch) or one at a time. */
static void
run_cases(llm_engine *e, const prompt_case *cases, int n, bool batch, int max_tokens, double temp,
		  double penalty, run_result *out)
{
	for (int i = 0; i < n; i++)
	{
		submit_case(e, &cases[i], i, max_tokens, temp, penalty, &out[i]);
		if (!batch)
			while (llm_engine_has_work(e))
				if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
					break;
	}
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
}

static bool
same_result(const run_result *a, const run_result *b)
{
	return a->done && b->done && a->kind == b->kind && a->why == b->why && a->n == b->n &&
		memcmp(a->ids, b->ids, (size_t) a->n * sizeof(int32_t)) == 0 && a->len == b->len &&
		memcmp(a->text, b->text, a->len) == 0;
}

static int
load_golden(const char *path, prompt_case *cases, int cap)
{
	FILE	   *f = fopen(path, "r");
	static char line[1 << 16];
	int			n = 0;

	if (f == NULL)
		return -1;
	while (n < cap && fgets(line, sizeof(line), f))
	{
		char	   *p = line,
				   *col[3];
		int			k = 0;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		/* columns: prompt_id, user_prompt_hex, prompt_ids, ... */
		while (k < 3 && p)
		{
			col[k++] = p;
			p = strchr(p, '\t');
			if (p)
				*p++ = '\0';
		}
		if (k < 3)
			continue;
		cases[n].ids = malloc(4096 * sizeof(int32_t));
		cases[n].n = 0;
		for (char *q = col[2], *end; cases[n].n < 4096; q = end)
		{
			long		v = strtol(q, &end, 10);

			if (end == q)
				break;
			cases[n].ids[cases[n].n++] = (int32_t) v;
		}
		n++;
	}
	fclose(f);
	return n;
}

/* Plain vs speculative runs of cases: every result identical; returns drafts proposed and accepted. */
static void
compare_runs(llm_engine *plain, llm_engine *spec, const prompt_case *cases, int n, bool batch,
			 double temp, double penalty, const char *what)
{
	run_result *a = calloc((size_t) n, sizeof(run_result));
	run_result *b = calloc((size_t) n, sizeof(run_result));
	int			same = 0;
	long		drafted = 0,
				accepted = 0;
	llm_engine_stats st;

	run_cases(plain, cases, n, batch, 32, temp, penalty, a);
	run_cases(spec, cases, n, batch, 32, temp, penalty, b);
	for (int i = 0; i < n; i++)
	{
		if (same_result(&a[i], &b[i]))
			same++;
		else
			printf("# %s: case %d differs: \"%s\" vs \"%s\"\n", what, i, a[i].text, b[i].text);
		drafted += b[i].usage.draft_tokens;
		accepted += b[i].usage.accepted_tokens;
		if (a[i].usage.draft_tokens != 0)
			drafted = -1000000;	/* speculation off must propose nothing */
	}
	CHECK(same == n, "%s: %d of %d outputs identical with speculation (drafts %ld, accepted %ld)", what, same, n,
		  drafted, accepted);
	CHECK(drafted > 0 && accepted > 0 && accepted <= drafted,
		  "%s: drafts were proposed and some accepted (%ld / %ld)", what, accepted, drafted);
	llm_engine_get_stats(spec, &st);
	CHECK(st.kv_blocks_used == 0 && st.n_running == 0 && st.n_waiting == 0,
		  "%s: no KV block left behind (%d used)", what, st.kv_blocks_used);
	free(a);
	free(b);
}

static void
test_lookup(void)
{
	llm_spec_state st;
	int32_t		out[LLM_SPEC_MAX_TOKENS];
	int32_t		seq1[] = {5, 6, 7, 8, 9, 1, 2, 6, 7};	/* "6 7" seen before, then 8 9 1 2 */
	int32_t		seq2[] = {1, 2, 3, 4, 5};	/* no repeat */
	int32_t		seq3[] = {3, 4, 9, 3, 4, 10, 11, 3, 4};	/* latest earlier "3 4" is followed by 10 */
	int32_t		n;

	llm_spec_init(&st, 4);
	n = llm_spec_propose(&st, seq1, 9, 16, out);
	CHECK(n == 4 && out[0] == 8 && out[1] == 9 && out[2] == 1 && out[3] == 2,
		  "2-gram match proposes the 4 tokens after it (%d)", n);
	n = llm_spec_propose(&st, seq1, 9, 2, out);
	CHECK(n == 2, "the limit caps the draft (%d)", n);
	CHECK(llm_spec_propose(&st, seq2, 5, 16, out) == 0, "no repeated n-gram: no draft");
	n = llm_spec_propose(&st, seq3, 9, 16, out);
	CHECK(n >= 1 && out[0] == 10, "the latest earlier occurrence wins (%d, first %d)", n, n ? out[0] : -1);

	/* the controller: shrink on partial acceptance, grow on full, pause after outright misses */
	llm_spec_feedback(&st, 4, 1, 4);
	CHECK(st.cap == 2, "partly accepted (1 of 4): cap 2 (%d)", st.cap);
	llm_spec_feedback(&st, 2, 2, 4);
	CHECK(st.cap == 3, "fully accepted: cap grows to 3 (%d)", st.cap);
	llm_spec_feedback(&st, 3, 0, 4);
	CHECK(st.pause == 0 && st.cap == 1, "one outright miss: no pause yet, cap 1");
	llm_spec_feedback(&st, 1, 0, 4);
	CHECK(st.pause == 1, "two misses in a row: pause 1 (%d)", st.pause);
	CHECK(llm_spec_propose(&st, seq1, 9, 16, out) == 0 && st.pause == 0, "a paused proposal is skipped");
	llm_spec_feedback(&st, 1, 0, 4);
	llm_spec_feedback(&st, 1, 0, 4);
	CHECK(st.pause == 4, "misses double the pause (%d)", st.pause);
	for (int i = 0; i < 10; i++)
		llm_spec_feedback(&st, 1, 0, 4);
	CHECK(st.pause == 16, "the pause is at most 16 steps (%d)", st.pause);
	st.pause = 0;
	llm_spec_feedback(&st, 1, 1, 4);
	CHECK(st.misses == 0 && st.cap == 2, "an acceptance clears the misses");
}

/*
 * Speculation is off while more than spec_max_batch sequences run: no step
 * that starts with more running computes a draft; once at most that many
 * run, drafts come back.  The outputs are those of plain decoding.
 */
static void
test_off_rule(llm_engine *plain, const char *model, const prompt_case *cases, int n)
{
	llm_engine *e = make_engine(model, 8, 2, 128);
	run_result *a = calloc((size_t) n, sizeof(run_result));
	run_result *b = calloc((size_t) n, sizeof(run_result));
	long		steps_over = 0,
				drafts_over = 0,
				drafts_under = 0;
	int			same = 0;

	if (!CHECK(e != NULL, "off rule: engine with speculative_max_batch 2"))
		return;
	run_cases(plain, cases, n, true, 48, 0.0, 1.0, a);
	for (int i = 0; i < n; i++)
		submit_case(e, &cases[i], i, 48, 0.0, 1.0, &b[i]);
	while (llm_engine_has_work(e))
	{
		llm_engine_stats before,
					after;

		llm_engine_get_stats(e, &before);
		if (llm_engine_step(e, engine_collect, NULL) != LLM_OK)
			break;
		llm_engine_get_stats(e, &after);
		if (before.n_running > 2)
		{
			steps_over++;
			drafts_over += after.draft_tokens - before.draft_tokens;
		}
		else
			drafts_under += after.draft_tokens - before.draft_tokens;
	}
	for (int i = 0; i < n; i++)
		same += same_result(&a[i], &b[i]);
	CHECK(steps_over > 0 && drafts_over == 0,
		  "off rule: no drafts in the %ld steps that started with more than 2 running (%ld)", steps_over,
		  drafts_over);
	CHECK(drafts_under > 0, "off rule: drafts once at most 2 run (%ld)", drafts_under);
	CHECK(same == n, "off rule: %d of %d outputs identical to plain decoding", same, n);
	llm_engine_destroy(e);
	free(a);
	free(b);
}

/*
 * Only verified tokens enter the prefix cache: on fresh engines, after a
 * speculative run, prompts extending each case by its output find as many
 * cached tokens as after the plain run (accepted drafts' blocks registered
 * like decoded ones) and continue identically (a block holding a rejected
 * draft's KV under a verified hash would change the continuation).
 */
static void
test_cache_after_spec(const char *model, const prompt_case *cases, int n)
{
	llm_engine *plain = make_engine(model, 0, 1, 128);
	llm_engine *spec = make_engine(model, 8, 128, 128);
	run_result *a = calloc((size_t) n, sizeof(run_result));
	run_result *b = calloc((size_t) n, sizeof(run_result));
	run_result *ca = calloc((size_t) n, sizeof(run_result));
	run_result *cb = calloc((size_t) n, sizeof(run_result));
	prompt_case *cont = calloc((size_t) n, sizeof(prompt_case));
	long		cached_a = 0,
				cached_b = 0,
				drafted = 0;
	int			same = 0,
				m = 0;

	if (!CHECK(plain && spec, "cache: engines created"))
		return;
	run_cases(plain, cases, n, true, 40, 0.0, 1.0, a);
	run_cases(spec, cases, n, true, 40, 0.0, 1.0, b);
	for (int i = 0; i < n; i++)
	{
		drafted += b[i].usage.accepted_tokens;
		if (!same_result(&a[i], &b[i]) || cases[i].ids == NULL)
			continue;
		cont[m].ids = malloc((size_t) (cases[i].n + a[i].n) * sizeof(int32_t));
		memcpy(cont[m].ids, cases[i].ids, (size_t) cases[i].n * sizeof(int32_t));
		cont[m].n = cases[i].n;
		for (int k = 0; k < a[i].n; k++)
			if (a[i].ids[k] >= 0)
				cont[m].ids[cont[m].n++] = a[i].ids[k];
		m++;
	}
	run_cases(plain, cont, m, false, 8, 0.0, 1.0, ca);
	run_cases(spec, cont, m, false, 8, 0.0, 1.0, cb);
	for (int i = 0; i < m; i++)
	{
		same += same_result(&ca[i], &cb[i]);
		cached_a += ca[i].usage.cached_tokens;
		cached_b += cb[i].usage.cached_tokens;
	}
	CHECK(m == n && drafted > 0, "cache: %d of %d first runs identical, %ld drafts accepted", m, n, drafted);
	CHECK(cached_a > 0 && cached_b == cached_a,
		  "cache: continuations find the same cached prefix (%ld tokens plain, %ld speculative)", cached_a,
		  cached_b);
	CHECK(same == m, "cache: %d of %d continuations identical", same, m);
	for (int i = 0; i < m; i++)
		free(cont[i].ids);
	free(cont);
	free(a);
	free(b);
	free(ca);
	free(cb);
	llm_engine_destroy(plain);
	llm_engine_destroy(spec);
}

/*
 * A character of several tokens cut by max_tokens: the text stops before
 * it, never with U+FFFD, and is a prefix of the uncut output.
 */
static void
test_utf8_cut(llm_engine *e)
{
	const char *prompt = "Reply with exactly these three emoji and nothing else: \xF0\x9F\x8E\x89\xF0\x9F\x90\x99\xF0\x9F\x9A\x80";
	prompt_case pc = {NULL, 0, prompt};
	run_result	full,
				cut;
	int			split = -1;
	const char *fffd = "\xEF\xBF\xBD";

	run_cases(e, &pc, 1, false, 24, 0.0, 1.0, &full);
	/* a TEXT event with no text is a token that ends inside a character */
	for (int i = 0; i < full.n && split < 0; i++)
		if (full.ids[i] >= 0)
		{
			int32_t		ids[1] = {full.ids[i]};
			char	   *t;

			if (llm_engine_detokenize(e, ids, 1, &t, (char[64]) {0}, 64) >= 0)
			{
				if (strstr(t, fffd) != NULL)
					split = i + 1;
				free(t);
			}
		}
	if (!CHECK(split > 0, "the answer has a character split over tokens (token %d of %d): \"%s\"", split,
			   full.n, full.text))
		return;
	{
		llm_request req;
		char		err[256];

		llm_request_init(&req);
		req.prompt = prompt;
		req.prompt_len = strlen(prompt);
		req.params.max_tokens = split;
		memset(&cut, 0, sizeof(cut));
		llm_engine_submit(e, 7, &req, &cut, err, sizeof(err));
		while (llm_engine_has_work(e))
			llm_engine_step(e, engine_collect, NULL);
	}
	CHECK(cut.done && cut.why == LLM_FINISH_LENGTH && strstr(cut.text, fffd) == NULL &&
		  cut.len < full.len && memcmp(cut.text, full.text, cut.len) == 0,
		  "max_tokens => %d ends before the split character, no U+FFFD: \"%s\"", split, cut.text);
}

int
main(void)
{
	const char *model = getenv("LLM_TEST_MODEL");
	const char *dir = getenv("LLM_GOLDEN_DIR");
	char		path[1024];
	prompt_case *cases = calloc(MAXCASES, sizeof(prompt_case));
	prompt_case *ext = calloc(8, sizeof(prompt_case));
	int			n_golden,
				n_ext = (int) (sizeof(extraction) / sizeof(extraction[0]));
	llm_engine *plain,
			   *spec;

	test_lookup();
	if (model == NULL)
		model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	snprintf(path, sizeof(path), "%s/greedy.tsv", dir ? dir : "test/golden");
	n_golden = load_golden(path, cases, MAXCASES - 8);
	CHECK(n_golden >= 60, "loaded %d golden prompts from %s", n_golden, path);
	for (int i = 0; i < n_ext; i++)
		ext[i].text = extraction[i];
	plain = make_engine(model, 0, 1, 128);
	spec = make_engine(model, 8, 128, 128);
	if (!CHECK(plain && spec, "engines created"))
		return unit_done();

	compare_runs(plain, spec, ext, n_ext, false, 0.0, 1.0, "extraction, greedy, alone");
	compare_runs(plain, spec, ext, n_ext, true, 0.0, 1.0, "extraction, greedy, one batch");
	compare_runs(plain, spec, ext, n_ext, true, 0.8, 1.0, "extraction, seeded, one batch");
	compare_runs(plain, spec, ext, n_ext, false, 0.8, 1.05, "extraction, seeded + repetition penalty, alone");
	compare_runs(plain, spec, cases, n_golden, false, 0.0, 1.0, "golden, greedy, alone");
	compare_runs(plain, spec, cases, n_golden, true, 0.0, 1.0, "golden, greedy, one batch");
	compare_runs(plain, spec, cases, n_golden / 2, true, 0.9, 1.0, "golden, seeded, one batch");
	compare_runs(plain, spec, cases, n_golden / 2, true, 0.9, 1.2, "golden, seeded + repetition penalty, one batch");
	test_off_rule(plain, model, ext, n_ext);
	test_cache_after_spec(model, cases, 12);
	test_utf8_cut(spec);
	llm_engine_destroy(plain);
	llm_engine_destroy(spec);
	for (int i = 0; i < n_golden; i++)
		free(cases[i].ids);
	free(cases);
	free(ext);
	return unit_done();
}
