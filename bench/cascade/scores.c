/*
 * scores.c — the held set's scores of one model, as llm_filter and
 * llm_classify compute them (docs/CASCADES.md).
 *
 * Reads bench/cascade/rows.tsv (id<TAB>kind<TAB>text), builds for every row
 * the prompt the SQL function builds (pg/sql/ai_prompts.c: the same text,
 * user message under the model's chat template, each answer followed by the
 * end of turn) and submits all rows as SCORE requests to one engine, which
 * batches them.  Prints one line per row:
 *
 *   --filter QUESTION       id<TAB>p_yes     p_yes = softmax mass of
 *                                            {Yes, yes} among {Yes, yes, No, no}
 *                                            (llm_filter is true iff p_yes > 0.5)
 *   --classify A,B,C        id<TAB>p_A<TAB>p_B<TAB>p_C   softmax over the labels
 *
 * and on stderr one JSON line of cost: rows, wall and process CPU seconds
 * (CPU time stays meaningful on a shared host), prompt tokens, token rows
 * computed, milliseconds per call.  Timings are reported, never
 * asserted.
 *
 * --chat-template NAME: the model's template when its file has none (Gemma 3
 * 270M: gemma), as llm.chat_template sets it for the worker.
 *
 *   build/bench/cascade_scores -m MODEL.gguf [-t T] [-b B] [--chat-template NAME] --filter Q | --classify L1,L2,... ROWS.tsv
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "prompts.h"

#define MAX_LABELS 8

typedef struct row
{
	long		id;
	char	   *prompt;
	double		scores[MAX_LABELS];
	int			n_scores;
	int			prompt_tokens;
	char	   *error;
} row;

static double
clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
on_event(const llm_event *ev, void *arg)
{
	row		   *r = ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_ERROR)
		r->error = strdup(ev->text ? ev->text : "error");
	else if (ev->kind == LLM_EVENT_FINISHED && ev->scores != NULL)
	{
		r->n_scores = ev->n_scores < MAX_LABELS ? ev->n_scores : MAX_LABELS;
		memcpy(r->scores, ev->scores, sizeof(double) * r->n_scores);
		r->prompt_tokens = ev->usage.prompt_tokens;
	}
}

int
main(int argc, char **argv)
{
	const char *model = NULL,
			   *question = NULL,
			   *classify = NULL,
			   *path = NULL,
			   *chat_template = NULL;
	int			threads = 2,
				batch = 16,
				n_labels = 0,
				n_rows = 0,
				cap = 256;
	char	   *labels[MAX_LABELS];
	const char *conts[MAX_LABELS];
	size_t		lens[MAX_LABELS];
	static const char *const yes_no[4] = {"Yes", "yes", "No", "no"};
	row		   *rows;
	FILE	   *f;
	char		line[8192];
	llm_engine_config c;
	llm_engine *e;
	char		err[512];
	double		t0,
				cpu0,
				wall,
				cpu;
	long long	prompt_tokens = 0;
	llm_engine_stats es;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			model = argv[++i];
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (strcmp(argv[i], "--chat-template") == 0 && i + 1 < argc)
			chat_template = argv[++i];
		else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
			question = argv[++i];
		else if (strcmp(argv[i], "--classify") == 0 && i + 1 < argc)
			classify = argv[++i];
		else if (path == NULL && argv[i][0] != '-')
			path = argv[i];
		else
			path = NULL, model = NULL, i = argc;
	}
	if (model == NULL || path == NULL || (question == NULL) == (classify == NULL) || threads < 1 || batch < 1)
	{
		fprintf(stderr, "usage: cascade_scores -m MODEL [-t T] [-b B] --filter Q | --classify A,B,... ROWS.tsv\n");
		return 2;
	}
	if (classify != NULL)
	{
		char	   *copy = strdup(classify);

		for (char *tok = strtok(copy, ","); tok != NULL && n_labels < MAX_LABELS; tok = strtok(NULL, ","))
			labels[n_labels++] = tok;
		for (int i = 0; i < n_labels; i++)
			conts[i] = labels[i], lens[i] = strlen(labels[i]);
	}
	else
	{
		n_labels = 4;
		for (int i = 0; i < 4; i++)
			conts[i] = yes_no[i], lens[i] = strlen(yes_no[i]);
	}

	if ((f = fopen(path, "r")) == NULL)
	{
		perror(path);
		return 1;
	}
	rows = calloc(cap, sizeof(row));
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *t1 = strchr(line, '\t'),
				   *t2 = t1 ? strchr(t1 + 1, '\t') : NULL,
				   *nl;

		if (t2 == NULL)
			continue;
		if ((nl = strchr(t2 + 1, '\n')) != NULL)
			*nl = '\0';
		if (n_rows == cap)
		{
			rows = realloc(rows, sizeof(row) * (cap *= 2));
			memset(rows + n_rows, 0, sizeof(row) * (cap - n_rows));
		}
		rows[n_rows].id = atol(line);
		rows[n_rows].prompt = classify ? prompt_classify(t2 + 1, labels, n_labels) : prompt_filter(t2 + 1, question);
		n_rows++;
	}
	fclose(f);

	llm_engine_config_defaults(&c);
	c.model_path = model;
	c.device = "cpu";
	c.n_threads = threads;
	c.max_running = batch;
	if (chat_template != NULL)
		c.chat_template = chat_template;
	if ((e = llm_engine_create(&c, err, sizeof(err))) == NULL)
	{
		fprintf(stderr, "cascade_scores: %s: %s\n", model, err);
		return 1;
	}
	t0 = clock_s(CLOCK_MONOTONIC);
	cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (int i = 0; i < n_rows; i++)
	{
		llm_request r;

		llm_request_init(&r);
		r.prompt_kind = LLM_PROMPT_TEXT;
		r.prompt = rows[i].prompt;
		r.prompt_len = strlen(rows[i].prompt);
		r.mode = LLM_MODE_SCORE;
		r.n_continuations = n_labels;
		r.continuations = conts;
		r.continuation_lens = lens;
		r.continuation_eot = true;
		if (llm_engine_submit(e, (uint64_t) i + 1, &r, &rows[i], err, sizeof(err)) != LLM_OK)
		{
			fprintf(stderr, "cascade_scores: row %ld: %s\n", rows[i].id, err);
			return 1;
		}
	}
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
		{
			fprintf(stderr, "cascade_scores: engine step failed\n");
			return 1;
		}
	wall = clock_s(CLOCK_MONOTONIC) - t0;
	cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	llm_engine_get_stats(e, &es);

	for (int i = 0; i < n_rows; i++)
	{
		row		   *r = &rows[i];
		double		max = -INFINITY,
					sum = 0.0;

		if (r->error != NULL || r->n_scores != n_labels)
		{
			fprintf(stderr, "cascade_scores: row %ld failed: %s\n", r->id, r->error ? r->error : "no scores");
			return 1;
		}
		prompt_tokens += r->prompt_tokens;
		for (int k = 0; k < n_labels; k++)
			if (r->scores[k] > max)
				max = r->scores[k];
		for (int k = 0; k < n_labels; k++)
			sum += exp(r->scores[k] - max);
		printf("%ld", r->id);
		if (classify)
			for (int k = 0; k < n_labels; k++)
				printf("\t%.6f", exp(r->scores[k] - max) / sum);
		else
			printf("\t%.6f", (exp(r->scores[0] - max) + exp(r->scores[1] - max)) / sum);
		printf("\n");
	}
	fprintf(stderr, "{\"model\": \"%s\", \"rows\": %d, \"threads\": %d, \"batch\": %d, \"wall_s\": %.3f, "
			"\"cpu_s\": %.3f, \"prompt_tokens\": %lld, \"computed_tokens\": %lld, \"ms_per_call\": %.3f, "
			"\"cpu_ms_per_call\": %.3f}\n",
			model, n_rows, threads, batch, wall, cpu, prompt_tokens, (long long) es.computed_tokens,
			1000.0 * wall / n_rows, 1000.0 * cpu / n_rows);
	llm_engine_destroy(e);
	return 0;
}
