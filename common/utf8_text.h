/*
 * utf8_text.h — text crossing to and from the worker.  Everything on the
 * channel is UTF-8; SQL text is in the database encoding.
 */
#ifndef LLM_UTF8_TEXT_H
#define LLM_UTF8_TEXT_H

#include "postgres.h"

/* A NUL-terminated UTF-8 copy (palloc'd) of a text datum; an untranslatable character is an ERROR. */
extern char *llm_text_to_utf8(text *t);

/*
 * A text datum in the database encoding from valid UTF-8 bytes.  Characters
 * the database encoding cannot represent become '?' rather than failing:
 * model output is not under the caller's control.  Invalid UTF-8 (or a NUL
 * byte) is an ERROR.
 */
extern text *llm_utf8_to_text(const char *s, int len);

/* The same as a NUL-terminated C string in the database encoding. */
extern char *llm_utf8_to_cstring(const char *s, int len);

#endif
