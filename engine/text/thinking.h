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

/*
 * For a prefix of the output (more text may follow, as when streaming):
 * true when every continuation of text[0..len) has the same answer offset,
 * which is then *offset (< len, or 0: nothing stripped); false while more
 * text could change it (only whitespace so far, a prefix of "<think>", a
 * section not closed yet, or nothing but whitespace after its close).  Once
 * true it stays true with the same offset for any longer prefix, and at
 * the end of the output llm_thinking_answer_offset decides what is left.
 */
bool		llm_thinking_prefix_settled(const char *text, size_t len, bool opened, size_t *offset);

#endif
