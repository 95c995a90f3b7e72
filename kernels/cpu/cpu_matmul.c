/*
 * cpu_matmul.c — the CPU backend's matmul and matmul_multi (backend.h):
 * activation rows quantized once per call (the kernel's quantize_act, as
 * llama.cpp's CPU backend quantizes them), then weight rows cut into thread
 * chunks and tiled for the caches (super-blocks of rows in L2, token blocks
 * whose quantized activations fit in L1), the next row block prefetched
 * while one runs, and a kernel's batch path (quant.h batch_kernel: each row
 * block converted once per token block into a per-thread scratch).  Each
 * output is one dot product of one weight row and one activation row in
 * the kernel's fixed order, so neither the tiling, the batch nor the
 * thread count changes a bit (backend.h batch invariance).  Kernels with
 * row forms (quant.h "Row forms": Q4_K, Q6_K) pick that order per token
 * from the step's row flags (backend.h LLM_ROW_*), a property of the token.
 */
#include "kernels/backend.h"
#include "cpu_internal.h"
#include "amx_bf16.h"
#include "kernels/quant_types.h"

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
	const uint8_t *forms;		/* [n] LLM_ROW_* flags when k has row forms, else NULL */
	llm_dot_tile_fn form_tile;	/* k's other form (quant.h "Row forms") */
	uint8_t		form_mask;
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
	if (stride > 0 && !cpu_grow(&cb->conv, &cb->conv_cap, stride * (size_t) llm_threadpool_size(cb->pool)))
		return false;
	for (int i = 0; i < n_jobs; i++)
	{
		jobs[i].conv = cb->conv;
		jobs[i].conv_stride = stride;
	}
	return true;
}

/*
 * Rows r .. r+nr-1 x tokens t .. t+nt-1 of a kernel with row forms: each
 * run of tokens of one form through dot_tile or form_tile (quant.h "Row
 * forms"); every result is still one token's own arithmetic.
 */
static void
run_forms(const matmul_job *j, int64_t r, int nr, int t, int nt)
{
	const llm_qkernel *k = j->k;
	const size_t ws = j->w->row_bytes;
	const size_t os = (size_t) j->w->n_rows;

	for (int u = t; u < t + nt;)
	{
		bool		alt = (j->forms[u] & j->form_mask) != 0;
		int			v = u + 1;

		while (v < t + nt && ((j->forms[v] & j->form_mask) != 0) == alt)
			v++;
		(alt ? j->form_tile : k->dot_tile) (j->w->n_cols, (const char *) j->w->data + r * ws, ws, nr,
											(const char *) j->act + (size_t) u * j->act_row, j->act_row,
											v - u, j->y + (size_t) u * os + r, os);
		u = v;
	}
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
				 * block's lines overflows the miss queues).  Kernels of
				 * interleaved row groups stream their groups in order and
				 * prefetch a few super-blocks ahead themselves, spread over
				 * their work (the bursts here stalled on full miss queues).
				 */
				const char *pf = NULL;
				int64_t		pf_lines = 0;
				int			n_tiles = (t1 - t0 + T - 1) / T;
				int64_t		rk = r0;	/* rows from here on run on k */

				if (t0 == 0 && r1 < end && j->n >= MM_PREFETCH_MIN_TOKENS && k->row_group <= 1)
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

						if (j->forms != NULL)
						{
							run_forms(j, r, nr, t, nt);
							continue;
						}
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
		llm_qkernel_kform(llm_qkernel_get(w->type, cb->impl), w->n_rows);

	return k != NULL && w->n_cols % k->block_elems == 0 ? k : NULL;
}

/*
 * The step's row forms for a matmul of n rows with kernel k: only a matmul
 * over the step's own token rows has them (the logits of chosen rows, a
 * debug call or another caller's matrix run every row in the one-row form).
 */
static void
job_forms(const cpu_backend *cb, matmul_job *j)
{
	j->form_mask = llm_qkernel_form(j->k, &j->form_tile);
	j->forms = j->form_mask != 0 && cb->have_forms && cb->have_step && j->n == cb->n_tokens ?
		cb->row_forms : NULL;
}

/* ------------------------------------------------------------------------
 * Weights in the AMX-BF16 form (load_weight_encoder, amx_bf16.h)
 * ------------------------------------------------------------------------ */

typedef struct amx_job
{
	const llm_weight *w;
	const cpu_amx_weight *a;
	const float *x;
	float	   *y;
	int			n;
	uint16_t   *act;
} amx_job;

static void
amx_split_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	amx_job    *j = p;

	llm_amx_split_rows(j->x, j->w->n_cols, (int) begin, (int) end, j->act);
}

static void
amx_gemm_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	amx_job    *j = p;

	llm_amx_gemm(j->a->packed, j->w->n_rows, j->w->n_cols, begin, end, j->act, j->n, j->y,
				 (size_t) j->w->n_rows);
}

/*
 * The activations split once into hi and lo tiles (padded to whole token
 * tiles with zero rows), then the row blocks of 16 cut among the threads
 * (in pairs: the kernel's 2-block tiles; a block's outputs are the same
 * bits in a pair or alone).
 */
static int
amx_matmul(cpu_backend *cb, const llm_weight *w, const cpu_amx_weight *a, const float *x, float *y, int n)
{
	amx_job		j;

	if (!cpu_grow((void **) &cb->amx_act, &cb->amx_act_cap, llm_amx_act_bytes(n, w->n_cols)))
		return cpu_fail(cb, "matmul: out of memory for %d split activation rows", n);
	j.w = w;
	j.a = a;
	j.x = x;
	j.y = y;
	j.n = n;
	j.act = cb->amx_act;
	llm_amx_zero_rows(w->n_cols, n, llm_amx_np(n), j.act);
	/* all of x is read before y is written, so x and y may alias */
	llm_threadpool_run(cb->pool, n, 4, amx_split_task, &j);
	llm_threadpool_run(cb->pool, (w->n_rows + LLM_AMX_TILE_ROWS - 1) / LLM_AMX_TILE_ROWS, 2, amx_gemm_task, &j);
	return 0;
}

/* Several AMX weights of one input (matmul_multi): one split, their row blocks laid end to end. */
#define AMX_MULTI_MAX 4

typedef struct amx_multi_job
{
	int			n_w;
	amx_job		jobs[AMX_MULTI_MAX];
	int64_t		rb0[AMX_MULTI_MAX + 1];	/* first row block of each weight in the joint range */
} amx_multi_job;

static void
amx_multi_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	amx_multi_job *mj = p;

	for (int i = 0; i < mj->n_w && begin < end; i++)
	{
		int64_t		lo = begin > mj->rb0[i] ? begin : mj->rb0[i],
					hi = end < mj->rb0[i + 1] ? end : mj->rb0[i + 1];

		if (lo < hi)
			amx_gemm_task(&mj->jobs[i], lo - mj->rb0[i], hi - mj->rb0[i], thread_idx);
	}
}

/* 1 when done (every weight in the AMX form, one column count), 0 when not applicable, -1 on failure. */
static int
amx_matmul_multi(cpu_backend *cb, const llm_weight *const *w, int n_w, const float *x, float *const *y, int n)
{
	amx_multi_job mj;

	if (n_w < 1 || n_w > AMX_MULTI_MAX || n <= 0)
		return 0;
	for (int i = 0; i < n_w; i++)
		if (cpu_amx_weight_of(w[i]) == NULL || w[i]->n_cols != w[0]->n_cols)
			return 0;
	if (!cpu_grow((void **) &cb->amx_act, &cb->amx_act_cap, llm_amx_act_bytes(n, w[0]->n_cols)))
		return cpu_fail(cb, "matmul: out of memory for %d split activation rows", n);
	mj.n_w = n_w;
	mj.rb0[0] = 0;
	for (int i = 0; i < n_w; i++)
	{
		amx_job    *j = &mj.jobs[i];

		j->w = w[i];
		j->a = cpu_amx_weight_of(w[i]);
		j->x = x;
		j->y = y[i];
		j->n = n;
		j->act = cb->amx_act;
		mj.rb0[i + 1] = mj.rb0[i] + (w[i]->n_rows + LLM_AMX_TILE_ROWS - 1) / LLM_AMX_TILE_ROWS;
	}
	llm_amx_zero_rows(w[0]->n_cols, n, llm_amx_np(n), cb->amx_act);
	llm_threadpool_run(cb->pool, n, 4, amx_split_task, &mj.jobs[0]);
	llm_threadpool_run(cb->pool, mj.rb0[n_w], 2, amx_multi_task, &mj);
	return 1;
}

int
cpu_matmul(llm_backend *b, const llm_weight *w, const float *x, float *y, int n)
{
	cpu_backend *cb = CPU(b);
	matmul_job	j;

	if (w == NULL || w->data == NULL || n < 0 || (n > 0 && (x == NULL || y == NULL)))
		return cpu_fail(cb, "matmul: invalid arguments");
	j.k = weight_kernel(cb, w);
	if (j.k == NULL)
		return cpu_fail(cb, "matmul: unsupported weight type %u or shape", w->type);
	if (n == 0)
		return 0;
	if (cpu_amx_weight_of(w) != NULL)
		return amx_matmul(cb, w, cpu_amx_weight_of(w), x, y, n);
	j.w = w;
	j.x = x;
	j.y = y;
	j.n = n;
	job_forms(cb, &j);
	j.act_row = j.k->act_row_bytes(w->n_cols);
	if (!cpu_grow(&cb->act, &cb->act_cap, j.act_row * (size_t) n))
		return cpu_fail(cb, "matmul: out of memory for %d activation rows", n);
	j.act = cb->act;
	if (!prepare_conv(cb, &j, 1))
		return cpu_fail(cb, "matmul: out of memory for the conversion scratch");
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
int
cpu_matmul_multi(llm_backend *b, const llm_weight *const *w, int n_w, const float *x,
				 float *const *y, int n)
{
	cpu_backend *cb = CPU(b);
	matmul_multi_job mj;
	bool		shared = n_w >= 1 && n_w <= MM_MULTI_MAX;
	int64_t		row0 = 0;

	if (w == NULL || y == NULL || n_w < 0 || n < 0 || (n > 0 && x == NULL))
		return cpu_fail(cb, "matmul_multi: invalid arguments");
	for (int i = 0; i < n_w; i++)
	{
		if (w[i] == NULL || w[i]->data == NULL || (n > 0 && y[i] == NULL))
			return cpu_fail(cb, "matmul_multi: invalid arguments");
		if (i < MM_MULTI_MAX)
		{
			mj.jobs[i].k = weight_kernel(cb, w[i]);
			if (mj.jobs[i].k == NULL)
				return cpu_fail(cb, "matmul: unsupported weight type %u or shape", w[i]->type);
			if (mj.jobs[i].k->quantize_act != mj.jobs[0].k->quantize_act ||
				w[i]->n_cols != w[0]->n_cols)
				shared = false;
			/* a mix of AMX and other weights runs weight by weight */
			if ((cpu_amx_weight_of(w[i]) != NULL) != (cpu_amx_weight_of(w[0]) != NULL))
				shared = false;
			/* rows of interleaved groups must start at a group boundary of the joint range */
			if (mj.jobs[i].k->row_group > 1 && row0 % mj.jobs[i].k->row_group != 0)
				shared = false;
			row0 += w[i]->n_rows;
		}
	}
	/* weights in the AMX form (load_weight_encoder): one split, one job */
	if (shared)
	{
		int			done = amx_matmul_multi(cb, w, n_w, x, y, n);

		if (done != 0)
			return done < 0 ? -1 : 0;
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
		job_forms(cb, j);
		j->act_row = j->k->act_row_bytes(w[i]->n_cols);
		mj.row0[i + 1] = mj.row0[i] + w[i]->n_rows;
	}
	if (!cpu_grow(&cb->act, &cb->act_cap, mj.jobs[0].act_row * (size_t) n))
		return cpu_fail(cb, "matmul: out of memory for %d activation rows", n);
	for (int i = 0; i < n_w; i++)
		mj.jobs[i].act = cb->act;
	if (!prepare_conv(cb, mj.jobs, n_w))
		return cpu_fail(cb, "matmul: out of memory for the conversion scratch");
	/* the outputs must not alias x: it is read by every weight's rows */
	llm_threadpool_run(cb->pool, n, 4, quantize_task, &mj.jobs[0]);
	llm_threadpool_run(cb->pool, mj.row0[n_w], MM_ROW_BLOCK, matmul_multi_task, &mj);
	return 0;
}
