/*
 * batch_exec.c — the executor half of the "LLM Batch" node (a CustomScan),
 * placed by the planner hook of batch_plan.c.
 *
 * At run time the node reads rows ahead of its parent: each row's calls are
 * submitted through the channel at once, rows with calls in flight are the
 * window (llm.batch_window at most), and the rows are emitted in their
 * original order as their results arrive.  A row with quals passes through
 * stages: the calls of each moved conjunct, then that conjunct, ..., then the
 * target-list calls.  Design, read-ahead rule and fallbacks:
 * docs/BATCH_SCAN.md.  The node's state: batch_node.h; its EXPLAIN lines
 * and counts: batch_report.c.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/objectaccess.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/nodeFuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "batch_cascade.h"
#include "batch_dedup.h"
#include "batch_lift.h"
#include "batch_node.h"
#include "batch_scan.h"
#include "channel/client.h"
#include "common/progress.h"
#include "common/registry.h"
#include "pg/sql/sql_args.h"
#include "pg/sql/sql_result.h"

/* rows with calls in flight when a scan starts (slow start) */
#define BATCH_INITIAL_WINDOW 4

int			llm_batch_window = 64;
bool		llm_dedup_calls = true;

static void batch_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *batch_exec(CustomScanState *node);
static void batch_end(CustomScanState *node);
static void batch_rescan(CustomScanState *node);

static const CustomExecMethods batch_exec_methods = {
	.CustomName = "LLM Batch",
	.BeginCustomScan = batch_begin,
	.ExecCustomScan = batch_exec,
	.EndCustomScan = batch_end,
	.ReScanCustomScan = batch_rescan,
	.ExplainCustomScan = llm_batch_explain,
};

Node *
llm_batch_create_state(CustomScan *cscan)
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
	/* the scans its filters were lifted from, counted (batch_lift.h) */
	st->lift_scans = NIL;
	if (!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		st->lift_scans = llm_lift_count_scans(cscan, child);

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
	/* read at executor start, like the window; a recheck runs one row alone */
	st->dedup = NULL;
	if (llm_dedup_calls && estate->es_epq_active == NULL)
		st->dedup = llm_dedup_statement_attach(st, &st->in_flight);
	st->cascade = NULL;
	if (n >= 1)
	{
		BatchCascadeCall call = {
			.arg_exprs = linitial(cscan->custom_exprs),
			.args = st->args[0],
			.nargs = st->nargs[0],
			.arg_typlen = st->arg_typlen[0],
			.map = st->maps[0],
			.build = st->build[0],
			.value = llm_arg_map_function(st->maps[0])->batch_value,
			.qual = st->n_quals == 1 && st->stage[0] == 0 ? st->quals[0] : NULL,
			.n_child = st->n_child,
			.child_row = st->child_row,
			.eval_slot = st->eval_slot,
			.eval_cxt = st->eval_cxt,
			.window = st->max_window,
		};

		st->cascade = llm_cascade_begin(node, n, &call, estate->es_epq_active != NULL);
	}
}

/* A ring slot's first use: its memory context and per-call arrays. */
static void
init_row(BatchScanState *st, BatchRow *r)
{
	int			n = Max(st->n_calls, 1);

	r->cxt = AllocSetContextCreate(st->row_cxt, "llm batch row", ALLOCSET_SMALL_SIZES);
	r->ids = MemoryContextAllocZero(st->row_cxt, sizeof(uint64) * n);
	r->shared = MemoryContextAllocZero(st->row_cxt, sizeof(BatchDedupCall *) * n);
	r->results = MemoryContextAllocZero(st->row_cxt, sizeof(LlmResult *) * n);
	r->errors = MemoryContextAllocZero(st->row_cxt, sizeof(ErrorData *) * n);
	r->is_null = MemoryContextAllocZero(st->row_cxt, sizeof(bool) * n);
	r->on_error_null = MemoryContextAllocZero(st->row_cxt, sizeof(bool) * n);
	r->value_args = MemoryContextAllocZero(st->row_cxt, sizeof(void *) * n);
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
		if (r->shared[j] != NULL)
		{
			BatchDedupCall *c = r->shared[j];

			/* the request goes when no row of any node waits on it any more */
			if (--c->refs == 0 && c->id != 0)
			{
				BatchScanState *counted = c->owner != NULL ? c->owner : st;

				llm_abort_request(c->id);
				c->id = 0;
				c->dead = true;
				counted->n_aborted++;
				if (c->owner != NULL)
					c->owner->in_flight--;
				c->owner = NULL;
			}
			r->shared[j] = NULL;
		}
		else if (r->ids[j] != 0)
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
		r->value_args[j] = NULL;
		r->nulls[j] = true;
	}
	if (r->state == ROW_RUNNING)
		st->n_running--;
	r->state = ROW_FREE;
	r->tuple = NULL;
	MemoryContextReset(r->cxt);
}

void
llm_batch_release_all(BatchScanState *st)
{
	if (st->emitted >= 0)
		release_row(st, &st->ring[st->emitted]);
	for (int i = 0; i < st->count; i++)
		release_row(st, &st->ring[(st->head + i) % st->ring_size]);
	/*
	 * Requests this node sent that rows of other nodes still wait on go on
	 * without it: whoever takes them counts them.
	 */
	if (st->in_flight > 0 && st->dedup != NULL)
		st->in_flight -= llm_dedup_disown(st->dedup, st);
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

	if (has_prompt && call.value_arg != NULL)
		r->value_args[j] = memcpy(MemoryContextAlloc(r->cxt, Max(call.value_arg_len, 1)),
								  call.value_arg, call.value_arg_len);
	if (!has_prompt)
		r->is_null[j] = true;
	else if (refused != NULL)
	{
		/* answered without a request of its own: a refused prompt, or the build's own */
		MemoryContextSwitchTo(r->cxt);
		r->results[j] = llm_result_copy(refused);
	}
	else
	{
		char	   *key = NULL;
		size_t		key_len = 0;
		uint64		hash = 0;
		BatchDedupCall *c = NULL;

		llm_call_set_batch(&call);
		if (st->dedup != NULL && llm_dedup_key(&call.req, &key, &key_len, &hash))
		{
			c = llm_dedup_find(st->dedup, key, key_len, hash);
			if (c != NULL && llm_dedup_shareable(c))
			{
				/* an identical call of this statement: its answer, finished or to come */
				LlmRoleUsage saved = {0};

				st->n_shared++;
				saved.calls_shared = 1;
				llm_progress_note_saved(&saved);
				if (c->result != NULL)
					r->results[j] = c->result;
				else
				{
					c->refs++;
					r->shared[j] = c;
					r->ids[j] = c->id;
				}
				r->on_error_null[j] = call.on_error_null;
				MemoryContextSwitchTo(old);
				return;
			}
		}
		r->ids[j] = llm_submit(&call.req);
		st->n_requests++;
		st->in_flight++;
		st->max_in_flight = Max(st->max_in_flight, st->in_flight);
		/*
		 * A call aborted unfinished keeps its entry dead, and one sent in a
		 * subtransaction this call is outside keeps its entry: this one
		 * stays unshared.
		 */
		if (key != NULL && c == NULL)
			r->shared[j] = llm_dedup_add(st->dedup, key, key_len, hash, r->ids[j], st);
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

/* Whether call j of row r has its answer (its own request's or a shared one). */
static bool
call_done(BatchRow *r, int j)
{
	if (r->shared[j] != NULL)
		return r->shared[j]->result != NULL || llm_request_is_done(r->shared[j]->id);
	return llm_request_is_done(r->ids[j]);
}

/* Count a finished request's result for EXPLAIN ANALYZE. */
static void note_result(BatchScanState *st, LlmResult *res);

/*
 * Take a finished request's result into the row.  A shared call's result is
 * taken once, into the table's memory, and read by every row of any node
 * that shares it (each converts it with its own on_error).
 */
static void
take_call(BatchScanState *st, BatchRow *r, int j)
{
	MemoryContext old;
	LlmResult  *res;

	if (r->shared[j] != NULL)
	{
		BatchDedupCall *c = r->shared[j];

		if (c->result == NULL)
			llm_batch_take_shared(st->dedup, c, st);
		c->refs--;
		r->shared[j] = NULL;
		r->ids[j] = 0;
		r->results[j] = c->result;
		return;
	}
	old = MemoryContextSwitchTo(r->cxt);
	res = llm_take_result(r->ids[j]);
	MemoryContextSwitchTo(old);
	r->ids[j] = 0;
	r->results[j] = res;
	st->in_flight--;
	note_result(st, res);
}

void
llm_batch_take_shared(BatchDedup *d, BatchDedupCall *c, BatchScanState *taker)
{
	BatchScanState *counted = c->owner != NULL ? c->owner : taker;
	MemoryContext old = MemoryContextSwitchTo(d->cxt);

	c->result = llm_take_result(c->id);
	MemoryContextSwitchTo(old);
	c->id = 0;
	if (c->owner != NULL)
		c->owner->in_flight--;
	c->owner = NULL;
	if (counted != NULL)
		note_result(counted, c->result);
}

static void
note_result(BatchScanState *st, LlmResult *res)
{
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

/* Call j's value from its result (or NULL for a NULL prompt), in the row's memory. */
static void
take_value(BatchScanState *st, BatchRow *r, int j)
{
	MemoryContext old = MemoryContextSwitchTo(r->cxt);

	r->nulls[j] = true;
	r->values[j] = (Datum) 0;
	if (!r->is_null[j])
		r->values[j] = llm_arg_map_function(st->maps[j])->batch_value(r->results[j], r->value_args[j],
																	   r->on_error_null[j], &r->nulls[j]);
	MemoryContextSwitchTo(old);
}

/*
 * Whether call j of row r lost its request before taking its answer: the
 * rollback of a subtransaction the node ran in aborts what it submitted
 * there (channel/client.h), finished or not, and marks a shared one dead
 * (batch_dedup.h), while a cursor opened outside it goes on.
 */
static bool
call_lost(BatchRow *r, int j)
{
	if (r->shared[j] != NULL)
		return r->shared[j]->result == NULL && r->shared[j]->id == 0;
	return !llm_request_pending(r->ids[j]);
}

/*
 * Submit again the calls of r's current stage whose requests were lost (as
 * the row's first submission did: an identical call's dead entry is not
 * shared); true if any was.
 */
static bool
resubmit_lost(BatchScanState *st, BatchRow *r)
{
	bool		any = false;

	for (int j = 0; j < st->n_calls; j++)
	{
		if (st->stage[j] != r->stage || r->ids[j] == 0 || !call_lost(r, j))
			continue;
		if (!any)
		{
			ResetExprContext(st->eval_cxt);
			fill_eval_slot(st, r);
			any = true;
		}
		if (r->shared[j] != NULL)
		{
			BatchDedupCall *c = r->shared[j];

			c->refs--;
			/* the abort left its sender counting it in flight */
			if (c->owner != NULL)
			{
				c->owner->n_aborted++;
				c->owner->in_flight--;
				c->owner = NULL;
			}
			r->shared[j] = NULL;
		}
		else
		{
			st->n_aborted++;
			st->in_flight--;
		}
		r->ids[j] = 0;
		submit_call(st, r, j);
	}
	return any;
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
			if (st->stage[j] == r->stage && r->ids[j] != 0 && !call_done(r, j))
				return;
		if (resubmit_lost(st, r))
			continue;
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
				take_value(st, r, j);
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
	st->n_child_rows++;
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

/* The next row of a node whose call runs through its cascade (batch_cascade.h). */
static TupleTableSlot *
cascade_exec(BatchScanState *st)
{
	CustomScanState *node = &st->css;
	TupleTableSlot *scan = node->ss.ss_ScanTupleSlot;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	MinimalTuple tuple;
	Datum		value;
	bool		isnull;

	if (!llm_cascade_next(st->cascade, outerPlanState(st), &tuple, &value, &isnull))
		return ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
	ExecClearTuple(scan);
	scan->tts_values[0] = value;
	scan->tts_isnull[0] = isnull;
	ExecStoreMinimalTuple(tuple, st->child_row, false);
	slot_getallattrs(st->child_row);
	for (int i = 0; i < st->n_child; i++)
	{
		scan->tts_values[1 + i] = st->child_row->tts_values[i];
		scan->tts_isnull[1 + i] = st->child_row->tts_isnull[i];
	}
	ExecStoreVirtualTuple(scan);
	llm_progress_note_batch_row();
	econtext->ecxt_scantuple = scan;
	if (node->ss.ps.ps_ProjInfo == NULL)
		return scan;
	return ExecProject(node->ss.ps.ps_ProjInfo);
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
	if (llm_cascade_active(st->cascade))
		return cascade_exec(st);

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
			if (r->errors[j] != NULL)
				ReThrowError(r->errors[j]);
			take_value(st, r, j);
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
	llm_batch_release_all(st);
	llm_batch_note_saved(st);
	ExecEndNode(outerPlanState(node));
	llm_cascade_reset(st->cascade);
}

static void
batch_rescan(CustomScanState *node)
{
	BatchScanState *st = (BatchScanState *) node;
	PlanState  *child = outerPlanState(node);

	llm_batch_release_all(st);
	llm_cascade_reset(st->cascade);
	st->child_exhausted = false;
	st->child_done = false;
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (child->chgParam == NULL)
		ExecReScan(child);
}
