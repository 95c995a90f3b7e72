/*
 * multi_model.c — two engines served by one driver, the two ways a worker
 * could step them (docs/MODELS.md, "The step loop"):
 *
 *   turns   one thread steps engine A, then engine B, then A, ...; both
 *           engines' CPU backends share one pool of T compute threads
 *           (llm_engine_config.shared_threads), so every step has all T
 *   split   two threads, one per engine, each engine with a pool of its own
 *           of T/2 threads, stepping at the same time
 *   alone   engine A alone on T threads (the reference for one model)
 *
 * Engine A gets B requests, engine B gets B2 (-B, default B; 0 = B idle,
 * the case where one model has all the work), each of P random prompt
 * token ids (fixed seed, greedy, ignore_eos, N new tokens).  Prints one JSON object: wall time,
 * tokens generated per engine and aggregate, and the time to the last
 * token of each engine.  Timings are reported, never asserted.
 *
 *   build/bench/multi_model -m A.gguf [-M B.gguf] [-b B] [-B B2] [-p P] [-n N] [-t T] --mode turns|split|alone
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

typedef struct run
{
	llm_engine *e;
	int64_t		tokens;
	double		t_done;			/* seconds from the start to its last token */
	llm_status	st;
} run;

static double t0;

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
	run		   *r = arg;

	if (ev->kind == LLM_EVENT_TEXT && ev->token_id >= 0)
		r->tokens++;
	if (ev->kind == LLM_EVENT_ERROR)
		r->st = ev->status;
}

static llm_engine *
open_engine(const char *path, int threads, bool shared, int batch)
{
	llm_engine_config c;
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&c);
	c.model_path = path;
	c.device = "cpu";
	c.n_threads = threads;
	c.shared_threads = shared;
	c.n_ctx = 1024;
	c.max_running = batch;
	c.prefix_caching = false;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
	{
		fprintf(stderr, "multi_model: %s: %s\n", path, err);
		exit(1);
	}
	return e;
}

static void
submit(llm_engine *e, int batch, int n_prompt, int n_gen, uint64_t seed, uint64_t id0)
{
	int32_t    *ids = malloc(sizeof(int32_t) * n_prompt);
	llm_sampling_params p;
	char		err[256];

	llm_sampling_params_defaults(&p);
	p.max_tokens = n_gen;
	p.ignore_eos = true;
	for (int b = 0; b < batch; b++)
	{
		for (int i = 0; i < n_prompt; i++)
		{
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			ids[i] = 1000 + (int32_t) ((seed >> 33) % 48000);
		}
		if (llm_engine_add_request(e, id0 + b, ids, n_prompt, &p, NULL, err, sizeof(err)) != LLM_OK)
		{
			fprintf(stderr, "multi_model: submit: %s\n", err);
			exit(1);
		}
	}
	free(ids);
}

static void
step_one(run *r)
{
	if (r->e == NULL || !llm_engine_has_work(r->e))
		return;
	if (llm_engine_step(r->e, on_event, r) != LLM_OK)
		r->st = LLM_ERR_BACKEND;
	if (!llm_engine_has_work(r->e))
		r->t_done = now_s() - t0;
}

static void *
drive(void *arg)
{
	run		   *r = arg;

	while (llm_engine_has_work(r->e))
		step_one(r);
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *a = NULL,
			   *b = NULL,
			   *mode = "turns";
	int			batch = 4,
				batch_b = -1,
				n_prompt = 32,
				n_gen = 64,
				threads = 2;
	run			ra = {0},
				rb = {0};
	double		wall;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			a = argv[++i];
		else if (strcmp(argv[i], "-M") == 0 && i + 1 < argc)
			b = argv[++i];
		else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (strcmp(argv[i], "-B") == 0 && i + 1 < argc)
			batch_b = atoi(argv[++i]);
		else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
			n_prompt = atoi(argv[++i]);
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n_gen = atoi(argv[++i]);
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
			mode = argv[++i];
		else
		{
			fprintf(stderr, "usage: multi_model -m A.gguf [-M B.gguf] [-b B] [-B B2] [-p P] [-n N] [-t T] "
					"--mode turns|split|alone\n");
			return 2;
		}
	}
	if (a == NULL || batch < 1 || n_prompt < 1 || n_gen < 1 || threads < 1)
	{
		fprintf(stderr, "multi_model: -m MODEL and positive -b, -p, -n, -t are required\n");
		return 2;
	}
	if (b == NULL)
		b = a;
	if (batch_b < 0)
		batch_b = batch;
	if (strcmp(mode, "split") == 0 && threads < 2)
	{
		fprintf(stderr, "multi_model: split needs -t >= 2\n");
		return 2;
	}

	if (strcmp(mode, "turns") == 0)
	{
		ra.e = open_engine(a, threads, true, batch);
		rb.e = open_engine(b, threads, true, batch);
	}
	else if (strcmp(mode, "split") == 0)
	{
		ra.e = open_engine(a, threads / 2, false, batch);
		rb.e = open_engine(b, threads - threads / 2, false, batch);
	}
	else if (strcmp(mode, "alone") == 0)
		ra.e = open_engine(a, threads, false, batch);
	else
	{
		fprintf(stderr, "multi_model: unknown mode %s\n", mode);
		return 2;
	}
	submit(ra.e, batch, n_prompt, n_gen, 1, 1);
	if (rb.e && batch_b > 0)
		submit(rb.e, batch_b, n_prompt, n_gen, 2, 1);

	t0 = now_s();
	if (strcmp(mode, "split") == 0)
	{
		pthread_t	ta,
					tb;

		pthread_create(&ta, NULL, drive, &ra);
		pthread_create(&tb, NULL, drive, &rb);
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
	}
	else
		while (llm_engine_has_work(ra.e) || (rb.e && llm_engine_has_work(rb.e)))
		{
			step_one(&ra);
			step_one(&rb);
		}
	wall = now_s() - t0;
	if (ra.st != LLM_OK || rb.st != LLM_OK)
	{
		fprintf(stderr, "multi_model: a request failed\n");
		return 1;
	}
	printf("{\"mode\": \"%s\", \"threads\": %d, \"batch\": %d, \"batch_b\": %d, \"prompt_tokens\": %d, \"new_tokens\": %d, "
		   "\"wall_s\": %.4f, \"a_tokens\": %lld, \"b_tokens\": %lld, \"a_done_s\": %.4f, \"b_done_s\": %.4f, "
		   "\"aggregate_tps\": %.2f}\n",
		   mode, threads, batch, rb.e ? batch_b : 0, n_prompt, n_gen, wall, (long long) ra.tokens, (long long) rb.tokens,
		   ra.t_done, rb.t_done, (double) (ra.tokens + rb.tokens) / wall);
	llm_engine_destroy(ra.e);
	if (rb.e)
		llm_engine_destroy(rb.e);
	return 0;
}
