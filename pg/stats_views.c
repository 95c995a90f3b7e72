/*
 * stats_views.c — SQL views of the worker's shared state (stats.h, registry.h):
 * llm_stat() (behind the llm_stat view), llm_recent_requests(),
 * llm_stat_reset(), llm_model_info(), llm_models() and llm_usage() (behind
 * the llm_usage view).  These read main shared
 * memory only, so they work while the worker is down or the model failed
 * to load.
 */
#include "postgres.h"

#include <math.h>
#include <time.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "commands/dbcommands.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "common/registry.h"

PG_FUNCTION_INFO_V1(pg_llm_stat);
PG_FUNCTION_INFO_V1(pg_llm_stat_reset);
PG_FUNCTION_INFO_V1(pg_llm_recent_requests);
PG_FUNCTION_INFO_V1(pg_llm_model_info);
PG_FUNCTION_INFO_V1(pg_llm_models);
PG_FUNCTION_INFO_V1(pg_llm_usage);

static void
require_registry(void)
{
	if (llm_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_llm is not initialized"),
				 errhint("Add 'llm' to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * A row of a view being built column by column, by name: the SQL
 * declaration (the function's OUT parameters) orders the columns, the C
 * code names what it knows, and a column it leaves unset is an error
 * (a column declared without anything to show).
 */
typedef struct ColumnFill
{
	TupleDesc	tupdesc;
	Datum	   *values;
	bool	   *nulls;
	bool	   *set;
} ColumnFill;

static void
fill_begin(ColumnFill *f, TupleDesc tupdesc)
{
	f->tupdesc = tupdesc;
	f->values = palloc0(sizeof(Datum) * Max(tupdesc->natts, 1));
	f->nulls = palloc0(sizeof(bool) * Max(tupdesc->natts, 1));
	f->set = palloc0(sizeof(bool) * Max(tupdesc->natts, 1));
}

/* Column name (if declared: a view may show a subset) := value of type, or NULL. */
static void
fill_put(ColumnFill *f, const char *name, Oid type, Datum value, bool isnull)
{
	for (int i = 0; i < f->tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(f->tupdesc, i);

		if (att->attisdropped || strcmp(NameStr(att->attname), name) != 0)
			continue;
		if (att->atttypid != type)
			elog(ERROR, "llm: column \"%s\" is declared %s, but its value is %s",
				 name, format_type_be(att->atttypid), format_type_be(type));
		f->values[i] = value;
		f->nulls[i] = isnull;
		f->set[i] = true;
	}
}

static void
fill_check(ColumnFill *f)
{
	for (int i = 0; i < f->tupdesc->natts; i++)
		if (!f->set[i] && !TupleDescAttr(f->tupdesc, i)->attisdropped)
			elog(ERROR, "llm: column \"%s\" has no value",
				 NameStr(TupleDescAttr(f->tupdesc, i)->attname));
}

/* Start the next row: every column unset again. */
static void
fill_next(ColumnFill *f)
{
	memset(f->set, 0, sizeof(bool) * f->tupdesc->natts);
	memset(f->nulls, 0, sizeof(bool) * f->tupdesc->natts);
}

/* The SQL type and Datum of a counter's C type (LLM_COUNTERS). */
#define COUNTER_TYPE_int32 INT4OID
#define COUNTER_TYPE_int64 INT8OID
#define COUNTER_TYPE_double FLOAT8OID
#define COUNTER_DATUM_int32(v) Int32GetDatum(v)
#define COUNTER_DATUM_int64(v) Int64GetDatum(v)
#define COUNTER_DATUM_double(v) Float8GetDatum(v)

/* Every counter of c into its column of the same name. */
static void
fill_counters(ColumnFill *f, const LlmCounters *c)
{
#define PUT(type, name, kind, m, u, p) \
	LLM_IF_##m(fill_put(f, #name, COUNTER_TYPE_##type, COUNTER_DATUM_##type(c->name), false);)
	LLM_COUNTERS(PUT)
#undef PUT
}

/* Every usage counter of u into its column of the same name. */
static void
fill_usage(ColumnFill *f, const LlmRoleUsage *r)
{
#define PUT(type, name, kind, m, u, p) \
	LLM_IF_##u(fill_put(f, #name, COUNTER_TYPE_##type, COUNTER_DATUM_##type(r->name), false);)
	LLM_COUNTERS(PUT)
#undef PUT
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
 * llm_stat() -> one row: worker and default model status, the counters
 * (LLM_COUNTERS) summed over every model and the requests no model holds
 * (LlmStats.other), prefix-cache hit rate (NULL before any lookup), mean/p99
 * TTFT and TPOT over the most recent LLM_LATENCY_RING requests (ms), and
 * the reset time.
 */
Datum
pg_llm_stat(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	ColumnFill	f;
	LlmCounters *rows = palloc(sizeof(LlmCounters) * LLM_MAX_MODELS);
	LlmCounters sum;
	LlmLatencyRing *ttft = palloc(sizeof(LlmLatencyRing));
	LlmLatencyRing *tpot = palloc(sizeof(LlmLatencyRing));
	TimestampTz reset_time;
	int			pid;
	LlmModelState state;
	double		mean,
				p99;
	bool		known;

	require_registry();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "llm_stat must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	for (int row = 0; row < LLM_MAX_MODELS; row++)
		rows[row] = llm_shared->models[row].stats;
	sum = llm_shared->stats.other;
	memcpy(ttft, &llm_shared->stats.ttft, sizeof(LlmLatencyRing));
	memcpy(tpot, &llm_shared->stats.tpot, sizeof(LlmLatencyRing));
	reset_time = llm_shared->stats.reset_time;
	pid = llm_shared->worker_pid;
	state = llm_shared->models[LLM_DEFAULT_ROW].state;
	LWLockRelease(llm_shared->lock);

	for (int row = 0; row < LLM_MAX_MODELS; row++)
		llm_counters_fold(&sum, &rows[row]);

	fill_begin(&f, tupdesc);
	fill_put(&f, "worker_pid", INT4OID, Int32GetDatum(pid), pid == 0);
	fill_put(&f, "model_status", TEXTOID, CStringGetTextDatum(llm_model_state_name(state)), false);
	fill_counters(&f, &sum);
	fill_put(&f, "prefix_hit_rate", FLOAT8OID,
			 Float8GetDatum(sum.prefix_query_tokens > 0 ?
							(double) sum.prefix_hit_tokens / (double) sum.prefix_query_tokens : 0.0),
			 sum.prefix_query_tokens == 0);
	known = ring_summary(ttft, &mean, &p99);
	fill_put(&f, "ttft_mean_ms", FLOAT8OID, Float8GetDatum(known ? mean : 0), !known);
	fill_put(&f, "ttft_p99_ms", FLOAT8OID, Float8GetDatum(known ? p99 : 0), !known);
	known = ring_summary(tpot, &mean, &p99);
	fill_put(&f, "tpot_mean_ms", FLOAT8OID, Float8GetDatum(known ? mean : 0), !known);
	fill_put(&f, "tpot_p99_ms", FLOAT8OID, Float8GetDatum(known ? p99 : 0), !known);
	fill_put(&f, "stats_reset", TIMESTAMPTZOID, TimestampTzGetDatum(reset_time), false);
	fill_check(&f);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, f.values, f.nulls)));
}

/* Zero c's cumulative counters; its peaks restart from the current values. */
static void
counters_reset(LlmCounters *c)
{
	llm_counters_zero_counts(c);
	c->max_batch_size = c->batch_size;
}

/* llm_stat_reset(): zero the cumulative counters, max batch size, latency samples and recent requests. */
Datum
pg_llm_stat_reset(PG_FUNCTION_ARGS)
{
	LlmStats   *s;

	require_registry();
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	s = &llm_shared->stats;
	counters_reset(&s->other);
	for (int row = 0; row < LLM_MAX_MODELS; row++)
		counters_reset(&llm_shared->models[row].stats);
	memset(&s->ttft, 0, sizeof(s->ttft));
	memset(&s->tpot, 0, sizeof(s->tpot));
	for (int i = 0; i < LLM_USAGE_ENTRIES; i++)
	{
		LlmRoleUsage *u = &s->usage[i];

#define ZERO(type, name, kind, m, u_, p) LLM_IF_##u_(u->name = 0;)
		LLM_COUNTERS(ZERO)
#undef ZERO
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

/*
 * llm_models() -> setof (alias, path, sha256, architecture, parameters,
 * context_length, state, error, and the counters of LlmCounters its
 * declaration names): one row per served model, the default model first,
 * then by row of the model table (registry.h).  sha256 (of the file as
 * loaded), architecture, parameters and context_length are NULL unless the
 * model is ready, error unless it failed.
 */
Datum
pg_llm_models(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmModelRow *rows;
	ColumnFill	f;

	require_registry();
	InitMaterializedSRF(fcinfo, 0);
	rows = palloc(sizeof(LlmModelRow) * LLM_MAX_MODELS);
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	memcpy(rows, llm_shared->models, sizeof(LlmModelRow) * LLM_MAX_MODELS);
	LWLockRelease(llm_shared->lock);

	fill_begin(&f, rsinfo->setDesc);
	for (int row = 0; row < LLM_MAX_MODELS; row++)
	{
		LlmModelRow *r = &rows[row];
		bool		ready = r->state == LLM_MODEL_READY;

		if (!r->in_use)
			continue;
		fill_next(&f);
		fill_put(&f, "alias", TEXTOID, CStringGetTextDatum(r->alias), false);
		fill_put(&f, "path", TEXTOID, CStringGetTextDatum(r->path), r->path[0] == '\0');
		fill_put(&f, "sha256", TEXTOID, CStringGetTextDatum(r->sha256), !ready || r->sha256[0] == '\0');
		fill_put(&f, "architecture", TEXTOID, CStringGetTextDatum(r->architecture), !ready);
		fill_put(&f, "parameters", INT8OID, Int64GetDatum(r->n_params), !ready);
		fill_put(&f, "context_length", INT4OID, Int32GetDatum(r->n_ctx), !ready);
		fill_put(&f, "state", TEXTOID, CStringGetTextDatum(llm_model_state_name(r->state)), false);
		fill_put(&f, "error", TEXTOID, CStringGetTextDatum(r->error), r->error[0] == '\0');
		fill_counters(&f, &r->stats);
		fill_check(&f);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, f.values, f.nulls);
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

/*
 * llm_usage() -> setof (role_oid oid, database_oid oid, the usage counters
 * of LlmRoleUsage (requests, prompt_tokens, cached_tokens,
 * completion_tokens, busy_ms), tokens_last_minute bigint,
 * interactive_requests bigint, batch_requests bigint): one row per (role,
 * database) the worker took requests for since start or llm_stat_reset()
 * (the llm_usage view names them).
 */
Datum
pg_llm_usage(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmRoleUsage *copy = palloc(sizeof(LlmRoleUsage) * LLM_USAGE_ENTRIES);
	int64		now_sec = (int64) time(NULL);
	ColumnFill	f;

	require_registry();
	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	memcpy(copy, llm_shared->stats.usage, sizeof(LlmRoleUsage) * LLM_USAGE_ENTRIES);
	LWLockRelease(llm_shared->lock);
	fill_begin(&f, rsinfo->setDesc);
	for (int i = 0; i < LLM_USAGE_ENTRIES; i++)
	{
		LlmRoleUsage *u = &copy[i];
		bool		node_counted = false;

		/* the counters LLM Batch nodes noted, of roles that may have sent no request */
#define NODE_COUNTED(type, name, kind, m, u_, p) node_counted |= u->name != 0;
		LLM_COUNTERS_NODE(NODE_COUNTED)
#undef NODE_COUNTED
		if (u->role == InvalidOid ||
			(u->requests == 0 && window_tokens(u, now_sec) == 0 && !node_counted))
			continue;
		fill_next(&f);
		fill_put(&f, "role_oid", OIDOID, ObjectIdGetDatum(u->role), false);
		fill_put(&f, "database_oid", OIDOID, ObjectIdGetDatum(u->database), false);
		fill_usage(&f, u);
		fill_put(&f, "tokens_last_minute", INT8OID, Int64GetDatum(window_tokens(u, now_sec)), false);
		fill_put(&f, "interactive_requests", INT8OID,
				 Int64GetDatum(u->class_requests[LLM_PRIORITY_INTERACTIVE]), false);
		fill_put(&f, "batch_requests", INT8OID, Int64GetDatum(u->class_requests[LLM_PRIORITY_BATCH]), false);
		fill_check(&f);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, f.values, f.nulls);
	}
	pfree(copy);
	return (Datum) 0;
}
