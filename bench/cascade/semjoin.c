/*
 * semjoin.c — a semantic join of L left rows with C candidates, two ways
 * (docs/CASCADES.md, "Semantic joins"):
 *
 *   pairs   every pair scored on its own, as
 *             SELECT ... FROM l, c WHERE llm_filter(l.text, 'Is this text about ' || c.name || '?')
 *           computes it: L x C yes/no SCORE requests; a pair matches when
 *           p(yes) > 0.5 (llm_filter's answer)
 *   forked  one request per left row, llm_classify's form: the prompt lists
 *           a chunk of candidates, each candidate a continuation of the one
 *           prompt (the engine computes the prompt once and forks one
 *           sequence per candidate, sharing its KV blocks); the left row
 *           matches the candidate with the highest log-likelihood over its
 *           chunks (a row matches exactly one candidate)
 *
 * Prints one JSON object: for each way the requests, wall seconds, prompt
 * tokens and token rows computed; the forked join's pair precision and
 * recall against the pairs' answers (the n x m answers taken as the truth),
 * and how many left rows have no or several pair matches.  Timings are
 * reported, never asserted.
 *
 *   build/bench/semjoin -m MODEL.gguf [-t T] [-b B] [-l L] [--chunk K] ROWS.tsv CANDIDATES.txt
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "prompts.h"

#define MAX_CAND 256

typedef struct slot
{
	double	   *scores;
	int			n;
	int			prompt_tokens;
	bool		failed;
} slot;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
on_event(const llm_event *ev, void *arg)
{
	slot	   *s = ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_ERROR)
		s->failed = true;
	else if (ev->kind == LLM_EVENT_FINISHED && ev->scores != NULL)
	{
		s->scores = malloc(sizeof(double) * ev->n_scores);
		memcpy(s->scores, ev->scores, sizeof(double) * ev->n_scores);
		s->n = ev->n_scores;
		s->prompt_tokens = ev->usage.prompt_tokens;
	}
}

static void
submit_score(llm_engine *e, uint64_t id, const char *prompt, const char *const *conts, int n, slot *s)
{
	llm_request r;
	size_t		lens[MAX_CAND];
	char		err[512];

	for (int i = 0; i < n; i++)
		lens[i] = strlen(conts[i]);
	llm_request_init(&r);
	r.prompt_kind = LLM_PROMPT_TEXT;
	r.prompt = prompt;
	r.prompt_len = strlen(prompt);
	r.mode = LLM_MODE_SCORE;
	r.n_continuations = n;
	r.continuations = conts;
	r.continuation_lens = lens;
	r.continuation_eot = true;
	if (llm_engine_submit(e, id, &r, s, err, sizeof(err)) != LLM_OK)
	{
		fprintf(stderr, "semjoin: %s\n", err);
		exit(1);
	}
}

/* Run the engine until idle; the wall seconds, prompt tokens and rows computed of what ran. */
static void
drain(llm_engine *e, slot *slots, int n, double t0, double *wall, long long *prompt_tokens, long long *computed,
	  long long computed_before)
{
	llm_engine_stats es;

	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
		{
			fprintf(stderr, "semjoin: engine step failed\n");
			exit(1);
		}
	*wall = now_s() - t0;
	llm_engine_get_stats(e, &es);
	*computed = es.computed_tokens - computed_before;
	*prompt_tokens = 0;
	for (int i = 0; i < n; i++)
	{
		if (slots[i].failed || slots[i].scores == NULL)
		{
			fprintf(stderr, "semjoin: request %d failed\n", i);
			exit(1);
		}
		*prompt_tokens += slots[i].prompt_tokens;
	}
}

int
main(int argc, char **argv)
{
	const char *model = NULL,
			   *rows_path = NULL,
			   *cand_path = NULL,
			   *chat_template = NULL;
	int			threads = 2,
				batch = 32,
				n_left = 100,
				chunk = 30,
				n_cand = 0,
				nl = 0;
	char	   *left[4096],
			   *cand[MAX_CAND],
				line[8192];
	static const char *const yes_no[4] = {"Yes", "yes", "No", "no"};
	FILE	   *f;
	llm_engine_config c;
	llm_engine *e;
	char		err[512];
	slot	   *pairs,
			   *forked;
	bool	   *truth;
	int		   *match;
	int			n_chunks;
	double		t0,
				wall_pairs,
				wall_forked;
	long long	pt_pairs,
				pt_forked,
				comp_pairs,
				comp_forked;
	llm_engine_stats es;
	long long	tp = 0,
				fp = 0,
				fn = 0;
	int			rows_none = 0,
				rows_many = 0;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			model = argv[++i];
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (strcmp(argv[i], "-l") == 0 && i + 1 < argc)
			n_left = atoi(argv[++i]);
		else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc)
			chunk = atoi(argv[++i]);
		else if (strcmp(argv[i], "--chat-template") == 0 && i + 1 < argc)
			chat_template = argv[++i];
		else if (rows_path == NULL && argv[i][0] != '-')
			rows_path = argv[i];
		else if (cand_path == NULL && argv[i][0] != '-')
			cand_path = argv[i];
		else
			model = NULL, i = argc;
	}
	if (model == NULL || rows_path == NULL || cand_path == NULL || chunk < 1 || chunk > MAX_CAND || n_left < 1)
	{
		fprintf(stderr, "usage: semjoin -m MODEL [-t T] [-b B] [-l L] [--chunk K] [--chat-template T] ROWS.tsv CANDIDATES.txt\n");
		return 2;
	}
	if ((f = fopen(rows_path, "r")) == NULL)
		return perror(rows_path), 1;
	while (nl < n_left && nl < 4096 && fgets(line, sizeof(line), f) != NULL)
	{
		char	   *t1 = strchr(line, '\t'),
				   *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;

		if (t2 == NULL)
			continue;
		t2[strcspn(t2, "\n")] = '\0';
		left[nl++] = strdup(t2 + 1);
	}
	fclose(f);
	if ((f = fopen(cand_path, "r")) == NULL)
		return perror(cand_path), 1;
	while (n_cand < MAX_CAND && fgets(line, sizeof(line), f) != NULL)
	{
		line[strcspn(line, "\n")] = '\0';
		if (line[0] != '\0')
			cand[n_cand++] = strdup(line);
	}
	fclose(f);
	n_left = nl;
	n_chunks = (n_cand + chunk - 1) / chunk;

	llm_engine_config_defaults(&c);
	c.model_path = model;
	c.device = "cpu";
	c.n_threads = threads;
	c.max_running = batch;
	if (chat_template != NULL)
		c.chat_template = chat_template;
	if ((e = llm_engine_create(&c, err, sizeof(err))) == NULL)
	{
		fprintf(stderr, "semjoin: %s: %s\n", model, err);
		return 1;
	}

	/* pairs: L x C yes/no requests */
	pairs = calloc((size_t) n_left * n_cand, sizeof(slot));
	llm_engine_get_stats(e, &es);
	{
		long long	before = es.computed_tokens;

		t0 = now_s();
		for (int a = 0; a < n_left; a++)
			for (int b = 0; b < n_cand; b++)
			{
				char		q[512];

				snprintf(q, sizeof(q), "Is this text about %s?", cand[b]);
				submit_score(e, (uint64_t) (a * n_cand + b) + 1, prompt_filter(left[a], q), yes_no, 4,
							 &pairs[a * n_cand + b]);
			}
		drain(e, pairs, n_left * n_cand, t0, &wall_pairs, &pt_pairs, &comp_pairs, before);
	}
	truth = calloc((size_t) n_left * n_cand, sizeof(bool));
	for (int i = 0; i < n_left * n_cand; i++)
	{
		double	   *s = pairs[i].scores,
					m = fmax(fmax(s[0], s[1]), fmax(s[2], s[3])),
					yes = exp(s[0] - m) + exp(s[1] - m),
					no = exp(s[2] - m) + exp(s[3] - m);

		truth[i] = yes > no;
	}

	/* forked: one request per left row and chunk of candidates */
	forked = calloc((size_t) n_left * n_chunks, sizeof(slot));
	llm_engine_get_stats(e, &es);
	{
		long long	before = es.computed_tokens;

		t0 = now_s();
		for (int a = 0; a < n_left; a++)
			for (int k = 0; k < n_chunks; k++)
			{
				int			lo = k * chunk,
							n = n_cand - lo < chunk ? n_cand - lo : chunk;

				submit_score(e, 1000000 + (uint64_t) (a * n_chunks + k), prompt_classify(left[a], cand + lo, n),
							 (const char *const *) cand + lo, n, &forked[a * n_chunks + k]);
			}
		drain(e, forked, n_left * n_chunks, t0, &wall_forked, &pt_forked, &comp_forked, before);
	}
	match = calloc((size_t) n_left, sizeof(int));
	for (int a = 0; a < n_left; a++)
	{
		double		best = -INFINITY;
		int			n_true = 0;

		for (int k = 0; k < n_chunks; k++)
			for (int j = 0; j < forked[a * n_chunks + k].n; j++)
				if (forked[a * n_chunks + k].scores[j] > best)
				{
					best = forked[a * n_chunks + k].scores[j];
					match[a] = k * chunk + j;
				}
		for (int b = 0; b < n_cand; b++)
		{
			bool		t = truth[a * n_cand + b],
						p = match[a] == b;

			n_true += t;
			tp += t && p;
			fp += !t && p;
			fn += t && !p;
		}
		rows_none += n_true == 0;
		rows_many += n_true > 1;
	}
	printf("{\"model\": \"%s\", \"left\": %d, \"candidates\": %d, \"chunk\": %d, \"threads\": %d, \"batch\": %d,\n"
		   " \"pairs\": {\"requests\": %d, \"wall_s\": %.3f, \"prompt_tokens\": %lld, \"computed_tokens\": %lld, "
		   "\"matches\": %lld},\n"
		   " \"forked\": {\"requests\": %d, \"wall_s\": %.3f, \"prompt_tokens\": %lld, \"computed_tokens\": %lld, "
		   "\"matches\": %d},\n"
		   " \"pair_precision\": %.4f, \"pair_recall\": %.4f, \"left_rows_no_pair_match\": %d, "
		   "\"left_rows_several_pair_matches\": %d}\n",
		   model, n_left, n_cand, chunk, threads, batch,
		   n_left * n_cand, wall_pairs, pt_pairs, comp_pairs, tp + fn,
		   n_left * n_chunks, wall_forked, pt_forked, comp_forked, n_left,
		   tp + fp > 0 ? (double) tp / (double) (tp + fp) : 1.0,
		   tp + fn > 0 ? (double) tp / (double) (tp + fn) : 1.0, rows_none, rows_many);
	llm_engine_destroy(e);
	return 0;
}
