/*
 * sql_result.h — what a finished request becomes in SQL: text in the
 * database encoding, and failures raised with the worker's SQLSTATE or,
 * with on_error => 'null', NULL plus the statement's WARNING (on_error.h).
 */
#ifndef LLM_SQL_RESULT_H
#define LLM_SQL_RESULT_H

#include "postgres.h"

#include "channel/client.h"

/* A failed result for a request refused before sending (palloc'd). */
extern LlmResult *llm_local_failure(int sqlstate, const char *message);

/*
 * A copy of res (failed or not, with its arrays) in the current memory
 * context: a result a build answered without a request, kept beyond the
 * build's memory.
 */
extern LlmResult *llm_result_copy(const LlmResult *res);

/* Raise a failed result as an ERROR with its SQLSTATE. */
extern void llm_raise_result(const LlmResult *res) pg_attribute_noreturn();

/*
 * True when res succeeded; a failure raises its ERROR, or with
 * on_error_null is noted for the statement's WARNING and gives false.
 */
extern bool llm_result_usable(const LlmResult *res, bool on_error_null);

/* llm_generate(text)'s value: the text, or *isnull for a failure under on_error_null. */
extern Datum llm_text_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull);

/* llm_extract's value: the output (JSON text valid against its schema) as jsonb. */
extern Datum llm_jsonb_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull);

/*
 * Values of a SCORE request whose text is the JSON array of its
 * continuations (continuation_echo), one score (a sum of natural
 * log-probabilities) per continuation:
 *   llm_label_value         the continuation with the highest score (the
 *                           first of equal ones), as text;
 *   llm_label_scores_value  jsonb {continuation: probability}: the softmax
 *                           of the scores, which sums to 1;
 *   llm_yes_no_value        llm_filter's boolean: true when the answers
 *                           meaning yes (ai_prompts.h) are together more
 *                           likely than those meaning no.
 */
extern Datum llm_label_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull);
extern Datum llm_label_scores_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull);
extern Datum llm_yes_no_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull);

/*
 * llm_filter's decision over the scores of its LLM_FILTER_N_ANSWERS answers
 * (ai_prompts.h order), as llm_yes_no_value takes it; llm_join decides each
 * pair with it.
 */
extern bool llm_yes_no_scores(const double *scores);

#endif
