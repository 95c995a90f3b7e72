/*
 * fuzz_tokenizer.c — libFuzzer target: tokenize and detokenize on the real
 * vocabulary (fuzz_vocab.h).
 *
 * The first byte chooses the mode, the rest is the input:
 *   even  text: valid UTF-8 must tokenize to in-range ids, none of them a
 *         special token, whose bytes concatenate back to the text less the
 *         bytes the vocabulary has no token for (fuzz_vocab.h); the
 *         incremental detokenizer turns them back into that text too (into
 *         valid UTF-8 when a dropped byte broke a character); a smaller
 *         output buffer gets the same count and a prefix of the same ids;
 *         invalid UTF-8 must be refused with a message.
 *   odd   ids: the bytes as little-endian 16-bit ids, some beyond the
 *         vocabulary: the incremental detokenizer refuses exactly the
 *         out-of-range ids and its output (flushed) is always valid UTF-8.
 * Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_vocab.h"
#include "engine/util/text_util.h"

#define MAX_IDS 8192

static fuzz_vocab v;
static int32_t ids[MAX_IDS],
			ids2[MAX_IDS];
static size_t max_piece;		/* longest output of one llm_detok_push */

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char		piece[4096];

	fuzz_vocab_load(&v);
	/* held bytes of a partial character come out as U+FFFD each */
	for (int32_t id = 0; id < llm_tokenizer_n_vocab(v.tok); id++)
	{
		int			n = llm_token_to_bytes(v.tok, id, piece, sizeof(piece));

		if (n > 0 && (size_t) n > max_piece)
			max_piece = (size_t) n;
	}
	max_piece += sizeof(((llm_detok *) 0)->pending) * 3;
	return 0;
}

/* True when id's bytes are exactly a special token's text (so it is that token). */
static bool
is_special(int32_t id)
{
	char		piece[256];
	int			n = llm_token_to_bytes(v.tok, id, piece, sizeof(piece) - 1);

	if (n < 0 || n >= (int) sizeof(piece))
		return false;
	piece[n] = '\0';
	return strlen(piece) == (size_t) n && llm_tokenizer_special_id(v.tok, piece) == id;
}

static void
text_mode(const char *text, size_t len)
{
	char		err[256] = "";
	int64_t		n = llm_tokenize(v.tok, text, len, ids, MAX_IDS, err, sizeof(err));
	char	   *back,
			   *stream,
			   *kept;
	size_t		w = 0,
				sw = 0,
				klen,
				cap = len * 4 + 64;
	llm_detok	d;
	int32_t		n_vocab = llm_tokenizer_n_vocab(v.tok);

	if (llm_utf8_first_invalid(text, len) < len)
	{
		if (n != -1 || err[0] == '\0')
			abort();
		return;
	}
	if (n < 0 || n > (int64_t) len)
		abort();
	if (n > MAX_IDS)
		return;
	back = malloc(cap);
	stream = malloc(cap);
	kept = malloc(len + 1);
	klen = fuzz_kept_bytes(&v, text, len, kept);
	llm_detok_init(&d);
	for (int64_t i = 0; i < n; i++)
	{
		int			k;

		if (ids[i] < 0 || ids[i] >= n_vocab || is_special(ids[i]))
			abort();
		k = llm_token_to_bytes(v.tok, ids[i], back + w, (int) (cap - w));
		if (k <= 0 || w + (size_t) k > klen)
			abort();
		w += (size_t) k;
		k = llm_detok_push(v.tok, &d, ids[i], stream + sw, (int) (cap - sw));
		if (k < 0)
			abort();
		sw += (size_t) k;
	}
	sw += (size_t) llm_detok_flush(&d, stream + sw, (int) (cap - sw));
	if (w != klen || memcmp(back, kept, klen) != 0)
		abort();
	if (llm_utf8_first_invalid(kept, klen) == klen
		? sw != klen || memcmp(stream, kept, klen) != 0
		: llm_utf8_first_invalid(stream, sw) < sw)
		abort();
	free(back);
	free(stream);
	free(kept);
	if (n > 1)
	{
		int64_t		half = n / 2;
		int64_t		m = llm_tokenize(v.tok, text, len, ids2, half, err, sizeof(err));

		if (m != n || memcmp(ids, ids2, (size_t) half * sizeof(int32_t)) != 0)
			abort();
	}
}

static void
ids_mode(const uint8_t *p, size_t len)
{
	int32_t		n_vocab = llm_tokenizer_n_vocab(v.tok);
	size_t		n = len / 2;
	size_t		cap = (n + 1) * max_piece,
				w = 0;
	char	   *out = malloc(cap);
	llm_detok	d;

	llm_detok_init(&d);
	for (size_t i = 0; i < n; i++)
	{
		/* ids up to 65535: past the 49152-token vocabulary too */
		int32_t		id = (int32_t) (p[2 * i] | (p[2 * i + 1] << 8));
		int			k = llm_detok_push(v.tok, &d, id, out + w, (int) (cap - w));

		if ((k < 0) != (id >= n_vocab))
			abort();
		if (k > 0)
			w += (size_t) k;
	}
	w += (size_t) llm_detok_flush(&d, out + w, (int) (cap - w));
	if (llm_utf8_first_invalid(out, w) < w)
		abort();
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *copy;

	if (size == 0)
		return 0;
	if (data[0] & 1)
	{
		ids_mode(data + 1, size - 1);
		return 0;
	}
	copy = malloc(size - 1 ? size - 1 : 1);
	memcpy(copy, data + 1, size - 1);
	text_mode(copy, size - 1);
	free(copy);
	return 0;
}
