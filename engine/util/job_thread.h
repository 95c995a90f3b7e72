/*
 * job_thread.h — one thread that runs an owner's long jobs in the order
 * they were queued, so the owner (the engine's driver thread) never waits
 * for them: the engine's tokenizer thread (offload.h) and the grammar
 * store's compile thread (lp_grammar.c) are each one of these.
 *
 * The owner queues a job; the thread runs it (all signals blocked, no
 * PostgreSQL: a job touches only its own memory and state nothing else
 * writes meanwhile; at nice value `nice` on Linux when not 0, so the steps
 * keep a CPU they share with it) and moves it to a done list; the owner
 * takes the finished jobs (one atomic load when none finished).  A job is
 * owned by the thread from llm_job_thread_push to llm_job_thread_take;
 * llm_job_thread_free discards the jobs it still owns.  The thread starts
 * with the first push.  Every function but the job's run is called by the
 * owner only (one thread).
 *
 * The gate (llm_job_thread_debug_hold / _drain) is the test seam that makes
 * tests deterministic: while held the thread starts no job, so a test can
 * queue work, look at the state "still running", then release and drain.
 */
#ifndef LLM_UTIL_JOB_THREAD_H
#define LLM_UTIL_JOB_THREAD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct llm_job
{
	struct llm_job *next;		/* the thread's lists, then the owner's */
	void		(*run) (struct llm_job *job);	/* on the thread */
	void		(*discard) (struct llm_job *job);	/* frees a job never taken (owner's thread) */
} llm_job;

typedef struct llm_job_thread llm_job_thread;

/*
 * A job thread named what (for errors: "could not start the <what>
 * thread"), run at nice value nice (0: unchanged).  NULL: out of memory.
 */
llm_job_thread *llm_job_thread_create(const char *what, int nice);

/* Stop the thread (after the job it runs), discard every job not taken. */
void		llm_job_thread_free(llm_job_thread *o);

/* Start the thread now if not started yet; 0, or -1 + err ("could not start the <what> thread: ..."). */
int			llm_job_thread_start(llm_job_thread *o, char *err, size_t errlen);

/* Queue job (FIFO); 0, or -1 + err when the thread could not be started (job not queued). */
int			llm_job_thread_push(llm_job_thread *o, llm_job *job, char *err, size_t errlen);

/* The finished jobs, in the order they were queued, linked by next; NULL when none (never waits). */
llm_job    *llm_job_thread_take(llm_job_thread *o);

/*
 * Wait at most max_ms for a job to finish; true when one has finished and
 * is not taken (false at once when nothing is queued or running).
 */
bool		llm_job_thread_wait(llm_job_thread *o, double max_ms);

/* Test seam: while held the thread starts no job. */
void		llm_job_thread_debug_hold(llm_job_thread *o, bool hold);

/* Test seam: wait until every queued job has finished (false at once while held). */
bool		llm_job_thread_debug_drain(llm_job_thread *o);

#endif
