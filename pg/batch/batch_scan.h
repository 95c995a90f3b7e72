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

/* GUCs (defined in batch_plan.c) */
extern int	llm_batch_window;
extern bool llm_enable_batch_scan;

/*
 * Between the halves: the node's plan methods (batch_exec.c, which creates
 * its state) and the layout of the plan node that batch_plan.c builds.
 */
extern const CustomScanMethods llm_batch_plan_methods;

/*
 * custom_private of the node: [n_child, n_quals, [stage per call]];
 * custom_exprs: [[args of call 0], ..., [args of call n-1], qual 0, ...].
 */
#define PRIV_N_CHILD(cs)	intVal(linitial((cs)->custom_private))
#define PRIV_N_QUALS(cs)	intVal(lsecond((cs)->custom_private))
#define PRIV_STAGES(cs)		((List *) lthird((cs)->custom_private))

/* Register the GUCs, the planner hook and the node's methods (from _PG_init). */
extern void llm_batch_init(void);

#endif
