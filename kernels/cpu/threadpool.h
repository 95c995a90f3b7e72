/*
 * threadpool.h — persistent compute threads of the CPU backend.
 *
 * One pool per backend.  llm_threadpool_run cuts the item range
 * [0, n_items) into chunks (a partition that depends only on n_items, grain
 * and the thread count), and the calling thread and the workers claim and
 * run chunks until all are done; it returns when every chunk has finished.
 * Which thread runs a chunk varies from run to run, so fn must compute
 * each item independently of the thread running it (thread_idx may only
 * select scratch memory) — that keeps every result deterministic.
 * Workers spin briefly for the next job, then sleep on a condition
 * variable; they block all signals (they must never run a PostgreSQL
 * signal handler).  Only one thread may call run at a time; fn must not
 * call run again.
 */
#ifndef LLM_CPU_THREADPOOL_H
#define LLM_CPU_THREADPOOL_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

typedef struct llm_threadpool llm_threadpool;

/* fn processes items [begin, end) on thread thread_idx (0 = caller, < size). */
typedef void (*llm_task_fn) (void *ctx, int64_t begin, int64_t end, int thread_idx);

/* n_threads >= 1 (including the caller).  NULL + message in err on failure. */
llm_threadpool *llm_threadpool_create(int n_threads, char *err, size_t errlen);
void		llm_threadpool_destroy(llm_threadpool *pool);
int			llm_threadpool_size(const llm_threadpool *pool);

/*
 * The process's shared pool of n_threads threads, created by the first
 * acquire and destroyed by the last release (reference-counted, one pool
 * per thread count; acquire and release are thread-safe).  For backends
 * that one thread drives in turn, such as several models in one worker:
 * their jobs never overlap, so one set of compute threads serves them all
 * without oversubscribing the cores.  The rule above still holds: only one
 * thread at a time may call run on it.  NULL + message in err on failure.
 */
llm_threadpool *llm_threadpool_acquire_shared(int n_threads, char *err, size_t errlen);
void		llm_threadpool_release_shared(llm_threadpool *pool);

/*
 * Run fn over [0, n_items).  Chunk boundaries are multiples of grain (>= 1),
 * except the end.  Ranges too small to be worth waking workers
 * (n_items <= grain) run on the caller alone.
 */
void		llm_threadpool_run(llm_threadpool *pool, int64_t n_items, int64_t grain,
							   llm_task_fn fn, void *ctx);

/*
 * Run fn over [0, n_items) with every item a chunk of its own: items are
 * claimed in increasing order, each run to its end by the thread that
 * claimed it (when the caller runs the job alone, all of them in order).
 * So an item may wait (llm_threadpool_await) for items of lower index: they
 * are all claimed already, and the lowest unfinished item waits for
 * nothing.  One job can then carry phases that depend on each other
 * without a join of all threads between them.  Which thread runs an item
 * still must not change its result.  1 <= n_items <=
 * LLM_THREADPOOL_MAX_ITEMS (more aborts: a caller's bug).
 */
#define LLM_THREADPOOL_MAX_ITEMS 4096
void		llm_threadpool_run_ordered(llm_threadpool *pool, int64_t n_items, llm_task_fn fn, void *ctx);

/*
 * Wait until *count >= target (an acquire load: what was written before
 * the matching release increments is visible), spinning a little, then
 * yielding the CPU (the thread waited for may have been preempted).
 */
void		llm_threadpool_await(atomic_int *count, int target);

#endif
