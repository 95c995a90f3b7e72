/*
 * test_arch_golden.c — the architectures qwen2, qwen3, llama with Llama 3.1
 * RoPE factors, phi3, gemma2, granite and smollm3 against llama.cpp, on
 * synthetic random-weight models of each family's shape at CI size
 * (tools/make_synth_gguf.py arch FAMILY small, F16 and Q8_0; the Q4_K_M mix
 * of size small-k, quantized by llama.cpp's llama-quantize and committed in
 * test/golden/arch/q4_k_m/, since CI has no llama.cpp).
 *
 * The models are written into build/synth/ by the generator (seeded) when
 * absent or when their sha256 differs from test/golden/arch/models.tsv,
 * and must then have it: the goldens (scripts/oracle/make_arch_golden.sh,
 * llama.cpp's AVX-512 build) were made from those bytes.
 *
 * Per model (fidelity, tier S of docs/GEMMA3.md), through the model API:
 * each golden prompt in one step, then the oracle's greedy tokens one step
 * each (teacher forcing, one-token rows marked as decode rows), comparing
 * every logits row with the oracle's: max |diff| <= 0.05, RMS diff <=
 * 0.01 of the row's standard deviation, our argmax equal to the oracle's
 * token at >= 95% of the steps and elsewhere only where the oracle's top-2
 * margin is below 0.1; every row's argmax among the oracle's top 5.  The
 * Q4_K_M files are held to the same tier: the prompt's rows carry the row
 * forms of one llama.cpp batch (backend.h LLM_ROW_*), so the repacked Q4_K
 * rows are summed in llama.cpp's order (without them the prompt's KV drifts
 * to about 0.15 std, tier B only).
 * Per family (the F16 model, through the engine, greedy): the prompts
 * batched together, chunked (5 tokens per step), preempted in a tiny KV
 * pool and served cold then warm from the prefix cache, each identical to
 * the prompt's solo run.  Also: llm_engine_model_info_json names the
 * architecture; a mixture-of-experts architecture, a RoPE scaling type
 * not implemented (YaRN) and a missing per-layer norm are refused at load
 * with the architecture or key named.
 *
 * With LLM_ARCH_MODEL (a model file) and LLM_ARCH_GOLDEN_DIR (its goldens as
 * DIR/FAMILY-f16.{tsv,f16}) and a family argument: that model's fidelity
 * alone (scripts/oracle/check_arch_vocab.sh: the families' real
 * vocabularies, goldens made on the spot).
 */
#include "unit.h"
#include "golden_test_util.h"
#include "kernels/backend.h"
#include "engine/engine.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_DIR	"test/golden/arch"
#define SYNTH_DIR	"build/synth"
#define GEN			16			/* oracle steps per prompt (arch_golden.cpp) */
#define MAX_CASES	8
#define N_CTX		4096		/* the oracle's context (LongRoPE picks its factors by it) */
#define BLOCK		16

static const char *golden_dir = GOLDEN_DIR;
static const char *const families[] = {"qwen2", "qwen3", "llama31", "phi3", "gemma2", "granite", "smollm3"};
static const char *const archs[] = {"qwen2", "qwen3", "llama", "phi3", "gemma2", "granite", "smollm3"};

typedef struct arch_case
{
	char		id[16];
	int_list	prompt;
	int_list	gen;
} arch_case;

/* ---- the models ---- */

static bool
sha_matches(const char *path, const char *sha)
{
	char		cmd[600],
				got[80] = "";
	FILE	   *p;

	snprintf(cmd, sizeof(cmd), "sha256sum '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (p == NULL)
		return false;
	if (fscanf(p, "%64s", got) != 1)
		got[0] = '\0';
	pclose(p);
	return strcmp(got, sha) == 0;
}

/* build/synth/FAMILY-small-TYPE.gguf with the sha256 of models.tsv, written when needed; false on failure. */
static bool
ensure_model(const char *fam, const char *type, char *path, size_t len)
{
	char		line[512],
				want[80] = "",
				cmd[1024],
				lt[8];
	FILE	   *f = fopen(GOLDEN_DIR "/models.tsv", "r");

	for (int i = 0; type[i] && i < 7; i++)
		lt[i] = (char) (type[i] >= 'A' && type[i] <= 'Z' ? type[i] - 'A' + 'a' : type[i]), lt[i + 1] = '\0';
	bool		committed = strcmp(type, "Q4_K_M") == 0;
	const char *size = committed ? "small-k" : "small";

	if (committed)
		snprintf(path, len, GOLDEN_DIR "/q4_k_m/%s.gguf", fam);
	else
		snprintf(path, len, SYNTH_DIR "/%s-small-%s.gguf", fam, lt);
	while (f && fgets(line, sizeof(line), f))
	{
		char		a[32],
					s[16],
					t[16],
					h[80];

		if (sscanf(line, "%31s %15s %15s %79s", a, s, t, h) == 4 && strcmp(a, fam) == 0 &&
			strcmp(s, size) == 0 && strcmp(t, type) == 0)
			snprintf(want, sizeof(want), "%s", h);
	}
	if (f)
		fclose(f);
	if (want[0] == '\0')
	{
		printf("# %s %s: no sha256 in %s/models.tsv\n", fam, type, GOLDEN_DIR);
		return false;
	}
	if (sha_matches(path, want))
		return true;
	if (committed)
	{
		printf("# %s: not the sha256 of models.tsv (made by scripts/oracle/make_arch_golden.sh)\n", path);
		return false;
	}
	snprintf(cmd, sizeof(cmd),
			 "mkdir -p " SYNTH_DIR " && python3 tools/make_synth_gguf.py arch %s small '%s' --type %s --sha256 %s",
			 fam, path, type, want);
	printf("# writing %s\n", path);
	if (system(cmd) != 0)
		return false;
	return sha_matches(path, want);
}

/* ---- the goldens ---- */

/* Comma-separated integers into out (malloc'ed). */
static void
parse_commas(const char *s, int_list *out)
{
	int			cap = 16;

	out->n = 0;
	out->v = malloc(cap * sizeof(int32_t));
	while (*s)
	{
		char	   *end;
		long		v = strtol(s, &end, 10);

		if (end == s)
			break;
		if (out->n == cap)
			out->v = realloc(out->v, (cap *= 2) * sizeof(int32_t));
		out->v[out->n++] = (int32_t) v;
		s = *end == ',' ? end + 1 : end;
	}
}

static int
load_cases(const char *path, arch_case *cases, int *n_vocab)
{
	char		line[8192];
	int			n = 0;
	FILE	   *f = fopen(path, "r");

	if (f == NULL)
		return -1;
	*n_vocab = 0;
	while (fgets(line, sizeof(line), f) && n < MAX_CASES)
	{
		char	   *col[4];

		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#')
		{
			const char *v = strstr(line, "n_vocab ");

			if (v)
				*n_vocab = atoi(v + 8);
			if (strncmp(line, "# system:", 9) == 0)
				snprintf(system_line, sizeof(system_line), "%.1000s", line + 2);
			continue;
		}
		if (split_tabs(line, col, 4) != 3)
			continue;
		snprintf(cases[n].id, sizeof(cases[n].id), "%s", col[0]);
		parse_commas(col[1], &cases[n].prompt);
		parse_commas(col[2], &cases[n].gen);
		n++;
	}
	fclose(f);
	return n;
}

static float
half_to_float(uint16_t h)
{
	uint32_t	s = (uint32_t) (h >> 15) << 31,
				e = (h >> 10) & 31,
				m = h & 1023,
				u;
	float		out;

	if (e == 0)
		return (h >> 15 ? -1.0f : 1.0f) * ldexpf((float) m, -24);
	if (e == 31)
		u = s | 0x7f800000u | (m << 13);
	else
		u = s | ((e + 112) << 23) | (m << 13);
	memcpy(&out, &u, sizeof(out));
	return out;
}

/* ---- fidelity through the model API ---- */

typedef struct fid_stats
{
	double		max_abs;		/* largest |ours - oracle| */
	double		worst_max_std;	/* largest max |diff| / row std */
	double		worst_rms;		/* largest RMS diff / row std */
	int			steps,
				agree,
				bad_div,		/* argmax differs where the oracle's margin >= 0.1 */
				not_top5;		/* rows whose argmax is not among the oracle's top 5 */
} fid_stats;

static void
compare_row(const float *ours, const uint16_t *ref16, int n_vocab, int32_t want, bool check_arg, fid_stats *st)
{
	double		sum = 0.0,
				sq = 0.0,
				dsq = 0.0,
				std;
	int			arg = 0;
	float		top1 = -INFINITY,
				top2 = -INFINITY,
				row_max = 0.0f;
	int			above = 0;

	for (int i = 0; i < n_vocab; i++)
	{
		double		r = half_to_float(ref16[i]),
					d = ours[i] - r;

		sum += r;
		sq += r * r;
		dsq += d * d;
		if (fabs(d) > row_max)
			row_max = (float) fabs(d);
		if (ours[i] > ours[arg])
			arg = i;
		if (r > top1)
			top2 = top1, top1 = (float) r;
		else if (r > top2)
			top2 = (float) r;
	}
	for (int i = 0; i < n_vocab; i++)
		above += half_to_float(ref16[i]) > half_to_float(ref16[arg]);
	if (above >= 5)
		st->not_top5++;
	std = sqrt(sq / n_vocab - (sum / n_vocab) * (sum / n_vocab));
	if (row_max > st->max_abs)
		st->max_abs = row_max;
	if (row_max / std > st->worst_max_std)
		st->worst_max_std = row_max / std;
	if (sqrt(dsq / n_vocab) / std > st->worst_rms)
		st->worst_rms = sqrt(dsq / n_vocab) / std;
	if (!check_arg)
		return;
	st->steps++;
	if (arg == want)
		st->agree++;
	else
	{
		printf("# argmax %d, oracle %d (oracle margin %.4f)\n", arg, want, top1 - top2);
		if (top1 - top2 >= 0.1f)
			st->bad_div++;
	}
}

/* One step of n tokens of one sequence at positions pos0.. (slots = positions); logits of its last row. */
static int
step(llm_model *m, const int32_t *toks, int n, int pos0, bool decode, float *logits, char *err, size_t errlen)
{
	int32_t		pos[64],
				slot[64],
				bt[N_CTX / BLOCK],
				sstart[2] = {0, n},
				kvlen[1] = {pos0 + n},
				row = n - 1;
	uint8_t		dec[64],
				forms[64];
	llm_step_desc d;

	for (int j = 0; j < N_CTX / BLOCK; j++)
		bt[j] = j;
	for (int t = 0; t < n; t++)
	{
		pos[t] = slot[t] = pos0 + t;
		dec[t] = decode;
		/* the prompt is one llama.cpp batch (engine/step.c row_forms) */
		forms[t] = decode ? 0 : (uint8_t) ((t < n - n % 4 ? LLM_ROW_GROUPED : 0) | (n >= 8 ? LLM_ROW_WIDE : 0));
	}
	memset(&d, 0, sizeof(d));
	d.n_tokens = n;
	d.n_seqs = 1;
	d.token_ids = toks;
	d.positions = pos;
	d.slots = slot;
	d.seq_start = sstart;
	d.seq_kv_len = kvlen;
	d.block_tables = bt;
	d.max_blocks_per_seq = N_CTX / BLOCK;
	d.out_rows = &row;
	d.n_out = 1;
	d.decode_rows = dec;
	d.row_forms = forms;
	return llm_model_forward(m, &d, logits, err, errlen);
}

static void
check_fidelity(const char *fam, const char *type, const char *model_path)
{
	char		path[512],
				err[512],
				lt[8];
	arch_case	cases[MAX_CASES];
	int			n_vocab,
				n;
	uint16_t   *ref;
	FILE	   *f;
	size_t		rows;
	gguf_file  *g;
	llm_backend *b;
	llm_model  *m = NULL;
	fid_stats	st = {0};

	snprintf(lt, sizeof(lt), "%s", strcmp(type, "F16") == 0 ? "f16" : strcmp(type, "Q4_K_M") == 0 ? "q4_k_m" : "q8_0");
	snprintf(path, sizeof(path), "%s/%s-%s.tsv", golden_dir, fam, lt);
	n = load_cases(path, cases, &n_vocab);
	if (!CHECK(n > 0 && n_vocab > 0, "%s %s: %d golden prompts in %s", fam, type, n, path))
		return;
	rows = (size_t) n * (GEN + 1) * n_vocab;
	ref = malloc(rows * sizeof(uint16_t));
	snprintf(path, sizeof(path), "%s/%s-%s.f16", golden_dir, fam, lt);
	f = fopen(path, "rb");
	if (!CHECK(f && fread(ref, sizeof(uint16_t), rows, f) == rows, "%s %s: golden logits %s", fam, type, path))
	{
		if (f)
			fclose(f);
		free(ref);
		return;
	}
	fclose(f);
	g = gguf_open(model_path, err, sizeof(err));
	b = g ? llm_backend_cpu_create(getenv("LLM_TEST_THREADS") ? atoi(getenv("LLM_TEST_THREADS")) : 0,
								   err, sizeof(err)) : NULL;
	m = b ? llm_model_load(g, b, err, sizeof(err)) : NULL;
	if (CHECK(m != NULL, "%s %s: loads%s%s", fam, type, m ? "" : ": ", m ? "" : err))
	{
		const llm_model_config *c = llm_model_get_config(m);
		llm_kv_geometry geo = {c->n_layers, c->n_kv_heads, c->head_dim, BLOCK, N_CTX / BLOCK, LLM_KV_F16,
		NULL, 0, 0};
		float	   *lg = malloc((size_t) c->n_vocab * sizeof(float));
		bool		ok = c->n_vocab == n_vocab && b->ops->kv_init(b, &geo) == 0;

		llm_model_set_context(m, N_CTX);
		for (int i = 0; ok && i < n; i++)
		{
			const arch_case *k = &cases[i];
			const uint16_t *r = ref + (size_t) i * (GEN + 1) * n_vocab;

			ok = step(m, k->prompt.v, k->prompt.n, 0, false, lg, err, sizeof(err)) == 0;
			if (ok)
				compare_row(lg, r, n_vocab, k->gen.v[0], true, &st);
			for (int s = 0; ok && s < GEN; s++)
			{
				ok = step(m, &k->gen.v[s], 1, k->prompt.n + s, true, lg, err, sizeof(err)) == 0;
				if (ok)
					compare_row(lg, r + (size_t) (s + 1) * n_vocab, n_vocab, s + 1 < GEN ? k->gen.v[s + 1] : -1,
								s + 1 < GEN, &st);
			}
		}
		CHECK(ok, "%s %s: every step ran%s%s", fam, type, ok ? "" : ": ", ok ? "" : err);
		printf("# %s %s: max |diff| %.5f (%.5f std), worst RMS diff / std %.5f, argmax %d/%d, %d rows' argmax "
			   "outside the oracle's top 5\n", fam, type, st.max_abs, st.worst_max_std, st.worst_rms, st.agree,
			   st.steps, st.not_top5);
		CHECK(ok && st.max_abs <= 0.05, "%s %s: logits max |diff| %.5f <= 0.05 (tier S)", fam, type, st.max_abs);
		CHECK(ok && st.worst_rms <= 0.01, "%s %s: logits RMS diff %.5f <= 0.01 std (tier S)", fam, type,
			  st.worst_rms);
		CHECK(ok && st.not_top5 == 0, "%s %s: every row's argmax among the oracle's top 5", fam, type);
		CHECK(ok && st.steps > 0 && st.agree >= 0.95 * st.steps && st.bad_div == 0,
			  "%s %s: greedy %d/%d steps identical (>= 95%%), %d divergences at oracle margin >= 0.1", fam, type,
			  st.agree, st.steps, st.bad_div);
		free(lg);
	}
	llm_model_free(m);
	if (b)
		b->ops->destroy(b);
	if (g)
		gguf_close(g);
	free(ref);
	for (int i = 0; i < n; i++)
	{
		free(cases[i].prompt.v);
		free(cases[i].gen.v);
	}
}

/* ---- batch invariance through the engine ---- */

static llm_engine *
make_engine(const char *model, int max_batched, int64_t kv_bytes, bool prefix)
{
	llm_engine_config cfg;
	const char *threads = getenv("LLM_TEST_THREADS");
	char		err[512];
	llm_engine *e;

	llm_engine_config_defaults(&cfg);
	cfg.model_path = model;
	if (threads && *threads)
		cfg.n_threads = atoi(threads);
	cfg.n_ctx = N_CTX;
	if (max_batched > 0)
		cfg.max_batched_tokens = max_batched;
	cfg.kv_cache_bytes = kv_bytes;
	cfg.prefix_caching = prefix;
	e = llm_engine_create(&cfg, err, sizeof(err));
	if (e == NULL)
		printf("# engine from %s: %s\n", model, err);
	return e;
}

static void
run_set(llm_engine *e, const arch_case *cases, int n, run_result *out, uint64_t base)
{
	char		err[256];

	for (int i = 0; i < n; i++)
		add(e, base + i, &cases[i].prompt, &out[i]);
	if (!run_to_completion(e, err, sizeof(err)))
		printf("# engine: %s\n", err);
}

static int
n_same(const char *what, const char *fam, const run_result *got, const run_result *solo, int n)
{
	int			k = 0;

	for (int i = 0; i < n; i++)
	{
		if (same_tokens(&got[i], &solo[i]) && got[i].n > 0)
			k++;
		else
		{
			printf("# %s %s: case %d differs (%s)\n", fam, what, i, got[i].error);
			print_ids("solo", solo[i].tok, solo[i].n);
			print_ids(what, got[i].tok, got[i].n);
		}
	}
	return k;
}

static void
check_invariance(const char *fam, const char *arch, const char *model_path)
{
	char		path[512];
	arch_case	cases[MAX_CASES];
	int			n_vocab,
				n;
	run_result	solo[MAX_CASES],
				got[MAX_CASES];
	llm_engine *e,
			   *ec,
			   *ep;
	llm_engine_stats st;

	snprintf(path, sizeof(path), GOLDEN_DIR "/%s-f16.tsv", fam);
	n = load_cases(path, cases, &n_vocab);
	e = n > 0 ? make_engine(model_path, 0, 0, false) : NULL;
	if (!CHECK(e != NULL, "%s: engine from %s", fam, model_path))
		return;
	{
		char		info[2048],
					want[64];

		llm_engine_model_info_json(e, info, sizeof(info));
		snprintf(want, sizeof(want), "\"%s\"", arch);
		CHECK(strstr(info, want) != NULL, "%s: model info names the %s architecture: %.100s", fam, arch, info);
	}
	for (int i = 0; i < n; i++)
		run_set(e, &cases[i], 1, &solo[i], 100 + i);
	run_set(e, cases, n, got, 200);
	llm_engine_get_stats(e, &st);
	CHECK(st.max_batch_seqs > 1 && n_same("batch", fam, got, solo, n) == n,
		  "%s: %d prompts in one batch (up to %d sequences a step) identical to solo", fam, n, st.max_batch_seqs);
	ec = make_engine(model_path, 5, 0, false);
	if (CHECK(ec != NULL, "%s: engine with 5 tokens per step", fam))
	{
		run_set(ec, cases, n, got, 300);
		CHECK(n_same("chunked", fam, got, solo, n) == n, "%s: chunked prefill (5 tokens a step) identical to solo",
			  fam);
		llm_engine_destroy(ec);
	}
	{
		int			need = (cases[n - 1].prompt.n + GOLDEN_GEN_TOKENS) / BLOCK + 2;

		ep = make_engine(model_path, 0, (st.kv_block_bytes + st.kv_local_block_bytes) * need, false);
		if (CHECK(ep != NULL, "%s: engine with a %d-block KV pool", fam, need))
		{
			llm_engine_stats ps;

			run_set(ep, cases, n, got, 400);
			llm_engine_get_stats(ep, &ps);
			CHECK(ps.n_preemptions > 0 && n_same("preempted", fam, got, solo, n) == n,
				  "%s: preempted %lld times in a %d-block pool, identical to solo", fam,
				  (long long) ps.n_preemptions, need);
			llm_engine_destroy(ep);
		}
	}
	ep = make_engine(model_path, 0, 0, true);
	if (CHECK(ep != NULL, "%s: engine with prefix caching", fam))
	{
		run_result	warm;

		run_set(ep, &cases[n - 1], 1, &got[0], 500);
		run_set(ep, &cases[n - 1], 1, &warm, 501);
		CHECK(same_tokens(&got[0], &solo[n - 1]) && same_tokens(&warm, &solo[n - 1]) &&
			  warm.usage.cached_tokens > 0,
			  "%s: prefix cache cold and warm (%d of %d prompt tokens cached) identical to solo", fam,
			  warm.usage.cached_tokens, warm.usage.prompt_tokens);
		llm_engine_destroy(ep);
	}
	llm_engine_destroy(e);
	for (int i = 0; i < n; i++)
	{
		free(cases[i].prompt.v);
		free(cases[i].gen.v);
	}
}

/* ---- the chat-template models of test/t/038_arch_chat.pl ---- */

/*
 * build/synth/chat-ALIAS.gguf for each case of chat.tsv (the family's small
 * model with a real template embedded), with the golden's sha256: the TAP
 * test runs as another user, without the generator's numpy, and takes them
 * from here.
 */
static void
check_chat_models(void)
{
	char		line[16384];
	int			n = 0,
				good = 0;
	FILE	   *f = fopen(GOLDEN_DIR "/chat.tsv", "r");

	while (f && fgets(line, sizeof(line), f))
	{
		char	   *col[6],
					path[256],
					cmd[1024];

		if (line[0] == '#' || split_tabs(line, col, 6) < 5)
			continue;
		n++;
		snprintf(path, sizeof(path), SYNTH_DIR "/chat-%s.gguf", col[0]);
		if (!sha_matches(path, col[4]))
		{
			snprintf(cmd, sizeof(cmd),
					 "mkdir -p " SYNTH_DIR " && python3 tools/make_synth_gguf.py arch %s small '%s' "
					 "--chat-template '" GOLDEN_DIR "/templates/%s.jinja' %s%s --sha256 %s >/dev/null",
					 col[1], path, col[3], strcmp(col[2], "-") == 0 ? "" : col[2],
					 strcmp(col[2], "-") == 0 ? "" : " --set-arch llama", col[4]);
			if (system(cmd) != 0)
				printf("# %s: not written\n", path);
		}
		if (sha_matches(path, col[4]))
			good++;
	}
	if (f)
		fclose(f);
	CHECK(n > 0 && good == n, "%d of %d chat-template models (chat.tsv) written with their sha256", good, n);
}

/* ---- refusals at load ---- */

/* Write a variant of a family's small model (generator flags) and load it; the load error into err. */
static bool
load_fails(const char *fam, const char *flags, const char *name, char *err, size_t errlen)
{
	char		cmd[1024],
				path[256];
	gguf_file  *g;
	llm_backend *b = NULL;
	llm_model  *m = NULL;

	snprintf(path, sizeof(path), SYNTH_DIR "/refuse-%s.gguf", name);
	snprintf(cmd, sizeof(cmd), "mkdir -p " SYNTH_DIR " && python3 tools/make_synth_gguf.py arch %s small '%s' %s >/dev/null",
			 fam, path, flags);
	snprintf(err, errlen, "could not write %s", path);
	if (system(cmd) != 0)
		return false;
	g = gguf_open(path, err, errlen);
	if (g)
		b = llm_backend_cpu_create(1, err, errlen);
	if (b)
		m = llm_model_load(g, b, err, errlen);
	llm_model_free(m);
	if (b)
		b->ops->destroy(b);
	if (g)
		gguf_close(g);
	return g != NULL && b != NULL && m == NULL;
}

static void
check_refusals(void)
{
	char		err[512];

	CHECK(load_fails("qwen2", "--set-arch qwen2moe", "moe", err, sizeof(err)) &&
		  strstr(err, "\"qwen2moe\"") && strstr(err, "mixture-of-experts"),
		  "a mixture-of-experts architecture refused, named: %s", err);
	CHECK(load_fails("qwen2", "--kv qwen2.rope.scaling.type=yarn", "yarn", err, sizeof(err)) &&
		  strcmp(err, "GGUF metadata qwen2.rope.scaling.type: RoPE scaling \"yarn\" is not supported "
				 "(supported: none,linear)") == 0,
		  "YaRN RoPE scaling refused with the key named: %s", err);
	CHECK(load_fails("phi3", "--kv phi3.rope.scaling.type=su-yarn", "phi3-scaling", err, sizeof(err)) &&
		  strstr(err, "phi3.rope.scaling.type") && strstr(err, "\"su-yarn\""),
		  "an unknown RoPE scaling type refused with the key named: %s", err);
	CHECK(load_fails("gemma2", "--kv gemma2.rope.scaling.type=linear", "gemma2-linear", err, sizeof(err)) &&
		  strcmp(err, "GGUF metadata gemma2.rope.scaling.type: RoPE scaling \"linear\" is not supported") == 0,
		  "gemma2: RoPE scaling refused: %s", err);
	CHECK(load_fails("qwen2", "--set-arch qwen3", "qwen3-without-norms", err, sizeof(err)) &&
		  strstr(err, "blk.0.attn_q_norm.weight missing"),
		  "a qwen3 file without its Q/K norms refused: %s", err);
}

int
main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : getenv("LLM_TEST_ARCH");
	const char *model = getenv("LLM_ARCH_MODEL");

	if (model && *model)
	{
		golden_dir = getenv("LLM_ARCH_GOLDEN_DIR") ? getenv("LLM_ARCH_GOLDEN_DIR") : GOLDEN_DIR;
		if (CHECK(only && *only, "LLM_ARCH_MODEL %s: a family argument", model))
			check_fidelity(only, "F16", model);
		return unit_done();
	}

	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
	{
		char		f16[512],
					q8[512],
					q4[512];
		bool		have16,
					have8,
					have4;

		if (only && *only && strcmp(only, families[i]) != 0)
			continue;
		have16 = ensure_model(families[i], "F16", f16, sizeof(f16));
		have8 = ensure_model(families[i], "Q8_0", q8, sizeof(q8));
		have4 = ensure_model(families[i], "Q4_K_M", q4, sizeof(q4));
		CHECK(have16 && have8 && have4, "%s: synthetic models with the goldens' sha256", families[i]);
		if (have16)
			check_fidelity(families[i], "F16", f16);
		if (have8)
			check_fidelity(families[i], "Q8_0", q8);
		if (have4)
			check_fidelity(families[i], "Q4_K_M", q4);
		if (have16)
			check_invariance(families[i], archs[i], f16);
	}
	if (!(only && *only))
	{
		check_refusals();
		check_chat_models();
	}
	return unit_done();
}
