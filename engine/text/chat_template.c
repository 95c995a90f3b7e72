/*
 * chat_template.c — the front door of chat rendering: the model's own Jinja
 * template (chat_jinja.c over engine/jinja), or a built-in family, ChatML
 * and Gemma, rendered straight to token ids.
 *
 * The built-in families are rendered here: the markers (<|im_start|>,
 * <|im_end|>, <start_of_turn>, <end_of_turn>) are emitted as their ids and
 * every stretch of text between two markers is tokenized on its own as plain
 * text.  That is exactly what llama.cpp produces when it tokenizes the
 * rendered template with special-token parsing on (llama-vocab.cpp,
 * tokenizer_st_partition: specials split the text, each fragment is
 * tokenized separately), except that marker text inside message content stays
 * plain text here, so users cannot inject control tokens.
 *
 * ChatML is the plain <|im_start|>role ... <|im_end|> turn.  Gemma follows llama.cpp's gemma rendering
 * (llama-chat.cpp, LLM_CHAT_TEMPLATE_GEMMA): system texts are concatenated
 * into the next user turn, "assistant" is called "model", contents are
 * trimmed, BOS first (llama.cpp adds it when tokenizing with add_special).
 */
#include "chat_template.h"
#include "chat_jinja.h"
#include "engine/util/text_util.h"

#include <errno.h>
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
 * The Jinja family's parts besides the compiled template: control tokens,
 * special ids, end of turn.  0; 1 + err when rendering a short conversation
 * passes the interpreter's limits; -1 + err on allocation failure.
 */
static int
jinja_parts(llm_chat_template *ct, const gguf_file *f, const llm_tokenizer *t, char *err, size_t errlen)
{
	static const char *const keys[] = {NULL, NULL, "tokenizer.ggml.unknown_token_id",
	"tokenizer.ggml.padding_token_id"};

	ct->special_ids[0] = llm_tokenizer_bos(t);
	ct->special_ids[1] = llm_tokenizer_eos(t);
	for (int i = 2; i < 4; i++)
	{
		int64_t		id;

		ct->special_ids[i] = f != NULL && gguf_get_int(f, keys[i], &id) && id >= 0 &&
			id < llm_tokenizer_n_vocab(t) ? (int32_t) id : -1;
	}
	ct->specials = chat_specials_build(t);
	if (ct->specials == NULL)
	{
		llm_set_err(err, errlen, "chat template: out of memory");
		return -1;
	}
	ct->family = LLM_CHAT_JINJA;
	ct->end_of_turn = -1;
	{
		/* the first end-of-generation token the template writes after an assistant's words */
		static const char word[] = "Zyzzyva";
		llm_chat_message m[2] = {{"user", "Hi", 2}, {"assistant", word, sizeof(word) - 1}};
		llm_chat_options o = {false, NULL, 0, -1};
		jinja_ctx  *c = jinja_ctx_create();
		jinja_output out;
		chat_jinja_vars v = {t, {ct->special_ids[0], ct->special_ids[1], ct->special_ids[2], ct->special_ids[3]}};
		char		e2[256];
		jinja_status st = c != NULL ? chat_jinja_render(ct->jinja, &v, m, 2, &o, c, &out, e2, sizeof(e2))
			: JINJA_FAILED;

		if (st == JINJA_LIMIT)
		{
			/* it would fail every request, after the same work: refuse it at load */
			jinja_ctx_free(c);
			llm_set_err(err, errlen, "rendering a two-message conversation: %s", e2);
			return 1;
		}
		if (st == JINJA_OK)
		{
			int64_t		at = find_str(out.text, out.len, 0, word);
			int32_t		ids[64];

			if (at >= 0)
			{
				size_t		from = (size_t) at + sizeof(word) - 1;
				int64_t		n = chat_jinja_tokenize(ct->specials, t, out.text + from, out.trusted + from,
													out.len - from, ids, 64, e2, sizeof(e2));

				for (int64_t i = 0; i < n && i < 64 && ct->end_of_turn < 0; i++)
					if (llm_tokenizer_is_control(t, ids[i]) && llm_tokenizer_is_eog(t, ids[i]))
						ct->end_of_turn = ids[i];
			}
		}
		jinja_ctx_free(c);
	}
	return 0;
}

/*
 * Compile the file's tokenizer.chat_template.  A GGUF without a template
 * gives LLM_CHAT_NONE (raw prompts only) and returns 0; one outside the
 * interpreter's subset or past its limits too, with ct->refused saying why.
 * -1 + err on allocation failure.
 */
int
llm_chat_template_init(llm_chat_template *ct, const gguf_file *f, const llm_tokenizer *t,
					   char *err, size_t errlen)
{
	gguf_str	tmpl;
	char		why[512];

	memset(ct, 0, sizeof(*ct));
	if (!gguf_get_str(f, "tokenizer.chat_template", &tmpl))
		return 0;
	ct->jinja = jinja_compile(tmpl.ptr, tmpl.len, why, sizeof(why));
	if (ct->jinja != NULL)
	{
		int			rc = jinja_parts(ct, f, t, why, sizeof(why));

		if (rc == 0)
			return 0;
		llm_chat_template_free(ct);
		if (rc < 0)
		{
			llm_set_err(err, errlen, "%s", why);
			return -1;
		}
	}
	{
		size_t		k = strlen(why) + 64;

		ct->refused = malloc(k);
		if (ct->refused == NULL)
		{
			llm_set_err(err, errlen, "chat template: out of memory");
			return -1;
		}
		snprintf(ct->refused, k, "the model file's chat template is refused: %s", why);
		return 0;
	}
}

int
llm_chat_template_init_source(llm_chat_template *ct, const char *src, size_t len,
							  const gguf_file *f, const llm_tokenizer *t, char *err, size_t errlen)
{
	char		why[512];
	int			rc;

	memset(ct, 0, sizeof(*ct));
	ct->jinja = jinja_compile(src, len, why, sizeof(why));
	if (ct->jinja == NULL)
	{
		llm_set_err(err, errlen, "chat template refused: %s", why);
		return -1;
	}
	rc = jinja_parts(ct, f, t, why, sizeof(why));
	if (rc != 0)
	{
		llm_chat_template_free(ct);
		llm_set_err(err, errlen, rc > 0 ? "chat template refused: %s" : "%s", why);
		return -1;
	}
	return 0;
}

llm_chat_source
llm_chat_source_of(const char *value)
{
	if (value == NULL)
		return LLM_CHAT_SOURCE_NAME;
	if (strstr(value, "{{") != NULL || strstr(value, "{%") != NULL)
		return LLM_CHAT_SOURCE_TEXT;
	if (value[0] == '/')
		return LLM_CHAT_SOURCE_PATH;
	return LLM_CHAT_SOURCE_NAME;
}

int
llm_chat_template_init_override(llm_chat_template *ct, const char *value,
								const gguf_file *f, const llm_tokenizer *t, char *err, size_t errlen)
{
	char	   *buf;
	size_t		n;
	int			rc;

	memset(ct, 0, sizeof(*ct));
	switch (llm_chat_source_of(value))
	{
		case LLM_CHAT_SOURCE_TEXT:
			return llm_chat_template_init_source(ct, value, strlen(value), f, t, err, errlen);
		case LLM_CHAT_SOURCE_PATH:
			break;
		case LLM_CHAT_SOURCE_NAME:
			llm_set_err(err, errlen, "\"%s\" is neither a Jinja template nor an absolute path", value);
			return -1;
	}
	buf = llm_read_file(value, LLM_CHAT_TEMPLATE_FILE_MAX, "chat template file", &n, err, errlen);
	if (buf == NULL)
		return -1;
	rc = llm_chat_template_init_source(ct, buf, n, f, t, err, errlen);
	free(buf);
	return rc;
}

const char *
llm_chat_template_refused(const llm_chat_template *ct)
{
	return ct->refused;
}

int32_t
llm_chat_end_of_turn(const llm_chat_template *ct, const llm_tokenizer *t)
{
	if (ct->family == LLM_CHAT_CHATML)
		return llm_tokenizer_special_id(t, "<|im_end|>");
	if (ct->family == LLM_CHAT_GEMMA)
		return llm_tokenizer_special_id(t, "<end_of_turn>");
	if (ct->family == LLM_CHAT_JINJA)
		return ct->end_of_turn;
	return -1;
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
	[LLM_CHAT_JINJA] = "jinja",
};

bool
llm_chat_family_parse(const char *name, llm_chat_family *out)
{
	for (size_t i = 0; i <= LLM_CHAT_GEMMA; i++)
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
	jinja_free(ct->jinja);
	chat_specials_free(ct->specials);
	free(ct->refused);
	memset(ct, 0, sizeof(*ct));
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
render_chatml(chat_out *o, const llm_chat_message *msgs, int n, bool agp)
{
	int32_t		start = llm_tokenizer_special_id(o->t, "<|im_start|>");
	int32_t		end = llm_tokenizer_special_id(o->t, "<|im_end|>");

	for (int i = 0; i < n; i++)
	{
		emit_marker(o, start);
		text_append_str(o, msgs[i].role);
		text_append_str(o, "\n");
		text_append(o, msgs[i].content, msgs[i].content_len);
		emit_marker(o, end);
		text_append_str(o, "\n");
	}
	if (agp)
	{
		emit_marker(o, start);
		text_append_str(o, "assistant\n");
	}
	text_flush(o);
}

static void
render_gemma(chat_out *o, const llm_chat_message *msgs, int n, bool agp)
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
	if (agp)
	{
		emit_marker(o, start);
		text_append_str(o, "model\n");
	}
	text_flush(o);
}

/* Roles, contents: 0 or -1 + err. */
static int
check_messages(const llm_chat_message *msgs, int n, char *err, size_t errlen)
{
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
	return 0;
}

/* The family can render at all, and takes o: 0 or -1 + err. */
static int
check_template(const llm_chat_template *ct, const llm_chat_options *o, char *err, size_t errlen)
{
	if (ct == NULL || ct->family == LLM_CHAT_NONE)
	{
		if (ct != NULL && ct->refused != NULL)
			llm_set_err(err, errlen, "%s (%s)", LLM_CHAT_NONE_ERROR, ct->refused);
		else
			llm_set_err(err, errlen, "%s", LLM_CHAT_NONE_ERROR);
		return -1;
	}
	if (ct->family != LLM_CHAT_JINJA && (o->tools_json != NULL || o->enable_thinking >= 0))
	{
		llm_set_err(err, errlen, "chat template: the built-in %s template takes no tools and no enable_thinking",
					llm_chat_family_name(ct->family));
		return -1;
	}
	return 0;
}

/* Render with the Jinja template into c: the status mapped to 0 / -1 + err. */
static int
render_jinja(const llm_chat_template *ct, const llm_tokenizer *t, const llm_chat_message *msgs, int n,
			 const llm_chat_options *o, jinja_ctx *c, jinja_output *out, char *err, size_t errlen)
{
	chat_jinja_vars v = {t, {ct->special_ids[0], ct->special_ids[1], ct->special_ids[2], ct->special_ids[3]}};
	char		why[1024];
	jinja_status st;

	if (c == NULL)
	{
		llm_set_err(err, errlen, "chat template: out of memory");
		return -1;
	}
	st = chat_jinja_render(ct->jinja, &v, msgs, n, o, c, out, why, sizeof(why));
	if (st == JINJA_OK)
		return 0;
	/* raise_exception's message as it is; another failure with its place in the template */
	llm_set_err(err, errlen, st == JINJA_RAISED ? "chat template: %s" : "chat template failed: %s", why);
	return -1;
}

/*
 * Render msgs[0..n) plus the assistant prompt as token ids (see header).
 * Roles must be "system", "user" or "assistant"; content must be valid UTF-8.
 */
int64_t
llm_chat_apply_ex(const llm_chat_template *ct, const llm_tokenizer *t,
				  const llm_chat_message *msgs, int n, const llm_chat_options *opts,
				  int32_t *out, int64_t cap, char *err, size_t errlen)
{
	static const llm_chat_options dflt = LLM_CHAT_OPTIONS_DEFAULT;
	const llm_chat_options *o = opts ? opts : &dflt;
	chat_out	co;

	if (check_template(ct, o, err, errlen) != 0 || check_messages(msgs, n, err, errlen) != 0)
		return -1;
	if (ct->family == LLM_CHAT_JINJA)
	{
		jinja_ctx  *c = jinja_ctx_create();
		jinja_output r;
		int64_t		k = -1;

		if (render_jinja(ct, t, msgs, n, o, c, &r, err, errlen) == 0)
			k = chat_jinja_tokenize(ct->specials, t, r.text, r.trusted, r.len, out, cap, err, errlen);
		jinja_ctx_free(c);
		return k;
	}
	memset(&co, 0, sizeof(co));
	co.t = t;
	co.ids = out;
	co.cap = out == NULL || cap < 0 ? 0 : cap;
	co.err = err;
	co.errlen = errlen;
	if (ct->family == LLM_CHAT_CHATML)
		render_chatml(&co, msgs, n, o->add_generation_prompt);
	else
		render_gemma(&co, msgs, n, o->add_generation_prompt);
	free(co.text);
	return co.failed ? -1 : co.n;
}

int64_t
llm_chat_apply(const llm_chat_template *ct, const llm_tokenizer *t,
			   const llm_chat_message *msgs, int n,
			   int32_t *out, int64_t cap, char *err, size_t errlen)
{
	return llm_chat_apply_ex(ct, t, msgs, n, NULL, out, cap, err, errlen);
}

int
llm_chat_render_text(const llm_chat_template *ct, const llm_tokenizer *t,
					 const llm_chat_message *msgs, int n, const llm_chat_options *opts,
					 char **text, size_t *len, char *err, size_t errlen)
{
	static const llm_chat_options dflt = LLM_CHAT_OPTIONS_DEFAULT;
	const llm_chat_options *o = opts ? opts : &dflt;

	*text = NULL;
	*len = 0;
	if (check_template(ct, o, err, errlen) != 0 || check_messages(msgs, n, err, errlen) != 0)
		return -1;
	if (ct->family == LLM_CHAT_JINJA)
	{
		jinja_ctx  *c = jinja_ctx_create();
		jinja_output r;
		int			rc = -1;

		if (render_jinja(ct, t, msgs, n, o, c, &r, err, errlen) == 0)
		{
			*text = malloc(r.len + 1);
			if (*text == NULL)
				llm_set_err(err, errlen, "chat template: out of memory");
			else
			{
				memcpy(*text, r.text, r.len + 1);
				*len = r.len;
				rc = 0;
			}
		}
		jinja_ctx_free(c);
		return rc;
	}
	{
		/* a built-in family: its ids as text */
		int64_t		k = llm_chat_apply_ex(ct, t, msgs, n, o, NULL, 0, err, errlen);
		int32_t    *ids;
		size_t		cap = 64,
					w = 0;
		char	   *buf;

		if (k < 0)
			return -1;
		ids = malloc(sizeof(int32_t) * (size_t) (k + 1));
		buf = malloc(cap);
		if (ids == NULL || buf == NULL || llm_chat_apply_ex(ct, t, msgs, n, o, ids, k, err, errlen) != k)
			goto oom;
		for (int64_t i = 0; i < k; i++)
		{
			int			b = llm_token_to_bytes(t, ids[i], NULL, 0);

			if (b < 0)
				b = 0;
			if (w + (size_t) b + 1 > cap)
			{
				char	   *more;

				cap = (w + (size_t) b + 1) * 2;
				more = realloc(buf, cap);
				if (more == NULL)
					goto oom;
				buf = more;
			}
			w += (size_t) llm_token_to_bytes(t, ids[i], buf + w, b);
		}
		buf[w] = '\0';
		free(ids);
		*text = buf;
		*len = w;
		return 0;
oom:
		free(ids);
		free(buf);
		llm_set_err(err, errlen, "chat template: out of memory");
		return -1;
	}
}
