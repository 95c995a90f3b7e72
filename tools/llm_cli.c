/*
 * llm-cli — command-line driver of the pg_llm engine (no PostgreSQL).
 *
 *   llm-cli tokenize -m MODEL [--chat] TEXT       token ids, space separated (the file's
 *                                                  tokenizer alone: a vocabulary-only
 *                                                  GGUF works, no weights are loaded)
 *   llm-cli generate -m MODEL [options] PROMPT    generated text on stdout
 *   llm-cli generate -m MODEL --batch FILE        one prompt per line (\n, \t, \\ escapes),
 *                                                  all in one continuous batch
 *   llm-cli bench -m MODEL [-b B] [-p P] [-n N]    prefill and decode tokens/s
 *               [--prompt-file FILE]              request i's prompt = line i of FILE
 *                                                  (space-separated token ids)
 *   llm-cli score -m MODEL [--chat] [--eot] PROMPT LABEL...
 *                                                 one line per label: its log-probability
 *                                                  after the prompt, a tab, the label
 *   llm-cli embed -m MODEL [--chat] PROMPT         the prompt's embedding (pooled as the
 *                                                  model declares, or --pooling; --normalize;
 *                                                  --truncate), one float a line; --batch
 *                                                  FILE: one input a line, batched, one
 *                                                  vector a line; --token-ids: ids as input
 *
 * Every prompt of generate, bench, score and embed goes through
 * llm_engine_submit (TEXT with --chat/--system, RAW otherwise, TOKENS for
 * bench), so the engine is the one place their prompts become token ids and
 * options are checked; tokenize needs no engine (llm_vocab_file_open).
 *
 * Options: --chat (apply the model's chat template), --system TEXT, -n N
 * (max tokens), --temp T, --top-p P, --top-k K, --min-p P, --repeat-penalty R,
 * --seed S, --stop STR (repeatable), --kv-stats (after generate: the most KV
 * blocks and bytes held at once, on stderr), --ids (print generated token
 * ids instead of text), --ignore-eos, --eot (score: each label followed by
 * the end-of-turn token), --score-sharing copy|recompute|per-continuation
 * (score: how the labels share the prompt's KV, llm_score_sharing; the
 * scores are the same).  The engine settings' flags (-m, -t, --ctx,
 * --kv-mb, --max-running, --no-prefix-cache, --spec, ...) are the "cli"
 * column of config_list.h, in the unit of the setting's GUC; usage lists
 * them with their GUCs and defaults.
 *
 *   llm-cli config-defaults   each engine setting's GUC name, default and
 *                             unit, tab-separated (test/t/029_settings_defaults.pl
 *                             compares them with what a fresh server shows)
 *
 * generate --batch FILE --interactive-every MS [--interactive-prompt TEXT]
 * [--window N]: the file's prompts as a bulk load in the batch class with
 * an interactive request arriving every MS, as bench/run's fair workload
 * does through PostgreSQL (cmd_generate_mixed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/text/vocab_file.h"

typedef struct cli_opts
{
	const char *cmd;
	llm_engine_config ec;		/* the engine's configuration, from the flags */
	llm_sampling_params sp;		/* every request's options, from the flags */
	const char **stop;			/* --stop values (sp.stop points here) */
	bool		chat;
	const char *system;
	const char *batch_file;
	const char *prompt;
	const char **labels;		/* score: the positional arguments after the prompt */
	int			n_labels;
	bool		eot;
	bool		print_ids;
	int			bench_batch;
	int			bench_prompt;
	int			bench_gen;
	const char *bench_prompt_file;
	bool		kv_stats;
	int			score_sharing;	/* --score-sharing: llm_score_sharing */
	/* generate --batch under an interactive load (cmd_generate_mixed) */
	int			interactive_every_ms;
	const char *interactive_prompt;
	int			window;
	/* embed */
	llm_pooling pooling;
	llm_embed_norm normalize;
	bool		truncate;
	bool		token_ids;		/* embed: the prompt (or each --batch line) is token ids */
} cli_opts;

/* --kv-stats: the most KV held at once over the steps of run_until_done */
static llm_engine_stats kv_peak;

/* The value an engine setting's flag takes in usage: N, MS, MB, FILE or the options. */
static void
print_metavar(FILE *f, const llm_setting *s)
{
	switch (s->kind)
	{
		case LLM_SETTING_INT:
			fputs(s->unit == LLM_SETTING_UNIT_MB ? " MB" : s->unit == LLM_SETTING_UNIT_MS ? " MS" : " N", f);
			break;
		case LLM_SETTING_STR:
			fputs(" FILE", f);
			break;
		case LLM_SETTING_ENUM:
			for (const char *const *o = s->options; *o != NULL; o++)
				fprintf(f, "%s%s", o == s->options ? " " : "|", *o);
			break;
		case LLM_SETTING_BOOL:
			break;
	}
}

/* An engine setting's default as its GUC shows it ("100", "on", "auto"); model_path has none. */
static void
print_default(FILE *f, const llm_setting *s)
{
	switch (s->kind)
	{
		case LLM_SETTING_INT:
			fprintf(f, "%lld", (long long) s->def);
			break;
		case LLM_SETTING_BOOL:
			fputs(s->def ? "on" : "off", f);
			break;
		case LLM_SETTING_ENUM:
			fputs(s->options[0], f);
			break;
		case LLM_SETTING_STR:
			break;
	}
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: llm-cli tokenize -m MODEL [--chat] [--] TEXT\n"
			"       llm-cli generate -m MODEL [--chat] [--system S] [-n N] [--temp T] [--top-p P]\n"
			"               [--top-k K] [--min-p P] [--repeat-penalty R] [--seed S] [--stop STR]...\n"
			"               [ENGINE SETTINGS] [--kv-stats] [--ids] [--ignore-eos] ([--] PROMPT | --batch FILE)\n"
			"               [--interactive-every MS [--interactive-prompt TEXT] [--window N]]\n"
			"       llm-cli bench -m MODEL [-b BATCH] [-p PROMPT_TOKENS] [-n GEN_TOKENS] [--prompt-file FILE]\n"
			"               [ENGINE SETTINGS]\n"
			"       llm-cli score -m MODEL [--chat] [--system S] [--eot] [--score-sharing MODE] [ENGINE SETTINGS]\n"
			"               [--] PROMPT LABEL...\n"
			"       llm-cli embed -m MODEL [--chat] [--system S] [--pooling model|last|mean|cls]\n"
			"               [--normalize model|none|l2] [--truncate] [--token-ids] [ENGINE SETTINGS]\n"
			"               ([--] PROMPT | --batch FILE)\n"
			"       llm-cli config-defaults     each engine setting's GUC, default and unit, tab-separated\n"
			"       (\"--\" ends the options: the arguments after it are text even if they start with -)\n"
			"engine settings (config_list.h; in brackets the extension's GUC and its default):\n");
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];

		if (s->cli == NULL)
			continue;
		fprintf(stderr, "  %s", s->cli);
		print_metavar(stderr, s);
		if (s->kind == LLM_SETTING_BOOL)
			fprintf(stderr, " (sets it %s)", s->def ? "off" : "on");
		fprintf(stderr, ": %s", s->short_desc);
		if (s->guc != NULL && s->kind != LLM_SETTING_STR)
		{
			fprintf(stderr, " [%s = ", s->guc);
			print_default(stderr, s);
			fprintf(stderr, "%s]", s->unit == LLM_SETTING_UNIT_MB ? "MB" : s->unit == LLM_SETTING_UNIT_MS ? "ms" : "");
		}
		fputc('\n', stderr);
	}
	exit(2);
}

/*
 * config-defaults: one line per engine setting with a GUC and a default of
 * the engine's own (not llm.model, whose default is the installed file):
 * GUC name, default in the GUC's unit, unit ("", "ms", "MB"), tab-separated.
 */
static int
cmd_config_defaults(void)
{
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];

		if (s->guc == NULL || s->kind == LLM_SETTING_STR)
			continue;
		printf("%s\t", s->guc);
		print_default(stdout, s);
		printf("\t%s\n", s->unit == LLM_SETTING_UNIT_MB ? "MB" : s->unit == LLM_SETTING_UNIT_MS ? "ms" : "");
	}
	return 0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long
parse_long(const char *s, const char *what)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s)
	{
		fprintf(stderr, "llm-cli: invalid %s: %s\n", what, s);
		exit(2);
	}
	return v;
}

static double
parse_double(const char *s, const char *what)
{
	char	   *end;
	double		v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || end == s)
	{
		fprintf(stderr, "llm-cli: invalid %s: %s\n", what, s);
		exit(2);
	}
	return v;
}

/*
 * a (with v after it) as an engine setting's flag (config_list.h) into
 * o->ec: an INT in the setting's unit, a BOOL flag sets the opposite of the
 * default, a string as given (llm_engine_create checks it).  False when a
 * is no such flag; *i moves past a value taken.
 */
static bool
engine_flag(cli_opts *o, const char *a, const char *v, int *i)
{
	for (int k = 0; k < LLM_N_SETTINGS; k++)
	{
		const llm_setting *s = &llm_settings[k];
		char	   *f = (char *) &o->ec + s->offset;

		if (s->cli == NULL || strcmp(a, s->cli) != 0)
			continue;
		if (s->kind == LLM_SETTING_BOOL)
		{
			*(bool *) f = !s->def;
			return true;
		}
		if (v == NULL)
			usage();
		(*i)++;
		if (s->kind == LLM_SETTING_INT)
		{
			long		n = parse_long(v, s->cli);

			/* out of the row's range is the engine's to refuse; what the field cannot hold, ours */
			if (s->unit == LLM_SETTING_UNIT_MB ? (n < -(INT64_MAX / s->scale) || n > INT64_MAX / s->scale)
				: (n < INT_MIN || n > INT_MAX))
			{
				fprintf(stderr, "llm-cli: invalid %s: %s\n", s->cli, v);
				exit(2);
			}
			llm_setting_set_int(&o->ec, s, (int64_t) n * s->scale);
		}
		else
			*(const char **) f = v;
		return true;
	}
	return false;
}

/* A positional argument: the prompt (or text), then score's labels. */
static void
add_positional(cli_opts *o, const char *a)
{
	if (o->prompt == NULL)
		o->prompt = a;
	else if (!strcmp(o->cmd, "score"))
	{
		o->labels = realloc(o->labels, (size_t) (o->n_labels + 1) * sizeof(char *));
		if (o->labels == NULL)
		{
			fprintf(stderr, "llm-cli: out of memory\n");
			exit(1);
		}
		o->labels[o->n_labels++] = a;
	}
	else
		usage();
}

static void
parse_args(int argc, char **argv, cli_opts *o)
{
	bool		options_done = false;

	memset(o, 0, sizeof(*o));
	llm_engine_config_defaults(&o->ec);
	llm_sampling_params_defaults(&o->sp);
	o->bench_batch = 1;
	o->bench_prompt = 128;
	o->bench_gen = 128;
	if (argc < 2)
		usage();
	o->cmd = argv[1];
	for (int i = 2; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

#define NEEDV() do { if (v == NULL) usage(); i++; } while (0)
		/* "--" ends the options: every later argument is text, even "-273.15" */
		if (options_done)
			add_positional(o, a);
		else if (!strcmp(a, "--"))
			options_done = true;
		else if (engine_flag(o, a, v, &i))
			continue;
		else if (!strcmp(a, "--chat"))
			o->chat = true;
		else if (!strcmp(a, "--system"))
		{
			NEEDV();
			o->system = v;
			o->chat = true;
		}
		else if (!strcmp(a, "-n"))
		{
			NEEDV();
			o->sp.max_tokens = (int32_t) parse_long(v, "-n");
			o->bench_gen = o->sp.max_tokens;
		}
		else if (!strcmp(a, "-b"))
		{
			NEEDV();
			o->bench_batch = (int) parse_long(v, "-b");
		}
		else if (!strcmp(a, "-p"))
		{
			NEEDV();
			o->bench_prompt = (int) parse_long(v, "-p");
		}
		else if (!strcmp(a, "--temp"))
		{
			NEEDV();
			o->sp.temperature = parse_double(v, "--temp");
		}
		else if (!strcmp(a, "--top-p"))
		{
			NEEDV();
			o->sp.top_p = parse_double(v, "--top-p");
		}
		else if (!strcmp(a, "--top-k"))
		{
			NEEDV();
			o->sp.top_k = (int32_t) parse_long(v, "--top-k");
		}
		else if (!strcmp(a, "--min-p"))
		{
			NEEDV();
			o->sp.min_p = parse_double(v, "--min-p");
		}
		else if (!strcmp(a, "--repeat-penalty"))
		{
			NEEDV();
			o->sp.repetition_penalty = parse_double(v, "--repeat-penalty");
		}
		else if (!strcmp(a, "--seed"))
		{
			NEEDV();
			o->sp.seed = (uint64_t) parse_long(v, "--seed");
			o->sp.has_seed = true;
		}
		else if (!strcmp(a, "--stop"))
		{
			NEEDV();
			o->stop = realloc(o->stop, (size_t) (o->sp.n_stop + 1) * sizeof(char *));
			if (o->stop == NULL)
			{
				fprintf(stderr, "llm-cli: out of memory\n");
				exit(1);
			}
			o->stop[o->sp.n_stop++] = v;
		}
		else if (!strcmp(a, "--kv-stats"))
			o->kv_stats = true;
		else if (!strcmp(a, "--ids"))
			o->print_ids = true;
		else if (!strcmp(a, "--ignore-eos"))
			o->sp.ignore_eos = true;
		else if (!strcmp(a, "--eot"))
			o->eot = true;
		else if (!strcmp(a, "--score-sharing"))
		{
			NEEDV();
			if (!strcmp(v, "copy"))
				o->score_sharing = LLM_SCORE_SHARE_COPY;
			else if (!strcmp(v, "recompute"))
				o->score_sharing = LLM_SCORE_SHARE_RECOMPUTE;
			else if (!strcmp(v, "per-continuation"))
				o->score_sharing = LLM_SCORE_SHARE_PER_CONTINUATION;
			else
			{
				fprintf(stderr, "llm-cli: --score-sharing must be copy, recompute or per-continuation\n");
				exit(2);
			}
		}
		else if (!strcmp(a, "--prompt-file"))
		{
			NEEDV();
			o->bench_prompt_file = v;
		}
		else if (!strcmp(a, "--pooling"))
		{
			NEEDV();
			o->pooling = !strcmp(v, "model") ? LLM_POOLING_MODEL : !strcmp(v, "last") ? LLM_POOLING_LAST :
				!strcmp(v, "mean") ? LLM_POOLING_MEAN : !strcmp(v, "cls") ? LLM_POOLING_CLS : (llm_pooling) -1;
			if ((int) o->pooling < 0)
				usage();
		}
		else if (!strcmp(a, "--normalize"))
		{
			NEEDV();
			o->normalize = !strcmp(v, "model") ? LLM_EMBED_NORM_MODEL : !strcmp(v, "none") ? LLM_EMBED_NORM_NONE :
				!strcmp(v, "l2") ? LLM_EMBED_NORM_L2 : (llm_embed_norm) -1;
			if ((int) o->normalize < 0)
				usage();
		}
		else if (!strcmp(a, "--truncate"))
			o->truncate = true;
		else if (!strcmp(a, "--token-ids"))
			o->token_ids = true;
		else if (!strcmp(a, "--batch"))
		{
			NEEDV();
			o->batch_file = v;
		}
		else if (!strcmp(a, "--interactive-every"))
		{
			NEEDV();
			o->interactive_every_ms = (int) parse_long(v, "--interactive-every");
		}
		else if (!strcmp(a, "--interactive-prompt"))
		{
			NEEDV();
			o->interactive_prompt = v;
		}
		else if (!strcmp(a, "--window"))
		{
			NEEDV();
			o->window = (int) parse_long(v, "--window");
		}
		else if (a[0] == '-' && a[1] != '\0')
		{
			fprintf(stderr, "llm-cli: unknown option %s\n", a);
			usage();
		}
		else
			add_positional(o, a);
#undef NEEDV
	}
	o->sp.stop = o->stop;
	if (o->ec.model_path == NULL)
	{
		fprintf(stderr, "llm-cli: -m MODEL is required\n");
		usage();
	}
	if (strcmp(o->cmd, "bench") == 0)
	{
		/* all B requests in flight at once, greedy, fixed length */
		if (o->ec.max_running < o->bench_batch)
			o->ec.max_running = o->bench_batch;
		o->sp.max_tokens = o->bench_gen;
		o->sp.ignore_eos = true;
		o->sp.temperature = 0;
	}
}

/* A request for prompt text with the options of the command line (TEXT with --chat, else RAW). */
static llm_request
text_request(const cli_opts *o, const char *text)
{
	llm_request r;

	llm_request_init(&r);
	r.prompt_kind = o->chat ? LLM_PROMPT_TEXT : LLM_PROMPT_RAW;
	r.prompt = text;
	r.prompt_len = strlen(text);
	if (o->system)
	{
		r.system = o->system;
		r.system_len = strlen(o->system);
	}
	r.params = o->sp;
	return r;
}

/* A request for prompt token ids with the options of the command line. */
static llm_request
tokens_request(const cli_opts *o, const int32_t *ids, int32_t n)
{
	llm_request r;

	llm_request_init(&r);
	r.prompt_kind = LLM_PROMPT_TOKENS;
	r.tokens = ids;
	r.n_tokens = n;
	r.params = o->sp;
	return r;
}

/* Bad option values are reported by the one check of a request, before the model loads. */
static void
check_options(const cli_opts *o)
{
	static const int32_t one_token = 0;
	llm_request r = tokens_request(o, &one_token, 1);
	char		err[512];

	if (llm_request_validate(&r, err, sizeof(err)) != LLM_OK)
	{
		fprintf(stderr, "llm-cli: %s\n", err);
		exit(2);
	}
}

typedef struct gen_slot
{
	char	   *text;
	size_t		len;
	size_t		cap;
	bool		done;
	bool		stream;
	bool		print_ids;
	llm_finish_reason why;
	llm_usage	usage;
	char	   *error;
} gen_slot;

static void
on_event(const llm_event *ev, void *arg)
{
	gen_slot   *s = ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_TEXT)
	{
		if (s->print_ids)
		{
			char		buf[16];
			int			n = snprintf(buf, sizeof(buf), "%s%d", s->len ? " " : "", ev->token_id);

			if (s->stream)
			{
				fwrite(buf, 1, n, stdout);
				fflush(stdout);
			}
			if (s->len + n + 1 > s->cap)
			{
				s->cap = (s->len + n + 1) * 2;
				s->text = realloc(s->text, s->cap);
			}
			memcpy(s->text + s->len, buf, n);
			s->len += n;
			return;
		}
		if (ev->text_len == 0)
			return;
		if (s->stream)
		{
			fwrite(ev->text, 1, ev->text_len, stdout);
			fflush(stdout);
		}
		if (s->len + ev->text_len + 1 > s->cap)
		{
			s->cap = (s->len + ev->text_len + 1) * 2;
			s->text = realloc(s->text, s->cap);
		}
		memcpy(s->text + s->len, ev->text, ev->text_len);
		s->len += ev->text_len;
	}
	else
	{
		s->done = true;
		s->why = ev->finish_reason;
		s->usage = ev->usage;
		if (ev->kind == LLM_EVENT_ERROR)
			s->error = strdup(ev->text);
	}
}

static char *
unescape_line(const char *in)
{
	char	   *out = malloc(strlen(in) + 1);
	char	   *w = out;

	for (const char *p = in; *p; p++)
	{
		if (*p == '\\' && p[1])
		{
			p++;
			*w++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p;
		}
		else
			*w++ = *p;
	}
	*w = '\0';
	return out;
}

static int
run_until_done(llm_engine *e)
{
	while (llm_engine_has_work(e))
	{
		llm_engine_stats st;

		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
			return -1;
		llm_engine_get_stats(e, &st);
		if (st.kv_bytes_used > kv_peak.kv_bytes_used)
			kv_peak = st;
	}
	return 0;
}

static void
print_kv_stats(llm_engine *e)
{
	llm_engine_stats st;

	llm_engine_get_stats(e, &st);
	fprintf(stderr,
			"kv: pool %d blocks (%d local), %lld bytes; most held at once: %d blocks (%d local), %lld bytes\n",
			st.kv_blocks_total, st.kv_local_blocks_total, (long long) st.kv_bytes_total,
			kv_peak.kv_blocks_used, kv_peak.kv_local_blocks_used, (long long) kv_peak.kv_bytes_used);
}

/* The prompts of a --batch file (one a line, escapes undone; "-" = stdin), or NULL after an error. */
static char **
read_batch_prompts(const char *path, int *n_out)
{
	FILE	   *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	char	   *line = NULL;
	size_t		lcap = 0;
	ssize_t		len;
	char	  **prompts = NULL;
	int			n = 0;

	if (f == NULL)
	{
		fprintf(stderr, "llm-cli: cannot open %s: %s\n", path, strerror(errno));
		return NULL;
	}
	while ((len = getline(&line, &lcap, f)) > 0)
	{
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		prompts = realloc(prompts, (size_t) (n + 1) * sizeof(char *));
		prompts[n++] = unescape_line(line);
	}
	free(line);
	if (f != stdin)
		fclose(f);
	*n_out = n;
	return prompts ? prompts : calloc(1, sizeof(char *));
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* The q-th percentile (nearest rank) of xs[0..n), sorted in place; 0 when n is 0. */
static double
percentile(double *xs, int n, double q)
{
	int			k;

	if (n == 0)
		return 0;
	qsort(xs, (size_t) n, sizeof(double), cmp_double);
	k = (int) (q / 100.0 * n + 0.999999) - 1;
	return xs[k < 0 ? 0 : (k >= n ? n - 1 : k)];
}

/* Run one interactive request alone (nothing else in the engine); its latency in ms, or -1. */
static double
interactive_alone(llm_engine *e, const llm_request *req, uint64_t id)
{
	gen_slot	s;
	char		err[512];
	double		t0 = now_s();

	memset(&s, 0, sizeof(s));
	if (llm_engine_submit(e, id, req, &s, err, sizeof(err)) != LLM_OK || run_until_done(e) != 0 || s.error)
		return -1;
	free(s.text);
	return 1e3 * (now_s() - t0);
}

/*
 * generate --batch FILE --interactive-every MS: the fairness load at the
 * engine, without PostgreSQL.  The file's prompts are the bulk: batch
 * class, one session, at most --window of them in the engine at once (the
 * LLM Batch node's window; default all).  First 10 interactive requests
 * (--interactive-prompt, default "What is 2+2?", 8 tokens, greedy,
 * interactive class, its own session) run alone, 300 ms apart: the idle
 * latency.  Then, from 1 s after the bulk starts and while it runs, one
 * interactive request arrives every MS (the next one MS after the
 * previous arrival, or at once if that has passed): it is submitted
 * between steps, as the worker reads its channels, but its latency counts
 * from its arrival, so the wait for the step in progress is in it.  Prints
 * the bulk's outputs as generate --batch does, then on stderr the
 * interactive latencies, the bulk's throughput and time per output token,
 * and the engine's step counters.
 */
static int
cmd_generate_mixed(llm_engine *e, cli_opts *o)
{
	char		err[512];
	int			n = 0;
	char	  **prompts = read_batch_prompts(o->batch_file, &n);
	gen_slot   *slots;
	gen_slot	inter;
	llm_request ireq;
	llm_sampling_params isp;
	const char *iprompt = o->interactive_prompt ? o->interactive_prompt : "What is 2+2?";
	double		idle[10],
			   *lat,
			   *tpot;
	int			n_lat = 0,
				n_tpot = 0,
				next = 0,
				in_engine = 0,
				window = o->window > 0 ? o->window : (n > 0 ? n : 1);
	double		t0,
				t_end,
				arrival = 0;
	bool		inter_busy = false;
	uint64_t	ids = 1;
	long		total_tokens = 0;
	llm_engine_stats st0,
				st;

	if (prompts == NULL)
		return 1;
	slots = calloc(n > 0 ? n : 1, sizeof(gen_slot));
	lat = calloc(1024, sizeof(double));
	tpot = calloc(n > 0 ? n : 1, sizeof(double));
	llm_sampling_params_defaults(&isp);
	isp.max_tokens = 8;
	isp.temperature = 0;
	ireq = text_request(o, iprompt);
	ireq.params = isp;
	ireq.priority = LLM_PRIORITY_INTERACTIVE;
	ireq.session = 2;
	for (int k = 0; k < 10; k++)
	{
		struct timespec pause = {0, 300 * 1000 * 1000};

		if ((idle[k] = interactive_alone(e, &ireq, ids++)) < 0)
		{
			fprintf(stderr, "llm-cli: the interactive request failed alone\n");
			return 1;
		}
		nanosleep(&pause, NULL);
	}
	llm_engine_get_stats(e, &st0);
	t0 = now_s();
	arrival = t0 + 1.0;
	while (next < n || in_engine > 0)
	{
		double		now;

		while (next < n && in_engine < window)
		{
			llm_request req = text_request(o, prompts[next]);

			req.priority = LLM_PRIORITY_BATCH;
			req.session = 1;
			slots[next].print_ids = o->print_ids;
			if (llm_engine_submit(e, ids++, &req, &slots[next], err, sizeof(err)) != LLM_OK)
			{
				slots[next].done = true;
				slots[next].error = strdup(err);
			}
			else
				in_engine++;
			next++;
		}
		now = now_s();
		if (!inter_busy && now >= arrival && n_lat < 1024)
		{
			memset(&inter, 0, sizeof(inter));
			if (llm_engine_submit(e, ids++, &ireq, &inter, err, sizeof(err)) != LLM_OK)
			{
				fprintf(stderr, "llm-cli: %s\n", err);
				return 1;
			}
			inter_busy = true;
		}
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
		{
			fprintf(stderr, "llm-cli: engine step failed\n");
			return 1;
		}
		in_engine = 0;
		for (int i = 0; i < next; i++)
			if (!slots[i].done)
				in_engine++;
		if (inter_busy && inter.done)
		{
			now = now_s();
			if (inter.error)
			{
				fprintf(stderr, "llm-cli: interactive request: %s\n", inter.error);
				return 1;
			}
			free(inter.text);
			lat[n_lat++] = 1e3 * (now - arrival);
			inter_busy = false;
			arrival += o->interactive_every_ms / 1e3;
			if (arrival < now)
				arrival = now;
		}
	}
	t_end = now_s();
	/* an interactive request still in the engine when the bulk ended: finish it, uncounted */
	if (inter_busy && run_until_done(e) != 0)
		return 1;
	llm_engine_get_stats(e, &st);
	for (int i = 0; i < n; i++)
	{
		printf("### %d %s\n%.*s\n", i + 1,
			   slots[i].error ? slots[i].error : llm_finish_reason_name(slots[i].why),
			   (int) slots[i].len, slots[i].text ? slots[i].text : "");
		total_tokens += slots[i].usage.completion_tokens;
		if (slots[i].usage.completion_tokens > 1)
			tpot[n_tpot++] = (slots[i].usage.total_ms - slots[i].usage.ttft_ms) / (slots[i].usage.completion_tokens - 1);
		free(slots[i].text);
		free(prompts[i]);
	}
	{
		double		idle_p50 = percentile(idle, 10, 50),
					tpot_p50 = percentile(tpot, n_tpot, 50);
		int64_t		is = st.interactive_steps - st0.interactive_steps,
					bs = st.batch_steps - st0.batch_steps;

		fprintf(stderr, "bulk: %d prompts, %ld tokens in %.2f s (%.3f prompts/s), TPOT p50 %.1f ms\n",
				n, total_tokens, t_end - t0, n / (t_end - t0), tpot_p50);
		fprintf(stderr, "interactive: idle p50 %.1f ms; under load %d calls, p50 %.1f ms, p99 %.1f ms, "
				"max %.1f ms; target 2 x idle p50 + TPOT p50 = %.1f ms\n",
				idle_p50, n_lat, percentile(lat, n_lat, 50), percentile(lat, n_lat, 99),
				percentile(lat, n_lat, 100), 2 * idle_p50 + tpot_p50);
		fprintf(stderr, "steps with interactive work: %lld, %.1f tokens and %.1f ms each; "
				"batch-only steps: %lld, %.1f tokens and %.1f ms each, longest %.1f ms\n",
				(long long) is, is ? (double) (st.interactive_step_tokens - st0.interactive_step_tokens) / is : 0,
				is ? (st.interactive_step_ms - st0.interactive_step_ms) / is : 0,
				(long long) bs, bs ? (double) (st.batch_step_tokens - st0.batch_step_tokens) / bs : 0,
				bs ? (st.batch_step_ms - st0.batch_step_ms) / bs : 0, st.batch_step_max_ms);
	}
	free(prompts);
	free(slots);
	free(lat);
	free(tpot);
	return 0;
}

static int
cmd_generate(llm_engine *e, cli_opts *o)
{
	char		err[512];

	if (o->batch_file && o->interactive_every_ms > 0)
		return cmd_generate_mixed(e, o);
	if (o->batch_file)
	{
		gen_slot   *slots = NULL;
		int			n = 0;
		double		t0;
		long		total_tokens = 0;
		char	  **prompts = read_batch_prompts(o->batch_file, &n);

		if (prompts == NULL)
			return 1;
		/* slots are allocated once: their addresses are the requests' user_data */
		slots = calloc(n > 0 ? n : 1, sizeof(gen_slot));
		for (int i = 0; i < n; i++)
		{
			llm_request req = text_request(o, prompts[i]);

			slots[i].print_ids = o->print_ids;
			if (llm_engine_submit(e, (uint64_t) i + 1, &req, &slots[i], err, sizeof(err)) != LLM_OK)
			{
				slots[i].done = true;
				slots[i].error = strdup(err);
			}
			free(prompts[i]);
		}
		free(prompts);
		t0 = now_s();
		if (run_until_done(e) != 0)
			fprintf(stderr, "llm-cli: engine step failed\n");
		for (int i = 0; i < n; i++)
		{
			printf("### %d %s\n%.*s\n", i + 1,
				   slots[i].error ? slots[i].error : llm_finish_reason_name(slots[i].why),
				   (int) slots[i].len, slots[i].text ? slots[i].text : "");
			total_tokens += slots[i].usage.completion_tokens;
		}
		{
			long		drafted = 0,
						accepted = 0;

			for (int i = 0; i < n; i++)
			{
				drafted += slots[i].usage.draft_tokens;
				accepted += slots[i].usage.accepted_tokens;
			}
			fprintf(stderr, "%d prompts, %ld tokens generated in %.2f s (%.1f tokens/s); "
					"draft tokens %ld, accepted %ld\n",
					n, total_tokens, now_s() - t0, total_tokens / (now_s() - t0), drafted, accepted);
		}
		return 0;
	}
	else
	{
		gen_slot	s;
		llm_request req;
		llm_status	st;

		if (o->prompt == NULL)
			usage();
		memset(&s, 0, sizeof(s));
		s.stream = true;
		s.print_ids = o->print_ids;
		req = text_request(o, o->prompt);
		st = llm_engine_submit(e, 1, &req, &s, err, sizeof(err));
		if (st != LLM_OK)
		{
			fprintf(stderr, "llm-cli: %s: %s\n", llm_status_name(st), err);
			return 1;
		}
		if (run_until_done(e) != 0 || s.error)
		{
			fprintf(stderr, "\nllm-cli: %s\n", s.error ? s.error : "engine failure");
			return 1;
		}
		printf("\n");
		/* the text ends before the stats begin where both go to one terminal or file */
		fflush(stdout);
		fprintf(stderr, "[%s: %d prompt tokens, %d generated, TTFT %.1f ms, total %.1f ms]\n",
				llm_finish_reason_name(s.why), s.usage.prompt_tokens, s.usage.completion_tokens,
				s.usage.ttft_ms, s.usage.total_ms);
		return 0;
	}
}

/*
 * Read the bench prompts from FILE: line i holds request i's prompt as
 * space-separated token ids (so a peer can be fed exactly the same ones).
 * Returns a malloc'd array of B malloc'd id arrays with their lengths in
 * lens[], or NULL after printing an error (missing file, fewer than B
 * non-empty lines, a token that is not an integer).
 */
static int32_t **
read_prompt_file(const char *path, int B, int32_t *lens)
{
	FILE	   *f = fopen(path, "r");
	int32_t   **prompts = calloc(B, sizeof(int32_t *));
	char	   *line = NULL;
	size_t		lcap = 0;
	int			n = 0;

	if (f == NULL)
	{
		fprintf(stderr, "llm-cli: cannot open %s: %s\n", path, strerror(errno));
		free(prompts);
		return NULL;
	}
	while (n < B && getline(&line, &lcap, f) > 0)
	{
		int32_t		cap = 64;
		char	   *p = line;

		lens[n] = 0;
		prompts[n] = malloc((size_t) cap * sizeof(int32_t));
		for (;;)
		{
			char	   *end;
			long		v;

			while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
				p++;
			if (*p == '\0')
				break;
			errno = 0;
			v = strtol(p, &end, 10);
			if (errno || end == p || v < 0 || v > INT32_MAX)
			{
				fprintf(stderr, "llm-cli: %s:%d: invalid token id \"%.*s\"\n", path, n + 1,
						(int) strcspn(p, " \t\r\n"), p);
				n++;
				goto fail;
			}
			if (lens[n] == cap)
			{
				cap *= 2;
				prompts[n] = realloc(prompts[n], (size_t) cap * sizeof(int32_t));
			}
			prompts[n][lens[n]++] = (int32_t) v;
			p = end;
		}
		if (lens[n] > 0)
			n++;
		else
			free(prompts[n]);
	}
	if (n == B)
	{
		free(line);
		fclose(f);
		return prompts;
	}
	fprintf(stderr, "llm-cli: %s has %d prompts, batch needs %d\n", path, n, B);
fail:
	for (int i = 0; i < n; i++)
		free(prompts[i]);
	free(prompts);
	free(line);
	fclose(f);
	return NULL;
}

static int
cmd_bench(llm_engine *e, cli_opts *o)
{
	char		err[512];
	int			B = o->bench_batch;
	gen_slot   *slots = calloc(B, sizeof(gen_slot));
	int32_t    *ids = malloc((size_t) o->bench_prompt * sizeof(int32_t));
	int32_t   **file_prompts = NULL;
	int32_t    *file_lens = calloc(B, sizeof(int32_t));
	long		prompt_tokens = 0;
	llm_engine_config ec;
	double		t0,
				t_prefill_end = 0,
				t_end;
	long		gen = 0;

	llm_engine_get_config(e, &ec);
	if (o->bench_prompt_file &&
		(file_prompts = read_prompt_file(o->bench_prompt_file, B, file_lens)) == NULL)
		return 1;
	for (int b = 0; b < B; b++)
	{
		const int32_t *p = ids;
		int32_t		np = o->bench_prompt;

		if (file_prompts)
		{
			p = file_prompts[b];
			np = file_lens[b];
		}
		else
		{
			/* distinct prompts (no prefix sharing): a fixed pseudo-random token stream per request */
			uint64_t	x = 0x12345678u + (uint64_t) b * 7919;

			for (int i = 0; i < o->bench_prompt; i++)
			{
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				ids[i] = 1000 + (int32_t) ((x >> 33) % 20000);
			}
		}
		prompt_tokens += np;
		{
			llm_request req = tokens_request(o, p, np);

			if (llm_engine_submit(e, (uint64_t) b + 1, &req, &slots[b], err, sizeof(err)) != LLM_OK)
			{
				fprintf(stderr, "llm-cli: %s\n", err);
				return 1;
			}
		}
	}
	t0 = now_s();
	while (llm_engine_has_work(e))
	{
		llm_engine_stats st;

		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
			return 1;
		llm_engine_get_stats(e, &st);
		if (t_prefill_end == 0 && st.completion_tokens >= B)
			t_prefill_end = now_s();
	}
	t_end = now_s();
	for (int b = 0; b < B; b++)
		gen += slots[b].usage.completion_tokens;
	if (file_prompts)
		printf("batch %d, prompts from %s (%ld tokens in all), %d new tokens, %d threads\n", B,
			   o->bench_prompt_file, prompt_tokens, o->bench_gen, ec.n_threads);
	else
		printf("batch %d, prompt %d tokens, %d new tokens, %d threads\n", B, o->bench_prompt, o->bench_gen,
			   ec.n_threads);
	printf("kernels: %s\n", llm_engine_kernels(e));
	printf("prefill: %.1f tokens/s (%.3f s)\n", (double) prompt_tokens / (t_prefill_end - t0), t_prefill_end - t0);
	printf("decode:  %.1f tokens/s aggregate, %.2f ms/step (%ld tokens after the first, %.3f s)\n",
		   (gen - B) / (t_end - t_prefill_end), 1e3 * (t_end - t_prefill_end) / (o->bench_gen - 1),
		   gen - B, t_end - t_prefill_end);
	if (file_prompts)
		for (int b = 0; b < B; b++)
			free(file_prompts[b]);
	free(file_prompts);
	free(file_lens);
	free(ids);
	free(slots);
	return 0;
}

typedef struct score_slot
{
	bool		done;
	char	   *error;
	double	   *scores;
	int32_t		n_scores;
	llm_usage	usage;
} score_slot;

static void
on_score_event(const llm_event *ev, void *arg)
{
	score_slot *s = ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_TEXT)
		return;
	s->done = true;
	s->usage = ev->usage;
	if (ev->kind == LLM_EVENT_ERROR)
		s->error = strdup(ev->text);
	else
	{
		s->scores = malloc((size_t) (ev->n_scores > 0 ? ev->n_scores : 1) * sizeof(double));
		memcpy(s->scores, ev->scores, (size_t) ev->n_scores * sizeof(double));
		s->n_scores = ev->n_scores;
	}
}

static int
cmd_score(llm_engine *e, const cli_opts *o)
{
	char		err[512];
	size_t	   *lens;
	llm_request req;
	score_slot	s;
	llm_status	st;

	if (o->prompt == NULL || o->n_labels == 0)
		usage();
	lens = calloc((size_t) o->n_labels, sizeof(size_t));
	for (int i = 0; i < o->n_labels; i++)
		lens[i] = strlen(o->labels[i]);
	req = text_request(o, o->prompt);
	req.mode = LLM_MODE_SCORE;
	req.n_continuations = o->n_labels;
	req.continuations = o->labels;
	req.continuation_lens = lens;
	req.continuation_eot = o->eot;
	memset(&s, 0, sizeof(s));
	llm_engine_debug_score_sharing(e, (llm_score_sharing) o->score_sharing);
	st = llm_engine_submit(e, 1, &req, &s, err, sizeof(err));
	free(lens);
	if (st != LLM_OK)
	{
		fprintf(stderr, "llm-cli: %s: %s\n", llm_status_name(st), err);
		return 1;
	}
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_score_event, NULL) != LLM_OK)
			break;
	if (!s.done || s.error)
	{
		fprintf(stderr, "llm-cli: %s\n", s.error ? s.error : "engine failure");
		free(s.error);
		return 1;
	}
	for (int i = 0; i < s.n_scores; i++)
		printf("%.9f\t%s\n", s.scores[i], o->labels[i]);
	{
		llm_engine_stats es;

		llm_engine_get_stats(e, &es);
		fflush(stdout);
		fprintf(stderr, "[%d prompt tokens (%d cached), %lld token rows computed, %lld KV blocks copied, "
				"total %.1f ms]\n", s.usage.prompt_tokens, s.usage.cached_tokens,
				(long long) es.computed_tokens, (long long) es.copied_blocks, s.usage.total_ms);
	}
	free(s.scores);
	return 0;
}

typedef struct embed_slot
{
	bool		done;
	char	   *error;
	float	   *vector;
	int32_t		n_vector;
	llm_usage	usage;
} embed_slot;

static void
on_embed_event(const llm_event *ev, void *arg)
{
	embed_slot *s = ev->user_data;

	(void) arg;
	s->done = true;
	s->usage = ev->usage;
	if (ev->kind == LLM_EVENT_ERROR)
		s->error = strdup(ev->text);
	else if (ev->kind == LLM_EVENT_VECTOR)
	{
		s->vector = malloc((size_t) ev->n_vector * sizeof(float));
		if (s->vector != NULL)
			memcpy(s->vector, ev->vector, (size_t) ev->n_vector * sizeof(float));
		s->n_vector = s->vector != NULL ? ev->n_vector : 0;
	}
}

/* "101, 2023 102" -> ids (malloc'd); -1 on a malformed list. */
static int32_t
parse_ids(const char *text, int32_t **out)
{
	int32_t		n = 0,
				cap = 16;
	int32_t    *ids = malloc((size_t) cap * sizeof(int32_t));
	const char *p = text;

	while (ids != NULL && *p)
	{
		char	   *end;
		long		v;

		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		v = strtol(p, &end, 10);
		if (end == p || v < 0 || v > INT32_MAX)
		{
			free(ids);
			return -1;
		}
		if (n == cap && (ids = realloc(ids, (size_t) (cap *= 2) * sizeof(int32_t))) == NULL)
			break;
		ids[n++] = (int32_t) v;
		p = end;
	}
	if (ids == NULL || n == 0)
	{
		free(ids);
		return -1;
	}
	*out = ids;
	return n;
}

/*
 * The EMBED vector of the prompt, one float a line (%.9g: the float back
 * exactly); with --batch FILE, every line's input submitted at once (the
 * engine batches them) and one vector a line, its floats space-separated,
 * in the file's order, then on stderr the inputs, tokens, wall time and
 * tokens per second.  --token-ids: each input is token ids ("101 2023 102").
 */
static int
cmd_embed(llm_engine *e, const cli_opts *o)
{
	char		err[512];
	char	  **texts = NULL;
	int			n = 0,
				rc = 0;
	embed_slot *s;
	int32_t   **ids;
	int64_t		tokens = 0;
	double		t0;

	if (o->batch_file != NULL)
	{
		if ((texts = read_batch_prompts(o->batch_file, &n)) == NULL)
			return 1;
	}
	else if (o->prompt != NULL)
	{
		texts = malloc(sizeof(char *));
		texts[0] = strdup(o->prompt);
		n = 1;
	}
	else
		usage();
	s = calloc((size_t) (n > 0 ? n : 1), sizeof(embed_slot));
	ids = calloc((size_t) (n > 0 ? n : 1), sizeof(int32_t *));
	t0 = now_s() * 1000;
	for (int i = 0; i < n && rc == 0; i++)
	{
		llm_request req;
		llm_status	st;

		if (o->token_ids)
		{
			int32_t		k = parse_ids(texts[i], &ids[i]);

			if (k < 0)
			{
				fprintf(stderr, "llm-cli: input %d: not a list of token ids\n", i + 1);
				rc = 1;
				break;
			}
			req = tokens_request(o, ids[i], k);
		}
		else
			req = text_request(o, texts[i]);
		req.mode = LLM_MODE_EMBED;
		req.pooling = o->pooling;
		req.normalize = o->normalize;
		req.truncate = o->truncate;
		st = llm_engine_submit(e, (uint64_t) i + 1, &req, &s[i], err, sizeof(err));
		if (st != LLM_OK)
		{
			fprintf(stderr, "llm-cli: input %d: %s: %s\n", i + 1, llm_status_name(st), err);
			rc = 1;
		}
	}
	while (rc == 0 && llm_engine_has_work(e))
		if (llm_engine_step(e, on_embed_event, NULL) != LLM_OK)
			break;
	for (int i = 0; i < n && rc == 0; i++)
	{
		if (!s[i].done || s[i].error || s[i].vector == NULL)
		{
			fprintf(stderr, "llm-cli: input %d: %s\n", i + 1, s[i].error ? s[i].error : "engine failure");
			rc = 1;
			break;
		}
		tokens += s[i].usage.prompt_tokens;
		for (int32_t k = 0; k < s[i].n_vector; k++)
			printf(o->batch_file ? (k ? " %.9g" : "%.9g") : "%.9g\n", s[i].vector[k]);
		if (o->batch_file)
			printf("\n");
	}
	if (rc == 0)
	{
		double		ms = now_s() * 1000 - t0;

		fprintf(stderr, "kernels: %s\n", llm_engine_kernels(e));
		if (o->batch_file)
			fprintf(stderr, "[%d inputs, %lld tokens, %.1f ms, %.1f tokens/s]\n", n, (long long) tokens, ms,
					ms > 0 ? tokens * 1000.0 / ms : 0.0);
		else
			fprintf(stderr, "[%d prompt tokens (%d cached), %d floats, total %.1f ms]\n", s[0].usage.prompt_tokens,
					s[0].usage.cached_tokens, s[0].n_vector, s[0].usage.total_ms);
	}
	for (int i = 0; i < n; i++)
	{
		free(s[i].error);
		free(s[i].vector);
		free(ids[i]);
		free(texts[i]);
	}
	free(s);
	free(ids);
	free(texts);
	return rc;
}

/*
 * tokenize: the model file's tokenizer and chat template alone
 * (llm_vocab_file_open), no weights, so a vocabulary-only GGUF works too.
 * Raw text without BOS; --chat renders --system and the text as messages.
 */
static int
cmd_tokenize(const cli_opts *o)
{
	char		err[1024];
	llm_vocab_file *v;
	int32_t    *ids;
	int64_t		n;

	if (o->prompt == NULL)
		usage();
	v = llm_vocab_file_open(o->ec.model_path, o->ec.chat_template, err, sizeof(err));
	if (v == NULL)
	{
		fprintf(stderr, "llm-cli: %s\n", err);
		return 1;
	}
	if (o->chat)
	{
		llm_chat_message msgs[2];
		int			k = 0;

		if (o->system)
		{
			msgs[k].role = "system";
			msgs[k].content = o->system;
			msgs[k].content_len = strlen(o->system);
			k++;
		}
		msgs[k].role = "user";
		msgs[k].content = o->prompt;
		msgs[k].content_len = strlen(o->prompt);
		k++;
		n = llm_chat_apply_alloc(&v->chat, v->tok, msgs, k, NULL, &ids, err, sizeof(err));
	}
	else
		n = llm_tokenize_alloc(v->tok, o->prompt, strlen(o->prompt), &ids, err, sizeof(err));
	if (n < 0)
	{
		fprintf(stderr, "llm-cli: %s\n", err);
		llm_vocab_file_close(v);
		return 1;
	}
	for (int64_t i = 0; i < n; i++)
		printf("%s%d", i ? " " : "", ids[i]);
	printf("\n");
	free(ids);
	llm_vocab_file_close(v);
	return 0;
}

int
main(int argc, char **argv)
{
	cli_opts	o;
	llm_engine *e;
	char		err[1024];
	int			rc;

	if (argc == 2 && strcmp(argv[1], "config-defaults") == 0)
		return cmd_config_defaults();
	parse_args(argc, argv, &o);
	check_options(&o);
	if (strcmp(o.cmd, "tokenize") == 0)
		return cmd_tokenize(&o);
	e = llm_engine_create(&o.ec, err, sizeof(err));
	if (e == NULL)
	{
		fprintf(stderr, "llm-cli: %s\n", err);
		return 1;
	}
	if (llm_engine_notes(e)[0] != '\0')
		fprintf(stderr, "llm-cli: warning: %s\n", llm_engine_notes(e));
	if (strcmp(o.cmd, "generate") == 0)
	{
		rc = cmd_generate(e, &o);
		if (o.kv_stats)
			print_kv_stats(e);
	}
	else if (strcmp(o.cmd, "bench") == 0)
		rc = cmd_bench(e, &o);
	else if (strcmp(o.cmd, "score") == 0)
		rc = cmd_score(e, &o);
	else if (strcmp(o.cmd, "embed") == 0)
		rc = cmd_embed(e, &o);
	else
		usage();
	llm_engine_destroy(e);
	free(o.stop);
	free(o.labels);
	return rc;
}
