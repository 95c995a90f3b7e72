/*
 * cpu_elementwise.c — the CPU backend's element-wise ops (backend.h):
 * rmsnorm, add_rmsnorm, add, add_broadcast, silu_mul, gelu_mul, scale,
 * softcap, gelu_erf.  Each cuts its rows or elements into thread-pool chunks over a
 * kernel of elementwise.c or quant.h (the implementation dispatch.h chose);
 * every output element is computed by one fixed sequence of operations
 * whatever the chunking, so the results do not depend on the thread count.
 *
 * Numerics (as ggml's CPU backend): RMS norm with a double sum of float
 * squares then (x * scale) * w (llm_rmsnorm_row, as
 * ggml_compute_forward_rms_norm_f32); SiLU exponentials as ggml_v_expf;
 * GeGLU, scale and soft-capping as elementwise.h states; the adds one
 * float addition per element.
 */
#include "kernels/backend.h"
#include "cpu_internal.h"
#include "elementwise.h"

#include <math.h>


typedef struct norm_job
{
	float	   *residual;
	const float *delta;
	const float *x;
	const float *w;
	float	   *out;
	int			dim;
	float		eps;
} norm_job;

static void
norm_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	norm_job   *j = p;

	for (int64_t r = begin; r < end; r++)
	{
		const float *x;

		if (j->residual)
		{
			float	   *res = j->residual + r * j->dim;
			const float *del = j->delta + r * j->dim;

			for (int i = 0; i < j->dim; i++)
				res[i] = res[i] + del[i];
			x = res;
		}
		else
			x = j->x + r * j->dim;
		if (j->out)
			llm_rmsnorm_row(x, j->w, j->out + r * j->dim, j->dim, j->eps);
	}
}

int
cpu_rmsnorm(llm_backend *b, const float *x, const float *w, float *out, int n, int dim, float eps)
{
	norm_job	j = {NULL, NULL, x, w, out, dim, eps};

	if (n < 0 || dim <= 0 || (n > 0 && (x == NULL || w == NULL || out == NULL)))
		return cpu_fail(CPU(b), "rmsnorm: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n, 4, norm_task, &j);
	return 0;
}

int
cpu_add_rmsnorm(llm_backend *b, float *residual, const float *delta, const float *w, float *out,
				int n, int dim, float eps)
{
	norm_job	j = {residual, delta, NULL, w, out, dim, eps};

	if (n < 0 || dim <= 0 || (n > 0 && (residual == NULL || delta == NULL || w == NULL || out == NULL)))
		return cpu_fail(CPU(b), "add_rmsnorm: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n, 4, norm_task, &j);
	return 0;
}

/* layernorm: elementwise.c's rows (llm_cpu_layernorm) cut among the pool's threads, the same bits. */
typedef struct layernorm_job
{
	const float *x,
			   *w,
			   *bias;
	float	   *out;
	int			dim;
	float		eps;
} layernorm_job;

static void
layernorm_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	layernorm_job *j = p;

	llm_cpu_layernorm(NULL, j->x + begin * j->dim, j->w, j->bias, j->out + begin * j->dim, (int) (end - begin),
					  j->dim, j->eps);
}

int
cpu_layernorm(llm_backend *b, const float *x, const float *w, const float *bias, float *out, int n, int dim,
			  float eps)
{
	layernorm_job j = {x, w, bias, out, dim, eps};

	if (n < 0 || dim <= 0 || (n > 0 && (x == NULL || w == NULL || out == NULL)))
		return cpu_fail(CPU(b), "layernorm: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n, 4, layernorm_task, &j);
	return 0;
}

int
cpu_add(llm_backend *b, float *residual, const float *delta, int n, int dim)
{
	norm_job	j = {residual, delta, NULL, NULL, NULL, dim, 0};

	if (n < 0 || dim <= 0 || (n > 0 && (residual == NULL || delta == NULL)))
		return cpu_fail(CPU(b), "add: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n, 8, norm_task, &j);
	return 0;
}

typedef struct add_row_job
{
	llm_add_row_fn fn;
	const float *x;
	const float *bias;
	float	   *out;
	int			n;
} add_row_job;

static void
add_row_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	add_row_job *j = p;

	for (int64_t r = begin; r < end; r++)
		j->fn(j->x + r * j->n, j->bias, j->out + r * j->n, j->n);
}

/* The bias row once per row of x: rows are the chunks, each element one addition. */
int
cpu_add_broadcast(llm_backend *b, const float *x, const float *bias, float *out, int n_rows, int n)
{
	add_row_job j = {CPU(b)->add_row, x, bias, out, n};

	if (n_rows < 0 || n <= 0 || (n_rows > 0 && (x == NULL || bias == NULL || out == NULL)))
		return cpu_fail(CPU(b), "add_broadcast: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n_rows, n >= 2048 ? 1 : 2048 / n, add_row_task, &j);
	return 0;
}

typedef struct silu_job
{
	llm_swiglu_fn fn;
	const float *gate;
	const float *up;
	float	   *out;
} silu_job;

static void
silu_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	silu_job   *j = p;

	j->fn(j->gate + begin, j->up + begin, j->out + begin, end - begin);
}

/* SiLU as ggml_vec_swiglu_f32 (quant.h llm_swiglu_fn): per element, so chunking is free. */
int
cpu_silu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n)
{
	silu_job	j = {CPU(b)->swiglu, gate, up, out};

	if (n > 0 && (gate == NULL || up == NULL || out == NULL))
		return cpu_fail(CPU(b), "silu_mul: NULL argument");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 2048, silu_task, &j);
	return 0;
}

typedef struct geglu_job
{
	llm_geglu_fn fn;
	const float *gate;
	const float *up;
	float	   *out;
} geglu_job;

static void
geglu_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	geglu_job  *j = p;

	j->fn(j->gate + begin, j->up + begin, j->out + begin, end - begin);
}

/* GeGLU as ggml_vec_geglu_f32 (elementwise.h): per element, so chunking is free. */
int
cpu_gelu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n)
{
	geglu_job	j = {CPU(b)->geglu, gate, up, out};

	if (n > 0 && (gate == NULL || up == NULL || out == NULL))
		return cpu_fail(CPU(b), "gelu_mul: NULL argument");
	if (n > 0 && llm_gelu_table() == NULL)
		return cpu_fail(CPU(b), "gelu_mul: out of memory for the GELU table");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 4096, geglu_task, &j);
	return 0;
}

typedef struct scale_job
{
	llm_scale_fn fn;
	float	   *x;
	float		s;
} scale_job;

static void
scale_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	scale_job  *j = p;

	j->fn(j->x + begin, j->s, end - begin);
}

int
cpu_scale(llm_backend *b, float *x, float s, size_t n)
{
	scale_job	j = {CPU(b)->scale, x, s};

	if (n > 0 && x == NULL)
		return cpu_fail(CPU(b), "scale: NULL argument");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 8192, scale_task, &j);
	return 0;
}

static void
softcap_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	scale_job  *j = p;

	llm_softcap_row(j->x + begin, j->s, end - begin);
}

/* tanhf has no vector form that rounds as libm's does: one call per element, as ggml_vec_tanh_f32. */
int
cpu_softcap(llm_backend *b, float *x, float cap, size_t n)
{
	scale_job	j = {NULL, x, cap};

	if (!(cap > 0.0f) || (n > 0 && x == NULL))
		return cpu_fail(CPU(b), "softcap: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 8192, softcap_task, &j);
	return 0;
}

typedef void (*gelu_erf_row_fn) (const float *in, float *out, int64_t n);

typedef struct gelu_erf_job
{
	const float *in;
	float	   *out;
	gelu_erf_row_fn row;
} gelu_erf_job;

/* The scalar implementation: libm's erff once per element, as PyTorch's nn.GELU() evaluates it in float. */
static void
gelu_erf_scalar(const float *in, float *out, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
	{
		float		x = in[i];

		out[i] = 0.5f * x * (1.0f + erff(x * (float) M_SQRT1_2));
	}
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/*
 * The vector implementations: glibc's libmvec erff for 8 lanes (AVX2, its
 * accuracy bound 4 ulp; about ten times the scalar erff's speed, which was
 * a tenth of an encoder's step), the rest of the formula as the scalar
 * one.  A row's last elements run in a padded vector of 8, so every
 * element goes through the same function whatever its position (batch and
 * thread invariance); the AVX2 variant on AVX-512 hosts too, so that both
 * give the same bits.
 */
extern __m256 _ZGVdN8v_erff(__m256 x);

static __attribute__((target("avx2,fma,f16c"))) __m256
gelu_erf8(__m256 x)
{
	const __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(x, _mm256_set1_ps((float) M_SQRT1_2)));

	return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static __attribute__((target("avx2,fma,f16c"))) void
gelu_erf_avx2(const float *in, float *out, int64_t n)
{
	int64_t		i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, gelu_erf8(_mm256_loadu_ps(in + i)));
	if (i < n)
	{
		float		pad[8] = {0};

		for (int64_t k = i; k < n; k++)
			pad[k - i] = in[k];
		_mm256_storeu_ps(pad, gelu_erf8(_mm256_loadu_ps(pad)));
		for (int64_t k = i; k < n; k++)
			out[k] = pad[k - i];
	}
}
#endif

static void
gelu_erf_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	gelu_erf_job *j = p;

	j->row(j->in + begin, j->out + begin, end - begin);
}

/* The erf GELU: the scalar implementation's libm erff, or libmvec's (above) for the vector ones. */
int
cpu_gelu_erf(llm_backend *b, const float *in, float *out, size_t n)
{
	gelu_erf_job j = {in, out, gelu_erf_scalar};

	if (n > 0 && (in == NULL || out == NULL))
		return cpu_fail(CPU(b), "gelu_erf: NULL argument");
#if defined(__x86_64__) || defined(__i386__)
	if (CPU(b)->impl != LLM_IMPL_SCALAR && llm_cpu_has_avx2())
		j.row = gelu_erf_avx2;
#endif
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 4096, gelu_erf_task, &j);
	return 0;
}
