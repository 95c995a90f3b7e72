/*
 * value.c — the interpreter's values with Python's semantics where the
 * templates see them: truthiness, ==, ordering, str() and repr(), string
 * indexing by code point, attribute lookup (an attribute first, then an
 * item, as jinja2's sandbox does for "a.b"; the reverse for "a[b]").  All
 * allocation is in the render's arena.
 */
#include "jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JA_BLOCK 65536

void *
ja_alloc(jarena *a, size_t n)
{
	jarena_block *b = a->head;
	void	   *p;

	if (n > JINJA_MAX_BYTES)
	{
		a->over = true;
		return NULL;
	}
	n = (n + 15) & ~(size_t) 15;
	if (b == NULL || b->used + n > b->cap)
	{
		size_t		cap = n > JA_BLOCK ? n : JA_BLOCK;

		if (a->bytes + sizeof(jarena_block) + cap > JINJA_MAX_BYTES)
		{
			a->over = true;
			return NULL;
		}
		b = malloc(sizeof(jarena_block) + cap);
		if (b == NULL)
			return NULL;
		a->bytes += sizeof(jarena_block) + cap;
		b->cap = cap;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	p = b->data + b->used;
	b->used += n;
	memset(p, 0, n);
	return p;
}

void
ja_free(jarena *a)
{
	while (a->head)
	{
		jarena_block *n = a->head->next;

		free(a->head);
		a->head = n;
	}
	a->bytes = 0;
	a->over = false;
}

static void *
c_alloc(jinja_ctx *c, size_t n)
{
	void	   *p = ja_alloc(&c->arena, n);

	if (p == NULL)
		jerr_fail(c, NULL, "out of memory");
	return p;
}

jv
jv_undef(const char *name)
{
	jv			v = {0};

	v.t = JV_UNDEF;
	v.s = name;
	return v;
}

jv
jv_none(void)
{
	jv			v = {0};

	v.t = JV_NONE;
	return v;
}

jv
jv_bool(bool b)
{
	jv			v = {0};

	v.t = JV_BOOL;
	v.b = b;
	return v;
}

jv
jv_int(int64_t i)
{
	jv			v = {0};

	v.t = JV_INT;
	v.i = i;
	return v;
}

jv
jv_float(double f)
{
	jv			v = {0};

	v.t = JV_FLOAT;
	v.f = f;
	return v;
}

jv
jv_str_static(const char *s, size_t n, bool trusted)
{
	jv			v = {0};

	v.t = JV_STR;
	v.s = s;
	v.n = n;
	v.trust = trusted ? 1 : 0;
	return v;
}

jv
jv_str(jinja_ctx *c, const char *s, size_t n, bool trusted)
{
	char	   *p = c_alloc(c, n + 1);

	memcpy(p, s, n);
	return jv_str_static(p, n, trusted);
}

jv
jv_newlist(jinja_ctx *c, size_t cap)
{
	jv			v = {0};

	v.t = JV_LIST;
	v.l = c_alloc(c, sizeof(jlist));
	if (cap)
	{
		v.l->v = c_alloc(c, sizeof(jv) * cap);
		v.l->cap = cap;
	}
	return v;
}

void
jl_push(jinja_ctx *c, jlist *l, jv v)
{
	if (l->n == l->cap)
	{
		size_t		cap = l->cap ? l->cap * 2 : 8;
		jv		   *p = c_alloc(c, sizeof(jv) * cap);

		if (l->n)
			memcpy(p, l->v, sizeof(jv) * l->n);
		l->v = p;
		l->cap = cap;
	}
	l->v[l->n++] = v;
}

jv
jv_newdict(jinja_ctx *c)
{
	jv			v = {0};

	v.t = JV_DICT;
	v.d = c_alloc(c, sizeof(jdict));
	return v;
}

const jv *
jd_getv(const jdict *d, jv key)
{
	for (size_t i = 0; i < d->n; i++)
		if (jv_equal(d->k[i], key))
			return &d->v[i];
	return NULL;
}

const jv *
jd_get(const jdict *d, const char *key, size_t n)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->k[i].t == JV_STR && d->k[i].n == n && memcmp(d->k[i].s, key, n) == 0)
			return &d->v[i];
	return NULL;
}

void
jd_set(jinja_ctx *c, jdict *d, jv key, jv val)
{
	for (size_t i = 0; i < d->n; i++)
		if (jv_equal(d->k[i], key))
		{
			d->v[i] = val;
			return;
		}
	if (d->n == d->cap)
	{
		size_t		cap = d->cap ? d->cap * 2 : 8;
		jv		   *k = c_alloc(c, sizeof(jv) * cap);
		jv		   *v = c_alloc(c, sizeof(jv) * cap);

		if (d->n)
		{
			memcpy(k, d->k, sizeof(jv) * d->n);
			memcpy(v, d->v, sizeof(jv) * d->n);
		}
		d->k = k;
		d->v = v;
		d->cap = cap;
	}
	d->k[d->n] = key;
	d->v[d->n] = val;
	d->n++;
}

bool
jv_truthy(jv v)
{
	switch (v.t)
	{
		case JV_UNDEF:
		case JV_NONE:
			return false;
		case JV_BOOL:
			return v.b;
		case JV_INT:
			return v.i != 0;
		case JV_FLOAT:
			return v.f != 0.0;
		case JV_STR:
			return v.n > 0;
		case JV_LIST:
			return v.i == 1 || v.l->n > 0;	/* a generator is always true */
		case JV_DICT:
			return v.d->n > 0;
		default:
			return true;
	}
}

static bool
is_num(jv v)
{
	return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}

static double
num(jv v)
{
	return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double) v.i : (double) v.b;
}

bool
jv_equal(jv a, jv b)
{
	if (is_num(a) && is_num(b))
	{
		if (a.t != JV_FLOAT && b.t != JV_FLOAT)
			return (a.t == JV_INT ? a.i : a.b) == (b.t == JV_INT ? b.i : b.b);
		return num(a) == num(b);
	}
	if (a.t != b.t)
		return false;
	switch (a.t)
	{
		case JV_UNDEF:
		case JV_NONE:
			return true;
		case JV_STR:
			return a.n == b.n && memcmp(a.s, b.s, a.n) == 0;
		case JV_LIST:
			if (a.l->n != b.l->n)
				return false;
			for (size_t i = 0; i < a.l->n; i++)
				if (!jv_equal(a.l->v[i], b.l->v[i]))
					return false;
			return true;
		case JV_DICT:
			if (a.d->n != b.d->n)
				return false;
			for (size_t i = 0; i < a.d->n; i++)
			{
				const jv   *o = jd_getv(b.d, a.d->k[i]);

				if (o == NULL || !jv_equal(a.d->v[i], *o))
					return false;
			}
			return true;
		default:
			return a.d == b.d;
	}
}

const char *
jv_typename(jv v)
{
	static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list",
	"dict", "Namespace", "Macro", "function", "LoopContext"};

	if (v.t == JV_LIST && v.i == 1)
		return "generator";
	if (v.t == JV_LIST && v.b)
		return "tuple";
	return names[v.t];
}

int
jv_compare(jinja_ctx *c, const jnode *at, jv a, jv b)
{
	if (is_num(a) && is_num(b))
	{
		double		x = num(a),
					y = num(b);

		if (a.t == JV_INT && b.t == JV_INT)
			return a.i < b.i ? -1 : a.i > b.i;
		return x < y ? -1 : x > y;
	}
	if (a.t == JV_STR && b.t == JV_STR)
	{
		size_t		m = a.n < b.n ? a.n : b.n;
		int			r = memcmp(a.s, b.s, m);

		if (r != 0)
			return r < 0 ? -1 : 1;
		return a.n < b.n ? -1 : a.n > b.n;
	}
	if (a.t == JV_LIST && b.t == JV_LIST)
	{
		for (size_t i = 0; i < a.l->n && i < b.l->n; i++)
		{
			int			r = jv_compare(c, at, a.l->v[i], b.l->v[i]);

			if (r != 0)
				return r;
		}
		return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
	}
	jerr_fail(c, at, "'<' not supported between instances of '%s' and '%s'", jv_typename(a), jv_typename(b));
}

bool
jv_is_str(jv v, const char *lit)
{
	return v.t == JV_STR && v.n == strlen(lit) && memcmp(v.s, lit, v.n) == 0;
}

/* ---- buffers ---- */

/*
 * Buffers live in the render's arena (grown by copying): a render that
 * fails half-way (longjmp) leaves nothing to free but the arena.
 */
static void
jb_grow(jinja_ctx *c, jbuf *b, size_t more)
{
	if (b->len + more + 1 > b->cap)
	{
		size_t		cap = (b->len + more + 1) * 2;
		char	   *p = ja_alloc(&c->arena, cap);
		uint8_t    *m = ja_alloc(&c->arena, cap);

		if (p == NULL || m == NULL)
			jerr_fail(c, NULL, "out of memory");
		if (b->len)
		{
			memcpy(p, b->p, b->len);
			memcpy(m, b->mask, b->len);
		}
		b->p = p;
		b->mask = m;
		b->cap = cap;
	}
}

void
jb_put(jinja_ctx *c, jbuf *b, const char *s, size_t n, uint8_t trust)
{
	if (n == 0)
		return;
	jb_grow(c, b, n);
	memcpy(b->p + b->len, s, n);
	memset(b->mask + b->len, trust, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void
jb_putv(jinja_ctx *c, jbuf *b, jv s)
{
	if (s.mask == NULL)
	{
		jb_put(c, b, s.s, s.n, s.trust);
		return;
	}
	jb_grow(c, b, s.n);
	memcpy(b->p + b->len, s.s, s.n);
	memcpy(b->mask + b->len, s.mask, s.n);
	b->len += s.n;
	b->p[b->len] = '\0';
}

/* The buffer's bytes as a string value (one trust when uniform). */
jv
jb_take(jinja_ctx *c, jbuf *b)
{
	jv			v = jv_str(c, b->p ? b->p : "", b->len, true);
	bool		uniform = true;

	for (size_t i = 1; i < b->len && uniform; i++)
		uniform = b->mask[i] == b->mask[0];
	if (b->len > 0 && uniform)
		v.trust = b->mask[0];
	else if (b->len > 0)
	{
		uint8_t    *m = c_alloc(c, b->len);

		memcpy(m, b->mask, b->len);
		v.mask = m;
	}
	return v;
}

void
jb_free(jbuf *b)
{
	/* the arena owns the bytes */
	memset(b, 0, sizeof(*b));
}

jv
jv_concat(jinja_ctx *c, jv a, jv b)
{
	jbuf		t = {0};
	jv			r;

	if (a.n == 0)
		return b;
	if (b.n == 0)
		return a;
	if (a.mask == NULL && b.mask == NULL && a.trust == b.trust)
	{
		char	   *p = c_alloc(c, a.n + b.n + 1);

		memcpy(p, a.s, a.n);
		memcpy(p + a.n, b.s, b.n);
		return jv_str_static(p, a.n + b.n, a.trust);
	}
	jb_putv(c, &t, a);
	jb_putv(c, &t, b);
	r = jb_take(c, &t);
	jb_free(&t);
	return r;
}

jv
jv_substr(jinja_ctx *c, jv s, size_t off, size_t n)
{
	jv			r = s;

	(void) c;
	r.s = s.s + off;
	r.n = n;
	if (s.mask)
		r.mask = s.mask + off;
	return r;
}

/* ---- UTF-8 ---- */

size_t
ju_len(const char *s, size_t n)
{
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
		if (((unsigned char) s[i] & 0xC0) != 0x80)
			k++;
	return k;
}

size_t
ju_offset(const char *s, size_t n, size_t cp)
{
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
		if (((unsigned char) s[i] & 0xC0) != 0x80)
		{
			if (k == cp)
				return i;
			k++;
		}
	return n;
}

/* ---- str() and repr() ---- */

static void
put_float(jinja_ctx *c, jbuf *b, double f)
{
	char		buf[64];

	if (isnan(f))
		snprintf(buf, sizeof(buf), "nan");
	else if (isinf(f))
		snprintf(buf, sizeof(buf), f > 0 ? "inf" : "-inf");
	else
	{
		/* Python's repr: the shortest text that reads back, ".0" when integral */
		for (int prec = 1; prec <= 17; prec++)
		{
			snprintf(buf, sizeof(buf), "%.*g", prec, f);
			if (strtod(buf, NULL) == f)
				break;
		}
		if (strchr(buf, 'e') != NULL)
		{
			/* 1e+20 -> 1e+20 as Python; exponents keep two digits */
			double		a = fabs(f);

			if (a >= 1e-4 && a < 1e16)
			{
				int			prec;

				for (prec = 0; prec <= 17; prec++)
				{
					snprintf(buf, sizeof(buf), "%.*f", prec, f);
					if (strtod(buf, NULL) == f)
						break;
				}
			}
		}
		if (strchr(buf, '.') == NULL && strchr(buf, 'e') == NULL && strchr(buf, 'n') == NULL)
			strcat(buf, ".0");
	}
	jb_put(c, b, buf, strlen(buf), 0);
}

static void
put_int(jinja_ctx *c, jbuf *b, int64_t i)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%lld", (long long) i);
	jb_put(c, b, buf, strlen(buf), 0);
}

static void
repr_str(jinja_ctx *c, jbuf *b, jv s)
{
	char		q = '\'';

	if (memchr(s.s, '\'', s.n) != NULL && memchr(s.s, '"', s.n) == NULL)
		q = '"';
	jb_put(c, b, &q, 1, 0);
	for (size_t i = 0; i < s.n; i++)
	{
		unsigned char ch = (unsigned char) s.s[i];
		char		esc[8];

		if (ch == '\\' || ch == (unsigned char) q)
		{
			esc[0] = '\\';
			esc[1] = (char) ch;
			jb_put(c, b, esc, 2, 0);
		}
		else if (ch == '\n')
			jb_put(c, b, "\\n", 2, 0);
		else if (ch == '\t')
			jb_put(c, b, "\\t", 2, 0);
		else if (ch == '\r')
			jb_put(c, b, "\\r", 2, 0);
		else if (ch < 0x20 || ch == 0x7f)
		{
			snprintf(esc, sizeof(esc), "\\x%02x", ch);
			jb_put(c, b, esc, 4, 0);
		}
		else
			jb_put(c, b, s.s + i, 1, 0);
	}
	jb_put(c, b, &q, 1, 0);
}

void
jv_repr(jinja_ctx *c, jbuf *b, jv v)
{
	switch (v.t)
	{
		case JV_STR:
			repr_str(c, b, v);
			return;
		case JV_LIST:
			jb_put(c, b, v.b ? "(" : "[", 1, 0);
			for (size_t i = 0; i < v.l->n; i++)
			{
				if (i)
					jb_put(c, b, ", ", 2, 0);
				jv_repr(c, b, v.l->v[i]);
			}
			if (v.b && v.l->n == 1)
				jb_put(c, b, ",", 1, 0);
			jb_put(c, b, v.b ? ")" : "]", 1, 0);
			return;
		case JV_DICT:
			jb_put(c, b, "{", 1, 0);
			for (size_t i = 0; i < v.d->n; i++)
			{
				if (i)
					jb_put(c, b, ", ", 2, 0);
				jv_repr(c, b, v.d->k[i]);
				jb_put(c, b, ": ", 2, 0);
				jv_repr(c, b, v.d->v[i]);
			}
			jb_put(c, b, "}", 1, 0);
			return;
		default:
			{
				jv			s = jv_tostr(c, v);

				jb_putv(c, b, s);
			}
	}
}

jv
jv_tostr(jinja_ctx *c, jv v)
{
	jbuf		b = {0};
	jv			r;

	switch (v.t)
	{
		case JV_STR:
			return v;
		case JV_UNDEF:
			return jv_str_static("", 0, false);
		case JV_NONE:
			return jv_str_static("None", 4, false);
		case JV_BOOL:
			return v.b ? jv_str_static("True", 4, false) : jv_str_static("False", 5, false);
		case JV_INT:
			put_int(c, &b, v.i);
			break;
		case JV_FLOAT:
			put_float(c, &b, v.f);
			break;
		case JV_LIST:
			if (v.i == 1)
				jerr_fail(c, NULL, "a generator has no text of its own (add |list)");
			jv_repr(c, &b, v);
			break;
		case JV_DICT:
			jv_repr(c, &b, v);
			break;
		case JV_NS:
			jb_put(c, &b, "<Namespace>", 11, 0);
			break;
		default:
			jb_put(c, &b, "<object>", 8, 0);
	}
	r = jb_take(c, &b);
	jb_free(&b);
	return r;
}

/* ---- iteration and lookup ---- */

const jlist *
jv_iter(jinja_ctx *c, const jnode *at, jv v)
{
	jv			l;

	switch (v.t)
	{
		case JV_LIST:
			if (v.i == 1)
			{
				/* a generator yields its items once */
				if (v.l->consumed)
				{
					l = jv_newlist(c, 0);
					return l.l;
				}
				v.l->consumed = true;
			}
			return v.l;
		case JV_UNDEF:
			l = jv_newlist(c, 0);
			return l.l;
		case JV_DICT:
			l = jv_newlist(c, v.d->n);
			for (size_t i = 0; i < v.d->n; i++)
				jl_push(c, l.l, v.d->k[i]);
			return l.l;
		case JV_STR:
			l = jv_newlist(c, v.n);
			for (size_t i = 0; i < v.n;)
			{
				size_t		k = i + 1;

				while (k < v.n && ((unsigned char) v.s[k] & 0xC0) == 0x80)
					k++;
				jl_push(c, l.l, jv_substr(c, v, i, k - i));
				i = k;
			}
			return l.l;
		default:
			jerr_fail(c, at, "'%s' object is not iterable", jv_typename(v));
	}
}

static jv
loop_attr(jinja_ctx *c, const jnode *at, const jloop *lp, const char *name)
{
	size_t		n = lp->items->n;

	if (strcmp(name, "index0") == 0)
		return jv_int((int64_t) lp->i);
	if (strcmp(name, "index") == 0)
		return jv_int((int64_t) lp->i + 1);
	if (strcmp(name, "revindex") == 0)
		return jv_int((int64_t) (n - lp->i));
	if (strcmp(name, "revindex0") == 0)
		return jv_int((int64_t) (n - lp->i - 1));
	if (strcmp(name, "first") == 0)
		return jv_bool(lp->i == 0);
	if (strcmp(name, "last") == 0)
		return jv_bool(lp->i + 1 == n);
	if (strcmp(name, "length") == 0)
		return jv_int((int64_t) n);
	if (strcmp(name, "depth") == 0)
		return jv_int(lp->depth);
	if (strcmp(name, "depth0") == 0)
		return jv_int(lp->depth - 1);
	if (strcmp(name, "previtem") == 0)
		return lp->i > 0 ? lp->items->v[lp->i - 1] : jv_undef("previtem");
	if (strcmp(name, "nextitem") == 0)
		return lp->i + 1 < n ? lp->items->v[lp->i + 1] : jv_undef("nextitem");
	jerr_fail(c, at, "unsupported loop attribute '%s'", name);
}

static jv
item_lookup(jinja_ctx *c, const jnode *at, jv obj, jv key, bool *found)
{
	*found = true;
	if (obj.t == JV_DICT || obj.t == JV_NS)
	{
		const jv   *v = jd_getv(obj.d, key);

		if (v)
			return *v;
	}
	else if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL))
	{
		int64_t		i = key.t == JV_INT ? key.i : key.b;
		int64_t		n = obj.t == JV_LIST ? (int64_t) obj.l->n : (int64_t) ju_len(obj.s, obj.n);

		if (i < 0)
			i += n;
		if (i >= 0 && i < n)
		{
			size_t		o,
						e;

			if (obj.t == JV_LIST)
				return obj.l->v[i];
			o = ju_offset(obj.s, obj.n, (size_t) i);
			e = ju_offset(obj.s, obj.n, (size_t) i + 1);
			return jv_substr(c, obj, o, e - o);
		}
	}
	else if (obj.t == JV_UNDEF)
		jerr_fail(c, at, "'%s' is undefined", obj.s ? obj.s : "value");
	*found = false;
	return jv_undef(key.t == JV_STR ? key.s : "item");
}

jv
jv_getattr(jinja_ctx *c, const jnode *at, jv obj, const char *name)
{
	bool		found;
	jv			r;

	if (obj.t == JV_UNDEF)
		jerr_fail(c, at, "'%s' is undefined", obj.s ? obj.s : "value");
	if (obj.t == JV_LOOP)
		return loop_attr(c, at, obj.loop, name);
	r = jmethod(c, obj, name);
	if (r.t != JV_UNDEF)
		return r;
	r = item_lookup(c, at, obj, jv_str_static(name, strlen(name), true), &found);
	if (!found)
		r.s = name;
	return r;
}

jv
jv_getitem(jinja_ctx *c, const jnode *at, jv obj, jv key)
{
	bool		found;
	jv			r;

	if (obj.t == JV_LOOP && key.t == JV_STR)
		return jv_getattr(c, at, obj, key.s);
	r = item_lookup(c, at, obj, key, &found);
	if (found)
		return r;
	if (key.t == JV_STR && obj.t != JV_UNDEF)
	{
		r = jmethod(c, obj, key.s);
		if (r.t != JV_UNDEF)
			return r;
	}
	return jv_undef(key.t == JV_STR ? key.s : "item");
}

/* ---- the public value constructors (jinja.h) ---- */

static jinja_value *
boxed(jinja_ctx *c, jv v)
{
	jv		   *p = ja_alloc(&c->arena, sizeof(jv));

	if (p)
		*p = v;
	return p;
}

jinja_value *
jinja_none(jinja_ctx *c)
{
	return boxed(c, jv_none());
}

jinja_value *
jinja_bool(jinja_ctx *c, bool b)
{
	return boxed(c, jv_bool(b));
}

jinja_value *
jinja_int(jinja_ctx *c, int64_t i)
{
	return boxed(c, jv_int(i));
}

jinja_value *
jinja_float(jinja_ctx *c, double d)
{
	return boxed(c, jv_float(d));
}

jinja_value *
jinja_string(jinja_ctx *c, const char *s, size_t len, bool trusted)
{
	char	   *p = ja_alloc(&c->arena, len + 1);

	if (p == NULL)
		return NULL;
	memcpy(p, s, len);
	return boxed(c, jv_str_static(p, len, trusted));
}

jinja_value *
jinja_list(jinja_ctx *c)
{
	jlist	   *l = ja_alloc(&c->arena, sizeof(jlist));
	jv			v = {0};

	if (l == NULL)
		return NULL;
	v.t = JV_LIST;
	v.l = l;
	return boxed(c, v);
}

/* outside a render there is no error exit: grow by hand */
static int
grow(jinja_ctx *c, jv **a, jv **b, size_t n, size_t *cap)
{
	size_t		nc = *cap ? *cap * 2 : 8;
	jv		   *na = ja_alloc(&c->arena, sizeof(jv) * nc);
	jv		   *nb = b ? ja_alloc(&c->arena, sizeof(jv) * nc) : NULL;

	if (na == NULL || (b && nb == NULL))
		return -1;
	if (n)
	{
		memcpy(na, *a, sizeof(jv) * n);
		if (b)
			memcpy(nb, *b, sizeof(jv) * n);
	}
	*a = na;
	if (b)
		*b = nb;
	*cap = nc;
	return 0;
}

int
jinja_list_push(jinja_ctx *c, jinja_value *list, const jinja_value *item)
{
	jlist	   *l;

	if (list == NULL || item == NULL || list->t != JV_LIST)
		return -1;
	l = list->l;
	if (l->n == l->cap && grow(c, &l->v, NULL, l->n, &l->cap) != 0)
		return -1;
	l->v[l->n++] = *item;
	return 0;
}

jinja_value *
jinja_dict(jinja_ctx *c)
{
	jdict	   *d = ja_alloc(&c->arena, sizeof(jdict));
	jv			v = {0};

	if (d == NULL)
		return NULL;
	v.t = JV_DICT;
	v.d = d;
	return boxed(c, v);
}

int
jinja_dict_set(jinja_ctx *c, jinja_value *dict, const char *key, const jinja_value *val)
{
	jdict	   *d;
	char	   *k;

	if (dict == NULL || val == NULL || dict->t != JV_DICT)
		return -1;
	d = dict->d;
	for (size_t i = 0; i < d->n; i++)
		if (jv_is_str(d->k[i], key))
		{
			d->v[i] = *val;
			return 0;
		}
	if (d->n == d->cap && grow(c, &d->k, &d->v, d->n, &d->cap) != 0)
		return -1;
	k = ja_alloc(&c->arena, strlen(key) + 1);
	if (k == NULL)
		return -1;
	strcpy(k, key);
	d->k[d->n] = jv_str_static(k, strlen(k), true);
	d->v[d->n++] = *val;
	return 0;
}
