/*
 * matmul_layers.c — the CPU backend's matmul alone, in the shapes and order
 * of a decode step of SmolLM2-135M: 30 layers x (q, k, v, o, gate, up, down)
 * Q4_1 matrices of random weights, cycled so that every pass reads all
 * 66 MB of weights from DRAM as a step does.  Compared with the Q4_1 share
 * of a real step (perf on llm-cli bench) it shows how much the rest of the
 * step slows the matmuls down (docs/PERFORMANCE.md, "The matmul is slower
 * inside a step than alone").
 *
 * Build: make build/bench/matmul_layers
 * Usage: build/bench/matmul_layers [THREADS (1)] [TOKENS (16)] [SECONDS (3)]
 * Prints GFLOP/s (2 FLOPs per weight per token), ms per pass and per token.
 */
#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/quant.h"
#include "kernels/quant_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N_LAYERS 30
#define N_MATS 7

static double
now_sec(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	int			threads = argc > 1 ? atoi(argv[1]) : 1,
				n = argc > 2 ? atoi(argv[2]) : 16;
	double		seconds = argc > 3 ? atof(argv[3]) : 3.0;
	/* rows x cols of the layer's matrices: q, k, v, o, gate, up, down */
	const int	shape[N_MATS][2] = {{576, 576}, {192, 576}, {192, 576}, {576, 576},
	{1536, 576}, {1536, 576}, {576, 1536}};
	static llm_weight w[N_LAYERS][N_MATS];
	char		err[256];
	llm_backend *b;
	float	   *row,
			   *x,
			   *y;
	double		flop = 0,
				t0,
				t1;
	int			passes = 0;

	if (threads < 1 || n < 1 || !(seconds > 0))
	{
		fprintf(stderr, "usage: %s [THREADS] [TOKENS] [SECONDS]\n", argv[0]);
		return 2;
	}
	b = llm_backend_cpu_create(threads, err, sizeof(err));
	row = malloc(sizeof(float) * 1536);
	x = malloc(sizeof(float) * 1536 * (size_t) n);
	y = malloc(sizeof(float) * 1536 * (size_t) n);
	if (b == NULL || row == NULL || x == NULL || y == NULL)
	{
		fprintf(stderr, "matmul_layers: %s\n", b ? "out of memory" : err);
		return 1;
	}
	srand(1);
	for (int l = 0; l < N_LAYERS; l++)
		for (int m = 0; m < N_MATS; m++)
		{
			int			rows = shape[m][0],
						cols = shape[m][1];
			size_t		rb = llm_type_row_bytes(LLM_TYPE_Q4_1, cols);
			char	   *data = malloc(rb * rows);
			llm_weight	host = {LLM_TYPE_Q4_1, rows, cols, rb, data, NULL};

			if (data == NULL)
				return 1;
			for (int r = 0; r < rows; r++)
			{
				for (int c = 0; c < cols; c++)
					row[c] = rand() / (float) RAND_MAX - 0.5f;
				llm_quantize_row_ref(LLM_TYPE_Q4_1, row, data + r * rb, cols);
			}
			if (b->ops->load_weight(b, &host, &w[l][m]) != 0)
			{
				fprintf(stderr, "matmul_layers: %s\n", b->ops->last_error(b));
				return 1;
			}
			flop += 2.0 * rows * cols * n;
		}
	for (size_t i = 0; i < (size_t) 1536 * n; i++)
		x[i] = rand() / (float) RAND_MAX - 0.5f;
	t0 = now_sec();
	do
	{
		for (int l = 0; l < N_LAYERS; l++)
			for (int m = 0; m < N_MATS; m++)
				if (b->ops->matmul(b, &w[l][m], x, y, n) != 0)
				{
					fprintf(stderr, "matmul_layers: %s\n", b->ops->last_error(b));
					return 1;
				}
		passes++;
		t1 = now_sec();
	} while (t1 - t0 < seconds);
	printf("threads %d, %d tokens: %.1f GFLOP/s, %.2f ms per pass, %.3f ms per token\n",
		   threads, n, flop * passes / (t1 - t0) * 1e-9, (t1 - t0) / passes * 1e3,
		   (t1 - t0) / passes * 1e3 / n);
	b->ops->destroy(b);
	return 0;
}
