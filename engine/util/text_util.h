/*
 * text_util.h — small helpers shared by the engine's parsers: error
 * messages into caller buffers and UTF-8 validation.
 */
#ifndef LLM_TEXT_UTIL_H
#define LLM_TEXT_UTIL_H

#include <stddef.h>

/* printf into err[errlen] (always NUL-terminated); no-op when err is NULL or errlen 0. */
void		llm_set_err(char *err, size_t errlen, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/*
 * Offset of the first ill-formed UTF-8 byte in s[0..n), or n when valid
 * (Unicode 15, table 3-7: no overlongs, surrogates or code points > U+10FFFF).
 */
size_t		llm_utf8_first_invalid(const char *s, size_t n);

/*
 * The whole file at path in a malloc'd buffer the caller frees, NUL-terminated
 * (the NUL not counted in *len); NULL + err when it cannot be opened or read
 * ("could not open <what> \"path\": <strerror>", "could not read ...") or
 * holds more than max bytes ("<what> \"path\" is larger than <max> bytes").
 * Only a regular file is read ("<what> \"path\" is not a regular file"): a
 * FIFO or a device would block or never end, and the caller may hold work
 * of others while it reads.  what names the file in the messages ("file"
 * when NULL).
 */
char	   *llm_read_file(const char *path, size_t max, const char *what, size_t *len, char *err,
						  size_t errlen);

#endif
