/*
 * batch_scan.h — the "LLM Batch" node (planner half batch_plan.c, executor
 * half batch_exec.c): reads rows ahead under a
 * plan node whose target list calls a batchable generation function
 * (llm_generate(text, ...): sql_args.h's function table), submits every
 * call of a window of rows at once and emits the rows in their original
 * order as the results arrive.  Design: docs/BATCH_SCAN.md.
 */
#ifndef LLM_BATCH_SCAN_H
#define LLM_BATCH_SCAN_H

#include "postgres.h"

#include "nodes/extensible.h"

/* GUCs (registered by llm_batch_init; llm.batch_window read by the executor half) */
extern int	llm_batch_window;		/* batch_exec.c */
extern bool llm_dedup_calls;		/* batch_exec.c: share identical deterministic calls */
extern bool llm_enable_batch_scan;	/* batch_plan.c */

/*
 * Between the halves (batch_plan.c -> batch_exec.c, never back): the
 * executor's state for a planned node, and the layout of the plan node that
 * batch_plan.c builds.
 */
extern Node *llm_batch_create_state(CustomScan *cscan);

/*
 * custom_private of the node: [n_child, n_quals, [stage per call]];
 * custom_exprs: [[args of call 0], ..., [args of call n-1], qual 0, ...].
 */
#define PRIV_N_CHILD(cs)	intVal(linitial((cs)->custom_private))
#define PRIV_N_QUALS(cs)	intVal(lsecond((cs)->custom_private))
#define PRIV_STAGES(cs)		((List *) lthird((cs)->custom_private))

/*
 * The plan nodes directly below plan other than lefttree and righttree
 * (Append and MergeAppend members, bitmap arms, a subquery scan's plan, a
 * custom scan's children): every walk of a finished plan uses this list.
 */
extern List *llm_plan_other_children(Plan *plan);

/* Register the GUCs, the planner hook and the node's methods (from _PG_init). */
extern void llm_batch_init(void);

#endif
