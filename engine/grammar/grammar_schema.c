/*
 * grammar_schema.c — the JSON-schema subset of grammar.h compiled to a
 * grammar tree of its compact canonical JSON text, and
 * llm_grammar_compile_json_schema.
 *
 * Each schema level is checked keyword by keyword against one table (what
 * the keyword applies to, or that it is an annotation); anything else is an
 * error naming the keyword and its JSON path.  Strings are built at the
 * character level (g_json_chars, grammar_tree.c: raw characters, or their one canonical
 * escape); several constraints on one string value (pattern, format,
 * minLength/maxLength) are compiled to DFAs and intersected.
 */
#include "grammar_impl.h"
#include "json_min.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN	1024
#define MAX_OWNED_DFAS	4096

typedef struct sparser
{
	gctx	   *c;
	char		path[PATH_MAX_LEN];
	size_t		path_len;
	gdfa	  **owned;			/* DFAs embedded in the tree, freed with the compile */
	int32_t		n_owned;
} sparser;

/* ---------- paths and errors ---------- */

/* Append seg to the path (truncated when too long); returns the length to restore. */
static size_t
path_push(sparser *sp, const char *seg)
{
	size_t		old = sp->path_len;
	size_t		n = strlen(seg);

	if (n > PATH_MAX_LEN - 1 - old)
		n = PATH_MAX_LEN - 1 - old;
	memcpy(sp->path + old, seg, n);
	sp->path_len = old + n;
	sp->path[sp->path_len] = '\0';
	return old;
}

static void
path_pop(sparser *sp, size_t old)
{
	sp->path_len = old;
	sp->path[old] = '\0';
}

/* Fail with "$.path: message"; keyword, when given, is appended to the path. */
static bool
sfail(sparser *sp, llm_grammar_status st, const char *keyword, const char *fmt, const char *arg)
{
	char		msg[512];

	snprintf(msg, sizeof(msg), fmt, arg ? arg : "");
	if (keyword)
		return gctx_fail(sp->c, st, "%s.%s: %s", sp->path, keyword, msg);
	return gctx_fail(sp->c, st, "%s: %s", sp->path, msg);
}

/* ---------- keywords ---------- */

#define T_STRING	(1 << 0)
#define T_INTEGER	(1 << 1)
#define T_NUMBER	(1 << 2)
#define T_BOOLEAN	(1 << 3)
#define T_NULL		(1 << 4)
#define T_OBJECT	(1 << 5)
#define T_ARRAY		(1 << 6)
#define T_ALL		0x7F
#define K_ANNOTATION	(1 << 8)
#define K_GENERAL		(1 << 9)	/* type, enum, const, anyOf */

typedef struct keyword
{
	const char *name;
	int			applies;
} keyword;

static const keyword keywords[] = {
	{"type", K_GENERAL}, {"enum", K_GENERAL}, {"const", K_GENERAL}, {"anyOf", K_GENERAL},
	{"properties", T_OBJECT}, {"required", T_OBJECT}, {"additionalProperties", T_OBJECT},
	{"items", T_ARRAY}, {"minItems", T_ARRAY}, {"maxItems", T_ARRAY},
	{"minLength", T_STRING}, {"maxLength", T_STRING}, {"pattern", T_STRING}, {"format", T_STRING},
	{"minimum", T_INTEGER | T_NUMBER}, {"maximum", T_INTEGER | T_NUMBER},
	{"exclusiveMinimum", T_INTEGER | T_NUMBER}, {"exclusiveMaximum", T_INTEGER | T_NUMBER},
	{"title", K_ANNOTATION}, {"description", K_ANNOTATION}, {"$schema", K_ANNOTATION},
	{"$id", K_ANNOTATION}, {"$comment", K_ANNOTATION}, {"default", K_ANNOTATION},
	{"examples", K_ANNOTATION}, {"deprecated", K_ANNOTATION}, {"readOnly", K_ANNOTATION},
	{"writeOnly", K_ANNOTATION}, {"$defs", K_ANNOTATION}, {"definitions", K_ANNOTATION},
};

/* The keyword spelled exactly name[0..len) (a decoded key may hold U+0000), or NULL. */
static const keyword *
find_keyword(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (strlen(keywords[i].name) == len && memcmp(keywords[i].name, name, len) == 0)
			return &keywords[i];
	return NULL;
}

static const struct
{
	const char *name;
	int			bit;
}			type_names[] = {
	{"string", T_STRING}, {"integer", T_INTEGER}, {"number", T_NUMBER}, {"boolean", T_BOOLEAN},
	{"null", T_NULL}, {"object", T_OBJECT}, {"array", T_ARRAY},
};

static int
type_bit(const llm_json *v)
{
	if (v->type != LLM_JSON_STRING)
		return 0;
	for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (strcmp(type_names[i].name, v->text) == 0)
			return type_names[i].bit;
	return 0;
}

/* ---------- numbers of the schema ---------- */

typedef __int128 i128;

#define I128_SAT	((i128) 1 << 100)

/*
 * Floor and ceiling of a JSON number's exact decimal value (saturated at
 * +-2^100, far outside every range used here) and whether it is integral.
 * The text is valid JSON number syntax (json_min checked it).
 */
static void
decimal_floor_ceil(const char *t, i128 *floor_v, i128 *ceil_v, bool *integral)
{
	bool		neg = false,
				frac_nonzero = false,
				any_nonzero = false;
	const char *ip_s,
			   *fr_s = "";
	long		a = 0,
				b = 0,
				exp10 = 0,
				int_digits,
				nd;
	i128		ip = 0;

	if (*t == '-')
	{
		neg = true;
		t++;
	}
	ip_s = t;
	while (*t >= '0' && *t <= '9')
		t++, a++;
	if (*t == '.')
	{
		fr_s = ++t;
		while (*t >= '0' && *t <= '9')
			t++, b++;
	}
	if (*t == 'e' || *t == 'E')
	{
		exp10 = strtol(t + 1, NULL, 10);
		if (exp10 > 1000000)
			exp10 = 1000000;
		if (exp10 < -1000000)
			exp10 = -1000000;
	}
	nd = a + b;
	/* digit i of the mantissa ip_s fr_s, value = digits * 10^(exp10 - b) */
#define DIGIT(i) ((i) < a ? ip_s[i] - '0' : ((i) - a < b ? fr_s[(i) - a] - '0' : 0))
	for (long i = 0; i < nd; i++)
		any_nonzero |= DIGIT(i) != 0;
	if (!any_nonzero)
	{
		*floor_v = *ceil_v = 0;
		*integral = true;
		return;
	}
	int_digits = a + exp10;
	for (long i = 0; i < int_digits; i++)
	{
		if (ip > I128_SAT / 10)
		{
			ip = I128_SAT;
			break;
		}
		ip = ip * 10 + (i < nd ? DIGIT(i) : 0);
	}
	for (long i = int_digits < 0 ? 0 : int_digits; i < nd; i++)
		if (DIGIT(i) != 0)
			frac_nonzero = true;
#undef DIGIT
	*integral = !frac_nonzero;
	if (!neg)
	{
		*floor_v = ip;
		*ceil_v = ip + (frac_nonzero ? 1 : 0);
	}
	else
	{
		*ceil_v = -ip;
		*floor_v = -ip - (frac_nonzero ? 1 : 0);
	}
}

/* ---------- the compiler ---------- */

static gnode *schema_node(sparser *sp, const llm_json *s, int depth);

static const llm_json *
get_count(sparser *sp, const llm_json *s, const char *kw, int32_t *out, bool *present)
{
	const llm_json *v = llm_json_member(s, kw);
	i128		f,
				cl;
	bool		integral;

	*present = false;
	if (v == NULL)
		return NULL;
	if (v->type != LLM_JSON_NUMBER)
		return sfail(sp, LLM_GRAMMAR_INVALID, kw, "must be a non-negative integer", NULL), NULL;
	decimal_floor_ceil(v->text, &f, &cl, &integral);
	if (!integral || f < 0)
		return sfail(sp, LLM_GRAMMAR_INVALID, kw, "must be a non-negative integer", NULL), NULL;
	if (f > LLM_GRAMMAR_MAX_REPEAT)
	{
		char		lim[32];

		snprintf(lim, sizeof(lim), "%d", LLM_GRAMMAR_MAX_REPEAT);
		return sfail(sp, LLM_GRAMMAR_TOO_LARGE, kw, "over the limit %s", lim), NULL;
	}
	*out = (int32_t) f;
	*present = true;
	return v;
}

/*
 * A pair of counts such as minLength/maxLength: *min (0 when absent), *max
 * (-1 when absent); false when one is bad or max < min (accepts nothing).
 */
static bool
get_count_range(sparser *sp, const llm_json *s, const char *kmin, const char *kmax, int32_t *min, int32_t *max)
{
	bool		has_min,
				has_max;
	char		msg[96];

	*min = 0;
	*max = -1;
	if (!get_count(sp, s, kmin, min, &has_min) && gctx_failed(sp->c))
		return false;
	if (!get_count(sp, s, kmax, max, &has_max) && gctx_failed(sp->c))
		return false;
	if (!has_max)
		*max = -1;
	if (has_max && *max < *min)
	{
		snprintf(msg, sizeof(msg), "%s < %s: the schema accepts no value", kmax, kmin);
		return sfail(sp, LLM_GRAMMAR_INVALID, NULL, "%s", msg);
	}
	return true;
}

/* Compact text of a scalar enum/const value of an allowed type, or NULL (skipped) / failure. */
static bool
scalar_text(sparser *sp, const llm_json *v, int types, const char *kw, gnode_list *alts)
{
	size_t		n;
	char	   *buf;
	int			bit;

	switch (v->type)
	{
		case LLM_JSON_STRING:
			bit = T_STRING;
			break;
		case LLM_JSON_BOOL:
			bit = T_BOOLEAN;
			break;
		case LLM_JSON_NULL:
			bit = T_NULL;
			break;
		case LLM_JSON_NUMBER:
			{
				i128		f,
							cl;
				bool		integral;

				decimal_floor_ceil(v->text, &f, &cl, &integral);
				bit = T_NUMBER | (integral ? T_INTEGER : 0);
				break;
			}
		default:
			return sfail(sp, LLM_GRAMMAR_INVALID, kw, "values must be strings, numbers, booleans or null", NULL);
	}
	if (types && !(types & bit))
		return true;
	n = llm_json_write(v, NULL, 0);
	buf = gctx_alloc(sp->c, n);
	if (buf == NULL)
		return false;
	llm_json_write(v, buf, n);
	return gnode_list_push(sp->c, alts, g_bytes(sp->c, buf, n));
}

static gnode *
enum_node(sparser *sp, const llm_json *s, int types)
{
	const llm_json *e = llm_json_member(s, "enum");
	const llm_json *k = llm_json_member(s, "const");
	gnode_list	alts = {0};

	if (e && k)
		return sfail(sp, LLM_GRAMMAR_INVALID, NULL, "enum and const together are not supported", NULL), NULL;
	if (e)
	{
		if (e->type != LLM_JSON_ARRAY || e->n == 0)
			return sfail(sp, LLM_GRAMMAR_INVALID, "enum", "must be a non-empty array", NULL), NULL;
		for (int32_t i = 0; i < e->n; i++)
			if (!scalar_text(sp, e->items[i], types, "enum", &alts))
				return NULL;
	}
	else if (!scalar_text(sp, k, types, "const", &alts))
		return NULL;
	if (alts.n == 0)
		return sfail(sp, LLM_GRAMMAR_INVALID, e ? "enum" : "const",
					 "no value of the schema's type: the schema accepts no value", NULL), NULL;
	return g_alt(sp->c, alts.v, alts.n);
}

/* Lower and upper integral bounds of an integer or number schema. */
typedef struct bounds
{
	bool		has_lo,
				lo_excl,
				has_hi,
				hi_excl;
	i128		lo,
				hi;
} bounds;

static bool
read_bound(sparser *sp, const llm_json *s, const char *kw, bool integer, bool lower, bool excl, bounds *b)
{
	const llm_json *v = llm_json_member(s, kw);
	i128		f,
				cl,
				val;
	bool		integral,
				vexcl = excl;

	if (v == NULL)
		return true;
	if (v->type == LLM_JSON_BOOL && excl)
		return sfail(sp, LLM_GRAMMAR_INVALID, kw,
					 "must be a number (the draft-4 boolean form is not supported)", NULL);
	if (v->type != LLM_JSON_NUMBER)
		return sfail(sp, LLM_GRAMMAR_INVALID, kw, "must be a number", NULL);
	decimal_floor_ceil(v->text, &f, &cl, &integral);
	if (integral)
		val = f;
	else
	{
		/* tightened inward to an integer: an inclusive bound that admits the same integers */
		val = lower ? cl : f;
		vexcl = false;
	}
	if (integer && vexcl)
	{
		val += lower ? 1 : -1;
		vexcl = false;
	}
	if (!integer && (val > INT64_MAX || val < -INT64_MAX))
		return sfail(sp, LLM_GRAMMAR_INVALID, kw, "out of the supported range (|bound| < 2^63)", NULL);
	if (lower)
	{
		if (!b->has_lo || val > b->lo || (val == b->lo && vexcl))
		{
			b->lo = val;
			b->lo_excl = vexcl;
		}
		b->has_lo = true;
	}
	else
	{
		if (!b->has_hi || val < b->hi || (val == b->hi && vexcl))
		{
			b->hi = val;
			b->hi_excl = vexcl;
		}
		b->has_hi = true;
	}
	return true;
}

static gnode *
numeric_node(sparser *sp, const llm_json *s, bool integer)
{
	bounds		b = {0};

	if (!read_bound(sp, s, "minimum", integer, true, false, &b) ||
		!read_bound(sp, s, "exclusiveMinimum", integer, true, true, &b) ||
		!read_bound(sp, s, "maximum", integer, false, false, &b) ||
		!read_bound(sp, s, "exclusiveMaximum", integer, false, true, &b))
		return NULL;
	if (integer)
	{
		i128		lo = b.has_lo ? b.lo : INT64_MIN,
					hi = b.has_hi ? b.hi : INT64_MAX;

		if (lo < INT64_MIN)
			lo = INT64_MIN;
		if (hi > INT64_MAX)
			hi = INT64_MAX;
		if (lo > hi)
			return sfail(sp, LLM_GRAMMAR_INVALID, NULL,
						 "the integer range is empty (integers are limited to the int64 range)", NULL), NULL;
		return g_int_range(sp->c, (int64_t) lo, (int64_t) hi);
	}
	if (b.has_lo && b.has_hi && (b.lo > b.hi || (b.lo == b.hi && (b.lo_excl || b.hi_excl))))
		return sfail(sp, LLM_GRAMMAR_INVALID, NULL,
					 "the number range is empty (fractional bounds are tightened to integers)", NULL), NULL;
	return g_number_range(sp->c, b.has_lo, (int64_t) b.lo, b.lo_excl, b.has_hi, (int64_t) b.hi, b.hi_excl);
}

static const struct
{
	const char *name;
	const char *regex;
}			formats[] = {
	{"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"},
	{"time", "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
	{"date-time", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T"
	"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
	{"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
	{"ipv4", "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"},
};

/* A tree compiled to a DFA kept until the compile ends. */
static gdfa *
owned_dfa(sparser *sp, gnode *t)
{
	gdfa	   *d;

	if (t == NULL)
		return NULL;
	if (sp->n_owned >= MAX_OWNED_DFAS)
		return sfail(sp, LLM_GRAMMAR_TOO_LARGE, NULL, "too many constrained strings in one schema", NULL), NULL;
	d = g_compile_tree(sp->c, t, NULL, NULL);
	if (d == NULL)
		return NULL;
	sp->owned[sp->n_owned++] = d;
	return d;
}

static gnode *
string_node(sparser *sp, const llm_json *s)
{
	const llm_json *pat = llm_json_member(s, "pattern");
	const llm_json *fmt = llm_json_member(s, "format");
	int32_t		min_len,
				max_len;
	gnode	   *parts[3];
	int			n_parts = 0;
	gcpset		all = {0};
	gnode	   *body;

	if (!get_count_range(sp, s, "minLength", "maxLength", &min_len, &max_len))
		return NULL;
	if (pat)
	{
		const char *saved = sp->c->where;
		char		where[PATH_MAX_LEN + 32];

		if (pat->type != LLM_JSON_STRING)
			return sfail(sp, LLM_GRAMMAR_INVALID, "pattern", "must be a string", NULL), NULL;
		snprintf(where, sizeof(where), "%s: %s.pattern", saved ? saved : "json_schema", sp->path);
		sp->c->where = where;
		parts[n_parts] = g_parse_regex(sp->c, pat->text, pat->len, true);
		sp->c->where = saved;
		if (parts[n_parts++] == NULL)
			return NULL;
	}
	if (fmt)
	{
		size_t		i;

		if (fmt->type != LLM_JSON_STRING)
			return sfail(sp, LLM_GRAMMAR_INVALID, "format", "must be a string", NULL), NULL;
		for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
			if (strcmp(formats[i].name, fmt->text) == 0)
				break;
		if (i == sizeof(formats) / sizeof(formats[0]))
			return sfail(sp, LLM_GRAMMAR_INVALID, "format",
						 "format \"%s\" is not supported (supported: date, time, date-time, uuid, ipv4)",
						 fmt->text), NULL;
		parts[n_parts] = g_parse_regex(sp->c, formats[i].regex, strlen(formats[i].regex), true);
		if (parts[n_parts++] == NULL)
			return NULL;
	}
	if (!gcpset_add(sp->c, &all, 0, G_MAX_CP))
		return NULL;
	if (min_len > 0 || max_len >= 0 || n_parts == 0)
		parts[n_parts++] = g_repeat(sp->c, g_json_chars(sp->c, &all), min_len, max_len);
	if (n_parts == 1)
		body = parts[0];
	else
	{
		/* several constraints on one value: the intersection of their automata */
		gdfa	   *d = owned_dfa(sp, parts[0]);

		for (int i = 1; i < n_parts && d; i++)
		{
			gdfa	   *e = owned_dfa(sp, parts[i]);
			gdfa	   *x;

			if (e == NULL)
				return NULL;
			x = gdfa_intersect(sp->c, d, e);
			if (x == NULL)
				return NULL;
			if (sp->n_owned >= MAX_OWNED_DFAS)
			{
				gdfa_free(x);
				return sfail(sp, LLM_GRAMMAR_TOO_LARGE, NULL, "too many constrained strings in one schema", NULL), NULL;
			}
			sp->owned[sp->n_owned++] = x;
			d = x;
		}
		if (d == NULL)
			return NULL;
		if (d->n_states <= 1)
			return sfail(sp, LLM_GRAMMAR_INVALID, NULL,
						 "the string constraints together accept no value", NULL), NULL;
		body = g_dfa_node(sp->c, d);
	}
	return g_cat3(sp->c, g_lit(sp->c, "\""), body, g_lit(sp->c, "\""));
}

static gnode *
object_node(sparser *sp, const llm_json *s, int depth)
{
	const llm_json *props = llm_json_member(s, "properties");
	const llm_json *req = llm_json_member(s, "required");
	const llm_json *addl = llm_json_member(s, "additionalProperties");
	gnode	  **members;
	bool	   *required;
	int32_t		n = 0;

	if (addl && !(addl->type == LLM_JSON_BOOL && !addl->boolean))
		return sfail(sp, LLM_GRAMMAR_INVALID, "additionalProperties",
					 "must be false or absent (absent means false here: only the listed properties are generated)",
					 NULL), NULL;
	if (props && props->type != LLM_JSON_OBJECT)
		return sfail(sp, LLM_GRAMMAR_INVALID, "properties", "must be an object", NULL), NULL;
	if (req && req->type != LLM_JSON_ARRAY)
		return sfail(sp, LLM_GRAMMAR_INVALID, "required", "must be an array of property names", NULL), NULL;
	n = props ? props->n : 0;
	members = gctx_alloc(sp->c, sizeof(gnode *) * (n + 1));
	required = gctx_alloc(sp->c, sizeof(bool) * (n + 1));
	if (members == NULL || required == NULL)
		return NULL;
	if (req)
		for (int32_t i = 0; i < req->n; i++)
		{
			const llm_json *r = req->items[i];
			int32_t		k;

			if (r->type != LLM_JSON_STRING)
				return sfail(sp, LLM_GRAMMAR_INVALID, "required", "must be an array of property names", NULL), NULL;
			for (k = 0; k < n; k++)
				if (props->key_lens[k] == r->len && memcmp(props->keys[k], r->text, r->len) == 0)
					break;
			if (k == n)
				return sfail(sp, LLM_GRAMMAR_INVALID, "required",
							 "\"%s\" is not in properties (only listed properties can be generated)", r->text), NULL;
			if (required[k])
				return sfail(sp, LLM_GRAMMAR_INVALID, "required", "\"%s\" is listed twice", r->text), NULL;
			required[k] = true;
		}
	for (int32_t i = 0; i < n; i++)
	{
		size_t		old = path_push(sp, ".properties.");
		gnode	   *value;

		path_push(sp, props->keys[i]);
		value = schema_node(sp, props->items[i], depth + 1);
		size_t		kl = llm_json_write_string(props->keys[i], props->key_lens[i], NULL, 0);
		char	   *key;

		path_pop(sp, old);
		if (value == NULL)
			return NULL;
		key = gctx_alloc(sp->c, kl + 1);
		if (key == NULL)
			return NULL;
		llm_json_write_string(props->keys[i], props->key_lens[i], key, kl);
		key[kl] = ':';
		members[i] = g_cat2(sp->c, g_bytes(sp->c, key, kl + 1), value);
		if (members[i] == NULL)
			return NULL;
	}
	return g_object(sp->c, members, required, n);
}

static gnode *
array_node(sparser *sp, const llm_json *s, int depth)
{
	const llm_json *items = llm_json_member(s, "items");
	int32_t		min,
				max;
	gnode	   *item,
			   *more;
	size_t		old;

	if (items == NULL)
		return sfail(sp, LLM_GRAMMAR_INVALID, NULL, "an array schema needs \"items\" (any-value items are not supported)",
					 NULL), NULL;
	if (items->type == LLM_JSON_ARRAY)
		return sfail(sp, LLM_GRAMMAR_INVALID, "items", "an array of schemas (tuple) is not supported", NULL), NULL;
	if (!get_count_range(sp, s, "minItems", "maxItems", &min, &max))
		return NULL;
	old = path_push(sp, ".items");
	item = schema_node(sp, items, depth + 1);
	path_pop(sp, old);
	if (item == NULL)
		return NULL;
	if (max == 0)
		return g_lit(sp->c, "[]");
	/* item ("," item){min-1, max-1}, optional as a whole when min == 0 */
	more = g_repeat(sp->c, g_cat2(sp->c, g_lit(sp->c, ","), item), min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
	more = g_cat2(sp->c, item, more);
	if (min == 0)
		more = g_repeat(sp->c, more, 0, 1);
	return g_cat3(sp->c, g_lit(sp->c, "["), more, g_lit(sp->c, "]"));
}

static gnode *
type_node(sparser *sp, const llm_json *s, int bit, int depth)
{
	switch (bit)
	{
		case T_STRING:
			return string_node(sp, s);
		case T_INTEGER:
			return numeric_node(sp, s, true);
		case T_NUMBER:
			return numeric_node(sp, s, false);
		case T_BOOLEAN:
			return g_alt2(sp->c, g_lit(sp->c, "true"), g_lit(sp->c, "false"));
		case T_NULL:
			return g_lit(sp->c, "null");
		case T_OBJECT:
			return object_node(sp, s, depth);
		default:
			return array_node(sp, s, depth);
	}
}

static gnode *
schema_node(sparser *sp, const llm_json *s, int depth)
{
	const llm_json *type = NULL,
			   *any_of = NULL;
	int			types = 0,
				used = 0;
	bool		has_enum = false;

	if (depth > LLM_GRAMMAR_MAX_DEPTH)
	{
		char		lim[32];

		snprintf(lim, sizeof(lim), "%d", LLM_GRAMMAR_MAX_DEPTH);
		return sfail(sp, LLM_GRAMMAR_TOO_LARGE, NULL, "schemas nested deeper than %s", lim), NULL;
	}
	if (s->type == LLM_JSON_BOOL)
		return sfail(sp, LLM_GRAMMAR_INVALID, NULL, s->boolean ?
					 "the schema true (any value) is not supported" :
					 "the schema false accepts no value", NULL), NULL;
	if (s->type != LLM_JSON_OBJECT)
		return sfail(sp, LLM_GRAMMAR_INVALID, NULL, "a schema must be an object", NULL), NULL;

	type = llm_json_member(s, "type");
	any_of = llm_json_member(s, "anyOf");
	has_enum = llm_json_member(s, "enum") || llm_json_member(s, "const");
	if (type)
	{
		if (type->type == LLM_JSON_ARRAY && type->n > 0)
			for (int32_t i = 0; i < type->n; i++)
			{
				int			b = type_bit(type->items[i]);

				if (b == 0 || (types & b))
					return sfail(sp, LLM_GRAMMAR_INVALID, "type",
								 "must be a type name or an array of distinct type names", NULL), NULL;
				types |= b;
			}
		else if ((types = type_bit(type)) == 0)
			return sfail(sp, LLM_GRAMMAR_INVALID, "type",
						 "must be one of string, integer, number, boolean, null, object, array "
						 "(or an array of them)", NULL), NULL;
	}

	/* every keyword is known and applies to a type of this schema */
	for (int32_t i = 0; i < s->n; i++)
	{
		const keyword *k = find_keyword(s->keys[i], s->key_lens[i]);

		if (k == NULL)
			return sfail(sp, LLM_GRAMMAR_INVALID, s->keys[i], "keyword \"%s\" is not supported", s->keys[i]), NULL;
		if (k->applies & K_ANNOTATION)
			continue;
		if (k->applies & K_GENERAL)
			continue;
		used |= k->applies;
		if (has_enum)
			return sfail(sp, LLM_GRAMMAR_INVALID, s->keys[i],
						 "\"%s\" together with enum/const is not supported (only type may accompany them)",
						 s->keys[i]), NULL;
		if (any_of)
			return sfail(sp, LLM_GRAMMAR_INVALID, s->keys[i],
						 "\"%s\" beside anyOf is not supported (put it inside each branch)", s->keys[i]), NULL;
		if (type == NULL)
			return sfail(sp, LLM_GRAMMAR_INVALID, s->keys[i],
						 "\"%s\" needs a \"type\" in the same schema", s->keys[i]), NULL;
		if (!(k->applies & types))
			return sfail(sp, LLM_GRAMMAR_INVALID, s->keys[i],
						 "\"%s\" does not apply to the schema's type", s->keys[i]), NULL;
	}
	(void) used;

	if (any_of)
	{
		gnode_list	alts = {0};

		if (type || has_enum)
			return sfail(sp, LLM_GRAMMAR_INVALID, "anyOf",
						 "anyOf together with type/enum/const is not supported (put them inside each branch)",
						 NULL), NULL;
		if (any_of->type != LLM_JSON_ARRAY || any_of->n == 0)
			return sfail(sp, LLM_GRAMMAR_INVALID, "anyOf", "must be a non-empty array of schemas", NULL), NULL;
		for (int32_t i = 0; i < any_of->n; i++)
		{
			char		seg[32];
			size_t		old;
			gnode	   *g;

			snprintf(seg, sizeof(seg), ".anyOf[%d]", i);
			old = path_push(sp, seg);
			g = schema_node(sp, any_of->items[i], depth + 1);

			path_pop(sp, old);
			if (!gnode_list_push(sp->c, &alts, g))
				return NULL;
		}
		return g_alt(sp->c, alts.v, alts.n);
	}
	if (has_enum)
		return enum_node(sp, s, types);
	if (type == NULL)
		return sfail(sp, LLM_GRAMMAR_INVALID, NULL,
					 "a schema needs \"type\", \"enum\", \"const\" or \"anyOf\" (any-value schemas are not supported)",
					 NULL), NULL;
	{
		gnode_list	alts = {0};

		for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
			if ((types & type_names[i].bit) &&
				!gnode_list_push(sp->c, &alts, type_node(sp, s, type_names[i].bit, depth)))
				return NULL;
		return g_alt(sp->c, alts.v, alts.n);
	}
}

llm_grammar_status
llm_grammar_compile_json_schema(const char *schema, size_t len, llm_grammar **out, char *err, size_t errlen)
{
	gctx		c;
	sparser		sp;
	llm_json_doc *doc = NULL;
	bool		oom = false;
	char		jerr[256];
	gnode	   *root;
	char	   *src;
	size_t		n;
	llm_grammar_status st;

	*out = NULL;
	gctx_init(&c, err, errlen);
	c.where = "json_schema";
	memset(&sp, 0, sizeof(sp));
	sp.c = &c;
	strcpy(sp.path, "$");
	sp.path_len = 1;
	if (len > LLM_GRAMMAR_MAX_SOURCE)
	{
		gctx_fail(&c, LLM_GRAMMAR_TOO_LARGE, "schema longer than %d bytes", LLM_GRAMMAR_MAX_SOURCE);
		goto out;
	}
	doc = llm_json_parse(schema, len, 2 * LLM_GRAMMAR_MAX_DEPTH + 8, &oom, jerr, sizeof(jerr));
	if (doc == NULL)
	{
		gctx_fail(&c, oom ? LLM_GRAMMAR_NO_MEMORY : LLM_GRAMMAR_INVALID, "%s", jerr);
		goto out;
	}
	sp.owned = calloc(MAX_OWNED_DFAS, sizeof(gdfa *));
	if (sp.owned == NULL)
	{
		gctx_fail(&c, LLM_GRAMMAR_NO_MEMORY, "out of memory compiling the grammar");
		goto out;
	}
	root = schema_node(&sp, llm_json_root(doc), 0);
	if (root == NULL)
		goto out;
	/* normalized: the schema re-written compactly */
	n = llm_json_write(llm_json_root(doc), NULL, 0);
	src = gctx_alloc(&c, n + 1);
	if (src == NULL)
		goto out;
	src[0] = (char) LLM_GRAMMAR_JSON_SCHEMA;
	llm_json_write(llm_json_root(doc), src + 1, n);
	g_finish(&c, root, LLM_GRAMMAR_JSON_SCHEMA, src, n + 1, out);
out:
	st = c.status;
	if (sp.owned)
		for (int32_t i = 0; i < sp.n_owned; i++)
			gdfa_free(sp.owned[i]);
	free(sp.owned);
	llm_json_free(doc);
	gctx_done(&c);
	return st;
}
