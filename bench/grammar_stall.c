/*
 * grammar_stall.c — what a new grammar costs the other sessions: one plain
 * request decodes (greedy, ignore_eos) while, after a few steps, a request
 * with a grammar the engine has not seen arrives; the gap between the
 * plain request's consecutive steps (end of one llm_engine_step to the end
 * of the next, the new request's llm_engine_submit included, as the worker
 * runs them) is recorded over its whole run.  Each round uses a fresh
 * engine, so the first grammar also brings the vocabulary's token index.
 *
 *   build/bench/grammar_stall [-m model.gguf] [-t THREADS] [-n N] [-r ROUNDS]
 *                             [--grammar maxlen1000|ticket|states32k]
 *
 * Prints per round: the plain request's median step gap; the largest gap
 * of the steps before the grammar request's first token (while its grammar
 * and the token index are being made) and of the steps after it; the gap
 * of the step the grammar request arrived before, and of the step that gave
 * it its first token (its prefill and first mask, which it costs whenever
 * its grammar was compiled); the submit call's own time, the grammar
 * request's time from submit to its first token, and the store's compile
 * and token-index times.  Uses only engine.h calls that
 * predate the compile thread, so the same source measures an engine that
 * compiles inside the submit.  Timings only, never asserted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

#define MAX_STEPS 4096

static const char *const grammars[][2] = {
	/* a string of up to 1000 characters (docs/STRUCTURED_OUTPUT.md: 68 ms) */
	{"maxlen1000", "\x03{\"type\":\"object\",\"properties\":{\"notes\":{\"type\":\"string\",\"maxLength\":1000}},"
	 "\"required\":[\"notes\"]}"},
	/* the 5-field ticket schema (realistic) */
	{"ticket", "\x03{\"type\":\"object\",\"properties\":{"
	 "\"product\":{\"enum\":[\"Cloud Suite\",\"Billing\",\"Router RX\",\"Sync\",\"Mobile App\"]},"
	 "\"priority\":{\"enum\":[\"low\",\"normal\",\"high\",\"urgent\"]},"
	 "\"customer\":{\"type\":[\"string\",\"null\"],\"maxLength\":40},"
	 "\"summary\":{\"type\":\"string\",\"maxLength\":120},"
	 "\"refund_requested\":{\"type\":\"boolean\"}},"
	 "\"required\":[\"product\",\"priority\",\"customer\",\"summary\",\"refund_requested\"]}"},
	/* 2^15 live states (the limit is 2^16): the n-th byte from the end is an 'a' */
	{"states32k", "\x02[ab]*a[ab]{14}"},
};

typedef struct stream
{
	int			n;
	bool		done;
	double		t_first;
} stream;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
on_event(const llm_event *ev, void *arg)
{
	stream	   *s = ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_TEXT)
	{
		if (ev->token_id >= 0 && s->n++ == 0)
			s->t_first = now_ms();
	}
	else
	{
		s->done = true;
		if (ev->kind == LLM_EVENT_ERROR)
			fprintf(stderr, "request failed: %s\n", ev->text);
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	const char *gname = "maxlen1000";
	const char *gsrc = NULL;
	int			threads = 0,
				n = 64,
				rounds = 1,
				arrive_after = 8;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			model = argv[++i];
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--grammar") == 0 && i + 1 < argc)
			gname = argv[++i];
		else
		{
			fprintf(stderr, "usage: %s [-m model] [-t threads] [-n tokens] [-r rounds] "
					"[--grammar maxlen1000|ticket|states32k]\n", argv[0]);
			return 2;
		}
	}
	for (size_t g = 0; g < sizeof(grammars) / sizeof(grammars[0]); g++)
		if (strcmp(grammars[g][0], gname) == 0)
			gsrc = grammars[g][1];
	if (gsrc == NULL || n < arrive_after + 4 || n > MAX_STEPS)
	{
		fprintf(stderr, "unknown grammar %s or -n out of range\n", gname);
		return 2;
	}
	printf("grammar %s, %d plain tokens, grammar request after step %d\n", gname, n, arrive_after);
	printf("round  gap_p50_ms  arrival_ms  max_waiting_ms  admit_ms  max_after_ms  submit_ms  grammar_ttft_ms  "
		   "compile_ms  index_ms\n");
	for (int round = 0; round < rounds; round++)
	{
		llm_engine_config c;
		llm_engine *e;
		char		err[1024];
		static double gaps[MAX_STEPS];
		int			n_gaps = 0;
		double		t_prev,
					t_submit = 0,
					submit_ms = 0,
					gap_arrival = 0,
					gap_admit = 0,
					gap_max_before = 0,
					gap_max_after = 0;
		stream		plain = {0},
					gram = {0};
		llm_request q;
		llm_grammar_store_stats gs;
		int			step = 0;

		llm_engine_config_defaults(&c);
		c.model_path = model;
		c.n_threads = threads;
		c.n_ctx = 2048;
		c.spec_tokens = 0;		/* one token per step: a step gap is a token gap */
		e = llm_engine_create(&c, err, sizeof(err));
		if (e == NULL)
		{
			fprintf(stderr, "engine: %s\n", err);
			return 1;
		}
		llm_request_init(&q);
		q.prompt = "Write a long story about a lighthouse keeper and the sea.";
		q.prompt_len = strlen(q.prompt);
		q.params.max_tokens = n;
		q.params.ignore_eos = true;
		if (llm_engine_submit(e, 1, &q, &plain, err, sizeof(err)) != LLM_OK)
		{
			fprintf(stderr, "submit: %s\n", err);
			return 1;
		}
		llm_engine_step(e, on_event, NULL);
		t_prev = now_ms();
		while (!plain.done && llm_engine_has_work(e))
		{
			int			before = plain.n,
						gram_before = gram.n;
			bool		arrival = false;
			double		t;

			if (++step == arrive_after)
			{
				llm_request g;

				llm_request_init(&g);
				g.prompt = "Take notes on this call as JSON: the customer wants a refund for March.";
				g.prompt_len = strlen(g.prompt);
				g.params.max_tokens = 8;
				g.grammar = gsrc;
				g.grammar_len = strlen(gsrc);
				t_submit = now_ms();
				if (llm_engine_submit(e, 2, &g, &gram, err, sizeof(err)) != LLM_OK)
				{
					fprintf(stderr, "grammar submit: %s\n", err);
					return 1;
				}
				submit_ms = now_ms() - t_submit;
				arrival = true;
			}
			if (llm_engine_step(e, on_event, NULL) != LLM_OK)
				break;
			t = now_ms();
			if (plain.n > before)
			{
				double		gap = t - t_prev;

				gaps[n_gaps++] = gap;
				if (arrival)
					gap_arrival = gap;
				if (gram_before == 0 && gram.n > 0)
					gap_admit = gap;
				else if (step >= arrive_after && gram.n == 0 && gap > gap_max_before)
					gap_max_before = gap;
				else if (gram.n > 0 && gap > gap_max_after)
					gap_max_after = gap;
				t_prev = t;
			}
		}
		while (llm_engine_has_work(e))
			if (llm_engine_step(e, on_event, NULL) != LLM_OK)
				break;
		llm_engine_grammar_stats(e, &gs);
		qsort(gaps, (size_t) n_gaps, sizeof(double), cmp_double);
		printf("%5d  %10.1f  %10.1f  %14.1f  %8.1f  %12.1f  %9.1f  %15.1f  %10.1f  %8.1f\n", round,
			   n_gaps ? gaps[n_gaps / 2] : 0.0, gap_arrival, gap_max_before, gap_admit, gap_max_after,
			   submit_ms, gram.n > 0 ? gram.t_first - t_submit : -1.0, gs.compile_ms_max, gs.index_ms);
		llm_engine_destroy(e);
	}
	return 0;
}
