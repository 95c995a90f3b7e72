/*
 * batch_lift.h — model-calling filters placed above joins (batch_lift.c).
 *
 * PostgreSQL attaches a qual to the lowest plan node where its columns
 * exist, whatever it costs.  Before the LLM Batch rewrite (batch_plan.c),
 * llm_lift_filters moves each model-calling conjunct of a scan's qual up to
 * the join, on its path to the root, whose estimated output (rows times
 * loops) is smallest, when that is fewer rows than at the scan: the join
 * order is unchanged, the conjunct's columns are carried up the target lists
 * in between and the conjunct becomes a filter (plan.qual) of that join,
 * which the batch rewrite then evaluates in an LLM Batch node above it.
 *
 * Contract: only where the answer cannot change (docs/FILTER_PLACEMENT.md):
 * up through inner joins, the preserved side of
 * LEFT / RIGHT joins and the outer side of semi / anti joins, and the
 * non-projecting Hash, Sort, Incremental Sort and Material nodes; never out
 * of a scan whose quals mix security levels or of a relation a
 * security-barrier view of the statement reads (keeps_order says which),
 * never a conjunct with a
 * SubPlan or an executor Param, never through anything else (aggregation,
 * DISTINCT, windows, set-returning functions, LIMIT, subquery scans,
 * Append, Gather, Memoize); above a join where a scan row may meet several
 * rows (1:N) only for a deterministic call (no sampling, or sampling with a
 * seed).
 */
#ifndef LLM_BATCH_LIFT_H
#define LLM_BATCH_LIFT_H

#include "postgres.h"

#include "nodes/plannodes.h"

/* llm.lift_filters: the switch (registered by llm_lift_init) */
extern bool llm_lift_filters_enabled;

/*
 * Whether a scan's filters must stay on it: its quals mix security levels
 * (their order is a promise), or it reads a relation of a security-barrier
 * view (the view's quals must run before the query's joins).
 */
typedef bool (*LlmLiftKeepsOrder) (Plan *scan, void *arg);

/*
 * Lift the model-calling filters of the finished plan tree in place.
 * Returns the notes for EXPLAIN, one per join a filter was lifted to, for
 * llm_lift_annotate once the batch rewrite has placed its nodes.
 */
extern List *llm_lift_filters(Plan *plan, List *rtable, LlmLiftKeepsOrder keeps_order, void *arg);

/*
 * Give each LLM Batch node placed directly above a join of notes that join's
 * notes, one per scan a filter was lifted from: custom_private gains a List
 * [String from, Integer rows there, Integer rows here, Integer the scan's
 * plan_node_id] after its fixed members (batch_scan.h).
 */
extern void llm_lift_annotate(Plan *plan, List *notes);

/* EXPLAIN of an LLM Batch node: its "LLM Filter Lifted" line, if it has one. */
struct ExplainState;
extern void llm_lift_explain(CustomScan *cscan, struct ExplainState *es);

/*
 * The plan_node_id of each scan the filters of an LLM Batch node were
 * lifted from (NIL: none lifted there).
 */
extern List *llm_lift_scan_ids(CustomScan *cscan);

/*
 * At the node's executor start (child: its initialized child): the
 * PlanStates of those scans, each given PostgreSQL's row instrumentation
 * where it has none, so that llm_lift_rows_below can tell how many rows
 * they returned: the rows the filters would have been called for where
 * the planner put them (llm_usage, llm_progress, EXPLAIN ANALYZE).
 */
struct PlanState;
extern List *llm_lift_count_scans(CustomScan *cscan, struct PlanState *child);

/* Rows the scans of llm_lift_count_scans returned so far, over all their runs. */
extern int64 llm_lift_rows_below(List *scans);

/* Register llm.lift_filters (from llm_batch_init). */
extern void llm_lift_init(void);

#endif
