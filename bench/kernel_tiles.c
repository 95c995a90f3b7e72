/*
 * kernel_tiles.c — one matmul tile kernel alone, on one thread, with its
 * weights in L2 (256 rows): nanoseconds per (row, token, block) and
 * GFLOP/s (2 FLOPs per weight per token) of the GGUF-layout and the packed
 * kernels of each implementation this CPU has, for Q4_1, Q8_0, Q5_0, Q4_K,
 * Q6_K, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS (the K-quants only when
 * COLS is a multiple of 256; "block" is 32 elements for every type; the
 * types without a reference quantizer get random blocks with sane scales),
 * so that a kernel change is measured without the rest of a step
 * (docs/PERFORMANCE.md).
 *
 * Build: cc -O3 -std=gnu11 -I. bench/kernel_tiles.c build/libllm_engine.a -lpcre2-8 -lm -lpthread -o build/bench/kernel_tiles
 * Usage: build/bench/kernel_tiles [COLS (576)] [REPEATS (7)]
 * Prints one line per (type, kernel, tokens): the best of REPEATS runs, in
 * the thread's CPU time.  Kernels with row forms also run them (quant.h
 * "Row forms", for a matrix of ROWS rows): "form 1-row" (Q4_K, Q2_K:
 * llama.cpp's GEMV order; IQ4_NL: its repacked order; Q6_K, Q3_K, Q5_K,
 * IQ4_XS: the GGUF-layout kernel again) and "form batch" (Q4_K, Q2_K: its
 * GEMM order; Q6_K, Q3_K, Q5_K, IQ4_XS: its tiled order); "packed form
 * batch" is the repacked kernel's own other form (quant.h form_tile: Q4_K's
 * GEMM order, Q6_K's tiled order), as the matmul runs it for those tokens.
 */
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_more.h"
#include "kernels/quant_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ROWS
#define ROWS 256
#endif

static double
now_sec(void)
{
	struct timespec t;

	/* the thread's CPU time: on a shared machine the wall clock also counts other processes' turns */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Seconds per pass over ROWS rows x nt tokens in the kernel's tile shape (best of repeats). */
static double
time_tiles(const llm_qkernel *k, int64_t n, const char *w, size_t rb, const char *a, size_t ab, int nt,
		   float *out, int repeats)
{
	const int	R = k->tile_rows;
	double		best = 1e30;
	int			passes = 1;

	/* passes per timing so that one timing takes ~20 ms */
	for (;;)
	{
		double		t0 = now_sec(),
					t;

		for (int p = 0; p < passes; p++)
			for (int r = 0; r < ROWS; r += R)
				k->dot_tile(n, w + r * rb, rb, R, a, ab, nt, out + r, ROWS);
		t = now_sec() - t0;
		if (t > 0.02 || passes > (1 << 20))
			break;
		passes *= 2;
	}
	for (int i = 0; i < repeats; i++)
	{
		double		t0 = now_sec(),
					t;

		for (int p = 0; p < passes; p++)
			for (int r = 0; r < ROWS; r += R)
				k->dot_tile(n, w + r * rb, rb, R, a, ab, nt, out + r, ROWS);
		t = (now_sec() - t0) / passes;
		if (t < best)
			best = t;
	}
	return best;
}

/*
 * Seconds per pass of a batched matmul's path (quant.h batch_kernel): each
 * block of 16 rows converted once, then every tile of nt tokens on it.
 */
static double
time_batch(const llm_qkernel *k, int64_t n, const char *w, size_t rb, const char *a, size_t ab, int nt,
		   float *out, int repeats)
{
	const llm_qkernel *kb = k->batch_kernel;
	const size_t crb = llm_type_row_bytes(kb->weight_type, n);
	char	   *conv = malloc(crb * 16);
	double		best = 1e30;
	int			passes = 1;

	for (int i = -1; i < repeats; i++)
	{
		for (;;)
		{
			double		t0 = now_sec(),
						t;

			for (int p = 0; p < passes; p++)
				for (int r = 0; r < ROWS; r += 16)
				{
					k->batch_convert(n, w + r * rb, rb, 16, conv);
					for (int t = 0; t < nt; t += kb->tile_tokens)
						kb->dot_tile(n, conv, crb, 16, a + t * ab, ab,
									 nt - t < kb->tile_tokens ? nt - t : kb->tile_tokens, out + t * ROWS + r, ROWS);
				}
			t = now_sec() - t0;
			/* the first round only sizes passes to ~20 ms */
			if (i >= 0)
			{
				if (t / passes < best)
					best = t / passes;
				break;
			}
			if (t > 0.02 || passes > (1 << 20))
				break;
			passes *= 2;
		}
	}
	free(conv);
	return best;
}

/* A row of random blocks of a type without a reference quantizer, its fp16 scales in [0.002, 0.01). */
static void
random_row(uint32_t type, char *w, size_t rb, int64_t n)
{
	for (size_t i = 0; i < rb; i++)
		w[i] = (char) rand();
	for (int64_t b = 0; b < n / llm_type_get(type)->block_elems; b++)
	{
		uint16_t	h1 = llm_fp32_to_fp16(0.002f + 0.008f * (rand() / (float) RAND_MAX)),
					h2 = llm_fp32_to_fp16(0.002f + 0.008f * (rand() / (float) RAND_MAX));

		switch (type)
		{
			case LLM_TYPE_Q5_1:
				((llm_block_q5_1 *) w)[b].d = h1;
				((llm_block_q5_1 *) w)[b].m = h2;
				break;
			case LLM_TYPE_Q2_K:
				((llm_block_q2_K *) w)[b].d = h1;
				((llm_block_q2_K *) w)[b].dmin = h2;
				break;
			case LLM_TYPE_Q3_K:
				((llm_block_q3_K *) w)[b].d = h1;
				break;
			case LLM_TYPE_Q5_K:
				((llm_block_q5_K *) w)[b].d = h1;
				((llm_block_q5_K *) w)[b].dmin = h2;
				break;
			case LLM_TYPE_IQ4_NL:
				((llm_block_iq4_nl *) w)[b].d = h1;
				break;
			default:
				((llm_block_iq4_xs *) w)[b].d = h1;
		}
	}
}

int
main(int argc, char **argv)
{
	const int64_t n = argc > 1 ? atoll(argv[1]) : 576;
	const int	repeats = argc > 2 ? atoi(argv[2]) : 7;
	const uint32_t types[] = {LLM_TYPE_Q4_1, LLM_TYPE_Q8_0, LLM_TYPE_Q5_0, LLM_TYPE_Q4_K, LLM_TYPE_Q6_K,
	LLM_TYPE_Q5_1, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q5_K, LLM_TYPE_IQ4_NL, LLM_TYPE_IQ4_XS};
	const int	toks[] = {1, 4, 16};

	if (n <= 0 || n % 64 != 0 || repeats < 1)
	{
		fprintf(stderr, "usage: %s [COLS, a multiple of 64] [REPEATS]\n", argv[0]);
		return 2;
	}
	printf("CPU: AVX2 %s, AVX512-VNNI %s; %d rows x %lld columns, 1 thread, best of %d\n",
		   llm_cpu_has_avx2() ? "yes" : "no", llm_cpu_has_avx512vnni() ? "yes" : "no", ROWS,
		   (long long) n, repeats);
	printf("%-5s %-18s %6s %10s %9s\n", "type", "kernel", "tokens", "ns/r.t.b", "GFLOP/s");
	srand(1);
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
	{
		const uint32_t type = types[ti];
		const size_t rb = llm_type_row_bytes(type, n);
		char	   *w,
				   *wp;
		float	   *row,
				   *out;

		if (n % llm_type_get(type)->block_elems != 0)
			continue;
		w = malloc(rb * ROWS);
		wp = malloc(rb * ROWS);
		row = malloc(sizeof(float) * n);
		out = malloc(sizeof(float) * ROWS * 16);

		for (int r = 0; r < ROWS; r++)
		{
			for (int64_t c = 0; c < n; c++)
				row[c] = rand() / (float) RAND_MAX - 0.5f;
			if (!llm_quantize_row_ref(type, row, w + r * rb, n))
				random_row(type, w + r * rb, rb, n);
		}
		for (int impl = LLM_IMPL_AVX2; impl <= LLM_IMPL_AVX512VNNI; impl++)
			for (int packed = 0; packed <= 5; packed++)
			{
				/*
				 * 0: GGUF layout, 1: repacked at load, 2: the batched matmul's
				 * conversion, 3 / 4: the row forms' one-row / batch tiles, 5:
				 * the repacked kernel's own other form (quant.h form_tile)
				 */
				const llm_qkernel *k = packed == 1 || packed == 5 ? llm_qkernel_packed_get(type, impl) :
					llm_qkernel_get(type, impl);
				llm_qkernel form;
				const char *wk = w;
				size_t		ab;
				char	   *a;

				if (k == NULL || (packed == 2 && k->batch_kernel == NULL) || (packed == 5 && k->form_tile == NULL))
					continue;
				if (packed == 5)
				{
					form = *k;
					form.dot_tile = k->form_tile;
					k = &form;
				}
				if (packed == 3 || packed == 4)
				{
					llm_dot_tile_fn tile;

					if (llm_qkernel_kform(k, ROWS) == k && llm_qkernel_form(k, &tile) == 0)
						continue;
					form = *llm_qkernel_kform(k, ROWS);
					if (packed == 4)
					{
						if (llm_qkernel_form(llm_qkernel_kform(k, ROWS), &tile) == 0)
							continue;	/* one order for every token (IQ4_NL repacked) */
						form.dot_tile = tile;
					}
					k = &form;
				}
				if (packed == 1 || packed == 5)
				{
					if (!k->repack(w, wp, ROWS, n))
						continue;
					wk = wp;
				}
				ab = k->act_row_bytes(n);
				a = malloc(ab * 16);
				for (int t = 0; t < 16; t++)
				{
					for (int64_t c = 0; c < n; c++)
						row[c] = rand() / (float) RAND_MAX - 0.5f;
					k->quantize_act(row, a + t * ab, n);
				}
				for (size_t q = 0; q < sizeof(toks) / sizeof(toks[0]); q++)
				{
					int			nt = toks[q];
					double		sec = 0;

					/* 16 tokens: tiles of the kernel's token count, as the matmul runs them */
					if (packed == 2)
						sec = time_batch(k, n, wk, rb, a, ab, nt, out, repeats);
					else
						for (int t0 = 0; t0 < nt; t0 += k->tile_tokens)
						{
							int			tt = nt - t0 < k->tile_tokens ? nt - t0 : k->tile_tokens;

							sec += time_tiles(k, n, wk, rb, a + t0 * ab, ab, tt, out, repeats);
						}
					printf("%-5s %-18s %6d %10.3f %9.1f\n", llm_type_get(type)->name,
						   packed == 2 ? "batch (converted)" : packed == 3 ? "form 1-row" :
						   packed == 4 ? "form batch" : packed == 5 ? "packed form batch" : k->impl, nt,
						   sec * 1e9 / ((double) ROWS * nt * (n / 32)), 2.0 * ROWS * n * nt / sec * 1e-9);
				}
				free(a);
			}
		free(w);
		free(wp);
		free(row);
		free(out);
	}
	return 0;
}
