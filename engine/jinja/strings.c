/*
 * strings.c — Python's str operations as the templates call them, on
 * values that keep their bytes' provenance: strip, replace, split, the
 * case maps, str.format; and the argument reading the filters and methods
 * share (positional or keyword).
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* positional argument pos or keyword name, else dflt */
jv
jarg(const jv *args, int nargs, const char **kwn, const jv *kwv, int nkw, int pos, const char *name, jv dflt)
{
	for (int k = 0; k < nkw; k++)
		if (name && strcmp(kwn[k], name) == 0)
			return kwv[k];
	if (pos >= 0 && pos < nargs)
		return args[pos];
	return dflt;
}


jv
jneed_str(jinja_ctx *c, const jnode *at, jv v, const char *what)
{
	if (v.t != JV_STR)
		jerr_fail(c, at, "%s: expected a string, got '%s'", what, jv_typename(v));
	return v;
}

bool
jstr_is_ws(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v' ||
		(ch >= 0x1c && ch <= 0x1f);
}

/* strip/lstrip/rstrip: chars NONE = whitespace */
jv
jstr_strip(jinja_ctx *c, jv s, jv chars, bool left, bool right)
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
		while (left && a < b && jstr_is_ws((unsigned char) s.s[a]))
			a++;
		while (right && b > a && jstr_is_ws((unsigned char) s.s[b - 1]))
			b--;
	}
	return jv_substr(c, s, a, b - a);
}

jv
jstr_replace(jinja_ctx *c, jv s, jv old, jv new, int64_t count)
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

jv
jstr_split(jinja_ctx *c, jv s, jv sep, int64_t maxsplit)
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

			while (i < s.n && jstr_is_ws((unsigned char) s.s[i]))
				i++;
			if (i >= s.n)
				break;
			if (maxsplit >= 0 && k >= maxsplit)
			{
				size_t		e = s.n;

				while (e > i && jstr_is_ws((unsigned char) s.s[e - 1]))
					e--;
				jl_push(c, r.l, jv_substr(c, s, i, e - i));
				break;
			}
			st = i;
			while (i < s.n && !jstr_is_ws((unsigned char) s.s[i]))
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

jv
jstr_case(jinja_ctx *c, jv s, int mode)	/* 'u' upper, 'l' lower, 't' title, 'c' capitalize */
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
jv
jstr_format(jinja_ctx *c, const jnode *at, jv s, const jv *args, int nargs, const char **kwn, const jv *kwv, int nkw)
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
