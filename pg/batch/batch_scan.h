/*
 * batch_scan.h — the "LLM Batch" executor node: reads rows ahead under a
 * plan node whose target list calls a batchable generation function
 * (llm_generate(text, ...): sql_args.h's function table), submits every
 * call of a window of rows at once and emits the rows in their original
 * order as the results arrive.  Design: docs/BATCH_SCAN.md.
 */
#ifndef LLM_BATCH_SCAN_H
#define LLM_BATCH_SCAN_H

#include "postgres.h"

/* GUCs (defined in batch_scan.c) */
extern int	llm_batch_window;
extern bool llm_enable_batch_scan;

/* Register the GUCs, the planner hook and the node's methods (from _PG_init). */
extern void llm_batch_init(void);

#endif
