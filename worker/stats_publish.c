/*
 * stats_publish.c — the worker's side of the statistics (common/stats.h):
 * what the request intake and the main loop note between two publishes,
 * and the publish itself, one exclusive hold of the registry lock per loop
 * iteration.
 */
#include "postgres.h"

#include <time.h>

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "common/registry.h"
#include "common/stats.h"

/*
 * Latency samples noted since the last publish (of any model: llm_stat's
 * rings are the worker's).
 */
typedef struct LatencyDelta
{
	int			n_ttft;
	int			n_tpot;
	float		ttft[64];
	float		tpot[64];
} LatencyDelta;

static LatencyDelta latency;

/* Per model row: counter deltas since the last publish, and its engine's counters then. */
typedef struct ModelDelta
{
	LlmCounters c;				/* COUNT fields only */
	/* the engine's cumulative counters at the last publish (they restart with each engine) */
	int64		last_preemptions;
	int64		last_prefix_queries;
	int64		last_prefix_hits;
	int64		published_steps;	/* each step's batch size counts once */
} ModelDelta;

static ModelDelta model_delta[LLM_MAX_MODELS];

/* Deltas of requests no model took (LlmStats.other). */
static LlmCounters other_delta;

/* The counters a request of model (a row, or -1: none) counts into. */
static LlmCounters *
counters_of(int model)
{
	return model >= 0 && model < LLM_MAX_MODELS ? &model_delta[model].c : &other_delta;
}

/* Usage noted since the last publish, per (role, database). */
typedef struct UsageDelta
{
	Oid			role;
	Oid			database;
	LLM_COUNTERS(LLM_FIELD_USAGE)
	int64		class_requests[LLM_N_PRIORITIES];
} UsageDelta;

#define PENDING_USAGE 64
static UsageDelta pending_usage[PENDING_USAGE];
static int	n_pending_usage = 0;

/*
 * Records of requests finished since the last publish, copied into
 * llm_shared->recent by llm_stats_publish(); when it fills up within one
 * loop iteration (many requests failed at once) it is flushed on its own.
 */
#define PENDING_RECORDS 256
static LlmRequestRecord pending_records[PENDING_RECORDS];
static int	n_pending_records = 0;
static bool stats_dirty = true;


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

/* The entry of (role, database) in the usage table: its own, a free one, or the least recently noted. */
static LlmRoleUsage *
usage_entry_locked(LlmStats *s, Oid role, Oid database)
{
	LlmRoleUsage *victim = NULL;

	for (int i = 0; i < LLM_USAGE_ENTRIES; i++)
	{
		LlmRoleUsage *u = &s->usage[i];

		if (u->role == role && u->database == database)
			return u;
		if (victim == NULL || (victim->role != InvalidOid &&
							   (u->role == InvalidOid || u->last_noted < victim->last_noted)))
			victim = u;
	}
	memset(victim, 0, sizeof(*victim));
	victim->role = role;
	victim->database = database;
	return victim;
}

void
llm_stats_note_saved(const LlmRoleUsage *saved)
{
	LlmRoleUsage *u;

	if (llm_shared == NULL)
		return;
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	u = usage_entry_locked(&llm_shared->stats, GetUserId(), MyDatabaseId);
#define ADD_SAVED(type, name, kind, m, u_, p) u->name += saved->name;
	LLM_COUNTERS_NODE(ADD_SAVED)
#undef ADD_SAVED
	u->last_noted = GetCurrentTimestamp();
	LWLockRelease(llm_shared->lock);
}

/* Add the pending usage into the shared table; caller holds the lock exclusively. */
static void
append_usage_locked(void)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		sec = (int64) time(NULL);

	for (int i = 0; i < n_pending_usage; i++)
	{
		UsageDelta *d = &pending_usage[i];
		LlmRoleUsage *u = usage_entry_locked(&llm_shared->stats, d->role, d->database);
		int			b = (int) (sec % LLM_USAGE_WINDOW);

#define ADD_USAGE(type, name, kind, m, u_, p) LLM_IF_##u_(u->name += d->name;)
		LLM_COUNTERS(ADD_USAGE)
#undef ADD_USAGE
		for (int c = 0; c < LLM_N_PRIORITIES; c++)
			u->class_requests[c] += d->class_requests[c];
		u->last_noted = now;
		if (u->second[b] != sec)
		{
			u->second[b] = sec;
			u->tokens[b] = 0;
		}
		u->tokens[b] += d->prompt_tokens + d->completion_tokens + d->continuation_tokens;
	}
	n_pending_usage = 0;
}

void
llm_stats_note_usage(Oid role, Oid database, llm_priority priority, const llm_usage *usage,
					 int32 completion_tokens)
{
	UsageDelta *d = NULL;

	for (int i = 0; i < n_pending_usage; i++)
		if (pending_usage[i].role == role && pending_usage[i].database == database)
			d = &pending_usage[i];
	if (d == NULL)
	{
		if (n_pending_usage == PENDING_USAGE)
		{
			LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
			append_usage_locked();
			LWLockRelease(llm_shared->lock);
		}
		d = &pending_usage[n_pending_usage++];
		memset(d, 0, sizeof(*d));
		d->role = role;
		d->database = database;
	}
	d->requests++;
	if ((unsigned) priority < LLM_N_PRIORITIES)
		d->class_requests[priority]++;
	if (usage)
	{
		d->prompt_tokens += usage->prompt_tokens;
		d->cached_tokens += usage->cached_tokens;
		d->completion_tokens += usage->completion_tokens;
		d->continuation_tokens += usage->continuation_tokens;
		d->busy_ms += usage->busy_ms;
	}
	else
		d->completion_tokens += completion_tokens;
	stats_dirty = true;
}

/* One record for llm_recent_requests(); usage NULL: failed or aborted before the engine reported it. */
static void
record_request(llm_finish_reason outcome, const llm_usage *usage, const llm_wire_client *client)
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
	rec->pid = client ? client->pid : 0;
	rec->role = client ? client->role : InvalidOid;
	rec->database = client ? client->database : InvalidOid;
	stats_dirty = true;
}

void
llm_stats_note_finished(int model, llm_finish_reason reason, const llm_usage *usage,
						const llm_wire_client *client)
{
	LlmCounters *c = counters_of(model);

	c->requests_finished++;
	c->prompt_tokens += usage->prompt_tokens;
	c->cached_tokens += usage->cached_tokens;
	c->completion_tokens += usage->completion_tokens;
	if (usage->completion_tokens > 0 && latency.n_ttft < lengthof(latency.ttft))
		latency.ttft[latency.n_ttft++] = usage->ttft_ms;
	if (usage->completion_tokens > 1 && latency.n_tpot < lengthof(latency.tpot))
		latency.tpot[latency.n_tpot++] = (usage->total_ms - usage->ttft_ms) /
			(usage->completion_tokens - 1);
	record_request(reason, usage, client);
}

void
llm_stats_note_failed(int model, const llm_wire_client *client)
{
	counters_of(model)->requests_failed++;
	record_request(LLM_FINISH_ERROR, NULL, client);
}

void
llm_stats_note_aborted(int model, const llm_wire_client *client)
{
	counters_of(model)->requests_aborted++;
	record_request(LLM_FINISH_ABORT, NULL, client);
}

void
llm_stats_note_step(int model)
{
	counters_of(model)->steps++;
	stats_dirty = true;
}

void
llm_stats_note_change(void)
{
	stats_dirty = true;
}

void
llm_stats_row_retired_locked(int row)
{
	LlmCounters *row_stats = &llm_shared->models[row].stats;
	LlmCounters *other = &llm_shared->stats.other;

	llm_counters_add_history(other, row_stats);
	llm_counters_add_counts(&other_delta, &model_delta[row].c);
	memset(row_stats, 0, sizeof(*row_stats));
	memset(&model_delta[row].c, 0, sizeof(model_delta[row].c));
	stats_dirty = true;
}

void
llm_stats_engine_replaced(int model, bool fresh)
{
	if (model < 0 || model >= LLM_MAX_MODELS)
		return;
	model_delta[model].last_preemptions = 0;
	model_delta[model].last_prefix_queries = 0;
	model_delta[model].last_prefix_hits = 0;
	model_delta[model].published_steps = -1;
	if (fresh)
	{
		LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
		llm_stats_row_retired_locked(model);
		LWLockRelease(llm_shared->lock);
	}
	stats_dirty = true;
}

/* One model's engine numbers and its deltas into its row; caller holds the lock exclusively. */
static void
publish_model_locked(int row, const llm_engine *e)
{
	ModelDelta *md = &model_delta[row];
	LlmCounters *ms = &llm_shared->models[row].stats;
	llm_engine_stats es;

	memset(&es, 0, sizeof(es));
	if (e)
		llm_engine_get_stats(e, &es);
	ms->requests_running = es.n_running;
	ms->requests_waiting = es.n_waiting;
	/* idle: no current batch; the max folds in each step once, so a reset sticks */
	ms->batch_size = es.n_running > 0 ? es.last_batch_seqs : 0;
	if (e && es.n_steps != md->published_steps)
	{
		ms->max_batch_size = Max(ms->max_batch_size, es.last_batch_seqs);
		md->published_steps = es.n_steps;
	}
	ms->kv_blocks_used = es.kv_blocks_used;
	ms->kv_blocks_cached = es.kv_blocks_cached;
	ms->kv_blocks_total = es.kv_blocks_total;
	/* the engine's own counters, as deltas since the last publish */
	if (e && es.n_preemptions >= md->last_preemptions)
		md->c.preemptions += es.n_preemptions - md->last_preemptions;
	if (e && es.prefix_queries >= md->last_prefix_queries &&
		es.cached_prompt_tokens >= md->last_prefix_hits)
	{
		md->c.prefix_query_tokens += es.prefix_queries - md->last_prefix_queries;
		md->c.prefix_hit_tokens += es.cached_prompt_tokens - md->last_prefix_hits;
	}
	md->last_preemptions = es.n_preemptions;
	md->last_prefix_queries = es.prefix_queries;
	md->last_prefix_hits = es.cached_prompt_tokens;
	llm_counters_add_counts(ms, &md->c);
	memset(&md->c, 0, sizeof(md->c));
}

void
llm_stats_publish(llm_engine *const *engines, int n)
{
	if (!stats_dirty)
		return;

	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	{
		LlmStats   *s = &llm_shared->stats;

		for (int row = 0; row < n && row < LLM_MAX_MODELS; row++)
			publish_model_locked(row, engines[row]);
		llm_counters_add_counts(&s->other, &other_delta);
		for (int i = 0; i < latency.n_ttft; i++)
			latency_add(&s->ttft, latency.ttft[i]);
		for (int i = 0; i < latency.n_tpot; i++)
			latency_add(&s->tpot, latency.tpot[i]);
		append_recent_locked();
		append_usage_locked();
	}
	LWLockRelease(llm_shared->lock);
	memset(&other_delta, 0, sizeof(other_delta));
	memset(&latency, 0, sizeof(latency));
	stats_dirty = false;
}

void
llm_stats_worker_gone_locked(void)
{
	for (int row = 0; row < LLM_MAX_MODELS; row++)
		llm_counters_zero_load(&llm_shared->models[row].stats);
}
