/*
 * stats.c — SQL views of the worker's shared state (stats.h, registry.h):
 * llm_stat() (behind the llm_stat view), llm_recent_requests(),
 * llm_stat_reset(), llm_model_info(), llm_models() and llm_usage() (behind
 * the llm_usage view).  These read main shared
 * memory only, so they work while the worker is down or the model failed
 * to load.
 */
#include "postgres.h"

#include <math.h>
#include <time.h>

#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "commands/dbcommands.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "registry.h"

PG_FUNCTION_INFO_V1(pg_llm_stat);
PG_FUNCTION_INFO_V1(pg_llm_stat_reset);
PG_FUNCTION_INFO_V1(pg_llm_recent_requests);
PG_FUNCTION_INFO_V1(pg_llm_model_info);
PG_FUNCTION_INFO_V1(pg_llm_models);
PG_FUNCTION_INFO_V1(pg_llm_usage);

#define LLM_STAT_COLS 25

static void
require_registry(void)
{
	if (llm_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_llm is not initialized"),
				 errhint("Add 'llm' to shared_preload_libraries in postgresql.conf and restart the server.")));
}

static int
cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a;
	float		y = *(const float *) b;

	return (x > y) - (x < y);
}

/* Mean and 99th percentile (nearest rank) of a latency ring copy; false if empty. */
static bool
ring_summary(LlmLatencyRing *r, double *mean, double *p99)
{
	double		sum = 0;
	int			rank;

	if (r->count == 0)
		return false;
	qsort(r->ms, r->count, sizeof(float), cmp_float);
	for (int i = 0; i < r->count; i++)
		sum += r->ms[i];
	*mean = sum / r->count;
	rank = (int) ceil(0.99 * r->count);
	*p99 = r->ms[Max(rank, 1) - 1];
	return true;
}

/*
 * llm_stat() -> one row: worker and model status, request counts, token
 * counts, prefix-cache lookups (prompt tokens queried, hit, hit rate; NULL
 * rate before any lookup), batch sizes, KV blocks, mean/p99 TTFT and TPOT over the most recent
 * LLM_LATENCY_RING requests (ms).
 */
Datum
pg_llm_stat(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[LLM_STAT_COLS];
	bool		nulls[LLM_STAT_COLS];
	LlmStats   *s = palloc(sizeof(LlmStats));
	int			pid;
	LlmModelState state;
	double		mean,
				p99;
	int			c = 0;

	require_registry();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "llm_stat must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	memcpy(s, &llm_shared->stats, sizeof(LlmStats));
	pid = llm_shared->worker_pid;
	state = llm_shared->models[LLM_DEFAULT_ROW].state;
	LWLockRelease(llm_shared->lock);

	memset(nulls, 0, sizeof(nulls));
	values[c] = Int32GetDatum(pid);
	nulls[c++] = (pid == 0);
	values[c++] = CStringGetTextDatum(llm_model_state_name(state));
	values[c++] = Int32GetDatum(s->requests_running);
	values[c++] = Int32GetDatum(s->requests_waiting);
	values[c++] = Int64GetDatum(s->requests_finished);
	values[c++] = Int64GetDatum(s->requests_failed);
	values[c++] = Int64GetDatum(s->requests_aborted);
	values[c++] = Int64GetDatum(s->prompt_tokens);
	values[c++] = Int64GetDatum(s->cached_tokens);
	values[c++] = Int64GetDatum(s->prefix_query_tokens);
	values[c++] = Int64GetDatum(s->prefix_hit_tokens);
	values[c] = Float8GetDatum(s->prefix_query_tokens > 0 ?
							   (double) s->prefix_hit_tokens / (double) s->prefix_query_tokens : 0.0);
	nulls[c++] = (s->prefix_query_tokens == 0);
	values[c++] = Int64GetDatum(s->completion_tokens);
	values[c++] = Int32GetDatum(s->batch_size);
	values[c++] = Int32GetDatum(s->max_batch_size);
	values[c++] = Int32GetDatum(s->kv_blocks_used);
	values[c++] = Int32GetDatum(s->kv_blocks_cached);
	values[c++] = Int32GetDatum(s->kv_blocks_total);
	values[c++] = Int64GetDatum(s->steps);
	values[c++] = Int64GetDatum(s->preemptions);
	if (ring_summary(&s->ttft, &mean, &p99))
	{
		values[c++] = Float8GetDatum(mean);
		values[c++] = Float8GetDatum(p99);
	}
	else
	{
		nulls[c++] = true;
		nulls[c++] = true;
	}
	if (ring_summary(&s->tpot, &mean, &p99))
	{
		values[c++] = Float8GetDatum(mean);
		values[c++] = Float8GetDatum(p99);
	}
	else
	{
		nulls[c++] = true;
		nulls[c++] = true;
	}
	values[c++] = TimestampTzGetDatum(s->reset_time);
	Assert(c == LLM_STAT_COLS);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* llm_stat_reset(): zero the cumulative counters, max batch size, latency samples and recent requests. */
Datum
pg_llm_stat_reset(PG_FUNCTION_ARGS)
{
	LlmStats   *s;

	require_registry();
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	s = &llm_shared->stats;
	s->max_batch_size = s->batch_size;
	s->requests_finished = 0;
	s->requests_failed = 0;
	s->requests_aborted = 0;
	s->prompt_tokens = 0;
	s->cached_tokens = 0;
	s->prefix_query_tokens = 0;
	s->prefix_hit_tokens = 0;
	s->completion_tokens = 0;
	s->steps = 0;
	s->preemptions = 0;
	memset(&s->ttft, 0, sizeof(s->ttft));
	memset(&s->tpot, 0, sizeof(s->tpot));
	for (int row = 0; row < LLM_MAX_MODELS; row++)
	{
		LlmModelStats *ms = &llm_shared->models[row].stats;

		ms->max_batch_size = ms->batch_size;
		ms->requests_finished = 0;
		ms->requests_failed = 0;
		ms->requests_aborted = 0;
		ms->prompt_tokens = 0;
		ms->completion_tokens = 0;
		ms->steps = 0;
	}
	for (int i = 0; i < LLM_USAGE_ENTRIES; i++)
	{
		LlmRoleUsage *u = &s->usage[i];

		u->requests = u->prompt_tokens = u->cached_tokens = u->completion_tokens = 0;
		u->busy_ms = 0;
		memset(u->class_requests, 0, sizeof(u->class_requests));
	}
	llm_shared->recent.written = 0;
	s->reset_time = GetCurrentTimestamp();
	LWLockRelease(llm_shared->lock);
	PG_RETURN_VOID();
}

#define LLM_RECENT_COLS 12

static Datum
name_datum(const char *s)
{
	Name		n = palloc0(NAMEDATALEN);

	namestrcpy(n, s);
	return NameGetDatum(n);
}

/*
 * llm_recent_requests() -> setof (seq bigint, finished_at timestamptz,
 * outcome text, prompt_tokens int, cached_tokens int, completion_tokens int,
 * ttft_ms float8, tpot_ms float8, total_ms float8, pid int, role name,
 * database name): the last
 * LLM_RECENT_REQUESTS requests the worker finished since start or
 * llm_stat_reset(), oldest first.  seq numbers them from 1 since the reset.
 * Times are the worker's (engine add -> first token, -> finish; ms);
 * tpot_ms = (total_ms - ttft_ms) / (completion_tokens - 1), NULL below 2
 * tokens.  Failed and aborted requests have NULL token counts and times.
 * pid, role and database are the submitter's (names looked up now: NULL
 * for a dropped role or database, or an unknown submitter).
 *
 * The columns are filled as far as the function's declaration goes: a
 * catalog from before pid, role and database were appended (0.2) declares 9,
 * and a stored query reads the first columns only (llm_widen_result).
 */
Datum
pg_llm_recent_requests(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmRequestRecord *recs;
	int64		written;
	int64		first;
	int			natts;

	require_registry();
	InitMaterializedSRF(fcinfo, 0);
	natts = Min(rsinfo->setDesc->natts, LLM_RECENT_COLS);

	recs = palloc(sizeof(LlmRequestRecord) * LLM_RECENT_REQUESTS);
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	written = llm_shared->recent.written;
	memcpy(recs, llm_shared->recent.rec, sizeof(LlmRequestRecord) * LLM_RECENT_REQUESTS);
	LWLockRelease(llm_shared->lock);

	first = Max(written - LLM_RECENT_REQUESTS, 0);
	for (int64 seq = first; seq < written; seq++)
	{
		LlmRequestRecord *r = &recs[seq % LLM_RECENT_REQUESTS];
		Datum		values[LLM_RECENT_COLS];
		bool		nulls[LLM_RECENT_COLS];
		bool		known = r->prompt_tokens >= 0;
		int			c = 0;

		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int64GetDatum(seq + 1);
		values[c++] = TimestampTzGetDatum(r->finished_at);
		values[c++] = CStringGetTextDatum(llm_finish_reason_name((llm_finish_reason) r->outcome));
		values[c] = Int32GetDatum(r->prompt_tokens);
		nulls[c++] = !known;
		values[c] = Int32GetDatum(r->cached_tokens);
		nulls[c++] = !known;
		values[c] = Int32GetDatum(r->completion_tokens);
		nulls[c++] = !known;
		values[c] = Float8GetDatum(r->ttft_ms);
		nulls[c++] = !known || r->ttft_ms < 0;
		values[c] = Float8GetDatum(r->completion_tokens > 1 ?
								   (r->total_ms - r->ttft_ms) / (r->completion_tokens - 1) : 0.0);
		nulls[c++] = !known || r->completion_tokens < 2;
		values[c] = Float8GetDatum(r->total_ms);
		nulls[c++] = !known || r->total_ms < 0;
		values[c] = Int32GetDatum(r->pid);
		nulls[c++] = r->pid == 0;
		if (natts > c)
		{
			char	   *role = OidIsValid(r->role) ? GetUserNameFromId(r->role, true) : NULL;
			char	   *db = OidIsValid(r->database) ? get_database_name(r->database) : NULL;

			values[c] = role ? name_datum(role) : (Datum) 0;
			nulls[c++] = role == NULL;
			values[c] = db ? name_datum(db) : (Datum) 0;
			nulls[c++] = db == NULL;
		}
		Assert(c == LLM_RECENT_COLS || natts <= 9);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(recs);
	return (Datum) 0;
}

/*
 * llm_model_info() -> jsonb {"status", "worker_pid", "model_path", "model_sha256",
 * "device", "context_length", "error", "model": <the engine's description>}:
 * model_sha256 is the hex sha256 of the default model's file as loaded (null
 * unless ready).
 */
Datum
pg_llm_model_info(PG_FUNCTION_ARGS)
{
	StringInfoData buf;
	LlmModelRow *r = palloc(sizeof(LlmModelRow));
	LlmModelState state;
	int			pid;

	require_registry();
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	memcpy(r, &llm_shared->models[LLM_DEFAULT_ROW], sizeof(LlmModelRow));
	pid = llm_shared->worker_pid;
	LWLockRelease(llm_shared->lock);
	state = r->state;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"status\": ");
	escape_json(&buf, llm_model_state_name(state));
	appendStringInfo(&buf, ", \"worker_pid\": %s", pid ? psprintf("%d", pid) : "null");
	appendStringInfoString(&buf, ", \"model_path\": ");
	if (r->path[0])
		escape_json(&buf, r->path);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ", \"model_sha256\": ");
	if (state == LLM_MODEL_READY && r->sha256[0])
		escape_json(&buf, r->sha256);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ", \"device\": ");
	if (state == LLM_MODEL_READY)
		escape_json(&buf, r->device);
	else
		appendStringInfoString(&buf, "null");
	if (state == LLM_MODEL_READY)
		appendStringInfo(&buf, ", \"context_length\": %d", r->n_ctx);
	else
		appendStringInfoString(&buf, ", \"context_length\": null");
	appendStringInfoString(&buf, ", \"error\": ");
	if (r->error[0])
		escape_json(&buf, r->error);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfo(&buf, ", \"model\": %s}", (state == LLM_MODEL_READY && r->info[0]) ? r->info : "null");

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

#define LLM_MODELS_COLS 19

/*
 * llm_models() -> setof (alias, path, sha256, architecture, parameters,
 * context_length, state, error, requests_running, requests_waiting,
 * requests_finished, requests_failed, requests_aborted, prompt_tokens,
 * completion_tokens, batch_size, max_batch_size, kv_blocks_used,
 * kv_blocks_total): one row per served model, the default model first,
 * then by row of the model table (registry.h).  sha256 (of the file as
 * loaded), architecture, parameters and context_length are NULL unless the
 * model is ready, error unless it failed.
 */
Datum
pg_llm_models(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmModelRow *rows;

	require_registry();
	InitMaterializedSRF(fcinfo, 0);
	rows = palloc(sizeof(LlmModelRow) * LLM_MAX_MODELS);
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	memcpy(rows, llm_shared->models, sizeof(LlmModelRow) * LLM_MAX_MODELS);
	LWLockRelease(llm_shared->lock);

	for (int row = 0; row < LLM_MAX_MODELS; row++)
	{
		LlmModelRow *r = &rows[row];
		LlmModelStats *s = &r->stats;
		Datum		values[LLM_MODELS_COLS];
		bool		nulls[LLM_MODELS_COLS];
		bool		ready = r->state == LLM_MODEL_READY;
		int			c = 0;

		if (!r->in_use)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[c++] = CStringGetTextDatum(r->alias);
		values[c] = CStringGetTextDatum(r->path);
		nulls[c++] = r->path[0] == '\0';
		values[c] = CStringGetTextDatum(r->sha256);
		nulls[c++] = !ready || r->sha256[0] == '\0';
		values[c] = CStringGetTextDatum(r->architecture);
		nulls[c++] = !ready;
		values[c] = Int64GetDatum(r->n_params);
		nulls[c++] = !ready;
		values[c] = Int32GetDatum(r->n_ctx);
		nulls[c++] = !ready;
		values[c++] = CStringGetTextDatum(llm_model_state_name(r->state));
		values[c] = CStringGetTextDatum(r->error);
		nulls[c++] = r->error[0] == '\0';
		values[c++] = Int32GetDatum(s->requests_running);
		values[c++] = Int32GetDatum(s->requests_waiting);
		values[c++] = Int64GetDatum(s->requests_finished);
		values[c++] = Int64GetDatum(s->requests_failed);
		values[c++] = Int64GetDatum(s->requests_aborted);
		values[c++] = Int64GetDatum(s->prompt_tokens);
		values[c++] = Int64GetDatum(s->completion_tokens);
		values[c++] = Int32GetDatum(s->batch_size);
		values[c++] = Int32GetDatum(s->max_batch_size);
		values[c++] = Int32GetDatum(s->kv_blocks_used);
		values[c++] = Int32GetDatum(s->kv_blocks_total);
		Assert(c == LLM_MODELS_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(rows);
	return (Datum) 0;
}

/* Tokens of u noted within the LLM_USAGE_WINDOW seconds up to now_sec. */
static int64
window_tokens(const LlmRoleUsage *u, int64 now_sec)
{
	int64		sum = 0;

	for (int b = 0; b < LLM_USAGE_WINDOW; b++)
		if (u->second[b] > now_sec - LLM_USAGE_WINDOW && u->second[b] <= now_sec)
			sum += u->tokens[b];
	return sum;
}

#define LLM_USAGE_COLS 10

/*
 * llm_usage() -> setof (role_oid oid, database_oid oid, requests bigint,
 * prompt_tokens bigint, cached_tokens bigint, completion_tokens bigint,
 * busy_ms float8, tokens_last_minute bigint, interactive_requests bigint,
 * batch_requests bigint): one row per (role, database)
 * the worker took requests for since start or llm_stat_reset() (the
 * llm_usage view names them).
 */
Datum
pg_llm_usage(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmRoleUsage *copy = palloc(sizeof(LlmRoleUsage) * LLM_USAGE_ENTRIES);
	int64		now_sec = (int64) time(NULL);

	require_registry();
	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	memcpy(copy, llm_shared->stats.usage, sizeof(LlmRoleUsage) * LLM_USAGE_ENTRIES);
	LWLockRelease(llm_shared->lock);
	for (int i = 0; i < LLM_USAGE_ENTRIES; i++)
	{
		LlmRoleUsage *u = &copy[i];
		Datum		values[LLM_USAGE_COLS];
		bool		nulls[LLM_USAGE_COLS];
		int			c = 0;

		if (u->role == InvalidOid || (u->requests == 0 && window_tokens(u, now_sec) == 0))
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[c++] = ObjectIdGetDatum(u->role);
		values[c++] = ObjectIdGetDatum(u->database);
		values[c++] = Int64GetDatum(u->requests);
		values[c++] = Int64GetDatum(u->prompt_tokens);
		values[c++] = Int64GetDatum(u->cached_tokens);
		values[c++] = Int64GetDatum(u->completion_tokens);
		values[c++] = Float8GetDatum(u->busy_ms);
		values[c++] = Int64GetDatum(window_tokens(u, now_sec));
		values[c++] = Int64GetDatum(u->class_requests[LLM_PRIORITY_INTERACTIVE]);
		values[c++] = Int64GetDatum(u->class_requests[LLM_PRIORITY_BATCH]);
		Assert(c == LLM_USAGE_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(copy);
	return (Datum) 0;
}
