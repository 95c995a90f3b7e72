/*
 * thinking.c — the answer after a leading <think>...</think> section
 * (thinking.h).
 */
#include "thinking.h"

#include <string.h>

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t
skip_space(const char *text, size_t len, size_t i)
{
	while (i < len && is_space(text[i]))
		i++;
	return i;
}

size_t
llm_thinking_answer_offset(const char *text, size_t len, bool opened)
{
	static const char open_tag[] = "<think>";
	static const char close_tag[] = "</think>";
	const size_t n_open = sizeof(open_tag) - 1;
	const size_t n_close = sizeof(close_tag) - 1;
	size_t		i = skip_space(text, len, 0);

	if (len - i >= n_open && memcmp(text + i, open_tag, n_open) == 0)
		i += n_open;
	else if (!opened)
		return 0;
	for (; i + n_close <= len; i++)
		if (memcmp(text + i, close_tag, n_close) == 0)
			return skip_space(text, len, i + n_close);
	return 0;
}
