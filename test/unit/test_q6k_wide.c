/*
 * test_q6k_wide.c — the wide form of packed Q6_K rows with 16 rows in
 * vector lanes (kernels/cpu/quant_q6k_wide.c) against the scalar wide form
 * (quant_kforms.c, the definition) on the GGUF rows, bit for bit:
 *
 *  - every tile shape: 8 .. 48 rows (whole 16-row tiles and a lone group
 *    of 8 at the end), 1 .. 40 tokens (its register blocks of 8 and passes
 *    of 32 tokens, with their tails), at several row and token offsets, for
 *    1, 3 and 12 super-blocks per row;
 *  - extreme values: scales -128 and 127, every 6-bit value including
 *    all-0 and all-63 super-blocks, activation quants of +-127 (the
 *    integer sums at their largest), negative and tiny d;
 *  - the packed kernel's wide tile (quant_q6k_packed.c, which hands short
 *    tiles to the older group kernel) for the same shapes.
 * Counted as skipped on a CPU without AVX512F/VL/BW/VNNI.
 */
#include "unit.h"
#include "kernels/quant_types.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_x86.h"
#include "kernels/cpu/dispatch.h"
#define KERNEL_TEST_BOX_MULLER
#include "kernel_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKS 40

/*
 * Rows: quantized from normal values by the reference quantizer, or (raw)
 * random bytes with extreme scales and whole super-blocks of 6-bit 0 or 63.
 */
static void
make_rows(char *w, int rows, int64_t n, bool raw)
{
	const size_t rb = llm_type_row_bytes(LLM_TYPE_Q6_K, n);
	float	   *x = malloc(sizeof(float) * n);

	for (int r = 0; r < rows; r++)
	{
		if (!raw)
		{
			for (int64_t i = 0; i < n; i++)
				x[i] = rng_normal(0.05f) + (i % 97 == 0 ? 0.3f : 0.0f);
			llm_quantize_row_ref(LLM_TYPE_Q6_K, x, w + r * rb, n);
			continue;
		}
		for (int64_t b = 0; b < n / LLM_QK_K; b++)
		{
			llm_block_q6_K *blk = (llm_block_q6_K *) (w + r * rb) + b;
			int			kind = (int) ((r + b) % 4);

			for (size_t i = 0; i < sizeof(blk->ql); i++)
				blk->ql[i] = kind == 0 ? 0 : kind == 1 ? 0xFF : (uint8_t) rng_next();
			for (size_t i = 0; i < sizeof(blk->qh); i++)
				blk->qh[i] = kind == 0 ? 0 : kind == 1 ? 0xFF : (uint8_t) rng_next();
			for (int j = 0; j < 16; j++)
				blk->scales[j] = (int8_t) (kind < 2 ? ((j + r) % 2 ? -128 : 127) : (int) (rng_next() % 256) - 128);
			blk->d = llm_fp32_to_fp16((rng_next() % 2 ? -1.0f : 1.0f) *
									  (kind == 3 ? 1e-4f : 0.02f) * (1.0f + (float) (rng_next() % 1000) / 1000.0f));
		}
	}
	free(x);
}

/*
 * Activations: the kernel's quantization of normal values (odd tokens with
 * outliers), and for extreme tokens every quant +-127 with its bsums.
 */
static void
make_acts(const llm_qkernel *k, char *a, size_t ab, int toks, int64_t n, bool extreme)
{
	float	   *x = malloc(sizeof(float) * n);

	for (int t = 0; t < toks; t++)
	{
		char	   *row = a + t * ab;

		for (int64_t i = 0; i < n; i++)
			x[i] = rng_normal(1.0f) * (t % 2 && i % 50 == 0 ? 10.0f : 1.0f);
		k->quantize_act(x, row, n);
		if (extreme && t % 3 != 1)
		{
			int8_t	   *q = (int8_t *) row;
			int16_t    *bs = (int16_t *) (llm_act_d(row, n) + n / LLM_QK_K);

			for (int64_t i = 0; i < n; i++)
				q[i] = (int8_t) (t % 3 == 0 ? 127 : (i / 16 + t) % 2 ? 127 : -127);
			for (int64_t s = 0; s < n / 16; s++)
			{
				int			sum = 0;

				for (int i = 0; i < 16; i++)
					sum += q[16 * s + i];
				bs[s] = (int16_t) sum;
			}
		}
	}
	free(x);
}

static bool
same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof(float)) == 0;
}

/*
 * rows x n weights, MAX_TOKS tokens: tile(r0 .. r0+nr, t0 .. t0+nt) of
 * `tile` == the scalar wide form, for every nr (multiple of 8), r0 (step
 * 8 or 16), nt in toks[] and t0 in {0, 3}.
 */
static bool
tiles_match(llm_dot_tile_fn tile, int64_t n, const char *wp, size_t rb, int rows, const char *a, size_t ab,
			const float *ref, const int *toks, int n_toks)
{
	float	   *out = malloc(sizeof(float) * (rows + 1) * MAX_TOKS);
	bool		ok = true;

	for (int nr = 8; nr <= rows; nr += 8)
		for (int r0 = 0; r0 + nr <= rows; r0 += nr >= 24 ? 16 : 8)
			for (int ti = 0; ti < n_toks; ti++)
				for (int t0 = 0; t0 <= 3; t0 += 3)
				{
					int			nt = toks[ti];

					if (t0 + nt > MAX_TOKS)
						continue;
					/* sentinel: lanes past nr must not be written */
					for (int i = 0; i < (nr + 1) * nt; i++)
						out[i] = -1.0f;
					tile(n, wp + r0 * rb, rb, nr, a + t0 * ab, ab, nt, out, (size_t) nr + 1);
					for (int t = 0; t < nt; t++)
						if (!same_bits(out + t * (nr + 1), ref + (t0 + t) * rows + r0, nr) ||
							out[t * (nr + 1) + nr] != -1.0f)
						{
							if (ok)
								printf("# mismatch: n %lld, rows %d..%d, tokens %d..%d, token %d\n",
									   (long long) n, r0, r0 + nr - 1, t0, t0 + nt - 1, t0 + t);
							ok = false;
						}
				}
	free(out);
	return ok;
}

static void
test_case(const llm_qkernel *kp, int64_t n, int rows, bool extreme, const int *toks, int n_toks)
{
	const llm_qkernel *ks = llm_qkernel_kform(llm_qkernel_scalar_get(LLM_TYPE_Q6_K), 8);
	llm_dot_tile_fn swide = NULL,
				pwide = NULL;
	const size_t rb = llm_type_row_bytes(LLM_TYPE_Q6_K, n),
				ab = ks->act_row_bytes(n);
	char	   *w = malloc(rb * rows),
			   *wp = malloc(rb * rows),
			   *a = calloc(MAX_TOKS, ab);
	float	   *ref = malloc(sizeof(float) * rows * MAX_TOKS);
	bool		forms = llm_qkernel_form(ks, &swide) == LLM_ROW_WIDE && llm_qkernel_form(kp, &pwide) == LLM_ROW_WIDE;

	make_rows(w, rows, n, extreme);
	make_acts(ks, a, ab, MAX_TOKS, n, extreme);
	CHECK(forms && kp->repack(w, wp, rows, n), "Q6_K %d x %lld%s: repacked, both kernels have the wide form",
		  rows, (long long) n, extreme ? " (extreme values)" : "");
	swide(n, w, rb, rows, a, ab, MAX_TOKS, ref, rows);
	CHECK(tiles_match(llm_tile_q6_K_x8_wide_avx512, n, wp, rb, rows, a, ab, ref, toks, n_toks),
		  "Q6_K %d x %lld%s: 16-row lanes wide tile == scalar wide form, every tile of 8..%d rows x %d..%d tokens",
		  rows, (long long) n, extreme ? " (extreme values)" : "", rows, toks[0], toks[n_toks - 1]);
	CHECK(tiles_match(pwide, n, wp, rb, rows, a, ab, ref, toks, n_toks),
		  "Q6_K %d x %lld%s: packed kernel's wide tile == scalar wide form, same tiles",
		  rows, (long long) n, extreme ? " (extreme values)" : "");
	free(w);
	free(wp);
	free(a);
	free(ref);
}

int
main(void)
{
	const llm_qkernel *kp = llm_qkernel_packed_get(LLM_TYPE_Q6_K, LLM_IMPL_AVX512VNNI);
	int			all[MAX_TOKS],
				some[] = {1, 3, 4, 7, 8, 9, 16, 17, 31, 32, 33, 40};

	rng_state = 0x2545F4914F6CDD1DULL;
	if (kp == NULL)
	{
		SKIP("Q6_K packed kernel: this CPU lacks AVX512F/VL/BW/VNNI");
		return unit_done();
	}
	for (int i = 0; i < MAX_TOKS; i++)
		all[i] = i + 1;
	test_case(kp, 256, 48, false, all, MAX_TOKS);
	test_case(kp, 256, 40, true, all, MAX_TOKS);
	test_case(kp, 768, 24, false, all, MAX_TOKS);
	test_case(kp, 768, 40, true, some, (int) (sizeof(some) / sizeof(some[0])));
	test_case(kp, 3072, 40, false, some, (int) (sizeof(some) / sizeof(some[0])));
	test_case(kp, 3072, 24, true, some, (int) (sizeof(some) / sizeof(some[0])));
	return unit_done();
}
