/*
 * llm-parity — checks the CUDA backend against the CPU backend and a
 * double-precision reference.
 *
 *   llm-parity ops [--seed S]
 *       every op of kernels/backend.h on the CPU backend, the CUDA backend and
 *       the CUDA backend in deterministic mode, with fresh random inputs,
 *       against a reference computed in double on the host; prints
 *       ||out - ref|| / ||ref|| per op and case with its tolerance, and
 *       bitwise batch-invariance checks.  Without a usable GPU it checks the
 *       CPU backend alone and says so (exit status 2).
 *
 *   llm-parity e2e -m MODEL [-n TOKENS] [-p PROMPTS] [--ctx N]
 *       greedy generation through the engine API with device "cpu" and
 *       "cuda": per prompt the first divergent token and the top-2 logit
 *       margin there (a divergence at a near-tie, margin < 0.1, is expected
 *       from rounding); then the deterministic mode: the same prompts run
 *       all together and one at a time must give identical tokens; wall
 *       times of both CUDA modes.
 *
 * Exit status: 0 all checks pass, 1 a check failed, 2 CUDA unavailable.
 *
 * Tolerances (normalised error; why):
 *   exact ops (embed, gather, add)        1e-6   same formulas in fp32
 *   add_broadcast                         bitwise one fp32 addition per element
 *   rmsnorm, silu_mul, rope               1e-5   fp32 rounding, libm ulps
 *   matmul CPU, Q8 activations            2e-2   activations quantized to 8 bits per 32-block
 *   matmul CPU, F16 / BF16 activations    2e-3 / 1.5e-2   one fp16 / bf16 rounding per input
 *   matmul CUDA GEMV, repacked types      1e-5   exact weights, fp32 activations and sums
 *   matmul CUDA GEMV, fp16 weight copy    2e-3   one fp16 rounding per weight (2^-11 relative)
 *   matmul CUDA cuBLAS                    4e-3   fp16 weights and activations, fp32 sums
 *   attention CUDA split-K                1e-4   fp32 softmax and sums over fp16 K/V
 *   attention CPU                         1e-3   probabilities rounded to fp16 (as llama.cpp)
 *   attention CUDA prefill (tensor cores) 4e-3   softmax weights rounded to fp16 for P.V
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "engine/backend_loader.h"
#include "kernels/cpu/quant.h"
#include "engine/engine.h"
#include "kernels/quant_types.h"

/* ------------------------------------------------------------------------
 * small helpers
 * ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static int	n_fail,
			n_pass;

static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* uniform in [-a, a) */
static float
rnd(float a)
{
	return (float) ((double) (rng_next() >> 11) / 9007199254740992.0 * 2.0 - 1.0) * a;
}

static void
fill(float *x, size_t n, float a)
{
	for (size_t i = 0; i < n; i++)
		x[i] = rnd(a);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *
xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	if (p == NULL)
	{
		fprintf(stderr, "llm-parity: out of memory\n");
		exit(1);
	}
	return p;
}

/* ||out - ref|| / ||ref|| (max(||ref||, 1e-30)); NaN anywhere gives +inf. */
static double
rel_err(const float *out, const double *ref, size_t n)
{
	double		num = 0,
				den = 0;

	for (size_t i = 0; i < n; i++)
	{
		double		d = (double) out[i] - ref[i];

		if (!isfinite(out[i]))
			return INFINITY;
		num += d * d;
		den += ref[i] * ref[i];
	}
	return sqrt(num) / (den > 1e-60 ? sqrt(den) : 1e-30);
}

static void
report(const char *op, const char *cas, const char *backend, double err, double tol)
{
	bool		ok = err <= tol;

	printf("%-10s %-28s %-9s %10.3e  tol %7.1e  %s\n", op, cas, backend, err, tol, ok ? "ok" : "FAIL");
	if (ok)
		n_pass++;
	else
		n_fail++;
}

static void
report_bitwise(const char *op, const char *cas, const char *backend, const float *a, const float *b,
			   size_t n, bool required)
{
	size_t		diff = 0;
	double		maxd = 0;

	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
		{
			diff++;
			if (fabs((double) a[i] - b[i]) > maxd)
				maxd = fabs((double) a[i] - b[i]);
		}
	printf("%-10s %-28s %-9s %10zu differing values (max %.2e)  %s\n", op, cas, backend, diff, maxd,
		   diff == 0 ? "bitwise-identical" : required ? "FAIL" : "(not required)");
	if (required)
	{
		if (diff == 0)
			n_pass++;
		else
			n_fail++;
	}
}

/* ------------------------------------------------------------------------
 * backends under test
 * ------------------------------------------------------------------------ */

typedef struct tb
{
	const char *name;			/* "cpu", "cuda", "cuda-det" */
	llm_backend *b;
	bool		is_cuda;
	bool		det;
} tb;

#define MAX_TB 3

/* CPU, CUDA, CUDA deterministic; the CUDA ones absent (with a note) when unusable. */
static int
open_backends(tb *t, char *why, size_t whylen)
{
	char		err[512];
	int			n = 0;

	t[n].b = llm_backend_cpu_create(0, err, sizeof(err));
	if (t[n].b == NULL)
	{
		fprintf(stderr, "llm-parity: CPU backend: %s\n", err);
		exit(1);
	}
	t[n].name = "cpu";
	t[n].is_cuda = false;
	t[n].det = true;
	n++;
	t[n].b = llm_backend_open_ex("cuda", 0, false, err, sizeof(err));
	if (t[n].b == NULL)
	{
		snprintf(why, whylen, "%s", err);
		return n;
	}
	t[n].name = "cuda";
	t[n].is_cuda = true;
	t[n].det = false;
	n++;
	t[n].b = llm_backend_open_ex("cuda", 0, true, err, sizeof(err));
	if (t[n].b == NULL)
	{
		snprintf(why, whylen, "%s", err);
		return n;
	}
	t[n].name = "cuda-det";
	t[n].is_cuda = true;
	t[n].det = true;
	n++;
	return n;
}

static void
close_backends(tb *t, int n)
{
	for (int i = 0; i < n; i++)
		t[i].b->ops->destroy(t[i].b);
}

#define OK(b, call) do { if ((call) != 0) { \
	fprintf(stderr, "llm-parity: %s: %s failed: %s\n", (b)->ops->name, #call, (b)->ops->last_error(b)); \
	exit(1); } } while (0)

static float *
upload(llm_backend *b, const float *host, size_t n)
{
	float	   *p = b->ops->load_vector(b, host, n);

	if (p == NULL)
	{
		fprintf(stderr, "llm-parity: %s: upload: %s\n", b->ops->name, b->ops->last_error(b));
		exit(1);
	}
	return p;
}

static float *
dev_alloc(llm_backend *b, size_t n)
{
	float	   *p = b->ops->alloc_f32(b, n);

	if (p == NULL)
	{
		fprintf(stderr, "llm-parity: %s: alloc: %s\n", b->ops->name, b->ops->last_error(b));
		exit(1);
	}
	return p;
}

static void
fetch(llm_backend *b, float *host, const float *dev, size_t n)
{
	OK(b, b->ops->download(b, host, dev, n));
	OK(b, b->ops->sync(b));
}

/* ------------------------------------------------------------------------
 * a simple step: sequences with given (first position, query count),
 * block table = consecutive blocks from a per-backend-set allocator
 * ------------------------------------------------------------------------ */

#define BS 16

typedef struct step
{
	llm_step_desc d;
	int32_t    *tok,
			   *pos,
			   *slot,
			   *seq_start,
			   *kv_len,
			   *bt,
			   *out_rows;
} step;

/*
 * n_seqs sequences; sequence s has q[s] new tokens at positions p0[s]..,
 * its blocks are base_block[s] + j.  Token ids random below vocab.
 */
static void
step_build(step *st, int n_seqs, const int *p0, const int *q, const int *base_block, int max_blocks, int vocab)
{
	int			nt = 0;

	for (int s = 0; s < n_seqs; s++)
		nt += q[s];
	st->tok = xmalloc(nt * sizeof(int32_t));
	st->pos = xmalloc(nt * sizeof(int32_t));
	st->slot = xmalloc(nt * sizeof(int32_t));
	st->seq_start = xmalloc((n_seqs + 1) * sizeof(int32_t));
	st->kv_len = xmalloc(n_seqs * sizeof(int32_t));
	st->bt = xmalloc((size_t) n_seqs * max_blocks * sizeof(int32_t));
	st->out_rows = xmalloc(n_seqs * sizeof(int32_t));
	nt = 0;
	for (int s = 0; s < n_seqs; s++)
	{
		st->seq_start[s] = nt;
		for (int j = 0; j < max_blocks; j++)
			st->bt[s * max_blocks + j] = base_block[s] + j;
		for (int i = 0; i < q[s]; i++, nt++)
		{
			int			p = p0[s] + i;

			st->tok[nt] = (int32_t) (rng_next() % (uint64_t) vocab);
			st->pos[nt] = p;
			st->slot[nt] = (base_block[s] + p / BS) * BS + p % BS;
		}
		st->kv_len[s] = p0[s] + q[s];
		st->out_rows[s] = nt - 1;
	}
	st->seq_start[n_seqs] = nt;
	memset(&st->d, 0, sizeof(st->d));
	st->d.n_tokens = nt;
	st->d.n_seqs = n_seqs;
	st->d.token_ids = st->tok;
	st->d.positions = st->pos;
	st->d.slots = st->slot;
	st->d.seq_start = st->seq_start;
	st->d.seq_kv_len = st->kv_len;
	st->d.block_tables = st->bt;
	st->d.max_blocks_per_seq = max_blocks;
	st->d.out_rows = st->out_rows;
	st->d.n_out = n_seqs;
}

static void
step_free(step *st)
{
	free(st->tok);
	free(st->pos);
	free(st->slot);
	free(st->seq_start);
	free(st->kv_len);
	free(st->bt);
	free(st->out_rows);
}

/* ------------------------------------------------------------------------
 * element-wise ops, embed, gather
 * ------------------------------------------------------------------------ */

static void
test_elementwise(tb *t, int nb)
{
	const int	n = 37,
				dim = 576;
	size_t		N = (size_t) n * dim;
	float	   *x = xmalloc(N * 4),
			   *dl = xmalloc(N * 4),
			   *w = xmalloc(dim * 4),
			   *out = xmalloc(N * 4),
			   *res_out = xmalloc(N * 4);
	double	   *ref = xmalloc(N * 8),
			   *ref_res = xmalloc(N * 8);
	const float eps = 1e-5f;

	fill(x, N, 3.0f);
	fill(dl, N, 1.0f);
	fill(w, dim, 1.5f);
	for (int i = 0; i < n; i++)
	{
		double		ss = 0,
					ss2 = 0;

		for (int j = 0; j < dim; j++)
		{
			double		r = (double) x[i * dim + j] + dl[i * dim + j];

			ss += (double) x[i * dim + j] * x[i * dim + j];
			ss2 += (double) ((float) r) * (float) r;
			ref_res[i * dim + j] = (float) r;
		}
		for (int j = 0; j < dim; j++)
			ref[i * dim + j] = x[i * dim + j] / sqrt(ss / dim + eps) * w[j];
		for (int j = 0; j < dim; j++)
			ref_res[i * dim + j] = ref_res[i * dim + j];
		(void) ss2;
	}
	for (int k = 0; k < nb; k++)
	{
		llm_backend *b = t[k].b;
		float	   *dx = upload(b, x, N),
				   *dd = upload(b, dl, N),
				   *dw = upload(b, w, dim),
				   *dout = dev_alloc(b, N);

		OK(b, b->ops->rmsnorm(b, dx, dw, dout, n, dim, eps));
		fetch(b, out, dout, N);
		report("rmsnorm", "37x576", t[k].name, rel_err(out, ref, N), 1e-5);
		/* in place */
		OK(b, b->ops->rmsnorm(b, dx, dw, dx, n, dim, eps));
		fetch(b, out, dx, N);
		report("rmsnorm", "37x576 in place", t[k].name, rel_err(out, ref, N), 1e-5);
		b->ops->free_f32(b, dx);
		dx = upload(b, x, N);
		OK(b, b->ops->add_rmsnorm(b, dx, dd, dw, dout, n, dim, eps));
		fetch(b, res_out, dx, N);
		report("add_rms", "residual", t[k].name, rel_err(res_out, ref_res, N), 1e-6);
		fetch(b, out, dout, N);
		{
			double	   *r2 = xmalloc(N * 8);

			for (int i = 0; i < n; i++)
			{
				double		ss = 0;

				for (int j = 0; j < dim; j++)
					ss += ref_res[i * dim + j] * ref_res[i * dim + j];
				for (int j = 0; j < dim; j++)
					r2[i * dim + j] = ref_res[i * dim + j] / sqrt(ss / dim + eps) * w[j];
			}
			report("add_rms", "normed", t[k].name, rel_err(out, r2, N), 1e-5);
			free(r2);
		}
		b->ops->free_f32(b, dx);
		dx = upload(b, x, N);
		OK(b, b->ops->add(b, dx, dd, n, dim));
		fetch(b, out, dx, N);
		report("add", "37x576", t[k].name, rel_err(out, ref_res, N), 1e-6);
		{
			/* a bias row over every row: the bits of the float sum, out of place and in place */
			float	   *want = xmalloc(N * 4);

			for (size_t i = 0; i < N; i++)
				want[i] = x[i] + w[i % dim];
			b->ops->free_f32(b, dx);
			dx = upload(b, x, N);
			OK(b, b->ops->add_broadcast(b, dx, dw, dout, n, dim));
			fetch(b, out, dout, N);
			report_bitwise("add_bcast", "37x576", t[k].name, out, want, N, true);
			OK(b, b->ops->add_broadcast(b, dx, dw, dx, n, dim));
			fetch(b, out, dx, N);
			report_bitwise("add_bcast", "37x576 in place", t[k].name, out, want, N, true);
			free(want);
		}
		{
			double	   *r3 = xmalloc(N * 8);

			for (size_t i = 0; i < N; i++)
				r3[i] = (double) x[i] / (1.0 + exp(-(double) x[i])) * dl[i];
			OK(b, b->ops->silu_mul(b, dd, dd, dout, 0));	/* n = 0 is a no-op */
			b->ops->free_f32(b, dx);
			dx = upload(b, x, N);
			OK(b, b->ops->silu_mul(b, dx, dd, dx, N));	/* out aliases gate */
			fetch(b, out, dx, N);
			report("silu_mul", "21312 in place", t[k].name, rel_err(out, r3, N), 1e-5);
			free(r3);
		}
		b->ops->free_f32(b, dx);
		b->ops->free_f32(b, dd);
		b->ops->free_f32(b, dw);
		b->ops->free_f32(b, dout);
	}
	free(x);
	free(dl);
	free(w);
	free(out);
	free(res_out);
	free(ref);
	free(ref_res);
}

static const uint32_t test_types[] = {
	LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q8_0,
	LLM_TYPE_Q4_K, LLM_TYPE_Q6_K
};
#define N_TEST_TYPES (sizeof(test_types) / sizeof(test_types[0]))

/* A random weight of type t quantized on the host; deq = its exact values. */
static void *
make_weight(uint32_t t, int64_t rows, int64_t cols, float *deq, llm_weight *w)
{
	size_t		rb = llm_type_row_bytes(t, cols);
	char	   *data = xmalloc(rb * rows);
	float	   *src = xmalloc(cols * sizeof(float));

	for (int64_t r = 0; r < rows; r++)
	{
		fill(src, cols, 0.5f);
		if (!llm_quantize_row_ref(t, src, data + r * rb, cols) ||
			!llm_dequantize_row(t, data + r * rb, deq + r * cols, cols))
		{
			fprintf(stderr, "llm-parity: cannot quantize type %u\n", t);
			exit(1);
		}
	}
	free(src);
	memset(w, 0, sizeof(*w));
	w->type = t;
	w->n_rows = rows;
	w->n_cols = cols;
	w->row_bytes = rb;
	w->data = data;
	return data;
}

static void
test_embed_gather(tb *t, int nb)
{
	const int64_t vocab = 300,
				cols = 512;
	int			p0[2] = {0, 5},
				q[2] = {9, 4},
				base[2] = {0, 10};
	step		st;

	step_build(&st, 2, p0, q, base, 4, (int) vocab);
	for (size_t ti = 0; ti < N_TEST_TYPES; ti++)
	{
		float	   *deq = xmalloc((size_t) vocab * cols * 4);
		llm_weight	host;
		void	   *data = make_weight(test_types[ti], vocab, cols, deq, &host);
		int			nt = st.d.n_tokens;
		double	   *ref = xmalloc((size_t) nt * cols * 8);
		float	   *out = xmalloc((size_t) nt * cols * 4);
		char		cas[64];

		for (int i = 0; i < nt; i++)
			for (int j = 0; j < cols; j++)
				ref[(size_t) i * cols + j] = deq[(size_t) st.tok[i] * cols + j];
		snprintf(cas, sizeof(cas), "%s 13 tokens", llm_type_get(test_types[ti])->name);
		for (int k = 0; k < nb; k++)
		{
			llm_backend *b = t[k].b;
			llm_weight	w;
			float	   *dout = dev_alloc(b, (size_t) nt * cols);

			OK(b, b->ops->load_weight(b, &host, &w));
			OK(b, b->ops->begin_step(b, &st.d));
			OK(b, b->ops->embed(b, &w, dout));
			fetch(b, out, dout, (size_t) nt * cols);
			report("embed", cas, t[k].name, rel_err(out, ref, (size_t) nt * cols), 1e-7);
			if (ti == 0)
			{
				/* gather the sequences' last rows */
				float	   *g = dev_alloc(b, 2 * cols);
				float		hg[2 * 512];
				double		rg[2 * 512];

				OK(b, b->ops->gather_rows(b, dout, g, (int) cols));
				fetch(b, hg, g, 2 * cols);
				for (int s = 0; s < 2; s++)
					for (int j = 0; j < cols; j++)
						rg[s * cols + j] = ref[(size_t) st.out_rows[s] * cols + j];
				report("gather", "2 rows", t[k].name, rel_err(hg, rg, 2 * cols), 0);
				b->ops->free_f32(b, g);
			}
			if (ti == 0)
			{
				/* several rows per sequence, scrambled and repeated: n_out 7 > n_seqs 2 */
				static const int32_t rows[7] = {8, 0, 12, 3, 3, 9, 1};
				llm_step_desc d7 = st.d;
				float	   *g = dev_alloc(b, 7 * cols);
				float		hg[7 * 512];
				double		rg[7 * 512];

				d7.out_rows = rows;
				d7.n_out = 7;
				OK(b, b->ops->begin_step(b, &d7));
				OK(b, b->ops->gather_rows(b, dout, g, (int) cols));
				fetch(b, hg, g, 7 * cols);
				for (int r = 0; r < 7; r++)
					for (int j = 0; j < cols; j++)
						rg[r * cols + j] = ref[(size_t) rows[r] * cols + j];
				report("gather", "7 rows of 2 seqs", t[k].name, rel_err(hg, rg, 7 * cols), 0);
				b->ops->free_f32(b, g);
			}
			b->ops->free_weight(b, &w);
			b->ops->free_f32(b, dout);
		}
		free(data);
		free(deq);
		free(ref);
		free(out);
	}
	step_free(&st);
}

/* ------------------------------------------------------------------------
 * matmul
 * ------------------------------------------------------------------------ */

static double
matmul_tol(const tb *t, uint32_t type, int n)
{
	bool		repacked = type == LLM_TYPE_Q4_0 || type == LLM_TYPE_Q4_1 || type == LLM_TYPE_Q8_0;

	if (!t->is_cuda)
	{
		if (type == LLM_TYPE_F32)
			return 1e-5;
		if (type == LLM_TYPE_F16)
			return 2e-3;
		if (type == LLM_TYPE_BF16)
			return 1.5e-2;
		return 2e-2;
	}
	if (t->det || n <= 4)
		return repacked ? 1e-5 : 2e-3;
	return 4e-3;
}

static void
test_matmul(tb *t, int nb)
{
	const int64_t rows = 200,
				cols = 512;
	const int	ns[] = {1, 3, 4, 5, 16, 64};
	const int	nmax = 64;

	for (size_t ti = 0; ti < N_TEST_TYPES; ti++)
	{
		uint32_t	type = test_types[ti];
		float	   *deq = xmalloc((size_t) rows * cols * 4);
		llm_weight	host;
		void	   *data = make_weight(type, rows, cols, deq, &host);
		float	   *x = xmalloc((size_t) nmax * cols * 4);
		float	   *y = xmalloc((size_t) nmax * rows * 4);
		float	   *y1 = xmalloc((size_t) rows * 4);
		double	   *ref = xmalloc((size_t) nmax * rows * 8);

		fill(x, (size_t) nmax * cols, 2.0f);
		for (int i = 0; i < nmax; i++)
			for (int r = 0; r < rows; r++)
			{
				double		s = 0;

				for (int j = 0; j < cols; j++)
					s += (double) deq[(size_t) r * cols + j] * x[(size_t) i * cols + j];
				ref[(size_t) i * rows + r] = s;
			}
		for (int k = 0; k < nb; k++)
		{
			llm_backend *b = t[k].b;
			llm_weight	w;
			float	   *dx = upload(b, x, (size_t) nmax * cols);
			float	   *dy = dev_alloc(b, (size_t) nmax * rows);

			OK(b, b->ops->load_weight(b, &host, &w));
			for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
			{
				char		cas[64];
				int			n = ns[ni];

				OK(b, b->ops->matmul(b, &w, dx, dy, n));
				fetch(b, y, dy, (size_t) n * rows);
				snprintf(cas, sizeof(cas), "%s %lldx%lld n=%d", llm_type_get(type)->name,
						 (long long) rows, (long long) cols, n);
				report("matmul", cas, t[k].name, rel_err(y, ref, (size_t) n * rows), matmul_tol(&t[k], type, n));
			}
			/* batch invariance: row 37 alone vs inside n = 64 */
			{
				float	   *dx1 = upload(b, x + 37 * cols, cols);
				char		cas[64];

				OK(b, b->ops->matmul(b, &w, dx, dy, nmax));
				fetch(b, y, dy, (size_t) nmax * rows);
				OK(b, b->ops->matmul(b, &w, dx1, dy, 1));
				fetch(b, y1, dy, rows);
				snprintf(cas, sizeof(cas), "%s row alone vs n=64", llm_type_get(type)->name);
				report_bitwise("matmul", cas, t[k].name, y1, y + 37 * rows, rows, t[k].det);
				b->ops->free_f32(b, dx1);
			}
			b->ops->free_weight(b, &w);
			b->ops->free_f32(b, dx);
			b->ops->free_f32(b, dy);
		}
		free(data);
		free(deq);
		free(x);
		free(y);
		free(y1);
		free(ref);
	}
}

/* ------------------------------------------------------------------------
 * RoPE + KV store + attention
 * ------------------------------------------------------------------------ */

typedef struct attn_geo
{
	int			n_heads,
				n_kv,
				hd;
	float		theta;
} attn_geo;

/* Host mirror of the paged cache: fp16-rounded reference K/V per (block slot). */
typedef struct ref_cache
{
	float	   *k,
			   *v;				/* [slots][n_kv][hd] */
} ref_cache;

/*
 * Reference RoPE of one token's heads (ggml normal mode): the angles built in
 * float by repeated multiplication, as the op's specification (ggml
 * rope cache) does; the rotation in double.
 */
static void
ref_rope(const float *x, double *outd, int n_heads, int hd, int pos, float theta_scale)
{
	float		th = (float) pos;

	for (int i = 0; i < hd; i += 2)
	{
		double		c = cos((double) th),
					s = sin((double) th);

		for (int h = 0; h < n_heads; h++)
		{
			double		x0 = x[h * hd + i],
						x1 = x[h * hd + i + 1];

			outd[h * hd + i] = x0 * c - x1 * s;
			outd[h * hd + i + 1] = x0 * s + x1 * c;
		}
		th *= theta_scale;
	}
}

/*
 * Run one step on every backend: random q/k/v, rope_store_kv, attention
 * with the given window (keys per query, 0 = all); check rope outputs and
 * attention against the reference (which updates rc with the step's fp16
 * K/V).  att_out[k] receives backend k's attention output when not NULL.
 */
static void
attn_step(tb *t, int nb, const attn_geo *g, step *st, ref_cache *rc, const char *label, int window,
		  float **att_out)
{
	const int	nt = st->d.n_tokens,
				hd = g->hd;
	const size_t qn = (size_t) nt * g->n_heads * hd,
				kn = (size_t) nt * g->n_kv * hd;
	float	   *q = xmalloc(qn * 4),
			   *kk = xmalloc(kn * 4),
			   *v = xmalloc(kn * 4),
			   *out = xmalloc(qn * 4);
	double	   *qr = xmalloc(qn * 8),
			   *kr = xmalloc(kn * 8),
			   *att = xmalloc(qn * 8);
	const float theta_scale = powf(g->theta, -2.0f / (float) hd);
	const float scale = 1.0f / sqrtf((float) hd);
	const int	group = g->n_heads / g->n_kv;
	char		cas[80];

	fill(q, qn, 1.5f);
	fill(kk, kn, 1.5f);
	fill(v, kn, 1.0f);
	for (int i = 0; i < nt; i++)
	{
		ref_rope(q + (size_t) i * g->n_heads * hd, qr + (size_t) i * g->n_heads * hd, g->n_heads, hd, st->pos[i], theta_scale);
		ref_rope(kk + (size_t) i * g->n_kv * hd, kr + (size_t) i * g->n_kv * hd, g->n_kv, hd, st->pos[i], theta_scale);
		for (int e = 0; e < g->n_kv * hd; e++)
		{
			rc->k[(size_t) st->slot[i] * g->n_kv * hd + e] =
				llm_fp16_to_fp32(llm_fp32_to_fp16((float) kr[(size_t) i * g->n_kv * hd + e]));
			rc->v[(size_t) st->slot[i] * g->n_kv * hd + e] =
				llm_fp16_to_fp32(llm_fp32_to_fp16(v[(size_t) i * g->n_kv * hd + e]));
		}
	}
	/* reference attention over keys lo..pos of the token's sequence */
	for (int s = 0; s < st->d.n_seqs; s++)
		for (int i = st->seq_start[s]; i < st->seq_start[s + 1]; i++)
			for (int h = 0; h < g->n_heads; h++)
			{
				int			kvh = h / group,
							pos = st->pos[i],
							lo = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
				double	   *sc = xmalloc((pos + 1) * sizeof(double));
				double		mx = -INFINITY,
							sum = 0;
				double		qh[512];

				for (int d = 0; d < hd; d++)
					qh[d] = llm_fp16_to_fp32(llm_fp32_to_fp16((float) qr[((size_t) i * g->n_heads + h) * hd + d]));
				for (int p = lo; p <= pos; p++)
				{
					int			slot = st->bt[s * st->d.max_blocks_per_seq + p / BS] * BS + p % BS;
					const float *kp = rc->k + ((size_t) slot * g->n_kv + kvh) * hd;
					double		dot = 0;

					for (int d = 0; d < hd; d++)
						dot += qh[d] * kp[d];
					sc[p] = dot * scale;
					if (sc[p] > mx)
						mx = sc[p];
				}
				for (int p = lo; p <= pos; p++)
				{
					sc[p] = exp(sc[p] - mx);
					sum += sc[p];
				}
				for (int d = 0; d < hd; d++)
				{
					double		o = 0;

					for (int p = lo; p <= pos; p++)
					{
						int			slot = st->bt[s * st->d.max_blocks_per_seq + p / BS] * BS + p % BS;

						o += sc[p] * rc->v[((size_t) slot * g->n_kv + kvh) * hd + d];
					}
					att[((size_t) i * g->n_heads + h) * hd + d] = o / sum;
				}
				free(sc);
			}

	for (int k = 0; k < nb; k++)
	{
		llm_backend *b = t[k].b;
		float	   *dq = upload(b, q, qn),
				   *dk = upload(b, kk, kn),
				   *dv = upload(b, v, kn),
				   *dout = dev_alloc(b, qn);
		double		tol;

		OK(b, b->ops->begin_step(b, &st->d));
		OK(b, b->ops->rope_store_kv(b, 1, dq, dk, dv, g->n_heads, g->theta));
		fetch(b, out, dq, qn);
		snprintf(cas, sizeof(cas), "%s q hd=%d", label, hd);
		report("rope", cas, t[k].name, rel_err(out, qr, qn), 1e-5);
		fetch(b, out, dk, kn);
		snprintf(cas, sizeof(cas), "%s k hd=%d", label, hd);
		report("rope", cas, t[k].name, rel_err(out, kr, kn), 1e-5);
		OK(b, b->ops->attention(b, 1, dq, dout, g->n_heads, scale, window));
		fetch(b, out, dout, qn);
		/* prefill chunks go through the tensor-core kernel outside the deterministic mode */
		tol = t[k].is_cuda ? 1e-4 : 1e-3;
		if (t[k].is_cuda && !t[k].det)
			for (int s = 0; s < st->d.n_seqs; s++)
				if (st->seq_start[s + 1] - st->seq_start[s] > 1)
					tol = 4e-3;
		snprintf(cas, sizeof(cas), "%s w=%d hd=%d G=%d", label, window, hd, group);
		report("attention", cas, t[k].name, rel_err(out, att, qn), tol);
		if (att_out)
		{
			att_out[k] = xmalloc(qn * 4);
			memcpy(att_out[k], out, qn * 4);
		}
		b->ops->free_f32(b, dq);
		b->ops->free_f32(b, dk);
		b->ops->free_f32(b, dv);
		b->ops->free_f32(b, dout);
	}
	free(q);
	free(kk);
	free(v);
	free(out);
	free(qr);
	free(kr);
	free(att);
}

/*
 * Run sequence data q/k/v (nt tokens from position 0) through rope_store_kv
 * and attention (window: keys per query, 0 = all) on backend b in chunks
 * (chunks[] sums to nt; blocks from base), each step shared with an
 * unrelated one-token sequence; attention outputs of the nt tokens go to
 * res.
 */
static void
run_chunked(llm_backend *b, const attn_geo *g, const float *q, const float *kk, const float *v, int nt,
			const int *chunks, int base, int window, float *res)
{
	const size_t row = (size_t) g->n_heads * g->hd,
				kvrow = (size_t) g->n_kv * g->hd;

	for (int c = 0, start = 0; start < nt; start += chunks[c], c++)
	{
		int			n_c = chunks[c];
		int			pp[2] = {start, 0},
					qq[2] = {n_c, 1},
					bb[2] = {base, 200};
		float	   *qs = xmalloc((size_t) (n_c + 1) * row * 4),
				   *ks = xmalloc((size_t) (n_c + 1) * kvrow * 4),
				   *vs = xmalloc((size_t) (n_c + 1) * kvrow * 4);
		float	   *dq,
				   *dk,
				   *dv,
				   *dout;
		step		sc;

		step_build(&sc, 2, pp, qq, bb, 40, 1000);
		memcpy(qs, q + (size_t) start * row, (size_t) n_c * row * 4);
		memcpy(ks, kk + (size_t) start * kvrow, (size_t) n_c * kvrow * 4);
		memcpy(vs, v + (size_t) start * kvrow, (size_t) n_c * kvrow * 4);
		fill(qs + (size_t) n_c * row, row, 1.5f);
		fill(ks + (size_t) n_c * kvrow, kvrow, 1.5f);
		fill(vs + (size_t) n_c * kvrow, kvrow, 1.0f);
		dq = upload(b, qs, (size_t) (n_c + 1) * row);
		dk = upload(b, ks, (size_t) (n_c + 1) * kvrow);
		dv = upload(b, vs, (size_t) (n_c + 1) * kvrow);
		dout = dev_alloc(b, (size_t) (n_c + 1) * row);
		OK(b, b->ops->begin_step(b, &sc.d));
		OK(b, b->ops->rope_store_kv(b, 0, dq, dk, dv, g->n_heads, g->theta));
		OK(b, b->ops->attention(b, 0, dq, dout, g->n_heads, 1.0f / sqrtf((float) g->hd), window));
		fetch(b, res + (size_t) start * row, dout, (size_t) n_c * row);
		b->ops->free_f32(b, dq);
		b->ops->free_f32(b, dk);
		b->ops->free_f32(b, dv);
		b->ops->free_f32(b, dout);
		free(qs);
		free(ks);
		free(vs);
		step_free(&sc);
	}
}

/*
 * Geometry g: step A prefills four sequences (37, 150, 600 tokens and a
 * 100-token first chunk) plus a one-token sequence; step B decodes one token
 * of each and prefills the second chunk (50 tokens) of the chunked one;
 * steps C and D do the same with sliding windows of 100 and 17 keys (a
 * 30- and a 20-token chunk); all against the reference.  Then batch
 * invariance: a 150-token sequence run as one chunk and as 7 + 142 + 1 (the
 * last token a decode step), each step shared with an unrelated sequence,
 * with full attention and with a window of 37: the deterministic backends
 * (CPU, CUDA deterministic) must give bit-identical outputs.
 */
static void
test_attention(const attn_geo *g)
{
	tb			t[MAX_TB];
	char		why[512] = "";
	int			nb = open_backends(t, why, sizeof(why));
	llm_kv_geometry kg = {2, g->n_kv, g->hd, BS, 256, LLM_KV_F16, NULL, 0, 0};
	ref_cache	rc;
	size_t		cache_n = (size_t) kg.n_blocks * BS * g->n_kv * g->hd;
	const size_t row = (size_t) g->n_heads * g->hd,
				kvrow = (size_t) g->n_kv * g->hd;

	rc.k = calloc(cache_n, 4);
	rc.v = calloc(cache_n, 4);
	for (int k = 0; k < nb; k++)
		OK(t[k].b, t[k].b->ops->kv_init(t[k].b, &kg));
	{
		int			p0[5] = {0, 0, 0, 0, 0},
					q[5] = {37, 150, 600, 100, 1},
					base[5] = {0, 10, 30, 80, 100};
		step		st;

		step_build(&st, 5, p0, q, base, 40, 1000);
		attn_step(t, nb, g, &st, &rc, "prefill", 0, NULL);
		step_free(&st);
	}
	{
		int			p0[5] = {37, 150, 600, 100, 1},
					q[5] = {1, 1, 1, 50, 1},
					base[5] = {0, 10, 30, 80, 100};
		step		st;

		step_build(&st, 5, p0, q, base, 40, 1000);
		attn_step(t, nb, g, &st, &rc, "decode+chunk", 0, NULL);
		step_free(&st);
	}
	{
		int			p0[5] = {38, 151, 601, 150, 2},
					q[5] = {1, 1, 1, 30, 1},
					base[5] = {0, 10, 30, 80, 100};
		step		st;

		step_build(&st, 5, p0, q, base, 40, 1000);
		attn_step(t, nb, g, &st, &rc, "decode+chunk", 100, NULL);
		step_free(&st);
	}
	{
		int			p0[5] = {39, 152, 602, 180, 3},
					q[5] = {1, 1, 1, 20, 1},
					base[5] = {0, 10, 30, 80, 100};
		step		st;

		step_build(&st, 5, p0, q, base, 40, 1000);
		attn_step(t, nb, g, &st, &rc, "decode+chunk", 17, NULL);
		step_free(&st);
	}
	{
		const int	nt = 150;
		const int	whole[1] = {150},
					parts[3] = {7, 142, 1};
		float	   *q = xmalloc((size_t) nt * row * 4),
				   *kk = xmalloc((size_t) nt * kvrow * 4),
				   *v = xmalloc((size_t) nt * kvrow * 4),
				   *r1 = xmalloc((size_t) nt * row * 4),
				   *r2 = xmalloc((size_t) nt * row * 4);

		fill(q, (size_t) nt * row, 1.5f);
		fill(kk, (size_t) nt * kvrow, 1.5f);
		fill(v, (size_t) nt * kvrow, 1.0f);
		for (int k = 0; k < nb; k++)
		{
			char		cas[80];

			for (int w = 0; w <= 37; w += 37)
			{
				run_chunked(t[k].b, g, q, kk, v, nt, whole, 110, w, r1);
				run_chunked(t[k].b, g, q, kk, v, nt, parts, 150, w, r2);
				snprintf(cas, sizeof(cas), "150: whole vs 7+142+1 w=%d hd=%d", w, g->hd);
				report_bitwise("attention", cas, t[k].name, r1, r2, (size_t) nt * row, t[k].det);
			}
		}
		free(q);
		free(kk);
		free(v);
		free(r1);
		free(r2);
	}
	close_backends(t, nb);
	free(rc.k);
	free(rc.v);
}

static int
cmd_ops(void)
{
	tb			t[MAX_TB];
	char		why[512] = "";
	int			nb = open_backends(t, why, sizeof(why));
	llm_kv_geometry kg = {1, 2, 64, BS, 64, LLM_KV_F16, NULL, 0, 0};
	attn_geo	g64 = {8, 2, 64, 10000.0f},
				g128 = {32, 8, 128, 500000.0f},
				g_smol = {9, 3, 64, 100000.0f};

	if (nb < MAX_TB)
		printf("NOTE: CUDA backend unavailable, checking the CPU backend only: %s\n", why);
	for (int k = 0; k < nb; k++)
		OK(t[k].b, t[k].b->ops->kv_init(t[k].b, &kg));
	printf("%-10s %-28s %-9s %10s\n", "op", "case", "backend", "rel.err");
	test_elementwise(t, nb);
	test_embed_gather(t, nb);
	test_matmul(t, nb);
	close_backends(t, nb);
	test_attention(&g_smol);
	test_attention(&g64);
	test_attention(&g128);
	printf("ops: %d passed, %d failed%s\n", n_pass, n_fail, nb < MAX_TB ? " (CPU only)" : "");
	if (n_fail)
		return 1;
	return nb < MAX_TB ? 2 : 0;
}

/* ------------------------------------------------------------------------
 * end to end: greedy tokens through the engine
 * ------------------------------------------------------------------------ */

typedef struct gen_out
{
	int32_t    *tok;
	int			n;
	int			cap;
	bool		error;
} gen_out;

static void
on_event(const llm_event *ev, void *arg)
{
	gen_out    *g = (gen_out *) ev->user_data;

	(void) arg;
	if (ev->kind == LLM_EVENT_TEXT && ev->token_id >= 0 && g->n < g->cap)
		g->tok[g->n++] = ev->token_id;
	else if (ev->kind == LLM_EVENT_ERROR)
	{
		fprintf(stderr, "llm-parity: request %llu: %s\n", (unsigned long long) ev->request_id, ev->text);
		g->error = true;
	}
}

static llm_engine *
make_engine(const char *model, const char *device, int ctx, char *err, size_t errlen)
{
	llm_engine_config c;

	llm_engine_config_defaults(&c);
	c.model_path = model;
	c.device = device;
	c.n_ctx = ctx;
	c.max_running = 64;
	c.prefix_caching = false;
	return llm_engine_create(&c, err, errlen);
}

/* Generate n_gen greedy tokens for prompts [first, first+count) together; returns seconds. */
static double
run_prompts(llm_engine *e, int32_t **prompts, const int *plen, int first, int count, int n_gen, gen_out *out)
{
	llm_sampling_params sp;
	char		err[512];
	double		t0 = now_s();

	llm_sampling_params_defaults(&sp);
	sp.temperature = 0;
	sp.max_tokens = n_gen;
	sp.ignore_eos = true;
	for (int i = first; i < first + count; i++)
	{
		out[i].n = 0;
		if (llm_engine_add_request(e, (uint64_t) i + 1, prompts[i], plen[i], &sp, &out[i], err, sizeof(err)) != LLM_OK)
		{
			fprintf(stderr, "llm-parity: add_request: %s\n", err);
			exit(1);
		}
	}
	while (llm_engine_has_work(e))
		if (llm_engine_step(e, on_event, NULL) != LLM_OK)
		{
			fprintf(stderr, "llm-parity: engine step failed\n");
			exit(1);
		}
	return now_s() - t0;
}

/* top-2 margin of the logits after ids[0..n) */
static double
margin_after(llm_engine *e, const int32_t *ids, int n, int *top1)
{
	int			V = llm_engine_n_vocab(e);
	float	   *lg = xmalloc((size_t) V * 4);
	char		err[512];
	double		a = -INFINITY,
				b = -INFINITY;

	*top1 = -1;
	if (llm_engine_debug_prompt_logits(e, ids, n, lg, err, sizeof(err)) != LLM_OK)
	{
		fprintf(stderr, "llm-parity: prompt logits: %s\n", err);
		free(lg);
		return NAN;
	}
	for (int i = 0; i < V; i++)
	{
		if (lg[i] > a)
		{
			b = a;
			a = lg[i];
			*top1 = i;
		}
		else if (lg[i] > b)
			b = lg[i];
	}
	free(lg);
	return a - b;
}

static int
cmd_e2e(const char *model, int n_gen, int n_prompts, int ctx)
{
	char		err[1024];
	llm_engine *cpu,
			   *gpu,
			   *det;
	int32_t   **prompts = xmalloc(n_prompts * sizeof(int32_t *));
	int		   *plen = xmalloc(n_prompts * sizeof(int));
	gen_out    *oc = calloc(n_prompts, sizeof(gen_out)),
			   *og = calloc(n_prompts, sizeof(gen_out)),
			   *od = calloc(n_prompts, sizeof(gen_out)),
			   *od1 = calloc(n_prompts, sizeof(gen_out));
	int			identical = 0,
				near_tie_div = 0,
				div = 0,
				det_same = 0;
	double		t_cpu,
				t_gpu,
				t_det,
				t_det1 = 0;
	int			V;

	cpu = make_engine(model, "cpu", ctx, err, sizeof(err));
	if (cpu == NULL)
	{
		fprintf(stderr, "llm-parity: cpu engine: %s\n", err);
		return 1;
	}
	gpu = make_engine(model, "cuda", ctx, err, sizeof(err));
	if (gpu == NULL)
	{
		fprintf(stderr, "llm-parity: cuda engine: %s\n", err);
		llm_engine_destroy(cpu);
		return 2;
	}
	V = llm_engine_n_vocab(cpu);
	for (int i = 0; i < n_prompts; i++)
	{
		plen[i] = 8 + (int) (rng_next() % 120);
		prompts[i] = xmalloc(plen[i] * sizeof(int32_t));
		for (int j = 0; j < plen[i]; j++)
			prompts[i][j] = 100 + (int32_t) (rng_next() % (uint64_t) (V > 20100 ? 20000 : V - 100));
		oc[i].cap = og[i].cap = od[i].cap = od1[i].cap = n_gen;
		oc[i].tok = xmalloc(n_gen * sizeof(int32_t));
		og[i].tok = xmalloc(n_gen * sizeof(int32_t));
		od[i].tok = xmalloc(n_gen * sizeof(int32_t));
		od1[i].tok = xmalloc(n_gen * sizeof(int32_t));
	}
	t_cpu = run_prompts(cpu, prompts, plen, 0, n_prompts, n_gen, oc);
	run_prompts(gpu, prompts, plen, 0, n_prompts, n_gen, og);	/* warm-up */
	t_gpu = run_prompts(gpu, prompts, plen, 0, n_prompts, n_gen, og);

	printf("prompt  len  first-divergence  cpu-margin  cuda-margin\n");
	for (int i = 0; i < n_prompts; i++)
	{
		int			k = 0;

		while (k < n_gen && k < oc[i].n && k < og[i].n && oc[i].tok[k] == og[i].tok[k])
			k++;
		if (k == n_gen)
		{
			identical++;
			printf("%6d %4d  identical\n", i, plen[i]);
			continue;
		}
		div++;
		{
			int32_t    *ids = xmalloc((plen[i] + k) * sizeof(int32_t));
			int			t1c,
						t1g;
			double		mc,
						mg;

			memcpy(ids, prompts[i], plen[i] * sizeof(int32_t));
			memcpy(ids + plen[i], oc[i].tok, k * sizeof(int32_t));
			mc = margin_after(cpu, ids, plen[i] + k, &t1c);
			mg = margin_after(gpu, ids, plen[i] + k, &t1g);
			if (mc < 0.1 || mg < 0.1)
				near_tie_div++;
			printf("%6d %4d  token %2d (cpu %d, cuda %d)  %10.4f  %10.4f%s\n", i, plen[i], k,
				   oc[i].tok[k], og[i].tok[k], mc, mg, (mc < 0.1 || mg < 0.1) ? "  near tie" : "  NOT A TIE");
			free(ids);
		}
	}
	llm_engine_destroy(gpu);

	/* deterministic mode: batched vs one at a time */
	setenv("LLM_DETERMINISTIC", "1", 1);
	det = make_engine(model, "cuda", ctx, err, sizeof(err));
	unsetenv("LLM_DETERMINISTIC");
	if (det == NULL)
	{
		fprintf(stderr, "llm-parity: deterministic cuda engine: %s\n", err);
		return 1;
	}
	run_prompts(det, prompts, plen, 0, n_prompts, n_gen, od);	/* warm-up */
	t_det = run_prompts(det, prompts, plen, 0, n_prompts, n_gen, od);
	for (int i = 0; i < n_prompts; i++)
		t_det1 += run_prompts(det, prompts, plen, i, 1, n_gen, od1);
	for (int i = 0; i < n_prompts; i++)
		if (od[i].n == od1[i].n && memcmp(od[i].tok, od1[i].tok, od[i].n * sizeof(int32_t)) == 0)
			det_same++;
	llm_engine_destroy(det);
	llm_engine_destroy(cpu);

	printf("e2e: %d/%d prompts identical for %d greedy tokens CPU vs CUDA; %d divergences, %d at a near tie (< 0.1)\n",
		   identical, n_prompts, n_gen, div, near_tie_div);
	printf("e2e: deterministic CUDA, batched vs one at a time: %d/%d prompts identical\n", det_same, n_prompts);
	printf("e2e: wall time for %d prompts x %d tokens: cpu %.2f s, cuda %.2f s, cuda deterministic %.2f s (%.2fx)\n",
		   n_prompts, n_gen, t_cpu, t_gpu, t_det, t_det / (t_gpu > 0 ? t_gpu : 1));
	{
		bool		ok = identical * 10 >= n_prompts * 9 && near_tie_div == div && det_same == n_prompts;

		printf("e2e: %s\n", ok ? "PASS" : "FAIL");
		return ok ? 0 : 1;
	}
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: llm-parity ops [--seed S]\n"
			"       llm-parity e2e -m MODEL [-n TOKENS] [-p PROMPTS] [--ctx N] [--seed S]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *model = NULL;
	int			n_gen = 32,
				n_prompts = 10,
				ctx = 1024;

	if (argc < 2)
		usage();
	for (int i = 2; i < argc; i++)
	{
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng_state = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-m") && i + 1 < argc)
			model = argv[++i];
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n_gen = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-p") && i + 1 < argc)
			n_prompts = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ctx") && i + 1 < argc)
			ctx = atoi(argv[++i]);
		else
			usage();
	}
	if (!strcmp(argv[1], "ops"))
		return cmd_ops();
	if (!strcmp(argv[1], "e2e"))
	{
		if (model == NULL || n_gen < 1 || n_prompts < 1)
			usage();
		return cmd_e2e(model, n_gen, n_prompts, ctx);
	}
	usage();
	return 2;
}
