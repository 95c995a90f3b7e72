/*
 * chat_template.c — ChatML and Gemma chat rendering straight to token ids.
 *
 * Instead of running the GGUF's Jinja template, the family is recognised from
 * tokenizer.chat_template and rendered here: the markers (<|im_start|>,
 * <|im_end|>, <start_of_turn>, <end_of_turn>) are emitted as their ids and
 * every stretch of text between two markers is tokenized on its own as plain
 * text.  That is exactly what llama.cpp produces when it tokenizes the
 * rendered template with special-token parsing on (llama-vocab.cpp,
 * tokenizer_st_partition: specials split the text, each fragment is
 * tokenized separately), except that marker text inside message content stays
 * plain text here, so users cannot inject control tokens.
 *
 * ChatML follows SmolLM2's template: when the first message is not a system
 * one, the template's default system message (read from the template text,
 * not hard-coded) is inserted.  Gemma follows llama.cpp's gemma rendering
 * (llama-chat.cpp, LLM_CHAT_TEMPLATE_GEMMA): system texts are concatenated
 * into the next user turn, "assistant" is called "model", contents are
 * trimmed, BOS first (llama.cpp adds it when tokenizing with add_special).
 */
#include "chat_template.h"
#include "engine/util/text_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Offset of needle in hay[from..len), or -1. */
static int64_t
find_str(const char *hay, size_t len, size_t from, const char *needle)
{
	size_t		n = strlen(needle);

	if (n == 0 || len < n)
		return -1;
	for (size_t i = from; i + n <= len; i++)
		if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0)
			return (int64_t) i;
	return -1;
}

/*
 * The literal system text a ChatML template inserts by default: the text
 * between "<|im_start|>system" + newline (real, or the two characters \n
 * inside a Jinja string) and the next "<|im_end|>", taken from the first
 * occurrence that is a plain string literal (no quotes or braces, so not
 * "... + message['content']").  NULL when the template has none.
 */
static char *
extract_default_system(const char *tmpl, size_t len)
{
	static const char marker[] = "<|im_start|>system";
	int64_t		at = 0;

	while ((at = find_str(tmpl, len, (size_t) at, marker)) >= 0)
	{
		size_t		p = (size_t) at + strlen(marker);
		int64_t		end;
		char	   *out;
		size_t		w = 0;
		bool		literal = true;

		at = (int64_t) p;
		if (p < len && tmpl[p] == '\n')
			p += 1;
		else if (p + 1 < len && tmpl[p] == '\\' && tmpl[p + 1] == 'n')
			p += 2;
		else
			continue;
		end = find_str(tmpl, len, p, "<|im_end|>");
		if (end < 0)
			return NULL;
		for (size_t i = p; i < (size_t) end; i++)
			if (strchr("'\"{}", tmpl[i]) != NULL)
				literal = false;
		if (!literal || (size_t) end == p)
			continue;
		out = malloc((size_t) end - p + 1);
		if (out == NULL)
			return NULL;
		for (size_t i = p; i < (size_t) end; i++)
		{
			/* undo the Jinja string escapes a literal can hold */
			if (tmpl[i] == '\\' && i + 1 < (size_t) end)
			{
				char		c = tmpl[++i];

				out[w++] = c == 'n' ? '\n' : c == 't' ? '\t' : c;
				continue;
			}
			out[w++] = tmpl[i];
		}
		out[w] = '\0';
		return out;
	}
	return NULL;
}

/* The marker tokens of family must be special tokens of t: 0, or -1 + err naming what (e.g. "ChatML template"). */
static int
check_markers(llm_chat_family family, const char *what, const llm_tokenizer *t, char *err, size_t errlen)
{
	const char *start = family == LLM_CHAT_CHATML ? "<|im_start|>" : "<start_of_turn>";
	const char *end = family == LLM_CHAT_CHATML ? "<|im_end|>" : "<end_of_turn>";

	if (llm_tokenizer_special_id(t, start) >= 0 && llm_tokenizer_special_id(t, end) >= 0)
		return 0;
	llm_set_err(err, errlen, "chat template: %s but %s/%s are not special tokens of the vocabulary",
				what, start, end);
	return -1;
}

/*
 * Recognise the template family from tokenizer.chat_template and check the
 * tokenizer has its marker tokens.  A GGUF without a template, or with one of
 * another family, gives LLM_CHAT_NONE (raw prompts only) and returns 0.
 * Returns -1 + err when the markers are missing or on allocation failure.
 */
int
llm_chat_template_init(llm_chat_template *ct, const gguf_file *f, const llm_tokenizer *t,
					   char *err, size_t errlen)
{
	gguf_str	tmpl;

	memset(ct, 0, sizeof(*ct));
	if (!gguf_get_str(f, "tokenizer.chat_template", &tmpl))
		return 0;

	if (find_str(tmpl.ptr, tmpl.len, 0, "<|im_start|>") >= 0)
	{
		if (check_markers(LLM_CHAT_CHATML, "ChatML template", t, err, errlen) != 0)
			return -1;
		ct->family = LLM_CHAT_CHATML;
		ct->default_system = extract_default_system(tmpl.ptr, tmpl.len);
		return 0;
	}
	if (find_str(tmpl.ptr, tmpl.len, 0, "<start_of_turn>") >= 0)
	{
		if (check_markers(LLM_CHAT_GEMMA, "Gemma template", t, err, errlen) != 0)
			return -1;
		ct->family = LLM_CHAT_GEMMA;
		return 0;
	}
	return 0;
}

int
llm_chat_template_init_family(llm_chat_template *ct, llm_chat_family family,
							  const llm_tokenizer *t, char *err, size_t errlen)
{
	memset(ct, 0, sizeof(*ct));
	if (family != LLM_CHAT_NONE && family != LLM_CHAT_CHATML && family != LLM_CHAT_GEMMA)
	{
		llm_set_err(err, errlen, "chat template: unknown family %d", (int) family);
		return -1;
	}
	if (family != LLM_CHAT_NONE &&
		check_markers(family, family == LLM_CHAT_CHATML ? "configured chat template \"chatml\"" :
					  "configured chat template \"gemma\"", t, err, errlen) != 0)
		return -1;
	ct->family = family;
	return 0;
}

static const char *const family_names[] = {
	[LLM_CHAT_NONE] = "none",
	[LLM_CHAT_CHATML] = "chatml",
	[LLM_CHAT_GEMMA] = "gemma",
};

bool
llm_chat_family_parse(const char *name, llm_chat_family *out)
{
	for (size_t i = 0; i < sizeof(family_names) / sizeof(family_names[0]); i++)
	{
		if (name != NULL && strcmp(name, family_names[i]) == 0)
		{
			*out = (llm_chat_family) i;
			return true;
		}
	}
	return false;
}

const char *
llm_chat_family_name(llm_chat_family family)
{
	if ((size_t) family < sizeof(family_names) / sizeof(family_names[0]))
		return family_names[family];
	return "unknown";
}

void
llm_chat_template_free(llm_chat_template *ct)
{
	free(ct->default_system);
	ct->default_system = NULL;
	ct->family = LLM_CHAT_NONE;
}

/* Output ids with llm_tokenize's "count everything, store up to cap" contract. */
typedef struct chat_out
{
	const llm_tokenizer *t;
	int32_t    *ids;
	int64_t		cap;
	int64_t		n;
	/* text accumulated since the last marker */
	char	   *text;
	size_t		len;
	size_t		alloc;
	char	   *err;
	size_t		errlen;
	bool		failed;
} chat_out;

static void
text_append(chat_out *o, const char *s, size_t n)
{
	if (o->failed || n == 0)
		return;
	if (o->len + n > o->alloc)
	{
		size_t		alloc = (o->alloc + n) * 2 + 64;
		char	   *p = realloc(o->text, alloc);

		if (p == NULL)
		{
			llm_set_err(o->err, o->errlen, "chat template: out of memory");
			o->failed = true;
			return;
		}
		o->text = p;
		o->alloc = alloc;
	}
	memcpy(o->text + o->len, s, n);
	o->len += n;
}

static void
text_append_str(chat_out *o, const char *s)
{
	text_append(o, s, strlen(s));
}

/* Tokenize the pending text as one plain-text fragment. */
static void
text_flush(chat_out *o)
{
	int64_t		k;

	if (o->failed || o->len == 0)
		return;
	k = llm_tokenize(o->t, o->text, o->len, o->n < o->cap ? o->ids + o->n : NULL,
					 o->n < o->cap ? o->cap - o->n : 0, o->err, o->errlen);
	if (k < 0)
	{
		o->failed = true;
		return;
	}
	o->n += k;
	o->len = 0;
}

static void
emit_marker(chat_out *o, int32_t id)
{
	text_flush(o);
	if (o->failed)
		return;
	if (o->n < o->cap)
		o->ids[o->n] = id;
	o->n++;
}

/* Content without leading/trailing ASCII whitespace (Jinja's trim / llama.cpp's trim). */
static void
trimmed(const char *s, size_t n, const char **out, size_t *outn)
{
	while (n > 0 && strchr(" \t\n\r\f\v", s[0]) != NULL && s[0] != '\0')
	{
		s++;
		n--;
	}
	while (n > 0 && strchr(" \t\n\r\f\v", s[n - 1]) != NULL && s[n - 1] != '\0')
		n--;
	*out = s;
	*outn = n;
}

static bool
role_ok(const char *role)
{
	return role != NULL && (strcmp(role, "system") == 0 || strcmp(role, "user") == 0 ||
							strcmp(role, "assistant") == 0);
}

static void
render_chatml(const llm_chat_template *ct, chat_out *o, const llm_chat_message *msgs, int n)
{
	int32_t		start = llm_tokenizer_special_id(o->t, "<|im_start|>");
	int32_t		end = llm_tokenizer_special_id(o->t, "<|im_end|>");

	if (n > 0 && strcmp(msgs[0].role, "system") != 0 && ct->default_system != NULL)
	{
		emit_marker(o, start);
		text_append_str(o, "system\n");
		text_append_str(o, ct->default_system);
		emit_marker(o, end);
		text_append_str(o, "\n");
	}
	for (int i = 0; i < n; i++)
	{
		emit_marker(o, start);
		text_append_str(o, msgs[i].role);
		text_append_str(o, "\n");
		text_append(o, msgs[i].content, msgs[i].content_len);
		emit_marker(o, end);
		text_append_str(o, "\n");
	}
	emit_marker(o, start);
	text_append_str(o, "assistant\n");
	text_flush(o);
}

static void
render_gemma(chat_out *o, const llm_chat_message *msgs, int n)
{
	int32_t		start = llm_tokenizer_special_id(o->t, "<start_of_turn>");
	int32_t		end = llm_tokenizer_special_id(o->t, "<end_of_turn>");
	int32_t		bos = llm_tokenizer_bos(o->t);
	char	   *sys = NULL;		/* system texts seen since the last user turn, concatenated */
	size_t		sys_len = 0;

	if (bos >= 0)
		emit_marker(o, bos);
	for (int i = 0; i < n && !o->failed; i++)
	{
		const char *c;
		size_t		cn;
		bool		model = strcmp(msgs[i].role, "assistant") == 0;

		trimmed(msgs[i].content, msgs[i].content_len, &c, &cn);
		if (strcmp(msgs[i].role, "system") == 0)
		{
			/* Gemma has no system turn: prepend it to the next user turn */
			char	   *p;

			if (cn == 0)
				continue;
			p = realloc(sys, sys_len + cn);
			if (p == NULL)
			{
				llm_set_err(o->err, o->errlen, "chat template: out of memory");
				o->failed = true;
				break;
			}
			sys = p;
			memcpy(sys + sys_len, c, cn);
			sys_len += cn;
			continue;
		}
		emit_marker(o, start);
		text_append_str(o, model ? "model\n" : "user\n");
		if (sys_len > 0 && !model)
		{
			text_append(o, sys, sys_len);
			text_append_str(o, "\n\n");
			sys_len = 0;
		}
		text_append(o, c, cn);
		emit_marker(o, end);
		text_append_str(o, "\n");
	}
	free(sys);
	emit_marker(o, start);
	text_append_str(o, "model\n");
	text_flush(o);
}

/*
 * Render msgs[0..n) plus the assistant prompt as token ids (see header).
 * Roles must be "system", "user" or "assistant"; content must be valid UTF-8.
 */
int64_t
llm_chat_apply(const llm_chat_template *ct, const llm_tokenizer *t,
			   const llm_chat_message *msgs, int n,
			   int32_t *out, int64_t cap, char *err, size_t errlen)
{
	chat_out	o;

	if (ct == NULL || ct->family == LLM_CHAT_NONE)
	{
		llm_set_err(err, errlen, "%s", LLM_CHAT_NONE_ERROR);
		return -1;
	}
	if (n < 0 || (n > 0 && msgs == NULL))
	{
		llm_set_err(err, errlen, "chat template: invalid message list");
		return -1;
	}
	for (int i = 0; i < n; i++)
	{
		if (!role_ok(msgs[i].role))
		{
			llm_set_err(err, errlen, "chat template: message %d has unknown role \"%s\" (expected system, user or assistant)",
					i, msgs[i].role ? msgs[i].role : "(null)");
			return -1;
		}
		if (msgs[i].content == NULL && msgs[i].content_len > 0)
		{
			llm_set_err(err, errlen, "chat template: message %d has NULL content", i);
			return -1;
		}
		if (msgs[i].content_len > 0)
		{
			size_t		bad = llm_utf8_first_invalid(msgs[i].content, msgs[i].content_len);

			if (bad < msgs[i].content_len)
			{
				llm_set_err(err, errlen, "chat template: message %d: invalid UTF-8 at byte offset %zu (byte 0x%02x)",
						i, bad, (unsigned) (unsigned char) msgs[i].content[bad]);
				return -1;
			}
		}
	}

	memset(&o, 0, sizeof(o));
	o.t = t;
	o.ids = out;
	o.cap = out == NULL || cap < 0 ? 0 : cap;
	o.err = err;
	o.errlen = errlen;
	if (ct->family == LLM_CHAT_CHATML)
		render_chatml(ct, &o, msgs, n);
	else
		render_gemma(&o, msgs, n);
	free(o.text);
	return o.failed ? -1 : o.n;
}
