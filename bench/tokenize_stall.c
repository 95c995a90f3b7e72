/*
 * tokenize_stall.c — what a large prompt and a large llm_tokenize() text
 * cost the other sessions: S plain requests decode (greedy, ignore_eos)
 * while, after a few steps, a request with a prompt of B bytes arrives
 * (under the size bound, so it is tokenized, then refused as too long for
 * the context), and later a tokenize request of B bytes.  The gap between
 * consecutive steps that gave the plain requests their tokens (end of one
 * llm_engine_step to the end of the next, the arrivals' own calls
 * included, as the worker runs them) is recorded over the whole run.
 *
 *   build/bench/tokenize_stall [-m model.gguf] [-t THREADS] [-s STREAMS]
 *                              [-n N] [-b BYTES] [-r ROUNDS]
 *
 * Prints per round: the median and the 90th percentile step gap (of all
 * steps: what the machine's own noise gives); for the prompt and for the
 * tokenize text, the gap of the step its call came before, the largest gap
 * until its answer (the ERROR event or the ids), the call's own time and
 * the time from the call to the answer.  Built against an engine without
 * llm_engine_tokenize_request (LLM_TOKENIZE_INLINE_BYTES undefined), the
 * tokenize text is tokenized with llm_engine_tokenize between two steps,
 * as that engine's worker did; so the same source measures before and
 * after.  Timings only, never asserted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

#define MAX_STEPS 4096
#define MAX_STREAMS 64

typedef struct stream
{
	int			n;
	bool		done;
	double		t_end;			/* when its final event came */
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
		if (ev->token_id >= 0)
			s->n++;
		return;
	}
	s->done = true;
	s->t_end = now_ms();
#ifdef LLM_TOKENIZE_INLINE_BYTES
	if (ev->kind == LLM_EVENT_TOKENS)
		s->n = (int) ev->n_ids;
#endif
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* b bytes of English-like text, every word different enough to keep the BPE busy */
static char *
make_text(size_t b)
{
	static const char *const words[] = {"the", "keeper", "walked", "along", "shore", "at", "night", "and",
		"counted", "ships", "lighthouse", "storm", "harbour", "waves", "broke", "over", "rocks", "while",
	"gulls", "cried", "1987", "lantern", "oil", "north", "wind,", "quiet."};
	char	   *s = malloc(b + 1);
	size_t		at = 0;
	unsigned	x = 12345;

	while (at < b)
	{
		const char *w;
		size_t		n;

		x = x * 1103515245u + 12345u;
		w = words[(x >> 16) % (sizeof(words) / sizeof(words[0]))];
		n = strlen(w);
		if (at + n + 1 > b)
			break;
		memcpy(s + at, w, n);
		at += n;
		s[at++] = ' ';
	}
	while (at < b)
		s[at++] = '.';
	s[b] = '\0';
	return s;
}

int
main(int argc, char **argv)
{
	const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	int			threads = 1,
				n_streams = 4,
				n = 96,
				rounds = 1,
				prompt_at = 8,
				tokenize_at = 40;
	size_t		bytes = 1000000;
	char	   *text;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			model = argv[++i];
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
			n_streams = atoi(argv[++i]);
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			bytes = (size_t) atol(argv[++i]);
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else
		{
			fprintf(stderr, "usage: %s [-m model] [-t threads] [-s streams] [-n tokens] [-b bytes] [-r rounds]\n",
					argv[0]);
			return 2;
		}
	}
	if (n < tokenize_at + 16 || n > MAX_STEPS || n_streams < 1 || n_streams > MAX_STREAMS)
	{
		fprintf(stderr, "-n must be in [%d, %d], -s in [1, %d]\n", tokenize_at + 16, MAX_STEPS, MAX_STREAMS);
		return 2;
	}
	text = make_text(bytes);
#ifdef LLM_TOKENIZE_INLINE_BYTES
	printf("engine with the tokenizer thread (inline below %d bytes)\n", LLM_TOKENIZE_INLINE_BYTES);
#else
	printf("engine tokenizing on the driver thread\n");
#endif
	printf("%d streams x %d tokens, %d threads; a %zu-byte prompt after step %d, a %zu-byte tokenize after step %d\n",
		   n_streams, n, threads, bytes, prompt_at, bytes, tokenize_at);
	printf("round  gap_p50_ms  gap_p90_ms  prompt: arrival_ms  max_ms  call_ms  answer_ms  tokenize: arrival_ms  max_ms  "
		   "call_ms  answer_ms  ids\n");
	for (int round = 0; round < rounds; round++)
	{
		llm_engine_config c;
		llm_engine *e;
		char		err[1024];
		static double gaps[MAX_STEPS];
		int			n_gaps = 0,
					step = 0;
		double		t_prev;
		stream		plain[MAX_STREAMS] = {{0}},
					big = {0},
					tok = {0};
		double		p_call = 0,
					p_t0 = 0,
					p_arrival = 0,
					p_max = 0,
					t_call = 0,
					t_t0 = 0,
					t_arrival = 0,
					t_max = 0;
		int64_t		n_ids = -1;
		llm_request q;

		llm_engine_config_defaults(&c);
		c.model_path = model;
		c.n_threads = threads;
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
		for (int s = 0; s < n_streams; s++)
			if (llm_engine_submit(e, (uint64_t) s + 1, &q, &plain[s], err, sizeof(err)) != LLM_OK)
			{
				fprintf(stderr, "submit: %s\n", err);
				return 1;
			}
		llm_engine_step(e, on_event, NULL);
		t_prev = now_ms();
		while (!plain[0].done && llm_engine_has_work(e))
		{
			int			before = plain[0].n;
			bool		p_now = false,
						t_now = false;
			double		t;

			if (++step == prompt_at)
			{
				llm_request g;
				llm_status	st;

				llm_request_init(&g);
				g.prompt_kind = LLM_PROMPT_RAW;
				g.prompt = text;
				g.prompt_len = bytes;
				g.params.max_tokens = 8;
				p_t0 = now_ms();
				st = llm_engine_submit(e, 1000, &g, &big, err, sizeof(err));
				p_call = now_ms() - p_t0;
				if (st != LLM_OK)
				{
					/* refused inside the call: the answer came with it */
					big.done = true;
					big.t_end = p_t0 + p_call;
				}
				p_now = true;
			}
			if (step == tokenize_at)
			{
				int32_t    *ids = NULL;

				t_t0 = now_ms();
#ifdef LLM_TOKENIZE_INLINE_BYTES
				if (llm_engine_tokenize_request(e, 1001, text, bytes, &tok, &ids, &n_ids, err, sizeof(err)) != LLM_OK)
					fprintf(stderr, "tokenize: %s\n", err);
#else
				n_ids = llm_engine_tokenize(e, text, bytes, &ids, err, sizeof(err));
#endif
				t_call = now_ms() - t_t0;
				if (ids != NULL)
				{
					tok.done = true;
					tok.t_end = t_t0 + t_call;
				}
				free(ids);
				t_now = true;
			}
			if (llm_engine_step(e, on_event, NULL) != LLM_OK)
				break;
			t = now_ms();
			if (plain[0].n > before)
			{
				double		gap = t - t_prev;

				gaps[n_gaps++] = gap;
				if (p_now)
					p_arrival = gap;
				if (step >= prompt_at && (!big.done || big.t_end > t_prev) && gap > p_max)
					p_max = gap;
				if (t_now)
					t_arrival = gap;
				if (step >= tokenize_at && (!tok.done || tok.t_end > t_prev) && gap > t_max)
					t_max = gap;
				t_prev = t;
			}
		}
		while (llm_engine_has_work(e))
			if (llm_engine_step(e, on_event, NULL) != LLM_OK)
				break;
		qsort(gaps, (size_t) n_gaps, sizeof(double), cmp_double);
		printf("%5d  %10.1f  %10.1f  %18.1f  %6.1f  %7.1f  %9.1f  %20.1f  %6.1f  %7.1f  %9.1f  %lld\n", round,
			   n_gaps ? gaps[n_gaps / 2] : 0.0, n_gaps ? gaps[n_gaps * 9 / 10] : 0.0, p_arrival, p_max, p_call, big.done ? big.t_end - p_t0 : -1.0,
			   t_arrival, t_max, t_call, tok.done ? tok.t_end - t_t0 : -1.0,
			   (long long) (n_ids >= 0 ? n_ids : tok.n));
		llm_engine_destroy(e);
	}
	free(text);
	return 0;
}
