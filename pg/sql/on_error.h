/*
 * on_error.h — on_error => 'null': a failed call gives NULL, and the
 * failures of one statement are reported by one WARNING when the top-level
 * statement ends (or at commit, for PL/pgSQL simple expressions that run
 * outside any executor), whichever path evaluated the calls (the SQL
 * functions or the LLM Batch node).
 *
 *   WARNING:  2 llm requests failed, returning NULL
 *   DETAIL:  First failure: <message>
 *
 * A single failure gives "llm request failed, returning NULL: <message>"
 * with its SQLSTATE.  The count is per backend, reset on abort.
 */
#ifndef LLM_ON_ERROR_H
#define LLM_ON_ERROR_H

#include "postgres.h"

/* Install the executor hooks and the transaction callback (from _PG_init). */
extern void llm_on_error_init(void);

/* The executor nesting level now: 0 outside any executor run, 1 in a top-level query's. */
extern int	llm_exec_nesting(void);

/* Count one failed request of the running statement; the first message is kept. */
extern void llm_note_null_failure(int sqlstate, const char *message);

#endif
