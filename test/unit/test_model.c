/*
 * test_model.c — the model layer (engine/model*.c) on the real model
 * (LLM_TEST_MODEL, default models/SmolLM2-135M-Instruct.Q4_1.gguf) and the
 * CPU backend, without the engine.  Checks:
 *  1. the config llama fills: hyper-parameters of the file, every layer
 *     global (attn_window 0) with the file's RoPE base, attention scale
 *     1/sqrt(head_dim);
 *  2. the architecture table: a file whose general.architecture is another
 *     name fails to load with an error naming it and the supported ones; a
 *     file without the key fails with a message;
 *  3. several logits rows per sequence: the logits of every row of a
 *     prefill (out_rows = all rows) are bit-identical to those of the same
 *     position computed one prompt prefix at a time; a step of two
 *     sequences with out_rows in scrambled order, repeated, more rows than
 *     sequences, returns for each row the logits of that row's solo run;
 *  4. every kernel implementation on the whole model: a two-sequence
 *     prefill step through a backend forced to scalar, AVX2 and
 *     AVX512-VNNI kernels (each with its own repacked weights, so the AVX2
 *     tiles run on an AVX-512 host too) gives logits bit-identical to the
 *     scalar ones; an implementation this CPU lacks is counted as skipped.
 * Env: LLM_TEST_MODEL, LLM_TEST_THREADS (default: all CPUs).
 */
#include "unit.h"
#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/dispatch.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum
{
	BLOCK = 16,
	N_BLOCKS = 16,				/* per layer: two sequences of up to 8 blocks */
	MAX_BLOCKS = 8,
	LEN_A = 21,					/* prompt lengths */
	LEN_B = 13
};

/* Read a whole file into a heap buffer of its exact size. */
static uint8_t *
read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	long		n;
	uint8_t    *buf = NULL;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0)
	{
		buf = malloc((size_t) n);
		rewind(f);
		if (buf != NULL && fread(buf, 1, (size_t) n, f) != (size_t) n)
		{
			free(buf);
			buf = NULL;
		}
		*len = (size_t) n;
	}
	fclose(f);
	return buf;
}

static void
test_config(const llm_model_config *c, const gguf_file *f)
{
	int64_t		iv;
	double		dv;
	bool		layers_ok = c->layer != NULL;

	CHECK(strcmp(c->arch, "llama") == 0, "architecture %s", c->arch);
	CHECK(gguf_get_int(f, "llama.block_count", &iv) && c->n_layers == iv, "n_layers %d = llama.block_count",
		  c->n_layers);
	CHECK(gguf_get_float(f, "llama.rope.freq_base", &dv) && c->rope_theta == (float) dv,
		  "rope_theta %g = llama.rope.freq_base", c->rope_theta);
	CHECK(c->head_dim * c->n_heads == c->dim && c->attn_scale == 1.0f / sqrtf((float) c->head_dim),
		  "head_dim %d, attention scale %g = 1/sqrt(head_dim)", c->head_dim, c->attn_scale);
	for (int l = 0; layers_ok && l < c->n_layers; l++)
		if (c->layer[l].attn_window != 0 || c->layer[l].rope_theta != c->rope_theta)
			layers_ok = false;
	CHECK(layers_ok, "every layer global (attn_window 0) with RoPE base %g", c->rope_theta);
}

/* Overwrite the first occurrence of `from` in buf[0, limit) with `to` (same length). */
static bool
patch(uint8_t *buf, size_t limit, const char *from, const char *to)
{
	size_t		n = strlen(from);

	for (size_t i = 0; i + n <= limit; i++)
		if (memcmp(buf + i, from, n) == 0)
		{
			memcpy(buf + i, to, n);
			return true;
		}
	return false;
}

static void
test_architecture_table(const char *path, llm_backend *b)
{
	size_t		len = 0;
	uint8_t    *buf = read_file(path, &len);
	gguf_file  *f;
	gguf_str	s;
	char		err[512];
	size_t		at;
	llm_model  *m;

	if (!CHECK(buf != NULL, "read %s into memory", path))
		return;
	f = gguf_open_buffer(buf, len, err, sizeof(err));
	if (!CHECK(f != NULL && gguf_get_str(f, "general.architecture", &s) && gguf_str_eq(s, "llama"),
			   "model opens from a buffer"))
	{
		gguf_close(f);
		free(buf);
		return;
	}
	at = (size_t) ((const uint8_t *) s.ptr - buf);
	gguf_close(f);

	/* the value of general.architecture, same length: "mamba" */
	memcpy(buf + at, "mamba", 5);
	f = gguf_open_buffer(buf, len, err, sizeof(err));
	m = f ? llm_model_load(f, b, err, sizeof(err)) : NULL;
	CHECK(f != NULL && m == NULL && strstr(err, "\"mamba\"") != NULL && strstr(err, "supported: llama") != NULL,
		  "unknown architecture rejected, naming it and the supported ones: %s", err);
	llm_model_free(m);
	gguf_close(f);
	memcpy(buf + at, "llama", 5);

	/* the key itself renamed: no general.architecture */
	if (CHECK(patch(buf, at, "general.architecture", "general.architectura"), "rename the key"))
	{
		f = gguf_open_buffer(buf, len, err, sizeof(err));
		m = f ? llm_model_load(f, b, err, sizeof(err)) : NULL;
		CHECK(f != NULL && m == NULL && strstr(err, "general.architecture") != NULL,
			  "missing general.architecture rejected: %s", err);
		llm_model_free(m);
		gguf_close(f);
	}
	free(buf);
}

/*
 * One forward step over sequences s < n_seqs (tokens[s][0..len[s]), from
 * position 0, blocks s * MAX_BLOCKS + j), logits of out_rows into logits.
 */
static int
forward(llm_model *m, int n_seqs, const int32_t *const *tokens, const int *len, const int32_t *out_rows,
		int n_out, float *logits, char *err, size_t errlen)
{
	int32_t		tok[LEN_A + LEN_B],
				pos[LEN_A + LEN_B],
				slot[LEN_A + LEN_B],
				sstart[3],
				kvlen[2],
				bt[2 * MAX_BLOCKS];
	llm_step_desc d;
	int			nt = 0;

	for (int s = 0; s < n_seqs; s++)
	{
		sstart[s] = nt;
		kvlen[s] = len[s];
		for (int j = 0; j < MAX_BLOCKS; j++)
			bt[s * MAX_BLOCKS + j] = s * MAX_BLOCKS + j;
		for (int p = 0; p < len[s]; p++, nt++)
		{
			tok[nt] = tokens[s][p];
			pos[nt] = p;
			slot[nt] = bt[s * MAX_BLOCKS + p / BLOCK] * BLOCK + p % BLOCK;
		}
	}
	sstart[n_seqs] = nt;
	memset(&d, 0, sizeof(d));
	d.n_tokens = nt;
	d.n_seqs = n_seqs;
	d.token_ids = tok;
	d.positions = pos;
	d.slots = slot;
	d.seq_start = sstart;
	d.seq_kv_len = kvlen;
	d.block_tables = bt;
	d.max_blocks_per_seq = MAX_BLOCKS;
	d.out_rows = out_rows;
	d.n_out = n_out;
	return llm_model_forward(m, &d, logits, err, errlen);
}

static void
test_rows(llm_model *m)
{
	const llm_model_config *c = llm_model_get_config(m);
	const size_t V = (size_t) c->n_vocab;
	int32_t		a[LEN_A],
				bb[LEN_B],
				rows[LEN_A];
	float	   *all_a = malloc(sizeof(float) * LEN_A * V),
			   *all_b = malloc(sizeof(float) * LEN_B * V),
			   *mixed;
	char		err[512];
	int			n_same = 0,
				rc;
	uint64_t	x = 0x2545F4914F6CDD1DULL;

	/* fixed pseudo-random prompts */
	for (int i = 0; i < LEN_A; i++)
		a[i] = (int32_t) ((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % c->n_vocab;
	for (int i = 0; i < LEN_B; i++)
		bb[i] = (int32_t) ((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % c->n_vocab;

	/* prefixes one at a time first (n_out 1), then the whole prompt with every row (buffers grow) */
	{
		const int32_t *t[1] = {a};
		int			len[1];
		float	   *prefix = malloc(sizeof(float) * LEN_A * V);
		bool		ok = true;

		for (int k = 1; k <= LEN_A && ok; k++)
		{
			int32_t		last = k - 1;

			len[0] = k;
			ok = forward(m, 1, t, len, &last, 1, prefix + (size_t) (k - 1) * V, err, sizeof(err)) == 0;
		}
		for (int i = 0; i < LEN_A; i++)
			rows[i] = i;
		len[0] = LEN_A;
		rc = ok ? forward(m, 1, t, len, rows, LEN_A, all_a, err, sizeof(err)) : -1;
		if (CHECK(rc == 0, "prefill of %d tokens with all %d rows, and its %d prefixes, run%s%s", LEN_A, LEN_A,
				  LEN_A, rc ? ": " : "", rc ? err : ""))
		{
			for (int i = 0; i < LEN_A; i++)
				n_same += memcmp(prefix + (size_t) i * V, all_a + (size_t) i * V, sizeof(float) * V) == 0;
			CHECK(n_same == LEN_A, "logits of every prefill row bit-identical to the prefix run ending "
				  "there (%d/%d rows)", n_same, LEN_A);
		}
		free(prefix);
	}

	/* sequence B alone, every row */
	{
		const int32_t *t[1] = {bb};
		int			len[1] = {LEN_B};

		for (int i = 0; i < LEN_B; i++)
			rows[i] = i;
		rc = forward(m, 1, t, len, rows, LEN_B, all_b, err, sizeof(err));
		CHECK(rc == 0, "prompt B alone, all %d rows%s%s", LEN_B, rc ? ": " : "", rc ? err : "");
	}

	/* both in one step, rows scrambled and repeated: n_out (7) > n_seqs (2) */
	{
		const int32_t *t[2] = {a, bb};
		int			len[2] = {LEN_A, LEN_B};
		const int32_t out[7] = {LEN_A + LEN_B - 1, 3, 0, LEN_A + 2, 3, LEN_A - 1, LEN_A};
		bool		same = true;

		mixed = malloc(sizeof(float) * 7 * V);
		rc = forward(m, 2, t, len, out, 7, mixed, err, sizeof(err));
		if (CHECK(rc == 0, "two sequences, 7 out_rows%s%s", rc ? ": " : "", rc ? err : ""))
		{
			for (int j = 0; j < 7; j++)
			{
				const float *want = out[j] < LEN_A ? all_a + (size_t) out[j] * V :
					all_b + (size_t) (out[j] - LEN_A) * V;

				if (memcmp(mixed + (size_t) j * V, want, sizeof(float) * V) != 0)
				{
					printf("# out_rows[%d] = row %d differs from its solo run\n", j, out[j]);
					same = false;
				}
			}
			CHECK(same, "scrambled, repeated out_rows of a two-sequence step: each row's logits are "
				  "those of its solo run");
		}
		free(mixed);
	}
	/* the prefill rows are not all alike (the check above compares real distributions) */
	CHECK(memcmp(all_a, all_a + V, sizeof(float) * V) != 0, "rows 0 and 1 have different logits");
	free(all_a);
	free(all_b);
}

/*
 * Logits of every row of prompts a and bb prefilled in one step by a fresh
 * backend of implementation impl (the CPU must have it); NULL after a
 * failed check.
 */
static float *
impl_logits(const gguf_file *f, int threads, int impl, const int32_t *a, const int32_t *bb, size_t V)
{
	char		err[512];
	llm_backend *b = llm_backend_cpu_create(threads, err, sizeof(err));
	llm_model  *m = NULL;
	float	   *out = NULL;
	int32_t		rows[LEN_A + LEN_B];
	const int32_t *t[2] = {a, bb};
	int			len[2] = {LEN_A, LEN_B};

	if (!CHECK(b != NULL && llm_backend_cpu_set_impl(b, impl) == 0, "CPU backend with implementation %d%s%s",
			   impl, b ? "" : ": ", b ? "" : err))
		goto done;
	m = llm_model_load(f, b, err, sizeof(err));
	if (!CHECK(m != NULL, "model loads with %s kernels%s%s", llm_backend_cpu_impl_name(b), m ? "" : ": ",
			   m ? "" : err))
		goto done;
	{
		const llm_model_config *c = llm_model_get_config(m);
		llm_kv_geometry g = {c->n_layers, c->n_kv_heads, c->head_dim, BLOCK, N_BLOCKS, LLM_KV_F16, NULL, 0, 0};

		for (int i = 0; i < LEN_A + LEN_B; i++)
			rows[i] = i;
		out = malloc(sizeof(float) * (LEN_A + LEN_B) * V);
		if (!CHECK(b->ops->kv_init(b, &g) == 0 &&
				   forward(m, 2, t, len, rows, LEN_A + LEN_B, out, err, sizeof(err)) == 0,
				   "two-sequence prefill with %s kernels", llm_backend_cpu_impl_name(b)))
		{
			free(out);
			out = NULL;
		}
	}
done:
	if (m)
		llm_model_free(m);
	if (b)
		b->ops->destroy(b);
	return out;
}

static void
test_implementations(const gguf_file *f, int threads, size_t V)
{
	static const struct
	{
		int			impl;
		const char *name;
	}			impls[] = {{LLM_IMPL_AVX2, "AVX2"}, {LLM_IMPL_AVX512VNNI, "AVX512-VNNI"}};
	int32_t		a[LEN_A],
				bb[LEN_B];
	uint64_t	x = 0x9E3779B97F4A7C15ULL;
	float	   *ref;

	for (int i = 0; i < LEN_A; i++)
		a[i] = (int32_t) ((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % (int32_t) V;
	for (int i = 0; i < LEN_B; i++)
		bb[i] = (int32_t) ((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % (int32_t) V;
	ref = impl_logits(f, threads, LLM_IMPL_SCALAR, a, bb, V);
	if (ref == NULL)
		return;
	for (size_t k = 0; k < sizeof(impls) / sizeof(impls[0]); k++)
	{
		const bool	have = impls[k].impl == LLM_IMPL_AVX2 ? llm_cpu_has_avx2() : llm_cpu_has_avx512vnni();
		float	   *got;
		int			n_same = 0;

		if (!have)
		{
			SKIP("whole model with %s kernels: this CPU lacks the instructions", impls[k].name);
			continue;
		}
		got = impl_logits(f, threads, impls[k].impl, a, bb, V);
		if (got == NULL)
			continue;
		for (int r = 0; r < LEN_A + LEN_B; r++)
			n_same += memcmp(got + (size_t) r * V, ref + (size_t) r * V, sizeof(float) * V) == 0;
		CHECK(n_same == LEN_A + LEN_B, "whole model, %s kernels: logits of %d/%d prefill rows bit-identical "
			  "to the scalar kernels'", impls[k].name, n_same, LEN_A + LEN_B);
		free(got);
	}
	free(ref);
}

int
main(void)
{
	const char *path = getenv("LLM_TEST_MODEL");
	const char *threads = getenv("LLM_TEST_THREADS");
	char		err[512];
	gguf_file  *f;
	llm_backend *b;
	llm_model  *m;

	if (path == NULL || path[0] == '\0')
		path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(path, R_OK) != 0)
	{
		CHECK(0, "model %s not found (set LLM_TEST_MODEL)", path);
		return unit_done();
	}
	f = gguf_open(path, err, sizeof(err));
	if (!CHECK(f != NULL, "open %s%s%s", path, f ? "" : ": ", f ? "" : err))
		return unit_done();
	b = llm_backend_cpu_create(threads && *threads ? atoi(threads) : 0, err, sizeof(err));
	if (!CHECK(b != NULL, "CPU backend%s%s", b ? "" : ": ", b ? "" : err))
		return unit_done();
	m = llm_model_load(f, b, err, sizeof(err));
	if (CHECK(m != NULL, "model loads%s%s", m ? "" : ": ", m ? "" : err))
	{
		const llm_model_config *c = llm_model_get_config(m);
		llm_kv_geometry g = {c->n_layers, c->n_kv_heads, c->head_dim, BLOCK, N_BLOCKS, LLM_KV_F16, NULL, 0, 0};

		test_config(c, f);
		if (CHECK(b->ops->kv_init(b, &g) == 0, "KV cache of %d blocks", N_BLOCKS))
			test_rows(m);
		test_implementations(f, threads && *threads ? atoi(threads) : 0, (size_t) c->n_vocab);
		llm_model_free(m);
	}
	test_architecture_table(path, b);
	b->ops->destroy(b);
	gguf_close(f);
	return unit_done();
}
