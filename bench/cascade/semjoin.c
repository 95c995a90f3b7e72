/*
 * semjoin.c — a semantic join of L left rows with C candidates, two ways,
 * through the engine of this checkout (docs/SEMANTIC_JOINS.md):
 *
 *   pairs   every pair its own llm_filter request, as
 *             SELECT ... FROM l, c
 *             WHERE llm_filter(l.text || E'\n\nCandidate:\n' || c.name, question)
 *           computes it: L x C yes/no SCORE requests (the 4 answers forked
 *           from the pair's prompt, as llm_filter's);
 *   forked  llm_join(l.text, question, candidates): one request per left
 *           row and chunk of at most 64 candidates, the row's prompt
 *           computed once, each candidate's chat forked from it and each
 *           answer from that (request.h continuation_answers).
 *
 * Both submit all their requests at once and run the engine until idle
 * (batches of -b sequences).  Prints one JSON object: for each way the
 * requests, wall and process CPU seconds, prompt tokens and token rows
 * computed, pairs matched; the forked join's pair precision and recall
 * against the pairs' answers and how many pairs have bit-identical scores;
 * and, as a reference for the answers' quality, both ways against the
 * candidate each text names (a candidate matches a text that contains it
 * without its leading "the " or "my ").  Timings are reported, never
 * asserted.
 *
 *   build/bench/semjoin -m MODEL.gguf [-t T] [-b B] [-l L] [-q QUESTION] [--only forked]
 *                       ROWS.tsv CANDIDATES.txt
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "prompts.h"

#define MAX_CAND 64
#define SEPARATOR "\n\nCandidate:\n"

typedef struct slot
{
	double	   *scores;
	int			n;
	int			prompt_tokens;
	bool		failed;
} slot;

static int	n_finished;

static double
now_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
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
		n_finished++;
	}
}

static void
submit_score(llm_engine *e, uint64_t id, const char *prompt, const char *const *conts, int n, int answers,
			 slot *s)
{
	llm_request r;
	size_t		lens[MAX_CAND + 4];
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
	r.continuation_answers = answers;
	if (llm_engine_submit(e, id, &r, s, err, sizeof(err)) != LLM_OK)
	{
		fprintf(stderr, "semjoin: %s\n", err);
		exit(1);
	}
}

typedef struct cost
{
	int			requests;
	double		wall_s;
	double		cpu_s;
	long long	prompt_tokens;
	long long	computed;
	long long	matches;
	long long	steps;
} cost;

/* Run the engine until idle; what ran costs into *c. */
static void
drain(llm_engine *e, slot *slots, int n, double wall0, double cpu0, long long computed_before, cost *c)
{
	llm_engine_stats es;
	int			shown = 0;

	llm_engine_get_stats(e, &es);
	c->steps = es.n_steps;

	n_finished = 0;
	while (llm_engine_has_work(e))
	{
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
		{
			fprintf(stderr, "semjoin: engine step failed\n");
			exit(1);
		}
		if (n_finished >= shown + n / 10 && n >= 10)
		{
			shown = n_finished;
			fprintf(stderr, "semjoin: %d of %d requests, %.0f s\n", n_finished, n, now_s(CLOCK_MONOTONIC) - wall0);
		}
	}
	c->wall_s = now_s(CLOCK_MONOTONIC) - wall0;
	c->cpu_s = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	llm_engine_get_stats(e, &es);
	c->computed = es.computed_tokens - computed_before;
	c->steps = es.n_steps - c->steps;
	c->requests = n;
	c->prompt_tokens = 0;
	for (int i = 0; i < n; i++)
	{
		if (slots[i].failed || slots[i].scores == NULL)
		{
			fprintf(stderr, "semjoin: request %d failed\n", i);
			exit(1);
		}
		c->prompt_tokens += slots[i].prompt_tokens;
	}
}

/* llm_filter's decision over its 4 answers' scores (pg/sql/sql_result.c) */
static bool
yes(const double *s)
{
	double		my = fmax(s[0], s[1]),
				mn = fmax(s[2], s[3]);

	return my + log(exp(s[0] - my) + exp(s[1] - my)) > mn + log(exp(s[2] - mn) + exp(s[3] - mn));
}

/* Whether text names candidate (case-insensitively, without a leading "the " or "my "). */
static bool
names(const char *text, const char *candidate)
{
	const char *c = candidate;
	size_t		n;

	if (strncmp(c, "the ", 4) == 0)
		c += 4;
	else if (strncmp(c, "my ", 3) == 0)
		c += 3;
	n = strlen(c);
	for (const char *t = text; *t; t++)
		if (strncasecmp(t, c, n) == 0)
			return true;
	return false;
}

static void
print_cost(const char *name, const cost *c, bool comma)
{
	printf(" \"%s\": {\"requests\": %d, \"wall_s\": %.1f, \"cpu_s\": %.1f, \"prompt_tokens\": %lld, "
		   "\"computed_tokens\": %lld, \"steps\": %lld, \"matches\": %lld}%s\n",
		   name, c->requests, c->wall_s, c->cpu_s, c->prompt_tokens, c->computed, c->steps, c->matches,
		   comma ? "," : "");
}

int
main(int argc, char **argv)
{
	const char *model = NULL,
			   *rows_path = NULL,
			   *cand_path = NULL,
			   *chat_template = NULL,
			   *question = "Is the candidate the product that the text is about?";
	int			threads = 2,
				batch = 32,
				n_left = 100,
				n_cand = 0,
				nl = 0;
	bool		only_forked = false;
	char	   *left[4096],
			   *cand[MAX_CAND],
				line[8192];
	static const char *const answers[4] = {"Yes", "yes", "No", "no"};
	FILE	   *f;
	llm_engine_config c;
	llm_engine *e;
	char		err[512];
	slot	   *pairs,
			   *forked;
	bool	   *fork_yes,
			   *pair_yes;
	llm_engine_stats es;
	cost		cp = {0},
				cf = {0};
	long long	tp = 0,
				fp = 0,
				fn = 0,
				identical = 0,
				named = 0,
				f_named_tp = 0,
				p_named_tp = 0;

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
		else if (strcmp(argv[i], "-q") == 0 && i + 1 < argc)
			question = argv[++i];
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc && strcmp(argv[i + 1], "forked") == 0)
			only_forked = true, i++;
		else if (strcmp(argv[i], "--chat-template") == 0 && i + 1 < argc)
			chat_template = argv[++i];
		else if (rows_path == NULL && argv[i][0] != '-')
			rows_path = argv[i];
		else if (cand_path == NULL && argv[i][0] != '-')
			cand_path = argv[i];
		else
			model = NULL, i = argc;
	}
	if (model == NULL || rows_path == NULL || cand_path == NULL || n_left < 1)
	{
		fprintf(stderr, "usage: semjoin -m MODEL [-t T] [-b B] [-l L] [-q QUESTION] [--only forked] "
				"[--chat-template T] ROWS.tsv CANDIDATES.txt\n");
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

	/* forked: one request per left row (C <= 64: one chunk) */
	forked = calloc((size_t) n_left, sizeof(slot));
	fork_yes = calloc((size_t) n_left * n_cand, sizeof(bool));
	llm_engine_get_stats(e, &es);
	{
		long long	before = es.computed_tokens;
		double		w0 = now_s(CLOCK_MONOTONIC),
					c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
		const char *conts[MAX_CAND + 4];

		for (int b = 0; b < n_cand; b++)
			conts[b] = cand[b];
		for (int i = 0; i < 4; i++)
			conts[n_cand + i] = answers[i];
		for (int a = 0; a < n_left; a++)
		{
			char	   *in = malloc(strlen(left[a]) + sizeof(SEPARATOR));

			sprintf(in, "%s%s", left[a], SEPARATOR);
			submit_score(e, (uint64_t) a + 1, prompt_filter(in, question), conts, n_cand + 4, 4, &forked[a]);
		}
		drain(e, forked, n_left, w0, c0, before, &cf);
	}
	for (int a = 0; a < n_left; a++)
		for (int b = 0; b < n_cand; b++)
		{
			fork_yes[a * n_cand + b] = yes(forked[a].scores + 4 * b);
			cf.matches += fork_yes[a * n_cand + b];
			named += names(left[a], cand[b]);
			f_named_tp += fork_yes[a * n_cand + b] && names(left[a], cand[b]);
		}
	if (only_forked)
	{
		printf("{\"model\": \"%s\", \"left\": %d, \"candidates\": %d, \"threads\": %d, \"batch\": %d,\n",
			   model, n_left, n_cand, threads, batch);
		print_cost("forked", &cf, true);
		printf(" \"named_pairs\": %lld, \"forked_named_precision\": %.4f, \"forked_named_recall\": %.4f}\n",
			   named, cf.matches ? (double) f_named_tp / cf.matches : 1.0, named ? (double) f_named_tp / named : 1.0);
		llm_engine_destroy(e);
		return 0;
	}

	/* pairs: L x C llm_filter requests */
	pairs = calloc((size_t) n_left * n_cand, sizeof(slot));
	pair_yes = calloc((size_t) n_left * n_cand, sizeof(bool));
	llm_engine_get_stats(e, &es);
	{
		long long	before = es.computed_tokens;
		double		w0 = now_s(CLOCK_MONOTONIC),
					c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);

		for (int a = 0; a < n_left; a++)
			for (int b = 0; b < n_cand; b++)
			{
				char	   *in = malloc(strlen(left[a]) + sizeof(SEPARATOR) + strlen(cand[b]));

				sprintf(in, "%s%s%s", left[a], SEPARATOR, cand[b]);
				submit_score(e, 1000000 + (uint64_t) (a * n_cand + b), prompt_filter(in, question), answers, 4, 0,
							 &pairs[a * n_cand + b]);
			}
		drain(e, pairs, n_left * n_cand, w0, c0, before, &cp);
	}
	for (int a = 0; a < n_left; a++)
		for (int b = 0; b < n_cand; b++)
		{
			int			i = a * n_cand + b;
			bool		t = pair_yes[i] = yes(pairs[i].scores),
						p = fork_yes[i];

			cp.matches += t;
			tp += t && p;
			fp += !t && p;
			fn += t && !p;
			identical += memcmp(pairs[i].scores, forked[a].scores + 4 * b, 4 * sizeof(double)) == 0;
			p_named_tp += t && names(left[a], cand[b]);
		}
	printf("{\"model\": \"%s\", \"left\": %d, \"candidates\": %d, \"threads\": %d, \"batch\": %d,\n",
		   model, n_left, n_cand, threads, batch);
	print_cost("pairs", &cp, true);
	print_cost("forked", &cf, true);
	printf(" \"pair_precision\": %.4f, \"pair_recall\": %.4f, \"pairs_bit_identical\": %lld,\n"
		   " \"named_pairs\": %lld, \"pairs_named_precision\": %.4f, \"pairs_named_recall\": %.4f, "
		   "\"forked_named_precision\": %.4f, \"forked_named_recall\": %.4f}\n",
		   tp + fp > 0 ? (double) tp / (double) (tp + fp) : 1.0,
		   tp + fn > 0 ? (double) tp / (double) (tp + fn) : 1.0, identical,
		   named, cp.matches ? (double) p_named_tp / cp.matches : 1.0, named ? (double) p_named_tp / named : 1.0,
		   cf.matches ? (double) f_named_tp / cf.matches : 1.0, named ? (double) f_named_tp / named : 1.0);
	llm_engine_destroy(e);
	return 0;
}
