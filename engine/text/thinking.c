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

static const char open_tag[] = "<think>";
static const char close_tag[] = "</think>";

#define N_OPEN (sizeof(open_tag) - 1)
#define N_CLOSE (sizeof(close_tag) - 1)

size_t
llm_thinking_answer_offset(const char *text, size_t len, bool opened)
{
	const size_t n_open = N_OPEN;
	const size_t n_close = N_CLOSE;
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

bool
llm_thinking_prefix_settled(const char *text, size_t len, bool opened, size_t *offset)
{
	size_t		i = skip_space(text, len, 0);

	if (i == len)
		return false;			/* whitespace only: a section may still start */
	if (len - i >= N_OPEN && memcmp(text + i, open_tag, N_OPEN) == 0)
		i += N_OPEN;
	else if (len - i < N_OPEN && memcmp(text + i, open_tag, len - i) == 0)
		return false;			/* the start of "<think>" (which holds no "</think>") */
	else if (!opened)
	{
		*offset = 0;			/* text first: no section, whatever follows */
		return true;
	}
	for (; i + N_CLOSE <= len; i++)
		if (memcmp(text + i, close_tag, N_CLOSE) == 0)
		{
			size_t		o = skip_space(text, len, i + N_CLOSE);

			if (o == len)
				return false;	/* more whitespace after the close may follow */
			*offset = o;
			return true;
		}
	return false;				/* the section is still open */
}
