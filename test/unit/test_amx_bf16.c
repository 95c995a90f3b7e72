/*
 * test_amx_bf16.c — the encoders' AMX-BF16 F16 matmul (kernels/cpu/amx_bf16.h).
 *
 * - The split of every finite binary16 value into two bfloat16 values is
 *   exact (hi + lo == w) and lo is zero or a normal bfloat16 (AMX reads
 *   bfloat16 subnormals as zero).
 * - llm_amx_gemm against a double-precision dot product of the F16 weights
 *   and the fp32 activations, on every tile shape and tail: rows 1..40
 *   (whole, odd and partial row blocks), tokens 1..37 (whole and partial
 *   token tiles, odd tile counts; 170..172 at K 1536: two super-blocks of
 *   token tiles), K = 32, 64, 384 and 1536 (whole column blocks) and 16,
 *   47, 400 (tails).  Bound, with S = sum |w_k x_k|:
 *   |y - ref| <= (2^-15 + 3 K 2^-24) S: the activation split (2^-17 |x|),
 *   the dropped lo.lo product (2^-16 of a product), and at most 3K fp32
 *   roundings of partial sums each within 2^-24 S.  A kernel missing one of
 *   its cross products is off by about 2^-9 S and fails it.
 * - Batch invariance: every token's outputs computed alone (n = 1) and at
 *   another place (the batch reversed) are bit-identical to the batch's.
 * Counted as skipped, with the reason printed, only where the CPU or the
 * kernel does not allow AMX-BF16 (llm_amx_bf16_usable).
 */
#include "unit.h"
#include "kernels/cpu/amx_bf16.h"
#include "kernels/cpu/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng = 12345;

static float
frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float) ((rng >> 8) & 0xffffff) / (float) 0x1000000 * 2.0f - 1.0f;
}

static float
bf(uint16_t h)
{
	uint32_t	u = (uint32_t) h << 16;
	float		f;

	memcpy(&f, &u, 4);
	return f;
}

static void
test_split(void)
{
	int			bad = 0,
				sub = 0;

	for (uint32_t h = 0; h < 65536; h++)
	{
		uint16_t	hi,
					lo;
		float		w = llm_fp16_to_fp32((uint16_t) h);

		if ((h & 0x7c00) == 0x7c00)
			continue;			/* inf, NaN */
		llm_amx_split_f16((uint16_t) h, &hi, &lo);
		if (bf(hi) + bf(lo) != w || (double) bf(hi) + (double) bf(lo) != (double) w)
			bad++;
		if ((hi & 0x7f80) == 0 && (hi & 0x7f) != 0)
			sub++;
		if ((lo & 0x7f80) == 0 && (lo & 0x7f) != 0)
			sub++;
	}
	CHECK(bad == 0, "every finite binary16 value is hi + lo exactly (%d wrong)", bad);
	CHECK(sub == 0, "no half of a split is a bfloat16 subnormal (%d are)", sub);
}

/* One weight shape: every token count 1..max_n of one activation set. */
static void
test_shape(int64_t rows, int64_t cols, int min_n, int max_n, int *n_bad, int *n_var, double *worst)
{
	size_t		rb = (size_t) cols * 2;
	uint16_t   *w = malloc(rb * rows);
	uint16_t   *packed = aligned_alloc(64, (llm_amx_packed_bytes(rows, cols) + 63) / 64 * 64);
	float	   *x = malloc(sizeof(float) * cols * max_n);
	float	   *xr = malloc(sizeof(float) * cols * max_n);
	uint16_t   *act = aligned_alloc(64, llm_amx_act_bytes(max_n, cols));
	float	   *y = malloc(sizeof(float) * rows * max_n);
	float	   *y1 = malloc(sizeof(float) * rows);
	float	   *yr = malloc(sizeof(float) * rows * max_n);

	for (int64_t i = 0; i < rows * cols; i++)
		w[i] = llm_fp32_to_fp16(frand() * 0.5f);
	/* some tiny weights (binary16 subnormals) */
	for (int64_t i = 0; i < rows * cols; i += 7)
		w[i] = (uint16_t) ((w[i] & 0x8000) | (i % 1023 + 1));
	for (int64_t i = 0; i < cols * max_n; i++)
		x[i] = frand() * 3.0f;
	llm_amx_pack_f16(w, rb, rows, cols, packed);
	for (int n = min_n; n <= max_n; n++)
	{
		int			np = llm_amx_np(n);

		/* the batch */
		llm_amx_split_rows(x, cols, 0, n, act);
		llm_amx_zero_rows(cols, n, np, act);
		llm_amx_gemm(packed, rows, cols, 0, (rows + 15) / 16, act, n, y, (size_t) rows);
		for (int t = 0; t < n; t++)
			for (int64_t r = 0; r < rows; r++)
			{
				double		s = 0,
							a = 0,
							e;

				for (int64_t k = 0; k < cols; k++)
				{
					double		p = (double) llm_fp16_to_fp32(w[r * cols + k]) * x[t * cols + k];

					s += p;
					a += fabs(p);
				}
				e = fabs(y[(size_t) t * rows + r] - s);
				if (e > (ldexp(1, -15) + 3.0 * cols * ldexp(1, -24)) * a)
					(*n_bad)++;
				if (a > 0 && e / a > *worst)
					*worst = e / a;
			}
		/* each token alone, and the batch reversed (each token at another place) */
		for (int t = 0; t < n; t++)
		{
			memcpy(xr + (size_t) (n - 1 - t) * cols, x + (size_t) t * cols, sizeof(float) * cols);
			llm_amx_split_rows(x + (size_t) t * cols, cols, 0, 1, act);
			llm_amx_zero_rows(cols, 1, 16, act);
			llm_amx_gemm(packed, rows, cols, 0, (rows + 15) / 16, act, 1, y1, (size_t) rows);
			if (memcmp(y1, y + (size_t) t * rows, sizeof(float) * rows) != 0)
				(*n_var)++;
		}
		llm_amx_split_rows(xr, cols, 0, n, act);
		llm_amx_zero_rows(cols, n, np, act);
		llm_amx_gemm(packed, rows, cols, 0, (rows + 15) / 16, act, n, yr, (size_t) rows);
		for (int t = 0; t < n; t++)
			if (memcmp(yr + (size_t) (n - 1 - t) * rows, y + (size_t) t * rows, sizeof(float) * rows) != 0)
				(*n_var)++;
	}
	free(w);
	free(packed);
	free(x);
	free(xr);
	free(act);
	free(y);
	free(y1);
	free(yr);
}

/* A range of row blocks on its own (a thread's share) gives the rows' values of the whole call. */
static void
test_row_ranges(void)
{
	const int64_t rows = 72,
				cols = 96;
	const int	n = 19;
	uint16_t   *w = malloc((size_t) rows * cols * 2);
	uint16_t   *packed = aligned_alloc(64, llm_amx_packed_bytes(rows, cols));
	float	   *x = malloc(sizeof(float) * cols * n);
	uint16_t   *act = aligned_alloc(64, llm_amx_act_bytes(n, cols));
	float	   *y = malloc(sizeof(float) * rows * n);
	float	   *y2 = malloc(sizeof(float) * rows * n);

	for (int64_t i = 0; i < rows * cols; i++)
		w[i] = llm_fp32_to_fp16(frand());
	for (int64_t i = 0; i < cols * n; i++)
		x[i] = frand();
	llm_amx_pack_f16(w, (size_t) cols * 2, rows, cols, packed);
	llm_amx_split_rows(x, cols, 0, n, act);
	llm_amx_zero_rows(cols, n, llm_amx_np(n), act);
	llm_amx_gemm(packed, rows, cols, 0, 5, act, n, y, rows);
	llm_amx_gemm(packed, rows, cols, 0, 1, act, n, y2, rows);
	llm_amx_gemm(packed, rows, cols, 1, 4, act, n, y2, rows);
	llm_amx_gemm(packed, rows, cols, 4, 5, act, n, y2, rows);
	CHECK(memcmp(y, y2, sizeof(float) * rows * n) == 0,
		  "row blocks split 1 + 3 + 1 give the bits of one call over 5");
	free(w);
	free(packed);
	free(x);
	free(act);
	free(y);
	free(y2);
}

int
main(void)
{
	char		why[200];
	static const int64_t ks[] = {16, 32, 47, 64, 384, 400, 1536};

	test_split();
	if (!llm_amx_bf16_usable(why, sizeof(why)))
	{
		SKIP("AMX-BF16 matmul: %s", why);
		return unit_done();
	}
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
	{
		int			n_bad = 0,
					n_var = 0;
		double		worst = 0;
		int64_t		rows_list[] = {1, 5, 16, 17, 31, 32, 40};

		for (size_t j = 0; j < sizeof(rows_list) / sizeof(rows_list[0]); j++)
			test_shape(rows_list[j], ks[i], 1, ks[i] >= 1536 ? 18 : 37, &n_bad, &n_var, &worst);
		/* token counts past one super-block of tiles (amx_bf16.c AMX_SUPER_BYTES: 10 tiles at K 1536) */
		if (ks[i] == 1536)
			test_shape(33, ks[i], 170, 172, &n_bad, &n_var, &worst);
		CHECK(n_bad == 0, "K %lld, rows 1..40, tokens 1..%d: within (2^-15 + 3K 2^-24) S of double "
			  "(%d outside; worst %.3g S)", (long long) ks[i], ks[i] >= 1536 ? 18 : 37, n_bad, worst);
		CHECK(n_var == 0, "K %lld: every token's outputs alone and at another place are the batch's bits "
			  "(%d differ)", (long long) ks[i], n_var);
	}
	test_row_ranges();
	return unit_done();
}
