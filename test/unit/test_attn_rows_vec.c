/*
 * test_attn_rows_vec.c — attention_rows of the VNNI implementation (its
 * AVX-512 twin of elementwise.c's per-(row, head) kernel) against the
 * scalar implementation, bit for bit, on steps where the twin's vector
 * paths run: sequences of 16 keys and more (the 16-key score blocks and
 * their transposing fold) with tails of 1-15 keys, several sequences in
 * one step, grouped-query heads, head sizes 16, 32, 64 and 48 (not a
 * power of two), sequences of 1 and 15 rows; and the cases the twin hands
 * to the scalar code (causal, windowed, soft-capped) the same bits too.  Each output is
 * also checked against a double-precision reference within 1e-5, so a
 * wrong fold order that happened to agree with itself cannot pass.
 * Counted as skipped on a CPU without AVX512F/VL/VNNI.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/dispatch.h"
#include "unit.h"

#define MAX_SEQS 4

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float
rng_uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float) ((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

typedef struct shape
{
	int			heads,
				kv,
				hd,
				n_seqs,
				len[MAX_SEQS];
} shape;

/* The double reference of query row t, head h (every row of its sequence seen unless causal/window). */
static void
attn_ref(const float *q, const float *k, const float *v, const shape *sh, const int32_t *sstart, int s,
		 int t, int h, const llm_attn_opts *o, double *out)
{
	const int	g = h / (sh->heads / sh->kv);
	const int	u0 = sstart[s],
				u1 = sstart[s + 1];
	double	   *sc = malloc(sizeof(double) * (size_t) (u1 - u0));
	double		mx = -INFINITY,
				sum = 0;

	for (int i = 0; i < sh->hd; i++)
		out[i] = 0;
	for (int u = u0; u < u1; u++)
	{
		double		dot = 0;
		int			d = (u - u0) - (t - u0);

		sc[u - u0] = NAN;
		if ((o->causal && d > 0) || (o->window > 0 && abs(d) >= o->window))
			continue;
		for (int i = 0; i < sh->hd; i++)
			dot += (double) q[((size_t) t * sh->heads + h) * sh->hd + i] * k[((size_t) u * sh->kv + g) * sh->hd + i];
		dot *= o->scale;
		if (o->softcap > 0)
			dot = tanh(dot / o->softcap) * o->softcap;
		sc[u - u0] = dot;
		mx = fmax(mx, dot);
	}
	for (int u = u0; u < u1; u++)
		if (!isnan(sc[u - u0]))
		{
			double		e = exp(sc[u - u0] - mx);

			sum += e;
			for (int i = 0; i < sh->hd; i++)
				out[i] += e * v[((size_t) u * sh->kv + g) * sh->hd + i];
		}
	for (int i = 0; i < sh->hd; i++)
		out[i] /= sum;
	free(sc);
}

/* attention_rows of sh under opts o with implementation impl into out; false if the backend refused. */
static bool
run_impl(int impl, int threads, const shape *sh, const llm_step_desc *step, const float *q, const float *k,
		 const float *v, const llm_attn_opts *o, float *out)
{
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(threads, err, sizeof(err));
	int			n_blocks = 0;
	bool		ok;

	for (int s = 0; s < sh->n_seqs; s++)
		n_blocks += (sh->len[s] + 15) / 16;
	{
		llm_kv_geometry g = {1, sh->kv, sh->hd, 16, n_blocks, LLM_KV_F16, NULL, 0, 0};

		ok = b != NULL && llm_backend_cpu_set_impl(b, impl) == 0 && b->ops->kv_init(b, &g) == 0 &&
			b->ops->begin_step(b, step) == 0 &&
			b->ops->attention_rows(b, step, q, k, v, out, sh->heads, sh->kv, sh->hd, o) == 0;
	}
	if (b != NULL)
		b->ops->destroy(b);
	return ok;
}

static void
test_shape(const shape *sh, const char *opts_name, const llm_attn_opts *o)
{
	int32_t		sstart[MAX_SEQS + 1],
				kvlen[MAX_SEQS];
	int			tok_n = 0,
				max_blocks = 0;

	sstart[0] = 0;
	for (int s = 0; s < sh->n_seqs; s++)
	{
		sstart[s + 1] = sstart[s] + sh->len[s];
		kvlen[s] = sh->len[s];
		if ((sh->len[s] + 15) / 16 > max_blocks)
			max_blocks = (sh->len[s] + 15) / 16;
	}
	tok_n = sstart[sh->n_seqs];
	{
		int32_t    *tok = calloc(tok_n, sizeof(int32_t)),
				   *pos = calloc(tok_n, sizeof(int32_t)),
				   *slot = calloc(tok_n, sizeof(int32_t)),
				   *btab = calloc((size_t) sh->n_seqs * max_blocks, sizeof(int32_t));
		const size_t nq = (size_t) tok_n * sh->heads * sh->hd,
					nk = (size_t) tok_n * sh->kv * sh->hd;
		float	   *q = malloc(nq * sizeof(float)),
				   *k = malloc(nk * sizeof(float)),
				   *v = malloc(nk * sizeof(float)),
				   *o_scalar = calloc(nq, sizeof(float)),
				   *o_vec = calloc(nq, sizeof(float)),
				   *o_avx2 = calloc(nq, sizeof(float));
		double	   *ref = malloc(sizeof(double) * sh->hd);
		llm_step_desc step;
		int			next_block = 0;
		double		worst = 0;
		bool		vec_ok,
					scalar_ok;

		for (int s = 0; s < sh->n_seqs; s++)
		{
			for (int b = 0; b < (sh->len[s] + 15) / 16; b++)
				btab[s * max_blocks + b] = next_block++;
			for (int t = sstart[s]; t < sstart[s + 1]; t++)
			{
				pos[t] = t - sstart[s];
				slot[t] = btab[s * max_blocks + pos[t] / 16] * 16 + pos[t] % 16;
			}
		}
		memset(&step, 0, sizeof(step));
		step.n_tokens = tok_n;
		step.n_seqs = sh->n_seqs;
		step.token_ids = tok;
		step.positions = pos;
		step.slots = slot;
		step.seq_start = sstart;
		step.seq_kv_len = kvlen;
		step.block_tables = btab;
		step.max_blocks_per_seq = max_blocks;
		for (size_t i = 0; i < nq; i++)
			q[i] = rng_uniform() * 2.0f;
		for (size_t i = 0; i < nk; i++)
		{
			k[i] = rng_uniform() * 2.0f;
			v[i] = rng_uniform();
		}
		scalar_ok = run_impl(LLM_IMPL_SCALAR, 1, sh, &step, q, k, v, o, o_scalar);
		vec_ok = run_impl(LLM_IMPL_AVX512VNNI, 2, sh, &step, q, k, v, o, o_vec);
		/* the AVX2 implementation (an AVX2-only host's path) runs the scalar kernel: the same bits */
		CHECK(run_impl(LLM_IMPL_AVX2, 2, sh, &step, q, k, v, o, o_avx2) &&
			  memcmp(o_scalar, o_avx2, nq * sizeof(float)) == 0,
			  "attention_rows %s, head size %d: AVX2 implementation == scalar bit for bit", opts_name, sh->hd);
		for (int s = 0; s < sh->n_seqs; s++)
			for (int t = sstart[s]; t < sstart[s + 1]; t++)
				for (int h = 0; h < sh->heads; h++)
				{
					attn_ref(q, k, v, sh, sstart, s, t, h, o, ref);
					for (int i = 0; i < sh->hd; i++)
						worst = fmax(worst, fabs(o_vec[((size_t) t * sh->heads + h) * sh->hd + i] - ref[i]));
				}
		{
			char		lens[64];
			int			off = 0;

			for (int s = 0; s < sh->n_seqs; s++)
				off += snprintf(lens + off, sizeof(lens) - off, "%s%d", s ? "+" : "", sh->len[s]);
			CHECK(scalar_ok && vec_ok && memcmp(o_scalar, o_vec, nq * sizeof(float)) == 0,
				  "attention_rows %s, head size %d, %d/%d heads, rows %s: AVX-512 == scalar bit for bit",
				  opts_name, sh->hd, sh->heads, sh->kv, lens);
			CHECK(vec_ok && worst <= 1e-5, "attention_rows %s, head size %d, rows %s: within 1e-5 of double "
				  "(max err %.2e)", opts_name, sh->hd, lens, worst);
		}
		free(tok);
		free(pos);
		free(slot);
		free(btab);
		free(q);
		free(k);
		free(v);
		free(o_scalar);
		free(o_vec);
		free(o_avx2);
		free(ref);
	}
}

int
main(void)
{
	const shape shapes[] = {
		{12, 12, 32, 3, {115, 16, 37}},	/* all-MiniLM-L6-v2's heads */
		{4, 2, 64, 2, {33, 17}},
		{2, 1, 16, 2, {31, 48}},
		{3, 3, 48, 1, {50}},
		{2, 2, 16, 3, {1, 15, 16}},	/* under one score block, and exactly one */
	};
	const struct
	{
		const char *name;
		llm_attn_opts o;
	}			opts[] = {
		{"bidirectional", {0.17677669f, 0.0f, 0, false}},
		{"causal", {0.17677669f, 0.0f, 0, true}},
		{"bidirectional, window 5", {0.25f, 0.0f, 5, false}},
		{"bidirectional, soft-cap 1.5", {0.5f, 1.5f, 0, false}},
	};

	if (!llm_cpu_has_avx512vnni())
	{
		SKIP("attention_rows AVX-512 twin: this CPU lacks AVX512F/VL/VNNI");
		return unit_done();
	}
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		test_shape(&shapes[s], opts[0].name, &opts[0].o);
	for (size_t c = 1; c < sizeof(opts) / sizeof(opts[0]); c++)
		test_shape(&shapes[0], opts[c].name, &opts[c].o);
	return unit_done();
}
