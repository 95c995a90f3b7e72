/*
 * kernel_test_util.h — what the kernel tests share (test_kernels,
 * test_kernels_types, test_kforms, test_gemma3_ops): the xorshift64* random
 * numbers their data come from, and the opening of llama.cpp's CPU library,
 * the oracle of their bit-identity checks.
 *
 * Random numbers: one global state, rng_state, that each test seeds (never
 * 0); rng_next the next 64 bits (xorshift64*), rng_unit a double in [0, 1)
 * from its top 53 bits, rng_normal(s) roughly normal with scale s.  Per
 * test, before including:
 *   KERNEL_TEST_BOX_MULLER   rng_normal by Box-Muller (two draws, exactly
 *                            normal); by default the sum of four uniforms
 *                            scaled to variance s^2 (four draws, bounded by
 *                            +-3.46 s).
 * A test's data are a function of its seed and the order of its draws, so
 * a test keeps its form and its order to keep its data.
 *
 * The oracle: the directory of the cached llama.cpp build's libraries
 * (LLM_ORACLE_LIB_DIR, by default ~/.cache/pg_llm/llama.cpp-build/bin),
 * libggml-base.so opened RTLD_GLOBAL, then libggml-cpu.so.  Each test
 * checks the symbols it needs and calls ggml_cpu_init itself.
 */
#ifndef LLM_KERNEL_TEST_UTIL_H
#define LLM_KERNEL_TEST_UTIL_H

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng_state;

static inline uint64_t
rng_next(void)
{
	uint64_t	x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static inline double
rng_unit(void)
{
	return (double) (rng_next() >> 11) * 0x1p-53;
}

#ifdef KERNEL_TEST_BOX_MULLER
static inline float
rng_normal(float s)
{
	double		u1 = ((rng_next() >> 11) + 1.0) * 0x1p-53,
				u2 = (rng_next() >> 11) * 0x1p-53;

	return (float) (s * sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
}
#else
static inline float
rng_normal(float s)
{
	double		u = 0;

	for (int i = 0; i < 4; i++)
		u += rng_unit();
	return (float) ((u - 2.0) * 1.7320508 * s);
}
#endif

/* The oracle's library directory into buf (n bytes); returns buf. */
static inline const char *
oracle_lib_dir(char *buf, size_t n)
{
	const char *dir = getenv("LLM_ORACLE_LIB_DIR");
	const char *home = getenv("HOME");

	if (dir != NULL)
		snprintf(buf, n, "%s", dir);
	else
		snprintf(buf, n, "%.900s/.cache/pg_llm/llama.cpp-build/bin", home ? home : "/root");
	return buf;
}

/*
 * llama.cpp's CPU library in dir: its handle, NULL if it or the base
 * library is missing; *base (may be NULL) the base library's handle.
 */
static inline void *
oracle_open_lib(const char *dir, void **base)
{
	char		lib[1200];
	void	   *b,
			   *cpu;

	snprintf(lib, sizeof(lib), "%.1000s/libggml-base.so", dir);
	b = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	snprintf(lib, sizeof(lib), "%.1000s/libggml-cpu.so", dir);
	cpu = b ? dlopen(lib, RTLD_NOW) : NULL;
	if (base)
		*base = b;
	return cpu;
}

#endif
