/*
 * batch_report.c — what an LLM Batch node reports (batch_node.h): its
 * EXPLAIN lines (the moved quals, the lift, the window, the cascade, and
 * under ANALYZE the requests, tokens and calls saved), and, when it ends,
 * its counts into llm_usage and llm_progress (common/stats.h,
 * LLM_COUNTERS_NODE).
 */
#include "postgres.h"

#include "commands/explain.h"
#include "nodes/makefuncs.h"
#include "utils/ruleutils.h"

#include "batch_cascade.h"
#include "batch_lift.h"
#include "batch_node.h"
#include "common/progress.h"
#include "common/registry.h"

/*
 * What the node saved and its cascade's calls, into the role's llm_usage
 * (once per node) and the statement's llm_progress (the shared calls and
 * the cascade's calls were noted there one by one).
 */
void
llm_batch_note_saved(BatchScanState *st)
{
	LlmRoleUsage saved = {0};
	bool		any = false;

	if (st->lift_scans != NIL)
	{
		saved.lift_rows_below = llm_lift_rows_below(st->lift_scans);
		saved.lift_rows_reached = st->n_child_rows * list_length(st->lift_scans);
		llm_progress_note_saved(&saved);
	}
	saved.calls_shared = st->n_shared;
	llm_cascade_count_calls(st->cascade, &saved);
#define ANY_COUNTED(type, name, kind, m, u, p) any |= saved.name != 0;
	LLM_COUNTERS_NODE(ANY_COUNTED)
#undef ANY_COUNTED
	if (any)
		llm_stats_note_saved(&saved);
}

void
llm_batch_explain(CustomScanState *node, List *ancestors, ExplainState *es)
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
	llm_lift_explain(cscan, es);
	ExplainPropertyInteger("Batch Window", NULL, st->max_window, es);
	if (es->verbose)
		ExplainPropertyInteger("LLM Calls per Row", NULL, st->n_calls, es);
	llm_cascade_explain(st->cascade, es);
	if (es->analyze && !llm_cascade_active(st->cascade))
	{
		/*
		 * The run is over: rows still read ahead were never consumed (a
		 * parent stopped early); abort them now so the counts are final.
		 */
		llm_batch_release_all(st);
		ExplainPropertyInteger("LLM Requests", NULL, st->n_requests, es);
		ExplainPropertyInteger("LLM Requests Used", NULL, st->n_used, es);
		ExplainPropertyInteger("LLM Requests Aborted", NULL, st->n_aborted, es);
		ExplainPropertyInteger("LLM Failed Requests", NULL, st->n_failed, es);
		ExplainPropertyInteger("Max Requests in Flight", NULL, st->max_in_flight, es);
		if (st->n_quals > 0)
			ExplainPropertyInteger("Rows Removed by LLM Filter", NULL, st->n_filtered, es);
		if (st->n_shared > 0)
			ExplainPropertyInteger("LLM Calls Shared", NULL, st->n_shared, es);
		if (st->lift_scans != NIL)
		{
			ExplainPropertyInteger("LLM Lifted Filter Rows Below", NULL, llm_lift_rows_below(st->lift_scans), es);
			ExplainPropertyInteger("LLM Lifted Filter Rows Here", NULL,
								   st->n_child_rows * list_length(st->lift_scans), es);
		}
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

