/*
 * widen.c — in-place widening of a function for extension updates:
 * llm_widen_function (new optional arguments, below) and llm_widen_result
 * (new result columns, at the end of the file).
 *
 * llm_widen_function(target regprocedure, template regprocedure):
 * how an extension update adds optional arguments to a function that user
 * objects depend on (README, "Argument and upgrade policy").
 *
 * The update script creates template, a function with target's name
 * changed and the new argument list: target's arguments unchanged, then the
 * new ones, each with a DEFAULT.  This copies template's argument list
 * (pronargs, proargtypes, proallargtypes, proargmodes, proargnames,
 * proargdefaults, pronargdefaults) into target's pg_proc row, records
 * target's dependencies on the new arguments' types and defaults, and drops
 * template.  target keeps its OID, body, owner, ACL and comment, so views,
 * materialized views and SQL-standard bodies stored against it keep calling
 * it with the arguments they were stored with: the planner fills in the new
 * defaults, and the generation functions read their arguments by name
 * (sql_args.h), so a plan built before the change works too.  No overload
 * exists at any time, so no call becomes ambiguous.
 *
 * Refused (ERROR, nothing changed) unless: the caller is a superuser; neither
 * is built in nor a member of another extension than llm; both
 * are plain functions with the same result (type, set-ness, OUT arguments);
 * neither is variadic nor has INOUT arguments; target's input arguments are
 * a proper prefix of template's (types and names); every new argument has a
 * name and a default; target's defaults are template's for the same
 * arguments; no function with target's name and the new argument types
 * exists.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(pg_llm_widen_function);

/* A function's arguments split by direction. */
typedef struct ArgLists
{
	int			n_in;
	Oid		   *in_types;
	char	  **in_names;		/* NULL entries: unnamed */
	int			n_out;
	Oid		   *out_types;
	char	  **out_names;
	List	   *defaults;		/* expressions of the last pronargdefaults inputs */
	int			n_defaults;
} ArgLists;

static void
refuse(Oid target, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
			 errmsg("cannot widen function %s", format_procedure(target)),
			 errdetail("%s", detail)));
}

static void
arg_lists(HeapTuple tup, Oid target, ArgLists *a)
{
	Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);
	Oid		   *types;
	char	  **names;
	char	   *modes;
	int			n = get_func_arg_info(tup, &types, &names, &modes);
	bool		isnull;
	Datum		d;

	if (proc->prokind != PROKIND_FUNCTION)
		refuse(target, "Only plain functions can be widened.");
	if (OidIsValid(proc->provariadic))
		refuse(target, "Variadic functions cannot be widened.");
	memset(a, 0, sizeof(*a));
	a->in_types = palloc(sizeof(Oid) * Max(n, 1));
	a->in_names = palloc0(sizeof(char *) * Max(n, 1));
	a->out_types = palloc(sizeof(Oid) * Max(n, 1));
	a->out_names = palloc0(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		char		mode = modes ? modes[i] : PROARGMODE_IN;
		char	   *name = names && names[i][0] != '\0' ? names[i] : NULL;

		if (mode == PROARGMODE_IN)
		{
			a->in_types[a->n_in] = types[i];
			a->in_names[a->n_in++] = name;
		}
		else if (mode == PROARGMODE_OUT || mode == PROARGMODE_TABLE)
		{
			a->out_types[a->n_out] = types[i];
			a->out_names[a->n_out++] = name;
		}
		else
			refuse(target, "Functions with INOUT or VARIADIC arguments cannot be widened.");
	}
	a->n_defaults = proc->pronargdefaults;
	d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargdefaults, &isnull);
	if (!isnull)
		a->defaults = castNode(List, stringToNode(TextDatumGetCString(d)));
}

static bool
same_name(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The first n arguments of a and b have the same types and names. */
static bool
same_args(const Oid *a_types, char **a_names, const Oid *b_types, char **b_names, int n)
{
	for (int i = 0; i < n; i++)
		if (a_types[i] != b_types[i] || !same_name(a_names[i], b_names[i]))
			return false;
	return true;
}

/*
 * One widening in progress: target's pg_proc row (a copy, to be modified)
 * and template's (from the syscache), each split by arg_lists.  pg_proc is
 * open with RowExclusiveLock from widen_begin to widen_finish.
 */
typedef struct Widening
{
	Oid			target;
	Oid			tmpl;
	Relation	rel;
	HeapTuple	ttup;
	HeapTuple	mtup;
	Form_pg_proc tproc;
	Form_pg_proc mproc;
	ArgLists	ta;
	ArgLists	ma;
} Widening;

/* The checks and lookups both widenings start with. */
static void
widen_begin(Oid target, Oid tmpl, Widening *w)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be superuser to widen a function")));
	if (target == tmpl)
		refuse(target, "The template must be another function.");
	/* a tool for update scripts: a built-in or another extension's row is never rewritten (or dropped) */
	for (int i = 0; i < 2; i++)
	{
		Oid			f = i == 0 ? target : tmpl;
		Oid			ext = getExtensionOfObject(ProcedureRelationId, f);

		if (f < FirstNormalObjectId)
			refuse(f, "Built-in functions cannot be widened or used as a template.");
		if (OidIsValid(ext) && ext != get_extension_oid("llm", true))
			refuse(f, "Functions of another extension cannot be widened or used as a template.");
	}

	w->target = target;
	w->tmpl = tmpl;
	w->rel = table_open(ProcedureRelationId, RowExclusiveLock);
	w->ttup = SearchSysCacheCopy1(PROCOID, ObjectIdGetDatum(target));
	if (!HeapTupleIsValid(w->ttup))
		elog(ERROR, "cache lookup failed for function %u", target);
	w->mtup = SearchSysCache1(PROCOID, ObjectIdGetDatum(tmpl));
	if (!HeapTupleIsValid(w->mtup))
		elog(ERROR, "cache lookup failed for function %u", tmpl);
	w->tproc = (Form_pg_proc) GETSTRUCT(w->ttup);
	w->mproc = (Form_pg_proc) GETSTRUCT(w->mtup);

	arg_lists(w->ttup, target, &w->ta);
	arg_lists(w->mtup, target, &w->ma);
}

/*
 * The end both widenings share, once their checks passed: template's
 * pg_proc attributes copied[0..n_copied) into target's row; target's
 * dependencies on the types new_types[0..n_new) and on the expressions
 * new_defaults (NIL: none); then template dropped.
 */
static void
widen_finish(Widening *w, const int *copied, int n_copied,
			 const Oid *new_types, int n_new, List *new_defaults)
{
	Datum		values[Natts_pg_proc];
	bool		nulls[Natts_pg_proc];
	bool		replaces[Natts_pg_proc];
	HeapTuple	newtup;
	ObjectAddress myself;
	ObjectAddress ref;

	memset(replaces, 0, sizeof(replaces));
	for (int i = 0; i < n_copied; i++)
	{
		int			att = copied[i];

		values[att - 1] = SysCacheGetAttr(PROCOID, w->mtup, att, &nulls[att - 1]);
		replaces[att - 1] = true;
	}
	newtup = heap_modify_tuple(w->ttup, RelationGetDescr(w->rel), values, nulls, replaces);
	CatalogTupleUpdate(w->rel, &newtup->t_self, newtup);

	/* what the new arguments or columns reference: their types, their defaults */
	ObjectAddressSet(myself, ProcedureRelationId, w->target);
	for (int i = 0; i < n_new; i++)
	{
		ObjectAddressSet(ref, TypeRelationId, new_types[i]);
		recordDependencyOn(&myself, &ref, DEPENDENCY_NORMAL);
	}
	if (new_defaults != NIL)
		recordDependencyOnExpr(&myself, (Node *) new_defaults, NIL, DEPENDENCY_NORMAL);

	ReleaseSysCache(w->mtup);
	table_close(w->rel, RowExclusiveLock);
	InvokeObjectPostAlterHook(ProcedureRelationId, w->target, 0);
	CommandCounterIncrement();

	/* the template's work is done */
	ObjectAddressSet(ref, ProcedureRelationId, w->tmpl);
	performDeletion(&ref, DROP_RESTRICT, 0);
}

Datum
pg_llm_widen_function(PG_FUNCTION_ARGS)
{
	static const int copied[] = {
		Anum_pg_proc_pronargs, Anum_pg_proc_pronargdefaults, Anum_pg_proc_proargtypes,
		Anum_pg_proc_proallargtypes, Anum_pg_proc_proargmodes, Anum_pg_proc_proargnames,
		Anum_pg_proc_proargdefaults
	};
	Widening	w;
	ArgLists   *ta = &w.ta;
	ArgLists   *ma = &w.ma;
	Oid			target;
	List	   *new_defaults = NIL;

	widen_begin(PG_GETARG_OID(0), PG_GETARG_OID(1), &w);
	target = w.target;
	if (w.tproc->prorettype != w.mproc->prorettype || w.tproc->proretset != w.mproc->proretset)
		refuse(target, "The template returns something else.");
	if (ta->n_out != ma->n_out ||
		!same_args(ta->out_types, ta->out_names, ma->out_types, ma->out_names, ta->n_out))
		refuse(target, "The template has other OUT arguments.");
	if (ma->n_in <= ta->n_in)
		refuse(target, "The template has no new arguments.");
	if (!same_args(ta->in_types, ta->in_names, ma->in_types, ma->in_names, ta->n_in))
		refuse(target, "The template does not begin with the function's arguments, unchanged.");
	for (int i = ta->n_in; i < ma->n_in; i++)
		if (ma->in_names[i] == NULL)
			refuse(target, "Every new argument needs a name.");
	if (ma->n_defaults < (ma->n_in - ta->n_in) + ta->n_defaults)
		refuse(target, "Every new argument needs a default, and the old defaults must stay.");
	/* input i's default: defaults[i - (n_in - n_defaults)] */
	for (int i = ta->n_in - ta->n_defaults; i < ta->n_in; i++)
		if (!equal(list_nth(ta->defaults, i - (ta->n_in - ta->n_defaults)),
				   list_nth(ma->defaults, i - (ma->n_in - ma->n_defaults))))
			refuse(target, "The template changes a default of an existing argument.");
	if (SearchSysCacheExists3(PROCNAMEARGSNSP, NameGetDatum(&w.tproc->proname),
							  PointerGetDatum(&w.mproc->proargtypes),
							  ObjectIdGetDatum(w.tproc->pronamespace)))
		refuse(target, "A function with this name and the new arguments exists already.");

	for (int i = ta->n_in; i < ma->n_in; i++)
		new_defaults = lappend(new_defaults, list_nth(ma->defaults, i - (ma->n_in - ma->n_defaults)));
	widen_finish(&w, copied, lengthof(copied), ma->in_types + ta->n_in, ma->n_in - ta->n_in, new_defaults);
	PG_RETURN_VOID();
}

/*
 * llm_widen_result(target regprocedure, template regprocedure): how an
 * extension update appends result columns (OUT arguments) to a function
 * returning record that user objects depend on.  template is a function
 * with another name, target's input arguments unchanged (types, names,
 * defaults) and target's OUT arguments followed by the new ones.  This
 * copies its proallargtypes, proargmodes and proargnames into target's
 * pg_proc row, records target's dependencies on the new columns' types and
 * drops template.  A query stored before keeps reading the columns it was
 * stored with: a function scan ignores columns past the ones its plan
 * knows, and a dumped view names its columns.  The C function fills as many
 * columns as its declaration has, so it also runs against an older catalog.
 *
 * Refused (ERROR, nothing changed) unless: the caller is a superuser; both
 * are plain, non-variadic functions returning record with the same
 * set-ness and no INOUT arguments; their input arguments and defaults are
 * equal; target's OUT arguments are a proper prefix of template's; every
 * new column has a name.
 */
PG_FUNCTION_INFO_V1(pg_llm_widen_result);

Datum
pg_llm_widen_result(PG_FUNCTION_ARGS)
{
	static const int copied[] = {
		Anum_pg_proc_proallargtypes, Anum_pg_proc_proargmodes, Anum_pg_proc_proargnames
	};
	Widening	w;
	ArgLists   *ta = &w.ta;
	ArgLists   *ma = &w.ma;
	Oid			target;

	widen_begin(PG_GETARG_OID(0), PG_GETARG_OID(1), &w);
	target = w.target;
	if (w.tproc->prorettype != RECORDOID || w.mproc->prorettype != RECORDOID ||
		w.tproc->proretset != w.mproc->proretset)
		refuse(target, "Both functions must return record (with OUT arguments), both sets or both not.");
	if (ta->n_in != ma->n_in ||
		!same_args(ta->in_types, ta->in_names, ma->in_types, ma->in_names, ta->n_in))
		refuse(target, "The template has other input arguments.");
	if (ta->n_defaults != ma->n_defaults || !equal(ta->defaults, ma->defaults))
		refuse(target, "The template has other defaults.");
	if (ma->n_out <= ta->n_out)
		refuse(target, "The template has no new result columns.");
	if (!same_args(ta->out_types, ta->out_names, ma->out_types, ma->out_names, ta->n_out))
		refuse(target, "The template does not begin with the function's result columns, unchanged.");
	for (int i = ta->n_out; i < ma->n_out; i++)
		if (ma->out_names[i] == NULL)
			refuse(target, "Every new result column needs a name.");

	widen_finish(&w, copied, lengthof(copied), ma->out_types + ta->n_out, ma->n_out - ta->n_out, NIL);
	PG_RETURN_VOID();
}
