/* text_util.c — see text_util.h. */
#include "text_util.h"

#include <stdarg.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

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

char *
llm_read_file(const char *path, size_t max, const char *what, size_t *len, char *err, size_t errlen)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused */
	int			fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	FILE	   *fp;
	char	   *buf = NULL;
	size_t		cap = 0,
				n = 0;

	if (what == NULL)
		what = "file";
	*len = 0;
	if (fd < 0)
	{
		llm_set_err(err, errlen, "could not open %s \"%s\": %s", what, path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
	{
		llm_set_err(err, errlen, "%s \"%s\" is not a regular file", what, path);
		close(fd);
		return NULL;
	}
	fp = fdopen(fd, "rb");
	if (fp == NULL)
	{
		llm_set_err(err, errlen, "could not open %s \"%s\": %s", what, path, strerror(errno));
		close(fd);
		return NULL;
	}
	/* read in growing chunks: the size is not trusted (a file being written) */
	for (;;)
	{
		size_t		got;

		if (n == cap)
		{
			size_t		want = cap == 0 ? 64 * 1024 : cap * 2;
			char	   *more;

			if (cap > max)
				break;
			more = realloc(buf, want + 1);
			if (more == NULL)
			{
				free(buf);
				fclose(fp);
				llm_set_err(err, errlen, "out of memory");
				return NULL;
			}
			buf = more;
			cap = want;
		}
		got = fread(buf + n, 1, cap - n, fp);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(fp) || n > max)
	{
		if (ferror(fp))
			llm_set_err(err, errlen, "could not read %s \"%s\"", what, path);
		else
			llm_set_err(err, errlen, "%s \"%s\" is larger than %zu bytes", what, path, max);
		free(buf);
		fclose(fp);
		return NULL;
	}
	fclose(fp);
	buf[n] = '\0';
	*len = n;
	return buf;
}
