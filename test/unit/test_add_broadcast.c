/*
 * test_add_broadcast.c — backend.h's add_broadcast op on every backend this
 * machine has: the CPU backend in each kernel implementation the CPU runs
 * (scalar, AVX2, AVX512-VNNI; one it lacks is a skipped check) and the CUDA
 * backend (build/llm_cuda.so, as the backend loader finds it) when an
 * NVIDIA device is present (otherwise a skipped check).
 *
 * For shapes that cover the vector body and its tail, one row and many,
 * rows cut into several thread chunks, in place and into another buffer:
 * every element is bit-identical to the scalar float sum x + bias computed
 * here (NaN counts as equal to NaN: a GPU does not keep NaN payloads), x and
 * bias are left unchanged out of place; inputs include infinities, a NaN,
 * signed zeros, subnormals and sums that overflow.  n_rows 0 does nothing;
 * a negative row count, an empty row or a NULL array is an error.
 */
#define _GNU_SOURCE
#include "unit.h"
#include "kernels/backend.h"
#include "engine/backend_loader.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/dispatch.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;

static uint32_t
rng_u32(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t) ((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

/* Mostly ordinary values, with the special ones sprinkled in. */
static float
value(void)
{
	uint32_t	r = rng_u32();

	switch (r % 64)
	{
		case 0:
			return INFINITY;
		case 1:
			return -INFINITY;
		case 2:
			return -0.0f;
		case 3:
			return 0.0f;
		case 4:
			return FLT_MIN / 8.0f;	/* subnormal */
		case 5:
			return FLT_MAX;		/* FLT_MAX + FLT_MAX overflows */
		case 6:
			return -FLT_MAX;
		default:
			return ((float) (r >> 8) / (float) (1u << 24) - 0.5f) * ((r & 0x80) ? 1e4f : 1.0f);
	}
}

static bool
same_bits(float a, float b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(float)) == 0;
}

/* Index of the first element of got that is not ref's, or -1. */
static long
first_diff(const float *got, const float *ref, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!same_bits(got[i], ref[i]))
			return (long) i;
	return -1;
}

/* " (first difference at element d)" for d >= 0, else "". */
static const char *
where(long d)
{
	static char buf[64];

	if (d < 0)
		return "";
	snprintf(buf, sizeof(buf), " (first difference at element %ld)", d);
	return buf;
}

static float *
upload(llm_backend *b, const float *host, size_t n)
{
	return b->ops->load_vector(b, host, n);
}

static void
run_case(llm_backend *b, const char *name, int n_rows, int n, bool with_nan)
{
	size_t		total = (size_t) n_rows * n;
	float	   *x = malloc(total * sizeof(float)),
			   *bias = malloc((size_t) n * sizeof(float)),
			   *ref = malloc(total * sizeof(float)),
			   *got = malloc(total * sizeof(float)),
			   *dx,
			   *db,
			   *dout;
	long		d;

	for (size_t i = 0; i < total; i++)
		x[i] = value();
	for (int i = 0; i < n; i++)
		bias[i] = value();
	if (with_nan)
		x[total / 2] = NAN;
	for (int r = 0; r < n_rows; r++)
		for (int i = 0; i < n; i++)
		{
			volatile float s = x[(size_t) r * n + i] + bias[i];

			ref[(size_t) r * n + i] = s;
		}

	dx = upload(b, x, total);
	db = upload(b, bias, (size_t) n);
	dout = b->ops->alloc_f32(b, total);
	if (!CHECK(dx != NULL && db != NULL && dout != NULL, "%s: %d x %d buffers", name, n_rows, n))
		goto out;

	/* into another buffer */
	if (!CHECK(b->ops->add_broadcast(b, dx, db, dout, n_rows, n) == 0 && b->ops->sync(b) == 0 &&
			   b->ops->download(b, got, dout, total) == 0, "%s: add_broadcast %d x %d runs", name, n_rows, n))
		printf("# %s\n", b->ops->last_error(b));
	d = first_diff(got, ref, total);
	CHECK(d < 0, "%s: %d x %d out of place: bit-identical to x + bias%s", name, n_rows, n, where(d));
	b->ops->download(b, got, dx, total);
	b->ops->sync(b);
	CHECK(first_diff(got, x, total) < 0, "%s: %d x %d out of place: x unchanged", name, n_rows, n);

	/* in place */
	if (!CHECK(b->ops->add_broadcast(b, dx, db, dx, n_rows, n) == 0 && b->ops->sync(b) == 0 &&
			   b->ops->download(b, got, dx, total) == 0, "%s: add_broadcast %d x %d in place runs", name,
			   n_rows, n))
		printf("# %s\n", b->ops->last_error(b));
	d = first_diff(got, ref, total);
	CHECK(d < 0, "%s: %d x %d in place: bit-identical to x + bias%s", name, n_rows, n, where(d));
	b->ops->download(b, got, db, (size_t) n);
	b->ops->sync(b);
	CHECK(first_diff(got, bias, (size_t) n) < 0, "%s: %d x %d: bias unchanged", name, n_rows, n);

out:
	if (dx)
		b->ops->free_f32(b, dx);
	if (db)
		b->ops->free_f32(b, db);
	if (dout)
		b->ops->free_f32(b, dout);
	free(x);
	free(bias);
	free(ref);
	free(got);
}

static void
test_backend(llm_backend *b, const char *name)
{
	static const struct
	{
		int			n_rows,
					n;
	}			shapes[] = {
		{1, 1}, {3, 7}, {5, 8}, {2, 9}, {17, 33}, {300, 8}, {4, 4096}, {3, 2053},
	};
	float		one = 1.0f;

	if (!CHECK(b->ops->add_broadcast != NULL, "%s: add_broadcast is in the op table", name))
		return;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		run_case(b, name, shapes[i].n_rows, shapes[i].n, i % 2 == 1);

	CHECK(b->ops->add_broadcast(b, NULL, NULL, NULL, 0, 4) == 0, "%s: 0 rows do nothing", name);
	CHECK(b->ops->add_broadcast(b, NULL, NULL, NULL, -1, 4) == -1 &&
		  strstr(b->ops->last_error(b), "add_broadcast") != NULL,
		  "%s: a negative row count is an error (%s)", name, b->ops->last_error(b));
	CHECK(b->ops->add_broadcast(b, &one, &one, &one, 1, 0) == -1, "%s: an empty row is an error", name);
	CHECK(b->ops->add_broadcast(b, &one, NULL, &one, 1, 1) == -1, "%s: a NULL bias is an error", name);
}

static void
test_cpu(void)
{
	static const char *const impl_names[] = {"scalar", "avx2", "avx512vnni"};

	for (int impl = LLM_IMPL_SCALAR; impl <= LLM_IMPL_AVX512VNNI; impl++)
	{
		char		err[512],
					name[64];
		llm_backend *b = llm_backend_cpu_create(2, err, sizeof(err));

		if (!CHECK(b != NULL, "CPU backend created (%s)", b ? "" : err))
			return;
		snprintf(name, sizeof(name), "cpu %s", impl_names[impl]);
		if (llm_backend_cpu_set_impl(b, impl) != 0)
			SKIP("%s: add_broadcast: this CPU lacks the instructions", name);
		else
			test_backend(b, name);
		b->ops->destroy(b);
	}
}

static void
test_cuda(void)
{
	char		why[512] = "",
				err[512] = "";
	llm_backend *b;

	if (!llm_backend_nvidia_present(NULL, why, sizeof(why)))
	{
		SKIP("cuda: add_broadcast: %s", why);
		return;
	}
	/* the library this checkout built, unless the caller names one */
	if (getenv("LLM_CUDA_LIB") == NULL && access("build/llm_cuda.so", R_OK) == 0)
		setenv("LLM_CUDA_LIB", "build/llm_cuda.so", 1);
	b = llm_backend_open("cuda", 0, err, sizeof(err));
	if (!CHECK(b != NULL, "an NVIDIA device is present: the CUDA backend opens (%s)", b ? "" : err))
		return;
	test_backend(b, "cuda");
	b->ops->destroy(b);
}

int
main(void)
{
	test_cpu();
	test_cuda();
	return unit_done();
}
