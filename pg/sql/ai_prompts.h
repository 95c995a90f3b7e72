/*
 * ai_prompts.h — the prompts the AI functions build: every instruction
 * template of llm_classify / llm_classify_scores, llm_filter, llm_extract
 * and llm_agg, in one place (their text is quoted in
 * docs/STRUCTURED_OUTPUT.md).  Each builds the user message of a chat
 * prompt (the chat template and the call's system argument frame it; the
 * answer is the assistant's turn).  The fixed instruction comes first and
 * the row's input last, so rows of one statement share their prompt's start
 * in the prefix cache.  Inputs and results are UTF-8, palloc'd in
 * CurrentMemoryContext; an instruction may be NULL (none).
 */
#ifndef LLM_AI_PROMPTS_H
#define LLM_AI_PROMPTS_H

#include "postgres.h"

/* llm_classify: pick one of labels[0..n) for input. */
extern char *llm_prompt_classify(const char *input, const char *const *labels, int n,
								 const char *instruction);

/* llm_filter: a yes/no question about input. */
extern char *llm_prompt_filter(const char *input, const char *question);

/*
 * The answers llm_filter scores (each followed by the end of the turn):
 * the first LLM_FILTER_N_YES mean yes, the rest no.
 */
#define LLM_FILTER_N_ANSWERS	4
#define LLM_FILTER_N_YES		2
extern const char *const llm_filter_answers[LLM_FILTER_N_ANSWERS];

/*
 * llm_join: the text every candidate of one row follows, in the user's
 * message: llm_filter's prompt of input + LLM_JOIN_SEPARATOR, so that the
 * prompt with a candidate appended is llm_filter's of input ||
 * LLM_JOIN_SEPARATOR || candidate (sql_join.c).
 */
#define LLM_JOIN_SEPARATOR		"\n\nCandidate:\n"
extern char *llm_prompt_join(const char *input, const char *question);

/* llm_extract: the fields of schema (its JSON text) from input. */
extern char *llm_prompt_extract(const char *input, const char *schema, const char *instruction);

/*
 * llm_agg: answer instruction over rows[0..n) (the first level), or combine
 * partial answers parts[0..n) of the same instruction (every higher level).
 * With n = 0 the template alone, which llm_agg measures to size its chunks;
 * each item then adds its text and LLM_AGG_SEPARATOR (and for parts a
 * "Part k:" line, counted in LLM_AGG_PART_OVERHEAD tokens at most).
 */
#define LLM_AGG_SEPARATOR		"\n---\n"
#define LLM_AGG_PART_OVERHEAD	8
extern char *llm_prompt_agg_rows(const char *instruction, const char *const *rows, int n);
extern char *llm_prompt_agg_combine(const char *instruction, const char *const *parts, int n);

#endif
