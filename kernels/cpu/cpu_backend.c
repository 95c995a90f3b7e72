/*
 * cpu_backend.c — the CPU compute backend (kernels/backend.h): its op
 * table, construction, memory, the paged KV cache, the step description
 * and the ops that only move rows (embed, gather_rows, scan_rows).  The
 * arithmetic ops live beside it: cpu_elementwise.c (norms, activations,
 * adds, over elementwise.c's kernels), cpu_matmul.c (matmul tiling, the
 * batch path and prefetch), cpu_attention.c (RoPE + KV store, attention
 * jobs and their split); cpu_internal.h is what they share.
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
 * Q4_K and Q6_K matmuls reduce per token in the order llama.cpp's batch of
 * that token would (the step's row_forms; quant.h "Row forms").
 * Prompt logits equal the oracle's exactly; with decode rows marked, so do
 * single-stream greedy generations.  Kernel implementations come from
 * dispatch.h.
 */
#define _GNU_SOURCE
#include "kernels/backend.h"
#include "backend_cpu.h"
#include "cpu_internal.h"
#include "amx_bf16.h"
#include "huge_pages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const llm_backend_ops cpu_ops;

/* Grow an int32 array to n elements (contents are not preserved). */
static bool
grow_i32(int32_t **buf, size_t *cap, size_t n)
{
	size_t		c = *cap * sizeof(int32_t);
	bool		ok = cpu_grow((void **) buf, &c, (n ? n : 1) * sizeof(int32_t));

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
	free(cb->row_forms);
	free(cb->act);
	free(cb->conv);
	for (int i = 0; i < ROPE_TABLES; i++)
		free(cb->rope_cs[i]);
	free(cb->att_scratch);
	free(cb->rows_scratch);
	free(cb->attn_items);
	free(cb->split_scores);
	free(cb->split_sync);
	free(cb->scans);
	free(cb->amx_act);
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
		cpu_fail(CPU(b), "out of memory allocating %zu floats", n);
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
		return cpu_fail(CPU(b), "download: NULL pointer");
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
		return cpu_fail(cb, "load_weight: NULL weight");
	ti = llm_type_get(host->type);
	if (ti == NULL)
		return cpu_fail(cb, "load_weight: unknown tensor type %u", host->type);
	k = llm_qkernel_get(host->type, cb->impl);
	if (k == NULL)
		return cpu_fail(cb, "load_weight: the CPU backend cannot compute with %s weights", ti->name);
	if (host->n_rows <= 0 || host->n_cols <= 0 || host->n_cols > INT32_MAX || host->n_rows > INT32_MAX)
		return cpu_fail(cb, "load_weight: bad shape %lld x %lld",
					(long long) host->n_rows, (long long) host->n_cols);
	if (host->n_cols % k->block_elems != 0)
		return cpu_fail(cb, "load_weight: %s row length %lld is not a multiple of %d",
					ti->name, (long long) host->n_cols, k->block_elems);
	if (host->row_bytes != llm_type_row_bytes(host->type, host->n_cols))
		return cpu_fail(cb, "load_weight: row_bytes %zu does not match %s x %lld",
					host->row_bytes, ti->name, (long long) host->n_cols);
	if (cb->weights == NULL && (cb->weights = llm_huge_arena_create()) == NULL)
		return cpu_fail(cb, "load_weight: out of memory");
	copy = llm_huge_arena_alloc(cb->weights, host->row_bytes * (size_t) host->n_rows);
	if (copy == NULL)
		return cpu_fail(cb, "load_weight: out of memory for a %lld x %lld %s weight",
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

const char	cpu_amx_impl[] = "avx512-amx-bf16";

/*
 * load_weight_encoder: load_weight, then for an F16 matrix on a CPU and
 * kernel that allow AMX-BF16 (amx_bf16.h; the process asks for the tile
 * state here, once) also the split, packed copy, which cpu_matmul then
 * uses for every call on this weight whatever its token count (so an
 * input's outputs are the same alone and in a batch).  Elsewhere the
 * weight is load_weight's: the exact kernels.
 */
static int
cpu_load_weight_encoder(llm_backend *b, const llm_weight *host, llm_weight *out)
{
	cpu_backend *cb = CPU(b);
	cpu_amx_weight *a;
	uint16_t   *packed;

	if (cpu_load_weight(b, host, out) != 0)
		return -1;
	if (host->type != LLM_TYPE_F16 || out->backend_priv != NULL || cb->impl == LLM_IMPL_SCALAR ||
		!llm_amx_bf16_usable(NULL, 0))
		return 0;
	a = llm_huge_arena_alloc(cb->weights, sizeof(cpu_amx_weight));
	packed = llm_huge_arena_alloc(cb->weights, llm_amx_packed_bytes(host->n_rows, host->n_cols));
	if (a == NULL || packed == NULL)
		return cpu_fail(cb, "load_weight: out of memory for the AMX form of a %lld x %lld weight",
						(long long) host->n_rows, (long long) host->n_cols);
	llm_amx_pack_f16(host->data, host->row_bytes, host->n_rows, host->n_cols, packed);
	a->k = *llm_qkernel_get(host->type, cb->impl);
	a->k.impl = cpu_amx_impl;
	a->packed = packed;
	out->backend_priv = a;
	cb->encoder_fast = true;
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
		cpu_fail(CPU(b), "load_vector: NULL source");
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

static int
cpu_kv_init(llm_backend *b, const llm_kv_geometry *g)
{
	cpu_backend *cb = CPU(b);

	if (cb->kv_ready)
		return cpu_fail(cb, "kv_init: KV cache already initialised");
	if (g == NULL || g->n_layers <= 0 || g->n_kv_heads <= 0 || g->head_dim <= 0 ||
		g->block_size <= 0 || g->n_blocks <= 0)
		return cpu_fail(cb, "kv_init: invalid geometry");
	if (g->head_dim % 16 != 0 || g->head_dim > 4096)
		return cpu_fail(cb, "kv_init: head_dim %d must be a multiple of 16 and at most 4096", g->head_dim);
	if (g->kv_dtype != LLM_KV_F16 && g->kv_dtype != LLM_KV_Q8_0)
		return cpu_fail(cb, "kv_init: unknown KV cache type %d (f16 = %d, q8_0 = %d)", g->kv_dtype, LLM_KV_F16,
					LLM_KV_Q8_0);
	if (g->kv_dtype == LLM_KV_Q8_0 && g->head_dim % LLM_QK != 0)
		return cpu_fail(cb, "kv_init: a q8_0 KV cache needs head_dim a multiple of %d, not %d", LLM_QK, g->head_dim);
	if ((int64_t) g->n_blocks * g->block_size > INT32_MAX)
		return cpu_fail(cb, "kv_init: %d blocks of %d slots exceed the slot range",
					g->n_blocks, g->block_size);
	if (g->layer_local != NULL)
	{
		if (g->n_blocks_local <= 0 || g->local_window <= 0)
			return cpu_fail(cb, "kv_init: a local group needs blocks and a window (%d blocks, window %d)",
						g->n_blocks_local, g->local_window);
		if ((int64_t) g->n_blocks_local * g->block_size > INT32_MAX)
			return cpu_fail(cb, "kv_init: %d local blocks of %d slots exceed the slot range",
						g->n_blocks_local, g->block_size);
		cb->layer_local = malloc((size_t) g->n_layers);
		if (cb->layer_local == NULL)
			return cpu_fail(cb, "kv_init: out of memory");
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
	return cpu_fail(cb, "kv_init: out of memory for %zu MiB of KV cache",
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
		return cpu_fail(cb, "copy_blocks: kv_init has not been called");
	if (group != LLM_KV_GROUP_GLOBAL && group != LLM_KV_GROUP_LOCAL)
		return cpu_fail(cb, "copy_blocks: unknown KV group %d", group);
	if (group == LLM_KV_GROUP_LOCAL && cb->layer_local == NULL)
		return cpu_fail(cb, "copy_blocks: the cache has no local group");
	if (n < 0 || (n > 0 && (src == NULL || dst == NULL)))
		return cpu_fail(cb, "copy_blocks: invalid arguments");
	nb = group == LLM_KV_GROUP_LOCAL ? g->n_blocks_local : g->n_blocks;
	for (int i = 0; i < n; i++)
	{
		if (src[i] < 0 || src[i] >= nb || dst[i] < 0 || dst[i] >= nb)
			return cpu_fail(cb, "copy_blocks: block %d -> %d outside the group's %d blocks", src[i], dst[i], nb);
		for (int j = 0; j < n; j++)
			if (dst[i] == src[j] || (j != i && dst[i] == dst[j]))
				return cpu_fail(cb, "copy_blocks: block %d is a destination and also a source or another destination",
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
		return cpu_fail(cb, "begin_step: kv_init has not been called");
	if (d == NULL || d->n_tokens < 0 || d->n_seqs < 0 || d->n_out < 0 || d->max_blocks_per_seq < 0)
		return cpu_fail(cb, "begin_step: invalid step description");
	nt = d->n_tokens;
	ns = d->n_seqs;
	mb = d->max_blocks_per_seq;
	bs = cb->geo.block_size;
	if (nt > 0 && (d->token_ids == NULL || d->positions == NULL || d->slots == NULL))
		return cpu_fail(cb, "begin_step: missing token arrays");
	if (ns == 0 && nt > 0)
		return cpu_fail(cb, "begin_step: %d tokens but no sequence", nt);
	if (ns > 0 && (d->seq_start == NULL || d->seq_kv_len == NULL || (mb > 0 && d->block_tables == NULL)))
		return cpu_fail(cb, "begin_step: missing sequence arrays");
	if (d->n_out > 0 && d->out_rows == NULL)
		return cpu_fail(cb, "begin_step: missing out_rows");
	if (cb->layer_local != NULL && ((nt > 0 && d->slots_local == NULL) || (ns > 0 && mb > 0 && d->block_tables_local == NULL)))
		return cpu_fail(cb, "begin_step: the KV cache has a local group but the step has no local slots or block tables");
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
		return cpu_fail(cb, "begin_step: out of memory");

	if (ns > 0 && (d->seq_start[0] != 0 || d->seq_start[ns] != nt))
		return cpu_fail(cb, "begin_step: seq_start must run from 0 to n_tokens (%d)", nt);
	for (int s = 0; s < ns; s++)
	{
		int			len = d->seq_kv_len[s];
		int			used_blocks;

		if (d->seq_start[s + 1] < d->seq_start[s])
			return cpu_fail(cb, "begin_step: seq_start not ascending at sequence %d", s);
		if (len < 0 || (int64_t) len > (int64_t) mb * bs)
			return cpu_fail(cb, "begin_step: sequence %d KV length %d exceeds its %d blocks", s, len, mb);
		used_blocks = (len + bs - 1) / bs;
		for (int j = 0; j < used_blocks; j++)
		{
			int32_t		blk = d->block_tables[(size_t) s * mb + j];

			if (blk < 0 || blk >= cb->geo.n_blocks)
				return cpu_fail(cb, "begin_step: sequence %d block %d has invalid id %d", s, j, blk);
		}
		if (len > max_len)
			max_len = len;
		for (int t = d->seq_start[s]; t < d->seq_start[s + 1]; t++)
		{
			int			p = d->positions[t];
			int64_t		want;

			if (p < 0 || p >= len)
				return cpu_fail(cb, "begin_step: token %d position %d outside sequence %d KV length %d",
							t, p, s, len);
			want = (int64_t) d->block_tables[(size_t) s * mb + p / bs] * bs + p % bs;
			if (d->slots[t] != want)
				return cpu_fail(cb, "begin_step: token %d slot %d differs from block-table slot %lld of position %d",
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
					return cpu_fail(cb, "begin_step: sequence %d local block %d has invalid id %d", s, j, lbt[j]);
			for (int t = d->seq_start[s]; t < d->seq_start[s + 1]; t++)
			{
				int			p = d->positions[t];

				if (t > d->seq_start[s] && p < d->positions[t - 1])
					return cpu_fail(cb, "begin_step: sequence %d positions not ascending at token %d", s, t);
				if (d->slots_local[t] != (int64_t) lbt[p / bs] * bs + p % bs)
					return cpu_fail(cb, "begin_step: token %d local slot %d differs from its block-table slot",
								t, d->slots_local[t]);
			}
		}
	}
	for (int j = 0; j < d->n_out; j++)
		if (d->out_rows[j] < 0 || d->out_rows[j] >= nt)
			return cpu_fail(cb, "begin_step: out_rows[%d] = %d is not a token row", j, d->out_rows[j]);

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
	cb->have_forms = false;
	if (d->row_forms != NULL && nt > 0)
	{
		if (!cpu_grow((void **) &cb->row_forms, &cb->cap_forms, (size_t) nt))
			return cpu_fail(cb, "begin_step: out of memory");
		memcpy(cb->row_forms, d->row_forms, (size_t) nt);
		cb->have_forms = true;
	}
	cb->have_step = true;
	if (d->decode_rows != NULL)
		return llm_backend_cpu_set_single_rows(b, d->decode_rows);
	return 0;
}
/* backend.h tail_rows: the rows llama.cpp computes alone there lose their other forms. */
static int
cpu_tail_rows(llm_backend *b)
{
	cpu_backend *cb = CPU(b);

	if (!cb->have_step)
		return cpu_fail(cb, "tail_rows: no step");
	if (cb->have_forms)
		for (int t = 0; t < cb->n_tokens; t++)
			if (cb->row_forms[t] & LLM_ROW_TAIL_ALONE)
				cb->row_forms[t] = 0;
	return 0;
}

/* ------------------------------------------------------------------------
 * ops that move rows: embed, scan_rows, gather_rows (and sync)
 * ------------------------------------------------------------------------ */

static int
cpu_embed(llm_backend *b, const llm_weight *emb, float *out)
{
	cpu_backend *cb = CPU(b);

	if (!cb->have_step)
		return cpu_fail(cb, "embed: no step (begin_step failed or was not called)");
	if (emb == NULL || emb->data == NULL || out == NULL)
		return cpu_fail(cb, "embed: NULL argument");
	for (int t = 0; t < cb->n_tokens; t++)
	{
		int32_t		id = cb->token_ids[t];

		if (id < 0 || id >= emb->n_rows)
			return cpu_fail(cb, "embed: token id %d outside vocabulary of %lld", id, (long long) emb->n_rows);
		const char *row = (const char *) emb->data + (size_t) id * emb->row_bytes;

		if (emb->backend_priv != NULL)
		{
			/* repacked rows: back to GGUF layout first */
			if (!cpu_grow(&cb->act, &cb->act_cap, emb->row_bytes))
				return cpu_fail(cb, "embed: out of memory");
			((const llm_qkernel *) emb->backend_priv)->unpack(emb->data, id, cb->act, emb->n_cols);
			row = cb->act;
		}
		if (!llm_dequantize_row(emb->type, row, out + (size_t) t * emb->n_cols, emb->n_cols))
			return cpu_fail(cb, "embed: cannot dequantize type %u", emb->type);
	}
	return 0;
}

/* x[t] += row (positions[t] or 0) + offset of table, dequantized (backend.h add_table_rows). */
static int
cpu_add_table_rows(llm_backend *b, const llm_weight *table, bool by_position, int32_t offset, float *x)
{
	cpu_backend *cb = CPU(b);
	int64_t		nc;

	if (!cb->have_step)
		return cpu_fail(cb, "add_table_rows: no step (begin_step failed or was not called)");
	if (table == NULL || table->data == NULL || x == NULL)
		return cpu_fail(cb, "add_table_rows: NULL argument");
	nc = table->n_cols;
	for (int t = 0; t < cb->n_tokens; t++)
	{
		int64_t		r = (int64_t) (by_position ? cb->positions[t] : 0) + offset;

		if (r < 0 || r >= table->n_rows)
			return cpu_fail(cb, "add_table_rows: row %lld outside the table's %lld rows",
							(long long) r, (long long) table->n_rows);
	}
	if (!cpu_grow(&cb->act, &cb->act_cap, (size_t) nc * sizeof(float) + table->row_bytes))
		return cpu_fail(cb, "add_table_rows: out of memory");
	for (int t = 0; t < cb->n_tokens; t++)
	{
		int64_t		r = (int64_t) (by_position ? cb->positions[t] : 0) + offset;
		const char *row = (const char *) table->data + (size_t) r * table->row_bytes;
		float	   *deq = (float *) cb->act;
		float	   *xt = x + (size_t) t * nc;

		if (table->backend_priv != NULL)
		{
			/* repacked rows: back to GGUF layout first, after the dequantized row */
			((const llm_qkernel *) table->backend_priv)->unpack(table->data, r, (char *) cb->act + nc * sizeof(float),
																 nc);
			row = (const char *) cb->act + nc * sizeof(float);
		}
		if (!llm_dequantize_row(table->type, row, deq, nc))
			return cpu_fail(cb, "add_table_rows: cannot dequantize type %u", table->type);
		for (int64_t i = 0; i < nc; i++)
			xt[i] = xt[i] + deq[i];
	}
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
		return cpu_fail(cb, "scan_rows: invalid arguments");
	if (n == 0)
		return 0;
	j.fn = cb->row_scan;
	j.x = x;
	j.dim = dim;
	j.pieces = (dim + SCAN_PIECE - 1) / SCAN_PIECE;
	if (!cpu_grow((void **) &cb->scans, &cb->scans_cap, (size_t) n * (size_t) j.pieces * sizeof(llm_row_scan)))
		return cpu_fail(cb, "scan_rows: out of memory for %d rows", n);
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
		return cpu_fail(cb, "gather_rows: no step");
	if (dim <= 0 || (cb->n_out > 0 && (x == NULL || out == NULL)))
		return cpu_fail(cb, "gather_rows: invalid arguments");
	for (int j = 0; j < cb->n_out; j++)
		memmove(out + (size_t) j * dim, x + (size_t) cb->out_rows[j] * dim, (size_t) dim * sizeof(float));
	/*
	 * The gathered rows are not the step's token rows: llama.cpp computes
	 * the output projection on them as one batch of its own, so the rest of
	 * the step's matmuls run without row forms (cpu_matmul.c job_forms).
	 */
	cb->have_forms = false;
	return 0;
}

static int
cpu_sync(llm_backend *b)
{
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
	.load_weight_encoder = cpu_load_weight_encoder,
	.load_vector = cpu_load_vector,
	.kv_init = cpu_kv_init,
	.kv_local_group = true,
	.begin_step = cpu_begin_step,
	.tail_rows = cpu_tail_rows,
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
	.add_broadcast = cpu_add_broadcast,
	.layernorm = cpu_layernorm,
	.rope_rows = llm_cpu_rope_rows,
	.attention_rows = cpu_attention_rows,
	.rope_store_kv_opts = cpu_rope_store_kv_opts,
	.attention_softcap = cpu_attention_softcap,
	.add_table_rows = cpu_add_table_rows,
	.gelu_erf = cpu_gelu_erf,
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
	cb->add_row = llm_add_row_get(LLM_IMPL_BEST);
	cb->attn_rows = llm_attn_rows_get(LLM_IMPL_BEST);
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
		return cpu_fail(cb, "kernel implementation %d is not available on this CPU", impl);
	cb->impl = impl;
	cb->attn = ak;
	cb->attn_block = llm_attn_block_kernel_get(impl);
	cb->attn_split = llm_attn_split_get(impl);
	cb->swiglu = llm_swiglu_get(impl);
	cb->geglu = llm_geglu_get(impl);
	cb->scale = llm_scale_get(impl);
	cb->add_row = llm_add_row_get(impl);
	cb->attn_rows = llm_attn_rows_get(impl);
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
	if (k == NULL)
		return "none";
	/* an encoder's F16 matrices on AMX tiles (cpu_load_weight_encoder) */
	if (CPU(b)->encoder_fast)
		return strcmp(k->impl, "avx2") == 0 ? "avx2+amx-bf16" : "avx512vnni+amx-bf16";
	return k->impl;
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
		return cpu_fail(cb, "set_single_rows: no step");
	cb->have_single = false;
	if (flags == NULL || cb->n_tokens == 0)
		return 0;
	if (!cpu_grow((void **) &cb->single_rows, &cb->cap_single, (size_t) cb->n_tokens))
		return cpu_fail(cb, "set_single_rows: out of memory");
	memcpy(cb->single_rows, flags, (size_t) cb->n_tokens);
	cb->have_single = true;
	return 0;
}
