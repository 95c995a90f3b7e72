/*
 * batch_cascade.c — a model cascade run by the LLM Batch node
 * (batch_cascade.h; design and guarantee: docs/CASCADES.md).
 */
#include "postgres.h"

#include <float.h>
#include <limits.h>
#include <math.h>

#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "batch_cascade.h"
#include "batch_scan.h"
#include "cascade_stats.h"
#include "channel/client.h"
#include "common/model_list.h"
#include "common/progress.h"
#include "common/stats.h"
#include "common/utf8_text.h"
#include "pg/sql/ai_prompts.h"
#include "pg/sql/sql_result.h"

/* GUCs */
static bool enable_cascades = true;
static char *cascade_model = NULL;
static double precision_target = 0.95;
static double recall_target = 0.95;
static double accuracy_target = 0.95;
static double cascade_delta = 0.05;
static int	cascade_seed = 0;
static int	cascade_min_sample = 100;

/* The prefix of the planner's mark in custom_private (a String node) */
#define PARTIAL_MARK "cascade off: "

typedef enum CascadeRowKind
{
	CROW_UNREAD,				/* no call built yet */
	CROW_NO_CALL,				/* NULL input: the value is NULL, no request */
	CROW_ERROR,					/* an argument error, raised at the row's turn */
	CROW_REFUSED,				/* a prompt refused before sending: large holds the failure */
	CROW_CALL					/* a request */
} CascadeRowKind;

typedef struct CascadeRow
{
	MinimalTuple tuple;
	CascadeRowKind kind;
	bool		on_error_null;
	bool		sampled;
	ErrorData  *error;
	LlmResult  *small;			/* the small model's answer, or NULL */
	LlmResult  *large;			/* the large model's answer, or NULL */
	uint64		id;				/* request in flight, 0 if none */
	void	   *value_arg;		/* the call's value_arg (sql_args.h), a copy, or NULL */
	const char **labels;		/* llm_classify, a sampled row: its labels (UTF-8) */
	int			n_labels;
} CascadeRow;

struct BatchCascade
{
	BatchCascadeCall call;
	bool		active;
	const char *off_reason;		/* inactive: why (EXPLAIN) */
	bool		classify;		/* llm_classify: labels; else llm_filter: yes/no */
	char	   *small;			/* the small model's alias */
	char	   *large;			/* the large model's alias, for EXPLAIN */
	llm_cascade_params params;
	MemoryContext cxt;			/* rows and results, until reset */
	MemoryContext tmp_cxt;		/* one request's build */
	MemoryContext out_cxt;		/* the row being returned */
	CascadeRow *rows;
	int64		n_rows;
	int64		cap;
	int64	   *flight;			/* rows with a request in flight */
	int			n_flight;
	bool		routed;
	int64		next;			/* the next row to return */
	/* the run, for EXPLAIN ANALYZE */
	bool		ran;
	bool		too_few;
	llm_cascade_decision d;
	int64		n_called;		/* rows with a request */
	int64		n_sample;
	int64		n_small_calls;
	int64		n_large_calls;	/* the sample's included */
	int64		n_sample_calls;
	int64		n_kept_small;	/* rows answered by the small model */
	int64		n_requests;
	int64		n_used;
	int64		n_aborted;
	int64		n_failed;
	int64		n_filtered;
	/* llm_classify: each label's recall from the sample, with its bound (EXPLAIN ANALYZE) */
	const char *recall_off;		/* not estimated: why; NULL when estimated */
	int			n_labels;
	char	  **label_names;	/* in the server encoding */
	llm_cascade_label_recall *recall;	/* per label */
};

void
llm_cascade_define_gucs(void)
{
	DefineCustomBoolVariable("llm.enable_cascades",
							 "Run model cascades (cascade => or llm.cascade_model) in LLM Batch nodes.",
							 "Read when the statement starts executing. off answers every row with the large model "
							 "(the call's model), as a call evaluated row by row does.",
							 &enable_cascades, true, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("llm.cascade_model",
							   "Default small model (an llm.models alias) of llm_filter's and llm_classify's cascades.",
							   "Used by calls whose cascade argument is NULL; empty: no cascade unless a call asks for one.",
							   &cascade_model, "", PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("llm.cascade_precision_target",
							 "Default precision_target of llm_filter's cascades.", NULL,
							 &precision_target, 0.95, 0.001, 1.0, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("llm.cascade_recall_target",
							 "Default recall_target of llm_filter's cascades.", NULL,
							 &recall_target, 0.95, 0.001, 1.0, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("llm.cascade_accuracy_target",
							 "Default accuracy_target of llm_classify's cascades.", NULL,
							 &accuracy_target, 0.95, 0.001, 1.0, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("llm.cascade_delta",
							 "Default cascade_delta: the probability that a cascade misses its targets.", NULL,
							 &cascade_delta, 0.05, 0.0001, 0.9999, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("llm.cascade_seed",
							"Default cascade_seed: the seed of a cascade's random sample.", NULL,
							&cascade_seed, 0, 0, INT_MAX, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("llm.cascade_min_sample",
							"Rows a cascade's sample holds at least (also 20% of the rows).",
							"With fewer than twice this many rows every row goes to the large model.",
							&cascade_min_sample, 100, 1, 1000000, PGC_USERSET, 0, NULL, NULL, NULL);
}

/* ---------- planner ---------- */

static bool
is_batch_plan(Plan *plan)
{
	return IsA(plan, CustomScan) &&
		strcmp(((CustomScan *) plan)->methods->CustomName, "LLM Batch") == 0;
}

void
llm_cascade_mark_plan(Plan *plan, bool all_partial, const char *reason)
{
	ListCell   *lc;
	bool		inner_partial = false;
	const char *inner_reason = reason;

	if (plan == NULL)
		return;
	if (all_partial && is_batch_plan(plan))
	{
		CustomScan *cs = (CustomScan *) plan;

		cs->custom_private = lappend(cs->custom_private, makeString(psprintf(PARTIAL_MARK "%s", reason)));
	}
	if (IsA(plan, Limit))
	{
		all_partial = true;
		reason = "under a LIMIT";
	}
	if ((IsA(plan, NestLoop) || IsA(plan, MergeJoin) || IsA(plan, HashJoin)) &&
		(((Join *) plan)->jointype == JOIN_SEMI || ((Join *) plan)->jointype == JOIN_ANTI))
	{
		inner_partial = true;
		inner_reason = "inner side of a semi or anti join";
	}
	llm_cascade_mark_plan(plan->lefttree, all_partial, reason);
	llm_cascade_mark_plan(plan->righttree, all_partial || inner_partial,
						  all_partial ? reason : inner_reason);
	foreach(lc, llm_plan_other_children(plan))
		llm_cascade_mark_plan(lfirst(lc), all_partial, reason);
}

static const char *
plan_partial_reason(CustomScan *cscan)
{
	ListCell   *lc;

	foreach(lc, cscan->custom_private)
		if (IsA(lfirst(lc), String) && strncmp(strVal(lfirst(lc)), PARTIAL_MARK, strlen(PARTIAL_MARK)) == 0)
			return strVal(lfirst(lc)) + strlen(PARTIAL_MARK);
	return NULL;
}

/* ---------- executor start ---------- */

/* Whether e reads an executor parameter (a subquery's value, a join's outer row). */
static bool
exec_param_walker(Node *e, void *context)
{
	if (e == NULL)
		return false;
	if (IsA(e, Param) && ((Param *) e)->paramkind == PARAM_EXEC)
		return true;
	if (IsA(e, SubPlan) || IsA(e, AlternativeSubPlan))
		return true;
	return expression_tree_walker(e, exec_param_walker, context);
}

/*
 * The value of the call's argument name, for every row: NULL when the
 * function lacks it; *varies when it reads the row.  A split target list
 * computes the arguments in the child, one column each (batch_plan.c), so
 * a column of the child is looked through to its expression there.
 */
static NullableDatum
constant_arg(CustomScanState *node, int n_calls, const BatchCascadeCall *call, const char *name,
			 bool *varies)
{
	NullableDatum v = {(Datum) 0, true};
	int			pos = llm_arg_map_position(call->map, name);
	Expr	   *e;
	ExprState  *es;

	if (pos < 0 || pos >= call->nargs)
		return v;
	e = list_nth(call->arg_exprs, pos);
	es = call->args[pos];
	if (IsA(e, Var) && ((Var *) e)->varno == INDEX_VAR && ((Var *) e)->varattno > n_calls)
	{
		Plan	   *child = outerPlan(node->ss.ps.plan);
		TargetEntry *te = list_nth(child->targetlist, ((Var *) e)->varattno - n_calls - 1);

		e = te->expr;
		es = NULL;
	}
	if (contain_var_clause((Node *) e) || contain_volatile_functions((Node *) e) ||
		exec_param_walker((Node *) e, NULL))
	{
		*varies = true;
		return v;
	}
	if (es == NULL)
		es = ExecInitExpr(e, &node->ss.ps);
	v.value = ExecEvalExpr(es, node->ss.ps.ps_ExprContext, &v.isnull);
	return v;
}

static BatchCascade *
inactive(BatchCascade *c, const char *reason)
{
	c->active = false;
	c->off_reason = reason;
	return c;
}

BatchCascade *
llm_cascade_begin(CustomScanState *node, int n_calls, const BatchCascadeCall *call, bool epq)
{
	static const char *const names[] = {"model", "cascade", "precision_target", "recall_target",
	"accuracy_target", "cascade_delta", "cascade_seed"};
	const LlmSqlFunction *fn = llm_arg_map_function(call->map);
	NullableDatum *args;
	bool		varies = false;
	LlmCall		read;
	BatchCascade *c;
	const char *partial;

	if (strcmp(fn->symbol, "pg_llm_filter") != 0 && strcmp(fn->symbol, "pg_llm_classify") != 0)
		return NULL;
	if (llm_arg_map_position(call->map, "cascade") < 0 &&
		(cascade_model == NULL || cascade_model[0] == '\0'))
		return NULL;

	/* the cascade's arguments, read and checked as the call reads them */
	args = palloc0(sizeof(NullableDatum) * Max(call->nargs, 1));
	for (int a = 0; a < call->nargs; a++)
		args[a].isnull = true;
	for (int i = 0; i < lengthof(names); i++)
	{
		int			pos = llm_arg_map_position(call->map, names[i]);

		if (pos >= 0 && pos < call->nargs)
			args[pos] = constant_arg(node, n_calls, call, names[i], &varies);
	}
	c = palloc0(sizeof(BatchCascade));
	c->call = *call;
	c->classify = strcmp(fn->symbol, "pg_llm_classify") == 0;
	if (varies)
		return inactive(c, "its arguments vary by row");
	llm_call_read(call->map, args, call->nargs, &read);
	if (read.cascade == NULL && cascade_model != NULL && cascade_model[0] != '\0')
	{
		const char *large = read.req.model != NULL ? read.req.model : "default";

		if (strcmp(cascade_model, large) == 0)
			return NULL;		/* the default small model is this call's own */
		llm_model_alias_check(cascade_model);
		read.cascade = pstrdup(cascade_model);
	}
	if (read.cascade == NULL)
		return NULL;

	c->small = pstrdup(read.cascade);
	c->large = pstrdup(read.req.model != NULL ? read.req.model : "default");
	llm_cascade_params_defaults(&c->params);
	c->params.precision_target = read.precision_target > 0 ? read.precision_target : precision_target;
	c->params.recall_target = read.recall_target > 0 ? read.recall_target : recall_target;
	c->params.accuracy_target = read.accuracy_target > 0 ? read.accuracy_target : accuracy_target;
	c->params.delta = read.cascade_delta > 0 ? read.cascade_delta : cascade_delta;
	c->params.seed = read.has_cascade_seed ? (uint64) read.cascade_seed : (uint64) cascade_seed;
	c->params.min_sample = cascade_min_sample;

	if (!enable_cascades)
		return inactive(c, "llm.enable_cascades is off");
	if (epq)
		return inactive(c, "a recheck uses the large model");
	if (n_calls != 1)
		return inactive(c, "the node has several calls");
	partial = plan_partial_reason((CustomScan *) node->ss.ps.plan);
	if (partial != NULL)
		return inactive(c, partial);

	c->active = true;
	c->cxt = AllocSetContextCreate(CurrentMemoryContext, "llm cascade rows", ALLOCSET_DEFAULT_SIZES);
	c->tmp_cxt = AllocSetContextCreate(CurrentMemoryContext, "llm cascade request", ALLOCSET_DEFAULT_SIZES);
	c->out_cxt = AllocSetContextCreate(CurrentMemoryContext, "llm cascade row", ALLOCSET_SMALL_SIZES);
	c->flight = palloc(sizeof(int64) * Max(call->window, 1));
	return c;
}

bool
llm_cascade_active(const BatchCascade *c)
{
	return c != NULL && c->active;
}

/* ---------- the run ---------- */

/* The scan tuple of row r, the call's value NULL (for its arguments) or v. */
static void
fill_slot(BatchCascade *c, CascadeRow *r, Datum v, bool isnull)
{
	TupleTableSlot *slot = c->call.eval_slot;

	ExecClearTuple(slot);
	ExecStoreMinimalTuple(r->tuple, c->call.child_row, false);
	slot_getallattrs(c->call.child_row);
	slot->tts_values[0] = v;
	slot->tts_isnull[0] = isnull;
	for (int i = 0; i < c->call.n_child; i++)
	{
		slot->tts_values[1 + i] = c->call.child_row->tts_values[i];
		slot->tts_isnull[1 + i] = c->call.child_row->tts_isnull[i];
	}
	ExecStoreVirtualTuple(slot);
	c->call.eval_cxt->ecxt_scantuple = slot;
}

/*
 * Build row i's call as the function does and send it to the small or the
 * large model.  The first build classifies the row (no call, an argument
 * error, a refused prompt, a request): builds are deterministic, so a later
 * one of the same row gives the same.
 */
static void
submit_row(BatchCascade *c, int64 i, bool large)
{
	CascadeRow *r = &c->rows[i];
	int			nargs = c->call.nargs;
	NullableDatum *args;
	LlmCall		call;
	LlmResult  *refused = NULL;
	bool		has_prompt = false;
	MemoryContext old;

	if (r->kind != CROW_UNREAD && r->kind != CROW_CALL)
		return;
	ResetExprContext(c->call.eval_cxt);
	fill_slot(c, r, (Datum) 0, true);
	MemoryContextReset(c->tmp_cxt);
	old = MemoryContextSwitchTo(c->tmp_cxt);
	args = palloc(sizeof(NullableDatum) * Max(nargs, 1));
	for (int a = 0; a < nargs; a++)
	{
		bool		isnull;
		Datum		v = ExecEvalExpr(c->call.args[a], c->call.eval_cxt, &isnull);

		if (!isnull && c->call.arg_typlen[a] == -1)
			v = PointerGetDatum(PG_DETOAST_DATUM_PACKED(v));
		args[a].value = v;
		args[a].isnull = isnull;
	}
	PG_TRY();
	{
		has_prompt = c->call.build(c->call.map, args, nargs, &call, &refused);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(c->cxt);
		edata = CopyErrorData();
		if (edata->elevel > ERROR || edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			PG_RE_THROW();
		FlushErrorState();
		r->error = edata;
		r->kind = CROW_ERROR;
		MemoryContextSwitchTo(old);
		return;
	}
	PG_END_TRY();

	if (has_prompt && call.value_arg != NULL && r->value_arg == NULL)
		r->value_arg = memcpy(MemoryContextAlloc(c->cxt, Max(call.value_arg_len, 1)),
							  call.value_arg, call.value_arg_len);
	if (!has_prompt)
		r->kind = CROW_NO_CALL;
	else if (refused != NULL)
	{
		MemoryContextSwitchTo(c->cxt);
		r->large = llm_result_copy(refused);
		r->on_error_null = call.on_error_null;
		r->kind = CROW_REFUSED;
	}
	else
	{
		r->kind = CROW_CALL;
		r->on_error_null = call.on_error_null;
		if (!large)
			call.req.model = c->small;
		llm_call_set_batch(&call);
		r->id = llm_submit(&call.req);
		llm_progress_note_cascade_call(!large ? LLM_CASCADE_CALL_SMALL :
									   r->sampled ? LLM_CASCADE_CALL_SAMPLE : LLM_CASCADE_CALL_LARGE);
		c->n_requests++;
		if (large)
			c->n_large_calls++;
		else
			c->n_small_calls++;
		if (large && r->sampled)
		{
			c->n_sample_calls++;
			if (c->classify)
			{
				/* the sample's labels, for the per-label recall */
				r->n_labels = call.n_labels;
				r->labels = MemoryContextAlloc(c->cxt, sizeof(char *) * Max(call.n_labels, 1));
				for (int l = 0; l < call.n_labels; l++)
					r->labels[l] = MemoryContextStrdup(c->cxt, call.labels[l]);
			}
		}
		c->flight[c->n_flight++] = i;
	}
	MemoryContextSwitchTo(old);
}

/* Take the finished requests in flight (of the small or the large model); true if any was. */
static bool
take_done(BatchCascade *c, bool large)
{
	bool		any = false;

	for (int f = 0; f < c->n_flight;)
	{
		CascadeRow *r = &c->rows[c->flight[f]];
		MemoryContext old;
		LlmResult  *res;

		if (!llm_request_is_done(r->id))
		{
			f++;
			continue;
		}
		old = MemoryContextSwitchTo(c->cxt);
		res = llm_take_result(r->id);
		MemoryContextSwitchTo(old);
		r->id = 0;
		c->n_used++;
		if (res->failed)
			c->n_failed++;
		if (large)
			r->large = res;
		else
			r->small = res;
		c->flight[f] = c->flight[--c->n_flight];
		any = true;
	}
	return any;
}

/* Send rows idx[0..count) to one model, at most the window in flight; wait for every answer. */
static void
run_calls(BatchCascade *c, const int64 *idx, int64 count, bool large)
{
	int64		next = 0;
	int			window = Max(c->call.window, 1);

	while (next < count || c->n_flight > 0)
	{
		CHECK_FOR_INTERRUPTS();
		while (next < count && c->n_flight < window)
			submit_row(c, idx[next++], large);
		llm_channel_poll(false);
		if (!take_done(c, large) && c->n_flight > 0)
			llm_channel_poll(true);
	}
}

/* llm_filter's probability of yes in a SCORE result (the softmax over Yes/yes/No/no). */
static double
p_yes(const LlmResult *res)
{
	double		m = -DBL_MAX,
				yes = 0.0,
				all = 0.0;

	if (res == NULL || res->failed || res->n_scores != LLM_FILTER_N_ANSWERS)
		return 0.5;
	for (int i = 0; i < res->n_scores; i++)
		m = Max(m, res->scores[i]);
	for (int i = 0; i < res->n_scores; i++)
	{
		double		e = exp(res->scores[i] - m);

		all += e;
		if (i < LLM_FILTER_N_YES)
			yes += e;
	}
	return yes / all;
}

/* llm_classify's label (its index) and its probability in a SCORE result; -1 / 0 for a failure. */
static int
best_label(const LlmResult *res, double *conf)
{
	int			best = 0;
	double		sum = 0.0;

	*conf = 0.0;
	if (res == NULL || res->failed || res->n_scores < 1)
		return -1;
	for (int i = 1; i < res->n_scores; i++)
		if (res->scores[i] > res->scores[best])
			best = i;
	for (int i = 0; i < res->n_scores; i++)
		sum += exp(res->scores[i] - res->scores[best]);
	*conf = 1.0 / sum;
	return best;
}

/* Read the child to the end into the rows. */
static void
read_all(BatchCascade *c, PlanState *child)
{
	for (;;)
	{
		TupleTableSlot *slot = ExecProcNode(child);
		MemoryContext old;

		if (TupIsNull(slot))
			break;
		if (c->n_rows == c->cap)
		{
			c->cap = Max(64, c->cap * 2);
			c->rows = c->rows == NULL ?
				MemoryContextAllocZero(c->cxt, sizeof(CascadeRow) * c->cap) :
				repalloc(c->rows, sizeof(CascadeRow) * c->cap);
			memset(c->rows + c->n_rows, 0, sizeof(CascadeRow) * (c->cap - c->n_rows));
		}
		slot_getallattrs(slot);
		old = MemoryContextSwitchTo(c->cxt);
		c->rows[c->n_rows].tuple = ExecCopySlotMinimalTuple(slot);
		MemoryContextSwitchTo(old);
		c->n_rows++;
	}
}

/*
 * llm_classify: each label's recall under the decision, estimated on the
 * sample with its lower confidence bound (llm_cascade_class_recall).  m
 * called rows, conf[0..m) and small_label[0..m) theirs; large_label[s]: the
 * large model's label of sample row s, -1 where its call failed (left
 * out).  Labels are indexes into a row's own list, so the estimate needs
 * every sampled row to have the same list.
 */
static void
estimate_class_recall(BatchCascade *c, const int64 *called, int64 m, const int64 *sample, int64 k,
					  const double *conf, const int *small_label, const int *large_label)
{
	const CascadeRow *first = NULL;

	for (int64 s = 0; s < k; s++)
	{
		const CascadeRow *r = &c->rows[called[sample[s]]];

		if (r->labels == NULL)
			continue;
		if (first == NULL)
			first = r;
		else if (r->n_labels != first->n_labels)
			c->recall_off = "the labels vary by row";
		else
			for (int l = 0; l < r->n_labels; l++)
				if (strcmp(r->labels[l], first->labels[l]) != 0)
					c->recall_off = "the labels vary by row";
	}
	if (first == NULL)
		c->recall_off = "no sampled row has a label";
	if (c->recall_off != NULL)
		return;
	c->n_labels = first->n_labels;
	c->label_names = palloc(sizeof(char *) * c->n_labels);
	c->recall = palloc(sizeof(llm_cascade_label_recall) * c->n_labels);
	for (int l = 0; l < c->n_labels; l++)
		c->label_names[l] = llm_utf8_to_cstring(first->labels[l], strlen(first->labels[l]));
	llm_cascade_class_recall(conf, small_label, m, sample, large_label, k, &c->d, &c->params,
							 c->n_labels, c->recall);
}

/*
 * Every row read, scored and routed (docs/CASCADES.md, "What a cascade
 * answers").  The child runs in the caller's memory context, never in the
 * rows' (a scan allocates its descriptor at its first row and frees it at
 * its end, after the rows are gone); the arrays here go into the rows'.
 */
static void
route_all(BatchCascade *c, PlanState *child)
{
	MemoryContext old;
	int64		n,
				m = 0,
				k,
				n_late = 0;
	int64	   *all,
			   *called,
			   *work,
			   *sample,
			   *late;

	read_all(c, child);
	old = MemoryContextSwitchTo(c->cxt);
	n = c->n_rows;
	c->ran = true;
	all = palloc(sizeof(int64) * Max(n, 1));
	for (int64 i = 0; i < n; i++)
		all[i] = i;
	c->d.threshold = LLM_CASCADE_ALL_LARGE;

	if (llm_cascade_sample_size(n, &c->params) == 0)
	{
		/* too few rows for a sample: the large model alone */
		c->too_few = true;
		run_calls(c, all, n, true);
		for (int64 i = 0; i < n; i++)
			c->n_called += c->rows[i].kind == CROW_CALL;
		goto done;
	}
	run_calls(c, all, n, false);
	called = palloc(sizeof(int64) * Max(n, 1));
	for (int64 i = 0; i < n; i++)
		if (c->rows[i].kind == CROW_CALL)
			called[m++] = i;
	c->n_called = m;
	k = llm_cascade_sample_size(m, &c->params);
	if (k == 0)
	{
		c->too_few = true;
		run_calls(c, called, m, true);
		goto done;
	}

	work = palloc(sizeof(int64) * m);
	sample = palloc(sizeof(int64) * k);
	llm_cascade_sample(m, k, c->params.seed, work, sample);
	c->n_sample = k;
	late = palloc(sizeof(int64) * k);
	for (int64 s = 0; s < k; s++)
	{
		late[s] = called[sample[s]];
		c->rows[late[s]].sampled = true;
	}
	run_calls(c, late, k, true);

	{
		double	   *score = palloc(sizeof(double) * m);
		double	   *scratch = palloc(sizeof(double) * m);
		int		   *small_label = palloc(sizeof(int) * m);
		bool	   *large_yes = palloc(sizeof(bool) * k);
		int		   *large_label = palloc(sizeof(int) * k);
		int		   *recall_label = palloc(sizeof(int) * k);

		for (int64 i = 0; i < m; i++)
		{
			const LlmResult *s = c->rows[called[i]].small;

			if (c->classify)
			{
				small_label[i] = best_label(s, &score[i]);
				if (small_label[i] < 0)
					small_label[i] = 0;
			}
			else
				score[i] = p_yes(s);
		}
		for (int64 s = 0; s < k; s++)
		{
			const LlmResult *l = c->rows[called[sample[s]]].large;
			double		unused;

			/* a failed large answer counts as no / the first label: the row keeps the failure */
			large_yes[s] = p_yes(l) > 0.5;
			recall_label[s] = best_label(l, &unused);
			large_label[s] = Max(recall_label[s], 0);
		}
		if (c->classify)
		{
			llm_cascade_classify_threshold(score, small_label, m, sample, large_label, k,
										   &c->params, scratch, &c->d);
			estimate_class_recall(c, called, m, sample, k, score, small_label, recall_label);
		}
		else
			llm_cascade_filter_threshold(score, m, sample, large_yes, k, &c->params, scratch, &c->d);

		/* the rows under the threshold, and every row whose small answer failed */
		late = palloc(sizeof(int64) * m);
		for (int64 i = 0; i < m; i++)
		{
			CascadeRow *r = &c->rows[called[i]];
			double		conf = c->classify ? score[i] : fmax(score[i], 1.0 - score[i]);

			if (r->sampled)
				continue;
			if (r->small == NULL || r->small->failed || !llm_cascade_keeps_small(&c->d, conf))
				late[n_late++] = called[i];
			else
				c->n_kept_small++;
		}
		run_calls(c, late, n_late, true);
	}
done:
	MemoryContextSwitchTo(old);
	c->routed = true;
	c->next = 0;
}

bool
llm_cascade_next(BatchCascade *c, PlanState *child, MinimalTuple *tuple, Datum *value, bool *isnull)
{
	if (!c->routed)
		route_all(c, child);
	while (c->next < c->n_rows)
	{
		CascadeRow *r = &c->rows[c->next++];
		const LlmResult *res = r->large != NULL ? r->large : r->small;
		MemoryContext old;

		MemoryContextReset(c->out_cxt);
		old = MemoryContextSwitchTo(c->out_cxt);
		*value = (Datum) 0;
		*isnull = true;
		switch (r->kind)
		{
			case CROW_ERROR:
				ReThrowError(r->error);
				break;
			case CROW_NO_CALL:
			case CROW_UNREAD:
				break;
			case CROW_REFUSED:
			case CROW_CALL:
				Assert(res != NULL);
				if (res->failed && !r->on_error_null)
					llm_raise_result(res);
				*value = c->call.value(res, r->value_arg, r->on_error_null, isnull);
				break;
		}
		MemoryContextSwitchTo(old);
		*tuple = r->tuple;
		if (c->call.qual != NULL)
		{
			ResetExprContext(c->call.eval_cxt);
			fill_slot(c, r, *value, *isnull);
			if (!ExecQual(c->call.qual, c->call.eval_cxt))
			{
				c->n_filtered++;
				continue;
			}
		}
		return true;
	}
	return false;
}

void
llm_cascade_reset(BatchCascade *c)
{
	if (c == NULL || !c->active)
		return;
	for (int f = 0; f < c->n_flight; f++)
	{
		llm_abort_request(c->rows[c->flight[f]].id);
		c->n_aborted++;
	}
	c->n_flight = 0;
	MemoryContextReset(c->cxt);
	c->rows = NULL;
	c->n_rows = c->cap = 0;
	c->routed = false;
	c->next = 0;
}

void
llm_cascade_count_calls(const BatchCascade *c, LlmRoleUsage *u)
{
	if (c == NULL || !c->active)
		return;
	u->cascade_small_calls += c->n_small_calls;
	u->cascade_sample_calls += c->n_sample_calls;
	u->cascade_large_calls += c->n_large_calls - c->n_sample_calls;
}

void
llm_cascade_explain(BatchCascade *c, ExplainState *es)
{
	StringInfoData buf;

	if (c == NULL)
		return;
	initStringInfo(&buf);
	if (!c->active)
	{
		appendStringInfo(&buf, "off (%s)", c->off_reason);
		ExplainPropertyText("Cascade", buf.data, es);
		return;
	}
	appendStringInfo(&buf, "%s => %s (", c->small, c->large);
	if (c->classify)
		appendStringInfo(&buf, "accuracy %g", c->params.accuracy_target);
	else
		appendStringInfo(&buf, "precision %g, recall %g", c->params.precision_target, c->params.recall_target);
	appendStringInfo(&buf, ", delta %g, seed " UINT64_FORMAT ")", c->params.delta, (uint64) c->params.seed);
	ExplainPropertyText("Cascade", buf.data, es);
	if (!es->analyze || !c->ran)
		return;
	resetStringInfo(&buf);
	appendStringInfo(&buf, "small " INT64_FORMAT ", large " INT64_FORMAT " (sample " INT64_FORMAT ")",
					 c->n_kept_small, c->n_called - c->n_kept_small, c->n_sample);
	ExplainPropertyText("Cascade Rows", buf.data, es);
	resetStringInfo(&buf);
	if (c->too_few)
		appendStringInfoString(&buf, "none (too few rows for a sample: every row to the large model)");
	else if (c->d.threshold >= LLM_CASCADE_ALL_LARGE)
		appendStringInfoString(&buf, "none (no candidate met the targets: every row to the large model)");
	else
		appendStringInfo(&buf, "%.4f (%d of %d candidates)", c->d.threshold, c->d.level,
						 c->params.n_candidates);
	ExplainPropertyText("Cascade Threshold", buf.data, es);
	if (c->classify && !c->too_few)
	{
		/*
		 * The estimate, and the lower bound at 1 - delta for each label (not
		 * jointly): rounded down, so the figure shown is still a bound; 1
		 * exactly when the small model's answers cannot miss the label.
		 */
		resetStringInfo(&buf);
		if (c->recall_off != NULL)
			appendStringInfo(&buf, "not estimated (%s)", c->recall_off);
		else
		{
			appendStringInfo(&buf, "estimated on the sample, lower bound at %g%% per label:",
							 100.0 * (1.0 - c->params.delta));
			for (int l = 0; l < c->n_labels; l++)
			{
				const llm_cascade_label_recall *r = &c->recall[l];

				appendStringInfo(&buf, "%s %s ", l > 0 ? "," : "", c->label_names[l]);
				if (r->rows == 0)
					appendStringInfoString(&buf, "none sampled");
				else
					appendStringInfo(&buf, "%.3f of " INT64_FORMAT, r->estimate, r->rows);
				if (r->exact)
					appendStringInfoString(&buf, " (>= 1)");
				else
					appendStringInfo(&buf, " (>= %.3f)", floor(r->lower * 1000.0) / 1000.0);
			}
		}
		ExplainPropertyText("Cascade Class Recall", buf.data, es);
	}
	ExplainPropertyInteger("Cascade Small Calls", NULL, c->n_small_calls, es);
	ExplainPropertyInteger("Cascade Large Calls", NULL, c->n_large_calls, es);
	ExplainPropertyInteger("LLM Requests", NULL, c->n_requests, es);
	ExplainPropertyInteger("LLM Requests Used", NULL, c->n_used, es);
	ExplainPropertyInteger("LLM Requests Aborted", NULL, c->n_aborted, es);
	ExplainPropertyInteger("LLM Failed Requests", NULL, c->n_failed, es);
	if (c->call.qual != NULL)
		ExplainPropertyInteger("Rows Removed by LLM Filter", NULL, c->n_filtered, es);
}
