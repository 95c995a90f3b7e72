/*
 * tokenizer_test_util.h — helpers shared by the tokenizer tests: the golden
 * files' hex and id columns, chat keys ("role:hex role:hex ..."), whole and
 * streaming decodes.
 */
#ifndef LLM_TOKENIZER_TEST_UTIL_H
#define LLM_TOKENIZER_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"

static inline int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode n hex digits into out; returns byte count or -1. */
static inline long
unhex(const char *s, size_t n, char *out)
{
	if (n % 2)
		return -1;
	for (size_t i = 0; i < n; i += 2)
	{
		int			hi = hexval(s[i]),
					lo = hexval(s[i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i / 2] = (char) (hi * 16 + lo);
	}
	return (long) (n / 2);
}

static inline int
parse_ids(char *s, int32_t *out, int cap)
{
	int			n = 0;
	char	   *end;

	while (*s && *s != '\n')
	{
		long		v = strtol(s, &end, 10);

		if (end == s)
			break;
		if (n < cap)
			out[n] = (int32_t) v;
		n++;
		s = end;
	}
	return n;
}

/* Whole decode: concatenated llm_token_to_bytes. */
static inline size_t
decode_all(const llm_tokenizer *t, const int32_t *ids, int64_t n, char *out, size_t cap)
{
	size_t		w = 0;

	for (int64_t i = 0; i < n; i++)
	{
		int			k = llm_token_to_bytes(t, ids[i], out + w, (int) (cap - w));

		if (k < 0 || w + k > cap)
			return (size_t) -1;
		w += k;
	}
	return w;
}

/* Streaming decode through llm_detok, with the final flush. */
static inline size_t
decode_stream(const llm_tokenizer *t, const int32_t *ids, int64_t n, char *out, size_t cap)
{
	llm_detok	d;
	size_t		w = 0;
	int			k;

	llm_detok_init(&d);
	for (int64_t i = 0; i < n; i++)
	{
		k = llm_detok_push(t, &d, ids[i], out + w, (int) (cap - w));
		if (k < 0)
			return (size_t) -1;
		w += k;
	}
	k = llm_detok_flush(&d, out + w, (int) (cap - w));
	if (k < 0)
		return (size_t) -1;
	return w + k;
}

static inline int
parse_chat_key(char *key, llm_chat_message *msgs, char bufs[][4096], int max)
{
	int			n = 0;
	char	   *save = NULL;

	for (char *tok = strtok_r(key, " ", &save); tok && n < max; tok = strtok_r(NULL, " ", &save))
	{
		char	   *colon = strchr(tok, ':');
		long		len;

		if (colon == NULL)
			return -1;
		*colon = '\0';
		len = unhex(colon + 1, strlen(colon + 1), bufs[n]);
		if (len < 0)
			return -1;
		msgs[n].role = tok;
		msgs[n].content = bufs[n];
		msgs[n].content_len = (size_t) len;
		n++;
	}
	return n;
}

#endif
