/*
 * batch_lift.c — model-calling filters placed above joins (batch_lift.h),
 * and the per-model cost support function of the model-calling functions.
 *
 * PostgreSQL evaluates a qual at the lowest node where its columns exist.
 * For a model call that is the most expensive place when a join above
 * removes most of the scan's rows:
 *
 *     SELECT count(*) FROM tick t JOIN cust c ON c.id = t.cust_id
 *     WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this a complaint?');
 *
 * calls the model for every ticket although only the gold customers'
 * tickets reach the count.  On the finished plan (before the LLM Batch
 * rewrite) each model-calling conjunct of a scan's qual is moved to the
 * ancestor join, on its allowed path, with the smallest estimated output,
 * when that is smaller than the scan's.  Both estimates already include the
 * conjunct's selectivity, so comparing them compares the rows that reach
 * the call at each place.  Rows are counted over all loops of a node (the
 * inner side of a nested loop runs once per outer row, below a Hash or
 * Material once).  The planner's own join order and estimates are kept;
 * the join's target lists below the new place gain the conjunct's columns.
 *
 * This departs from the once-per-row evaluation of a VOLATILE function in
 * the same way as the planner's own qual order does (docs/BATCH_SCAN.md):
 * rows another qual removes are never seen by the call.  llm.lift_filters
 * off keeps PostgreSQL's placement.
 */
#include "postgres.h"

#include <limits.h>
#include <sys/stat.h>

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "commands/explain.h"
#include "executor/instrument.h"
#include "nodes/execnodes.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "batch_lift.h"
#include "batch_scan.h"
#include "common/model_list.h"
#include "pg/sql/sql_args.h"

bool		llm_lift_filters_enabled = true;

/* One ancestor of the node being visited: the node and which child led here. */
typedef struct Frame
{
	Plan	   *node;
	int			side;			/* 0: lefttree (outer), 1: righttree (inner), -1: other */
	double		loops;			/* estimated executions of node */
} Frame;

/* A join a filter was lifted to, for EXPLAIN. */
typedef struct LiftNote
{
	Plan	   *join;
	char	   *from;			/* the scan's relation name */
	int			scan_id;		/* the scan's plan_node_id */
	double		from_rows;		/* rows there (all loops, estimated) */
	double		to_rows;		/* rows here */
} LiftNote;

typedef struct Lifter
{
	List	   *rtable;
	LlmLiftKeepsOrder keeps_order;
	void	   *arg;
	List	   *frames;			/* Frame *, root first */
	List	   *notes;			/* LiftNote * */
} Lifter;

/* ------------------------------------------------------------------------
 * Which conjuncts may move
 * ------------------------------------------------------------------------
 */

static bool
is_model_call(Node *node)
{
	int			nargs;

	return IsA(node, FuncExpr) &&
		llm_batchable_function(((FuncExpr *) node)->funcid, &nargs) != NULL;
}

static bool
contains_model_call_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (is_model_call(node))
		return true;
	return expression_tree_walker(node, contains_model_call_walker, context);
}

/*
 * Whether a scan qual's conjunct can be evaluated anywhere above the scan:
 * only the scan's own Vars (no executor Params a nested loop or a SubPlan
 * sets, no SubPlans, no aggregates), so its value depends on the scan row
 * alone.
 */
static bool
unmovable_walker(Node *node, Index *scanrelid)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Var:
			return ((Var *) node)->varno != *scanrelid || ((Var *) node)->varlevelsup != 0;
		case T_Param:
			return ((Param *) node)->paramkind != PARAM_EXTERN;
		case T_SubPlan:
		case T_AlternativeSubPlan:
		case T_Aggref:
		case T_WindowFunc:
		case T_GroupingFunc:
		case T_PlaceHolderVar:
			return true;
		default:
			return expression_tree_walker(node, unmovable_walker, scanrelid);
	}
}

/* The value of an argument named name of call, NULL if it has none; *found says whether it has. */
static Node *
named_arg(FuncExpr *call, const char *name, bool *found)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(call->funcid));
	Oid		   *types;
	char	  **names;
	char	   *modes;
	int			n;
	Node	   *value = NULL;

	*found = false;
	if (!HeapTupleIsValid(tup))
		return NULL;
	n = get_func_arg_info(tup, &types, &names, &modes);
	ReleaseSysCache(tup);
	for (int i = 0; names != NULL && i < n && i < list_length(call->args); i++)
		if (names[i] != NULL && strcmp(names[i], name) == 0)
		{
			*found = true;
			value = list_nth(call->args, i);
			break;
		}
	return value;
}

static bool
is_null_const(Node *node)
{
	return node != NULL && IsA(node, Const) && ((Const *) node)->constisnull;
}

/*
 * A call whose answer is the same every time for the same row: no sampling
 * (no temperature argument, as for scoring functions, or a constant 0 or
 * NULL one, the greedy default) or sampling with a constant seed, and no
 * options object that could set either.  Anything not constant is taken as
 * sampling.
 */
static bool
call_is_deterministic(FuncExpr *call)
{
	bool		found;
	Node	   *temp;
	Node	   *opts;
	bool		greedy;

	opts = named_arg(call, "options", &found);
	if (found && !is_null_const(opts))
		return false;
	temp = named_arg(call, "temperature", &found);
	if (!found || is_null_const(temp))
		greedy = true;
	else if (IsA(temp, Const) && ((Const *) temp)->consttype == FLOAT8OID)
		greedy = DatumGetFloat8(((Const *) temp)->constvalue) == 0.0;
	else
		greedy = false;
	if (greedy)
		return true;
	temp = named_arg(call, "seed", &found);
	return found && temp != NULL && IsA(temp, Const) && !((Const *) temp)->constisnull;
}

static bool
nondeterministic_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (is_model_call(node) && !call_is_deterministic((FuncExpr *) node))
		return true;
	return expression_tree_walker(node, nondeterministic_walker, context);
}

/* ------------------------------------------------------------------------
 * Where a conjunct goes
 * ------------------------------------------------------------------------
 */

static bool
is_lift_scan(Plan *plan)
{
	switch (nodeTag(plan))
	{
		case T_SeqScan:
		case T_SampleScan:
		case T_IndexScan:
		case T_BitmapHeapScan:
		case T_TidScan:
		case T_TidRangeScan:
			return ((Scan *) plan)->scanrelid > 0;
		default:
			return false;
	}
}

static bool
is_join(Plan *plan)
{
	return IsA(plan, NestLoop) || IsA(plan, HashJoin) || IsA(plan, MergeJoin);
}

/*
 * A node that returns its child's rows unchanged, column for column (its
 * target list is Var(OUTER_VAR, i) at position i for every child column):
 * a column appended to the child is appended to it at the same position.
 */
static bool
is_pass_through(Plan *plan)
{
	ListCell   *lc;

	if (!(IsA(plan, Hash) || IsA(plan, Sort) || IsA(plan, IncrementalSort) || IsA(plan, Material)))
		return false;
	if (plan->lefttree == NULL || list_length(plan->targetlist) != list_length(plan->lefttree->targetlist))
		return false;
	foreach(lc, plan->targetlist)
	{
		Var		   *v = (Var *) ((TargetEntry *) lfirst(lc))->expr;

		if (!IsA(v, Var) || v->varno != OUTER_VAR || v->varattno != foreach_current_index(lc) + 1)
			return false;
	}
	return true;
}

/*
 * Whether a row arriving from side of join passes it unchanged or not at
 * all (a WHERE conjunct over it gives the same answer above), and whether
 * it may come out more than once (1:N).
 */
static bool
join_passes(Join *join, int side, bool *one_to_n)
{
	switch (join->jointype)
	{
		case JOIN_INNER:
			*one_to_n = !(side == 0 && join->inner_unique);
			return true;
		case JOIN_LEFT:
			*one_to_n = !join->inner_unique;
			return side == 0;
		case JOIN_SEMI:
		case JOIN_ANTI:
			*one_to_n = false;
			return side == 0;
		case JOIN_RIGHT:
			*one_to_n = true;
			return side == 1;
		default:
			return false;		/* FULL: both sides nullable */
	}
}

/*
 * The frame index (into l->frames) of the join conjunct q of scan should
 * go to, or -1 to leave it where it is.
 */
static int
choose_level(Lifter *l, Plan *scan, double scan_loops, Node *q)
{
	bool		deterministic = !nondeterministic_walker(q, NULL);
	double		best_rows = scan->plan_rows * scan_loops;
	int			best = -1;
	bool		passed_1n = false;

	for (int i = list_length(l->frames) - 1; i >= 0; i--)
	{
		Frame	   *f = list_nth(l->frames, i);
		bool		one_to_n;
		double		rows;

		if (is_pass_through(f->node))
			continue;
		if (!is_join(f->node) || f->side < 0 || !join_passes((Join *) f->node, f->side, &one_to_n))
			break;
		if (one_to_n)
			passed_1n = true;
		/* a sampling call sees each scan row once, never its copies */
		if (passed_1n && !deterministic)
			break;
		rows = f->node->plan_rows * f->loops;
		/* the inner side of a merge join is marked and restored: no LLM Batch node there */
		if (i > 0)
		{
			Frame	   *up = list_nth(l->frames, i - 1);

			if (IsA(up->node, MergeJoin) && up->side == 1)
				continue;
		}
		if (rows < best_rows)
		{
			best_rows = rows;
			best = i;
		}
	}
	return best;
}

/* ------------------------------------------------------------------------
 * Moving a conjunct
 * ------------------------------------------------------------------------
 */

/* The resno of a target entry of tlist that is Var(varno, attno), or 0. */
static AttrNumber
find_var_column(List *tlist, int varno, AttrNumber attno)
{
	ListCell   *lc;

	foreach(lc, tlist)
	{
		TargetEntry *te = lfirst(lc);
		Var		   *v = (Var *) te->expr;

		if (IsA(v, Var) && v->varno == varno && v->varattno == attno && v->varlevelsup == 0)
			return te->resno;
	}
	return 0;
}

/* Var(varno, attno) as a column of plan's target list (appended if missing); its resno. */
static AttrNumber
carry_column(Plan *plan, int varno, AttrNumber attno, Var *like)
{
	AttrNumber	resno = find_var_column(plan->targetlist, varno, attno);
	Var		   *v;

	if (resno > 0)
		return resno;
	v = makeVar(varno, attno, like->vartype, like->vartypmod, like->varcollid, 0);
	resno = list_length(plan->targetlist) + 1;
	plan->targetlist = lappend(plan->targetlist, makeTargetEntry((Expr *) v, resno, NULL, false));
	plan->plan_width += get_typavgwidth(like->vartype, like->vartypmod);
	return resno;
}

typedef struct Carry
{
	Lifter	   *l;
	Plan	   *scan;
	int			to;				/* frame index of the join */
	bool	   *pass;			/* per frame: a pass-through node (before carrying) */
} Carry;

/*
 * A Var of the scan as the join at frame c->to sees it: carried up the
 * target lists of the nodes in between, then Var(OUTER_VAR / INNER_VAR,
 * column of the join's child).
 */
static Node *
carry_mutator(Node *node, Carry *c)
{
	Var		   *v;
	AttrNumber	col;

	if (node == NULL)
		return NULL;
	if (!IsA(node, Var))
		return expression_tree_mutator(node, carry_mutator, c);
	v = (Var *) node;
	col = carry_column(c->scan, v->varno, v->varattno, v);
	for (int i = list_length(c->l->frames) - 1; i > c->to; i--)
	{
		Frame	   *f = list_nth(c->l->frames, i);

		if (c->pass[i])
		{
			/* column for column: a column new to the child is new here too */
			if (col > list_length(f->node->targetlist))
				carry_column(f->node, OUTER_VAR, col, v);
		}
		else
			col = carry_column(f->node, f->side == 0 ? OUTER_VAR : INNER_VAR, col, v);
	}
	return (Node *) makeVar(((Frame *) list_nth(c->l->frames, c->to))->side == 0 ? OUTER_VAR : INNER_VAR,
							col, v->vartype, v->vartypmod, v->varcollid, 0);
}

static void
note_lift(Lifter *l, Plan *join, Plan *scan, double scan_loops, double join_loops)
{
	LiftNote   *n;
	ListCell   *lc;

	foreach(lc, l->notes)
		if (((LiftNote *) lfirst(lc))->join == join && ((LiftNote *) lfirst(lc))->scan_id == scan->plan_node_id)
			return;
	n = palloc0(sizeof(LiftNote));
	n->join = join;
	n->scan_id = scan->plan_node_id;
	n->from = pstrdup(rt_fetch(((Scan *) scan)->scanrelid, l->rtable)->eref->aliasname);
	n->from_rows = scan->plan_rows * scan_loops;
	n->to_rows = join->plan_rows * join_loops;
	l->notes = lappend(l->notes, n);
}

/* Lift the model-calling conjuncts of a scan's qual that gain from it. */
static void
lift_scan(Lifter *l, Plan *scan, double loops)
{
	Index		scanrelid = ((Scan *) scan)->scanrelid;
	List	   *kept = NIL;
	ListCell   *lc;

	if (l->frames == NIL || l->keeps_order(scan, l->arg))
		return;
	foreach(lc, scan->qual)
	{
		Node	   *q = lfirst(lc);
		int			to;
		Frame	   *f;
		Carry		c;

		if (!contains_model_call_walker(q, NULL) || unmovable_walker(q, &scanrelid) ||
			(to = choose_level(l, scan, loops, q)) < 0)
		{
			kept = lappend(kept, q);
			continue;
		}
		f = list_nth(l->frames, to);
		c.l = l;
		c.scan = scan;
		c.to = to;
		c.pass = palloc0(sizeof(bool) * list_length(l->frames));
		for (int i = to + 1; i < list_length(l->frames); i++)
			c.pass[i] = is_pass_through(((Frame *) list_nth(l->frames, i))->node);
		f->node->qual = lappend(f->node->qual, carry_mutator(q, &c));
		note_lift(l, f->node, scan, loops, f->loops);
	}
	scan->qual = kept;
}

static void walk(Lifter *l, Plan *plan, double loops, double base_loops);

static void
walk_child(Lifter *l, Plan *parent, Plan *child, int side, double loops, double base_loops,
		   double parent_loops)
{
	Frame	   *f;

	if (child == NULL)
		return;
	f = palloc(sizeof(Frame));
	f->node = parent;
	f->side = side;
	f->loops = parent_loops;
	l->frames = lappend(l->frames, f);
	walk(l, child, loops, base_loops);
	l->frames = list_delete_last(l->frames);
	pfree(f);
}

/*
 * Visit plan (executed `loops` times; base_loops: the executions of the
 * nearest join above, which a Hash or Material below it runs its child for).
 */
static void
walk(Lifter *l, Plan *plan, double loops, double base_loops)
{
	ListCell   *lc;
	List	   *others = NIL;

	if (plan == NULL)
		return;
	switch (nodeTag(plan))
	{
		case T_NestLoop:
			walk_child(l, plan, plan->lefttree, 0, loops, loops, loops);
			walk_child(l, plan, plan->righttree, 1, loops * Max(plan->lefttree->plan_rows, 1.0), loops, loops);
			break;
		case T_HashJoin:
		case T_MergeJoin:
			walk_child(l, plan, plan->lefttree, 0, loops, loops, loops);
			walk_child(l, plan, plan->righttree, 1, loops, loops, loops);
			break;
		case T_Hash:
		case T_Material:
			walk_child(l, plan, plan->lefttree, 0, base_loops, base_loops, loops);
			break;
		case T_Append:
		case T_MergeAppend:
		case T_SubqueryScan:
		case T_CustomScan:
			others = llm_plan_other_children(plan);
			break;
		default:
			walk_child(l, plan, plan->lefttree, 0, loops, base_loops, loops);
			walk_child(l, plan, plan->righttree, 1, loops, base_loops, loops);
			break;
	}
	/* below these a filter stays: a fresh path, each child counted once per run */
	foreach(lc, others)
	{
		Lifter		sub = *l;

		sub.frames = NIL;
		walk(&sub, lfirst(lc), loops, loops);
		l->notes = sub.notes;
	}
	if (is_lift_scan(plan) && plan->qual != NIL)
		lift_scan(l, plan, loops);
}

List *
llm_lift_filters(Plan *plan, List *rtable, LlmLiftKeepsOrder keeps_order, void *arg)
{
	Lifter		l;

	if (!llm_lift_filters_enabled || plan == NULL)
		return NIL;
	memset(&l, 0, sizeof(l));
	l.rtable = rtable;
	l.keeps_order = keeps_order;
	l.arg = arg;
	walk(&l, plan, 1.0, 1.0);
	return l.notes;
}

/* ------------------------------------------------------------------------
 * EXPLAIN
 * ------------------------------------------------------------------------
 */

static bool
is_batch_node(Plan *plan)
{
	return IsA(plan, CustomScan) &&
		strcmp(((CustomScan *) plan)->methods->CustomName, "LLM Batch") == 0;
}

void
llm_lift_annotate(Plan *plan, List *notes)
{
	ListCell   *lc;

	if (plan == NULL || notes == NIL)
		return;
	if (is_batch_node(plan) && plan->lefttree != NULL)
	{
		foreach(lc, notes)
		{
			LiftNote   *n = lfirst(lc);
			CustomScan *cs = (CustomScan *) plan;

			if (n->join != plan->lefttree)
				continue;
			cs->custom_private = lappend(cs->custom_private,
										 list_make4(makeString(n->from),
													makeInteger((int) Min(n->from_rows + 0.5, (double) INT_MAX)),
													makeInteger((int) Min(n->to_rows + 0.5, (double) INT_MAX)),
													makeInteger(n->scan_id)));
		}
	}
	llm_lift_annotate(plan->lefttree, notes);
	llm_lift_annotate(plan->righttree, notes);
	foreach(lc, llm_plan_other_children(plan))
		llm_lift_annotate(lfirst(lc), notes);
}

void
llm_lift_explain(CustomScan *cscan, ExplainState *es)
{
	ListCell   *lc;

	for_each_from(lc, cscan->custom_private, 3)
	{
		List	   *note = lfirst(lc);
		StringInfoData buf;

		if (!IsA(note, List) || list_length(note) != 4 || !IsA(linitial(note), String))
			continue;
		initStringInfo(&buf);
		appendStringInfo(&buf, "from scan of %s", strVal(linitial(note)));
		if (es->costs)
			appendStringInfo(&buf, " (rows reaching the call, estimated: %d there, %d here)",
							 intVal(lsecond(note)), intVal(lthird(note)));
		ExplainPropertyText("LLM Filter Lifted", buf.data, es);
	}
}

List *
llm_lift_scan_ids(CustomScan *cscan)
{
	List	   *ids = NIL;
	ListCell   *lc;

	for_each_from(lc, cscan->custom_private, 3)
	{
		List	   *note = lfirst(lc);

		if (IsA(note, List) && list_length(note) == 4 && IsA(linitial(note), String))
			ids = lappend_int(ids, intVal(lfourth(note)));
	}
	return ids;
}

/* ------------------------------------------------------------------------
 * Counting the rows below
 * ------------------------------------------------------------------------
 */

typedef struct FindState
{
	int			id;
	PlanState  *found;
} FindState;

static bool
find_plan_state(PlanState *ps, void *context)
{
	FindState  *f = context;

	if (ps->plan->plan_node_id == f->id)
	{
		f->found = ps;
		return true;
	}
	return planstate_tree_walker(ps, find_plan_state, context);
}

List *
llm_lift_count_scans(CustomScan *cscan, PlanState *child)
{
	List	   *scans = NIL;
	ListCell   *lc;

	foreach(lc, llm_lift_scan_ids(cscan))
	{
		FindState	f = {lfirst_int(lc), NULL};

		if (!find_plan_state(child, &f))
			continue;
		/* rows only, where EXPLAIN ANALYZE did not already instrument it */
		if (f.found->instrument == NULL)
			f.found->instrument = InstrAlloc(1, INSTRUMENT_ROWS, false);
		scans = lappend(scans, f.found);
	}
	return scans;
}

int64
llm_lift_rows_below(List *scans)
{
	ListCell   *lc;
	double		rows = 0;

	foreach(lc, scans)
	{
		Instrumentation *in = ((PlanState *) lfirst(lc))->instrument;

		/* the finished runs' rows and the current run's */
		rows += in->ntuples + in->tuplecount;
	}
	return (int64) rows;
}

/* ------------------------------------------------------------------------
 * Cost support
 * ------------------------------------------------------------------------
 */

/* Size of the file at path in bytes, 0 if unknown. */
static double
file_bytes(const char *path)
{
	struct stat st;

	if (path == NULL || path[0] == '\0' || stat(path, &st) != 0)
		return 0;
	return (double) st.st_size;
}

/*
 * What a call of the model named by alias costs relative to the default
 * model: the ratio of their weight files' sizes (a model's compute per token
 * grows with its weights), from the configuration (llm.model, llm.models),
 * never from what the worker has loaded or measured, so a cached plan's
 * choice does not change with the worker's state.  1 for the default model
 * and whenever a size is unknown.
 */
static double
model_cost_factor(const char *alias)
{
	const LlmModelList *list;
	const char *default_path;
	double		def;

	if (alias == NULL || strcmp(alias, LLM_DEFAULT_MODEL) == 0)
		return 1.0;
	list = llm_model_list_current();
	default_path = GetConfigOption("llm.model", true, false);
	def = file_bytes(default_path);
	for (int i = 0; list != NULL && i < list->n; i++)
		if (strcmp(list->models[i].alias, alias) == 0)
		{
			double		own = file_bytes(list->models[i].path);

			return (own > 0 && def > 0) ? own / def : 1.0;
		}
	return 1.0;
}

/* pg_proc.procost of funcid */
static double
declared_cost(Oid funcid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	double		cost;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", funcid);
	cost = ((Form_pg_proc) GETSTRUCT(tup))->procost;
	ReleaseSysCache(tup);
	return cost;
}

PG_FUNCTION_INFO_V1(pg_llm_call_cost);

/*
 * prosupport of the model-calling functions: SupportRequestCost answers the
 * declared COST scaled by the called model's cost factor (a constant model
 * => argument; otherwise the declared COST, as without support).
 */
Datum
pg_llm_call_cost(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);
	SupportRequestCost *req;
	double		factor = 1.0;

	if (!IsA(rawreq, SupportRequestCost))
		PG_RETURN_POINTER(NULL);
	req = (SupportRequestCost *) rawreq;
	if (req->node != NULL && IsA(req->node, FuncExpr))
	{
		bool		found;
		Node	   *model = named_arg((FuncExpr *) req->node, "model", &found);

		if (found && model != NULL && IsA(model, Const) && !((Const *) model)->constisnull)
			factor = model_cost_factor(TextDatumGetCString(((Const *) model)->constvalue));
	}
	req->startup = 0;
	req->per_tuple = declared_cost(req->funcid) * cpu_operator_cost * factor;
	PG_RETURN_POINTER(req);
}

void
llm_lift_init(void)
{
	DefineCustomBoolVariable("llm.lift_filters",
							 "Evaluate a model-calling WHERE condition above the join where the fewest rows reach it.",
							 "Planner setting. A condition that calls a model and uses one table only moves from that "
							 "table's scan to a join above it when fewer rows reach the join (planner estimates), only "
							 "where the answer cannot change: inner joins, the preserved side of an outer join, the outer "
							 "side of a semi or anti join, and above a join that may repeat a row only for a deterministic "
							 "call. off keeps PostgreSQL's placement (the lowest node where the columns exist).",
							 &llm_lift_filters_enabled,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
}
