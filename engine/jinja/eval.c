/*
 * eval.c — running the AST: statements write to a buffer, expressions give
 * values.  Scoping as jinja2: a for loop's body and a macro's body are
 * frames of their own (an assignment inside does not leak out, hence
 * namespace()); if has none; a macro sees the template's globals.  Errors
 * longjmp to jinja_render, which reports them.
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 200

void
jerr_fail(jinja_ctx *c, const jnode *at, const char *fmt, ...)
{
	va_list		ap;
	int			k = 0;

	if (c->arena.over)
	{
		/* whatever ran out, the cause is the limit, not the machine */
		if (c->err && c->errlen)
			snprintf(c->err, c->errlen, "the render needs more than %zu MiB (the template memory limit)",
					 JINJA_MAX_BYTES >> 20);
		c->status = JINJA_LIMIT;
		longjmp(*c->jmp, 1);
	}
	if (c->err && c->errlen)
	{
		if (at)
			k = snprintf(c->err, c->errlen, "%d:%d: ", at->line, at->col);
		if (k >= 0 && (size_t) k < c->errlen)
		{
			va_start(ap, fmt);
			vsnprintf(c->err + k, c->errlen - (size_t) k, fmt, ap);
			va_end(ap);
		}
	}
	c->status = JINJA_FAILED;
	longjmp(*c->jmp, 1);
}

void
jstep_limit(jinja_ctx *c, const jnode *at)
{
	if (c->err && c->errlen)
		snprintf(c->err, c->errlen, "%d:%d: the render runs more than %d statements and expressions "
				 "(the template work limit)", at ? at->line : 0, at ? at->col : 0, JINJA_MAX_STEPS);
	c->status = JINJA_LIMIT;
	longjmp(*c->jmp, 1);
}

void
jerr_raise(jinja_ctx *c, const char *msg, size_t n)
{
	if (c->err && c->errlen)
		snprintf(c->err, c->errlen, "%.*s", (int) n, msg);
	c->status = JINJA_RAISED;
	longjmp(*c->jmp, 1);
}

/* ---- frames ---- */

static jv *
frame_find(jframe *f, const char *name)
{
	for (; f; f = f->parent)
		for (int i = f->n - 1; i >= 0; i--)
			if (strcmp(f->vars[i].name, name) == 0)
				return &f->vars[i].v;
	return NULL;
}

static void
frame_set(jinja_ctx *c, jframe *f, const char *name, jv v)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->vars[i].name, name) == 0)
		{
			f->vars[i].v = v;
			return;
		}
	if (f->n == f->cap)
	{
		int			cap = f->cap ? f->cap * 2 : 8;
		jvar	   *p = ja_alloc(&c->arena, sizeof(jvar) * (size_t) cap);

		if (p == NULL)
			jerr_fail(c, NULL, "out of memory");
		if (f->n)
			memcpy(p, f->vars, sizeof(jvar) * (size_t) f->n);
		f->vars = p;
		f->cap = cap;
	}
	f->vars[f->n].name = name;
	f->vars[f->n].v = v;
	f->n++;
}

/* ---- expressions ---- */

static jv eval_call(jinja_ctx *c, const jnode *n, jframe *f);

static jv ev(jinja_ctx *c, const jnode *n, jframe *f);
static void ex(jinja_ctx *c, const jnode *n, jbuf *out, jframe *f);

static void
eval_args(jinja_ctx *c, const jnode *n, int from, jframe *f, jv *args, int *nargs,
		  const char **kwn, jv *kwv, int *nkw)
{
	*nargs = 0;
	*nkw = 0;
	for (int i = from; i < n->n_kids; i++)
	{
		const jnode *k = n->kids[i];

		if (k->kind == JN_KWARG)
		{
			kwn[*nkw] = k->name;
			kwv[(*nkw)++] = ev(c, k->a, f);
		}
		else
			args[(*nargs)++] = ev(c, k, f);
	}
}

/* markupsafe's escape: & < > " ' as entities (bytes keep their trust) */
static jv
html_escape(jinja_ctx *c, jv s)
{
	jbuf		t = {0};
	jv			r;

	for (size_t i = 0; i < s.n; i++)
	{
		const char *e = NULL;
		uint8_t		tr = s.mask ? s.mask[i] : s.trust;

		switch (s.s[i])
		{
			case '&': e = "&amp;"; break;
			case '<': e = "&lt;"; break;
			case '>': e = "&gt;"; break;
			case '"': e = "&#34;"; break;
			case '\'': e = "&#39;"; break;
		}
		if (e)
			jb_put(c, &t, e, strlen(e), tr);
		else
			jb_put(c, &t, s.s + i, 1, tr);
	}
	r = jb_take(c, &t);
	if (t.len == 0)
		r = jv_str_static("", 0, s.trust);
	jb_free(&t);
	return r;
}

static jv
arith(jinja_ctx *c, const jnode *n, jv a, jv b)
{
	int			op = n->op;
	bool		ints = (a.t == JV_INT || a.t == JV_BOOL) && (b.t == JV_INT || b.t == JV_BOOL);
	bool		nums = (a.t == JV_INT || a.t == JV_FLOAT || a.t == JV_BOOL) &&
		(b.t == JV_INT || b.t == JV_FLOAT || b.t == JV_BOOL);

	if (op == '~')
		return jv_concat(c, jv_tostr(c, a), jv_tostr(c, b));
	if (op == '+')
	{
		if (a.t == JV_STR && b.t == JV_STR && a.b != b.b)
		{
			/* Markup + str (or str + Markup): the plain one HTML-escaped, the result Markup */
			jv			r = a.b ? jv_concat(c, a, html_escape(c, b)) : jv_concat(c, html_escape(c, a), b);

			r.b = true;
			return r;
		}
		if (a.t == JV_STR && b.t == JV_STR)
		{
			jv			r = jv_concat(c, a, b);

			r.b = a.b;
			return r;
		}
		if (a.t == JV_LIST && b.t == JV_LIST)
		{
			jv			r = jv_newlist(c, a.l->n + b.l->n);

			for (size_t i = 0; i < a.l->n; i++)
				jl_push(c, r.l, a.l->v[i]);
			for (size_t i = 0; i < b.l->n; i++)
				jl_push(c, r.l, b.l->v[i]);
			return r;
		}
	}
	if (op == '*' && ((a.t == JV_STR && b.t == JV_INT) || (a.t == JV_INT && b.t == JV_STR)))
	{
		jv			s = a.t == JV_STR ? a : b;
		int64_t		k = a.t == JV_INT ? a.i : b.i;
		jbuf		t = {0};
		jv			r;

		for (int64_t i = 0; i < k; i++)
			jb_putv(c, &t, s);
		r = jb_take(c, &t);
		jb_free(&t);
		return r;
	}
	if (op == '%' && a.t == JV_STR)
	{
		/* printf-style formatting: %s and %d with one value or a tuple */
		jbuf		t = {0};
		jv			r;
		size_t		ai = 0;
		const jlist *vals = b.t == JV_LIST && b.b ? b.l : NULL;

		for (size_t i = 0; i < a.n; i++)
		{
			if (a.s[i] == '%' && i + 1 < a.n)
			{
				char		f = a.s[++i];
				jv			v;

				if (f == '%')
				{
					jb_put(c, &t, "%", 1, a.trust);
					continue;
				}
				if (f != 's' && f != 'd' && f != 'r')
					jerr_fail(c, n, "unsupported format character '%c'", f);
				v = vals ? (ai < vals->n ? vals->v[ai++] : jv_undef("arg")) : b;
				if (f == 'd' && v.t == JV_FLOAT)
					v = jv_int((int64_t) v.f);
				if (f == 'r')
				{
					jv_repr(c, &t, v);
					continue;
				}
				jb_putv(c, &t, jv_tostr(c, v));
				continue;
			}
			jb_put(c, &t, a.s + i, 1, a.mask ? a.mask[i] : a.trust);
		}
		r = jb_take(c, &t);
		jb_free(&t);
		return r;
	}
	if (!nums)
		jerr_fail(c, n, "unsupported operand type(s) for %c: '%s' and '%s'", op == 'F' ? '/' : op,
				  jv_typename(a), jv_typename(b));
	{
		double		x = a.t == JV_FLOAT ? a.f : (double) (a.t == JV_INT ? a.i : a.b);
		double		y = b.t == JV_FLOAT ? b.f : (double) (b.t == JV_INT ? b.i : b.b);
		int64_t		i = a.t == JV_INT ? a.i : a.b,
					j = b.t == JV_INT ? b.i : b.b;

		switch (op)
		{
			case '+':
				return ints ? jv_int(i + j) : jv_float(x + y);
			case '-':
				return ints ? jv_int(i - j) : jv_float(x - y);
			case '*':
				return ints ? jv_int(i * j) : jv_float(x * y);
			case '/':
				if (y == 0)
					jerr_fail(c, n, "division by zero");
				return jv_float(x / y);
			case 'F':
				if (y == 0)
					jerr_fail(c, n, "integer division or modulo by zero");
				if (ints)
				{
					int64_t		q = i / j;

					if ((i % j != 0) && ((i < 0) != (j < 0)))
						q--;
					return jv_int(q);
				}
				return jv_float(__builtin_floor(x / y));
			case '%':
				if (y == 0)
					jerr_fail(c, n, "integer division or modulo by zero");
				if (ints)
				{
					int64_t		m = i % j;

					if (m != 0 && ((m < 0) != (j < 0)))
						m += j;
					return jv_int(m);
				}
				return jv_float(x - y * __builtin_floor(x / y));
			case 'P':
				if (ints && j >= 0)
				{
					int64_t		r = 1;

					for (int64_t k = 0; k < j; k++)
						r *= i;
					return jv_int(r);
				}
				return jv_float(__builtin_pow(x, y));
		}
	}
	jerr_fail(c, n, "unsupported operator");
}

static bool
contains(jinja_ctx *c, const jnode *n, jv needle, jv hay)
{
	if (hay.t == JV_STR)
	{
		if (needle.t != JV_STR)
			jerr_fail(c, n, "'in <string>' requires string as left operand, not %s", jv_typename(needle));
		if (needle.n == 0)
			return true;
		for (size_t i = 0; i + needle.n <= hay.n; i++)
			if (memcmp(hay.s + i, needle.s, needle.n) == 0)
				return true;
		return false;
	}
	if (hay.t == JV_LIST)
	{
		for (size_t i = 0; i < hay.l->n; i++)
			if (jv_equal(hay.l->v[i], needle))
				return true;
		return false;
	}
	if (hay.t == JV_DICT || hay.t == JV_NS)
		return jd_getv(hay.d, needle) != NULL;
	if (hay.t == JV_UNDEF)
		return false;			/* jinja2's Undefined iterates as empty */
	jerr_fail(c, n, "argument of type '%s' is not iterable", jv_typename(hay));
}

static int64_t
slice_index(jinja_ctx *c, const jnode *n, jv v, int64_t dflt)
{
	if (v.t == JV_NONE || v.t == JV_UNDEF)
		return dflt;
	if (v.t != JV_INT)
		jerr_fail(c, n, "slice indices must be integers or None");
	return v.i;
}

static jv
eval_slice(jinja_ctx *c, const jnode *n, jv obj, jframe *f)
{
	jv			a = n->a ? ev(c, n->a, f) : jv_none();
	jv			b = n->b ? ev(c, n->b, f) : jv_none();
	jv			s = n->c ? ev(c, n->c, f) : jv_none();
	int64_t		step = slice_index(c, n, s, 1);
	int64_t		len,
				start,
				stop;
	jv			r;

	if (obj.t != JV_LIST && obj.t != JV_STR)
		jerr_fail(c, n, "'%s' object is not subscriptable", jv_typename(obj));
	if (step == 0)
		jerr_fail(c, n, "slice step cannot be zero");
	len = obj.t == JV_LIST ? (int64_t) obj.l->n : (int64_t) ju_len(obj.s, obj.n);
	/* Python's PySlice_AdjustIndices */
	if (step > 0)
	{
		start = slice_index(c, n, a, 0);
		stop = slice_index(c, n, b, len);
		if (start < 0 && (start += len) < 0)
			start = 0;
		if (start > len)
			start = len;
		if (stop < 0 && (stop += len) < 0)
			stop = 0;
		if (stop > len)
			stop = len;
	}
	else
	{
		start = slice_index(c, n, a, len - 1);
		stop = slice_index(c, n, b, -1 - len);
		if (start < 0 && (start += len) < 0)
			start = -1;
		if (start >= len)
			start = len - 1;
		if (stop < 0 && (stop += len) < 0)
			stop = -1;
		if (stop >= len)
			stop = len - 1;
	}
	if (obj.t == JV_STR && step == 1)
	{
		size_t		o,
					e;

		if (stop < start)
			stop = start;
		o = ju_offset(obj.s, obj.n, (size_t) start);
		e = ju_offset(obj.s, obj.n, (size_t) stop);
		return jv_substr(c, obj, o, e - o);
	}
	{
		const jlist *items = jv_iter(c, n, obj);
		jbuf		t = {0};

		r = jv_newlist(c, 0);
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
		{
			if (obj.t == JV_LIST)
				jl_push(c, r.l, items->v[i]);
			else
				jb_putv(c, &t, items->v[i]);
		}
		if (obj.t == JV_STR)
		{
			r = jb_take(c, &t);
			if (t.len == 0)
				r = jv_str_static("", 0, obj.trust);
			jb_free(&t);
		}
	}
	return r;
}

static jv
ev(jinja_ctx *c, const jnode *n, jframe *f)
{
	JSTEP(c, n);
	switch (n->kind)
	{
		case JN_CONST:
			return n->value;
		case JN_NAME:
			{
				jv		   *v;

				if (n->name == NULL)
					return frame_find(f, "\x01body") ? *frame_find(f, "\x01body") : jv_undef("body");
				v = frame_find(f, n->name);
				if (v)
					return *v;
				{
					jv			g = jglobal(c, n->name);

					if (g.t != JV_UNDEF)
						return g;
				}
				return jv_undef(n->name);
			}
		case JN_ATTR:
			return jv_getattr(c, n, ev(c, n->a, f), n->name);
		case JN_ITEM:
			{
				jv			obj = ev(c, n->a, f);

				if (n->b->kind == JN_SLICE)
					return eval_slice(c, n->b, obj, f);
				return jv_getitem(c, n, obj, ev(c, n->b, f));
			}
		case JN_CALL:
			return eval_call(c, n, f);
		case JN_FILTER:
			{
				jv			v;

				if (n->unknown)
					jerr_fail(c, n, "No filter named '%s' found.", n->name);
				v = ev(c, n->a, f);
				jv			args[16],
							kwv[16];
				const char *kwn[16];
				int			na,
							nk;

				if (n->n_kids > 16)
					jerr_fail(c, n, "too many arguments");
				eval_args(c, n, 0, f, args, &na, kwn, kwv, &nk);
				return jfilter(c, n, n->name, v, args, na, kwn, kwv, nk);
			}
		case JN_TEST:
			{
				jv			v;

				if (n->unknown)
					jerr_fail(c, n, "No test named '%s' found.", n->name);
				v = ev(c, n->a, f);
				jv			args[16],
							kwv[16];
				const char *kwn[16];
				int			na,
							nk;
				bool		r;

				if (n->n_kids > 16)
					jerr_fail(c, n, "too many arguments");
				eval_args(c, n, 0, f, args, &na, kwn, kwv, &nk);
				r = jtest(c, n, n->name, v, args, na);
				return jv_bool(n->negate ? !r : r);
			}
		case JN_BINOP:
			return arith(c, n, ev(c, n->a, f), ev(c, n->b, f));
		case JN_CMP:
			{
				jv			a = ev(c, n->a, f),
							b = ev(c, n->b, f);

				switch (n->op)
				{
					case '=':
						return jv_bool(jv_equal(a, b));
					case '!':
						return jv_bool(!jv_equal(a, b));
					case '<':
						return jv_bool(jv_compare(c, n, a, b) < 0);
					case '>':
						return jv_bool(jv_compare(c, n, a, b) > 0);
					case 'l':
						return jv_bool(jv_compare(c, n, a, b) <= 0);
					case 'g':
						return jv_bool(jv_compare(c, n, a, b) >= 0);
					case 'i':
						return jv_bool(contains(c, n, a, b));
					default:
						return jv_bool(!contains(c, n, a, b));
				}
			}
		case JN_NOT:
			return jv_bool(!jv_truthy(ev(c, n->a, f)));
		case JN_NEG:
		case JN_POS:
			{
				jv			v = ev(c, n->a, f);

				if (v.t == JV_INT || v.t == JV_BOOL)
					return jv_int(n->kind == JN_NEG ? -(v.t == JV_INT ? v.i : v.b) : (v.t == JV_INT ? v.i : v.b));
				if (v.t == JV_FLOAT)
					return jv_float(n->kind == JN_NEG ? -v.f : v.f);
				jerr_fail(c, n, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+', jv_typename(v));
			}
		case JN_AND:
			{
				jv			a = ev(c, n->a, f);

				return jv_truthy(a) ? ev(c, n->b, f) : a;
			}
		case JN_OR:
			{
				jv			a = ev(c, n->a, f);

				return jv_truthy(a) ? a : ev(c, n->b, f);
			}
		case JN_COND:
			if (jv_truthy(ev(c, n->a, f)))
				return ev(c, n->b, f);
			return n->c ? ev(c, n->c, f) : jv_undef("else");
		case JN_LIST:
		case JN_TUPLE:
			{
				jv			r = jv_newlist(c, (size_t) n->n_kids);

				for (int i = 0; i < n->n_kids; i++)
					jl_push(c, r.l, ev(c, n->kids[i], f));
				r.b = n->kind == JN_TUPLE;
				return r;
			}
		case JN_DICT:
			{
				jv			r = jv_newdict(c);

				for (int i = 0; i + 1 < n->n_kids; i += 2)
					jd_set(c, r.d, ev(c, n->kids[i], f), ev(c, n->kids[i + 1], f));
				return r;
			}
		default:
			jerr_fail(c, n, "unexpected node in an expression");
	}
}

/* the frame a macro call runs in: its parameters over the template's globals */
static jframe *
macro_frame(jinja_ctx *c, const jnode *at, const jnode *m, const jv *args, int nargs,
			const char **kwn, const jv *kwv, int nkw, const jnode *caller, jframe *defs)
{
	jframe	   *f = ja_alloc(&c->arena, sizeof(jframe));
	jv			varargs = jv_newlist(c, 0);
	jv			kwargs = jv_newdict(c);

	if (f == NULL)
		jerr_fail(c, at, "out of memory");
	f->parent = defs;
	for (int i = 0; i < m->n_kids; i++)
	{
		const jnode *p = m->kids[i];
		jv			v = jv_undef(p->name);
		bool		set = false;

		if (i < nargs)
		{
			v = args[i];
			set = true;
		}
		for (int k = 0; k < nkw; k++)
			if (strcmp(kwn[k], p->name) == 0)
			{
				v = kwv[k];
				set = true;
			}
		if (!set && p->a)
			v = ev(c, p->a, f);
		frame_set(c, f, p->name, v);
	}
	for (int i = m->n_kids; i < nargs; i++)
		jl_push(c, varargs.l, args[i]);
	for (int k = 0; k < nkw; k++)
	{
		bool		param = false;

		for (int i = 0; i < m->n_kids; i++)
			param = param || strcmp(kwn[k], m->kids[i]->name) == 0;
		if (!param)
			jd_set(c, kwargs.d, jv_str_static(kwn[k], strlen(kwn[k]), true), kwv[k]);
	}
	if (nargs > m->n_kids && m->name && strcmp(m->name, "caller") != 0)
		frame_set(c, f, "varargs", varargs);
	frame_set(c, f, "kwargs", kwargs);
	if (caller)
	{
		jv			cv = {0};

		cv.t = JV_MACRO;
		cv.m = caller;
		frame_set(c, f, "caller", cv);
	}
	return f;
}

/* the frame macros defined at the top level see: the globals */
static jframe *
defs_frame(jinja_ctx *c)
{
	return c->top;
}

jv
jcall_macro(jinja_ctx *c, const jnode *at, const jnode *m, const jv *args, int nargs,
			const char **kwn, const jv *kwv, int nkw, const jnode *caller)
{
	jframe	   *f;
	jbuf		out = {0};
	jv			r;
	int			saved_ctl = c->loop_ctl;

	if (++c->depth > MAX_DEPTH)
		jerr_fail(c, at, "maximum recursion depth exceeded");
	f = macro_frame(c, at, m, args, nargs, kwn, kwv, nkw, caller, defs_frame(c));
	ex(c, m->body, &out, f);
	c->loop_ctl = saved_ctl;
	c->depth--;
	r = jb_take(c, &out);
	jb_free(&out);
	return r;
}

static jv
eval_call(jinja_ctx *c, const jnode *n, jframe *f)
{
	jv			fn = ev(c, n->a, f);
	jv			args[16],
				kwv[16];
	const char *kwn[16];
	int			na,
				nk;

	if (n->n_kids > 16)
		jerr_fail(c, n, "too many arguments");
	eval_args(c, n, 0, f, args, &na, kwn, kwv, &nk);
	if (fn.t == JV_MACRO)
		return jcall_macro(c, n, fn.m, args, na, kwn, kwv, nk, NULL);
	if (fn.t == JV_FUNC)
		return jcall_func(c, n, fn.fn, args, na, kwn, kwv, nk);
	if (fn.t == JV_UNDEF)
		jerr_fail(c, n, "'%s' is undefined", fn.s ? fn.s : "value");
	jerr_fail(c, n, "'%s' object is not callable", jv_typename(fn));
}

jv
jeval(jinja_ctx *c, const jnode *n)
{
	return ev(c, n, c->top);
}

/* ---- statements ---- */

static void
assign(jinja_ctx *c, const jnode *target, jv v, jframe *f)
{
	if (target->kind == JN_NAME)
	{
		frame_set(c, f, target->name, v);
		return;
	}
	if (target->kind == JN_ATTR)
	{
		jv			ns = ev(c, target->a, f);

		if (ns.t != JV_NS)
			jerr_fail(c, target, "cannot assign attribute on non-namespace object");
		jd_set(c, ns.d, jv_str_static(target->name, strlen(target->name), true), v);
		return;
	}
	if (target->kind == JN_TUPLE)
	{
		const jlist *items = jv_iter(c, target, v);

		if ((int) items->n != target->n_kids)
			jerr_fail(c, target, "%s values to unpack (expected %d, got %zu)",
					  (int) items->n > target->n_kids ? "too many" : "not enough", target->n_kids, items->n);
		for (int i = 0; i < target->n_kids; i++)
			assign(c, target->kids[i], items->v[i], f);
		return;
	}
	jerr_fail(c, target, "cannot assign to this target");
}

static void
exec_for(jinja_ctx *c, const jnode *n, jbuf *out, jframe *f)
{
	jv			seq = ev(c, n->b, f);
	const jlist *items;
	jframe	   *lf = ja_alloc(&c->arena, sizeof(jframe));
	jloop	   *lp = ja_alloc(&c->arena, sizeof(jloop));
	jv			loopv = {0};
	jv		   *outer_loop;

	if (lf == NULL || lp == NULL)
		jerr_fail(c, n, "out of memory");
	if (seq.t == JV_NONE)
		jerr_fail(c, n->b, "'NoneType' object is not iterable");
	items = jv_iter(c, n->b, seq);
	lf->parent = f;
	if (n->c)
	{
		/* the loop's filter runs first: loop.* counts the kept items */
		jv			kept = jv_newlist(c, items->n);

		for (size_t i = 0; i < items->n; i++)
		{
			assign(c, n->a, items->v[i], lf);
			if (jv_truthy(ev(c, n->c, lf)))
				jl_push(c, kept.l, items->v[i]);
		}
		items = kept.l;
	}
	if (items->n == 0)
	{
		if (n->else_body)
			ex(c, n->else_body, out, f);
		return;
	}
	outer_loop = frame_find(f, "loop");
	lp->items = items;
	lp->depth = outer_loop && outer_loop->t == JV_LOOP ? outer_loop->loop->depth + 1 : 1;
	loopv.t = JV_LOOP;
	loopv.loop = lp;
	for (size_t i = 0; i < items->n; i++)
	{
		lp->i = i;
		frame_set(c, lf, "loop", loopv);
		assign(c, n->a, items->v[i], lf);
		ex(c, n->body, out, lf);
		if (c->loop_ctl == 1)
		{
			c->loop_ctl = 0;
			break;
		}
		c->loop_ctl = 0;
	}
}

static void
ex(jinja_ctx *c, const jnode *n, jbuf *out, jframe *f)
{
	JSTEP(c, n);
	switch (n->kind)
	{
		case JN_BODY:
			for (int i = 0; i < n->n_kids && c->loop_ctl == 0; i++)
				ex(c, n->kids[i], out, f);
			return;
		case JN_TEXT:
			jb_putv(c, out, n->value);
			return;
		case JN_OUTPUT:
			jb_putv(c, out, jv_tostr(c, ev(c, n->a, f)));
			return;
		case JN_IF:
			if (jv_truthy(ev(c, n->a, f)))
				ex(c, n->body, out, f);
			else if (n->else_body)
				ex(c, n->else_body, out, f);
			return;
		case JN_FOR:
			exec_for(c, n, out, f);
			return;
		case JN_SET:
			assign(c, n->a, ev(c, n->b, f), f);
			return;
		case JN_SETBLOCK:
			{
				jbuf		b = {0};
				jv			v;

				ex(c, n->body, &b, f);
				v = jb_take(c, &b);
				jb_free(&b);
				if (n->b)
				{
					jframe		tf = {0};

					tf.parent = f;
					frame_set(c, &tf, "\x01body", v);
					v = ev(c, n->b, &tf);
				}
				assign(c, n->a, v, f);
				return;
			}
		case JN_MACRO:
			{
				jv			m = {0};

				m.t = JV_MACRO;
				m.m = n;
				frame_set(c, f, n->name, m);
				return;
			}
		case JN_CALLBLOCK:
			{
				const jnode *call = n->a;
				jv			fn = ev(c, call->a, f);
				jv			args[16],
							kwv[16];
				const char *kwn[16];
				int			na,
							nk;

				if (fn.t != JV_MACRO)
					jerr_fail(c, n, "the call block's target is not a macro");
				if (call->n_kids > 16)
					jerr_fail(c, n, "too many arguments");
				eval_args(c, call, 0, f, args, &na, kwn, kwv, &nk);
				jb_putv(c, out, jcall_macro(c, n, fn.m, args, na, kwn, kwv, nk, n->b));
				return;
			}
		case JN_FILTERBLOCK:
			{
				jbuf		b = {0};
				jv			v;
				jframe		tf = {0};

				ex(c, n->body, &b, f);
				v = jb_take(c, &b);
				jb_free(&b);
				tf.parent = f;
				frame_set(c, &tf, "\x01body", v);
				jb_putv(c, out, jv_tostr(c, ev(c, n->a, &tf)));
				return;
			}
		case JN_BREAK:
			c->loop_ctl = 1;
			return;
		case JN_CONTINUE:
			c->loop_ctl = 2;
			return;
		case JN_GENERATION:
			ex(c, n->body, out, f);
			return;
		default:
			jerr_fail(c, n, "unexpected node in a statement");
	}
}

void
jexec(jinja_ctx *c, const jnode *n, jbuf *out)
{
	ex(c, n, out, c->top);
}

/* ---- the public entry points ---- */

jinja_ctx *
jinja_ctx_create(void)
{
	return calloc(1, sizeof(jinja_ctx));
}

void
jinja_ctx_free(jinja_ctx *c)
{
	if (c == NULL)
		return;
	ja_free(&c->arena);
	free(c);
}

void
jinja_ctx_set_time(jinja_ctx *c, const struct tm *tm)
{
	c->now = *tm;
	c->now_set = true;
}

int
jinja_set(jinja_ctx *c, const char *name, const jinja_value *v)
{
	char	   *nm = ja_alloc(&c->arena, strlen(name) + 1);

	if (nm == NULL || v == NULL)
		return -1;
	strcpy(nm, name);
	for (int i = 0; i < c->globals.n; i++)
		if (strcmp(c->globals.vars[i].name, name) == 0)
		{
			c->globals.vars[i].v = *v;
			return 0;
		}
	if (c->globals.n == c->globals.cap)
	{
		int			cap = c->globals.cap ? c->globals.cap * 2 : 16;
		jvar	   *p = ja_alloc(&c->arena, sizeof(jvar) * (size_t) cap);

		if (p == NULL)
			return -1;
		if (c->globals.n)
			memcpy(p, c->globals.vars, sizeof(jvar) * (size_t) c->globals.n);
		c->globals.vars = p;
		c->globals.cap = cap;
	}
	c->globals.vars[c->globals.n].name = nm;
	c->globals.vars[c->globals.n].v = *v;
	c->globals.n++;
	return 0;
}

jinja_status
jinja_render(const jinja_template *t, jinja_ctx *c, jinja_output *out, char *err, size_t errlen)
{
	jmp_buf		jmp;
	jframe		top = {0};

	c->jmp = &jmp;
	c->err = err;
	c->errlen = errlen;
	c->status = JINJA_OK;
	c->depth = 0;
	c->loop_ctl = 0;
	c->steps = 0;
	c->out.len = 0;
	top.parent = &c->globals;
	c->top = &top;
	if (setjmp(jmp) != 0)
	{
		c->top = NULL;
		c->jmp = NULL;
		memset(out, 0, sizeof(*out));
		return c->status;
	}
	jb_put(c, &c->out, "", 0, 0);
	/* the template's own top-level sets live in top: they do not outlive the render */
	ex(c, t->root, &c->out, &top);
	c->top = NULL;
	c->jmp = NULL;
	out->text = c->out.p ? c->out.p : "";
	out->trusted = c->out.mask;
	out->len = c->out.len;
	return JINJA_OK;
}
