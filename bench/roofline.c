/*
 * roofline — measure this machine's memory bandwidth and peak fp32 FMA rate,
 * the two ceilings bench/run compares the engine against.
 *
 *   roofline [-t THREADS] [-m BUFFER_MIB] [-r REPEATS]
 *
 * Prints one JSON object on stdout:
 *   copy_gbs        memcpy between two buffers far larger than the caches,
 *                   counting bytes read + bytes written (STREAM "copy" convention)
 *   read_gbs        streaming read of one large buffer (sum of floats), the
 *                   access pattern of decode, which reads every weight once per step
 *   fma_avx2_gflops vfmadd231ps on 256-bit registers, 2 FLOPs per lane
 *   fma_avx512_gflops  the same on 512-bit registers, when the CPU has AVX-512F
 * Each figure is the best of REPEATS (default 10) runs with THREADS threads working at once
 * (each on its own slice); a start barrier makes the timing cover the threads'
 * common work only.  Plain C11 + pthreads; the SIMD kernels are compiled with
 * target attributes and chosen at run time, so no special flags are needed.
 * Method: McCalpin's STREAM benchmark (copy counting) and the usual
 * independent-accumulator FMA throughput loop (enough chains to hide latency).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FMA_CHAINS 12			/* >= latency (4) x pipes (2) on current x86; see FMA_BODY */
#define FMA_ITERS 2000000L		/* per thread per run: 12 * 2M FMAs, a few ms */
#define FMA_REPEATS_FACTOR 10	/* short runs, many of them: the best one is
								 * the one no other process interrupted */

typedef enum bench_kind
{
	KIND_COPY,
	KIND_READ,
	KIND_FMA_AVX2,
	KIND_FMA_AVX512
} bench_kind;

typedef struct worker
{
	pthread_t	thread;
	bench_kind	kind;
	char	   *src;
	char	   *dst;
	size_t		bytes;
	pthread_barrier_t *start;
	double		t_start;		/* this thread's own clock readings, so a */
	double		t_end;			/* descheduled main thread cannot shorten the run */
	volatile float sink;
} worker;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((target("avx2")))
static float
read_avx2(const char *p, size_t bytes)
{
	const float *f = (const float *) p;
	size_t		n = bytes / sizeof(float);
	__m256		a0 = _mm256_setzero_ps(),
				a1 = _mm256_setzero_ps(),
				a2 = _mm256_setzero_ps(),
				a3 = _mm256_setzero_ps();
	float		out[8];

	for (size_t i = 0; i + 32 <= n; i += 32)
	{
		a0 = _mm256_add_ps(a0, _mm256_load_ps(f + i));
		a1 = _mm256_add_ps(a1, _mm256_load_ps(f + i + 8));
		a2 = _mm256_add_ps(a2, _mm256_load_ps(f + i + 16));
		a3 = _mm256_add_ps(a3, _mm256_load_ps(f + i + 24));
	}
	_mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

static float
read_portable(const char *p, size_t bytes)
{
	const float *f = (const float *) p;
	size_t		n = bytes / sizeof(float);
	float		a[8] = {0};

	for (size_t i = 0; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			a[k] += f[i + k];
	return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

/*
 * FMA_CHAINS independent accumulators written out by hand: with an array and
 * an inner loop gcc -O2 keeps them in memory, which measures store forwarding.
 */
#define FMA_BODY(FMA) \
	do { \
		a0 = FMA(a0, x, y); a1 = FMA(a1, x, y); a2 = FMA(a2, x, y); \
		a3 = FMA(a3, x, y); a4 = FMA(a4, x, y); a5 = FMA(a5, x, y); \
		a6 = FMA(a6, x, y); a7 = FMA(a7, x, y); a8 = FMA(a8, x, y); \
		a9 = FMA(a9, x, y); a10 = FMA(a10, x, y); a11 = FMA(a11, x, y); \
	} while (0)

__attribute__((target("avx2,fma")))
static float
fma_avx2(long iters)
{
	__m256		x = _mm256_set1_ps(0.999999f);
	__m256		y = _mm256_set1_ps(1e-7f);
	__m256		a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2),
				a3 = _mm256_set1_ps(3), a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5),
				a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7), a8 = _mm256_set1_ps(8),
				a9 = _mm256_set1_ps(9), a10 = _mm256_set1_ps(10), a11 = _mm256_set1_ps(11);
	float		out[8];

	for (long i = 0; i < iters; i++)
		FMA_BODY(_mm256_fmadd_ps);
	a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
					   _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
	a0 = _mm256_add_ps(a0, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
	_mm256_storeu_ps(out, a0);
	return out[0];
}

__attribute__((target("avx512f")))
static float
fma_avx512(long iters)
{
	__m512		x = _mm512_set1_ps(0.999999f);
	__m512		y = _mm512_set1_ps(1e-7f);
	__m512		a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2),
				a3 = _mm512_set1_ps(3), a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5),
				a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7), a8 = _mm512_set1_ps(8),
				a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);

	for (long i = 0; i < iters; i++)
		FMA_BODY(_mm512_fmadd_ps);
	a0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
					   _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
	a0 = _mm512_add_ps(a0, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
	return _mm512_reduce_add_ps(a0);
}

static void *
worker_main(void *arg)
{
	worker	   *w = arg;

	pthread_barrier_wait(w->start);
	w->t_start = now_s();
	switch (w->kind)
	{
		case KIND_COPY:
			memcpy(w->dst, w->src, w->bytes);
			w->sink = (float) w->dst[w->bytes / 2];
			break;
		case KIND_READ:
			w->sink = __builtin_cpu_supports("avx2") ? read_avx2(w->src, w->bytes)
				: read_portable(w->src, w->bytes);
			break;
		case KIND_FMA_AVX2:
			w->sink = fma_avx2(FMA_ITERS);
			break;
		case KIND_FMA_AVX512:
			w->sink = fma_avx512(FMA_ITERS / 2);
			break;
	}
	w->t_end = now_s();
	return NULL;
}

/*
 * Run one measurement with n_threads workers on disjoint slices of src/dst
 * (each slice `slice` bytes), released together by a barrier; returns the
 * seconds from the first worker's start to the last worker's end, or a
 * negative value on error.
 */
static double
run_once(bench_kind kind, int n_threads, char *src, char *dst, size_t slice)
{
	worker	   *w = calloc(n_threads, sizeof(worker));
	pthread_barrier_t start;
	double		t0,
				t1;

	if (w == NULL || pthread_barrier_init(&start, NULL, n_threads) != 0)
	{
		free(w);
		return -1;
	}
	for (int i = 0; i < n_threads; i++)
	{
		w[i].kind = kind;
		w[i].src = src ? src + (size_t) i * slice : NULL;
		w[i].dst = dst ? dst + (size_t) i * slice : NULL;
		w[i].bytes = slice;
		w[i].start = &start;
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0)
		{
			fprintf(stderr, "roofline: pthread_create failed\n");
			exit(1);
		}
	}
	for (int i = 0; i < n_threads; i++)
		pthread_join(w[i].thread, NULL);
	t0 = w[0].t_start;
	t1 = w[0].t_end;
	for (int i = 1; i < n_threads; i++)
	{
		t0 = w[i].t_start < t0 ? w[i].t_start : t0;
		t1 = w[i].t_end > t1 ? w[i].t_end : t1;
	}
	pthread_barrier_destroy(&start);
	free(w);
	return t1 - t0;
}

/* Shortest of `repeats` runs of run_once (seconds), or negative if all failed. */
static double
best_of(int repeats, bench_kind kind, int n_threads, char *src, char *dst, size_t slice)
{
	double		best = -1;

	for (int r = 0; r < repeats; r++)
	{
		double		t = run_once(kind, n_threads, src, dst, slice);

		if (t > 0 && (best < 0 || t < best))
			best = t;
	}
	return best;
}

/* A positive integer command-line value; exits with usage status 2 otherwise. */
static long
arg_long(const char *s, const char *what)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 1)
	{
		fprintf(stderr, "roofline: invalid %s: %s\n", what, s);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	int			n_threads = 2;
	size_t		buf_mib = 512;
	int			repeats = 10;
	size_t		slice;
	char	   *src,
			   *dst;
	double		t_copy,
				t_read,
				t_fma2,
				t_fma512 = -1;
	bool		has_avx2,
				has_avx512;

	for (int i = 1; i < argc; i++)
	{
		if (i + 1 < argc && !strcmp(argv[i], "-t"))
			n_threads = (int) arg_long(argv[++i], "-t");
		else if (i + 1 < argc && !strcmp(argv[i], "-m"))
			buf_mib = (size_t) arg_long(argv[++i], "-m");
		else if (i + 1 < argc && !strcmp(argv[i], "-r"))
			repeats = (int) arg_long(argv[++i], "-r");
		else
		{
			fprintf(stderr, "usage: roofline [-t THREADS] [-m BUFFER_MIB] [-r REPEATS]\n");
			return 2;
		}
	}
	__builtin_cpu_init();
	has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	has_avx512 = __builtin_cpu_supports("avx512f");

	/* each thread gets a 64-byte aligned slice; touch everything before timing */
	slice = ((buf_mib << 20) / n_threads) & ~(size_t) 63;
	src = aligned_alloc(64, slice * n_threads);
	dst = aligned_alloc(64, slice * n_threads);
	if (src == NULL || dst == NULL)
	{
		fprintf(stderr, "roofline: cannot allocate 2 x %zu MiB\n", buf_mib);
		return 1;
	}
	for (size_t i = 0; i < slice * n_threads; i += sizeof(float))
		*(float *) (src + i) = (float) (i & 1023);
	memset(dst, 1, slice * n_threads);

	t_copy = best_of(repeats, KIND_COPY, n_threads, src, dst, slice);
	t_read = best_of(repeats, KIND_READ, n_threads, src, NULL, slice);
	t_fma2 = has_avx2 ? best_of(repeats * FMA_REPEATS_FACTOR, KIND_FMA_AVX2, n_threads, NULL, NULL, 0) : -1;
	if (has_avx512)
		t_fma512 = best_of(repeats * FMA_REPEATS_FACTOR, KIND_FMA_AVX512, n_threads, NULL, NULL, 0);

	{
		double		bytes = (double) slice * n_threads;
		double		flops_avx2 = (double) n_threads * FMA_ITERS * FMA_CHAINS * 8 * 2;
		double		flops_avx512 = (double) n_threads * (FMA_ITERS / 2) * FMA_CHAINS * 16 * 2;

		printf("{\"threads\": %d, \"buffer_mib\": %zu, \"repeats\": %d, ", n_threads, buf_mib, repeats);
		printf("\"copy_gbs\": %.2f, \"read_gbs\": %.2f, ", 2 * bytes / t_copy / 1e9, bytes / t_read / 1e9);
		if (t_fma2 > 0)
			printf("\"fma_avx2_gflops\": %.1f, ", flops_avx2 / t_fma2 / 1e9);
		else
			printf("\"fma_avx2_gflops\": null, ");
		if (t_fma512 > 0)
			printf("\"fma_avx512_gflops\": %.1f", flops_avx512 / t_fma512 / 1e9);
		else
			printf("\"fma_avx512_gflops\": null");
		printf("}\n");
	}
	free(src);
	free(dst);
	return 0;
}
