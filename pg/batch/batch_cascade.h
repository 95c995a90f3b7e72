/*
 * batch_cascade.h — a model cascade run by the LLM Batch node
 * (docs/CASCADES.md; the threshold is cascade_stats.h's).
 *
 * When it applies: the node has exactly one call, an llm_filter or an
 * llm_classify whose cascade => argument (else llm.cascade_model) names a
 * small model, llm.enable_cascades is on, the node is not an EvalPlanQual
 * recheck, and the planner did not mark it as read partly (under a Limit,
 * in a SubPlan, the inner side of a semi or anti join, a cursor:
 * llm_cascade_mark_plan).  Every cascade argument must be the same for
 * every row (no column of the row in it); the node reads them once, at
 * executor start, with the call's own checks (22023).
 *
 * What it does: the node reads its child to the end, keeping every row
 * (copies in the node's memory, for the statement), builds each row's call
 * as the function would, sends it to the small model (batched, at most
 * llm.batch_window in flight), draws the seeded sample, sends it to the
 * large model (the call's model =>), learns the threshold, sends the rows
 * under it to the large model, then returns the rows in their order, each
 * with the large model's answer where it has one, else the small model's.
 * With too few rows for the sample every row goes to the large model only.
 * Rows whose call has no request (NULL input) or an argument error keep the
 * row-by-row outcome (NULL; the error raised at the row's turn).
 *
 * Memory: the node's executor memory, for the whole statement.  No locking:
 * one backend.
 */
#ifndef LLM_BATCH_CASCADE_H
#define LLM_BATCH_CASCADE_H

#include "postgres.h"

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "nodes/extensible.h"

#include "pg/sql/sql_args.h"

/* GUCs: llm.enable_cascades, llm.cascade_model, the targets' defaults (llm_batch_init) */
extern void llm_cascade_define_gucs(void);

/*
 * Planner: mark every LLM Batch node of plan that may be read only in part
 * (below a Limit, the inner side of a semi or anti join; all of them when
 * all_partial, for a cursor's plan or a SubPlan) in its custom_private,
 * with the reason EXPLAIN prints.
 */
extern void llm_cascade_mark_plan(Plan *plan, bool all_partial, const char *reason);

/* The node's one call, as batch_exec.c keeps it. */
typedef struct BatchCascadeCall
{
	List	   *arg_exprs;		/* the call's argument expressions (plan) */
	ExprState **args;			/* ... initialised, over the scan tuple */
	int			nargs;
	int16	   *arg_typlen;
	const LlmArgMap *map;
	LlmCallBuildFn build;
	LlmCallValueFn value;
	ExprState  *qual;			/* the call's conjunct, or NULL: a target-list call */
	int			n_child;		/* child columns after the call's in the scan tuple */
	TupleTableSlot *child_row;	/* deforms a stored child row */
	TupleTableSlot *eval_slot;	/* the scan tuple: [call value, child columns] */
	ExprContext *eval_cxt;
	int			window;			/* requests in flight at most */
} BatchCascadeCall;

typedef struct BatchCascade BatchCascade;

/*
 * At executor start: the node's cascade, or NULL when no call of it asks
 * for one.  A cascade that does not apply (the reasons above) is returned
 * inactive, for EXPLAIN to say why.  n_calls: the node's calls; call: its
 * first (the only one a cascade runs on).
 */
extern BatchCascade *llm_cascade_begin(CustomScanState *node, int n_calls, const BatchCascadeCall *call,
									   bool epq);

/* Whether the node runs its rows through the cascade. */
extern bool llm_cascade_active(const BatchCascade *c);

/*
 * The next row in order (the first call reads, scores and routes every
 * row): its child tuple and the call's value; rows the conjunct rejects are
 * skipped.  False at the end.  A row's failure raises at its turn.  The
 * tuple and value stay valid until the next call.
 */
extern bool llm_cascade_next(BatchCascade *c, PlanState *child, MinimalTuple *tuple,
							 Datum *value, bool *isnull);

/* Abort what is in flight and forget the rows (end, rescan). */
extern void llm_cascade_reset(BatchCascade *c);

/*
 * The cascade's calls so far (every run of the node) added to u's
 * LLM_COUNTERS_CASCADE fields (stats.h), for llm_usage when the node ends.
 */
struct LlmRoleUsage;
extern void llm_cascade_count_calls(const BatchCascade *c, struct LlmRoleUsage *u);

/*
 * EXPLAIN's Cascade lines (and the requests' counts under ANALYZE; for
 * llm_classify each label's recall estimated on the sample: the share of
 * the sampled rows the large model gives the label that the threshold's
 * rule would give it too, the small model's label where it keeps it; an
 * estimate, not a guarantee: the threshold was learnt on the same rows).
 */
extern void llm_cascade_explain(BatchCascade *c, ExplainState *es);

#endif
