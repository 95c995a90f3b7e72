/*
 * widen.c — llm_widen_function(target regprocedure, template regprocedure):
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
 * Refused (ERROR, nothing changed) unless: the caller is a superuser; both
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
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_proc.h"
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

Datum
pg_llm_widen_function(PG_FUNCTION_ARGS)
{
	Oid			target = PG_GETARG_OID(0);
	Oid			tmpl = PG_GETARG_OID(1);
	Relation	rel;
	HeapTuple	ttup;
	HeapTuple	mtup;
	Form_pg_proc tproc;
	Form_pg_proc mproc;
	ArgLists	ta;
	ArgLists	ma;
	Datum		values[Natts_pg_proc];
	bool		nulls[Natts_pg_proc];
	bool		replaces[Natts_pg_proc];
	static const int copied[] = {
		Anum_pg_proc_pronargs, Anum_pg_proc_pronargdefaults, Anum_pg_proc_proargtypes,
		Anum_pg_proc_proallargtypes, Anum_pg_proc_proargmodes, Anum_pg_proc_proargnames,
		Anum_pg_proc_proargdefaults
	};
	HeapTuple	newtup;
	ObjectAddress myself;
	ObjectAddress ref;
	List	   *new_defaults = NIL;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be superuser to widen a function")));
	if (target == tmpl)
		refuse(target, "The template must be another function.");

	rel = table_open(ProcedureRelationId, RowExclusiveLock);
	ttup = SearchSysCacheCopy1(PROCOID, ObjectIdGetDatum(target));
	if (!HeapTupleIsValid(ttup))
		elog(ERROR, "cache lookup failed for function %u", target);
	mtup = SearchSysCache1(PROCOID, ObjectIdGetDatum(tmpl));
	if (!HeapTupleIsValid(mtup))
		elog(ERROR, "cache lookup failed for function %u", tmpl);
	tproc = (Form_pg_proc) GETSTRUCT(ttup);
	mproc = (Form_pg_proc) GETSTRUCT(mtup);

	arg_lists(ttup, target, &ta);
	arg_lists(mtup, target, &ma);
	if (tproc->prorettype != mproc->prorettype || tproc->proretset != mproc->proretset)
		refuse(target, "The template returns something else.");
	if (ta.n_out != ma.n_out)
		refuse(target, "The template has other OUT arguments.");
	for (int i = 0; i < ta.n_out; i++)
		if (ta.out_types[i] != ma.out_types[i] || !same_name(ta.out_names[i], ma.out_names[i]))
			refuse(target, "The template has other OUT arguments.");
	if (ma.n_in <= ta.n_in)
		refuse(target, "The template has no new arguments.");
	for (int i = 0; i < ta.n_in; i++)
		if (ta.in_types[i] != ma.in_types[i] || !same_name(ta.in_names[i], ma.in_names[i]))
			refuse(target, "The template does not begin with the function's arguments, unchanged.");
	for (int i = ta.n_in; i < ma.n_in; i++)
		if (ma.in_names[i] == NULL)
			refuse(target, "Every new argument needs a name.");
	if (ma.n_defaults < (ma.n_in - ta.n_in) + ta.n_defaults)
		refuse(target, "Every new argument needs a default, and the old defaults must stay.");
	/* input i's default: defaults[i - (n_in - n_defaults)] */
	for (int i = ta.n_in - ta.n_defaults; i < ta.n_in; i++)
		if (!equal(list_nth(ta.defaults, i - (ta.n_in - ta.n_defaults)),
				   list_nth(ma.defaults, i - (ma.n_in - ma.n_defaults))))
			refuse(target, "The template changes a default of an existing argument.");
	if (SearchSysCacheExists3(PROCNAMEARGSNSP, NameGetDatum(&tproc->proname),
							  PointerGetDatum(&mproc->proargtypes),
							  ObjectIdGetDatum(tproc->pronamespace)))
		refuse(target, "A function with this name and the new arguments exists already.");

	memset(replaces, 0, sizeof(replaces));
	for (int i = 0; i < lengthof(copied); i++)
	{
		int			att = copied[i];

		values[att - 1] = SysCacheGetAttr(PROCOID, mtup, att, &nulls[att - 1]);
		replaces[att - 1] = true;
	}
	newtup = heap_modify_tuple(ttup, RelationGetDescr(rel), values, nulls, replaces);
	CatalogTupleUpdate(rel, &newtup->t_self, newtup);

	/* what the new arguments reference: their types, their defaults */
	ObjectAddressSet(myself, ProcedureRelationId, target);
	for (int i = ta.n_in; i < ma.n_in; i++)
	{
		ObjectAddressSet(ref, TypeRelationId, ma.in_types[i]);
		recordDependencyOn(&myself, &ref, DEPENDENCY_NORMAL);
		new_defaults = lappend(new_defaults, list_nth(ma.defaults, i - (ma.n_in - ma.n_defaults)));
	}
	recordDependencyOnExpr(&myself, (Node *) new_defaults, NIL, DEPENDENCY_NORMAL);

	ReleaseSysCache(mtup);
	table_close(rel, RowExclusiveLock);
	InvokeObjectPostAlterHook(ProcedureRelationId, target, 0);
	CommandCounterIncrement();

	/* the template's work is done */
	ObjectAddressSet(ref, ProcedureRelationId, tmpl);
	performDeletion(&ref, DROP_RESTRICT, 0);
	PG_RETURN_VOID();
}
