/*
 * lexer.c — template source to tokens, with jinja2's whitespace rules as HF
 * transformers configures them: trim_blocks (a block or comment tag eats the
 * one "\n" after it), lstrip_blocks (spaces and tabs between a line's start
 * and a block or comment tag go), "-" strips all whitespace on its side,
 * "+" turns lstrip/trim off for that tag, line endings become "\n" and one
 * trailing newline of the template is dropped (keep_trailing_newline off).
 * Inside a tag, the end marker counts only outside brackets, as jinja2's
 * balancing stack does.
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer
{
	jarena	   *a;
	const char *s;
	size_t		n,
				p;
	int			line,
				col;			/* of s[p] */
	jtok	   *toks;
	int			n_toks,
				cap;
	char	   *err;
	size_t		errlen;
} lexer;

static int
lex_err(lexer *L, int line, int col, const char *fmt, const char *arg)
{
	char		msg[200];

	snprintf(msg, sizeof(msg), fmt, arg);
	snprintf(L->err, L->errlen, "%d:%d: %s", line, col, msg);
	return -1;
}

static jtok *
push(lexer *L, int kind, int line, int col)
{
	jtok	   *t;

	if (L->n_toks == L->cap)
	{
		int			cap = L->cap ? L->cap * 2 : 256;
		jtok	   *p = ja_alloc(L->a, sizeof(jtok) * (size_t) cap);

		if (p == NULL)
			return NULL;
		if (L->n_toks)
			memcpy(p, L->toks, sizeof(jtok) * (size_t) L->n_toks);
		L->toks = p;
		L->cap = cap;
	}
	t = &L->toks[L->n_toks++];
	memset(t, 0, sizeof(*t));
	t->kind = (uint8_t) kind;
	t->line = line;
	t->col = col;
	return t;
}

static void
advance(lexer *L, size_t k)
{
	while (k-- > 0 && L->p < L->n)
	{
		if (L->s[L->p] == '\n')
		{
			L->line++;
			L->col = 1;
		}
		else if (((unsigned char) L->s[L->p] & 0xC0) != 0x80)
			L->col++;
		L->p++;
	}
}

static bool
is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* Append one UTF-8 code point. */
static size_t
put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80)
	{
		o[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		o[0] = (char) (0xC0 | (cp >> 6));
		o[1] = (char) (0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000)
	{
		o[0] = (char) (0xE0 | (cp >> 12));
		o[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char) (0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char) (0xF0 | (cp >> 18));
	o[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}

static int
hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* A quoted string at L->p: decoded with Python's escapes. */
static int
lex_string(lexer *L)
{
	char		q = L->s[L->p];
	int			line = L->line,
				col = L->col;
	size_t		i = L->p + 1;
	char	   *o;
	size_t		w = 0;
	jtok	   *t;

	o = ja_alloc(L->a, L->n - L->p + 1);
	if (o == NULL)
		return lex_err(L, line, col, "%s", "out of memory");
	while (i < L->n && L->s[i] != q)
	{
		char		ch = L->s[i];

		if (ch == '\\' && i + 1 < L->n)
		{
			char		e = L->s[i + 1];
			int			nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;

			if (nhex > 0)
			{
				uint32_t	cp = 0;
				bool		ok = i + 2 + (size_t) nhex <= L->n;

				for (int k = 0; ok && k < nhex; k++)
				{
					int			h = hexval(L->s[i + 2 + k]);

					ok = h >= 0;
					cp = cp * 16 + (uint32_t) (h < 0 ? 0 : h);
				}
				if (!ok)
					return lex_err(L, line, col, "%s", "bad escape in string literal");
				w += put_utf8(o + w, cp);
				i += 2 + (size_t) nhex;
				continue;
			}
			i += 2;
			switch (e)
			{
				case 'n': o[w++] = '\n'; break;
				case 't': o[w++] = '\t'; break;
				case 'r': o[w++] = '\r'; break;
				case '0': o[w++] = '\0'; break;
				case 'a': o[w++] = '\a'; break;
				case 'b': o[w++] = '\b'; break;
				case 'f': o[w++] = '\f'; break;
				case 'v': o[w++] = '\v'; break;
				case '\\': o[w++] = '\\'; break;
				case '\'': o[w++] = '\''; break;
				case '"': o[w++] = '"'; break;
				case '\n': break;
				default:
					o[w++] = '\\';
					o[w++] = e;
			}
			continue;
		}
		o[w++] = ch;
		i++;
	}
	if (i >= L->n)
		return lex_err(L, line, col, "%s", "unterminated string literal");
	t = push(L, JT_STRING, line, col);
	if (t == NULL)
		return lex_err(L, line, col, "%s", "out of memory");
	t->s = o;
	t->n = w;
	advance(L, i + 1 - L->p);
	return 0;
}

static const char *const ops[] = {
	"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")",
	"[", "]", "{", "}", ",", ".", ":", "|", ";", NULL
};

/*
 * The inside of a tag up to its end marker (end: "}}" or "%}").  Sets
 * *strip_after ('-' strips all whitespace after, '+' keeps, 0 default).
 */
static int
lex_tag(lexer *L, const char *end, int end_kind, char *strip_after)
{
	int			depth = 0;

	for (;;)
	{
		char		ch;
		int			line,
					col;

		while (L->p < L->n && is_space(L->s[L->p]))
			advance(L, 1);
		if (L->p >= L->n)
			return lex_err(L, L->line, L->col, "unexpected end of template, expected '%s'", end);
		ch = L->s[L->p];
		line = L->line;
		col = L->col;
		if (depth == 0)
		{
			/* "-%}", "+%}", "%}" (and the same with "}}") */
			size_t		k = L->p;
			char		mod = 0;

			if ((ch == '-' || ch == '+') && k + 1 < L->n && L->s[k + 1] == end[0])
			{
				mod = ch;
				k++;
			}
			if (k + 1 < L->n && L->s[k] == end[0] && L->s[k + 1] == end[1] &&
				(mod != '+' || end_kind == JT_BLOCK_END))
			{
				if (push(L, end_kind, line, col) == NULL)
					return lex_err(L, line, col, "%s", "out of memory");
				advance(L, k + 2 - L->p);
				*strip_after = mod;
				return 0;
			}
		}
		if (ch == '\'' || ch == '"')
		{
			if (lex_string(L) != 0)
				return -1;
			continue;
		}
		if ((ch >= '0' && ch <= '9'))
		{
			size_t		k = L->p;
			bool		is_float = false;
			char		buf[64];
			size_t		w = 0;
			jtok	   *t;

			while (k < L->n && ((L->s[k] >= '0' && L->s[k] <= '9') || L->s[k] == '_'))
				k++;
			if (k + 1 < L->n && L->s[k] == '.' && L->s[k + 1] >= '0' && L->s[k + 1] <= '9')
			{
				is_float = true;
				k++;
				while (k < L->n && L->s[k] >= '0' && L->s[k] <= '9')
					k++;
			}
			if (k < L->n && (L->s[k] == 'e' || L->s[k] == 'E'))
			{
				size_t		e = k + 1;

				if (e < L->n && (L->s[e] == '+' || L->s[e] == '-'))
					e++;
				if (e < L->n && L->s[e] >= '0' && L->s[e] <= '9')
				{
					is_float = true;
					k = e;
					while (k < L->n && L->s[k] >= '0' && L->s[k] <= '9')
						k++;
				}
			}
			for (size_t j = L->p; j < k && w + 1 < sizeof(buf); j++)
				if (L->s[j] != '_')
					buf[w++] = L->s[j];
			buf[w] = '\0';
			t = push(L, is_float ? JT_FLOAT : JT_INT, line, col);
			if (t == NULL)
				return lex_err(L, line, col, "%s", "out of memory");
			if (is_float)
				t->f = strtod(buf, NULL);
			else
				t->i = strtoll(buf, NULL, 10);
			advance(L, k - L->p);
			continue;
		}
		if (ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))
		{
			size_t		k = L->p;
			jtok	   *t;

			while (k < L->n && (L->s[k] == '_' || (L->s[k] >= 'a' && L->s[k] <= 'z') ||
								(L->s[k] >= 'A' && L->s[k] <= 'Z') || (L->s[k] >= '0' && L->s[k] <= '9')))
				k++;
			t = push(L, JT_NAME, line, col);
			if (t == NULL)
				return lex_err(L, line, col, "%s", "out of memory");
			{
				char	   *nm = ja_alloc(L->a, k - L->p + 1);

				if (nm == NULL)
					return lex_err(L, line, col, "%s", "out of memory");
				memcpy(nm, L->s + L->p, k - L->p);
				t->s = nm;
				t->n = k - L->p;
			}
			advance(L, k - L->p);
			continue;
		}
		for (int o = 0;; o++)
		{
			size_t		ol;
			jtok	   *t;

			if (ops[o] == NULL)
			{
				char		bad[8] = {ch, 0};

				return lex_err(L, line, col, "unexpected character '%s' in tag", bad);
			}
			ol = strlen(ops[o]);
			if (L->p + ol > L->n || memcmp(L->s + L->p, ops[o], ol) != 0)
				continue;
			if (ops[o][0] == '(' || ops[o][0] == '[' || ops[o][0] == '{')
				depth++;
			else if (ops[o][0] == ')' || ops[o][0] == ']' || ops[o][0] == '}')
			{
				if (depth == 0)
					return lex_err(L, line, col, "unexpected '%s'", ops[o]);
				depth--;
			}
			t = push(L, JT_OP, line, col);
			if (t == NULL)
				return lex_err(L, line, col, "%s", "out of memory");
			t->s = ops[o];
			t->n = ol;
			advance(L, ol);
			break;
		}
	}
}

/* Normalise line endings and drop one trailing newline, as jinja2's splitlines/join does. */
static char *
normalise(jarena *a, const char *src, size_t len, size_t *out_len)
{
	char	   *o = ja_alloc(a, len + 1);
	size_t		w = 0;

	if (o == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
	{
		if (src[i] == '\r')
		{
			o[w++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		}
		else
			o[w++] = src[i];
	}
	if (w > 0 && o[w - 1] == '\n')
		w--;
	o[w] = '\0';
	*out_len = w;
	return o;
}

int
jlex(jarena *a, const char *src, size_t len, jtok **toks, int *n_toks, char *err, size_t errlen)
{
	lexer		L;
	char		strip_after = 0;	/* of the previous tag */
	bool		trim_nl = false;	/* the previous tag was a block/comment without modifier */
	bool		line_starting = true;

	memset(&L, 0, sizeof(L));
	L.a = a;
	L.err = err;
	L.errlen = errlen;
	L.s = normalise(a, src, len, &L.n);
	L.line = 1;
	L.col = 1;
	if (L.s == NULL)
		return lex_err(&L, 1, 1, "%s", "out of memory");

	while (L.p < L.n)
	{
		size_t		start = L.p,
					k = L.p,
					end;
		int			dline,
					dcol;
		char		kind = 0;	/* '{', '%', '#' */
		char		mod = 0;

		/* whitespace the previous tag removes */
		if (strip_after == '-')
			while (L.p < L.n && is_space(L.s[L.p]))
			{
				line_starting = L.s[L.p] == '\n';
				advance(&L, 1);
			}
		else if (trim_nl && L.p < L.n && L.s[L.p] == '\n')
		{
			advance(&L, 1);
			line_starting = true;
		}
		strip_after = 0;
		trim_nl = false;
		start = k = L.p;
		dline = L.line;
		dcol = L.col;
		/* the next tag */
		while (k + 1 < L.n && !(L.s[k] == '{' && (L.s[k + 1] == '{' || L.s[k + 1] == '%' || L.s[k + 1] == '#')))
			k++;
		if (k + 1 >= L.n)
			k = L.n;
		else
		{
			kind = L.s[k + 1];
			if (k + 2 < L.n && (L.s[k + 2] == '-' || L.s[k + 2] == '+'))
				mod = L.s[k + 2];
		}
		end = k;
		if (kind != 0)
		{
			if (mod == '-')
				while (end > start && is_space(L.s[end - 1]))
					end--;
			else if (mod != '+' && kind != '{')
			{
				/* lstrip_blocks: only spaces between the line's start and the tag */
				size_t		l = end;

				while (l > start && L.s[l - 1] != '\n')
					l--;
				if (l > start || line_starting)
				{
					bool		ws = true;

					for (size_t j = l; j < end; j++)
						ws = ws && is_space(L.s[j]);
					if (ws)
						end = l;
				}
			}
		}
		if (end > start)
		{
			jtok	   *t = push(&L, JT_DATA, dline, dcol);

			if (t == NULL)
				return lex_err(&L, dline, dcol, "%s", "out of memory");
			t->s = L.s + start;
			t->n = end - start;
		}
		advance(&L, k - L.p);
		if (kind == 0)
			break;
		{
			int			tline = L.line,
						tcol = L.col;

			advance(&L, (mod == '-' || mod == '+') ? 3 : 2);
			if (kind == '#')
			{
				/* a comment: to "#}", with its own modifiers */
				size_t		c = L.p;

				while (c + 1 < L.n && !(L.s[c] == '#' && L.s[c + 1] == '}'))
					c++;
				if (c + 1 >= L.n)
					return lex_err(&L, tline, tcol, "%s", "unterminated comment");
				strip_after = c > L.p && (L.s[c - 1] == '-' || L.s[c - 1] == '+') ? L.s[c - 1] : 0;
				trim_nl = strip_after == 0;
				advance(&L, c + 2 - L.p);
				line_starting = false;
				continue;
			}
			if (push(&L, kind == '{' ? JT_VAR_BEGIN : JT_BLOCK_BEGIN, tline, tcol) == NULL)
				return lex_err(&L, tline, tcol, "%s", "out of memory");
			if (kind == '%')
			{
				/* {% raw %} ... {% endraw %}: the text as it is */
				size_t		q = L.p;

				while (q < L.n && is_space(L.s[q]))
					q++;
				if (q + 3 <= L.n && memcmp(L.s + q, "raw", 3) == 0 &&
					(q + 3 == L.n || !((L.s[q + 3] >= 'a' && L.s[q + 3] <= 'z') || L.s[q + 3] == '_')))
					return lex_err(&L, tline, tcol, "%s", "unsupported tag 'raw'");
			}
			if (lex_tag(&L, kind == '{' ? "}}" : "%}", kind == '{' ? JT_VAR_END : JT_BLOCK_END,
						&strip_after) != 0)
				return -1;
			trim_nl = kind == '%' && strip_after == 0;
			line_starting = false;
		}
	}
	if (push(&L, JT_EOF, L.line, L.col) == NULL)
		return lex_err(&L, L.line, L.col, "%s", "out of memory");
	*toks = L.toks;
	*n_toks = L.n_toks;
	return 0;
}
