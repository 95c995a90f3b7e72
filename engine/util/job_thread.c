/*
 * job_thread.c — one FIFO job thread with a gate (job_thread.h).
 */
#include "job_thread.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#endif

struct llm_job_thread
{
	/* driver only */
	const char *what;
	int			nice;
	bool		thread_started;
	pthread_t	thread;

	/* shared with the thread: under mu (n_done also read without it) */
	pthread_mutex_t mu;
	pthread_cond_t work;		/* the thread waits: a job, the gate opened, stop */
	pthread_cond_t finished;	/* the driver waits: a job finished (wait, drain) */
	llm_job *queue;		/* not started, FIFO */
	llm_job **queue_tail;
	llm_job *done;		/* finished, not taken, FIFO */
	llm_job **done_tail;
	atomic_int	n_done;
	bool		hold;
	bool		stop;
	bool		running;		/* a job is being run */
};

llm_job_thread *
llm_job_thread_create(const char *what, int nice)
{
	llm_job_thread *o = calloc(1, sizeof(*o));
	pthread_condattr_t ca;

	if (o == NULL)
		return NULL;
	o->what = what;
	o->nice = nice;
	o->queue_tail = &o->queue;
	o->done_tail = &o->done;
	atomic_init(&o->n_done, 0);
	if (pthread_mutex_init(&o->mu, NULL) != 0)
		goto fail;
	if (pthread_condattr_init(&ca) != 0)
		goto fail_mu;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&o->finished, &ca) != 0)
	{
		pthread_condattr_destroy(&ca);
		goto fail_mu;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_cond_init(&o->work, NULL) != 0)
	{
		pthread_cond_destroy(&o->finished);
		goto fail_mu;
	}
	return o;
fail_mu:
	pthread_mutex_destroy(&o->mu);
fail:
	free(o);
	return NULL;
}

static void
discard_list(llm_job *j)
{
	while (j != NULL)
	{
		llm_job *next = j->next;

		j->discard(j);
		j = next;
	}
}

void
llm_job_thread_free(llm_job_thread *o)
{
	if (o == NULL)
		return;
	if (o->thread_started)
	{
		pthread_mutex_lock(&o->mu);
		o->stop = true;
		pthread_cond_broadcast(&o->work);
		pthread_mutex_unlock(&o->mu);
		pthread_join(o->thread, NULL);
	}
	discard_list(o->queue);
	discard_list(o->done);
	pthread_cond_destroy(&o->work);
	pthread_cond_destroy(&o->finished);
	pthread_mutex_destroy(&o->mu);
	free(o);
}

static void *
job_thread_main(void *arg)
{
	llm_job_thread *o = arg;
	sigset_t	all;

	/* signals are the driver's (the worker's PostgreSQL handlers) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
#ifdef __linux__
	/*
	 * Linux gives each thread its own nice value: where the thread and the
	 * compute threads share a CPU, the steps keep most of it and the job
	 * takes what is left (failure only loses that preference)
	 */
	if (o->nice != 0)
		(void) setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), o->nice);
#endif
	pthread_mutex_lock(&o->mu);
	for (;;)
	{
		llm_job *job;

		while (!o->stop && (o->hold || o->queue == NULL))
			pthread_cond_wait(&o->work, &o->mu);
		if (o->stop)
			break;
		job = o->queue;
		o->queue = job->next;
		if (o->queue == NULL)
			o->queue_tail = &o->queue;
		o->running = true;
		pthread_mutex_unlock(&o->mu);

		job->run(job);

		pthread_mutex_lock(&o->mu);
		job->next = NULL;
		*o->done_tail = job;
		o->done_tail = &job->next;
		atomic_fetch_add(&o->n_done, 1);
		o->running = false;
		pthread_cond_broadcast(&o->finished);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

int
llm_job_thread_start(llm_job_thread *o, char *err, size_t errlen)
{
	sigset_t	all,
				old;
	int			rc;

	if (o->thread_started)
		return 0;
	/* the thread inherits the creator's mask: block everything while creating it */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&o->thread, NULL, job_thread_main, o);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
	{
		snprintf(err, errlen, "could not start the %s thread: %s", o->what, strerror(rc));
		return -1;
	}
	o->thread_started = true;
	return 0;
}

int
llm_job_thread_push(llm_job_thread *o, llm_job *job, char *err, size_t errlen)
{
	if (llm_job_thread_start(o, err, errlen) != 0)
		return -1;
	pthread_mutex_lock(&o->mu);
	job->next = NULL;
	*o->queue_tail = job;
	o->queue_tail = &job->next;
	pthread_cond_signal(&o->work);
	pthread_mutex_unlock(&o->mu);
	return 0;
}

llm_job *
llm_job_thread_take(llm_job_thread *o)
{
	llm_job *done;

	if (atomic_load(&o->n_done) == 0)
		return NULL;
	pthread_mutex_lock(&o->mu);
	done = o->done;
	o->done = NULL;
	o->done_tail = &o->done;
	atomic_store(&o->n_done, 0);
	pthread_mutex_unlock(&o->mu);
	return done;
}

bool
llm_job_thread_wait(llm_job_thread *o, double max_ms)
{
	struct timespec until;
	bool		got;

	if (atomic_load(&o->n_done) > 0)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t) (max_ms / 1e3);
	until.tv_nsec += (long) (fmod(max_ms, 1e3) * 1e6);
	if (until.tv_nsec >= 1000000000L)
	{
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&o->mu);
	while (atomic_load(&o->n_done) == 0 && (o->queue != NULL || o->running) &&
		   pthread_cond_timedwait(&o->finished, &o->mu, &until) != ETIMEDOUT)
		;
	got = atomic_load(&o->n_done) > 0;
	pthread_mutex_unlock(&o->mu);
	return got;
}

void
llm_job_thread_debug_hold(llm_job_thread *o, bool hold)
{
	pthread_mutex_lock(&o->mu);
	o->hold = hold;
	pthread_cond_broadcast(&o->work);
	pthread_mutex_unlock(&o->mu);
}

bool
llm_job_thread_debug_drain(llm_job_thread *o)
{
	pthread_mutex_lock(&o->mu);
	if (o->hold)
	{
		pthread_mutex_unlock(&o->mu);
		return false;
	}
	while (o->queue != NULL || o->running)
		pthread_cond_wait(&o->finished, &o->mu);
	pthread_mutex_unlock(&o->mu);
	return true;
}
