/*
 * sql_grammar.h — a call's grammar in the backend: the choices, regex or
 * json_schema option compiled here, before anything is sent, so that an
 * unsupported construct, an invalid pattern or a grammar that accepts
 * nothing is an ERROR 22023 naming it (54000 over a grammar limit, 53200
 * out of memory) before any work, whatever on_error says.  The request then
 * carries the grammar's normalized source (grammar.h), which the worker
 * compiles again once per distinct source (engine/grammar/lp_grammar.h).
 *
 * A per-backend cache of LLM_SQL_GRAMMAR_CACHE sources (the key: the kind
 * and the source as given; the value: its normalized source; least recently
 * used evicted) keeps a grammar that every row of a statement repeats from
 * compiling again.  A compile cannot be interrupted; its time and memory are
 * bounded by grammar.h's limits.
 */
#ifndef LLM_SQL_GRAMMAR_H
#define LLM_SQL_GRAMMAR_H

#include "postgres.h"

#include "sql_args.h"

#define LLM_SQL_GRAMMAR_CACHE 16

/*
 * Compile the one grammar option call has (choices, regex or json_schema)
 * and point call->req.grammar at its normalized source (palloc'd in
 * CurrentMemoryContext), call->grammar_max_bytes at its longest output
 * (llm_grammar_max_bytes); nothing without one.  ERROR 22023 when more than
 * one is given, for an empty choices array or a NULL choice, and for a
 * source that does not compile.
 */
extern void llm_call_set_grammar(LlmCall *call);

#endif
