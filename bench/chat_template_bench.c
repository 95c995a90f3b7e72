/*
 * chat_template_bench.c — the cost of rendering a conversation with a chat
 * template: compile once (as at model load), then render a conversation of
 * N messages (system, then user and assistant turns of a sentence each)
 * R times, to text (the Jinja interpreter alone) and to token ids (render,
 * then tokenize with the template's control tokens: what a chat request
 * costs before the model runs).
 *
 *   build/bench/chat_template_bench [-m model.gguf] [-n MESSAGES] [-r ROUNDS]
 *                                   [template.jinja ...]
 *
 * Without template files: the model file's own template.  Prints per
 * template the compile time, the median and minimum time per render to
 * text and to ids, and the prompt's size.  Timings only, never asserted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"
#include "engine/gguf/gguf.h"
#include "engine/jinja/jinja.h"
#include "engine/util/text_util.h"

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}


static void
bench(const char *name, const char *src, size_t len, gguf_file *f, llm_tokenizer *t,
	  const llm_chat_message *msgs, int n, int rounds)
{
	llm_chat_template ct;
	char		err[512];
	double		t0 = now_us(),
				compile_us;
	double	   *text_us = malloc(sizeof(double) * rounds),
			   *ids_us = malloc(sizeof(double) * rounds);
	static int32_t ids[1 << 16];
	int64_t		n_ids = 0;
	size_t		text_len = 0;
	int			rc = src ? llm_chat_template_init_source(&ct, src, len, f, t, err, sizeof(err))
		: llm_chat_template_init(&ct, f, t, err, sizeof(err));

	compile_us = now_us() - t0;
	if (rc != 0 || ct.family != LLM_CHAT_JINJA)
	{
		printf("%-48s refused: %s\n", name, rc != 0 ? err : llm_chat_template_refused(&ct));
		free(text_us);
		free(ids_us);
		return;
	}
	for (int r = 0; r < rounds; r++)
	{
		char	   *text = NULL;

		t0 = now_us();
		if (llm_chat_render_text(&ct, t, msgs, n, NULL, &text, &text_len, err, sizeof(err)) != 0)
		{
			printf("%-48s render failed: %s\n", name, err);
			free(text_us);
			free(ids_us);
			llm_chat_template_free(&ct);
			return;
		}
		text_us[r] = now_us() - t0;
		free(text);
		t0 = now_us();
		n_ids = llm_chat_apply(&ct, t, msgs, n, ids, 1 << 16, err, sizeof(err));
		ids_us[r] = now_us() - t0;
	}
	qsort(text_us, (size_t) rounds, sizeof(double), cmp_double);
	qsort(ids_us, (size_t) rounds, sizeof(double), cmp_double);
	printf("%-48s compile %7.1f us  text median %6.1f us (min %6.1f)  ids median %7.1f us (min %7.1f)  %zu bytes, %lld tokens\n",
		   name, compile_us, text_us[rounds / 2], text_us[0], ids_us[rounds / 2], ids_us[0], text_len,
		   (long long) n_ids);
	free(text_us);
	free(ids_us);
	llm_chat_template_free(&ct);
}

int
main(int argc, char **argv)
{
	const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	int			n = 20,
				rounds = 200,
				first_file = argc;
	char		err[512];
	gguf_file  *f;
	llm_tokenizer *t;
	llm_chat_message *msgs;
	static const char *const user[] = {
		"Can you summarise the support ticket about the printer on floor 3?",
		"What did the customer say about the refund for order 4411?",
		"Translate 'the invoice is overdue' into French, please.",
	};
	static const char *const assistant[] = {
		"The printer on floor 3 shows error E-0042 and will not print; the user asked for a technician.",
		"They asked for the refund to go to the original card within five working days.",
		"La facture est en retard.",
	};

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			model = argv[++i];
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else
		{
			first_file = i;
			break;
		}
	}
	if (n < 2 || rounds < 1)
	{
		fprintf(stderr, "usage: chat_template_bench [-m model.gguf] [-n MESSAGES >= 2] [-r ROUNDS] [template.jinja ...]\n");
		return 2;
	}
	f = gguf_open(model, err, sizeof(err));
	t = f ? llm_tokenizer_create(f, err, sizeof(err)) : NULL;
	if (t == NULL)
	{
		fprintf(stderr, "chat_template_bench: %s\n", err);
		return 1;
	}
	msgs = calloc((size_t) n, sizeof(*msgs));
	msgs[0].role = "system";
	msgs[0].content = "You are a helpful assistant for the support team. Answer briefly.";
	for (int i = 1; i < n; i++)
	{
		/* user and assistant alternate, ending with a user turn */
		bool		is_user = (n - i) % 2 == 1;
		const char *s = is_user ? user[i % 3] : assistant[i % 3];

		msgs[i].role = is_user ? "user" : "assistant";
		msgs[i].content = s;
	}
	for (int i = 0; i < n; i++)
		msgs[i].content_len = strlen(msgs[i].content);
	printf("# %d messages, %d rounds, vocabulary of %s\n", n, rounds, model);
	if (first_file == argc)
		bench(model, NULL, 0, f, t, msgs, n, rounds);
	for (int i = first_file; i < argc; i++)
	{
		size_t		len;
		char	   *src = llm_read_file(argv[i], SIZE_MAX, NULL, &len, NULL, 0);
		const char *base = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];

		if (src == NULL)
		{
			printf("%-48s unreadable\n", base);
			continue;
		}
		bench(base, src, len, f, t, msgs, n, rounds);
		free(src);
	}
	free(msgs);
	llm_tokenizer_destroy(t);
	gguf_close(f);
	return 0;
}
