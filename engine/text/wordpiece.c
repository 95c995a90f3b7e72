/*
 * wordpiece.c — WordPiece (tokenizer.ggml.model = "bert"), as llama.cpp
 * encodes it (src/llama-vocab.cpp, llm_tokenizer_wpm_session), so that ids
 * are identical for the same GGUF:
 *
 *  1. Words (preprocess): every code point is first mapped to the first code
 *     point of its NFD decomposition when accents are stripped; whitespace
 *     ends a word; U+0000, U+FFFD and \p{C} code points are dropped, and so
 *     are \p{M} marks when accents are stripped; the rest is lowercased when
 *     the normalizer says so; punctuation, ASCII symbols and CJK ideographs
 *     are words of one character; anything else extends the current word.
 *     Classes, lowercase and NFD come from llama.cpp's own unicode tables
 *     (unicode_data.h), not from this machine's Unicode version.
 *  2. Each word gets the phantom space "▁" in front and is cut greedily from
 *     the left into the longest vocabulary texts (by bytes, at most the
 *     longest token's length); when some position matches nothing, the
 *     pieces of the word are dropped and the word becomes one [UNK].
 *
 * Unlike the other encoders, plain text does produce a special id here:
 * [UNK], as llama.cpp does.
 */
#include "wordpiece.h"
#include "unicode_data.h"
#include "engine/util/text_util.h"
#include "engine/util/utf8_encode.h"

#include <stdlib.h>
#include <string.h>

static const char wpm_space[3] = {(char) 0xE2, (char) 0x96, (char) 0x81};	/* U+2581 */

bool
tok_wpm_setup(llm_tokenizer *t, const gguf_file *f, char *err, size_t errlen)
{
	bool		b;

	if (t->unk < 0)
	{
		llm_set_err(err, errlen, "tokenizer: WordPiece vocabulary (tokenizer.ggml.model \"bert\") without an "
					"unknown token (tokenizer.ggml.unknown_token_id, default 100)");
		return false;
	}
	t->wpm_max_len = 0;
	for (int32_t i = 0; i < t->n_vocab; i++)
		if ((int32_t) t->str_len[i] > t->wpm_max_len)
			t->wpm_max_len = (int32_t) t->str_len[i];
	/* llama.cpp: lowercase unless the GGUF says otherwise; strip_accents follows lowercase unless given */
	t->wpm_lowercase = gguf_get_bool(f, "tokenizer.ggml.normalizer.lowercase", &b) ? b : true;
	t->wpm_strip_accents = gguf_get_bool(f, "tokenizer.ggml.normalizer.strip_accents", &b) ? b : t->wpm_lowercase;
	return true;
}

uint64_t
tok_wpm_decode_text(const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out)
{
	uint64_t	w = 0;

	if (t->tok_type[id] != TOKTYPE_NORMAL)
	{
		memcpy(out, p, n);
		return n;
	}
	for (size_t i = 0; i < n;)
	{
		if (i + 3 <= n && memcmp(p + i, wpm_space, 3) == 0)
		{
			out[w++] = ' ';
			i += 3;
		}
		else
			out[w++] = p[i++];
	}
	return w;
}

/* CJK ideograph blocks BERT's BasicTokenizer splits on (llama.cpp's is_chinese_char, its ranges). */
static bool
is_cjk(uint32_t cp)
{
	return (cp >= 0x04E00 && cp <= 0x09FFF) ||
		(cp >= 0x03400 && cp <= 0x04DBF) ||
		(cp >= 0x20000 && cp <= 0x2A6DF) ||
		(cp >= 0x2A700 && cp <= 0x2B73F) ||
		(cp >= 0x2B740 && cp <= 0x2B81F) ||
		(cp >= 0x2B920 && cp <= 0x2CEAF) ||
		(cp >= 0x0F900 && cp <= 0x0FAFF) ||
		(cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* One word being built: "▁" then its UTF-8 bytes. */
typedef struct word_buf
{
	char	   *p;
	size_t		n;
	size_t		cap;
} word_buf;

static bool
word_put(word_buf *w, const uint8_t *b, int n)
{
	if (w->n + (size_t) n > w->cap)
	{
		size_t		cap = w->cap * 2 + (size_t) n + 64;
		char	   *p = realloc(w->p, cap);

		if (p == NULL)
			return false;
		w->p = p;
		w->cap = cap;
	}
	memcpy(w->p + w->n, b, (size_t) n);
	w->n += (size_t) n;
	return true;
}

/* Greedy longest-match of the word in w (with its "▁"), or [UNK]; empties w. */
static void
encode_word(const llm_tokenizer *t, word_buf *w, emitter *e)
{
	int64_t		start = e->n;
	size_t		n = w->n;

	if (n <= sizeof(wpm_space))
		return;					/* no word yet */
	for (size_t i = 0; i < n;)
	{
		size_t		j = i + (size_t) t->wpm_max_len < n ? i + (size_t) t->wpm_max_len : n;
		int32_t		id = -1;

		for (; j > i; j--)
		{
			id = tok_str_lookup(t, w->p + i, j - i);
			if (id >= 0 && id < t->n_vocab)
				break;
			id = -1;
		}
		if (id < 0)
		{
			e->n = start;		/* discard the word's pieces */
			break;
		}
		emit(e, id);
		i = j;
	}
	if (e->n == start)
		emit(e, t->unk);
	w->n = sizeof(wpm_space);
}

/* Decode the code point at s (valid UTF-8) and its length. */
static uint32_t
utf8_next(const uint8_t *s, int *len)
{
	uint8_t		b = s[0];

	*len = utf8_lead_len(b);
	switch (*len)
	{
		case 2:
			return ((b & 0x1Fu) << 6) | (s[1] & 0x3Fu);
		case 3:
			return ((b & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
		case 4:
			return ((b & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
		default:
			*len = 1;
			return b;
	}
}

bool
tok_wpm_encode(const llm_tokenizer *t, const char *text, size_t len, emitter *e)
{
	const uint8_t *s = (const uint8_t *) text;
	word_buf	w = {0};

	if (!word_put(&w, (const uint8_t *) wpm_space, sizeof(wpm_space)))
		return false;
	for (size_t i = 0; i < len;)
	{
		int			clen;
		uint32_t	cp = utf8_next(s + i, &clen);
		uint16_t	flags;
		uint8_t		enc[4];
		int			elen;

		i += (size_t) clen;
		if (t->wpm_strip_accents)
			cp = ucd_nfd_first(cp);
		if (ucd_is_whitespace(cp))
		{
			encode_word(t, &w, e);
			continue;
		}
		flags = ucd_flags(cp);
		if (cp == 0 || cp == 0xFFFD || (flags & UCD_CONTROL))
			continue;
		if (t->wpm_strip_accents && (flags & UCD_MARK))
			continue;
		elen = llm_utf8_encode(t->wpm_lowercase ? ucd_tolower(cp) : cp, enc);
		if ((flags & UCD_PUNCTUATION) || (cp < 0x7F && (flags & UCD_SYMBOL)) || is_cjk(cp))
		{
			encode_word(t, &w, e);
			if (!word_put(&w, enc, elen))
				goto oom;
			encode_word(t, &w, e);
		}
		else if (!word_put(&w, enc, elen))
			goto oom;
	}
	encode_word(t, &w, e);
	free(w.p);
	return true;

oom:
	free(w.p);
	return false;
}
