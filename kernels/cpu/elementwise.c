/*
 * elementwise.c — RMS norm, GeGLU, scale, soft-capping and broadcast-add
 * kernels (elementwise.h): the scalar references and their AVX2 twins; and
 * the scalar ops of the architecture graph options (LayerNorm, RoPE and
 * attention over the step's own rows).  Depends on quant.c (fp16
 * conversion) only.
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

/* ------------------------------------------------------------------------
 * Ops of the architecture graph options (backend.h layernorm, rope_rows,
 * attention_rows): scalar, on the calling thread.  No model in use runs
 * them on its hot path; they take only host arrays, so they need no
 * backend state and cannot fail.
 * ------------------------------------------------------------------------ */

int
llm_cpu_layernorm(llm_backend *b, const float *x, const float *w, const float *bias, float *out,
				  int n, int dim, float eps)
{
	(void) b;
	for (int t = 0; t < n; t++)
	{
		const float *xr = x + (size_t) t * dim;
		float	   *y = out + (size_t) t * dim;
		double		sum = 0.0,
					sum2 = 0.0;
		float		mean,
					variance,
					scale;

		for (int i = 0; i < dim; i++)
			sum += (double) xr[i];
		mean = (float) (sum / dim);
		for (int i = 0; i < dim; i++)
		{
			float		v = xr[i] - mean;

			y[i] = v;
			sum2 += (double) (v * v);
		}
		variance = (float) (sum2 / dim);
		scale = 1.0f / sqrtf(variance + eps);
		for (int i = 0; i < dim; i++)
			y[i] = y[i] * scale;
		for (int i = 0; i < dim; i++)
			y[i] = y[i] * w[i];
		if (bias != NULL)
			for (int i = 0; i < dim; i++)
				y[i] = y[i] + bias[i];
	}
	return 0;
}

int
llm_cpu_rope_rows(llm_backend *b, const llm_step_desc *d, float *x, int n_heads, int head_dim,
				  float rope_theta, int n_rot, const float *freq_factors, int mode)
{
	const float theta_scale = powf(rope_theta, -2.0f / (float) n_rot);
	const int	half = n_rot / 2;

	(void) b;
	for (int t = 0; t < d->n_tokens; t++)
	{
		float		theta = (float) d->positions[t];

		for (int i = 0; i < half; i++)
		{
			/* ggml_rope_cache_init: the angle divided by the factor, theta scaled undivided */
			float		angle = freq_factors ? theta / freq_factors[i] : theta;
			float		c = cosf(angle),
						s = sinf(angle);

			for (int h = 0; h < n_heads; h++)
			{
				float	   *v = x + ((size_t) t * n_heads + h) * head_dim;
				int			i0 = mode == LLM_ROPE_NEOX ? i : 2 * i;
				int			i1 = mode == LLM_ROPE_NEOX ? i + half : 2 * i + 1;
				float		x0 = v[i0],
							x1 = v[i1];

				/* the fused form of rope_store_kv (ggml's x0*c - x1*s, x0*s + x1*c under contraction) */
				v[i0] = fmaf(x0, c, -(x1 * s));
				v[i1] = fmaf(x0, s, x1 * c);
			}
			theta *= theta_scale;
		}
	}
	return 0;
}

/* Rows of d's sequence s that query row t sees (attention_rows' rule). */
static bool
attn_sees(const llm_step_desc *d, const llm_attn_opts *o, int t, int u)
{
	int			p = d->positions[t],
				pu = d->positions[u];

	if (o->causal && pu > p)
		return false;
	if (o->window > 0 && (pu > p ? pu - p : p - pu) >= o->window)
		return false;
	return true;
}

/*
 * q.k over hd floats in 16 running sums (element i into sum i % 16), then
 * the sums folded pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1): a fixed order, so
 * a score does not depend on the batch or the thread, and the 16 sums are
 * independent chains the compiler keeps in vector lanes (one running sum
 * made every score wait on the add before it: an encoder's attention was
 * latency-bound).
 */
static float
attn_score(const float *qh, const float *kh, int hd, const llm_attn_opts *o)
{
	float		acc[16] = {0};
	float		dot;
	int			i = 0;

	for (; i + 16 <= hd; i += 16)
		for (int j = 0; j < 16; j++)
			acc[j] += qh[i + j] * kh[i + j];
	for (int j = 0; i + j < hd; j++)
		acc[j] += qh[i + j] * kh[i + j];
	for (int w = 8; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			acc[j] += acc[j + w];
	dot = acc[0] * o->scale;
	if (o->softcap > 0.0f)
		dot = tanhf(dot / o->softcap) * o->softcap;
	return dot;
}

void
llm_attention_rows_one(const llm_step_desc *d, int s, int t, int h, const float *q, const float *k,
					   const float *v, float *out, int n_heads, int n_kv_heads, int head_dim,
					   const llm_attn_opts *o, float *sc)
{
	const int	group = n_heads / n_kv_heads;
	const int	u0 = d->seq_start[s],
				u1 = d->seq_start[s + 1];
	const float *qh = q + ((size_t) t * n_heads + h) * head_dim;
	float	   *oh = out + ((size_t) t * n_heads + h) * head_dim;
	const int	g = h / group;
	float		mx = -INFINITY,
				sum = 0.0f;

	/* each score once, kept for the softmax pass (the same float operations as computing it twice) */
	for (int u = u0; u < u1; u++)
		if (attn_sees(d, o, t, u))
		{
			sc[u - u0] = attn_score(qh, k + ((size_t) u * n_kv_heads + g) * head_dim, head_dim, o);
			if (sc[u - u0] > mx)
				mx = sc[u - u0];
		}
	for (int i = 0; i < head_dim; i++)
		oh[i] = 0.0f;
	for (int u = u0; u < u1; u++)
		if (attn_sees(d, o, t, u))
		{
			const float *vh = v + ((size_t) u * n_kv_heads + g) * head_dim;
			float		e = expf(sc[u - u0] - mx);

			sum += e;
			for (int i = 0; i < head_dim; i++)
				oh[i] += e * vh[i];
		}
	for (int i = 0; i < head_dim && sum > 0.0f; i++)
		oh[i] = oh[i] / sum;
}

int
llm_cpu_attention_rows(llm_backend *b, const llm_step_desc *d, const float *q, const float *k,
					   const float *v, float *out, int n_heads, int n_kv_heads, int head_dim,
					   const llm_attn_opts *o)
{
	int			longest = 1;
	float	   *sc;

	(void) b;
	for (int s = 0; s < d->n_seqs; s++)
		if (d->seq_start[s + 1] - d->seq_start[s] > longest)
			longest = d->seq_start[s + 1] - d->seq_start[s];
	if ((sc = malloc((size_t) longest * sizeof(float))) == NULL)
		return -1;
	for (int s = 0; s < d->n_seqs; s++)
		for (int t = d->seq_start[s]; t < d->seq_start[s + 1]; t++)
			for (int h = 0; h < n_heads; h++)
				llm_attention_rows_one(d, s, t, h, q, k, v, out, n_heads, n_kv_heads, head_dim, o, sc);
	free(sc);
	return 0;
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
