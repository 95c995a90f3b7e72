/*
 * jobs.c — the SQL functions of durable enrichment jobs (docs/JOBS.md):
 * llm_enrich (check, record the job, queue its rows, install a continuous
 * job's triggers), the control functions llm_job_pause / llm_job_resume /
 * llm_job_cancel / llm_job_retry_failed, the continuous jobs' row trigger
 * and the statement trigger on llm_job that wakes the runner.
 *
 * Rights: llm_enrich runs as the caller, who needs SELECT and UPDATE on the
 * table (and TRIGGER for a continuous job); the job later runs as that
 * role.  Only that role or a superuser controls a job.  The job tables are
 * written through job_queue.h, as their owner.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "job_queue.h"
#include "common/job_registry.h"
#include "job_rows.h"
#include "pg/sql/sql_args.h"
#include "common/registry.h"
#include "common/utf8_text.h"

PG_FUNCTION_INFO_V1(pg_llm_enrich);
PG_FUNCTION_INFO_V1(pg_llm_job_pause);
PG_FUNCTION_INFO_V1(pg_llm_job_resume);
PG_FUNCTION_INFO_V1(pg_llm_job_cancel);
PG_FUNCTION_INFO_V1(pg_llm_job_retry_failed);
PG_FUNCTION_INFO_V1(pg_llm_job_trigger);
PG_FUNCTION_INFO_V1(pg_llm_job_wake);

/* keys queued per statement while llm_enrich fills the queue */
#define FILL_CHUNK 1000

/* ---------- llm_enrich ---------- */

static char *
text_arg(FunctionCallInfo fcinfo, const char *name, const char *dflt)
{
	int			pos = llm_arg_position(fcinfo, name);

	if (pos < 0 || PG_ARGISNULL(pos))
		return dflt ? pstrdup(dflt) : NULL;
	return text_to_cstring(PG_GETARG_TEXT_PP(pos));
}

/* The caller's search_path as an explicit list of schemas (temporary schemas left out). */
static char *
current_search_path(void)
{
	List	   *path = fetch_search_path(false);
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, path)
	{
		Oid			nsp = lfirst_oid(lc);
		char	   *name;

		if (isAnyTempNamespace(nsp) || (name = get_namespace_name(nsp)) == NULL)
			continue;
		appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", quote_identifier(name));
	}
	return buf.data;
}

/* Queue every row the job needs now (as the caller: their rights and row security apply). */
static int64
fill_queue(LlmJob *job)
{
	SPIPlanPtr	plan = SPI_prepare(llm_job_fill_sql(job), 0, NULL);
	Portal		portal;
	MemoryContext chunk_cxt = AllocSetContextCreate(CurrentMemoryContext, "llm job fill",
													ALLOCSET_DEFAULT_SIZES);
	int64		total = 0;

	if (plan == NULL)
		elog(ERROR, "llm: SPI_prepare failed for the job's rows");
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		Datum	   *keys;
		int			n;
		MemoryContext old;

		SPI_cursor_fetch(portal, true, FILL_CHUNK);
		n = (int) SPI_processed;
		if (n == 0)
			break;
		MemoryContextReset(chunk_cxt);
		old = MemoryContextSwitchTo(chunk_cxt);
		keys = palloc(sizeof(Datum) * n);
		for (int i = 0; i < n; i++)
		{
			Datum		values[LLM_JOB_MAX_KEYS];
			bool		isnull[LLM_JOB_MAX_KEYS];

			for (int k = 0; k < job->n_keys; k++)
				values[k] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, k + 1, &isnull[k]);
			keys[i] = llm_job_key_of(job, values, isnull);
		}
		MemoryContextSwitchTo(old);
		SPI_freetuptable(SPI_tuptable);
		llm_queue_insert(job->id, keys, n);
		total += n;
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(chunk_cxt);
	return total;
}

static char *
column_list(Oid relid, Bitmapset *cols)
{
	StringInfoData buf;
	int			c = -1;

	initStringInfo(&buf);
	while ((c = bms_next_member(cols, c)) >= 0)
	{
		AttrNumber	a = c + FirstLowInvalidHeapAttributeNumber;

		if (a <= 0)
			continue;
		appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", quote_identifier(get_attname(relid, a, false)));
	}
	return buf.data;
}

static char *
trigger_name(int64 id, const char *what)
{
	return psprintf("llm_job_" INT64_FORMAT "_%s", id, what);
}

/*
 * A continuous job's triggers, created as the caller: AFTER INSERT OR
 * UPDATE of what the prompt or where clause reads, the key or the output
 * column, when the output is NULL: queue the row; BEFORE UPDATE of what the
 * prompt or where clause reads: clear the output when those inputs changed
 * and the statement did not set the output itself.
 */
static void
create_triggers(LlmJob *job, Bitmapset *inputs)
{
	Bitmapset  *enqueue_cols = bms_copy(inputs);
	char	   *target = quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->target)),
												  get_rel_name(job->target));
	char	   *fn = psprintf("%s.llm_job_trigger", quote_identifier(get_namespace_name(llm_job_schema())));
	const char *out = quote_identifier(job->output_column);
	char	   *in_cols;
	char	   *sql;

	inputs = bms_del_member(bms_copy(inputs), job->out_attnum - FirstLowInvalidHeapAttributeNumber);
	in_cols = column_list(job->target, inputs);
	for (int i = 0; i < job->n_keys; i++)
		enqueue_cols = bms_add_member(enqueue_cols, job->key_attnums[i] - FirstLowInvalidHeapAttributeNumber);
	enqueue_cols = bms_add_member(enqueue_cols, job->out_attnum - FirstLowInvalidHeapAttributeNumber);

	sql = psprintf("CREATE TRIGGER %s AFTER INSERT OR UPDATE OF %s ON %s FOR EACH ROW WHEN (NEW.%s IS NULL) "
				   "EXECUTE FUNCTION %s('" INT64_FORMAT "', 'enqueue')",
				   quote_identifier(trigger_name(job->id, "enqueue")), column_list(job->target, enqueue_cols),
				   target, out, fn, job->id);
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "llm: could not create the job's trigger");
	if (in_cols[0] != '\0')
	{
		sql = psprintf("CREATE TRIGGER %s BEFORE UPDATE OF %s ON %s FOR EACH ROW "
					   "EXECUTE FUNCTION %s('" INT64_FORMAT "', 'clear')",
					   quote_identifier(trigger_name(job->id, "clear")), in_cols, target, fn, job->id);
		if (SPI_execute(sql, false, 0) < 0)
			elog(ERROR, "llm: could not create the job's trigger");
	}
}

/* Drop a job's triggers (they belong to the extension's bookkeeping, not to the caller's rights). */
static void
drop_triggers(LlmJob *job)
{
	static const char *const kinds[] = {"enqueue", "clear"};

	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(job->target)))
		return;
	for (int i = 0; i < lengthof(kinds); i++)
	{
		Oid			trig = get_trigger_oid(job->target, trigger_name(job->id, kinds[i]), true);
		ObjectAddress addr;

		if (!OidIsValid(trig))
			continue;
		ObjectAddressSet(addr, TriggerRelationId, trig);
		performDeletion(&addr, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
	}
}

/*
 * A job not done or cancelled that fills column of target, of a partition
 * of target (at any level) or of a partitioned table target is a partition
 * of: 0 if none.  Their rows are the same rows, so two such jobs would
 * write the same column twice.  The root of the partition tree is locked
 * (SHARE UPDATE EXCLUSIVE, which conflicts with itself, not with reads or
 * writes) until the creating transaction ends, so two jobs created at once
 * in one tree see each other.
 */
static int64
job_in_partition_tree(Oid target, const char *column, LlmJobState *state, Oid *on)
{
	List	   *ancestors = get_rel_relispartition(target) ? get_partition_ancestors(target) : NIL;

	if (ancestors != NIL)
		LockRelationOid(llast_oid(ancestors), ShareUpdateExclusiveLock);
	else if (get_rel_relkind(target) == RELKIND_PARTITIONED_TABLE)
		LockRelationOid(target, ShareUpdateExclusiveLock);
	return llm_job_find_in_tree(target, column, 0, state, on);
}

/*
 * With choices, every result is one of them: each must be a value of the
 * output column's type (its input function with the column's typmod, so an
 * enum's labels, a length limit and a domain's checks apply), or every row
 * would fail its attempts.  The error is the input function's.
 */
static void
check_choices_fit(const LlmJob *job, const LlmCall *call)
{
	Oid			input;
	Oid			ioparam;

	if (call->choices == NULL)
		return;
	getTypeInputInfo(job->out_type, &input, &ioparam);
	for (int i = 0; i < call->n_choices; i++)
	{
		const char *c = call->choices[i];

		(void) OidInputFunctionCall(input, llm_utf8_to_cstring(c, strlen(c)), ioparam, job->out_typmod);
	}
}

/*
 * A vector(n) column (or a domain over one) filled with embeddings of
 * another width would fail every row at write time, in the vector type's
 * input function: refused at creation instead when the model is ready
 * (42804, datatype_mismatch: the column's declared type cannot hold what
 * the job produces, as for an INSERT of an expression of another type).
 * A real[] or float8[] column has no width to check (PostgreSQL does not
 * enforce declared array sizes); a model not ready now is not checked.
 */
static void
check_vector_width(LlmJob *job, const char *model)
{
	int32		typmod = job->out_typmod;
	int32		width;

	(void) getBaseTypeAndTypmod(job->out_type, &typmod);
	if (typmod <= 0)
		return;					/* vector without a declared width */
	width = llm_registry_embedding_width(model);
	if (width > 0 && width != typmod)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" is %s but the model's embeddings have %d dimensions",
						job->output_column, format_type_with_typemod(job->out_type, job->out_typmod), width),
				 errhint("Declare the column as vector(%d), or choose a model with %d dimensions.", width, typmod)));
}

/*
 * llm_enrich(target regclass, output_column name, prompt text, the
 * generation options, where_clause text, mode text, max_attempts int)
 * -> bigint: the new job's id.  Arguments other than target, output_column
 * and prompt are read by name.
 */
Datum
pg_llm_enrich(PG_FUNCTION_ARGS)
{
	LlmJob	   *job = palloc0(sizeof(LlmJob));
	char	   *mode;
	int			pos;
	AclResult	acl;
	Bitmapset  *inputs;
	bool		volatile_expr;
	LlmCall		probe;
	const LlmArgMap *map;
	int64		other;
	LlmJobState other_state;
	Oid			other_table;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target, output_column and prompt must not be NULL")));
	job->owner = GetUserId();
	job->target = PG_GETARG_OID(0);
	job->output_column = pstrdup(NameStr(*PG_GETARG_NAME(1)));
	job->prompt = text_to_cstring(PG_GETARG_TEXT_PP(2));
	job->where_clause = text_arg(fcinfo, "where_clause", NULL);
	mode = text_arg(fcinfo, "mode", "once");
	pos = llm_arg_position(fcinfo, "max_attempts");
	job->max_attempts = (pos < 0 || PG_ARGISNULL(pos)) ? 3 : PG_GETARG_INT32(pos);
	job->state = LLM_JOB_QUEUED;
	job->notify = llm_notify_channel_arg(fcinfo);

	if (strcmp(mode, "once") == 0)
		job->continuous = false;
	else if (strcmp(mode, "continuous") == 0)
		job->continuous = true;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mode must be 'once' or 'continuous'")));
	if (job->max_attempts < 1 || job->max_attempts > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be between 1 and 1000")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot create a job during recovery"),
				 errhint("Jobs run on the primary.")));

	acl = pg_class_aclcheck(job->target, GetUserId(), ACL_SELECT | ACL_UPDATE);
	if (acl != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(job->target)),
				 errdetail("A job needs SELECT and UPDATE on its table; it runs as the role that creates it.")));
	if (job->continuous)
	{
		acl = pg_class_aclcheck(job->target, GetUserId(), ACL_TRIGGER);
		if (acl != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for table %s", get_rel_name(job->target)),
					 errdetail("A continuous job installs triggers: it needs TRIGGER on its table.")));
	}
	llm_job_check_expression(job->prompt, "prompt");
	if (job->where_clause)
		llm_job_check_expression(job->where_clause, "where_clause");
	(void) llm_job_resolve(job, true);

	/*
	 * The generation options: read and checked as a scalar call reads them
	 * (the same errors, before anything is queued), kept by name, and read
	 * back now as the runner will read them.
	 */
	map = llm_arg_map(fcinfo);
	llm_call_read(map, fcinfo->args, PG_NARGS(), &probe);
	job->options = llm_call_options_encode(map, fcinfo->args, PG_NARGS());
	llm_call_read_stored(job->options, &probe);
	/* an embedding column gets the prompt's embedding: no output to constrain */
	if (job->out_kind != LLM_JOB_OUT_TEXT && probe.req.grammar != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("column \"%s\" is an embedding column: choices, regex and json_schema do not apply",
						job->output_column)));
	check_choices_fit(job, &probe);
	if (job->out_kind == LLM_JOB_OUT_VECTOR)
		check_vector_width(job, probe.req.model);
	job->search_path = current_search_path();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "llm: SPI_connect failed");
	llm_job_prepare(job, false);
	/* what running the job's statements checks, checked now as the creator: EXECUTE, SELECT (42501) */
	llm_job_check_rights(job);
	inputs = llm_job_read_columns(job, &volatile_expr);
	if (volatile_expr)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("prompt and where_clause must not call volatile functions"),
				 errdetail("A result is written only if the prompt evaluated again gives the same text.")));
	if (bms_is_member(job->out_attnum - FirstLowInvalidHeapAttributeNumber, inputs))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("prompt and where_clause must not read the output column \"%s\"", job->output_column)));

	other = job_in_partition_tree(job->target, job->output_column, &other_state, &other_table);
	if (other != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("job " INT64_FORMAT " (%s) already fills column \"%s\" of table %s",
						other, llm_job_state_name(other_state), job->output_column, get_rel_name(other_table)),
				 other_table != job->target ?
				 errdetail("Table %s and table %s are in one partition tree: they share their rows.",
						   get_rel_name(other_table), get_rel_name(job->target)) : 0,
				 errhint("Cancel it first: SELECT llm_job_cancel(" INT64_FORMAT ").", other)));

	job->id = llm_job_insert(job);
	(void) fill_queue(job);
	if (job->continuous)
		create_triggers(job, inputs);
	SPI_finish();
	PG_RETURN_INT64(job->id);
}

/* ---------- control ---------- */

typedef enum JobAction
{
	JOB_PAUSE,
	JOB_RESUME,
	JOB_CANCEL,
	JOB_RETRY_FAILED
} JobAction;

static void
wrong_state(LlmJob *job, const char *action)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s job " INT64_FORMAT ": it is %s", action, job->id, llm_job_state_name(job->state))));
}

static int64
job_control(int64 id, JobAction action)
{
	LlmJob	   *job;
	int64		result = 0;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "llm: SPI_connect failed");
	job = llm_job_fetch(id, true, CurrentMemoryContext);
	if (job == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("llm job " INT64_FORMAT " does not exist", id)));
	if (job->owner != GetUserId() && !superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for llm job " INT64_FORMAT, id),
				 errdetail("Only the role that created a job, or a superuser, controls it.")));
	switch (action)
	{
		case JOB_PAUSE:
			if (job->state != LLM_JOB_QUEUED && job->state != LLM_JOB_RUNNING)
				wrong_state(job, "pause");
			(void) llm_job_set_state(id, job->state, LLM_JOB_PAUSED, NULL, false);
			break;
		case JOB_RESUME:
			if (job->state != LLM_JOB_PAUSED && job->state != LLM_JOB_FAILED)
				wrong_state(job, "resume");
			(void) llm_job_set_state(id, job->state, LLM_JOB_QUEUED, NULL, true);
			break;
		case JOB_CANCEL:
			if (job->state == LLM_JOB_DONE || job->state == LLM_JOB_CANCELLED)
				wrong_state(job, "cancel");
			(void) llm_job_set_state(id, job->state, LLM_JOB_CANCELLED, NULL, false);
			llm_queue_clear(id);
			drop_triggers(job);
			break;
		case JOB_RETRY_FAILED:
			if (job->state == LLM_JOB_CANCELLED)
				wrong_state(job, "retry the rows of");
			result = llm_queue_retry_failed(id);
			if (result > 0 && job->state == LLM_JOB_DONE)
				(void) llm_job_set_state(id, LLM_JOB_DONE, LLM_JOB_QUEUED, NULL, false);
			break;
	}
	SPI_finish();
	return result;
}

Datum
pg_llm_job_pause(PG_FUNCTION_ARGS)
{
	(void) job_control(PG_GETARG_INT64(0), JOB_PAUSE);
	PG_RETURN_VOID();
}

Datum
pg_llm_job_resume(PG_FUNCTION_ARGS)
{
	(void) job_control(PG_GETARG_INT64(0), JOB_RESUME);
	PG_RETURN_VOID();
}

Datum
pg_llm_job_cancel(PG_FUNCTION_ARGS)
{
	(void) job_control(PG_GETARG_INT64(0), JOB_CANCEL);
	PG_RETURN_VOID();
}

Datum
pg_llm_job_retry_failed(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(job_control(PG_GETARG_INT64(0), JOB_RETRY_FAILED));
}

/* ---------- triggers ---------- */

/*
 * The job of a continuous job's trigger, looked up once per transaction,
 * and where its columns are in each relation the trigger fired on: the
 * job's table, or one of its partitions (PostgreSQL clones a partitioned
 * table's row triggers onto every partition, those attached later too),
 * whose columns may be in other positions (a table attached as a
 * partition keeps its own layout).
 */
typedef struct TriggerRel
{
	Oid			relid;
	bool		ours;			/* the job's table or one of its partitions */
	AttrNumber	out_attnum;
	AttrNumber	key_attnums[LLM_JOB_MAX_KEYS];
} TriggerRel;

typedef struct TriggerJob
{
	int64		id;				/* the trigger's job id */
	LlmJob	   *job;			/* NULL: no such job, or its definition no longer resolves */
	List	   *rels;			/* TriggerRel *, the relations fired on in this transaction */
} TriggerJob;

static TriggerJob trigger_job;
static LocalTransactionId trigger_job_lxid = InvalidLocalTransactionId;
static MemoryContext trigger_cxt = NULL;

/* The columns of job in relid (ours false: relid is not in the job's partition tree). */
static TriggerRel *
trigger_rel(const LlmJob *job, Oid relid)
{
	TriggerRel *r = palloc0(sizeof(TriggerRel));

	r->relid = relid;
	r->ours = relid == job->target ||
		(get_rel_relispartition(relid) && list_member_oid(get_partition_ancestors(relid), job->target));
	if (!r->ours || relid == job->target)
	{
		r->out_attnum = job->out_attnum;
		memcpy(r->key_attnums, job->key_attnums, sizeof(AttrNumber) * job->n_keys);
		return r;
	}
	/* a partition has its parent's columns, by name */
	r->out_attnum = get_attnum(relid, get_attname(job->target, job->out_attnum, false));
	r->ours = r->out_attnum > 0;
	for (int k = 0; k < job->n_keys; k++)
	{
		r->key_attnums[k] = get_attnum(relid, get_attname(job->target, job->key_attnums[k], false));
		r->ours = r->ours && r->key_attnums[k] > 0;
	}
	return r;
}

/*
 * The job of trigger id, and its columns in rel (NULL: nothing to do).
 * Nothing here fails the statement that fired the trigger: a job whose
 * definition no longer resolves (its runner fails it, with the reason), or
 * a relation that is not in its table's partition tree, gets nothing done
 * by the trigger.
 */
static LlmJob *
job_of_trigger(int64 id, Relation rel, TriggerRel **columns)
{
	TriggerJob *t = &trigger_job;
	Oid			relid = RelationGetRelid(rel);
	TriggerRel *r = NULL;
	ListCell   *lc;
	MemoryContext old;

	if (t->id != id || trigger_job_lxid != MyProc->lxid)
	{
		LlmJob	   *job;

		if (trigger_cxt == NULL)
			trigger_cxt = AllocSetContextCreate(TopMemoryContext, "llm job trigger", ALLOCSET_SMALL_SIZES);
		MemoryContextReset(trigger_cxt);
		t->id = id;
		t->job = NULL;
		t->rels = NIL;
		trigger_job_lxid = InvalidLocalTransactionId;
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "llm: SPI_connect failed");
		job = llm_job_fetch(id, false, trigger_cxt);
		SPI_finish();
		if (job != NULL)
		{
			old = MemoryContextSwitchTo(trigger_cxt);
			if (llm_job_resolve(job, false) == NULL)
				t->job = job;
			MemoryContextSwitchTo(old);
		}
		trigger_job_lxid = MyProc->lxid;
	}
	if (t->job == NULL)
		return NULL;
	foreach(lc, t->rels)
		if (((TriggerRel *) lfirst(lc))->relid == relid)
			r = lfirst(lc);
	if (r == NULL)
	{
		old = MemoryContextSwitchTo(trigger_cxt);
		r = trigger_rel(t->job, relid);
		t->rels = lappend(t->rels, r);
		MemoryContextSwitchTo(old);
	}
	*columns = r;
	return r->ours ? t->job : NULL;
}

/*
 * llm_job_trigger(job id, 'enqueue' | 'clear'): the row triggers of a
 * continuous job (created by llm_enrich).  'enqueue' (AFTER, when the
 * output is NULL) queues the row and wakes the runner at commit; 'clear'
 * (BEFORE UPDATE of the prompt's inputs) sets the output to NULL when an
 * input changed and the statement left the output as it was, so the row is
 * generated again from its new inputs.
 */
Datum
pg_llm_job_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Trigger    *tg;
	int64		id;
	TriggerRel *target = NULL;
	LlmJob	   *job;
	bool		clear;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("llm_job_trigger must be called as a row trigger")));
	tg = td->tg_trigger;
	if (tg->tgnargs != 2)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("llm_job_trigger needs two arguments: the job id and 'enqueue' or 'clear'")));
	id = pg_strtoint64(tg->tgargs[0]);
	clear = strcmp(tg->tgargs[1], "clear") == 0;
	job = job_of_trigger(id, td->tg_relation, &target);

	if (clear)
	{
		HeapTuple	old_tup = td->tg_trigtuple;
		HeapTuple	new_tup = td->tg_newtuple;
		TupleDesc	desc = RelationGetDescr(td->tg_relation);
		bool		changed = false;
		bool		out_set;
		Datum		o,
					n;
		bool		onull,
					nnull;
		Form_pg_attribute att;

		if (job == NULL || !TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_BY_UPDATE(td->tg_event))
			return PointerGetDatum(new_tup ? new_tup : old_tup);
		for (int i = 0; i < tg->tgnattr && !changed; i++)
		{
			AttrNumber	a = tg->tgattr[i];

			att = TupleDescAttr(desc, a - 1);
			o = heap_getattr(old_tup, a, desc, &onull);
			n = heap_getattr(new_tup, a, desc, &nnull);
			changed = onull != nnull || (!onull && !datum_image_eq(o, n, att->attbyval, att->attlen));
		}
		att = TupleDescAttr(desc, target->out_attnum - 1);
		o = heap_getattr(old_tup, target->out_attnum, desc, &onull);
		n = heap_getattr(new_tup, target->out_attnum, desc, &nnull);
		out_set = onull != nnull || (!onull && !datum_image_eq(o, n, att->attbyval, att->attlen));
		if (changed && !out_set && !nnull)
		{
			int			col = target->out_attnum;
			Datum		value = (Datum) 0;
			bool		isnull = true;

			new_tup = heap_modify_tuple_by_cols(new_tup, desc, 1, &col, &value, &isnull);
		}
		return PointerGetDatum(new_tup);
	}
	else
	{
		HeapTuple	tup = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
		TupleDesc	desc = RelationGetDescr(td->tg_relation);
		Datum		values[LLM_JOB_MAX_KEYS];
		bool		isnull[LLM_JOB_MAX_KEYS];
		Datum		key;
		bool		out_null;

		if (job == NULL || job->state == LLM_JOB_CANCELLED || job->state == LLM_JOB_DONE)
			return PointerGetDatum(NULL);
		(void) heap_getattr(tup, target->out_attnum, desc, &out_null);
		if (!out_null)
			return PointerGetDatum(NULL);
		for (int k = 0; k < job->n_keys; k++)
			values[k] = heap_getattr(tup, target->key_attnums[k], desc, &isnull[k]);
		key = llm_job_key_of(job, values, isnull);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "llm: SPI_connect failed");
		llm_queue_insert(job->id, &key, 1);
		SPI_finish();
		llm_jobs_wake_at_commit();
		return PointerGetDatum(NULL);
	}
}

/* Statement trigger on llm_job: a job was created or changed, wake the runner at commit. */
Datum
pg_llm_job_wake(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("llm_job_wake must be called as a trigger")));
	llm_jobs_wake_at_commit();
	return PointerGetDatum(NULL);
}
