/*
 * methods.c — what a value's attribute can call (str and dict methods as
 * Python has them; list and dict mutators fail as in HF's immutable
 * sandbox) and the global functions HF gives templates: range, namespace,
 * dict, raise_exception, strftime_now.
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	jneed_str(c, at, p, ends ? "endswith" : "startswith");
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
			jv			f = jneed_str(c, at, ARG(0, "format", jv_undef("format")), "strftime_now");
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
		return jstr_split(c, self, ARG(0, "sep", jv_none()), mx.i);
	}
	if (strcmp(m, "strip") == 0)
		return jstr_strip(c, self, ARG(0, "chars", jv_none()), true, true);
	if (strcmp(m, "lstrip") == 0)
		return jstr_strip(c, self, ARG(0, "chars", jv_none()), true, false);
	if (strcmp(m, "rstrip") == 0)
		return jstr_strip(c, self, ARG(0, "chars", jv_none()), false, true);
	if (strcmp(m, "startswith") == 0 || strcmp(m, "endswith") == 0)
		return jv_bool(starts_or_ends(c, at, self, ARG(0, NULL, jv_undef("prefix")), m[0] == 'e'));
	if (strcmp(m, "replace") == 0)
		return jstr_replace(c, self, jneed_str(c, at, ARG(0, NULL, jv_none()), "replace"),
						   jneed_str(c, at, jv_tostr(c, ARG(1, NULL, jv_none())), "replace"), ARG(2, "count", jv_int(-1)).i);
	if (strcmp(m, "title") == 0)
		return jstr_case(c, self, 't');
	if (strcmp(m, "upper") == 0)
		return jstr_case(c, self, 'u');
	if (strcmp(m, "lower") == 0)
		return jstr_case(c, self, 'l');
	if (strcmp(m, "capitalize") == 0)
		return jstr_case(c, jstr_case(c, self, 'l'), 'c');
	if (strcmp(m, "format") == 0)
		return jstr_format(c, at, self, args, nargs, kwn, kwv, nkw);
	if (strcmp(m, "find") == 0 || strcmp(m, "rfind") == 0 || strcmp(m, "count") == 0)
	{
		jv			sub = jneed_str(c, at, ARG(0, NULL, jv_none()), m);
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
			jb_putv(c, &t, jneed_str(c, at, items->v[i], "join"));
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
				ok = jstr_is_ws((unsigned char) ch);
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
