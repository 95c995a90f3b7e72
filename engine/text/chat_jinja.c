/*
 * chat_jinja.c — a chat template given as Jinja (the model file's own, or
 * one configured) rendered with engine/jinja and turned into token ids.
 *
 * The template sees what HF transformers' apply_chat_template passes:
 * messages (role, content), add_generation_prompt, tools and documents
 * (None unless given), the special-token strings (bos_token, eos_token,
 * unk_token, pad_token: the texts of the GGUF's ids) and enable_thinking
 * when the caller sets it.
 *
 * Special tokens: the rendered text carries, byte by byte, whether it came
 * from the template (its literals, the special-token variables) or from
 * data (contents, names, tools).  Only a control token's text lying wholly
 * in template bytes becomes its id; the text between two such tokens is
 * tokenized as one plain-text fragment (as llama.cpp and HF split on special
 * tokens), so with no special-token text in the contents the ids equal the
 * reference tokenizer's for the rendered string, and with some it stays
 * plain text whatever it says.
 */
#include "chat_jinja.h"
#include "engine/util/text_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct special_tok
{
	const char *text;			/* into chat_specials.pool */
	int32_t		len;
	int32_t		id;
} special_tok;

struct chat_specials
{
	special_tok *toks;			/* sorted by text (bytes, a prefix before its extensions) */
	int32_t		n;
	char	   *pool;
	bool		first[256];		/* some token starts with byte b */
	int32_t    *lens;			/* the distinct token lengths, longest first */
	int32_t		n_lens;
};

static int
cmp_special(const void *a, const void *b)
{
	const special_tok *x = a,
			   *y = b;
	int			m = x->len < y->len ? x->len : y->len;
	int			r = memcmp(x->text, y->text, (size_t) m);

	if (r != 0)
		return r;
	return x->len - y->len;
}

static int
cmp_len_desc(const void *a, const void *b)
{
	return *(const int32_t *) b - *(const int32_t *) a;
}

chat_specials *
chat_specials_build(const llm_tokenizer *t)
{
	chat_specials *s = calloc(1, sizeof(*s));
	int32_t		nv = llm_tokenizer_n_vocab(t);
	size_t		pool = 0,
				at = 0;
	char		buf[512];

	if (s == NULL)
		return NULL;
	for (int32_t id = 0; id < nv; id++)
		if (llm_tokenizer_is_control(t, id))
		{
			int			k = llm_token_to_bytes(t, id, buf, sizeof(buf));

			if (k > 0 && k <= (int) sizeof(buf))
			{
				pool += (size_t) k;
				s->n++;
			}
		}
	s->toks = calloc((size_t) (s->n ? s->n : 1), sizeof(special_tok));
	s->pool = malloc(pool ? pool : 1);
	if (s->toks == NULL || s->pool == NULL)
	{
		chat_specials_free(s);
		return NULL;
	}
	s->n = 0;
	for (int32_t id = 0; id < nv; id++)
		if (llm_tokenizer_is_control(t, id))
		{
			int			k = llm_token_to_bytes(t, id, buf, sizeof(buf));

			if (k > 0 && k <= (int) sizeof(buf))
			{
				memcpy(s->pool + at, buf, (size_t) k);
				s->toks[s->n].text = s->pool + at;
				s->toks[s->n].len = k;
				s->toks[s->n].id = id;
				s->n++;
				at += (size_t) k;
			}
		}
	qsort(s->toks, (size_t) s->n, sizeof(special_tok), cmp_special);
	s->lens = malloc(sizeof(int32_t) * (size_t) (s->n ? s->n : 1));
	if (s->lens == NULL)
	{
		chat_specials_free(s);
		return NULL;
	}
	for (int32_t i = 0; i < s->n; i++)
	{
		bool		seen = false;

		s->first[(unsigned char) s->toks[i].text[0]] = true;
		for (int32_t k = 0; k < s->n_lens && !seen; k++)
			seen = s->lens[k] == s->toks[i].len;
		if (!seen)
			s->lens[s->n_lens++] = s->toks[i].len;
	}
	qsort(s->lens, (size_t) s->n_lens, sizeof(int32_t), cmp_len_desc);
	return s;
}

void
chat_specials_free(chat_specials *s)
{
	if (s == NULL)
		return;
	free(s->toks);
	free(s->pool);
	free(s->lens);
	free(s);
}

/*
 * The longest control token at text[i..len) wholly in trusted bytes: its
 * index, or -1.  One binary search per distinct token length (Gemma's
 * thousands of <unusedN> tokens share a few lengths).
 */
static int32_t
special_at(const chat_specials *s, const char *text, const uint8_t *trusted, size_t i, size_t len)
{
	if (!s->first[(unsigned char) text[i]])
		return -1;
	for (int32_t k = 0; k < s->n_lens; k++)
	{
		special_tok key;
		const special_tok *hit;

		if ((size_t) s->lens[k] > len - i)
			continue;
		key.text = text + i;
		key.len = s->lens[k];
		hit = bsearch(&key, s->toks, (size_t) s->n, sizeof(special_tok), cmp_special);
		if (hit != NULL && memchr(trusted + i, 0, (size_t) hit->len) == NULL)
			return (int32_t) (hit - s->toks);
	}
	return -1;
}

int64_t
chat_jinja_tokenize(const chat_specials *s, const llm_tokenizer *t, const char *text, const uint8_t *trusted,
					size_t len, int32_t *out, int64_t cap, char *err, size_t errlen)
{
	int64_t		n = 0;
	size_t		from = 0;

	if (cap < 0 || out == NULL)
		cap = 0;
	for (size_t i = 0; i <= len; i++)
	{
		int32_t		k = -1;

		if (i < len && trusted[i])
			k = special_at(s, text, trusted, i, len);
		if (k < 0 && i < len)
			continue;
		if (i > from)
		{
			int64_t		m = llm_tokenize(t, text + from, i - from, n < cap ? out + n : NULL,
										 n < cap ? cap - n : 0, err, errlen);

			if (m < 0)
				return -1;
			n += m;
		}
		if (k >= 0)
		{
			if (n < cap)
				out[n] = s->toks[k].id;
			n++;
			i += (size_t) s->toks[k].len - 1;
			from = i + 1;
		}
	}
	return n;
}

/* A vocabulary token's text as a trusted string value; NULL when absent. */
static jinja_value *
token_text(jinja_ctx *c, const llm_tokenizer *t, int32_t id)
{
	char		buf[256];
	int			k;

	if (id < 0)
		return NULL;
	k = llm_token_to_bytes(t, id, buf, sizeof(buf));
	if (k < 0 || k > (int) sizeof(buf))
		return NULL;
	return jinja_string(c, buf, (size_t) k, true);
}

jinja_status
chat_jinja_render(const jinja_template *tmpl, const chat_jinja_vars *v, const llm_chat_message *msgs, int n,
				  const llm_chat_options *o, jinja_ctx *c, jinja_output *out, char *err, size_t errlen)
{
	jinja_value *list = jinja_list(c);
	static const char *const names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};

	if (list == NULL)
		goto oom;
	for (int i = 0; i < n; i++)
	{
		jinja_value *m = jinja_dict(c);

		if (m == NULL ||
			jinja_dict_set(c, m, "role", jinja_string(c, msgs[i].role, strlen(msgs[i].role), false)) != 0 ||
			jinja_dict_set(c, m, "content", jinja_string(c, msgs[i].content ? msgs[i].content : "",
														   msgs[i].content_len, false)) != 0 ||
			jinja_list_push(c, list, m) != 0)
			goto oom;
	}
	if (jinja_set(c, "messages", list) != 0 ||
		jinja_set(c, "add_generation_prompt", jinja_bool(c, o->add_generation_prompt)) != 0 ||
		jinja_set(c, "documents", jinja_none(c)) != 0)
		goto oom;
	if (o->tools_json != NULL)
	{
		jinja_value *tools = jinja_from_json(c, o->tools_json, o->tools_len, err, errlen);

		if (tools == NULL)
			return JINJA_FAILED;
		if (jinja_set(c, "tools", tools) != 0)
			goto oom;
	}
	else if (jinja_set(c, "tools", jinja_none(c)) != 0)
		goto oom;
	if (o->enable_thinking >= 0 && jinja_set(c, "enable_thinking", jinja_bool(c, o->enable_thinking != 0)) != 0)
		goto oom;
	for (int i = 0; i < 4; i++)
	{
		jinja_value *s = token_text(c, v->tok, v->ids[i]);

		if (s != NULL && jinja_set(c, names[i], s) != 0)
			goto oom;
	}
	return jinja_render(tmpl, c, out, err, errlen);
oom:
	llm_set_err(err, errlen, "chat template: out of memory");
	return JINJA_FAILED;
}
