/* json_min.c — see json_min.h. */
#include "json_min.h"
#include "engine/util/text_util.h"
#include "engine/util/utf8_encode.h"

#include <stdlib.h>
#include <string.h>

typedef struct arena_block
{
	struct arena_block *next;
	size_t		used,
				cap;
	char		data[];
} arena_block;

struct llm_json_doc
{
	arena_block *blocks;
	llm_json   *root;
};

typedef struct parser
{
	const uint8_t *s;
	size_t		n,
				pos;
	int			max_depth;
	llm_json_doc *doc;
	bool		oom;
	char	   *err;
	size_t		errlen;
	bool		failed;
} parser;

static void *
arena_alloc(parser *p, size_t n)
{
	arena_block *b = p->doc->blocks;

	n = (n + 15) & ~(size_t) 15;
	if (b == NULL || b->cap - b->used < n)
	{
		size_t		cap = n > 65536 ? n : 65536;

		b = malloc(sizeof(arena_block) + cap);
		if (b == NULL)
		{
			p->oom = true;
			if (!p->failed)
				llm_set_err(p->err, p->errlen, "out of memory parsing JSON");
			p->failed = true;
			return NULL;
		}
		b->next = p->doc->blocks;
		b->used = 0;
		b->cap = cap;
		p->doc->blocks = b;
	}
	b->used += n;
	return b->data + b->used - n;
}

static void
fail(parser *p, size_t at, const char *what)
{
	if (!p->failed)
		llm_set_err(p->err, p->errlen, "invalid JSON: %s at offset %zu", what, at);
	p->failed = true;
}

static void
skip_ws(parser *p)
{
	while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
							 p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static int
hex4(const uint8_t *s)
{
	int			v = 0;

	for (int i = 0; i < 4; i++)
	{
		int			c = s[i],
					d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* A string starting at the opening quote; decoded into the arena. */
static bool
parse_string(parser *p, const char **out, size_t *out_len)
{
	size_t		start = p->pos++,
				end,
				w = 0;
	char	   *buf;

	/* find the closing quote first: the decoded text is never longer */
	end = p->pos;
	while (end < p->n && p->s[end] != '"')
		end += (p->s[end] == '\\') ? 2 : 1;
	if (end >= p->n)
	{
		fail(p, start, "unterminated string");
		return false;
	}
	if (llm_utf8_first_invalid((const char *) p->s + p->pos, end - p->pos) != end - p->pos)
	{
		fail(p, p->pos + llm_utf8_first_invalid((const char *) p->s + p->pos, end - p->pos),
			 "invalid UTF-8 in string");
		return false;
	}
	buf = arena_alloc(p, end - p->pos + 1);
	if (buf == NULL)
		return false;
	while (p->pos < end)
	{
		uint8_t		c = p->s[p->pos];

		if (c < 0x20)
		{
			fail(p, p->pos, "raw control character in string");
			return false;
		}
		if (c != '\\')
		{
			buf[w++] = (char) c;
			p->pos++;
			continue;
		}
		c = p->s[p->pos + 1];
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				buf[w++] = (char) c;
				break;
			case 'b':
				buf[w++] = '\b';
				break;
			case 'f':
				buf[w++] = '\f';
				break;
			case 'n':
				buf[w++] = '\n';
				break;
			case 'r':
				buf[w++] = '\r';
				break;
			case 't':
				buf[w++] = '\t';
				break;
			case 'u':
				{
					int			v = (p->pos + 6 <= end) ? hex4(p->s + p->pos + 2) : -1;

					if (v < 0)
					{
						fail(p, p->pos, "bad \\u escape");
						return false;
					}
					if (v >= 0xDC00 && v <= 0xDFFF)
					{
						fail(p, p->pos, "lone low surrogate escape");
						return false;
					}
					if (v >= 0xD800 && v <= 0xDBFF)
					{
						int			lo = (p->pos + 12 <= end && p->s[p->pos + 6] == '\\' &&
										  p->s[p->pos + 7] == 'u') ? hex4(p->s + p->pos + 8) : -1;

						if (lo < 0xDC00 || lo > 0xDFFF)
						{
							fail(p, p->pos, "lone high surrogate escape");
							return false;
						}
						w += llm_utf8_encode(0x10000 + (((uint32_t) v - 0xD800) << 10) + ((uint32_t) lo - 0xDC00), (uint8_t *) buf + w);
						p->pos += 6;
					}
					else
						w += llm_utf8_encode((uint32_t) v, (uint8_t *) buf + w);
					p->pos += 4;
					break;
				}
			default:
				fail(p, p->pos, "bad escape");
				return false;
		}
		p->pos += 2;
	}
	buf[w] = '\0';
	p->pos = end + 1;
	*out = buf;
	*out_len = w;
	return true;
}

static bool
parse_number(parser *p, llm_json *v)
{
	size_t		start = p->pos;
	const uint8_t *s = p->s;

	if (p->pos < p->n && s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->n || s[p->pos] < '0' || s[p->pos] > '9')
	{
		fail(p, start, "bad number");
		return false;
	}
	if (s[p->pos] == '0')
	{
		p->pos++;
		if (p->pos < p->n && s[p->pos] >= '0' && s[p->pos] <= '9')
		{
			fail(p, start, "leading zero in number");
			return false;
		}
	}
	else
		while (p->pos < p->n && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
	if (p->pos < p->n && s[p->pos] == '.')
	{
		p->pos++;
		if (p->pos >= p->n || s[p->pos] < '0' || s[p->pos] > '9')
		{
			fail(p, start, "bad fraction in number");
			return false;
		}
		while (p->pos < p->n && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos < p->n && (s[p->pos] == 'e' || s[p->pos] == 'E'))
	{
		p->pos++;
		if (p->pos < p->n && (s[p->pos] == '+' || s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->n || s[p->pos] < '0' || s[p->pos] > '9')
		{
			fail(p, start, "bad exponent in number");
			return false;
		}
		while (p->pos < p->n && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
	}
	{
		char	   *t = arena_alloc(p, p->pos - start + 1);

		if (t == NULL)
			return false;
		memcpy(t, s + start, p->pos - start);
		t[p->pos - start] = '\0';
		v->text = t;
		v->len = p->pos - start;
	}
	return true;
}

/* Growable temporary list of nodes (heap; copied into the arena when complete). */
typedef struct node_list
{
	llm_json  **v;
	const char **k;
	size_t	   *kl;
	int32_t		n,
				cap;
} node_list;

static bool
list_push(parser *p, node_list *l, llm_json *v, const char *k, size_t kl)
{
	if (l->n == l->cap)
	{
		int32_t		cap = l->cap ? l->cap * 2 : 8;
		llm_json  **nv = realloc(l->v, sizeof(*nv) * cap);
		const char **nk;
		size_t	   *nkl;

		if (nv == NULL)
			goto oom;
		l->v = nv;
		nk = realloc(l->k, sizeof(*nk) * cap);
		if (nk == NULL)
			goto oom;
		l->k = nk;
		nkl = realloc(l->kl, sizeof(*nkl) * cap);
		if (nkl == NULL)
			goto oom;
		l->kl = nkl;
		l->cap = cap;
	}
	l->v[l->n] = v;
	l->k[l->n] = k;
	l->kl[l->n] = kl;
	l->n++;
	return true;
oom:
	p->oom = true;
	if (!p->failed)
		llm_set_err(p->err, p->errlen, "out of memory parsing JSON");
	p->failed = true;
	return false;
}

static void
list_free(node_list *l)
{
	free(l->v);
	free(l->k);
	free(l->kl);
}

static llm_json *parse_value(parser *p, int depth);

static bool
finish_list(parser *p, llm_json *v, node_list *l, bool with_keys)
{
	v->n = l->n;
	if (l->n == 0)
		return true;
	v->items = arena_alloc(p, sizeof(llm_json *) * l->n);
	if (v->items == NULL)
		return false;
	memcpy(v->items, l->v, sizeof(llm_json *) * l->n);
	if (with_keys)
	{
		v->keys = arena_alloc(p, sizeof(char *) * l->n);
		v->key_lens = arena_alloc(p, sizeof(size_t) * l->n);
		if (v->keys == NULL || v->key_lens == NULL)
			return false;
		memcpy(v->keys, l->k, sizeof(char *) * l->n);
		memcpy(v->key_lens, l->kl, sizeof(size_t) * l->n);
	}
	return true;
}

static bool
parse_container(parser *p, llm_json *v, int depth)
{
	bool		is_obj = p->s[p->pos] == '{';
	uint8_t		close = is_obj ? '}' : ']';
	node_list	l = {0};
	bool		ok = false;

	if (depth >= p->max_depth)
	{
		fail(p, p->pos, "nesting too deep");
		return false;
	}
	p->pos++;
	skip_ws(p);
	if (p->pos < p->n && p->s[p->pos] == close)
	{
		p->pos++;
		return true;
	}
	for (;;)
	{
		const char *key = NULL;
		size_t		key_len = 0;
		llm_json   *item;

		skip_ws(p);
		if (is_obj)
		{
			size_t		key_at = p->pos;

			if (p->pos >= p->n || p->s[p->pos] != '"')
			{
				fail(p, p->pos, "expected a string key");
				goto out;
			}
			if (!parse_string(p, &key, &key_len))
				goto out;
			for (int32_t i = 0; i < l.n; i++)
				if (l.kl[i] == key_len && memcmp(l.k[i], key, key_len) == 0)
				{
					fail(p, key_at, "duplicate key");
					goto out;
				}
			skip_ws(p);
			if (p->pos >= p->n || p->s[p->pos] != ':')
			{
				fail(p, p->pos, "expected ':'");
				goto out;
			}
			p->pos++;
		}
		item = parse_value(p, depth + 1);
		if (item == NULL || !list_push(p, &l, item, key, key_len))
			goto out;
		skip_ws(p);
		if (p->pos < p->n && p->s[p->pos] == ',')
		{
			p->pos++;
			continue;
		}
		if (p->pos < p->n && p->s[p->pos] == close)
		{
			p->pos++;
			break;
		}
		fail(p, p->pos, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
		goto out;
	}
	ok = finish_list(p, v, &l, is_obj);
out:
	list_free(&l);
	return ok;
}

static llm_json *
parse_value(parser *p, int depth)
{
	llm_json   *v;

	skip_ws(p);
	if (p->pos >= p->n)
	{
		fail(p, p->pos, "unexpected end of input");
		return NULL;
	}
	v = arena_alloc(p, sizeof(llm_json));
	if (v == NULL)
		return NULL;
	memset(v, 0, sizeof(*v));
	v->offset = p->pos;
	switch (p->s[p->pos])
	{
		case '{':
		case '[':
			v->type = p->s[p->pos] == '{' ? LLM_JSON_OBJECT : LLM_JSON_ARRAY;
			if (!parse_container(p, v, depth))
				return NULL;
			return v;
		case '"':
			v->type = LLM_JSON_STRING;
			if (!parse_string(p, &v->text, &v->len))
				return NULL;
			return v;
		case 't':
		case 'f':
		case 'n':
			{
				static const char *const words[] = {"true", "false", "null"};

				for (int i = 0; i < 3; i++)
				{
					size_t		wl = strlen(words[i]);

					if (p->n - p->pos >= wl && memcmp(p->s + p->pos, words[i], wl) == 0)
					{
						v->type = i == 2 ? LLM_JSON_NULL : LLM_JSON_BOOL;
						v->boolean = i == 0;
						p->pos += wl;
						return v;
					}
				}
				fail(p, p->pos, "unexpected character");
				return NULL;
			}
		default:
			if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))
			{
				v->type = LLM_JSON_NUMBER;
				if (!parse_number(p, v))
					return NULL;
				return v;
			}
			fail(p, p->pos, "unexpected character");
			return NULL;
	}
}

llm_json_doc *
llm_json_parse(const char *text, size_t len, int max_depth, bool *oom, char *err, size_t errlen)
{
	parser		p = {0};

	if (oom)
		*oom = false;
	p.doc = calloc(1, sizeof(llm_json_doc));
	if (p.doc == NULL)
	{
		if (oom)
			*oom = true;
		llm_set_err(err, errlen, "out of memory parsing JSON");
		return NULL;
	}
	p.s = (const uint8_t *) text;
	p.n = len;
	p.max_depth = max_depth;
	p.err = err;
	p.errlen = errlen;
	p.doc->root = parse_value(&p, 0);
	if (p.doc->root != NULL)
	{
		skip_ws(&p);
		if (p.pos != p.n)
			fail(&p, p.pos, "trailing characters after the value");
	}
	if (p.failed)
	{
		if (oom)
			*oom = p.oom;
		llm_json_free(p.doc);
		return NULL;
	}
	return p.doc;
}

void
llm_json_free(llm_json_doc *d)
{
	if (d == NULL)
		return;
	while (d->blocks)
	{
		arena_block *next = d->blocks->next;

		free(d->blocks);
		d->blocks = next;
	}
	free(d);
}

const llm_json *
llm_json_root(const llm_json_doc *d)
{
	return d->root;
}

const llm_json *
llm_json_member(const llm_json *obj, const char *key)
{
	size_t		kl = strlen(key);

	if (obj == NULL || obj->type != LLM_JSON_OBJECT)
		return NULL;
	for (int32_t i = 0; i < obj->n; i++)
		if (obj->key_lens[i] == kl && memcmp(obj->keys[i], key, kl) == 0)
			return obj->items[i];
	return NULL;
}

/* ---------- writing ---------- */

static void
put(char *out, size_t cap, size_t *w, const char *s, size_t n)
{
	if (*w < cap)
		memcpy(out + *w, s, (cap - *w) < n ? (cap - *w) : n);
	*w += n;
}

size_t
llm_json_write_string(const char *s, size_t n, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t		w = 0,
				run = 0;

	put(out, cap, &w, "\"", 1);
	for (size_t i = 0; i < n; i++)
	{
		uint8_t		c = (uint8_t) s[i];
		char		esc[6];
		size_t		el = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(out, cap, &w, s + run, i - run);
		run = i + 1;
		esc[0] = '\\';
		switch (c)
		{
			case '"':
				esc[1] = '"';
				break;
			case '\\':
				esc[1] = '\\';
				break;
			case '\b':
				esc[1] = 'b';
				break;
			case '\f':
				esc[1] = 'f';
				break;
			case '\n':
				esc[1] = 'n';
				break;
			case '\r':
				esc[1] = 'r';
				break;
			case '\t':
				esc[1] = 't';
				break;
			default:
				esc[1] = 'u';
				esc[2] = '0';
				esc[3] = '0';
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				el = 6;
		}
		put(out, cap, &w, esc, el);
	}
	put(out, cap, &w, s + run, n - run);
	put(out, cap, &w, "\"", 1);
	return w;
}

static size_t
write_value(const llm_json *v, char *out, size_t cap, size_t w)
{
	switch (v->type)
	{
		case LLM_JSON_NULL:
			put(out, cap, &w, "null", 4);
			break;
		case LLM_JSON_BOOL:
			put(out, cap, &w, v->boolean ? "true" : "false", v->boolean ? 4 : 5);
			break;
		case LLM_JSON_NUMBER:
			put(out, cap, &w, v->text, v->len);
			break;
		case LLM_JSON_STRING:
			w += llm_json_write_string(v->text, v->len, w < cap ? out + w : NULL, w < cap ? cap - w : 0);
			break;
		case LLM_JSON_ARRAY:
		case LLM_JSON_OBJECT:
			put(out, cap, &w, v->type == LLM_JSON_ARRAY ? "[" : "{", 1);
			for (int32_t i = 0; i < v->n; i++)
			{
				if (i > 0)
					put(out, cap, &w, ",", 1);
				if (v->type == LLM_JSON_OBJECT)
				{
					w += llm_json_write_string(v->keys[i], v->key_lens[i],
											   w < cap ? out + w : NULL, w < cap ? cap - w : 0);
					put(out, cap, &w, ":", 1);
				}
				w = write_value(v->items[i], out, cap, w);
			}
			put(out, cap, &w, v->type == LLM_JSON_ARRAY ? "]" : "}", 1);
			break;
	}
	return w;
}

size_t
llm_json_write(const llm_json *v, char *out, size_t cap)
{
	return write_value(v, out, cap, 0);
}
