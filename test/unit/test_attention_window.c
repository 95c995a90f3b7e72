/*
 * test_attention_window.c — the attention op's window (backend.h: the query
 * at position p reads keys max(0, p - window + 1)..p; 0 = all) on the CPU
 * backend, for several GQA shapes, head sizes and block sizes, over two
 * prompts in a paged cache with shuffled block tables.  Checks per shape:
 *  - for windows 1, 5, 16, 17, 33 and 64, every output vs a double
 *    reference computed from the cache contents over the window's keys
 *    (bound as test_kernels.c: probabilities are rounded to fp16);
 *  - window 1 returns exactly the token's own fp16 V row;
 *  - a window covering every position is bit-identical to window 0;
 *  - bit-identical outputs whether the prompts run in one step or in
 *    chunks interleaved differently (chunked-prefill and batch
 *    invariance), with the scalar and the SIMD kernels (prompt rows in
 *    blocks of queries, decode rows whole or split over threads), in both
 *    reduction orders (multi-token and one-token);
 *  - all of the above for an F16 and a Q8_0 KV cache (the reference reads
 *    the cache's values, dequantized: llm_kv_value);
 *  - with attention logit soft-capping (attention_softcap) after RoPE with
 *    options (rope_store_kv_opts: half the head rotated, frequency
 *    factors, an angle and a cos/sin factor): the same bit-identities
 *    across steps, kernels and splits, and outputs that differ from the
 *    plain ops' (the cap and the options act);
 *  - a negative window is an error.
 * Every check runs for a fixed and a fresh seed (LLM_TEST_SEED reruns one).
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
	return (float) ((double) (rng_next() >> 11) * 0x1p-53 * 2.0 - 1.0) * a;
}

static bool
same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof(float)) == 0;
}

enum
{
	N_SEQS = 2,
	MAX_BLOCKS = 80,			/* blocks in the pool */
	MAX_TOKENS = 128
};

static const int seq_len[N_SEQS] = {70, 45};

typedef struct shape
{
	int			n_heads,
				n_kv,
				hd,
				bs;				/* block size */
} shape;

typedef struct chunk
{
	int			seq,
				from,
				to;
} chunk;

/* A plan: steps, each a run of chunks (consecutive entries of chunks[]). */
typedef struct plan
{
	const chunk *chunks;
	const int  *per_step;
	int			n_steps;
} plan;

typedef struct inputs
{
	const shape *g;
	int			kv_dtype;		/* llm_kv_dtype of the runs */
	int			max_blocks;		/* per sequence */
	int32_t		bt[N_SEQS][MAX_BLOCKS];
	float	   *q[N_SEQS],		/* [len][n_heads][hd], before RoPE */
			   *k[N_SEQS],		/* [len][n_kv][hd] */
			   *v[N_SEQS];
} inputs;

/* A run's results: attention outputs and roped q per (seq, pos). */
typedef struct result
{
	float	   *out[N_SEQS];
	float	   *qr[N_SEQS];
	llm_backend *b;				/* kept for its cache */
} result;

static size_t
qrow(const shape *g)
{
	return (size_t) g->n_heads * g->hd;
}

static size_t
kvrow(const shape *g)
{
	return (size_t) g->n_kv * g->hd;
}

static void
make_inputs(inputs *in, const shape *g)
{
	int32_t		perm[MAX_BLOCKS];
	int			nb = MAX_BLOCKS;

	in->g = g;
	in->max_blocks = MAX_BLOCKS / N_SEQS;
	for (int i = 0; i < nb; i++)
		perm[i] = i;
	for (int i = nb - 1; i > 0; i--)
	{
		int			j = (int) (rng_next() % (uint64_t) (i + 1));
		int32_t		t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int s = 0; s < N_SEQS; s++)
	{
		for (int j = 0; j < in->max_blocks; j++)
			in->bt[s][j] = perm[s * in->max_blocks + j];
		in->q[s] = malloc(sizeof(float) * seq_len[s] * qrow(g));
		in->k[s] = malloc(sizeof(float) * seq_len[s] * kvrow(g));
		in->v[s] = malloc(sizeof(float) * seq_len[s] * kvrow(g));
		for (size_t i = 0; i < seq_len[s] * qrow(g); i++)
			in->q[s][i] = rnd(1.5f);
		for (size_t i = 0; i < seq_len[s] * kvrow(g); i++)
		{
			in->k[s][i] = rnd(1.5f);
			in->v[s][i] = rnd(1.0f);
		}
	}
}

static void
free_inputs(inputs *in)
{
	for (int s = 0; s < N_SEQS; s++)
	{
		free(in->q[s]);
		free(in->k[s]);
		free(in->v[s]);
	}
}

static void
free_result(result *r)
{
	for (int s = 0; s < N_SEQS; s++)
	{
		free(r->out[s]);
		free(r->qr[s]);
	}
	if (r->b)
		r->b->ops->destroy(r->b);
	memset(r, 0, sizeof(*r));
}

/*
 * Run the plan through rope_store_kv + attention(window) on a fresh CPU
 * backend (threads, impl; single: every row in the one-token order;
 * split_keys > 0: split decode rows of that many keys or more over the
 * threads).  Returns 0, or -1 after printing the backend's error.
 */
/* Soft-cap and RoPE options of the runs (0 / NULL: attention and rope_store_kv). */
static float run_softcap;
static const llm_rope_opts *run_rope;

static int
run_split(const inputs *in, const plan *pl, int window, int threads, int impl, bool single, int split_keys,
		  result *r)
{
	const shape *g = in->g;
	llm_kv_geometry geo = {1, g->n_kv, g->hd, g->bs, MAX_BLOCKS, in->kv_dtype, NULL, 0, 0};
	char		err[256];
	int			ci = 0;

	memset(r, 0, sizeof(*r));
	r->b = llm_backend_cpu_create(threads, err, sizeof(err));
	if (r->b == NULL)
	{
		printf("# backend: %s\n", err);
		return -1;
	}
	if ((impl != LLM_IMPL_BEST && llm_backend_cpu_set_impl(r->b, impl) != 0) || r->b->ops->kv_init(r->b, &geo) != 0 ||
		(split_keys > 0 && llm_backend_cpu_set_split_keys(r->b, split_keys) != 0))
	{
		printf("# backend setup: %s\n", r->b->ops->last_error(r->b));
		return -1;
	}
	for (int s = 0; s < N_SEQS; s++)
	{
		r->out[s] = calloc((size_t) seq_len[s] * qrow(g), sizeof(float));
		r->qr[s] = calloc((size_t) seq_len[s] * qrow(g), sizeof(float));
	}
	for (int st = 0; st < pl->n_steps; st++)
	{
		int			ns = pl->per_step[st],
					nt = 0;
		int32_t		tok[MAX_TOKENS],
					pos[MAX_TOKENS],
					slot[MAX_TOKENS],
					sstart[N_SEQS + 1],
					kvlen[N_SEQS],
					btab[N_SEQS * MAX_BLOCKS];
		float	   *q,
				   *k,
				   *v,
				   *o;
		llm_step_desc d;
		int			rc = 0;

		for (int c = 0; c < ns; c++)
		{
			const chunk *ch = &pl->chunks[ci + c];

			sstart[c] = nt;
			kvlen[c] = ch->to;
			memcpy(btab + (size_t) c * in->max_blocks, in->bt[ch->seq], sizeof(int32_t) * in->max_blocks);
			for (int p = ch->from; p < ch->to; p++, nt++)
			{
				tok[nt] = 0;
				pos[nt] = p;
				slot[nt] = in->bt[ch->seq][p / g->bs] * g->bs + p % g->bs;
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
		d.block_tables = btab;
		d.max_blocks_per_seq = in->max_blocks;
		q = malloc(sizeof(float) * nt * qrow(g));
		k = malloc(sizeof(float) * nt * kvrow(g));
		v = malloc(sizeof(float) * nt * kvrow(g));
		o = malloc(sizeof(float) * nt * qrow(g));
		for (int c = 0, t = 0; c < ns; c++)
		{
			const chunk *ch = &pl->chunks[ci + c];

			for (int p = ch->from; p < ch->to; p++, t++)
			{
				memcpy(q + t * qrow(g), in->q[ch->seq] + p * qrow(g), sizeof(float) * qrow(g));
				memcpy(k + t * kvrow(g), in->k[ch->seq] + p * kvrow(g), sizeof(float) * kvrow(g));
				memcpy(v + t * kvrow(g), in->v[ch->seq] + p * kvrow(g), sizeof(float) * kvrow(g));
			}
		}
		if (r->b->ops->begin_step(r->b, &d) != 0)
			rc = -1;
		if (rc == 0 && single)
		{
			uint8_t		flags[MAX_TOKENS];

			memset(flags, 1, sizeof(flags));
			rc = llm_backend_cpu_set_single_rows(r->b, flags);
		}
		if (rc == 0)
			rc = run_rope ? r->b->ops->rope_store_kv_opts(r->b, 0, q, k, v, g->n_heads, run_rope) :
				r->b->ops->rope_store_kv(r->b, 0, q, k, v, g->n_heads, 10000.0f);
		if (rc == 0)
			rc = run_softcap > 0.0f ?
				r->b->ops->attention_softcap(r->b, 0, q, o, g->n_heads, 1.0f / sqrtf((float) g->hd), window,
											 run_softcap) :
				r->b->ops->attention(r->b, 0, q, o, g->n_heads, 1.0f / sqrtf((float) g->hd), window);
		if (rc != 0)
			printf("# step %d: %s\n", st, r->b->ops->last_error(r->b));
		for (int c = 0, t = 0; rc == 0 && c < ns; c++)
		{
			const chunk *ch = &pl->chunks[ci + c];

			for (int p = ch->from; p < ch->to; p++, t++)
			{
				memcpy(r->out[ch->seq] + p * qrow(g), o + t * qrow(g), sizeof(float) * qrow(g));
				memcpy(r->qr[ch->seq] + p * qrow(g), q + t * qrow(g), sizeof(float) * qrow(g));
			}
		}
		free(q);
		free(k);
		free(v);
		free(o);
		if (rc != 0)
			return -1;
		ci += ns;
	}
	return 0;
}

static int
run(const inputs *in, const plan *pl, int window, int threads, int impl, bool single, result *r)
{
	return run_split(in, pl, window, threads, impl, single, 0, r);
}

/* Value d of the cached row of (global slot, KV head) in a layer's array. */
static double
kv_value(const inputs *in, const uint8_t *arr, size_t slot, int kv_head, int d)
{
	const shape *g = in->g;
	size_t		row = llm_kv_row_index((int32_t) (slot / g->bs), (int) (slot % g->bs), kv_head, g->n_kv, g->bs);

	return llm_kv_value(arr + row * llm_kv_row_bytes(in->kv_dtype, g->hd), in->kv_dtype, d);
}

/*
 * Worst error of r's outputs against a double-precision softmax over keys
 * lo..p from the cache, relative to 2^-11 sum p|v| + 2e-5 (the fp16 rounding
 * of the probabilities); <= 1 passes.  With window 1, *v1_mismatch counts
 * outputs that differ at all from the token's own V row in the cache.
 */
static double
check_reference(const inputs *in, const result *r, int window, size_t *v1_mismatch)
{
	const shape *g = in->g;
	const uint8_t *K = llm_backend_cpu_kv(r->b, 0, false);
	const uint8_t *V = llm_backend_cpu_kv(r->b, 0, true);
	const int	group = g->n_heads / g->n_kv;
	double		worst = 0;
	double		sc[128],
				o[256],
				oabs[256];

	*v1_mismatch = 0;
	for (int s = 0; s < N_SEQS; s++)
		for (int p = 0; p < seq_len[s]; p++)
			for (int h = 0; h < g->n_heads; h++)
			{
				int			kvh = h / group,
							lo = window > 0 && p + 1 > window ? p + 1 - window : 0;
				double		mx = -INFINITY,
							sum = 0;
				float		qh[256];
				const float *got = r->out[s] + (size_t) p * qrow(g) + (size_t) h * g->hd;

				for (int d = 0; d < g->hd; d++)
					qh[d] = llm_fp16_to_fp32(llm_fp32_to_fp16(r->qr[s][(size_t) p * qrow(g) + (size_t) h * g->hd + d]));
				for (int j = lo; j <= p; j++)
				{
					size_t		slot = (size_t) in->bt[s][j / g->bs] * g->bs + j % g->bs;
					double		dot = 0;

					for (int d = 0; d < g->hd; d++)
						dot += (double) qh[d] * kv_value(in, K, slot, kvh, d);
					sc[j] = dot / sqrt((double) g->hd);
					mx = fmax(mx, sc[j]);
				}
				memset(o, 0, sizeof(o));
				memset(oabs, 0, sizeof(oabs));
				for (int j = lo; j <= p; j++)
				{
					size_t		slot = (size_t) in->bt[s][j / g->bs] * g->bs + j % g->bs;
					double		e = exp(sc[j] - mx);

					sum += e;
					for (int d = 0; d < g->hd; d++)
					{
						double		vv = kv_value(in, V, slot, kvh, d);

						o[d] += e * vv;
						oabs[d] += e * fabs(vv);
					}
				}
				for (int d = 0; d < g->hd; d++)
				{
					double		bound = 0x1p-11 * oabs[d] / sum + 2e-5;

					worst = fmax(worst, fabs(got[d] - o[d] / sum) / bound);
				}
				if (window == 1)
				{
					size_t		slot = (size_t) in->bt[s][p / g->bs] * g->bs + p % g->bs;

					for (int d = 0; d < g->hd; d++)
						if (got[d] != (float) kv_value(in, V, slot, kvh, d))
							(*v1_mismatch)++;
				}
			}
	return worst;
}

static bool
same_result(const inputs *in, const result *a, const result *b)
{
	for (int s = 0; s < N_SEQS; s++)
		if (!same_bits(a->out[s], b->out[s], (size_t) seq_len[s] * qrow(in->g)))
			return false;
	return true;
}

/* both prompts in one step */
static const chunk one_c[] = {{0, 0, 70}, {1, 0, 45}};
static const int one_n[] = {2};
static const plan one_step = {one_c, one_n, 1};

/* chunked and interleaved: chunk edges inside and outside the windows, a one-token step */
static const chunk many_c[] = {{1, 0, 3}, {0, 0, 17},
{0, 17, 18},
{1, 3, 30}, {0, 18, 51},
{0, 51, 70}, {1, 30, 45}};
static const int many_n[] = {2, 1, 2, 2};
static const plan chunked = {many_c, many_n, 4};

static void
test_shape(const shape *g, int kv_dtype)
{
	static const int windows[] = {1, 5, 16, 17, 33, 64};
	const int	simd = llm_cpu_has_avx2() ? LLM_IMPL_AVX2 : LLM_IMPL_SCALAR;
	inputs		in;
	char		name[80];

	snprintf(name, sizeof(name), "%s cache, heads %d:%d hd %d block %d", kv_dtype == LLM_KV_Q8_0 ? "q8_0" : "f16",
			 g->n_heads, g->n_kv, g->hd, g->bs);
	make_inputs(&in, g);
	in.kv_dtype = kv_dtype;
	for (size_t wi = 0; wi < sizeof(windows) / sizeof(windows[0]); wi++)
	{
		int			w = windows[wi];
		result		r1,
					r2,
					r3,
					r4,
					r5;
		int			rc1 = run(&in, &one_step, w, 2, LLM_IMPL_BEST, false, &r1),
					rc2 = run(&in, &chunked, w, 1, LLM_IMPL_SCALAR, false, &r2),
					rc3 = run(&in, &one_step, w, 2, simd, true, &r3),
					rc4 = run(&in, &chunked, w, 2, LLM_IMPL_SCALAR, true, &r4),
					rc5 = run_split(&in, &chunked, w, 2, simd, true, 1, &r5);

		if (CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0 && rc5 == 0, "%s, window %d: steps run", name, w))
		{
			size_t		mis1,
						mis3;
			double		e1 = check_reference(&in, &r1, w, &mis1),
						e3 = check_reference(&in, &r3, w, &mis3);

			CHECK(e1 <= 1.0 && e3 <= 1.0, "%s, window %d: vs double reference over the window's keys "
				  "(max err / bound %.3f, one-token order %.3f <= 1)", name, w, e1, e3);
			if (w == 1)
				CHECK(mis1 == 0 && mis3 == 0, "%s, window 1: output is the token's own V row "
					  "(%zu, %zu values differ)", name, mis1, mis3);
			CHECK(same_result(&in, &r1, &r2), "%s, window %d: one step (best kernels, 2 threads) == "
				  "chunked steps (scalar, 1 thread), bit for bit", name, w);
			CHECK(same_result(&in, &r3, &r4), "%s, window %d, one-token order: one step (%s) == "
				  "chunked steps (scalar), bit for bit", name, w, simd == LLM_IMPL_AVX2 ? "AVX2" : "scalar");
			CHECK(same_result(&in, &r5, &r4), "%s, window %d, one-token order: chunked steps with lone "
				  "decode rows split over 2 threads (%s) == chunked steps (scalar), bit for bit", name, w,
				  simd == LLM_IMPL_AVX2 ? "AVX2" : "scalar");
		}
		free_result(&r1);
		free_result(&r2);
		free_result(&r3);
		free_result(&r4);
		free_result(&r5);
	}
	{
		result		r0,
					rw;
		int			rc0 = run(&in, &chunked, 0, 2, LLM_IMPL_BEST, false, &r0),
					rcw = run(&in, &chunked, 70, 2, LLM_IMPL_BEST, false, &rw);

		CHECK(rc0 == 0 && rcw == 0 && same_result(&in, &r0, &rw),
			  "%s: window 70 (every position) bit-identical to window 0", name);
		free_result(&r0);
		free_result(&rw);
	}
	/* soft-capped attention after RoPE with options */
	{
		float		ff[64];
		llm_rope_opts ro = {LLM_ROPE_NEOX, g->hd / 2, 10000.0f, 0.5f, 1.25f, NULL};
		result		r0,
					r1,
					r2,
					r3,
					r4,
					r5;
		int			rc0 = run(&in, &chunked, 17, 2, LLM_IMPL_BEST, false, &r0),
					rc1,
					rc2,
					rc3,
					rc4,
					rc5;
		llm_backend *fb;
		char		err[128];

		/* the factors as a backend vector (the CPU backend's load_vector is a copy) */
		for (int i = 0; i < g->hd / 4; i++)
			ff[i] = 1.0f + (float) i * 0.37f;
		fb = llm_backend_cpu_create(1, err, sizeof(err));
		ro.freq_factors = fb ? fb->ops->load_vector(fb, ff, (size_t) g->hd / 4) : NULL;
		run_softcap = 0.8f;
		run_rope = &ro;
		rc1 = run(&in, &one_step, 17, 2, LLM_IMPL_BEST, false, &r1);
		rc2 = run(&in, &chunked, 17, 1, LLM_IMPL_SCALAR, false, &r2);
		rc3 = run(&in, &one_step, 17, 2, simd, true, &r3);
		rc4 = run(&in, &chunked, 17, 2, LLM_IMPL_SCALAR, true, &r4);
		rc5 = run_split(&in, &chunked, 17, 2, simd, true, 1, &r5);
		run_softcap = 0.0f;
		run_rope = NULL;
		if (CHECK(ro.freq_factors && rc0 == 0 && rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0 && rc5 == 0,
				  "%s, soft-cap 0.8, RoPE options: steps run", name))
		{
			CHECK(same_result(&in, &r1, &r2), "%s, soft-capped: one step (best kernels) == chunked steps "
				  "(scalar), bit for bit", name);
			CHECK(same_result(&in, &r3, &r4) && same_result(&in, &r5, &r4), "%s, soft-capped, one-token order: "
				  "one step (%s) and split decode rows == chunked steps (scalar), bit for bit", name,
				  simd == LLM_IMPL_AVX2 ? "AVX2" : "scalar");
			CHECK(!same_result(&in, &r2, &r0), "%s: the soft-cap and the RoPE options change the outputs", name);
		}
		if (fb)
		{
			fb->ops->free_f32(fb, (float *) ro.freq_factors);
			fb->ops->destroy(fb);
		}
		free_result(&r0);
		free_result(&r1);
		free_result(&r2);
		free_result(&r3);
		free_result(&r4);
		free_result(&r5);
	}
	free_inputs(&in);
}

static void
test_negative_window(void)
{
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(1, err, sizeof(err));
	llm_kv_geometry geo = {1, 1, 16, 4, 4, LLM_KV_F16, NULL, 0, 0};
	int32_t		tok[1] = {0},
				pos[1] = {0},
				slot[1] = {4},
				ss[2] = {0, 1},
				kvl[1] = {1},
				bt[1] = {1};
	llm_step_desc d = {1, 1, tok, pos, slot, ss, kvl, bt, 1, NULL, 0, NULL, NULL, NULL, NULL};
	float		q[16] = {0},
				o[16];

	if (!CHECK(b != NULL, "backend for the error check: %s", b ? "ok" : err))
		return;
	CHECK(b->ops->kv_init(b, &geo) == 0 && b->ops->begin_step(b, &d) == 0, "one-token step");
	CHECK(b->ops->attention(b, 0, q, o, 1, 0.25f, -1) == -1 && strstr(b->ops->last_error(b), "window"),
		  "attention rejects window -1: %s", b->ops->last_error(b));
	b->ops->destroy(b);
}

int
main(void)
{
	static const shape shapes[] = {
		{4, 4, 64, 16},			/* multi-head */
		{6, 2, 64, 4},			/* GQA 3, small blocks */
		{8, 1, 32, 8},			/* multi-query, head_dim 32 */
		{4, 2, 128, 16},		/* GQA 2, head_dim 128 */
	};
	uint64_t	seeds[2] = {20240611, 0};
	const char *env = getenv("LLM_TEST_SEED");

	seeds[1] = env ? strtoull(env, NULL, 10) : (uint64_t) time(NULL) ^ ((uint64_t) clock() << 20);
	for (int si = 0; si < 2; si++)
	{
		printf("# seed %llu%s\n", (unsigned long long) seeds[si], si == 1 ? " (fresh)" : "");
		rng_state = seeds[si];
		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		{
			test_shape(&shapes[i], LLM_KV_F16);
			test_shape(&shapes[i], LLM_KV_Q8_0);
		}
	}
	test_negative_window();
	return unit_done();
}
