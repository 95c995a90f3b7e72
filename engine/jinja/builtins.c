/*
 * builtins.c — the filters, tests, methods and global functions of the
 * subset, with jinja2's (and Python's str/dict) behaviour, and HF
 * transformers' additions: tojson (json.dumps, ensure_ascii off),
 * raise_exception, strftime_now, namespace, dict.  Lists and dicts are
 * immutable as in HF's sandbox: list.append and the like fail as there.
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const FILTERS[] = {
	"abs", "attr", "capitalize", "count", "d", "default", "dictsort", "first", "float", "format",
	"indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min",
	"reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort",
	"string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount", "e", "escape", NULL
};

static const char *const TESTS[] = {
	"boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even", "false", "float", "ge",
	"gt", "greaterthan", "in", "integer", "iterable", "le", "lower", "lessthan", "lt", "mapping",
	"ne", "none", "number", "odd", "sameas", "sequence", "string", "true", "undefined", "upper",
	"==", "!=", ">", "<", ">=", "<=", NULL
};

static bool
listed(const char *const *l, const char *name)
{
	for (int i = 0; l[i]; i++)
		if (strcmp(l[i], name) == 0)
			return true;
	return false;
}

bool
jfilter_known(const char *name)
{
	return listed(FILTERS, name);
}

bool
jtest_known(const char *name)
{
	return listed(TESTS, name);
}

/* positional argument pos or keyword name, else dflt */
static jv
arg(const jv *args, int nargs, const char **kwn, const jv *kwv, int nkw, int pos, const char *name, jv dflt)
{
	for (int k = 0; k < nkw; k++)
		if (name && strcmp(kwn[k], name) == 0)
			return kwv[k];
	if (pos >= 0 && pos < nargs)
		return args[pos];
	return dflt;
}

#define ARG(pos, name, dflt) arg(args, nargs, kwn, kwv, nkw, pos, name, dflt)

static jv
need_str(jinja_ctx *c, const jnode *at, jv v, const char *what)
{
	if (v.t != JV_STR)
		jerr_fail(c, at, "%s: expected a string, got '%s'", what, jv_typename(v));
	return v;
}

static bool
is_ws(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v' ||
		(ch >= 0x1c && ch <= 0x1f);
}

/* strip/lstrip/rstrip: chars NONE = whitespace */
static jv
strip(jinja_ctx *c, jv s, jv chars, bool left, bool right)
{
	size_t		a = 0,
				b = s.n;

	if (chars.t == JV_STR)
	{
		while (left && a < b && memchr(chars.s, s.s[a], chars.n))
			a++;
		while (right && b > a && memchr(chars.s, s.s[b - 1], chars.n))
			b--;
	}
	else
	{
		/* ASCII whitespace, plus U+00A0-free Unicode spaces are rare enough in templates */
		while (left && a < b && is_ws((unsigned char) s.s[a]))
			a++;
		while (right && b > a && is_ws((unsigned char) s.s[b - 1]))
			b--;
	}
	return jv_substr(c, s, a, b - a);
}

static jv
str_replace(jinja_ctx *c, jv s, jv old, jv new, int64_t count)
{
	jbuf		t = {0};
	jv			r;
	size_t		i = 0;
	int64_t		done = 0;

	if (old.n == 0)
	{
		/* Python inserts new between every character */
		const jlist *chars = jv_iter(c, NULL, s);

		for (size_t k = 0; k < chars->n; k++)
		{
			if (count < 0 || done < count)
			{
				jb_putv(c, &t, new);
				done++;
			}
			jb_putv(c, &t, chars->v[k]);
		}
		if (count < 0 || done < count)
			jb_putv(c, &t, new);
	}
	else
		while (i < s.n)
		{
			if ((count < 0 || done < count) && i + old.n <= s.n && memcmp(s.s + i, old.s, old.n) == 0)
			{
				jb_putv(c, &t, new);
				i += old.n;
				done++;
				continue;
			}
			jb_putv(c, &t, jv_substr(c, s, i, 1));
			i++;
		}
	r = jb_take(c, &t);
	if (t.len == 0)
		r = jv_str_static("", 0, s.trust);
	jb_free(&t);
	return r;
}

static jv
str_split(jinja_ctx *c, jv s, jv sep, int64_t maxsplit)
{
	jv			r = jv_newlist(c, 0);
	size_t		i = 0;
	int64_t		k = 0;

	if (sep.t != JV_STR)
	{
		/* runs of whitespace, none empty */
		for (;;)
		{
			size_t		st;

			while (i < s.n && is_ws((unsigned char) s.s[i]))
				i++;
			if (i >= s.n)
				break;
			if (maxsplit >= 0 && k >= maxsplit)
			{
				size_t		e = s.n;

				while (e > i && is_ws((unsigned char) s.s[e - 1]))
					e--;
				jl_push(c, r.l, jv_substr(c, s, i, e - i));
				break;
			}
			st = i;
			while (i < s.n && !is_ws((unsigned char) s.s[i]))
				i++;
			jl_push(c, r.l, jv_substr(c, s, st, i - st));
			k++;
		}
		return r;
	}
	if (sep.n == 0)
		jerr_fail(c, NULL, "empty separator");
	for (;;)
	{
		size_t		j = i;
		bool		hit = false;

		if (maxsplit < 0 || k < maxsplit)
			for (; j + sep.n <= s.n; j++)
				if (memcmp(s.s + j, sep.s, sep.n) == 0)
				{
					hit = true;
					break;
				}
		if (!hit)
		{
			jl_push(c, r.l, jv_substr(c, s, i, s.n - i));
			return r;
		}
		jl_push(c, r.l, jv_substr(c, s, i, j - i));
		i = j + sep.n;
		k++;
	}
}

static jv
case_map(jinja_ctx *c, jv s, int mode)	/* 'u' upper, 'l' lower, 't' title, 'c' capitalize */
{
	char	   *p = ja_alloc(&c->arena, s.n + 1);
	bool		word_start = true;
	jv			r;

	if (p == NULL)
		jerr_fail(c, NULL, "out of memory");
	for (size_t i = 0; i < s.n; i++)
	{
		char		ch = s.s[i];
		bool		alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
		bool		up;

		if (mode == 'u')
			up = true;
		else if (mode == 'l')
			up = false;
		else if (mode == 't')
			up = word_start;
		else
			up = i == 0;
		if (alpha)
			p[i] = up ? (char) (ch & ~0x20) : (char) (ch | 0x20);
		else
			p[i] = ch;
		if (mode == 't')
			word_start = !(alpha || (ch >= '0' && ch <= '9') || ((unsigned char) ch >= 0x80));
	}
	r = jv_str_static(p, s.n, s.trust);
	r.mask = s.mask;
	return r;
}

/* str.format with {} and {0} / {name} fields (no format specs) */
static jv
str_format(jinja_ctx *c, const jnode *at, jv s, const jv *args, int nargs, const char **kwn, const jv *kwv, int nkw)
{
	jbuf		t = {0};
	jv			r;
	int			auto_i = 0;

	for (size_t i = 0; i < s.n; i++)
	{
		if (s.s[i] == '{' && i + 1 < s.n && s.s[i + 1] == '{')
		{
			jb_put(c, &t, "{", 1, s.trust);
			i++;
			continue;
		}
		if (s.s[i] == '}' && i + 1 < s.n && s.s[i + 1] == '}')
		{
			jb_put(c, &t, "}", 1, s.trust);
			i++;
			continue;
		}
		if (s.s[i] == '{')
		{
			size_t		e = i + 1;
			jv			v = jv_undef("field");

			while (e < s.n && s.s[e] != '}')
				e++;
			if (e >= s.n)
				jerr_fail(c, at, "Single '{' encountered in format string");
			if (e == i + 1)
				v = auto_i < nargs ? args[auto_i++] : jv_undef("field");
			else if (s.s[i + 1] >= '0' && s.s[i + 1] <= '9')
			{
				int			k = atoi(s.s + i + 1);

				v = k < nargs ? args[k] : jv_undef("field");
			}
			else
				for (int k = 0; k < nkw; k++)
					if (strlen(kwn[k]) == e - i - 1 && memcmp(kwn[k], s.s + i + 1, e - i - 1) == 0)
						v = kwv[k];
			if (v.t == JV_UNDEF)
				jerr_fail(c, at, "format: missing argument");
			jb_putv(c, &t, jv_tostr(c, v));
			i = e;
			continue;
		}
		jb_put(c, &t, s.s + i, 1, s.mask ? s.mask[i] : s.trust);
	}
	r = jb_take(c, &t);
	jb_free(&t);
	return r;
}

static jv
mkfunc(jinja_ctx *c, const char *name, jv self)
{
	jv			v = {0};

	v.t = JV_FUNC;
	v.fn = ja_alloc(&c->arena, sizeof(jfunc));
	if (v.fn == NULL)
		jerr_fail(c, NULL, "out of memory");
	v.fn->name = name;
	v.fn->self = self;
	return v;
}

static const char *const STR_METHODS[] = {
	"split", "rsplit", "strip", "lstrip", "rstrip", "startswith", "endswith", "replace", "title",
	"format", "upper", "lower", "capitalize", "find", "rfind", "count", "join", "splitlines",
	"isdigit", "isspace", "isalpha", "isalnum", "isupper", "islower", NULL
};
static const char *const DICT_METHODS[] = {"get", "items", "keys", "values", NULL};
static const char *const MUTATORS[] = {
	"append", "pop", "extend", "insert", "remove", "clear", "sort", "reverse", "update", "setdefault",
	"popitem", NULL
};

jv
jmethod(jinja_ctx *c, jv self, const char *name)
{
	const char *const *l = NULL;

	if (self.t == JV_STR)
		l = STR_METHODS;
	else if (self.t == JV_DICT)
		l = DICT_METHODS;
	if (l)
		for (int i = 0; l[i]; i++)
			if (strcmp(l[i], name) == 0)
				return mkfunc(c, l[i], self);
	if (self.t == JV_LIST || self.t == JV_DICT)
		for (int i = 0; MUTATORS[i]; i++)
			if (strcmp(MUTATORS[i], name) == 0 && (self.t == JV_DICT || i < 8))
				return mkfunc(c, MUTATORS[i], self);
	return jv_undef(name);
}

jv
jglobal(jinja_ctx *c, const char *name)
{
	static const char *const G[] = {"range", "namespace", "raise_exception", "strftime_now", "dict", NULL};

	for (int i = 0; G[i]; i++)
		if (strcmp(G[i], name) == 0)
			return mkfunc(c, G[i], jv_undef(NULL));
	return jv_undef(name);
}

static bool
starts_or_ends(jinja_ctx *c, const jnode *at, jv s, jv p, bool ends)
{
	if (p.t == JV_LIST)
	{
		for (size_t i = 0; i < p.l->n; i++)
			if (starts_or_ends(c, at, s, p.l->v[i], ends))
				return true;
		return false;
	}
	need_str(c, at, p, ends ? "endswith" : "startswith");
	if (p.n > s.n)
		return false;
	return memcmp(ends ? s.s + s.n - p.n : s.s, p.s, p.n) == 0;
}

jv
jcall_func(jinja_ctx *c, const jnode *at, const jfunc *fn, const jv *args, int nargs,
		   const char **kwn, const jv *kwv, int nkw)
{
	const char *m = fn->name;
	jv			self = fn->self;

	if (self.t == JV_UNDEF)
	{
		/* globals */
		if (strcmp(m, "raise_exception") == 0)
		{
			jv			msg = jv_tostr(c, ARG(0, "message", jv_str_static("", 0, false)));

			jerr_raise(c, msg.s, msg.n);
		}
		if (strcmp(m, "range") == 0)
		{
			int64_t		a = 0,
						b,
						st = 1;
			jv			r = jv_newlist(c, 0);

			for (int i = 0; i < nargs; i++)
				if (args[i].t != JV_INT)
					jerr_fail(c, at, "range() integer argument expected, got %s", jv_typename(args[i]));
			if (nargs == 1)
				b = args[0].i;
			else if (nargs >= 2)
			{
				a = args[0].i;
				b = args[1].i;
				if (nargs >= 3)
					st = args[2].i;
			}
			else
				jerr_fail(c, at, "range expected at least 1 argument, got 0");
			if (st == 0)
				jerr_fail(c, at, "range() arg 3 must not be zero");
			if ((st > 0 ? (b - a) / st : (a - b) / -st) > 100000)
				jerr_fail(c, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
			for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
				jl_push(c, r.l, jv_int(i));
			return r;
		}
		if (strcmp(m, "namespace") == 0 || strcmp(m, "dict") == 0)
		{
			jv			r = jv_newdict(c);

			for (int i = 0; i < nargs; i++)
				if (args[i].t == JV_DICT)
					for (size_t k = 0; k < args[i].d->n; k++)
						jd_set(c, r.d, args[i].d->k[k], args[i].d->v[k]);
			for (int k = 0; k < nkw; k++)
				jd_set(c, r.d, jv_str_static(kwn[k], strlen(kwn[k]), true), kwv[k]);
			if (m[0] == 'n')
				r.t = JV_NS;
			return r;
		}
		if (strcmp(m, "strftime_now") == 0)
		{
			jv			f = need_str(c, at, ARG(0, "format", jv_undef("format")), "strftime_now");
			char		fmt[256],
						buf[512];
			struct tm	tm;
			size_t		k;

			if (c->now_set)
				tm = c->now;
			else
			{
				time_t		now = time(NULL);

				localtime_r(&now, &tm);
			}
			snprintf(fmt, sizeof(fmt), "%.*s", (int) f.n, f.s);
			k = strftime(buf, sizeof(buf), fmt, &tm);
			return jv_str(c, buf, k, false);
		}
		jerr_fail(c, at, "'%s' is not callable", m);
	}
	for (int i = 0; MUTATORS[i]; i++)
		if (strcmp(MUTATORS[i], m) == 0)
			jerr_fail(c, at, "access to attribute '%s' of '%s' object is unsafe.", m, jv_typename(self));
	if (self.t == JV_DICT)
	{
		if (strcmp(m, "get") == 0)
		{
			const jv   *v = jd_getv(self.d, ARG(0, "key", jv_none()));

			return v ? *v : ARG(1, "default", jv_none());
		}
		{
			jv			r = jv_newlist(c, self.d->n);

			for (size_t i = 0; i < self.d->n; i++)
			{
				if (m[0] == 'i')
				{
					jv			pair = jv_newlist(c, 2);

					jl_push(c, pair.l, self.d->k[i]);
					jl_push(c, pair.l, self.d->v[i]);
					pair.b = true;
					jl_push(c, r.l, pair);
				}
				else
					jl_push(c, r.l, m[0] == 'k' ? self.d->k[i] : self.d->v[i]);
			}
			return r;
		}
	}
	/* string methods */
	if (strcmp(m, "split") == 0 || strcmp(m, "rsplit") == 0)
	{
		jv			mx = ARG(1, "maxsplit", jv_int(-1));

		if (m[0] == 'r' && mx.i >= 0)
			jerr_fail(c, at, "unsupported: rsplit with maxsplit");
		return str_split(c, self, ARG(0, "sep", jv_none()), mx.i);
	}
	if (strcmp(m, "strip") == 0)
		return strip(c, self, ARG(0, "chars", jv_none()), true, true);
	if (strcmp(m, "lstrip") == 0)
		return strip(c, self, ARG(0, "chars", jv_none()), true, false);
	if (strcmp(m, "rstrip") == 0)
		return strip(c, self, ARG(0, "chars", jv_none()), false, true);
	if (strcmp(m, "startswith") == 0 || strcmp(m, "endswith") == 0)
		return jv_bool(starts_or_ends(c, at, self, ARG(0, NULL, jv_undef("prefix")), m[0] == 'e'));
	if (strcmp(m, "replace") == 0)
		return str_replace(c, self, need_str(c, at, ARG(0, NULL, jv_none()), "replace"),
						   need_str(c, at, jv_tostr(c, ARG(1, NULL, jv_none())), "replace"), ARG(2, "count", jv_int(-1)).i);
	if (strcmp(m, "title") == 0)
		return case_map(c, self, 't');
	if (strcmp(m, "upper") == 0)
		return case_map(c, self, 'u');
	if (strcmp(m, "lower") == 0)
		return case_map(c, self, 'l');
	if (strcmp(m, "capitalize") == 0)
		return case_map(c, case_map(c, self, 'l'), 'c');
	if (strcmp(m, "format") == 0)
		return str_format(c, at, self, args, nargs, kwn, kwv, nkw);
	if (strcmp(m, "find") == 0 || strcmp(m, "rfind") == 0 || strcmp(m, "count") == 0)
	{
		jv			sub = need_str(c, at, ARG(0, NULL, jv_none()), m);
		int64_t		found = -1,
					cnt = 0;

		for (size_t i = 0; i + sub.n <= self.n; i++)
			if (memcmp(self.s + i, sub.s, sub.n) == 0)
			{
				if (found < 0 || m[0] == 'r')
					found = (int64_t) ju_len(self.s, i);
				cnt++;
				if (m[0] == 'c' && sub.n > 0)
					i += sub.n - 1;
			}
		return jv_int(m[0] == 'c' ? cnt : found);
	}
	if (strcmp(m, "join") == 0)
	{
		const jlist *items = jv_iter(c, at, ARG(0, NULL, jv_undef("iterable")));
		jbuf		t = {0};
		jv			r;

		for (size_t i = 0; i < items->n; i++)
		{
			if (i)
				jb_putv(c, &t, self);
			jb_putv(c, &t, need_str(c, at, items->v[i], "join"));
		}
		r = jb_take(c, &t);
		jb_free(&t);
		return r;
	}
	if (strcmp(m, "splitlines") == 0)
	{
		jv			r = jv_newlist(c, 0);
		size_t		st = 0;

		for (size_t i = 0; i < self.n; i++)
			if (self.s[i] == '\n' || self.s[i] == '\r')
			{
				jl_push(c, r.l, jv_substr(c, self, st, i - st));
				if (self.s[i] == '\r' && i + 1 < self.n && self.s[i + 1] == '\n')
					i++;
				st = i + 1;
			}
		if (st < self.n)
			jl_push(c, r.l, jv_substr(c, self, st, self.n - st));
		return r;
	}
	if (strncmp(m, "is", 2) == 0)
	{
		bool		ok = self.n > 0;

		for (size_t i = 0; i < self.n && ok; i++)
		{
			char		ch = self.s[i];

			if (strcmp(m, "isdigit") == 0)
				ok = ch >= '0' && ch <= '9';
			else if (strcmp(m, "isspace") == 0)
				ok = is_ws((unsigned char) ch);
			else if (strcmp(m, "isalpha") == 0)
				ok = (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z';
			else if (strcmp(m, "isalnum") == 0)
				ok = ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') || (ch >= '0' && ch <= '9');
			else if (strcmp(m, "isupper") == 0)
				ok = !(ch >= 'a' && ch <= 'z');
			else
				ok = !(ch >= 'A' && ch <= 'Z');
		}
		return jv_bool(ok);
	}
	jerr_fail(c, at, "unsupported method '%s'", m);
}

/* ---- tests ---- */

bool
jtest(jinja_ctx *c, const jnode *at, const char *name, jv v, const jv *args, int nargs)
{
	jv			a = nargs > 0 ? args[0] : jv_undef("argument");

	if (strcmp(name, "defined") == 0)
		return v.t != JV_UNDEF;
	if (strcmp(name, "undefined") == 0)
		return v.t == JV_UNDEF;
	if (strcmp(name, "none") == 0)
		return v.t == JV_NONE;
	if (strcmp(name, "boolean") == 0)
		return v.t == JV_BOOL;
	if (strcmp(name, "true") == 0)
		return v.t == JV_BOOL && v.b;
	if (strcmp(name, "false") == 0)
		return v.t == JV_BOOL && !v.b;
	if (strcmp(name, "integer") == 0)
		return v.t == JV_INT;
	if (strcmp(name, "float") == 0)
		return v.t == JV_FLOAT;
	if (strcmp(name, "number") == 0)
		return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
	if (strcmp(name, "string") == 0)
		return v.t == JV_STR;
	if (strcmp(name, "mapping") == 0)
		return v.t == JV_DICT;
	if (strcmp(name, "iterable") == 0)
		return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT;
	if (strcmp(name, "sequence") == 0)
		return v.t == JV_STR || (v.t == JV_LIST && v.i != 1) || v.t == JV_DICT;
	if (strcmp(name, "callable") == 0)
		return v.t == JV_MACRO || v.t == JV_FUNC;
	if (strcmp(name, "lower") == 0 || strcmp(name, "upper") == 0)
	{
		bool		cased = false;

		if (v.t != JV_STR)
			return false;
		for (size_t i = 0; i < v.n; i++)
		{
			char		ch = v.s[i];

			if (name[0] == 'l' ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z'))
				return false;
			cased = cased || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z');
		}
		return cased;
	}
	if (strcmp(name, "odd") == 0 || strcmp(name, "even") == 0)
	{
		if (v.t != JV_INT)
			jerr_fail(c, at, "test %s: expected an integer", name);
		return (v.i % 2 != 0) == (name[0] == 'o');
	}
	if (strcmp(name, "divisibleby") == 0)
		return a.t == JV_INT && a.i != 0 && v.t == JV_INT && v.i % a.i == 0;
	if (strcmp(name, "equalto") == 0 || strcmp(name, "eq") == 0 || strcmp(name, "==") == 0)
		return jv_equal(v, a);
	if (strcmp(name, "ne") == 0 || strcmp(name, "!=") == 0)
		return !jv_equal(v, a);
	if (strcmp(name, "sameas") == 0)
		return v.t == a.t && (v.t == JV_NONE || v.t == JV_UNDEF || jv_equal(v, a));
	if (strcmp(name, "in") == 0)
	{
		if (a.t == JV_STR && v.t == JV_STR)
		{
			for (size_t i = 0; i + v.n <= a.n; i++)
				if (memcmp(a.s + i, v.s, v.n) == 0)
					return true;
			return false;
		}
		if (a.t == JV_LIST)
		{
			for (size_t i = 0; i < a.l->n; i++)
				if (jv_equal(a.l->v[i], v))
					return true;
			return false;
		}
		if (a.t == JV_DICT)
			return jd_getv(a.d, v) != NULL;
		jerr_fail(c, at, "test in: not a container");
	}
	{
		int			r = jv_compare(c, at, v, a);

		if (strcmp(name, "lt") == 0 || strcmp(name, "lessthan") == 0 || strcmp(name, "<") == 0)
			return r < 0;
		if (strcmp(name, "le") == 0 || strcmp(name, "<=") == 0)
			return r <= 0;
		if (strcmp(name, "gt") == 0 || strcmp(name, "greaterthan") == 0 || strcmp(name, ">") == 0)
			return r > 0;
		return r >= 0;
	}
}

/* ---- filters ---- */

static int
cmp_values(jinja_ctx *c, const jnode *at, jv a, jv b, bool case_sensitive)
{
	if (!case_sensitive && a.t == JV_STR && b.t == JV_STR)
		return jv_compare(c, at, case_map(c, a, 'l'), case_map(c, b, 'l'));
	return jv_compare(c, at, a, b);
}

/* attribute "a.b" of an item, as jinja2's make_attrgetter (dots and integer parts) */
static jv
attr_path(jinja_ctx *c, const jnode *at, jv item, jv attr)
{
	const char *s;
	size_t		n,
				i = 0;

	if (attr.t == JV_INT)
		return jv_getitem(c, at, item, attr);
	attr = need_str(c, at, attr, "attribute");
	s = attr.s;
	n = attr.n;
	while (i <= n)
	{
		size_t		e = i;
		jv			key;
		bool		digits = true;

		while (e < n && s[e] != '.')
		{
			digits = digits && s[e] >= '0' && s[e] <= '9';
			e++;
		}
		key = digits && e > i ? jv_int(strtoll(s + i, NULL, 10)) : jv_str(c, s + i, e - i, true);
		item = jv_getitem(c, at, item, key);
		i = e + 1;
	}
	return item;
}

static void
sort_values(jinja_ctx *c, const jnode *at, jv *v, size_t n, const jv *keys, bool reverse, bool cs)
{
	/* insertion sort: stable, and the lists are short */
	jv		   *k = (jv *) keys;

	for (size_t i = 1; i < n; i++)
	{
		jv			x = v[i],
					kx = k[i];
		size_t		j = i;

		while (j > 0)
		{
			int			r = cmp_values(c, at, k[j - 1], kx, cs);

			if (reverse ? r >= 0 : r <= 0)
				break;
			v[j] = v[j - 1];
			k[j] = k[j - 1];
			j--;
		}
		v[j] = x;
		k[j] = kx;
	}
}

static jv
select_filter(jinja_ctx *c, const jnode *at, const char *name, jv v, const jv *args, int nargs)
{
	bool		by_attr = strstr(name, "attr") != NULL;
	bool		keep_true = name[0] == 's';
	const jlist *items;
	jv			r = jv_newlist(c, 0);
	int			first_test = by_attr ? 1 : 0;

	r.i = 1;
	/* jinja2 selects from a false value (None, empty) nothing, without iterating it */
	if (!jv_truthy(v))
		return r;
	items = jv_iter(c, at, v);
	for (size_t i = 0; i < items->n; i++)
	{
		jv			x = items->v[i];
		bool		ok;

		if (by_attr)
		{
			if (nargs < 1)
				jerr_fail(c, at, "%s: missing attribute", name);
			x = attr_path(c, at, x, args[0]);
		}
		if (nargs > first_test)
		{
			jv			t = need_str(c, at, args[first_test], name);
			char		tn[64];

			snprintf(tn, sizeof(tn), "%.*s", (int) t.n, t.s);
			if (!jtest_known(tn))
				jerr_fail(c, at, "No test named '%s'.", tn);
			ok = jtest(c, at, tn, x, args + first_test + 1, nargs - first_test - 1);
		}
		else
			ok = jv_truthy(x);
		if (ok == keep_true)
			jl_push(c, r.l, items->v[i]);
	}
	return r;
}

jv
jfilter(jinja_ctx *c, const jnode *at, const char *name, jv v, const jv *args, int nargs,
		const char **kwn, const jv *kwv, int nkw)
{
	if (strcmp(name, "safe") == 0 || strcmp(name, "e") == 0 || strcmp(name, "escape") == 0)
	{
		if (name[0] == 's')
		{
			jv			m = v.t == JV_STR ? v : jv_tostr(c, v);

			m.b = true;			/* Markup */
			return m;
		}
		jerr_fail(c, at, "unsupported filter '%s'", name);
	}
	if (strcmp(name, "default") == 0 || strcmp(name, "d") == 0)
	{
		bool		boolean = jv_truthy(ARG(1, "boolean", jv_bool(false)));

		if (v.t == JV_UNDEF || (boolean && !jv_truthy(v)))
			return ARG(0, "default_value", jv_str_static("", 0, true));
		return v;
	}
	if (strcmp(name, "length") == 0 || strcmp(name, "count") == 0)
	{
		if (v.t == JV_STR)
			return jv_int((int64_t) ju_len(v.s, v.n));
		if (v.t == JV_LIST && v.i == 1)
			jerr_fail(c, at, "object of type 'generator' has no len()");
		if (v.t == JV_LIST)
			return jv_int((int64_t) v.l->n);
		if (v.t == JV_DICT || v.t == JV_NS)
			return jv_int((int64_t) v.d->n);
		if (v.t == JV_UNDEF)
			return jv_int(0);
		jerr_fail(c, at, "object of type '%s' has no len()", jv_typename(v));
	}
	if (strcmp(name, "string") == 0)
		return jv_tostr(c, v);
	if (strcmp(name, "trim") == 0)
		return strip(c, need_str(c, at, jv_tostr(c, v), "trim"), ARG(0, "chars", jv_none()), true, true);
	if (strcmp(name, "upper") == 0 || strcmp(name, "lower") == 0 || strcmp(name, "title") == 0 ||
		strcmp(name, "capitalize") == 0)
	{
		jv			s = jv_tostr(c, v);

		return name[0] == 'c' ? case_map(c, case_map(c, s, 'l'), 'c') : case_map(c, s, name[0]);
	}
	if (strcmp(name, "replace") == 0)
		return str_replace(c, jv_tostr(c, v), jv_tostr(c, ARG(0, "old", jv_none())), jv_tostr(c, ARG(1, "new", jv_none())),
						   ARG(2, "count", jv_none()).t == JV_INT ? ARG(2, "count", jv_none()).i : -1);
	if (strcmp(name, "tojson") == 0)
	{
		jbuf		t = {0};
		jv			r;
		jv			ind = ARG(1, "indent", jv_none());
		jv			seps = ARG(2, "separators", jv_none());
		const char *isep = ind.t == JV_INT ? "," : ", ",
				   *ksep = ": ";
		char		ib[16],
					kb[16];

		if (seps.t == JV_LIST && seps.l->n == 2 && seps.l->v[0].t == JV_STR && seps.l->v[1].t == JV_STR)
		{
			snprintf(ib, sizeof(ib), "%.*s", (int) seps.l->v[0].n, seps.l->v[0].s);
			snprintf(kb, sizeof(kb), "%.*s", (int) seps.l->v[1].n, seps.l->v[1].s);
			isep = ib;
			ksep = kb;
		}
		jtojson(c, at, &t, v, ind.t == JV_INT ? (int) ind.i : -1, 0, isep, ksep,
				jv_truthy(ARG(3, "sort_keys", jv_bool(false))), jv_truthy(ARG(0, "ensure_ascii", jv_bool(false))));
		r = jb_take(c, &t);
		jb_free(&t);
		r.trust = 0;
		r.mask = NULL;
		return r;
	}
	if (strcmp(name, "join") == 0)
	{
		const jlist *items = jv_iter(c, at, v);
		jv			sep = jv_tostr(c, ARG(0, "d", jv_str_static("", 0, true)));
		jv			attr = ARG(1, "attribute", jv_none());
		jbuf		t = {0};
		jv			r;

		for (size_t i = 0; i < items->n; i++)
		{
			jv			x = items->v[i];

			if (i)
				jb_putv(c, &t, sep);
			if (attr.t != JV_NONE)
				x = attr_path(c, at, x, attr);
			jb_putv(c, &t, jv_tostr(c, x));
		}
		r = jb_take(c, &t);
		jb_free(&t);
		return r;
	}
	if (strcmp(name, "first") == 0 || strcmp(name, "last") == 0)
	{
		const jlist *items;

		if (name[0] == 'l' && v.t == JV_LIST && v.i == 1)
			jerr_fail(c, at, "'generator' object is not reversible");
		items = jv_iter(c, at, v);

		if (items->n == 0)
			return jv_undef(name);
		return name[0] == 'f' ? items->v[0] : items->v[items->n - 1];
	}
	if (strcmp(name, "list") == 0)
	{
		const jlist *items = jv_iter(c, at, v);
		jv			r = jv_newlist(c, items->n);

		for (size_t i = 0; i < items->n; i++)
			jl_push(c, r.l, items->v[i]);
		return r;
	}
	if (strcmp(name, "reverse") == 0)
	{
		const jlist *items = jv_iter(c, at, v);
		jv			r = jv_newlist(c, items->n);

		for (size_t i = items->n; i > 0; i--)
			jl_push(c, r.l, items->v[i - 1]);
		if (v.t == JV_STR)
		{
			jbuf		t = {0};

			for (size_t i = 0; i < r.l->n; i++)
				jb_putv(c, &t, r.l->v[i]);
			r = jb_take(c, &t);
			jb_free(&t);
		}
		return r;
	}
	if (strcmp(name, "items") == 0)
	{
		jv			r;

		if (v.t == JV_UNDEF)
			r = jv_newlist(c, 0);
		else if (v.t != JV_DICT)
			jerr_fail(c, at, "Can only get item pairs from a mapping.");
		else
			r = jcall_func(c, at, jmethod(c, v, "items").fn, NULL, 0, NULL, NULL, 0);
		r.i = 1;
		return r;
	}
	if (strcmp(name, "dictsort") == 0)
	{
		jv			pairs;
		jv			keys;
		bool		cs = jv_truthy(ARG(0, "case_sensitive", jv_bool(false)));
		jv			by = ARG(1, "by", jv_str_static("key", 3, true));
		bool		rev = jv_truthy(ARG(2, "reverse", jv_bool(false)));

		if (v.t != JV_DICT)
			jerr_fail(c, at, "You can only sort by either \"key\" or \"value\"");
		pairs = jcall_func(c, at, jmethod(c, v, "items").fn, NULL, 0, NULL, NULL, 0);
		keys = jv_newlist(c, pairs.l->n);
		for (size_t i = 0; i < pairs.l->n; i++)
			jl_push(c, keys.l, pairs.l->v[i].l->v[jv_is_str(by, "value") ? 1 : 0]);
		sort_values(c, at, pairs.l->v, pairs.l->n, keys.l->v, rev, cs);
		return pairs;
	}
	if (strcmp(name, "sort") == 0 || strcmp(name, "unique") == 0 || strcmp(name, "min") == 0 ||
		strcmp(name, "max") == 0)
	{
		const jlist *items = jv_iter(c, at, v);
		bool		cs = jv_truthy(ARG(name[0] == 's' ? 1 : 0, "case_sensitive", jv_bool(false)));
		jv			attr = ARG(name[0] == 's' ? 2 : 1, "attribute", jv_none());
		bool		rev = name[0] == 's' && jv_truthy(ARG(0, "reverse", jv_bool(false)));
		jv			r = jv_newlist(c, items->n);
		jv			keys = jv_newlist(c, items->n);

		for (size_t i = 0; i < items->n; i++)
		{
			jv			k = attr.t != JV_NONE ? attr_path(c, at, items->v[i], attr) : items->v[i];

			if (name[0] == 'u')
			{
				bool		seen = false;
				jv			kk = !cs && k.t == JV_STR ? case_map(c, k, 'l') : k;

				for (size_t j = 0; j < keys.l->n && !seen; j++)
					seen = jv_equal(keys.l->v[j], kk);
				if (seen)
					continue;
				k = kk;
			}
			jl_push(c, r.l, items->v[i]);
			jl_push(c, keys.l, k);
		}
		if (name[0] == 'u')
		{
			r.i = 1;
			return r;
		}
		sort_values(c, at, r.l->v, r.l->n, keys.l->v, rev, cs);
		if (name[1] == 'i')
			return r.l->n ? r.l->v[0] : jv_undef("min");
		if (name[1] == 'a')
			return r.l->n ? r.l->v[r.l->n - 1] : jv_undef("max");
		return r;
	}
	if (strcmp(name, "map") == 0)
	{
		const jlist *items = jv_truthy(v) ? jv_iter(c, at, v) : jv_newlist(c, 0).l;
		jv			r = jv_newlist(c, items->n);

		r.i = 1;
		jv			attr = ARG(-1, "attribute", jv_undef("attribute"));
		jv			dflt = ARG(-1, "default", jv_undef("default"));

		for (size_t i = 0; i < items->n; i++)
		{
			jv			x;

			if (attr.t != JV_UNDEF)
			{
				x = attr_path(c, at, items->v[i], attr);
				if (x.t == JV_UNDEF && dflt.t != JV_UNDEF)
					x = dflt;
			}
			else
			{
				jv			f = need_str(c, at, ARG(0, NULL, jv_undef("filter")), "map");
				char		fn[64];

				snprintf(fn, sizeof(fn), "%.*s", (int) f.n, f.s);
				if (!jfilter_known(fn))
					jerr_fail(c, at, "No filter named '%s'.", fn);
				x = jfilter(c, at, fn, items->v[i], args + 1, nargs > 0 ? nargs - 1 : 0, kwn, kwv, nkw);
			}
			jl_push(c, r.l, x);
		}
		return r;
	}
	if (strcmp(name, "select") == 0 || strcmp(name, "reject") == 0 || strcmp(name, "selectattr") == 0 ||
		strcmp(name, "rejectattr") == 0)
		return select_filter(c, at, name, v, args, nargs);
	if (strcmp(name, "int") == 0)
	{
		if (v.t == JV_INT)
			return v;
		if (v.t == JV_FLOAT)
			return jv_int((int64_t) v.f);
		if (v.t == JV_BOOL)
			return jv_int(v.b);
		if (v.t == JV_STR)
		{
			char		buf[64];
			char	   *end;
			long long	x;

			snprintf(buf, sizeof(buf), "%.*s", (int) v.n, v.s);
			x = strtoll(buf, &end, 10);
			if (end != buf && *end == '\0')
				return jv_int(x);
			{
				double		d = strtod(buf, &end);

				if (end != buf && *end == '\0')
					return jv_int((int64_t) d);
			}
		}
		return ARG(0, "default", jv_int(0));
	}
	if (strcmp(name, "float") == 0)
	{
		if (v.t == JV_FLOAT)
			return v;
		if (v.t == JV_INT || v.t == JV_BOOL)
			return jv_float((double) (v.t == JV_INT ? v.i : v.b));
		if (v.t == JV_STR)
		{
			char		buf[64];
			char	   *end;
			double		d;

			snprintf(buf, sizeof(buf), "%.*s", (int) v.n, v.s);
			d = strtod(buf, &end);
			if (end != buf && *end == '\0')
				return jv_float(d);
		}
		return ARG(0, "default", jv_float(0));
	}
	if (strcmp(name, "abs") == 0)
	{
		if (v.t == JV_INT)
			return jv_int(v.i < 0 ? -v.i : v.i);
		if (v.t == JV_FLOAT)
			return jv_float(v.f < 0 ? -v.f : v.f);
		jerr_fail(c, at, "bad operand type for abs(): '%s'", jv_typename(v));
	}
	if (strcmp(name, "round") == 0)
		jerr_fail(c, at, "unsupported filter 'round'");
	if (strcmp(name, "sum") == 0)
	{
		const jlist *items = jv_iter(c, at, v);
		jv			acc = ARG(1, "start", jv_int(0));
		jv			attr = ARG(0, "attribute", jv_none());
		for (size_t i = 0; i < items->n; i++)
		{
			jv			x = attr.t != JV_NONE ? attr_path(c, at, items->v[i], attr) : items->v[i];

			if (!((x.t == JV_INT || x.t == JV_FLOAT) && (acc.t == JV_INT || acc.t == JV_FLOAT)))
				jerr_fail(c, at, "sum: unsupported operand types");
			acc = acc.t == JV_INT && x.t == JV_INT ? jv_int(acc.i + x.i) :
				jv_float((acc.t == JV_INT ? (double) acc.i : acc.f) + (x.t == JV_INT ? (double) x.i : x.f));
		}
		return acc;
	}
	if (strcmp(name, "attr") == 0)
	{
		jv			a = need_str(c, at, ARG(0, "name", jv_none()), "attr");

		return jv_getattr(c, at, v, jv_str(c, a.s, a.n, true).s);
	}
	if (strcmp(name, "wordcount") == 0)
		return jv_int((int64_t) str_split(c, jv_tostr(c, v), jv_none(), -1).l->n);
	if (strcmp(name, "format") == 0)
	{
		jv			tup = jv_newlist(c, (size_t) nargs);

		for (int i = 0; i < nargs; i++)
			jl_push(c, tup.l, args[i]);
		tup.b = true;
		{
			/* "%s" % tuple, as jinja2's format filter */
			jbuf		t = {0};
			jv			s = need_str(c, at, v, "format"),
						r;
			size_t		ai = 0;

			for (size_t i = 0; i < s.n; i++)
			{
				if (s.s[i] == '%' && i + 1 < s.n)
				{
					i++;
					if (s.s[i] == '%')
						jb_put(c, &t, "%", 1, s.trust);
					else if (ai < tup.l->n)
						jb_putv(c, &t, jv_tostr(c, tup.l->v[ai++]));
					continue;
				}
				jb_put(c, &t, s.s + i, 1, s.mask ? s.mask[i] : s.trust);
			}
			r = jb_take(c, &t);
			jb_free(&t);
			return r;
		}
	}
	if (strcmp(name, "indent") == 0)
	{
		jv			s = jv_tostr(c, v);
		jv			w = ARG(0, "width", jv_int(4));
		bool		first = jv_truthy(ARG(1, "first", jv_bool(false)));
		bool		blank = jv_truthy(ARG(2, "blank", jv_bool(false)));
		jv			pad;
		jbuf		t = {0};
		jv			r;
		size_t		st = 0;
		bool		line0 = true;

		if (w.t == JV_STR)
			pad = w;
		else
		{
			char	   *p = ja_alloc(&c->arena, (size_t) (w.i > 0 ? w.i : 0) + 1);

			if (p == NULL)
				jerr_fail(c, at, "out of memory");
			memset(p, ' ', (size_t) (w.i > 0 ? w.i : 0));
			pad = jv_str_static(p, (size_t) (w.i > 0 ? w.i : 0), true);
		}
		/* lines split on "\n" (jinja2 splits with splitlines and joins with "\n") */
		for (size_t i = 0; i <= s.n; i++)
		{
			if (i == s.n || s.s[i] == '\n')
			{
				jv			line = jv_substr(c, s, st, i - st);

				if (!line0)
					jb_put(c, &t, "\n", 1, s.mask ? s.mask[st - 1] : s.trust);
				if (line0 ? first : (blank || line.n > 0))
					jb_putv(c, &t, pad);
				jb_putv(c, &t, line);
				line0 = false;
				st = i + 1;
			}
		}
		r = jb_take(c, &t);
		jb_free(&t);
		return r;
	}
	jerr_fail(c, at, "unsupported filter '%s'", name);
}
