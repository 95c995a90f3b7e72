/*
 * test_embed_batch.c — an encoder's inputs batched: with the engine's
 * default settings (the batch class's 128-token prefill cap and 100 ms
 * short-step cap included, which bound chunked prefills only)
 * several whole inputs of the batch class share a step, and every input's
 * vector is bit-identical to the vector of that input embedded alone,
 * whatever the batch's order and its other inputs (each input attends
 * only to its own tokens; every row is computed by the same kernels in any
 * batch).  Also in the interactive class and mixed with it.
 * Model: all-MiniLM-L6-v2 ($LLM_TEST_MODEL_MINILM, else next to
 * $LLM_TEST_MODEL, else models/); skipped when absent (make model
 * MODEL=minilm).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "unit.h"

#define MINILM_FILE "all-MiniLM-L6-v2.F16.gguf"
#define N_TEXTS 12
#define MAXDIM 1024

typedef struct result
{
	bool		done;
	llm_event_kind kind;
	float		vec[MAXDIM];
	int32_t		n_vec;
	int32_t		prompt_tokens;
} result;

static const char *texts[N_TEXTS] = {
	"Hi.",
	"The printer stopped working after the update.",
	"I was charged twice for my subscription this month; please refund the second charge to my card.",
	"PostgreSQL stores a table as a heap of 8 kB pages; each row version carries the ids of the "
	"transactions that created and deleted it, so readers never block writers, and vacuum later "
	"removes the versions no snapshot can see any more.",
	"Wie setze ich mein Passwort zurück?",
	"dark mode",
	"A B-tree index keeps its keys sorted in pages linked left to right, so a range scan reads "
	"neighbouring leaves in order; an insert that fills a page splits it and posts the new "
	"separator key to the parent, which may split in turn.",
	"The app crashes on start.",
	"¿Dónde está mi pedido? Lo compré hace dos semanas y todavía no ha llegado.",
	"Login fails with error 403 since this morning, on every browser I tried, even after clearing "
	"cookies and the cache.",
	"ok",
	"Export the report as CSV and mail it to finance before Friday.",
};

static void
on_event(const llm_event *ev, void *arg)
{
	result	   *r = ev->user_data;

	if (ev->kind == LLM_EVENT_TEXT)
		return;
	r->done = true;
	r->kind = ev->kind;
	r->prompt_tokens = ev->usage.prompt_tokens;
	if (ev->kind == LLM_EVENT_VECTOR && ev->n_vector <= MAXDIM)
	{
		memcpy(r->vec, ev->vector, (size_t) ev->n_vector * sizeof(float));
		r->n_vec = ev->n_vector;
	}
}

static const char *
minilm_path(char *buf, size_t cap)
{
	const char *p = getenv("LLM_TEST_MODEL_MINILM");
	const char *smol = getenv("LLM_TEST_MODEL");

	if (p != NULL && p[0] != '\0')
		return p;
	if (smol != NULL && strrchr(smol, '/') != NULL)
	{
		snprintf(buf, cap, "%.*s/" MINILM_FILE, (int) (strrchr(smol, '/') - smol), smol);
		if (access(buf, R_OK) == 0)
			return buf;
	}
	return "models/" MINILM_FILE;
}

static bool
submit(llm_engine *e, uint64_t id, const char *text, llm_priority prio, result *r)
{
	llm_request q;
	char		err[512];

	memset(r, 0, sizeof(*r));
	llm_request_init(&q);
	q.mode = LLM_MODE_EMBED;
	q.prompt_kind = LLM_PROMPT_RAW;
	q.prompt = text;
	q.prompt_len = strlen(text);
	q.priority = prio;
	if (llm_engine_submit(e, id, &q, r, err, sizeof(err)) != LLM_OK)
	{
		printf("# submit %llu: %s\n", (unsigned long long) id, err);
		return false;
	}
	return true;
}

/* Steps taken until no work is left. */
static int64_t
run_all(llm_engine *e)
{
	llm_engine_stats st;
	int64_t		before;

	llm_engine_get_stats(e, &st);
	before = st.n_steps;
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
			break;
	llm_engine_get_stats(e, &st);
	return st.n_steps - before;
}

static bool
same_vector(const result *a, const result *b)
{
	return a->done && b->done && a->kind == LLM_EVENT_VECTOR && b->kind == LLM_EVENT_VECTOR &&
		a->n_vec == b->n_vec && a->n_vec > 0 && memcmp(a->vec, b->vec, (size_t) a->n_vec * sizeof(float)) == 0;
}

int
main(void)
{
	char		buf[4096];
	const char *path = minilm_path(buf, sizeof(buf));
	llm_engine_config c;
	llm_engine *e;
	char		err[512];
	static result solo[N_TEXTS],
				batch[N_TEXTS],
				rev[N_TEXTS],
				mixed[N_TEXTS];
	int			n_same;
	int64_t		steps;
	int32_t		tokens = 0;
	llm_engine_stats st;

	if (access(path, R_OK) != 0)
	{
		SKIP("%s not found (make model MODEL=minilm)", path);
		return unit_done();
	}
	llm_engine_config_defaults(&c);
	c.model_path = path;
	c.n_threads = 2;
	e = llm_engine_create(&c, err, sizeof(err));
	if (!CHECK(e != NULL, "engine on %s with the default settings: %s", path, e ? "" : err))
		return unit_done();
	printf("# max_batched_tokens %d, batch_prefill_tokens %d\n", c.max_batched_tokens, c.batch_prefill_tokens);

	/* each input alone */
	n_same = 0;
	for (int i = 0; i < N_TEXTS; i++)
		if (submit(e, 100 + i, texts[i], LLM_PRIORITY_BATCH, &solo[i]))
		{
			run_all(e);
			n_same += solo[i].done && solo[i].kind == LLM_EVENT_VECTOR && solo[i].n_vec == 384;
			tokens += solo[i].prompt_tokens;
		}
	CHECK(n_same == N_TEXTS, "%d inputs alone: a 384-float vector each (%d tokens in all)", N_TEXTS, tokens);

	/* all at once, batch class */
	n_same = 0;
	for (int i = 0; i < N_TEXTS; i++)
		submit(e, 200 + i, texts[i], LLM_PRIORITY_BATCH, &batch[i]);
	steps = run_all(e);
	llm_engine_get_stats(e, &st);
	for (int i = 0; i < N_TEXTS; i++)
		n_same += same_vector(&batch[i], &solo[i]);
	CHECK(n_same == N_TEXTS, "batch class, all at once: %d of %d vectors bit-identical to alone", n_same, N_TEXTS);
	CHECK(steps == 1 && st.last_batch_seqs == N_TEXTS && st.last_batch_tokens == tokens,
		  "all %d inputs (%d tokens) in one step, past the 128-token batch prefill cap and the short-step cap, "
		  "under max_batched_tokens (%lld steps, the last of %d inputs and %d tokens)", N_TEXTS, tokens,
		  (long long) steps, st.last_batch_seqs, st.last_batch_tokens);

	/* reversed order: other neighbours in each step */
	n_same = 0;
	for (int i = N_TEXTS - 1; i >= 0; i--)
		submit(e, 300 + i, texts[i], LLM_PRIORITY_BATCH, &rev[i]);
	run_all(e);
	for (int i = 0; i < N_TEXTS; i++)
		n_same += same_vector(&rev[i], &solo[i]);
	CHECK(n_same == N_TEXTS, "batch class, reversed: %d of %d vectors bit-identical to alone", n_same, N_TEXTS);

	/* interactive and batch inputs mixed */
	n_same = 0;
	for (int i = 0; i < N_TEXTS; i++)
		submit(e, 400 + i, texts[i], i % 3 == 0 ? LLM_PRIORITY_INTERACTIVE : LLM_PRIORITY_BATCH, &mixed[i]);
	run_all(e);
	for (int i = 0; i < N_TEXTS; i++)
		n_same += same_vector(&mixed[i], &solo[i]);
	CHECK(n_same == N_TEXTS, "interactive and batch mixed: %d of %d vectors bit-identical to alone", n_same, N_TEXTS);

	llm_engine_get_stats(e, &st);
	CHECK(st.n_running == 0 && st.n_waiting == 0 && st.kv_blocks_used == 0, "nothing left running, no KV held");
	llm_engine_destroy(e);
	return unit_done();
}
