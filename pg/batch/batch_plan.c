/*
 * batch_plan.c — the planner half of the "LLM Batch" node (a CustomScan):
 * the planner hook that places it, and the node's settings (batch_scan.h).
 *
 * A scalar function is called row by row, so a plain
 *     SELECT llm_generate(body) FROM tickets
 * would give the worker one request at a time.  After standard planning, the
 * planner hook walks the finished plan and, wherever a node evaluates
 * batchable calls for every row (sql_args.h's function table; a call at the
 * top of an expression or nested only in nodes that evaluate all their
 * inputs), moves their evaluation into an LLM Batch node:
 *
 *   target lists   P (scan, join, Agg, Gather, Result, ...) is split into
 *                  P' (the call-free parts and the call arguments) and the
 *                  node above it, which projects P's target list;
 *   quals          the AND-conjuncts of P's qual (and of an inner join's
 *                  join qual) that contain calls move into the node, which
 *                  evaluates them after their calls return; the call-free
 *                  conjuncts stay in P (on a scan whose quals mix security
 *                  levels, those after the first call move too, in order:
 *                  QualOrder); P' then yields only the leaves
 *                  (Vars, Aggrefs, Params) and the node evaluates the rest,
 *                  so nothing of P's target list runs for a row the moved
 *                  conjuncts reject;
 *   aggregates     calls in the arguments (without FILTER) or the FILTER of
 *                  an aggregate are evaluated by a node between the Agg and
 *                  its input, which appends their results to the input rows;
 *   LIMIT          a node directly below a Limit (that has no quals of its
 *                  own) is moved above it: the Limit does not project, so
 *                  only the rows it passes are generated and a Sort below
 *                  keeps its top-N bound.
 *
 * The executor half, which reads rows ahead and submits their calls, is
 * batch_exec.c.  Design, read-ahead rule and fallbacks: docs/BATCH_SCAN.md.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xlog.h"
#include "catalog/objectaccess.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/tuplestore.h"

#include "batch_cascade.h"
#include "batch_dedup.h"
#include "batch_lift.h"
#include "batch_scan.h"
#include "channel/client.h"
#include "common/progress.h"
#include "common/registry.h"
#include "pg/sql/sql_args.h"
#include "pg/sql/sql_result.h"

bool		llm_enable_batch_scan = true;

/* the node in a plan: its state comes from the executor half */
static const CustomScanMethods llm_batch_plan_methods = {
	.CustomName = "LLM Batch",
	.CreateCustomScanState = llm_batch_create_state,
};

static planner_hook_type prev_planner_hook = NULL;
static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

/* ------------------------------------------------------------------------
 * Planning
 * ------------------------------------------------------------------------
 */

/* Which functions are batchable, looked up once per plan. */
typedef struct FunctionCache
{
	List	   *known_calls;	/* function oids found to be batchable */
	List	   *known_nargs;	/* their argument counts */
	List	   *known_others;	/* function oids found not to be */
} FunctionCache;

/*
 * Which scans must keep PostgreSQL's qual order.  The planner orders a
 * node's quals by security level (a row-level security policy's or a
 * security-barrier view's quals before the query's own, unless those are
 * leakproof; order_qual_clauses), then by cost; in the finished plan the
 * levels are gone, only the order is left.  Within one level the order is
 * the planner's cost guess and the node may change it (call-free conjuncts
 * stay below and run first); across levels it is a security promise.  The
 * levels are known while paths are built (RestrictInfo.security_level), so
 * set_rel_pathlist_hook notes the relations whose scan quals mix levels.
 * Security quals belong to one relation, so they are always scan quals;
 * quals of joins and upper nodes all have the query's own level.
 */
typedef struct QualOrder
{
	List	   *relids;			/* relations (pg_class oids) scanned with mixed levels */
	bool		all;			/* a non-relation scan mixes them: keep every order */
	List	   *barrier_relids; /* relations scanned inside a security-barrier view */
	List	   *rtable;			/* the finished plan's range table */
} QualOrder;

/* The statement being planned (NULL outside batch_planner). */
static QualOrder *planning_order = NULL;

/* The relations (pg_class oids) a query reads through its range table, at any depth, added to *relids. */
static void
add_query_relids(Query *query, List **relids)
{
	ListCell   *lc;

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION)
			*relids = list_append_unique_oid(*relids, rte->relid);
		else if (rte->rtekind == RTE_SUBQUERY && rte->subquery != NULL)
			add_query_relids(rte->subquery, relids);
	}
}

/*
 * set_rel_pathlist_hook: note a relation whose scan evaluates quals of a
 * lower security level than the query's own (qual_security_level, the level
 * of every qual not from a policy or a security-barrier view): its
 * restrictions, and join clauses a parameterized path moves into the scan.
 */
static void
batch_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);
	if (planning_order == NULL)
		return;
	/*
	 * A security-barrier view's quals are its subquery's own, of one level
	 * there, and its subquery scan is dropped from the finished plan when it
	 * has nothing to do: its relations are noted so that no filter is
	 * lifted out of them, above the quals of the query's joins.
	 */
	if (rte->rtekind == RTE_SUBQUERY && rte->security_barrier && rte->subquery != NULL)
		add_query_relids(rte->subquery, &planning_order->barrier_relids);
	if (rel->baserestrict_min_security >= root->qual_security_level)
		return;
	if (rte->rtekind == RTE_RELATION)
		planning_order->relids = list_append_unique_oid(planning_order->relids, rte->relid);
	else
		planning_order->all = true;
}

/* Whether plan's quals must be evaluated in the planner's order. */
static bool
keeps_qual_order(const QualOrder *order, Plan *plan)
{
	Index		scanrelid;

	if (order->all)
		return true;
	switch (nodeTag(plan))
	{
		case T_SeqScan:
		case T_SampleScan:
		case T_IndexScan:
		case T_IndexOnlyScan:
		case T_BitmapHeapScan:
		case T_TidScan:
		case T_TidRangeScan:
			scanrelid = ((Scan *) plan)->scanrelid;
			return scanrelid > 0 &&
				list_member_oid(order->relids, rt_fetch(scanrelid, order->rtable)->relid);
		default:
			return false;
	}
}

/*
 * How the expressions of a node move into an LLM Batch node:
 *   SPLIT_TLIST   above P: every call-free maximal subtree and every call
 *                 argument becomes a P' column (evaluated in P, as before);
 *   SPLIT_LEAF    above P, with moved quals: only leaves (Vars, Aggrefs,
 *                 GroupingFuncs, WindowFuncs, Params) become P' columns, the
 *                 node evaluates everything else after the quals passed;
 *   SPLIT_APPEND  below an Agg: the node passes its child's columns and
 *                 appends the call results; the Agg's expressions stay in
 *                 the Agg, each call replaced by a Var on its column.
 * The node's scan tuple is [call results ..., child columns ...] in every
 * mode; its expressions (target list, call arguments, quals) are over it
 * (INDEX_VAR).
 */
typedef enum SplitMode
{
	SPLIT_TLIST,
	SPLIT_LEAF,
	SPLIT_APPEND
} SplitMode;

typedef struct Split
{
	FunctionCache *fc;
	SplitMode	mode;
	int			n_calls;		/* calls counted by the first pass */
	int			n_child;		/* SPLIT_APPEND: the child's columns */
	int			next_call;
	int			stage;			/* stage of the calls being collected */
	List	   *child_tlist;	/* P' target entries (not SPLIT_APPEND) */
	List	   *calls;			/* per call: FuncExpr, args over the scan tuple */
	List	   *stages;			/* per call: its stage */
	List	   *agg_from;		/* SPLIT_APPEND: Aggrefs seen ... */
	List	   *agg_to;			/* ... and what they became */
} Split;

/* The argument count of funcid if it is a batchable generation function, else -1. */
static int
batchable_nargs(FunctionCache *fc, Oid funcid)
{
	ListCell   *lc;
	ListCell   *ln;
	int			nargs = 0;

	forboth(lc, fc->known_calls, ln, fc->known_nargs)
		if (lfirst_oid(lc) == funcid)
			return lfirst_int(ln);
	if (list_member_oid(fc->known_others, funcid))
		return -1;
	if (llm_batchable_function(funcid, &nargs) != NULL)
	{
		fc->known_calls = lappend_oid(fc->known_calls, funcid);
		fc->known_nargs = lappend_int(fc->known_nargs, nargs);
		return nargs;
	}
	fc->known_others = lappend_oid(fc->known_others, funcid);
	return -1;
}

/*
 * A call the node may evaluate: a batchable function called with all its
 * arguments (the planner has filled in the defaults).
 */
static bool
is_batchable_call(FunctionCache *fc, Node *node)
{
	return node != NULL && IsA(node, FuncExpr) &&
		list_length(((FuncExpr *) node)->args) == batchable_nargs(fc, ((FuncExpr *) node)->funcid);
}

/*
 * Nodes that evaluate all their inputs unconditionally for every row, so a
 * call below them may be evaluated ahead.  Everything else (CASE, COALESCE,
 * AND/OR, aggregates, SubPlans, set-returning functions, ...) is opaque.
 */
static bool
is_spine_node(Node *node)
{
	switch (nodeTag(node))
	{
		case T_FuncExpr:
			return !((FuncExpr *) node)->funcretset;
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
			return !((OpExpr *) node)->opretset;
		case T_ScalarArrayOpExpr:	/* both inputs before the comparisons */
		case T_MinMaxExpr:		/* GREATEST/LEAST evaluate every argument */
		case T_RelabelType:
		case T_CoerceViaIO:
		case T_CollateExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_CoerceToDomain:
		case T_RowExpr:
		case T_ArrayExpr:
		case T_TargetEntry:		/* an aggregate's argument list */
			return true;
		case T_BoolExpr:
			return ((BoolExpr *) node)->boolop == NOT_EXPR;
		default:
			return false;
	}
}

static bool
contains_batchable_walker(Node *node, FunctionCache *fc)
{
	if (node == NULL)
		return false;
	if (is_batchable_call(fc, node))
		return true;
	if (IsA(node, List) || is_spine_node(node))
		return expression_tree_walker(node, contains_batchable_walker, fc);
	return false;
}

static bool
contains_batchable(FunctionCache *fc, Node *node)
{
	return contains_batchable_walker(node, fc);
}

static bool
count_calls_walker(Node *node, Split *s)
{
	if (node == NULL)
		return false;
	if (is_batchable_call(s->fc, node))
	{
		s->n_calls++;
		return false;			/* calls inside its arguments stay ordinary */
	}
	if (IsA(node, List) || is_spine_node(node))
		return expression_tree_walker(node, count_calls_walker, s);
	return false;
}

static Var *
scan_var(Index attno, Node *expr)
{
	return makeVar(INDEX_VAR, attno, exprType(expr), exprTypmod(expr),
				   exprCollation(expr), 0);
}

/* Add expr as a P' column (leaves: once each); returns its 0-based index. */
static int
add_child_column(Split *s, Expr *expr)
{
	int			resno = list_length(s->child_tlist) + 1;

	if (s->mode == SPLIT_LEAF)
	{
		ListCell   *lc;

		foreach(lc, s->child_tlist)
			if (equal(((TargetEntry *) lfirst(lc))->expr, expr))
				return foreach_current_index(lc);
	}
	s->child_tlist = lappend(s->child_tlist,
							 makeTargetEntry(expr, resno, NULL, false));
	return resno - 1;
}

/* SPLIT_LEAF: the leaves of an expression become P' columns. */
static Node *
leaf_mutator(Node *node, Split *s)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) || IsA(node, Aggref) || IsA(node, GroupingFunc) ||
		IsA(node, WindowFunc) || IsA(node, Param))
	{
		int			col = add_child_column(s, (Expr *) node);

		return (Node *) scan_var(s->n_calls + col + 1, node);
	}
	return expression_tree_mutator(node, leaf_mutator, s);
}

/* SPLIT_APPEND: a Var on the node's child (OUTER_VAR) in the node's scan tuple. */
static Node *
outer_to_scan_mutator(Node *node, Split *s)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == OUTER_VAR)
	{
		Var		   *v = (Var *) copyObject(node);

		v->varno = INDEX_VAR;
		v->varattno += s->n_calls;
		return (Node *) v;
	}
	return expression_tree_mutator(node, outer_to_scan_mutator, s);
}

/*
 * Mutator from an expression of P (in P's context) to the node's: each
 * batchable call becomes its result column; call-free subtrees by mode
 * (SPLIT_TLIST: a P' column each; SPLIT_LEAF: the node evaluates them over
 * the leaves; SPLIT_APPEND: they stay where they are).
 */
static Node *
split_mutator(Node *node, Split *s)
{
	if (node == NULL)
		return NULL;
	if (is_batchable_call(s->fc, node))
	{
		FuncExpr   *call = (FuncExpr *) copyObject(node);
		List	   *args = NIL;
		ListCell   *lc;
		int			j = s->next_call++;

		foreach(lc, ((FuncExpr *) node)->args)
		{
			Node	   *arg = lfirst(lc);

			if (s->mode == SPLIT_TLIST)
				arg = (Node *) scan_var(s->n_calls + add_child_column(s, (Expr *) arg) + 1, arg);
			else if (s->mode == SPLIT_LEAF)
				arg = leaf_mutator(arg, s);
			else
				arg = outer_to_scan_mutator(arg, s);
			args = lappend(args, arg);
		}
		call->args = args;
		s->calls = lappend(s->calls, call);
		s->stages = lappend_int(s->stages, s->stage);
		if (s->mode == SPLIT_APPEND)
			return (Node *) makeVar(OUTER_VAR, s->n_child + j + 1, exprType(node),
									exprTypmod(node), exprCollation(node), 0);
		return (Node *) scan_var(j + 1, node);
	}
	if (!IsA(node, List) && !contains_batchable(s->fc, node))
	{
		if (s->mode == SPLIT_TLIST)
			return (Node *) scan_var(s->n_calls + add_child_column(s, (Expr *) node) + 1, node);
		if (s->mode == SPLIT_LEAF)
			return leaf_mutator(node, s);
		return node;
	}
	return expression_tree_mutator(node, split_mutator, s);
}

/* An expression over the node's scan tuple as the node's child sees it (for EXPLAIN). */
static Node *
scan_to_outer_mutator(Node *node, int *n_calls)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == INDEX_VAR)
	{
		Var		   *v = (Var *) copyObject(node);

		Assert(v->varattno > *n_calls);
		v->varno = OUTER_VAR;
		v->varattno -= *n_calls;
		return (Node *) v;
	}
	return expression_tree_mutator(node, scan_to_outer_mutator, n_calls);
}

static bool
is_batch_node(Plan *plan)
{
	return plan != NULL && IsA(plan, CustomScan) &&
		((CustomScan *) plan)->methods == &llm_batch_plan_methods;
}


/*
 * The LLM Batch node over child for the calls and quals collected in s;
 * child_types: the child's target list (for the scan tuple's columns).
 */
static CustomScan *
make_batch_node(Split *s, Plan *child, List *node_tlist, List *quals, int *next_node_id)
{
	CustomScan *cscan = makeNode(CustomScan);
	List	   *scan_tlist = NIL;
	List	   *exprs = NIL;
	List	   *stages = NIL;
	ListCell   *lc;
	int			resno = 1;

	Assert(s->next_call == s->n_calls);
	foreach(lc, s->calls)
	{
		FuncExpr   *call = lfirst(lc);
		FuncExpr   *shown = (FuncExpr *) copyObject(call);

		shown->args = (List *) scan_to_outer_mutator((Node *) call->args, &s->n_calls);
		scan_tlist = lappend(scan_tlist, makeTargetEntry((Expr *) shown, resno++, NULL, false));
		exprs = lappend(exprs, call->args);
	}
	foreach(lc, child->targetlist)
	{
		TargetEntry *te = lfirst(lc);
		Node	   *e = (Node *) te->expr;

		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry((Expr *) makeVar(OUTER_VAR, te->resno, exprType(e),
															  exprTypmod(e), exprCollation(e), 0),
											 resno++, NULL, false));
	}
	exprs = list_concat(exprs, quals);
	foreach(lc, s->stages)
		stages = lappend(stages, makeInteger(lfirst_int(lc)));

	cscan->scan.plan.startup_cost = child->startup_cost;
	cscan->scan.plan.total_cost = child->total_cost;
	cscan->scan.plan.plan_rows = child->plan_rows;
	cscan->scan.plan.plan_width = child->plan_width;
	cscan->scan.plan.parallel_aware = false;
	cscan->scan.plan.parallel_safe = false;
	cscan->scan.plan.async_capable = false;
	cscan->scan.plan.plan_node_id = (*next_node_id)++;
	cscan->scan.plan.targetlist = node_tlist;
	cscan->scan.plan.qual = NIL;
	cscan->scan.plan.lefttree = child;
	cscan->scan.plan.extParam = bms_copy(child->extParam);
	cscan->scan.plan.allParam = bms_copy(child->allParam);
	cscan->scan.scanrelid = 0;
	cscan->flags = 0;
	cscan->custom_plans = NIL;
	cscan->custom_exprs = exprs;
	cscan->custom_private = list_make3(makeInteger(list_length(child->targetlist)),
									   makeInteger(list_length(quals)), stages);
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = NULL;
	cscan->methods = &llm_batch_plan_methods;
	return cscan;
}

/* Plan node types that compute their own target list (project). */
static bool
is_projecting_plan(Plan *plan)
{
	switch (nodeTag(plan))
	{
		case T_SeqScan:
		case T_SampleScan:
		case T_IndexScan:
		case T_IndexOnlyScan:
		case T_BitmapHeapScan:
		case T_TidScan:
		case T_TidRangeScan:
		case T_SubqueryScan:
		case T_FunctionScan:
		case T_TableFuncScan:
		case T_ValuesScan:
		case T_CteScan:
		case T_NamedTuplestoreScan:
		case T_WorkTableScan:
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
		case T_Agg:
		case T_WindowAgg:
		case T_Group:
		case T_Gather:
		case T_GatherMerge:
			return true;
		case T_Result:
			/* a childless Result yields at most one row: nothing to batch,
			 * and PL/pgSQL's simple-expression path needs it unwrapped */
			return plan->lefttree != NULL;
		default:
			return false;
	}
}

/*
 * The qual lists of a projecting node whose conjuncts filter its output rows
 * after everything else, so they may be evaluated above it: plan.qual, and
 * for an inner join also the join qual (equivalent there; for outer, semi
 * and anti joins it decides which rows match and stays).  Returns how many.
 */
static int
movable_quals(Plan *plan, List ***lists)
{
	int			n = 0;

	switch (nodeTag(plan))
	{
		case T_WindowAgg:
		case T_Gather:
		case T_GatherMerge:
			return 0;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			if (((Join *) plan)->jointype == JOIN_INNER)
				lists[n++] = &((Join *) plan)->joinqual;
			break;
		default:
			break;
	}
	lists[n++] = &plan->qual;
	return n;
}

/*
 * Place an LLM Batch node above a projecting node P for the batchable calls
 * of its target list and of its movable quals.  Returns the node, or P.
 * keep_order: the conjuncts after the first one with calls move too, so
 * the node evaluates them after it, in their order (keeps_qual_order).
 */
static Plan *
wrap_projection(FunctionCache *fc, Plan *plan, bool keep_order, int *next_node_id)
{
	List	  **lists[2];
	List	   *kept[2];
	int			n_lists = movable_quals(plan, lists);
	List	   *moved = NIL;
	List	   *quals = NIL;
	List	   *node_tlist = NIL;
	Split		s;
	ListCell   *lc;

	for (int i = 0; i < n_lists; i++)
	{
		kept[i] = NIL;
		foreach(lc, *lists[i])
		{
			if (contains_batchable(fc, lfirst(lc)) || (keep_order && moved != NIL))
				moved = lappend(moved, lfirst(lc));
			else
				kept[i] = lappend(kept[i], lfirst(lc));
		}
	}
	/* the node would evaluate SubPlans of P's target list or quals: keep the quals in P */
	if (moved != NIL && (contain_subplans((Node *) plan->targetlist) || contain_subplans((Node *) moved)))
		moved = NIL;

	memset(&s, 0, sizeof(s));
	s.fc = fc;
	count_calls_walker((Node *) moved, &s);
	foreach(lc, plan->targetlist)
		count_calls_walker((Node *) ((TargetEntry *) lfirst(lc))->expr, &s);
	if (s.n_calls == 0)
		return plan;

	s.mode = moved != NIL ? SPLIT_LEAF : SPLIT_TLIST;
	foreach(lc, moved)
	{
		s.stage = foreach_current_index(lc);
		quals = lappend(quals, split_mutator(lfirst(lc), &s));
	}
	s.stage = list_length(moved);
	foreach(lc, plan->targetlist)
	{
		TargetEntry *te = lfirst(lc);
		TargetEntry *newte = flatCopyTargetEntry(te);

		newte->expr = (Expr *) split_mutator((Node *) te->expr, &s);
		node_tlist = lappend(node_tlist, newte);
	}
	if (moved != NIL)
		for (int i = 0; i < n_lists; i++)
			*lists[i] = kept[i];
	plan->targetlist = s.child_tlist;
	return (Plan *) make_batch_node(&s, plan, node_tlist, quals, next_node_id);
}

/*
 * The parts of an aggregate evaluated for every input row: its arguments
 * (with ORDER BY and DISTINCT too) unless it has a FILTER, and the FILTER.
 * Direct arguments of ordered-set aggregates are evaluated once per group.
 * An aggregate whose parts hold a SubPlan stays as it is.
 */
static bool
agg_args_batchable(Aggref *a)
{
	return !contain_subplans((Node *) a->args) && !contain_subplans((Node *) a->aggfilter);
}

static bool
agg_count_walker(Node *node, Split *s)
{
	Aggref	   *a;

	if (node == NULL)
		return false;
	if (!IsA(node, Aggref))
		return expression_tree_walker(node, agg_count_walker, s);
	a = (Aggref *) node;
	/* one aggregate (one aggno) met twice is one transition: one set of calls */
	if (list_member(s->agg_from, a))
		return false;
	s->agg_from = lappend(s->agg_from, a);
	if (agg_args_batchable(a))
	{
		if (a->aggfilter == NULL)
			count_calls_walker((Node *) a->args, s);
		count_calls_walker((Node *) a->aggfilter, s);
	}
	return false;
}

static Node *
agg_mutator(Node *node, Split *s)
{
	Aggref	   *a;
	Aggref	   *n;
	ListCell   *f;
	ListCell   *t;

	if (node == NULL)
		return NULL;
	if (!IsA(node, Aggref))
		return expression_tree_mutator(node, agg_mutator, s);
	a = (Aggref *) node;
	forboth(f, s->agg_from, t, s->agg_to)
	{
		if (equal(lfirst(f), a))
			return copyObject(lfirst(t));
	}
	n = (Aggref *) copyObject(a);
	if (agg_args_batchable(a))
	{
		if (a->aggfilter == NULL)
			n->args = (List *) split_mutator((Node *) a->args, s);
		n->aggfilter = (Expr *) split_mutator((Node *) a->aggfilter, s);
	}
	s->agg_from = lappend(s->agg_from, a);
	s->agg_to = lappend(s->agg_to, n);
	return (Node *) n;
}

/*
 * Place an LLM Batch node between an Agg and its input for the batchable
 * calls its aggregates evaluate for every input row.  Not for grouping
 * sets (several passes would evaluate the arguments once per pass) nor for
 * partial aggregation (never holds the calls: they are parallel restricted).
 */
static void
wrap_agg_input(FunctionCache *fc, Agg *agg, int *next_node_id)
{
	Plan	   *child = agg->plan.lefttree;
	List	   *node_tlist = NIL;
	Split		s;
	ListCell   *lc;

	if (child == NULL || agg->aggstrategy == AGG_MIXED || agg->groupingSets != NIL ||
		agg->aggsplit != AGGSPLIT_SIMPLE)
		return;
	memset(&s, 0, sizeof(s));
	s.fc = fc;
	s.mode = SPLIT_APPEND;
	s.n_child = list_length(child->targetlist);
	agg_count_walker((Node *) agg->plan.targetlist, &s);
	agg_count_walker((Node *) agg->plan.qual, &s);
	if (s.n_calls == 0)
		return;

	s.agg_from = NIL;
	agg->plan.targetlist = (List *) agg_mutator((Node *) agg->plan.targetlist, &s);
	agg->plan.qual = (List *) agg_mutator((Node *) agg->plan.qual, &s);

	/* output: the child's columns, then the call results */
	foreach(lc, child->targetlist)
	{
		TargetEntry *te = lfirst(lc);

		node_tlist = lappend(node_tlist,
							 makeTargetEntry((Expr *) scan_var(s.n_calls + te->resno, (Node *) te->expr),
											 te->resno, NULL, false));
	}
	foreach(lc, s.calls)
		node_tlist = lappend(node_tlist,
							 makeTargetEntry((Expr *) scan_var(foreach_current_index(lc) + 1, lfirst(lc)),
											 list_length(node_tlist) + 1, NULL, false));
	agg->plan.lefttree = (Plan *) make_batch_node(&s, child, node_tlist, NIL, next_node_id);
}

/*
 * A node without quals directly below a Limit goes above it: the Limit does
 * not project, so it passes the node's child rows through unchanged (its
 * target list becomes the child's columns), reads only LIMIT + OFFSET of
 * them, and a Sort below still gets its bound.  WITH TIES compares key
 * columns, which must then be child columns.
 */
static Plan *
lift_above_limit(Limit *limit)
{
	CustomScan *cscan = (CustomScan *) limit->plan.lefttree;
	Plan	   *child;
	List	   *tlist = NIL;
	int			n_calls;
	ListCell   *lc;

	if (!is_batch_node((Plan *) cscan) || PRIV_N_QUALS(cscan) > 0)
		return (Plan *) limit;
	child = cscan->scan.plan.lefttree;
	n_calls = list_length(PRIV_STAGES(cscan));
	if (limit->limitOption == LIMIT_OPTION_WITH_TIES)
	{
		AttrNumber *cols = palloc(sizeof(AttrNumber) * Max(limit->uniqNumCols, 1));

		for (int i = 0; i < limit->uniqNumCols; i++)
		{
			TargetEntry *te = list_nth(cscan->scan.plan.targetlist, limit->uniqColIdx[i] - 1);
			Var		   *v = (Var *) te->expr;

			if (!IsA(v, Var) || v->varno != INDEX_VAR || v->varattno <= n_calls)
				return (Plan *) limit;
			cols[i] = v->varattno - n_calls;
		}
		limit->uniqColIdx = cols;
	}
	foreach(lc, child->targetlist)
	{
		TargetEntry *te = lfirst(lc);
		Node	   *e = (Node *) te->expr;

		tlist = lappend(tlist,
						makeTargetEntry((Expr *) makeVar(OUTER_VAR, te->resno, exprType(e),
														 exprTypmod(e), exprCollation(e), 0),
										te->resno, NULL, te->resjunk));
	}
	limit->plan.targetlist = tlist;
	limit->plan.lefttree = child;
	limit->plan.plan_width = child->plan_width;
	cscan->scan.plan.lefttree = (Plan *) limit;
	cscan->scan.plan.startup_cost = limit->plan.startup_cost;
	cscan->scan.plan.total_cost = limit->plan.total_cost;
	cscan->scan.plan.plan_rows = limit->plan.plan_rows;
	cscan->scan.plan.extParam = bms_union(cscan->scan.plan.extParam, limit->plan.extParam);
	cscan->scan.plan.allParam = bms_union(cscan->scan.plan.allParam, limit->plan.allParam);
	return (Plan *) cscan;
}

/* Largest plan_node_id in a plan tree. */
static int
max_node_id(Plan *plan)
{
	int			m;
	ListCell   *lc;

	if (plan == NULL)
		return -1;
	m = plan->plan_node_id;
	m = Max(m, max_node_id(plan->lefttree));
	m = Max(m, max_node_id(plan->righttree));
	foreach(lc, llm_plan_other_children(plan))
		m = Max(m, max_node_id(lfirst(lc)));
	return m;
}

List *
llm_plan_other_children(Plan *plan)
{
	switch (nodeTag(plan))
	{
		case T_Append:
			return ((Append *) plan)->appendplans;
		case T_MergeAppend:
			return ((MergeAppend *) plan)->mergeplans;
		case T_BitmapAnd:
			return ((BitmapAnd *) plan)->bitmapplans;
		case T_BitmapOr:
			return ((BitmapOr *) plan)->bitmapplans;
		case T_SubqueryScan:
			return list_make1(((SubqueryScan *) plan)->subplan);
		case T_CustomScan:
			return ((CustomScan *) plan)->custom_plans;
		default:
			return NIL;
	}
}

/*
 * Rewrite a plan tree bottom-up.  no_wrap: the parent needs mark/restore of
 * this node (merge join inner), which the batch node does not support.
 */
static Plan *
rewrite_plan(FunctionCache *fc, const QualOrder *order, Plan *plan, bool no_wrap,
			 int *next_node_id)
{
	ListCell   *lc;

	if (plan == NULL)
		return NULL;
	switch (nodeTag(plan))
	{
		case T_Gather:
		case T_GatherMerge:
			/* below runs in parallel workers, where no call can be (they
			 * are parallel restricted); the Gather itself projects them */
			break;
		case T_CustomScan:
		case T_ForeignScan:
			return plan;
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				lfirst(lc) = rewrite_plan(fc, order, lfirst(lc), false, next_node_id);
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				lfirst(lc) = rewrite_plan(fc, order, lfirst(lc), false, next_node_id);
			break;
		case T_SubqueryScan:
			((SubqueryScan *) plan)->subplan =
				rewrite_plan(fc, order, ((SubqueryScan *) plan)->subplan, false, next_node_id);
			break;
		case T_MergeJoin:
			plan->lefttree = rewrite_plan(fc, order, plan->lefttree, false, next_node_id);
			plan->righttree = rewrite_plan(fc, order, plan->righttree, true, next_node_id);
			break;
		case T_Limit:
			plan->lefttree = rewrite_plan(fc, order, plan->lefttree, false, next_node_id);
			return no_wrap ? plan : lift_above_limit((Limit *) plan);
		default:
			plan->lefttree = rewrite_plan(fc, order, plan->lefttree, false, next_node_id);
			plan->righttree = rewrite_plan(fc, order, plan->righttree, false, next_node_id);
			break;
	}
	if (IsA(plan, Agg))
		wrap_agg_input(fc, (Agg *) plan, next_node_id);
	if (!no_wrap && is_projecting_plan(plan))
		return wrap_projection(fc, plan, keeps_qual_order(order, plan), next_node_id);
	return plan;
}

/* keeps_qual_order for batch_lift.c */
static bool
lift_keeps_order(Plan *scan, void *arg)
{
	const QualOrder *order = arg;
	Index		scanrelid = ((Scan *) scan)->scanrelid;

	if (keeps_qual_order(order, scan))
		return true;
	return scanrelid > 0 &&
		list_member_oid(order->barrier_relids, rt_fetch(scanrelid, order->rtable)->relid);
}

/*
 * planner_hook: standard planning, then the batch rewrite of the finished
 * plan (main tree and subplans).  Scrollable cursors are left alone: the
 * node cannot scan backward.
 */
static PlannedStmt *
batch_planner(Query *parse, const char *query_string, int cursorOptions,
			  ParamListInfo boundParams)
{
	PlannedStmt *volatile stmt = NULL;
	QualOrder  *outer_order = planning_order;
	QualOrder	order;
	FunctionCache fc;
	int			next_id;
	List	   *lifted;
	ListCell   *lc;

	/* planning may plan other statements (SQL functions folded, SPI) */
	memset(&order, 0, sizeof(order));
	planning_order = &order;
	PG_TRY();
	{
		if (prev_planner_hook)
			stmt = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
		else
			stmt = standard_planner(parse, query_string, cursorOptions, boundParams);
	}
	PG_FINALLY();
	{
		planning_order = outer_order;
	}
	PG_END_TRY();

	if (!llm_enable_batch_scan || llm_shared == NULL || IsParallelWorker() ||
		(cursorOptions & CURSOR_OPT_SCROLL) || stmt->commandType == CMD_UTILITY)
		return stmt;

	memset(&fc, 0, sizeof(fc));
	next_id = max_node_id(stmt->planTree);
	foreach(lc, stmt->subplans)
		next_id = Max(next_id, max_node_id(lfirst(lc)));
	next_id++;

	order.rtable = stmt->rtable;
	/* model-calling filters above joins first (batch_lift.h): the rewrite batches them there */
	lifted = llm_lift_filters(stmt->planTree, stmt->rtable, lift_keeps_order, &order);
	foreach(lc, stmt->subplans)
		lifted = list_concat(lifted, llm_lift_filters(lfirst(lc), stmt->rtable, lift_keeps_order, &order));
	stmt->planTree = rewrite_plan(&fc, &order, stmt->planTree, false, &next_id);
	foreach(lc, stmt->subplans)
		lfirst(lc) = rewrite_plan(&fc, &order, lfirst(lc), false, &next_id);
	llm_lift_annotate(stmt->planTree, lifted);
	foreach(lc, stmt->subplans)
		llm_lift_annotate(lfirst(lc), lifted);
	/* nodes that may be read only in part run no cascade (batch_cascade.h) */
	llm_cascade_mark_plan(stmt->planTree, (cursorOptions & CURSOR_OPT_FAST_PLAN) != 0, "a cursor");
	foreach(lc, stmt->subplans)
		llm_cascade_mark_plan(lfirst(lc), true, "in a subquery");
	return stmt;
}

void
llm_batch_init(void)
{
	DefineCustomIntVariable("llm.batch_window",
							"Rows an LLM Batch node keeps with generations in flight, at most.",
							"Read when the statement starts executing. The window starts at 4 rows and grows by one "
							"for each row the engine starts generating, up to this value; rows finished but not yet "
							"returned do not count (up to twice this value are buffered). 1 evaluates the calls row by row.",
							&llm_batch_window,
							64, 1, 65536,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.enable_batch_scan",
							 "Plan LLM Batch nodes for batchable calls in target lists, quals and aggregate arguments.",
							 "Planner setting: off keeps every call an ordinary row-by-row function call.",
							 &llm_enable_batch_scan,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.dedup_calls",
							 "Within one statement, identical deterministic calls share one request.",
							 "An LLM Batch node reads it when the statement starts executing, a row-by-row call at each call. "
							 "Calls whose request (model, rendered prompt, every option, role) equals one the statement "
							 "already sent share its answer instead of running the model again; "
							 "sampling without a seed is never shared. off calls the model once per row, as PostgreSQL "
							 "evaluates a volatile function.",
							 &llm_dedup_calls,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	llm_lift_init();
	llm_cascade_define_gucs();
	llm_dedup_init();

	RegisterCustomScanMethods(&llm_batch_plan_methods);

	prev_planner_hook = planner_hook;
	planner_hook = batch_planner;
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = batch_set_rel_pathlist;
}
