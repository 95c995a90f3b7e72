/*
 * test_graph_opts.c — the backend ops behind the graph options no model in
 * use needs (backend.h layernorm, rope_rows, attention_rows), on the CPU
 * backend, against scalar references written here in double precision,
 * and the option logic of the graph builder (model_graph.c) on a model
 * built in memory.
 *
 *  - rope_rows: NORMAL and NEOX on the whole head without factors
 *    bit-identical to what rope_store_kv_mode does to q on the same step;
 *    partial rotation (n_rot < head_dim) and frequency factors within 2e-6
 *    (of the head's norm) of a reference rotating in double with ggml's
 *    float angles; the values past n_rot unchanged bit for bit; factors
 *    of 1 bit-identical to none;
 *  - layernorm: within 1e-5 of a double LayerNorm, with and without bias;
 *  - attention_rows: causal, bidirectional, windowed (causal and
 *    bidirectional) and soft-capped, two sequences in one step with GQA,
 *    within 1e-5 of a double reference; a causal first row (and any row
 *    with window 1) is its own V row exactly; bidirectional rows see later
 *    keys (changing a later key changes an earlier row's output), causal
 *    rows do not.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "unit.h"

enum
{
	HEADS = 4,
	KV = 2,
	HD = 16,
	BS = 16,
	BLOCKS = 8,
	LEN0 = 7,					/* rows of sequence 0 */
	LEN1 = 5,					/* rows of sequence 1 */
	TOK = LEN0 + LEN1
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float
rng_uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float) ((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* The step: two whole sequences (positions 0.. of each), blocks 0.. and 4... */
static int32_t tok[TOK],
			pos[TOK],
			slot[TOK],
			sstart[3] = {0, LEN0, TOK},
			kvlen[2] = {LEN0, LEN1},
			btab[2 * 4] = {0, 1, 2, 3, 4, 5, 6, 7};
static llm_step_desc step;

static void
make_step(void)
{
	for (int s = 0; s < 2; s++)
		for (int t = sstart[s]; t < sstart[s + 1]; t++)
		{
			pos[t] = t - sstart[s];
			slot[t] = btab[s * 4 + pos[t] / BS] * BS + pos[t] % BS;
		}
	memset(&step, 0, sizeof(step));
	step.n_tokens = TOK;
	step.n_seqs = 2;
	step.token_ids = tok;
	step.positions = pos;
	step.slots = slot;
	step.seq_start = sstart;
	step.seq_kv_len = kvlen;
	step.block_tables = btab;
	step.max_blocks_per_seq = 4;
}

static void
fill(float *x, size_t n, float amp)
{
	for (size_t i = 0; i < n; i++)
		x[i] = rng_uniform() * amp;
}

/*
 * Reference RoPE of one head at position p: the angle of pair i built in
 * float as ggml (theta *= powf(base, -2/n_rot), divided by the factor),
 * the rotation in double.
 */
static void
rope_ref(const float *in, double *out, int p, float base, int n_rot, const float *ff, int mode)
{
	const float scale = powf(base, -2.0f / (float) n_rot);
	float		theta = (float) p;

	for (int i = 0; i < HD; i++)
		out[i] = in[i];
	for (int i = 0; i < n_rot / 2; i++)
	{
		double		a = ff ? theta / ff[i] : theta;
		int			i0 = mode == LLM_ROPE_NEOX ? i : 2 * i,
					i1 = mode == LLM_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;

		out[i0] = in[i0] * cos(a) - in[i1] * sin(a);
		out[i1] = in[i0] * sin(a) + in[i1] * cos(a);
		theta *= scale;
	}
}

static void
test_rope(llm_backend *b)
{
	const size_t nq = (size_t) TOK * HEADS * HD;
	float	   *q = malloc(nq * sizeof(float)),
			   *qa = malloc(nq * sizeof(float)),
			   *qb = malloc(nq * sizeof(float)),
			   *k = malloc((size_t) TOK * KV * HD * sizeof(float)),
			   *v = malloc((size_t) TOK * KV * HD * sizeof(float));
	float		ff[HD / 2],
				ones[HD / 2];
	const float base = 10000.0f;

	fill(q, nq, 2.0f);
	fill(k, (size_t) TOK * KV * HD, 1.0f);
	fill(v, (size_t) TOK * KV * HD, 1.0f);
	for (int i = 0; i < HD / 2; i++)
	{
		ff[i] = 1.0f + (float) i * 0.75f;
		ones[i] = 1.0f;
	}

	/* whole head, no factors: the values of the cached path's op */
	for (int m = 0; m < 2; m++)
	{
		int			mode = m ? LLM_ROPE_NEOX : LLM_ROPE_NORMAL;
		const char *mn = m ? "NEOX" : "NORMAL";
		float	   *kc = malloc((size_t) TOK * KV * HD * sizeof(float));
		int			rc;

		memcpy(qa, q, nq * sizeof(float));
		memcpy(qb, q, nq * sizeof(float));
		memcpy(kc, k, (size_t) TOK * KV * HD * sizeof(float));
		rc = b->ops->rope_store_kv_mode(b, 0, qa, kc, v, HEADS, base, mode);
		rc |= b->ops->rope_rows(b, &step, qb, HEADS, HD, base, HD, NULL, mode);
		CHECK(rc == 0 && memcmp(qa, qb, nq * sizeof(float)) == 0,
			  "rope_rows %s, whole head: bit-identical to rope_store_kv_mode's q", mn);
		free(kc);
	}

	/* partial rotation, with and without factors, both modes, against the reference */
	for (int c = 0; c < 8; c++)
	{
		int			mode = (c & 1) ? LLM_ROPE_NEOX : LLM_ROPE_NORMAL;
		int			n_rot = (c & 2) ? HD / 2 : HD;
		const float *fac = (c & 4) ? ff : NULL;
		double		worst = 0.0;
		bool		tail_same = true;
		int			rc;

		memcpy(qa, q, nq * sizeof(float));
		rc = b->ops->rope_rows(b, &step, qa, HEADS, HD, base, n_rot, fac, mode);
		for (int t = 0; t < TOK; t++)
			for (int h = 0; h < HEADS; h++)
			{
				const float *in = q + ((size_t) t * HEADS + h) * HD;
				const float *got = qa + ((size_t) t * HEADS + h) * HD;
				double		ref[HD],
							norm = 0.0;

				rope_ref(in, ref, pos[t], base, n_rot, fac, mode);
				for (int i = 0; i < HD; i++)
					norm += (double) in[i] * in[i];
				norm = sqrt(norm);
				for (int i = 0; i < HD; i++)
				{
					double		e = fabs(got[i] - ref[i]) / norm;

					if (e > worst)
						worst = e;
					if (i >= n_rot && memcmp(&got[i], &in[i], sizeof(float)) != 0)
						tail_same = false;
				}
			}
		CHECK(rc == 0 && worst <= 2e-6, "rope_rows %s, n_rot %d, %s factors: vs reference (max err %.2e of the head norm)",
			  mode == LLM_ROPE_NEOX ? "NEOX" : "NORMAL", n_rot, fac ? "with" : "no", worst);
		if (n_rot < HD)
			CHECK(tail_same, "rope_rows %s, n_rot %d: values past n_rot unchanged",
				  mode == LLM_ROPE_NEOX ? "NEOX" : "NORMAL", n_rot);
	}

	/* factors of 1 are no factors; other factors change the result */
	memcpy(qa, q, nq * sizeof(float));
	memcpy(qb, q, nq * sizeof(float));
	b->ops->rope_rows(b, &step, qa, HEADS, HD, base, HD, ones, LLM_ROPE_NEOX);
	b->ops->rope_rows(b, &step, qb, HEADS, HD, base, HD, NULL, LLM_ROPE_NEOX);
	CHECK(memcmp(qa, qb, nq * sizeof(float)) == 0, "rope_rows: factors of 1 bit-identical to none");
	memcpy(qa, q, nq * sizeof(float));
	b->ops->rope_rows(b, &step, qa, HEADS, HD, base, HD, ff, LLM_ROPE_NEOX);
	CHECK(memcmp(qa, qb, nq * sizeof(float)) != 0, "rope_rows: factors other than 1 change the rotation");
	free(q);
	free(qa);
	free(qb);
	free(k);
	free(v);
}

static void
test_layernorm(llm_backend *b)
{
	enum
	{
		N = 5, DIM = 48
	};
	float		x[N * DIM],
				w[DIM],
				bias[DIM],
				out[N * DIM],
				out_nb[N * DIM];
	double		worst = 0.0,
				worst_nb = 0.0;
	int			rc;

	fill(x, N * DIM, 3.0f);
	for (int i = 0; i < N * DIM; i++)
		x[i] += 0.5f;			/* a mean away from 0 */
	fill(w, DIM, 1.0f);
	fill(bias, DIM, 0.5f);
	rc = b->ops->layernorm(b, x, w, bias, out, N, DIM, 1e-5f);
	rc |= b->ops->layernorm(b, x, w, NULL, out_nb, N, DIM, 1e-5f);
	for (int t = 0; t < N; t++)
	{
		double		mean = 0.0,
					var = 0.0;

		for (int i = 0; i < DIM; i++)
			mean += x[t * DIM + i];
		mean /= DIM;
		for (int i = 0; i < DIM; i++)
			var += (x[t * DIM + i] - mean) * (x[t * DIM + i] - mean);
		var /= DIM;
		for (int i = 0; i < DIM; i++)
		{
			double		yn = (x[t * DIM + i] - mean) / sqrt(var + 1e-5) * w[i];

			worst = fmax(worst, fabs(out[t * DIM + i] - (yn + bias[i])));
			worst_nb = fmax(worst_nb, fabs(out_nb[t * DIM + i] - yn));
		}
	}
	CHECK(rc == 0 && worst <= 1e-5, "layernorm with bias vs double reference (max err %.2e)", worst);
	CHECK(rc == 0 && worst_nb <= 1e-5, "layernorm without bias vs double reference (max err %.2e)", worst_nb);
	/* in place */
	memcpy(out_nb, x, sizeof(x));
	b->ops->layernorm(b, out_nb, w, bias, out_nb, N, DIM, 1e-5f);
	CHECK(memcmp(out_nb, out, sizeof(out)) == 0, "layernorm in place == out of place");
}

/* Reference attention of row t, head h (double), under the options. */
static void
attn_ref(const float *q, const float *k, const float *v, int t, int h, const llm_attn_opts *o, double *out)
{
	int			s = t < LEN0 ? 0 : 1,
				g = h / (HEADS / KV);
	double		sc[TOK],
				mx = -INFINITY,
				sum = 0.0;

	for (int i = 0; i < HD; i++)
		out[i] = 0.0;
	for (int u = sstart[s]; u < sstart[s + 1]; u++)
	{
		int			d = pos[u] - pos[t];
		double		dot = 0.0;

		sc[u] = NAN;
		if ((o->causal && d > 0) || (o->window > 0 && abs(d) >= o->window))
			continue;
		for (int i = 0; i < HD; i++)
			dot += (double) q[((size_t) t * HEADS + h) * HD + i] * k[((size_t) u * KV + g) * HD + i];
		dot *= o->scale;
		if (o->softcap > 0)
			dot = tanh(dot / o->softcap) * o->softcap;
		sc[u] = dot;
		mx = fmax(mx, dot);
	}
	for (int u = sstart[s]; u < sstart[s + 1]; u++)
		if (!isnan(sc[u]))
		{
			double		e = exp(sc[u] - mx);

			sum += e;
			for (int i = 0; i < HD; i++)
				out[i] += e * v[((size_t) u * KV + g) * HD + i];
		}
	for (int i = 0; i < HD; i++)
		out[i] /= sum;
}

static void
test_attention(llm_backend *b)
{
	const size_t nq = (size_t) TOK * HEADS * HD,
				nk = (size_t) TOK * KV * HD;
	float	   *q = malloc(nq * sizeof(float)),
			   *k = malloc(nk * sizeof(float)),
			   *v = malloc(nk * sizeof(float)),
			   *o1 = malloc(nq * sizeof(float)),
			   *o2 = malloc(nq * sizeof(float));
	struct
	{
		const char *name;
		llm_attn_opts o;
	}			cases[] = {
		{"causal", {0.25f, 0.0f, 0, true}},
		{"bidirectional", {0.25f, 0.0f, 0, false}},
		{"causal, window 3", {0.25f, 0.0f, 3, true}},
		{"bidirectional, window 2", {0.25f, 0.0f, 2, false}},
		{"causal, soft-cap 2", {2.0f, 2.0f, 0, true}},
		{"bidirectional, soft-cap 1.5", {2.0f, 1.5f, 0, false}},
	};

	fill(q, nq, 2.0f);
	fill(k, nk, 2.0f);
	fill(v, nk, 1.0f);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
	{
		double		worst = 0.0;
		int			rc = b->ops->attention_rows(b, &step, q, k, v, o1, HEADS, KV, HD, &cases[c].o);

		for (int t = 0; t < TOK; t++)
			for (int h = 0; h < HEADS; h++)
			{
				double		ref[HD];

				attn_ref(q, k, v, t, h, &cases[c].o, ref);
				for (int i = 0; i < HD; i++)
					worst = fmax(worst, fabs(o1[((size_t) t * HEADS + h) * HD + i] - ref[i]));
			}
		CHECK(rc == 0 && worst <= 1e-5, "attention_rows %s vs double reference (max err %.2e)",
			  cases[c].name, worst);
	}

	/* the cached path's ops on the same rows: rotation, then attention over the fp16 cache */
	{
		llm_attn_opts causal = {0.25f, 0.0f, 0, true};
		float	   *qc = malloc(nq * sizeof(float)),
				   *kc = malloc(nk * sizeof(float));
		double		worst = 0.0,
					vmax = 0.0;
		int			rc;

		memcpy(qc, q, nq * sizeof(float));
		memcpy(kc, k, nk * sizeof(float));
		rc = b->ops->rope_store_kv_mode(b, 0, qc, kc, v, HEADS, 10000.0f, LLM_ROPE_NEOX);
		rc |= b->ops->attention(b, 0, qc, o1, HEADS, 0.25f, 0);
		rc |= b->ops->attention_rows(b, &step, qc, kc, v, o2, HEADS, KV, HD, &causal);
		for (size_t i = 0; i < nq; i++)
			worst = fmax(worst, fabs(o1[i] - o2[i]));
		for (size_t i = 0; i < nk; i++)
			vmax = fmax(vmax, fabs(v[i]));
		CHECK(rc == 0 && worst <= 4e-3 * vmax, "attention_rows causal == the cached attention op within fp16 rounding "
			  "(max err %.2e, |v| <= %.2f)", worst, vmax);
		free(qc);
		free(kc);
	}

	/* a causal first row, and every row with window 1, is its own V row */
	{
		llm_attn_opts causal = {0.25f, 0.0f, 0, true},
					w1 = {0.25f, 0.0f, 1, false};
		bool		own = true,
					own_w1 = true;

		b->ops->attention_rows(b, &step, q, k, v, o1, HEADS, KV, HD, &causal);
		b->ops->attention_rows(b, &step, q, k, v, o2, HEADS, KV, HD, &w1);
		for (int s = 0; s < 2; s++)
			for (int h = 0; h < HEADS; h++)
				own &= memcmp(o1 + ((size_t) sstart[s] * HEADS + h) * HD,
							  v + ((size_t) sstart[s] * KV + h / (HEADS / KV)) * HD, HD * sizeof(float)) == 0;
		for (int t = 0; t < TOK; t++)
			for (int h = 0; h < HEADS; h++)
				own_w1 &= memcmp(o2 + ((size_t) t * HEADS + h) * HD,
								 v + ((size_t) t * KV + h / (HEADS / KV)) * HD, HD * sizeof(float)) == 0;
		CHECK(own, "attention_rows causal: each sequence's first row is its own V row");
		CHECK(own_w1, "attention_rows window 1 (bidirectional): every row is its own V row");
	}

	/* a later key moves an earlier row only without the causal mask */
	{
		llm_attn_opts causal = {0.25f, 0.0f, 0, true},
					bidir = {0.25f, 0.0f, 0, false};
		float	   *k2 = malloc(nk * sizeof(float)),
				   *o3 = malloc(nq * sizeof(float)),
				   *o4 = malloc(nq * sizeof(float));
		const size_t row0 = 0,
					row_last = (size_t) (LEN0 - 1) * KV * HD;
		bool		causal_same,
					bidir_moved,
					other_seq_same;

		memcpy(k2, k, nk * sizeof(float));
		for (int i = 0; i < KV * HD; i++)
			k2[row_last + i] += 1.0f;
		b->ops->attention_rows(b, &step, q, k, v, o1, HEADS, KV, HD, &causal);
		b->ops->attention_rows(b, &step, q, k2, v, o2, HEADS, KV, HD, &causal);
		b->ops->attention_rows(b, &step, q, k, v, o3, HEADS, KV, HD, &bidir);
		b->ops->attention_rows(b, &step, q, k2, v, o4, HEADS, KV, HD, &bidir);
		causal_same = memcmp(o1 + row0, o2 + row0, (size_t) (LEN0 - 1) * HEADS * HD * sizeof(float)) == 0;
		bidir_moved = memcmp(o3 + row0, o4 + row0, (size_t) HEADS * HD * sizeof(float)) != 0;
		other_seq_same = memcmp(o3 + (size_t) LEN0 * HEADS * HD, o4 + (size_t) LEN0 * HEADS * HD,
								(size_t) LEN1 * HEADS * HD * sizeof(float)) == 0;
		CHECK(causal_same, "attention_rows causal: rows before a changed key unchanged");
		CHECK(bidir_moved, "attention_rows bidirectional: the first row sees the sequence's last key");
		CHECK(other_seq_same, "attention_rows bidirectional: the other sequence unchanged");
		free(k2);
		free(o3);
		free(o4);
	}
	free(q);
	free(k);
	free(v);
	free(o1);
	free(o2);
}

int
main(void)
{
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(1, err, sizeof(err));
	llm_kv_geometry g = {1, KV, HD, BS, BLOCKS, LLM_KV_F16, NULL, 0, 0};

	if (!CHECK(b != NULL, "CPU backend%s%s", b ? "" : ": ", b ? "" : err))
		return unit_done();
	make_step();
	if (CHECK(b->ops->layernorm && b->ops->rope_rows && b->ops->attention_rows,
			  "the CPU backend has layernorm, rope_rows and attention_rows") &&
		CHECK(b->ops->kv_init(b, &g) == 0 && b->ops->begin_step(b, &step) == 0,
			  "KV cache and a step of two whole sequences (%d and %d rows)", LEN0, LEN1))
	{
		test_rope(b);
		test_layernorm(b);
		test_attention(b);
	}
	b->ops->destroy(b);
	return unit_done();
}
