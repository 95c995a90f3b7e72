/*
 * batch_scan.h — the "LLM Batch" executor node: reads rows ahead under a
 * plan node whose target list calls llm_generate(text, ...), submits every
 * call of a window of rows at once and emits the rows in their original
 * order as the results arrive.  Design: docs/BATCH_SCAN.md.
 */
#ifndef LLM_BATCH_SCAN_H
#define LLM_BATCH_SCAN_H

#include "postgres.h"

#include "fmgr.h"

#include "channel.h"

/* GUCs (defined in batch_scan.c) */
extern int	llm_batch_window;
extern bool llm_enable_batch_scan;

/* Register the GUCs, the planner and executor hooks and the node's methods (from _PG_init). */
extern void llm_batch_init(void);

/*
 * on_error => 'null': count one failed request of the running statement;
 * the first message is kept for the WARNING summary emitted once at the end
 * of the top-level statement (or at commit).
 */
extern void llm_note_null_failure(int sqlstate, const char *message);

/* sql_api.c: the request and the value of one llm_generate(text, ...) call. */
extern bool llm_generate_build_request(FunctionCallInfo fcinfo, LlmGenRequest *req,
									   bool *on_error_null, LlmResult **local);
extern Datum llm_generate_result_datum(const LlmResult *res, bool on_error_null, bool *isnull);

#endif
