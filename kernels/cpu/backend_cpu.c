/*
 * backend_cpu.c — the CPU compute backend (kernels/backend.h).
 *
 * Activations are host float arrays (host_buffers: any host array serves,
 * so the model writes the logits straight into the engine's, and
 * scan_rows reads them there, each row in pieces on the pool); weights are
 * copied (huge pages) and repacked where a packed kernel applies; the
 * paged KV cache is one K and one V array per layer (base pages,
 * huge_pages.h) of [n_blocks][n_kv_heads][block_size] rows of head_dim
 * fp16 values or q8_0 blocks (quant.h llm_kv_row_index,
 * llm_kv_row_bytes).  Parallel work goes
 * through a persistent thread pool (threadpool.h); every output value is
 * computed by one fixed sequence of operations that does not depend on the
 * batch, the tiling or the thread count (the batch-invariance contract of
 * backend.h).
 *
 * Numerics reproduce llama.cpp's CPU backend (ggml's CPU code of an AVX512
 * build, as the oracle is built) bit for bit wherever it is itself
 * deterministic: matmul activation quantization and dot products (quant.h);
 * RMS norm with a double sum of float squares then (x * scale) * w (as
 * ggml_compute_forward_rms_norm_f32); RoPE "normal" mode with cos/sin from
 * theta *= powf(base, -2/head_dim) (as ggml_rope_cache_init) and the
 * rotation in the fused form GCC gives ggml's expressions; SiLU and softmax
 * exponentials as ggml_v_expf; attention (quant.h llm_attn_args) with Q
 * rounded to fp16, the softmax of ggml_vec_soft_max_f32, probabilities
 * rounded to fp16 and the K.Q / V.P reduction orders of llama.cpp's
 * multi-token path (tinyBLAS) or, for rows marked with
 * llm_backend_cpu_set_single_rows, of its one-token path (ggml_vec_dot_f16).
 * Prompt logits equal the oracle's exactly; with decode rows marked, so do
 * single-stream greedy generations.  Kernel implementations come from
 * dispatch.h.
 */
#define _GNU_SOURCE
#include "kernels/backend.h"
#include "backend_cpu.h"
#include "dispatch.h"
#include "elementwise.h"
#include "huge_pages.h"
#include "quant.h"
#include "threadpool.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct cpu_backend
{
	llm_backend base;			/* first: llm_backend * <-> cpu_backend * */
	llm_threadpool *pool;
	bool		shared_pool;	/* pool is the process's shared one (released, not destroyed) */
	int			impl;			/* LLM_IMPL_* */
	llm_attn_fn attn;
	llm_attn_block_fn attn_block;
	const llm_attn_split *attn_split;	/* NULL: decode rows always run whole */
	int			split_min_keys; /* decode rows with this many keys or more may be split */
	llm_swiglu_fn swiglu;
	llm_geglu_fn geglu;
	llm_scale_fn scale;
	llm_row_scan_fn row_scan;
	char		err[512];
	llm_huge_arena *weights;	/* copies of the weights on huge pages */

	/* KV cache */
	bool		kv_ready;
	llm_kv_geometry geo;
	uint8_t   **k_cache;		/* [n_layers] arrays of rows (quant.h llm_kv_row_index / llm_kv_row_bytes) */
	uint8_t   **v_cache;
	uint8_t    *layer_local;	/* [n_layers] 1 = local group (geo.layer_local), or NULL */

	/* current step (copied from llm_step_desc) */
	bool		have_step;
	int			n_tokens;
	int			n_seqs;
	int			max_blocks;
	int			n_out;
	int			max_kv_len;
	int32_t    *token_ids;
	int32_t    *positions;
	int32_t    *slots;
	int32_t    *tok_seq;		/* sequence of each token */
	int32_t    *seq_start;
	int32_t    *seq_kv_len;
	int32_t    *block_tables;
	int32_t    *slots_local;	/* the local group's (NULL without one) */
	int32_t    *block_tables_local;
	size_t		cap_slots_local,
				cap_bt_local;
	int32_t    *out_rows;
	uint8_t    *single_rows;	/* [n_tokens] attention order flags, or unset */
	bool		have_single;
	size_t		cap_single;
	size_t		cap_token_ids,
				cap_positions,
				cap_slots,
				cap_tok_seq,
				cap_seq_start,
				cap_seq_kv_len,
				cap_bt,
				cap_out;

	/*
	 * RoPE cos/sin of the step's tokens [n_tokens][head_dim], one table per
	 * base the step uses (Gemma 3's layers alternate two), each filled by
	 * the first rope call with its base.
	 */
#define ROPE_TABLES 2
	float	   *rope_cs[ROPE_TABLES];
	size_t		rope_cap[ROPE_TABLES];
	float		rope_theta[ROPE_TABLES];	/* base each table holds this step; 0 = none */
	int			rope_next;		/* table to refill when a step uses more bases */

	/* scratch */
	void	   *act;			/* quantized activation rows */
	size_t		act_cap;
	void	   *conv;			/* per thread: a row block converted for a batch kernel (matmul_task) */
	size_t		conv_cap;
	float	   *att_scratch;	/* per thread: q rounded to fp16 + kernel scratch */
	size_t		att_stride;		/* floats per thread */
	size_t		att_cap;
	struct attn_item *attn_items;	/* the current attention call's work items */
	size_t		attn_items_cap;
	float	   *split_scores;	/* row offsets and scores shared by the pieces of split decode rows */
	size_t		split_cap;
	struct split_sync *split_sync;	/* their phase counts */
	size_t		split_sync_cap; /* bytes */
	llm_row_scan *scans;		/* scan_rows: one scan per (row, piece) */
	size_t		scans_cap;		/* bytes */
} cpu_backend;

#define CPU(b) ((cpu_backend *) (b))

static const llm_backend_ops cpu_ops;

static int
fail(cpu_backend *cb, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static int
fail(cpu_backend *cb, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(cb->err, sizeof(cb->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* Grow *buf to hold at least need bytes (64-byte aligned); false on OOM. */
static bool
grow(void **buf, size_t *cap, size_t need)
{
	void	   *p;

	if (need <= *cap)
		return true;
	need = need + need / 2 + 64;
	if (posix_memalign(&p, 64, need) != 0)
		return false;
	free(*buf);
	*buf = p;
	*cap = need;
	return true;
}

/* Grow an int32 array to n elements (contents are not preserved). */
static bool
grow_i32(int32_t **buf, size_t *cap, size_t n)
{
	size_t		c = *cap * sizeof(int32_t);
	bool		ok = grow((void **) buf, &c, (n ? n : 1) * sizeof(int32_t));

	*cap = c / sizeof(int32_t);
	return ok;
}

/* ------------------------------------------------------------------------
 * lifetime, memory
 * ------------------------------------------------------------------------ */

/* Bytes of layer l's K (or V) array: [n_blocks of its group][n_kv_heads][block_size] rows. */
static size_t
kv_layer_bytes(const llm_kv_geometry *g, const uint8_t *layer_local, int l)
{
	int			nb = layer_local != NULL && layer_local[l] ? g->n_blocks_local : g->n_blocks;

	return (size_t) nb * (size_t) g->block_size * (size_t) g->n_kv_heads *
		llm_kv_row_bytes(g->kv_dtype, g->head_dim);
}

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

static void
cpu_destroy(llm_backend *b)
{
	cpu_backend *cb = CPU(b);

	if (cb == NULL)
		return;
	if (cb->shared_pool)
		llm_threadpool_release_shared(cb->pool);
	else
		llm_threadpool_destroy(cb->pool);
	llm_huge_arena_destroy(cb->weights);
	if (cb->k_cache)
		for (int l = 0; l < cb->geo.n_layers; l++)
		{
			llm_base_pages_free(cb->k_cache[l], kv_layer_bytes(&cb->geo, cb->layer_local, l));
			llm_base_pages_free(cb->v_cache[l], kv_layer_bytes(&cb->geo, cb->layer_local, l));
		}
	free(cb->k_cache);
	free(cb->v_cache);
	free(cb->layer_local);
	free(cb->slots_local);
	free(cb->block_tables_local);
	free(cb->token_ids);
	free(cb->positions);
	free(cb->slots);
	free(cb->tok_seq);
	free(cb->seq_start);
	free(cb->seq_kv_len);
	free(cb->block_tables);
	free(cb->out_rows);
	free(cb->single_rows);
	free(cb->act);
	free(cb->conv);
	for (int i = 0; i < ROPE_TABLES; i++)
		free(cb->rope_cs[i]);
	free(cb->att_scratch);
	free(cb->attn_items);
	free(cb->split_scores);
	free(cb->split_sync);
	free(cb->scans);
	free(cb);
}

static const char *
cpu_last_error(llm_backend *b)
{
	return CPU(b)->err;
}

static float *
cpu_alloc_f32(llm_backend *b, size_t n)
{
	void	   *p = NULL;

	if (n > SIZE_MAX / sizeof(float) - 64 ||
		posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0)
	{
		fail(CPU(b), "out of memory allocating %zu floats", n);
		return NULL;
	}
	return p;
}

static void
cpu_free_f32(llm_backend *b, float *p)
{
	free(p);
}

static int
cpu_download(llm_backend *b, float *host_dst, const float *dev_src, size_t n)
{
	if (n > 0 && (host_dst == NULL || dev_src == NULL))
		return fail(CPU(b), "download: NULL pointer");
	if (n > 0 && host_dst != dev_src)
		memmove(host_dst, dev_src, n * sizeof(float));
	return 0;
}

/*
 * Weights are copied onto huge pages (huge_pages.h: a decode step streams all
 * of them, and on the GGUF mapping's 4 KiB pages every 4 KiB is a TLB miss);
 * the copies live until the backend is destroyed.
 */
static int
cpu_load_weight(llm_backend *b, const llm_weight *host, llm_weight *out)
{
	cpu_backend *cb = CPU(b);
	const llm_type_info *ti;
	const llm_qkernel *k,
			   *packed;
	void	   *copy;

	if (host == NULL || out == NULL || host->data == NULL)
		return fail(cb, "load_weight: NULL weight");
	ti = llm_type_get(host->type);
	if (ti == NULL)
		return fail(cb, "load_weight: unknown tensor type %u", host->type);
	k = llm_qkernel_get(host->type, cb->impl);
	if (k == NULL)
		return fail(cb, "load_weight: the CPU backend cannot compute with %s weights", ti->name);
	if (host->n_rows <= 0 || host->n_cols <= 0 || host->n_cols > INT32_MAX || host->n_rows > INT32_MAX)
		return fail(cb, "load_weight: bad shape %lld x %lld",
					(long long) host->n_rows, (long long) host->n_cols);
	if (host->n_cols % k->block_elems != 0)
		return fail(cb, "load_weight: %s row length %lld is not a multiple of %d",
					ti->name, (long long) host->n_cols, k->block_elems);
	if (host->row_bytes != llm_type_row_bytes(host->type, host->n_cols))
		return fail(cb, "load_weight: row_bytes %zu does not match %s x %lld",
					host->row_bytes, ti->name, (long long) host->n_cols);
	if (cb->weights == NULL && (cb->weights = llm_huge_arena_create()) == NULL)
		return fail(cb, "load_weight: out of memory");
	copy = llm_huge_arena_alloc(cb->weights, host->row_bytes * (size_t) host->n_rows);
	if (copy == NULL)
		return fail(cb, "load_weight: out of memory for a %lld x %lld %s weight",
					(long long) host->n_rows, (long long) host->n_cols, ti->name);
	*out = *host;
	out->data = copy;
	out->backend_priv = NULL;

	/* repacked for the packed kernels where they apply (quant_packed.c, quant_packed_avx2.c) */
	packed = cb->impl != LLM_IMPL_SCALAR ? llm_qkernel_packed_get(host->type, cb->impl) : NULL;
	if (packed != NULL && packed->repack(host->data, copy, host->n_rows, host->n_cols))
		out->backend_priv = (void *) packed;
	else
		memcpy(copy, host->data, host->row_bytes * (size_t) host->n_rows);
	return 0;
}

static void
cpu_free_weight(llm_backend *b, llm_weight *w)
{
	if (w)
		w->backend_priv = NULL;
}

/* A copy of an fp32 vector; free it with free_f32. */
static float *
cpu_load_vector(llm_backend *b, const float *host, size_t n)
{
	float	   *p;

	if (host == NULL)
	{
		fail(CPU(b), "load_vector: NULL source");
		return NULL;
	}
	p = cpu_alloc_f32(b, n);
	if (p)
		memcpy(p, host, n * sizeof(float));
	return p;
}

/* ------------------------------------------------------------------------
 * KV cache and step description
 * ------------------------------------------------------------------------ */

size_t
llm_kv_block_bytes(const llm_kv_geometry *g)
{
	if (g == NULL || g->n_layers <= 0 || g->n_kv_heads <= 0 || g->head_dim <= 0 || g->block_size <= 0 ||
		(g->kv_dtype != LLM_KV_F16 && g->kv_dtype != LLM_KV_Q8_0) ||
		(g->kv_dtype == LLM_KV_Q8_0 && g->head_dim % LLM_QK != 0))
		return 0;
	return (size_t) g->n_layers * 2 * (size_t) g->block_size * (size_t) g->n_kv_heads *
		llm_kv_row_bytes(g->kv_dtype, g->head_dim);
}

static int
cpu_kv_init(llm_backend *b, const llm_kv_geometry *g)
{
	cpu_backend *cb = CPU(b);

	if (cb->kv_ready)
		return fail(cb, "kv_init: KV cache already initialised");
	if (g == NULL || g->n_layers <= 0 || g->n_kv_heads <= 0 || g->head_dim <= 0 ||
		g->block_size <= 0 || g->n_blocks <= 0)
		return fail(cb, "kv_init: invalid geometry");
	if (g->head_dim % 16 != 0 || g->head_dim > 4096)
		return fail(cb, "kv_init: head_dim %d must be a multiple of 16 and at most 4096", g->head_dim);
	if (g->kv_dtype != LLM_KV_F16 && g->kv_dtype != LLM_KV_Q8_0)
		return fail(cb, "kv_init: unknown KV cache type %d (f16 = %d, q8_0 = %d)", g->kv_dtype, LLM_KV_F16,
					LLM_KV_Q8_0);
	if (g->kv_dtype == LLM_KV_Q8_0 && g->head_dim % LLM_QK != 0)
		return fail(cb, "kv_init: a q8_0 KV cache needs head_dim a multiple of %d, not %d", LLM_QK, g->head_dim);
	if ((int64_t) g->n_blocks * g->block_size > INT32_MAX)
		return fail(cb, "kv_init: %d blocks of %d slots exceed the slot range",
					g->n_blocks, g->block_size);
	if (g->layer_local != NULL)
	{
		if (g->n_blocks_local <= 0 || g->local_window <= 0)
			return fail(cb, "kv_init: a local group needs blocks and a window (%d blocks, window %d)",
						g->n_blocks_local, g->local_window);
		if ((int64_t) g->n_blocks_local * g->block_size > INT32_MAX)
			return fail(cb, "kv_init: %d local blocks of %d slots exceed the slot range",
						g->n_blocks_local, g->block_size);
		cb->layer_local = malloc((size_t) g->n_layers);
		if (cb->layer_local == NULL)
			return fail(cb, "kv_init: out of memory");
		for (int l = 0; l < g->n_layers; l++)
			cb->layer_local[l] = g->layer_local[l] != 0;
	}
	cb->k_cache = calloc((size_t) g->n_layers, sizeof(uint8_t *));
	cb->v_cache = calloc((size_t) g->n_layers, sizeof(uint8_t *));
	if (cb->k_cache == NULL || cb->v_cache == NULL)
		goto oom;
	cb->geo = *g;
	cb->geo.layer_local = cb->layer_local;
	for (int l = 0; l < g->n_layers; l++)
	{
		size_t		per_layer = kv_layer_bytes(g, cb->layer_local, l);

		cb->k_cache[l] = llm_base_pages_alloc(per_layer);
		cb->v_cache[l] = llm_base_pages_alloc(per_layer);
		if (cb->k_cache[l] == NULL || cb->v_cache[l] == NULL)
			goto oom;
	}
	cb->kv_ready = true;
	return 0;

oom:
	if (cb->k_cache)
		for (int l = 0; l < g->n_layers; l++)
		{
			llm_base_pages_free(cb->k_cache[l], kv_layer_bytes(g, cb->layer_local, l));
			llm_base_pages_free(cb->v_cache[l], kv_layer_bytes(g, cb->layer_local, l));
		}
	free(cb->k_cache);
	free(cb->v_cache);
	free(cb->layer_local);
	cb->layer_local = NULL;
	cb->k_cache = cb->v_cache = NULL;
	return fail(cb, "kv_init: out of memory for %zu MiB of KV cache",
				llm_kv_block_bytes(g) * (size_t) g->n_blocks >> 20);
}

/*
 * copy_blocks (backend.h): a block is one contiguous run of n_kv_heads x
 * block_size rows in each layer's K and V arrays (llm_kv_row_index), so a
 * copy is one memcpy per layer of the group, K and V, bytes as stored.
 */
static int
cpu_copy_blocks(llm_backend *b, int group, const int32_t *src, const int32_t *dst, int n)
{
	cpu_backend *cb = CPU(b);
	const llm_kv_geometry *g = &cb->geo;
	int			nb;
	size_t		bb;

	if (!cb->kv_ready)
		return fail(cb, "copy_blocks: kv_init has not been called");
	if (group != LLM_KV_GROUP_GLOBAL && group != LLM_KV_GROUP_LOCAL)
		return fail(cb, "copy_blocks: unknown KV group %d", group);
	if (group == LLM_KV_GROUP_LOCAL && cb->layer_local == NULL)
		return fail(cb, "copy_blocks: the cache has no local group");
	if (n < 0 || (n > 0 && (src == NULL || dst == NULL)))
		return fail(cb, "copy_blocks: invalid arguments");
	nb = group == LLM_KV_GROUP_LOCAL ? g->n_blocks_local : g->n_blocks;
	for (int i = 0; i < n; i++)
	{
		if (src[i] < 0 || src[i] >= nb || dst[i] < 0 || dst[i] >= nb)
			return fail(cb, "copy_blocks: block %d -> %d outside the group's %d blocks", src[i], dst[i], nb);
		for (int j = 0; j < n; j++)
			if (dst[i] == src[j] || (j != i && dst[i] == dst[j]))
				return fail(cb, "copy_blocks: block %d is a destination and also a source or another destination",
							dst[i]);
	}
	bb = (size_t) g->block_size * (size_t) g->n_kv_heads * llm_kv_row_bytes(g->kv_dtype, g->head_dim);
	for (int l = 0; l < g->n_layers; l++)
	{
		if ((cb->layer_local != NULL && cb->layer_local[l]) != (group == LLM_KV_GROUP_LOCAL))
			continue;
		for (int i = 0; i < n; i++)
		{
			memcpy(cb->k_cache[l] + (size_t) dst[i] * bb, cb->k_cache[l] + (size_t) src[i] * bb, bb);
			memcpy(cb->v_cache[l] + (size_t) dst[i] * bb, cb->v_cache[l] + (size_t) src[i] * bb, bb);
		}
	}
	return 0;
}

/*
 * Copy and validate the step: sequences tile the token rows in order, each
 * token's position is inside its sequence's KV length, its slot is the
 * block-table slot of that position, the block ids attention will read are
 * valid, out_rows are token rows.
 */
static int
cpu_begin_step(llm_backend *b, const llm_step_desc *d)
{
	cpu_backend *cb = CPU(b);
	int			nt,
				ns,
				mb,
				bs;
	int			max_len = 0;
	size_t		nbt;

	cb->have_step = false;
	if (!cb->kv_ready)
		return fail(cb, "begin_step: kv_init has not been called");
	if (d == NULL || d->n_tokens < 0 || d->n_seqs < 0 || d->n_out < 0 || d->max_blocks_per_seq < 0)
		return fail(cb, "begin_step: invalid step description");
	nt = d->n_tokens;
	ns = d->n_seqs;
	mb = d->max_blocks_per_seq;
	bs = cb->geo.block_size;
	if (nt > 0 && (d->token_ids == NULL || d->positions == NULL || d->slots == NULL))
		return fail(cb, "begin_step: missing token arrays");
	if (ns == 0 && nt > 0)
		return fail(cb, "begin_step: %d tokens but no sequence", nt);
	if (ns > 0 && (d->seq_start == NULL || d->seq_kv_len == NULL || (mb > 0 && d->block_tables == NULL)))
		return fail(cb, "begin_step: missing sequence arrays");
	if (d->n_out > 0 && d->out_rows == NULL)
		return fail(cb, "begin_step: missing out_rows");
	if (cb->layer_local != NULL && ((nt > 0 && d->slots_local == NULL) || (ns > 0 && mb > 0 && d->block_tables_local == NULL)))
		return fail(cb, "begin_step: the KV cache has a local group but the step has no local slots or block tables");
	nbt = (size_t) ns * (size_t) mb;
	if (!grow_i32(&cb->token_ids, &cb->cap_token_ids, (size_t) nt) ||
		!grow_i32(&cb->positions, &cb->cap_positions, (size_t) nt) ||
		!grow_i32(&cb->slots, &cb->cap_slots, (size_t) nt) ||
		!grow_i32(&cb->tok_seq, &cb->cap_tok_seq, (size_t) nt) ||
		!grow_i32(&cb->seq_start, &cb->cap_seq_start, (size_t) ns + 1) ||
		!grow_i32(&cb->seq_kv_len, &cb->cap_seq_kv_len, (size_t) ns) ||
		!grow_i32(&cb->block_tables, &cb->cap_bt, nbt) ||
		!grow_i32(&cb->out_rows, &cb->cap_out, (size_t) d->n_out) ||
		(cb->layer_local != NULL &&
		 (!grow_i32(&cb->slots_local, &cb->cap_slots_local, (size_t) nt) ||
		  !grow_i32(&cb->block_tables_local, &cb->cap_bt_local, nbt))))
		return fail(cb, "begin_step: out of memory");

	if (ns > 0 && (d->seq_start[0] != 0 || d->seq_start[ns] != nt))
		return fail(cb, "begin_step: seq_start must run from 0 to n_tokens (%d)", nt);
	for (int s = 0; s < ns; s++)
	{
		int			len = d->seq_kv_len[s];
		int			used_blocks;

		if (d->seq_start[s + 1] < d->seq_start[s])
			return fail(cb, "begin_step: seq_start not ascending at sequence %d", s);
		if (len < 0 || (int64_t) len > (int64_t) mb * bs)
			return fail(cb, "begin_step: sequence %d KV length %d exceeds its %d blocks", s, len, mb);
		used_blocks = (len + bs - 1) / bs;
		for (int j = 0; j < used_blocks; j++)
		{
			int32_t		blk = d->block_tables[(size_t) s * mb + j];

			if (blk < 0 || blk >= cb->geo.n_blocks)
				return fail(cb, "begin_step: sequence %d block %d has invalid id %d", s, j, blk);
		}
		if (len > max_len)
			max_len = len;
		for (int t = d->seq_start[s]; t < d->seq_start[s + 1]; t++)
		{
			int			p = d->positions[t];
			int64_t		want;

			if (p < 0 || p >= len)
				return fail(cb, "begin_step: token %d position %d outside sequence %d KV length %d",
							t, p, s, len);
			want = (int64_t) d->block_tables[(size_t) s * mb + p / bs] * bs + p % bs;
			if (d->slots[t] != want)
				return fail(cb, "begin_step: token %d slot %d differs from block-table slot %lld of position %d",
							t, d->slots[t], (long long) want, p);
			cb->tok_seq[t] = s;
		}
		if (cb->layer_local != NULL && d->seq_start[s + 1] > d->seq_start[s])
		{
			/* local blocks the step reads: from the first query's window on */
			int			p0 = d->positions[d->seq_start[s]] - cb->geo.local_window + 1;
			const int32_t *lbt = d->block_tables_local + (size_t) s * mb;

			for (int j = p0 > 0 ? p0 / bs : 0; j < used_blocks; j++)
				if (lbt[j] < 0 || lbt[j] >= cb->geo.n_blocks_local)
					return fail(cb, "begin_step: sequence %d local block %d has invalid id %d", s, j, lbt[j]);
			for (int t = d->seq_start[s]; t < d->seq_start[s + 1]; t++)
			{
				int			p = d->positions[t];

				if (t > d->seq_start[s] && p < d->positions[t - 1])
					return fail(cb, "begin_step: sequence %d positions not ascending at token %d", s, t);
				if (d->slots_local[t] != (int64_t) lbt[p / bs] * bs + p % bs)
					return fail(cb, "begin_step: token %d local slot %d differs from its block-table slot",
								t, d->slots_local[t]);
			}
		}
	}
	for (int j = 0; j < d->n_out; j++)
		if (d->out_rows[j] < 0 || d->out_rows[j] >= nt)
			return fail(cb, "begin_step: out_rows[%d] = %d is not a token row", j, d->out_rows[j]);

	if (nt > 0)
	{
		memcpy(cb->token_ids, d->token_ids, (size_t) nt * sizeof(int32_t));
		memcpy(cb->positions, d->positions, (size_t) nt * sizeof(int32_t));
		memcpy(cb->slots, d->slots, (size_t) nt * sizeof(int32_t));
	}
	cb->seq_start[0] = 0;
	if (ns > 0)
		memcpy(cb->seq_start, d->seq_start, ((size_t) ns + 1) * sizeof(int32_t));
	if (ns > 0)
		memcpy(cb->seq_kv_len, d->seq_kv_len, (size_t) ns * sizeof(int32_t));
	if (nbt > 0)
		memcpy(cb->block_tables, d->block_tables, nbt * sizeof(int32_t));
	if (cb->layer_local != NULL)
	{
		if (nt > 0)
			memcpy(cb->slots_local, d->slots_local, (size_t) nt * sizeof(int32_t));
		if (nbt > 0)
			memcpy(cb->block_tables_local, d->block_tables_local, nbt * sizeof(int32_t));
	}
	if (d->n_out > 0)
		memcpy(cb->out_rows, d->out_rows, (size_t) d->n_out * sizeof(int32_t));
	cb->n_tokens = nt;
	cb->n_seqs = ns;
	cb->max_blocks = mb;
	cb->n_out = d->n_out;
	cb->max_kv_len = max_len;
	for (int i = 0; i < ROPE_TABLES; i++)
		cb->rope_theta[i] = 0.0f;
	cb->rope_next = 0;
	cb->have_single = false;
	cb->have_step = true;
	if (d->decode_rows != NULL)
		return llm_backend_cpu_set_single_rows(b, d->decode_rows);
	return 0;
}

/* ------------------------------------------------------------------------
 * element-wise ops
 * ------------------------------------------------------------------------ */

static int
cpu_embed(llm_backend *b, const llm_weight *emb, float *out)
{
	cpu_backend *cb = CPU(b);

	if (!cb->have_step)
		return fail(cb, "embed: no step (begin_step failed or was not called)");
	if (emb == NULL || emb->data == NULL || out == NULL)
		return fail(cb, "embed: NULL argument");
	for (int t = 0; t < cb->n_tokens; t++)
	{
		int32_t		id = cb->token_ids[t];

		if (id < 0 || id >= emb->n_rows)
			return fail(cb, "embed: token id %d outside vocabulary of %lld", id, (long long) emb->n_rows);
		const char *row = (const char *) emb->data + (size_t) id * emb->row_bytes;

		if (emb->backend_priv != NULL)
		{
			/* repacked rows: back to GGUF layout first */
			if (!grow(&cb->act, &cb->act_cap, emb->row_bytes))
				return fail(cb, "embed: out of memory");
			((const llm_qkernel *) emb->backend_priv)->unpack(emb->data, id, cb->act, emb->n_cols);
			row = cb->act;
		}
		if (!llm_dequantize_row(emb->type, row, out + (size_t) t * emb->n_cols, emb->n_cols))
			return fail(cb, "embed: cannot dequantize type %u", emb->type);
	}
	return 0;
}

/* One row of ggml's rms_norm followed by the weight multiply. */
static void
rmsnorm_row(const float *x, const float *w, float *out, int dim, float eps)
{
	double		sum = 0.0;
	float		mean,
				scale;

	for (int i = 0; i < dim; i++)
		sum += (double) (x[i] * x[i]);
	mean = (float) (sum / dim);
	scale = 1.0f / sqrtf(mean + eps);
	for (int i = 0; i < dim; i++)
		out[i] = (x[i] * scale) * w[i];
}

typedef struct norm_job
{
	float	   *residual;
	const float *delta;
	const float *x;
	const float *w;
	float	   *out;
	int			dim;
	float		eps;
} norm_job;

static void
norm_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	norm_job   *j = p;

	for (int64_t r = begin; r < end; r++)
	{
		const float *x;

		if (j->residual)
		{
			float	   *res = j->residual + r * j->dim;
			const float *del = j->delta + r * j->dim;

			for (int i = 0; i < j->dim; i++)
				res[i] = res[i] + del[i];
			x = res;
		}
		else
			x = j->x + r * j->dim;
		if (j->out)
			rmsnorm_row(x, j->w, j->out + r * j->dim, j->dim, j->eps);
	}
}

static int
cpu_rmsnorm(llm_backend *b, const float *x, const float *w, float *out, int n, int dim, float eps)
{
	norm_job	j = {NULL, NULL, x, w, out, dim, eps};

	if (n < 0 || dim <= 0 || (n > 0 && (x == NULL || w == NULL || out == NULL)))
		return fail(CPU(b), "rmsnorm: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n, 4, norm_task, &j);
	return 0;
}

static int
cpu_add_rmsnorm(llm_backend *b, float *residual, const float *delta, const float *w, float *out,
				int n, int dim, float eps)
{
	norm_job	j = {residual, delta, NULL, w, out, dim, eps};

	if (n < 0 || dim <= 0 || (n > 0 && (residual == NULL || delta == NULL || w == NULL || out == NULL)))
		return fail(CPU(b), "add_rmsnorm: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n, 4, norm_task, &j);
	return 0;
}

static int
cpu_add(llm_backend *b, float *residual, const float *delta, int n, int dim)
{
	norm_job	j = {residual, delta, NULL, NULL, NULL, dim, 0};

	if (n < 0 || dim <= 0 || (n > 0 && (residual == NULL || delta == NULL)))
		return fail(CPU(b), "add: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, n, 8, norm_task, &j);
	return 0;
}

typedef struct silu_job
{
	llm_swiglu_fn fn;
	const float *gate;
	const float *up;
	float	   *out;
} silu_job;

static void
silu_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	silu_job   *j = p;

	j->fn(j->gate + begin, j->up + begin, j->out + begin, end - begin);
}

/* SiLU as ggml_vec_swiglu_f32 (quant.h llm_swiglu_fn): per element, so chunking is free. */
static int
cpu_silu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n)
{
	silu_job	j = {CPU(b)->swiglu, gate, up, out};

	if (n > 0 && (gate == NULL || up == NULL || out == NULL))
		return fail(CPU(b), "silu_mul: NULL argument");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 2048, silu_task, &j);
	return 0;
}

typedef struct geglu_job
{
	llm_geglu_fn fn;
	const float *gate;
	const float *up;
	float	   *out;
} geglu_job;

static void
geglu_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	geglu_job  *j = p;

	j->fn(j->gate + begin, j->up + begin, j->out + begin, end - begin);
}

/* GeGLU as ggml_vec_geglu_f32 (elementwise.h): per element, so chunking is free. */
static int
cpu_gelu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n)
{
	geglu_job	j = {CPU(b)->geglu, gate, up, out};

	if (n > 0 && (gate == NULL || up == NULL || out == NULL))
		return fail(CPU(b), "gelu_mul: NULL argument");
	if (n > 0 && llm_gelu_table() == NULL)
		return fail(CPU(b), "gelu_mul: out of memory for the GELU table");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 4096, geglu_task, &j);
	return 0;
}

typedef struct scale_job
{
	llm_scale_fn fn;
	float	   *x;
	float		s;
} scale_job;

static void
scale_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	scale_job  *j = p;

	j->fn(j->x + begin, j->s, end - begin);
}

static int
cpu_scale(llm_backend *b, float *x, float s, size_t n)
{
	scale_job	j = {CPU(b)->scale, x, s};

	if (n > 0 && x == NULL)
		return fail(CPU(b), "scale: NULL argument");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 8192, scale_task, &j);
	return 0;
}

static void
softcap_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	scale_job  *j = p;

	llm_softcap_row(j->x + begin, j->s, end - begin);
}

/* tanhf has no vector form that rounds as libm's does: one call per element, as ggml_vec_tanh_f32. */
static int
cpu_softcap(llm_backend *b, float *x, float cap, size_t n)
{
	scale_job	j = {NULL, x, cap};

	if (!(cap > 0.0f) || (n > 0 && x == NULL))
		return fail(CPU(b), "softcap: invalid arguments");
	llm_threadpool_run(CPU(b)->pool, (int64_t) n, 8192, softcap_task, &j);
	return 0;
}

/*
 * scan_rows: each row cut into pieces of SCAN_PIECE floats (the last one
 * shorter), one pool item per (row, piece), joined per row in piece order
 * (row_scan.h), so the answer is the whole row's scan whichever thread ran
 * which piece.
 */
#define SCAN_PIECE 16384

typedef struct scan_job
{
	llm_row_scan_fn fn;
	const float *x;
	int			dim;
	int			pieces;			/* per row */
	llm_row_scan *out;			/* [n][pieces] */
} scan_job;

static void
scan_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	scan_job   *j = p;

	for (int64_t i = begin; i < end; i++)
	{
		int64_t		row = i / j->pieces,
					at = (i % j->pieces) * SCAN_PIECE,
					len = j->dim - at < SCAN_PIECE ? j->dim - at : SCAN_PIECE;

		j->fn(j->x + row * j->dim + at, len, &j->out[i]);
	}
}

static int
cpu_scan_rows(llm_backend *b, const float *x, int n, int dim, int32_t *argmax, uint8_t *finite)
{
	cpu_backend *cb = CPU(b);
	scan_job	j;

	if (n < 0 || dim <= 0 || (n > 0 && (x == NULL || argmax == NULL || finite == NULL)))
		return fail(cb, "scan_rows: invalid arguments");
	if (n == 0)
		return 0;
	j.fn = cb->row_scan;
	j.x = x;
	j.dim = dim;
	j.pieces = (dim + SCAN_PIECE - 1) / SCAN_PIECE;
	if (!grow((void **) &cb->scans, &cb->scans_cap, (size_t) n * (size_t) j.pieces * sizeof(llm_row_scan)))
		return fail(cb, "scan_rows: out of memory for %d rows", n);
	j.out = cb->scans;
	llm_threadpool_run(cb->pool, (int64_t) n * j.pieces, 1, scan_task, &j);
	for (int r = 0; r < n; r++)
	{
		llm_row_scan s = j.out[(size_t) r * j.pieces];

		for (int k = 1; k < j.pieces; k++)
			llm_row_scan_join(&s, &j.out[(size_t) r * j.pieces + k], k * SCAN_PIECE);
		argmax[r] = s.argmax;
		finite[r] = s.finite;
	}
	return 0;
}

static int
cpu_gather_rows(llm_backend *b, const float *x, float *out, int dim)
{
	cpu_backend *cb = CPU(b);

	if (!cb->have_step)
		return fail(cb, "gather_rows: no step");
	if (dim <= 0 || (cb->n_out > 0 && (x == NULL || out == NULL)))
		return fail(cb, "gather_rows: invalid arguments");
	for (int j = 0; j < cb->n_out; j++)
		memmove(out + (size_t) j * dim, x + (size_t) cb->out_rows[j] * dim, (size_t) dim * sizeof(float));
	return 0;
}

static int
cpu_sync(llm_backend *b)
{
	return 0;
}

/* ------------------------------------------------------------------------
 * matmul
 * ------------------------------------------------------------------------ */

typedef struct matmul_job
{
	const llm_qkernel *k;
	const llm_weight *w;
	const float *x;
	float	   *y;
	int			n;
	void	   *act;
	size_t		act_row;
	char	   *conv;			/* thread i's conversion scratch at conv + i * conv_stride */
	size_t		conv_stride;
} matmul_job;

static void
quantize_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	matmul_job *j = p;

	for (int64_t t = begin; t < end; t++)
		j->k->quantize_act(j->x + t * j->w->n_cols, (char *) j->act + t * j->act_row, j->w->n_cols);
}

/*
 * Cache blocking of a thread's rows: a super-block of MM_SUPER_ROWS weight
 * rows stays in L2 while the tokens go by in blocks whose quantized
 * activations fit in L1 (MM_ACT_L1_BYTES); within those, MM_ROW_BLOCK rows
 * (L1) meet every token tile of the block.  Small batches are one token
 * block, as before; large ones no longer stream every activation from L2
 * for each 16 rows.  The order of tiles never changes a result.
 */
#define MM_ROW_BLOCK 16
#define MM_SUPER_ROWS 256
#define MM_ACT_L1_BYTES (16 * 1024)
#ifndef MM_PREFETCH_MIN_TOKENS
#define MM_PREFETCH_MIN_TOKENS 4
#endif
#ifndef MM_PREFETCH_LOCALITY
#define MM_PREFETCH_LOCALITY 2
#endif

/* k's batch kernel when a matmul of n tokens uses it (quant.h batch_kernel), else NULL. */
static const llm_qkernel *
batch_kernel_for(const llm_qkernel *k, int n)
{
	return k->batch_kernel != NULL && n >= k->batch_min_tokens ? k->batch_kernel : NULL;
}

/*
 * Per-thread conversion scratch of the jobs (a row block in each batch
 * kernel's layout): grown once before the parallel run.
 */
static bool
prepare_conv(cpu_backend *cb, matmul_job *jobs, int n_jobs)
{
	size_t		stride = 0;

	for (int i = 0; i < n_jobs; i++)
	{
		const llm_qkernel *kb = batch_kernel_for(jobs[i].k, jobs[i].n);
		size_t		need = kb ? (size_t) MM_ROW_BLOCK * llm_type_row_bytes(kb->weight_type, jobs[i].w->n_cols) : 0;

		if (need > stride)
			stride = need;
	}
	if (stride > 0 && !grow(&cb->conv, &cb->conv_cap, stride * (size_t) llm_threadpool_size(cb->pool)))
		return false;
	for (int i = 0; i < n_jobs; i++)
	{
		jobs[i].conv = cb->conv;
		jobs[i].conv_stride = stride;
	}
	return true;
}

static void
matmul_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	matmul_job *j = p;
	const llm_qkernel *k = j->k;
	const int	T = k->tile_tokens;

	/*
	 * Few tokens (decode of one or two sequences) stream the weights from
	 * DRAM with little arithmetic per byte: fewer rows per tile means fewer
	 * concurrent streams, which the prefetchers keep up with (one token,
	 * 49152 x 576 Q8_0: 1.3 ms with one row per tile, 2.5 ms with four).
	 * Row-interleaved packed weights are one stream per group: whole groups.
	 */
	const int	R = k->row_group > 1 || j->n >= T ? k->tile_rows :
		j->n == 1 ? 1 : (k->tile_rows < 2 ? k->tile_rows : 2);
	const size_t ws = j->w->row_bytes;
	const int64_t nc = j->w->n_cols;
	const size_t os = (size_t) j->w->n_rows;
	int			tb = (int) (MM_ACT_L1_BYTES / j->act_row);

	/*
	 * A batch with a batch kernel: each row block's whole groups are
	 * converted once per token block into this thread's scratch and run
	 * there (quant.h batch_kernel); rows past the last whole group stay on
	 * k.  Results are the same bits either way.
	 */
	const llm_qkernel *kb = batch_kernel_for(k, j->n);
	const size_t cws = kb ? llm_type_row_bytes(kb->weight_type, nc) : 0;
	char	   *conv = kb ? j->conv + (size_t) thread_idx * j->conv_stride : NULL;

	tb = tb < T ? T : tb - tb % T;
	for (int64_t s0 = begin; s0 < end; s0 += MM_SUPER_ROWS)
	{
		int64_t		s1 = s0 + MM_SUPER_ROWS < end ? s0 + MM_SUPER_ROWS : end;

		for (int t0 = 0; t0 < j->n; t0 += tb)
		{
			int			t1 = t0 + tb < j->n ? t0 + tb : j->n;

			for (int64_t r0 = s0; r0 < s1; r0 += MM_ROW_BLOCK)
			{
				int64_t		r1 = r0 + MM_ROW_BLOCK < s1 ? r0 + MM_ROW_BLOCK : s1;

				/*
				 * Rows met for the first time come from DRAM and are short
				 * (a few cache lines each), too short for the hardware
				 * prefetcher: fetch the next row block while this one runs,
				 * spread over this block's token tiles (a burst of a whole
				 * block's lines overflows the miss queues).
				 */
				const char *pf = NULL;
				int64_t		pf_lines = 0;
				int			n_tiles = (t1 - t0 + T - 1) / T;
				int64_t		rk = r0;	/* rows from here on run on k */

				if (t0 == 0 && r1 < end && j->n >= MM_PREFETCH_MIN_TOKENS)
				{
					pf = (const char *) j->w->data + r1 * ws;
					pf_lines = ((r1 + MM_ROW_BLOCK < end ? r1 + MM_ROW_BLOCK : end) - r1) * (int64_t) ws / 64 + 1;
				}
				if (kb != NULL)
				{
					int			ng = (int) ((r1 - r0) / kb->row_group) * kb->row_group;

					if (ng > 0)
						k->batch_convert(nc, (const char *) j->w->data + r0 * ws, ws, ng, conv);
					rk = r0 + ng;
				}
				for (int t = t0, ti = 0; t < t1; t += T, ti++)
				{
					int			nt = t1 - t < T ? t1 - t : T;

					for (int64_t l = pf_lines * ti / n_tiles; l < pf_lines * (ti + 1) / n_tiles; l++)
						__builtin_prefetch(pf + l * 64, 0, MM_PREFETCH_LOCALITY);
					if (rk > r0)
						kb->dot_tile(nc, conv, cws, (int) (rk - r0),
									 (const char *) j->act + (size_t) t * j->act_row, j->act_row, nt,
									 j->y + (size_t) t * os + r0, os);
					for (int64_t r = rk; r < r1; r += R)
					{
						int			nr = r1 - r < R ? (int) (r1 - r) : R;

						k->dot_tile(nc, (const char *) j->w->data + r * ws, ws, nr,
									(const char *) j->act + (size_t) t * j->act_row, j->act_row, nt,
									j->y + (size_t) t * os + r, os);
					}
				}
			}
		}
	}
}

/* The kernel for w's rows (backend_priv: the packed kernel of repacked rows, load_weight). */
static const llm_qkernel *
weight_kernel(cpu_backend *cb, const llm_weight *w)
{
	const llm_qkernel *k = w->backend_priv ? (const llm_qkernel *) w->backend_priv :
		llm_qkernel_get(w->type, cb->impl);

	return k != NULL && w->n_cols % k->block_elems == 0 ? k : NULL;
}

static int
cpu_matmul(llm_backend *b, const llm_weight *w, const float *x, float *y, int n)
{
	cpu_backend *cb = CPU(b);
	matmul_job	j;

	if (w == NULL || w->data == NULL || n < 0 || (n > 0 && (x == NULL || y == NULL)))
		return fail(cb, "matmul: invalid arguments");
	j.k = weight_kernel(cb, w);
	if (j.k == NULL)
		return fail(cb, "matmul: unsupported weight type %u or shape", w->type);
	if (n == 0)
		return 0;
	j.w = w;
	j.x = x;
	j.y = y;
	j.n = n;
	j.act_row = j.k->act_row_bytes(w->n_cols);
	if (!grow(&cb->act, &cb->act_cap, j.act_row * (size_t) n))
		return fail(cb, "matmul: out of memory for %d activation rows", n);
	j.act = cb->act;
	if (!prepare_conv(cb, &j, 1))
		return fail(cb, "matmul: out of memory for the conversion scratch");
	/* all of x is read before y is written, so x and y may alias */
	llm_threadpool_run(cb->pool, n, 4, quantize_task, &j);
	llm_threadpool_run(cb->pool, w->n_rows, MM_ROW_BLOCK, matmul_task, &j);
	return 0;
}

#define MM_MULTI_MAX 4

typedef struct matmul_multi_job
{
	int			n_w;
	matmul_job	jobs[MM_MULTI_MAX];
	int64_t		row0[MM_MULTI_MAX + 1];	/* first row of each weight in the joint range */
} matmul_multi_job;

/* Rows [begin, end) of the weights laid end to end: each piece through matmul_task. */
static void
matmul_multi_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	matmul_multi_job *mj = p;

	for (int i = 0; i < mj->n_w && begin < end; i++)
	{
		int64_t		lo = begin > mj->row0[i] ? begin : mj->row0[i],
					hi = end < mj->row0[i + 1] ? end : mj->row0[i + 1];

		if (lo < hi)
			matmul_task(&mj->jobs[i], lo - mj->row0[i], hi - mj->row0[i], thread_idx);
	}
}

/*
 * y[i] = W[i] x for several weights of one input (attention Q/K/V, FFN
 * gate/up): the activations are quantized once and all rows run as one
 * parallel job, so a layer has fewer fork/joins.  Weights whose kernels
 * quantize differently fall back to separate matmuls.  Every output is
 * the same as from cpu_matmul.
 */
static int
cpu_matmul_multi(llm_backend *b, const llm_weight *const *w, int n_w, const float *x,
				 float *const *y, int n)
{
	cpu_backend *cb = CPU(b);
	matmul_multi_job mj;
	bool		shared = n_w >= 1 && n_w <= MM_MULTI_MAX;
	int64_t		row0 = 0;

	if (w == NULL || y == NULL || n_w < 0 || n < 0 || (n > 0 && x == NULL))
		return fail(cb, "matmul_multi: invalid arguments");
	for (int i = 0; i < n_w; i++)
	{
		if (w[i] == NULL || w[i]->data == NULL || (n > 0 && y[i] == NULL))
			return fail(cb, "matmul_multi: invalid arguments");
		if (i < MM_MULTI_MAX)
		{
			mj.jobs[i].k = weight_kernel(cb, w[i]);
			if (mj.jobs[i].k == NULL)
				return fail(cb, "matmul: unsupported weight type %u or shape", w[i]->type);
			if (mj.jobs[i].k->quantize_act != mj.jobs[0].k->quantize_act ||
				w[i]->n_cols != w[0]->n_cols)
				shared = false;
			/* rows of interleaved groups must start at a group boundary of the joint range */
			if (mj.jobs[i].k->row_group > 1 && row0 % mj.jobs[i].k->row_group != 0)
				shared = false;
			row0 += w[i]->n_rows;
		}
	}
	if (!shared)
	{
		for (int i = 0; i < n_w; i++)
			if (cpu_matmul(b, w[i], x, y[i], n) != 0)
				return -1;
		return 0;
	}
	if (n == 0 || n_w == 0)
		return 0;
	mj.n_w = n_w;
	mj.row0[0] = 0;
	for (int i = 0; i < n_w; i++)
	{
		matmul_job *j = &mj.jobs[i];

		j->w = w[i];
		j->x = x;
		j->y = y[i];
		j->n = n;
		j->act_row = j->k->act_row_bytes(w[i]->n_cols);
		mj.row0[i + 1] = mj.row0[i] + w[i]->n_rows;
	}
	if (!grow(&cb->act, &cb->act_cap, mj.jobs[0].act_row * (size_t) n))
		return fail(cb, "matmul: out of memory for %d activation rows", n);
	for (int i = 0; i < n_w; i++)
		mj.jobs[i].act = cb->act;
	if (!prepare_conv(cb, mj.jobs, n_w))
		return fail(cb, "matmul: out of memory for the conversion scratch");
	/* the outputs must not alias x: it is read by every weight's rows */
	llm_threadpool_run(cb->pool, n, 4, quantize_task, &mj.jobs[0]);
	llm_threadpool_run(cb->pool, mj.row0[n_w], MM_ROW_BLOCK, matmul_multi_task, &mj);
	return 0;
}

/* ------------------------------------------------------------------------
 * RoPE + KV store, attention
 * ------------------------------------------------------------------------ */

typedef struct rope_job
{
	cpu_backend *cb;
	int			layer;
	float	   *q;
	float	   *k;
	const float *v;
	int			n_heads;
	float		theta_scale;
	int			mode;			/* LLM_ROPE_NORMAL or LLM_ROPE_NEOX */
	float	   *cs;				/* the cos/sin table of this base */
} rope_job;

/*
 * Rotate adjacent pairs of every head of one token by pos * theta_scale^i
 * (ggml "normal" rope; cos/sin built as in ggml_rope_cache_init, the
 * rotation written with the fused multiply-adds GCC produces for ggml's
 * x0*c - x1*s and x0*s + x1*c under -ffp-contract=fast).
 */
static void
rope_heads(float *x, int n_heads, int hd, const float *cs)
{
	for (int h = 0; h < n_heads; h++)
	{
		float	   *v = x + (size_t) h * hd;

		for (int i = 0; i < hd; i += 2)
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
rope_heads_fma(float *x, int n_heads, int hd, const float *cs)
{
	for (int h = 0; h < n_heads; h++)
	{
		float	   *v = x + (size_t) h * hd;

		for (int i = 0; i < hd; i += 2)
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
 * NEOX mode: rotate (x[i], x[i + hd/2]) by the angle of pair i (ggml's
 * rotate_pairs with n_offset = n_dims/2: the same expressions, hence the
 * same fused form, as the normal mode).
 */
static void
rope_heads_neox(float *x, int n_heads, int hd, const float *cs)
{
	const int	half = hd / 2;

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
rope_heads_neox_fma(float *x, int n_heads, int hd, const float *cs)
{
	const int	half = hd / 2;

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

static void
rope_table_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	rope_job   *j = p;
	cpu_backend *cb = j->cb;
	const int	hd = cb->geo.head_dim;

	for (int64_t t = begin; t < end; t++)
	{
		float	   *cs = j->cs + (size_t) t * hd;
		float		theta = (float) cb->positions[t];

		for (int i = 0; i < hd; i += 2)
		{
			cs[i] = cosf(theta);
			cs[i + 1] = sinf(theta);
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
				bs = cb->geo.block_size;
	const size_t rb = llm_kv_row_bytes(cb->geo.kv_dtype, hd);
	void		(*rot) (float *, int, int, const float *) =
		j->mode == LLM_ROPE_NEOX ? rope_heads_neox : rope_heads;

#if defined(__x86_64__) || defined(__i386__)
	if (llm_cpu_has_avx2())
		rot = j->mode == LLM_ROPE_NEOX ? rope_heads_neox_fma : rope_heads_fma;
#endif
	for (int64_t t = begin; t < end; t++)
	{
		size_t		slot = (size_t) layer_slots(cb, j->layer)[t];
		float	   *kt = j->k + (size_t) t * nkv * hd;
		const float *cs = j->cs + (size_t) t * hd;
		const int32_t block = (int32_t) (slot / bs);
		const int	off = (int) (slot % bs);

		rot(j->q + (size_t) t * j->n_heads * hd, j->n_heads, hd, cs);
		rot(kt, nkv, hd, cs);

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

static int
cpu_rope_store_kv_mode(llm_backend *b, int layer, float *q, float *k, const float *v,
					   int n_heads, float rope_theta, int mode)
{
	cpu_backend *cb = CPU(b);
	rope_job	j;
	int			ti;

	if (!cb->have_step)
		return fail(cb, "rope_store_kv: no step");
	if (layer < 0 || layer >= cb->geo.n_layers)
		return fail(cb, "rope_store_kv: layer %d out of range", layer);
	if (n_heads <= 0 || !(rope_theta > 0) || (mode != LLM_ROPE_NORMAL && mode != LLM_ROPE_NEOX) ||
		(cb->n_tokens > 0 && (q == NULL || k == NULL || v == NULL)))
		return fail(cb, "rope_store_kv: invalid arguments");
	j.cb = cb;
	j.layer = layer;
	j.q = q;
	j.k = k;
	j.v = v;
	j.n_heads = n_heads;
	j.mode = mode;
	j.theta_scale = powf(rope_theta, -2.0f / (float) cb->geo.head_dim);
	for (ti = 0; ti < ROPE_TABLES && cb->rope_theta[ti] != rope_theta; ti++)
		;
	if (ti == ROPE_TABLES)
	{
		/* positions are the same for every layer of the step: one table per base */
		size_t		cap;

		for (ti = 0; ti < ROPE_TABLES && cb->rope_theta[ti] != 0.0f; ti++)
			;
		if (ti == ROPE_TABLES)
		{
			ti = cb->rope_next;
			cb->rope_next = (cb->rope_next + 1) % ROPE_TABLES;
		}
		cap = cb->rope_cap[ti] * sizeof(float);
		if (!grow((void **) &cb->rope_cs[ti], &cap,
				  (size_t) (cb->n_tokens ? cb->n_tokens : 1) * cb->geo.head_dim * sizeof(float)))
			return fail(cb, "rope_store_kv: out of memory");
		cb->rope_cap[ti] = cap / sizeof(float);
		j.cs = cb->rope_cs[ti];
		llm_threadpool_run(cb->pool, cb->n_tokens, 16, rope_table_task, &j);
		cb->rope_theta[ti] = rope_theta;
	}
	j.cs = cb->rope_cs[ti];
	llm_threadpool_run(cb->pool, cb->n_tokens, 4, rope_task, &j);
	return 0;
}

static int
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
	float		scale;
	int			window;			/* keys per query, 0 = all (backend.h attention) */
	const attn_item *items;
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
#ifndef ATTN_SPLIT_MIN_KEYS
#define ATTN_SPLIT_MIN_KEYS 512
#endif
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
	if (!grow((void **) &cb->split_scores, &cap, sj.pair_floats * (size_t) n_pairs * sizeof(float)))
	{
		*rc = fail(cb, "attention: out of memory for split scores");
		return true;
	}
	cb->split_cap = cap / sizeof(float);
	cap = cb->split_sync_cap;
	if (!grow((void **) &cb->split_sync, &cap, (size_t) n_pairs * sizeof(split_sync)))
	{
		*rc = fail(cb, "attention: out of memory for split counts");
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
cpu_attention(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale, int window)
{
	cpu_backend *cb = CPU(b);
	attn_job	j = {cb, layer, q, out, n_heads, 1, scale, window, NULL};
	int			group,
				nkv = cb->geo.n_kv_heads;
	int64_t		n_items = 0,
				n_token_rows = 0,
				n_blocks = 0;
	size_t		stride,
				cap,
				need;

	if (!cb->have_step)
		return fail(cb, "attention: no step");
	if (layer < 0 || layer >= cb->geo.n_layers)
		return fail(cb, "attention: layer %d out of range", layer);
	if (n_heads <= 0 || n_heads % cb->geo.n_kv_heads != 0)
		return fail(cb, "attention: %d heads is not a multiple of %d KV heads", n_heads, cb->geo.n_kv_heads);
	if (window < 0)
		return fail(cb, "attention: window %d is negative", window);
	if (cb->layer_local != NULL && cb->layer_local[layer] && (window == 0 || window > cb->geo.local_window))
		return fail(cb, "attention: layer %d is in the local KV group (window at most %d) but asks for window %d",
					layer, cb->geo.local_window, window);
	if (cb->n_tokens == 0)
		return 0;
	if (q == NULL || out == NULL)
		return fail(cb, "attention: NULL argument");
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
	if (!grow((void **) &cb->attn_items, &cap, need * sizeof(attn_item)))
		return fail(cb, "attention: out of memory for work items");
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
	if (!grow((void **) &cb->att_scratch, &cap, stride * (size_t) cb->base.n_threads * sizeof(float)))
		return fail(cb, "attention: out of memory for scratch");
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

/* ------------------------------------------------------------------------
 * construction
 * ------------------------------------------------------------------------ */

static const llm_backend_ops cpu_ops = {
	.name = "cpu",
	.destroy = cpu_destroy,
	.last_error = cpu_last_error,
	.alloc_f32 = cpu_alloc_f32,
	.free_f32 = cpu_free_f32,
	.download = cpu_download,
	.load_weight = cpu_load_weight,
	.free_weight = cpu_free_weight,
	.load_vector = cpu_load_vector,
	.kv_init = cpu_kv_init,
	.kv_local_group = true,
	.begin_step = cpu_begin_step,
	.embed = cpu_embed,
	.rmsnorm = cpu_rmsnorm,
	.add_rmsnorm = cpu_add_rmsnorm,
	.add = cpu_add,
	.matmul = cpu_matmul,
	.matmul_multi = cpu_matmul_multi,
	.rope_store_kv = cpu_rope_store_kv,
	.attention = cpu_attention,
	.silu_mul = cpu_silu_mul,
	.gather_rows = cpu_gather_rows,
	.sync = cpu_sync,
	.scale = cpu_scale,
	.gelu_mul = cpu_gelu_mul,
	.rope_store_kv_mode = cpu_rope_store_kv_mode,
	.softcap = cpu_softcap,
	.copy_blocks = cpu_copy_blocks,
	.host_buffers = true,
	.scan_rows = cpu_scan_rows,
	.layernorm = llm_cpu_layernorm,
	.rope_rows = llm_cpu_rope_rows,
	.attention_rows = llm_cpu_attention_rows,
};

static llm_backend *
cpu_create(int n_threads, bool shared_pool, char *err, size_t errlen)
{
	cpu_backend *cb;

	if (n_threads <= 0)
	{
		long		n = sysconf(_SC_NPROCESSORS_ONLN);

		n_threads = n > 0 ? (int) (n > 256 ? 256 : n) : 1;
	}
	cb = calloc(1, sizeof(*cb));
	if (cb == NULL)
	{
		snprintf(err, errlen, "out of memory creating the CPU backend");
		return NULL;
	}
	cb->base.ops = &cpu_ops;
	cb->base.n_threads = n_threads;
	cb->impl = LLM_IMPL_BEST;
	cb->attn = llm_attn_kernel_get(LLM_IMPL_BEST);
	cb->attn_block = llm_attn_block_kernel_get(LLM_IMPL_BEST);
	cb->attn_split = llm_attn_split_get(LLM_IMPL_BEST);
	cb->split_min_keys = ATTN_SPLIT_MIN_KEYS;
	cb->swiglu = llm_swiglu_get(LLM_IMPL_BEST);
	cb->geglu = llm_geglu_get(LLM_IMPL_BEST);
	cb->scale = llm_scale_get(LLM_IMPL_BEST);
	cb->row_scan = llm_row_scan_get(LLM_IMPL_BEST);
	cb->shared_pool = shared_pool;
	cb->pool = shared_pool ? llm_threadpool_acquire_shared(n_threads, err, errlen)
		: llm_threadpool_create(n_threads, err, errlen);
	if (cb->pool == NULL)
	{
		free(cb);
		return NULL;
	}
	return &cb->base;
}

llm_backend *
llm_backend_cpu_create(int n_threads, char *err, size_t errlen)
{
	return cpu_create(n_threads, false, err, errlen);
}

llm_backend *
llm_backend_cpu_create_shared(int n_threads, char *err, size_t errlen)
{
	return cpu_create(n_threads, true, err, errlen);
}

int
llm_backend_cpu_set_impl(llm_backend *b, int impl)
{
	cpu_backend *cb = CPU(b);
	llm_attn_fn ak;

	if (b == NULL || b->ops != &cpu_ops)
		return -1;
	ak = llm_attn_kernel_get(impl);
	if (ak == NULL)
		return fail(cb, "kernel implementation %d is not available on this CPU", impl);
	cb->impl = impl;
	cb->attn = ak;
	cb->attn_block = llm_attn_block_kernel_get(impl);
	cb->attn_split = llm_attn_split_get(impl);
	cb->swiglu = llm_swiglu_get(impl);
	cb->geglu = llm_geglu_get(impl);
	cb->scale = llm_scale_get(impl);
	cb->row_scan = llm_row_scan_get(impl);
	return 0;
}

const char *
llm_backend_cpu_impl_name(llm_backend *b)
{
	const llm_qkernel *k;

	if (b == NULL || b->ops != &cpu_ops)
		return "none";
	k = llm_qkernel_get(LLM_TYPE_Q4_1, CPU(b)->impl);
	return k ? k->impl : "none";
}

int
llm_backend_cpu_set_split_keys(llm_backend *b, int min_keys)
{
	if (b == NULL || b->ops != &cpu_ops || min_keys < 1)
		return -1;
	CPU(b)->split_min_keys = min_keys;
	return 0;
}

const void *
llm_backend_cpu_kv(llm_backend *b, int layer, bool is_v)
{
	cpu_backend *cb = CPU(b);

	if (b == NULL || b->ops != &cpu_ops || !cb->kv_ready || layer < 0 || layer >= cb->geo.n_layers)
		return NULL;
	return is_v ? cb->v_cache[layer] : cb->k_cache[layer];
}

int
llm_backend_cpu_set_single_rows(llm_backend *b, const uint8_t *flags)
{
	cpu_backend *cb = CPU(b);

	if (b == NULL || b->ops != &cpu_ops)
		return -1;
	if (!cb->have_step)
		return fail(cb, "set_single_rows: no step");
	cb->have_single = false;
	if (flags == NULL || cb->n_tokens == 0)
		return 0;
	if (!grow((void **) &cb->single_rows, &cb->cap_single, (size_t) cb->n_tokens))
		return fail(cb, "set_single_rows: out of memory");
	memcpy(cb->single_rows, flags, (size_t) cb->n_tokens);
	cb->have_single = true;
	return 0;
}
