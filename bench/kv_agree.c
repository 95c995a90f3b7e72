/*
 * kv_agree.c — what a Q8_0 KV cache gives and costs against the F16 cache:
 * greedy agreement on the golden prompts, and how many full-context
 * requests fit in the engine's default pool.
 *
 * Agreement: test/golden/greedy.tsv (ChatML-rendered prompt ids and
 * llama.cpp's 32 greedy tokens), through the model and the CPU backend
 * directly, so no scheduler or sampler is involved.  Each prompt runs alone:
 * prefill in chunks of 512, then greedy decode (argmax, lowest id on ties;
 * decode rows in the one-token order, as the engine marks them), stopping
 * after an end-of-generation id as the golden file does.  Prints per cache
 * type how many continuations equal the oracle's, and for Q8_0 how many
 * equal F16's, the mean common prefix, and every first divergence with the
 * F16 top-2 logit margin there.
 *
 * Capacity: an engine per cache type with the default configuration
 * (llm.kv_cache_size 0: max_running full contexts, capped at 1 GiB; block
 * size 16; the model's context), its resolved pool in blocks, and how many
 * requests of a whole context (ceil(n_ctx / block_size) blocks each) it
 * holds at once; also for a budget of CAPACITY_MB_ALT.
 *
 * A measurement, not a test.  Prints the CPU's kernel implementation.
 *
 * Build:
 *   cc -O3 -std=gnu11 -I. bench/kv_agree.c build/libllm_engine.a -lpcre2-8 -lm -lpthread -ldl -o build/bench/kv_agree
 * Usage: build/bench/kv_agree [MODEL] [GREEDY_TSV] [THREADS]
 */
#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/dispatch.h"
#include "engine/engine.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEN 32
#define MAX_PROMPTS 128
#define MAX_IDS 4096
#define CHUNK 512
#define BS 16
#define CAPACITY_MB_ALT 256		/* test/regress.conf's llm.kv_cache_size */

typedef struct prompt
{
	char		id[32];
	int32_t    *ids;
	int			n;
	int32_t		gold[GEN];
	int			n_gold;
} prompt;

static const int32_t eog[] = {0, 2, 4};	/* the golden file's eog ids (header "# eog") */

static bool
is_eog(int32_t t)
{
	for (size_t i = 0; i < sizeof(eog) / sizeof(eog[0]); i++)
		if (eog[i] == t)
			return true;
	return false;
}

static int
parse_ids(char *s, int32_t *out, int cap)
{
	int			n = 0;
	char	   *end;

	while (n < cap)
	{
		long		v = strtol(s, &end, 10);

		if (end == s)
			break;
		out[n++] = (int32_t) v;
		s = end;
	}
	return n;
}

static int
read_prompts(const char *path, prompt *ps)
{
	FILE	   *f = fopen(path, "r");
	char	   *line = NULL;
	size_t		cap = 0;
	int			n = 0;

	if (f == NULL)
		return -1;
	while (n < MAX_PROMPTS && getline(&line, &cap, f) > 0)
	{
		char	   *col[5] = {0};
		char	   *p = line;
		int32_t		tmp[MAX_IDS];

		if (line[0] == '#' || line[0] == '\n')
			continue;
		for (int c = 0; c < 5 && p; c++)
		{
			col[c] = p;
			p = strchr(p, '\t');
			if (p)
				*p++ = '\0';
		}
		if (col[3] == NULL)
			continue;
		snprintf(ps[n].id, sizeof(ps[n].id), "%s", col[0]);
		ps[n].n = parse_ids(col[2], tmp, MAX_IDS);
		ps[n].ids = malloc(sizeof(int32_t) * ps[n].n);
		memcpy(ps[n].ids, tmp, sizeof(int32_t) * ps[n].n);
		ps[n].n_gold = parse_ids(col[3], ps[n].gold, GEN);
		n++;
	}
	free(line);
	fclose(f);
	return n;
}

/*
 * Greedy continuation of one prompt on a fresh KV cache (positions from
 * 0, blocks 0.. of the pool): gen[] (stops after an eog id), margin[] the
 * top-2 logit margin of each step.  Returns the number of tokens or -1.
 */
static int
greedy(llm_model *m, llm_backend *b, const prompt *p, int n_vocab, int32_t *gen, float *margin)
{
	const int	max_blocks = (p->n + GEN + BS - 1) / BS;
	int32_t    *bt = malloc(sizeof(int32_t) * max_blocks),
			   *pos = malloc(sizeof(int32_t) * CHUNK),
			   *slots = malloc(sizeof(int32_t) * CHUNK),
			   *tok = malloc(sizeof(int32_t) * CHUNK);
	uint8_t    *dec = malloc(CHUNK);
	float	   *logits = malloc(sizeof(float) * n_vocab);
	int			n_gen = 0,
				done = 0;
	char		err[256];

	for (int i = 0; i < max_blocks; i++)
		bt[i] = i;
	while (n_gen < GEN)
	{
		/* prompt chunks first, then one generated token per step */
		int			from = done,
					n = done < p->n ? (p->n - done < CHUNK ? p->n - done : CHUNK) : 1;
		int32_t		ss[2] = {0, n},
					kvl[1] = {from + n},
					out[1] = {n - 1};
		llm_step_desc d;

		for (int i = 0; i < n; i++)
		{
			int			ps = from + i;

			pos[i] = ps;
			slots[i] = bt[ps / BS] * BS + ps % BS;
			tok[i] = ps < p->n ? p->ids[ps] : gen[ps - p->n];
			dec[i] = ps >= p->n;
		}
		d = (llm_step_desc) {n, 1, tok, pos, slots, ss, kvl, bt, max_blocks, out, 1, dec, NULL, NULL};
		done += n;
		if (done < p->n)
		{
			/* a prompt chunk that is not the last: logits unused */
			d.n_out = 0;
			d.out_rows = NULL;
		}
		if (llm_model_forward(m, &d, d.n_out ? logits : NULL, err, sizeof(err)) != 0)
		{
			fprintf(stderr, "kv_agree: %s\n", err);
			n_gen = -1;
			break;
		}
		if (done < p->n)
			continue;
		{
			int			best = 0;
			float		b1 = -FLT_MAX,
						b2 = -FLT_MAX;

			for (int i = 0; i < n_vocab; i++)
				if (logits[i] > b1)
				{
					b2 = b1;
					b1 = logits[i];
					best = i;
				}
				else if (logits[i] > b2)
					b2 = logits[i];
			margin[n_gen] = b1 - b2;
			gen[n_gen++] = best;
			if (is_eog(best))
				break;
		}
	}
	free(bt);
	free(pos);
	free(slots);
	free(tok);
	free(dec);
	free(logits);
	return n_gen;
}

/*
 * Pool of an engine with the default configuration but kv_cache_bytes and
 * the KV type: prints its blocks and how many whole contexts fit.  0 or -1.
 */
static int
capacity(const char *model_path, int threads, const char *dtype, int64_t kv_bytes)
{
	llm_engine_config c;
	llm_engine_stats st;
	llm_engine *e;
	char		err[512];
	int64_t		per_request;
	char		budget[32];

	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = threads;
	c.kv_cache_dtype = dtype;
	c.kv_cache_bytes = kv_bytes;
	e = llm_engine_create(&c, err, sizeof(err));
	if (e == NULL)
	{
		fprintf(stderr, "kv_agree: engine (%s): %s\n", dtype, err);
		return -1;
	}
	llm_engine_get_config(e, &c);
	llm_engine_get_stats(e, &st);
	per_request = (c.n_ctx + c.block_size - 1) / c.block_size;
	if (kv_bytes)
		snprintf(budget, sizeof(budget), "%lldMB", (long long) (kv_bytes >> 20));
	else
		snprintf(budget, sizeof(budget), "0 (auto)");
	printf("  %-4s pool, llm.kv_cache_size %s: %lld bytes = %d blocks of %d tokens (%lld bytes each); "
		   "a %d-token context takes %lld blocks: %lld requests at once\n",
		   dtype, budget, (long long) c.kv_cache_bytes, st.kv_blocks_total,
		   c.block_size, (long long) (c.kv_cache_bytes / st.kv_blocks_total), c.n_ctx,
		   (long long) per_request, (long long) (st.kv_blocks_total / per_request));
	llm_engine_destroy(e);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *model_path = argc > 1 ? argv[1] : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	const char *tsv = argc > 2 ? argv[2] : "test/golden/greedy.tsv";
	int			threads = argc > 3 ? atoi(argv[3]) : 2;
	static prompt ps[MAX_PROMPTS];
	static int32_t gen[2][MAX_PROMPTS][GEN];
	static float margin[2][MAX_PROMPTS][GEN];
	static int	ngen[2][MAX_PROMPTS];
	int			n = read_prompts(tsv, ps),
				max_len = 0;
	const int	dtypes[2] = {LLM_KV_F16, LLM_KV_Q8_0};
	char		err[512];
	const char *impl = "?";

	if (n <= 0)
	{
		fprintf(stderr, "kv_agree: cannot read prompts from %s\n", tsv);
		return 1;
	}
	for (int i = 0; i < n; i++)
		max_len = ps[i].n > max_len ? ps[i].n : max_len;
	for (int di = 0; di < 2; di++)
	{
		gguf_file  *f = gguf_open(model_path, err, sizeof(err));
		llm_backend *b = f ? llm_backend_cpu_create(threads, err, sizeof(err)) : NULL;
		llm_model  *m = b ? llm_model_load(f, b, err, sizeof(err)) : NULL;
		const llm_model_config *c;
		llm_kv_geometry g;

		if (m == NULL)
		{
			fprintf(stderr, "kv_agree: %s\n", err);
			return 1;
		}
		c = llm_model_get_config(m);
		impl = llm_backend_cpu_impl_name(b);
		g = (llm_kv_geometry) {c->n_layers, c->n_kv_heads, c->head_dim, BS, (max_len + GEN + BS - 1) / BS,
			dtypes[di]};
		if (b->ops->kv_init(b, &g) != 0)
		{
			fprintf(stderr, "kv_agree: %s\n", b->ops->last_error(b));
			return 1;
		}
		for (int i = 0; i < n; i++)
			if ((ngen[di][i] = greedy(m, b, &ps[i], c->n_vocab, gen[di][i], margin[di][i])) < 0)
				return 1;
		llm_model_free(m);
		b->ops->destroy(b);
		gguf_close(f);
	}
	{
		int			oracle[2] = {0, 0},
					same = 0;
		double		prefix = 0;

		for (int i = 0; i < n; i++)
		{
			int			k = 0;

			for (int di = 0; di < 2; di++)
				oracle[di] += ngen[di][i] == ps[i].n_gold &&
					memcmp(gen[di][i], ps[i].gold, sizeof(int32_t) * ps[i].n_gold) == 0;
			while (k < ngen[0][i] && k < ngen[1][i] && gen[0][i][k] == gen[1][i][k])
				k++;
			prefix += k;
			if (k == ngen[0][i] && k == ngen[1][i])
				same++;
			else
				printf("  %-6s first divergence at token %2d (f16 top-2 margin there %.4f)\n", ps[i].id, k,
					   k < ngen[0][i] ? margin[0][i][k] : 0.0);
		}
		printf("kv_agree: %d golden prompts (%s), greedy up to %d tokens, %d threads, %s kernels "
			   "(CPU: AVX2 %s, AVX512-VNNI %s)\n", n, tsv, GEN, threads, impl,
			   llm_cpu_has_avx2() ? "yes" : "no", llm_cpu_has_avx512vnni() ? "yes" : "no");
		printf("  f16  cache: %d/%d continuations equal llama.cpp's\n", oracle[0], n);
		printf("  q8_0 cache: %d/%d equal llama.cpp's, %d/%d equal the f16 cache's, mean common prefix with f16 %.1f tokens\n",
			   oracle[1], n, same, n, prefix / n);
	}
	printf("kv_agree: pool capacity, default configuration\n");
	for (int di = 0; di < 2; di++)
		if (capacity(model_path, threads, di ? "q8_0" : "f16", 0) != 0 ||
			capacity(model_path, threads, di ? "q8_0" : "f16", (int64_t) CAPACITY_MB_ALT << 20) != 0)
			return 1;
	return 0;
}
