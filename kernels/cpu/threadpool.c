/*
 * threadpool.c — persistent pthread pool with spin-then-sleep wake-up and
 * chunk claiming.
 *
 * A job's range is cut into chunks (fixed for given n_items, grain and
 * thread count).  The caller publishes the job and bumps the generation
 * counter; workers waiting for a new generation spin for a while (cheap
 * wake-up between the many small ops of a forward pass), then sleep on a
 * condition variable.  Everyone, the caller included, claims chunks from one
 * atomic word until none are left, so a worker the OS has not scheduled yet
 * (2 cores shared with PostgreSQL backends) never stalls the job: the caller
 * does its chunks.  Which thread runs a chunk never changes any result.
 *
 * If the workers keep contributing nothing, or their chunks keep finishing
 * long after the caller's own (workers preempted on an oversubscribed
 * machine), the caller runs the next jobs alone for a while (the workers go
 * to sleep instead of spinning) and then tries the workers again.
 *
 * The claim word packs (generation, chunk count, next chunk) so that a late
 * worker still holding an old generation can never claim a chunk of a newer
 * job.  A sleeping worker registers in n_sleeping under the mutex before
 * re-checking the generation, and the caller broadcasts whenever n_sleeping
 * is non-zero after publishing, so no wake-up is lost (sequentially
 * consistent atomics on both sides).
 *
 * An ordered job (llm_threadpool_run_ordered) is a job of one-item chunks:
 * the claim word hands them out in increasing order and a claimed chunk is
 * always run at once, which is what lets an item wait for lower ones.
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
#include <time.h>

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
	atomic_uint_fast64_t claim;	/* gen:24 | n_chunks:20 | next:20 */
	atomic_int	n_chunks_done;
	atomic_bool stop;

	/*
	 * Oversubscription guard (caller-only state): when other threads' chunks
	 * keep finishing long after the caller's own (workers preempted on a busy
	 * machine), the caller runs the next jobs alone, then tries again.
	 */
	int			strikes;
	int			solo_jobs_left;

	/* the current job; written before claim and generation are published */
	llm_task_fn fn;
	void	   *ctx;
	int64_t		n_items;
	int64_t		chunk_items;	/* items per chunk, a multiple of grain */

	/* shared pools only, under shared_lock */
	int			shared_refs;
	struct llm_threadpool *next_shared;
};

/* The process's shared pools (llm_threadpool_acquire_shared), one per thread count. */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static llm_threadpool *shared_pools = NULL;

#define CLAIM(gen, nch, next) ((((uint64_t) (gen) & 0xffffff) << 40) | ((uint64_t) (nch) << 20) | (uint64_t) (next))
#define CLAIM_GEN(c) ((c) >> 40)
#define CLAIM_N(c) (((c) >> 20) & 0xfffff)
#define CLAIM_NEXT(c) ((c) & 0xfffff)
#define MAX_CHUNKS LLM_THREADPOOL_MAX_ITEMS

/* chunks per thread: finer balances the end of a job, coarser claims less */
#define CHUNKS_PER_THREAD 4

/* guard tuning: strikes before going solo, and how many jobs to stay solo */
#define STRIKES_TO_SOLO 8
#define SOLO_JOBS 512

typedef struct worker_arg
{
	llm_threadpool *pool;
	int			idx;
} worker_arg;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/*
 * Claim and run chunks of generation gen until none is left; returns the
 * number of chunks run.
 */
static int
run_chunks(llm_threadpool *pool, uint64_t gen, int thread_idx)
{
	int			ran = 0;

	for (;;)
	{
		uint64_t	c = atomic_load(&pool->claim);
		uint64_t	k;
		int64_t		b,
					e;

		if (CLAIM_GEN(c) != (gen & 0xffffff) || CLAIM_NEXT(c) >= CLAIM_N(c))
			return ran;
		if (!atomic_compare_exchange_weak(&pool->claim, &c, c + 1))
			continue;
		/* the job cannot change before this chunk is counted done */
		k = CLAIM_NEXT(c);
		b = (int64_t) k * pool->chunk_items;
		e = b + pool->chunk_items < pool->n_items ? b + pool->chunk_items : pool->n_items;
		pool->fn(pool->ctx, b, e, thread_idx);
		atomic_fetch_add(&pool->n_chunks_done, 1);
		ran++;
	}
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
		run_chunks(pool, gen, arg.idx);
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
	atomic_init(&pool->claim, 0);
	atomic_init(&pool->n_chunks_done, 0);
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

/*
 * Run a job of n_items items in chunks of chunk_items (the last shorter) on
 * every thread; n_items > chunk_items.
 */
static void
run_job(llm_threadpool *pool, int64_t n_items, int64_t chunk_items, llm_task_fn fn, void *ctx)
{
	int64_t		n_chunks;
	uint64_t	gen,
				t0,
				t1,
				t2;
	int			spins = 0,
				ran;
	bool		woke_sleepers = false;

	pool->chunk_items = chunk_items;
	n_chunks = (n_items + pool->chunk_items - 1) / pool->chunk_items;
	pool->fn = fn;
	pool->ctx = ctx;
	pool->n_items = n_items;
	atomic_store(&pool->n_chunks_done, 0);
	gen = atomic_load(&pool->generation) + 1;
	atomic_store(&pool->claim, CLAIM(gen, n_chunks, 0));
	atomic_store(&pool->generation, gen);
	if (atomic_load(&pool->n_sleeping) > 0)
	{
		woke_sleepers = true;
		pthread_mutex_lock(&pool->mutex);
		pthread_cond_broadcast(&pool->cond);
		pthread_mutex_unlock(&pool->mutex);
	}
	t0 = now_ns();
	ran = run_chunks(pool, gen, 0);
	t1 = now_ns();
	/* wait for chunks other threads claimed */
	while (atomic_load(&pool->n_chunks_done) < n_chunks)
	{
		if (++spins < 2000)
			cpu_relax();
		else
			sched_yield();
	}
	/*
	 * No help at all with a job long enough (20 us) for any running worker
	 * to join, or a straggler wait longer than our own share of the work
	 * plus scheduling noise, job after job: the machine is oversubscribed,
	 * and spinning helpers only take CPU from the caller.  A job that had to
	 * wake sleeping workers (the first after an idle gap) proves nothing,
	 * and one job with help resets the count, so that the isolated late
	 * wake-ups of a quiet machine never send it solo.
	 */
	t2 = now_ns();
	if (woke_sleepers)
		return;
	if ((ran == n_chunks && t1 - t0 > 20000) || t2 - t1 > (t1 - t0) + 20000)
	{
		if (++pool->strikes >= STRIKES_TO_SOLO)
		{
			pool->strikes = 0;
			pool->solo_jobs_left = SOLO_JOBS;
		}
	}
	else
		pool->strikes = 0;
}

/* The caller alone runs the job: one thread, a range too small to share, or solo jobs left. */
static bool
run_alone(llm_threadpool *pool, int64_t n_items, int64_t grain, llm_task_fn fn, void *ctx)
{
	if (pool->n_threads > 1 && n_items > grain && pool->solo_jobs_left <= 0)
		return false;
	if (pool->solo_jobs_left > 0 && n_items > grain)
		pool->solo_jobs_left--;
	fn(ctx, 0, n_items, 0);
	return true;
}

void
llm_threadpool_run(llm_threadpool *pool, int64_t n_items, int64_t grain,
				   llm_task_fn fn, void *ctx)
{
	int64_t		units,
				units_per_chunk;

	if (n_items <= 0)
		return;
	if (grain < 1)
		grain = 1;
	if (run_alone(pool, n_items, grain, fn, ctx))
		return;
	/* about 4 chunks per thread: balance without much claiming traffic */
	units = (n_items + grain - 1) / grain;
	units_per_chunk = (units + CHUNKS_PER_THREAD * pool->n_threads - 1) / (CHUNKS_PER_THREAD * pool->n_threads);
	if ((units + units_per_chunk - 1) / units_per_chunk > MAX_CHUNKS)
		units_per_chunk = (units + MAX_CHUNKS - 1) / MAX_CHUNKS;
	run_job(pool, n_items, units_per_chunk * grain, fn, ctx);
}

void
llm_threadpool_run_ordered(llm_threadpool *pool, int64_t n_items, llm_task_fn fn, void *ctx)
{
	if (n_items <= 0)
		return;
	if (n_items > MAX_CHUNKS)
		abort();				/* the caller's contract: at most LLM_THREADPOOL_MAX_ITEMS */
	if (run_alone(pool, n_items, 1, fn, ctx))
		return;
	run_job(pool, n_items, 1, fn, ctx);
}

void
llm_threadpool_await(atomic_int *count, int target)
{
	int			spins = 0;

	while (atomic_load_explicit(count, memory_order_acquire) < target)
	{
		if (++spins < 2000)
			cpu_relax();
		else
			sched_yield();
	}
}

llm_threadpool *
llm_threadpool_acquire_shared(int n_threads, char *err, size_t errlen)
{
	llm_threadpool *pool;

	pthread_mutex_lock(&shared_lock);
	for (pool = shared_pools; pool != NULL; pool = pool->next_shared)
		if (pool->n_threads == n_threads)
			break;
	if (pool == NULL)
	{
		pool = llm_threadpool_create(n_threads, err, errlen);
		if (pool != NULL)
		{
			pool->next_shared = shared_pools;
			shared_pools = pool;
		}
	}
	if (pool != NULL)
		pool->shared_refs++;
	pthread_mutex_unlock(&shared_lock);
	return pool;
}

void
llm_threadpool_release_shared(llm_threadpool *pool)
{
	llm_threadpool **link;

	if (pool == NULL)
		return;
	pthread_mutex_lock(&shared_lock);
	if (--pool->shared_refs > 0)
	{
		pthread_mutex_unlock(&shared_lock);
		return;
	}
	for (link = &shared_pools; *link != NULL; link = &(*link)->next_shared)
		if (*link == pool)
		{
			*link = pool->next_shared;
			break;
		}
	pthread_mutex_unlock(&shared_lock);
	llm_threadpool_destroy(pool);
}
