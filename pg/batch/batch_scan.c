/*
 * batch_scan.c — the "LLM Batch" executor node (a CustomScan) and the
 * planner hook that places it.
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
 * At run time the node reads rows ahead of its parent: each row's calls are
 * submitted through the channel at once, rows with calls in flight are the
 * window (llm.batch_window at most), and the rows are emitted in their
 * original order as their results arrive.  A row with quals passes through
 * stages: the calls of each moved conjunct, then that conjunct, ..., then the
 * target-list calls.  Design, read-ahead rule and fallbacks:
 * docs/BATCH_SCAN.md.
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

#include "batch_scan.h"
#include "channel/client.h"
#include "common/progress.h"
#include "common/registry.h"
#include "pg/sql/sql_args.h"
#include "pg/sql/sql_result.h"

/* rows with calls in flight when a scan starts (slow start) */
#define BATCH_INITIAL_WINDOW 4

int			llm_batch_window = 64;
bool		llm_enable_batch_scan = true;

static planner_hook_type prev_planner_hook = NULL;
static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

static const CustomScanMethods batch_plan_methods;

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
	List	   *rtable;			/* the finished plan's range table */
} QualOrder;

/* The statement being planned (NULL outside batch_planner). */
static QualOrder *planning_order = NULL;

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
	if (planning_order == NULL || rel->baserestrict_min_security >= root->qual_security_level)
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
		((CustomScan *) plan)->methods == &batch_plan_methods;
}

/*
 * custom_private of the node: [n_child, n_quals, [stage per call]];
 * custom_exprs: [[args of call 0], ..., [args of call n-1], qual 0, ...].
 */
#define PRIV_N_CHILD(cs)	intVal(linitial((cs)->custom_private))
#define PRIV_N_QUALS(cs)	intVal(lsecond((cs)->custom_private))
#define PRIV_STAGES(cs)		((List *) lthird((cs)->custom_private))

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
	cscan->methods = &batch_plan_methods;
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
	List	   *children = NIL;

	if (plan == NULL)
		return -1;
	m = plan->plan_node_id;
	m = Max(m, max_node_id(plan->lefttree));
	m = Max(m, max_node_id(plan->righttree));
	switch (nodeTag(plan))
	{
		case T_Append:
			children = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_BitmapAnd:
			children = ((BitmapAnd *) plan)->bitmapplans;
			break;
		case T_BitmapOr:
			children = ((BitmapOr *) plan)->bitmapplans;
			break;
		case T_SubqueryScan:
			m = Max(m, max_node_id(((SubqueryScan *) plan)->subplan));
			break;
		case T_CustomScan:
			children = ((CustomScan *) plan)->custom_plans;
			break;
		default:
			break;
	}
	foreach(lc, children)
		m = Max(m, max_node_id(lfirst(lc)));
	return m;
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
	stmt->planTree = rewrite_plan(&fc, &order, stmt->planTree, false, &next_id);
	foreach(lc, stmt->subplans)
		lfirst(lc) = rewrite_plan(&fc, &order, lfirst(lc), false, &next_id);
	return stmt;
}

/* ------------------------------------------------------------------------
 * Execution
 * ------------------------------------------------------------------------
 */

typedef enum RowState
{
	ROW_FREE,					/* slot unused */
	ROW_RUNNING,				/* calls of its current stage in flight */
	ROW_READY,					/* every stage done: can be emitted */
	ROW_FILTERED,				/* a moved qual rejected it */
	ROW_FAILED					/* a qual stage's call failed: raised at emission */
} RowState;

/* One row read ahead, from read until the call after its emission. */
typedef struct BatchRow
{
	MemoryContext cxt;			/* everything of this row; reset on reuse */
	MinimalTuple tuple;			/* copy of the child row */
	RowState	state;
	int			stage;			/* current stage */
	bool		started;		/* the engine started the current stage's calls */
	uint64	   *ids;			/* per call: request id, 0 if none in flight */
	LlmResult **results;		/* per call: taken (or local) result */
	ErrorData **errors;			/* per call: argument error, raised at emission */
	bool	   *is_null;		/* per call: NULL prompt, the value is NULL */
	bool	   *on_error_null;
	Datum	   *values;			/* per call of a qual stage: its value ... */
	bool	   *nulls;			/* ... and whether NULL */
} BatchRow;

typedef struct BatchScanState
{
	CustomScanState css;
	int			n_calls;
	int			n_child;
	int			n_quals;		/* stages 0..n_quals-1: the moved conjuncts */
	int		   *stage;			/* per call: its stage (n_quals: the target list) */
	int		   *nargs;			/* per call: its argument count */
	ExprState ***args;			/* per call: its arguments, over the scan tuple */
	int16	  **arg_typlen;		/* per call and argument: typlen (detoast) */
	ExprState **quals;			/* per qual stage */
	const LlmArgMap **maps;		/* per call: its arguments by name (sql_args.h) */
	LlmCallBuildFn *build;		/* per call: request builder */
	int			max_window;		/* llm.batch_window at executor start (1 in EPQ) */
	int			window;			/* rows with calls in flight at most; grows to max_window */
	int			capacity;		/* rows read and not emitted at most */
	BatchRow   *ring;			/* capacity + 1 rows */
	MemoryContext row_cxt;		/* where ring slots are set up */
	int			ring_size;
	int			head;			/* oldest row not yet emitted */
	int			count;			/* rows read and not yet emitted */
	int			emitted;		/* ring index of the last emitted row, -1 */
	int			n_running;		/* rows in ROW_RUNNING */
	int			in_flight;		/* requests in flight */
	bool		child_exhausted;	/* the child returned its last row */
	bool		child_done;		/* ... and the drained rows are read too */
	bool		drain_child;	/* hot standby: read the child to the end before waiting */
	Tuplestorestate *drained;	/* the child's remaining rows, if drained */
	TupleTableSlot *drained_row;
	TupleTableSlot *child_row;	/* deforms a stored child row */
	TupleTableSlot *eval_slot;	/* scan tuple for arguments and quals of rows read ahead */
	ExprContext *eval_cxt;
	MemoryContext tmp_cxt;		/* per-request temporaries */
	/* EXPLAIN ANALYZE */
	int64		n_requests;
	int64		n_used;
	int64		n_aborted;
	int64		n_failed;
	int64		n_filtered;
	int			max_in_flight;
	int64		prompt_tokens;
	int64		cached_tokens;
	int64		completion_tokens;
	double		ttft_sum_ms;
	int64		ttft_count;
} BatchScanState;

static Node *batch_create_state(CustomScan *cscan);
static void batch_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *batch_exec(CustomScanState *node);
static void batch_end(CustomScanState *node);
static void batch_rescan(CustomScanState *node);
static void batch_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomScanMethods batch_plan_methods = {
	.CustomName = "LLM Batch",
	.CreateCustomScanState = batch_create_state,
};

static const CustomExecMethods batch_exec_methods = {
	.CustomName = "LLM Batch",
	.BeginCustomScan = batch_begin,
	.ExecCustomScan = batch_exec,
	.EndCustomScan = batch_end,
	.ReScanCustomScan = batch_rescan,
	.ExplainCustomScan = batch_explain,
};

static Node *
batch_create_state(CustomScan *cscan)
{
	BatchScanState *st = (BatchScanState *) newNode(sizeof(BatchScanState), T_CustomScanState);
	ListCell   *lc;

	st->css.methods = &batch_exec_methods;
	st->n_child = PRIV_N_CHILD(cscan);
	st->n_quals = PRIV_N_QUALS(cscan);
	st->n_calls = list_length(PRIV_STAGES(cscan));
	st->stage = palloc(sizeof(int) * Max(st->n_calls, 1));
	foreach(lc, PRIV_STAGES(cscan))
		st->stage[foreach_current_index(lc)] = intVal(lfirst(lc));
	return (Node *) st;
}

/*
 * The node evaluates its calls itself, so it must refuse what ExecInitFunc
 * would: EXECUTE for the current user (inside a SECURITY DEFINER function,
 * its owner; through a view, the caller, as for any function) and the
 * function-execute hook of security modules.  Checked at every executor
 * start, so a cached plan sees a REVOKE made after it was planned.  The
 * error is PostgreSQL's own for a call (42501, the function's name), with
 * a hint naming the grant that is missing.
 */
static void
check_calls_executable(CustomScan *cscan, int n_calls)
{
	ListCell   *lc;

	foreach(lc, cscan->custom_scan_tlist)
	{
		FuncExpr   *call = (FuncExpr *) ((TargetEntry *) lfirst(lc))->expr;

		if (foreach_current_index(lc) == n_calls)
			break;
		Assert(IsA(call, FuncExpr));
		if (pg_proc_aclcheck(call->funcid, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for function %s", get_func_name(call->funcid)),
					 errhint("The generation functions are granted to the role llm_user: GRANT llm_user TO %s;",
							 quote_identifier(GetUserNameFromId(GetUserId(), false)))));
		InvokeFunctionExecuteHook(call->funcid);
	}
}

static void
batch_begin(CustomScanState *node, EState *estate, int eflags)
{
	BatchScanState *st = (BatchScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	PlanState  *child;
	int			n = st->n_calls;

	check_calls_executable(cscan, n);
	st->nargs = palloc(sizeof(int) * Max(n, 1));
	st->args = palloc(sizeof(ExprState **) * Max(n, 1));
	st->arg_typlen = palloc(sizeof(int16 *) * Max(n, 1));
	st->maps = palloc(sizeof(LlmArgMap *) * Max(n, 1));
	st->build = palloc(sizeof(LlmCallBuildFn) * Max(n, 1));
	for (int j = 0; j < n; j++)
	{
		FuncExpr   *call = (FuncExpr *) ((TargetEntry *) list_nth(cscan->custom_scan_tlist, j))->expr;
		List	   *args = list_nth(cscan->custom_exprs, j);
		ListCell   *lc;

		st->nargs[j] = list_length(args);
		st->args[j] = palloc(sizeof(ExprState *) * Max(st->nargs[j], 1));
		st->arg_typlen[j] = palloc(sizeof(int16) * Max(st->nargs[j], 1));
		foreach(lc, args)
		{
			int			a = foreach_current_index(lc);

			st->args[j][a] = ExecInitExpr(lfirst(lc), &node->ss.ps);
			st->arg_typlen[j][a] = get_typlen(exprType(lfirst(lc)));
		}
		st->maps[j] = llm_arg_map_for(call->funcid, CurrentMemoryContext);
		st->build[j] = llm_arg_map_function(st->maps[j])->batch_build;
		if (st->build[j] == NULL)
			st->build[j] = llm_call_build_text;
	}
	st->quals = palloc(sizeof(ExprState *) * Max(st->n_quals, 1));
	for (int q = 0; q < st->n_quals; q++)
		st->quals[q] = ExecInitQual(list_make1(list_nth(cscan->custom_exprs, n + q)), &node->ss.ps);

	child = ExecInitNode(outerPlan(cscan), estate, eflags);
	outerPlanState(node) = child;

	/* an EvalPlanQual recheck runs one row: no read-ahead */
	st->max_window = estate->es_epq_active != NULL ? 1 : Max(llm_batch_window, 1);
	st->window = Min(BATCH_INITIAL_WINDOW, st->max_window);
	st->capacity = 2 * st->max_window - 1;
	st->ring_size = st->capacity + 1;
	st->ring = palloc0(sizeof(BatchRow) * st->ring_size);	/* rows set up on first use */
	st->row_cxt = CurrentMemoryContext;
	st->head = 0;
	st->count = 0;
	st->emitted = -1;
	st->child_exhausted = false;
	st->child_done = false;
	/*
	 * On a hot standby, WAL replay of a cleanup record waits for any buffer
	 * pin and, after max_standby_streaming_delay, cancels the holder; the
	 * child scan keeps its current page pinned between rows.
	 */
	st->drain_child = RecoveryInProgress();
	st->drained = NULL;
	st->drained_row = ExecInitExtraTupleSlot(estate, ExecGetResultType(child), &TTSOpsMinimalTuple);
	st->child_row = ExecInitExtraTupleSlot(estate, ExecGetResultType(child), &TTSOpsMinimalTuple);
	st->eval_slot = ExecInitExtraTupleSlot(estate, node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
										   &TTSOpsVirtual);
	st->eval_cxt = CreateExprContext(estate);
	st->tmp_cxt = AllocSetContextCreate(CurrentMemoryContext, "llm batch request",
										ALLOCSET_DEFAULT_SIZES);
}

/* A ring slot's first use: its memory context and per-call arrays. */
static void
init_row(BatchScanState *st, BatchRow *r)
{
	int			n = Max(st->n_calls, 1);

	r->cxt = AllocSetContextCreate(st->row_cxt, "llm batch row", ALLOCSET_SMALL_SIZES);
	r->ids = MemoryContextAllocZero(st->row_cxt, sizeof(uint64) * n);
	r->results = MemoryContextAllocZero(st->row_cxt, sizeof(LlmResult *) * n);
	r->errors = MemoryContextAllocZero(st->row_cxt, sizeof(ErrorData *) * n);
	r->is_null = MemoryContextAllocZero(st->row_cxt, sizeof(bool) * n);
	r->on_error_null = MemoryContextAllocZero(st->row_cxt, sizeof(bool) * n);
	r->values = MemoryContextAllocZero(st->row_cxt, sizeof(Datum) * n);
	r->nulls = MemoryContextAllocZero(st->row_cxt, sizeof(bool) * n);
	for (int j = 0; j < st->n_calls; j++)
		r->nulls[j] = true;
}

/* Forget a row: abort its requests still in flight, free its memory. */
static void
release_row(BatchScanState *st, BatchRow *r)
{
	if (r->cxt == NULL)
		return;
	for (int j = 0; j < st->n_calls; j++)
	{
		if (r->ids[j] != 0)
		{
			llm_abort_request(r->ids[j]);
			st->n_aborted++;
			st->in_flight--;
		}
		r->ids[j] = 0;
		r->results[j] = NULL;
		r->errors[j] = NULL;
		r->is_null[j] = false;
		r->on_error_null[j] = false;
		r->nulls[j] = true;
	}
	if (r->state == ROW_RUNNING)
		st->n_running--;
	r->state = ROW_FREE;
	r->tuple = NULL;
	MemoryContextReset(r->cxt);
}

/* Abort everything read ahead; the node starts over (rescan) or ends. */
static void
release_all(BatchScanState *st)
{
	if (st->emitted >= 0)
		release_row(st, &st->ring[st->emitted]);
	for (int i = 0; i < st->count; i++)
		release_row(st, &st->ring[(st->head + i) % st->ring_size]);
	Assert(st->n_running == 0 && st->in_flight == 0);
	st->head = 0;
	st->count = 0;
	st->emitted = -1;
	st->window = Min(BATCH_INITIAL_WINDOW, st->max_window);
	if (st->drained != NULL)
	{
		tuplestore_end(st->drained);
		st->drained = NULL;
	}
}

/*
 * The scan tuple of row r for evaluating its arguments and quals ahead: the
 * values of the qual-stage calls done so far, NULL for the others.
 */
static void
fill_eval_slot(BatchScanState *st, BatchRow *r)
{
	TupleTableSlot *slot = st->eval_slot;

	ExecClearTuple(slot);
	ExecStoreMinimalTuple(r->tuple, st->child_row, false);
	slot_getallattrs(st->child_row);
	for (int j = 0; j < st->n_calls; j++)
	{
		slot->tts_values[j] = r->values[j];
		slot->tts_isnull[j] = r->nulls[j];
	}
	for (int i = 0; i < st->n_child; i++)
	{
		slot->tts_values[st->n_calls + i] = st->child_row->tts_values[i];
		slot->tts_isnull[st->n_calls + i] = st->child_row->tts_isnull[i];
	}
	ExecStoreVirtualTuple(slot);
	st->eval_cxt->ecxt_scantuple = slot;
}

/*
 * Build and submit the request of call j from its argument values (over
 * the eval slot).  Argument errors of the request (an invalid option) are
 * kept and raised when the row is emitted, as row-at-a-time evaluation
 * would (a LIMIT may never reach that row).
 */
static void
submit_call(BatchScanState *st, BatchRow *r, int j)
{
	int			nargs = st->nargs[j];
	NullableDatum *args;
	LlmCall		call;
	LlmResult  *refused = NULL;
	bool		has_prompt = false;
	MemoryContext old;

	MemoryContextReset(st->tmp_cxt);
	old = MemoryContextSwitchTo(st->tmp_cxt);
	args = palloc(sizeof(NullableDatum) * Max(nargs, 1));
	for (int a = 0; a < nargs; a++)
	{
		bool		isnull;
		Datum		v = ExecEvalExpr(st->args[j][a], st->eval_cxt, &isnull);

		/* detoast here, outside the error trap below: it reads buffers */
		if (!isnull && st->arg_typlen[j][a] == -1)
			v = PointerGetDatum(PG_DETOAST_DATUM_PACKED(v));
		args[a].value = v;
		args[a].isnull = isnull;
	}

	PG_TRY();
	{
		has_prompt = st->build[j] (st->maps[j], args, nargs, &call, &refused);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(r->cxt);
		edata = CopyErrorData();
		if (edata->elevel > ERROR || edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			PG_RE_THROW();
		FlushErrorState();
		r->errors[j] = edata;
		MemoryContextSwitchTo(old);
		return;
	}
	PG_END_TRY();

	if (!has_prompt)
		r->is_null[j] = true;
	else if (refused != NULL)
	{
		MemoryContextSwitchTo(r->cxt);
		r->results[j] = llm_local_failure(refused->sqlstate, refused->message);
	}
	else
	{
		llm_call_set_batch(&call);
		r->ids[j] = llm_submit(&call.req);
		st->n_requests++;
		st->in_flight++;
		st->max_in_flight = Max(st->max_in_flight, st->in_flight);
	}
	r->on_error_null[j] = has_prompt && call.on_error_null;
	MemoryContextSwitchTo(old);
}

/* Submit the calls of r's current stage; the row is running if any went out. */
static void
submit_stage(BatchScanState *st, BatchRow *r)
{
	bool		any = false;

	ResetExprContext(st->eval_cxt);
	fill_eval_slot(st, r);
	for (int j = 0; j < st->n_calls; j++)
		if (st->stage[j] == r->stage)
		{
			submit_call(st, r, j);
			any |= r->ids[j] != 0;
		}
	r->started = false;
	if (any && r->state != ROW_RUNNING)
		st->n_running++;
	else if (!any && r->state == ROW_RUNNING)
		st->n_running--;
	r->state = any ? ROW_RUNNING : ROW_READY;
}

/* Take a finished request's result into the row. */
static void
take_call(BatchScanState *st, BatchRow *r, int j)
{
	MemoryContext old = MemoryContextSwitchTo(r->cxt);
	LlmResult  *res = llm_take_result(r->ids[j]);

	MemoryContextSwitchTo(old);
	r->ids[j] = 0;
	r->results[j] = res;
	st->in_flight--;
	st->n_used++;
	if (res->failed)
		st->n_failed++;
	else
	{
		st->prompt_tokens += res->usage.prompt_tokens;
		st->cached_tokens += res->usage.cached_tokens;
		st->completion_tokens += res->usage.completion_tokens;
		st->ttft_sum_ms += res->usage.ttft_ms;
		st->ttft_count++;
	}
}

/* A call's failure that row-at-a-time evaluation would raise. */
static bool
call_raises(BatchRow *r, int j)
{
	return r->errors[j] != NULL ||
		(r->results[j] != NULL && r->results[j]->failed && !r->on_error_null[j]);
}

/*
 * Move row r on as far as its finished requests allow: take the results of
 * a finished stage; for a qual stage convert them, evaluate the conjunct
 * and submit the next stage's calls (or drop the row).  A raising failure
 * of a qual stage's call waits for the row's turn (ROW_FAILED); one of the
 * target list's calls is raised at emission.
 */
static void
advance(BatchScanState *st, BatchRow *r)
{
	while (r->state == ROW_RUNNING || r->state == ROW_READY)
	{
		bool		pass;

		for (int j = 0; j < st->n_calls; j++)
			if (st->stage[j] == r->stage && r->ids[j] != 0 && !llm_request_is_done(r->ids[j]))
				return;
		for (int j = 0; j < st->n_calls; j++)
			if (st->stage[j] == r->stage && r->ids[j] != 0)
				take_call(st, r, j);
		if (r->state == ROW_RUNNING)
			st->n_running--;
		r->state = ROW_READY;
		if (r->stage == st->n_quals)
			return;

		for (int j = 0; j < st->n_calls; j++)
			if (st->stage[j] == r->stage && call_raises(r, j))
			{
				r->state = ROW_FAILED;
				return;
			}
		for (int j = 0; j < st->n_calls; j++)
			if (st->stage[j] == r->stage)
			{
				MemoryContext old = MemoryContextSwitchTo(r->cxt);

				r->nulls[j] = true;
				r->values[j] = (Datum) 0;
				if (!r->is_null[j])
					r->values[j] = llm_arg_map_function(st->maps[j])->batch_value(r->results[j],
																				   r->on_error_null[j],
																				   &r->nulls[j]);
				MemoryContextSwitchTo(old);
			}
		ResetExprContext(st->eval_cxt);
		fill_eval_slot(st, r);
		pass = ExecQual(st->quals[r->stage], st->eval_cxt);
		if (!pass)
		{
			r->state = ROW_FILTERED;
			st->n_filtered++;
			return;
		}
		r->stage++;
		submit_stage(st, r);
	}
}

/* The next child row (from the drained rows once there are), or NULL at the end. */
static TupleTableSlot *
next_child_row(BatchScanState *st)
{
	TupleTableSlot *slot;

	if (st->drained != NULL)
	{
		if (tuplestore_gettupleslot(st->drained, true, false, st->drained_row))
			return st->drained_row;
		st->child_done = true;
		return NULL;
	}
	slot = ExecProcNode(outerPlanState(st));
	if (TupIsNull(slot))
	{
		st->child_exhausted = true;
		st->child_done = true;
		return NULL;
	}
	return slot;
}

/*
 * Read every remaining child row into a tuplestore (memory up to work_mem,
 * then a temporary file), so the child's scans finish and release their
 * buffer pins before the node waits for generations.
 */
static void
drain_child(BatchScanState *st)
{
	MemoryContext old = MemoryContextSwitchTo(st->css.ss.ps.state->es_query_cxt);

	st->drained = tuplestore_begin_heap(false, false, work_mem);
	MemoryContextSwitchTo(old);
	for (;;)
	{
		TupleTableSlot *slot = ExecProcNode(outerPlanState(st));

		if (TupIsNull(slot))
			break;
		tuplestore_puttupleslot(st->drained, slot);
	}
	st->child_exhausted = true;
}

/* Read one child row into the ring and submit its first stage; false at the end. */
static bool
read_ahead_one(BatchScanState *st)
{
	TupleTableSlot *slot = next_child_row(st);
	BatchRow   *r;
	MemoryContext old;

	if (slot == NULL)
		return false;
	r = &st->ring[(st->head + st->count) % st->ring_size];
	Assert(r->state == ROW_FREE);
	if (r->cxt == NULL)
		init_row(st, r);
	slot_getallattrs(slot);
	old = MemoryContextSwitchTo(r->cxt);
	r->tuple = ExecCopySlotMinimalTuple(slot);
	MemoryContextSwitchTo(old);
	st->count++;
	r->stage = 0;
	submit_stage(st, r);
	advance(st, r);
	return true;
}

/*
 * Progress of the rows read ahead after responses arrived: slow start (one
 * more row in flight for each row whose current calls the engine started),
 * finished stages.
 */
static void
progress(BatchScanState *st)
{
	for (int i = 0; i < st->count; i++)
	{
		BatchRow   *r = &st->ring[(st->head + i) % st->ring_size];

		if (r->state != ROW_RUNNING)
			continue;
		if (!r->started)
			for (int j = 0; j < st->n_calls; j++)
				if (r->ids[j] != 0 && llm_request_started(r->ids[j]))
				{
					r->started = true;
					if (st->window < st->max_window)
						st->window++;
					break;
				}
		advance(st, r);
	}
}

/* Drop rejected rows at the head. */
static void
pop_filtered(BatchScanState *st)
{
	while (st->count > 0 && st->ring[st->head].state == ROW_FILTERED)
	{
		release_row(st, &st->ring[st->head]);
		st->head = (st->head + 1) % st->ring_size;
		st->count--;
	}
}

static TupleTableSlot *
batch_exec(CustomScanState *node)
{
	BatchScanState *st = (BatchScanState *) node;
	TupleTableSlot *scan = node->ss.ss_ScanTupleSlot;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	BatchRow   *r;

	/* the previous row's values were referenced by the returned slot until now */
	if (st->emitted >= 0)
	{
		release_row(st, &st->ring[st->emitted]);
		st->emitted = -1;
	}
	ResetExprContext(econtext);

	for (;;)
	{
		progress(st);
		pop_filtered(st);
		/* rows finished but not emitted do not count against the window */
		while (!st->child_done && st->n_running < st->window && st->count < st->capacity)
			if (!read_ahead_one(st))
				break;
		/* responses may have arrived while submitting */
		progress(st);
		pop_filtered(st);
		if (st->count == 0)
		{
			if (st->child_done)
				return ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
			continue;
		}
		r = &st->ring[st->head];
		if (r->state == ROW_READY || r->state == ROW_FAILED)
			break;
		if (st->drain_child && !st->child_exhausted)
			drain_child(st);
		llm_channel_poll(true);
	}

	/* the head row: raise its failure, or take its values, fill the scan tuple */
	if (r->state == ROW_FAILED)
		for (int j = 0; j < st->n_calls; j++)
			if (st->stage[j] == r->stage && call_raises(r, j))
			{
				if (r->errors[j] != NULL)
					ReThrowError(r->errors[j]);
				llm_raise_result(r->results[j]);
			}
	ExecClearTuple(scan);
	for (int j = 0; j < st->n_calls; j++)
	{
		if (st->stage[j] == st->n_quals)
		{
			MemoryContext old = MemoryContextSwitchTo(r->cxt);

			if (r->errors[j] != NULL)
				ReThrowError(r->errors[j]);
			r->nulls[j] = true;
			r->values[j] = (Datum) 0;
			if (!r->is_null[j])
				r->values[j] = llm_arg_map_function(st->maps[j])->batch_value(r->results[j],
																			   r->on_error_null[j],
																			   &r->nulls[j]);
			MemoryContextSwitchTo(old);
		}
		scan->tts_values[j] = r->values[j];
		scan->tts_isnull[j] = r->nulls[j];
	}
	ExecStoreMinimalTuple(r->tuple, st->child_row, false);
	slot_getallattrs(st->child_row);
	for (int i = 0; i < st->n_child; i++)
	{
		scan->tts_values[st->n_calls + i] = st->child_row->tts_values[i];
		scan->tts_isnull[st->n_calls + i] = st->child_row->tts_isnull[i];
	}
	Assert(scan->tts_tupleDescriptor->natts == st->n_calls + st->n_child);
	ExecStoreVirtualTuple(scan);

	st->emitted = st->head;
	st->head = (st->head + 1) % st->ring_size;
	st->count--;
	llm_progress_note_batch_row();

	econtext->ecxt_scantuple = scan;
	if (node->ss.ps.ps_ProjInfo == NULL)
		return scan;
	return ExecProject(node->ss.ps.ps_ProjInfo);
}

static void
batch_end(CustomScanState *node)
{
	BatchScanState *st = (BatchScanState *) node;

	/* rows read ahead but never emitted (LIMIT, early end): abort their requests */
	release_all(st);
	ExecEndNode(outerPlanState(node));
}

static void
batch_rescan(CustomScanState *node)
{
	BatchScanState *st = (BatchScanState *) node;
	PlanState  *child = outerPlanState(node);

	release_all(st);
	st->child_exhausted = false;
	st->child_done = false;
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (child->chgParam == NULL)
		ExecReScan(child);
}

static void
batch_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	BatchScanState *st = (BatchScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;

	if (st->n_quals > 0)
	{
		List	   *quals = list_copy_tail(cscan->custom_exprs, st->n_calls);
		List	   *context = set_deparse_context_plan(es->deparse_cxt, (Plan *) cscan, ancestors);
		bool		useprefix = list_length(es->rtable) > 1 || es->verbose;

		ExplainPropertyText("LLM Filter",
							deparse_expression((Node *) make_ands_explicit(quals), context, useprefix, false),
							es);
	}
	ExplainPropertyInteger("Batch Window", NULL, st->max_window, es);
	if (es->verbose)
		ExplainPropertyInteger("LLM Calls per Row", NULL, st->n_calls, es);
	if (es->analyze)
	{
		/*
		 * The run is over: rows still read ahead were never consumed (a
		 * parent stopped early); abort them now so the counts are final.
		 */
		release_all(st);
		ExplainPropertyInteger("LLM Requests", NULL, st->n_requests, es);
		ExplainPropertyInteger("LLM Requests Used", NULL, st->n_used, es);
		ExplainPropertyInteger("LLM Requests Aborted", NULL, st->n_aborted, es);
		ExplainPropertyInteger("LLM Failed Requests", NULL, st->n_failed, es);
		ExplainPropertyInteger("Max Requests in Flight", NULL, st->max_in_flight, es);
		if (st->n_quals > 0)
			ExplainPropertyInteger("Rows Removed by LLM Filter", NULL, st->n_filtered, es);
		if (st->drain_child)
			ExplainPropertyBool("Child Drained", st->child_exhausted, es);
		ExplainPropertyInteger("Prompt Tokens", NULL, st->prompt_tokens, es);
		ExplainPropertyInteger("Cached Tokens", NULL, st->cached_tokens, es);
		ExplainPropertyInteger("Completion Tokens", NULL, st->completion_tokens, es);
		ExplainPropertyFloat("Mean TTFT", "ms",
							 st->ttft_count > 0 ? st->ttft_sum_ms / st->ttft_count : 0.0,
							 1, es);
	}
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

	RegisterCustomScanMethods(&batch_plan_methods);

	prev_planner_hook = planner_hook;
	planner_hook = batch_planner;
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = batch_set_rel_pathlist;
}
