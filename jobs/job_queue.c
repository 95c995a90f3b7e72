/*
 * job_queue.c — the statements on the job tables (job_queue.h).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "job_queue.h"
#include "common/job_registry.h"

static Oid	schema_oid = InvalidOid;
static char *schema_name = NULL;

/* pg_extension.extnamespace of llm (get_extension_schema is not exported before PostgreSQL 16). */
static Oid
extension_schema(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("llm"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"llm\" is not installed in this database")));
	return nsp;
}

static void forget_statements(void);

/*
 * Looked up at every use: the extension may have been dropped and created
 * again in another schema, or its schema renamed, since this process last
 * ran a statement, and the statements kept below name the schema.
 */
Oid
llm_job_schema(void)
{
	Oid			nsp = extension_schema();
	const char *name = quote_identifier(get_namespace_name(nsp));

	if (nsp != schema_oid || schema_name == NULL || strcmp(name, schema_name) != 0)
	{
		forget_statements();
		if (schema_name != NULL)
			pfree(schema_name);
		schema_name = MemoryContextStrdup(TopMemoryContext, name);
		schema_oid = nsp;
	}
	return schema_oid;
}

/* Owner of the job tables: the role that created the extension. */
static Oid
tables_owner(void)
{
	Oid			relid = get_relname_relid("llm_job_queue", llm_job_schema());
	HeapTuple	tup;
	Oid			owner;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the llm job tables are missing"),
				 errhint("Update the extension: ALTER EXTENSION llm UPDATE.")));
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

void
llm_job_internal_enter(LlmInternalContext *c)
{
	Oid			owner = tables_owner();

	GetUserIdAndSecContext(&c->save_user, &c->save_sec);
	c->guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(owner, c->save_sec | SECURITY_LOCAL_USERID_CHANGE);
}

void
llm_job_internal_leave(LlmInternalContext *c)
{
	SetUserIdAndSecContext(c->save_user, c->save_sec);
	AtEOXact_GUC(true, c->guc_level);
}

/* ---------- prepared statements, once per process ---------- */

#define MAX_STATEMENTS 32

typedef struct CachedStatement
{
	const char *sql;			/* the template (a static string), the cache key */
	SPIPlanPtr	plan;
} CachedStatement;

static CachedStatement statements[MAX_STATEMENTS];
static int	n_statements = 0;

/* the kept statements name the schema of before: prepare them again */
static void
forget_statements(void)
{
	for (int i = 0; i < n_statements; i++)
		SPI_freeplan(statements[i].plan);
	n_statements = 0;
}

/* sql with every "@" replaced by the quoted schema name */
static char *
with_schema(const char *sql)
{
	StringInfoData buf;

	(void) llm_job_schema();
	initStringInfo(&buf);
	for (const char *p = sql; *p; p++)
	{
		if (*p == '@')
			appendStringInfoString(&buf, schema_name);
		else
			appendStringInfoChar(&buf, *p);
	}
	return buf.data;
}

int
llm_job_internal_exec(const char *sql, int nargs, const Oid *types,
					  const Datum *values, const char *nulls, long tcount)
{
	LlmInternalContext c;
	SPIPlanPtr	plan = NULL;
	int			rc;

	llm_job_internal_enter(&c);
	for (int i = 0; i < n_statements; i++)
		if (statements[i].sql == sql)
			plan = statements[i].plan;
	if (plan == NULL)
	{
		char	   *text = with_schema(sql);

		plan = SPI_prepare(text, nargs, (Oid *) types);
		if (plan == NULL)
			elog(ERROR, "llm: SPI_prepare failed (%s) for: %s", SPI_result_code_string(SPI_result), text);
		if (n_statements < MAX_STATEMENTS)
		{
			SPI_keepplan(plan);
			statements[n_statements].sql = sql;
			statements[n_statements].plan = plan;
			n_statements++;
		}
		pfree(text);
	}
	rc = SPI_execute_plan(plan, (Datum *) values, nulls, false, tcount);
	llm_job_internal_leave(&c);
	if (rc < 0)
		elog(ERROR, "llm: job statement failed: %s", SPI_result_code_string(rc));
	return rc;
}

/* ---------- the queue ---------- */

/*
 * The rows to claim are picked once, in a materialized CTE: as a subquery
 * in FROM the planner may rescan it (the inner side of a nested loop), and
 * each rescan skips the rows this statement already updated and takes the
 * next ones past LIMIT, so more than $3 rows would be claimed.
 */
static const char claim_sql[] =
"WITH c AS MATERIALIZED ("
"  SELECT job_id, key FROM @.llm_job_queue "
"  WHERE job_id = $1 AND (claimed_by IS NULL OR lease_until < pg_catalog.now()) "
"  ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED) "
"UPDATE @.llm_job_queue q "
"SET claimed_by = $2, lease_until = pg_catalog.now() + pg_catalog.make_interval(secs => $4), "
"    attempts = q.attempts + 1 "
"FROM c "
"WHERE q.job_id = c.job_id AND q.key = c.key "
"RETURNING q.key, q.attempts";

int
llm_queue_claim(int64 job, int64 token, int n, LlmClaim *out, MemoryContext cxt)
{
	Oid			types[4] = {INT8OID, INT8OID, INT4OID, FLOAT8OID};
	Datum		values[4];
	int			got;

	values[0] = Int64GetDatum(job);
	values[1] = Int64GetDatum(token);
	values[2] = Int32GetDatum(n);
	values[3] = Float8GetDatum((double) llm_job_lease_s);
	llm_job_internal_exec(claim_sql, 4, types, values, NULL, 0);
	got = (int) SPI_processed;
	/* out holds n: never write past it, whatever the statement returned */
	if (SPI_processed > (uint64) n)
		elog(ERROR, "llm: claimed " UINT64_FORMAT " rows of job " INT64_FORMAT ", asked for %d",
			 SPI_processed, job, n);
	for (int i = 0; i < got; i++)
	{
		bool		isnull;
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;

		MemoryContext old;

		out[i].key = SPI_getbinval(tup, desc, 1, &isnull);
		old = MemoryContextSwitchTo(cxt);
		out[i].key = PointerGetDatum(DatumGetArrayTypePCopy(out[i].key));
		MemoryContextSwitchTo(old);
		out[i].attempts = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
	}
	return got;
}

static const char lock_sql[] =
"SELECT attempts FROM @.llm_job_queue WHERE job_id = $1 AND key = $2 AND claimed_by = $3 FOR UPDATE";

int
llm_queue_lock(int64 job, Datum key, int64 token)
{
	Oid			types[3] = {INT8OID, TEXTARRAYOID, INT8OID};
	Datum		values[3];
	bool		isnull;

	values[0] = Int64GetDatum(job);
	values[1] = key;
	values[2] = Int64GetDatum(token);
	llm_job_internal_exec(lock_sql, 3, types, values, NULL, 1);
	if (SPI_processed == 0)
		return -1;
	return DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Keys travel as one text[] of their array literals (unnest of a text[][]
 * would flatten them), each parsed back by a cast in the statement.
 */
static Datum
key_literals(const Datum *keys, int n)
{
	Datum	   *literals = palloc(sizeof(Datum) * Max(n, 1));
	Oid			out;
	bool		varlena;

	getTypeOutputInfo(TEXTARRAYOID, &out, &varlena);
	for (int i = 0; i < n; i++)
		literals[i] = CStringGetTextDatum(OidOutputFunctionCall(out, keys[i]));
	return PointerGetDatum(construct_array(literals, n, TEXTOID, -1, false, TYPALIGN_INT));
}

static const char lock_rows_sql[] =
"SELECT k.i FROM pg_catalog.unnest($2::pg_catalog.text[]) WITH ORDINALITY AS k(lit, i) "
"JOIN @.llm_job_queue q ON q.job_id = $1 AND q.key = k.lit::pg_catalog.text[] "
"WHERE q.claimed_by = $3 FOR UPDATE OF q";

static const char try_lock_rows_sql[] =
"SELECT k.i FROM pg_catalog.unnest($2::pg_catalog.text[]) WITH ORDINALITY AS k(lit, i) "
"JOIN @.llm_job_queue q ON q.job_id = $1 AND q.key = k.lit::pg_catalog.text[] "
"WHERE q.claimed_by = $3 FOR UPDATE OF q SKIP LOCKED";

static int
lock_rows(const char *sql, int64 job, const Datum *keys, int n, int64 token, bool *claimed)
{
	Oid			types[3] = {INT8OID, TEXTARRAYOID, INT8OID};
	Datum		values[3];

	memset(claimed, 0, sizeof(bool) * n);
	values[0] = Int64GetDatum(job);
	values[1] = key_literals(keys, n);
	values[2] = Int64GetDatum(token);
	llm_job_internal_exec(sql, 3, types, values, NULL, 0);
	for (uint64 t = 0; t < SPI_processed; t++)
	{
		bool		isnull;
		int64		i = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[t], SPI_tuptable->tupdesc, 1, &isnull));

		if (isnull || i < 1 || i > n)
			elog(ERROR, "llm: queue lock returned key " INT64_FORMAT " of %d", i, n);
		claimed[i - 1] = true;
	}
	return (int) SPI_processed;
}

int
llm_queue_lock_rows(int64 job, const Datum *keys, int n, int64 token, bool *claimed)
{
	return lock_rows(lock_rows_sql, job, keys, n, token, claimed);
}

int
llm_queue_try_lock_rows(int64 job, const Datum *keys, int n, int64 token, bool *claimed)
{
	return lock_rows(try_lock_rows_sql, job, keys, n, token, claimed);
}

static const char delete_rows_sql[] =
"DELETE FROM @.llm_job_queue WHERE job_id = $1 AND key = ANY ("
"  SELECT k::pg_catalog.text[] FROM pg_catalog.unnest($2::pg_catalog.text[]) k)";

/* Runs sql with $1 = job and $2 = the keys' literals; nothing for no keys. */
static void
exec_job_keys(const char *sql, int64 job, const Datum *keys, int n)
{
	Oid			types[2] = {INT8OID, TEXTARRAYOID};
	Datum		values[2];

	if (n == 0)
		return;
	values[0] = Int64GetDatum(job);
	values[1] = key_literals(keys, n);
	llm_job_internal_exec(sql, 2, types, values, NULL, 0);
}

void
llm_queue_delete_rows(int64 job, const Datum *keys, int n)
{
	exec_job_keys(delete_rows_sql, job, keys, n);
}

static const char delete_sql[] =
"DELETE FROM @.llm_job_queue WHERE job_id = $1 AND key = $2";

void
llm_queue_delete(int64 job, Datum key)
{
	Oid			types[2] = {INT8OID, TEXTARRAYOID};
	Datum		values[2];

	values[0] = Int64GetDatum(job);
	values[1] = key;
	llm_job_internal_exec(delete_sql, 2, types, values, NULL, 0);
}

static const char release_sql[] =
"UPDATE @.llm_job_queue SET claimed_by = NULL, lease_until = NULL, "
"  attempts = GREATEST(attempts - $4, 0), last_error = COALESCE($5, last_error) "
"WHERE job_id = $1 AND key = $2 AND claimed_by = $3";

void
llm_queue_release(int64 job, Datum key, int64 token, bool refund, const char *error)
{
	Oid			types[5] = {INT8OID, TEXTARRAYOID, INT8OID, INT4OID, TEXTOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = Int64GetDatum(job);
	values[1] = key;
	values[2] = Int64GetDatum(token);
	values[3] = Int32GetDatum(refund ? 1 : 0);
	if (error)
		values[4] = CStringGetTextDatum(error);
	else
		nulls[4] = 'n';
	llm_job_internal_exec(release_sql, 5, types, values, nulls, 0);
}

static const char release_job_sql[] =
"UPDATE @.llm_job_queue SET claimed_by = NULL, lease_until = NULL, "
"  attempts = GREATEST(attempts - $3, 0) "
"WHERE job_id = $1 AND claimed_by = $2";

void
llm_queue_release_job(int64 job, int64 token, bool refund)
{
	Oid			types[3] = {INT8OID, INT8OID, INT4OID};
	Datum		values[3];

	values[0] = Int64GetDatum(job);
	values[1] = Int64GetDatum(token);
	values[2] = Int32GetDatum(refund ? 1 : 0);
	llm_job_internal_exec(release_job_sql, 3, types, values, NULL, 0);
}

static const char release_others_sql[] =
"UPDATE @.llm_job_queue SET claimed_by = NULL, lease_until = NULL "
"WHERE claimed_by IS NOT NULL AND claimed_by <> $1";

int64
llm_queue_release_others(int64 token)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(token);
	llm_job_internal_exec(release_others_sql, 1, types, values, NULL, 0);
	return (int64) SPI_processed;
}

static const char fail_sql[] =
"WITH d AS (DELETE FROM @.llm_job_queue WHERE job_id = $1 AND key = $2 RETURNING job_id, key) "
"INSERT INTO @.llm_job_error (job_id, key, attempts, sqlstate, error, failed_at) "
"SELECT job_id, key, $3, $4, $5, pg_catalog.now() FROM d "
"ON CONFLICT (job_id, key) DO UPDATE SET attempts = excluded.attempts, sqlstate = excluded.sqlstate, "
"  error = excluded.error, failed_at = excluded.failed_at";

void
llm_queue_fail(int64 job, Datum key, int attempts, const char *sqlstate, const char *error)
{
	Oid			types[5] = {INT8OID, TEXTARRAYOID, INT4OID, TEXTOID, TEXTOID};
	Datum		values[5];

	values[0] = Int64GetDatum(job);
	values[1] = key;
	values[2] = Int32GetDatum(attempts);
	values[3] = CStringGetTextDatum(sqlstate);
	values[4] = CStringGetTextDatum(error);
	llm_job_internal_exec(fail_sql, 5, types, values, NULL, 0);
}

static const char insert_literals_sql[] =
"INSERT INTO @.llm_job_queue (job_id, key) "
"SELECT $1, k::pg_catalog.text[] FROM pg_catalog.unnest($2::pg_catalog.text[]) k "
"ON CONFLICT (job_id, key) DO UPDATE SET attempts = 0, last_error = NULL";

void
llm_queue_insert(int64 job, Datum *keys, int n)
{
	exec_job_keys(insert_literals_sql, job, keys, n);
}

static const char count_sql[] =
"SELECT pg_catalog.count(*) FROM @.llm_job_queue WHERE job_id = $1";

/* Run sql, whose one parameter is the job id and whose one row is a count. */
static int64
job_count(const char *sql, int64 job)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];
	bool		isnull;

	values[0] = Int64GetDatum(job);
	llm_job_internal_exec(sql, 1, types, values, NULL, 0);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

int64
llm_queue_count(int64 job)
{
	return job_count(count_sql, job);
}

/* ---------- llm_job ---------- */

#define JOB_COLUMNS "id, owner::pg_catalog.oid, target::pg_catalog.oid, output_column::pg_catalog.text, " \
	"prompt, where_clause, options, mode, max_attempts, search_path, state::pg_catalog.text"

/* The job of SPI_tuptable's row i, in cxt. */
static LlmJob *
job_from_row(int i, MemoryContext cxt)
{
	HeapTuple	tup = SPI_tuptable->vals[i];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	MemoryContext old = MemoryContextSwitchTo(cxt);
	LlmJob	   *job = palloc0(sizeof(LlmJob));
	bool		isnull;
	char	   *mode;

	job->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	job->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
	job->target = DatumGetObjectId(SPI_getbinval(tup, desc, 3, &isnull));
	job->output_column = SPI_getvalue(tup, desc, 4);
	job->prompt = SPI_getvalue(tup, desc, 5);
	job->where_clause = SPI_getvalue(tup, desc, 6);
	job->options = DatumGetJsonbPCopy(SPI_getbinval(tup, desc, 7, &isnull));
	mode = SPI_getvalue(tup, desc, 8);
	job->continuous = strcmp(mode, "continuous") == 0;
	job->max_attempts = DatumGetInt32(SPI_getbinval(tup, desc, 9, &isnull));
	job->search_path = SPI_getvalue(tup, desc, 10);
	job->state = llm_job_state_from_name(SPI_getvalue(tup, desc, 11));
	MemoryContextSwitchTo(old);
	return job;
}

static const char fetch_sql[] = "SELECT " JOB_COLUMNS " FROM @.llm_job WHERE id = $1";
static const char fetch_locked_sql[] = "SELECT " JOB_COLUMNS " FROM @.llm_job WHERE id = $1 FOR UPDATE";

LlmJob *
llm_job_fetch(int64 id, bool for_update, MemoryContext cxt)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(id);
	llm_job_internal_exec(for_update ? fetch_locked_sql : fetch_sql, 1, types, values, NULL, 1);
	if (SPI_processed == 0)
		return NULL;
	return job_from_row(0, cxt);
}

static const char active_sql[] =
"SELECT " JOB_COLUMNS " FROM @.llm_job WHERE state IN ('queued', 'running', 'paused') ORDER BY id";

LlmJob **
llm_job_fetch_active(MemoryContext cxt, int *n)
{
	LlmJob	  **jobs;

	llm_job_internal_exec(active_sql, 0, NULL, NULL, NULL, 0);
	*n = (int) SPI_processed;
	jobs = MemoryContextAlloc(cxt, sizeof(LlmJob *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		jobs[i] = job_from_row(i, cxt);
	return jobs;
}

static const char insert_job_sql[] =
"INSERT INTO @.llm_job (owner, target, output_column, prompt, where_clause, options, mode, max_attempts, "
"  search_path, notify) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id";

int64
llm_job_insert(const LlmJob *job)
{
	Oid			types[10] = {REGROLEOID, REGCLASSOID, NAMEOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, INT4OID,
	TEXTOID, TEXTOID};
	Datum		values[10];
	char		nulls[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;

	values[0] = ObjectIdGetDatum(job->owner);
	values[1] = ObjectIdGetDatum(job->target);
	values[2] = DirectFunctionCall1(namein, CStringGetDatum(job->output_column));
	values[3] = CStringGetTextDatum(job->prompt);
	if (job->where_clause)
		values[4] = CStringGetTextDatum(job->where_clause);
	else
		nulls[4] = 'n';
	values[5] = JsonbPGetDatum(job->options);
	values[6] = CStringGetTextDatum(job->continuous ? "continuous" : "once");
	values[7] = Int32GetDatum(job->max_attempts);
	values[8] = CStringGetTextDatum(job->search_path);
	if (job->notify)
		values[9] = CStringGetTextDatum(job->notify);
	else
		nulls[9] = 'n';
	llm_job_internal_exec(insert_job_sql, 10, types, values, nulls, 0);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

static const char find_active_sql[] =
"SELECT id, state::pg_catalog.text FROM @.llm_job "
"WHERE target = $1 AND output_column = $2 AND id <> $3 AND state NOT IN ('done', 'cancelled') ORDER BY id LIMIT 1";

int64
llm_job_find_active(Oid target, const char *column, int64 except, LlmJobState *state)
{
	Oid			types[3] = {REGCLASSOID, NAMEOID, INT8OID};
	Datum		values[3];
	bool		isnull;

	values[0] = ObjectIdGetDatum(target);
	values[1] = DirectFunctionCall1(namein, CStringGetDatum(column));
	values[2] = Int64GetDatum(except);
	llm_job_internal_exec(find_active_sql, 3, types, values, NULL, 1);
	if (SPI_processed == 0)
		return 0;
	*state = llm_job_state_from_name(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

int64
llm_job_find_in_tree(Oid target, const char *column, int64 except, LlmJobState *state, Oid *on)
{
	List	   *tree;
	ListCell   *lc;
	int64		found = 0;

	/* a plain inheritance child is not in the job's rows (the job reads ONLY its table) */
	tree = get_rel_relkind(target) == RELKIND_PARTITIONED_TABLE ?
		find_all_inheritors(target, AccessShareLock, NULL) : list_make1_oid(target);
	if (get_rel_relispartition(target))
		tree = list_concat(tree, get_partition_ancestors(target));
	foreach(lc, tree)
	{
		Oid			rel = lfirst_oid(lc);
		LlmJobState rel_state;
		int64		other = llm_job_find_active(rel, column, except, &rel_state);

		if (other != 0 && (found == 0 || other < found))
		{
			found = other;
			*state = rel_state;
			*on = rel;
		}
	}
	return found;
}

static const char set_state_sql[] =
"UPDATE @.llm_job SET state = $3::pg_catalog.text::@.llm_job_state, "
"  last_error = CASE WHEN $5 THEN NULL ELSE COALESCE($4, last_error) END, "
"  started_at = CASE WHEN $3 = 'running' THEN COALESCE(started_at, pg_catalog.now()) "
"                    ELSE started_at END, "
"  finished_at = CASE WHEN $3 IN ('done', 'failed', 'cancelled') THEN pg_catalog.now() END "
"WHERE id = $1 AND state = $2::pg_catalog.text::@.llm_job_state RETURNING notify";

bool
llm_job_set_state(int64 id, LlmJobState from, LlmJobState to, const char *error, bool clear_error)
{
	Oid			types[5] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, BOOLOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(llm_job_state_name(from));
	values[2] = CStringGetTextDatum(llm_job_state_name(to));
	if (error)
		values[3] = CStringGetTextDatum(error);
	else
		nulls[3] = 'n';
	values[4] = BoolGetDatum(clear_error);
	llm_job_internal_exec(set_state_sql, 5, types, values, nulls, 0);
	if (SPI_processed == 0)
		return false;
	/* the job ended: its channel hears of it when this transaction commits */
	if (to == LLM_JOB_DONE || to == LLM_JOB_FAILED || to == LLM_JOB_CANCELLED)
	{
		char	   *channel = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (channel != NULL)
			Async_Notify(channel, psprintf("job " INT64_FORMAT " %s", id, llm_job_state_name(to)));
	}
	return true;
}

/* skipped_by_reason gains $9 (an object of counts by reason), added key by key */
static const char add_counts_sql[] =
"UPDATE @.llm_job SET rows_done = rows_done + $2, rows_failed = rows_failed + $3, "
"  rows_skipped = rows_skipped + $4, rows_requeued = rows_requeued + $5, tokens_in = tokens_in + $6, "
"  tokens_out = tokens_out + $7, rows_per_s = CASE WHEN $8 >= 0 THEN $8 ELSE rows_per_s END, "
"  skipped_by_reason = CASE WHEN $4 = 0 THEN skipped_by_reason ELSE "
"    (SELECT pg_catalog.jsonb_object_agg(k, n) FROM "
"      (SELECT k, pg_catalog.sum(v::pg_catalog.int8) AS n FROM "
"        (SELECT key, value FROM pg_catalog.jsonb_each_text(skipped_by_reason) "
"         UNION ALL SELECT key, value FROM pg_catalog.jsonb_each_text($9::pg_catalog.jsonb)) s(k, v) "
"       GROUP BY k) t) END, "
"  model_sha256 = coalesce($10, model_sha256), "
"  last_progress_at = pg_catalog.now() WHERE id = $1";

void
llm_job_add_counts(int64 id, const LlmJobCounts *c, double rows_per_s)
{
	Oid			types[10] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, FLOAT8OID, TEXTOID,
	TEXTOID};
	Datum		values[10];
	char		nulls[10] = "          ";
	StringInfoData by;

	initStringInfo(&by);
	for (int r = 0; r < LLM_SKIP_N; r++)
		if (c->skipped_by[r] != 0)
			appendStringInfo(&by, "%s\"%s\": " INT64_FORMAT, by.len ? ", " : "{",
							 llm_skip_reason_name((LlmSkipReason) r), c->skipped_by[r]);
	appendStringInfoString(&by, by.len ? "}" : "{}");
	values[0] = Int64GetDatum(id);
	values[1] = Int64GetDatum(c->done);
	values[2] = Int64GetDatum(c->failed);
	values[3] = Int64GetDatum(c->skipped);
	values[4] = Int64GetDatum(c->requeued);
	values[5] = Int64GetDatum(c->tokens_in);
	values[6] = Int64GetDatum(c->tokens_out);
	values[7] = Float8GetDatum(rows_per_s);
	values[8] = CStringGetTextDatum(by.data);
	values[9] = CStringGetTextDatum(c->model_sha256);
	if (c->model_sha256[0] == '\0')
		nulls[9] = 'n';
	llm_job_internal_exec(add_counts_sql, 10, types, values, nulls, 0);
	pfree(by.data);
}

static const char throttled_sql[] =
"UPDATE @.llm_job SET throttled_until = $2, throttled_reason = $3 WHERE id = $1";

void
llm_job_set_throttled(int64 id, TimestampTz until, const char *reason)
{
	Oid			types[3] = {INT8OID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	values[0] = Int64GetDatum(id);
	values[1] = TimestampTzGetDatum(until);
	if (until == 0)
		nulls[1] = 'n';
	if (reason != NULL)
		values[2] = CStringGetTextDatum(reason);
	else
		nulls[2] = 'n';
	llm_job_internal_exec(throttled_sql, 3, types, values, nulls, 0);
}

static const char clear_sql[] = "DELETE FROM @.llm_job_queue WHERE job_id = $1";

void
llm_queue_clear(int64 job)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(job);
	llm_job_internal_exec(clear_sql, 1, types, values, NULL, 0);
}

static const char retry_sql[] =
"WITH e AS (DELETE FROM @.llm_job_error WHERE job_id = $1 RETURNING key), "
"     q AS (INSERT INTO @.llm_job_queue (job_id, key) SELECT $1, key FROM e "
"           ON CONFLICT (job_id, key) DO UPDATE SET attempts = 0, last_error = NULL RETURNING 1), "
"     j AS (UPDATE @.llm_job SET rows_failed = GREATEST(rows_failed - (SELECT pg_catalog.count(*) FROM e), 0) "
"           WHERE id = $1) "
"SELECT pg_catalog.count(*) FROM q";

int64
llm_queue_retry_failed(int64 job)
{
	return job_count(retry_sql, job);
}
