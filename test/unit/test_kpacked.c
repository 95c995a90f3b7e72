/*
 * test_kpacked.c — Q4_K and Q6_K rows repacked in groups of 8 (kernels/cpu/
 * quant_q4k_packed.c, quant_q6k_packed.c) against the scalar row forms (quant_kforms.c, the
 * definition) on the GGUF rows.
 *
 *  - layout: repack refuses row counts that are not a multiple of 8;
 *    unpack(repack(w), row) gives back every GGUF row;
 *  - kernel: for 8, 24 and 40 rows (whole groups, not all a multiple of the
 *    16-row tiles), 1, 4 and 9 super-blocks per row and 1..9 tokens, the
 *    packed one-row tile equals the scalar GEMV form and the packed other
 *    form equals the scalar GEMM form, bit for bit, at every group offset;
 *  - backend: a matmul of 1..17 tokens inside a step whose rows carry
 *    LLM_ROW_GROUPED on some tokens, on 40 rows (repacked) and 44 rows (not
 *    a multiple of 8: GGUF layout), 1 and 2 threads, equals the scalar
 *    backend's; embed of repacked rows equals the dequantized GGUF rows.
 *  - the same three for Q6_K rows repacked in groups of 8
 *    (kernels/cpu/quant_q6k_packed.c), its forms the vec-dot one and the
 *    wide one (LLM_ROW_WIDE);
 *  - the Q6_K kernel of the AVX512-VNNI implementation (GGUF layout) in
 *    both its forms against the scalar ones, tiles of 1..11 tokens.
 * Counted as skipped on a CPU without AVX512F/VL/BW/VNNI.
 */
#include "unit.h"
#include "kernels/backend.h"
#include "kernels/quant_types.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/backend_cpu.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t
rng_next(void)
{
	uint64_t	x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static float
rng_normal(float s)
{
	double		u1 = ((rng_next() >> 11) + 1.0) * 0x1p-53,
				u2 = (rng_next() >> 11) * 0x1p-53;

	return (float) (s * sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
}

static void
random_rows(uint32_t type, char *w, int rows, int64_t n)
{
	size_t		rb = llm_type_row_bytes(type, n);
	float	   *x = malloc(sizeof(float) * n);

	for (int r = 0; r < rows; r++)
	{
		for (int64_t i = 0; i < n; i++)
			x[i] = rng_normal(0.05f) + (i % 97 == 0 ? 0.3f : 0.0f);
		llm_quantize_row_ref(type, x, w + r * rb, n);
	}
	free(x);
}

static bool
same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof(float)) == 0;
}

/*
 * A packed kernel of type `type` (rows in groups of 8) against the scalar
 * row forms of 8-row matrices: "one" is the scalar dot_tile's form,
 * "other" the form selected by `mask` (LLM_ROW_GROUPED for Q4_K: GEMV /
 * GEMM; LLM_ROW_WIDE for Q6_K: vec-dot / wide).
 */
static void
test_layout_and_tiles(const llm_qkernel *kp, uint32_t type, uint8_t mask)
{
	const char *tn = type == LLM_TYPE_Q4_K ? "Q4_K" : "Q6_K";
	const llm_qkernel *ks = llm_qkernel_kform(llm_qkernel_scalar_get(type), 8);
	llm_dot_tile_fn sgemm,
				pgemm;
	const int64_t lens[] = {256, 1024, 2304};
	const int	row_counts[] = {8, 24, 40};
	const int	toks = 9;

	CHECK(llm_qkernel_form(ks, &sgemm) == mask && sgemm != NULL,
		  "scalar %s kernel of 8-row matrices has its other form", tn);
	CHECK(llm_qkernel_form(kp, &pgemm) == mask && pgemm != NULL && kp->row_group == 8 && kp->dot == NULL,
		  "packed %s kernel: groups of 8 rows, its own other form", tn);
	{
		size_t		rb = llm_type_row_bytes(type, 256);
		char	   *src = calloc(12, rb),
				   *dst = calloc(12, rb);

		CHECK(!kp->repack(src, dst, 12, 256) && !kp->repack(src, dst, 4, 256),
			  "packed %s: 12 and 4 rows (not a multiple of 8) refused", tn);
		free(src);
		free(dst);
	}
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
		for (size_t ri = 0; ri < sizeof(row_counts) / sizeof(row_counts[0]); ri++)
		{
			const int64_t n = lens[li];
			const int	rows = row_counts[ri];
			size_t		rb = llm_type_row_bytes(type, n),
						ab = ks->act_row_bytes(n);
			char	   *w = malloc(rb * rows),
					   *wp = malloc(rb * rows),
					   *back = malloc(rb),
					   *a = malloc(ab * toks);
			float	   *x = malloc(sizeof(float) * n),
					   *ref_v = malloc(sizeof(float) * rows * toks),
					   *ref_m = malloc(sizeof(float) * rows * toks),
					   *out = malloc(sizeof(float) * rows * toks);
			bool		round_trip,
						gemv_same = true,
						gemm_same = true,
						differ = false;

			random_rows(type, w, rows, n);
			round_trip = kp->repack(w, wp, rows, n);
			for (int r = 0; r < rows && round_trip; r++)
			{
				kp->unpack(wp, r, back, n);
				if (memcmp(back, w + r * rb, rb) != 0)
					round_trip = false;
			}
			CHECK(round_trip, "packed %s %d x %lld: unpack(repack(w), row) == row", tn, rows, (long long) n);
			for (int t = 0; t < toks; t++)
			{
				for (int64_t i = 0; i < n; i++)
					x[i] = rng_normal(1.0f) * (i % 50 == 0 ? 10.0f : 1.0f);
				ks->quantize_act(x, a + t * ab, n);
			}
			/* scalar forms over the GGUF rows: out[t * rows + r] */
			ks->dot_tile(n, w, rb, rows, a, ab, toks, ref_v, rows);
			sgemm(n, w, rb, rows, a, ab, toks, ref_m, rows);
			for (int i = 0; i < rows * toks; i++)
				if (memcmp(&ref_v[i], &ref_m[i], sizeof(float)) != 0)
					differ = true;
			for (int nr = 8; nr <= rows; nr += 8)
				for (int r0 = 0; r0 + nr <= rows; r0 += 8)
					for (int nt = 1; nt <= toks; nt++)
						for (int t0 = 0; t0 + nt <= toks; t0 += 4)
						{
							kp->dot_tile(n, wp + r0 * rb, rb, nr, a + t0 * ab, ab, nt, out, (size_t) nr);
							for (int t = 0; t < nt; t++)
								if (!same_bits(out + t * nr, ref_v + (t0 + t) * rows + r0, nr))
									gemv_same = false;
							pgemm(n, wp + r0 * rb, rb, nr, a + t0 * ab, ab, nt, out, (size_t) nr);
							for (int t = 0; t < nt; t++)
								if (!same_bits(out + t * nr, ref_m + (t0 + t) * rows + r0, nr))
									gemm_same = false;
						}
			CHECK(gemv_same, "packed %s %d x %lld: every tile of 1..%d tokens == scalar %s form",
				  tn, rows, (long long) n, toks, type == LLM_TYPE_Q4_K ? "GEMV" : "vec-dot");
			CHECK(gemm_same, "packed %s %d x %lld: every tile of 1..%d tokens == scalar %s form",
				  tn, rows, (long long) n, toks, type == LLM_TYPE_Q4_K ? "GEMM" : "wide");
			CHECK(differ, "%s %d x %lld: the two forms differ somewhere on these data (the checks can tell them apart)",
				  tn, rows, (long long) n);
			free(w);
			free(wp);
			free(back);
			free(a);
			free(x);
			free(ref_v);
			free(ref_m);
			free(out);
		}
}

/*
 * The Q6_K kernel of the AVX512-VNNI implementation (GGUF layout): its
 * vec-dot and wide forms equal the scalar ones for every tile of 1..5 rows
 * and 1..11 tokens (the tiles run 8 tokens at a time).
 */
static void
test_q6_K_vnni(void)
{
	const llm_qkernel *ks = llm_qkernel_kform(llm_qkernel_scalar_get(LLM_TYPE_Q6_K), 8),
			   *kv = llm_qkernel_get(LLM_TYPE_Q6_K, LLM_IMPL_AVX512VNNI);
	llm_dot_tile_fn swide,
				vwide;
	const int64_t n = 768;
	const int	rows = 5,
				toks = 11;
	size_t		rb = llm_type_row_bytes(LLM_TYPE_Q6_K, n),
				ab;
	char	   *w,
			   *a;
	float	   *x,
				ref[2][11 * 5],
				out[11 * 5];
	bool		same[2] = {true, true};

	if (kv == NULL || strcmp(kv->impl, "avx512vnni") != 0)
	{
		SKIP("Q6_K AVX512-VNNI kernel: not on this CPU");
		return;
	}
	kv = llm_qkernel_kform(kv, 8);
	CHECK(llm_qkernel_form(ks, &swide) == LLM_ROW_WIDE && llm_qkernel_form(kv, &vwide) == LLM_ROW_WIDE,
		  "Q6_K scalar and AVX512-VNNI kernels have the wide form");
	ab = ks->act_row_bytes(n);
	w = malloc(rb * rows);
	a = malloc(ab * toks);
	x = malloc(sizeof(float) * n);
	for (int r = 0; r < rows; r++)
	{
		for (int64_t i = 0; i < n; i++)
			x[i] = rng_normal(0.05f) + (i % 97 == 0 ? 0.3f : 0.0f);
		llm_quantize_row_ref(LLM_TYPE_Q6_K, x, w + r * rb, n);
	}
	for (int t = 0; t < toks; t++)
	{
		for (int64_t i = 0; i < n; i++)
			x[i] = rng_normal(1.0f) * (i % 50 == 0 ? 10.0f : 1.0f);
		ks->quantize_act(x, a + t * ab, n);
	}
	ks->dot_tile(n, w, rb, rows, a, ab, toks, ref[0], rows);
	swide(n, w, rb, rows, a, ab, toks, ref[1], rows);
	for (int f = 0; f < 2; f++)
		for (int nr = 1; nr <= rows; nr++)
			for (int nt = 1; nt <= toks; nt++)
				for (int t0 = 0; t0 + nt <= toks; t0 += 5)
				{
					(f == 0 ? kv->dot_tile : vwide) (n, w, rb, nr, a + t0 * ab, ab, nt, out, (size_t) nr);
					for (int t = 0; t < nt; t++)
						if (!same_bits(out + t * nr, ref[f] + (t0 + t) * rows, nr))
							same[f] = false;
				}
	for (int r = 0; r < rows; r++)
	{
		float		d = kv->dot(n, w + r * rb, a);

		if (memcmp(&d, &ref[0][r], sizeof(float)) != 0)
			same[0] = false;
	}
	CHECK(same[0], "Q6_K AVX512-VNNI vec-dot form: dot and every tile of 1..%d rows x 1..%d tokens == scalar",
		  rows, toks);
	CHECK(same[1], "Q6_K AVX512-VNNI wide form: every tile of 1..%d rows x 1..%d tokens == scalar", rows, toks);
	free(w);
	free(a);
	free(x);
}

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

/* A step of n tokens of one sequence whose rows carry forms[] (only the matmul reads them). */
static int
begin(llm_backend *b, int n, const uint8_t *forms)
{
	static int32_t ids[32],
				pos[32],
				slots[32],
				bt[1] = {0};
	int32_t		seq_start[2] = {0, n},
				kv_len[1] = {n};
	llm_step_desc d = {n, 1, ids, pos, slots, seq_start, kv_len, bt, 1, NULL, 0, NULL, NULL, NULL, forms};

	for (int i = 0; i < n; i++)
	{
		ids[i] = i % 8;
		pos[i] = slots[i] = i;
	}
	return b->ops->begin_step(b, &d);
}

static void
test_backend(uint32_t type, int rows)
{
	const char *tn = type == LLM_TYPE_Q4_K ? "Q4_K" : "Q6_K";
	const uint8_t other = type == LLM_TYPE_Q4_K ? LLM_ROW_GROUPED : LLM_ROW_WIDE;
	const int64_t cols = 1024;
	const int	max_t = 17;
	const int	ntoks[] = {1, 2, 3, 4, 5, 9, 17};
	size_t		rb = llm_type_row_bytes(type, cols);
	char	   *wq = malloc(rb * rows);
	float	   *x = malloc(sizeof(float) * max_t * cols),
			   *ref = malloc(sizeof(float) * max_t * rows),
			   *y = malloc(sizeof(float) * max_t * rows),
			   *row = malloc(sizeof(float) * cols);
	uint8_t		forms[17];
	llm_weight	host = {type, rows, cols, rb, wq, NULL},
				w;

	random_rows(type, wq, rows, cols);
	for (int64_t i = 0; i < max_t * cols; i++)
		x[i] = rng_normal(1.0f) * (i % 61 == 0 ? 8.0f : 1.0f);
	/* a prompt's first tokens grouped, the rest one-row, as llama.cpp's P - P % 4 */
	for (int i = 0; i < max_t; i++)
		forms[i] = (i % 7) < 4 ? other : 0;
	for (int threads = 1; threads <= 2; threads++)
	{
		llm_backend *bs = make_backend(threads, LLM_IMPL_SCALAR),
				   *b = make_backend(threads, LLM_IMPL_AVX512VNNI);
		bool		same = true,
					emb_ok = true,
					packed;

		llm_kv_geometry g = {1, 1, 16, 32, 1, LLM_KV_F16, NULL, 0, 0};

		if (b == NULL)
		{
			SKIP("%s packed matmul: AVX512-VNNI not on this CPU", tn);
			bs->ops->destroy(bs);
			continue;
		}
		if (bs->ops->kv_init(bs, &g) != 0 || b->ops->kv_init(b, &g) != 0)
			printf("# kv_init: %s %s\n", bs->ops->last_error(bs), b->ops->last_error(b));
		b->ops->load_weight(b, &host, &w);
		packed = w.backend_priv != NULL && w.backend_priv == llm_qkernel_packed_get(type, LLM_IMPL_AVX512VNNI);
		llm_weight	ws;

		bs->ops->load_weight(bs, &host, &ws);
		for (size_t k = 0; k < sizeof(ntoks) / sizeof(ntoks[0]); k++)
		{
			if (begin(bs, ntoks[k], forms) != 0 || bs->ops->matmul(bs, &ws, x, ref, ntoks[k]) != 0 ||
				begin(b, ntoks[k], forms) != 0 || b->ops->matmul(b, &w, x, y, ntoks[k]) != 0 ||
				!same_bits(y, ref, (size_t) ntoks[k] * rows))
				same = false;
		}
		{
			float	   *e = malloc(sizeof(float) * 8 * cols);

			if (begin(b, 8, NULL) != 0 || b->ops->embed(b, &w, e) != 0)
				emb_ok = false;
			for (int i = 0; i < 8 && emb_ok; i++)
			{
				llm_dequantize_row(type, wq + (i % 8) * rb, row, cols);
				if (!same_bits(row, e + i * cols, (size_t) cols))
					emb_ok = false;
			}
			free(e);
		}
		CHECK(packed == (rows % 8 == 0), "%s %d rows: %s", tn, rows,
			  rows % 8 == 0 ? "repacked at load" : "kept in GGUF layout");
		CHECK(same && emb_ok, "%s %d x %lld (%s, %d threads): matmul of 1..17 tokens with %s and "
			  "one-row tokens == scalar backend; embed of its rows exact", tn, rows, (long long) cols,
			  packed ? "repacked" : "GGUF layout", threads, type == LLM_TYPE_Q4_K ? "grouped" : "wide");
		b->ops->destroy(b);
		bs->ops->destroy(bs);
	}
	free(wq);
	free(x);
	free(ref);
	free(y);
	free(row);
}

int
main(void)
{
	const llm_qkernel *kp = llm_qkernel_packed_get(LLM_TYPE_Q4_K, LLM_IMPL_AVX512VNNI);

	const llm_qkernel *kp6 = llm_qkernel_packed_get(LLM_TYPE_Q6_K, LLM_IMPL_AVX512VNNI);

	if (kp == NULL)
		SKIP("Q4_K packed kernel: this CPU lacks AVX512F/VL/BW/VNNI");
	else
		test_layout_and_tiles(kp, LLM_TYPE_Q4_K, LLM_ROW_GROUPED);
	if (kp6 == NULL)
		SKIP("Q6_K packed kernel: this CPU lacks AVX512F/VL/BW/VNNI");
	else
		test_layout_and_tiles(kp6, LLM_TYPE_Q6_K, LLM_ROW_WIDE);
	test_q6_K_vnni();
	test_backend(LLM_TYPE_Q4_K, 40);
	test_backend(LLM_TYPE_Q4_K, 44);
	test_backend(LLM_TYPE_Q6_K, 40);
	test_backend(LLM_TYPE_Q6_K, 44);
	return unit_done();
}
