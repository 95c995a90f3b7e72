/*
 * test_kernels_types.c — the matmul kernels of the Q4_K_M mix (Q4_K, Q5_K,
 * Q6_K and the Q5_0 / Q8_0 fallbacks of rows that are not a multiple of
 * 256) and of the other weight types of quant_more.h (Q5_1, Q2_K, Q3_K,
 * IQ4_NL, IQ4_XS), on random blocks (random bytes, finite random fp16
 * scales):
 *  - each type's activations are those llama.cpp pairs it with (Q8_K for
 *    the K-quants and IQ4_XS, Q8_0 for Q5_0 / Q8_0 / IQ4_NL, Q8_1 for Q5_1);
 *  - AVX2 and AVX512-VNNI kernels bit-identical to the scalar one: the
 *    activation rows byte for byte, the single dot product, and every tile
 *    shape (1-4 rows x 1-8 tokens);
 *  - the backend's matmul (threads 2, the tile and batch paths) with each
 *    implementation, for 17 tokens and for 1: every output bit-identical
 *    to the scalar dot product, and within the activation-quantization
 *    bound of a double-precision product of the dequantized weights and the
 *    unquantized activations (the bound of test_kernels.c).
 * Seeds: two fixed and one fresh (LLM_TEST_SEED reruns one).
 */
#include "unit.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/quant_types.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/backend_cpu.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct type_case
{
	uint32_t	type;
	uint32_t	act_type;		/* llama.cpp's vec_dot_type */
	int			half_off[2];	/* fp16 fields of a block (-1: none) */
	const char *ggml_dot;		/* ggml_vec_dot_<this> of the oracle library */
} type_case;

static const type_case cases[] = {
	{LLM_TYPE_Q4_K, LLM_TYPE_Q8_K, {0, 2}, "q4_K_q8_K"},
	{LLM_TYPE_Q5_K, LLM_TYPE_Q8_K, {0, 2}, "q5_K_q8_K"},
	{LLM_TYPE_Q6_K, LLM_TYPE_Q8_K, {208, -1}, "q6_K_q8_K"},
	{LLM_TYPE_Q5_0, LLM_TYPE_Q8_0, {0, -1}, "q5_0_q8_0"},
	{LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, {0, -1}, "q8_0_q8_0"},
	{LLM_TYPE_Q5_1, LLM_TYPE_Q8_1, {0, 2}, "q5_1_q8_1"},
	{LLM_TYPE_Q2_K, LLM_TYPE_Q8_K, {80, 82}, "q2_K_q8_K"},
	{LLM_TYPE_Q3_K, LLM_TYPE_Q8_K, {108, -1}, "q3_K_q8_K"},
	{LLM_TYPE_IQ4_NL, LLM_TYPE_Q8_0, {0, -1}, "iq4_nl_q8_0"},
	{LLM_TYPE_IQ4_XS, LLM_TYPE_Q8_K, {0, -1}, "iq4_xs_q8_K"},
};

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
	if (llm_backend_cpu_set_impl(b, impl) != 0)
	{
		b->ops->destroy(b);
		return NULL;
	}
	return b;
}

/* Random blocks: random bytes, each fp16 field a finite half of magnitude 2^-12 .. 2^-4. */
static void
random_blocks(const type_case *c, uint8_t *dst, size_t bytes)
{
	const llm_type_info *ti = llm_type_get(c->type);

	for (size_t i = 0; i < bytes; i++)
		dst[i] = (uint8_t) (rng_next() >> 56);
	for (size_t b = 0; b < bytes / ti->block_bytes; b++)
		for (int k = 0; k < 2; k++)
			if (c->half_off[k] >= 0)
			{
				float		v = exp2f((float) (-12 + 8 * rng_unit())) * (rng_unit() < 0.5 ? -1 : 1);
				uint16_t	h = llm_fp32_to_fp16(v);

				memcpy(dst + b * ti->block_bytes + c->half_off[k], &h, 2);
			}
}

/* test_kernels.c's bound: activation rounding amax/254 per block, fp16 scales, fp32 sums. */
static double
error_bound(const type_case *c, const float *w, const float *x, int64_t n, const void *wrow)
{
	int			blk = c->act_type == LLM_TYPE_Q8_K ? 256 : 32;
	double		bound = 0,
				absprod = 0;

	for (int64_t i = 0; i < n; i++)
		absprod += fabs((double) w[i] * x[i]);
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
		if (c->type == LLM_TYPE_Q5_1)
		{
			uint16_t	m;

			memcpy(&m, (const uint8_t *) wrow + b * 24 + 2, 2);
			bound += fabs(llm_fp16_to_fp32(m)) * (fabs(sum) + amax) * 0x1p-10;
		}
	}
	return bound * 1.01 + 1e-5 * absprod + 1e-6;
}

static void
test_case(const type_case *c)
{
	const llm_type_info *ti = llm_type_get(c->type);
	const int64_t cols = 512,
				rows = 37;
	const int	nt = 17;
	size_t		rb = llm_type_row_bytes(c->type, cols);
	uint8_t    *wq = malloc(rb * rows);
	float	   *wd = malloc(sizeof(float) * rows * cols);
	float	   *x = malloc(sizeof(float) * nt * cols);
	float	   *ref = malloc(sizeof(float) * nt * rows);
	float	   *y = malloc(sizeof(float) * nt * rows);
	const llm_qkernel *ks = llm_qkernel_get(c->type, LLM_IMPL_SCALAR);
	size_t		ab;
	char	   *as;

	if (!CHECK(ks != NULL && ks->act_type == c->act_type,
			   "%s: scalar kernel with %s activations", ti->name, llm_type_get(c->act_type)->name))
		return;
	random_blocks(c, wq, rb * rows);
	for (int64_t r = 0; r < rows; r++)
		llm_dequantize_row(c->type, wq + r * rb, wd + r * cols, cols);
	for (int64_t i = 0; i < nt * cols; i++)
		x[i] = rng_normal(1.0f) * (i % 61 == 0 ? 8.0f : 1.0f);
	ab = ks->act_row_bytes(cols);
	as = calloc(nt, ab);
	for (int t = 0; t < nt; t++)
	{
		ks->quantize_act(x + t * cols, as + t * ab, cols);
		for (int64_t r = 0; r < rows; r++)
			ref[t * rows + r] = ks->dot(cols, wq + r * rb, as + t * ab);
	}

	/* the scalar dot vs the double reference */
	{
		double		worst = 0;
		bool		ok = true;

		for (int t = 0; t < nt; t++)
			for (int64_t r = 0; r < rows; r++)
			{
				double		exact = 0,
							bound,
							err;

				for (int64_t i = 0; i < cols; i++)
					exact += (double) wd[r * cols + i] * x[t * cols + i];
				bound = error_bound(c, wd + r * cols, x + t * cols, cols, wq + r * rb);
				err = fabs(ref[t * rows + r] - exact);
				worst = fmax(worst, err / bound);
				ok &= err <= bound;
			}
		CHECK(ok, "%s: dot products within the activation-quantization bound of the double "
			  "reference (worst err/bound %.3f)", ti->name, worst);
	}

	for (int impl = LLM_IMPL_SCALAR; impl <= LLM_IMPL_AVX512VNNI; impl++)
	{
		const llm_qkernel *k = llm_qkernel_get(c->type, impl);
		const char *iname = impl == LLM_IMPL_SCALAR ? "scalar" : impl == LLM_IMPL_AVX2 ? "AVX2" : "AVX512-VNNI";
		char	   *av;
		int			adiff = 0,
					ddiff = 0,
					tdiff = 0,
					mdiff = 0;
		llm_backend *b;
		llm_weight	host = {c->type, rows, cols, rb, wq, NULL},
					w;

		if (k == NULL)
		{
			SKIP("%s: %s kernels: this CPU lacks the instructions", ti->name, iname);
			continue;
		}
		CHECK(k->act_type == c->act_type && k->act_row_bytes(cols) == ab,
			  "%s: %s kernel (%s) takes the same activation rows", ti->name, iname, k->impl);
		av = calloc(nt, ab);
		for (int t = 0; t < nt; t++)
		{
			k->quantize_act(x + t * cols, av + t * ab, cols);
			adiff += memcmp(av + t * ab, as + t * ab, ab) != 0;
			if (k->dot != NULL)
				for (int64_t r = 0; r < rows; r++)
				{
					float		d = k->dot(cols, wq + r * rb, as + t * ab);

					ddiff += memcmp(&d, &ref[t * rows + r], 4) != 0;
				}
		}
		for (int nr = 1; nr <= 4; nr++)
			for (int ntile = 1; ntile <= 8; ntile++)
			{
				float		out[4 * 8];

				k->dot_tile(cols, wq + 3 * rb, rb, nr, as + 5 * ab, ab, ntile, out, 4);
				for (int t = 0; t < ntile; t++)
					for (int r = 0; r < nr; r++)
						tdiff += memcmp(&out[t * 4 + r], &ref[(5 + t) * rows + 3 + r], 4) != 0;
			}
		CHECK(adiff == 0, "%s: %s activation rows byte-identical to scalar (%d differ)", ti->name, iname, adiff);
		CHECK(ddiff == 0, "%s: %s dot products bit-identical to scalar (%d differ)", ti->name, iname, ddiff);
		CHECK(tdiff == 0, "%s: every %s tile shape (1-4 rows x 1-8 tokens) bit-identical to the scalar dot "
			  "(%d differ)", ti->name, iname, tdiff);

		/* through the backend: batched (17 tokens, the tile and batch paths) and one token */
		b = make_backend(2, impl);
		if (CHECK(b != NULL && b->ops->load_weight(b, &host, &w) == 0, "%s: %s backend loads the weight",
				  ti->name, iname))
		{
			CHECK(b->ops->matmul(b, &w, x, y, nt) == 0, "%s: %s matmul of %d tokens", ti->name, iname, nt);
			for (int i = 0; i < nt * rows; i++)
				mdiff += memcmp(&y[i], &ref[i], 4) != 0;
			CHECK(mdiff == 0, "%s: %s matmul of %d tokens bit-identical to the scalar dot (%d differ)",
				  ti->name, iname, nt, mdiff);
			mdiff = 0;
			for (int t = 0; t < nt; t += 5)
			{
				b->ops->matmul(b, &w, x + t * cols, y, 1);
				for (int r = 0; r < rows; r++)
					mdiff += memcmp(&y[r], &ref[t * rows + r], 4) != 0;
			}
			CHECK(mdiff == 0, "%s: %s matmul of one token bit-identical to the scalar dot (%d differ)",
				  ti->name, iname, mdiff);
			b->ops->free_weight(b, &w);
		}
		if (b)
			b->ops->destroy(b);
		free(av);
	}
	free(as);
	free(wq);
	free(wd);
	free(x);
	free(ref);
	free(y);
}

typedef void (*ggml_quant_fn) (const float *x, void *y, int64_t k);
typedef void (*ggml_dot_fn) (int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by, int nrc);

/* The oracle library's quantizer and dot product for c, compared on rows of n elements. */
static void
test_oracle(void *cpu, const type_case *c, int64_t n)
{
	const llm_type_info *ti = llm_type_get(c->type);
	char		name[64];
	const char *qname = c->act_type == LLM_TYPE_Q8_K ? "quantize_row_q8_K" :
		c->act_type == LLM_TYPE_Q8_1 ? "quantize_row_q8_1" : "quantize_row_q8_0";
	int			blk = c->act_type == LLM_TYPE_Q8_K ? 256 : 32;
	int			blk_bytes = c->act_type == LLM_TYPE_Q8_K ? 292 : c->act_type == LLM_TYPE_Q8_1 ? 36 : 34;
	int			qs_off = c->act_type == LLM_TYPE_Q8_K || c->act_type == LLM_TYPE_Q8_1 ? 4 : 2;
	ggml_quant_fn gq = (ggml_quant_fn) dlsym(cpu, qname);
	ggml_dot_fn gd;
	const llm_qkernel *k = llm_qkernel_get(c->type, LLM_IMPL_SCALAR);
	size_t		rb = llm_type_row_bytes(c->type, n);
	uint8_t    *w;
	float	   *x;
	char	   *ga,
			   *ma;
	int			qdiff = 0,
				ddiff = 0,
				total = 0;

	if (rb == 0)
		return;
	snprintf(name, sizeof name, "ggml_vec_dot_%s", c->ggml_dot);
	gd = (ggml_dot_fn) dlsym(cpu, name);
	if (!CHECK(gq != NULL && gd != NULL, "oracle library exports %s and %s", qname, name))
		return;
	w = malloc(rb);
	x = malloc(sizeof(float) * n);
	ga = malloc((size_t) (n / blk) * blk_bytes);
	ma = malloc(k->act_row_bytes(n));
	for (int it = 0; it < 64; it++)
	{
		random_blocks(c, w, rb);
		for (int64_t i = 0; i < n; i++)
			x[i] = rng_normal(1.0f) * (i % 50 == 0 ? 10.0f : 1.0f);
		gq(x, ga, n);
		k->quantize_act(x, ma, n);
		for (int64_t b = 0; b < n / blk; b++)
			qdiff += memcmp(ga + b * blk_bytes + qs_off, ma + b * blk, (size_t) blk) != 0;
		for (int impl = LLM_IMPL_SCALAR; impl <= LLM_IMPL_AVX512VNNI; impl++)
		{
			const llm_qkernel *kv = llm_qkernel_get(c->type, impl);
			float		s_ggml,
						s_ours;

			if (kv == NULL || kv->dot == NULL)
				continue;
			s_ours = kv->dot(n, w, ma);
			gd((int) n, &s_ggml, 0, w, 0, ga, 0, 1);
			total++;
			ddiff += memcmp(&s_ggml, &s_ours, 4) != 0;
		}
	}
	CHECK(qdiff == 0 && ddiff == 0, "%s, rows of %lld: bit-identical to llama.cpp's %s + %s "
		  "(%d activation blocks, %d of %d dots differ)", ti->name, (long long) n, qname, name,
		  qdiff, ddiff, total);
	free(w);
	free(x);
	free(ga);
	free(ma);
}

static void *
oracle_cpu_library(void)
{
	char		path[1024];
	void	   *cpu = oracle_open_lib(oracle_lib_dir(path, sizeof(path)), NULL);
	void		(*cpu_init) (void);

	cpu_init = cpu ? (void (*) (void)) dlsym(cpu, "ggml_cpu_init") : NULL;
	if (cpu_init == NULL)
		return NULL;
	cpu_init();
	return cpu;
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
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			test_case(&cases[i]);
	}
	{
		void	   *cpu = oracle_cpu_library();

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		{
			if (cpu == NULL)
			{
				SKIP("%s: llama.cpp oracle comparison: no llama.cpp CPU library (LLM_ORACLE_LIB_DIR)",
					 llm_type_get(cases[i].type)->name);
				continue;
			}
			test_oracle(cpu, &cases[i], 512);
			test_oracle(cpu, &cases[i], 1568);
		}
	}
	return unit_done();
}
