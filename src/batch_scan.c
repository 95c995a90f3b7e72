/*
 * batch_scan.c — the "LLM Batch" executor node (a CustomScan) and the
 * planner hook that places it.
 *
 * A scalar function is called row by row, so a plain
 *     SELECT llm_generate(body) FROM tickets
 * would give the worker one request at a time.  After standard planning, the
 * planner hook looks for plan nodes that project llm_generate(text, ...)
 * calls evaluated for every row (top level of a target entry, or nested only
 * in plain function/operator/cast/row/array nodes: never inside CASE,
 * COALESCE, AND/OR, aggregates, sublinks, quals).  Each such node P is
 * split:
 *
 *   P's target list             ->  P': the call-free parts and the call
 *                                        arguments, one column each
 *   LLM Batch (CustomScan, above P'): the original target list, each
 *        batchable call replaced by a Var on the node's scan tuple
 *        [call results ..., P' columns ...]
 *
 * Batchable calls are those of the generation functions sql_args.h's
 * function table marks batchable (by C symbol; their argument count from
 * pg_proc).  At run time the node reads up to llm.batch_window rows ahead
 * from P', builds each call's request from its argument columns by name
 * (sql_args.c, exactly as the function does), submits them all through the
 * channel and emits the rows in their original order as their results
 * arrive.  The window grows from BATCH_INITIAL_WINDOW by one per emitted row
 * (TCP slow start: it doubles per window of rows), so a LIMIT above, whose
 * bound never reaches a custom scan, wastes at most about the rows it
 * consumed.  Design and fallbacks: docs/BATCH_SCAN.md.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "catalog/objectaccess.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "batch_scan.h"
#include "channel.h"
#include "registry.h"
#include "sql_args.h"
#include "sql_result.h"

/* rows in flight when a scan starts (slow start) */
#define BATCH_INITIAL_WINDOW 4

int			llm_batch_window = 64;
bool		llm_enable_batch_scan = true;

static planner_hook_type prev_planner_hook = NULL;

/* ------------------------------------------------------------------------
 * Planning
 * ------------------------------------------------------------------------
 */

typedef struct SplitContext
{
	List	   *known_calls;	/* function oids found to be batchable */
	List	   *known_nargs;	/* their argument counts */
	List	   *known_others;	/* function oids found not to be */
	/* filled while splitting one target list */
	int			n_calls;		/* calls counted by the first pass */
	int			next_call;
	List	   *child_tlist;	/* P' target entries */
	List	   *call_exprs;		/* per call: FuncExpr, args as OUTER_VAR Vars */
	List	   *arg_starts;		/* per call: P' column (0-based) of its first argument */
} SplitContext;

static const CustomScanMethods batch_plan_methods;

/* The argument count of funcid if it is a batchable generation function, else -1. */
static int
batchable_nargs(SplitContext *cxt, Oid funcid)
{
	ListCell   *lc;
	ListCell   *ln;
	int			nargs = 0;

	forboth(lc, cxt->known_calls, ln, cxt->known_nargs)
		if (lfirst_oid(lc) == funcid)
			return lfirst_int(ln);
	if (list_member_oid(cxt->known_others, funcid))
		return -1;
	if (llm_batchable_function(funcid, &nargs) != NULL)
	{
		cxt->known_calls = lappend_oid(cxt->known_calls, funcid);
		cxt->known_nargs = lappend_int(cxt->known_nargs, nargs);
		return nargs;
	}
	cxt->known_others = lappend_oid(cxt->known_others, funcid);
	return -1;
}

/*
 * A call the node may evaluate: a batchable function called with all its
 * arguments (the planner has filled in the defaults).
 */
static bool
is_batchable_call(SplitContext *cxt, Node *node)
{
	return node != NULL && IsA(node, FuncExpr) &&
		list_length(((FuncExpr *) node)->args) == batchable_nargs(cxt, ((FuncExpr *) node)->funcid);
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
		case T_RelabelType:
		case T_CoerceViaIO:
		case T_CollateExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_CoerceToDomain:
		case T_RowExpr:
		case T_ArrayExpr:
			return true;
		case T_BoolExpr:
			return ((BoolExpr *) node)->boolop == NOT_EXPR;
		default:
			return false;
	}
}

static bool
contains_batchable_walker(Node *node, SplitContext *cxt)
{
	if (node == NULL)
		return false;
	if (is_batchable_call(cxt, node))
		return true;
	if (IsA(node, List))
		return expression_tree_walker(node, contains_batchable_walker, cxt);
	if (!is_spine_node(node))
		return false;
	return expression_tree_walker(node, contains_batchable_walker, cxt);
}

static bool
count_calls_walker(Node *node, SplitContext *cxt)
{
	if (node == NULL)
		return false;
	if (is_batchable_call(cxt, node))
	{
		cxt->n_calls++;
		return false;			/* calls inside its arguments stay ordinary */
	}
	if (IsA(node, List) || is_spine_node(node))
		return expression_tree_walker(node, count_calls_walker, cxt);
	return false;
}

/* Add expr as a P' column; returns its 0-based index. */
static int
add_child_column(SplitContext *cxt, Expr *expr)
{
	int			resno = list_length(cxt->child_tlist) + 1;

	cxt->child_tlist = lappend(cxt->child_tlist,
							   makeTargetEntry(expr, resno, NULL, false));
	return resno - 1;
}

static Var *
scan_var(Index attno, Node *expr)
{
	return makeVar(INDEX_VAR, attno, exprType(expr), exprTypmod(expr),
				   exprCollation(expr), 0);
}

/*
 * Mutator from an expression of P's target list (in P's context) to the
 * node's expression on its scan tuple: calls become result columns, every
 * call-free maximal subtree becomes a P' column.
 */
static Node *
split_mutator(Node *node, SplitContext *cxt)
{
	if (node == NULL)
		return NULL;
	if (is_batchable_call(cxt, node))
	{
		FuncExpr   *call = (FuncExpr *) node;
		FuncExpr   *shown = (FuncExpr *) copyObject(call);
		List	   *outer_args = NIL;
		int			first = -1;
		ListCell   *lc;
		int			j = cxt->next_call++;

		foreach(lc, call->args)
		{
			Node	   *arg = lfirst(lc);
			int			col = add_child_column(cxt, (Expr *) arg);

			if (first < 0)
				first = col;
			outer_args = lappend(outer_args,
								 makeVar(OUTER_VAR, col + 1, exprType(arg), exprTypmod(arg),
										 exprCollation(arg), 0));
		}
		shown->args = outer_args;
		cxt->call_exprs = lappend(cxt->call_exprs, shown);
		cxt->arg_starts = lappend_int(cxt->arg_starts, first);
		return (Node *) scan_var(j + 1, node);
	}
	if (IsA(node, List))
		return expression_tree_mutator(node, split_mutator, cxt);
	if (!contains_batchable_walker(node, cxt))
	{
		int			col = add_child_column(cxt, (Expr *) node);

		return (Node *) scan_var(cxt->n_calls + col + 1, node);
	}
	return expression_tree_mutator(node, split_mutator, cxt);
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
			return true;
		case T_Result:
			/* a childless Result yields at most one row: nothing to batch,
			 * and PL/pgSQL's simple-expression path needs it unwrapped */
			return plan->lefttree != NULL;
		default:
			return false;
	}
}

/* Wrap plan in an LLM Batch node if its target list has batchable calls. */
static Plan *
maybe_wrap(SplitContext *cxt, Plan *plan, int *next_node_id)
{
	CustomScan *cscan;
	List	   *node_tlist = NIL;
	List	   *scan_tlist = NIL;
	List	   *starts = NIL;
	ListCell   *lc;
	int			resno;

	cxt->n_calls = 0;
	foreach(lc, plan->targetlist)
		count_calls_walker((Node *) ((TargetEntry *) lfirst(lc))->expr, cxt);
	if (cxt->n_calls == 0)
		return plan;

	cxt->next_call = 0;
	cxt->child_tlist = NIL;
	cxt->call_exprs = NIL;
	cxt->arg_starts = NIL;
	foreach(lc, plan->targetlist)
	{
		TargetEntry *te = lfirst(lc);
		TargetEntry *newte = flatCopyTargetEntry(te);

		newte->expr = (Expr *) split_mutator((Node *) te->expr, cxt);
		node_tlist = lappend(node_tlist, newte);
	}
	Assert(cxt->next_call == cxt->n_calls);

	/* scan tuple: [call results ..., P' columns ...] */
	resno = 1;
	foreach(lc, cxt->call_exprs)
		scan_tlist = lappend(scan_tlist, makeTargetEntry(lfirst(lc), resno++, NULL, false));
	foreach(lc, cxt->child_tlist)
	{
		TargetEntry *te = lfirst(lc);
		Node	   *e = (Node *) te->expr;

		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry((Expr *) makeVar(OUTER_VAR, te->resno, exprType(e),
															  exprTypmod(e), exprCollation(e), 0),
											 resno++, NULL, false));
	}
	foreach(lc, cxt->arg_starts)
		starts = lappend(starts, makeInteger(lfirst_int(lc)));

	cscan = makeNode(CustomScan);
	cscan->scan.plan.startup_cost = plan->startup_cost;
	cscan->scan.plan.total_cost = plan->total_cost;
	cscan->scan.plan.plan_rows = plan->plan_rows;
	cscan->scan.plan.plan_width = plan->plan_width;
	cscan->scan.plan.parallel_aware = false;
	cscan->scan.plan.parallel_safe = false;
	cscan->scan.plan.async_capable = false;
	cscan->scan.plan.plan_node_id = (*next_node_id)++;
	cscan->scan.plan.targetlist = node_tlist;
	cscan->scan.plan.qual = NIL;
	cscan->scan.plan.lefttree = plan;
	cscan->scan.plan.extParam = bms_copy(plan->extParam);
	cscan->scan.plan.allParam = bms_copy(plan->allParam);
	cscan->scan.scanrelid = 0;
	cscan->flags = 0;
	cscan->custom_plans = NIL;
	cscan->custom_exprs = NIL;
	cscan->custom_private = list_make2(makeInteger(list_length(cxt->child_tlist)), starts);
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = NULL;
	cscan->methods = &batch_plan_methods;

	plan->targetlist = cxt->child_tlist;
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
rewrite_plan(SplitContext *cxt, Plan *plan, bool no_wrap, int *next_node_id)
{
	ListCell   *lc;

	if (plan == NULL)
		return NULL;
	switch (nodeTag(plan))
	{
		case T_Gather:
		case T_GatherMerge:
		case T_CustomScan:
		case T_ForeignScan:
			/* llm_generate is parallel restricted: never below a Gather */
			return plan;
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				lfirst(lc) = rewrite_plan(cxt, lfirst(lc), false, next_node_id);
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				lfirst(lc) = rewrite_plan(cxt, lfirst(lc), false, next_node_id);
			break;
		case T_SubqueryScan:
			((SubqueryScan *) plan)->subplan =
				rewrite_plan(cxt, ((SubqueryScan *) plan)->subplan, false, next_node_id);
			break;
		case T_MergeJoin:
			plan->lefttree = rewrite_plan(cxt, plan->lefttree, false, next_node_id);
			plan->righttree = rewrite_plan(cxt, plan->righttree, true, next_node_id);
			break;
		default:
			plan->lefttree = rewrite_plan(cxt, plan->lefttree, false, next_node_id);
			plan->righttree = rewrite_plan(cxt, plan->righttree, false, next_node_id);
			break;
	}
	if (!no_wrap && is_projecting_plan(plan))
		return maybe_wrap(cxt, plan, next_node_id);
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
	PlannedStmt *stmt;
	SplitContext cxt;
	int			next_id;
	ListCell   *lc;

	if (prev_planner_hook)
		stmt = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);

	if (!llm_enable_batch_scan || llm_shared == NULL || IsParallelWorker() ||
		(cursorOptions & CURSOR_OPT_SCROLL) || stmt->commandType == CMD_UTILITY)
		return stmt;

	memset(&cxt, 0, sizeof(cxt));
	next_id = max_node_id(stmt->planTree);
	foreach(lc, stmt->subplans)
		next_id = Max(next_id, max_node_id(lfirst(lc)));
	next_id++;

	stmt->planTree = rewrite_plan(&cxt, stmt->planTree, false, &next_id);
	foreach(lc, stmt->subplans)
		lfirst(lc) = rewrite_plan(&cxt, lfirst(lc), false, &next_id);
	return stmt;
}

/* ------------------------------------------------------------------------
 * Execution
 * ------------------------------------------------------------------------
 */

/* One row read ahead, from read until the call after its emission. */
typedef struct BatchRow
{
	MemoryContext cxt;			/* everything of this row; reset on reuse */
	MinimalTuple tuple;			/* copy of the P' row */
	uint64	   *ids;			/* per call: request id, 0 if none in flight */
	LlmResult **results;		/* per call: taken (or local) result */
	ErrorData **errors;			/* per call: argument error, raised at emission */
	bool	   *is_null;		/* per call: NULL prompt, the value is NULL */
	bool	   *on_error_null;
} BatchRow;

typedef struct BatchScanState
{
	CustomScanState css;
	int			n_calls;
	int			n_child;
	int		   *arg_start;		/* per call: P' column of its first argument */
	int		   *nargs;			/* per call: its argument count */
	const LlmArgMap **maps;		/* per call: its arguments by name (sql_args.h) */
	int			max_window;		/* llm.batch_window at executor start (1 in EPQ) */
	int			window;			/* current window, grows to max_window */
	BatchRow   *ring;			/* max_window + 1 rows */
	int			ring_size;
	int			head;			/* oldest row not yet emitted */
	int			count;			/* rows read and not yet emitted */
	int			emitted;		/* ring index of the last emitted row, -1 */
	bool		child_done;
	TupleTableSlot *child_row;	/* deforms a stored P' row */
	MemoryContext tmp_cxt;		/* per-request temporaries */
	/* EXPLAIN ANALYZE */
	int64		n_requests;
	int64		n_failed;
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
	List	   *starts = lsecond(cscan->custom_private);
	ListCell   *lc;
	int			j = 0;

	st->css.methods = &batch_exec_methods;
	st->n_child = intVal(linitial(cscan->custom_private));
	st->n_calls = list_length(starts);
	st->arg_start = palloc(sizeof(int) * st->n_calls);
	foreach(lc, starts)
		st->arg_start[j++] = intVal(lfirst(lc));
	return (Node *) st;
}

/*
 * The node evaluates its calls itself, so it must refuse what ExecInitFunc
 * would: EXECUTE for the current user (inside a SECURITY DEFINER function,
 * its owner; through a view, the caller, as for any function) and the
 * function-execute hook of security modules.  Checked at every executor
 * start, so a cached plan sees a REVOKE made after it was planned.
 */
static void
check_calls_executable(CustomScan *cscan, int n_calls)
{
	ListCell   *lc;
	int			j = 0;

	foreach(lc, cscan->custom_scan_tlist)
	{
		FuncExpr   *call = (FuncExpr *) ((TargetEntry *) lfirst(lc))->expr;
		AclResult	aclresult;

		if (j++ == n_calls)
			break;
		Assert(IsA(call, FuncExpr));
		aclresult = pg_proc_aclcheck(call->funcid, GetUserId(), ACL_EXECUTE);
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(call->funcid));
		InvokeFunctionExecuteHook(call->funcid);
	}
}

static void
batch_begin(CustomScanState *node, EState *estate, int eflags)
{
	BatchScanState *st = (BatchScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	PlanState  *child;

	check_calls_executable(cscan, st->n_calls);
	st->nargs = palloc(sizeof(int) * st->n_calls);
	st->maps = palloc(sizeof(LlmArgMap *) * st->n_calls);
	for (int j = 0; j < st->n_calls; j++)
	{
		FuncExpr   *call = (FuncExpr *) ((TargetEntry *) list_nth(cscan->custom_scan_tlist, j))->expr;

		st->nargs[j] = list_length(call->args);
		st->maps[j] = llm_arg_map_for(call->funcid, CurrentMemoryContext);
	}
	child = ExecInitNode(outerPlan(cscan), estate, eflags);
	outerPlanState(node) = child;

	/* an EvalPlanQual recheck runs one row: no read-ahead */
	st->max_window = estate->es_epq_active != NULL ? 1 : Max(llm_batch_window, 1);
	st->window = Min(BATCH_INITIAL_WINDOW, st->max_window);
	st->ring_size = st->max_window + 1;
	st->ring = palloc0(sizeof(BatchRow) * st->ring_size);
	for (int i = 0; i < st->ring_size; i++)
	{
		BatchRow   *r = &st->ring[i];

		r->cxt = AllocSetContextCreate(CurrentMemoryContext, "llm batch row",
									   ALLOCSET_SMALL_SIZES);
		r->ids = palloc0(sizeof(uint64) * st->n_calls);
		r->results = palloc0(sizeof(LlmResult *) * st->n_calls);
		r->errors = palloc0(sizeof(ErrorData *) * st->n_calls);
		r->is_null = palloc0(sizeof(bool) * st->n_calls);
		r->on_error_null = palloc0(sizeof(bool) * st->n_calls);
	}
	st->head = 0;
	st->count = 0;
	st->emitted = -1;
	st->child_done = false;
	st->child_row = ExecInitExtraTupleSlot(estate, ExecGetResultType(child),
										   &TTSOpsMinimalTuple);
	st->tmp_cxt = AllocSetContextCreate(CurrentMemoryContext, "llm batch request",
										ALLOCSET_DEFAULT_SIZES);
}

/* Forget a row: abort its requests still in flight, free its memory. */
static void
release_row(BatchScanState *st, BatchRow *r)
{
	for (int j = 0; j < st->n_calls; j++)
	{
		if (r->ids[j] != 0)
			llm_abort_request(r->ids[j]);
		r->ids[j] = 0;
		r->results[j] = NULL;
		r->errors[j] = NULL;
		r->is_null[j] = false;
		r->on_error_null[j] = false;
	}
	r->tuple = NULL;
	MemoryContextReset(r->cxt);
}

/* Abort everything read ahead; the node starts over (rescan) or ends. */
static void
release_all(BatchScanState *st)
{
	for (int i = 0; i < st->ring_size; i++)
		release_row(st, &st->ring[i]);
	st->head = 0;
	st->count = 0;
	st->emitted = -1;
	st->window = Min(BATCH_INITIAL_WINDOW, st->max_window);
}

/*
 * Build and submit the request of call j from the P' row values.  Argument
 * errors are kept and raised when the row is emitted, as row-at-a-time
 * evaluation would (a LIMIT may never reach that row).
 */
static void
submit_call(BatchScanState *st, BatchRow *r, int j, TupleTableSlot *slot)
{
	int			nargs = st->nargs[j];
	NullableDatum *args;
	LlmCall		call;
	LlmResult  *refused = NULL;
	bool		has_prompt = false;
	MemoryContext old;
	int			base = st->arg_start[j];

	MemoryContextReset(st->tmp_cxt);
	old = MemoryContextSwitchTo(st->tmp_cxt);
	args = palloc(sizeof(NullableDatum) * nargs);
	for (int a = 0; a < nargs; a++)
	{
		Datum		v = slot->tts_values[base + a];
		bool		isnull = slot->tts_isnull[base + a];
		Form_pg_attribute att = TupleDescAttr(slot->tts_tupleDescriptor, base + a);

		/* detoast here, outside the error trap below: it reads buffers */
		if (!isnull && att->attlen == -1)
			v = PointerGetDatum(PG_DETOAST_DATUM_PACKED(v));
		args[a].value = v;
		args[a].isnull = isnull;
	}

	PG_TRY();
	{
		has_prompt = llm_call_build_text(st->maps[j], args, nargs, &call, &refused);
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
		r->ids[j] = llm_submit(&call.req);
		st->n_requests++;
	}
	r->on_error_null[j] = has_prompt && call.on_error_null;
	MemoryContextSwitchTo(old);
}

/* Read one P' row into the ring and submit its calls; false at the end. */
static bool
read_ahead_one(BatchScanState *st)
{
	TupleTableSlot *slot;
	BatchRow   *r;
	MemoryContext old;

	slot = ExecProcNode(outerPlanState(st));
	if (TupIsNull(slot))
	{
		st->child_done = true;
		return false;
	}
	r = &st->ring[(st->head + st->count) % st->ring_size];
	Assert(r->tuple == NULL);
	slot_getallattrs(slot);
	old = MemoryContextSwitchTo(r->cxt);
	r->tuple = ExecCopySlotMinimalTuple(slot);
	MemoryContextSwitchTo(old);
	st->count++;
	for (int j = 0; j < st->n_calls; j++)
		submit_call(st, r, j, slot);
	return true;
}

static bool
row_ready(BatchScanState *st, BatchRow *r)
{
	for (int j = 0; j < st->n_calls; j++)
		if (r->ids[j] != 0 && !llm_request_is_done(r->ids[j]))
			return false;
	return true;
}

static TupleTableSlot *
batch_exec(CustomScanState *node)
{
	BatchScanState *st = (BatchScanState *) node;
	TupleTableSlot *scan = node->ss.ss_ScanTupleSlot;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	BatchRow   *r;
	MemoryContext old;
	int			n_scan = st->n_calls + st->n_child;

	/* the previous row's values were referenced by the returned slot until now */
	if (st->emitted >= 0)
	{
		release_row(st, &st->ring[st->emitted]);
		st->emitted = -1;
	}
	ResetExprContext(econtext);

	for (;;)
	{
		while (!st->child_done && st->count < st->window)
			if (!read_ahead_one(st))
				break;
		if (st->count == 0)
			return ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
		r = &st->ring[st->head];
		if (row_ready(st, r))
			break;
		llm_channel_poll(true);
	}

	/* the head row: take its results, fill the scan tuple */
	ExecClearTuple(scan);
	old = MemoryContextSwitchTo(r->cxt);
	for (int j = 0; j < st->n_calls; j++)
	{
		bool		isnull = true;
		Datum		value = (Datum) 0;

		if (r->errors[j] != NULL)
			ReThrowError(r->errors[j]);
		if (r->ids[j] != 0)
		{
			r->results[j] = llm_take_result(r->ids[j]);
			r->ids[j] = 0;
			if (r->results[j]->failed)
				st->n_failed++;
			else
			{
				st->prompt_tokens += r->results[j]->usage.prompt_tokens;
				st->cached_tokens += r->results[j]->usage.cached_tokens;
				st->completion_tokens += r->results[j]->usage.completion_tokens;
				st->ttft_sum_ms += r->results[j]->usage.ttft_ms;
				st->ttft_count++;
			}
		}
		if (!r->is_null[j])
			value = llm_arg_map_function(st->maps[j])->batch_value(r->results[j], r->on_error_null[j],
																  &isnull);
		scan->tts_values[j] = value;
		scan->tts_isnull[j] = isnull;
	}
	MemoryContextSwitchTo(old);

	ExecStoreMinimalTuple(r->tuple, st->child_row, false);
	slot_getallattrs(st->child_row);
	for (int i = 0; i < st->n_child; i++)
	{
		scan->tts_values[st->n_calls + i] = st->child_row->tts_values[i];
		scan->tts_isnull[st->n_calls + i] = st->child_row->tts_isnull[i];
	}
	Assert(scan->tts_tupleDescriptor->natts == n_scan);
	(void) n_scan;
	ExecStoreVirtualTuple(scan);

	st->emitted = st->head;
	st->head = (st->head + 1) % st->ring_size;
	st->count--;
	/* slow start: one more row in flight per row consumed */
	if (st->window < st->max_window)
		st->window++;

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
	st->child_done = false;
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (child->chgParam == NULL)
		ExecReScan(child);
}

static void
batch_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	BatchScanState *st = (BatchScanState *) node;

	ExplainPropertyInteger("Batch Window", NULL, st->max_window, es);
	if (es->verbose)
		ExplainPropertyInteger("LLM Calls per Row", NULL, st->n_calls, es);
	if (es->analyze)
	{
		ExplainPropertyInteger("LLM Requests", NULL, st->n_requests, es);
		ExplainPropertyInteger("LLM Failed Requests", NULL, st->n_failed, es);
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
							"Rows an LLM Batch node keeps in flight (reads ahead), at most.",
							"Read when the statement starts executing. The window starts at 4 rows and grows by one per row "
							"returned up to this value; 1 evaluates llm_generate row by row.",
							&llm_batch_window,
							64, 1, 65536,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.enable_batch_scan",
							 "Plan LLM Batch nodes for llm_generate calls in target lists.",
							 "Planner setting: off keeps every call an ordinary row-by-row function call.",
							 &llm_enable_batch_scan,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	RegisterCustomScanMethods(&batch_plan_methods);

	prev_planner_hook = planner_hook;
	planner_hook = batch_planner;
}
