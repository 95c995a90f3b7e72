/*
 * backend_cuda.cu — host side of the CUDA compute backend (kernels/backend.h):
 * device and cuBLAS setup, weights, the paged KV cache, the step description,
 * and the op table.  Kernels live in kernels_*.cu (cuda_internal.h).
 *
 * Design:
 *  - One non-blocking stream; every op is asynchronous on it; download and
 *    sync wait.  Every CUDA and cuBLAS call is checked; a failure becomes the
 *    backend's error string and a -1 return, never an abort.
 *  - Weights are uploaded once: an fp16 copy (cuBLAS GEMMs, fp32
 *    accumulation, activations converted to fp16) plus, for Q4_0/Q4_1/Q8_0,
 *    a repacked copy of the quantized blocks read by the GEMV kernel that
 *    serves steps of at most gemv_max_n tokens (decode).
 *  - begin_step validates the step on the host exactly as the CPU backend
 *    does (a bad block id must never reach a kernel), builds the attention
 *    work lists (split-K items for decode tokens, 64-row tiles for prefill
 *    chunks) and uploads everything with ONE copy from a pinned staging
 *    buffer into a device buffer that only grows.  Scratch buffers are grown
 *    in begin_step too, so that the ops of a step allocate nothing: the shape
 *    needed to capture a decode step into a CUDA graph later (not done yet).
 *  - Deterministic mode (LLM_DETERMINISTIC=1 or LLM_CUDA_DETERMINISTIC flag):
 *    every matmul goes through the batch-invariant GEMV kernel (no cuBLAS,
 *    whose kernel choice depends on the batch size) and every token's
 *    attention through the split-K kernel with its fixed split size, so a
 *    token's outputs do not depend on the batch or on prompt chunking.
 *
 * Compile- and link-verified with nvcc 13.0 on a machine without a GPU; not
 * yet run on a device (docs/GPU.md).
 */
#include "backend_cuda.h"
#include "cuda_internal.h"
extern "C"
{
#include "kernels/quant_types.h"
#include "kernels/cpu/elementwise.h"
}

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Tokens up to which a matmul uses the GEMV kernel outside the deterministic mode. */
#define DEFAULT_GEMV_MAX_N 4
/* cuBLAS workspace given explicitly (no allocation inside a step; graph capture later). */
#define CUBLAS_WORKSPACE_BYTES (32u << 20)

typedef struct cuda_backend
{
	llm_backend base;			/* first: llm_backend * <-> cuda_backend * */
	int			device;
	bool		deterministic;
	int			gemv_max_n;
	char		dev_name[256];
	cudaStream_t stream;
	cublasHandle_t cublas;
	void	   *cublas_ws;
	cudaEvent_t stage_done;
	char		err[512];

	/* KV cache */
	bool		kv_ready;
	llm_kv_geometry geo;
	__half	   *kv_pool;		/* [n_layers][2][n_blocks * block_size * n_kv * hd] */
	size_t		layer_elems;

	/* current step: host copies (validation, work lists) */
	bool		have_step;
	int			n_tokens;
	int			n_seqs;
	int			max_blocks;
	int			n_out;
	int32_t    *h_tok_seq;
	size_t		cap_tok_seq;
	int32_t    *h_token_ids;
	size_t		cap_token_ids;
	int32_t    *h_dec_items;
	size_t		cap_dec_items;
	int32_t    *h_dec_tokens,
			   *h_dec_item0,
			   *h_dec_nsplit;
	size_t		cap_dec_tokens;
	int32_t    *h_pf_tiles;
	size_t		cap_pf_tiles;

	/* staging: pinned host buffer -> device buffer (int32 units) */
	int32_t    *h_stage;
	int32_t    *d_stage;
	size_t		stage_cap;
	cuda_step_dev sd;

	/* scratch (device) */
	__half	   *act16;
	size_t		act16_cap;		/* bytes */
	float	   *xcopy;
	size_t		xcopy_cap;		/* bytes */
	float	   *partials;
	size_t		partials_cap;	/* bytes */
	int64_t		max_cols;		/* largest n_cols of a loaded weight */
	__half	   *gelu16;			/* [65536] binary16 GELU table (gelu_mul), uploaded on first use */
} cuda_backend;

#define CB(b) ((cuda_backend *) (b))

static int
fail(cuda_backend *cb, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static int
fail(cuda_backend *cb, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(cb->err, sizeof(cb->err), fmt, ap);
	va_end(ap);
	return -1;
}

static int
fail_cuda(cuda_backend *cb, const char *what, cudaError_t e)
{
	return fail(cb, "%s: CUDA error %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

static int
fail_cublas(cuda_backend *cb, const char *what, cublasStatus_t s)
{
	return fail(cb, "%s: cuBLAS error %d (%s)", what, (int) s, cublasGetStatusString(s));
}

#define CK(call, what) \
	do { cudaError_t ck_e_ = (call); if (ck_e_ != cudaSuccess) return fail_cuda(cb, (what), ck_e_); } while (0)

/* Grow a host int32 array to n elements (contents not kept). */
static bool
grow_host_i32(int32_t **p, size_t *cap, size_t n)
{
	int32_t    *q;

	if (n == 0)
		n = 1;
	if (n <= *cap)
		return true;
	n = n + n / 2 + 16;
	q = (int32_t *) malloc(n * sizeof(int32_t));
	if (q == NULL)
		return false;
	free(*p);
	*p = q;
	*cap = n;
	return true;
}

/*
 * Grow a device buffer to at least `bytes`.  cudaFree waits for the device,
 * so work queued on the old buffer has finished before it goes.
 */
static int
grow_dev(cuda_backend *cb, void **p, size_t *cap, size_t bytes, const char *what)
{
	cudaError_t e;

	if (bytes == 0)
		bytes = 16;
	if (bytes <= *cap)
		return 0;
	bytes = bytes + bytes / 4 + 256;
	if (*p)
	{
		cudaFree(*p);
		*p = NULL;
		*cap = 0;
	}
	e = cudaMalloc(p, bytes);
	if (e != cudaSuccess)
	{
		*p = NULL;
		return fail(cb, "%s: cannot allocate %zu MiB of device memory: %s", what, bytes >> 20,
					cudaGetErrorString(e));
	}
	*cap = bytes;
	return 0;
}

static bool
overlaps(const void *a, size_t na, const void *b, size_t nb)
{
	const char *pa = (const char *) a,
			   *pb = (const char *) b;

	return pa < pb + nb && pb < pa + na;
}

/* ------------------------------------------------------------------------
 * lifetime, memory
 * ------------------------------------------------------------------------ */

static void
cuda_destroy(llm_backend *b)
{
	cuda_backend *cb = CB(b);

	if (cb == NULL)
		return;
	cudaSetDevice(cb->device);
	if (cb->stream)
		cudaStreamSynchronize(cb->stream);
	cudaFree(cb->kv_pool);
	cudaFree(cb->d_stage);
	cudaFreeHost(cb->h_stage);
	cudaFree(cb->act16);
	cudaFree(cb->xcopy);
	cudaFree(cb->partials);
	cudaFree(cb->gelu16);
	if (cb->cublas)
		cublasDestroy(cb->cublas);
	cudaFree(cb->cublas_ws);
	if (cb->stage_done)
		cudaEventDestroy(cb->stage_done);
	if (cb->stream)
		cudaStreamDestroy(cb->stream);
	free(cb->h_tok_seq);
	free(cb->h_token_ids);
	free(cb->h_dec_items);
	free(cb->h_dec_tokens);
	free(cb->h_dec_item0);
	free(cb->h_dec_nsplit);
	free(cb->h_pf_tiles);
	free(cb);
}

static const char *
cuda_last_error(llm_backend *b)
{
	return CB(b)->err;
}

static float *
cuda_alloc_f32(llm_backend *b, size_t n)
{
	cuda_backend *cb = CB(b);
	void	   *p = NULL;
	cudaError_t e;

	if (n > SIZE_MAX / sizeof(float) - 64)
	{
		fail(cb, "alloc_f32: %zu floats is too large", n);
		return NULL;
	}
	e = cudaMalloc(&p, (n ? n : 1) * sizeof(float));
	if (e != cudaSuccess)
	{
		fail(cb, "alloc_f32: cannot allocate %zu floats of device memory: %s", n, cudaGetErrorString(e));
		return NULL;
	}
	return (float *) p;
}

static void
cuda_free_f32(llm_backend *b, float *p)
{
	if (p)
		cudaFree(p);
}

static int
cuda_download(llm_backend *b, float *host_dst, const float *dev_src, size_t n)
{
	cuda_backend *cb = CB(b);

	if (n == 0)
		return 0;
	if (host_dst == NULL || dev_src == NULL)
		return fail(cb, "download: NULL pointer");
	CK(cudaMemcpyAsync(host_dst, dev_src, n * sizeof(float), cudaMemcpyDeviceToHost, cb->stream), "download");
	CK(cudaStreamSynchronize(cb->stream), "download (synchronize)");
	return 0;
}

/* ------------------------------------------------------------------------
 * weights
 * ------------------------------------------------------------------------ */

static bool
type_supported(uint32_t t)
{
	switch (t)
	{
		case LLM_TYPE_F32:
		case LLM_TYPE_F16:
		case LLM_TYPE_BF16:
		case LLM_TYPE_Q4_0:
		case LLM_TYPE_Q4_1:
		case LLM_TYPE_Q8_0:
		case LLM_TYPE_Q5_0:
		case LLM_TYPE_Q4_K:
		case LLM_TYPE_Q6_K:
			/* the types of kernels/cpu/quant_more.h (dequant_more.cuh) */
		case LLM_TYPE_Q5_1:
		case LLM_TYPE_Q2_K:
		case LLM_TYPE_Q3_K:
		case LLM_TYPE_Q5_K:
		case LLM_TYPE_IQ4_NL:
		case LLM_TYPE_IQ4_XS:
			return true;
		default:
			return false;
	}
}

static void
free_cuda_weight(cuda_weight *cw)
{
	if (cw == NULL)
		return;
	cudaFree(cw->f16);
	cudaFree(cw->qs);
	cudaFree(cw->dm);
	cudaFree(cw->raw);
	free(cw);
}

/*
 * Upload a GGUF weight: raw bytes -> device, dequantize to fp16 and repack
 * Q4_0/Q4_1/Q8_0 there; keep the raw bytes only where the embedding gather
 * needs them.  out->data points at the fp16 copy (never NULL on success),
 * out->backend_priv at the cuda_weight.
 */
static int
cuda_load_weight(llm_backend *b, const llm_weight *host, llm_weight *out)
{
	cuda_backend *cb = CB(b);
	const llm_type_info *ti;
	cuda_weight *cw;
	size_t		raw_bytes;
	cudaError_t e;
	bool		repack;

	if (host == NULL || out == NULL || host->data == NULL)
		return fail(cb, "load_weight: NULL weight");
	ti = llm_type_get(host->type);
	if (ti == NULL)
		return fail(cb, "load_weight: unknown tensor type %u", host->type);
	if (!type_supported(host->type))
		return fail(cb, "load_weight: the CUDA backend cannot compute with %s weights", ti->name);
	if (host->n_rows <= 0 || host->n_cols <= 0 || host->n_cols > INT32_MAX || host->n_rows > INT32_MAX)
		return fail(cb, "load_weight: bad shape %lld x %lld", (long long) host->n_rows, (long long) host->n_cols);
	if (host->n_cols % ti->block_elems != 0 || host->n_cols % 32 != 0)
		return fail(cb, "load_weight: %s row length %lld is not a multiple of %d",
					ti->name, (long long) host->n_cols, ti->block_elems > 32 ? ti->block_elems : 32);
	if (host->row_bytes != llm_type_row_bytes(host->type, host->n_cols))
		return fail(cb, "load_weight: row_bytes %zu does not match %s x %lld",
					host->row_bytes, ti->name, (long long) host->n_cols);
	CK(cudaSetDevice(cb->device), "load_weight: cudaSetDevice");

	cw = (cuda_weight *) calloc(1, sizeof(cuda_weight));
	if (cw == NULL)
		return fail(cb, "load_weight: out of memory");
	cw->type = host->type;
	cw->n_rows = host->n_rows;
	cw->n_cols = host->n_cols;
	cw->row_bytes = host->row_bytes;
	raw_bytes = (size_t) host->n_rows * host->row_bytes;
	repack = host->type == LLM_TYPE_Q4_0 || host->type == LLM_TYPE_Q4_1 || host->type == LLM_TYPE_Q8_0;

#define CKW(call, what) \
	do { e = (call); if (e != cudaSuccess) { free_cuda_weight(cw); return fail_cuda(cb, (what), e); } } while (0)
	CKW(cudaMalloc((void **) &cw->raw, raw_bytes), "load_weight: device memory for the raw weight");
	/*
	 * On the backend's stream: the stream is non-blocking, so a legacy-stream
	 * cudaMemcpy would not be ordered before the conversion kernels.
	 */
	CKW(cudaMemcpyAsync(cw->raw, host->data, raw_bytes, cudaMemcpyHostToDevice, cb->stream),
		"load_weight: upload");
	CKW(cudaMalloc((void **) &cw->f16, (size_t) cw->n_rows * cw->n_cols * sizeof(__half)),
		"load_weight: device memory for the fp16 copy");
	CKW(cu_dequant_to_f16(cb->stream, cw->type, cw->raw, cw->row_bytes, cw->n_rows, cw->n_cols, cw->f16),
		"load_weight: dequantize kernel");
	if (repack)
	{
		size_t		qs_bytes = (size_t) cw->n_rows * (host->type == LLM_TYPE_Q8_0 ? cw->n_cols : cw->n_cols / 2);

		CKW(cudaMalloc((void **) &cw->qs, qs_bytes), "load_weight: device memory for the repacked weight");
		CKW(cudaMalloc((void **) &cw->dm, (size_t) cw->n_rows * (cw->n_cols / 32) * sizeof(__half2)),
			"load_weight: device memory for the block scales");
		CKW(cu_repack(cb->stream, cw->type, cw->raw, cw->row_bytes, cw->n_rows, cw->n_cols, cw->qs, cw->dm),
			"load_weight: repack kernel");
		cw->qform = host->type == LLM_TYPE_Q4_0 ? CU_QFORM_Q4_0 :
			host->type == LLM_TYPE_Q4_1 ? CU_QFORM_Q4_1 : CU_QFORM_Q8_0;
	}
	CKW(cudaStreamSynchronize(cb->stream), "load_weight: conversion");
	if (repack || host->type == LLM_TYPE_F16)
	{
		cudaFree(cw->raw);
		cw->raw = NULL;
	}
#undef CKW

	*out = *host;
	out->data = cw->f16;
	out->backend_priv = cw;
	if (cw->n_cols > cb->max_cols)
		cb->max_cols = cw->n_cols;
	return 0;
}

static void
cuda_free_weight(llm_backend *b, llm_weight *w)
{
	if (w == NULL)
		return;
	cudaSetDevice(CB(b)->device);
	free_cuda_weight((cuda_weight *) w->backend_priv);
	w->backend_priv = NULL;
	w->data = NULL;
}

static float *
cuda_load_vector(llm_backend *b, const float *host, size_t n)
{
	cuda_backend *cb = CB(b);
	float	   *p;
	cudaError_t e;

	if (host == NULL)
	{
		fail(cb, "load_vector: NULL source");
		return NULL;
	}
	p = cuda_alloc_f32(b, n);
	if (p == NULL)
		return NULL;
	e = cudaMemcpyAsync(p, host, n * sizeof(float), cudaMemcpyHostToDevice, cb->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(cb->stream);
	if (e != cudaSuccess)
	{
		cudaFree(p);
		fail_cuda(cb, "load_vector", e);
		return NULL;
	}
	return p;
}

/* ------------------------------------------------------------------------
 * KV cache and step description
 * ------------------------------------------------------------------------ */

static int
cuda_kv_init(llm_backend *b, const llm_kv_geometry *g)
{
	cuda_backend *cb = CB(b);
	size_t		per_layer,
				total;
	cudaError_t e;

	if (cb->kv_ready)
		return fail(cb, "kv_init: KV cache already initialised");
	if (g == NULL || g->n_layers <= 0 || g->n_kv_heads <= 0 || g->head_dim <= 0 ||
		g->block_size <= 0 || g->n_blocks <= 0)
		return fail(cb, "kv_init: invalid geometry");
	if (!cu_attention_head_dim_ok(g->head_dim))
		return fail(cb, "kv_init: head_dim %d is not supported by the CUDA backend (64, 128 or 256)", g->head_dim);
	if (g->kv_dtype != LLM_KV_F16)
		return fail(cb, "kv_init: the CUDA backend supports only an f16 KV cache, not %s",
					g->kv_dtype == LLM_KV_Q8_0 ? "q8_0" : "an unknown type");
	if (g->layer_local != NULL)
		return fail(cb, "kv_init: the CUDA backend keeps every layer in one KV group (no local group)");
	if ((int64_t) g->n_blocks * g->block_size > INT32_MAX)
		return fail(cb, "kv_init: %d blocks of %d slots exceed the slot range", g->n_blocks, g->block_size);
	per_layer = (size_t) g->n_blocks * (size_t) g->block_size * (size_t) g->n_kv_heads * (size_t) g->head_dim;
	if (per_layer > SIZE_MAX / 4 / (size_t) g->n_layers)
		return fail(cb, "kv_init: KV cache size overflows");
	total = per_layer * 2 * (size_t) g->n_layers * sizeof(__half);
	CK(cudaSetDevice(cb->device), "kv_init: cudaSetDevice");
	e = cudaMalloc((void **) &cb->kv_pool, total);
	if (e != cudaSuccess)
	{
		cb->kv_pool = NULL;
		return fail(cb, "kv_init: cannot allocate %zu MiB of KV cache on %s: %s", total >> 20,
					cb->dev_name, cudaGetErrorString(e));
	}
	CK(cudaMemsetAsync(cb->kv_pool, 0, total, cb->stream), "kv_init: clear");
	cb->geo = *g;
	cb->layer_elems = per_layer;
	cb->kv_ready = true;
	return 0;
}

static cuda_kv_layer
kv_layer(cuda_backend *cb, int layer)
{
	cuda_kv_layer kv;

	kv.k = cb->kv_pool + (size_t) layer * 2 * cb->layer_elems;
	kv.v = kv.k + cb->layer_elems;
	kv.n_kv_heads = cb->geo.n_kv_heads;
	kv.head_dim = cb->geo.head_dim;
	kv.block_size = cb->geo.block_size;
	return kv;
}

/*
 * copy_blocks (backend.h): one KV group only, so LLM_KV_GROUP_GLOBAL.  A
 * block is block_size x n_kv_heads contiguous fp16 rows in each layer's K
 * and V ([block_size][n_kv_heads] inside it), so a copy is one
 * device-to-device cudaMemcpyAsync per layer, K and V, on the stream.
 * Compile-verified only (docs/GPU.md).
 */
static int
cuda_copy_blocks(llm_backend *b, int group, const int32_t *src, const int32_t *dst, int n)
{
	cuda_backend *cb = CB(b);
	size_t		be;

	if (!cb->kv_ready)
		return fail(cb, "copy_blocks: kv_init has not been called");
	if (group != LLM_KV_GROUP_GLOBAL)
		return fail(cb, "copy_blocks: the CUDA backend keeps one KV group (group %d)", group);
	if (n < 0 || (n > 0 && (src == NULL || dst == NULL)))
		return fail(cb, "copy_blocks: invalid arguments");
	for (int i = 0; i < n; i++)
	{
		if (src[i] < 0 || src[i] >= cb->geo.n_blocks || dst[i] < 0 || dst[i] >= cb->geo.n_blocks)
			return fail(cb, "copy_blocks: block %d -> %d outside the %d blocks", src[i], dst[i], cb->geo.n_blocks);
		for (int j = 0; j < n; j++)
			if (dst[i] == src[j] || (j != i && dst[i] == dst[j]))
				return fail(cb, "copy_blocks: block %d is a destination and also a source or another destination",
							dst[i]);
	}
	be = (size_t) cb->geo.block_size * (size_t) cb->geo.n_kv_heads * (size_t) cb->geo.head_dim;
	for (int l = 0; l < cb->geo.n_layers; l++)
	{
		cuda_kv_layer kv = kv_layer(cb, l);

		for (int i = 0; i < n; i++)
		{
			CK(cudaMemcpyAsync(kv.k + (size_t) dst[i] * be, kv.k + (size_t) src[i] * be, be * sizeof(__half),
							   cudaMemcpyDeviceToDevice, cb->stream), "copy_blocks (K)");
			CK(cudaMemcpyAsync(kv.v + (size_t) dst[i] * be, kv.v + (size_t) src[i] * be, be * sizeof(__half),
							   cudaMemcpyDeviceToDevice, cb->stream), "copy_blocks (V)");
		}
	}
	return 0;
}

/* Offset (int32 units, 16-byte aligned) of the next array of n ints in the staging buffer. */
static size_t
stage_reserve(size_t *used, size_t n)
{
	size_t		off = *used;

	*used += (n + 3) & ~(size_t) 3;
	return off;
}

/*
 * Validate and upload the step (same checks as the CPU backend's
 * begin_step), then build the attention work lists:
 *  - decode items: (token, split) for every token whose sequence has a
 *    single query row in the step (all tokens in the deterministic mode);
 *  - prefill tiles: (sequence, first row, rows <= 64) for the others.
 */
static int
cuda_begin_step(llm_backend *b, const llm_step_desc *d)
{
	cuda_backend *cb = CB(b);
	int			nt,
				ns,
				mb,
				bs;
	int			n_items = 0,
				n_dec = 0,
				n_tiles = 0;
	size_t		nbt,
				used = 0;
	size_t		o_tok,
				o_pos,
				o_slot,
				o_seq,
				o_bt,
				o_out,
				o_items,
				o_dtok,
				o_item0,
				o_nsplit,
				o_tiles;

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
	if (d->seq_start == NULL || (ns > 0 && (d->seq_kv_len == NULL || (mb > 0 && d->block_tables == NULL))))
		return fail(cb, "begin_step: missing sequence arrays");
	if (d->n_out > 0 && d->out_rows == NULL)
		return fail(cb, "begin_step: missing out_rows");
	nbt = (size_t) ns * (size_t) mb;
	if (!grow_host_i32(&cb->h_tok_seq, &cb->cap_tok_seq, (size_t) nt) ||
		!grow_host_i32(&cb->h_token_ids, &cb->cap_token_ids, (size_t) nt))
		return fail(cb, "begin_step: out of memory");
	if (d->seq_start[0] != 0 || d->seq_start[ns] != nt)
		return fail(cb, "begin_step: seq_start must run from 0 to n_tokens (%d)", nt);

	/* validation (as kernels/cpu/cpu_backend.c) and the number of work items */
	for (int s = 0; s < ns; s++)
	{
		int			len = d->seq_kv_len[s];
		int			used_blocks;
		int			nq = d->seq_start[s + 1] - d->seq_start[s];

		if (nq < 0)
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
			cb->h_tok_seq[t] = s;
			if (cb->deterministic || nq == 1)
			{
				n_items += p / ATTN_SPLIT + 1;
				n_dec++;
			}
		}
		if (!cb->deterministic && nq > 1)
			n_tiles += (nq + PREFILL_BQ - 1) / PREFILL_BQ;
	}
	for (int j = 0; j < d->n_out; j++)
		if (d->out_rows[j] < 0 || d->out_rows[j] >= nt)
			return fail(cb, "begin_step: out_rows[%d] = %d is not a token row", j, d->out_rows[j]);
	if (n_tiles > 65535 * 64 || n_items > INT32_MAX / 2)
		return fail(cb, "begin_step: step too large");

	/* work lists */
	if (!grow_host_i32(&cb->h_dec_items, &cb->cap_dec_items, 2 * (size_t) n_items) ||
		!grow_host_i32(&cb->h_pf_tiles, &cb->cap_pf_tiles, 3 * (size_t) n_tiles))
		return fail(cb, "begin_step: out of memory");
	if ((size_t) n_dec > cb->cap_dec_tokens)
	{
		size_t		cap = (size_t) n_dec + (size_t) n_dec / 2 + 16;
		int32_t    *a = (int32_t *) malloc(cap * sizeof(int32_t)),
				   *b2 = (int32_t *) malloc(cap * sizeof(int32_t)),
				   *c = (int32_t *) malloc(cap * sizeof(int32_t));

		if (a == NULL || b2 == NULL || c == NULL)
		{
			free(a);
			free(b2);
			free(c);
			return fail(cb, "begin_step: out of memory");
		}
		free(cb->h_dec_tokens);
		free(cb->h_dec_item0);
		free(cb->h_dec_nsplit);
		cb->h_dec_tokens = a;
		cb->h_dec_item0 = b2;
		cb->h_dec_nsplit = c;
		cb->cap_dec_tokens = cap;
	}
	{
		int			it = 0,
					dt = 0,
					tl = 0;

		for (int s = 0; s < ns; s++)
		{
			int			r0 = d->seq_start[s],
						nq = d->seq_start[s + 1] - r0;

			if (cb->deterministic || nq == 1)
			{
				for (int t = r0; t < r0 + nq; t++)
				{
					int			nsplit = d->positions[t] / ATTN_SPLIT + 1;

					cb->h_dec_tokens[dt] = t;
					cb->h_dec_item0[dt] = it;
					cb->h_dec_nsplit[dt] = nsplit;
					dt++;
					for (int sp = 0; sp < nsplit; sp++)
					{
						cb->h_dec_items[2 * it] = t;
						cb->h_dec_items[2 * it + 1] = sp;
						it++;
					}
				}
			}
			else if (nq > 1)
			{
				for (int r = r0; r < r0 + nq; r += PREFILL_BQ)
				{
					cb->h_pf_tiles[3 * tl] = s;
					cb->h_pf_tiles[3 * tl + 1] = r;
					cb->h_pf_tiles[3 * tl + 2] = (r0 + nq - r) < PREFILL_BQ ? (r0 + nq - r) : PREFILL_BQ;
					tl++;
				}
			}
		}
	}

	/* one staging buffer, one upload */
	o_tok = stage_reserve(&used, (size_t) nt);
	o_pos = stage_reserve(&used, (size_t) nt);
	o_slot = stage_reserve(&used, (size_t) nt);
	o_seq = stage_reserve(&used, (size_t) nt);
	o_bt = stage_reserve(&used, nbt);
	o_out = stage_reserve(&used, (size_t) d->n_out);
	o_items = stage_reserve(&used, 2 * (size_t) n_items);
	o_dtok = stage_reserve(&used, (size_t) n_dec);
	o_item0 = stage_reserve(&used, (size_t) n_dec);
	o_nsplit = stage_reserve(&used, (size_t) n_dec);
	o_tiles = stage_reserve(&used, 3 * (size_t) n_tiles);
	CK(cudaSetDevice(cb->device), "begin_step: cudaSetDevice");
	/* the previous step's upload must be done before the pinned buffer is rewritten */
	CK(cudaEventSynchronize(cb->stage_done), "begin_step: wait for the previous upload");
	if (used > cb->stage_cap)
	{
		size_t		cap = used + used / 2 + 1024;
		size_t		dummy = 0;
		cudaError_t e;

		if (cb->h_stage)
			cudaFreeHost(cb->h_stage);
		cb->h_stage = NULL;
		cb->stage_cap = 0;
		e = cudaMallocHost((void **) &cb->h_stage, cap * sizeof(int32_t));
		if (e != cudaSuccess)
		{
			cb->h_stage = NULL;
			return fail_cuda(cb, "begin_step: pinned staging buffer", e);
		}
		if (cb->d_stage)
			cudaFree(cb->d_stage);
		cb->d_stage = NULL;
		if (grow_dev(cb, (void **) &cb->d_stage, &dummy, cap * sizeof(int32_t), "begin_step: step buffer"))
			return -1;
		cb->stage_cap = cap;
	}
#define PUT(off, src, n) do { if ((n) > 0) memcpy(cb->h_stage + (off), (src), (size_t) (n) * sizeof(int32_t)); } while (0)
	PUT(o_tok, d->token_ids, nt);
	PUT(o_pos, d->positions, nt);
	PUT(o_slot, d->slots, nt);
	PUT(o_seq, cb->h_tok_seq, nt);
	PUT(o_bt, d->block_tables, nbt);
	PUT(o_out, d->out_rows, d->n_out);
	PUT(o_items, cb->h_dec_items, 2 * n_items);
	PUT(o_dtok, cb->h_dec_tokens, n_dec);
	PUT(o_item0, cb->h_dec_item0, n_dec);
	PUT(o_nsplit, cb->h_dec_nsplit, n_dec);
	PUT(o_tiles, cb->h_pf_tiles, 3 * n_tiles);
#undef PUT
	CK(cudaMemcpyAsync(cb->d_stage, cb->h_stage, used * sizeof(int32_t), cudaMemcpyHostToDevice, cb->stream),
	   "begin_step: upload");
	CK(cudaEventRecord(cb->stage_done, cb->stream), "begin_step: event");
	if (nt > 0)
		memcpy(cb->h_token_ids, d->token_ids, (size_t) nt * sizeof(int32_t));

	cb->sd.token_ids = cb->d_stage + o_tok;
	cb->sd.positions = cb->d_stage + o_pos;
	cb->sd.slots = cb->d_stage + o_slot;
	cb->sd.tok_seq = cb->d_stage + o_seq;
	cb->sd.block_tables = cb->d_stage + o_bt;
	cb->sd.out_rows = cb->d_stage + o_out;
	cb->sd.dec_items = cb->d_stage + o_items;
	cb->sd.dec_tokens = cb->d_stage + o_dtok;
	cb->sd.dec_item0 = cb->d_stage + o_item0;
	cb->sd.dec_nsplit = cb->d_stage + o_nsplit;
	cb->sd.pf_tiles = cb->d_stage + o_tiles;
	cb->sd.n_tokens = nt;
	cb->sd.n_seqs = ns;
	cb->sd.max_blocks = mb;
	cb->sd.n_out = d->n_out;
	cb->sd.n_dec_items = n_items;
	cb->sd.n_dec_tokens = n_dec;
	cb->sd.n_pf_tiles = n_tiles;

	/* scratch for every op of the step, so that the ops allocate nothing */
	if (grow_dev(cb, (void **) &cb->partials, &cb->partials_cap,
				 (size_t) n_items * cb->geo.n_kv_heads * ATTN_MAX_GROUP * (cb->geo.head_dim + 2) * sizeof(float),
				 "begin_step: attention partials"))
		return -1;
	if (cb->max_cols > 0)
	{
		if (grow_dev(cb, (void **) &cb->xcopy, &cb->xcopy_cap,
					 (size_t) nt * cb->max_cols * sizeof(float), "begin_step: activation copy"))
			return -1;
		if (!cb->deterministic && nt > cb->gemv_max_n &&
			grow_dev(cb, (void **) &cb->act16, &cb->act16_cap,
					 (size_t) nt * cb->max_cols * sizeof(__half), "begin_step: fp16 activations"))
			return -1;
	}
	cb->n_tokens = nt;
	cb->n_seqs = ns;
	cb->max_blocks = mb;
	cb->n_out = d->n_out;
	cb->have_step = true;
	return 0;
}

/* ------------------------------------------------------------------------
 * ops
 * ------------------------------------------------------------------------ */

static int
cuda_embed(llm_backend *b, const llm_weight *emb, float *out)
{
	cuda_backend *cb = CB(b);
	const cuda_weight *cw;

	if (!cb->have_step)
		return fail(cb, "embed: no step (begin_step failed or was not called)");
	if (emb == NULL || emb->backend_priv == NULL || out == NULL)
		return fail(cb, "embed: NULL argument");
	cw = (const cuda_weight *) emb->backend_priv;
	for (int t = 0; t < cb->n_tokens; t++)
		if (cb->h_token_ids[t] < 0 || cb->h_token_ids[t] >= cw->n_rows)
			return fail(cb, "embed: token id %d outside vocabulary of %lld", cb->h_token_ids[t],
						(long long) cw->n_rows);
	CK(cu_embed(cb->stream, cw, cb->sd.token_ids, cb->n_tokens, out), "embed");
	return 0;
}

static int
cuda_rmsnorm(llm_backend *b, const float *x, const float *w, float *out, int n, int dim, float eps)
{
	cuda_backend *cb = CB(b);

	if (n < 0 || dim <= 0 || (n > 0 && (x == NULL || w == NULL || out == NULL)))
		return fail(cb, "rmsnorm: invalid arguments");
	CK(cu_rmsnorm(cb->stream, NULL, NULL, x, w, out, n, dim, eps), "rmsnorm");
	return 0;
}

static int
cuda_add_rmsnorm(llm_backend *b, float *residual, const float *delta, const float *w, float *out,
				 int n, int dim, float eps)
{
	cuda_backend *cb = CB(b);

	if (n < 0 || dim <= 0 || (n > 0 && (residual == NULL || delta == NULL || w == NULL || out == NULL)))
		return fail(cb, "add_rmsnorm: invalid arguments");
	CK(cu_rmsnorm(cb->stream, residual, delta, NULL, w, out, n, dim, eps), "add_rmsnorm");
	return 0;
}

static int
cuda_add(llm_backend *b, float *residual, const float *delta, int n, int dim)
{
	cuda_backend *cb = CB(b);

	if (n < 0 || dim <= 0 || (n > 0 && (residual == NULL || delta == NULL)))
		return fail(cb, "add: invalid arguments");
	CK(cu_add(cb->stream, residual, delta, (size_t) n * dim), "add");
	return 0;
}

static int
cuda_add_broadcast(llm_backend *b, const float *x, const float *bias, float *out, int n_rows, int n)
{
	cuda_backend *cb = CB(b);

	if (n_rows < 0 || n <= 0 || (n_rows > 0 && (x == NULL || bias == NULL || out == NULL)))
		return fail(cb, "add_broadcast: invalid arguments");
	CK(cu_add_broadcast(cb->stream, x, bias, out, (size_t) n_rows, (size_t) n), "add_broadcast");
	return 0;
}

static int
cuda_silu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n)
{
	cuda_backend *cb = CB(b);

	if (n > 0 && (gate == NULL || up == NULL || out == NULL))
		return fail(cb, "silu_mul: NULL argument");
	CK(cu_silu_mul(cb->stream, gate, up, out, n), "silu_mul");
	return 0;
}

/*
 * The table is the CPU backend's (kernels/cpu/elementwise.c, built with the
 * host's libm tanhf), converted to halves exactly (its values are halves).
 */
static int
cuda_gelu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n)
{
	cuda_backend *cb = CB(b);

	if (n > 0 && (gate == NULL || up == NULL || out == NULL))
		return fail(cb, "gelu_mul: NULL argument");
	if (n == 0)
		return 0;
	if (cb->gelu16 == NULL)
	{
		const float *t = llm_gelu_table();
		__half	   *h = (__half *) malloc(65536 * sizeof(__half));
		cudaError_t e;

		if (t == NULL || h == NULL)
		{
			free(h);
			return fail(cb, "gelu_mul: out of memory for the GELU table");
		}
		for (int i = 0; i < 65536; i++)
			h[i] = __float2half_rn(t[i]);
		e = cudaMalloc((void **) &cb->gelu16, 65536 * sizeof(__half));
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(cb->gelu16, h, 65536 * sizeof(__half), cudaMemcpyHostToDevice, cb->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(cb->stream);
		free(h);
		if (e != cudaSuccess)
		{
			cudaFree(cb->gelu16);
			cb->gelu16 = NULL;
			return fail_cuda(cb, "gelu_mul: GELU table upload", e);
		}
	}
	CK(cu_gelu_mul(cb->stream, cb->gelu16, gate, up, out, n), "gelu_mul");
	return 0;
}

static int
cuda_scale(llm_backend *b, float *x, float s, size_t n)
{
	cuda_backend *cb = CB(b);

	if (n > 0 && x == NULL)
		return fail(cb, "scale: NULL argument");
	CK(cu_scale(cb->stream, x, s, n), "scale");
	return 0;
}

static int
cuda_softcap(llm_backend *b, float *x, float cap, size_t n)
{
	cuda_backend *cb = CB(b);

	if (!(cap > 0.0f) || (n > 0 && x == NULL))
		return fail(cb, "softcap: invalid arguments");
	CK(cu_softcap(cb->stream, x, cap, n), "softcap");
	return 0;
}

static int
cuda_gather_rows(llm_backend *b, const float *x, float *out, int dim)
{
	cuda_backend *cb = CB(b);
	size_t		bytes;

	if (!cb->have_step)
		return fail(cb, "gather_rows: no step");
	if (dim <= 0 || (cb->n_out > 0 && (x == NULL || out == NULL)))
		return fail(cb, "gather_rows: invalid arguments");
	if (cb->n_out == 0)
		return 0;
	bytes = (size_t) cb->n_out * dim * sizeof(float);
	if (overlaps(x, (size_t) cb->n_tokens * dim * sizeof(float), out, bytes))
	{
		/* gather into scratch, then copy: rows may move over each other */
		if (grow_dev(cb, (void **) &cb->xcopy, &cb->xcopy_cap, bytes, "gather_rows: scratch"))
			return -1;
		CK(cu_gather_rows(cb->stream, x, cb->xcopy, cb->sd.out_rows, cb->n_out, dim), "gather_rows");
		CK(cudaMemcpyAsync(out, cb->xcopy, bytes, cudaMemcpyDeviceToDevice, cb->stream), "gather_rows: copy");
		return 0;
	}
	CK(cu_gather_rows(cb->stream, x, out, cb->sd.out_rows, cb->n_out, dim), "gather_rows");
	return 0;
}

/*
 * y = x W^T.  GEMV kernel (batch invariant, quantized weights where
 * repacked) for n <= gemv_max_n and always in the deterministic mode;
 * otherwise cuBLAS on the fp16 copy: column-major Y^T[rows][n] =
 * W[rows][K] (i.e. the row-major weight read as K x rows, transposed) times
 * X^T[K][n], fp16 operands, fp32 accumulation and output.
 */
static int
cuda_matmul(llm_backend *b, const llm_weight *w, const float *x, float *y, int n)
{
	cuda_backend *cb = CB(b);
	const cuda_weight *cw;
	size_t		xbytes;

	if (w == NULL || w->backend_priv == NULL || n < 0 || (n > 0 && (x == NULL || y == NULL)))
		return fail(cb, "matmul: invalid arguments");
	cw = (const cuda_weight *) w->backend_priv;
	if (n == 0)
		return 0;
	xbytes = (size_t) n * cw->n_cols * sizeof(float);
	if (cb->deterministic || n <= cb->gemv_max_n)
	{
		if (n > 65535 * 4)
			return fail(cb, "matmul: %d rows exceed the GEMV grid", n);
		if (overlaps(x, xbytes, y, (size_t) n * cw->n_rows * sizeof(float)) || ((uintptr_t) x & 15) != 0)
		{
			if (grow_dev(cb, (void **) &cb->xcopy, &cb->xcopy_cap, xbytes, "matmul: activation copy"))
				return -1;
			CK(cudaMemcpyAsync(cb->xcopy, x, xbytes, cudaMemcpyDeviceToDevice, cb->stream), "matmul: copy x");
			x = cb->xcopy;
		}
		CK(cu_gemv(cb->stream, cw, x, y, n), "matmul (gemv)");
		return 0;
	}
	{
		const float alpha = 1.0f,
					beta = 0.0f;
		cublasStatus_t s;

		if (grow_dev(cb, (void **) &cb->act16, &cb->act16_cap, (size_t) n * cw->n_cols * sizeof(__half),
					 "matmul: fp16 activations"))
			return -1;
		CK(cu_f32_to_f16(cb->stream, x, cb->act16, (size_t) n * cw->n_cols), "matmul: convert x");
		s = cublasGemmEx(cb->cublas, CUBLAS_OP_T, CUBLAS_OP_N,
						 (int) cw->n_rows, n, (int) cw->n_cols,
						 &alpha,
						 cw->f16, CUDA_R_16F, (int) cw->n_cols,
						 cb->act16, CUDA_R_16F, (int) cw->n_cols,
						 &beta,
						 y, CUDA_R_32F, (int) cw->n_rows,
						 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		if (s != CUBLAS_STATUS_SUCCESS)
			return fail_cublas(cb, "matmul (cublasGemmEx)", s);
	}
	return 0;
}

static int
cuda_rope_store_kv_mode(llm_backend *b, int layer, float *q, float *k, const float *v, int n_heads,
						float rope_theta, int mode)
{
	cuda_backend *cb = CB(b);
	cuda_kv_layer kv;

	if (!cb->have_step)
		return fail(cb, "rope_store_kv: no step");
	if (layer < 0 || layer >= cb->geo.n_layers)
		return fail(cb, "rope_store_kv: layer %d out of range", layer);
	if (n_heads <= 0 || !(rope_theta > 0) || (mode != LLM_ROPE_NORMAL && mode != LLM_ROPE_NEOX) ||
		(cb->n_tokens > 0 && (q == NULL || k == NULL || v == NULL)))
		return fail(cb, "rope_store_kv: invalid arguments");
	kv = kv_layer(cb, layer);
	/* same host powf as the CPU backend, so both start from the same theta_scale */
	CK(cu_rope_store_kv(cb->stream, &kv, &cb->sd, q, k, v, n_heads,
						powf(rope_theta, -2.0f / (float) cb->geo.head_dim), mode), "rope_store_kv");
	return 0;
}

static int
cuda_rope_store_kv(llm_backend *b, int layer, float *q, float *k, const float *v, int n_heads, float rope_theta)
{
	return cuda_rope_store_kv_mode(b, layer, q, k, v, n_heads, rope_theta, LLM_ROPE_NORMAL);
}

static int
cuda_attention_run(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale, int window,
				   float softcap)
{
	cuda_backend *cb = CB(b);
	cuda_kv_layer kv;

	if (!cb->have_step)
		return fail(cb, "attention: no step");
	if (layer < 0 || layer >= cb->geo.n_layers)
		return fail(cb, "attention: layer %d out of range", layer);
	if (n_heads <= 0 || n_heads % cb->geo.n_kv_heads != 0)
		return fail(cb, "attention: %d heads is not a multiple of %d KV heads", n_heads, cb->geo.n_kv_heads);
	if (n_heads / cb->geo.n_kv_heads > ATTN_MAX_GROUP)
		return fail(cb, "attention: GQA group of %d heads exceeds the CUDA backend's %d",
					n_heads / cb->geo.n_kv_heads, ATTN_MAX_GROUP);
	if (window < 0)
		return fail(cb, "attention: window %d is negative", window);
	if (cb->n_tokens > 0 && (q == NULL || out == NULL))
		return fail(cb, "attention: NULL argument");
	kv = kv_layer(cb, layer);
	CK(cu_attention_decode(cb->stream, &kv, &cb->sd, q, out, cb->partials, n_heads, scale, window, softcap),
	   "attention (decode)");
	CK(cu_attention_prefill(cb->stream, &kv, &cb->sd, q, out, n_heads, scale, window, softcap),
	   "attention (prefill)");
	return 0;
}

static int
cuda_attention(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale, int window)
{
	return cuda_attention_run(b, layer, q, out, n_heads, scale, window, 0.0f);
}

static int
cuda_attention_softcap(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale,
					   int window, float softcap)
{
	if (!(softcap > 0.0f))
		return fail(CB(b), "attention: soft-cap %g is not positive", (double) softcap);
	return cuda_attention_run(b, layer, q, out, n_heads, scale, window, softcap);
}

static int
cuda_rope_store_kv_opts(llm_backend *b, int layer, float *q, float *k, const float *v, int n_heads,
						const llm_rope_opts *ro)
{
	cuda_backend *cb = CB(b);
	cuda_kv_layer kv;

	if (!cb->have_step)
		return fail(cb, "rope_store_kv: no step");
	if (layer < 0 || layer >= cb->geo.n_layers)
		return fail(cb, "rope_store_kv: layer %d out of range", layer);
	if (n_heads <= 0 || ro == NULL ||
		(ro->mode != LLM_ROPE_NORMAL && ro->mode != LLM_ROPE_NEOX && ro->mode != LLM_ROPE_NONE) ||
		(cb->n_tokens > 0 && (q == NULL || k == NULL || v == NULL)))
		return fail(cb, "rope_store_kv: invalid arguments");
	if (ro->mode != LLM_ROPE_NONE &&
		(!(ro->theta > 0) || ro->n_rot < 2 || ro->n_rot > cb->geo.head_dim || ro->n_rot % 2 != 0 ||
		 !(ro->freq_scale > 0) || !(ro->mscale > 0)))
		return fail(cb, "rope_store_kv: invalid RoPE options (base %g, %d rotated dims of %d)",
					(double) ro->theta, ro->n_rot, cb->geo.head_dim);
	kv = kv_layer(cb, layer);
	CK(cu_rope_store_kv_opts(cb->stream, &kv, &cb->sd, q, k, v, n_heads,
							 ro->mode == LLM_ROPE_NONE ? 1.0f : powf(ro->theta, -2.0f / (float) ro->n_rot),
							 ro->mode, ro->n_rot, ro->freq_factors, ro->freq_scale, ro->mscale),
	   "rope_store_kv");
	return 0;
}

static int
cuda_sync(llm_backend *b)
{
	cuda_backend *cb = CB(b);

	CK(cudaStreamSynchronize(cb->stream), "sync");
	CK(cudaGetLastError(), "sync (last error)");
	return 0;
}

/* ------------------------------------------------------------------------
 * construction
 * ------------------------------------------------------------------------ */

static const llm_backend_ops cuda_ops = {
	.name = "cuda",
	.destroy = cuda_destroy,
	.last_error = cuda_last_error,
	.alloc_f32 = cuda_alloc_f32,
	.free_f32 = cuda_free_f32,
	.download = cuda_download,
	.load_weight = cuda_load_weight,
	.free_weight = cuda_free_weight,
	.load_vector = cuda_load_vector,
	.kv_init = cuda_kv_init,
	.begin_step = cuda_begin_step,
	.tail_rows = NULL,			/* no row forms */
	.embed = cuda_embed,
	.rmsnorm = cuda_rmsnorm,
	.add_rmsnorm = cuda_add_rmsnorm,
	.add = cuda_add,
	.matmul = cuda_matmul,
	.matmul_multi = NULL,		/* the engine makes one matmul call per weight */
	.rope_store_kv = cuda_rope_store_kv,
	.attention = cuda_attention,
	.silu_mul = cuda_silu_mul,
	.gather_rows = cuda_gather_rows,
	.sync = cuda_sync,
	.scale = cuda_scale,
	.gelu_mul = cuda_gelu_mul,
	.rope_store_kv_mode = cuda_rope_store_kv_mode,
	.softcap = cuda_softcap,
	.kv_local_group = false,	/* one KV group: sliding-window layers keep every position */
	.copy_blocks = cuda_copy_blocks,
	.host_buffers = false,		/* device buffers: the logits are downloaded */
	.scan_rows = NULL,			/* the engine scans the downloaded rows */
	/* not yet on this backend: a model whose graph needs one is refused at load, naming it */
	.layernorm = NULL,
	.rope_rows = NULL,
	.attention_rows = NULL,

	.add_broadcast = cuda_add_broadcast,
	.rope_store_kv_opts = cuda_rope_store_kv_opts,
	.attention_softcap = cuda_attention_softcap,
	.add_table_rows = NULL,
	.gelu_erf = NULL,
	.load_weight_encoder = NULL,
};

static bool
env_true(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "on") == 0 || strcmp(v, "true") == 0 ||
						 strcmp(v, "yes") == 0);
}

extern "C" EXPORT llm_backend *
llm_backend_cuda_create_ex(int device, unsigned flags, char *err, size_t errlen)
{
	cuda_backend *cb;
	cudaDeviceProp prop;
	int			n_dev = 0;
	cudaError_t e;
	cublasStatus_t s;
	const char *v;

	e = cudaGetDeviceCount(&n_dev);
	if (e != cudaSuccess)
	{
		snprintf(err, errlen, "CUDA: no usable GPU (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
		return NULL;
	}
	if (n_dev <= 0)
	{
		snprintf(err, errlen, "CUDA: no GPU found");
		return NULL;
	}
	if (device < 0 || device >= n_dev)
	{
		snprintf(err, errlen, "CUDA: device %d does not exist (%d devices)", device, n_dev);
		return NULL;
	}
	e = cudaGetDeviceProperties(&prop, device);
	if (e != cudaSuccess)
	{
		snprintf(err, errlen, "CUDA: cudaGetDeviceProperties(%d): %s", device, cudaGetErrorString(e));
		return NULL;
	}
	if (prop.major < 9)
	{
		snprintf(err, errlen, "CUDA: %s has compute capability %d.%d; this build targets sm_90 (Hopper) and newer",
				 prop.name, prop.major, prop.minor);
		return NULL;
	}
	cb = (cuda_backend *) calloc(1, sizeof(cuda_backend));
	if (cb == NULL)
	{
		snprintf(err, errlen, "out of memory creating the CUDA backend");
		return NULL;
	}
	cb->base.ops = &cuda_ops;
	cb->base.n_threads = 1;
	cb->device = device;
	snprintf(cb->dev_name, sizeof(cb->dev_name), "%s", prop.name);
	cb->deterministic = (flags & LLM_CUDA_DETERMINISTIC) != 0 ||
		env_true("LLM_DETERMINISTIC") || env_true("LLM_CUDA_DETERMINISTIC");
	cb->gemv_max_n = DEFAULT_GEMV_MAX_N;
	if ((v = getenv("LLM_CUDA_GEMV_MAX_N")) != NULL && *v)
		cb->gemv_max_n = atoi(v);

#define CKC(call, what) \
	do { e = (call); if (e != cudaSuccess) { \
		snprintf(err, errlen, "CUDA: %s: %s", (what), cudaGetErrorString(e)); goto fail; } } while (0)
	CKC(cudaSetDevice(device), "cudaSetDevice");
	CKC(cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking), "cudaStreamCreate");
	CKC(cudaEventCreateWithFlags(&cb->stage_done, cudaEventDisableTiming), "cudaEventCreate");
	CKC(cudaEventRecord(cb->stage_done, cb->stream), "cudaEventRecord");
	CKC(cu_attention_setup(), "attention kernel setup");
	CKC(cudaMalloc(&cb->cublas_ws, CUBLAS_WORKSPACE_BYTES), "cuBLAS workspace");
#undef CKC
	s = cublasCreate(&cb->cublas);
	if (s != CUBLAS_STATUS_SUCCESS)
	{
		cb->cublas = NULL;
		snprintf(err, errlen, "cuBLAS: cublasCreate: %s", cublasGetStatusString(s));
		goto fail;
	}
	if ((s = cublasSetStream(cb->cublas, cb->stream)) != CUBLAS_STATUS_SUCCESS ||
		(s = cublasSetWorkspace(cb->cublas, cb->cublas_ws, CUBLAS_WORKSPACE_BYTES)) != CUBLAS_STATUS_SUCCESS ||
		(s = cublasSetMathMode(cb->cublas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
	{
		snprintf(err, errlen, "cuBLAS: setup: %s", cublasGetStatusString(s));
		goto fail;
	}
	return &cb->base;

fail:
	cuda_destroy(&cb->base);
	return NULL;
}

extern "C" EXPORT llm_backend *
llm_backend_cuda_create(int device, char *err, size_t errlen)
{
	return llm_backend_cuda_create_ex(device, 0, err, errlen);
}
