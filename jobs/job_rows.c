/*
 * job_rows.c — a job's definition resolved against the catalog, its
 * statements on the target table, and the context they run in
 * (job_rows.h).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/sysattr.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "job_rows.h"

static const char *const state_names[] = {
	"queued", "running", "paused", "done", "failed", "cancelled"
};

const char *
llm_job_state_name(LlmJobState s)
{
	return (s >= 0 && s < lengthof(state_names)) ? state_names[s] : "unknown";
}

LlmJobState
llm_job_state_from_name(const char *name)
{
	for (int i = 0; i < lengthof(state_names); i++)
		if (strcmp(state_names[i], name) == 0)
			return (LlmJobState) i;
	elog(ERROR, "llm: unknown job state \"%s\"", name);
	return LLM_JOB_FAILED;
}

static const char *const skip_reason_names[] = {
	"deleted", "filled", "where_false", "prompt_null"
};

StaticAssertDecl(lengthof(skip_reason_names) == LLM_SKIP_N, "a name for every skip reason");

const char *
llm_skip_reason_name(LlmSkipReason r)
{
	return (r >= 0 && r < LLM_SKIP_N) ? skip_reason_names[r] : "unknown";
}

LlmSkipReason
llm_job_row_skip_reason(const LlmJobRow *row)
{
	if (!row->found)
		return LLM_SKIP_DELETED;
	if (!row->output_null)
		return LLM_SKIP_FILLED;
	if (!row->matches)
		return LLM_SKIP_WHERE;
	if (row->prompt == NULL)
		return LLM_SKIP_PROMPT_NULL;
	return LLM_SKIP_NONE;
}

/* ---------- expressions ---------- */

/*
 * A syntax error's position is in the statement parsed here, not in the
 * caller's query: report it as an internal query, as SPI does for the
 * statements it runs, so the cursor points into the expression.
 */
static void
expression_error_callback(void *arg)
{
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery((const char *) arg);
	}
}

void
llm_job_check_expression(const char *expr, const char *what)
{
	char	   *sql = psprintf("SELECT (%s\n)", expr);
	List	   *stmts;
	SelectStmt *sel;
	bool		one;
	ErrorContextCallback errcb;

	errcb.callback = expression_error_callback;
	errcb.arg = sql;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	stmts = raw_parser(sql, RAW_PARSE_DEFAULT);
	error_context_stack = errcb.previous;
	one = list_length(stmts) == 1 && IsA(linitial_node(RawStmt, stmts)->stmt, SelectStmt);
	if (one)
	{
		sel = (SelectStmt *) linitial_node(RawStmt, stmts)->stmt;
		one = sel->op == SETOP_NONE && list_length(sel->targetList) == 1 &&
			sel->distinctClause == NIL && sel->intoClause == NULL && sel->fromClause == NIL &&
			sel->whereClause == NULL && sel->groupClause == NIL && sel->havingClause == NULL &&
			sel->windowClause == NIL && sel->valuesLists == NIL && sel->sortClause == NIL &&
			sel->limitOffset == NULL && sel->limitCount == NULL && sel->lockingClause == NIL &&
			sel->withClause == NULL;
	}
	if (!one)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("%s must be a single SQL expression", what),
				 errdetail("It is evaluated as (%s) over each row of the table.", what)));
	pfree(sql);
}

/* ---------- resolving ---------- */

/*
 * An embedding column: real[] or float8[], or pgvector's vector (a base
 * type named vector whose input function is vector_in), or a domain over
 * one of them.
 */
static int
output_kind(Oid type)
{
	Oid			base = getBaseType(type);
	HeapTuple	tup;
	int			kind = LLM_JOB_OUT_TEXT;

	if (base == FLOAT4ARRAYOID || base == FLOAT8ARRAYOID)
		return LLM_JOB_OUT_ARRAY;
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(base));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_type t = (Form_pg_type) GETSTRUCT(tup);
		char	   *input = get_func_name(t->typinput);

		if (strcmp(NameStr(t->typname), "vector") == 0 && t->typtype == TYPTYPE_BASE &&
			input != NULL && strcmp(input, "vector_in") == 0)
			kind = LLM_JOB_OUT_VECTOR;
		ReleaseSysCache(tup);
	}
	return kind;
}

static char *
problem(bool raise, int sqlstate, const char *msg)
{
	if (raise)
		ereport(ERROR, (errcode(sqlstate), errmsg("%s", msg)));
	return (char *) msg;
}

char *
llm_job_resolve(LlmJob *job, bool raise)
{
	Relation	rel;
	HeapTuple	idx;
	Form_pg_index index;
	Oid			pk;
	char	   *msg = NULL;

	job->resolved = false;
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(job->owner)))
		return problem(raise, ERRCODE_UNDEFINED_OBJECT,
					   psprintf("the role that created job " INT64_FORMAT " (OID %u) no longer exists",
								job->id, job->owner));
	rel = try_relation_open(job->target, AccessShareLock);
	if (rel == NULL)
		return problem(raise, ERRCODE_UNDEFINED_TABLE,
					   psprintf("the table of job " INT64_FORMAT " (OID %u) no longer exists",
								job->id, job->target));
	if (rel->rd_rel->relkind != RELKIND_RELATION && rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
	{
		msg = psprintf("\"%s\" is not a table", RelationGetRelationName(rel));
		relation_close(rel, AccessShareLock);
		return problem(raise, ERRCODE_WRONG_OBJECT_TYPE, msg);
	}
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
	{
		/* the runner is another session: it could never read the rows */
		msg = psprintf("table \"%s\" is a temporary table", RelationGetRelationName(rel));
		relation_close(rel, AccessShareLock);
		if (raise)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s", msg),
					 errdetail("A job runs in a background worker, which cannot read another session's temporary tables."),
					 errhint("Use an ordinary or unlogged table.")));
		return msg;
	}
	job->partitioned = rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE;
	job->target_sql = psprintf("%s%s", job->partitioned ? "" : "ONLY ",
							   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
														  RelationGetRelationName(rel)));
	job->out_attnum = get_attnum(job->target, job->output_column);
	if (job->out_attnum == InvalidAttrNumber)
		msg = psprintf("column \"%s\" of table \"%s\" does not exist",
					   job->output_column, RelationGetRelationName(rel));
	else if (job->out_attnum < 0)
		msg = psprintf("column \"%s\" is a system column", job->output_column);
	if (msg != NULL)
	{
		relation_close(rel, AccessShareLock);
		return problem(raise, ERRCODE_UNDEFINED_COLUMN, msg);
	}
	get_atttypetypmodcoll(job->target, job->out_attnum, &job->out_type, &job->out_typmod,
						  &(Oid) {InvalidOid});
	job->out_kind = output_kind(job->out_type);

	pk = RelationGetPrimaryKeyIndex(rel);
	if (!OidIsValid(pk))
	{
		msg = psprintf("table \"%s\" has no primary key", RelationGetRelationName(rel));
		relation_close(rel, AccessShareLock);
		if (raise)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s", msg),
					 errdetail("A job names each row by its primary key."),
					 errhint("Add one: ALTER TABLE ... ADD PRIMARY KEY (...).")));
		return msg;
	}
	idx = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pk));
	if (!HeapTupleIsValid(idx))
		elog(ERROR, "cache lookup failed for index %u", pk);
	index = (Form_pg_index) GETSTRUCT(idx);
	job->n_keys = index->indnkeyatts;
	if (job->n_keys > LLM_JOB_MAX_KEYS)
		elog(ERROR, "llm: primary key of more than %d columns", LLM_JOB_MAX_KEYS);
	for (int i = 0; i < job->n_keys; i++)
	{
		job->key_attnums[i] = index->indkey.values[i];
		job->key_types[i] = TupleDescAttr(RelationGetDescr(rel), job->key_attnums[i] - 1)->atttypid;
		if (job->key_attnums[i] == job->out_attnum)
			msg = psprintf("column \"%s\" is part of the primary key", job->output_column);
	}
	ReleaseSysCache(idx);
	relation_close(rel, AccessShareLock);
	if (msg != NULL)
		return problem(raise, ERRCODE_INVALID_PARAMETER_VALUE, msg);
	job->resolved = true;
	return NULL;
}

/* ---------- statements ---------- */

static const char *
key_column(const LlmJob *job, int i)
{
	return quote_identifier(get_attname(job->target, job->key_attnums[i], false));
}

/* " WHERE k1 = $1 AND k2 = $2 ..." */
static void
append_key_quals(StringInfo buf, const LlmJob *job)
{
	for (int i = 0; i < job->n_keys; i++)
		appendStringInfo(buf, "%s%s OPERATOR(pg_catalog.=) $%d", i == 0 ? " WHERE " : " AND ",
						 key_column(job, i), i + 1);
}

static char *
row_sql(const LlmJob *job, const char *tail)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT (%s\n)::pg_catalog.text, %s IS NULL, COALESCE((%s\n), false) FROM %s",
					 job->prompt, quote_identifier(job->output_column),
					 job->where_clause ? job->where_clause : "true", job->target_sql);
	append_key_quals(&buf, job);
	appendStringInfoString(&buf, tail);
	return buf.data;
}

char *
llm_job_fill_sql(const LlmJob *job)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT ");
	for (int i = 0; i < job->n_keys; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "", key_column(job, i));
	appendStringInfo(&buf, " FROM %s WHERE %s IS NULL AND COALESCE((%s\n), false)",
					 job->target_sql, quote_identifier(job->output_column),
					 job->where_clause ? job->where_clause : "true");
	return buf.data;
}

static SPIPlanPtr
prepare(const char *sql, int nargs, Oid *types, bool keep)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "llm: SPI_prepare failed (%s) for: %s", SPI_result_code_string(SPI_result), sql);
	if (keep)
		SPI_keepplan(plan);
	return plan;
}

void
llm_job_prepare(LlmJob *job, bool keep)
{
	StringInfoData buf;
	Oid			types[LLM_JOB_MAX_KEYS + 1];

	Assert(job->resolved);
	memcpy(types, job->key_types, sizeof(Oid) * job->n_keys);
	job->read_plan = prepare(row_sql(job, ""), job->n_keys, types, keep);
	job->lock_plan = prepare(row_sql(job, " FOR UPDATE SKIP LOCKED"), job->n_keys, types, keep);

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT 1 FROM %s", job->target_sql);
	append_key_quals(&buf, job);
	job->exists_plan = prepare(buf.data, job->n_keys, types, keep);

	resetStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s SET %s = $%d", job->target_sql,
					 quote_identifier(job->output_column), job->n_keys + 1);
	append_key_quals(&buf, job);
	types[job->n_keys] = job->out_type;
	job->write_plan = prepare(buf.data, job->n_keys + 1, types, keep);
	job->kept = keep;
}

void
llm_job_check_rights(const LlmJob *job)
{
	char	   *sql = psprintf("SELECT (%s\n), (%s\n) FROM %s WHERE false", job->prompt,
							   job->where_clause ? job->where_clause : "true", job->target_sql);
	SPIPlanPtr	plan = SPI_prepare(sql, 0, NULL);
	Portal		portal;

	if (plan == NULL)
		elog(ERROR, "llm: SPI_prepare failed (%s) for: %s", SPI_result_code_string(SPI_result), sql);
	/* opening the cursor starts the executor (its permission checks), fetching nothing */
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
	pfree(sql);
}

/*
 * "ROWS FROM (pg_catalog.unnest($1), ...)[ WITH ORDINALITY] AS _llm_u(_llm_k1, ...[, _llm_v][, _llm_i])"
 * (the many-argument unnest is a shorthand of ROWS FROM only when unqualified)
 */
static void
append_unnest(StringInfo buf, const LlmJob *job, bool value, bool ordinality)
{
	appendStringInfoString(buf, "ROWS FROM (");
	for (int i = 0; i < job->n_keys + (value ? 1 : 0); i++)
		appendStringInfo(buf, "%spg_catalog.unnest($%d)", i ? ", " : "", i + 1);
	appendStringInfo(buf, ")%s AS _llm_u(", ordinality ? " WITH ORDINALITY" : "");
	for (int i = 0; i < job->n_keys; i++)
		appendStringInfo(buf, "%s_llm_k%d", i ? ", " : "", i + 1);
	appendStringInfo(buf, "%s%s)", value ? ", _llm_v" : "", ordinality ? ", _llm_i" : "");
}

/* "k1 OPERATOR(pg_catalog.=) _llm_u._llm_k1 AND ..." */
static void
append_key_join(StringInfo buf, const LlmJob *job)
{
	for (int i = 0; i < job->n_keys; i++)
		appendStringInfo(buf, "%s%s OPERATOR(pg_catalog.=) _llm_u._llm_k%d", i ? " AND " : "",
						 key_column(job, i), i + 1);
}

bool
llm_job_prepare_batch(LlmJob *job)
{
	StringInfoData buf;
	Oid			types[LLM_JOB_MAX_KEYS + 1];
	SPIPlanPtr	lock_rows;
	SPIPlanPtr	exist_rows;

	Assert(job->resolved);
	for (int i = 0; i <= job->n_keys; i++)
	{
		types[i] = get_array_type(i < job->n_keys ? job->key_types[i] : job->out_type);
		if (!OidIsValid(types[i]))
			return false;
	}
	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT _llm_u._llm_i, (%s\n)::pg_catalog.text, %s IS NULL, COALESCE((%s\n), false) "
					 "FROM %s JOIN ", job->prompt, quote_identifier(job->output_column),
					 job->where_clause ? job->where_clause : "true", job->target_sql);
	append_unnest(&buf, job, false, true);
	appendStringInfoString(&buf, " ON ");
	append_key_join(&buf, job);
	appendStringInfo(&buf, " FOR UPDATE OF %s SKIP LOCKED", quote_identifier(get_rel_name(job->target)));
	lock_rows = prepare(buf.data, job->n_keys, types, false);

	resetStringInfo(&buf);
	appendStringInfo(&buf, "SELECT _llm_u._llm_i FROM %s JOIN ", job->target_sql);
	append_unnest(&buf, job, false, true);
	appendStringInfoString(&buf, " ON ");
	append_key_join(&buf, job);
	exist_rows = prepare(buf.data, job->n_keys, types, false);

	resetStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s SET %s = _llm_u._llm_v FROM ", job->target_sql,
					 quote_identifier(job->output_column));
	append_unnest(&buf, job, true, false);
	appendStringInfoString(&buf, " WHERE ");
	append_key_join(&buf, job);
	job->write_rows_plan = prepare(buf.data, job->n_keys + 1, types, true);
	/* kept only once all three parsed: an error above leaves none to free */
	SPI_keepplan(lock_rows);
	SPI_keepplan(exist_rows);
	job->lock_rows_plan = lock_rows;
	job->exist_rows_plan = exist_rows;
	return true;
}

void
llm_job_unprepare(LlmJob *job)
{
	if (job->kept)
	{
		if (job->read_plan)
			SPI_freeplan(job->read_plan);
		if (job->lock_plan)
			SPI_freeplan(job->lock_plan);
		if (job->exists_plan)
			SPI_freeplan(job->exists_plan);
		if (job->write_plan)
			SPI_freeplan(job->write_plan);
	}
	if (job->lock_rows_plan)
		SPI_freeplan(job->lock_rows_plan);
	if (job->exist_rows_plan)
		SPI_freeplan(job->exist_rows_plan);
	if (job->write_rows_plan)
		SPI_freeplan(job->write_rows_plan);
	job->read_plan = job->lock_plan = job->exists_plan = job->write_plan = NULL;
	job->lock_rows_plan = job->exist_rows_plan = job->write_rows_plan = NULL;
	job->kept = false;
}

/* Vars of the target (range table entry 1 of the outermost query) at any depth. */
typedef struct ColumnWalk
{
	int			sublevels_up;
	Bitmapset  *cols;
	int			natts;
} ColumnWalk;

static bool
columns_walker(Node *node, ColumnWalk *w)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if (v->varno == 1 && v->varlevelsup == w->sublevels_up)
		{
			if (v->varattno == 0)
				for (int a = 1; a <= w->natts; a++)
					w->cols = bms_add_member(w->cols, a - FirstLowInvalidHeapAttributeNumber);
			else
				w->cols = bms_add_member(w->cols, v->varattno - FirstLowInvalidHeapAttributeNumber);
		}
		return false;
	}
	if (IsA(node, Query))
	{
		bool		r;

		w->sublevels_up++;
		r = query_tree_walker((Query *) node, columns_walker, w, 0);
		w->sublevels_up--;
		return r;
	}
	return expression_tree_walker(node, columns_walker, w);
}

Bitmapset *
llm_job_read_columns(LlmJob *job, bool *volatile_expr)
{
	CachedPlanSource *src = linitial(SPI_plan_get_plan_sources(job->read_plan));
	Query	   *q = linitial_node(Query, src->query_list);
	TargetEntry *prompt = list_nth(q->targetList, 0);
	TargetEntry *where = list_nth(q->targetList, 2);
	ColumnWalk	w = {0, NULL, 0};

	{
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(job->target));

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for relation %u", job->target);
		w.natts = ((Form_pg_class) GETSTRUCT(tup))->relnatts;
		ReleaseSysCache(tup);
	}
	(void) columns_walker((Node *) prompt->expr, &w);
	(void) columns_walker((Node *) where->expr, &w);
	*volatile_expr = contain_volatile_functions((Node *) prompt->expr) ||
		contain_volatile_functions((Node *) where->expr);
	return w.cols;
}

/* ---------- context ---------- */

void
llm_job_enter(const LlmJob *job, LlmJobContext *c)
{
	GetUserIdAndSecContext(&c->save_user, &c->save_sec);
	c->guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", job->search_path, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(job->owner,
						   c->save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
}

void
llm_job_leave(LlmJobContext *c)
{
	SetUserIdAndSecContext(c->save_user, c->save_sec);
	AtEOXact_GUC(true, c->guc_level);
}

/* ---------- rows ---------- */

/* A one-dimensional array of n values of type (for the batch statements). */
static ArrayType *
typed_array(Datum *values, int n, Oid type)
{
	int16		len;
	bool		byval;
	char		align;

	get_typlenbyvalalign(type, &len, &byval, &align);
	return construct_array(values, n, type, len, byval, align);
}

/* The key's values as parameters of the statements above. */
static void
key_params(const LlmJob *job, Datum key, Datum *values)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	deconstruct_array(DatumGetArrayTypeP(key), TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != job->n_keys)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("queued key of job " INT64_FORMAT " has %d values, the primary key %d columns",
						job->id, n, job->n_keys)));
	for (int i = 0; i < n; i++)
	{
		Oid			input;
		Oid			ioparam;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("queued key of job " INT64_FORMAT " has a NULL value", job->id)));
		getTypeInputInfo(job->key_types[i], &input, &ioparam);
		values[i] = OidInputFunctionCall(input, TextDatumGetCString(elems[i]), ioparam, -1);
	}
}

/*
 * A read or locked row's columns from column first on: the prompt (none
 * when the expression is NULL), whether the output column is NULL, whether
 * the where clause holds.
 */
static void
read_locked_row(HeapTuple tup, TupleDesc desc, int first, LlmJobRow *row, MemoryContext cxt)
{
	bool		isnull;
	Datum		p = SPI_getbinval(tup, desc, first, &isnull);

	row->found = true;
	if (!isnull)
		row->prompt = MemoryContextStrdup(cxt, TextDatumGetCString(p));
	row->output_null = DatumGetBool(SPI_getbinval(tup, desc, first + 1, &isnull));
	row->matches = DatumGetBool(SPI_getbinval(tup, desc, first + 2, &isnull));
}

void
llm_job_read_row(LlmJob *job, Datum key, bool lock, LlmJobRow *row, MemoryContext cxt)
{
	Datum		values[LLM_JOB_MAX_KEYS];
	int			rc;

	memset(row, 0, sizeof(*row));
	key_params(job, key, values);
	rc = SPI_execute_plan(lock ? job->lock_plan : job->read_plan, values, NULL, !lock, 1);
	if (rc < 0)
		elog(ERROR, "llm: reading a row of job " INT64_FORMAT " failed: %s", job->id,
			 SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return;
	read_locked_row(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, row, cxt);
}

bool
llm_job_row_exists(LlmJob *job, Datum key)
{
	Datum		values[LLM_JOB_MAX_KEYS];
	int			rc;

	key_params(job, key, values);
	rc = SPI_execute_plan(job->exists_plan, values, NULL, true, 1);
	if (rc < 0)
		elog(ERROR, "llm: looking for a row of job " INT64_FORMAT " failed", job->id);
	return SPI_processed > 0;
}

uint64
llm_job_write_row(LlmJob *job, Datum key, const char *value)
{
	Datum		values[LLM_JOB_MAX_KEYS + 1];
	Oid			input;
	Oid			ioparam;
	int			rc;

	key_params(job, key, values);
	/* the column's own input function: its checks (length, JSON syntax) apply */
	getTypeInputInfo(job->out_type, &input, &ioparam);
	values[job->n_keys] = OidInputFunctionCall(input, (char *) value, ioparam, job->out_typmod);
	rc = SPI_execute_plan(job->write_plan, values, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "llm: writing a row of job " INT64_FORMAT " failed: %s", job->id,
			 SPI_result_code_string(rc));
	return SPI_processed;
}

/* The keys' values as one array per key column, the batch statements' $1..$n. */
static void
key_arrays(const LlmJob *job, const Datum *keys, int n, Datum *arrays)
{
	Datum	   *cols[LLM_JOB_MAX_KEYS];

	for (int c = 0; c < job->n_keys; c++)
		cols[c] = palloc(sizeof(Datum) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		Datum		values[LLM_JOB_MAX_KEYS];

		key_params(job, keys[i], values);
		for (int c = 0; c < job->n_keys; c++)
			cols[c][i] = values[c];
	}
	for (int c = 0; c < job->n_keys; c++)
		arrays[c] = PointerGetDatum(typed_array(cols[c], n, job->key_types[c]));
}

/* The ordinality (1-based) of SPI_tuptable's row i as an index into the batch's keys. */
static int
batch_index(uint64 i, int n)
{
	bool		isnull;
	int64		ord = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

	if (isnull || ord < 1 || ord > n)
		elog(ERROR, "llm: batch statement returned row " INT64_FORMAT " of %d", ord, n);
	return (int) (ord - 1);
}

void
llm_job_lock_rows(LlmJob *job, const Datum *keys, int n, LlmJobRow *rows, MemoryContext cxt)
{
	Datum		arrays[LLM_JOB_MAX_KEYS];
	int			rc;

	memset(rows, 0, sizeof(LlmJobRow) * n);
	key_arrays(job, keys, n, arrays);
	rc = SPI_execute_plan(job->lock_rows_plan, arrays, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "llm: locking rows of job " INT64_FORMAT " failed: %s", job->id,
			 SPI_result_code_string(rc));
	for (uint64 t = 0; t < SPI_processed; t++)
		read_locked_row(SPI_tuptable->vals[t], SPI_tuptable->tupdesc, 2,
						&rows[batch_index(t, n)], cxt);
}

void
llm_job_rows_exist(LlmJob *job, const Datum *keys, int n, bool *exists)
{
	Datum		arrays[LLM_JOB_MAX_KEYS];
	int			rc;

	memset(exists, 0, sizeof(bool) * n);
	key_arrays(job, keys, n, arrays);
	rc = SPI_execute_plan(job->exist_rows_plan, arrays, NULL, true, 0);
	if (rc < 0)
		elog(ERROR, "llm: looking for rows of job " INT64_FORMAT " failed", job->id);
	for (uint64 t = 0; t < SPI_processed; t++)
		exists[batch_index(t, n)] = true;
}

uint64
llm_job_write_rows(LlmJob *job, const Datum *keys, char *const *values, int n)
{
	Datum		params[LLM_JOB_MAX_KEYS + 1];
	Datum	   *typed = palloc(sizeof(Datum) * Max(n, 1));
	Oid			input;
	Oid			ioparam;
	int			rc;

	key_arrays(job, keys, n, params);
	/* the column's own input function with its typmod: the checks of a row's write apply */
	getTypeInputInfo(job->out_type, &input, &ioparam);
	for (int i = 0; i < n; i++)
		typed[i] = OidInputFunctionCall(input, values[i], ioparam, job->out_typmod);
	params[job->n_keys] = PointerGetDatum(typed_array(typed, n, job->out_type));
	rc = SPI_execute_plan(job->write_rows_plan, params, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "llm: writing rows of job " INT64_FORMAT " failed: %s", job->id,
			 SPI_result_code_string(rc));
	return SPI_processed;
}

Datum
llm_job_key_of(const LlmJob *job, const Datum *values, const bool *isnull)
{
	Datum		elems[LLM_JOB_MAX_KEYS];

	for (int i = 0; i < job->n_keys; i++)
	{
		Oid			out;
		bool		varlena;

		if (isnull[i])
			elog(ERROR, "llm: NULL primary key value");
		getTypeOutputInfo(job->key_types[i], &out, &varlena);
		elems[i] = CStringGetTextDatum(OidOutputFunctionCall(out, values[i]));
	}
	return PointerGetDatum(construct_array(elems, job->n_keys, TEXTOID, -1, false, TYPALIGN_INT));
}
