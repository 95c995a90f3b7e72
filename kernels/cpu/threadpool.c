/*
 * threadpool.c — persistent pthread pool with spin-then-sleep wake-up.
 *
 * Protocol: the caller publishes a job (fn, ctx, range) and increments the
 * atomic generation counter; workers waiting for a new generation spin for
 * a while (cheap wake-up between the many small ops of a forward pass), then
 * sleep on a condition variable.  A sleeping worker registers in
 * n_sleeping under the mutex before re-checking the generation, and the
 * caller broadcasts whenever n_sleeping is non-zero after publishing, so no
 * wake-up is lost (both sides use sequentially consistent atomics).
 * Completion is counted in n_done, on which the caller spins.
 */
#define _GNU_SOURCE
#include "threadpool.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void) 0)
#endif

/* Spin iterations before a worker sleeps (~ a millisecond on current x86). */
#define SPIN_ITERS 20000

struct llm_threadpool
{
	int			n_threads;		/* including the caller */
	pthread_t  *threads;		/* n_threads - 1 workers */
	int			n_started;

	pthread_mutex_t mutex;
	pthread_cond_t cond;
	atomic_int	n_sleeping;
	atomic_uint_fast64_t generation;
	atomic_int	n_done;
	atomic_bool stop;

	/* the current job; written before generation is bumped */
	llm_task_fn fn;
	void	   *ctx;
	int64_t		n_items;
	int64_t		grain;
};

typedef struct worker_arg
{
	llm_threadpool *pool;
	int			idx;
} worker_arg;

/* Slice idx of [0, n) in grain units: contiguous, deterministic. */
static void
slice_of(const llm_threadpool *pool, int idx, int64_t *begin, int64_t *end)
{
	int64_t		units = (pool->n_items + pool->grain - 1) / pool->grain;
	int64_t		per = units / pool->n_threads;
	int64_t		extra = units % pool->n_threads;
	int64_t		u0 = idx * per + (idx < extra ? idx : extra);
	int64_t		u1 = u0 + per + (idx < extra ? 1 : 0);

	*begin = u0 * pool->grain;
	*end = u1 * pool->grain;
	if (*begin > pool->n_items)
		*begin = pool->n_items;
	if (*end > pool->n_items)
		*end = pool->n_items;
}

static void
run_slice(llm_threadpool *pool, int idx)
{
	int64_t		b,
				e;

	slice_of(pool, idx, &b, &e);
	if (b < e)
		pool->fn(pool->ctx, b, e, idx);
}

static void *
worker_main(void *p)
{
	worker_arg	arg = *(worker_arg *) p;
	llm_threadpool *pool = arg.pool;
	uint64_t	seen = 0;
	sigset_t	all;

	free(p);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	for (;;)
	{
		uint64_t	gen;
		int			spins = 0;

		while ((gen = atomic_load(&pool->generation)) == seen && !atomic_load(&pool->stop))
		{
			if (++spins < SPIN_ITERS)
			{
				cpu_relax();
				continue;
			}
			pthread_mutex_lock(&pool->mutex);
			atomic_fetch_add(&pool->n_sleeping, 1);
			while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
				pthread_cond_wait(&pool->cond, &pool->mutex);
			atomic_fetch_sub(&pool->n_sleeping, 1);
			pthread_mutex_unlock(&pool->mutex);
			spins = 0;
		}
		if (atomic_load(&pool->stop))
			break;
		seen = gen;
		run_slice(pool, arg.idx);
		atomic_fetch_add(&pool->n_done, 1);
	}
	return NULL;
}

llm_threadpool *
llm_threadpool_create(int n_threads, char *err, size_t errlen)
{
	llm_threadpool *pool;
	sigset_t	all,
				old;

	if (n_threads < 1 || n_threads > 1024)
	{
		snprintf(err, errlen, "thread count %d out of range 1..1024", n_threads);
		return NULL;
	}
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL)
	{
		snprintf(err, errlen, "out of memory creating thread pool");
		return NULL;
	}
	pool->n_threads = n_threads;
	pthread_mutex_init(&pool->mutex, NULL);
	pthread_cond_init(&pool->cond, NULL);
	atomic_init(&pool->n_sleeping, 0);
	atomic_init(&pool->generation, 0);
	atomic_init(&pool->n_done, 0);
	atomic_init(&pool->stop, false);
	if (n_threads == 1)
		return pool;

	pool->threads = calloc((size_t) n_threads - 1, sizeof(pthread_t));
	if (pool->threads == NULL)
	{
		snprintf(err, errlen, "out of memory creating thread pool");
		llm_threadpool_destroy(pool);
		return NULL;
	}
	/* threads inherit the creator's mask: block everything while creating */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (int i = 1; i < n_threads; i++)
	{
		worker_arg *arg = malloc(sizeof(*arg));
		int			rc;

		if (arg == NULL)
		{
			snprintf(err, errlen, "out of memory creating thread pool");
			break;
		}
		arg->pool = pool;
		arg->idx = i;
		rc = pthread_create(&pool->threads[i - 1], NULL, worker_main, arg);
		if (rc != 0)
		{
			free(arg);
			snprintf(err, errlen, "pthread_create failed: %s", strerror(rc));
			break;
		}
		pool->n_started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pool->n_started != n_threads - 1)
	{
		llm_threadpool_destroy(pool);
		return NULL;
	}
	return pool;
}

void
llm_threadpool_destroy(llm_threadpool *pool)
{
	if (pool == NULL)
		return;
	atomic_store(&pool->stop, true);
	pthread_mutex_lock(&pool->mutex);
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->mutex);
	for (int i = 0; i < pool->n_started; i++)
		pthread_join(pool->threads[i], NULL);
	free(pool->threads);
	pthread_mutex_destroy(&pool->mutex);
	pthread_cond_destroy(&pool->cond);
	free(pool);
}

int
llm_threadpool_size(const llm_threadpool *pool)
{
	return pool->n_threads;
}

void
llm_threadpool_run(llm_threadpool *pool, int64_t n_items, int64_t grain,
				   llm_task_fn fn, void *ctx)
{
	int			n_workers = pool->n_threads - 1;
	int			spins = 0;

	if (n_items <= 0)
		return;
	if (grain < 1)
		grain = 1;
	if (n_workers == 0 || n_items <= grain)
	{
		fn(ctx, 0, n_items, 0);
		return;
	}
	pool->fn = fn;
	pool->ctx = ctx;
	pool->n_items = n_items;
	pool->grain = grain;
	atomic_store(&pool->n_done, 0);
	atomic_fetch_add(&pool->generation, 1);
	if (atomic_load(&pool->n_sleeping) > 0)
	{
		pthread_mutex_lock(&pool->mutex);
		pthread_cond_broadcast(&pool->cond);
		pthread_mutex_unlock(&pool->mutex);
	}
	run_slice(pool, 0);
	while (atomic_load(&pool->n_done) < n_workers)
	{
		if (++spins < 100000)
			cpu_relax();
		else
			sched_yield();
	}
}
