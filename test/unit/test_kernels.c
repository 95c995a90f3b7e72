/*
 * test_kernels.c — unit tests of the CPU compute backend (kernels/cpu).
 *
 * Every check runs for two fixed seeds and one fresh seed (printed; rerun a
 * failure with LLM_TEST_SEED=<seed>).  What is checked:
 *  - fp16 conversion: scalar == F16C for all halves and random floats;
 *  - per weight type: activation quantization and dot products of the
 *    scalar and AVX2 kernels are bit-identical (tolerance 0: both perform the
 *    same operations in the same order by design);
 *  - matmul vs a double-precision product of the dequantized weights and the
 *    unquantized activations, within a bound derived from the activation
 *    quantization error (see matmul_error_bound);
 *  - batch invariance: a token's matmul row is bit-identical for n = 1 and
 *    n = 17, for thread counts 1 and 2, and for the scalar and AVX2 kernels;
 *  - RoPE and the KV store vs a double reference; attention over a paged
 *    cache with shuffled block tables and GQA vs a double reference, and
 *    bit-identical whether prompts run in one step or in chunks mixed with
 *    other sequences, with 1 or 2 threads, scalar or SIMD, in both
 *    reduction orders (multi-token and one-token llama.cpp paths);
 *  - rmsnorm, add_rmsnorm, add, silu_mul vs references; error paths;
 *  - the row scan (finite, argmax): scalar and AVX2 kernels and the
 *    backend's scan_rows (rows in pieces on 1 and 2 threads) give the
 *    sampler's llm_logits_all_finite / llm_argmax answers, with ties
 *    inside and across lanes and pieces, -0.0 / +0.0 maxima, and NaN or
 *    infinities anywhere;
 *  - when llama.cpp's CPU library (the oracle build) is present: our
 *    activation quantization, dot products, SiLU and softmax exponentials
 *    are bit-identical to its exported quantize_row_q8_*, ggml_vec_dot_*,
 *    ggml_vec_swiglu_f32 and ggml_vec_soft_max_f32 (LLM_ORACLE_LIB_DIR,
 *    default ~/.cache/pg_llm/llama.cpp-build/bin; each comparison counted
 *    as a skipped check when the library is absent).
 * A GFLOP/s diagnostic of Q4_1 matmuls is printed (not asserted).
 */
#include "unit.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/quant_types.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_x86.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/backend_cpu.h"
#include "engine/sample/sampler.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---- */

static double
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool
same_bits(const float *a, const float *b, size_t n, size_t *where)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
		{
			if (where)
				*where = i;
			return false;
		}
	return true;
}

static const uint32_t all_types[] = {
	LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q4_0,
	LLM_TYPE_Q4_1, LLM_TYPE_Q8_0, LLM_TYPE_Q4_K, LLM_TYPE_Q6_K
};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

static llm_backend *
make_backend(int threads, int impl)
{
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(threads, err, sizeof(err));

	if (b == NULL)
	{
		printf("# backend creation failed: %s\n", err);
		exit(2);
	}
	if (impl != LLM_IMPL_BEST && llm_backend_cpu_set_impl(b, impl) != 0)
	{
		b->ops->destroy(b);
		return NULL;
	}
	return b;
}

/* ---- fp16 ---- */

static void
test_fp16(void)
{
	int			bad = 0;

	for (uint32_t h = 0; h < 65536; h++)
	{
		float		f = llm_fp16_to_fp32((uint16_t) h);
		uint16_t	back = llm_fp32_to_fp16(f);
		bool		nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);

		if (!nan && back != h)
			bad++;
		if (nan && !isnan(f))
			bad++;
	}
	CHECK(bad == 0, "fp16 -> fp32 -> fp16 round trip of all 65536 halves (%d bad)", bad);

	if (llm_cpu_has_avx2())
	{
		enum
		{
			N = 1 << 16
		};
		static float src[N],
					back_s[N],
					back_v[N];
		static uint16_t hs[N],
					hv[N];

		for (int i = 0; i < N; i++)
		{
			uint32_t	u = (uint32_t) rng_next();

			if (i % 4 == 1)		/* concentrate on the half range incl. subnormals */
				u = (u & 0x80000000u) | (0x33000000u + (u % 0x14800000u));
			if (i % 4 == 2)		/* exact ties */
				u = (u & 0xffffe000u) | 0x1000u;
			memcpy(&src[i], &u, 4);
		}
		for (int i = 0; i < N; i++)
			hs[i] = llm_fp32_to_fp16(src[i]);
		llm_fp32_to_fp16_row_f16c(src, hv, N);
		bad = 0;
		for (int i = 0; i < N; i++)
			if (hs[i] != hv[i])
				bad++;
		CHECK(bad == 0, "scalar fp32->fp16 == F16C on %d random floats (%d differ)", N, bad);
		for (int i = 0; i < N; i++)
			back_s[i] = llm_fp16_to_fp32(hs[i]);
		llm_fp16_to_fp32_row_f16c(hs, back_v, N);
		bad = 0;
		for (int i = 0; i < N; i++)
			if (memcmp(&back_s[i], &back_v[i], 4) != 0 && !(isnan(back_s[i]) && isnan(back_v[i])))
				bad++;
		CHECK(bad == 0, "scalar fp16->fp32 == F16C (%d differ)", bad);
	}
	CHECK(llm_bf16_to_fp32(llm_fp32_to_bf16(1.00390625f)) == 1.0f &&
		  llm_bf16_to_fp32(llm_fp32_to_bf16(1.01171875f)) == 1.015625f,
		  "bf16 rounds to nearest even");
}

/* The Q4_K scale decoder of the vector kernels against the one-by-one reference. */
static void
test_q4_K_scales(void)
{
	int			bad = 0;

	for (int i = 0; i < 20000; i++)
	{
		uint8_t		q[12],
					sc[8],
					mn[8];

		for (int k = 0; k < 12; k++)
			q[k] = (uint8_t) (i < 256 ? (k == i % 12 ? (uint64_t) i : 0xffu * (uint64_t) (i & 1)) : rng_next());
		llm_q4_K_scales_mins(q, sc, mn);
		for (int j = 0; j < 8; j++)
		{
			uint8_t		d,
						m;

			llm_get_scale_min_k4(j, q, &d, &m);
			bad += d != sc[j] || m != mn[j];
		}
	}
	CHECK(bad == 0, "Q4_K: llm_q4_K_scales_mins == llm_get_scale_min_k4 on 20000 scale arrays (%d differ)", bad);
}

/* ---- per-type kernels ---- */

/*
 * Bound on |matmul - exact| for one (row, token): activation quantization
 * moves x_i by at most half a step d/2 = amax/254 (amax of x_i's block), and
 * the stored fp16 scale adds a relative 2^-11 on |q d| <= amax; Q8_1's
 * fp16 s adds 2^-11 |s| per block times |m|; F16/BF16 activations round by
 * 2^-11 / 2^-8 relative; fp32 accumulation adds ~1e-5 of sum |w x|.
 */
static double
matmul_error_bound(uint32_t type, const float *w, const float *x, int64_t n, const void *wrow)
{
	double		bound = 0,
				absprod = 0;
	int			blk = (type == LLM_TYPE_Q4_K || type == LLM_TYPE_Q6_K) ? 256 : 32;

	for (int64_t i = 0; i < n; i++)
		absprod += fabs((double) w[i] * x[i]);
	if (type == LLM_TYPE_F32)
		return 1e-5 * absprod + 1e-6;
	if (type == LLM_TYPE_F16)
		return (0x1p-11 + 1e-5) * absprod + 1e-6;
	if (type == LLM_TYPE_BF16)
		return (0x1p-8 + 1e-5) * absprod + 1e-6;
	for (int64_t b = 0; b < n / blk; b++)
	{
		double		amax = 0,
					wsum = 0,
					sum = 0;

		for (int i = 0; i < blk; i++)
		{
			amax = fmax(amax, fabs(x[b * blk + i]));
			wsum += fabs(w[b * blk + i]);
			sum += x[b * blk + i];
		}
		bound += wsum * amax * (1.0 / 254 + (blk == 32 ? 0x1p-11 : 0));
		if (type == LLM_TYPE_Q4_1)
		{
			const llm_block_q4_1 *q = (const llm_block_q4_1 *) wrow + b;

			bound += fabs(llm_fp16_to_fp32(q->m)) * (fabs(sum) + amax) * 0x1p-10;
		}
	}
	return bound * 1.01 + 1e-5 * absprod + 1e-6;
}

static void
test_type(uint32_t type, int n_threads_big)
{
	const llm_type_info *ti = llm_type_get(type);
	const int64_t cols = 512,
				rows = 37;
	const int	nt = 17;
	size_t		rb = llm_type_row_bytes(type, cols);
	float	   *wf = malloc(sizeof(float) * rows * cols);
	float	   *wd = malloc(sizeof(float) * rows * cols);
	void	   *wq = malloc(rb * rows);
	float	   *x = malloc(sizeof(float) * nt * cols);
	float	   *y = malloc(sizeof(float) * nt * rows);
	float	   *y1 = malloc(sizeof(float) * rows);
	float	   *y_alt = malloc(sizeof(float) * nt * rows);
	const llm_qkernel *ks = llm_qkernel_get(type, LLM_IMPL_SCALAR);
	llm_weight	host,
				w;
	llm_backend *b;
	double		worst = 0,
				worst_norm = 0;
	bool		ok;
	double		deq_err = 0,
				deq_scale = 0;

	for (int64_t i = 0; i < rows * cols; i++)
		wf[i] = rng_normal(0.05f) + (i % 97 == 0 ? 0.3f : 0.0f);
	for (int64_t i = 0; i < nt * cols; i++)
		x[i] = rng_normal(1.0f) * (i % 61 == 0 ? 8.0f : 1.0f);
	for (int64_t r = 0; r < rows; r++)
	{
		llm_quantize_row_ref(type, wf + r * cols, (char *) wq + r * rb, cols);
		llm_dequantize_row(type, (char *) wq + r * rb, wd + r * cols, cols);
	}
	for (int64_t i = 0; i < rows * cols; i++)
	{
		deq_err = fmax(deq_err, fabs(wd[i] - wf[i]));
		deq_scale = fmax(deq_scale, fabs(wf[i]));
	}
	CHECK(ks != NULL && deq_err <= deq_scale * (type == LLM_TYPE_F32 ? 0 : 0.1),
		  "%s: reference quantize/dequantize round trip (max err %.3g of max %.3g)",
		  ti->name, deq_err, deq_scale);

	/* scalar vs SIMD kernels */
	for (int impl = LLM_IMPL_AVX2; impl <= LLM_IMPL_AVX512VNNI; impl++)
	{
		const llm_qkernel *kv = llm_qkernel_get(type, impl);
		size_t		ab = ks->act_row_bytes(cols);
		char	   *as,
				   *av;
		int			diff = 0;
		double		maxrel = 0;

		if (kv == NULL)
		{
			SKIP("%s: scalar vs %s kernels: this CPU lacks the instructions", ti->name,
				 impl == LLM_IMPL_AVX2 ? "AVX2" : "AVX512-VNNI");
			continue;
		}
		as = calloc(1, ab);
		av = calloc(1, ab);
		CHECK(ab == kv->act_row_bytes(cols), "%s: activation row sizes agree (%s)", ti->name, kv->impl);
		for (int t = 0; t < nt; t++)
		{
			ks->quantize_act(x + t * cols, as, cols);
			kv->quantize_act(x + t * cols, av, cols);
			if (memcmp(as, av, ab) != 0)
				diff++;
			for (int64_t r = 0; r < rows; r++)
			{
				float		ds = ks->dot(cols, (char *) wq + r * rb, as);
				float		dv = kv->dot(cols, (char *) wq + r * rb, as);

				if (memcmp(&ds, &dv, 4) != 0)
					maxrel = fmax(maxrel, fabs(ds - dv) / fmax(fabs(ds), 1e-30));
			}
		}
		/*
		 * every tile shape the matmul may ask for (1-4 rows x 1-8 tokens:
		 * kernels with a token tile of 4 run two), and the batch kernel on
		 * converted rows where the type has one, against the scalar dot
		 */
		{
			char	   *aall = calloc(nt, ab);
			int			tdiff = 0,
						bdiff = 0;

			for (int t = 0; t < nt; t++)
				ks->quantize_act(x + t * cols, aall + t * ab, cols);
			/* kernels whose preferred tile has more rows (the F16 one: 16) up to that */
			const int	max_nr = kv->tile_rows > 4 ? kv->tile_rows : 4;

			for (int nr = 1; nr <= max_nr; nr++)
				for (int ntile = 1; ntile <= 8; ntile++)
				{
					float		out[16 * 8];

					kv->dot_tile(cols, (char *) wq + 3 * rb, rb, nr, aall + 5 * ab, ab, ntile, out, 16);
					for (int t = 0; t < ntile; t++)
						for (int r = 0; r < nr; r++)
						{
							float		d = ks->dot(cols, (char *) wq + (3 + r) * rb, aall + (5 + t) * ab);

							tdiff += memcmp(&d, &out[t * 16 + r], 4) != 0;
						}
				}
			CHECK(tdiff == 0, "%s: every %s tile shape (1-%d rows x 1-8 tokens) bit-identical to the scalar dot "
				  "(%d differ)", ti->name, kv->impl, max_nr, tdiff);
			if (kv->batch_kernel != NULL)
			{
				const llm_qkernel *kb = kv->batch_kernel;
				size_t		crb = llm_type_row_bytes(kb->weight_type, cols);
				const int	nrb = 4 * kb->row_group;
				char	   *conv = malloc(crb * nrb);
				float	   *out = malloc(sizeof(float) * nrb * nt);

				kv->batch_convert(cols, (char *) wq + 1 * rb, rb, nrb, conv);
				for (int ntile = 1; ntile <= nt; ntile++)
				{
					kb->dot_tile(cols, conv, crb, nrb, aall, ab, ntile, out, nrb);
					for (int t = 0; t < ntile; t++)
						for (int r = 0; r < nrb; r++)
						{
							float		d = ks->dot(cols, (char *) wq + (1 + r) * rb, aall + t * ab);

							bdiff += memcmp(&d, &out[t * nrb + r], 4) != 0;
						}
				}
				CHECK(bdiff == 0, "%s: %s batch kernel (%s) on converted rows bit-identical to the scalar dot "
					  "(%d rows x 1-%d tokens; %d differ)", ti->name, kv->impl, kb->impl, nrb, nt, bdiff);
				free(conv);
				free(out);
			}
			free(aall);
		}
		CHECK(diff == 0, "%s: scalar and %s activation conversion byte-identical (%d rows differ)",
			  ti->name, kv->impl, diff);
		CHECK(maxrel == 0, "%s: scalar and %s dot products bit-identical (max rel diff %.3g, tolerance 0)",
			  ti->name, kv->impl, maxrel);
		free(as);
		free(av);
	}

	/* backend matmul vs double reference */
	host.type = type;
	host.n_rows = rows;
	host.n_cols = cols;
	host.row_bytes = rb;
	host.data = wq;
	host.backend_priv = NULL;
	b = make_backend(n_threads_big, LLM_IMPL_BEST);
	CHECK(b->ops->load_weight(b, &host, &w) == 0, "%s: load_weight", ti->name);
	CHECK(b->ops->matmul(b, &w, x, y, nt) == 0, "%s: matmul n=%d", ti->name, nt);
	ok = true;
	for (int t = 0; t < nt; t++)
		for (int64_t r = 0; r < rows; r++)
		{
			double		ref = 0,
						absprod = 0,
						bound,
						err;

			for (int64_t i = 0; i < cols; i++)
			{
				ref += (double) wd[r * cols + i] * x[t * cols + i];
				absprod += fabs((double) wd[r * cols + i] * x[t * cols + i]);
			}
			bound = matmul_error_bound(type, wd + r * cols, x + t * cols, cols, (char *) wq + r * rb);
			err = fabs(y[t * rows + r] - ref);
			worst = fmax(worst, err / bound);
			worst_norm = fmax(worst_norm, err / absprod);
			if (!(err <= bound))
				ok = false;
		}
	CHECK(ok, "%s: matmul within the activation-quantization bound of the double reference "
		  "(worst err/bound %.3f, worst err/sum|wx| %.2e)", ti->name, worst, worst_norm);

	/* batch invariance: n = 1 vs n = 17 */
	ok = true;
	for (int t = 0; t < nt; t += 4)
	{
		b->ops->matmul(b, &w, x + t * cols, y1, 1);
		if (!same_bits(y1, y + t * rows, rows, NULL))
			ok = false;
	}
	CHECK(ok, "%s: matmul row of a token bit-identical for n=1 and n=%d", ti->name, nt);
	b->ops->destroy(b);

	/* thread counts and implementations */
	{
		int			cfg[][2] = {{1, LLM_IMPL_BEST}, {2, LLM_IMPL_BEST}, {3, LLM_IMPL_BEST},
		{2, LLM_IMPL_SCALAR}, {2, LLM_IMPL_AVX2}, {2, LLM_IMPL_AVX512VNNI}};

		for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++)
		{
			llm_backend *b2 = make_backend(cfg[c][0], cfg[c][1]);
			size_t		where = 0;
			bool		same;

			if (b2 == NULL)
			{
				SKIP("%s: matmul with %d threads, implementation %d: not on this CPU", ti->name,
					 cfg[c][0], cfg[c][1]);
				continue;
			}

			b2->ops->load_weight(b2, &host, &w);
			b2->ops->matmul(b2, &w, x, y_alt, nt);
			same = same_bits(y, y_alt, (size_t) nt * rows, &where);
			CHECK(same, "%s: matmul bit-identical with %d threads, %s kernels%s",
				  ti->name, cfg[c][0], llm_backend_cpu_impl_name(b2),
				  same ? "" : " (differs)");
			if (!same)
				printf("# first difference at element %zu\n", where);
			b2->ops->destroy(b2);
		}
	}
	free(wf);
	free(wd);
	free(wq);
	free(x);
	free(y);
	free(y1);
	free(y_alt);
}

/* ---- norms and element-wise ops ---- */

/*
 * Packed kernels of implementation impl (quant_packed.c for AVX512-VNNI,
 * quant_packed_avx2.c for AVX2): repack/unpack round trip of a whole
 * matrix, rejection of shapes the layout cannot hold, and every tile shape
 * the backend can ask for (whole row groups) bit-identical to the
 * GGUF-layout dot product of the same implementation.  Counted as skipped
 * on a CPU without the instructions.
 */
static void
test_packed(uint32_t type, int impl)
{
	const llm_qkernel *kp = llm_qkernel_packed_get(type, impl),
			   *kg = llm_qkernel_get(type, impl);
	const char *name = llm_type_get(type)->name;
	const char *iname = impl == LLM_IMPL_AVX2 ? "AVX2" : "AVX512-VNNI";
	const int64_t lens[] = {64, 576, 1536};
	const int	toks = 19;
	int			rg,
				rows;

	if (kp == NULL || kg == NULL)
	{
		SKIP("%s %s packed kernels: this CPU lacks the instructions (%s)", name, iname,
			 impl == LLM_IMPL_AVX2 ? "AVX2/FMA/F16C" : "AVX512F/VL/BW/VNNI");
		return;
	}
	rg = kp->row_group > 1 ? kp->row_group : 1;
	/* row-by-row layouts: 13 rows, more than a tile of 8 and its tails */
	rows = rg > 1 ? 8 : 13;
	{
		size_t		rb = llm_type_row_bytes(type, 96);
		char	   *src = calloc(rows, rb),
				   *dst = calloc(rows, rb);
		bool		refused = type != LLM_TYPE_Q4_1 || !kp->repack(src, dst, rows, 96);

		CHECK(refused, "%s %s packed: rows of 96 (not a multiple of 64) refused where the layout needs pairs",
			  name, kp->impl);
		if (rg > 1)
			CHECK(!kp->repack(src, dst, rg + 2, 64), "%s %s packed: %d rows (not a multiple of %d) refused",
				  name, kp->impl, rg + 2, rg);
		free(src);
		free(dst);
	}
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
	{
		const int64_t n = lens[li];
		size_t		rb = llm_type_row_bytes(type, n),
					ab = kg->act_row_bytes(n);
		char	   *w = malloc(rb * rows),
				   *wp = malloc(rb * rows),
				   *back = malloc(rb),
				   *a = malloc(ab * toks);
		float	   *x = malloc(sizeof(float) * n);
		float		ref[13][19],
					out[19 * 13];
		bool		round_trip,
					same = true;

		for (int r = 0; r < rows; r++)
		{
			for (int64_t i = 0; i < n; i++)
				x[i] = rng_normal(0.05f) + (i % 37 == 0 ? 0.2f : 0.0f);
			llm_quantize_row_ref(type, x, w + r * rb, n);
		}
		round_trip = kp->repack(w, wp, rows, n);
		for (int r = 0; r < rows && round_trip; r++)
		{
			kp->unpack(wp, r, back, n);
			if (memcmp(back, w + r * rb, rb) != 0)
				round_trip = false;
		}
		CHECK(round_trip, "%s %s packed: repack accepts %d x %lld and unpack(repack(w), row) == row",
			  name, kp->impl, rows, (long long) n);
		for (int t = 0; t < toks; t++)
		{
			for (int64_t i = 0; i < n; i++)
				x[i] = rng_normal(1.0f) * (i % 50 == 0 ? 10.0f : 1.0f);
			kg->quantize_act(x, a + t * ab, n);
			for (int r = 0; r < rows; r++)
				ref[r][t] = kg->dot(n, w + r * rb, a + t * ab);
		}
		/*
		 * every (nr, nt) up to 13 x 19 for rows one by one (the Q8_0 tiles
		 * take any shape: 8 or 4 rows x 2 or 4 tokens on 512-bit vectors,
		 * single tokens on 256-bit ones, and their tails), and for groups
		 * of rows (quant_packed_avx2.c's tiles run any token count, 4 at a
		 * time) up to 8 x 19, at every row offset and every third token
		 * offset that fits
		 */
		for (int nr = rg; nr <= rows; nr += rg)
			for (int nt = 1; nt <= toks; nt++)
				for (int r0 = 0; r0 + nr <= rows; r0 += (rg > 1 ? rg : 2))
					for (int t0 = 0; t0 + nt <= toks; t0 += 3)
					{
						kp->dot_tile(n, wp + r0 * rb, rb, nr, a + t0 * ab, ab, nt, out, (size_t) nr);
						for (int t = 0; t < nt; t++)
							for (int r = 0; r < nr; r++)
								if (memcmp(&out[t * nr + r], &ref[r0 + r][t0 + t], sizeof(float)) != 0)
									same = false;
					}
		for (int r = 0; r < rows && kp->dot != NULL; r++)
		{
			float		d = kp->dot(n, wp + r * rb, a);

			if (memcmp(&d, &ref[r][0], sizeof(float)) != 0)
				same = false;
		}
		CHECK(same, "%s %s packed: every tile shape bit-identical to the GGUF-layout %s dot, n=%lld",
			  name, kp->impl, kg->impl, (long long) n);
		free(w);
		free(wp);
		free(back);
		free(a);
		free(x);
	}
}

/*
 * matmul and embed through the backend with weights the packed kernels
 * take (rows a multiple of 4): bit-identical to the scalar backend for 1..17
 * tokens, 1 and 2 threads and every implementation this CPU has; embed of
 * packed rows equals the dequantized GGUF row.
 */
static void
test_packed_matmul(uint32_t type)
{
	const char *name = llm_type_get(type)->name;
	const int64_t cols = 1536;
	const int	rows = 44,
				max_t = 17;
	const int	ntoks[] = {1, 2, 3, 4, 5, 9, 17};
	size_t		rb = llm_type_row_bytes(type, cols);
	char	   *wq = malloc(rb * rows);
	float	   *x = malloc(sizeof(float) * max_t * cols),
			   *ref = malloc(sizeof(float) * max_t * rows),
			   *y = malloc(sizeof(float) * max_t * rows),
			   *row = malloc(sizeof(float) * cols);
	llm_weight	host = {type, rows, cols, rb, wq, NULL},
				w;
	llm_backend *bs = make_backend(1, LLM_IMPL_SCALAR);

	for (int r = 0; r < rows; r++)
	{
		for (int64_t i = 0; i < cols; i++)
			row[i] = rng_normal(0.05f);
		llm_quantize_row_ref(type, row, wq + r * rb, cols);
	}
	for (int64_t i = 0; i < max_t * cols; i++)
		x[i] = rng_normal(1.0f) * (i % 61 == 0 ? 8.0f : 1.0f);
	bs->ops->load_weight(bs, &host, &w);
	bs->ops->matmul(bs, &w, x, ref, max_t);
	bs->ops->destroy(bs);
	for (int impl = LLM_IMPL_BEST; impl <= LLM_IMPL_AVX512VNNI; impl++)
		for (int threads = 1; threads <= 2; threads++)
		{
			llm_backend *b;
			bool		same = true,
						packed,
						emb_ok = true;

			if (impl == LLM_IMPL_SCALAR)
				continue;
			b = make_backend(threads, impl);
			if (b == NULL)
			{
				SKIP("%s packed matmul, implementation %d: not on this CPU", name, impl);
				continue;
			}
			b->ops->load_weight(b, &host, &w);
			packed = w.backend_priv != NULL;
			for (size_t k = 0; k < sizeof(ntoks) / sizeof(ntoks[0]); k++)
			{
				/* token t of an n-token matmul is token t of the 17-token reference */
				b->ops->matmul(b, &w, x, y, ntoks[k]);
				if (!same_bits(y, ref, (size_t) ntoks[k] * rows, NULL))
					same = false;
			}
			{
				/* embed of rows 0, 5 and 43 through the (repacked) weight */
				int32_t		ids[3] = {0, 5, 43},
							pos[3] = {0, 1, 2},
							slots[3] = {0, 1, 2},
							seq_start[2] = {0, 3},
							kv_len[1] = {3},
							bt[1] = {0};
				llm_kv_geometry g = {1, 1, 16, 4, 4, LLM_KV_F16, NULL, 0, 0};
				llm_step_desc d = {3, 1, ids, pos, slots, seq_start, kv_len, bt, 1, NULL, 0, NULL, NULL, NULL, NULL};
				float	   *e = malloc(sizeof(float) * 3 * cols);

				if (b->ops->kv_init(b, &g) != 0 || b->ops->begin_step(b, &d) != 0 || b->ops->embed(b, &w, e) != 0)
					emb_ok = false;
				for (int i = 0; i < 3 && emb_ok; i++)
				{
					llm_dequantize_row(type, wq + ids[i] * rb, row, cols);
					if (!same_bits(row, e + i * cols, (size_t) cols, NULL))
						emb_ok = false;
				}
				free(e);
			}
			CHECK(same && emb_ok, "%s %d x %lld (%s, %d threads, %s): matmul of 1..17 tokens bit-identical "
				  "to the scalar backend; embed of its rows exact", name, rows, (long long) cols,
				  packed ? ((const llm_qkernel *) w.backend_priv)->impl : "GGUF layout", threads,
				  llm_backend_cpu_impl_name(b));
			b->ops->destroy(b);
		}
	free(wq);
	free(x);
	free(ref);
	free(y);
	free(row);
}

/*
 * matmul_multi: the outputs of several weights of one input equal separate
 * matmul calls bit for bit, with row counts that split the parallel chunks
 * inside a weight and across weights, and with weights of different
 * activation types (which fall back to separate calls).
 */
static void
test_matmul_multi(int threads)
{
	const int64_t cols = 576;
	const int	nt = 9;
	const struct
	{
		uint32_t	type;
		int			rows;
	}			ws[][3] = {
		{{LLM_TYPE_Q4_1, 40}, {LLM_TYPE_Q4_1, 24}, {LLM_TYPE_Q4_1, 7}},
		{{LLM_TYPE_Q8_0, 64}, {LLM_TYPE_Q8_0, 33}, {LLM_TYPE_Q8_0, 16}},
		{{LLM_TYPE_Q4_1, 48}, {LLM_TYPE_Q8_0, 20}, {LLM_TYPE_F32, 5}},
	};
	llm_backend *b = make_backend(threads, LLM_IMPL_BEST);
	float	   *x = malloc(sizeof(float) * nt * cols);

	for (int64_t i = 0; i < nt * cols; i++)
		x[i] = rng_normal(1.0f);
	for (size_t c = 0; c < sizeof(ws) / sizeof(ws[0]); c++)
	{
		llm_weight	host[3],
					w[3];
		const llm_weight *wp[3];
		float	   *y[3],
				   *ref[3];
		void	   *data[3];
		bool		same = true;

		for (int i = 0; i < 3; i++)
		{
			size_t		rb = llm_type_row_bytes(ws[c][i].type, cols);
			float	   *row = malloc(sizeof(float) * cols);

			data[i] = malloc(rb * ws[c][i].rows);
			for (int r = 0; r < ws[c][i].rows; r++)
			{
				for (int64_t k = 0; k < cols; k++)
					row[k] = rng_normal(0.05f);
				llm_quantize_row_ref(ws[c][i].type, row, (char *) data[i] + r * rb, cols);
			}
			free(row);
			host[i] = (llm_weight) {ws[c][i].type, ws[c][i].rows, cols, rb, data[i], NULL};
			if (b->ops->load_weight(b, &host[i], &w[i]) != 0)
				same = false;
			wp[i] = &w[i];
			y[i] = malloc(sizeof(float) * nt * ws[c][i].rows);
			ref[i] = malloc(sizeof(float) * nt * ws[c][i].rows);
			b->ops->matmul(b, &w[i], x, ref[i], nt);
		}
		if (b->ops->matmul_multi(b, wp, 3, x, y, nt) != 0)
			same = false;
		for (int i = 0; i < 3; i++)
			if (!same_bits(y[i], ref[i], (size_t) nt * ws[c][i].rows, NULL))
				same = false;
		CHECK(same, "matmul_multi (%d threads, %s + %s + %s): loads, runs, bit-identical to three matmul calls",
			  threads, llm_type_get(ws[c][0].type)->name, llm_type_get(ws[c][1].type)->name,
			  llm_type_get(ws[c][2].type)->name);
		for (int i = 0; i < 3; i++)
		{
			b->ops->free_weight(b, &w[i]);
			free(data[i]);
			free(y[i]);
			free(ref[i]);
		}
	}
	free(x);
	b->ops->destroy(b);
}

/* A row for the scan tests: kind 0 random, 1 planted ties of the maximum, 2 all equal (signed zeros), 3 non-finite. */
static void
scan_row(float *x, int64_t n, int kind)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = kind == 2 ? ((rng_next() & 1) ? -0.0f : 0.0f) : rng_normal(3.0f);
	if (kind == 1)
	{
		/* the maximum several times, in different lanes and (for long rows) pieces */
		int			k = 2 + (int) (rng_next() % 5);

		for (int i = 0; i < k; i++)
			x[rng_next() % n] = 50.0f;
	}
	if (kind == 3)
	{
		const float bad[3] = {NAN, INFINITY, -INFINITY};

		x[rng_next() % n] = bad[rng_next() % 3];
	}
}

/*
 * The row scan: every kernel and the backend's scan_rows answer as the
 * sampler's scans do (finite always; argmax for finite rows).
 */
static void
test_row_scan(void)
{
	const int64_t lens[] = {1, 2, 7, 8, 31, 32, 33, 63, 64, 65, 100, 1000, 16384, 16385, 40000, 262144};
	const int64_t max_n = 262144;
	float	   *x = malloc(sizeof(float) * max_n * 4);
	int			bad_k = 0,
				checked = 0;

	for (int impl = LLM_IMPL_SCALAR; impl <= LLM_IMPL_AVX2; impl++)
	{
		llm_row_scan_fn fn = llm_row_scan_get(impl);

		if (fn == NULL)
		{
			SKIP("row scan, implementation %d: not on this CPU", impl);
			continue;
		}
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
			for (int kind = 0; kind < 4; kind++)
				for (int rep = 0; rep < (lens[li] > 20000 ? 2 : 6); rep++)
				{
					llm_row_scan s;
					bool		fin;

					scan_row(x, lens[li], kind);
					fn(x, lens[li], &s);
					fin = llm_logits_all_finite(x, (int32_t) lens[li]);
					checked++;
					if (s.finite != fin || (fin && (s.argmax != llm_argmax(x, (int32_t) lens[li]) ||
												   memcmp(&s.max, &x[s.argmax], sizeof(float)) != 0)))
						bad_k++;
				}
	}
	CHECK(bad_k == 0, "row scan kernels: finite and argmax as llm_logits_all_finite / llm_argmax "
		  "(%d rows of 1..262144, ties, signed zeros, NaN/inf; %d differ)", checked, bad_k);

	/* scan_rows: 4 rows of each length in one call, 1 and 2 threads, each implementation */
	for (int impl = LLM_IMPL_SCALAR; impl <= LLM_IMPL_AVX2; impl++)
		for (int threads = 1; threads <= 2; threads++)
		{
			llm_backend *b = make_backend(threads, impl);
			int			bad = 0,
						rows = 0;

			if (b == NULL)
			{
				SKIP("scan_rows, implementation %d: not on this CPU", impl);
				continue;
			}
			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
			{
				const int64_t n = lens[li];
				int32_t		am[4];
				uint8_t		fin[4];

				for (int r = 0; r < 4; r++)
					scan_row(x + r * n, n, (r + (int) li) % 4);
				if (n == 40000)
				{
					/* equal maxima in pieces 1 and 2 of row 0: the earlier piece wins */
					x[16384 + 5] = 99.0f;
					x[2 * 16384 + 1] = 99.0f;
				}
				if (b->ops->scan_rows(b, x, 4, (int) n, am, fin) != 0)
				{
					bad += 4;
					continue;
				}
				for (int r = 0; r < 4; r++)
				{
					bool		f = llm_logits_all_finite(x + r * n, (int32_t) n);

					rows++;
					if ((fin[r] != 0) != f || (f && am[r] != llm_argmax(x + r * n, (int32_t) n)))
						bad++;
				}
			}
			CHECK(bad == 0 && b->ops->host_buffers,
				  "scan_rows (%s, %d thread%s): %d rows of 1..262144 as the sampler's scans (%d differ)",
				  llm_backend_cpu_impl_name(b), threads, threads > 1 ? "s" : "", rows, bad);
			CHECK(b->ops->scan_rows(b, x, -1, 8, NULL, NULL) == -1 && b->ops->scan_rows(b, x, 0, 8, NULL, NULL) == 0,
				  "scan_rows: a negative row count is refused, zero rows do nothing");
			b->ops->destroy(b);
		}
	free(x);
}

static void
test_elementwise(void)
{
	const int	n = 5,
				dim = 576;
	float	   *x = malloc(sizeof(float) * n * dim),
			   *d = malloc(sizeof(float) * n * dim),
			   *w = malloc(sizeof(float) * dim),
			   *out = malloc(sizeof(float) * n * dim),
			   *res = malloc(sizeof(float) * n * dim);
	llm_backend *b = make_backend(2, LLM_IMPL_BEST);
	double		maxrel = 0;
	const float eps = 1e-5f;

	for (int i = 0; i < n * dim; i++)
	{
		x[i] = rng_normal(2.0f);
		d[i] = rng_normal(0.5f);
	}
	for (int i = 0; i < dim; i++)
		w[i] = 1.0f + rng_normal(0.2f);

	CHECK(b->ops->rmsnorm(b, x, w, out, n, dim, eps) == 0, "rmsnorm runs");
	for (int t = 0; t < n; t++)
	{
		double		ss = 0;

		for (int i = 0; i < dim; i++)
			ss += (double) x[t * dim + i] * x[t * dim + i];
		for (int i = 0; i < dim; i++)
		{
			double		ref = x[t * dim + i] / sqrt(ss / dim + eps) * w[i];

			maxrel = fmax(maxrel, fabs(out[t * dim + i] - ref) / (fabs(ref) + 1e-6));
		}
	}
	CHECK(maxrel < 1e-5, "rmsnorm vs double reference (max rel err %.2e < 1e-5)", maxrel);

	memcpy(res, x, sizeof(float) * n * dim);
	CHECK(b->ops->add_rmsnorm(b, res, d, w, out, n, dim, eps) == 0, "add_rmsnorm runs");
	maxrel = 0;
	for (int t = 0; t < n; t++)
	{
		double		ss = 0;

		for (int i = 0; i < dim; i++)
		{
			float		s = x[t * dim + i] + d[t * dim + i];

			if (res[t * dim + i] != s)
				maxrel = 1;
			ss += (double) s * s;
		}
		for (int i = 0; i < dim; i++)
		{
			double		ref = res[t * dim + i] / sqrt(ss / dim + eps) * w[i];

			maxrel = fmax(maxrel, fabs(out[t * dim + i] - ref) / (fabs(ref) + 1e-6));
		}
	}
	CHECK(maxrel < 1e-5, "add_rmsnorm: residual updated exactly, output vs reference (%.2e)", maxrel);

	memcpy(res, x, sizeof(float) * n * dim);
	b->ops->add(b, res, d, n, dim);
	maxrel = 0;
	for (int i = 0; i < n * dim; i++)
		if (res[i] != x[i] + d[i])
			maxrel = 1;
	CHECK(maxrel == 0, "add is exact float addition");

	CHECK(b->ops->silu_mul(b, x, d, out, (size_t) n * dim) == 0, "silu_mul runs");
	maxrel = 0;
	for (int i = 0; i < n * dim; i++)
	{
		double		ref = x[i] / (1.0 + exp(-(double) x[i])) * d[i];

		maxrel = fmax(maxrel, fabs(out[i] - ref) / (fabs(ref) + 1e-6));
	}
	CHECK(maxrel < 1e-5, "silu_mul vs double reference (max rel err %.2e)", maxrel);
	memcpy(res, x, sizeof(float) * n * dim);
	b->ops->silu_mul(b, res, d, res, (size_t) n * dim);
	CHECK(same_bits(res, out, (size_t) n * dim, NULL), "silu_mul in place (out aliases gate)");

	b->ops->destroy(b);
	free(x);
	free(d);
	free(w);
	free(out);
	free(res);
}

/* ---- RoPE, KV store, attention ---- */

enum
{
	A_LAYERS = 2,
	A_HEADS = 6,
	A_KV = 2,
	A_HD = 64,
	A_BS = 4,
	A_BLOCKS = 48,
	A_SEQS = 3,
	A_MAXB = 12
};

static const int seq_len[A_SEQS] = {13, 7, 30};

/* Element offset of (global slot, KV head) in a layer's CPU cache array. */
static size_t
kv_at(size_t slot, int kv_head)
{
	return llm_kv_row_offset((int32_t) (slot / A_BS), (int) (slot % A_BS), kv_head, A_KV, A_BS, A_HD);
}

typedef struct attn_inputs
{
	float	   *q[A_SEQS];		/* [len][A_HEADS][A_HD] per sequence, before RoPE */
	float	   *k[A_SEQS];
	float	   *v[A_SEQS];
} attn_inputs;

typedef struct chunk
{
	int			seq,
				from,
				to;
} chunk;

/*
 * Run the prompts through rope_store_kv + attention for both layers in the
 * given steps (each step a list of chunks); collect attention outputs per
 * (layer, seq, pos) into out[layer][seq] and roped q into qr[seq].
 */
static int
run_attention(llm_backend *b, const attn_inputs *in, const int32_t (*bt)[A_MAXB],
			  const chunk *steps, const int *steps_n, int n_steps,
			  float *out[A_LAYERS][A_SEQS], float *qr[A_SEQS], bool single)
{
	llm_kv_geometry g = {A_LAYERS, A_KV, A_HD, A_BS, A_BLOCKS, LLM_KV_F16, NULL, 0, 0};
	const int	qsz = A_HEADS * A_HD,
				ksz = A_KV * A_HD;
	int			ci = 0;

	if (b->ops->kv_init(b, &g) != 0)
		return -1;
	for (int st = 0; st < n_steps; st++)
	{
		int			nt = 0,
					ns = steps_n[st];
		int32_t		tok[128],
					pos[128],
					slot[128],
					sstart[A_SEQS + 1],
					kvlen[A_SEQS],
					btab[A_SEQS][A_MAXB];
		float	   *q,
				   *k,
				   *v,
				   *o;
		llm_step_desc d;

		for (int c = 0; c < ns; c++)
		{
			const chunk *ch = &steps[ci + c];

			sstart[c] = nt;
			kvlen[c] = ch->to;
			memcpy(btab[c], bt[ch->seq], sizeof(btab[c]));
			for (int p = ch->from; p < ch->to; p++, nt++)
			{
				tok[nt] = 0;
				pos[nt] = p;
				slot[nt] = bt[ch->seq][p / A_BS] * A_BS + p % A_BS;
			}
		}
		sstart[ns] = nt;
		memset(&d, 0, sizeof(d));
		d.n_tokens = nt;
		d.n_seqs = ns;
		d.token_ids = tok;
		d.positions = pos;
		d.slots = slot;
		d.seq_start = sstart;
		d.seq_kv_len = kvlen;
		d.block_tables = &btab[0][0];
		d.max_blocks_per_seq = A_MAXB;
		if (b->ops->begin_step(b, &d) != 0)
		{
			printf("# begin_step: %s\n", b->ops->last_error(b));
			return -1;
		}
		if (single)
		{
			uint8_t		flags[128];

			memset(flags, 1, sizeof(flags));
			if (llm_backend_cpu_set_single_rows(b, flags) != 0)
				return -1;
		}
		q = malloc(sizeof(float) * nt * qsz);
		k = malloc(sizeof(float) * nt * ksz);
		v = malloc(sizeof(float) * nt * ksz);
		o = malloc(sizeof(float) * nt * qsz);
		for (int layer = 0; layer < A_LAYERS; layer++)
		{
			int			t = 0;

			for (int c = 0; c < ns; c++)
			{
				const chunk *ch = &steps[ci + c];

				for (int p = ch->from; p < ch->to; p++, t++)
				{
					/* layer 1 uses negated inputs: distinct but reproducible */
					float		sg = layer ? -1.0f : 1.0f;

					for (int i = 0; i < qsz; i++)
						q[t * qsz + i] = sg * in->q[ch->seq][p * qsz + i];
					for (int i = 0; i < ksz; i++)
					{
						k[t * ksz + i] = sg * in->k[ch->seq][p * ksz + i];
						v[t * ksz + i] = sg * in->v[ch->seq][p * ksz + i];
					}
				}
			}
			if (b->ops->rope_store_kv(b, layer, q, k, v, A_HEADS, 10000.0f) != 0 ||
				b->ops->attention(b, layer, q, o, A_HEADS, 1.0f / sqrtf(A_HD), 0) != 0)
			{
				printf("# %s\n", b->ops->last_error(b));
				return -1;
			}
			t = 0;
			for (int c = 0; c < ns; c++)
			{
				const chunk *ch = &steps[ci + c];

				for (int p = ch->from; p < ch->to; p++, t++)
				{
					memcpy(out[layer][ch->seq] + p * qsz, o + t * qsz, sizeof(float) * qsz);
					if (layer == 0)
						memcpy(qr[ch->seq] + p * qsz, q + t * qsz, sizeof(float) * qsz);
				}
			}
		}
		free(q);
		free(k);
		free(v);
		free(o);
		ci += ns;
	}
	return 0;
}

static void
shuffled_tables(int32_t (*bt)[A_MAXB])
{
	int32_t		perm[A_BLOCKS];

	for (int i = 0; i < A_BLOCKS; i++)
		perm[i] = i;
	for (int i = A_BLOCKS - 1; i > 0; i--)
	{
		int			j = (int) (rng_next() % (uint64_t) (i + 1));
		int32_t		tmp = perm[i];

		perm[i] = perm[j];
		perm[j] = tmp;
	}
	for (int s = 0; s < A_SEQS; s++)
		for (int j = 0; j < A_MAXB; j++)
			bt[s][j] = perm[s * A_MAXB + j];
}

static void
test_attention(void)
{
	attn_inputs in;
	float	   *out1[A_LAYERS][A_SEQS],
			   *out2[A_LAYERS][A_SEQS],
			   *out3[A_LAYERS][A_SEQS],
			   *out4[A_LAYERS][A_SEQS],
			   *qr1[A_SEQS],
			   *qr2[A_SEQS],
			   *qr3[A_SEQS],
			   *qr4[A_SEQS];
	int32_t		bt1[A_SEQS][A_MAXB],
				bt2[A_SEQS][A_MAXB];
	const int	qsz = A_HEADS * A_HD,
				ksz = A_KV * A_HD;
	/* one step with all three prompts */
	const chunk one[] = {{0, 0, 13}, {1, 0, 7}, {2, 0, 30}};
	const int	one_n[] = {3};
	/* chunked and interleaved differently */
	const chunk many[] = {{2, 0, 1}, {0, 0, 5},
	{1, 0, 7}, {0, 5, 13}, {2, 1, 11},
	{2, 11, 12},
	{2, 12, 30}};
	const int	many_n[] = {2, 3, 1, 1};
	llm_backend *b1 = make_backend(2, LLM_IMPL_BEST),
			   *b2 = make_backend(2, LLM_IMPL_BEST),
			   *b3 = make_backend(1, LLM_IMPL_BEST),
			   *b4 = make_backend(2, LLM_IMPL_SCALAR);
	double		worst_rope = 0,
				worst_att = 0,
				worst_kv = 0;
	bool		same = true,
				same_threads = true,
				same_impl = true;
	int			rc1,
				rc2,
				rc3,
				rc4;

	for (int s = 0; s < A_SEQS; s++)
	{
		in.q[s] = malloc(sizeof(float) * seq_len[s] * qsz);
		in.k[s] = malloc(sizeof(float) * seq_len[s] * ksz);
		in.v[s] = malloc(sizeof(float) * seq_len[s] * ksz);
		for (int i = 0; i < seq_len[s] * qsz; i++)
			in.q[s][i] = rng_normal(1.0f);
		for (int i = 0; i < seq_len[s] * ksz; i++)
		{
			in.k[s][i] = rng_normal(1.0f);
			in.v[s][i] = rng_normal(1.0f);
		}
		qr1[s] = malloc(sizeof(float) * seq_len[s] * qsz);
		qr2[s] = malloc(sizeof(float) * seq_len[s] * qsz);
		qr3[s] = malloc(sizeof(float) * seq_len[s] * qsz);
		qr4[s] = malloc(sizeof(float) * seq_len[s] * qsz);
		for (int l = 0; l < A_LAYERS; l++)
		{
			out1[l][s] = malloc(sizeof(float) * seq_len[s] * qsz);
			out2[l][s] = malloc(sizeof(float) * seq_len[s] * qsz);
			out3[l][s] = malloc(sizeof(float) * seq_len[s] * qsz);
			out4[l][s] = malloc(sizeof(float) * seq_len[s] * qsz);
		}
	}
	shuffled_tables(bt1);
	shuffled_tables(bt2);
	rc1 = run_attention(b1, &in, bt1, one, one_n, 1, out1, qr1, false);
	rc2 = run_attention(b2, &in, bt2, many, many_n, 4, out2, qr2, false);
	rc3 = run_attention(b3, &in, bt1, many, many_n, 4, out3, qr3, false);
	rc4 = b4 ? run_attention(b4, &in, bt2, one, one_n, 1, out4, qr4, false) : 0;
	CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0, "paged attention steps run (one step; 4 chunked steps)");
	if (rc1 || rc2 || rc3 || rc4)
		return;

	/* RoPE of q vs double reference (theta per ggml: powf(base, -2/hd) by repeated multiplication) */
	for (int s = 0; s < A_SEQS; s++)
		for (int p = 0; p < seq_len[s]; p++)
		{
			float		ts = powf(10000.0f, -2.0f / A_HD);
			float		theta = (float) p;

			for (int i = 0; i < A_HD; i += 2)
			{
				double		exact = p * pow(10000.0, -(double) i / A_HD);

				/* the float recurrence stays close to the exact angle */
				worst_rope = fmax(worst_rope, fabs(theta - exact) > 1e-5 * (p + 1) ? 1 : 0);
				for (int h = 0; h < A_HEADS; h++)
				{
					const float *x = in.q[s] + p * qsz + h * A_HD;
					const float *got = qr1[s] + p * qsz + h * A_HD;
					double		r0 = x[i] * cos((double) theta) - x[i + 1] * sin((double) theta);
					double		r1 = x[i] * sin((double) theta) + x[i + 1] * cos((double) theta);
					double		e = fmax(fabs(got[i] - r0), fabs(got[i + 1] - r1)) /
						(fabs(x[i]) + fabs(x[i + 1]) + 1e-6);

					worst_rope = fmax(worst_rope, e);
				}
				theta *= ts;
			}
		}
	CHECK(worst_rope < 2e-6, "rope vs double reference (max err / (|x0|+|x1|) = %.2e < 2e-6)", worst_rope);

	/* K/V cache contents: fp16 of roped k (checked via the reference rope) and of v */
	{
		const uint16_t *K = llm_backend_cpu_kv(b1, 0, false);
		const uint16_t *V = llm_backend_cpu_kv(b1, 0, true);
		bool		vok = true;

		for (int s = 0; s < A_SEQS; s++)
			for (int p = 0; p < seq_len[s]; p++)
			{
				size_t		slot = (size_t) bt1[s][p / A_BS] * A_BS + p % A_BS;
				float		ts = powf(10000.0f, -2.0f / A_HD);

				for (int i = 0; i < ksz; i++)
					if (V[kv_at(slot, i / A_HD) + i % A_HD] != llm_fp32_to_fp16(in.v[s][p * ksz + i]))
						vok = false;
				for (int h = 0; h < A_KV; h++)
				{
					float		theta = (float) p;

					for (int i = 0; i < A_HD; i += 2)
					{
						const float *x = in.k[s] + p * ksz + h * A_HD;
						double		r0 = x[i] * cos((double) theta) - x[i + 1] * sin((double) theta);
						double		r1 = x[i] * sin((double) theta) + x[i + 1] * cos((double) theta);
						double		g0 = llm_fp16_to_fp32(K[kv_at(slot, h) + i]);
						double		g1 = llm_fp16_to_fp32(K[kv_at(slot, h) + i + 1]);

						worst_kv = fmax(worst_kv, fmax(fabs(g0 - r0) / (fabs(r0) + 1e-3),
													   fabs(g1 - r1) / (fabs(r1) + 1e-3)));
						theta *= ts;
					}
				}
			}
		CHECK(vok, "V stored as fp16 (round-nearest-even) at the block-table slots");
		CHECK(worst_kv < 0x1p-10, "K stored roped as fp16 at the slots (max rel err %.2e < 2^-10)", worst_kv);
	}

	/* attention vs double reference from the cache contents (q rounded to fp16 as the backend does) */
	for (int l = 0; l < A_LAYERS; l++)
	{
		const uint16_t *K = llm_backend_cpu_kv(b1, l, false);
		const uint16_t *V = llm_backend_cpu_kv(b1, l, true);

		for (int s = 0; s < A_SEQS; s++)
			for (int p = 0; p < seq_len[s]; p++)
				for (int h = 0; h < A_HEADS; h++)
				{
					int			kvh = h / (A_HEADS / A_KV);
					double		sc[64],
								mx = -1e300,
								sum = 0,
								o[A_HD] = {0},
								oabs[A_HD] = {0};
					float		qh[A_HD];

					/* roped q of layer l: layer 1 inputs are negated, rope is linear */
					for (int d = 0; d < A_HD; d++)
						qh[d] = llm_fp16_to_fp32(llm_fp32_to_fp16((l ? -1.0f : 1.0f) *
																  qr1[s][p * qsz + h * A_HD + d]));
					for (int j = 0; j <= p; j++)
					{
						size_t		slot = (size_t) bt1[s][j / A_BS] * A_BS + j % A_BS;
						double		dot = 0;

						for (int d = 0; d < A_HD; d++)
							dot += (double) qh[d] * llm_fp16_to_fp32(K[kv_at(slot, kvh) + d]);
						sc[j] = dot / sqrt((double) A_HD);
						mx = fmax(mx, sc[j]);
					}
					for (int j = 0; j <= p; j++)
					{
						size_t		slot = (size_t) bt1[s][j / A_BS] * A_BS + j % A_BS;
						double		e = exp(sc[j] - mx);

						sum += e;
						for (int d = 0; d < A_HD; d++)
						{
							double		vv = llm_fp16_to_fp32(V[kv_at(slot, kvh) + d]);

							o[d] += e * vv;
							oabs[d] += e * fabs(vv);
						}
					}
					for (int d = 0; d < A_HD; d++)
					{
						double		ref = o[d] / sum;
						float		got = out1[l][s][p * qsz + h * A_HD + d];

						/*
						 * the probabilities are rounded to fp16 (relative
						 * 2^-11) before the V sum, as llama.cpp does; fp32
						 * arithmetic adds well under 2e-5
						 */
						double		bound = 0x1p-11 * oabs[d] / sum + 2e-5;

						worst_att = fmax(worst_att, fabs(got - ref) / bound);
					}
				}
	}
	CHECK(worst_att <= 1.0, "attention (GQA %d:%d, shuffled paged blocks) vs double reference "
		  "(max err / (2^-11 sum p|v| + 2e-5) = %.3f <= 1)", A_HEADS, A_KV, worst_att);

	for (int l = 0; l < A_LAYERS; l++)
		for (int s = 0; s < A_SEQS; s++)
		{
			if (!same_bits(out1[l][s], out2[l][s], (size_t) seq_len[s] * qsz, NULL))
				same = false;
			if (!same_bits(out2[l][s], out3[l][s], (size_t) seq_len[s] * qsz, NULL))
				same_threads = false;
			if (b4 && !same_bits(out1[l][s], out4[l][s], (size_t) seq_len[s] * qsz, NULL))
				same_impl = false;
		}
	CHECK(same, "attention bit-identical: one step vs chunked/interleaved steps with other block tables");
	CHECK(same_threads, "attention bit-identical with 1 and 2 threads");
	CHECK(same_impl, "attention bit-identical with scalar and %s kernels",
		  b4 ? llm_backend_cpu_impl_name(b1) : "(no second implementation)");

	/* one-token-batch (decode) order: chunk- and implementation-invariant, accurate */
	{
		llm_backend *b5 = make_backend(2, LLM_IMPL_BEST),
				   *b6 = make_backend(1, LLM_IMPL_SCALAR);
		float	   *o5[A_LAYERS][A_SEQS],
				   *o6[A_LAYERS][A_SEQS],
				   *q5[A_SEQS],
				   *q6[A_SEQS];
		bool		same56 = true,
					differs = false;
		double		worst = 0;

		for (int s = 0; s < A_SEQS; s++)
		{
			q5[s] = malloc(sizeof(float) * seq_len[s] * qsz);
			q6[s] = malloc(sizeof(float) * seq_len[s] * qsz);
			for (int l = 0; l < A_LAYERS; l++)
			{
				o5[l][s] = malloc(sizeof(float) * seq_len[s] * qsz);
				o6[l][s] = malloc(sizeof(float) * seq_len[s] * qsz);
			}
		}
		rc1 = run_attention(b5, &in, bt1, one, one_n, 1, o5, q5, true);
		rc2 = run_attention(b6, &in, bt2, many, many_n, 4, o6, q6, true);
		CHECK(rc1 == 0 && rc2 == 0, "attention in one-token-batch order runs");
		for (int l = 0; l < A_LAYERS; l++)
			for (int s = 0; s < A_SEQS; s++)
			{
				size_t		cnt = (size_t) seq_len[s] * qsz;

				if (!same_bits(o5[l][s], o6[l][s], cnt, NULL))
					same56 = false;
				if (!same_bits(o5[l][s], out1[l][s], cnt, NULL))
					differs = true;
				for (size_t i = 0; i < cnt; i++)
					worst = fmax(worst, fabs(o5[l][s][i] - out1[l][s][i]));
			}
		CHECK(same56, "one-token-batch order bit-identical: one step (AVX2, 2 threads) vs chunked (scalar)");
		/*
		 * both orders compute the same sums; rounding differences can move a
		 * probability by one fp16 step (2^-11 relative), so outputs (|v| < 4)
		 * may differ by up to about 2 * 2^-11 * 4
		 */
		CHECK(worst < 4e-3, "one-token-batch order agrees with the batched order up to rounding "
			  "(max abs %.2e < 4e-3%s)", worst, differs ? "" : ", identical here");
		b5->ops->destroy(b5);
		b6->ops->destroy(b6);
		for (int s = 0; s < A_SEQS; s++)
		{
			free(q5[s]);
			free(q6[s]);
			for (int l = 0; l < A_LAYERS; l++)
			{
				free(o5[l][s]);
				free(o6[l][s]);
			}
		}
	}

	b1->ops->destroy(b1);
	b2->ops->destroy(b2);
	b3->ops->destroy(b3);
	if (b4)
		b4->ops->destroy(b4);
	for (int s = 0; s < A_SEQS; s++)
	{
		free(in.q[s]);
		free(in.k[s]);
		free(in.v[s]);
		free(qr1[s]);
		free(qr2[s]);
		free(qr3[s]);
		free(qr4[s]);
		for (int l = 0; l < A_LAYERS; l++)
		{
			free(out1[l][s]);
			free(out2[l][s]);
			free(out3[l][s]);
			free(out4[l][s]);
		}
	}
}

/* ---- error paths ---- */

static void
test_errors(void)
{
	llm_backend *b = make_backend(1, LLM_IMPL_BEST);
	uint8_t		data[1024] = {0};
	llm_weight	host = {LLM_TYPE_Q8_1, 4, 64, 72, data, NULL},
				w;
	llm_kv_geometry g = {1, 1, 16, 4, 4, LLM_KV_F16, NULL, 0, 0};
	int32_t		tok[1] = {5},
				pos[1] = {0},
				slot[1] = {3},
				ss[2] = {0, 1},
				kvl[1] = {1},
				bt[2] = {1, 2};
	llm_step_desc d = {1, 1, tok, pos, slot, ss, kvl, bt, 2, NULL, 0, NULL, NULL, NULL, NULL};
	float		out[64];

	CHECK(b->ops->load_weight(b, &host, &w) == -1 && strstr(b->ops->last_error(b), "Q8_1"),
		  "load_weight rejects Q8_1 (no kernel): %s", b->ops->last_error(b));
	host.type = LLM_TYPE_Q8_0;
	host.row_bytes = 99;
	CHECK(b->ops->load_weight(b, &host, &w) == -1, "load_weight rejects a wrong row size: %s",
		  b->ops->last_error(b));
	CHECK(b->ops->begin_step(b, &d) == -1, "begin_step before kv_init fails: %s", b->ops->last_error(b));
	CHECK(b->ops->kv_init(b, &g) == 0, "kv_init");
	CHECK(b->ops->begin_step(b, &d) == -1, "begin_step rejects a slot off the block table: %s",
		  b->ops->last_error(b));
	slot[0] = 4;
	CHECK(b->ops->begin_step(b, &d) == 0, "begin_step accepts a consistent step");
	host.row_bytes = 68;
	CHECK(b->ops->load_weight(b, &host, &w) == 0, "load_weight Q8_0");
	CHECK(b->ops->embed(b, &w, out) == -1, "embed rejects token id 5 of a 4-row table: %s",
		  b->ops->last_error(b));
	bt[0] = 7;
	CHECK(b->ops->begin_step(b, &d) == -1, "begin_step rejects block id 7 of 4: %s", b->ops->last_error(b));
	b->ops->destroy(b);
}

/* ---- bit-exactness against llama.cpp's own CPU kernels (optional) ---- */

typedef void (*ggml_quant_fn) (const float *x, void *y, int64_t k);
typedef void (*ggml_dot_fn) (int n, float *s, size_t bs, const void *vx, size_t bx,
							 const void *vy, size_t by, int nrc);

static void
test_oracle(void)
{
	char		path[1024];
	const char *dir = oracle_lib_dir(path, sizeof(path));
	void	   *cpu;
	void		(*cpu_init) (void);
	struct
	{
		uint32_t	type;
		const char *quant;
		const char *dot;
		int			blk;		/* activation elements per ggml block */
		int			blk_bytes;	/* ggml activation block size */
		int			qs_off;		/* offset of the quants in it */
	}			cases[] = {
		{LLM_TYPE_Q4_0, "quantize_row_q8_0", "ggml_vec_dot_q4_0_q8_0", 32, 34, 2},
		{LLM_TYPE_Q4_1, "quantize_row_q8_1", "ggml_vec_dot_q4_1_q8_1", 32, 36, 4},
		{LLM_TYPE_Q8_0, "quantize_row_q8_0", "ggml_vec_dot_q8_0_q8_0", 32, 34, 2},
		{LLM_TYPE_Q4_K, "quantize_row_q8_K", "ggml_vec_dot_q4_K_q8_K", 256, 292, 4},
		{LLM_TYPE_Q6_K, "quantize_row_q8_K", "ggml_vec_dot_q6_K_q8_K", 256, 292, 4},
	};

	cpu = oracle_open_lib(dir, NULL);
	if (cpu == NULL)
	{
		/* each comparison below, counted as skipped */
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
			SKIP("%s: llama.cpp oracle comparison: no llama.cpp CPU library in %s (LLM_ORACLE_LIB_DIR)",
				 llm_type_get(cases[c].type)->name, dir);
		SKIP("SiLU and softmax exp: llama.cpp oracle comparison: no llama.cpp CPU library in %s", dir);
		return;
	}
	cpu_init = (void (*) (void)) dlsym(cpu, "ggml_cpu_init");
	if (cpu_init)
		cpu_init();
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
	{
		ggml_quant_fn gq = (ggml_quant_fn) dlsym(cpu, cases[c].quant);
		ggml_dot_fn gd = (ggml_dot_fn) dlsym(cpu, cases[c].dot);
		const int64_t n = 1536;
		const int	rows = 40,
					toks = 8;
		size_t		rb = llm_type_row_bytes(cases[c].type, n);
		char	   *w = malloc(rb * rows);
		float	   *x = malloc(sizeof(float) * n);
		char	   *ga = malloc((size_t) (n / cases[c].blk) * cases[c].blk_bytes);
		int			qdiff = 0,
					ddiff = 0,
					total = 0;

		if (gq == NULL || gd == NULL || cpu_init == NULL)
		{
			CHECK(0, "oracle library exports %s and %s", cases[c].quant, cases[c].dot);
			continue;
		}
		for (int r = 0; r < rows; r++)
		{
			for (int64_t i = 0; i < n; i++)
				x[i] = rng_normal(0.05f);
			llm_quantize_row_ref(cases[c].type, x, w + r * rb, n);
		}
		/*
		 * every implementation, then the packed kernels (AVX2 and
		 * AVX512-VNNI: "impl" VNNI + 1 and + 2) on repacked weights
		 */
		for (int impl = LLM_IMPL_SCALAR; impl <= LLM_IMPL_AVX512VNNI + 2; impl++)
		{
			const llm_qkernel *k = impl <= LLM_IMPL_AVX512VNNI ? llm_qkernel_get(cases[c].type, impl) :
				llm_qkernel_packed_get(cases[c].type, impl == LLM_IMPL_AVX512VNNI + 1 ? LLM_IMPL_AVX2 :
									   LLM_IMPL_AVX512VNNI);
			char	   *ma,
					   *wk = w;

			/*
			 * a packed kernel with row forms of its own (Q4_K in groups
			 * of 8) computes llama.cpp's repacked GEMV, not its vec_dot:
			 * test_kpacked checks it against those forms
			 */
			if (k == NULL || (impl > LLM_IMPL_AVX512VNNI && k->form_mask != 0))
				continue;
			if (k->repack != NULL)
			{
				wk = malloc(rb * rows);
				if (!k->repack(w, wk, rows, n))
				{
					CHECK(0, "%s: %s repack of %d x %lld", llm_type_get(cases[c].type)->name, k->impl,
						  rows, (long long) n);
					free(wk);
					continue;
				}
			}
			ma = malloc(k->act_row_bytes(n));
			for (int t = 0; t < toks; t++)
			{
				for (int64_t i = 0; i < n; i++)
					x[i] = rng_normal(1.0f) * (i % 50 == 0 ? 10.0f : 1.0f);
				gq(x, ga, n);
				k->quantize_act(x, ma, n);
				for (int64_t b = 0; b < n / cases[c].blk; b++)
					if (memcmp(ga + b * cases[c].blk_bytes + cases[c].qs_off, ma + b * cases[c].blk,
							   (size_t) cases[c].blk) != 0)
						qdiff++;
				for (int r = 0; r < rows; r++)
				{
					float		s_ggml,
								s_ours;

					if (k->dot != NULL)
						s_ours = k->dot(n, wk + r * rb, ma);
					else
					{
						/* interleaved rows: the row's group as one tile of one token */
						const int	rg = k->row_group;
						float		o[16];

						k->dot_tile(n, wk + (r - r % rg) * rb, rb, rg, ma, 0, 1, o, (size_t) rg);
						s_ours = o[r % rg];
					}

					gd((int) n, &s_ggml, 0, w + r * rb, 0, ga, 0, 1);
					total++;
					if (memcmp(&s_ggml, &s_ours, sizeof(float)) != 0)
						ddiff++;
				}
			}
			free(ma);
			if (wk != w)
				free(wk);
		}
		CHECK(qdiff == 0 && ddiff == 0,
			  "%s: bit-identical to llama.cpp's %s + %s (%d quant blocks, %d of %d dots differ)",
			  llm_type_get(cases[c].type)->name, cases[c].quant, cases[c].dot, qdiff, ddiff, total);
		free(w);
		free(x);
		free(ga);
	}
	/*
	 * SiLU and softmax exponentials: ggml_vec_swiglu_f32 /
	 * ggml_vec_soft_max_f32.  Our exp is ggml_v_expf of an AVX512 build (the
	 * oracle's build); a library built for AVX2 only has another exp, so
	 * the comparison is a skipped check there.
	 */
	{
		int			(*g_has_avx512) (void) = (int (*) (void)) dlsym(cpu, "ggml_cpu_has_avx512");
		void		(*g_swiglu) (int, float *, const float *, const float *) =
			(void (*) (int, float *, const float *, const float *)) dlsym(cpu, "ggml_vec_swiglu_f32");
		double		(*g_softmax) (int, float *, const float *, float) =
			(double (*) (int, float *, const float *, float)) dlsym(cpu, "ggml_vec_soft_max_f32");
		enum
		{
			N = 4096
		};
		static float x[N],
					g[N],
					yg[N],
					yo[N];
		int			bad_silu = 0,
					bad_exp = 0;

		if (g_has_avx512 != NULL && !g_has_avx512())
		{
			SKIP("SiLU and softmax exp: llama.cpp oracle comparison: the library in %s is not an AVX512 build",
				 dir);
			return;
		}
		for (int i = 0; i < N; i++)
		{
			x[i] = rng_normal(i % 7 == 0 ? 40.0f : 3.0f);	/* reaches the over/underflow paths */
			g[i] = rng_normal(1.0f);
		}
		if (g_swiglu && g_softmax)
		{
			for (int impl = LLM_IMPL_SCALAR; impl <= LLM_IMPL_AVX2; impl++)
			{
				llm_swiglu_fn f = llm_swiglu_get(impl);

				if (f == NULL)
					continue;
				g_swiglu(N, yg, x, g);
				f(g, x, yo, 0);	/* n = 0 is a no-op */
				f(x, g, yo, N);
				for (int i = 0; i < N; i++)
					if (memcmp(&yg[i], &yo[i], 4) != 0)
						bad_silu++;
			}
			g_softmax(N, yg, x, 0.0f);
			for (int i = 0; i < N; i++)
			{
				float		e = llm_expf(x[i]);

				if (memcmp(&yg[i], &e, 4) != 0)
					bad_exp++;
			}
		}
		CHECK(g_swiglu && g_softmax && bad_silu == 0 && bad_exp == 0,
			  "SiLU and softmax exp bit-identical to llama.cpp's ggml_vec_swiglu_f32 / ggml_vec_soft_max_f32 "
			  "(%d and %d of %d differ)", bad_silu, bad_exp, N);
	}
	/* cpu library is left loaded: ggml registers atexit state */
}

/* ---- speed diagnostic ---- */

static double
thread_cpu_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * GFLOP/s of Q4_1 matmuls in the model's shapes: one thread timed by its CPU
 * time (meaningful on a busy machine), and all threads by wall time.
 */
static void
bench(void)
{
	const int	shapes[][2] = {{1536, 576}, {576, 1536}};

	for (size_t s = 0; s < 2; s++)
	{
		int64_t		rows = shapes[s][0],
					cols = shapes[s][1];
		size_t		rb = llm_type_row_bytes(LLM_TYPE_Q4_1, cols);
		void	   *wq = malloc(rb * rows);
		float	   *wf = malloc(sizeof(float) * cols);
		float	   *x = malloc(sizeof(float) * 16 * cols);
		float	   *y = malloc(sizeof(float) * 16 * rows);

		for (int64_t r = 0; r < rows; r++)
		{
			for (int64_t i = 0; i < cols; i++)
				wf[i] = rng_normal(0.05f);
			llm_quantize_row_ref(LLM_TYPE_Q4_1, wf, (char *) wq + r * rb, cols);
		}
		for (int64_t i = 0; i < 16 * cols; i++)
			x[i] = rng_normal(1.0f);
		for (int threads = 1; threads >= 0; threads--)
		{
			llm_backend *b = make_backend(threads, LLM_IMPL_BEST);
			llm_weight	host = {LLM_TYPE_Q4_1, rows, cols, rb, wq, NULL},
						w;
			bool		cpu = b->n_threads == 1;

			b->ops->load_weight(b, &host, &w);
			for (int n = 1; n <= 16; n += 15)
			{
				int			iters = n == 1 ? 2000 : 300;
				double		t0,
							dt;

				b->ops->matmul(b, &w, x, y, n);
				t0 = cpu ? thread_cpu_sec() : now_sec();
				for (int it = 0; it < iters; it++)
					b->ops->matmul(b, &w, x, y, n);
				dt = ((cpu ? thread_cpu_sec() : now_sec()) - t0) / iters;
				printf("# bench: Q4_1 %lldx%lld matmul n=%2d, %d thread%s (%s time), %s: %.1f us, %.1f GFLOP/s\n",
					   (long long) rows, (long long) cols, n, b->n_threads, b->n_threads > 1 ? "s" : "",
					   cpu ? "CPU" : "wall", llm_backend_cpu_impl_name(b),
					   dt * 1e6, 2.0 * rows * cols * n / dt * 1e-9);
			}
			b->ops->destroy(b);
			if (b->n_threads == 1 && threads == 0)
				break;
		}
		free(wq);
		free(wf);
		free(x);
		free(y);
	}
}

int
main(void)
{
	uint64_t	seeds[3] = {12345, 987654321, 0};
	const char *env = getenv("LLM_TEST_SEED");

	seeds[2] = env ? strtoull(env, NULL, 10) : (uint64_t) time(NULL) ^ ((uint64_t) clock() << 20);
	printf("# CPU has AVX2/FMA/F16C: %s, AVX512-VNNI: %s\n", llm_cpu_has_avx2() ? "yes" : "no",
		   llm_cpu_has_avx512vnni() ? "yes" : "no");
	for (int si = 0; si < 3; si++)
	{
		printf("# seed %llu%s\n", (unsigned long long) seeds[si], si == 2 ? " (fresh)" : "");
		rng_state = seeds[si] ? seeds[si] : 1;
		if (si == 0)
		{
			test_fp16();
			test_q4_K_scales();
		}
		for (size_t i = 0; i < N_TYPES; i++)
			test_type(all_types[i], 2);
		test_matmul_multi(si == 0 ? 1 : 2);
		for (int impl = LLM_IMPL_AVX2; impl <= LLM_IMPL_AVX512VNNI; impl++)
		{
			test_packed(LLM_TYPE_Q4_1, impl);
			test_packed(LLM_TYPE_Q8_0, impl);
		}
		test_packed_matmul(LLM_TYPE_Q4_1);
		test_packed_matmul(LLM_TYPE_Q8_0);
		test_elementwise();
		test_row_scan();
		test_attention();
	}
	test_errors();
	rng_state = seeds[2] ? seeds[2] : 1;
	test_oracle();
	if (!getenv("LLM_TEST_NO_BENCH"))
		bench();
	return unit_done();
}
