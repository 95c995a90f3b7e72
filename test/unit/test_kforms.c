/*
 * test_kforms.c — the row forms of the Q4_K and Q6_K kernels (kernels/cpu/
 * quant.h "Row forms", quant_kforms.c) against llama.cpp's arithmetic.
 *
 * Random Q4_K and Q6_K rows (the reference quantizer on normal values, one
 * outlier in 97) and random activations, for two fixed seeds and a fresh
 * one (printed; rerun with LLM_TEST_SEED=<seed>):
 *  - every implementation this CPU runs (scalar, AVX2, AVX512-VNNI) gives the same bits,
 *    each form on its own: Q4_K of 8-row matrices one-row (GEMV) and
 *    grouped (GEMM) form, Q4_K of other row counts and Q6_K vec-dot and
 *    wide (tiled) form;
 *  - the forms are what llama.cpp computes (library present: LLM_ORACLE_LIB_DIR,
 *    default ~/.cache/pg_llm/llama.cpp-build/bin; otherwise one SKIP per
 *    check): Q4_K rows interleaved as block_q4_Kx8 through its
 *    ggml::cpu::repack::gemv / gemm <block_q4_K, 8, 8, Q8_K> with
 *    quantize_row_q8_K / ggml_quantize_mat_t<8, Q8_K> activations, bit for
 *    bit; Q4_K (not repacked) and Q6_K through its public ggml_mul_mat on
 *    the CPU (8 tokens: the tiled matmul; 3 tokens: ggml_vec_dot_*_q8_K),
 *    bit for bit;
 *  - Q3_K, Q5_K and IQ4_XS (random blocks with scales in a normal range):
 *    every implementation bit-identical to the scalar vec-dot and wide
 *    forms, and those forms bit-identical to llama.cpp's ggml_mul_mat of 3
 *    tokens (ggml_vec_dot_*_q8_K) and of 8 tokens (the tiled matmul);
 *  - IQ4_NL of 8 rows (repacked by llama.cpp): every implementation
 *    bit-identical, and equal to its ggml_gemv_iq4_nl_8x8_q8_0 and
 *    ggml_gemm_iq4_nl_8x8_q8_0 on the rows interleaved as block_iq4_nlx8;
 *  - Q2_K of 8 rows (repacked by its AVX-512 build): GEMV and GEMM forms,
 *    every implementation bit-identical, equal to its
 *    ggml_gemv_q2_K_8x8_q8_K and ggml_gemm_q2_K_8x8_q8_K (block_q2_Kx8);
 *  - the CPU backend's matmul with each implementation forced
 *    (llm_backend_cpu_set_impl), over tokens of mixed row forms: each
 *    token's row is the scalar kernel of its form, and a
 *    LLM_ROW_TAIL_ALONE token's the one-row form after tail_rows;
 *  - the forms differ from each other on these data (so the comparisons
 *    above can tell them apart).
 */
#define KERNEL_TEST_BOX_MULLER
#include "unit.h"
#include "kernel_test_util.h"
#include "kernels/quant_types.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_more.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/backend_cpu.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COLS 1024				/* 4 super-blocks */
#define ROWS 8
#define TOKS 8

typedef struct data
{
	uint32_t	type;
	size_t		row_bytes;
	char	   *w;				/* ROWS GGUF rows */
	float		x[TOKS * COLS];
	char	   *act;			/* TOKS quantized rows of act_row bytes */
	size_t		act_row;
} data;

static void
make_data(data *d, uint32_t type, const llm_qkernel *k)
{
	float	   *wf = malloc(sizeof(float) * ROWS * COLS);

	d->type = type;
	d->row_bytes = llm_type_row_bytes(type, COLS);
	d->w = malloc(d->row_bytes * ROWS);
	for (int i = 0; i < ROWS * COLS; i++)
		wf[i] = rng_normal(0.05f) + (i % 97 == 0 ? 0.3f : 0.0f);
	for (int r = 0; r < ROWS; r++)
		llm_quantize_row_ref(type, wf + (size_t) r * COLS, d->w + d->row_bytes * r, COLS);
	for (int i = 0; i < TOKS * COLS; i++)
		d->x[i] = rng_normal(1.0f) + (i % 113 == 0 ? 4.0f : 0.0f);
	d->act_row = k->act_row_bytes(COLS);
	d->act = aligned_alloc(64, d->act_row * TOKS);
	for (int t = 0; t < TOKS; t++)
		k->quantize_act(d->x + (size_t) t * COLS, d->act + d->act_row * t, COLS);
	free(wf);
}

static void
free_data(data *d)
{
	free(d->w);
	free(d->act);
}

/* out[t][r] through k's tile (form false) or its other form (true). */
static void
run(const llm_qkernel *k, bool form, const data *d, float *out)
{
	llm_dot_tile_fn tile = k->dot_tile;

	if (form)
		llm_qkernel_form(k, &tile);
	tile(COLS, d->w, d->row_bytes, ROWS, d->act, d->act_row, TOKS, out, ROWS);
}

/* ---- llama.cpp ---- */

typedef void (*gemx_fn) (int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
typedef void (*qrow_fn) (const float *x, void *y, int64_t k);
typedef void (*qmat_fn) (const float *x, void *y, int64_t nrow, int64_t n_per_row);

struct ggml_init_params_c
{
	size_t		mem_size;
	void	   *mem_buffer;
	bool		no_alloc;
};

typedef struct oracle
{
	void	   *base,
			   *cpu;
	gemx_fn		gemv_q4_K,
				gemm_q4_K;
	qrow_fn		quantize_row_q8_K;
	qmat_fn		quantize_mat_q8_K;
	gemx_fn		gemv_iq4_nl,
				gemm_iq4_nl,
				gemv_q2_K,
				gemm_q2_K;
	qrow_fn		quantize_row_q8_0;
	qmat_fn		quantize_mat_q8_0;
	void	   *(*init) (struct ggml_init_params_c);
	void		(*free) (void *);
	void	   *(*new_tensor_2d) (void *, int, int64_t, int64_t);
	void	   *(*mul_mat) (void *, void *, void *);
	void	   *(*new_graph) (void *);
	void		(*build_forward_expand) (void *, void *);
	int			(*compute) (void *, void *, int);
	void	   *(*get_data) (void *);
} oracle;

static bool
oracle_open(oracle *o)
{
	char		path[1024];
	const char *dir = oracle_lib_dir(path, sizeof(path));
	void		(*cpu_init) (void);

	memset(o, 0, sizeof(*o));
	o->cpu = oracle_open_lib(dir, &o->base);
	if (o->cpu == NULL)
	{
		printf("# no llama.cpp CPU library in %s\n", dir);
		return false;
	}
	cpu_init = (void (*) (void)) dlsym(o->cpu, "ggml_cpu_init");
	o->gemv_q4_K = (gemx_fn) dlsym(o->cpu, "_ZN4ggml3cpu6repack4gemvI10block_q4_KLl8ELl8EL9ggml_type15EEEviPfmPKvS7_ii");
	o->gemm_q4_K = (gemx_fn) dlsym(o->cpu, "_ZN4ggml3cpu6repack4gemmI10block_q4_KLl8ELl8EL9ggml_type15EEEviPfmPKvS7_ii");
	o->quantize_row_q8_K = (qrow_fn) dlsym(o->cpu, "quantize_row_q8_K");
	o->quantize_mat_q8_K = (qmat_fn) dlsym(o->cpu, "_Z19ggml_quantize_mat_tILl8EL9ggml_type15EEvPKfPvll");
	o->gemv_iq4_nl = (gemx_fn) dlsym(o->cpu, "ggml_gemv_iq4_nl_8x8_q8_0");
	o->gemv_q2_K = (gemx_fn) dlsym(o->cpu, "ggml_gemv_q2_K_8x8_q8_K");
	o->gemm_q2_K = (gemx_fn) dlsym(o->cpu, "ggml_gemm_q2_K_8x8_q8_K");
	o->gemm_iq4_nl = (gemx_fn) dlsym(o->cpu, "ggml_gemm_iq4_nl_8x8_q8_0");
	o->quantize_row_q8_0 = (qrow_fn) dlsym(o->cpu, "quantize_row_q8_0");
	o->quantize_mat_q8_0 = (qmat_fn) dlsym(o->cpu, "_Z19ggml_quantize_mat_tILl8EL9ggml_type8EEvPKfPvll");
	o->compute = (int (*) (void *, void *, int)) dlsym(o->cpu, "ggml_graph_compute_with_ctx");
	o->init = (void *(*) (struct ggml_init_params_c)) dlsym(o->base, "ggml_init");
	o->free = (void (*) (void *)) dlsym(o->base, "ggml_free");
	o->new_tensor_2d = (void *(*) (void *, int, int64_t, int64_t)) dlsym(o->base, "ggml_new_tensor_2d");
	o->mul_mat = (void *(*) (void *, void *, void *)) dlsym(o->base, "ggml_mul_mat");
	o->new_graph = (void *(*) (void *)) dlsym(o->base, "ggml_new_graph");
	o->build_forward_expand = (void (*) (void *, void *)) dlsym(o->base, "ggml_build_forward_expand");
	o->get_data = (void *(*) (void *)) dlsym(o->base, "ggml_get_data");
	if (!cpu_init || !o->gemv_q4_K || !o->gemm_q4_K || !o->quantize_row_q8_K || !o->quantize_mat_q8_K ||
		!o->gemv_iq4_nl || !o->gemm_iq4_nl || !o->gemv_q2_K || !o->gemm_q2_K || !o->quantize_row_q8_0 || !o->quantize_mat_q8_0 ||
		!o->compute || !o->init || !o->free || !o->new_tensor_2d || !o->mul_mat || !o->new_graph ||
		!o->build_forward_expand || !o->get_data)
	{
		printf("# the llama.cpp library in %s lacks a symbol this test calls\n", dir);
		return false;
	}
	cpu_init();
	return true;
}

/* ggml's block_q4_Kx8 of 8 Q4_K blocks (repack.cpp make_block_q4_Kx8, interleave 8). */
static void
make_q4_Kx8(const llm_block_q4_K *in, uint8_t *out)
{
	uint16_t   *d = (uint16_t *) out,
			   *dmin = d + 8;
	uint8_t    *scales = out + 32,
			   *qs = out + 32 + 96;
	uint8_t		s[8],
				m[8];

	for (int i = 0; i < 8; i++)
	{
		d[i] = in[i].d;
		dmin[i] = in[i].dmin;
	}
	for (int i = 0; i < LLM_QK_K * 4 / 8; i++)
		memcpy(qs + 8 * i, in[i % 8].qs + (i / 8) * 8, 8);
	for (int half = 0; half < 2; half++)
		for (int i = 0; i < 4; i++)
		{
			uint8_t    *o = scales + 48 * half + 12 * i;

			for (int j = 0; j < 8; j++)
			{
				if (half == 0)
				{
					s[j] = in[j].scales[i] & 63;
					m[j] = in[j].scales[i + 4] & 63;
				}
				else
				{
					s[j] = (uint8_t) (((in[j].scales[i] & 192) >> 2) | (in[j].scales[i + 8] & 15));
					m[j] = (uint8_t) (((in[j].scales[i + 4] & 192) >> 2) | ((in[j].scales[i + 8] & 240) >> 4));
				}
			}
			for (int j = 0; j < 4; j++)
			{
				o[j] = (uint8_t) ((s[j] & 63) + ((s[j + 4] & 48) << 2));
				o[4 + j] = (uint8_t) ((m[j] & 63) + ((m[j + 4] & 48) << 2));
				o[8 + j] = (uint8_t) ((s[j + 4] & 15) + ((m[j + 4] & 15) << 4));
			}
		}
}

/* llama.cpp's Q4_K x 8 rows: out[t][r], tokens 0..3 by its GEMM, each token by its GEMV too. */
static void
oracle_q4_K(const oracle *o, const data *d, float *gemm, float *gemv)
{
	const int	nb = COLS / LLM_QK_K;
	const size_t bx8 = 2 * 16 + 96 + 1024;
	uint8_t    *vx = malloc(bx8 * nb);
	char	   *vy4 = malloc((16 + 1024 + 128) * nb);
	char	   *vy1 = malloc(292 * nb);
	llm_block_q4_K tmp[8];

	for (int b = 0; b < nb; b++)
	{
		for (int r = 0; r < 8; r++)
			memcpy(&tmp[r], d->w + d->row_bytes * r + sizeof(llm_block_q4_K) * b, sizeof(llm_block_q4_K));
		make_q4_Kx8(tmp, vx + bx8 * b);
	}
	o->quantize_mat_q8_K(d->x, vy4, 4, COLS);
	o->gemm_q4_K(COLS, gemm, ROWS, vx, vy4, 4, ROWS);
	for (int t = 0; t < TOKS; t++)
	{
		o->quantize_row_q8_K(d->x + (size_t) t * COLS, vy1, COLS);
		o->gemv_q4_K(COLS, gemv + (size_t) t * ROWS, ROWS, vx, vy1, 1, ROWS);
	}
	free(vx);
	free(vy4);
	free(vy1);
}

/* llama.cpp's ggml_mul_mat of d's rows by its first n_tok tokens on the CPU: out[t][r]. */
static bool
oracle_mul_mat(const oracle *o, const data *d, int ggml_type, int n_tok, float *out)
{
	struct ggml_init_params_c ip = {64 << 20, NULL, false};
	void	   *ctx = o->init(ip);
	void	   *w,
			   *x,
			   *y,
			   *g;

	if (ctx == NULL)
		return false;
	w = o->new_tensor_2d(ctx, ggml_type, COLS, ROWS);
	x = o->new_tensor_2d(ctx, 0 /* GGML_TYPE_F32 */ , COLS, n_tok);
	memcpy(o->get_data(w), d->w, d->row_bytes * ROWS);
	memcpy(o->get_data(x), d->x, sizeof(float) * COLS * n_tok);
	y = o->mul_mat(ctx, w, x);
	g = o->new_graph(ctx);
	o->build_forward_expand(g, y);
	if (o->compute(ctx, g, 2) != 0)
	{
		o->free(ctx);
		return false;
	}
	memcpy(out, o->get_data(y), sizeof(float) * ROWS * n_tok);
	o->free(ctx);
	return true;
}

static int
n_diff(const float *a, const float *b, size_t n)
{
	int			k = 0;

	for (size_t i = 0; i < n; i++)
		k += memcmp(&a[i], &b[i], sizeof(float)) != 0;
	return k;
}

/*
 * Every implementation this CPU has, both forms of a matrix of rows rows,
 * bit-identical to the scalar forms' outputs ref[0] (the one-row form) and
 * ref[1] (the second form).
 */
static void
impls_match_scalar(uint64_t seed, llm_type type, int64_t rows, const char *what, const data *d,
				   float ref[2][TOKS * ROWS])
{
	static const int impls[] = {LLM_IMPL_AVX2, LLM_IMPL_AVX512VNNI};
	float		got[2][TOKS * ROWS];

	for (size_t i = 0; i < sizeof(impls) / sizeof(impls[0]); i++)
	{
		const llm_qkernel *k = llm_qkernel_get(type, impls[i]);

		if (k == NULL)
		{
			SKIP("%s forms: implementation %d not on this CPU", what, impls[i]);
			continue;
		}
		k = llm_qkernel_kform(k, rows);
		run(k, false, d, got[0]);
		run(k, true, d, got[1]);
		CHECK(n_diff(got[0], ref[0], TOKS * ROWS) == 0 && n_diff(got[1], ref[1], TOKS * ROWS) == 0,
			  "seed %llu: %s %s forms bit-identical to scalar (%d, %d differ)",
			  (unsigned long long) seed, what, k->impl, n_diff(got[0], ref[0], TOKS * ROWS),
			  n_diff(got[1], ref[1], TOKS * ROWS));
	}
}

/*
 * Random blocks of a type without a reference quantizer here: random
 * bytes, then the block's fp16 scales set to values in [0.002, 0.01).
 */
static void
make_random_data(data *d, uint32_t type, const llm_qkernel *k)
{
	d->type = type;
	d->row_bytes = llm_type_row_bytes(type, COLS);
	d->w = malloc(d->row_bytes * ROWS);
	for (size_t i = 0; i < d->row_bytes * ROWS; i++)
		d->w[i] = (char) (rng_next() >> 56);
	for (int b = 0; type == LLM_TYPE_IQ4_NL && b < ROWS * COLS / LLM_QK; b++)
		((llm_block_iq4_nl *) d->w)[b].d = llm_fp32_to_fp16((float) (0.002 + 0.008 * rng_unit()));
	for (int b = 0; type != LLM_TYPE_IQ4_NL && b < ROWS * COLS / 256; b++)
	{
		uint16_t	h1 = llm_fp32_to_fp16((float) (0.002 + 0.008 * rng_unit())),
					h2 = llm_fp32_to_fp16((float) (0.002 + 0.008 * rng_unit()));

		if (type == LLM_TYPE_Q3_K)
			((llm_block_q3_K *) d->w)[b].d = h1;
		else if (type == LLM_TYPE_Q2_K)
		{
			((llm_block_q2_K *) d->w)[b].d = h1;
			((llm_block_q2_K *) d->w)[b].dmin = h2;
		}
		else if (type == LLM_TYPE_Q5_K)
		{
			((llm_block_q5_K *) d->w)[b].d = h1;
			((llm_block_q5_K *) d->w)[b].dmin = h2;
		}
		else
			((llm_block_iq4_xs *) d->w)[b].d = h1;
	}
	for (int i = 0; i < TOKS * COLS; i++)
		d->x[i] = rng_normal(1.0f) + (i % 113 == 0 ? 4.0f : 0.0f);
	d->act_row = k->act_row_bytes(COLS);
	d->act = aligned_alloc(64, d->act_row * TOKS);
	for (int t = 0; t < TOKS; t++)
		k->quantize_act(d->x + (size_t) t * COLS, d->act + d->act_row * t, COLS);
}

/* A type whose prompt rows of 8 or more tokens run in llama.cpp's tiled matmul: its two forms. */
static void
test_wide(uint64_t seed, const oracle *o, bool have_oracle, uint32_t type, int ggml_type, const char *name)
{
	const llm_qkernel *ks = llm_qkernel_kform(llm_qkernel_get(type, LLM_IMPL_SCALAR), ROWS);
	float		ref[2][TOKS * ROWS],
				ora[2][TOKS * ROWS];
	char		what[64];
	data		d;
	llm_dot_tile_fn tile;

	if (!CHECK(ks != NULL, "%s: scalar kernel", name))
		return;
	rng_state = seed ^ (0x2545F4914F6CDD1DULL * (uint64_t) (type + 1));
	make_random_data(&d, type, ks);
	if (!CHECK(llm_qkernel_form(ks, &tile) == LLM_ROW_WIDE && tile != NULL,
			   "seed %llu: %s has a wide (tiled) form", (unsigned long long) seed, name))
	{
		free_data(&d);
		return;
	}
	run(ks, false, &d, ref[0]);
	run(ks, true, &d, ref[1]);
	CHECK(n_diff(ref[0], ref[1], TOKS * ROWS) > 0, "seed %llu: %s vec-dot and tiled forms differ on %d of %d",
		  (unsigned long long) seed, name, n_diff(ref[0], ref[1], TOKS * ROWS), TOKS * ROWS);
	snprintf(what, sizeof what, "%s vec-dot / tiled", name);
	impls_match_scalar(seed, type, ROWS, what, &d, ref);
	if (!have_oracle)
		SKIP("%s forms vs llama.cpp: no oracle library", name);
	else
	{
		bool		ok8 = oracle_mul_mat(o, &d, ggml_type, TOKS, ora[1]);
		bool		ok3 = oracle_mul_mat(o, &d, ggml_type, 3, ora[0]);

		CHECK(ok8 && n_diff(ora[1], ref[1], TOKS * ROWS) == 0,
			  "seed %llu: %s tiled form == llama.cpp's ggml_mul_mat of %d tokens (%d of %d differ)",
			  (unsigned long long) seed, name, TOKS, ok8 ? n_diff(ora[1], ref[1], TOKS * ROWS) : -1, TOKS * ROWS);
		CHECK(ok3 && n_diff(ora[0], ref[0], 3 * ROWS) == 0,
			  "seed %llu: %s vec-dot form == llama.cpp's ggml_mul_mat of 3 tokens (%d of %d differ)",
			  (unsigned long long) seed, name, ok3 ? n_diff(ora[0], ref[0], 3 * ROWS) : -1, 3 * ROWS);
	}
	free_data(&d);
}

/*
 * IQ4_NL of 8 rows: the kernel llm_qkernel_kform gives (not the vec-dot
 * one), every implementation bit-identical, and equal to llama.cpp's
 * repacked block_iq4_nlx8 GEMV (each token) and GEMM (4 tokens).
 */
static void
test_iq4_nl_x8(uint64_t seed, const oracle *o, bool have_oracle)
{
	static const int impls[] = {LLM_IMPL_AVX2, LLM_IMPL_AVX512VNNI};
	const llm_qkernel *kb = llm_qkernel_get(LLM_TYPE_IQ4_NL, LLM_IMPL_SCALAR);
	const llm_qkernel *ks = llm_qkernel_kform(kb, ROWS);
	float		ref[TOKS * ROWS],
				vd[TOKS * ROWS],
				got[TOKS * ROWS];
	data		d;
	llm_dot_tile_fn tile;

	rng_state = seed ^ 0xD1B54A32D192ED03ULL;
	make_random_data(&d, LLM_TYPE_IQ4_NL, ks);
	CHECK(ks != kb && ks->dot != kb->dot && llm_qkernel_form(ks, &tile) == 0 && llm_qkernel_kform(kb, 12) == kb,
		  "seed %llu: IQ4_NL of 8 rows has the repacked kernel (12 rows: vec-dot)", (unsigned long long) seed);
	run(ks, false, &d, ref);
	run(kb, false, &d, vd);
	CHECK(n_diff(ref, vd, TOKS * ROWS) > 0, "seed %llu: IQ4_NL repacked and vec-dot kernels differ on %d of %d",
		  (unsigned long long) seed, n_diff(ref, vd, TOKS * ROWS), TOKS * ROWS);
	for (size_t i = 0; i < sizeof(impls) / sizeof(impls[0]); i++)
	{
		const llm_qkernel *k = llm_qkernel_get(LLM_TYPE_IQ4_NL, impls[i]);

		if (k == NULL)
		{
			SKIP("IQ4_NL repacked: implementation %d not on this CPU", impls[i]);
			continue;
		}
		k = llm_qkernel_kform(k, ROWS);
		run(k, false, &d, got);
		CHECK(n_diff(got, ref, TOKS * ROWS) == 0, "seed %llu: IQ4_NL repacked %s bit-identical to scalar (%d differ)",
			  (unsigned long long) seed, k->impl, n_diff(got, ref, TOKS * ROWS));
	}
	if (!have_oracle)
		SKIP("IQ4_NL repacked vs llama.cpp: no oracle library");
	else
	{
		const int	nb = COLS / LLM_QK;
		const size_t bx8 = 16 + 128;
		uint8_t    *vx = malloc(bx8 * nb);
		char	   *vy4 = malloc((8 + 128) * nb),
				   *vy1 = malloc(34 * nb);
		float		gemm[TOKS * ROWS],
					gemv[TOKS * ROWS];

		for (int b = 0; b < nb; b++)
			for (int r = 0; r < 8; r++)
			{
				const llm_block_iq4_nl *in = (const llm_block_iq4_nl *) (d.w + d.row_bytes * r) + b;

				memcpy(vx + bx8 * b + 2 * r, &in->d, 2);
				for (int i = r; i < 16; i += 8)
					memcpy(vx + bx8 * b + 16 + 8 * i, in->qs + (i / 8) * 8, 8);
			}
		o->quantize_mat_q8_0(d.x, vy4, 4, COLS);
		o->gemm_iq4_nl(COLS, gemm, ROWS, vx, vy4, 4, ROWS);
		for (int t = 0; t < TOKS; t++)
		{
			o->quantize_row_q8_0(d.x + (size_t) t * COLS, vy1, COLS);
			o->gemv_iq4_nl(COLS, gemv + (size_t) t * ROWS, ROWS, vx, vy1, 1, ROWS);
		}
		CHECK(n_diff(gemv, ref, TOKS * ROWS) == 0,
			  "seed %llu: IQ4_NL repacked == llama.cpp's ggml_gemv_iq4_nl_8x8_q8_0 (%d of %d differ)",
			  (unsigned long long) seed, n_diff(gemv, ref, TOKS * ROWS), TOKS * ROWS);
		CHECK(n_diff(gemm, ref, 4 * ROWS) == 0,
			  "seed %llu: IQ4_NL repacked == llama.cpp's ggml_gemm_iq4_nl_8x8_q8_0, 4 tokens (%d of %d differ)",
			  (unsigned long long) seed, n_diff(gemm, ref, 4 * ROWS), 4 * ROWS);
		free(vx);
		free(vy4);
		free(vy1);
	}
	free_data(&d);
}

/*
 * Q2_K of 8 rows (repacked by llama.cpp's AVX-512 build): a one-row (GEMV)
 * kernel and a grouped (GEMM) form, every implementation bit-identical,
 * equal to its ggml_gemv_q2_K_8x8_q8_K (each token) and
 * ggml_gemm_q2_K_8x8_q8_K (4 tokens) on the rows as block_q2_Kx8.
 */
static void
test_q2_K_x8(uint64_t seed, const oracle *o, bool have_oracle)
{
	const llm_qkernel *kb = llm_qkernel_get(LLM_TYPE_Q2_K, LLM_IMPL_SCALAR);
	const llm_qkernel *ks = llm_qkernel_kform(kb, ROWS);
	float		ref[2][TOKS * ROWS],
				vd[TOKS * ROWS];
	data		d;
	llm_dot_tile_fn tile;

	rng_state = seed ^ 0x94D049BB133111EBULL;
	make_random_data(&d, LLM_TYPE_Q2_K, ks);
	if (!CHECK(ks != kb && llm_qkernel_form(ks, &tile) == LLM_ROW_GROUPED && tile != NULL &&
			   llm_qkernel_kform(kb, 12) == kb,
			   "seed %llu: Q2_K of 8 rows has the repacked GEMV kernel and a grouped (GEMM) form (12 rows: vec-dot)",
			   (unsigned long long) seed))
	{
		free_data(&d);
		return;
	}
	run(ks, false, &d, ref[0]);
	run(ks, true, &d, ref[1]);
	run(kb, false, &d, vd);
	CHECK(n_diff(ref[0], vd, TOKS * ROWS) > 0 && n_diff(ref[0], ref[1], TOKS * ROWS) > 0,
		  "seed %llu: Q2_K GEMV form differs from vec-dot on %d and from GEMM on %d of %d",
		  (unsigned long long) seed, n_diff(ref[0], vd, TOKS * ROWS), n_diff(ref[0], ref[1], TOKS * ROWS),
		  TOKS * ROWS);
	impls_match_scalar(seed, LLM_TYPE_Q2_K, ROWS, "Q2_K GEMV / GEMM", &d, ref);
	if (!have_oracle)
		SKIP("Q2_K repacked vs llama.cpp: no oracle library");
	else
	{
		const int	nb = COLS / LLM_QK_K;
		const size_t bx8 = 32 + 128 + 512;
		uint8_t    *vx = malloc(bx8 * nb);
		char	   *vy4 = malloc((16 + 1024 + 128) * nb),
				   *vy1 = malloc(292 * nb);
		float		gemm[TOKS * ROWS],
					gemv[TOKS * ROWS];

		for (int b = 0; b < nb; b++)
		{
			uint8_t    *out = vx + bx8 * b;
			const llm_block_q2_K *in[8];

			for (int r = 0; r < 8; r++)
			{
				in[r] = (const llm_block_q2_K *) (d.w + d.row_bytes * r) + b;
				memcpy(out + 2 * r, &in[r]->d, 2);
				memcpy(out + 16 + 2 * r, &in[r]->dmin, 2);
			}
			for (int i = 0; i < 128; i++)
				out[32 + i] = in[(i % 16) / 2]->scales[(i / 16) * 2 + i % 2];
			for (int i = 0; i < LLM_QK_K * 2 / 8; i++)
				memcpy(out + 160 + 8 * i, in[i % 8]->qs + (i / 8) * 8, 8);
		}
		o->quantize_mat_q8_K(d.x, vy4, 4, COLS);
		o->gemm_q2_K(COLS, gemm, ROWS, vx, vy4, 4, ROWS);
		for (int t = 0; t < TOKS; t++)
		{
			o->quantize_row_q8_K(d.x + (size_t) t * COLS, vy1, COLS);
			o->gemv_q2_K(COLS, gemv + (size_t) t * ROWS, ROWS, vx, vy1, 1, ROWS);
		}
		CHECK(n_diff(gemv, ref[0], TOKS * ROWS) == 0,
			  "seed %llu: Q2_K GEMV form == llama.cpp's ggml_gemv_q2_K_8x8_q8_K (%d of %d differ)",
			  (unsigned long long) seed, n_diff(gemv, ref[0], TOKS * ROWS), TOKS * ROWS);
		CHECK(n_diff(gemm, ref[1], 4 * ROWS) == 0,
			  "seed %llu: Q2_K GEMM form == llama.cpp's ggml_gemm_q2_K_8x8_q8_K, 4 tokens (%d of %d differ)",
			  (unsigned long long) seed, n_diff(gemm, ref[1], 4 * ROWS), 4 * ROWS);
		free(vx);
		free(vy4);
		free(vy1);
	}
	free_data(&d);
}

/* A step of n tokens of one sequence whose rows carry forms[] (only the matmul reads them). */
static int
begin_forms(llm_backend *b, int n, const uint8_t *forms)
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

/*
 * The CPU backend's matmul of ROWS x COLS weights of type over TOKS tokens
 * whose rows carry mixed forms (token 5 also LLM_ROW_TAIL_ALONE), with the
 * scalar, AVX2 and AVX-512 implementations forced: each token's row is the
 * scalar kernel of its form, bit for bit; after tail_rows token 5's is the
 * one-row form's.
 */
static void
test_backend_forms(uint64_t seed, uint32_t type, const char *name)
{
	static const int impls[] = {LLM_IMPL_SCALAR, LLM_IMPL_AVX2, LLM_IMPL_AVX512VNNI};
	const llm_qkernel *ks = llm_qkernel_kform(llm_qkernel_get(type, LLM_IMPL_SCALAR), ROWS);
	llm_dot_tile_fn tile;
	const uint8_t mask = llm_qkernel_form(ks, &tile);
	float		ref[2][TOKS * ROWS],
				want[TOKS * ROWS],
				want_tail[TOKS * ROWS],
				got[TOKS * ROWS],
				xt[TOKS * COLS];
	uint8_t		forms[TOKS];
	data		d;

	rng_state = seed ^ 0xA0761D6478BD642FULL ^ type;
	make_random_data(&d, type, ks);
	run(ks, false, &d, ref[0]);
	if (mask != 0)
		run(ks, true, &d, ref[1]);
	for (int t = 0; t < TOKS; t++)
	{
		forms[t] = (uint8_t) ((t % 3 != 1 ? mask : 0) | (t == 5 ? LLM_ROW_TAIL_ALONE : 0));
		for (int r = 0; r < ROWS; r++)
		{
			want[t * ROWS + r] = ref[(forms[t] & mask) != 0][t * ROWS + r];
			want_tail[t * ROWS + r] = ref[t != 5 && (forms[t] & mask) != 0][t * ROWS + r];
		}
	}
	memcpy(xt, d.x, sizeof xt);
	for (size_t i = 0; i < sizeof(impls) / sizeof(impls[0]); i++)
	{
		char		err[256];
		llm_backend *b = llm_backend_cpu_create(2, err, sizeof(err));
		llm_kv_geometry g = {1, 1, 16, 32, 1, LLM_KV_F16, NULL, 0, 0};
		llm_weight	host = {type, ROWS, COLS, d.row_bytes, d.w, NULL},
					w;
		bool		ok,
					ok_tail;

		if (b == NULL || llm_backend_cpu_set_impl(b, impls[i]) != 0)
		{
			SKIP("%s backend forms: implementation %d not on this CPU", name, impls[i]);
			if (b)
				b->ops->destroy(b);
			continue;
		}
		ok = b->ops->kv_init(b, &g) == 0 && b->ops->load_weight(b, &host, &w) == 0 &&
			begin_forms(b, TOKS, forms) == 0 && b->ops->matmul(b, &w, xt, got, TOKS) == 0 &&
			n_diff(got, want, TOKS * ROWS) == 0;
		ok_tail = begin_forms(b, TOKS, forms) == 0 && b->ops->tail_rows != NULL && b->ops->tail_rows(b) == 0 &&
			b->ops->matmul(b, &w, xt, got, TOKS) == 0 && n_diff(got, want_tail, TOKS * ROWS) == 0;
		CHECK(ok && ok_tail, "seed %llu: %s backend matmul (impl %d, 2 threads), tokens of mixed forms: "
			  "each token's row == the scalar kernel of its form, before and after tail_rows",
			  (unsigned long long) seed, name, impls[i]);
		b->ops->free_weight(b, &w);
		b->ops->destroy(b);
	}
	free_data(&d);
}

static void
test_seed(uint64_t seed, const oracle *o, bool have_oracle)
{
	float		ref[2][TOKS * ROWS],
				ora[2][TOKS * ROWS];

	/* Q4_K, 8 rows: GEMV form and GEMM form */
	{
		const llm_qkernel *ks = llm_qkernel_kform(llm_qkernel_get(LLM_TYPE_Q4_K, LLM_IMPL_SCALAR), ROWS);
		data		d;
		llm_dot_tile_fn tile;

		rng_state = seed;
		make_data(&d, LLM_TYPE_Q4_K, ks);
		CHECK(llm_qkernel_form(ks, &tile) == LLM_ROW_GROUPED && tile != NULL,
			  "seed %llu: Q4_K of 8 rows has a grouped (GEMM) form", (unsigned long long) seed);
		run(ks, false, &d, ref[0]);
		run(ks, true, &d, ref[1]);
		CHECK(n_diff(ref[0], ref[1], TOKS * ROWS) > 0, "seed %llu: Q4_K GEMV and GEMM forms differ on %d of %d",
			  (unsigned long long) seed, n_diff(ref[0], ref[1], TOKS * ROWS), TOKS * ROWS);
		impls_match_scalar(seed, LLM_TYPE_Q4_K, ROWS, "Q4_K GEMV / GEMM", &d, ref);
		if (!have_oracle)
			SKIP("Q4_K forms vs llama.cpp: no oracle library");
		else
		{
			oracle_q4_K(o, &d, ora[1], ora[0]);
			CHECK(n_diff(ora[0], ref[0], TOKS * ROWS) == 0,
				  "seed %llu: Q4_K GEMV form == llama.cpp's repacked gemv (%d of %d differ)",
				  (unsigned long long) seed, n_diff(ora[0], ref[0], TOKS * ROWS), TOKS * ROWS);
			CHECK(n_diff(ora[1], ref[1], 4 * ROWS) == 0,
				  "seed %llu: Q4_K GEMM form == llama.cpp's repacked gemm, 4 tokens (%d of %d differ)",
				  (unsigned long long) seed, n_diff(ora[1], ref[1], 4 * ROWS), 4 * ROWS);
		}
		free_data(&d);
	}

	/* Q4_K of a row count llama.cpp does not repack: vec-dot form and wide (tiled) form */
	{
		const llm_qkernel *kb = llm_qkernel_get(LLM_TYPE_Q4_K, LLM_IMPL_SCALAR);
		const llm_qkernel *ks = llm_qkernel_kform(kb, 12);
		data		d;
		llm_dot_tile_fn tile;

		rng_state = seed ^ 0x5851F42D4C957F2DULL;
		make_data(&d, LLM_TYPE_Q4_K, ks);
		CHECK(ks->dot == kb->dot && llm_qkernel_form(ks, &tile) == LLM_ROW_WIDE && tile != NULL,
			  "seed %llu: Q4_K of 12 rows: ggml_vec_dot_q4_K_q8_K's dot, a wide (tiled) form",
			  (unsigned long long) seed);
		run(ks, false, &d, ref[0]);
		run(ks, true, &d, ref[1]);
		CHECK(n_diff(ref[0], ref[1], TOKS * ROWS) > 0, "seed %llu: Q4_K vec-dot and tiled forms differ on %d of %d",
			  (unsigned long long) seed, n_diff(ref[0], ref[1], TOKS * ROWS), TOKS * ROWS);
		impls_match_scalar(seed, LLM_TYPE_Q4_K, 12, "Q4_K (12 rows) vec-dot / tiled", &d, ref);
		if (!have_oracle)
			SKIP("Q4_K tiled form vs llama.cpp: no oracle library");
		else
		{
			/* a plain ggml context never repacks: vec dot below 8 tokens, tiled from 8 */
			bool		ok8 = oracle_mul_mat(o, &d, 12 /* GGML_TYPE_Q4_K */ , TOKS, ora[1]);
			bool		ok3 = oracle_mul_mat(o, &d, 12, 3, ora[0]);

			CHECK(ok8 && n_diff(ora[1], ref[1], TOKS * ROWS) == 0,
				  "seed %llu: Q4_K tiled form == llama.cpp's ggml_mul_mat of %d tokens (%d of %d differ)",
				  (unsigned long long) seed, TOKS, ok8 ? n_diff(ora[1], ref[1], TOKS * ROWS) : -1, TOKS * ROWS);
			CHECK(ok3 && n_diff(ora[0], ref[0], 3 * ROWS) == 0,
				  "seed %llu: Q4_K vec-dot form == llama.cpp's ggml_mul_mat of 3 tokens (%d of %d differ)",
				  (unsigned long long) seed, ok3 ? n_diff(ora[0], ref[0], 3 * ROWS) : -1, 3 * ROWS);
		}
		free_data(&d);
	}

	/* Q6_K: vec-dot form and wide (tiled) form */
	{
		const llm_qkernel *ks = llm_qkernel_kform(llm_qkernel_get(LLM_TYPE_Q6_K, LLM_IMPL_SCALAR), ROWS);
		data		d;
		llm_dot_tile_fn tile;

		rng_state = seed ^ 0x9E3779B97F4A7C15ULL;
		make_data(&d, LLM_TYPE_Q6_K, ks);
		CHECK(llm_qkernel_form(ks, &tile) == LLM_ROW_WIDE && tile != NULL,
			  "seed %llu: Q6_K has a wide (tiled) form", (unsigned long long) seed);
		run(ks, false, &d, ref[0]);
		run(ks, true, &d, ref[1]);
		CHECK(n_diff(ref[0], ref[1], TOKS * ROWS) > 0, "seed %llu: Q6_K vec-dot and tiled forms differ on %d of %d",
			  (unsigned long long) seed, n_diff(ref[0], ref[1], TOKS * ROWS), TOKS * ROWS);
		impls_match_scalar(seed, LLM_TYPE_Q6_K, ROWS, "Q6_K vec-dot / tiled", &d, ref);
		if (!have_oracle)
			SKIP("Q6_K forms vs llama.cpp: no oracle library");
		else
		{
			bool		ok8 = oracle_mul_mat(o, &d, 14 /* GGML_TYPE_Q6_K */ , TOKS, ora[1]);
			bool		ok3 = oracle_mul_mat(o, &d, 14, 3, ora[0]);

			CHECK(ok8 && n_diff(ora[1], ref[1], TOKS * ROWS) == 0,
				  "seed %llu: Q6_K tiled form == llama.cpp's ggml_mul_mat of %d tokens (%d of %d differ)",
				  (unsigned long long) seed, TOKS, ok8 ? n_diff(ora[1], ref[1], TOKS * ROWS) : -1, TOKS * ROWS);
			CHECK(ok3 && n_diff(ora[0], ref[0], 3 * ROWS) == 0,
				  "seed %llu: Q6_K vec-dot form == llama.cpp's ggml_mul_mat of 3 tokens (%d of %d differ)",
				  (unsigned long long) seed, ok3 ? n_diff(ora[0], ref[0], 3 * ROWS) : -1, 3 * ROWS);
		}
		free_data(&d);
	}
}

int
main(void)
{
	const char *env = getenv("LLM_TEST_SEED");
	uint64_t	fresh = env ? strtoull(env, NULL, 10) : (uint64_t) time(NULL) * 2654435761u + 1;
	oracle		o;
	bool		have = oracle_open(&o);

	printf("# fresh seed %llu (LLM_TEST_SEED)\n", (unsigned long long) fresh);
	test_seed(12345, &o, have);
	test_seed(987654321, &o, have);
	test_seed(fresh, &o, have);
	for (int i = 0; i < 3; i++)
	{
		uint64_t	seed = i == 0 ? 12345 : i == 1 ? 987654321 : fresh;

		test_wide(seed, &o, have, LLM_TYPE_Q3_K, 11 /* GGML_TYPE_Q3_K */ , "Q3_K");
		test_wide(seed, &o, have, LLM_TYPE_Q5_K, 13 /* GGML_TYPE_Q5_K */ , "Q5_K");
		test_wide(seed, &o, have, LLM_TYPE_IQ4_XS, 23 /* GGML_TYPE_IQ4_XS */ , "IQ4_XS");
		test_iq4_nl_x8(seed, &o, have);
		test_q2_K_x8(seed, &o, have);
		test_backend_forms(seed, LLM_TYPE_Q3_K, "Q3_K");
		test_backend_forms(seed, LLM_TYPE_Q5_K, "Q5_K");
		test_backend_forms(seed, LLM_TYPE_IQ4_XS, "IQ4_XS");
		test_backend_forms(seed, LLM_TYPE_Q2_K, "Q2_K");
		test_backend_forms(seed, LLM_TYPE_IQ4_NL, "IQ4_NL");
	}
	return unit_done();
}
