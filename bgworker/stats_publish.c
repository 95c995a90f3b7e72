/*
 * stats_publish.c — the worker's side of the statistics (src/stats.h):
 * what the request intake and the main loop note between two publishes,
 * and the publish itself, one exclusive hold of the registry lock per loop
 * iteration.
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "registry.h"
#include "stats.h"

/* Counter deltas noted since the last publish. */
typedef struct StatsDelta
{
	int64		finished;
	int64		failed;
	int64		aborted;
	int64		prompt_tokens;
	int64		cached_tokens;
	int64		completion_tokens;
	int64		steps;
	int			n_ttft;
	int			n_tpot;
	float		ttft[64];
	float		tpot[64];
} StatsDelta;

static StatsDelta delta;

/*
 * Records of requests finished since the last publish, copied into
 * llm_shared->recent by llm_stats_publish(); when it fills up within one
 * loop iteration (many requests failed at once) it is flushed on its own.
 */
#define PENDING_RECORDS 256
static LlmRequestRecord pending_records[PENDING_RECORDS];
static int	n_pending_records = 0;
static bool stats_dirty = true;

/* The engine's cumulative counters at the last publish (they restart with each engine). */
static int64 last_engine_preemptions = 0;
static int64 last_engine_prefix_queries = 0;
static int64 last_engine_prefix_hits = 0;
/* engine step count at the last publish: each step's batch size counts once */
static int64 published_steps = -1;

/* Append one latency sample (ms) to a ring; caller holds the lock exclusively. */
static void
latency_add(LlmLatencyRing *r, double ms)
{
	r->ms[r->next] = (float) ms;
	r->next = (r->next + 1) % LLM_LATENCY_RING;
	if (r->count < LLM_LATENCY_RING)
		r->count++;
}

/* Copy the pending records into the shared ring; caller holds the lock exclusively. */
static void
append_recent_locked(void)
{
	LlmRecentRequests *ring = &llm_shared->recent;

	for (int i = 0; i < n_pending_records; i++)
	{
		ring->rec[ring->written % LLM_RECENT_REQUESTS] = pending_records[i];
		ring->written++;
	}
	n_pending_records = 0;
}

/* One record for llm_recent_requests(); usage NULL: failed or aborted before the engine reported it. */
static void
record_request(llm_finish_reason outcome, const llm_usage *usage)
{
	LlmRequestRecord *rec;

	if (n_pending_records == PENDING_RECORDS)
	{
		LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
		append_recent_locked();
		LWLockRelease(llm_shared->lock);
	}
	rec = &pending_records[n_pending_records++];
	rec->finished_at = GetCurrentTimestamp();
	rec->outcome = outcome;
	if (usage)
	{
		rec->prompt_tokens = usage->prompt_tokens;
		rec->cached_tokens = usage->cached_tokens;
		rec->completion_tokens = usage->completion_tokens;
		rec->ttft_ms = usage->completion_tokens > 0 ? usage->ttft_ms : -1.0;
		rec->total_ms = usage->total_ms;
	}
	else
	{
		rec->prompt_tokens = rec->cached_tokens = rec->completion_tokens = -1;
		rec->ttft_ms = rec->total_ms = -1.0;
	}
	stats_dirty = true;
}

void
llm_stats_note_finished(llm_finish_reason reason, const llm_usage *usage)
{
	delta.finished++;
	delta.prompt_tokens += usage->prompt_tokens;
	delta.cached_tokens += usage->cached_tokens;
	delta.completion_tokens += usage->completion_tokens;
	if (usage->completion_tokens > 0 && delta.n_ttft < lengthof(delta.ttft))
		delta.ttft[delta.n_ttft++] = usage->ttft_ms;
	if (usage->completion_tokens > 1 && delta.n_tpot < lengthof(delta.tpot))
		delta.tpot[delta.n_tpot++] = (usage->total_ms - usage->ttft_ms) /
			(usage->completion_tokens - 1);
	record_request(reason, usage);
}

void
llm_stats_note_failed(void)
{
	delta.failed++;
	record_request(LLM_FINISH_ERROR, NULL);
}

void
llm_stats_note_aborted(void)
{
	delta.aborted++;
	record_request(LLM_FINISH_ABORT, NULL);
}

void
llm_stats_note_step(void)
{
	delta.steps++;
	stats_dirty = true;
}

void
llm_stats_note_change(void)
{
	stats_dirty = true;
}

void
llm_stats_engine_replaced(void)
{
	last_engine_preemptions = 0;
	last_engine_prefix_queries = 0;
	last_engine_prefix_hits = 0;
	stats_dirty = true;
}

void
llm_stats_publish(const llm_engine *e)
{
	llm_engine_stats es;

	if (!stats_dirty)
		return;
	memset(&es, 0, sizeof(es));
	if (e)
		llm_engine_get_stats(e, &es);

	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	{
		LlmStats   *s = &llm_shared->stats;

		s->requests_running = es.n_running;
		s->requests_waiting = es.n_waiting;
		/* idle: no current batch; the max folds in each step once, so a reset sticks */
		s->batch_size = es.n_running > 0 ? es.last_batch_seqs : 0;
		if (es.n_steps != published_steps)
		{
			s->max_batch_size = Max(s->max_batch_size, es.last_batch_seqs);
			published_steps = es.n_steps;
		}
		s->kv_blocks_used = es.kv_blocks_used;
		s->kv_blocks_cached = es.kv_blocks_cached;
		s->kv_blocks_total = es.kv_blocks_total;
		s->requests_finished += delta.finished;
		s->requests_failed += delta.failed;
		s->requests_aborted += delta.aborted;
		s->prompt_tokens += delta.prompt_tokens;
		s->cached_tokens += delta.cached_tokens;
		s->completion_tokens += delta.completion_tokens;
		s->steps += delta.steps;
		if (e && es.n_preemptions >= last_engine_preemptions)
			s->preemptions += es.n_preemptions - last_engine_preemptions;
		if (e && es.prefix_queries >= last_engine_prefix_queries &&
			es.cached_prompt_tokens >= last_engine_prefix_hits)
		{
			s->prefix_query_tokens += es.prefix_queries - last_engine_prefix_queries;
			s->prefix_hit_tokens += es.cached_prompt_tokens - last_engine_prefix_hits;
		}
		for (int i = 0; i < delta.n_ttft; i++)
			latency_add(&s->ttft, delta.ttft[i]);
		for (int i = 0; i < delta.n_tpot; i++)
			latency_add(&s->tpot, delta.tpot[i]);
		append_recent_locked();
	}
	LWLockRelease(llm_shared->lock);
	last_engine_preemptions = es.n_preemptions;
	last_engine_prefix_queries = es.prefix_queries;
	last_engine_prefix_hits = es.cached_prompt_tokens;
	memset(&delta, 0, sizeof(delta));
	stats_dirty = false;
}

void
llm_stats_worker_gone_locked(LlmStats *s)
{
	s->requests_running = 0;
	s->requests_waiting = 0;
	s->kv_blocks_used = 0;
	s->batch_size = 0;
}
