/*
 * grammar_tree.c — the grammar compiler's context (arena, first error),
 * code point sets and the tree builders (grammar_impl.h).
 */
#include "json_min.h"
#include "grammar_impl.h"
#include "engine/util/text_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct garena_block
{
	garena_block *next;
	size_t		used,
				cap;
	char		data[];
};

void
gctx_init(gctx *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->err = err;
	c->errlen = errlen;
	if (err && errlen)
		err[0] = '\0';
}

void
gctx_done(gctx *c)
{
	while (c->blocks)
	{
		garena_block *next = c->blocks->next;

		free(c->blocks);
		c->blocks = next;
	}
}

void *
gctx_alloc(gctx *c, size_t n)
{
	garena_block *b = c->blocks;

	n = (n + 15) & ~(size_t) 15;
	if (n == 0)
		n = 16;
	if (b == NULL || b->cap - b->used < n)
	{
		size_t		cap = n > 65536 ? n : 65536;

		b = malloc(sizeof(garena_block) + cap);
		if (b == NULL)
		{
			gctx_fail(c, LLM_GRAMMAR_NO_MEMORY, "out of memory compiling the grammar");
			return NULL;
		}
		b->next = c->blocks;
		b->used = 0;
		b->cap = cap;
		c->blocks = b;
	}
	b->used += n;
	memset(b->data + b->used - n, 0, n);
	return b->data + b->used - n;
}

bool
gctx_fail(gctx *c, llm_grammar_status st, const char *fmt,...)
{
	va_list		ap;
	size_t		w = 0;

	if (c->status != LLM_GRAMMAR_OK)
		return false;
	c->status = st;
	if (c->err == NULL || c->errlen == 0)
		return false;
	if (c->where && st != LLM_GRAMMAR_NO_MEMORY)
	{
		snprintf(c->err, c->errlen, "%s: ", c->where);
		w = strlen(c->err);
	}
	va_start(ap, fmt);
	if (w < c->errlen)
		vsnprintf(c->err + w, c->errlen - w, fmt, ap);
	va_end(ap);
	return false;
}

bool
gctx_failed(const gctx *c)
{
	return c->status != LLM_GRAMMAR_OK;
}

char *
gctx_strdup(gctx *c, const char *s, size_t n)
{
	char	   *d = gctx_alloc(c, n + 1);

	if (d)
		memcpy(d, s, n);
	return d;
}

/* ---------- code point sets ---------- */

static bool
cpset_reserve(gctx *c, gcpset *s, int32_t need)
{
	gcp_range  *r;
	int32_t		cap;

	if (s->cap >= need)
		return true;
	cap = s->cap ? s->cap * 2 : 8;
	while (cap < need)
		cap *= 2;
	r = gctx_alloc(c, sizeof(gcp_range) * cap);
	if (r == NULL)
		return false;
	if (s->n)
		memcpy(r, s->r, sizeof(gcp_range) * s->n);
	s->r = r;
	s->cap = cap;
	return true;
}

/* Add [lo, hi] without surrogates, keeping the ranges sorted and merged. */
static bool
cpset_add_raw(gctx *c, gcpset *s, uint32_t lo, uint32_t hi)
{
	int32_t		i = 0,
				j;

	if (!cpset_reserve(c, s, s->n + 1))
		return false;
	/* first range that ends at or after lo - 1 (adjacent ranges merge) */
	while (i < s->n && s->r[i].hi + 1 < lo)
		i++;
	/* ranges i..j-1 overlap or touch [lo, hi] */
	j = i;
	while (j < s->n && s->r[j].lo <= hi + 1)
	{
		if (s->r[j].lo < lo)
			lo = s->r[j].lo;
		if (s->r[j].hi > hi)
			hi = s->r[j].hi;
		j++;
	}
	if (j == i)
	{
		memmove(s->r + i + 1, s->r + i, sizeof(gcp_range) * (s->n - i));
		s->n++;
	}
	else if (j > i + 1)
	{
		memmove(s->r + i + 1, s->r + j, sizeof(gcp_range) * (s->n - j));
		s->n -= j - i - 1;
	}
	s->r[i].lo = lo;
	s->r[i].hi = hi;
	return true;
}

bool
gcpset_add(gctx *c, gcpset *s, uint32_t lo, uint32_t hi)
{
	if (lo > hi)
	{
		uint32_t	t = lo;

		lo = hi;
		hi = t;
	}
	if (hi > G_MAX_CP)
		hi = G_MAX_CP;
	if (lo > G_MAX_CP)
		return true;
	/* surrogates are not scalar values: never in a set */
	if (lo < 0xD800 && hi >= 0xD800)
	{
		if (!cpset_add_raw(c, s, lo, 0xD7FF))
			return false;
		lo = 0xE000;
	}
	else if (lo >= 0xD800 && lo <= 0xDFFF)
		lo = 0xE000;
	if (hi >= 0xD800 && hi <= 0xDFFF)
		hi = 0xD7FF;
	if (lo > hi)
		return true;
	return cpset_add_raw(c, s, lo, hi);
}

bool
gcpset_add_set(gctx *c, gcpset *s, const gcpset *t)
{
	for (int32_t i = 0; i < t->n; i++)
		if (!cpset_add_raw(c, s, t->r[i].lo, t->r[i].hi))
			return false;
	return true;
}

bool
gcpset_complement(gctx *c, const gcpset *s, gcpset *out)
{
	uint32_t	next = 0;

	memset(out, 0, sizeof(*out));
	for (int32_t i = 0; i < s->n; i++)
	{
		if (s->r[i].lo > next && !gcpset_add(c, out, next, s->r[i].lo - 1))
			return false;
		next = s->r[i].hi + 1;
	}
	if (next <= G_MAX_CP && !gcpset_add(c, out, next, G_MAX_CP))
		return false;
	return true;
}

bool
gcpset_contains(const gcpset *s, uint32_t cp)
{
	int32_t		lo = 0,
				hi = s->n - 1;

	while (lo <= hi)
	{
		int32_t		mid = (lo + hi) / 2;

		if (cp < s->r[mid].lo)
			hi = mid - 1;
		else if (cp > s->r[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

bool
gcpset_remove(gctx *c, const gcpset *s, uint32_t lo, uint32_t hi, gcpset *out)
{
	memset(out, 0, sizeof(*out));
	for (int32_t i = 0; i < s->n; i++)
	{
		uint32_t	a = s->r[i].lo,
					b = s->r[i].hi;

		if (b < lo || a > hi)
		{
			if (!cpset_add_raw(c, out, a, b))
				return false;
			continue;
		}
		if (a < lo && !cpset_add_raw(c, out, a, lo - 1))
			return false;
		if (b > hi && !cpset_add_raw(c, out, hi + 1, b))
			return false;
	}
	return true;
}

/* ---------- tree builders ---------- */

static gnode *
node(gctx *c, gnode_kind k)
{
	gnode	   *g = gctx_alloc(c, sizeof(gnode));

	if (g)
		g->kind = k;
	return g;
}

gnode *
g_empty(gctx *c)
{
	return node(c, G_EMPTY);
}

gnode *
g_bytes(gctx *c, const void *bytes, size_t len)
{
	gnode	   *g;
	uint8_t    *b;

	if (len == 0)
		return g_empty(c);
	g = node(c, G_BYTES);
	b = g ? gctx_alloc(c, len) : NULL;
	if (b == NULL)
		return NULL;
	memcpy(b, bytes, len);
	g->bytes = b;
	g->len = len;
	return g;
}

gnode *
g_lit(gctx *c, const char *s)
{
	return g_bytes(c, s, strlen(s));
}

gnode *
g_byte_range(gctx *c, uint8_t lo, uint8_t hi)
{
	gnode	   *g = node(c, G_BYTE_RANGE);

	if (g)
	{
		g->lo = lo;
		g->hi = hi;
	}
	return g;
}

gnode *
g_class(gctx *c, const gcpset *set)
{
	gnode	   *g = node(c, G_CLASS);

	if (g == NULL)
		return NULL;
	if (set->n && !gcpset_add_set(c, &g->set, set))
		return NULL;
	return g;
}

gnode *
g_class_range(gctx *c, uint32_t lo, uint32_t hi)
{
	gnode	   *g = node(c, G_CLASS);

	if (g == NULL || !gcpset_add(c, &g->set, lo, hi))
		return NULL;
	return g;
}

static gnode *
g_list(gctx *c, gnode_kind k, gnode *const *kids, int32_t n)
{
	gnode	   *g;

	for (int32_t i = 0; i < n; i++)
		if (kids[i] == NULL)
			return NULL;
	if (n == 0)
		return k == G_CAT ? g_empty(c) : g_class(c, &(gcpset) {0});
	if (n == 1)
		return kids[0];
	g = node(c, k);
	if (g == NULL)
		return NULL;
	g->kids = gctx_alloc(c, sizeof(gnode *) * n);
	if (g->kids == NULL)
		return NULL;
	memcpy(g->kids, kids, sizeof(gnode *) * n);
	g->n = n;
	return g;
}

gnode *
g_cat(gctx *c, gnode *const *kids, int32_t n)
{
	return g_list(c, G_CAT, kids, n);
}

gnode *
g_alt(gctx *c, gnode *const *kids, int32_t n)
{
	return g_list(c, G_ALT, kids, n);
}

gnode *
g_cat2(gctx *c, gnode *a, gnode *b)
{
	gnode	   *k[2] = {a, b};

	return g_cat(c, k, 2);
}

gnode *
g_cat3(gctx *c, gnode *a, gnode *b, gnode *d)
{
	gnode	   *k[3] = {a, b, d};

	return g_cat(c, k, 3);
}

gnode *
g_alt2(gctx *c, gnode *a, gnode *b)
{
	gnode	   *k[2] = {a, b};

	return g_alt(c, k, 2);
}

gnode *
g_repeat(gctx *c, gnode *kid, int32_t min, int32_t max)
{
	gnode	   *g;

	if (kid == NULL)
		return NULL;
	if (min == 1 && max == 1)
		return kid;
	if (max == 0)
		return g_empty(c);
	g = node(c, G_REPEAT);
	if (g == NULL)
		return NULL;
	g->kids = gctx_alloc(c, sizeof(gnode *));
	if (g->kids == NULL)
		return NULL;
	g->kids[0] = kid;
	g->n = 1;
	g->min = min;
	g->max = max;
	return g;
}

gnode *
g_object(gctx *c, gnode *const *members, const bool *required, int32_t n)
{
	gnode	   *g;

	for (int32_t i = 0; i < n; i++)
		if (members[i] == NULL)
			return NULL;
	g = node(c, G_OBJECT);
	if (g == NULL)
		return NULL;
	if (n > 0)
	{
		g->kids = gctx_alloc(c, sizeof(gnode *) * n);
		g->required = gctx_alloc(c, sizeof(bool) * n);
		if (g->kids == NULL || g->required == NULL)
			return NULL;
		memcpy(g->kids, members, sizeof(gnode *) * n);
		memcpy(g->required, required, sizeof(bool) * n);
	}
	g->n = n;
	return g;
}

gnode *
g_dfa_node(gctx *c, const gdfa *d)
{
	gnode	   *g = node(c, G_DFA);

	if (g)
		g->dfa = d;
	return g;
}

bool
gnode_list_push(gctx *c, gnode_list *l, gnode *g)
{
	if (g == NULL)
		return false;
	if (l->n == l->cap)
	{
		int32_t		cap = l->cap ? l->cap * 2 : 8;
		gnode	  **v = gctx_alloc(c, sizeof(gnode *) * cap);

		if (v == NULL)
			return false;
		if (l->n)
			memcpy(v, l->v, sizeof(gnode *) * l->n);
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = g;
	return true;
}

/* ---------- JSON string characters ---------- */

gnode *
g_json_chars(gctx *c, const gcpset *set)
{
	gnode_list	alts = {0};
	gcpset		raw,
				t;

	/* raw: everything but controls, '"' and '\' */
	if (!gcpset_remove(c, set, 0, 0x1F, &t) || !gcpset_remove(c, &t, '"', '"', &raw) ||
		!gcpset_remove(c, &raw, '\\', '\\', &t))
		return NULL;
	if (t.n > 0 && !gnode_list_push(c, &alts, g_class(c, &t)))
		return NULL;
	for (uint32_t cp = 0; cp <= '\\'; cp++)
	{
		char		ch = (char) cp;
		char		esc[8];
		size_t		n;

		if (cp >= 0x20 && cp != '"' && cp != '\\')
			continue;
		if (!gcpset_contains(set, cp))
			continue;
		n = llm_json_write_string(&ch, 1, esc, sizeof(esc));
		if (!gnode_list_push(c, &alts, g_bytes(c, esc + 1, n - 2)))
			return NULL;
	}
	return g_alt(c, alts.v, alts.n);
}

gnode *
g_json_chars_lit(gctx *c, const uint8_t *s, size_t n)
{
	size_t		len = llm_json_write_string((const char *) s, n, NULL, 0);
	char	   *buf = gctx_alloc(c, len);

	if (buf == NULL)
		return NULL;
	llm_json_write_string((const char *) s, n, buf, len);
	return g_bytes(c, buf + 1, len - 2);
}
