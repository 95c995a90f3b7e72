/*
 * filters.c — the filters and tests of the subset, with jinja2's behaviour
 * (select/map on a false value give nothing, generators where jinja2 gives
 * them) and HF transformers' tojson (json.dumps, ensure_ascii off).
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
		return jv_compare(c, at, jstr_case(c, a, 'l'), jstr_case(c, b, 'l'));
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
	attr = jneed_str(c, at, attr, "attribute");
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
			jv			t = jneed_str(c, at, args[first_test], name);
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
		return jstr_strip(c, jneed_str(c, at, jv_tostr(c, v), "trim"), ARG(0, "chars", jv_none()), true, true);
	if (strcmp(name, "upper") == 0 || strcmp(name, "lower") == 0 || strcmp(name, "title") == 0 ||
		strcmp(name, "capitalize") == 0)
	{
		jv			s = jv_tostr(c, v);

		return name[0] == 'c' ? jstr_case(c, jstr_case(c, s, 'l'), 'c') : jstr_case(c, s, name[0]);
	}
	if (strcmp(name, "replace") == 0)
		return jstr_replace(c, jv_tostr(c, v), jv_tostr(c, ARG(0, "old", jv_none())), jv_tostr(c, ARG(1, "new", jv_none())),
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
				jv			kk = !cs && k.t == JV_STR ? jstr_case(c, k, 'l') : k;

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
				jv			f = jneed_str(c, at, ARG(0, NULL, jv_undef("filter")), "map");
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
		jv			a = jneed_str(c, at, ARG(0, "name", jv_none()), "attr");

		return jv_getattr(c, at, v, jv_str(c, a.s, a.n, true).s);
	}
	if (strcmp(name, "wordcount") == 0)
		return jv_int((int64_t) jstr_split(c, jv_tostr(c, v), jv_none(), -1).l->n);
	if (strcmp(name, "format") == 0)
	{
		jv			tup = jv_newlist(c, (size_t) nargs);

		for (int i = 0; i < nargs; i++)
			jl_push(c, tup.l, args[i]);
		tup.b = true;
		{
			/* "%s" % tuple, as jinja2's format filter */
			jbuf		t = {0};
			jv			s = jneed_str(c, at, v, "format"),
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
