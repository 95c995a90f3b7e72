/*
 * test_score.c — SCORE requests on the real model (CPU backend): each
 * continuation's score equals the sum of log-softmax values computed here
 * from llm_engine_debug_prompt_logits on prompt + the continuation's
 * prefix; labels sharing a prefix ("bug" / "bugfix") with and without the
 * end-of-turn token; the prompt is computed once (prefix caching on and
 * off); identical scores alone, beside generating requests, under chunked
 * prefill and after preemption; the labels forking from the prompt's own
 * sequence (its partly filled last block copied, local group included on
 * Gemma 3) give the same scores bit for bit as recomputing that block or
 * one sequence per label, computing fewer rows; abort and errors return
 * every KV block; a continuation that does not fit the context is refused
 * at submission.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "engine/engine.h"
#include "model_path_test_util.h"
#include "unit.h"
#include "engine_test_util.h"

#define MAXC 8

typedef engine_result result;

static const char *model_path;
static const char *question =
	"Classify this ticket with one word: 'The app crashes every time I upload a photo from my gallery.'";
static const char *labels[4] = {"bug", "bugfix", "feature", "question"};

static llm_engine *
make_engine(int max_batched, int64_t kv_bytes, bool prefix, int n_ctx)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 2;
	c.max_batched_tokens = max_batched;
	c.kv_cache_bytes = kv_bytes;
	c.prefix_caching = prefix;
	c.n_ctx = n_ctx;
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

static llm_request
score_request(const char *prompt, const char *const *conts, const size_t *lens, int n, bool eot,
			  uint64_t salt)
{
	llm_request q;

	llm_request_init(&q);
	q.mode = LLM_MODE_SCORE;
	q.prompt_kind = LLM_PROMPT_TEXT;
	q.prompt = prompt;
	q.prompt_len = strlen(prompt);
	q.n_continuations = n;
	q.continuations = conts;
	q.continuation_lens = lens;
	q.continuation_eot = eot;
	q.params.cache_salt = salt;
	return q;
}

static llm_status
submit_score(llm_engine *e, uint64_t id, const char *prompt, const char *const *conts, int n, bool eot,
			 uint64_t salt, result *out, char *err, size_t errlen)
{
	size_t		lens[MAXC];
	llm_request q;

	for (int i = 0; i < n; i++)
		lens[i] = strlen(conts[i]);
	q = score_request(prompt, conts, lens, n, eot, salt);
	memset(out, 0, sizeof(*out));
	return llm_engine_submit(e, id, &q, out, err, errlen);
}

static void
submit_generate(llm_engine *e, uint64_t id, const char *prompt, int max_tokens, result *out)
{
	llm_request q;
	char		err[256];

	llm_request_init(&q);
	q.prompt = prompt;
	q.prompt_len = strlen(prompt);
	q.params.max_tokens = max_tokens;
	q.params.ignore_eos = true;
	memset(out, 0, sizeof(*out));
	if (llm_engine_submit(e, id, &q, out, err, sizeof(err)) != LLM_OK)
		printf("# submit: %s\n", err);
}

/* Prompt ids as the engine renders them, and a continuation's ids (+ <|im_end|>). */
static int32_t
prompt_ids(llm_engine *e, const char *prompt, int32_t *out, int32_t cap)
{
	llm_request q;
	int32_t    *ids;
	char		err[256];
	int64_t		n;

	llm_request_init(&q);
	q.prompt = prompt;
	q.prompt_len = strlen(prompt);
	n = llm_engine_prompt_ids(e, &q, &ids, err, sizeof(err));
	if (n < 0 || n > cap)
		return -1;
	memcpy(out, ids, (size_t) n * sizeof(int32_t));
	free(ids);
	return (int32_t) n;
}

static int32_t
cont_ids(llm_engine *e, const char *text, bool eot, int32_t *out, int32_t cap)
{
	int32_t    *ids;
	char		err[256];
	int64_t		n = llm_engine_tokenize(e, text, strlen(text), &ids, err, sizeof(err));

	if (n < 0 || n + 1 > cap)
		return -1;
	memcpy(out, ids, (size_t) n * sizeof(int32_t));
	free(ids);
	if (eot)
		out[n++] = llm_tokenizer_special_id(llm_engine_tokenizer(e), "<|im_end|>");
	return (int32_t) n;
}

/* log softmax(row)[tok], max-subtracted, in double */
static double
log_softmax_at(const float *row, int32_t n, int32_t tok)
{
	double		m = row[0],
				s = 0.0;

	for (int32_t i = 1; i < n; i++)
		if (row[i] > m)
			m = row[i];
	for (int32_t i = 0; i < n; i++)
		s += exp(row[i] - m);
	return (row[tok] - m) - log(s);
}

/*
 * The reference score of continuation ids c[0..m) after prompt p[0..np):
 * one debug prefill per token of prompt + c[0..j), its last row's
 * log-softmax at c[j]; *last gets the final token's term.
 */
static double
reference_score(llm_engine *e, const int32_t *p, int32_t np, const int32_t *c, int32_t m, double *last)
{
	int32_t		V = llm_engine_n_vocab(e);
	float	   *row = malloc((size_t) V * sizeof(float));
	int32_t		seq[1024];
	double		sum = 0.0;
	char		err[256];

	memcpy(seq, p, (size_t) np * sizeof(int32_t));
	for (int32_t j = 0; j < m; j++)
	{
		double		t;

		if (llm_engine_debug_prompt_logits(e, seq, np + j, row, err, sizeof(err)) != LLM_OK)
		{
			printf("# reference: %s\n", err);
			free(row);
			return NAN;
		}
		t = log_softmax_at(row, V, c[j]);
		sum += t;
		if (last)
			*last = t;
		seq[np + j] = c[j];
	}
	free(row);
	return sum;
}

static bool
close_rel(double a, double b)
{
	return isfinite(a) && isfinite(b) && fabs(a - b) <= 1e-9 * fabs(b);
}

static void
test_scores_and_prefixes(void)
{
	llm_engine *e = make_engine(512, 0, true, 0);
	int32_t		p[512],
				c[64];
	int32_t		np,
				m;
	double		ref[2][4],
				eot_term[4];
	result		r[2];
	char		err[512];
	llm_engine_stats st;
	int			ok = 1;

	if (!CHECK(e != NULL, "engine loads the model"))
		return;
	np = prompt_ids(e, question, p, 512);
	CHECK(np > 16, "prompt rendered with the chat template: %d tokens", np);
	for (int eot = 0; eot < 2; eot++)
		for (int k = 0; k < 4; k++)
		{
			m = cont_ids(e, labels[k], eot, c, 64);
			ref[eot][k] = reference_score(e, p, np, c, m, &eot_term[k]);
		}
	for (int eot = 0; eot < 2; eot++)
		CHECK(submit_score(e, 10 + eot, question, labels, 4, eot, 0, &r[eot], err, sizeof(err)) == LLM_OK,
			  "SCORE request with 4 labels queued (continuation_eot %s): %s", eot ? "on" : "off", err);
	run_all(e);
	for (int eot = 0; eot < 2; eot++)
	{
		CHECK(r[eot].done && r[eot].kind == LLM_EVENT_FINISHED && r[eot].why == LLM_FINISH_STOP &&
			  r[eot].n_scores == 4 && r[eot].n_text == 0,
			  "eot %d: one FINISHED event with 4 scores, no text (%s)", eot, r[eot].error);
		CHECK(r[eot].usage.prompt_tokens == np && r[eot].usage.completion_tokens == 0,
			  "eot %d: usage %d prompt tokens (the prompt's ids), 0 completion tokens", eot,
			  r[eot].usage.prompt_tokens);
		for (int k = 0; k < 4; k++)
		{
			ok &= close_rel(r[eot].scores[k], ref[eot][k]);
			printf("# eot %d %-9s score %.12f reference %.12f\n", eot, labels[k], r[eot].scores[k], ref[eot][k]);
		}
	}
	CHECK(ok, "8 scores equal the log-softmax sums from debug prompt logits (1e-9 relative)");
	CHECK(r[0].scores[1] < r[0].scores[0],
		  "without end of turn, \"bugfix\" (%g) cannot beat its own prefix \"bug\" (%g)",
		  r[0].scores[1], r[0].scores[0]);
	CHECK(fabs(r[1].scores[0] - (r[0].scores[0] + eot_term[0])) <= 1e-9 * fabs(r[1].scores[0]) &&
		  eot_term[0] < 0,
		  "with end of turn, \"bug\" pays log p(<|im_end|> | bug) = %g", eot_term[0]);
	llm_engine_get_stats(e, &st);
	CHECK(st.kv_blocks_used == 0 && !llm_engine_has_work(e), "KV blocks back to 0 (%d)", st.kv_blocks_used);
	llm_engine_destroy(e);
}

/*
 * Token rows computed for one SCORE request of 4 labels, in each sharing
 * mode, with prefix caching on and off: COPY computes the prompt once and
 * per label only its own tokens (the prompt's partly filled last block
 * copied: one block per label); RECOMPUTE (a pool with no block for the
 * copy) adds per label the prompt's tokens past its last full block;
 * PER_CONTINUATION (one sequence per label) has every label recompute the
 * prompt's last block including its last token.  The scores are
 * bit-identical in all three.
 */
static void
test_prompt_computed_once(void)
{
	static const char *const mode_name[3] = {"copy", "recompute", "per continuation"};

	for (int prefix = 1; prefix >= 0; prefix--)
	{
		result		r[3];
		long long	computed[3];

		for (int mode = 0; mode < 3; mode++)
		{
			llm_engine *e = make_engine(512, 0, prefix, 0);
			int32_t		p[512],
						c[64];
			int32_t		np,
						want = 0,
						want_rows = 0,
						want_copied = 0;
			char		err[512];
			llm_engine_stats before,
						after;

			if (e == NULL)
				return;
			np = prompt_ids(e, question, p, 512);
			for (int k = 0; k < 4; k++)
			{
				int32_t		m = cont_ids(e, labels[k], true, c, 64);

				if (mode == LLM_SCORE_SHARE_PER_CONTINUATION)
				{
					/* the first computes the whole prompt, the others from its last full block before its last token */
					want += np + m - 1 - (k > 0 ? (np - 1) / 16 * 16 : 0);
					want_rows += m;
				}
				else
				{
					want += m - 1 + (mode == LLM_SCORE_SHARE_RECOMPUTE ? np % 16 : 0);
					want_rows += m - 1;
					want_copied += mode == LLM_SCORE_SHARE_COPY && np % 16 != 0;
				}
			}
			if (mode != LLM_SCORE_SHARE_PER_CONTINUATION)
			{
				want += np;		/* the prompt's own sequence, and its last row */
				want_rows += 1;
			}
			llm_engine_debug_score_sharing(e, (llm_score_sharing) mode);
			llm_engine_get_stats(e, &before);
			submit_score(e, 1, question, labels, 4, true, 0, &r[mode], err, sizeof(err));
			run_all(e);
			llm_engine_get_stats(e, &after);
			computed[mode] = after.computed_tokens - before.computed_tokens;
			CHECK(r[mode].kind == LLM_EVENT_FINISHED && computed[mode] == want,
				  "prefix caching %s, %s: %lld token rows computed for a %d-token prompt and 4 labels (want %d)",
				  prefix ? "on" : "off", mode_name[mode], computed[mode], np, want);
			CHECK(after.logits_rows - before.logits_rows == want_rows,
				  "prefix caching %s, %s: %lld logits rows (want %d)", prefix ? "on" : "off", mode_name[mode],
				  (long long) (after.logits_rows - before.logits_rows), want_rows);
			CHECK(after.copied_blocks - before.copied_blocks == want_copied,
				  "prefix caching %s, %s: %lld KV blocks copied (want %d)", prefix ? "on" : "off",
				  mode_name[mode], (long long) (after.copied_blocks - before.copied_blocks), want_copied);
			CHECK(prefix ? (mode != LLM_SCORE_SHARE_COPY || after.prefix_queries - before.prefix_queries == np)
				  : (after.prefix_queries == before.prefix_queries &&
					 after.cached_prompt_tokens == before.cached_prompt_tokens),
				  "prefix caching %s, %s: prefix-cache statistics %s", prefix ? "on" : "off", mode_name[mode],
				  prefix ? "counted (with copy: the prompt once)" : "untouched by the request's own sharing");
			CHECK(after.kv_blocks_used == 0, "prefix caching %s, %s: KV blocks back to 0", prefix ? "on" : "off",
				  mode_name[mode]);
			llm_engine_destroy(e);
		}
		CHECK(memcmp(r[0].scores, r[1].scores, sizeof(r[0].scores)) == 0 &&
			  memcmp(r[0].scores, r[2].scores, sizeof(r[0].scores)) == 0,
			  "prefix caching %s: scores bit-identical with the block copied, recomputed, or per continuation",
			  prefix ? "on" : "off");
		CHECK(computed[0] < computed[1] && computed[0] < computed[2],
			  "prefix caching %s: copying computes fewer rows (%lld) than recomputing (%lld) or one sequence "
			  "per label (%lld)", prefix ? "on" : "off", computed[0], computed[1], computed[2]);
	}
}

/* The same request's scores, bit for bit, alone and in other company, chunking and memory. */
static void
test_invariance(void)
{
	static const char *gens[6] = {
		"Write a haiku about databases.",
		"Explain what a B-tree index is in two sentences.",
		"List three prime numbers greater than 100.",
		"Why is the sky blue?",
		"Name the planets of the solar system in order.",
		"Tell me a fun fact about octopuses.",
	};
	llm_engine *e = make_engine(512, 0, true, 0);
	result		alone,
				other,
				g[6];
	char		err[512];
	llm_engine_stats st;
	int			ok;

	if (e == NULL)
		return;
	submit_score(e, 1, question, labels, 4, true, 7, &alone, err, sizeof(err));
	run_all(e);
	/* beside six generating requests (another salt: nothing cached for it) */
	for (int i = 0; i < 6; i++)
		submit_generate(e, 100 + i, gens[i], 24, &g[i]);
	llm_engine_step(e, engine_collect, NULL);
	submit_score(e, 2, question, labels, 4, true, 8, &other, err, sizeof(err));
	run_all(e);
	ok = other.kind == LLM_EVENT_FINISHED && memcmp(alone.scores, other.scores, sizeof(alone.scores)) == 0;
	for (int i = 0; i < 6; i++)
		ok &= g[i].kind == LLM_EVENT_FINISHED && g[i].usage.completion_tokens == 24;
	CHECK(ok, "scores bit-identical alone and beside 6 generating requests (which all complete)");
	llm_engine_destroy(e);

	/* chunked prefill, prefix caching off */
	{
		int			chunks[] = {7, 33};

		for (int i = 0; i < 2; i++)
		{
			e = make_engine(chunks[i], 0, i == 1, 0);
			submit_score(e, 1, question, labels, 4, true, 0, &other, err, sizeof(err));
			run_all(e);
			CHECK(other.kind == LLM_EVENT_FINISHED &&
				  memcmp(alone.scores, other.scores, sizeof(alone.scores)) == 0,
				  "max_batched_tokens %d, prefix caching %s: scores bit-identical", chunks[i],
				  i == 1 ? "on" : "off");
			llm_engine_destroy(e);
		}
	}
	/* a tiny KV pool: preemption by recompute while scoring */
	{
		/* 30 layers * 2 * 16 tokens * 3 heads * 64 * 2 bytes = 368640 bytes per block */
		result		s2[2];

		/* chunked prefill keeps the SCORE sequences running while earlier decodes need blocks */
		e = make_engine(16, (int64_t) 368640 * 16, true, 0);
		for (int i = 0; i < 6; i++)
			submit_generate(e, 100 + i, gens[i], 40, &g[i]);
		submit_score(e, 1, question, labels, 4, true, 0, &s2[0], err, sizeof(err));
		submit_score(e, 2, question, labels, 4, true, 5, &s2[1], err, sizeof(err));
		run_all(e);
		llm_engine_get_stats(e, &st);
		ok = 1;
		for (int i = 0; i < 2; i++)
			ok &= s2[i].kind == LLM_EVENT_FINISHED && memcmp(alone.scores, s2[i].scores, sizeof(alone.scores)) == 0;
		for (int i = 0; i < 6; i++)
			ok &= g[i].kind == LLM_EVENT_FINISHED;
		CHECK(st.n_preemptions > 0 && s2[0].usage.n_preemptions + s2[1].usage.n_preemptions > 0,
			  "16-block pool: %lld preemptions, %d of them of the SCORE requests' sequences",
			  (long long) st.n_preemptions, s2[0].usage.n_preemptions + s2[1].usage.n_preemptions);
		CHECK(ok, "after preemption: scores bit-identical, every request finished");
		CHECK(st.kv_blocks_used == 0, "KV blocks back to 0 (%d)", st.kv_blocks_used);
		llm_engine_destroy(e);
	}
}

/*
 * Gemma 3's local KV group: with a prompt longer than the sliding window
 * (its early local blocks released before the labels fork), each label
 * forks with both the global and the local partly filled block copied,
 * and the scores are bit-identical to one sequence per label.  Skips
 * without the model file.
 */
static void
test_local_group(void)
{
	static const char *const conts[3] = {" yes", " no", " maybe"};
	char		path_buf[1024];
	const char *path = gemma_path(path_buf, sizeof(path_buf));
	char	   *text;
	size_t		len = 0;
	result		r[2];
	long long	computed[2],
				copied[2];
	int32_t		np = 0;

	if (access(path, R_OK) != 0)
	{
		SKIP("local KV group: %s missing", path);
		return;
	}
	text = malloc(64 * 80 + 128);
	for (int i = 0; i < 64; i++)
		len += (size_t) sprintf(text + len, "Ticket %d: the badge reader on floor %d beeps twice. ", i, i % 7);
	len += (size_t) sprintf(text + len, "Is any ticket about a printer? Answer:");
	for (int mode = 0; mode < 2; mode++)
	{
		llm_engine_config c;
		llm_engine *e;
		llm_request q;
		size_t		lens[3];
		char		err[512];
		llm_engine_stats before,
					after;

		llm_engine_config_defaults(&c);
		c.model_path = path;
		c.n_threads = 2;
		c.n_ctx = 2048;
		c.max_batched_tokens = 256;
		c.spec_tokens = 0;
		e = llm_engine_create(&c, err, sizeof(err));
		if (!CHECK(e != NULL, "gemma engine: %s", e ? "" : err))
			break;
		llm_engine_debug_score_sharing(e, mode == 0 ? LLM_SCORE_SHARE_COPY : LLM_SCORE_SHARE_PER_CONTINUATION);
		for (int k = 0; k < 3; k++)
			lens[k] = strlen(conts[k]);
		llm_request_init(&q);
		q.mode = LLM_MODE_SCORE;
		q.prompt_kind = LLM_PROMPT_RAW;
		q.prompt = text;
		q.prompt_len = len;
		q.n_continuations = 3;
		q.continuations = conts;
		q.continuation_lens = lens;
		q.continuation_eot = true;	/* two tokens each: the label's sequence has a token of its own */
		for (int extra = 0; mode == 0 && extra < 16; extra++)
		{
			/* a prompt that ends inside a block, so there is a partly filled block to copy */
			int32_t    *ids;
			int64_t		n = llm_engine_prompt_ids(e, &q, &ids, err, sizeof(err));

			free(ids);
			if (n < 0 || n % 16 != 0)
				break;
			len += (size_t) sprintf(text + len, " Hm.");
			q.prompt_len = len;
		}
		memset(&r[mode], 0, sizeof(r[mode]));
		llm_engine_get_stats(e, &before);
		CHECK(llm_engine_submit(e, 1, &q, &r[mode], err, sizeof(err)) == LLM_OK, "gemma SCORE queued: %s", err);
		run_all(e);
		llm_engine_get_stats(e, &after);
		computed[mode] = after.computed_tokens - before.computed_tokens;
		copied[mode] = after.copied_blocks - before.copied_blocks;
		np = r[mode].usage.prompt_tokens;
		CHECK(r[mode].kind == LLM_EVENT_FINISHED && after.kv_blocks_used == 0 && after.kv_local_blocks_total > 0,
			  "gemma, %s: %d-token prompt scored with a local group of %d blocks, every block back (%s)",
			  mode == 0 ? "copy" : "per continuation", np, after.kv_local_blocks_total, r[mode].error);
		llm_engine_destroy(e);
	}
	free(text);
	if (np == 0)
		return;
	CHECK(np > 512 + 16, "gemma: the prompt (%d tokens) is longer than the 512-key window", np);
	CHECK(memcmp(r[0].scores, r[1].scores, sizeof(r[0].scores)) == 0,
		  "gemma: scores bit-identical with the global and local blocks copied and per continuation "
		  "(%.9f %.9f %.9f)", r[0].scores[0], r[0].scores[1], r[0].scores[2]);
	CHECK(np % 16 != 0 && copied[0] == 6 && copied[1] == 0,
		  "gemma: %lld blocks copied (the %d-token prompt's partly filled global and local block, per label)",
		  copied[0], np);
	CHECK(computed[0] < computed[1], "gemma: %lld token rows computed with the copy, %lld per continuation",
		  computed[0], computed[1]);
}

static void
test_abort_and_errors(void)
{
	llm_engine *e = make_engine(16, 0, true, 0);
	result		r,
				gen;
	char		err[512];
	llm_engine_stats st;
	int32_t		p[512];
	int32_t		np;

	if (e == NULL)
		return;
	/* abort while waiting, and mid-way through a chunked prefill */
	submit_score(e, 1, question, labels, 4, true, 0, &r, err, sizeof(err));
	CHECK(llm_engine_abort(e, 1), "abort a waiting SCORE request");
	llm_engine_get_stats(e, &st);
	CHECK(st.kv_blocks_used == 0 && !llm_engine_has_work(e), "nothing left");
	submit_score(e, 2, question, labels, 4, true, 0, &r, err, sizeof(err));
	for (int i = 0; i < 3; i++)
		llm_engine_step(e, engine_collect, NULL);
	llm_engine_get_stats(e, &st);
	CHECK(!r.done && st.kv_blocks_used > 0 && st.n_running == 1,
		  "mid-way: no event yet, %d KV blocks held, counted as one running request", st.kv_blocks_used);
	CHECK(llm_engine_abort(e, 2) && !llm_engine_abort(e, 2), "abort it; a second abort finds nothing");
	llm_engine_get_stats(e, &st);
	CHECK(st.kv_blocks_used == 0 && st.n_running == 0 && st.n_waiting == 0 && !llm_engine_has_work(e),
		  "after abort: KV blocks used 0, no work");

	/*
	 * non-finite logits: the first row of the step (the SCORE request's,
	 * which runs ahead of the later one) is poisoned; the SCORE request
	 * fails, the generating one beside it completes
	 */
	submit_score(e, 4, question, labels, 4, true, 0, &r, err, sizeof(err));
	submit_generate(e, 3, "Hi!", 4, &gen);
	llm_engine_debug_poison_logits(e, 1);
	run_all(e);
	llm_engine_get_stats(e, &st);
	CHECK(r.kind == LLM_EVENT_ERROR && r.status == LLM_ERR_NONFINITE && st.kv_blocks_used == 0,
		  "poisoned row: the SCORE request ends with ERROR \"%s\", its blocks freed", r.error);
	CHECK(gen.kind == LLM_EVENT_FINISHED && gen.usage.completion_tokens == 4, "the generating request completes");

	/* unusable continuations */
	{
		const char *bad[2] = {"ok", "\xff\xfe"};

		CHECK(submit_score(e, 5, question, bad, 2, false, 0, &r, err, sizeof(err)) == LLM_ERR_INVALID_PARAM,
			  "invalid UTF-8 continuation refused: %s", err);
	}
	llm_engine_destroy(e);

	/* the context: prompt + continuation + end of turn must fit */
	e = make_engine(512, 0, true, 256);
	np = prompt_ids(e, question, p, 512);
	llm_engine_destroy(e);
	e = make_engine(512, 0, true, np + 2);
	{
		const char *fit[1] = {"bug"};	/* one token + <|im_end|> */
		const char *too_long[2] = {"bug", "a feature request with many words"};
		int32_t		c[64] = {0};
		int32_t		m = cont_ids(e, fit[0], true, c, 64);
		double		ref = reference_score(e, p, np, c, m, NULL);

		CHECK(submit_score(e, 6, question, too_long, 2, true, 0, &r, err, sizeof(err)) == LLM_ERR_PROMPT_TOO_LONG &&
			  strstr(err, "continuation 2") != NULL,
			  "a continuation past the context refused at submission: %s", err);
		CHECK(!llm_engine_has_work(e), "nothing queued");
		CHECK(m == 2 && submit_score(e, 7, question, fit, 1, true, 0, &r, err, sizeof(err)) == LLM_OK,
			  "prompt + %d continuation tokens = n_ctx %d accepted: %s", m, np + 2, err);
		run_all(e);
		CHECK(r.kind == LLM_EVENT_FINISHED && close_rel(r.scores[0], ref),
			  "and scored (%g, reference %g)", r.scores[0], ref);
	}
	llm_engine_destroy(e);
}

/*
 * Continuation answers: each (end, answer) pair scored exactly as the
 * request of prompt + end with that answer as its continuation, bit for
 * bit, while the ends' chats share their common prefix.
 */
static void
test_continuation_answers(const char *path, const char *chat_template, llm_score_sharing sharing)
{
	static const char *prompt =
		"Answer the question about the text with yes or no.\n\nQuestion: Is the candidate the product "
		"the text is about?\n\nText:\nMy new phone's battery is dead by noon every day.\n\nCandidate:\n";
	static const char *ends[2] = {"Phone", "Coffee maker"};
	static const char *answers[4] = {"Yes", "yes", "No", "no"};
	const char *conts[6];
	size_t		lens[6];
	llm_engine *e;
	llm_request q;
	const char *how = sharing == LLM_SCORE_SHARE_COPY ? "forked" : "per continuation";
	llm_engine_config cfg;
	result		pairs,
				ref;
	char		err[512];
	bool		same = true;
	long long	pair_rows,
				ref_rows = 0;
	llm_engine_stats before,
				after;

	llm_engine_config_defaults(&cfg);
	cfg.model_path = path;
	cfg.n_threads = 2;
	cfg.max_batched_tokens = 512;
	cfg.prefix_caching = false;
	if (chat_template != NULL)
		cfg.chat_template = chat_template;
	e = llm_engine_create(&cfg, err, sizeof(err));
	if (!CHECK(e != NULL, "%s: engine (%s)", path, e ? "" : err))
		return;
	llm_engine_debug_score_sharing(e, sharing);
	printf("# %s, %s\n", path, how);
	for (int i = 0; i < 6; i++)
	{
		conts[i] = i < 2 ? ends[i] : answers[i - 2];
		lens[i] = strlen(conts[i]);
	}
	q = score_request(prompt, conts, lens, 6, true, 0);
	q.continuation_answers = 4;
	memset(&pairs, 0, sizeof(pairs));
	llm_engine_get_stats(e, &before);
	CHECK(llm_engine_submit(e, 1, &q, &pairs, err, sizeof(err)) == LLM_OK, "pairs submitted (%s)", err);
	run_all(e);
	llm_engine_get_stats(e, &after);
	pair_rows = after.computed_tokens - before.computed_tokens;
	CHECK(pairs.kind == LLM_EVENT_FINISHED && pairs.n_scores == 8, "2 ends x 4 answers: 8 scores (%d)",
		  pairs.n_scores);
	for (int k = 0; k < 2; k++)
	{
		char		full[512];

		snprintf(full, sizeof(full), "%s%s", prompt, ends[k]);
		llm_engine_get_stats(e, &before);
		submit_score(e, 10 + k, full, answers, 4, true, 0, &ref, err, sizeof(err));
		run_all(e);
		llm_engine_get_stats(e, &after);
		ref_rows += after.computed_tokens - before.computed_tokens;
		CHECK(ref.kind == LLM_EVENT_FINISHED && ref.n_scores == 4, "end %d alone scored", k);
		for (int a = 0; a < 4; a++)
		{
			if (memcmp(&ref.scores[a], &pairs.scores[k * 4 + a], sizeof(double)) != 0)
				same = false;
			printf("# %s / %s: pair %.9g, alone %.9g\n", ends[k], answers[a], pairs.scores[k * 4 + a],
				   ref.scores[a]);
		}
	}
	CHECK(same, "%s: every pair's score bit-identical to its own request's", how);
	if (sharing == LLM_SCORE_SHARE_COPY)
	{
		CHECK(pair_rows < ref_rows, "the pairs computed fewer token rows (%lld) than the requests one by one (%lld)",
			  pair_rows, ref_rows);
		/* the common prefix once, each end's rest of its chat once, each answer's own ids (+ end of turn) but the last */
		int32_t		c0[512],
					c1[512];
		char		full[512];
		int32_t		n0,
					n1,
					lcp = 0;
		long long	want;

		snprintf(full, sizeof(full), "%s%s", prompt, ends[0]);
		n0 = prompt_ids(e, full, c0, 512);
		snprintf(full, sizeof(full), "%s%s", prompt, ends[1]);
		n1 = prompt_ids(e, full, c1, 512);
		while (lcp < n0 && lcp < n1 && c0[lcp] == c1[lcp])
			lcp++;
		want = lcp + (n0 - lcp) + (n1 - lcp);
		for (int a = 0; a < 4; a++)
			want += 2 * (cont_ids(e, answers[a], true, c0, 512) - 1);
		CHECK(pair_rows == want, "each end's chat computed once, not once per answer: %lld rows (want %lld)",
			  pair_rows, want);
		/* usage: the prefix is the prompt, every other row computed a continuation's */
		CHECK(pairs.usage.prompt_tokens == lcp && pairs.usage.continuation_tokens == want - lcp,
			  "usage: %d prompt tokens (want %d), %d continuation tokens (want %lld)",
			  pairs.usage.prompt_tokens, lcp, pairs.usage.continuation_tokens, want - lcp);
	}
	CHECK(after.kv_blocks_used == 0, "KV blocks back to 0");

	/* only for a text prompt's scoring, with at least one end, and not echoed */
	q.prompt_kind = LLM_PROMPT_RAW;
	CHECK(llm_request_validate(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "refused with a raw prompt (%s)", err);
	q.prompt_kind = LLM_PROMPT_TEXT;
	q.continuation_answers = 6;
	CHECK(llm_request_validate(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "refused with no end (%s)", err);
	q.continuation_answers = 4;
	q.continuation_echo = true;
	CHECK(llm_request_validate(&q, err, sizeof(err)) == LLM_ERR_INVALID_PARAM, "refused echoed (%s)", err);
	llm_engine_destroy(e);
}

int
main(void)
{
	model_path = getenv("LLM_TEST_MODEL");
	if (model_path == NULL)
		model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	test_scores_and_prefixes();
	test_prompt_computed_once();
	test_invariance();
	test_local_group();
	test_abort_and_errors();
	test_continuation_answers(model_path, NULL, LLM_SCORE_SHARE_COPY);
	test_continuation_answers(model_path, NULL, LLM_SCORE_SHARE_PER_CONTINUATION);
	{
		char		path_buf[1024];
		const char *gemma = gemma_path(path_buf, sizeof(path_buf));

		if (access(gemma, R_OK) == 0)
			test_continuation_answers(gemma, "gemma", LLM_SCORE_SHARE_COPY);
		else
			SKIP("continuation answers on gemma: %s missing", gemma);
	}
	return unit_done();
}
