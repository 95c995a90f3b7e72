/* text_util.c — see text_util.h. */
#include "text_util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

void
llm_set_err(char *err, size_t errlen, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

size_t
llm_utf8_first_invalid(const char *s, size_t n)
{
	const uint8_t *p = (const uint8_t *) s;
	size_t		i = 0;

	while (i < n)
	{
		uint8_t		c = p[i];
		size_t		len;
		uint8_t		lo = 0x80,
					hi = 0xBF;

		if (c < 0x80)
		{
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			len = 2;
		else if (c >= 0xE0 && c <= 0xEF)
			len = 3;
		else if (c >= 0xF0 && c <= 0xF4)
			len = 4;
		else
			return i;
		/* the second byte's range excludes overlongs, surrogates and > U+10FFFF */
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
		else if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
		if (i + len > n || p[i + 1] < lo || p[i + 1] > hi)
			return i;
		for (size_t k = 2; k < len; k++)
			if (p[i + k] < 0x80 || p[i + k] > 0xBF)
				return i;
		i += len;
	}
	return n;
}
