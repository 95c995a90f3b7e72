/*
 * fuzz_vocab.h — the real vocabulary for the fuzz targets that need one.
 *
 * The tokenizer and chat-template targets run on the model's own tokenizer
 * and template: $LLM_FUZZ_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf
 * relative to the working directory (make fuzz runs from the repository
 * root).  Loaded once per process in LLVMFuzzerInitialize; a target exits
 * with status 2 when the model cannot be opened, so a run never passes
 * without having fuzzed anything.
 */
#ifndef LLM_FUZZ_VOCAB_H
#define LLM_FUZZ_VOCAB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/text/chat_template.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

typedef struct fuzz_vocab
{
	gguf_file  *file;
	llm_tokenizer *tok;
	llm_chat_template tmpl;
	char	   *default_system;	/* a Jinja ChatML template's own system text (SmolLM2), or NULL */
	bool		has_byte[256];	/* the byte has a token: it survives tokenization */
	bool		drops_bytes;	/* some byte has none */
} fuzz_vocab;

/* A valid UTF-8 character containing byte b (at its first position unless b is a continuation byte). */
static int
fuzz_char_with(unsigned b, unsigned char *c)
{
	if (b < 0x80)
		return c[0] = (unsigned char) b, 1;
	if (b < 0xc0)
		return c[0] = 0xc2, c[1] = (unsigned char) b, 2;
	if (b < 0xe0)
		return c[0] = (unsigned char) b, c[1] = 0x80, 2;
	if (b < 0xf0)
		return c[0] = (unsigned char) b, c[1] = b == 0xe0 ? 0xa0 : 0x80, c[2] = 0x80, 3;
	return c[0] = (unsigned char) b, c[1] = b == 0xf0 ? 0x90 : 0x80, c[2] = 0x80, c[3] = 0x80, 4;
}

/* Bytes of text[0..len) that have a token, in order, into out; returns the count. */
static size_t
fuzz_kept_bytes(const fuzz_vocab *v, const char *text, size_t len, char *out)
{
	size_t		w = 0;

	for (size_t i = 0; i < len; i++)
		if (v->has_byte[(unsigned char) text[i]])
			out[w++] = text[i];
	return w;
}

static void
fuzz_vocab_load(fuzz_vocab *v)
{
	const char *path = getenv("LLM_FUZZ_MODEL");
	char		err[512] = "";

	if (path == NULL || path[0] == '\0')
		path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	v->file = gguf_open(path, err, sizeof(err));
	if (v->file == NULL || (v->tok = llm_tokenizer_create(v->file, err, sizeof(err))) == NULL
		|| llm_chat_template_init(&v->tmpl, v->file, v->tok, err, sizeof(err)) != 0)
	{
		fprintf(stderr, "fuzz: cannot load the vocabulary of %s: %s (set LLM_FUZZ_MODEL)\n", path, err);
		exit(2);
	}
	if (v->tmpl.family == LLM_CHAT_JINJA)
	{
		/* the system turn the template inserts before a user turn, read from its own rendering */
		llm_chat_message m = {"user", "", 0};
		char	   *text = NULL;
		size_t		len;
		const char *a,
				   *b;

		if (llm_chat_render_text(&v->tmpl, v->tok, &m, 1, NULL, &text, &len, err, sizeof(err)) == 0 &&
			(a = strstr(text, "<|im_start|>system\n")) != NULL && (b = strstr(a, "<|im_end|>")) != NULL)
			v->default_system = strndup(a + 19, (size_t) (b - a - 19));
		free(text);
	}
	for (unsigned b = 0; b < 256; b++)
	{
		unsigned char c[4];
		int			n = fuzz_char_with(b, c);
		int32_t		ids[8];
		char		piece[64];
		int64_t		k = b >= 0xf5 || b == 0xc0 || b == 0xc1 ? 0
			: llm_tokenize(v->tok, (const char *) c, (size_t) n, ids, 8, err, sizeof(err));

		v->has_byte[b] = false;
		for (int64_t i = 0; i < k && i < 8; i++)
		{
			int			m = llm_token_to_bytes(v->tok, ids[i], piece, sizeof(piece));

			if (m > 0 && memchr(piece, (int) b, (size_t) m) != NULL)
				v->has_byte[b] = true;
		}
		/* bytes that never occur in valid UTF-8 cannot be dropped */
		if (b >= 0xf5 || b == 0xc0 || b == 0xc1)
			v->has_byte[b] = true;
		v->drops_bytes |= !v->has_byte[b];
	}
}

#endif
