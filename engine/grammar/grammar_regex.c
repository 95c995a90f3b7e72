/*
 * grammar_regex.c — the regex subset of grammar.h parsed into a grammar
 * tree, and llm_grammar_compile_regex.
 *
 * Recursive descent: alternation of concatenations of quantified atoms.
 * Every construct outside the subset is an error naming it and its byte
 * offset, never a silent different meaning.  The same parser reads a JSON
 * schema's "pattern" (json_string): its characters then become their
 * canonical escaped form inside a JSON string (g_json_chars).
 */
#include "grammar_impl.h"
#include "engine/util/text_util.h"
#include "engine/util/utf8_encode.h"

#include <stdio.h>
#include <string.h>

typedef struct rparser
{
	gctx	   *c;
	const uint8_t *s;
	size_t		n,
				pos;
	int			depth;
	bool		json;
} rparser;

static bool
rfail(rparser *p, size_t at, llm_grammar_status st, const char *what)
{
	return gctx_fail(p->c, st, "%s at offset %zu", what, at);
}

static bool
at_end(const rparser *p)
{
	return p->pos >= p->n;
}

static int
peek(const rparser *p)
{
	return p->pos < p->n ? p->s[p->pos] : -1;
}

/* Decode one UTF-8 character at pos (the pattern is valid UTF-8). */
static uint32_t
next_char(rparser *p)
{
	const uint8_t *s = p->s + p->pos;
	uint32_t	cp;
	int			len;

	if (s[0] < 0x80)
	{
		p->pos++;
		return s[0];
	}
	if (s[0] < 0xE0)
		cp = s[0] & 0x1F, len = 2;
	else if (s[0] < 0xF0)
		cp = s[0] & 0x0F, len = 3;
	else
		cp = s[0] & 0x07, len = 4;
	for (int i = 1; i < len; i++)
		cp = (cp << 6) | (s[i] & 0x3F);
	p->pos += len;
	return cp;
}

static int
hexdig(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* n hex digits at pos (advanced past them), or -1. */
static int32_t
hex_digits(rparser *p, int n)
{
	int32_t		v = 0;

	if (p->pos + n > p->n)
		return -1;
	for (int i = 0; i < n; i++)
	{
		int			d = hexdig(p->s[p->pos + i]);

		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	p->pos += n;
	return v;
}

static bool
add_shorthand(rparser *p, gcpset *set, int letter)
{
	gcpset		t = {0},
				comp;
	int			lower = letter | 0x20;

	switch (lower)
	{
		case 'd':
			if (!gcpset_add(p->c, &t, '0', '9'))
				return false;
			break;
		case 'w':
			if (!gcpset_add(p->c, &t, '0', '9') || !gcpset_add(p->c, &t, 'A', 'Z') ||
				!gcpset_add(p->c, &t, 'a', 'z') || !gcpset_add(p->c, &t, '_', '_'))
				return false;
			break;
		default:				/* 's' */
			if (!gcpset_add(p->c, &t, '\t', '\r') || !gcpset_add(p->c, &t, ' ', ' '))
				return false;
			break;
	}
	if (letter == lower)
		return gcpset_add_set(p->c, set, &t);
	if (!gcpset_complement(p->c, &t, &comp))
		return false;
	return gcpset_add_set(p->c, set, &comp);
}

typedef enum esc_kind
{
	ESC_FAIL = 0,
	ESC_CHAR,
	ESC_SET
} esc_kind;

/*
 * An escape at pos (the backslash): a character into *cp or a shorthand
 * class added to *set.
 */
static esc_kind
parse_escape(rparser *p, uint32_t *cp, gcpset *set)
{
	size_t		at = p->pos;
	int			c;

	p->pos++;
	if (at_end(p))
		return rfail(p, at, LLM_GRAMMAR_INVALID, "trailing backslash"), ESC_FAIL;
	c = p->s[p->pos];
	if (c >= 0x80)
		return rfail(p, at, LLM_GRAMMAR_INVALID, "escape of a non-ASCII character"), ESC_FAIL;
	p->pos++;
	switch (c)
	{
		case 'n':
			*cp = '\n';
			return ESC_CHAR;
		case 't':
			*cp = '\t';
			return ESC_CHAR;
		case 'r':
			*cp = '\r';
			return ESC_CHAR;
		case 'f':
			*cp = '\f';
			return ESC_CHAR;
		case 'v':
			*cp = '\v';
			return ESC_CHAR;
		case '0':
			if (peek(p) >= '0' && peek(p) <= '9')
				return rfail(p, at, LLM_GRAMMAR_INVALID, "octal escape is not supported"), ESC_FAIL;
			*cp = 0;
			return ESC_CHAR;
		case 'x':
			{
				int32_t		v;

				if (peek(p) == '{')
				{
					size_t		close;

					p->pos++;
					close = p->pos;
					while (close < p->n && hexdig(p->s[close]) >= 0 && close - p->pos < 6)
						close++;
					if (close == p->pos || close >= p->n || p->s[close] != '}')
						return rfail(p, at, LLM_GRAMMAR_INVALID, "bad \\x{...} escape"), ESC_FAIL;
					v = hex_digits(p, (int) (close - p->pos));
					p->pos++;
				}
				else
					v = hex_digits(p, 2);
				if (v < 0)
					return rfail(p, at, LLM_GRAMMAR_INVALID, "bad \\x escape (two hex digits expected)"), ESC_FAIL;
				if (v > G_MAX_CP || (v >= 0xD800 && v <= 0xDFFF))
					return rfail(p, at, LLM_GRAMMAR_INVALID, "\\x escape is not a Unicode scalar value"), ESC_FAIL;
				*cp = (uint32_t) v;
				return ESC_CHAR;
			}
		case 'u':
			{
				int32_t		v = hex_digits(p, 4);

				if (v < 0)
					return rfail(p, at, LLM_GRAMMAR_INVALID, "bad \\u escape (four hex digits expected)"), ESC_FAIL;
				if (v >= 0xDC00 && v <= 0xDFFF)
					return rfail(p, at, LLM_GRAMMAR_INVALID, "lone low surrogate \\u escape"), ESC_FAIL;
				if (v >= 0xD800 && v <= 0xDBFF)
				{
					int32_t		lo = -1;

					if (p->pos + 1 < p->n && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u')
					{
						p->pos += 2;
						lo = hex_digits(p, 4);
					}
					if (lo < 0xDC00 || lo > 0xDFFF)
						return rfail(p, at, LLM_GRAMMAR_INVALID, "lone high surrogate \\u escape"), ESC_FAIL;
					v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
				}
				*cp = (uint32_t) v;
				return ESC_CHAR;
			}
		case 'd':
		case 'D':
		case 'w':
		case 'W':
		case 's':
		case 'S':
			return add_shorthand(p, set, c) ? ESC_SET : ESC_FAIL;
		case 'b':
		case 'B':
			return rfail(p, at, LLM_GRAMMAR_INVALID, "word boundary \\b/\\B is not supported"), ESC_FAIL;
		case 'A':
		case 'z':
		case 'Z':
		case 'G':
			return rfail(p, at, LLM_GRAMMAR_INVALID,
						 "anchor escape is not supported (the pattern is anchored at both ends)"), ESC_FAIL;
		case 'p':
		case 'P':
			return rfail(p, at, LLM_GRAMMAR_INVALID, "Unicode property class \\p/\\P is not supported"), ESC_FAIL;
		case 'k':
		case 'g':
			return rfail(p, at, LLM_GRAMMAR_INVALID, "backreference is not supported"), ESC_FAIL;
		default:
			break;
	}
	if (c >= '1' && c <= '9')
		return rfail(p, at, LLM_GRAMMAR_INVALID, "backreference is not supported"), ESC_FAIL;
	if ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
		(c >= 0x7B && c <= 0x7E))
	{
		*cp = (uint32_t) c;
		return ESC_CHAR;
	}
	{
		char		msg[64];

		snprintf(msg, sizeof(msg), "unknown escape \\%c", c >= 0x20 && c < 0x7F ? c : '?');
		rfail(p, at, LLM_GRAMMAR_INVALID, msg);
	}
	return ESC_FAIL;
}

/* One character of a class (literal or escape) at pos; ESC_SET for a shorthand. */
static esc_kind
class_item(rparser *p, uint32_t *cp, gcpset *set)
{
	if (peek(p) == '\\')
		return parse_escape(p, cp, set);
	if (peek(p) == '[' && p->pos + 1 < p->n && p->s[p->pos + 1] == ':')
		return rfail(p, p->pos, LLM_GRAMMAR_INVALID, "POSIX class [:...:] is not supported"), ESC_FAIL;
	*cp = next_char(p);
	return ESC_CHAR;
}

static gnode *
char_node(rparser *p, const gcpset *set)
{
	return p->json ? g_json_chars(p->c, set) : g_class(p->c, set);
}

static gnode *
literal_node(rparser *p, uint32_t cp)
{
	uint8_t		b[4];
	int			n = llm_utf8_encode(cp, b);

	return p->json ? g_json_chars_lit(p->c, b, n) : g_bytes(p->c, b, n);
}

static gnode *
parse_class(rparser *p)
{
	size_t		open = p->pos;
	gcpset		set = {0};
	bool		negate = false;
	bool		first = true;

	p->pos++;
	if (peek(p) == '^')
	{
		negate = true;
		p->pos++;
	}
	for (;;)
	{
		uint32_t	lo,
					hi;
		esc_kind	k;
		size_t		item_at = p->pos;

		if (at_end(p))
			return rfail(p, open, LLM_GRAMMAR_INVALID, "missing ] for the class"), NULL;
		if (peek(p) == ']' && !first)
		{
			p->pos++;
			break;
		}
		first = false;
		k = class_item(p, &lo, &set);
		if (k == ESC_FAIL)
			return NULL;
		/* a range lo-hi unless '-' is last */
		if (peek(p) == '-' && p->pos + 1 < p->n && p->s[p->pos + 1] != ']')
		{
			size_t		dash = p->pos;

			p->pos++;
			if (k == ESC_SET)
				return rfail(p, dash, LLM_GRAMMAR_INVALID, "range with a class shorthand as its start"), NULL;
			k = class_item(p, &hi, &set);
			if (k == ESC_FAIL)
				return NULL;
			if (k == ESC_SET)
				return rfail(p, dash, LLM_GRAMMAR_INVALID, "range with a class shorthand as its end"), NULL;
			if (lo > hi)
				return rfail(p, item_at, LLM_GRAMMAR_INVALID, "class range out of order"), NULL;
			if (!gcpset_add(p->c, &set, lo, hi))
				return NULL;
			continue;
		}
		if (k == ESC_CHAR && !gcpset_add(p->c, &set, lo, lo))
			return NULL;
	}
	if (negate)
	{
		gcpset		comp;

		if (!gcpset_complement(p->c, &set, &comp))
			return NULL;
		return char_node(p, &comp);
	}
	return char_node(p, &set);
}

/* {m}, {m,}, {m,n} at pos: true and the counts, or false (error recorded when malformed). */
static bool
parse_count(rparser *p, int32_t *min, int32_t *max)
{
	size_t		at = p->pos;
	int64_t		a = 0,
				b = -1;
	bool		digits = false;

	p->pos++;
	while (peek(p) >= '0' && peek(p) <= '9')
	{
		a = a * 10 + (p->s[p->pos++] - '0');
		digits = true;
		if (a > 1000000000)
			a = 1000000000;
	}
	if (!digits)
		return rfail(p, at, LLM_GRAMMAR_INVALID,
					 "'{' must start a counted repetition {m}, {m,} or {m,n} (escape a literal as \\{)");
	if (peek(p) == ',')
	{
		p->pos++;
		if (peek(p) >= '0' && peek(p) <= '9')
		{
			b = 0;
			while (peek(p) >= '0' && peek(p) <= '9')
			{
				b = b * 10 + (p->s[p->pos++] - '0');
				if (b > 1000000000)
					b = 1000000000;
			}
		}
	}
	else
		b = a;
	if (peek(p) != '}')
		return rfail(p, at, LLM_GRAMMAR_INVALID,
					 "'{' must start a counted repetition {m}, {m,} or {m,n} (escape a literal as \\{)");
	p->pos++;
	if (b >= 0 && b < a)
		return rfail(p, at, LLM_GRAMMAR_INVALID, "counted repetition {m,n} with n < m");
	if (a > LLM_GRAMMAR_MAX_REPEAT || b > LLM_GRAMMAR_MAX_REPEAT)
	{
		gctx_fail(p->c, LLM_GRAMMAR_TOO_LARGE, "repetition count over the limit %d at offset %zu",
				  LLM_GRAMMAR_MAX_REPEAT, at);
		return false;
	}
	*min = (int32_t) a;
	*max = (int32_t) b;
	return true;
}

static bool
is_quant(int c)
{
	return c == '*' || c == '+' || c == '?' || c == '{';
}

static gnode *parse_alt(rparser *p);

static gnode *
parse_atom(rparser *p)
{
	int			c = peek(p);
	size_t		at = p->pos;

	switch (c)
	{
		case '(':
			{
				gnode	   *g;

				p->pos++;
				if (peek(p) == '?')
				{
					if (p->pos + 1 < p->n && p->s[p->pos + 1] == ':')
						p->pos += 2;
					else
					{
						const char *what = "group flags (?...) are not supported";

						if (p->pos + 1 < p->n)
						{
							uint8_t		d = p->s[p->pos + 1];
							uint8_t		e = p->pos + 2 < p->n ? p->s[p->pos + 2] : 0;

							if (d == '=' || d == '!')
								what = "lookahead (?= / (?! is not supported";
							else if (d == '<' && (e == '=' || e == '!'))
								what = "lookbehind (?<= / (?<! is not supported";
							else if (d == '<' || d == 'P' || d == '\'')
								what = "named group is not supported (use (?:...) or (...))";
							else if (d == '>')
								what = "atomic group (?> is not supported";
						}
						return rfail(p, at, LLM_GRAMMAR_INVALID, what), NULL;
					}
				}
				if (++p->depth > LLM_GRAMMAR_MAX_DEPTH)
				{
					gctx_fail(p->c, LLM_GRAMMAR_TOO_LARGE, "groups nested deeper than %d at offset %zu",
							  LLM_GRAMMAR_MAX_DEPTH, at);
					return NULL;
				}
				g = parse_alt(p);
				if (g == NULL)
					return NULL;
				if (peek(p) != ')')
					return rfail(p, at, LLM_GRAMMAR_INVALID, "missing ) for the group"), NULL;
				p->pos++;
				p->depth--;
				return g;
			}
		case '[':
			return parse_class(p);
		case '.':
			{
				gcpset		set = {0};

				p->pos++;
				if (!gcpset_add(p->c, &set, 0, '\n' - 1) || !gcpset_add(p->c, &set, '\n' + 1, G_MAX_CP))
					return NULL;
				return char_node(p, &set);
			}
		case '\\':
			{
				uint32_t	cp;
				gcpset		set = {0};
				esc_kind	k = parse_escape(p, &cp, &set);

				if (k == ESC_FAIL)
					return NULL;
				if (k == ESC_SET)
					return char_node(p, &set);
				return literal_node(p, cp);
			}
		case '*':
		case '+':
		case '?':
			return rfail(p, at, LLM_GRAMMAR_INVALID, "quantifier with nothing to repeat"), NULL;
		case '{':
			{
				int32_t		a,
							b;

				if (parse_count(p, &a, &b))
					rfail(p, at, LLM_GRAMMAR_INVALID, "quantifier with nothing to repeat");
				return NULL;
			}
		case '^':
			return rfail(p, at, LLM_GRAMMAR_INVALID,
						 "anchor ^ inside the pattern is not supported (the pattern is anchored at both ends)"), NULL;
		case '$':
			return rfail(p, at, LLM_GRAMMAR_INVALID,
						 "anchor $ inside the pattern is not supported (the pattern is anchored at both ends)"), NULL;
		default:
			return literal_node(p, next_char(p));
	}
}

static gnode *
parse_quantified(rparser *p)
{
	gnode	   *g = parse_atom(p);
	int32_t		min,
				max;
	size_t		at = p->pos;
	int			c = peek(p);

	if (g == NULL || !is_quant(c))
		return g;
	if (c == '{')
	{
		if (!parse_count(p, &min, &max))
			return NULL;
	}
	else
	{
		p->pos++;
		min = c == '+' ? 1 : 0;
		max = c == '?' ? 1 : -1;
	}
	if (peek(p) == '?')
		return rfail(p, p->pos, LLM_GRAMMAR_INVALID, "lazy quantifier is not supported"), NULL;
	if (peek(p) == '+')
		return rfail(p, p->pos, LLM_GRAMMAR_INVALID, "possessive quantifier is not supported"), NULL;
	if (is_quant(peek(p)))
		return rfail(p, p->pos, LLM_GRAMMAR_INVALID, "quantifier after a quantifier (group the first: (a*)*)"), NULL;
	(void) at;
	return g_repeat(p->c, g, min, max);
}

static gnode *
parse_cat(rparser *p)
{
	gnode_list	l = {0};

	while (!at_end(p) && peek(p) != '|' && peek(p) != ')')
	{
		/* a trailing $ is the end anchor, redundant here */
		if (peek(p) == '$' && p->pos + 1 == p->n)
		{
			p->pos++;
			break;
		}
		if (!gnode_list_push(p->c, &l, parse_quantified(p)))
			return NULL;
	}
	return g_cat(p->c, l.v, l.n);
}

static gnode *
parse_alt(rparser *p)
{
	gnode_list	l = {0};

	for (;;)
	{
		if (!gnode_list_push(p->c, &l, parse_cat(p)))
			return NULL;
		if (peek(p) != '|')
			break;
		p->pos++;
	}
	return g_alt(p->c, l.v, l.n);
}

gnode *
g_parse_regex(gctx *c, const char *pattern, size_t len, bool json_string)
{
	rparser		p = {c, (const uint8_t *) pattern, len, 0, 0, json_string};
	size_t		bad = llm_utf8_first_invalid(pattern, len);
	gnode	   *g;

	if (bad != len)
	{
		gctx_fail(c, LLM_GRAMMAR_INVALID, "pattern is not valid UTF-8 at offset %zu", bad);
		return NULL;
	}
	if (len > LLM_GRAMMAR_MAX_SOURCE)
	{
		gctx_fail(c, LLM_GRAMMAR_TOO_LARGE, "pattern longer than %d bytes", LLM_GRAMMAR_MAX_SOURCE);
		return NULL;
	}
	/* a leading ^ is the start anchor, redundant here */
	if (peek(&p) == '^')
		p.pos++;
	g = parse_alt(&p);
	if (g == NULL)
		return NULL;
	if (!at_end(&p))
	{
		rfail(&p, p.pos, LLM_GRAMMAR_INVALID, "unmatched )");
		return NULL;
	}
	return g;
}

llm_grammar_status
llm_grammar_compile_regex(const char *pattern, size_t len, llm_grammar **out, char *err, size_t errlen)
{
	gctx		c;
	gnode	   *g;
	char	   *src;
	llm_grammar_status st;

	*out = NULL;
	gctx_init(&c, err, errlen);
	c.where = "regex";
	g = g_parse_regex(&c, pattern, len, false);
	src = g ? gctx_alloc(&c, len + 1) : NULL;
	if (src)
	{
		src[0] = (char) LLM_GRAMMAR_REGEX;
		memcpy(src + 1, pattern, len);
		g_finish(&c, g, LLM_GRAMMAR_REGEX, src, len + 1, out);
	}
	st = c.status;
	gctx_done(&c);
	return st;
}
