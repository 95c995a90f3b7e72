/*
 * tojson.c — JSON both ways: the tojson filter as HF transformers defines it
 * (Python's json.dumps with ensure_ascii off unless asked, its separators,
 * indent and sort_keys), and JSON text (tools, messages given as JSON) read
 * into values whose strings are data, never trusted.
 */
#include "jinja_internal.h"
#include "engine/grammar/json_min.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
put(jinja_ctx *c, jbuf *b, const char *s)
{
	jb_put(c, b, s, strlen(s), 0);
}

static uint32_t
utf8_decode(const char *s, size_t n, size_t *k)
{
	unsigned char c0 = (unsigned char) s[0];
	int			len = c0 < 0x80 ? 1 : c0 < 0xE0 ? 2 : c0 < 0xF0 ? 3 : 4;
	uint32_t	cp = len == 1 ? c0 : len == 2 ? (c0 & 0x1F) : len == 3 ? (c0 & 0x0F) : (c0 & 0x07);

	if ((size_t) len > n)
		len = (int) n;
	for (int i = 1; i < len; i++)
		cp = (cp << 6) | ((unsigned char) s[i] & 0x3F);
	*k = (size_t) len;
	return cp;
}

static void
json_string(jinja_ctx *c, jbuf *b, jv s, bool ensure_ascii)
{
	char		esc[16];

	put(c, b, "\"");
	for (size_t i = 0; i < s.n;)
	{
		unsigned char ch = (unsigned char) s.s[i];

		switch (ch)
		{
			case '"': put(c, b, "\\\""); i++; continue;
			case '\\': put(c, b, "\\\\"); i++; continue;
			case '\n': put(c, b, "\\n"); i++; continue;
			case '\r': put(c, b, "\\r"); i++; continue;
			case '\t': put(c, b, "\\t"); i++; continue;
			case '\b': put(c, b, "\\b"); i++; continue;
			case '\f': put(c, b, "\\f"); i++; continue;
		}
		if (ch < 0x20 || (ch == 0x7f && ensure_ascii))
		{
			snprintf(esc, sizeof(esc), "\\u%04x", ch);
			put(c, b, esc);
			i++;
			continue;
		}
		if (ch >= 0x80 && ensure_ascii)
		{
			size_t		k;
			uint32_t	cp = utf8_decode(s.s + i, s.n - i, &k);

			if (cp >= 0x10000)
			{
				cp -= 0x10000;
				snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
			}
			else
				snprintf(esc, sizeof(esc), "\\u%04x", cp);
			put(c, b, esc);
			i += k;
			continue;
		}
		jb_put(c, b, s.s + i, 1, 0);
		i++;
	}
	put(c, b, "\"");
}

static void
newline(jinja_ctx *c, jbuf *b, int indent, int level)
{
	put(c, b, "\n");
	for (int i = 0; i < indent * level; i++)
		put(c, b, " ");
}

void
jtojson(jinja_ctx *c, const jnode *at, jbuf *b, jv v, int indent, int level,
		const char *item_sep, const char *key_sep, bool sort_keys, bool ensure_ascii)
{
	switch (v.t)
	{
		case JV_NONE:
			put(c, b, "null");
			return;
		case JV_BOOL:
			put(c, b, v.b ? "true" : "false");
			return;
		case JV_INT:
		case JV_FLOAT:
			jb_putv(c, b, jv_tostr(c, v));
			if (v.t == JV_FLOAT)
			{
				/* json.dumps writes nan/inf as NaN/Infinity */
				if (b->len >= 3 && memcmp(b->p + b->len - 3, "nan", 3) == 0)
				{
					b->len -= 3;
					put(c, b, "NaN");
				}
				else if (b->len >= 3 && memcmp(b->p + b->len - 3, "inf", 3) == 0)
				{
					b->len -= 3;
					put(c, b, "Infinity");
				}
			}
			return;
		case JV_STR:
			json_string(c, b, v, ensure_ascii);
			return;
		case JV_LIST:
			if (v.i == 1)
				jerr_fail(c, at, "Object of type generator is not JSON serializable");
			if (v.l->n == 0)
			{
				put(c, b, "[]");
				return;
			}
			put(c, b, "[");
			for (size_t i = 0; i < v.l->n; i++)
			{
				if (i)
					put(c, b, item_sep);
				if (indent >= 0)
					newline(c, b, indent, level + 1);
				jtojson(c, at, b, v.l->v[i], indent, level + 1, item_sep, key_sep, sort_keys, ensure_ascii);
			}
			if (indent >= 0)
				newline(c, b, indent, level);
			put(c, b, "]");
			return;
		case JV_DICT:
		case JV_NS:
			{
				size_t		n = v.d->n;
				size_t	   *order;

				if (n == 0)
				{
					put(c, b, "{}");
					return;
				}
				order = ja_alloc(&c->arena, sizeof(size_t) * n);
				if (order == NULL)
					jerr_fail(c, at, "out of memory");
				for (size_t i = 0; i < n; i++)
					order[i] = i;
				if (sort_keys)
					for (size_t i = 1; i < n; i++)
						for (size_t j = i; j > 0 && jv_compare(c, at, v.d->k[order[j - 1]], v.d->k[order[j]]) > 0; j--)
						{
							size_t		t = order[j];

							order[j] = order[j - 1];
							order[j - 1] = t;
						}
				put(c, b, "{");
				for (size_t i = 0; i < n; i++)
				{
					jv			k = v.d->k[order[i]];

					if (i)
						put(c, b, item_sep);
					if (indent >= 0)
						newline(c, b, indent, level + 1);
					if (k.t == JV_STR)
						json_string(c, b, k, ensure_ascii);
					else if (k.t == JV_INT || k.t == JV_FLOAT || k.t == JV_BOOL || k.t == JV_NONE)
					{
						jbuf		t = {0};

						jtojson(c, at, &t, k, -1, 0, item_sep, key_sep, sort_keys, ensure_ascii);
						put(c, b, "\"");
						jb_put(c, b, t.p, t.len, 0);
						put(c, b, "\"");
						jb_free(&t);
					}
					else
						jerr_fail(c, at, "keys must be str, int, float, bool or None, not %s", jv_typename(k));
					put(c, b, key_sep);
					jtojson(c, at, b, v.d->v[order[i]], indent, level + 1, item_sep, key_sep, sort_keys, ensure_ascii);
				}
				if (indent >= 0)
					newline(c, b, indent, level);
				put(c, b, "}");
				return;
			}
		default:
			jerr_fail(c, at, "Object of type %s is not JSON serializable", jv_typename(v));
	}
}

static int
from_json(jinja_ctx *c, const llm_json *j, jv *out)
{
	switch (j->type)
	{
		case LLM_JSON_NULL:
			*out = jv_none();
			return 0;
		case LLM_JSON_BOOL:
			*out = jv_bool(j->boolean);
			return 0;
		case LLM_JSON_NUMBER:
			{
				char		buf[64];
				bool		integral;

				/* the number's source text (not NUL-terminated); Python reads 1 as int, 1.0 and 1e3 as float */
				snprintf(buf, sizeof(buf), "%.*s", (int) j->len, j->text);
				integral = strpbrk(buf, ".eE") == NULL && j->len < sizeof(buf);
				*out = integral ? jv_int(strtoll(buf, NULL, 10)) : jv_float(strtod(buf, NULL));
				return 0;
			}
		case LLM_JSON_STRING:
			{
				char	   *p = ja_alloc(&c->arena, j->len + 1);

				if (p == NULL)
					return -1;
				memcpy(p, j->text, j->len);
				*out = jv_str_static(p, j->len, false);
				return 0;
			}
		case LLM_JSON_ARRAY:
			{
				jv			l = {0};

				l.t = JV_LIST;
				l.l = ja_alloc(&c->arena, sizeof(jlist));
				if (l.l == NULL)
					return -1;
				l.l->v = ja_alloc(&c->arena, sizeof(jv) * (size_t) (j->n ? j->n : 1));
				if (l.l->v == NULL)
					return -1;
				l.l->cap = (size_t) (j->n ? j->n : 1);
				for (int32_t i = 0; i < j->n; i++)
					if (from_json(c, j->items[i], &l.l->v[l.l->n++]) != 0)
						return -1;
				*out = l;
				return 0;
			}
		case LLM_JSON_OBJECT:
			{
				jv			d = {0};
				size_t		n = (size_t) (j->n ? j->n : 1);

				d.t = JV_DICT;
				d.d = ja_alloc(&c->arena, sizeof(jdict));
				if (d.d == NULL)
					return -1;
				d.d->k = ja_alloc(&c->arena, sizeof(jv) * n);
				d.d->v = ja_alloc(&c->arena, sizeof(jv) * n);
				if (d.d->k == NULL || d.d->v == NULL)
					return -1;
				d.d->cap = n;
				for (int32_t i = 0; i < j->n; i++)
				{
					char	   *k = ja_alloc(&c->arena, j->key_lens[i] + 1);

					if (k == NULL)
						return -1;
					memcpy(k, j->keys[i], j->key_lens[i]);
					d.d->k[i] = jv_str_static(k, j->key_lens[i], false);
					if (from_json(c, j->items[i], &d.d->v[i]) != 0)
						return -1;
					d.d->n++;
				}
				*out = d;
				return 0;
			}
	}
	return -1;
}

jinja_value *
jinja_from_json(jinja_ctx *c, const char *json, size_t len, char *err, size_t errlen)
{
	llm_json_doc *doc = llm_json_parse(json, len, 64, NULL, err, errlen);
	jv		   *v;

	if (doc == NULL)
		return NULL;
	v = ja_alloc(&c->arena, sizeof(jv));
	if (v == NULL || from_json(c, llm_json_root(doc), v) != 0)
	{
		snprintf(err, errlen, "out of memory");
		llm_json_free(doc);
		return NULL;
	}
	llm_json_free(doc);
	return v;
}
