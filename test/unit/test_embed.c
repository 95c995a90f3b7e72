/*
 * test_embed.c — per-row output kinds and vector answers, on the real model
 * (LLM_TEST_MODEL) and the CPU backend.
 *  1. The model: a step whose output rows mix LOGITS and HIDDEN kinds
 *     (llm_model_forward_out, rows repeated and out of order) returns each
 *     logits row bit-identical to a logits-only step and each hidden row
 *     bit-identical to that row asked alone; a hidden row is the state after
 *     the final norm (divided by output_norm.weight its mean square is 1).
 *  2. The engine: an EMBED request's VECTOR is exactly the hidden row of its
 *     prompt's last token computed by the model API alone (a); the same
 *     vector comes back in a batch with generating requests, joining while
 *     they decode with its prefill chunked, and from the prefix cache (b);
 *     the generating requests beside it produce exactly the tokens they
 *     produce without it, greedy and seeded (c); usage, no KV leak.
 *  3. Request checks: an unknown pooling, a grammar on an EMBED request; an
 *     EMBED prompt may fill the context, one token more may not.
 * Env: LLM_TEST_MODEL.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "engine/engine.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "unit.h"

#define MAXTOK 256
#define MAXDIM 8192

typedef struct result
{
	int32_t		ids[MAXTOK];
	int			n;
	bool		done;
	llm_event_kind kind;
	llm_status	status;
	llm_finish_reason why;
	llm_usage	usage;
	float		vec[MAXDIM];
	int32_t		n_vec;
	int			n_events;
	char		error[512];
} result;

static void
on_event(const llm_event *ev, void *arg)
{
	result	   *r = ev->user_data;

	r->n_events++;
	if (ev->kind == LLM_EVENT_TEXT)
	{
		if (r->n < MAXTOK)
			r->ids[r->n++] = ev->token_id;
		return;
	}
	r->done = true;
	r->kind = ev->kind;
	r->status = ev->status;
	r->why = ev->finish_reason;
	r->usage = ev->usage;
	if (ev->kind == LLM_EVENT_VECTOR && ev->n_vector <= MAXDIM)
	{
		memcpy(r->vec, ev->vector, (size_t) ev->n_vector * sizeof(float));
		r->n_vec = ev->n_vector;
	}
	if (ev->kind == LLM_EVENT_ERROR)
		snprintf(r->error, sizeof(r->error), "%s", ev->text);
}

static const char *model_path;

static const char *embed_text =
	"PostgreSQL stores a table as a heap of 8 kB pages; each row version carries the ids of the "
	"transactions that created and deleted it, so readers never block writers.";
static const char *embed_long =
	"A B-tree index keeps its keys sorted in pages linked left to right, so a range scan reads "
	"neighbouring leaves in order; an insert that fills a page splits it and posts the new "
	"separator key to the parent, which may split in turn, and the root split is the only "
	"operation that makes the tree one level taller. Deleted entries are removed lazily by vacuum.";

static const char *gen_prompts[4] = {
	"What is the capital of Australia?",
	"Write a haiku about databases.",
	"List three prime numbers greater than 100.",
	"Why is the sky blue?",
};

static llm_engine *
make_engine(bool prefix, int max_batched, int n_ctx)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 2;
	c.prefix_caching = prefix;
	c.max_batched_tokens = max_batched;
	c.n_ctx = n_ctx;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
		printf("# engine: %s\n", err);
	return e;
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
gen_request(llm_request *q, int i)
{
	llm_request_init(q);
	q->prompt = gen_prompts[i];
	q->prompt_len = strlen(gen_prompts[i]);
	q->params.max_tokens = 12;
	/* the last one sampled with a seed: its RNG must see the same rows */
	q->params.temperature = i == 3 ? 0.8 : 0.0;
	q->params.has_seed = true;
	q->params.seed = 42;
}

static bool
submit(llm_engine *e, uint64_t id, const llm_request *q, result *r)
{
	char		err[512];
	llm_status	st;

	memset(r, 0, sizeof(*r));
	st = llm_engine_submit(e, id, q, r, err, sizeof(err));
	if (st != LLM_OK)
		printf("# submit %llu: %s\n", (unsigned long long) id, err);
	return st == LLM_OK;
}

static void
run_all(llm_engine *e)
{
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
			break;
}

/* ---------- the model alone ---------- */

typedef struct ref_model
{
	gguf_file  *f;
	llm_backend *b;
	llm_model  *m;
	const llm_model_config *c;
} ref_model;

enum
{
	BLOCK = 16,
	N_BLOCKS = 16
};

/* Prefill ids[0..n) alone from position 0 on blocks 0.., the given output rows and kinds. */
static int
forward_rows(ref_model *rm, const int32_t *ids, int n, const int32_t *rows, const uint8_t *kinds, int n_out,
			 float *logits, float *hidden)
{
	int32_t		pos[BLOCK * N_BLOCKS],
				slot[BLOCK * N_BLOCKS],
				bt[N_BLOCKS],
				sstart[2] = {0, n},
				kvlen[1] = {n};
	llm_step_desc d;
	llm_forward_out out = {kinds, logits, hidden};
	char		err[512];

	if (n > BLOCK * N_BLOCKS)
		return -1;
	for (int j = 0; j < N_BLOCKS; j++)
		bt[j] = j;
	for (int p = 0; p < n; p++)
	{
		pos[p] = p;
		slot[p] = p;
	}
	memset(&d, 0, sizeof(d));
	d.n_tokens = n;
	d.n_seqs = 1;
	d.token_ids = ids;
	d.positions = pos;
	d.slots = slot;
	d.seq_start = sstart;
	d.seq_kv_len = kvlen;
	d.block_tables = bt;
	d.max_blocks_per_seq = N_BLOCKS;
	d.out_rows = rows;
	d.n_out = n_out;
	if (llm_model_forward_out(rm->m, &d, &out, err, sizeof(err)) != 0)
	{
		printf("# forward: %s\n", err);
		return -1;
	}
	return 0;
}

static bool
ref_open(ref_model *rm)
{
	char		err[512];

	memset(rm, 0, sizeof(*rm));
	rm->f = gguf_open(model_path, err, sizeof(err));
	rm->b = rm->f ? llm_backend_cpu_create(2, err, sizeof(err)) : NULL;
	rm->m = rm->b ? llm_model_load(rm->f, rm->b, err, sizeof(err)) : NULL;
	if (rm->m == NULL)
	{
		printf("# reference model: %s\n", err);
		return false;
	}
	rm->c = llm_model_get_config(rm->m);
	{
		llm_kv_geometry g = {rm->c->n_layers, rm->c->n_kv_heads, rm->c->head_dim, BLOCK, N_BLOCKS, LLM_KV_F16,
		NULL, 0, 0};

		return rm->b->ops->kv_init(rm->b, &g) == 0;
	}
}

static void
ref_close(ref_model *rm)
{
	llm_model_free(rm->m);
	if (rm->b)
		rm->b->ops->destroy(rm->b);
	if (rm->f)
		gguf_close(rm->f);
}

/* Mean over i of (h[i] / w[i])^2 where |w[i]| is not tiny: 1 for a state after RMSNorm * w. */
static double
normed_mean_square(const float *h, const float *w, int dim)
{
	double		s = 0;
	int			k = 0;

	for (int i = 0; i < dim; i++)
		if (fabsf(w[i]) > 1e-2f)
		{
			double		v = (double) h[i] / w[i];

			s += v * v;
			k++;
		}
	return k ? s / k : 0;
}

/*
 * Model level: mixed kinds against single-kind steps.  ref_last gets the
 * hidden row of the prompt's last token.
 */
static void
test_model_kinds(ref_model *rm, const int32_t *ids, int n, float *ref_last)
{
	const size_t V = (size_t) rm->c->n_vocab;
	const int	D = rm->c->dim;
	int32_t		mixed_rows[5] = {n - 1, n - 1, 0, 3, n - 2};
	uint8_t		mixed_kinds[5] = {LLM_OUT_HIDDEN, LLM_OUT_LOGITS, LLM_OUT_HIDDEN, LLM_OUT_LOGITS, LLM_OUT_LOGITS};
	int32_t		lrows[3] = {n - 1, 3, n - 2};
	float	   *lg_mixed = malloc(3 * V * sizeof(float)),
			   *lg_only = malloc(3 * V * sizeof(float)),
			   *h_mixed = malloc(2 * (size_t) D * sizeof(float)),
			   *h_one = malloc((size_t) D * sizeof(float));
	uint8_t		hidden_kind = LLM_OUT_HIDDEN,
				bad_kind = 7;
	int32_t		row0 = 0,
				last = n - 1;
	const gguf_tensor *norm = gguf_find_tensor(rm->f, "output_norm.weight");
	bool		ok;

	ok = forward_rows(rm, ids, n, &last, &hidden_kind, 1, NULL, ref_last) == 0;
	CHECK(ok, "model: the last row's hidden state alone (no logits array)");
	ok = forward_rows(rm, ids, n, lrows, NULL, 3, lg_only, NULL) == 0 &&
		forward_rows(rm, ids, n, mixed_rows, mixed_kinds, 5, lg_mixed, h_mixed) == 0 &&
		forward_rows(rm, ids, n, &row0, &hidden_kind, 1, NULL, h_one) == 0;
	if (CHECK(ok, "model: a logits-only step, a step of mixed kinds, row 0's hidden state alone"))
	{
		CHECK(memcmp(lg_only, lg_mixed, 3 * V * sizeof(float)) == 0,
			  "mixed step: its 3 logits rows, in out_rows order, bit-identical to the logits-only step's");
		CHECK(memcmp(h_mixed, ref_last, (size_t) D * sizeof(float)) == 0 &&
			  memcmp(h_mixed + D, h_one, (size_t) D * sizeof(float)) == 0,
			  "mixed step: its 2 hidden rows, in out_rows order, bit-identical to each row's alone");
	}
	if (CHECK(norm != NULL && norm->type == 0 && norm->ne[0] == D, "output_norm.weight: %d floats", D))
	{
		double		ms = normed_mean_square(ref_last, norm->data, D);

		CHECK(fabs(ms - 1.0) < 1e-3, "the hidden row is the final norm's output: (h / w)^2 averages %.6f", ms);
	}
	{
		char		err[256];
		llm_step_desc d;
		int32_t		pos[1] = {0}, slot[1] = {0}, bt[1] = {0}, ss[2] = {0, 1}, kv[1] = {1};
		llm_forward_out out = {&bad_kind, lg_only, h_one};

		memset(&d, 0, sizeof(d));
		d.n_tokens = 1;
		d.n_seqs = 1;
		d.token_ids = ids;
		d.positions = pos;
		d.slots = slot;
		d.seq_start = ss;
		d.seq_kv_len = kv;
		d.block_tables = bt;
		d.max_blocks_per_seq = 1;
		d.out_rows = &row0;
		d.n_out = 1;
		CHECK(llm_model_forward_out(rm->m, &d, &out, err, sizeof(err)) != 0 && strstr(err, "kind") != NULL,
			  "an unknown output kind is refused: %s", err);
	}
	free(lg_mixed);
	free(lg_only);
	free(h_mixed);
	free(h_one);
}

/* ---------- the engine ---------- */

static bool
vector_is(const result *r, const float *want, int dim)
{
	return r->done && r->kind == LLM_EVENT_VECTOR && r->n_vec == dim &&
		memcmp(r->vec, want, (size_t) dim * sizeof(float)) == 0;
}

static bool
same_tokens(const result *a, const result *b)
{
	return a->done && b->done && a->kind == LLM_EVENT_FINISHED && b->kind == LLM_EVENT_FINISHED &&
		a->n == b->n && a->n > 0 && memcmp(a->ids, b->ids, (size_t) a->n * sizeof(int32_t)) == 0;
}

static void
test_engine_vectors(ref_model *rm, llm_engine *e, const float *ref_last, int n_prompt)
{
	const int	D = rm->c->dim;
	llm_request q;
	result		alone,
				cached,
				gen_alone[4],
				gen_beside[4],
				emb[2],
				long_alone;
	llm_engine *b;
	llm_engine_stats st;

	/* (a) alone: the model API's hidden row, bit for bit */
	embed_request(&q, embed_text);
	if (CHECK(submit(e, 1, &q, &alone), "EMBED request submitted"))
	{
		run_all(e);
		CHECK(alone.n_events == 1 && vector_is(&alone, ref_last, D) && alone.why == LLM_FINISH_STOP,
			  "alone: one VECTOR event of %d floats, bit-identical to the forward's hidden row of the last "
			  "prompt token (%d events, kind %d, %d floats)", D, alone.n_events, alone.kind, alone.n_vec);
		CHECK(alone.usage.prompt_tokens == n_prompt && alone.usage.completion_tokens == 0,
			  "usage: %d prompt tokens, no completion tokens", n_prompt);
	}
	/* (b) from the prefix cache: its full blocks attached, the last token recomputed */
	if (submit(e, 2, &q, &cached))
	{
		run_all(e);
		CHECK(vector_is(&cached, ref_last, D) && cached.usage.cached_tokens >= 16,
			  "again with its prefix cached (%d of %d tokens cached): the same vector", cached.usage.cached_tokens,
			  n_prompt);
	}

	/* (b), (c): a batch of generating requests with and without vectors beside them */
	b = make_engine(false, 32, 512);
	if (!CHECK(b != NULL, "engine without prefix caching, 32-token steps"))
		return;
	embed_request(&q, embed_long);
	if (submit(b, 5, &q, &long_alone))
		run_all(b);
	CHECK(long_alone.done && long_alone.kind == LLM_EVENT_VECTOR && long_alone.usage.prompt_tokens > 32,
		  "a %d-token prompt's vector alone, over chunked prefill", long_alone.usage.prompt_tokens);
	for (int i = 0; i < 4; i++)
	{
		gen_request(&q, i);
		submit(b, 10 + i, &q, &gen_alone[i]);
	}
	run_all(b);
	for (int i = 0; i < 4; i++)
	{
		gen_request(&q, i);
		submit(b, 20 + i, &q, &gen_beside[i]);
		if (i == 1)
		{
			embed_request(&q, embed_text);
			submit(b, 30, &q, &emb[0]);
		}
	}
	/* the long prompt joins while the others decode */
	for (int s = 0; s < 3; s++)
		llm_engine_step(b, on_event, NULL);
	embed_request(&q, embed_long);
	submit(b, 31, &q, &emb[1]);
	run_all(b);
	CHECK(vector_is(&emb[0], ref_last, D),
		  "in a batch of 4 generating requests, submitted among them: the vector alone's, bit for bit");
	CHECK(vector_is(&emb[1], long_alone.vec, D),
		  "joining 4 decoding requests, its prefill chunked beside them: the vector alone's, bit for bit");
	{
		int			n_same = 0;

		for (int i = 0; i < 4; i++)
			n_same += same_tokens(&gen_alone[i], &gen_beside[i]);
		CHECK(n_same == 4, "the generating requests' tokens (3 greedy, 1 seeded) unchanged by the vectors "
			  "beside them (%d/4)", n_same);
	}
	llm_engine_get_stats(b, &st);
	CHECK(st.kv_blocks_used == 0 && !llm_engine_has_work(b), "no KV block held after the vector requests");
	llm_engine_destroy(b);
}

static void
test_requests(void)
{
	llm_engine *e = make_engine(true, 512, 64);
	llm_request q;
	result		r;
	char		err[256];
	int32_t		ids[65];

	if (!CHECK(e != NULL, "engine with a 64-token context"))
		return;
	embed_request(&q, embed_text);
	q.pooling = (llm_pooling) 7;
	CHECK(llm_engine_submit(e, 1, &q, &r, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "pooling"),
		  "an unknown pooling is refused: %s", err);
	embed_request(&q, embed_text);
	q.grammar = "\x01x";
	q.grammar_len = 2;
	CHECK(llm_engine_submit(e, 2, &q, &r, err, sizeof(err)) == LLM_ERR_INVALID_PARAM && strstr(err, "grammar"),
		  "a grammar on an EMBED request is refused: %s", err);
	for (int i = 0; i < 65; i++)
		ids[i] = 100 + i;
	llm_request_init(&q);
	q.prompt_kind = LLM_PROMPT_TOKENS;
	q.tokens = ids;
	q.n_tokens = 64;
	CHECK(llm_engine_submit(e, 3, &q, &r, err, sizeof(err)) == LLM_ERR_PROMPT_TOO_LONG,
		  "GENERATE: a prompt filling the 64-token context is refused");
	q.mode = LLM_MODE_EMBED;
	if (CHECK(submit(e, 4, &q, &r), "EMBED: a prompt of 64 tokens fills the context"))
	{
		run_all(e);
		CHECK(r.done && r.kind == LLM_EVENT_VECTOR && r.n_vec == llm_engine_n_embd(e) && isfinite(r.vec[0]),
			  "its vector comes back (%d floats)", r.n_vec);
	}
	q.n_tokens = 65;
	CHECK(llm_engine_submit(e, 5, &q, &r, err, sizeof(err)) == LLM_ERR_PROMPT_TOO_LONG &&
		  strstr(err, "at most 64") != NULL, "EMBED: 65 tokens are refused: %s", err);
	llm_engine_destroy(e);
}

int
main(void)
{
	ref_model	rm;
	llm_engine *e;
	llm_request q;
	int32_t    *ids = NULL;
	int64_t		n;
	char		err[512];
	float	   *ref_last;

	model_path = getenv("LLM_TEST_MODEL");
	if (model_path == NULL)
		model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	e = make_engine(true, 512, 512);
	if (!CHECK(e != NULL, "engine") || !CHECK(ref_open(&rm), "the model alone through the model API"))
		return unit_done();
	if (!CHECK(rm.c->dim <= MAXDIM && llm_engine_n_embd(e) == rm.c->dim, "embedding length %d", rm.c->dim))
		return unit_done();
	embed_request(&q, embed_text);
	n = llm_engine_prompt_ids(e, &q, &ids, err, sizeof(err));
	if (!CHECK(n > 4 && n < BLOCK * N_BLOCKS, "the prompt's %lld ids", (long long) n))
		return unit_done();
	ref_last = malloc((size_t) rm.c->dim * sizeof(float));
	test_model_kinds(&rm, ids, (int) n, ref_last);
	test_engine_vectors(&rm, e, ref_last, (int) n);
	test_requests();
	free(ref_last);
	free(ids);
	llm_engine_destroy(e);
	ref_close(&rm);
	return unit_done();
}
