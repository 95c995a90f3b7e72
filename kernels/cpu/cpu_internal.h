/*
 * cpu_internal.h — what the files of the CPU backend share (cpu_backend.c:
 * the op table, memory, the KV cache and the step; cpu_elementwise.c,
 * cpu_matmul.c, cpu_attention.c, cpu_attention_rows.c: the ops).  Not
 * seen outside kernels/cpu; backend_cpu.h is the backend's public
 * contract.
 *
 * Every op runs on the caller's thread, one at a time per backend (backend.h),
 * and spreads its work over cb->pool; the scratch buffers below belong to the
 * op running.  cpu_backend.c refers to the op files through the op table
 * only, and they call nothing in it (the inline helpers here are theirs), so
 * the files' call graph stays acyclic (dispatch.c).
 */
#ifndef LLM_CPU_INTERNAL_H
#define LLM_CPU_INTERNAL_H

#include "kernels/backend.h"
#include "dispatch.h"
#include "huge_pages.h"
#include "quant.h"
#include "threadpool.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
	llm_add_row_fn add_row;		/* add_broadcast's kernel */
	llm_attn_rows_fn attn_rows;	/* attention_rows' kernel of one (row, head) */
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
	uint8_t    *row_forms;		/* [n_tokens] LLM_ROW_* flags of the step, or unset */
	bool		have_forms;
	size_t		cap_forms;
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
	llm_rope_opts rope_key[ROPE_TABLES];	/* the options each table holds (rope_theta[i] != 0) */
	int			rope_next;		/* table to refill when a step uses more bases */

	/* scratch */
	void	   *act;			/* quantized activation rows */
	size_t		act_cap;
	void	   *conv;			/* per thread: a row block converted for a batch kernel (matmul_task) */
	size_t		conv_cap;
	float	   *att_scratch;	/* per thread: q rounded to fp16 + kernel scratch */
	float	   *rows_scratch;	/* per thread: attention_rows' scores of one query */
	size_t		rows_scratch_cap;
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
	uint16_t   *amx_act;		/* the AMX matmul's split activations (amx_bf16.h) */
	size_t		amx_act_cap;	/* bytes */
	/*
	 * Set when a weight took the AMX-BF16 form (load_weight_encoder): this
	 * backend serves an encoder in the faster arithmetic, and its
	 * attention_rows runs the blocked twin (attn_rows_block.c).
	 */
	bool		encoder_fast;
} cpu_backend;

/*
 * A weight of load_weight_encoder in the AMX-BF16 form (amx_bf16.h): its
 * backend_priv.  The first member is the exact F16 kernel, so code that
 * takes backend_priv for a packed kernel (weight_kernel) still finds one;
 * impl is cpu_amx_impl, which tells the form apart (cpu_amx_weight_of).
 */
typedef struct cpu_amx_weight
{
	llm_qkernel k;
	const uint16_t *packed;		/* llm_amx_pack_f16 of the rows */
} cpu_amx_weight;

extern const char cpu_amx_impl[];

static inline const cpu_amx_weight *
cpu_amx_weight_of(const llm_weight *w)
{
	const cpu_amx_weight *a = (const cpu_amx_weight *) w->backend_priv;

	return a != NULL && a->k.impl == cpu_amx_impl ? a : NULL;
}

#define CPU(b) ((cpu_backend *) (b))

/*
 * Decode rows whose key count reaches this may run their attention split
 * (cpu_attention.c, llm_backend_cpu_set_split_keys).
 */
#ifndef ATTN_SPLIT_MIN_KEYS
#define ATTN_SPLIT_MIN_KEYS 512
#endif

/* Write the op's error message (last_error); returns -1. */
static inline int
cpu_fail(cpu_backend *cb, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static inline int
cpu_fail(cpu_backend *cb, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(cb->err, sizeof(cb->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* Grow *buf to hold at least need bytes (64-byte aligned); false on OOM. */
static inline bool
cpu_grow(void **buf, size_t *cap, size_t need)
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

/* ---- the ops, by file (backend.h states each contract) ---- */

/* cpu_elementwise.c */
int			cpu_rmsnorm(llm_backend *b, const float *x, const float *w, float *out, int n, int dim, float eps);
int			cpu_add_rmsnorm(llm_backend *b, float *residual, const float *delta, const float *w, float *out,
							int n, int dim, float eps);
int			cpu_add(llm_backend *b, float *residual, const float *delta, int n, int dim);
int			cpu_layernorm(llm_backend *b, const float *x, const float *w, const float *bias, float *out, int n,
						  int dim, float eps);
int			cpu_add_broadcast(llm_backend *b, const float *x, const float *bias, float *out, int n_rows, int n);
int			cpu_silu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n);
int			cpu_gelu_mul(llm_backend *b, const float *gate, const float *up, float *out, size_t n);
int			cpu_scale(llm_backend *b, float *x, float s, size_t n);
int			cpu_softcap(llm_backend *b, float *x, float cap, size_t n);
int			cpu_gelu_erf(llm_backend *b, const float *in, float *out, size_t n);

/* cpu_matmul.c */
int			cpu_matmul(llm_backend *b, const llm_weight *w, const float *x, float *y, int n);
int			cpu_matmul_multi(llm_backend *b, const llm_weight *const *w, int n_w, const float *x,
							 float *const *y, int n);

/* cpu_attention_rows.c */
int			cpu_attention_rows(llm_backend *b, const llm_step_desc *d, const float *q, const float *k,
							   const float *v, float *out, int n_heads, int n_kv_heads, int head_dim,
							   const llm_attn_opts *o);

/* cpu_attention.c */
int			cpu_rope_store_kv(llm_backend *b, int layer, float *q, float *k, const float *v,
							  int n_heads, float rope_theta);
int			cpu_rope_store_kv_mode(llm_backend *b, int layer, float *q, float *k, const float *v,
								   int n_heads, float rope_theta, int mode);
int			cpu_attention(llm_backend *b, int layer, const float *q, float *out, int n_heads, float scale,
						  int window);
int			cpu_rope_store_kv_opts(llm_backend *b, int layer, float *q, float *k, const float *v,
								   int n_heads, const llm_rope_opts *ro);
int			cpu_attention_softcap(llm_backend *b, int layer, const float *q, float *out, int n_heads,
								  float scale, int window, float softcap);

#endif
