/*
 * parser.c — tokens to the AST, following jinja2's parser (precedence:
 * inline if < or < and < not < comparisons and in < + - < ~ < * / // % <
 * ** < unary - + < primary with .attr [item] (call), then | filter and
 * "is" test).  A tag, filter or test outside the subset is an error naming
 * it at line:column; the template never compiles partly.
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser
{
	jinja_template *t;
	jtok	   *tok;
	int			n,
				p;
	jmp_buf		jmp;
	char	   *err;
	size_t		errlen;
	/*
	 * jinja2 accepts an unknown filter or test at compile time inside an if
	 * (test or bodies) or an inline if, and fails only when it runs; anywhere
	 * else the template does not compile.  soft: inside one now; unknown:
	 * every unknown filter/test node, checked when parsing ends.
	 */
	bool		soft;
	jnode	  **unknown;
	int			n_unknown;
} parser;

static void perr(parser *P, const jtok *at, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));

static void
perr(parser *P, const jtok *at, const char *fmt, ...)
{
	va_list		ap;
	int			k;

	k = snprintf(P->err, P->errlen, "%d:%d: ", at->line, at->col);
	if (k >= 0 && (size_t) k < P->errlen)
	{
		va_start(ap, fmt);
		vsnprintf(P->err + k, P->errlen - (size_t) k, fmt, ap);
		va_end(ap);
	}
	longjmp(P->jmp, 1);
}

static jtok *
cur(parser *P)
{
	return &P->tok[P->p];
}

static jtok *
next(parser *P)
{
	jtok	   *t = &P->tok[P->p];

	if (t->kind != JT_EOF)
		P->p++;
	return t;
}

static bool
is_op(const jtok *t, const char *op)
{
	return t->kind == JT_OP && strcmp(t->s, op) == 0;
}

static bool
is_name(const jtok *t, const char *name)
{
	return t->kind == JT_NAME && strcmp(t->s, name) == 0;
}

static bool
accept_op(parser *P, const char *op)
{
	if (is_op(cur(P), op))
	{
		next(P);
		return true;
	}
	return false;
}

static bool
accept_name(parser *P, const char *name)
{
	if (is_name(cur(P), name))
	{
		next(P);
		return true;
	}
	return false;
}

static const char *
tok_desc(const jtok *t)
{
	switch (t->kind)
	{
		case JT_EOF: return "end of template";
		case JT_DATA: return "template data";
		case JT_VAR_BEGIN: return "'{{'";
		case JT_VAR_END: return "'}}'";
		case JT_BLOCK_BEGIN: return "'{%'";
		case JT_BLOCK_END: return "'%}'";
		case JT_STRING: return "string";
		case JT_INT: return "integer";
		case JT_FLOAT: return "float";
		default: return t->s;
	}
}

static void
expect_op(parser *P, const char *op)
{
	if (!accept_op(P, op))
		perr(P, cur(P), "expected '%s', got %s", op, tok_desc(cur(P)));
}

static jtok *
expect_name(parser *P)
{
	if (cur(P)->kind != JT_NAME)
		perr(P, cur(P), "expected a name, got %s", tok_desc(cur(P)));
	return next(P);
}

static void
expect_kind(parser *P, int kind, const char *what)
{
	if (cur(P)->kind != kind)
		perr(P, cur(P), "expected %s, got %s", what, tok_desc(cur(P)));
	next(P);
}

static jnode *
mk(parser *P, int kind, const jtok *at)
{
	jnode	   *n = ja_alloc(&P->t->arena, sizeof(jnode));

	if (n == NULL)
		perr(P, at, "out of memory");
	n->kind = (uint8_t) kind;
	n->line = at->line;
	n->col = at->col;
	return n;
}

static void
add_kid(parser *P, jnode *n, jnode *kid)
{
	/* capacity: the next power of two (at least 4), grown when n_kids reaches it */
	if (n->n_kids == 0 || (n->n_kids >= 4 && (n->n_kids & (n->n_kids - 1)) == 0))
	{
		int			cap = n->n_kids == 0 ? 4 : n->n_kids * 2;
		jnode	  **k = ja_alloc(&P->t->arena, sizeof(jnode *) * (size_t) cap);

		if (k == NULL)
			perr(P, cur(P), "out of memory");
		if (n->n_kids)
			memcpy(k, n->kids, sizeof(jnode *) * (size_t) n->n_kids);
		n->kids = k;
	}
	n->kids[n->n_kids++] = kid;
}

static void
note_unknown(parser *P, jnode *n)
{
	jnode	  **k = ja_alloc(&P->t->arena, sizeof(jnode *) * (size_t) (P->n_unknown + 1));

	if (k == NULL)
		perr(P, cur(P), "out of memory");
	if (P->n_unknown)
		memcpy(k, P->unknown, sizeof(jnode *) * (size_t) P->n_unknown);
	k[P->n_unknown++] = n;
	P->unknown = k;
	n->unknown = true;
	n->soft = P->soft;
}

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, bool with_filter);
static jnode *parse_tuple(parser *P, bool with_condexpr, bool explicit_parens);
static jnode *parse_body(parser *P, const char *const *ends);

/* (args, key=value, ...) after '(' has been seen: into n's kids */
static void
parse_args(parser *P, jnode *n)
{
	expect_op(P, "(");
	while (!is_op(cur(P), ")"))
	{
		if (cur(P)->kind == JT_NAME && is_op(&P->tok[P->p + 1], "="))
		{
			jtok	   *k = next(P);
			jnode	   *kw = mk(P, JN_KWARG, k);

			next(P);
			kw->name = k->s;
			kw->a = parse_expr(P);
			add_kid(P, n, kw);
		}
		else
		{
			if (is_op(cur(P), "*"))
				perr(P, cur(P), "unsupported call syntax '*args'");
			add_kid(P, n, parse_expr(P));
		}
		if (!accept_op(P, ","))
			break;
	}
	expect_op(P, ")");
}

static jnode *
parse_primary(parser *P)
{
	jtok	   *t = cur(P);
	jnode	   *n;

	if (t->kind == JT_NAME)
	{
		next(P);
		if (strcmp(t->s, "true") == 0 || strcmp(t->s, "True") == 0 ||
			strcmp(t->s, "false") == 0 || strcmp(t->s, "False") == 0)
		{
			n = mk(P, JN_CONST, t);
			n->value = jv_bool(t->s[0] == 't' || t->s[0] == 'T');
			return n;
		}
		if (strcmp(t->s, "none") == 0 || strcmp(t->s, "None") == 0)
		{
			n = mk(P, JN_CONST, t);
			n->value = jv_none();
			return n;
		}
		n = mk(P, JN_NAME, t);
		n->name = t->s;
		return n;
	}
	if (t->kind == JT_STRING)
	{
		size_t		len = 0;
		int			q = P->p;
		char	   *s;

		while (P->tok[q].kind == JT_STRING)
			len += P->tok[q++].n;
		s = ja_alloc(&P->t->arena, len + 1);
		if (s == NULL)
			perr(P, t, "out of memory");
		len = 0;
		while (cur(P)->kind == JT_STRING)
		{
			memcpy(s + len, cur(P)->s, cur(P)->n);
			len += cur(P)->n;
			next(P);
		}
		n = mk(P, JN_CONST, t);
		n->value = jv_str_static(s, len, true);
		return n;
	}
	if (t->kind == JT_INT || t->kind == JT_FLOAT)
	{
		next(P);
		n = mk(P, JN_CONST, t);
		n->value = t->kind == JT_INT ? jv_int(t->i) : jv_float(t->f);
		return n;
	}
	if (is_op(t, "("))
	{
		next(P);
		n = parse_tuple(P, true, true);
		expect_op(P, ")");
		return n;
	}
	if (is_op(t, "["))
	{
		next(P);
		n = mk(P, JN_LIST, t);
		while (!is_op(cur(P), "]"))
		{
			add_kid(P, n, parse_expr(P));
			if (!accept_op(P, ","))
				break;
		}
		expect_op(P, "]");
		return n;
	}
	if (is_op(t, "{"))
	{
		next(P);
		n = mk(P, JN_DICT, t);
		while (!is_op(cur(P), "}"))
		{
			add_kid(P, n, parse_expr(P));
			expect_op(P, ":");
			add_kid(P, n, parse_expr(P));
			if (!accept_op(P, ","))
				break;
		}
		expect_op(P, "}");
		return n;
	}
	perr(P, t, "unexpected %s", tok_desc(t));
}

/* one subscript inside [ ]: an expression or a slice */
static jnode *
parse_subscribed(parser *P)
{
	jtok	   *t = cur(P);
	jnode	   *start = NULL;
	jnode	   *s;

	if (!is_op(t, ":"))
	{
		start = parse_expr(P);
		if (!is_op(cur(P), ":"))
			return start;
	}
	next(P);
	s = mk(P, JN_SLICE, t);
	s->a = start;
	if (!is_op(cur(P), "]") && !is_op(cur(P), ",") && !is_op(cur(P), ":"))
		s->b = parse_expr(P);
	if (accept_op(P, ":"))
		if (!is_op(cur(P), "]") && !is_op(cur(P), ","))
			s->c = parse_expr(P);
	return s;
}

static jnode *
parse_postfix(parser *P, jnode *n)
{
	for (;;)
	{
		jtok	   *t = cur(P);

		if (is_op(t, "."))
		{
			jtok	   *a;

			next(P);
			a = next(P);
			if (a->kind == JT_NAME)
			{
				jnode	   *g = mk(P, JN_ATTR, a);

				g->a = n;
				g->name = a->s;
				n = g;
			}
			else if (a->kind == JT_INT)
			{
				jnode	   *g = mk(P, JN_ITEM, a);
				jnode	   *k = mk(P, JN_CONST, a);

				k->value = jv_int(a->i);
				g->a = n;
				g->b = k;
				n = g;
			}
			else
				perr(P, a, "expected an attribute name after '.', got %s", tok_desc(a));
		}
		else if (is_op(t, "["))
		{
			jnode	   *g = mk(P, JN_ITEM, t);
			jnode	   *k;

			next(P);
			k = parse_subscribed(P);
			if (is_op(cur(P), ","))
				perr(P, cur(P), "unsupported subscript: a tuple of indexes");
			expect_op(P, "]");
			g->a = n;
			g->b = k;
			n = g;
		}
		else if (is_op(t, "("))
		{
			jnode	   *c = mk(P, JN_CALL, t);

			c->a = n;
			parse_args(P, c);
			n = c;
		}
		else
			return n;
	}
}

static const char *
dotted_name(parser *P)
{
	jtok	   *t = expect_name(P);

	if (is_op(cur(P), "."))
		perr(P, cur(P), "unsupported dotted filter or test name '%s.'", t->s);
	return t->s;
}

static jnode *
parse_filter_expr(parser *P, jnode *n)
{
	for (;;)
	{
		jtok	   *t = cur(P);

		if (is_op(t, "|"))
		{
			jnode	   *f;
			jtok	   *nt;

			next(P);
			nt = cur(P);
			f = mk(P, JN_FILTER, nt);
			f->name = dotted_name(P);
			if (!jfilter_known(f->name))
				note_unknown(P, f);
			f->a = n;
			if (is_op(cur(P), "("))
				parse_args(P, f);
			n = f;
		}
		else if (is_name(t, "is"))
		{
			jnode	   *f;
			jtok	   *nt;

			next(P);
			f = mk(P, JN_TEST, t);
			f->negate = accept_name(P, "not");
			nt = cur(P);
			f->name = dotted_name(P);
			if (!jtest_known(f->name))
				note_unknown(P, f);
			(void) nt;
			f->a = n;
			if (is_op(cur(P), "("))
				parse_args(P, f);
			else
			{
				jtok	   *a = cur(P);

				if ((a->kind == JT_NAME || a->kind == JT_STRING || a->kind == JT_INT || a->kind == JT_FLOAT ||
					 is_op(a, "(") || is_op(a, "[") || is_op(a, "{")) &&
					!is_name(a, "else") && !is_name(a, "or") && !is_name(a, "and"))
				{
					if (is_name(a, "is"))
						perr(P, a, "you cannot chain multiple tests with 'is'");
					add_kid(P, f, parse_postfix(P, parse_primary(P)));
				}
			}
			n = f;
		}
		else if (is_op(t, "("))
		{
			jnode	   *c = mk(P, JN_CALL, t);

			c->a = n;
			parse_args(P, c);
			n = c;
		}
		else
			return n;
	}
}

static jnode *
parse_unary(parser *P, bool with_filter)
{
	jtok	   *t = cur(P);
	jnode	   *n;

	if (is_op(t, "-") || is_op(t, "+"))
	{
		next(P);
		n = mk(P, is_op(t, "-") ? JN_NEG : JN_POS, t);
		n->a = parse_unary(P, false);
	}
	else
		n = parse_primary(P);
	n = parse_postfix(P, n);
	if (with_filter)
		n = parse_filter_expr(P, n);
	return n;
}

static jnode *
binop(parser *P, const jtok *t, jnode *a, jnode *b)
{
	jnode	   *n = mk(P, JN_BINOP, t);

	n->op = t->s[0] == '/' && t->s[1] == '/' ? 'F' : t->s[0] == '*' && t->s[1] == '*' ? 'P' : t->s[0];
	n->a = a;
	n->b = b;
	return n;
}

/*
 * The binary operators by precedence, lowest first, as Jinja's parser has
 * them: or, and, the prefix not, comparisons, + -, ~, * / // %, **; each
 * level left-associative over the next one, the last over a unary operand
 * with its filters.  One function, parse_level, reads them all.
 */
typedef struct op_row
{
	const char *text;			/* the operator token */
	bool		word;			/* a name token (or, in, ...), not an operator token */
	const char *then;			/* a second name token that must follow ("not in"), or NULL */
	char		code;			/* JN_CMP: its op (= ! < > l(<=) g(>=) i(in) n(not in)) */
} op_row;

typedef struct prec_level
{
	int			kind;			/* JN_OR, JN_AND, JN_CMP, JN_BINOP; JN_NOT: a prefix, not binary */
	op_row		ops[9];			/* ends at a NULL text */
} prec_level;

#define OP(text, code) {text, false, NULL, code}
#define WORD(text, then, code) {text, true, then, code}

static const prec_level levels[] = {
	{JN_OR, {WORD("or", NULL, 0)}},
	{JN_AND, {WORD("and", NULL, 0)}},
	{JN_NOT, {WORD("not", NULL, 0)}},
	{JN_CMP, {OP("==", '='), OP("!=", '!'), OP("<", '<'), OP(">", '>'), OP("<=", 'l'), OP(">=", 'g'),
			  WORD("in", NULL, 'i'), WORD("not", "in", 'n')}},
	{JN_BINOP, {OP("+", 0), OP("-", 0)}},
	{JN_BINOP, {OP("~", 0)}},
	{JN_BINOP, {OP("*", 0), OP("/", 0), OP("//", 0), OP("%", 0)}},
	{JN_BINOP, {OP("**", 0)}},
};

#define N_LEVELS ((int) (sizeof(levels) / sizeof(levels[0])))

/* The operator of level L at the current token, or NULL. */
static const op_row *
level_op(parser *P, const prec_level *L)
{
	const jtok *t = cur(P);

	for (const op_row *o = L->ops; o->text != NULL; o++)
		if (o->word ? is_name(t, o->text) : is_op(t, o->text))
		{
			if (o->then == NULL || is_name(&P->tok[P->p + 1], o->then))
				return o;
		}
	return NULL;
}

/* An expression of level lv and above (N_LEVELS: a unary operand with its filters). */
static jnode *
parse_level(parser *P, int lv)
{
	const prec_level *L;
	const op_row *o;
	jnode	   *n;

	if (lv == N_LEVELS)
		return parse_unary(P, true);
	L = &levels[lv];
	if (L->kind == JN_NOT)
	{
		if (level_op(P, L) == NULL)
			return parse_level(P, lv + 1);
		n = mk(P, JN_NOT, next(P));
		n->a = parse_level(P, lv);
		return n;
	}
	n = parse_level(P, lv + 1);
	while ((o = level_op(P, L)) != NULL)
	{
		jtok	   *t = next(P);
		jnode	   *b;

		if (o->then != NULL)
			next(P);
		if (L->kind == JN_BINOP)
		{
			b = parse_level(P, lv + 1);
			n = binop(P, t, n, b);
			continue;
		}
		b = mk(P, L->kind, t);
		b->op = o->code;
		b->a = n;
		b->b = parse_level(P, lv + 1);
		n = b;
	}
	return n;
}

static jnode *
parse_or(parser *P)
{
	return parse_level(P, 0);
}

static jnode *
parse_condexpr(parser *P)
{
	int			first_unknown = P->n_unknown;
	jnode	   *n = parse_or(P);

	while (is_name(cur(P), "if"))
	{
		jtok	   *t = next(P);
		jnode	   *c = mk(P, JN_COND, t);
		bool		soft = P->soft;

		P->soft = true;
		c->a = parse_or(P);
		c->b = n;
		if (accept_name(P, "else"))
			c->c = parse_condexpr(P);
		P->soft = soft;
		for (int i = first_unknown; i < P->n_unknown; i++)
			P->unknown[i]->soft = true;
		n = c;
	}
	return n;
}

static jnode *
parse_expr(parser *P)
{
	return parse_condexpr(P);
}

/* a, b, c (a tuple when there is a comma) */
static jnode *
parse_tuple(parser *P, bool with_condexpr, bool explicit_parens)
{
	jtok	   *t = cur(P);
	jnode	   *tup = NULL;
	jnode	   *first = NULL;

	for (;;)
	{
		jtok	   *c = cur(P);

		if (first != NULL || tup != NULL)
		{
			if (c->kind == JT_BLOCK_END || c->kind == JT_VAR_END || is_op(c, ")") ||
				is_name(c, "recursive") || is_name(c, "if"))
				break;
		}
		else if (explicit_parens && is_op(c, ")"))
			return mk(P, JN_TUPLE, t);
		{
			jnode	   *e = with_condexpr ? parse_expr(P) : parse_or(P);

			if (first == NULL && tup == NULL)
				first = e;
			else
			{
				if (tup == NULL)
				{
					tup = mk(P, JN_TUPLE, t);
					add_kid(P, tup, first);
				}
				add_kid(P, tup, e);
			}
		}
		if (!is_op(cur(P), ","))
			break;
		next(P);
		if (tup == NULL)
		{
			tup = mk(P, JN_TUPLE, t);
			add_kid(P, tup, first);
		}
	}
	return tup ? tup : first;
}

/* for / set targets: name, ns.attr (set only), or names separated by commas */
static jnode *
parse_target(parser *P, bool with_namespace)
{
	jtok	   *t = expect_name(P);
	jnode	   *n;

	if (with_namespace && is_op(cur(P), "."))
	{
		jtok	   *a;

		next(P);
		a = expect_name(P);
		n = mk(P, JN_ATTR, t);
		n->a = mk(P, JN_NAME, t);
		n->a->name = t->s;
		n->name = a->s;
		return n;
	}
	n = mk(P, JN_NAME, t);
	n->name = t->s;
	if (is_op(cur(P), ","))
	{
		jnode	   *tup = mk(P, JN_TUPLE, t);

		add_kid(P, tup, n);
		while (accept_op(P, ","))
		{
			jtok	   *k;
			jnode	   *m;

			if (cur(P)->kind != JT_NAME)
				break;
			k = next(P);
			m = mk(P, JN_NAME, k);
			m->name = k->s;
			add_kid(P, tup, m);
		}
		return tup;
	}
	return n;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};
static const char *const END_FOR2[] = {"endfor", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_CALL[] = {"endcall", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_GEN[] = {"endgeneration", NULL};

/* the block tag name that ended a body: "{%" NAME consumed, returns NAME */
static const char *
end_tag(parser *P)
{
	return P->tok[P->p - 1].s;
}

static jnode *
parse_if(parser *P, const jtok *at)
{
	jnode	   *n = mk(P, JN_IF, at);
	bool		soft = P->soft;

	P->soft = true;
	n->a = parse_tuple(P, false, false);
	expect_kind(P, JT_BLOCK_END, "'%}'");
	n->body = parse_body(P, END_IF);
	if (strcmp(end_tag(P), "elif") == 0)
	{
		n->else_body = parse_if(P, &P->tok[P->p - 1]);
		P->soft = soft;
		return n;
	}
	if (strcmp(end_tag(P), "else") == 0)
	{
		expect_kind(P, JT_BLOCK_END, "'%}'");
		n->else_body = parse_body(P, (const char *const[]) {"endif", NULL});
	}
	expect_kind(P, JT_BLOCK_END, "'%}'");
	P->soft = soft;
	return n;
}

static jnode *parse_stmt_hard(parser *P, jtok *t);

/* a statement; bodies other than an if's are frames of their own: not soft */
static jnode *
parse_stmt(parser *P)
{
	jtok	   *t = expect_name(P);
	bool		soft = P->soft;
	jnode	   *n;

	if (strcmp(t->s, "if") == 0)
		return parse_if(P, t);
	if (strcmp(t->s, "set") != 0)
		P->soft = false;
	n = parse_stmt_hard(P, t);
	P->soft = soft;
	return n;
}

static jnode *
parse_stmt_hard(parser *P, jtok *t)
{
	const char *w = t->s;
	jnode	   *n;

	if (strcmp(w, "for") == 0)
	{
		n = mk(P, JN_FOR, t);
		n->a = parse_target(P, false);
		if (!accept_name(P, "in"))
			perr(P, cur(P), "expected 'in', got %s", tok_desc(cur(P)));
		n->b = parse_tuple(P, false, false);
		if (accept_name(P, "if"))
			n->c = parse_expr(P);
		n->recursive = accept_name(P, "recursive");
		if (n->recursive)
			perr(P, t, "unsupported 'for ... recursive'");
		expect_kind(P, JT_BLOCK_END, "'%}'");
		n->body = parse_body(P, END_FOR);
		if (strcmp(end_tag(P), "else") == 0)
		{
			expect_kind(P, JT_BLOCK_END, "'%}'");
			n->else_body = parse_body(P, END_FOR2);
		}
		expect_kind(P, JT_BLOCK_END, "'%}'");
		return n;
	}
	if (strcmp(w, "set") == 0)
	{
		jnode	   *target = parse_target(P, true);

		if (accept_op(P, "="))
		{
			n = mk(P, JN_SET, t);
			n->a = target;
			n->b = parse_tuple(P, true, false);
			expect_kind(P, JT_BLOCK_END, "'%}'");
			return n;
		}
		n = mk(P, JN_SETBLOCK, t);
		n->a = target;
		if (is_op(cur(P), "|"))
		{
			/* the filters apply to the body: a placeholder name stands for it */
			jnode	   *ph = mk(P, JN_NAME, t);

			ph->name = NULL;
			n->b = parse_filter_expr(P, ph);
		}
		expect_kind(P, JT_BLOCK_END, "'%}'");
		n->body = parse_body(P, END_SET);
		expect_kind(P, JT_BLOCK_END, "'%}'");
		return n;
	}
	if (strcmp(w, "macro") == 0)
	{
		jtok	   *nm = expect_name(P);

		n = mk(P, JN_MACRO, t);
		n->name = nm->s;
		expect_op(P, "(");
		while (!is_op(cur(P), ")"))
		{
			jtok	   *a = expect_name(P);
			jnode	   *arg = mk(P, JN_KWARG, a);

			arg->name = a->s;
			if (accept_op(P, "="))
				arg->a = parse_expr(P);
			add_kid(P, n, arg);
			if (!accept_op(P, ","))
				break;
		}
		expect_op(P, ")");
		expect_kind(P, JT_BLOCK_END, "'%}'");
		n->body = parse_body(P, END_MACRO);
		if (cur(P)->kind == JT_NAME)
			next(P);
		expect_kind(P, JT_BLOCK_END, "'%}'");
		return n;
	}
	if (strcmp(w, "call") == 0)
	{
		n = mk(P, JN_CALLBLOCK, t);
		if (is_op(cur(P), "("))
		{
			jnode	   *params = mk(P, JN_MACRO, t);

			expect_op(P, "(");
			while (!is_op(cur(P), ")"))
			{
				jtok	   *a = expect_name(P);
				jnode	   *arg = mk(P, JN_KWARG, a);

				arg->name = a->s;
				if (accept_op(P, "="))
					arg->a = parse_expr(P);
				add_kid(P, params, arg);
				if (!accept_op(P, ","))
					break;
			}
			expect_op(P, ")");
			n->b = params;
		}
		n->a = parse_expr(P);
		if (n->a->kind != JN_CALL)
			perr(P, t, "expected a call after 'call'");
		expect_kind(P, JT_BLOCK_END, "'%}'");
		n->body = parse_body(P, END_CALL);
		expect_kind(P, JT_BLOCK_END, "'%}'");
		if (n->b == NULL)
			n->b = mk(P, JN_MACRO, t);
		n->b->name = "caller";
		n->b->body = n->body;
		return n;
	}
	if (strcmp(w, "filter") == 0)
	{
		jnode	   *ph = mk(P, JN_NAME, t);

		n = mk(P, JN_FILTERBLOCK, t);
		ph->name = NULL;
		/* the first filter has no leading '|' */
		{
			jtok	   *nt = cur(P);
			jnode	   *f = mk(P, JN_FILTER, nt);

			f->name = dotted_name(P);
			if (!jfilter_known(f->name))
				note_unknown(P, f);
			(void) nt;
			f->a = ph;
			if (is_op(cur(P), "("))
				parse_args(P, f);
			n->a = parse_filter_expr(P, f);
		}
		expect_kind(P, JT_BLOCK_END, "'%}'");
		n->body = parse_body(P, END_FILTER);
		expect_kind(P, JT_BLOCK_END, "'%}'");
		return n;
	}
	if (strcmp(w, "break") == 0 || strcmp(w, "continue") == 0)
	{
		n = mk(P, w[0] == 'b' ? JN_BREAK : JN_CONTINUE, t);
		expect_kind(P, JT_BLOCK_END, "'%}'");
		return n;
	}
	if (strcmp(w, "generation") == 0)
	{
		n = mk(P, JN_GENERATION, t);
		expect_kind(P, JT_BLOCK_END, "'%}'");
		n->body = parse_body(P, END_GEN);
		expect_kind(P, JT_BLOCK_END, "'%}'");
		return n;
	}
	perr(P, t, "unsupported tag '%s'", w);
}

/*
 * Statements up to a block tag named in ends (NULL: the end of the
 * template); the tag's name is consumed, its "%}" not.
 */
static jnode *
parse_body(parser *P, const char *const *ends)
{
	jnode	   *body = mk(P, JN_BODY, cur(P));

	for (;;)
	{
		jtok	   *t = cur(P);

		if (t->kind == JT_EOF)
		{
			if (ends != NULL)
				perr(P, t, "unexpected end of template, expected '%s'", ends[0][0] == 'e' && ends[1] == NULL ? ends[0] : ends[1] ? ends[1] : ends[0]);
			return body;
		}
		if (t->kind == JT_DATA)
		{
			jnode	   *d = mk(P, JN_TEXT, t);

			next(P);
			d->value = jv_str_static(t->s, t->n, true);
			add_kid(P, body, d);
			continue;
		}
		if (t->kind == JT_VAR_BEGIN)
		{
			jnode	   *o = mk(P, JN_OUTPUT, t);

			next(P);
			o->a = parse_tuple(P, true, false);
			expect_kind(P, JT_VAR_END, "'}}'");
			add_kid(P, body, o);
			continue;
		}
		if (t->kind == JT_BLOCK_BEGIN)
		{
			jtok	   *nm;

			next(P);
			nm = cur(P);
			if (nm->kind == JT_NAME && ends != NULL)
			{
				for (int i = 0; ends[i]; i++)
					if (strcmp(nm->s, ends[i]) == 0)
					{
						next(P);
						return body;
					}
			}
			if (nm->kind == JT_NAME && strncmp(nm->s, "end", 3) == 0)
				perr(P, nm, "unexpected '%s'", nm->s);
			if (nm->kind == JT_NAME && (strcmp(nm->s, "elif") == 0 || strcmp(nm->s, "else") == 0))
				perr(P, nm, "unexpected '%s'", nm->s);
			add_kid(P, body, parse_stmt(P));
			continue;
		}
		perr(P, t, "unexpected %s", tok_desc(t));
	}
}

jinja_template *
jinja_compile(const char *src, size_t len, char *err, size_t errlen)
{
	jinja_template *volatile t = calloc(1, sizeof(*t));
	parser		P;
	jtok	   *toks;
	int			n;

	if (t == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (jlex(&t->arena, src, len, &toks, &n, err, errlen) != 0)
	{
		jinja_free(t);
		return NULL;
	}
	memset(&P, 0, sizeof(P));
	P.t = t;
	P.tok = toks;
	P.n = n;
	P.err = err;
	P.errlen = errlen;
	if (setjmp(P.jmp) != 0)
	{
		jinja_free(t);
		return NULL;
	}
	t->root = parse_body(&P, NULL);
	for (int i = 0; i < P.n_unknown; i++)
		if (!P.unknown[i]->soft)
		{
			jnode	   *u = P.unknown[i];

			snprintf(err, errlen, "%d:%d: unsupported %s '%s'", u->line, u->col,
					 u->kind == JN_FILTER ? "filter" : "test", u->name);
			jinja_free(t);
			return NULL;
		}
	return t;
}

void
jinja_free(jinja_template *t)
{
	if (t == NULL)
		return;
	ja_free(&t->arena);
	free(t);
}
