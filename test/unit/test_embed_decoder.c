/*
 * test_embed_decoder.c — a decoder model's embeddings against llama.cpp's
 * llama-embedding: synthetic qwen3 models (tools/make_synth_gguf.py arch
 * qwen3 small, F16, with <arch>.pooling_type last or mean, as
 * Qwen3-Embedding declares last) written into build/synth/ with the
 * sha256 of test/golden/embed_decoder/models.tsv, whose goldens
 * (scripts/oracle/make_embed_decoder_golden.py) were made from those bytes.
 *
 * Per model, through the engine (EMBED requests, the model's own pooling
 * and normalisation: L2, since the file declares a pooling), each golden
 * prompt: its token ids equal llama-embedding's; its vector has the
 * model's width, L2 norm 1, cosine with llama-embedding's >= 0.99999 and
 * every element within 1e-3 of it (elements are up to about 0.3; llama.cpp
 * rounds a F16 matmul's activations to F16, the engine does not, and a
 * last-token vector keeps that one row's rounding where a mean averages
 * it: measured 0.9999989 and 5.3e-4 last, 0.9999999 and 2.0e-4 mean; the
 * golden's 7 decimals add 5e-8).  All prompts
 * again at once: each vector bit-identical to the prompt's alone (batch
 * invariance of the decoder path: LAST is one row, MEAN adds rows in
 * position order in double).  The file without the pooling key pools the
 * last token without normalising (the plain decoder default): its vector
 * is the last-pooled one times its norm.
 */
#include "unit.h"
#include "engine/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_DIR	"test/golden/embed_decoder"
#define SYNTH_DIR	"build/synth"
#define MAXP		16
#define MAXDIM		1024
#define MAXIDS		512

typedef struct result
{
	bool		done;
	llm_event_kind kind;
	float		vec[MAXDIM];
	int32_t		n_vec;
	char		error[256];
} result;

typedef struct golden
{
	char		prompt[4096];
	int32_t		ids[MAXIDS];
	int			n_ids;
	double		vec[MAXDIM];
	int			n_vec;
} golden;

static golden gold[MAXP];

static void
on_event(const llm_event *ev, void *arg)
{
	result	   *r = ev->user_data;

	if (ev->kind == LLM_EVENT_TEXT)
		return;
	r->done = true;
	r->kind = ev->kind;
	if (ev->kind == LLM_EVENT_VECTOR && ev->n_vector <= MAXDIM)
	{
		memcpy(r->vec, ev->vector, (size_t) ev->n_vector * sizeof(float));
		r->n_vec = ev->n_vector;
	}
	if (ev->kind == LLM_EVENT_ERROR)
		snprintf(r->error, sizeof(r->error), "%s", ev->text);
}

static bool
sha_matches(const char *path, const char *sha)
{
	char		cmd[600],
				got[80] = "";
	FILE	   *p;

	snprintf(cmd, sizeof(cmd), "sha256sum '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (p == NULL)
		return false;
	if (fscanf(p, "%64s", got) != 1)
		got[0] = '\0';
	pclose(p);
	return strcmp(got, sha) == 0;
}

/* build/synth/qwen3-embed-POOLING.gguf with the sha256 of models.tsv (pooling NULL: none), written when needed. */
static bool
ensure_model(const char *pooling, char *path, size_t len)
{
	char		line[512],
				want[80] = "",
				cmd[1024];
	FILE	   *f;

	if (pooling == NULL)
	{
		/* the plain file: the architecture goldens' qwen3 small F16 */
		snprintf(path, len, SYNTH_DIR "/qwen3-embed-none.gguf");
		f = fopen("test/golden/arch/models.tsv", "r");
		while (f && fgets(line, sizeof(line), f))
		{
			char		a[32], s[16], t[16], h[80];

			if (sscanf(line, "%31s %15s %15s %79s", a, s, t, h) == 4 && strcmp(a, "qwen3") == 0 &&
				strcmp(s, "small") == 0 && strcmp(t, "F16") == 0)
				snprintf(want, sizeof(want), "%s", h);
		}
	}
	else
	{
		snprintf(path, len, SYNTH_DIR "/qwen3-embed-%s.gguf", pooling);
		f = fopen(GOLDEN_DIR "/models.tsv", "r");
		while (f && fgets(line, sizeof(line), f))
		{
			char		a[32], p[16], h[80];

			if (sscanf(line, "%31s %15s %79s", a, p, h) == 3 && strcmp(a, "qwen3") == 0 && strcmp(p, pooling) == 0)
				snprintf(want, sizeof(want), "%s", h);
		}
	}
	if (f)
		fclose(f);
	if (want[0] == '\0')
		return false;
	if (sha_matches(path, want))
		return true;
	snprintf(cmd, sizeof(cmd),
			 "mkdir -p " SYNTH_DIR " && python3 tools/make_synth_gguf.py arch qwen3 small '%s' --type F16 "
			 "--seed 1 %s%s --sha256 %s >/dev/null", path, pooling ? "--pooling " : "", pooling ? pooling : "", want);
	if (system(cmd) != 0)
		return false;
	return sha_matches(path, want);
}

/* Undo the golden's \t \n \\ escapes in place. */
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
read_golden(const char *pooling)
{
	char		path[256];
	static char line[65536];
	FILE	   *f;
	int			n = 0;

	snprintf(path, sizeof(path), GOLDEN_DIR "/qwen3-%s.tsv", pooling);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (n < MAXP && fgets(line, sizeof(line), f))
	{
		char	   *ids = strchr(line, '\t'),
				   *vec = ids ? strchr(ids + 1, '\t') : NULL,
				   *p;
		golden	   *g = &gold[n];

		if (vec == NULL)
			continue;
		*ids++ = '\0';
		*vec++ = '\0';
		snprintf(g->prompt, sizeof(g->prompt), "%.4000s", line);
		unescape(g->prompt);
		g->n_ids = 0;
		for (p = ids; *p && g->n_ids < MAXIDS; p++)
		{
			g->ids[g->n_ids++] = (int32_t) strtol(p, &p, 10);
			if (*p != ',')
				break;
		}
		g->n_vec = 0;
		for (p = vec; *p && *p != '\n' && g->n_vec < MAXDIM; p++)
		{
			g->vec[g->n_vec++] = strtod(p, &p);
			if (*p != ',')
				break;
		}
		n++;
	}
	fclose(f);
	return n;
}

static void
embed_request(llm_request *q, const char *text)
{
	llm_request_init(q);
	q->mode = LLM_MODE_EMBED;
	q->prompt_kind = LLM_PROMPT_RAW;
	q->prompt = text;
	q->prompt_len = strlen(text);
}

static void
run_all(llm_engine *e)
{
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
			break;
}

static llm_engine *
open_engine(const char *path)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = path;
	c.n_threads = 2;
	c.n_ctx = 512;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine on %s: %s\n", path, err);
	return e;
}

static result solo[MAXP],
			together[MAXP];

static void
check_pooling(const char *pooling)
{
	char		path[256],
				err[256];
	int			n = read_golden(pooling);
	llm_engine *e;
	llm_request q;
	int			ids_ok = 0,
				vec_ok = 0,
				same = 0;
	double		worst_cos = 1,
				worst_diff = 0;

	if (!CHECK(n == 8, "%s: %d golden prompts", pooling, n) ||
		!CHECK(ensure_model(pooling, path, sizeof(path)), "%s: %s with the sha256 of models.tsv", pooling, path))
		return;
	e = open_engine(path);
	if (!CHECK(e != NULL, "%s: engine", pooling))
		return;
	for (int i = 0; i < n; i++)
	{
		int32_t    *ids = NULL;
		int64_t		k;
		double		dot = 0,
					nn = 0,
					ng = 0,
					diff = 0;

		embed_request(&q, gold[i].prompt);
		k = llm_engine_prompt_ids(e, &q, &ids, err, sizeof(err));
		if (k == gold[i].n_ids && memcmp(ids, gold[i].ids, (size_t) k * sizeof(int32_t)) == 0)
			ids_ok++;
		else
			printf("# %s prompt %d: %lld ids, llama-embedding %d\n", pooling, i, (long long) k, gold[i].n_ids);
		free(ids);
		memset(&solo[i], 0, sizeof(result));
		if (llm_engine_submit(e, 100 + i, &q, &solo[i], err, sizeof(err)) != LLM_OK)
		{
			printf("# submit: %s\n", err);
			continue;
		}
		run_all(e);
		if (!solo[i].done || solo[i].kind != LLM_EVENT_VECTOR || solo[i].n_vec != gold[i].n_vec)
		{
			printf("# %s prompt %d: no vector of %d floats (%s)\n", pooling, i, gold[i].n_vec, solo[i].error);
			continue;
		}
		for (int j = 0; j < solo[i].n_vec; j++)
		{
			double		a = solo[i].vec[j],
						b = gold[i].vec[j];

			dot += a * b;
			nn += a * a;
			ng += b * b;
			if (fabs(a - b) > diff)
				diff = fabs(a - b);
		}
		if (dot / sqrt(nn * ng) < worst_cos)
			worst_cos = dot / sqrt(nn * ng);
		if (diff > worst_diff)
			worst_diff = diff;
		vec_ok += fabs(sqrt(nn) - 1) < 1e-5 && dot / sqrt(nn * ng) >= 0.99999 && diff <= 1e-3;
	}
	CHECK(ids_ok == n, "%s: %d of %d prompts tokenized as llama-embedding did", pooling, ids_ok, n);
	CHECK(vec_ok == n, "%s: %d of %d vectors of norm 1 agree with llama-embedding's (worst cosine %.8f, "
		  "largest element difference %.2e)", pooling, vec_ok, n, worst_cos, worst_diff);

	/* all at once */
	for (int i = 0; i < n; i++)
	{
		embed_request(&q, gold[i].prompt);
		memset(&together[i], 0, sizeof(result));
		(void) llm_engine_submit(e, 200 + i, &q, &together[i], err, sizeof(err));
	}
	run_all(e);
	for (int i = 0; i < n; i++)
		same += together[i].done && together[i].n_vec == solo[i].n_vec && solo[i].n_vec > 0 &&
			memcmp(together[i].vec, solo[i].vec, (size_t) solo[i].n_vec * sizeof(float)) == 0;
	CHECK(same == n, "%s: all %d prompts at once, %d vectors bit-identical to alone", pooling, n, same);
	llm_engine_destroy(e);
}

/* The file without pooling_type: last token, not normalised (same weights as the last-pooling file). */
static void
check_no_pooling(void)
{
	char		path[256],
				err[256];
	llm_engine *e;
	llm_request q;
	result		r;
	double		norm = 0,
				worst = 0;

	if (!CHECK(ensure_model(NULL, path, sizeof(path)), "no pooling key: %s with the architecture goldens' sha256",
			   path))
		return;
	e = open_engine(path);
	if (!CHECK(e != NULL, "no pooling key: engine"))
		return;
	embed_request(&q, gold[0].prompt);
	memset(&r, 0, sizeof(r));
	if (llm_engine_submit(e, 1, &q, &r, err, sizeof(err)) == LLM_OK)
		run_all(e);
	for (int j = 0; j < r.n_vec; j++)
		norm += (double) r.vec[j] * r.vec[j];
	norm = sqrt(norm);
	for (int j = 0; j < r.n_vec && norm > 0; j++)
		if (fabs(r.vec[j] / norm - solo[0].vec[j]) > worst)
			worst = fabs(r.vec[j] / norm - solo[0].vec[j]);
	CHECK(r.done && r.n_vec == solo[0].n_vec && fabs(norm - 1) > 1e-3 && worst < 1e-6,
		  "no pooling key: the last token's state, not normalised (norm %.4f), the last-pooled vector "
		  "times its norm (largest difference %.2e)", norm, worst);
	llm_engine_destroy(e);
}

int
main(void)
{
	check_pooling("mean");
	check_pooling("last");		/* last: solo[] keeps the last-pooled vectors for check_no_pooling */
	check_no_pooling();
	return unit_done();
}
