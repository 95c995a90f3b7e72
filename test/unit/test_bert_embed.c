/*
 * test_bert_embed.c — sentence embeddings on all-MiniLM-L6-v2 (the bert
 * architecture, arch_bert.c) against sentence-transformers, and the EMBED
 * request's pooling, normalisation and truncation, on the CPU backend.
 *
 * Golden: test/golden/embed_minilm.tsv (scripts/oracle/embed_minilm.py:
 * sentence-transformers' ids and normalised vectors of 224 texts of 3 to
 * 256 tokens in 19 languages, code and symbols; some cut at 256).
 *  1. Fidelity: every golden input (sentence-transformers' ids), all
 *     submitted at once: cosine with the golden vector >= 0.9999 on the F16
 *     file; >= 0.998 (mean >= 0.999) on the Q8_0 file.
 *  2. Tokens: the engine's ids of every text as an EMBED prompt ([CLS]
 *     text [SEP], WordPiece), cut as truncate cuts them, equal
 *     sentence-transformers' ids, and the text's vector (truncate on) is its
 *     ids' vector bit for bit; texts in Devanagari or Hangul excepted, where
 *     llama.cpp's WordPiece, which the engine follows, drops marks that
 *     Hugging Face's keeps (their cosine from text is printed).
 *  3. Batch invariance: inputs embedded alone, and in another batch order
 *     with another step size, give bit-identical vectors.
 *  4. Limits: an input over the model's 256 tokens is refused (PROMPT_TOO_LONG,
 *     naming 256) unless truncate is set; a truncated token prompt equals its
 *     first 256 ids; a generating request on the embedding model is refused.
 *  5. Pooling and normalisation: MEAN without normalisation, normalised
 *     here, is bit-identical to the model default; CLS differs from MEAN.
 *  6. Decoder MEAN pooling (LLM_TEST_MODEL, SmolLM2): the mean of a prompt's
 *     hidden states equals the mean of its prefixes' LAST vectors (a
 *     causal model's row i is the last row of prefix i + 1), in double,
 *     bit for bit; chunked prefill changes nothing.
 *  7. llm.encoder_arithmetic: every check of 1 and 3 again with 'exact'
 *     (the default 'auto' runs F16 encoders on AMX-BF16 where usable);
 *     the two differ exactly when AMX-BF16 is usable.
 * Env: LLM_TEST_MODEL_MINILM (default: all-MiniLM-L6-v2.F16.gguf next to
 * LLM_TEST_MODEL, else models/), LLM_TEST_MODEL_MINILM_Q8 likewise; a
 * missing file skips its checks (make model MODEL=minilm).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "kernels/cpu/amx_bf16.h"
#include "unit.h"

#define DIM			384
#define MAXV		1024		/* the longest vector a result keeps (SmolLM2: 576) */
#define LIMIT		256
#define MAX_TEXTS	256
#define GOLDEN		"test/golden/embed_minilm.tsv"

typedef struct golden
{
	char	   *text;
	int32_t    *ids;
	int			n_ids;
	float		vec[DIM];
} golden;

static golden gold[MAX_TEXTS];
static int	n_gold;

typedef struct result
{
	bool		done;
	llm_event_kind kind;
	llm_status	status;
	float		vec[MAXV];
	int32_t		n_vec;
	int32_t		prompt_tokens;
	char		error[512];
} result;

static void
on_event(const llm_event *ev, void *arg)
{
	result	   *r = ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_TEXT)
		return;
	r->done = true;
	r->kind = ev->kind;
	r->status = ev->status;
	r->prompt_tokens = ev->usage.prompt_tokens;
	if (ev->kind == LLM_EVENT_VECTOR && ev->n_vector <= MAXV)
	{
		memcpy(r->vec, ev->vector, (size_t) ev->n_vector * sizeof(float));
		r->n_vec = ev->n_vector;
	}
	if (ev->kind == LLM_EVENT_ERROR)
		snprintf(r->error, sizeof(r->error), "%s", ev->text);
}

/* \t \n \\ undone in place. */
static void
unescape(char *s)
{
	char	   *o = s;

	for (; *s; s++)
	{
		if (*s == '\\' && s[1])
		{
			s++;
			*o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s;
		}
		else
			*o++ = *s;
	}
	*o = '\0';
}

static int
load_golden(void)
{
	FILE	   *f = fopen(GOLDEN, "r");
	char	   *line = NULL;
	size_t		cap = 0;

	if (f == NULL)
		return -1;
	while (getline(&line, &cap, f) > 0 && n_gold < MAX_TEXTS)
	{
		char	   *text,
				   *ids,
				   *vec,
				   *p;
		golden	   *g = &gold[n_gold];
		int			k = 0;

		if (line[0] == '#')
			continue;
		if ((text = strchr(line, '\t')) == NULL || (ids = strchr(text + 1, '\t')) == NULL ||
			(vec = strchr(ids + 1, '\t')) == NULL)
			break;
		*text++ = *ids++ = *vec++ = '\0';
		unescape(text);
		g->text = strdup(text);
		g->ids = malloc((strlen(ids) / 2 + 2) * sizeof(int32_t));
		for (p = ids; *p;)
		{
			g->ids[g->n_ids++] = (int32_t) strtol(p, &p, 10);
			if (*p == ',')
				p++;
		}
		for (p = vec; k < DIM; k++)
			g->vec[k] = strtof(p, &p);
		n_gold++;
	}
	free(line);
	fclose(f);
	return n_gold;
}

/* The file name next to LLM_TEST_MODEL, or models/name; env overrides. */
static const char *
model_file(const char *env, const char *name, char *buf, size_t cap)
{
	const char *p = getenv(env);
	const char *smol = getenv("LLM_TEST_MODEL");

	if (p != NULL && p[0] != '\0')
		return p;
	if (smol != NULL && strrchr(smol, '/') != NULL)
	{
		snprintf(buf, cap, "%.*s/%s", (int) (strrchr(smol, '/') - smol), smol, name);
		if (access(buf, R_OK) == 0)
			return buf;
	}
	snprintf(buf, cap, "models/%s", name);
	return buf;
}

/* llm.encoder_arithmetic of the engines made (NULL: the default, auto) */
static const char *arith;

static llm_engine *
make_engine(const char *path, int max_batched)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = path;
	c.n_threads = 2;
	c.encoder_arithmetic = arith;
	if (max_batched > 0)
		c.max_batched_tokens = max_batched;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine %s: %s\n", path, err);
	return e;
}

static void
text_request(llm_request *q, const char *text)
{
	llm_request_init(q);
	q->mode = LLM_MODE_EMBED;
	q->prompt_kind = LLM_PROMPT_RAW;
	q->prompt = text;
	q->prompt_len = strlen(text);
	q->truncate = true;
}

static void
run_all(llm_engine *e)
{
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
			break;
}

static double
cosine(const float *a, const float *b, int n)
{
	double		ab = 0,
				aa = 0,
				bb = 0;

	for (int i = 0; i < n; i++)
	{
		ab += (double) a[i] * b[i];
		aa += (double) a[i] * a[i];
		bb += (double) b[i] * b[i];
	}
	return ab / sqrt(aa * bb);
}

/*
 * Submit the golden inputs idx[0..n) at once and run: as text (truncate
 * on), or as sentence-transformers' ids; results in r (indexed like idx).
 */
static int
embed_texts(llm_engine *e, const int *idx, int n, result *r, uint64_t id0, bool by_text)
{
	int			ok = 0;

	for (int i = 0; i < n; i++)
	{
		llm_request q;
		char		err[512];

		memset(&r[i], 0, sizeof(r[i]));
		text_request(&q, gold[idx[i]].text);
		if (!by_text)
		{
			q.prompt_kind = LLM_PROMPT_TOKENS;
			q.prompt = NULL;
			q.prompt_len = 0;
			q.tokens = gold[idx[i]].ids;
			q.n_tokens = gold[idx[i]].n_ids;
		}
		if (llm_engine_submit(e, id0 + i, &q, &r[i], err, sizeof(err)) == LLM_OK)
			ok++;
		else
			printf("# submit text %d: %s\n", idx[i], err);
	}
	run_all(e);
	return ok;
}

/* Every golden input through the file at path: the worst cosine (-1 on a failure), per text in cos. */
static double
fidelity(const char *path, result *r, double *cos, bool by_text)
{
	llm_engine *e = make_engine(path, 0);
	int			idx[MAX_TEXTS];
	double		worst = 2;

	if (e == NULL)
		return -1;
	for (int i = 0; i < n_gold; i++)
		idx[i] = i;
	if (embed_texts(e, idx, n_gold, r, 1, by_text) != n_gold)
		worst = -1;
	for (int i = 0; i < n_gold && worst >= 0; i++)
	{
		if (!r[i].done || r[i].kind != LLM_EVENT_VECTOR || r[i].n_vec != DIM)
		{
			printf("# text %d: no vector (%s)\n", i, r[i].error);
			worst = -1;
			break;
		}
		cos[i] = cosine(r[i].vec, gold[i].vec, DIM);
		if (cos[i] < worst)
			worst = cos[i];
	}
	llm_engine_destroy(e);
	return worst;
}

/*
 * Whether text holds Devanagari or Hangul: llama.cpp's WordPiece (which the
 * engine follows, its ids checked against llama-tokenize) drops their
 * combining vowel signs and Hangul's decomposed vowel jamo, which
 * Hugging Face's BertNormalizer keeps, so their ids differ from
 * sentence-transformers'.
 */
static bool
llama_cpp_differs(const char *text)
{
	for (const unsigned char *p = (const unsigned char *) text; *p; p++)
		if ((p[0] == 0xe0 && (p[1] == 0xa4 || p[1] == 0xa5)) ||	/* U+0900..U+097F */
			(p[0] >= 0xea && p[0] <= 0xed))	/* U+A000..U+DFFF: Hangul syllables and more */
			return true;
	return false;
}

static int	n_differs;

static void
test_tokens(llm_engine *e, const result *by_ids, const result *by_text)
{
	int			bad = 0,
				first_bad = -1,
				same_vec = 0,
				n_same = 0;

	for (int i = 0; i < n_gold; i++)
	{
		llm_request q;
		int32_t    *ids = NULL;
		char		err[512];
		int64_t		n;
		bool		same;

		text_request(&q, gold[i].text);
		n = llm_engine_prompt_ids(e, &q, &ids, err, sizeof(err));
		/* truncate's cut: the first LIMIT - 1 ids and the [SEP] */
		if (n > LIMIT)
		{
			ids[LIMIT - 1] = ids[n - 1];
			n = LIMIT;
		}
		same = n == gold[i].n_ids && memcmp(ids, gold[i].ids, (size_t) n * sizeof(int32_t)) == 0;
		if (llama_cpp_differs(gold[i].text))
		{
			n_differs++;
			free(ids);
			continue;
		}
		n_same++;
		same_vec += same && by_text[i].n_vec == DIM &&
			memcmp(by_text[i].vec, by_ids[i].vec, sizeof(by_text[i].vec)) == 0;
		if (!same && bad++ < 3)
		{
			if (first_bad < 0)
				first_bad = i;
			printf("# text %d: engine %lld ids:", i, (long long) n);
			for (int64_t k = 0; k < n && k < 24; k++)
				printf(" %d", ids[k]);
			printf("\n#   sentence-transformers %d ids:", gold[i].n_ids);
			for (int k = 0; k < gold[i].n_ids && k < 24; k++)
				printf(" %d", gold[i].ids[k]);
			printf("\n");
		}
		free(ids);
	}
	CHECK(bad == 0, "the engine's ids of %d texts ([CLS] WordPiece [SEP], cut at %d) are "
		  "sentence-transformers' (%d differ, the first text %d; %d texts in Devanagari or Hangul not compared)",
		  n_same, LIMIT, bad, first_bad, n_differs);
	CHECK(same_vec == n_same, "%d of %d texts embedded as text (truncate on) give their ids' vector bit for bit",
		  same_vec, n_same);
}

static void
test_batch_invariance(const char *path, const result *all)
{
	/* short, medium, long, cut at the limit, and non-Latin inputs */
	static const int pick[] = {0, 25, 60, 100, 150, 180, 200, 223};
	int			np = 0;
	int			idx[MAX_TEXTS] = {0};
	result	   *r = calloc(MAX_TEXTS, sizeof(result));
	llm_engine *e = make_engine(path, 300);
	int			same = 0,
				n = 0;

	if (e == NULL || r == NULL)
	{
		CHECK(0, "engine for batch invariance");
		free(r);
		return;
	}
	for (size_t k = 0; k < sizeof(pick) / sizeof(pick[0]); k++)
		if (pick[k] < n_gold)
		{
			embed_texts(e, &pick[k], 1, &r[0], 1000 + k, false);
			np++;
			same += r[0].n_vec == DIM && memcmp(r[0].vec, all[pick[k]].vec, sizeof(r[0].vec)) == 0;
		}
	CHECK(same == np, "%d of %d inputs embedded alone give their batched vectors bit for bit", same, np);
	/* every third text, in reverse order, with a 300-token step: other neighbours, other steps */
	for (int i = n_gold - 1; i >= 0; i -= 3)
		idx[n++] = i;
	embed_texts(e, idx, n, r, 2000, false);
	same = 0;
	for (int i = 0; i < n; i++)
		same += r[i].n_vec == DIM && memcmp(r[i].vec, all[idx[i]].vec, sizeof(r[i].vec)) == 0;
	CHECK(same == n, "%d of %d inputs in another batch (reverse order, 300-token steps) give the same vectors "
		  "bit for bit", same, n);
	llm_engine_destroy(e);
	free(r);
}

static void
test_limits(llm_engine *e, const result *all)
{
	int32_t		ids[LIMIT + 44];
	llm_request q;
	result		r;
	char		err[512];
	int			longest = -1;

	CHECK(llm_engine_embed_max_tokens(e) == LIMIT, "the model embeds at most %d tokens (the file's "
		  "bert.embedding.max_seq_length), not its %d positions", llm_engine_embed_max_tokens(e), 512);
	for (int i = 0; i < LIMIT + 44; i++)
		ids[i] = 1000 + (i * 37) % 20000;
	llm_request_init(&q);
	q.mode = LLM_MODE_EMBED;
	q.prompt_kind = LLM_PROMPT_TOKENS;
	q.tokens = ids;
	q.n_tokens = LIMIT + 44;
	CHECK(llm_engine_submit(e, 1, &q, &r, err, sizeof(err)) == LLM_ERR_PROMPT_TOO_LONG &&
		  strstr(err, "at most 256") != NULL, "%d token ids are refused without truncate: %s", LIMIT + 44, err);
	q.truncate = true;
	memset(&r, 0, sizeof(r));
	if (CHECK(llm_engine_submit(e, 2, &q, &r, err, sizeof(err)) == LLM_OK, "with truncate they are embedded"))
	{
		result		r2;

		run_all(e);
		memset(&r2, 0, sizeof(r2));
		q.n_tokens = LIMIT;
		q.truncate = false;
		CHECK(llm_engine_submit(e, 3, &q, &r2, err, sizeof(err)) == LLM_OK, "the first %d ids alone", LIMIT);
		run_all(e);
		CHECK(r.n_vec == DIM && r.prompt_tokens == LIMIT && memcmp(r.vec, r2.vec, sizeof(r.vec)) == 0,
			  "a truncated token prompt is its first %d ids (%d prompt tokens)", LIMIT, r.prompt_tokens);
	}
	/* a text longer than the limit: refused, or cut keeping [SEP] (its vector is the golden one above) */
	for (int i = 0; i < n_gold; i++)
		if (gold[i].n_ids == LIMIT && (longest < 0 || strlen(gold[i].text) > strlen(gold[longest].text)))
			longest = i;
	if (longest >= 0)
	{
		text_request(&q, gold[longest].text);
		q.truncate = false;
		CHECK(llm_engine_submit(e, 4, &q, &r, err, sizeof(err)) == LLM_ERR_PROMPT_TOO_LONG,
			  "text %d (over %d tokens) is refused without truncate: %s", longest, LIMIT, err);
		CHECK(all[longest].prompt_tokens == LIMIT, "with truncate it was embedded from %d tokens",
			  all[longest].prompt_tokens);
	}
	llm_request_init(&q);
	q.prompt_kind = LLM_PROMPT_RAW;
	q.prompt = "Hello";
	q.prompt_len = 5;
	CHECK(llm_engine_submit(e, 5, &q, &r, err, sizeof(err)) == LLM_ERR_INVALID_PARAM &&
		  strstr(err, "embedding model") != NULL, "a generating request on the embedding model is refused: %s", err);
}

static void
test_pooling(llm_engine *e, const result *all)
{
	llm_request q;
	result		mean,
				cls;
	char		err[512];
	float		l2[DIM];
	float		all_t[DIM];
	double		ss = 0;
	const int	t = 60;

	CHECK(llm_engine_embed_pooling(e) == LLM_POOLING_MEAN && llm_engine_embed_normalizes(e),
		  "the file declares mean pooling (bert.pooling_type 1), normalised");
	text_request(&q, gold[t].text);
	q.pooling = LLM_POOLING_MEAN;
	q.normalize = LLM_EMBED_NORM_NONE;
	memset(&mean, 0, sizeof(mean));
	llm_engine_submit(e, 10, &q, &mean, err, sizeof(err));
	q.pooling = LLM_POOLING_CLS;
	q.normalize = LLM_EMBED_NORM_L2;
	memset(&cls, 0, sizeof(cls));
	llm_engine_submit(e, 11, &q, &cls, err, sizeof(err));
	run_all(e);
	for (int i = 0; i < DIM; i++)
		ss += (double) mean.vec[i] * mean.vec[i];
	for (int i = 0; i < DIM; i++)
		l2[i] = (float) (mean.vec[i] / sqrt(ss));
	memcpy(all_t, all[t].vec, sizeof(all_t));
	CHECK(mean.n_vec == DIM && fabs(sqrt(ss) - 1.0) > 0.01 && memcmp(l2, all_t, sizeof(l2)) == 0,
		  "MEAN without normalisation (norm %.3f), normalised here, is the default vector bit for bit", sqrt(ss));
	CHECK(cls.n_vec == DIM && cosine(cls.vec, all[t].vec, DIM) < 0.99,
		  "CLS pooling is another vector (cosine with MEAN %.4f)", cosine(cls.vec, all[t].vec, DIM));
}

/* SmolLM2: MEAN pooling is the mean of the prefixes' LAST vectors; chunking changes nothing. */
static void
test_decoder_mean(const char *path)
{
	static const char *text = "Mean pooling of a decoder's hidden states, token by token.";
	llm_engine *e = make_engine(path, 0);
	llm_engine *e_small = make_engine(path, 4);
	int32_t    *ids = NULL;
	llm_request q;
	char		err[512];
	int64_t		n;
	result		mean,
				mean_chunked;
	result	   *last;
	double	   *sum;
	int			dim;
	bool		same = true;

	if (e == NULL || e_small == NULL)
	{
		CHECK(0, "decoder engine");
		llm_engine_destroy(e);
		llm_engine_destroy(e_small);
		return;
	}
	dim = llm_engine_n_embd(e);
	CHECK(llm_engine_embed_pooling(e) == LLM_POOLING_LAST && !llm_engine_embed_normalizes(e),
		  "a decoder file without a pooling type embeds its last token, unnormalised");
	n = llm_engine_tokenize(e, text, strlen(text), &ids, err, sizeof(err));
	last = n > 0 ? calloc((size_t) n, sizeof(result)) : NULL;
	sum = calloc((size_t) dim, sizeof(double));
	if (!CHECK(n > 1 && last != NULL && sum != NULL && dim <= MAXV, "decoder prompt of %lld tokens", (long long) n))
	{
		free(ids);
		free(last);
		free(sum);
		llm_engine_destroy(e);
		llm_engine_destroy(e_small);
		return;
	}
	llm_request_init(&q);
	q.mode = LLM_MODE_EMBED;
	q.prompt_kind = LLM_PROMPT_TOKENS;
	q.tokens = ids;
	q.pooling = LLM_POOLING_MEAN;
	q.n_tokens = (int32_t) n;
	memset(&mean, 0, sizeof(mean));
	memset(&mean_chunked, 0, sizeof(mean_chunked));
	llm_engine_submit(e, 1, &q, &mean, err, sizeof(err));
	llm_engine_submit(e_small, 1, &q, &mean_chunked, err, sizeof(err));
	q.pooling = LLM_POOLING_LAST;
	for (int64_t i = 0; i < n; i++)
	{
		q.n_tokens = (int32_t) i + 1;
		llm_engine_submit(e, 100 + i, &q, &last[i], err, sizeof(err));
	}
	run_all(e);
	run_all(e_small);
	for (int64_t i = 0; i < n; i++)
		for (int k = 0; k < dim; k++)
			sum[k] += last[i].vec[k];
	for (int k = 0; k < dim; k++)
		same = same && (float) (sum[k] / n) == mean.vec[k];
	CHECK(mean.done && mean.kind == LLM_EVENT_VECTOR && mean.n_vec == dim && same,
		  "MEAN over %lld tokens = the double mean of the %lld prefixes' LAST vectors, bit for bit",
		  (long long) n, (long long) n);
	CHECK(mean_chunked.done && memcmp(mean.vec, mean_chunked.vec, sizeof(mean.vec)) == 0,
		  "the same MEAN vector with the prompt prefilled in 4-token chunks");
	free(ids);
	free(last);
	free(sum);
	llm_engine_destroy(e);
	llm_engine_destroy(e_small);
}

/*
 * 7. llm.encoder_arithmetic: 'exact' (llama.cpp's F16 kernels) also
 *    passes the fidelity bound and batch invariance; against the default
 *    'auto' its vectors differ where AMX-BF16 is usable (the setting
 *    reaches the kernels) and are the same bits where it is not (auto
 *    falls back to exact).
 */
static void
test_exact_mode(const char *f16, const result *autov)
{
	result	   *ex = calloc(MAX_TEXTS, sizeof(result));
	double		cos[MAX_TEXTS];
	double		worst,
				mean = 0;
	int			same = 0;
	char		why[200];
	bool		amx = llm_amx_bf16_usable(why, sizeof(why));

	arith = "exact";
	worst = fidelity(f16, ex, cos, false);
	for (int i = 0; i < n_gold && worst >= 0; i++)
	{
		mean += cos[i] / n_gold;
		same += memcmp(ex[i].vec, autov[i].vec, sizeof(float) * DIM) == 0;
	}
	printf("# F16, encoder_arithmetic exact: min cosine %.7f, mean %.7f over %d texts\n", worst, mean, n_gold);
	CHECK(worst >= 0.9999, "F16 exact: cosine >= 0.9999 on every one of %d texts (min %.7f)", n_gold, worst);
	if (amx)
		CHECK(worst >= 0 && same < n_gold, "auto (AMX-BF16) and exact give other bits on %d of %d texts",
			  n_gold - same, n_gold);
	else
		CHECK(worst >= 0 && same == n_gold, "without AMX-BF16 (%s) auto is exact: %d of %d texts the same bits",
			  why, same, n_gold);
	test_batch_invariance(f16, ex);
	arith = NULL;
	free(ex);
}

int
main(void)
{
	char		b1[4096],
				b2[4096];
	const char *f16 = model_file("LLM_TEST_MODEL_MINILM", "all-MiniLM-L6-v2.F16.gguf", b1, sizeof(b1));
	const char *q8 = model_file("LLM_TEST_MODEL_MINILM_Q8", "all-MiniLM-L6-v2.Q8_0.gguf", b2, sizeof(b2));
	const char *smol = getenv("LLM_TEST_MODEL");
	result	   *all = calloc(MAX_TEXTS, sizeof(result));
	result	   *rq = calloc(MAX_TEXTS, sizeof(result));
	result	   *txt = calloc(MAX_TEXTS, sizeof(result));
	double		cos[MAX_TEXTS];

	if (!CHECK(load_golden() >= 200, "%d golden texts in %s", n_gold, GOLDEN))
		return unit_done();
	if (smol != NULL && access(smol, R_OK) == 0)
		test_decoder_mean(smol);
	else
		SKIP("decoder MEAN pooling: LLM_TEST_MODEL not set or missing");
	if (access(f16, R_OK) != 0)
	{
		SKIP("all-MiniLM-L6-v2 checks: %s missing (make model MODEL=minilm)", f16);
		return unit_done();
	}
	{
		double		worst = fidelity(f16, all, cos, false);
		double		mean = 0;
		int			below = 0;

		for (int i = 0; i < n_gold && worst >= 0; i++)
		{
			mean += cos[i] / n_gold;
			below += cos[i] < 0.9999;
		}
		printf("# F16: cosine with sentence-transformers on its ids: min %.7f, mean %.7f over %d texts\n", worst,
			   mean, n_gold);
		CHECK(worst >= 0.9999, "F16: cosine >= 0.9999 on every one of %d texts (min %.7f, %d below)",
			  n_gold, worst, below);
	}
	{
		double		worst = fidelity(f16, txt, cos, true),
					worst_differs = 2;

		for (int i = 0; i < n_gold && worst >= 0; i++)
			if (llama_cpp_differs(gold[i].text) && cos[i] < worst_differs)
				worst_differs = cos[i];
		printf("# F16 from text: min cosine %.7f; %.7f on the Devanagari and Hangul texts\n", worst, worst_differs);
	}
	{
		llm_engine *e = make_engine(f16, 0);

		if (CHECK(e != NULL, "engine on %s", f16))
		{
			test_tokens(e, all, txt);
			test_limits(e, txt);
			test_pooling(e, all);
			llm_engine_destroy(e);
		}
	}
	test_batch_invariance(f16, all);
	test_exact_mode(f16, all);
	if (access(q8, R_OK) == 0)
	{
		double		worst = fidelity(q8, rq, cos, false);
		double		mean = 0;

		for (int i = 0; i < n_gold && worst >= 0; i++)
			mean += cos[i] / n_gold;
		printf("# Q8_0: cosine with sentence-transformers: min %.7f, mean %.7f over %d texts\n", worst, mean, n_gold);
		/*
		 * 0.999 is the goal; Q8_0 weights with Q8_0 activations (llama.cpp's
		 * arithmetic) reach 0.9987 on the worst texts (docs/EMBEDDINGS.md):
		 * this checks they stay there, and the mean above the goal
		 */
		CHECK(worst >= 0.998 && mean >= 0.999, "Q8_0: cosine >= 0.998 on every one of %d texts (min %.7f), "
			  "mean >= 0.999 (%.7f)", n_gold, worst, mean);
	}
	else
		SKIP("Q8_0 fidelity: %s missing (make model MODEL=minilm-q8)", q8);
	free(all);
	free(rq);
	free(txt);
	return unit_done();
}
