/*
 * fuzz_chat_template.c — libFuzzer target: the chat-template renderer
 * (engine/text/chat_template.c) with random message lists, on the real
 * vocabulary and template (fuzz_vocab.h).
 *
 * Input: byte 0 = number of messages (mod 9), byte 1 = the first call's
 * output capacity (mod 128); then per message a role byte (system, user, assistant or an
 * unknown role), a length byte and that many content bytes (cut at the end
 * of the input).  Checks:
 *   - an unknown role or invalid UTF-8 content is refused with a message;
 *   - otherwise the ids, detokenized piece by piece, are exactly the
 *     rendering of the family (markers as their text, ChatML's default
 *     system message when the first is not a system one, Gemma's merged
 *     system text, trimmed contents and "model" turns), less the bytes the
 *     vocabulary has no token for (fuzz_vocab.h);
 *   - the special ids are exactly the template's markers: message text,
 *     even containing marker text, never produces one;
 *   - a capacity short of the total returns the same count and writes only
 *     a prefix of the same ids (the buffer is exact-size, so
 *     AddressSanitizer sees any write past it).
 * Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_vocab.h"
#include "engine/util/text_util.h"

#define MAX_MSGS 8

static fuzz_vocab v;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_vocab_load(&v);
	if (v.tmpl.family == LLM_CHAT_NONE)
	{
		fprintf(stderr, "fuzz: the model has no chat template\n");
		exit(2);
	}
	return 0;
}

typedef struct sbuf
{
	char	   *p;
	size_t		len,
				cap;
} sbuf;

static void
put(sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap)
	{
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

/* Text the renderer tokenizes: only its bytes that have a token come back. */
static void
put_text(sbuf *b, const char *s, size_t n)
{
	char	   *kept = malloc(n + 1);

	put(b, kept, fuzz_kept_bytes(&v, s, n, kept));
	free(kept);
}

static void
puts_(sbuf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void
put_token(sbuf *b, int32_t id)
{
	char		piece[256];
	int			n = llm_token_to_bytes(v.tok, id, piece, sizeof(piece));

	if (n < 0 || n > (int) sizeof(piece))
		abort();
	put(b, piece, (size_t) n);
}

static bool
ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The expected text and marker count of a rendering (roles already valid). */
static int
expected(const llm_chat_message *m, int n, sbuf *out)
{
	int			markers = 0;

	if (v.tmpl.family == LLM_CHAT_CHATML || v.tmpl.family == LLM_CHAT_JINJA)
	{
		int32_t		s = llm_tokenizer_special_id(v.tok, "<|im_start|>");
		int32_t		e = llm_tokenizer_special_id(v.tok, "<|im_end|>");

		if (n > 0 && strcmp(m[0].role, "system") != 0 && v.default_system)
		{
			put_token(out, s);
			puts_(out, "system\n");
			put_text(out, v.default_system, strlen(v.default_system));
			put_token(out, e);
			puts_(out, "\n");
			markers += 2;
		}
		for (int i = 0; i < n; i++)
		{
			put_token(out, s);
			puts_(out, m[i].role);
			puts_(out, "\n");
			put_text(out, m[i].content, m[i].content_len);
			put_token(out, e);
			puts_(out, "\n");
			markers += 2;
		}
		put_token(out, s);
		puts_(out, "assistant\n");
		return markers + 1;
	}
	else
	{
		int32_t		s = llm_tokenizer_special_id(v.tok, "<start_of_turn>");
		int32_t		e = llm_tokenizer_special_id(v.tok, "<end_of_turn>");
		int32_t		bos = llm_tokenizer_bos(v.tok);
		const char *sys = NULL;
		size_t		sys_len = 0;

		if (bos >= 0)
		{
			put_token(out, bos);
			markers++;
		}
		for (int i = 0; i < n; i++)
		{
			const char *c = m[i].content;
			size_t		cn = m[i].content_len;
			bool		model = strcmp(m[i].role, "assistant") == 0;

			while (cn > 0 && ws(c[0]))
				c++, cn--;
			while (cn > 0 && ws(c[cn - 1]))
				cn--;
			if (strcmp(m[i].role, "system") == 0)
			{
				sys = c;
				sys_len = cn;
				continue;
			}
			put_token(out, s);
			puts_(out, model ? "model\n" : "user\n");
			if (sys_len > 0 && !model)
			{
				put_text(out, sys, sys_len);
				puts_(out, "\n\n");
				sys_len = 0;
			}
			put_text(out, c, cn);
			put_token(out, e);
			puts_(out, "\n");
			markers += 2;
		}
		put_token(out, s);
		puts_(out, "model\n");
		return markers + 1;
	}
}

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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const roles[] = {"system", "user", "assistant", "tool"};
	llm_chat_message m[MAX_MSGS];
	char	   *content[MAX_MSGS] = {0};
	char		err[512] = "";
	int			n,
				markers,
				specials = 0;
	size_t		p = 2;
	bool		bad_role = false,
				bad_utf8 = false;
	int64_t		total,
				cap;
	int32_t    *ids,
			   *part;
	sbuf		want = {0},
				got = {0};

	if (size < 2)
		return 0;
	n = data[0] % (MAX_MSGS + 1);
	for (int i = 0; i < n; i++)
	{
		uint8_t		role = p < size ? data[p++] : 1;
		size_t		len = p < size ? data[p++] : 0;

		if (len > size - p)
			len = size - p;
		content[i] = malloc(len ? len : 1);
		memcpy(content[i], data + p, len);
		p += len;
		m[i].role = roles[role % 4];
		m[i].content = content[i];
		m[i].content_len = len;
		bad_role |= role % 4 == 3;
		bad_utf8 |= llm_utf8_first_invalid(content[i], len) < len;
	}

	/* first call: a capacity from the input, often short of the total */
	cap = data[1] % 128;
	part = malloc((size_t) (cap ? cap : 1) * sizeof(int32_t));
	total = llm_chat_apply(&v.tmpl, v.tok, m, n, part, cap, err, sizeof(err));
	if (bad_role || bad_utf8)
	{
		if (total != -1 || err[0] == '\0')
			abort();
		free(part);
		goto done;
	}
	if (total <= 0)
		abort();
	ids = malloc((size_t) total * sizeof(int32_t));
	if (llm_chat_apply(&v.tmpl, v.tok, m, n, ids, total, err, sizeof(err)) != total)
		abort();
	if (memcmp(part, ids, (size_t) (cap < total ? cap : total) * sizeof(int32_t)) != 0)
		abort();
	free(part);
	markers = expected(m, n, &want);
	for (int64_t i = 0; i < total; i++)
	{
		if (ids[i] < 0 || ids[i] >= llm_tokenizer_n_vocab(v.tok))
			abort();
		specials += is_special(ids[i]);
		put_token(&got, ids[i]);
	}
	if (specials != markers || got.len != want.len || memcmp(got.p, want.p, got.len) != 0)
		abort();
	free(ids);
done:
	free(want.p);
	free(got.p);
	for (int i = 0; i < n; i++)
		free(content[i]);
	return 0;
}
