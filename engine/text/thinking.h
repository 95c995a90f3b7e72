/*
 * thinking.h — where a thinking model's answer starts: the text after its
 * <think>...</think> section.
 *
 * The section is recognised only at the start of the output: the output,
 * after leading whitespace, begins with "<think>", or the prompt opened it
 * (opened: a chat template rendered with enable_thinking => true may end
 * the prompt with "<think>", so the output begins inside the section).
 * Then everything up to and including the first "</think>" and the
 * whitespace after it is the section.  No "</think>" (the output stopped
 * while thinking) or no section at the start: nothing is stripped.
 * Plain C, no allocation; offsets in bytes of UTF-8 text.
 */
#ifndef LLM_THINKING_H
#define LLM_THINKING_H

#include <stdbool.h>
#include <stddef.h>

/* The offset of the answer in text[0..len): 0 when there is no section to strip. */
size_t		llm_thinking_answer_offset(const char *text, size_t len, bool opened);

#endif
