/*
 * cpu_attention.c — the CPU backend's RoPE + KV store and attention
 * (backend.h rope_store_kv, rope_store_kv_mode, rope_store_kv_opts,
 * attention, attention_softcap).
 *
 * RoPE: cos/sin per token from theta *= powf(base, -2/n_rot) (as
 * ggml_rope_cache_init, with its frequency factors, frequency scale and
 * cos/sin factor when given), one table per set of options a step uses,
 * the rotation in
 * the fused form GCC gives ggml's expressions; K and V then stored at the
 * token's slot of the layer's group (fp16 or q8_0 rows, quant.h
 * llm_kv_row_index).  Attention (quant.h llm_attn_args): Q rounded to
 * fp16, the softmax of ggml_vec_soft_max_f32, probabilities rounded to
 * fp16 and the K.Q / V.P reduction orders of llama.cpp's multi-token path
 * (tinyBLAS), or for rows marked with llm_backend_cpu_set_single_rows of
 * its one-token path (ggml_vec_dot_f16).  Work items are blocks of prompt
 * rows per KV head or one token's heads, longest first; decode rows over a
 * long context with few (token, KV head) pairs run split into pieces.
 * Which rows share an item or how a row is split never changes a result.
 */
#include "kernels/backend.h"
#include "cpu_internal.h"
#include "elementwise.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

/* The step's slots and block tables that layer's KV uses (its group's). */
static inline const int32_t *
layer_slots(const cpu_backend *cb, int layer)
{
	return cb->layer_local != NULL && cb->layer_local[layer] ? cb->slots_local : cb->slots;
}

static inline const int32_t *
layer_tables(const cpu_backend *cb, int layer)
{
	return cb->layer_local != NULL && cb->layer_local[layer] ? cb->block_tables_local : cb->block_tables;
}

typedef struct rope_job
{
	cpu_backend *cb;
	int			layer;
	float	   *q;
	float	   *k;
	const float *v;
	int			n_heads;
	float		theta_scale;
	llm_rope_opts ro;			/* mode LLM_ROPE_NONE: store only */
	float	   *cs;				/* the cos/sin table of these options */
} rope_job;

/*
 * Rotate adjacent pairs of the first n_rot values of every head of one
 * token by pos * theta_scale^i (ggml "normal" rope; cos/sin built as in
 * ggml_rope_cache_init, the rotation written with the fused multiply-adds
 * GCC produces for ggml's x0*c - x1*s and x0*s + x1*c under
 * -ffp-contract=fast).  The values n_rot..hd-1 stay (ggml's partial
 * rotation copies them).
 */
static void
rope_heads(float *x, int n_heads, int hd, int n_rot, const float *cs)
{
	for (int h = 0; h < n_heads; h++)
	{
		float	   *v = x + (size_t) h * hd;

		for (int i = 0; i < n_rot; i += 2)
		{
			float		c = cs[i],
						s = cs[i + 1];
			float		x0 = v[i],
						x1 = v[i + 1];

			v[i] = fmaf(x0, c, -(x1 * s));
			v[i + 1] = fmaf(x0, s, x1 * c);
		}
	}
}

/* The same with fmaf as an instruction rather than a libm call (same results). */
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("fma")))
static void
rope_heads_fma(float *x, int n_heads, int hd, int n_rot, const float *cs)
{
	for (int h = 0; h < n_heads; h++)
	{
		float	   *v = x + (size_t) h * hd;

		for (int i = 0; i < n_rot; i += 2)
		{
			float		c = cs[i],
						s = cs[i + 1];
			float		x0 = v[i],
						x1 = v[i + 1];

			v[i] = __builtin_fmaf(x0, c, -(x1 * s));
			v[i + 1] = __builtin_fmaf(x0, s, x1 * c);
		}
	}
}
#endif

/*
 * NEOX mode: rotate (x[i], x[i + n_rot/2]) by the angle of pair i (ggml's
 * rotate_pairs with n_offset = n_dims/2: the same expressions, hence the
 * same fused form, as the normal mode).
 */
static void
rope_heads_neox(float *x, int n_heads, int hd, int n_rot, const float *cs)
{
	const int	half = n_rot / 2;

	for (int h = 0; h < n_heads; h++)
	{
		float	   *v = x + (size_t) h * hd;

		for (int i = 0; i < half; i++)
		{
			float		c = cs[2 * i],
						s = cs[2 * i + 1];
			float		x0 = v[i],
						x1 = v[i + half];

			v[i] = fmaf(x0, c, -(x1 * s));
			v[i + half] = fmaf(x0, s, x1 * c);
		}
	}
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("fma")))
static void
rope_heads_neox_fma(float *x, int n_heads, int hd, int n_rot, const float *cs)
{
	const int	half = n_rot / 2;

	for (int h = 0; h < n_heads; h++)
	{
		float	   *v = x + (size_t) h * hd;

		for (int i = 0; i < half; i++)
		{
			float		c = cs[2 * i],
						s = cs[2 * i + 1];
			float		x0 = v[i],
						x1 = v[i + half];

			v[i] = __builtin_fmaf(x0, c, -(x1 * s));
			v[i + half] = __builtin_fmaf(x0, s, x1 * c);
		}
	}
}
#endif

/* True when the options change nothing in ggml_rope_cache_init's plain table. */
static inline bool
rope_plain(const llm_rope_opts *ro, int hd)
{
	return ro->n_rot == hd && ro->freq_factors == NULL && ro->freq_scale == 1.0f && ro->mscale == 1.0f;
}

static void
rope_table_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	rope_job   *j = p;
	cpu_backend *cb = j->cb;
	const int	hd = cb->geo.head_dim,
				n_rot = j->ro.n_rot;
	const bool	plain = rope_plain(&j->ro, hd);

	for (int64_t t = begin; t < end; t++)
	{
		float	   *cs = j->cs + (size_t) t * hd;
		float		theta = (float) cb->positions[t];

		if (plain)
			for (int i = 0; i < hd; i += 2)
			{
				cs[i] = cosf(theta);
				cs[i + 1] = sinf(theta);
				theta *= j->theta_scale;
			}
		else
			/* ggml's rope_yarn with ext_factor 0: theta / ff, times freq_scale, cos/sin times mscale */
			for (int i = 0; i < n_rot; i += 2)
			{
				const float ff = j->ro.freq_factors != NULL ? j->ro.freq_factors[i / 2] : 1.0f;
				const float th = j->ro.freq_scale * (theta / ff);

				cs[i] = cosf(th) * j->ro.mscale;
				cs[i + 1] = sinf(th) * j->ro.mscale;
				theta *= j->theta_scale;
			}
	}
}

static void
rope_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	rope_job   *j = p;
	cpu_backend *cb = j->cb;
	const int	hd = cb->geo.head_dim,
				nkv = cb->geo.n_kv_heads,
				bs = cb->geo.block_size,
				n_rot = j->ro.n_rot;
	const size_t rb = llm_kv_row_bytes(cb->geo.kv_dtype, hd);
	void		(*rot) (float *, int, int, int, const float *) =
		j->ro.mode == LLM_ROPE_NEOX ? rope_heads_neox : rope_heads;

#if defined(__x86_64__) || defined(__i386__)
	if (llm_cpu_has_avx2())
		rot = j->ro.mode == LLM_ROPE_NEOX ? rope_heads_neox_fma : rope_heads_fma;
#endif
	for (int64_t t = begin; t < end; t++)
	{
		size_t		slot = (size_t) layer_slots(cb, j->layer)[t];
		float	   *kt = j->k + (size_t) t * nkv * hd;
		const int32_t block = (int32_t) (slot / bs);
		const int	off = (int) (slot % bs);

		if (j->ro.mode != LLM_ROPE_NONE)
		{
			const float *cs = j->cs + (size_t) t * hd;

			rot(j->q + (size_t) t * j->n_heads * hd, j->n_heads, hd, n_rot, cs);
			rot(kt, nkv, hd, n_rot, cs);
		}

		for (int h = 0; h < nkv; h++)
		{
			size_t		o = llm_kv_row_index(block, off, h, nkv, bs) * rb;
			const float *vt = j->v + ((size_t) t * nkv + h) * hd;

			if (cb->geo.kv_dtype == LLM_KV_Q8_0)
			{
				llm_kv_quantize_q8_0(kt + (size_t) h * hd, cb->k_cache[j->layer] + o, hd);
				llm_kv_quantize_q8_0(vt, cb->v_cache[j->layer] + o, hd);
			}
			else
			{
				llm_fp32_to_fp16_row(kt + (size_t) h * hd, (uint16_t *) (cb->k_cache[j->layer] + o), hd);
				llm_fp32_to_fp16_row(vt, (uint16_t *) (cb->v_cache[j->layer] + o), hd);
			}
		}
	}
}

static inline bool
rope_same(const llm_rope_opts *a, const llm_rope_opts *b)
{
	return a->theta == b->theta && a->n_rot == b->n_rot && a->freq_scale == b->freq_scale &&
		a->mscale == b->mscale && a->freq_factors == b->freq_factors;
}

int
cpu_rope_store_kv_opts(llm_backend *b, int layer, float *q, float *k, const float *v,
					   int n_heads, const llm_rope_opts *ro)
{
	cpu_backend *cb = CPU(b);
	rope_job	j;
	int			ti;

	if (!cb->have_step)
		return cpu_fail(cb, "rope_store_kv: no step");
	if (layer < 0 || layer >= cb->geo.n_layers)
		return cpu_fail(cb, "rope_store_kv: layer %d out of range", layer);
	if (n_heads <= 0 || ro == NULL ||
		(ro->mode != LLM_ROPE_NORMAL && ro->mode != LLM_ROPE_NEOX && ro->mode != LLM_ROPE_NONE) ||
		(cb->n_tokens > 0 && (q == NULL || k == NULL || v == NULL)))
		return cpu_fail(cb, "rope_store_kv: invalid arguments");
	if (ro->mode != LLM_ROPE_NONE &&
		(!(ro->theta > 0) || ro->n_rot < 2 || ro->n_rot > cb->geo.head_dim || ro->n_rot % 2 != 0 ||
		 !(ro->freq_scale > 0) || !(ro->mscale > 0)))
		return cpu_fail(cb, "rope_store_kv: invalid RoPE options (base %g, %d rotated dims of %d)",
						(double) ro->theta, ro->n_rot, cb->geo.head_dim);
	j.cb = cb;
	j.layer = layer;
	j.q = q;
	j.k = k;
	j.v = v;
	j.n_heads = n_heads;
	j.ro = *ro;
	j.cs = NULL;
	if (ro->mode != LLM_ROPE_NONE)
	{
		j.theta_scale = powf(ro->theta, -2.0f / (float) ro->n_rot);
		for (ti = 0; ti < ROPE_TABLES && !(cb->rope_theta[ti] != 0.0f && rope_same(&cb->rope_key[ti], ro)); ti++)
			;
		if (ti == ROPE_TABLES)
		{
			/* positions are the same for every layer of the step: one table per set of options */
			size_t		cap;

			for (ti = 0; ti < ROPE_TABLES && cb->rope_theta[ti] != 0.0f; ti++)
				;
			if (ti == ROPE_TABLES)
			{
				ti = cb->rope_next;
				cb->rope_next = (cb->rope_next + 1) % ROPE_TABLES;
			}
			cap = cb->rope_cap[ti] * sizeof(float);
			if (!cpu_grow((void **) &cb->rope_cs[ti], &cap,
						  (size_t) (cb->n_tokens ? cb->n_tokens : 1) * cb->geo.head_dim * sizeof(float)))
				return cpu_fail(cb, "rope_store_kv: out of memory");
			cb->rope_cap[ti] = cap / sizeof(float);
			j.cs = cb->rope_cs[ti];
			llm_threadpool_run(cb->pool, cb->n_tokens, 16, rope_table_task, &j);
			cb->rope_theta[ti] = ro->theta;
			cb->rope_key[ti] = *ro;
		}
		j.cs = cb->rope_cs[ti];
	}
	llm_threadpool_run(cb->pool, cb->n_tokens, 4, rope_task, &j);
	return 0;
}

int
cpu_rope_store_kv_mode(llm_backend *b, int layer, float *q, float *k, const float *v,
					   int n_heads, float rope_theta, int mode)
{
	cpu_backend *cb = CPU(b);
	llm_rope_opts ro = {mode, cb->geo.head_dim, rope_theta, 1.0f, 1.0f, NULL};

	if (mode != LLM_ROPE_NORMAL && mode != LLM_ROPE_NEOX)
		return cpu_fail(cb, "rope_store_kv: invalid arguments");
	return cpu_rope_store_kv_opts(b, layer, q, k, v, n_heads, &ro);
}

int
cpu_rope_store_kv(llm_backend *b, int layer, float *q, float *k, const float *v,
				  int n_heads, float rope_theta)
{
	return cpu_rope_store_kv_mode(b, layer, q, k, v, n_heads, rope_theta, LLM_ROPE_NORMAL);
}

/*
 * Attention work items: a block of up to LLM_ATTN_QBLOCK prompt rows of
 * one sequence at consecutive positions for one KV head (the block kernel:
 * each K/V row read once for the block), or one token's range of heads
 * (decode rows, which use the one-token reduction order, and any row the
 * block rule leaves alone).  Which rows share an item never changes a
 * result (quant.h).
 */
typedef struct attn_item
{
	int32_t		t0;				/* first token row */
	int16_t		n_q;			/* > 0: block of n_q rows; 0: one token */
	int16_t		h0;				/* block: the KV head; token: the first query head */
	int64_t		cost;			/* keys x heads, to start the longest items first */
} attn_item;

typedef struct attn_job
{
	cpu_backend *cb;
	int			layer;
	const float *q;
	float	   *out;
	int			n_heads;
	int			heads_per_item; /* token items: the GQA group, or 1 to spread few tokens over threads */
	float		scale;			/* the kernels' factor of q . k (1 / softcap when soft-capped) */
	int			window;			/* keys per query, 0 = all (backend.h attention) */
	const attn_item *items;
	float		softcap;		/* > 0: llm_attn_args.softcap; 0 = none */
	float		cap_scale;		/* the softmax's scale after the cap */
} attn_job;

/* Q of n_q rows x nh heads (from head h0) rounded to fp16 as llama.cpp does (the K cache type) into dst [n_q][nh][hd]. */
static void
q_to_fp16_values(const attn_job *j, int t0, int n_q, int h0, int nh, float *dst)
{
	const int	hd = j->cb->geo.head_dim;

	for (int i = 0; i < n_q; i++)
	{
		const float *qh = j->q + ((size_t) (t0 + i) * j->n_heads + h0) * hd;
		float	   *d16 = dst + (size_t) i * nh * hd;

		for (int d = 0; d < nh * hd; d += 256)
		{
			uint16_t	h16[256];
			int			nd = nh * hd - d < 256 ? nh * hd - d : 256;

			llm_fp32_to_fp16_row(qh + d, h16, nd);
			llm_fp16_to_fp32_row(h16, d16 + d, nd);
		}
	}
}

static void
attn_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	attn_job   *j = p;
	cpu_backend *cb = j->cb;
	const int	hd = cb->geo.head_dim,
				nkv = cb->geo.n_kv_heads;
	const int	group = j->n_heads / nkv;
	float	   *q16 = cb->att_scratch + (size_t) thread_idx * cb->att_stride;
	float	   *scratch = q16 + (size_t) LLM_ATTN_QBLOCK * group * hd;

	for (int64_t it = begin; it < end; it++)
	{
		const attn_item *item = &j->items[it];
		const int	t = item->t0;

		if (item->n_q > 0)
		{
			llm_attn_block_args a;

			q_to_fp16_values(j, t, item->n_q, item->h0 * group, group, q16);
			a.q = q16;
			a.out = j->out + ((size_t) t * j->n_heads + (size_t) item->h0 * group) * hd;
			a.out_stride = (size_t) j->n_heads * hd;
			a.n_q = item->n_q;
			a.pos0 = cb->positions[t];
			a.window = j->window;
			a.group = group;
			a.head_dim = hd;
			a.scale = j->scale;
			a.k_cache = cb->k_cache[j->layer];
			a.v_cache = cb->v_cache[j->layer];
			a.kv_dtype = cb->geo.kv_dtype;
			a.n_kv_heads = nkv;
			a.kv_head = item->h0;
			a.block_table = layer_tables(cb, j->layer) + (size_t) cb->tok_seq[t] * cb->max_blocks;
			a.block_size = cb->geo.block_size;
			a.scratch = scratch;
			a.softcap = j->softcap;
			a.cap_scale = j->cap_scale;
			cb->attn_block(&a);
		}
		else
		{
			llm_attn_args a;
			const int	h0 = item->h0;

			q_to_fp16_values(j, t, 1, h0, j->heads_per_item, q16);
			a.q = q16;
			a.out = j->out + ((size_t) t * j->n_heads + h0) * hd;
			a.group = j->heads_per_item;
			a.head_dim = hd;
			a.scale = j->scale;
			a.k_cache = cb->k_cache[j->layer];
			a.v_cache = cb->v_cache[j->layer];
			a.kv_dtype = cb->geo.kv_dtype;
			a.n_kv_heads = nkv;
			a.block_size = cb->geo.block_size;
			a.scratch = scratch;
			a.single = cb->have_single && cb->single_rows[t] != 0;
			a.n_keys = cb->positions[t] + 1;
			a.first_key = j->window > 0 && a.n_keys > j->window ? a.n_keys - j->window : 0;
			a.kv_head = h0 / group;
			a.block_table = layer_tables(cb, j->layer) + (size_t) cb->tok_seq[t] * cb->max_blocks;
			a.softcap = j->softcap;
			a.cap_scale = j->cap_scale;
			cb->attn(&a);
		}
	}
}

/*
 * Decode rows over a long context with few (token, KV head) pairs: each
 * pair's attention in pieces (quant.h llm_attn_split), one ordered job
 * (threadpool.h llm_threadpool_run_ordered) of three phases: scores of key
 * ranges (which also record the keys' cache offsets for the V pass), the
 * softmax of each head, V sums of head_dim ranges.  A piece waits only for
 * the earlier phase of its own pair (a count per pair), so one pair's
 * softmax and V sums run while the threads still score the next pair, and
 * no join of all threads separates the phases.  The same result as one
 * piece per pair, with every thread busy and every K and V row read once.
 */
#define SPLIT_KEYS 256			/* keys per scores piece (a multiple of 64), doubled while items are too many */
#define SPLIT_DIMS 32			/* head_dim values per V piece (one cache line of fp16) */

/* Phase counts of one (token, KV head) pair, a cache line each (written by both threads). */
typedef struct split_sync
{
	atomic_int	scored;			/* scores pieces done */
	atomic_int	normed;			/* softmax rows done */
	char		pad[64 - 2 * sizeof(atomic_int)];
} split_sync;

typedef struct split_job
{
	attn_job   *j;
	int			group;
	size_t		npad;			/* scores per head of the longest row (llm_attn_split_npad) */
	size_t		pair_floats;	/* shared floats per pair: rowoff [npad] (as 2 * npad) + scores [group][npad] */
	int			keys;			/* keys per scores piece */
	int			chunks;			/* scores pieces per pair */
	int			vpieces;		/* V pieces per pair */
	int64_t		n_scores,		/* items: scores, then softmax, then values, each pair by pair */
				n_softmax;
	split_sync *sync;			/* [pairs] */
} split_job;

/* Attention args of token t, KV head g for a split piece on thread thread_idx (Q converted when with_q). */
static void
split_args(const split_job *sj, int t, int g, int thread_idx, bool with_q, llm_attn_args *a)
{
	const attn_job *j = sj->j;
	cpu_backend *cb = j->cb;
	const int	hd = cb->geo.head_dim;
	float	   *q16 = cb->att_scratch + (size_t) thread_idx * cb->att_stride;

	if (with_q)
		q_to_fp16_values(j, t, 1, g * sj->group, sj->group, q16);
	a->q = q16;
	a->out = j->out + ((size_t) t * j->n_heads + (size_t) g * sj->group) * hd;
	a->group = sj->group;
	a->head_dim = hd;
	a->scale = j->scale;
	a->k_cache = cb->k_cache[j->layer];
	a->v_cache = cb->v_cache[j->layer];
	a->kv_dtype = cb->geo.kv_dtype;
	a->n_kv_heads = cb->geo.n_kv_heads;
	a->block_size = cb->geo.block_size;
	a->scratch = q16 + (size_t) LLM_ATTN_QBLOCK * sj->group * hd;
	a->single = 1;
	a->n_keys = cb->positions[t] + 1;
	a->first_key = j->window > 0 && a->n_keys > j->window ? a->n_keys - j->window : 0;
	a->kv_head = g;
	a->block_table = layer_tables(cb, j->layer) + (size_t) cb->tok_seq[t] * cb->max_blocks;
	a->softcap = j->softcap;
	a->cap_scale = j->cap_scale;
}

static void
split_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	split_job  *sj = p;
	cpu_backend *cb = sj->j->cb;
	const int	nkv = cb->geo.n_kv_heads,
				hd = cb->geo.head_dim;

	for (int64_t it = begin; it < end; it++)
	{
		const int	phase = it < sj->n_scores ? 0 : it < sj->n_scores + sj->n_softmax ? 1 : 2;
		const int64_t k = phase == 0 ? it : phase == 1 ? it - sj->n_scores : it - sj->n_scores - sj->n_softmax;
		const int	per_pair = phase == 0 ? sj->chunks : phase == 1 ? sj->group : sj->vpieces;
		const int	pair = (int) (k / per_pair),
					piece = (int) (k % per_pair);
		float	   *shared = cb->split_scores + (size_t) pair * sj->pair_floats;
		size_t	   *rowoff = (size_t *) shared;
		float	   *scores = shared + 2 * sj->npad;
		split_sync *sync = &sj->sync[pair];
		llm_attn_args a;

		split_args(sj, pair / nkv, pair % nkv, thread_idx, phase == 0, &a);
		if (phase == 0)
		{
			int			ks = a.first_key & ~3,
						c0 = ks / sj->keys + piece,
						js = piece == 0 ? ks : c0 * sj->keys,
						je = (c0 + 1) * sj->keys < a.n_keys ? (c0 + 1) * sj->keys : a.n_keys;

			if (js < je)
				cb->attn_split->scores(&a, scores, rowoff, js, je);
			atomic_fetch_add_explicit(&sync->scored, 1, memory_order_release);
		}
		else if (phase == 1)
		{
			llm_threadpool_await(&sync->scored, sj->chunks);
			cb->attn_split->softmax(&a, scores, piece);
			atomic_fetch_add_explicit(&sync->normed, 1, memory_order_release);
		}
		else
		{
			int			c0 = piece * SPLIT_DIMS,
						c1 = c0 + SPLIT_DIMS < hd ? c0 + SPLIT_DIMS : hd;

			llm_threadpool_await(&sync->normed, sj->group);
			cb->attn_split->values(&a, scores, rowoff, c0, c1);
		}
	}
}

/* True (and done) when this step's attention ran split: only decode rows, too few pairs for the threads. */
static bool
attention_split(attn_job *j, int *rc)
{
	cpu_backend *cb = j->cb;
	const int	nkv = cb->geo.n_kv_heads,
				hd = cb->geo.head_dim,
				n_pairs = cb->n_tokens * nkv;
	split_job	sj = {j, j->n_heads / nkv, 0, 0, SPLIT_KEYS, 0, (hd + SPLIT_DIMS - 1) / SPLIT_DIMS, 0, 0, NULL};
	size_t		cap;

	*rc = 0;
	if (cb->attn_split == NULL || !cb->have_single || cb->base.n_threads < 2 ||
		n_pairs >= 2 * cb->base.n_threads || cb->max_kv_len < cb->split_min_keys)
		return false;
	for (int t = 0; t < cb->n_tokens; t++)
		if (!cb->single_rows[t])
			return false;
	for (;;)
	{
		sj.chunks = 0;
		for (int t = 0; t < cb->n_tokens; t++)
		{
			int			n = cb->positions[t] + 1,
						k0 = j->window > 0 && n > j->window ? n - j->window : 0;
			size_t		np = ((size_t) (n - (k0 & ~15)) + 15) & ~(size_t) 15;
			int			ch = (n - 1) / sj.keys - (k0 & ~3) / sj.keys + 1;

			sj.npad = np > sj.npad ? np : sj.npad;
			sj.chunks = ch > sj.chunks ? ch : sj.chunks;
		}
		if ((int64_t) n_pairs * (sj.chunks + sj.group + sj.vpieces) <= LLM_THREADPOOL_MAX_ITEMS)
			break;
		sj.keys *= 2;
	}
	sj.n_scores = (int64_t) n_pairs * sj.chunks;
	sj.n_softmax = (int64_t) n_pairs * sj.group;
	sj.pair_floats = (size_t) (sj.group + 2) * sj.npad;
	cap = cb->split_cap * sizeof(float);
	if (!cpu_grow((void **) &cb->split_scores, &cap, sj.pair_floats * (size_t) n_pairs * sizeof(float)))
	{
		*rc = cpu_fail(cb, "attention: out of memory for split scores");
		return true;
	}
	cb->split_cap = cap / sizeof(float);
	cap = cb->split_sync_cap;
	if (!cpu_grow((void **) &cb->split_sync, &cap, (size_t) n_pairs * sizeof(split_sync)))
	{
		*rc = cpu_fail(cb, "attention: out of memory for split counts");
		return true;
	}
	cb->split_sync_cap = cap;
	sj.sync = cb->split_sync;
	for (int i = 0; i < n_pairs; i++)
	{
		atomic_init(&sj.sync[i].scored, 0);
		atomic_init(&sj.sync[i].normed, 0);
	}
	llm_threadpool_run_ordered(cb->pool, sj.n_scores + sj.n_softmax + (int64_t) n_pairs * sj.vpieces,
							   split_task, &sj);
	return true;
}

static int
attn_item_cmp(const void *x, const void *y)
{
	const attn_item *a = x,
			   *b = y;

	if (a->cost != b->cost)
		return a->cost > b->cost ? -1 : 1;
	return a->t0 != b->t0 ? (a->t0 < b->t0 ? -1 : 1) : (a->h0 < b->h0 ? -1 : a->h0 > b->h0);
}

/* True when token row t joins a block of prompt rows (multi-token order). */
static bool
block_row(const cpu_backend *cb, int t)
{
	return !(cb->have_single && cb->single_rows[t] != 0);
}

static int
attention_run(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale, int window,
			  float softcap)
{
	cpu_backend *cb = CPU(b);
	attn_job	j = {cb, layer, q, out, n_heads, 1, scale, window, NULL, 0.0f, 0.0f};
	int			group,
				nkv = cb->geo.n_kv_heads;
	int64_t		n_items = 0,
				n_token_rows = 0,
				n_blocks = 0;
	size_t		stride,
				cap,
				need;

	if (softcap > 0.0f)
	{
		/* ggml_scale(kq, 1 / cap) is the kernels' score factor; the scale follows the cap */
		j.scale = 1.0f / softcap;
		j.softcap = softcap;
		j.cap_scale = scale;
	}

	if (!cb->have_step)
		return cpu_fail(cb, "attention: no step");
	if (layer < 0 || layer >= cb->geo.n_layers)
		return cpu_fail(cb, "attention: layer %d out of range", layer);
	if (n_heads <= 0 || n_heads % cb->geo.n_kv_heads != 0)
		return cpu_fail(cb, "attention: %d heads is not a multiple of %d KV heads", n_heads, cb->geo.n_kv_heads);
	if (window < 0)
		return cpu_fail(cb, "attention: window %d is negative", window);
	if (cb->layer_local != NULL && cb->layer_local[layer] && (window == 0 || window > cb->geo.local_window))
		return cpu_fail(cb, "attention: layer %d is in the local KV group (window at most %d) but asks for window %d",
					layer, cb->geo.local_window, window);
	if (cb->n_tokens == 0)
		return 0;
	if (q == NULL || out == NULL)
		return cpu_fail(cb, "attention: NULL argument");
	group = n_heads / nkv;

	/* the rows: blocks of consecutive prompt rows of a sequence, the rest one by one */
	for (int s = 0; s < cb->n_seqs; s++)
		for (int t = cb->seq_start[s]; t < cb->seq_start[s + 1];)
		{
			int			n = 1;

			if (block_row(cb, t))
			{
				while (n < LLM_ATTN_QBLOCK && t + n < cb->seq_start[s + 1] && block_row(cb, t + n) &&
					   cb->positions[t + n] == cb->positions[t] + n)
					n++;
				n_blocks++;
			}
			else
				n_token_rows++;
			t += n;
		}
	/* a token item is a whole GQA group when there are enough of them to keep every thread busy */
	if ((n_token_rows + n_blocks) * nkv >= (int64_t) cb->base.n_threads)
		j.heads_per_item = group;
	need = (size_t) (n_blocks * nkv + n_token_rows * (n_heads / j.heads_per_item));
	cap = cb->attn_items_cap * sizeof(attn_item);
	if (!cpu_grow((void **) &cb->attn_items, &cap, need * sizeof(attn_item)))
		return cpu_fail(cb, "attention: out of memory for work items");
	cb->attn_items_cap = cap / sizeof(attn_item);
	for (int s = 0; s < cb->n_seqs; s++)
		for (int t = cb->seq_start[s]; t < cb->seq_start[s + 1];)
		{
			int			n = 1;
			int64_t		keys = cb->positions[t] + 1;

			if (window > 0 && keys > window)
				keys = window;
			if (block_row(cb, t))
			{
				while (n < LLM_ATTN_QBLOCK && t + n < cb->seq_start[s + 1] && block_row(cb, t + n) &&
					   cb->positions[t + n] == cb->positions[t] + n)
					n++;
				for (int h = 0; h < nkv; h++)
					cb->attn_items[n_items++] = (attn_item) {t, (int16_t) n, (int16_t) h, keys * n * group};
			}
			else
				for (int h0 = 0; h0 < n_heads; h0 += j.heads_per_item)
					cb->attn_items[n_items++] = (attn_item) {t, 0, (int16_t) h0, keys * j.heads_per_item};
			t += n;
		}
	qsort(cb->attn_items, (size_t) n_items, sizeof(attn_item), attn_item_cmp);
	j.items = cb->attn_items;

	/* per thread: Q rounded to fp16 [LLM_ATTN_QBLOCK x group][head_dim] + kernel scratch */
	{
		size_t		s1 = llm_attn_scratch_floats(j.heads_per_item, cb->geo.head_dim, cb->max_kv_len),
					s2 = llm_attn_block_scratch_floats(LLM_ATTN_QBLOCK, group, cb->geo.head_dim, cb->max_kv_len);

		stride = ((size_t) LLM_ATTN_QBLOCK * group * cb->geo.head_dim + (s1 > s2 ? s1 : s2) + 15) & ~(size_t) 15;
	}
	cap = cb->att_cap * sizeof(float);
	if (!cpu_grow((void **) &cb->att_scratch, &cap, stride * (size_t) cb->base.n_threads * sizeof(float)))
		return cpu_fail(cb, "attention: out of memory for scratch");
	cb->att_cap = cap / sizeof(float);
	cb->att_stride = stride;
	{
		int			rc;

		if (attention_split(&j, &rc))
			return rc;
	}
	llm_threadpool_run(cb->pool, n_items, 1, attn_task, &j);
	return 0;
}

int
cpu_attention(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale, int window)
{
	return attention_run(b, layer, q, out, n_heads, scale, window, 0.0f);
}

int
cpu_attention_softcap(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale,
					  int window, float softcap)
{
	if (!(softcap > 0.0f))
		return cpu_fail(CPU(b), "attention: soft-cap %g is not positive", (double) softcap);
	return attention_run(b, layer, q, out, n_heads, scale, window, softcap);
}
