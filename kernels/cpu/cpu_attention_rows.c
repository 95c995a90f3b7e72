/*
 * cpu_attention_rows.c — the CPU backend's attention_rows (backend.h):
 * attention among a step's own rows (encoders), on the pool's threads.
 * Every (query row, head) pair is elementwise.c's llm_attention_rows_one
 * or its AVX-512 twin (the same bits); a backend serving an encoder in the
 * faster arithmetic (cpu_internal.h encoder_fast) runs the blocked twin of
 * attn_rows_block.c instead, one (sequence, head) per item.
 */
#include "kernels/backend.h"
#include "cpu_internal.h"
#include "elementwise.h"

typedef struct rows_job
{
	const llm_step_desc *d;
	const int32_t *tok_seq;		/* sequence of each token row (begin_step) */
	const float *q,
			   *k,
			   *v;
	float	   *out;
	int			n_heads,
				n_kv_heads,
				head_dim;
	const llm_attn_opts *o;
	float	   *scratch;		/* [threads][stride] */
	int			stride;
	llm_attn_rows_fn one;		/* the backend's attn_rows */
} rows_job;

static void
rows_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	rows_job   *j = p;

	for (int64_t i = begin; i < end; i++)
	{
		int			t = (int) (i / j->n_heads),
					h = (int) (i % j->n_heads);

		j->one(j->d, j->tok_seq[t], t, h, j->q, j->k, j->v, j->out, j->n_heads, j->n_kv_heads,
			   j->head_dim, j->o, j->scratch + (size_t) thread_idx * j->stride);
	}
}

/* The blocked twin (attn_rows_block.c): item i = (sequence i / n_heads, head i % n_heads). */
typedef struct rows_block_job
{
	const llm_step_desc *d;
	const float *q,
			   *k,
			   *v;
	float	   *out;
	int			n_heads,
				n_kv_heads,
				head_dim;
	float		scale;
	float	   *scratch;
	size_t		stride;
} rows_block_job;

static void
rows_block_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	rows_block_job *j = p;

	for (int64_t i = begin; i < end; i++)
	{
		int			s = (int) (i / j->n_heads),
					u0 = j->d->seq_start[s],
					u1 = j->d->seq_start[s + 1];

		llm_attention_rows_block_avx512(j->q, j->k, j->v, j->out, u0, u1, u0, u1, (int) (i % j->n_heads),
										j->n_heads, j->n_kv_heads, j->head_dim, j->scale,
										j->scratch + (size_t) thread_idx * j->stride);
	}
}

static int
attention_rows_blocked(cpu_backend *cb, const llm_step_desc *d, const float *q, const float *k, const float *v,
					   float *out, int n_heads, int n_kv_heads, int head_dim, const llm_attn_opts *o, int longest)
{
	rows_block_job j;
	int			threads = llm_threadpool_size(cb->pool);

	j.stride = llm_attention_rows_block_scratch(longest, head_dim);
	if (!cpu_grow((void **) &cb->rows_scratch, &cb->rows_scratch_cap, (size_t) threads * j.stride * sizeof(float)))
		return cpu_fail(cb, "attention_rows: out of memory");
	j.d = d;
	j.q = q;
	j.k = k;
	j.v = v;
	j.out = out;
	j.n_heads = n_heads;
	j.n_kv_heads = n_kv_heads;
	j.head_dim = head_dim;
	j.scale = o->scale;
	j.scratch = cb->rows_scratch;
	llm_threadpool_run(cb->pool, (int64_t) d->n_seqs * n_heads, 1, rows_block_task, &j);
	return 0;
}

/*
 * attention_rows (backend.h) with every (query row, head) pair an item of
 * the pool: each pair is elementwise.c's llm_attention_rows_one (or, with
 * the VNNI implementation, its AVX-512 twin: the same bits), as the
 * single-threaded llm_cpu_attention_rows runs them, so the results are its
 * bits whatever the thread count.
 */
int
cpu_attention_rows(llm_backend *b, const llm_step_desc *d, const float *q, const float *k, const float *v,
				   float *out, int n_heads, int n_kv_heads, int head_dim, const llm_attn_opts *o)
{
	cpu_backend *cb = CPU(b);
	rows_job	j;
	int			longest = 1;
	int			threads = llm_threadpool_size(cb->pool);

	if (!cb->have_step || d->n_tokens != cb->n_tokens)
		return cpu_fail(cb, "attention_rows: not the step given to begin_step");
	if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || head_dim <= 0 || o == NULL)
		return cpu_fail(cb, "attention_rows: invalid arguments");
	for (int s = 0; s < d->n_seqs; s++)
		if (d->seq_start[s + 1] - d->seq_start[s] > longest)
			longest = d->seq_start[s + 1] - d->seq_start[s];
	/* an encoder in the faster arithmetic (cpu_internal.h encoder_fast): the blocked twin */
	if (cb->encoder_fast && !o->causal && o->window == 0 && !(o->softcap > 0.0f) && head_dim % 16 == 0 &&
		head_dim <= 256)
		return attention_rows_blocked(cb, d, q, k, v, out, n_heads, n_kv_heads, head_dim, o, longest);
	if (!cpu_grow((void **) &cb->rows_scratch, &cb->rows_scratch_cap, (size_t) threads * longest * sizeof(float)))
		return cpu_fail(cb, "attention_rows: out of memory");
	j.d = d;
	j.tok_seq = cb->tok_seq;
	j.q = q;
	j.k = k;
	j.v = v;
	j.out = out;
	j.n_heads = n_heads;
	j.n_kv_heads = n_kv_heads;
	j.head_dim = head_dim;
	j.o = o;
	j.scratch = cb->rows_scratch;
	j.stride = longest;
	j.one = cb->attn_rows;
	llm_threadpool_run(cb->pool, (int64_t) d->n_tokens * n_heads, 4, rows_task, &j);
	return 0;
}
