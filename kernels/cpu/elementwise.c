/*
 * elementwise.c — RMS norm, GeGLU, scale, soft-capping and broadcast-add
 * kernels (elementwise.h): the scalar references and their AVX2 twins.
 * Depends on quant.c (fp16 conversion) only.
 *
 * The AVX2 GeGLU converts 8 gate values to binary16 with vcvtps2ph (round to
 * nearest even, as llm_fp32_to_fp16), gathers the 8 table entries and applies
 * the two range rules with blends; the scalar code does the same per
 * element, so the results are bit-identical.  The AVX2 scale and broadcast
 * add are one vmulps / vaddps per 8 elements: the scalar operation lane by
 * lane.  No expression in an FMA-target function is written as a*b+c (GCC
 * would fuse it).
 */
#include "elementwise.h"
#include "quant.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

static const float GELU_COEF_A = 0.044715f;
static const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876f;

/*
 * ggml_gelu_f32: 0.5f*x*(1.0f + tanhf(SQRT_2_OVER_PI*x*(1.0f + GELU_COEF_A*x*x))).
 * Compiled for an FMA target with contraction on, GCC fuses 1.0f +
 * (GELU_COEF_A*x)*x and nothing else; written out here so that this file's
 * compile flags do not matter.
 */
float
llm_gelu_f32(float x)
{
	float		inner = fmaf(GELU_COEF_A * x, x, 1.0f);

	return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * inner));
}

static float *gelu_table;
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void
build_gelu_table(void)
{
	float	   *t = malloc(65536 * sizeof(float));

	if (t == NULL)
		return;
	for (int h = 0; h < 65536; h++)
		t[h] = llm_fp16_to_fp32(llm_fp32_to_fp16(llm_gelu_f32(llm_fp16_to_fp32((uint16_t) h))));
	gelu_table = t;
}

const float *
llm_gelu_table(void)
{
	pthread_once(&gelu_once, build_gelu_table);
	return gelu_table;
}

/* ---- scalar references ---- */

static void
geglu_scalar(const float *gate, const float *up, float *out, int64_t n)
{
	const float *t = llm_gelu_table();

	for (int64_t i = 0; i < n; i++)
	{
		float		x = gate[i];

		if (x <= -10.0f)
			out[i] = 0.0f;
		else if (x >= 10.0f)
			out[i] = x * up[i];
		else
			out[i] = t[llm_fp32_to_fp16(x)] * up[i];
	}
}

static void
scale_scalar(float *x, float s, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = x[i] * s;
}

static void
add_row_scalar(const float *x, const float *bias, float *out, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		out[i] = x[i] + bias[i];
}

void
llm_softcap_row(float *x, float cap, int64_t n)
{
	const float inv = 1.0f / cap;

	for (int64_t i = 0; i < n; i++)
		x[i] = tanhf(x[i] * inv) * cap;
}

/* One row of ggml's rms_norm followed by the weight multiply. */
void
llm_rmsnorm_row(const float *x, const float *w, float *out, int dim, float eps)
{
	double		sum = 0.0;
	float		mean,
				scale;

	for (int i = 0; i < dim; i++)
		sum += (double) (x[i] * x[i]);
	mean = (float) (sum / dim);
	scale = 1.0f / sqrtf(mean + eps);
	for (int i = 0; i < dim; i++)
		out[i] = (x[i] * scale) * w[i];
}

/* ---- AVX2 ---- */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma,f16c")))

static TGT void
geglu_avx2(const float *gate, const float *up, float *out, int64_t n)
{
	const float *t = llm_gelu_table();
	const __m256 lo = _mm256_set1_ps(-10.0f),
				hi = _mm256_set1_ps(10.0f);
	int64_t		i = 0;

	for (; i + 8 <= n; i += 8)
	{
		__m256		x = _mm256_loadu_ps(gate + i);
		__m256		u = _mm256_loadu_ps(up + i);
		__m256i		idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
		__m256		g = _mm256_i32gather_ps(t, idx, 4);
		__m256		y = _mm256_mul_ps(g, u);

		/* x >= 10: x * up; x <= -10: 0 (NaN compares false both ways: table value) */
		y = _mm256_blendv_ps(y, _mm256_mul_ps(x, u), _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
		y = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), y);
		_mm256_storeu_ps(out + i, y);
	}
	if (i < n)
		geglu_scalar(gate + i, up + i, out + i, n - i);
}

static TGT void
scale_avx2(float *x, float s, int64_t n)
{
	const __m256 v = _mm256_set1_ps(s);
	int64_t		i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), v));
	for (; i < n; i++)
		x[i] = x[i] * s;
}

static TGT void
add_row_avx2(const float *x, const float *bias, float *out, int64_t n)
{
	int64_t		i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(bias + i)));
	for (; i < n; i++)
		out[i] = x[i] + bias[i];
}
#endif

llm_geglu_fn
llm_geglu_kernel(bool avx2)
{
#if defined(__x86_64__) || defined(__i386__)
	if (avx2)
		return geglu_avx2;
#endif
	return geglu_scalar;
}

llm_scale_fn
llm_scale_kernel(bool avx2)
{
#if defined(__x86_64__) || defined(__i386__)
	if (avx2)
		return scale_avx2;
#endif
	return scale_scalar;
}

llm_add_row_fn
llm_add_row_kernel(bool avx2)
{
#if defined(__x86_64__) || defined(__i386__)
	if (avx2)
		return add_row_avx2;
#endif
	return add_row_scalar;
}
