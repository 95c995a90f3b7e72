/*
 * test_threadpool.c — the CPU backend's thread pool (kernels/cpu/threadpool.h):
 * a job covers every item exactly once, and an ordered job's items may wait
 * for items of lower index (a chain where every item waits for the one
 * before it, and phases where each item waits for a whole earlier phase,
 * as the split decode attention does) on 1, 2 and 4 threads, many times
 * over, without deadlock and with the earlier items' writes visible.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/threadpool.h"
#include "unit.h"

#define N_ITEMS 600

typedef struct chain_job
{
	atomic_int	done[N_ITEMS];	/* 1 once item i ran */
	int			value[N_ITEMS];	/* item i: value[i - 1] + 1, read after waiting for item i - 1 */
	atomic_int	runs[N_ITEMS];
} chain_job;

static void
chain_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	chain_job  *j = p;

	for (int64_t i = begin; i < end; i++)
	{
		if (i > 0)
			llm_threadpool_await(&j->done[i - 1], 1);
		j->value[i] = i > 0 ? j->value[i - 1] + 1 : 1;
		atomic_fetch_add(&j->runs[i], 1);
		atomic_store_explicit(&j->done[i], 1, memory_order_release);
	}
}

/* Three phases of `per` items each: phase k's items wait for all of phase k - 1 (one count per phase). */
typedef struct phase_job
{
	int			per;
	atomic_int	count[3];
	int			out[3][N_ITEMS / 3];
	int			bad;
} phase_job;

static void
phase_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	phase_job  *j = p;

	for (int64_t it = begin; it < end; it++)
	{
		int			ph = (int) (it / j->per),
					i = (int) (it % j->per);

		if (ph > 0)
		{
			int			sum = 0;

			llm_threadpool_await(&j->count[ph - 1], j->per);
			for (int k = 0; k < j->per; k++)
				sum += j->out[ph - 1][k];
			if (sum != j->per * ph)
				j->bad++;
		}
		j->out[ph][i] = ph + 1;
		atomic_fetch_add_explicit(&j->count[ph], 1, memory_order_release);
	}
}

typedef struct cover_job
{
	atomic_int	hits[N_ITEMS];
} cover_job;

static void
cover_task(void *p, int64_t begin, int64_t end, int thread_idx)
{
	cover_job  *j = p;

	for (int64_t i = begin; i < end; i++)
		atomic_fetch_add(&j->hits[i], 1);
}

int
main(void)
{
	const int	threads[] = {1, 2, 4};
	char		err[256];

	for (size_t ti = 0; ti < sizeof(threads) / sizeof(threads[0]); ti++)
	{
		llm_threadpool *pool = llm_threadpool_create(threads[ti], err, sizeof(err));
		chain_job  *cj = malloc(sizeof(*cj));
		phase_job  *pj = malloc(sizeof(*pj));
		cover_job  *vj = malloc(sizeof(*vj));
		bool		chain_ok = true,
					phase_ok = true,
					cover_ok = true;

		if (!CHECK(pool != NULL && cj != NULL && pj != NULL && vj != NULL, "pool of %d threads (%s)",
				   threads[ti], pool ? "" : err))
			return unit_done();
		for (int round = 0; round < 60; round++)
		{
			int			n = 1 + (round * 37) % N_ITEMS;

			memset(cj, 0, sizeof(*cj));
			llm_threadpool_run_ordered(pool, n, chain_task, cj);
			for (int i = 0; i < n; i++)
				if (cj->value[i] != i + 1 || atomic_load(&cj->runs[i]) != 1)
					chain_ok = false;

			memset(pj, 0, sizeof(*pj));
			pj->per = 1 + round % (N_ITEMS / 3);
			llm_threadpool_run_ordered(pool, 3 * pj->per, phase_task, pj);
			if (pj->bad != 0 || atomic_load(&pj->count[2]) != pj->per)
				phase_ok = false;

			memset(vj, 0, sizeof(*vj));
			llm_threadpool_run(pool, n, 1 + round % 7, cover_task, vj);
			for (int i = 0; i < n; i++)
				if (atomic_load(&vj->hits[i]) != 1)
					cover_ok = false;
		}
		CHECK(chain_ok, "%d thread(s): ordered chain, every item waiting for the one before: each ran once, in order",
			  threads[ti]);
		CHECK(phase_ok, "%d thread(s): ordered phases, each item waiting for the whole phase before: all writes seen",
			  threads[ti]);
		CHECK(cover_ok, "%d thread(s): a plain job runs every item exactly once", threads[ti]);
		llm_threadpool_destroy(pool);
		free(cj);
		free(pj);
		free(vj);
	}
	return unit_done();
}
