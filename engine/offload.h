/*
 * offload.h — the engine's tokenizer thread: a job thread
 * (engine/util/job_thread.h, which states the contract) under the engine's
 * names, at nice +10 on Linux so the steps keep a CPU they share with it.
 * The driver (the thread that calls llm_engine_step) queues a large
 * prompt's tokenization and takes the finished ones at the start of a step.
 */
#ifndef LLM_OFFLOAD_H
#define LLM_OFFLOAD_H

#include "engine/util/job_thread.h"

/* the thread's nice value */
#define LLM_OFFLOAD_NICE 10

typedef llm_job llm_offload_job;
typedef llm_job_thread llm_offload;

static inline llm_offload *
llm_offload_create(const char *what)
{
	return llm_job_thread_create(what, LLM_OFFLOAD_NICE);
}

static inline void
llm_offload_free(llm_offload *o)
{
	llm_job_thread_free(o);
}

static inline int
llm_offload_push(llm_offload *o, llm_offload_job *job, char *err, size_t errlen)
{
	return llm_job_thread_push(o, job, err, errlen);
}

static inline llm_offload_job *
llm_offload_take(llm_offload *o)
{
	return llm_job_thread_take(o);
}

static inline bool
llm_offload_wait(llm_offload *o, double max_ms)
{
	return llm_job_thread_wait(o, max_ms);
}

static inline void
llm_offload_debug_hold(llm_offload *o, bool hold)
{
	llm_job_thread_debug_hold(o, hold);
}

static inline bool
llm_offload_debug_drain(llm_offload *o)
{
	return llm_job_thread_debug_drain(o);
}

#endif
