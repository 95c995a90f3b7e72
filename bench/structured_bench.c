/*
 * structured_bench.c — what constrained decoding costs in the engine
 * during decode (docs/PERFORMANCE.md, "Constrained decoding"): B requests
 * decoding together, without a grammar and with one, greedy, the same
 * prompts; the mask time per sampled row from the engine's grammar store.
 *
 *   build/bench/structured_bench [-m model.gguf] [-b B] [-n N] [-t T] [-r ROUNDS]
 *                                [--side plain|grammar|json] [--json]
 *
 * Sides, each run ROUNDS times alternately (--side: that one only, so that
 * bench/run can alternate the sides itself):
 *   plain   no grammar, ignore_eos: every request decodes exactly N tokens;
 *   grammar a regex no output of N tokens can complete (([ -~]{1000}){4}: one
 *           new automaton state per byte, so nearly every mask is computed
 *           cold, the worst case for the mask cache), so every request also
 *           decodes exactly N tokens and finishes with length;
 *   json    the 5-field ticket schema of docs/STRUCTURED_OUTPUT.md (the
 *           realistic case: requests end at their own length, masks of
 *           repeated states come from the cache).
 * Decode rate: tokens sampled after the step in which the last request got
 * its first token, over the time from that step to the end (prefill
 * excluded).  Mask time: lookup (computed on a miss) + applying it, per
 * sampled row, p50/p99 from the grammar store's histogram (+-5%), of the
 * grammar side and of the json side apart (each has an engine of its own).
 * Timings only, never asserted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

#define MAXB 64

static const char *const prompts[16] = {
	"Since the update to version 4.4.6 the app closes by itself right after the splash screen.",
	"We upgraded by mistake and would like a refund of the difference to the original card.",
	"The web interface said the firmware update failed and now the router won't boot.",
	"About a thousand files disappeared from Photos/Summer; the trash only contains a few.",
	"The calendar integration no longer syncs new events since the weekend.",
	"I was charged twice this month for the Team plan, invoice INV-2024-0042.",
	"Webhook deliveries to our server have been failing with HTTP 401 since Monday.",
	"Please delete all personal data related to my account.",
	"The export tool in the admin console stops with Error E1777.",
	"We would like API access on the Enterprise plan; several competitors offer it.",
	"The Wi-Fi drops every evening around 8pm and only a reboot of the RX-500 helps.",
	"Sync shows up to date on my laptop but the files never reach my desktop.",
	"We get 503 Service Unavailable on the admin console, the status page is green.",
	"The mobile app logs me out every hour and asks for the code again.",
	"We want to move from the Enterprise plan to the Starter plan at renewal.",
	"The dark mode setting is not saved; each morning the app is bright again.",
};

static const char *const ticket_schema =
	"\x03{\"type\":\"object\",\"properties\":{"
	"\"product\":{\"enum\":[\"Cloud Suite\",\"Billing\",\"Router RX\",\"Sync\",\"Mobile App\"]},"
	"\"priority\":{\"enum\":[\"low\",\"normal\",\"high\",\"urgent\"]},"
	"\"customer\":{\"type\":[\"string\",\"null\"],\"maxLength\":40},"
	"\"summary\":{\"type\":\"string\",\"maxLength\":120},"
	"\"refund_requested\":{\"type\":\"boolean\"}},"
	"\"required\":[\"product\",\"priority\",\"customer\",\"summary\",\"refund_requested\"]}";

static const char *const never_done = "\x02([ -~]{1000}){4}";

typedef struct stream
{
	int			n;
	bool		done;
	llm_finish_reason why;
} stream;

typedef struct run_state
{
	stream		s[MAXB];
	int			b;
} run_state;

static void
on_event(const llm_event *ev, void *arg)
{
	stream	   *s = ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_TEXT)
		s->n++;
	else
	{
		s->done = true;
		s->why = ev->finish_reason;
		if (ev->kind == LLM_EVENT_ERROR)
			fprintf(stderr, "request failed: %s\n", ev->text);
	}
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct side_result
{
	double		decode_tps;
	int64_t		tokens;
	int			n_length;
	llm_grammar_store_stats gs;
} side_result;

/* One round of side (0 plain, 1 grammar, 2 json) on engine e. */
static int
run_side(llm_engine *e, int side, int b, int n, uint64_t base_id, side_result *out)
{
	run_state	st;
	char		err[512];
	double		t0 = 0;
	int64_t		tok0 = 0;
	llm_grammar_store_stats before;

	memset(&st, 0, sizeof(st));
	llm_engine_grammar_stats(e, &before);
	for (int i = 0; i < b; i++)
	{
		llm_request q;

		llm_request_init(&q);
		q.prompt = prompts[i % 16];
		q.prompt_len = strlen(q.prompt);
		q.params.max_tokens = n;
		/* distinct salts: no prompt is served from the prefix cache of an earlier round */
		q.params.cache_salt = base_id + 1;
		if (side == 0)
			q.params.ignore_eos = true;
		else
		{
			q.grammar = side == 1 ? never_done : ticket_schema;
			q.grammar_len = strlen(q.grammar);
		}
		if (llm_engine_submit(e, base_id + i, &q, &st.s[i], err, sizeof(err)) != LLM_OK)
		{
			fprintf(stderr, "submit: %s\n", err);
			return -1;
		}
	}
	while (llm_engine_has_work(e))
	{
		bool		all_started = true;

		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
			return -1;
		for (int i = 0; i < b; i++)
			all_started &= st.s[i].n > 0;
		if (all_started && t0 == 0)
		{
			t0 = now_s();
			for (int i = 0; i < b; i++)
				tok0 += st.s[i].n;
		}
	}
	out->tokens = 0;
	out->n_length = 0;
	for (int i = 0; i < b; i++)
	{
		out->tokens += st.s[i].n;
		out->n_length += st.s[i].why == LLM_FINISH_LENGTH;
	}
	out->decode_tps = (double) (out->tokens - tok0) / (now_s() - t0);
	llm_engine_grammar_stats(e, &out->gs);
	out->gs.n_masked -= before.n_masked;
	return 0;
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
	int			b = 16,
				n = 128,
				threads = 2,
				rounds = 3;
	bool		json = false;
	int			only = -1;
	llm_engine_config c;
	llm_engine *engines[2];
	char		err[512];
	double		tps[3][32];
	side_result last[3];
	static const char *const names[3] = {"plain", "grammar", "json"};

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			model = argv[++i];
		else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			b = atoi(argv[++i]);
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--side") == 0 && i + 1 < argc)
		{
			i++;
			for (int k = 0; k < 3; k++)
				if (strcmp(argv[i], names[k]) == 0)
					only = k;
			if (only < 0)
			{
				fprintf(stderr, "--side: plain, grammar or json\n");
				return 2;
			}
		}
		else
		{
			fprintf(stderr, "usage: %s [-m model] [-b B] [-n N] [-t T] [-r ROUNDS] [--json]\n", argv[0]);
			return 2;
		}
	}
	if (b < 1 || b > MAXB || n < 2 || rounds < 1 || rounds > 32)
	{
		fprintf(stderr, "need 1 <= B <= %d, N >= 2, 1 <= ROUNDS <= 32\n", MAXB);
		return 2;
	}
	llm_engine_config_defaults(&c);
	c.model_path = model;
	c.n_threads = threads;
	c.n_ctx = 1024;
	c.max_running = b;
	for (int k = 0; k < 2; k++)
	{
		side_result w;

		engines[k] = llm_engine_create(&c, err, sizeof(err));
		if (engines[k] == NULL)
		{
			fprintf(stderr, "engine: %s\n", err);
			return 1;
		}
		/* warm-up: token index and compile outside the rounds (engine 1: the schema) */
		if (run_side(engines[k], k == 0 ? 1 : 2, 1, 2, 1u << 30, &w) != 0)
			return 1;
	}
	memset(last, 0, sizeof(last));
	memset(tps, 0, sizeof(tps));
	for (int r = 0; r < rounds; r++)
		for (int side = 0; side < 3; side++)
		{
			if (only >= 0 && side != only)
				continue;
			if (run_side(engines[side == 2], side, b, n, (uint64_t) (r * 3 + side + 1) * 1000, &last[side]) != 0)
				return 1;
			tps[side][r] = last[side].decode_tps;
		}
	for (int side = 0; side < 3; side++)
		qsort(tps[side], rounds, sizeof(double), cmp_double);
	{
		double		med[3];
		llm_grammar_store_stats gs[2];

		for (int side = 0; side < 3; side++)
			med[side] = tps[side][rounds / 2];
		for (int k = 0; k < 2; k++)
			llm_engine_grammar_stats(engines[k], &gs[k]);
		if (json)
		{
			printf("{\"batch\": %d, \"new_tokens\": %d, \"threads\": %d, \"rounds\": %d", b, n, threads, rounds);
			for (int side = 0; side < 3; side++)
				printf(", \"%s_decode_tps\": %.2f, \"%s_tokens_last\": %lld, \"%s_length_last\": %d", names[side],
					   med[side], names[side], (long long) last[side].tokens, names[side], last[side].n_length);
			/* one side alone (--side) leaves the other at 0: no slowdown to report */
			if (med[0] > 0 && med[1] > 0)
				printf(", \"grammar_slowdown\": %.4f", 1.0 - med[1] / med[0]);
			else
				printf(", \"grammar_slowdown\": null");
			for (int k = 0; k < 2; k++)
				printf(", \"%s_masked_rows\": %lld, \"%s_mask_us_mean\": %.2f, \"%s_mask_us_p50\": %.2f, "
					   "\"%s_mask_us_p99\": %.2f, \"%s_mask_cache_hits\": %llu, \"%s_mask_cache_misses\": %llu",
					   names[k + 1], (long long) gs[k].n_masked, names[k + 1], gs[k].mask_us_mean, names[k + 1],
					   gs[k].mask_us_p50, names[k + 1], gs[k].mask_us_p99, names[k + 1],
					   (unsigned long long) gs[k].masks.hits, names[k + 1], (unsigned long long) gs[k].masks.misses);
			printf(", \"index_ms\": %.1f, \"json_compile_ms\": %.2f}\n", gs[0].index_ms, gs[1].compile_ms_max);
		}
		else
		{
			printf("batch %d, %d new tokens, %d threads, median of %d rounds\n", b, n, threads, rounds);
			for (int side = 0; side < 3; side++)
				printf("  %-8s decode %.1f tokens/s (last round: %lld tokens, %d finished by length)\n",
					   names[side], med[side], (long long) last[side].tokens, last[side].n_length);
			if (med[0] > 0 && med[1] > 0)
				printf("  grammar slowdown %.1f%%\n", 100.0 * (1.0 - med[1] / med[0]));
			for (int k = 0; k < 2; k++)
				printf("  %-8s masks: %lld rows, mean %.1f us, p50 %.1f us, p99 %.1f us; cache %llu hits, "
					   "%llu misses\n", names[k + 1], (long long) gs[k].n_masked, gs[k].mask_us_mean,
					   gs[k].mask_us_p50, gs[k].mask_us_p99, (unsigned long long) gs[k].masks.hits,
					   (unsigned long long) gs[k].masks.misses);
			printf("  token index %.1f ms, ticket schema compile %.2f ms\n", gs[0].index_ms, gs[1].compile_ms_max);
		}
	}
	for (int k = 0; k < 2; k++)
		llm_engine_destroy(engines[k]);
	return 0;
}
