/*
 * detok.c — from ids back to text: the bytes each token stands for
 * (decoded once by vocab.c) and the incremental detokenizer that emits only
 * complete, valid UTF-8.
 */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

/*
 * Whether b may be byte number pos (1-based after the lead) of a sequence
 * starting with lead: rejects overlongs, surrogates and > U+10FFFF
 * (Unicode 15, table 3-7 "well-formed UTF-8 byte sequences").
 */
static inline bool
utf8_cont_ok(uint8_t lead, int pos, uint8_t b)
{
	uint8_t		lo = 0x80,
				hi = 0xBF;

	if (pos == 1)
	{
		if (lead == 0xE0)
			lo = 0xA0;
		else if (lead == 0xED)
			hi = 0x9F;
		else if (lead == 0xF0)
			lo = 0x90;
		else if (lead == 0xF4)
			hi = 0x8F;
	}
	return b >= lo && b <= hi;
}

/* Bytes token id stands for: byte-decoded for normal tokens, the text itself for special ones. */
int
llm_token_to_bytes(const llm_tokenizer *t, int32_t id, char *out, int cap)
{
	uint64_t	n;

	if (id < 0 || id >= t->n_vocab)
		return -1;
	n = t->dec_off[id + 1] - t->dec_off[id];
	if (cap > 0)
		memcpy(out, t->dec_arena + t->dec_off[id], n < (uint64_t) cap ? n : (uint64_t) cap);
	return (int) n;
}

void
llm_detok_init(llm_detok *d)
{
	d->n_pending = 0;
}

static const char replacement_char[3] = {(char) 0xEF, (char) 0xBF, (char) 0xBD};	/* U+FFFD */

/*
 * Append the bytes of id to the held partial character and emit every
 * complete character.  An ill-formed sequence becomes one U+FFFD per maximal
 * ill-formed subpart (Unicode "substitution of maximal subparts"); only an
 * incomplete but still valid prefix (at most 3 bytes) is held back.  State is
 * left untouched when -1 is returned.
 */
int
llm_detok_push(const llm_tokenizer *t, llm_detok *d, int32_t id, char *out, int cap)
{
	const uint8_t *src;
	size_t		n;
	uint8_t		pend[4];
	int			np = d->n_pending;
	char		stackbuf[1024];
	char	   *buf;
	size_t		bound,
				w = 0;

	if (id < 0 || id >= t->n_vocab || np < 0 || np > 3)
		return -1;
	src = (const uint8_t *) t->dec_arena + t->dec_off[id];
	n = t->dec_off[id + 1] - t->dec_off[id];
	memcpy(pend, d->pending, np);
	bound = 3 * (n + np) + 4;
	buf = bound <= sizeof(stackbuf) ? stackbuf : malloc(bound);
	if (buf == NULL)
		return -1;

	for (size_t i = 0; i < n; i++)
	{
		uint8_t		b = src[i];

		if (np > 0)
		{
			if (utf8_cont_ok(pend[0], np, b))
			{
				pend[np++] = b;
				if (np == utf8_lead_len(pend[0]))
				{
					memcpy(buf + w, pend, np);
					w += np;
					np = 0;
				}
				continue;
			}
			memcpy(buf + w, replacement_char, 3);
			w += 3;
			np = 0;
			/* b starts afresh below */
		}
		if (b < 0x80)
			buf[w++] = (char) b;
		else if (utf8_lead_len(b) > 0)
			pend[np++] = b;
		else
		{
			memcpy(buf + w, replacement_char, 3);
			w += 3;
		}
	}

	if (w > (size_t) (cap < 0 ? 0 : cap))
	{
		if (buf != stackbuf)
			free(buf);
		return -1;
	}
	memcpy(out, buf, w);
	if (buf != stackbuf)
		free(buf);
	memcpy(d->pending, pend, np);
	d->n_pending = np;
	return (int) w;
}

/* End of stream: a held incomplete character becomes U+FFFD.  -1 if cap < 3 and something is held. */
int
llm_detok_flush(llm_detok *d, char *out, int cap)
{
	if (d->n_pending <= 0)
	{
		d->n_pending = 0;
		return 0;
	}
	if (cap < 3)
		return -1;
	memcpy(out, replacement_char, 3);
	d->n_pending = 0;
	return 3;
}
