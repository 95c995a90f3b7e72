/*
 * sql_ai.h — the calls of the AI functions (llm_extract, llm_classify,
 * llm_classify_scores, llm_filter): how each builds its request from its
 * input and its own arguments.  Their prompts are ai_prompts.h's templates;
 * their options are read through the argument table like any generation
 * function's (sql_args.h), and their own inputs (labels, instruction,
 * question) are rows of that table's second part.  Each build is the
 * batch_build of its function-table row (sql_args.c), so the function and
 * the LLM Batch node build a call the same way.
 */
#ifndef LLM_SQL_AI_H
#define LLM_SQL_AI_H

#include "sql_args.h"

/*
 * The builds of the AI functions' calls (function-table rows, same
 * contract as llm_call_build_text); their first argument is the input, the
 * prompt is built from it by ai_prompts.h, and their own inputs are checked
 * with ERROR 22023:
 *   llm_extract   GENERATE under its json_schema (NULL: an error);
 *   llm_classify, llm_classify_scores
 *                 SCORE of each label followed by the end of turn, the
 *                 labels echoed (request.h continuation_echo); labels NULL,
 *                 empty, with a NULL or empty element or a duplicate are
 *                 errors, more than LLM_MAX_CONTINUATIONS 54000;
 *   llm_filter    SCORE of the yes and no answers of ai_prompts.h.
 */
extern bool llm_call_build_extract(const LlmArgMap *map, const NullableDatum *args, int nargs,
								   LlmCall *call, LlmResult **refused);
extern bool llm_call_build_classify(const LlmArgMap *map, const NullableDatum *args, int nargs,
									LlmCall *call, LlmResult **refused);
extern bool llm_call_build_filter(const LlmArgMap *map, const NullableDatum *args, int nargs,
								  LlmCall *call, LlmResult **refused);

/*
 * llm_join (sql_join.c): SCORE of llm_filter's answers after each
 * candidate, forked from the common prompt (request.h continuation_answers);
 * value_arg holds the 0-based positions of the candidates sent (int32 each,
 * NULL and empty ones skipped).  No candidate to send: *refused is an empty
 * result (no match); more than one request holds: the build sends them all,
 * waits, and *refused holds their scores in order (or the first failure).
 * llm_join_value: the 1-based positions of the candidates answered yes.
 */
extern bool llm_call_build_join(const LlmArgMap *map, const NullableDatum *args, int nargs,
								LlmCall *call, LlmResult **refused);
extern Datum llm_join_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull);

#endif
