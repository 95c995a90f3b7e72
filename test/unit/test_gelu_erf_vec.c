/*
 * test_gelu_erf_vec.c — the CPU backend's gelu_erf per implementation:
 * the scalar one (libm's erff) against a double-precision erf GELU within
 * a few float ulp; the AVX2 and AVX-512 ones (glibc's vector erff) the
 * same bits as each other, so an encoder's embedding does not depend on
 * which of the two a host runs, and within the same bound; and every
 * element's result independent of the call's length and of its position
 * (a row's tail goes through the vector function padded, not through
 * erff), so a batched input gives its solo bits.  The vector
 * implementations count as skipped on a CPU without them.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/dispatch.h"
#include "unit.h"

#define N 4099					/* not a multiple of 8: every call has a tail */

static uint64_t rng_state = 0x6a09e667f3bcc909ull;

static float
rng_uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float) ((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* gelu_erf of in[0..n) with implementation impl into out; false if it cannot run here. */
static bool
run_impl(int impl, const float *in, float *out, size_t n)
{
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(2, err, sizeof(err));
	bool		ok = b != NULL && llm_backend_cpu_set_impl(b, impl) == 0 && b->ops->gelu_erf(b, in, out, n) == 0;

	if (b != NULL)
		b->ops->destroy(b);
	return ok;
}

/*
 * Largest error against the double GELU over its bound: ulps of the
 * result, plus |x| ulps of 1 (the float formula's 1 + erf cancels for
 * negative x, in PyTorch's float evaluation as here).
 */
static double
worst_ulps(const float *in, const float *out, size_t n)
{
	double		worst = 0;

	for (size_t i = 0; i < n; i++)
	{
		double		x = in[i],
					ref = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
		double		ulp = fabs(nextafterf((float) ref, INFINITY) - (float) ref) + fabs(x) * 0x1p-23;

		worst = fmax(worst, fabs(out[i] - ref) / ulp);
	}
	return worst;
}

int
main(void)
{
	float	   *in = malloc(sizeof(float) * N),
			   *scalar = malloc(sizeof(float) * N),
			   *avx2 = malloc(sizeof(float) * N),
			   *vnni = malloc(sizeof(float) * N),
			   *part = malloc(sizeof(float) * N);
	bool		have_avx2,
				have_vnni;

	/* activations of an FFN (|x| up to 8), both signs, with exact zeros and tiny values */
	for (int i = 0; i < N; i++)
		in[i] = rng_uniform() * (i % 3 == 0 ? 8.0f : 2.0f);
	in[0] = 0.0f;
	in[1] = -0.0f;
	in[2] = 1e-30f;
	in[3] = -12.0f;
	CHECK(run_impl(LLM_IMPL_SCALAR, in, scalar, N), "gelu_erf, scalar implementation");
	CHECK(worst_ulps(in, scalar, N) <= 4.0, "scalar gelu_erf within 4 ulp (+ |x| ulp of 1) of the double GELU (worst %.2f)",
		  worst_ulps(in, scalar, N));
	have_avx2 = llm_cpu_has_avx2() && run_impl(LLM_IMPL_AVX2, in, avx2, N);
	have_vnni = llm_cpu_has_avx512vnni() && run_impl(LLM_IMPL_AVX512VNNI, in, vnni, N);
	if (!have_avx2)
		SKIP("gelu_erf AVX2 implementation: this CPU lacks AVX2/FMA/F16C");
	else
	{
		bool		same = true;

		CHECK(worst_ulps(in, avx2, N) <= 8.0, "AVX2 gelu_erf within 8 ulp (+ |x| ulp of 1) of the double GELU (worst %.2f)",
			  worst_ulps(in, avx2, N));
		/* every length 1..40 at every offset 0..9: the same bits as the whole call */
		for (int off = 0; off < 10; off++)
			for (int len = 1; len <= 40; len++)
			{
				run_impl(LLM_IMPL_AVX2, in + off, part, (size_t) len);
				if (memcmp(part, avx2 + off, sizeof(float) * len) != 0)
					same = false;
			}
		CHECK(same, "AVX2 gelu_erf: an element's bits independent of the call's length and its position");
	}
	if (!have_vnni)
		SKIP("gelu_erf AVX-512 implementation: this CPU lacks AVX512F/VL/VNNI");
	else if (have_avx2)
		CHECK(memcmp(avx2, vnni, sizeof(float) * N) == 0,
			  "AVX-512 and AVX2 gelu_erf bit-identical (an embedding does not depend on the host's ISA)");
	free(in);
	free(scalar);
	free(avx2);
	free(vnni);
	free(part);
	return unit_done();
}
