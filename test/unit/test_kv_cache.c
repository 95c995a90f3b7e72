/*
 * test_kv_cache.c — the CPU backend's KV cache element types and the
 * attention paths of long contexts.  Checks:
 *  - kv_init and llm_kv_block_bytes: F16 and Q8_0 accepted (Q8_0 rows are
 *    head_dim / 32 blocks of 34 bytes: 17/32 of F16), an unknown type and a
 *    Q8_0 head_dim that is not a multiple of 32 rejected with a message;
 *  - llm_kv_quantize_q8_0: d the fp16 of amax / 127, each value within
 *    half a step of amax / 127 plus the fp16 rounding of d times |q| <= 127,
 *    an all-zero block all zero;
 *  - rope_store_kv on a Q8_0 cache stores exactly llm_kv_quantize_q8_0 of
 *    the roped K and of V at the block-table slots;
 *  - a sequence of 640 positions (prompt in chunks of 300, then 6 decode
 *    steps past the 512 keys where decode rows split, windows 0 and 400),
 *    both cache types: decode outputs
 *    bit-identical between the scalar kernels, the SIMD kernels on one
 *    thread (whole) and on two threads (the long-context split of
 *    llm_attn_split), and the prompt's block kernel vs the scalar one; an
 *    AVX-512 implementation the CPU lacks is counted as skipped;
 *  - greedy agreement is not tested here (it needs the model; see
 *    bench/kv_agree.c).
 */
#include "unit.h"
#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;

static float
rnd(float a)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (float) ((double) (z >> 11) * 0x1p-53 * 2.0 - 1.0) * a;
}

enum
{
	N_HEADS = 9,
	N_KV = 3,
	HD = 64,
	BS = 16,
	LEN = 640,					/* positions of the sequence */
	PROMPT = 634,				/* prompt rows; the rest are decode steps */
	CHUNK = 300,
	N_BLOCKS = LEN / BS + 1
};

static void
test_geometry(void)
{
	char		err[256];
	llm_backend *b;
	llm_kv_geometry f16 = {2, 2, 64, 16, 8, LLM_KV_F16, NULL, 0, 0},
				q8 = {2, 2, 64, 16, 8, LLM_KV_Q8_0, NULL, 0, 0},
				bad_type = {2, 2, 64, 16, 8, 7, NULL, 0, 0},
				bad_hd = {2, 2, 48, 16, 8, LLM_KV_Q8_0, NULL, 0, 0};

	CHECK(llm_kv_block_bytes(&f16) == 2 * 2 * 16 * 2 * 64 * 2, "f16 block bytes: %zu", llm_kv_block_bytes(&f16));
	CHECK(llm_kv_block_bytes(&q8) == 2 * 2 * 16 * 2 * 2 * 34, "q8_0 block bytes: %zu (17/32 of f16)",
		  llm_kv_block_bytes(&q8));
	CHECK(llm_kv_block_bytes(&bad_type) == 0 && llm_kv_block_bytes(&bad_hd) == 0,
		  "block bytes 0 for an unknown type and for q8_0 with head_dim 48");
	b = llm_backend_cpu_create(1, err, sizeof(err));
	CHECK(b->ops->kv_init(b, &bad_type) == -1 && strstr(b->ops->last_error(b), "type"),
		  "kv_init rejects type 7: %s", b->ops->last_error(b));
	CHECK(b->ops->kv_init(b, &bad_hd) == -1 && strstr(b->ops->last_error(b), "q8_0"),
		  "kv_init rejects q8_0 with head_dim 48: %s", b->ops->last_error(b));
	CHECK(b->ops->kv_init(b, &q8) == 0, "kv_init takes q8_0");
	b->ops->destroy(b);
}

static void
test_quantize(void)
{
	float		x[128],
				back;
	llm_block_q8_0 y[4];
	double		worst = 0;
	bool		zero_ok = true,
				d_ok = true;

	for (int i = 0; i < 96; i++)
		x[i] = rnd(i < 32 ? 0.01f : i < 64 ? 3.0f : 500.0f);
	for (int i = 96; i < 128; i++)
		x[i] = 0.0f;
	llm_kv_quantize_q8_0(x, y, 128);
	for (int b = 0; b < 4; b++)
	{
		float		amax = 0;

		for (int i = 0; i < 32; i++)
			amax = fmaxf(amax, fabsf(x[b * 32 + i]));
		if (y[b].d != llm_fp32_to_fp16(amax / 127.0f))
			d_ok = false;
		for (int i = 0; i < 32; i++)
		{
			back = llm_kv_value((const uint8_t *) y, LLM_KV_Q8_0, b * 32 + i);
			/* half a step of amax / 127, plus |q| <= 127 times the fp16 rounding of the stored d */
			if (amax > 0)
				worst = fmax(worst, fabs(back - x[b * 32 + i]) / (amax / 127.0 * (0.5 + 127 * 0x1p-11) * 1.001));
			else if (back != 0.0f || y[b].qs[i] != 0)
				zero_ok = false;
		}
	}
	CHECK(d_ok, "q8_0 rows: d = fp16(amax / 127) per block");
	CHECK(worst <= 1.0, "q8_0 rows: every value within half a step (+ d's rounding) of its input (worst %.3f)",
		  worst);
	CHECK(zero_ok, "q8_0 rows: an all-zero block dequantizes to zeros");
}

/* A backend with the sequence's cache; NULL (and a skip) when impl is not available. */
static llm_backend *
make(int threads, int impl, int dtype)
{
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(threads, err, sizeof(err));
	llm_kv_geometry g = {1, N_KV, HD, BS, N_BLOCKS, dtype, NULL, 0, 0};

	if (b == NULL)
		return NULL;
	if ((impl != LLM_IMPL_BEST && llm_backend_cpu_set_impl(b, impl) != 0) || b->ops->kv_init(b, &g) != 0)
	{
		b->ops->destroy(b);
		return NULL;
	}
	return b;
}

/*
 * Prompt rows 0..PROMPT-1 in chunks, then one decode row per step; out
 * [LEN][N_HEADS][HD].  kout (may be NULL) receives the roped K rows of the
 * run.  Returns 0 or -1.
 */
static int
run_sequence(llm_backend *b, const float *q, const float *k, const float *v, const int32_t *bt, int window,
			 float *out, float *kout)
{
	int32_t		tok[CHUNK],
				pos[CHUNK],
				slot[CHUNK],
				ss[2],
				kvl[1];
	float	   *qs = malloc(sizeof(float) * CHUNK * N_HEADS * HD),
			   *ks = malloc(sizeof(float) * CHUNK * N_KV * HD);
	int			rc = 0;

	for (int p0 = 0; p0 < LEN && rc == 0;)
	{
		int			n = p0 < PROMPT ? (PROMPT - p0 < CHUNK ? PROMPT - p0 : CHUNK) : 1;
		uint8_t		flags[CHUNK];
		llm_step_desc d;

		for (int i = 0; i < n; i++)
		{
			tok[i] = 0;
			pos[i] = p0 + i;
			slot[i] = bt[(p0 + i) / BS] * BS + (p0 + i) % BS;
			flags[i] = p0 >= PROMPT;
		}
		ss[0] = 0;
		ss[1] = n;
		kvl[0] = p0 + n;
		d = (llm_step_desc) {n, 1, tok, pos, slot, ss, kvl, bt, N_BLOCKS, NULL, 0, flags, NULL, NULL, NULL};
		memcpy(qs, q + (size_t) p0 * N_HEADS * HD, sizeof(float) * n * N_HEADS * HD);
		memcpy(ks, k + (size_t) p0 * N_KV * HD, sizeof(float) * n * N_KV * HD);
		if (b->ops->begin_step(b, &d) != 0 ||
			b->ops->rope_store_kv(b, 0, qs, ks, v + (size_t) p0 * N_KV * HD, N_HEADS, 10000.0f) != 0 ||
			b->ops->attention(b, 0, qs, out + (size_t) p0 * N_HEADS * HD, N_HEADS, 0.125f, window) != 0)
		{
			printf("# %s\n", b->ops->last_error(b));
			rc = -1;
		}
		if (kout)
			memcpy(kout + (size_t) p0 * N_KV * HD, ks, sizeof(float) * n * N_KV * HD);
		p0 += n;
	}
	free(qs);
	free(ks);
	return rc;
}

static void
test_long(int dtype)
{
	const char *name = dtype == LLM_KV_Q8_0 ? "q8_0" : "f16";
	const size_t qn = (size_t) LEN * N_HEADS * HD,
				kn = (size_t) LEN * N_KV * HD;
	float	   *q = malloc(sizeof(float) * qn),
			   *k = malloc(sizeof(float) * kn),
			   *v = malloc(sizeof(float) * kn),
			   *kr = malloc(sizeof(float) * kn),
			   *ref = malloc(sizeof(float) * qn),
			   *out = malloc(sizeof(float) * qn);
	int32_t		bt[N_BLOCKS];

	for (int i = 0; i < N_BLOCKS; i++)
		bt[i] = (i * 37) % N_BLOCKS;	/* scattered, every block once (37 and 41 coprime) */
	for (size_t i = 0; i < qn; i++)
		q[i] = rnd(1.5f);
	for (size_t i = 0; i < kn; i++)
	{
		k[i] = rnd(1.5f);
		v[i] = rnd(1.0f);
	}
	for (int wi = 0; wi < 2; wi++)
	{
		const int	window = wi ? 400 : 0;
		llm_backend *bs = make(1, LLM_IMPL_SCALAR, dtype);
		bool		ran = bs && run_sequence(bs, q, k, v, bt, window, ref, kr) == 0;

		if (!CHECK(ran, "%s cache, window %d: scalar run of %d positions", name, window, LEN))
		{
			if (bs)
				bs->ops->destroy(bs);
			continue;
		}
		if (dtype == LLM_KV_Q8_0 && window == 0)
		{
			/* the cache holds exactly the q8_0 rows of the roped K and of V */
			const uint8_t *K = llm_backend_cpu_kv(bs, 0, false),
					   *V = llm_backend_cpu_kv(bs, 0, true);
			const size_t rb = llm_kv_row_bytes(LLM_KV_Q8_0, HD);
			uint8_t		row[4 * 34];
			int			bad = 0;

			for (int p = 0; p < LEN; p++)
				for (int h = 0; h < N_KV; h++)
				{
					size_t		r = llm_kv_row_index(bt[p / BS], p % BS, h, N_KV, BS);

					llm_kv_quantize_q8_0(kr + ((size_t) p * N_KV + h) * HD, row, HD);
					bad += memcmp(row, K + r * rb, rb) != 0;
					llm_kv_quantize_q8_0(v + ((size_t) p * N_KV + h) * HD, row, HD);
					bad += memcmp(row, V + r * rb, rb) != 0;
				}
			CHECK(bad == 0, "q8_0 cache: rope_store_kv stores llm_kv_quantize_q8_0 of roped K and of V "
				  "(%d of %d rows differ)", bad, 2 * LEN * N_KV);
		}
		bs->ops->destroy(bs);
		for (int impl = LLM_IMPL_AVX2; impl <= LLM_IMPL_AVX512VNNI; impl++)
			for (int threads = 1; threads <= 2; threads++)
			{
				llm_backend *b = make(threads, impl, dtype);
				bool		same;

				if (b == NULL)
				{
					SKIP("%s cache, window %d: implementation %d with %d threads: not on this CPU", name,
						 window, impl, threads);
					continue;
				}
				same = run_sequence(b, q, k, v, bt, window, out, NULL) == 0 &&
					memcmp(out, ref, sizeof(float) * qn) == 0;
				CHECK(same, "%s cache, window %d, %s, %d thread%s: prompt blocks and %d decode rows "
					  "at %d+ keys%s bit-identical to the scalar kernels", name, window,
					  llm_backend_cpu_impl_name(b), threads, threads > 1 ? "s" : "", LEN - PROMPT,
					  PROMPT, threads > 1 ? " (split over the threads)" : " (whole)");
				b->ops->destroy(b);
			}
	}
	free(q);
	free(k);
	free(v);
	free(kr);
	free(ref);
	free(out);
}

int
main(void)
{
	const char *env = getenv("LLM_TEST_SEED");
	uint64_t	seed = env ? strtoull(env, NULL, 10) : (uint64_t) time(NULL);

	printf("# seed %llu\n", (unsigned long long) seed);
	rng_state = seed;
	test_geometry();
	test_quantize();
	test_long(LLM_KV_F16);
	test_long(LLM_KV_Q8_0);
	return unit_done();
}
