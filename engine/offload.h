/*
 * offload.h — one thread that runs the driver's long per-request jobs in
 * the order they were queued, so the driver's step never waits for them.
 *
 * The driver (the thread that calls llm_engine_step) queues a job; the
 * thread runs it (signals blocked, no PostgreSQL: a job touches only its
 * own memory and read-only engine state; at nice +10 on Linux, so the
 * steps keep a CPU they share with it) and moves it to a done list; the
 * driver takes the finished jobs at the start of a step (one atomic load
 * when none finished).  A job is owned by the offload from llm_offload_push
 * to llm_offload_take; llm_offload_free discards the jobs it still owns.
 * The gate (llm_offload_debug_hold / _drain) is the test seam: while held
 * the thread starts no job.
 */
#ifndef LLM_OFFLOAD_H
#define LLM_OFFLOAD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct llm_offload_job
{
	struct llm_offload_job *next;	/* the offload's lists, then the caller's */
	void		(*run) (struct llm_offload_job *job);	/* on the thread */
	void		(*discard) (struct llm_offload_job *job);	/* frees a job never taken */
} llm_offload_job;

typedef struct llm_offload llm_offload;

/* An offload named what (for errors); its thread starts with the first job. NULL: out of memory. */
llm_offload *llm_offload_create(const char *what);

/* Stop the thread (after the job it runs), discard every job not taken. */
void		llm_offload_free(llm_offload *o);

/* Queue job (FIFO); 0, or -1 + err when the thread could not be started (job not queued). */
int			llm_offload_push(llm_offload *o, llm_offload_job *job, char *err, size_t errlen);

/* The finished jobs, in the order they were queued, linked by next; NULL when none (never waits). */
llm_offload_job *llm_offload_take(llm_offload *o);

/* Wait at most max_ms for a job to finish; true when one has finished and is not taken. */
bool		llm_offload_wait(llm_offload *o, double max_ms);

/* Test seam: while held the thread starts no job. */
void		llm_offload_debug_hold(llm_offload *o, bool hold);

/* Test seam: wait until every queued job has finished (false at once while held). */
bool		llm_offload_debug_drain(llm_offload *o);

#endif
