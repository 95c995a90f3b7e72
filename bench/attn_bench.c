/*
 * attn_bench.c — the CPU backend's attention op alone, in SmolLM2-135M's
 * shape (9 query heads, 3 KV heads, head_dim 64, blocks of 16), over a KV
 * cache of random fp16 values: a prompt chunk of P rows ending at depth D
 * (prefill), and B decode rows each at depth D (one-token order, B
 * sequences).  Prints nanoseconds per (query head, key) and the KV bytes
 * read per second, best of R runs, so that attention changes are measured
 * without the rest of a step (docs/PERFORMANCE.md).  With L layers (SmolLM2
 * has 30) every timed call runs attention over each layer's own cache in
 * turn, as a step does, so that the rows come from memory rather than from
 * the last-level cache (one layer at depth 6,144 is 4.7 MB); times are per
 * layer.
 *
 * Build:
 *   cc -O3 -std=gnu11 -I. bench/attn_bench.c build/libllm_engine.a -lpcre2-8 -lm -lpthread -o build/bench/attn_bench
 * Usage: build/bench/attn_bench [THREADS (2)] [DEPTH (6144)] [PROMPT_ROWS (512)] [DECODE_SEQS (1)] [REPEATS (5)]
 *        [f16|q8_0] [LAYERS (1)]
 */
#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_HEADS 9
#define N_KV 3
#define HD 64
#define BS 16

static double
now_sec(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ULL;

static float
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float) ((rng >> 11) * 0x1p-53) * 2.0f - 1.0f;
}

/*
 * One step over n_seqs sequences: sequence s has rows_per_seq rows at
 * positions depth - rows_per_seq .. depth - 1 (its block table maps
 * positions to blocks s * blocks_per_seq ..); decode marks the rows as
 * one-token rows.  Writes K/V of the step's rows (rope_store_kv), then
 * times attention (repeats > 0).
 */
static double
run(llm_backend *b, int n_layers, int n_seqs, int rows_per_seq, int depth, int blocks_per_seq, bool decode,
	int repeats, double *sec_out)
{
	const int	nt = n_seqs * rows_per_seq;
	int32_t    *ids = calloc(nt, sizeof(int32_t)),
			   *pos = malloc(nt * sizeof(int32_t)),
			   *slots = malloc(nt * sizeof(int32_t)),
			   *seq_start = malloc((n_seqs + 1) * sizeof(int32_t)),
			   *kv_len = malloc(n_seqs * sizeof(int32_t)),
			   *bt = malloc((size_t) n_seqs * blocks_per_seq * sizeof(int32_t));
	uint8_t    *single = malloc(nt);
	float	   *q = malloc(sizeof(float) * nt * N_HEADS * HD),
			   *k = malloc(sizeof(float) * nt * N_KV * HD),
			   *v = malloc(sizeof(float) * nt * N_KV * HD),
			   *out = malloc(sizeof(float) * nt * N_HEADS * HD);
	llm_step_desc d;
	double		best = 1e30;

	for (int s = 0; s < n_seqs; s++)
	{
		seq_start[s] = s * rows_per_seq;
		kv_len[s] = depth;
		for (int i = 0; i < blocks_per_seq; i++)
			bt[s * blocks_per_seq + i] = s * blocks_per_seq + i;
		for (int r = 0; r < rows_per_seq; r++)
		{
			int			t = s * rows_per_seq + r,
						p = depth - rows_per_seq + r;

			pos[t] = p;
			slots[t] = bt[s * blocks_per_seq + p / BS] * BS + p % BS;
			single[t] = decode;
		}
	}
	seq_start[n_seqs] = nt;
	for (size_t i = 0; i < (size_t) nt * N_HEADS * HD; i++)
		q[i] = rnd();
	for (size_t i = 0; i < (size_t) nt * N_KV * HD; i++)
	{
		k[i] = rnd();
		v[i] = rnd();
	}
	d = (llm_step_desc) {nt, n_seqs, ids, pos, slots, seq_start, kv_len, bt, blocks_per_seq, NULL, 0, single, NULL, NULL};
	if (b->ops->begin_step(b, &d) != 0)
	{
		fprintf(stderr, "attn_bench: %s\n", b->ops->last_error(b));
		exit(1);
	}
	for (int l = 0; l < n_layers; l++)
		if (b->ops->rope_store_kv(b, l, q, k, v, N_HEADS, 10000.0f) != 0)
		{
			fprintf(stderr, "attn_bench: %s\n", b->ops->last_error(b));
			exit(1);
		}
	for (int r = 0; r < repeats; r++)
	{
		double		t0 = now_sec(),
					t;
		int			n = 0;

		do
		{
			for (int l = 0; l < n_layers; l++)
				if (b->ops->attention(b, l, q, out, N_HEADS, 0.125f, 0) != 0)
				{
					fprintf(stderr, "attn_bench: %s\n", b->ops->last_error(b));
					exit(1);
				}
			n += n_layers;
			t = now_sec() - t0;
		} while (t < 0.2);
		if (t / n < best)
			best = t / n;
	}
	*sec_out = best;
	free(ids);
	free(pos);
	free(slots);
	free(seq_start);
	free(kv_len);
	free(bt);
	free(single);
	free(q);
	free(k);
	free(v);
	free(out);
	return best;
}

/*
 * K/V of positions 0 .. depth - 2 of every sequence, before the decode rows
 * at depth - 1: rows never written would all read the one zero page, from
 * the cache instead of memory.
 */
static void
fill(llm_backend *b, int n_layers, int n_seqs, int depth, int blocks_per_seq)
{
	double		sec;

	if (depth > 1)
		run(b, n_layers, n_seqs, depth - 1, depth - 1, blocks_per_seq, false, 0, &sec);
}

int
main(int argc, char **argv)
{
	int			threads = argc > 1 ? atoi(argv[1]) : 2,
				depth = argc > 2 ? atoi(argv[2]) : 6144,
				prompt = argc > 3 ? atoi(argv[3]) : 512,
				seqs = argc > 4 ? atoi(argv[4]) : 1,
				repeats = argc > 5 ? atoi(argv[5]) : 5;
	const char *dtype = argc > 6 ? argv[6] : "f16";
	int			layers = argc > 7 ? atoi(argv[7]) : 1;
	int			bps = (depth + BS - 1) / BS;
	int			nseq_kv = seqs > 1 ? seqs : 1;
	char		err[256];
	llm_backend *b;
	llm_kv_geometry g = {layers, N_KV, HD, BS, bps * nseq_kv};
	double		sec;

	if (threads < 1 || depth < 1 || prompt < 1 || prompt > depth || seqs < 1 || repeats < 1 || layers < 1)
	{
		fprintf(stderr, "usage: %s [THREADS] [DEPTH] [PROMPT_ROWS] [DECODE_SEQS] [REPEATS] [f16|q8_0] [LAYERS]\n",
				argv[0]);
		return 2;
	}
	if (strcmp(dtype, "f16") == 0)
		g.kv_dtype = LLM_KV_F16;
	else if (strcmp(dtype, "q8_0") == 0)
		g.kv_dtype = LLM_KV_Q8_0;
	else
	{
		fprintf(stderr, "attn_bench: unknown KV dtype %s\n", dtype);
		return 2;
	}
	b = llm_backend_cpu_create(threads, err, sizeof(err));
	if (b == NULL || b->ops->kv_init(b, &g) != 0)
	{
		fprintf(stderr, "attn_bench: %s\n", b ? b->ops->last_error(b) : err);
		return 1;
	}
	printf("attention, %d threads, %s KV cache, %s kernels; %d heads / %d KV heads x %d, blocks of %d, %d layer(s)\n",
		   threads, dtype, llm_backend_cpu_impl_name(b), N_HEADS, N_KV, HD, BS, layers);
	{
		/* prefill: keys of rows depth - prompt .. depth - 1 */
		double		pairs = (double) N_HEADS * ((double) prompt * depth - (double) prompt * (prompt - 1) / 2);

		run(b, layers, 1, prompt, depth, bps, false, repeats, &sec);
		printf("prefill %d rows ending at depth %d: %.2f ms, %.3f ns per (query head, key)\n",
			   prompt, depth, sec * 1e3, sec * 1e9 / pairs);
	}
	{
		double		pairs = (double) N_HEADS * depth * seqs;
		double		bytes = (double) seqs * depth * N_KV * llm_kv_row_bytes(g.kv_dtype, HD) * 2;

		fill(b, layers, seqs, depth, bps);
		run(b, layers, seqs, 1, depth, bps, true, repeats, &sec);
		printf("decode %d sequence(s) at depth %d: %.3f ms, %.3f ns per (query head, key), KV %.1f GB/s\n",
			   seqs, depth, sec * 1e3, sec * 1e9 / pairs, bytes / sec * 1e-9);
	}
	b->ops->destroy(b);
	return 0;
}
