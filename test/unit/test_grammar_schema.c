/*
 * test_grammar_schema.c — the JSON-schema source of grammar.h.
 *
 * Checks: integer ranges against brute force (every integer around random
 * and edge ranges, negative numbers, zero crossings, the int64 limits,
 * exclusive and fractional bounds); number ranges against exact decimal
 * comparison; canonical number syntax; strings (canonical escapes, unicode,
 * raw controls rejected, minLength/maxLength in characters, pattern on the
 * decoded value, pattern and lengths and formats intersected, formats);
 * objects (keys with escapes and unicode, schema order, every subset of
 * optional keys, required, nothing else); arrays (min/maxItems, nesting);
 * enum/const (filtered by type); anyOf and type lists; every rejected
 * keyword and bad value with its JSON path; schemas that accept nothing;
 * state limits; normalized source and hash.
 */
#include "unit.h"
#include "engine/grammar/grammar.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t
rnd(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static char last_err[1024];
static llm_grammar_status last_status;

static llm_grammar *
schema(const char *json)
{
	llm_grammar *g = NULL;

	last_status = llm_grammar_compile_json_schema(json, strlen(json), &g, last_err, sizeof(last_err));
	return g;
}

static bool
acc(const llm_grammar *g, const char *s)
{
	return llm_grammar_matches(g, s, strlen(s));
}

/* Every string of yes[] accepted and every one of no[] rejected; reports the first failure. */
static void
check_set(const char *name, const char *json, const char *const *yes, const char *const *no)
{
	llm_grammar *g = schema(json);
	const char *bad = NULL;
	bool		bad_yes = false;

	if (g == NULL)
	{
		CHECK(0, "%s: compiles (%s)", name, last_err);
		return;
	}
	for (; yes && *yes && !bad; yes++)
		if (!acc(g, *yes))
			bad = *yes, bad_yes = true;
	for (; no && *no && !bad; no++)
		if (acc(g, *no))
			bad = *no;
	CHECK(bad == NULL, "%s%s%s%s", name, bad ? (bad_yes ? ": should accept " : ": should reject ") : "",
		  bad ? bad : "", "");
	llm_grammar_free(g);
}

#define L(...) ((const char *const[]) {__VA_ARGS__, NULL})

/* ---------- integers ---------- */

static void
int_schema(char *buf, size_t cap, int64_t lo, int64_t hi)
{
	snprintf(buf, cap, "{\"type\":\"integer\",\"minimum\":%" PRId64 ",\"maximum\":%" PRId64 "}", lo, hi);
}

static void
test_integers(void)
{
	int			wrong = 0,
				ranges = 0;
	char		json[256],
				num[32];

	/* random small ranges against every integer around them */
	for (int r = 0; r < 60; r++)
	{
		int64_t		a = (int64_t) (rnd() % 2401) - 1200,
					b = (int64_t) (rnd() % 2401) - 1200;
		llm_grammar *g;

		if (r % 3 == 0)
			b = a + (int64_t) (rnd() % 12);
		if (a > b)
		{
			int64_t		t = a;

			a = b;
			b = t;
		}
		int_schema(json, sizeof(json), a, b);
		g = schema(json);
		if (g == NULL)
		{
			CHECK(0, "integer [%" PRId64 ", %" PRId64 "] compiles: %s", a, b, last_err);
			continue;
		}
		ranges++;
		for (int64_t v = -1300; v <= 1300; v++)
		{
			snprintf(num, sizeof(num), "%" PRId64, v);
			if (acc(g, num) != (v >= a && v <= b) && wrong++ < 5)
				printf("# [%" PRId64 ", %" PRId64 "] wrong on %s\n", a, b, num);
		}
		llm_grammar_free(g);
	}
	CHECK(wrong == 0 && ranges == 60, "60 random integer ranges exact on [-1300, 1300] (%d wrong)", wrong);

	/* ranges across digit counts and around powers of ten, checked near every boundary */
	{
		static const int64_t bounds[][2] = {
			{0, 0}, {-1, -1}, {-9, 9}, {-10, 10}, {-99, 100}, {1, 999999}, {-1000000, -999}, {7, 7},
			{123456789, 987654321}, {-987654321, -123456789}, {999999999999, 1000000000001},
			{INT64_MAX - 5, INT64_MAX}, {INT64_MIN, INT64_MIN + 5}, {INT64_MIN, INT64_MAX},
			{-5, INT64_MAX}, {INT64_MIN, 5},
		};

		wrong = 0;
		for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++)
		{
			int64_t		a = bounds[i][0],
						b = bounds[i][1];
			llm_grammar *g;
			int64_t		probes[] = {a, b, 0, 1, -1, 9, 10, 99, 100, -10, -100, 999, 1000};

			int_schema(json, sizeof(json), a, b);
			g = schema(json);
			if (g == NULL)
			{
				CHECK(0, "integer [%" PRId64 ", %" PRId64 "] compiles: %s", a, b, last_err);
				continue;
			}
			for (size_t p = 0; p < sizeof(probes) / sizeof(probes[0]); p++)
				for (int d = -3; d <= 3; d++)
				{
					__int128	v = (__int128) probes[p] + d;
					bool		in = v >= a && v <= b;

					if (v < INT64_MIN || v > INT64_MAX)
						continue;
					snprintf(num, sizeof(num), "%" PRId64, (int64_t) v);
					if (acc(g, num) != in && wrong++ < 5)
						printf("# [%" PRId64 ", %" PRId64 "] wrong on %s\n", a, b, num);
				}
			llm_grammar_free(g);
		}
		CHECK(wrong == 0, "edge integer ranges exact near their bounds (%d wrong)", wrong);
	}

	check_set("integer without bounds is the int64 range", "{\"type\":\"integer\"}",
			  L("0", "-1", "9223372036854775807", "-9223372036854775808", "42", "-42"),
			  L("9223372036854775808", "-9223372036854775809", "99999999999999999999", "-0", "007", "+5", "5.0",
				"1e3", "", "-", " 1", "1 "));
	check_set("bounds beyond int64 are clamped to it", "{\"type\":\"integer\",\"minimum\":-1e30,\"maximum\":1e30}",
			  L("9223372036854775807", "-9223372036854775808"), L("9223372036854775808"));
	check_set("exclusive and fractional integer bounds",
			  "{\"type\":\"integer\",\"exclusiveMinimum\":-3,\"maximum\":7.9}",
			  L("-2", "0", "7"), L("-3", "8", "-4"));
	check_set("fractional minimum rounds up, exclusive maximum", "{\"type\":\"integer\",\"minimum\":1.5,\"exclusiveMaximum\":4}",
			  L("2", "3"), L("1", "4"));
	check_set("the stronger of minimum and exclusiveMinimum",
			  "{\"type\":\"integer\",\"minimum\":0,\"exclusiveMinimum\":2,\"maximum\":3}",
			  L("3"), L("2", "1", "0"));
	schema("{\"type\":\"integer\",\"minimum\":1.0e1,\"maximum\":25E-1}");
	CHECK(last_status == LLM_GRAMMAR_INVALID && strstr(last_err, "empty"), "10 <= x <= 2.5 is empty: %s", last_err);
	check_set("bounds written with exponents", "{\"type\":\"integer\",\"minimum\":-1.5e1,\"maximum\":2e0}",
			  L("-15", "2", "0"), L("-16", "3"));
}

/* ---------- numbers ---------- */

/* value of a plain decimal string times 1000 (at most 3 fraction digits) */
static int64_t
milli(const char *s)
{
	bool		neg = *s == '-';
	int64_t		ip = 0,
				fp = 0;
	int			fd = 0;

	if (neg)
		s++;
	while (*s >= '0' && *s <= '9')
		ip = ip * 10 + (*s++ - '0');
	if (*s == '.')
		for (s++; *s; s++, fd++)
			fp = fp * 10 + (*s - '0');
	while (fd < 3)
		fp *= 10, fd++;
	return (neg ? -1 : 1) * (ip * 1000 + fp);
}

static void
test_numbers(void)
{
	int			wrong = 0;

	for (int r = 0; r < 40; r++)
	{
		int			lo = (int) (rnd() % 21) - 10,
					hi = lo + (int) (rnd() % 12);
		bool		has_lo = rnd() % 5 != 0,
					has_hi = rnd() % 5 != 0,
					lo_ex = rnd() % 2,
					hi_ex = rnd() % 2;
		char		json[256];
		size_t		w;
		llm_grammar *g;

		w = (size_t) snprintf(json, sizeof(json), "{\"type\":\"number\"");
		if (has_lo)
			w += (size_t) snprintf(json + w, sizeof(json) - w, ",\"%s\":%d", lo_ex ? "exclusiveMinimum" : "minimum", lo);
		if (has_hi)
			w += (size_t) snprintf(json + w, sizeof(json) - w, ",\"%s\":%d", hi_ex ? "exclusiveMaximum" : "maximum", hi);
		snprintf(json + w, sizeof(json) - w, "}");
		g = schema(json);
		if (g == NULL)
		{
			bool		empty = has_lo && has_hi && (lo > hi || (lo == hi && (lo_ex || hi_ex)));

			CHECK(empty && last_status == LLM_GRAMMAR_INVALID, "%s compiles or is empty (%s)", json, last_err);
			continue;
		}
		for (int v = -15000; v <= 15000; v += 125)
			for (int form = 0; form < 3; form++)
			{
				char		num[48];
				int			a = v < 0 ? -v : v;
				int64_t		m;
				bool		in;

				/* plain forms: "1", "1.5", "1.500" */
				if (form == 0 && a % 1000)
					continue;
				if (form == 0)
					snprintf(num, sizeof(num), "%s%d", v < 0 ? "-" : "", a / 1000);
				else if (form == 1)
					snprintf(num, sizeof(num), "%s%d.%d", v < 0 ? "-" : "", a / 1000, a % 1000 / 100);
				else
					snprintf(num, sizeof(num), "%s%d.%03d", v < 0 ? "-" : "", a / 1000, a % 1000);
				m = milli(num);
				if (form == 1 && (a % 100) != 0)
					continue;
				in = (!has_lo || (lo_ex ? m > lo * 1000 : m >= lo * 1000)) &&
					(!has_hi || (hi_ex ? m < hi * 1000 : m <= hi * 1000));
				/* negative zero is not canonical */
				if (m == 0 && num[0] == '-')
					in = false;
				if (acc(g, num) != in && wrong++ < 6)
					printf("# %s wrong on %s (expected %d)\n", json, num, in);
			}
		llm_grammar_free(g);
	}
	CHECK(wrong == 0, "40 random number ranges exact on decimals in [-15, 15] (%d wrong)", wrong);

	check_set("number syntax", "{\"type\":\"number\"}",
			  L("0", "-1", "3.14", "-0.5", "0.0", "1.000", "123456789012345678901234567890", "-7.25"),
			  L("-0", "-0.0", "-0.000", "01", "1.", ".5", "1e5", "1E5", "+1", "--1", "1.2.3", "", "-", "0x10", "NaN"));
	check_set("number [0, 1]", "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}",
			  L("0", "0.25", "1", "1.000", "0.999999"), L("1.5", "1.0001", "-0.5", "2", "-0"));
	check_set("fractional number bounds tighten inward", "{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.5}",
			  L("1", "1.5", "2", "2.0"), L("0.5", "0.75", "2.25", "2.5"));
	check_set("number exclusive (0, 1)", "{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}",
			  L("0.5", "0.001", "0.999"), L("0", "0.0", "1", "1.0", "-0.5"));
	check_set("negative number range", "{\"type\":\"number\",\"minimum\":-3,\"maximum\":-1}",
			  L("-3", "-1", "-2.5", "-1.0", "-3.000"), L("-3.5", "-0.5", "0", "-3.001", "1"));
	schema("{\"type\":\"number\",\"minimum\":1e20}");
	CHECK(last_status == LLM_GRAMMAR_INVALID && strstr(last_err, "$.minimum") && strstr(last_err, "2^63"),
		  "number bound outside +-2^63 rejected: %s", last_err);
	schema("{\"type\":\"number\",\"minimum\":0.2,\"maximum\":0.8}");
	CHECK(last_status == LLM_GRAMMAR_INVALID && strstr(last_err, "tightened"),
		  "[0.2, 0.8] has no integer-bounded part: %s", last_err);
}

/* ---------- strings ---------- */

static void
test_strings(void)
{
	check_set("string", "{\"type\":\"string\"}",
			  L("\"\"", "\"abc\"", "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"", "\"a\\\"b\"", "\"\\\\\"", "\"\\n\\t\\r\\b\\f\"",
				"\"\\u0001\\u001f\\u0000\\u000b\"", "\"/\"", "\"\x7F\"", "\"\xE2\x80\xA8\""),
			  L("\"a", "abc", "\"a\nb\"", "\"\t\"", "\"\x01\"", "\"\\/\"", "\"\\u00e9\"", "\"\\u000a\"",
				"\"\\u001F\"", "\"\\u0008\"", "\"\\x41\"", "\"\\\"", "\"\xC3\"", "\"\xFF\"", "\"\xED\xA0\x80\"",
				"\"a\"b\"", "'a'"));
	check_set("minLength/maxLength count characters and escapes as one",
			  "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
			  L("\"ab\"", "\"abc\"", "\"\xC3\xA9\xC3\xA9\"", "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\"",
				"\"\\n\\\"\"", "\"\\u0001ab\""),
			  L("\"a\"", "\"abcd\"", "\"\xC3\xA9\"", "\"\\n\"", "\"\\u0001abc\""));
	check_set("maxLength 0", "{\"type\":\"string\",\"maxLength\":0}", L("\"\""), L("\"a\"", "\"\\n\""));
	check_set("pattern applies to the decoded value, output escaped",
			  "{\"type\":\"string\",\"pattern\":\"^[A-Z]{3}-\\\\d+$\"}",
			  L("\"ABC-1\"", "\"XYZ-0042\""), L("\"AB-1\"", "\"ABC-\"", "\"abc-1\"", "ABC-1"));
	check_set("pattern with quotes, backslashes and newlines",
			  "{\"type\":\"string\",\"pattern\":\"a\\\"b\\\\\\\\c\\\\n(\\\\t)?\"}",
			  L("\"a\\\"b\\\\c\\n\"", "\"a\\\"b\\\\c\\n\\t\""), L("\"a\"b\\c\n\"", "\"a\\\"b\\\\c\\u000a\""));
	check_set("negated class in a pattern includes escaped characters",
			  "{\"type\":\"string\",\"pattern\":\"[^a]+\"}",
			  L("\"\\\"\"", "\"\\n\\u0002b\"", "\"\xC3\xA9\""), L("\"a\"", "\"\"", "\"\n\""));
	check_set("pattern and maxLength together",
			  "{\"type\":\"string\",\"pattern\":\"[a-z]+\\\\d*\",\"maxLength\":4,\"minLength\":2}",
			  L("\"ab\"", "\"ab12\"", "\"abcd\"", "\"a1\""), L("\"a\"", "\"abcde\"", "\"ab123\"", "\"12\""));
	check_set("format date", "{\"type\":\"string\",\"format\":\"date\"}",
			  L("\"2024-02-29\"", "\"1999-12-31\""), L("\"2024-13-01\"", "\"2024-00-10\"", "\"2024-1-1\"", "\"2024-01-32\""));
	check_set("format time", "{\"type\":\"string\",\"format\":\"time\"}",
			  L("\"23:59:60Z\"", "\"08:30:00.123+02:00\""), L("\"24:00:00Z\"", "\"08:30:00\"", "\"8:30:00Z\""));
	check_set("format date-time", "{\"type\":\"string\",\"format\":\"date-time\"}",
			  L("\"2024-05-01T12:00:00Z\"", "\"2024-05-01T12:00:00.5-07:30\""),
			  L("\"2024-05-01 12:00:00Z\"", "\"2024-05-01T12:00Z\""));
	check_set("format uuid", "{\"type\":\"string\",\"format\":\"uuid\"}",
			  L("\"123e4567-e89b-12d3-a456-426614174000\"", "\"123E4567-E89B-12D3-A456-426614174000\""),
			  L("\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400\""));
	check_set("format ipv4", "{\"type\":\"string\",\"format\":\"ipv4\"}",
			  L("\"192.168.0.1\"", "\"255.255.255.255\"", "\"0.0.0.0\""),
			  L("\"256.1.1.1\"", "\"01.1.1.1\"", "\"1.1.1\"", "\"1.1.1.1.1\""));
	check_set("format with maxLength", "{\"type\":\"string\",\"format\":\"ipv4\",\"maxLength\":9}",
			  L("\"1.2.3.4\"", "\"10.20.3.4\""), L("\"10.20.30.4\""));
	schema("{\"type\":\"string\",\"pattern\":\"[a-z]{5}\",\"maxLength\":3}");
	CHECK(last_status == LLM_GRAMMAR_INVALID && strstr(last_err, "accept no value"),
		  "pattern with an impossible maxLength accepts nothing: %s", last_err);
}

/* ---------- objects and arrays ---------- */

static void
test_objects(void)
{
	/* keys with escapes and unicode, written canonically */
	check_set("property names with escapes and unicode",
			  "{\"type\":\"object\",\"properties\":{\"a\\\"b\\\\c\":{\"type\":\"integer\"},"
			  "\"\xD0\xBA\xD0\xBB\xD1\x8E\xD1\x87\":{\"type\":\"boolean\"},\"tab\\tkey\\u0001\":{\"type\":\"null\"},"
			  "\"\\u00e9\\/\":{\"type\":\"integer\"}},"
			  "\"required\":[\"a\\\"b\\\\c\",\"\xD0\xBA\xD0\xBB\xD1\x8E\xD1\x87\",\"tab\\tkey\\u0001\",\"\xC3\xA9/\"]}",
			  L("{\"a\\\"b\\\\c\":1,\"\xD0\xBA\xD0\xBB\xD1\x8E\xD1\x87\":true,\"tab\\tkey\\u0001\":null,\"\xC3\xA9/\":2}"),
			  L("{\"a\\\"b\\\\c\":1,\"\xD0\xBA\xD0\xBB\xD1\x8E\xD1\x87\":true,\"tab\tkey\\u0001\":null,\"\xC3\xA9/\":2}",
				"{\"a\\\"b\\\\c\":1,\"\xD0\xBA\xD0\xBB\xD1\x8E\xD1\x87\":true,\"tab\\tkey\\u0001\":null,\"\\u00e9\\/\":2}"));

	/* every subset of optional keys, in schema order */
	{
		const char *json = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
			"\"c\":{\"type\":\"integer\"},\"d\":{\"type\":\"integer\"},\"e\":{\"type\":\"integer\"}},\"required\":[\"c\"]}";
		llm_grammar *g = schema(json);
		int			wrong = 0;

		CHECK(g != NULL, "optional keys schema compiles (%s)", last_err);
		if (g)
		{
			for (int set = 0; set < 32; set++)
				for (int order = 0; order < 2; order++)
				{
					char		s[128];
					size_t		w = 1;
					bool		first = true;

					s[0] = '{';
					for (int k = 0; k < 5; k++)
					{
						int			key = order ? 4 - k : k;

						if (!(set & (1 << key)))
							continue;
						w += (size_t) snprintf(s + w, sizeof(s) - w, "%s\"%c\":%d", first ? "" : ",", 'a' + key, key);
						first = false;
					}
					snprintf(s + w, sizeof(s) - w, "}");
					{
						bool		want = (set & (1 << 2)) && (order == 0 || __builtin_popcount(set) == 1);

						if (acc(g, s) != want && wrong++ < 4)
							printf("# %s: expected %d\n", s, want);
					}
				}
			CHECK(wrong == 0, "all 32 key subsets: accepted iff c present and in order (%d wrong)", wrong);
			CHECK(!acc(g, "{\"c\":1,}") && !acc(g, "{,\"c\":1}") && !acc(g, "{\"c\":1,\"c\":1}") &&
				  !acc(g, "{\"c\":1,\"f\":1}") && !acc(g, "{ \"c\":1}") && !acc(g, "{\"c\": 1}") &&
				  !acc(g, "{\"a\":1,,\"c\":1}"), "no stray commas, duplicates, extra keys or whitespace");
			llm_grammar_free(g);
		}
	}
	check_set("all optional: the empty object", "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"null\"}}}",
			  L("{}", "{\"x\":null}"), L("{\"x\":1}", "{\"y\":null}"));
	check_set("no properties: only {}", "{\"type\":\"object\",\"additionalProperties\":false}", L("{}"), L("{\"a\":1}"));
	check_set("nested objects and arrays",
			  "{\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
			  "\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0},\"tags\":{\"type\":\"array\","
			  "\"items\":{\"type\":\"string\",\"maxLength\":3},\"maxItems\":2}},\"required\":[\"id\"]},"
			  "\"minItems\":1,\"maxItems\":3}},\"required\":[\"items\"]}",
			  L("{\"items\":[{\"id\":0}]}", "{\"items\":[{\"id\":1,\"tags\":[]},{\"id\":2,\"tags\":[\"a\",\"bcd\"]}]}",
				"{\"items\":[{\"id\":1},{\"id\":2},{\"id\":3}]}"),
			  L("{\"items\":[]}", "{\"items\":[{\"id\":1},{\"id\":2},{\"id\":3},{\"id\":4}]}",
				"{\"items\":[{\"id\":-1}]}", "{\"items\":[{\"id\":1,\"tags\":[\"a\",\"b\",\"c\"]}]}",
				"{\"items\":[{\"id\":1,\"tags\":[\"abcd\"]}]}", "{\"items\":[{\"id\":1},]}"));
	check_set("array bounds", "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":3}",
			  L("[true,false]", "[true,true,true]"), L("[]", "[true]", "[true,true,true,true]", "[true,,true]",
														 "[true, true]"));
	check_set("array without bounds", "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}}",
			  L("[]", "[1]", "[1,2,3,4,5,6,7,8,9,0,1,2]"), L("[", "[1,]", "[,1]", "[10]"));
	check_set("maxItems 0", "{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"maxItems\":0}", L("[]"), L("[null]"));
	check_set("nested arrays", "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":2},\"maxItems\":2}",
			  L("[]", "[[]]", "[[1,2],[3]]"), L("[[1,2,3]]", "[[],[],[]]", "[1]"));
}

/* ---------- enum, const, anyOf, type lists ---------- */

static void
test_enums(void)
{
	check_set("string enum with escapes and unicode",
			  "{\"type\":\"string\",\"enum\":[\"low\",\"a\\\"b\",\"\\u00e9t\\u00e9\",\"line\\nbreak\",\"\\u0007\"]}",
			  L("\"low\"", "\"a\\\"b\"", "\"\xC3\xA9t\xC3\xA9\"", "\"line\\nbreak\"", "\"\\u0007\""),
			  L("\"lo\"", "\"high\"", "\"\\u00e9t\\u00e9\"", "\"line\nbreak\"", "low"));
	check_set("enum of mixed scalars without type", "{\"enum\":[\"x\",1,2.50,true,null,-3]}",
			  L("\"x\"", "1", "2.50", "true", "null", "-3"), L("2.5", "false", "3", "\"1\""));
	check_set("enum filtered by type", "{\"type\":\"integer\",\"enum\":[1,\"two\",3.0,4.5,null]}",
			  L("1", "3.0"), L("\"two\"", "4.5", "null"));
	check_set("const", "{\"const\":\"fixed\"}", L("\"fixed\""), L("\"fixed2\"", "fixed"));
	check_set("prefix enum values are each complete", "{\"enum\":[\"bug\",\"bugfix\"]}",
			  L("\"bug\"", "\"bugfix\""), L("\"bugf\""));
	check_set("anyOf", "{\"anyOf\":[{\"type\":\"integer\",\"minimum\":0,\"maximum\":5},{\"type\":\"string\",\"maxLength\":1},"
			  "{\"type\":\"null\"}]}",
			  L("0", "5", "\"\"", "\"a\"", "null"), L("6", "-1", "\"ab\"", "true"));
	check_set("type list", "{\"type\":[\"string\",\"null\"],\"maxLength\":2}",
			  L("\"ab\"", "null"), L("\"abc\"", "1"));
	check_set("nullable object property via anyOf",
			  "{\"type\":\"object\",\"properties\":{\"v\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]}},"
			  "\"required\":[\"v\"]}",
			  L("{\"v\":null}", "{\"v\":1.5}"), L("{}", "{\"v\":\"1\"}"));
	check_set("annotations are ignored",
			  "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"title\":\"T\",\"description\":\"d\","
			  "\"type\":\"boolean\",\"default\":true,\"examples\":[true],\"$comment\":\"c\",\"$defs\":{\"x\":{}}}",
			  L("true", "false"), L("null"));
}

/* ---------- errors ---------- */

typedef struct schema_error
{
	const char *json;
	llm_grammar_status status;
	const char *path;			/* substring: the JSON path with the keyword */
	const char *what;			/* substring of the message */
} schema_error;

static const schema_error schema_errors[] = {
	{"{\"$ref\":\"#/$defs/x\"}", LLM_GRAMMAR_INVALID, "$.$ref:", "not supported"},
	{"{\"type\":\"object\",\"patternProperties\":{\"^a\":{\"type\":\"string\"}}}", LLM_GRAMMAR_INVALID, "$.patternProperties:", "not supported"},
	{"{\"oneOf\":[{\"type\":\"string\"}]}", LLM_GRAMMAR_INVALID, "$.oneOf:", "not supported"},
	{"{\"allOf\":[{\"type\":\"string\"}]}", LLM_GRAMMAR_INVALID, "$.allOf:", "not supported"},
	{"{\"not\":{\"type\":\"string\"}}", LLM_GRAMMAR_INVALID, "$.not:", "not supported"},
	{"{\"type\":\"string\",\"if\":{\"type\":\"string\"},\"then\":{}}", LLM_GRAMMAR_INVALID, "$.if:", "not supported"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"dependentRequired\":{\"a\":[]}}", LLM_GRAMMAR_INVALID, "$.dependentRequired:", "not supported"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}}}", LLM_GRAMMAR_INVALID, "$.properties.a.uniqueItems:", "not supported"},
	{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}]}", LLM_GRAMMAR_INVALID, "$.prefixItems:", "not supported"},
	{"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"contains\":{\"type\":\"string\"}}", LLM_GRAMMAR_INVALID, "$.contains:", "not supported"},
	{"{\"type\":\"object\",\"minProperties\":1}", LLM_GRAMMAR_INVALID, "$.minProperties:", "not supported"},
	{"{\"type\":\"integer\",\"multipleOf\":2}", LLM_GRAMMAR_INVALID, "$.multipleOf:", "not supported"},
	{"{\"type\":\"object\",\"propertyNames\":{\"maxLength\":3}}", LLM_GRAMMAR_INVALID, "$.propertyNames:", "not supported"},
	{"{\"type\":\"string\",\"nullable\":true}", LLM_GRAMMAR_INVALID, "$.nullable:", "not supported"},
	{"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"foo\":1}]}", LLM_GRAMMAR_INVALID, "$.anyOf[1].foo:", "not supported"},
	{"{\"type\":\"string\",\"maxLength\\u0000\":1}", LLM_GRAMMAR_INVALID, "$.maxLength", "not supported"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":true}", LLM_GRAMMAR_INVALID, "$.additionalProperties:", "must be false or absent"},
	{"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", LLM_GRAMMAR_INVALID, "$.additionalProperties:", "absent means false"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"b\"]}", LLM_GRAMMAR_INVALID, "$.required:", "\"b\" is not in properties"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\",\"a\"]}", LLM_GRAMMAR_INVALID, "$.required:", "twice"},
	{"{\"type\":\"string\",\"format\":\"email\"}", LLM_GRAMMAR_INVALID, "$.format:", "\"email\" is not supported"},
	{"{\"type\":\"array\"}", LLM_GRAMMAR_INVALID, "$:", "needs \"items\""},
	{"{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", LLM_GRAMMAR_INVALID, "$.items:", "tuple"},
	{"{\"type\":\"integer\",\"minLength\":1}", LLM_GRAMMAR_INVALID, "$.minLength:", "does not apply"},
	{"{\"properties\":{\"a\":{\"type\":\"string\"}}}", LLM_GRAMMAR_INVALID, "$.properties:", "needs a \"type\""},
	{"{}", LLM_GRAMMAR_INVALID, "$:", "any-value"},
	{"true", LLM_GRAMMAR_INVALID, "$:", "schema true"},
	{"{\"type\":\"object\",\"properties\":{\"a\":true}}", LLM_GRAMMAR_INVALID, "$.properties.a:", "schema true"},
	{"{\"type\":\"strin\"}", LLM_GRAMMAR_INVALID, "$.type:", "must be one of"},
	{"{\"type\":[\"string\",\"string\"]}", LLM_GRAMMAR_INVALID, "$.type:", "distinct"},
	{"{\"enum\":[{\"a\":1}]}", LLM_GRAMMAR_INVALID, "$.enum:", "must be strings, numbers"},
	{"{\"enum\":[]}", LLM_GRAMMAR_INVALID, "$.enum:", "non-empty"},
	{"{\"enum\":[\"a\"],\"const\":\"a\"}", LLM_GRAMMAR_INVALID, "$:", "enum and const together"},
	{"{\"type\":\"string\",\"enum\":[\"a\"],\"maxLength\":3}", LLM_GRAMMAR_INVALID, "$.maxLength:", "together with enum"},
	{"{\"type\":\"string\",\"anyOf\":[{\"type\":\"string\"}]}", LLM_GRAMMAR_INVALID, "$.anyOf:", "together with type"},
	{"{\"anyOf\":[{\"type\":\"string\"}],\"maxLength\":2}", LLM_GRAMMAR_INVALID, "$.maxLength:", "beside anyOf"},
	{"{\"anyOf\":[]}", LLM_GRAMMAR_INVALID, "$.anyOf:", "non-empty"},
	{"{\"type\":\"string\",\"maxLength\":-1}", LLM_GRAMMAR_INVALID, "$.maxLength:", "non-negative integer"},
	{"{\"type\":\"string\",\"maxLength\":1.5}", LLM_GRAMMAR_INVALID, "$.maxLength:", "non-negative integer"},
	{"{\"type\":\"string\",\"maxLength\":1001}", LLM_GRAMMAR_TOO_LARGE, "$.maxLength:", "limit 1000"},
	{"{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":5000}", LLM_GRAMMAR_TOO_LARGE, "$.minItems:", "limit"},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":true,\"minimum\":1}", LLM_GRAMMAR_INVALID, "$.exclusiveMinimum:", "draft-4"},
	{"{\"type\":\"integer\",\"maximum\":\"5\"}", LLM_GRAMMAR_INVALID, "$.maximum:", "must be a number"},
	{"{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", LLM_GRAMMAR_INVALID, "$.pattern:", "lookahead (?= / (?! is not supported at offset 1"},
	{"{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\",\"pattern\":\"[a-\"}}}", LLM_GRAMMAR_INVALID, "$.properties.code.pattern:", "missing ]"},
	{"{\"type\":\"string\",\"pattern\":5}", LLM_GRAMMAR_INVALID, "$.pattern:", "must be a string"},
	/* accepts nothing */
	{"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", LLM_GRAMMAR_INVALID, "$:", "empty"},
	{"{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", LLM_GRAMMAR_INVALID, "$:", "accepts no value"},
	{"{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":3,\"maxItems\":2}", LLM_GRAMMAR_INVALID, "$:", "accepts no value"},
	{"{\"type\":\"boolean\",\"enum\":[1,\"x\"]}", LLM_GRAMMAR_INVALID, "$.enum:", "accepts no value"},
	{"false", LLM_GRAMMAR_INVALID, "$:", "accepts no value"},
	{"{\"type\":\"string\",\"pattern\":\"[^\\\\s\\\\S]\"}", LLM_GRAMMAR_INVALID, "json_schema:", "accepts no string"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"[^\\\\d\\\\D]\"}},\"required\":[\"a\"]}", LLM_GRAMMAR_INVALID, "json_schema:", "accepts no string"},
	/* bad JSON */
	{"{\"type\":\"string\",}", LLM_GRAMMAR_INVALID, "json_schema:", "at offset 17"},
	{"{\"type\":\"string\" \"x\":1}", LLM_GRAMMAR_INVALID, "json_schema:", "at offset 17"},
	{"{\"type\":\"string\",\"type\":\"integer\"}", LLM_GRAMMAR_INVALID, "json_schema:", "duplicate key"},
	{"", LLM_GRAMMAR_INVALID, "json_schema:", "end of input"},
	/* too large */
	{"{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":1000},\"maxItems\":1000},\"maxItems\":1000}",
	LLM_GRAMMAR_TOO_LARGE, "json_schema:", "too large"},
};

static void
test_errors(void)
{
	for (size_t i = 0; i < sizeof(schema_errors) / sizeof(schema_errors[0]); i++)
	{
		const schema_error *e = &schema_errors[i];
		llm_grammar *g = schema(e->json);

		CHECK(g == NULL && last_status == e->status && strncmp(last_err, "json_schema: ", 13) == 0 &&
			  strstr(last_err, e->path) && strstr(last_err, e->what),
			  "%.70s rejected: \"%s\" (status %d)", e->json, last_err, (int) last_status);
		llm_grammar_free(g);
	}
	/* nesting deeper than the limit */
	{
		char	   *deep = malloc(70 * 64 + 64);
		size_t		w = 0;

		for (int i = 0; i < 70; i++)
			w += (size_t) sprintf(deep + w, "{\"type\":\"array\",\"items\":");
		w += (size_t) sprintf(deep + w, "{\"type\":\"null\"}");
		for (int i = 0; i < 70; i++)
			deep[w++] = '}';
		deep[w] = '\0';
		CHECK(schema(deep) == NULL && last_status == LLM_GRAMMAR_TOO_LARGE && strstr(last_err, "deeper than 64"),
			  "70 nested levels rejected: %.80s", last_err);
		free(deep);
	}
}

/* ---------- normalization ---------- */

static void
test_normalization(void)
{
	llm_grammar *a = schema("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}");
	llm_grammar *b = schema(" { \"type\" : \"object\" ,\n \"properties\" : { \"x\" : { \"type\" : \"string\" } } } ");
	llm_grammar *c = schema("{\"properties\":{\"x\":{\"type\":\"string\"}},\"type\":\"object\"}");

	CHECK(a && b && c, "normalization schemas compile");
	if (a && b && c)
	{
		size_t		la,
					lb;
		const char *sa = llm_grammar_source(a, &la),
				   *sb = llm_grammar_source(b, &lb);

		CHECK(llm_grammar_hash(a) == llm_grammar_hash(b) && la == lb && memcmp(sa, sb, la) == 0 &&
			  sa[0] == (char) LLM_GRAMMAR_JSON_SCHEMA &&
			  strcmp(sa + 1, "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}") == 0,
			  "whitespace does not change the normalized source: %s", sa + 1);
		CHECK(llm_grammar_hash(a) != llm_grammar_hash(c) && llm_grammar_n_states(a) == llm_grammar_n_states(c),
			  "member order is part of the source (keyword order changes the hash, not the language)");
		CHECK(llm_grammar_kind_of(a) == LLM_GRAMMAR_JSON_SCHEMA, "kind is json_schema");
	}
	llm_grammar_free(a);
	llm_grammar_free(b);
	llm_grammar_free(c);
}

/* A realistic schema stays well inside the limits. */
static void
test_sizes(void)
{
	const char *json = "{\"type\":\"object\",\"properties\":{"
		"\"title\":{\"type\":\"string\",\"maxLength\":80},"
		"\"priority\":{\"enum\":[\"low\",\"medium\",\"high\",\"urgent\"]},"
		"\"category\":{\"type\":\"string\",\"enum\":[\"bug\",\"billing\",\"account\",\"feature\",\"other\"]},"
		"\"customer_id\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":999999},"
		"\"summary\":{\"type\":\"string\"}},"
		"\"required\":[\"title\",\"priority\",\"category\",\"customer_id\",\"summary\"]}";
	llm_grammar *g = schema(json);
	int32_t		nfa,
				dfa;

	CHECK(g != NULL, "ticket schema compiles (%s)", last_err);
	if (g == NULL)
		return;
	llm_grammar_build_sizes(g, &nfa, &dfa);
	printf("# ticket schema: %d states, %d classes, %zu bytes (NFA %d, DFA before minimization %d)\n",
		   llm_grammar_n_states(g), llm_grammar_n_classes(g), llm_grammar_memory(g), nfa, dfa);
	CHECK(llm_grammar_n_states(g) > 80 && llm_grammar_n_states(g) < 4000 && dfa >= llm_grammar_n_states(g),
		  "ticket schema: %d states", llm_grammar_n_states(g));
	CHECK(acc(g, "{\"title\":\"Refund\",\"priority\":\"high\",\"category\":\"billing\",\"customer_id\":42,"
			  "\"summary\":\"Charged twice.\"}"), "a ticket is accepted");
	llm_grammar_free(g);
}

/* Mutated schema texts: each compiles or fails with a json_schema message; never anything else. */
static void
test_mutations(void)
{
	const char *base = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":5,"
		"\"pattern\":\"[a-z]+\"},\"b\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-3},"
		"\"maxItems\":2},\"c\":{\"anyOf\":[{\"type\":\"null\"},{\"enum\":[1,\"x\"]}]}},\"required\":[\"a\"]}";
	static const char alphabet[] = "{}[]:,\"\\01-9.eE+atrufnl ";
	int			ok = 0,
				failed = 0,
				bad = 0;
	size_t		bl = strlen(base);

	for (int k = 0; k < 3000; k++)
	{
		char		s[512];
		size_t		n = bl;
		int			muts = 1 + (int) (rnd() % 3);
		llm_grammar *g;

		memcpy(s, base, bl);
		for (int m = 0; m < muts; m++)
		{
			size_t		at = rnd() % n;
			int			op = (int) (rnd() % 3);

			if (op == 0 && n > 1)
			{
				memmove(s + at, s + at + 1, n - at - 1);
				n--;
			}
			else if (op == 1 && n + 1 < sizeof(s))
			{
				memmove(s + at + 1, s + at, n - at);
				s[at] = alphabet[rnd() % (sizeof(alphabet) - 1)];
				n++;
			}
			else
				s[at] = alphabet[rnd() % (sizeof(alphabet) - 1)];
		}
		s[n] = '\0';
		g = schema(s);
		if (g)
		{
			ok++;
			llm_grammar_free(g);
		}
		else if ((last_status == LLM_GRAMMAR_INVALID || last_status == LLM_GRAMMAR_TOO_LARGE) &&
				 strncmp(last_err, "json_schema: ", 13) == 0 && strlen(last_err) > 20)
			failed++;
		else
			bad++;
	}
	CHECK(bad == 0 && ok > 20 && failed > 500, "3000 mutated schemas: %d compiled, %d rejected with a message, %d wrong",
		  ok, failed, bad);
}

/* The longest complete output: exact for bounded schemas and patterns, -1 for unbounded ones. */
static void
test_max_bytes(void)
{
	static const struct
	{
		const char *json;
		int64_t		want;
	}			cases[] = {
		/* the 5-field ticket schema (bench/harness/structured.py, TICKET_SCHEMA_MAX_BYTES) */
		{"{\"type\":\"object\",\"properties\":{\"product\":{\"enum\":[\"Cloud Suite\",\"Billing\",\"Router RX\","
		 "\"Sync\",\"Mobile App\"]},\"priority\":{\"enum\":[\"low\",\"normal\",\"high\",\"urgent\"]},"
		 "\"customer\":{\"type\":[\"string\",\"null\"],\"maxLength\":40},\"summary\":{\"type\":\"string\","
		 "\"maxLength\":120},\"refund_requested\":{\"type\":\"boolean\"}},\"required\":[\"product\","
		 "\"priority\",\"customer\",\"summary\",\"refund_requested\"]}", 1057},
		/* CVE ids: an unbounded digit run has no longest output */
		{"{\"type\":\"object\",\"properties\":{\"cves\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
		 "\"pattern\":\"CVE-[0-9]{4}-[0-9]+\"},\"maxItems\":4},\"kind\":{\"enum\":[\"security\",\"bugfix\","
		 "\"feature\",\"packaging\"]},\"urgent\":{\"type\":\"boolean\"}},\"required\":[\"cves\",\"kind\","
		 "\"urgent\"]}", -1},
		/* bounded by the pattern's counts: 9 + 4 x 18 + 3 + 1 + 8 + 11 + 10 + 5 + 1 */
		{"{\"type\":\"object\",\"properties\":{\"cves\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
		 "\"pattern\":\"CVE-[0-9]{4}-[0-9]{4,7}\"},\"maxItems\":4},\"kind\":{\"enum\":[\"security\",\"bugfix\","
		 "\"feature\",\"packaging\"]},\"urgent\":{\"type\":\"boolean\"}},\"required\":[\"cves\",\"kind\","
		 "\"urgent\"]}", 120},
		/* bounded by maxLength beside the unbounded pattern: strings of 20 characters */
		{"{\"type\":\"object\",\"properties\":{\"cves\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
		 "\"pattern\":\"CVE-[0-9]{4}-[0-9]+\",\"maxLength\":20},\"maxItems\":4},\"kind\":{\"enum\":[\"security\","
		 "\"bugfix\",\"feature\",\"packaging\"]},\"urgent\":{\"type\":\"boolean\"}},\"required\":[\"cves\","
		 "\"kind\",\"urgent\"]}", 136},
		/* int64 range: "-9223372036854775808" */
		{"{\"type\":\"integer\"}", 20},
		{"{\"type\":\"integer\",\"minimum\":0,\"maximum\":999}", 3},
		{"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", -1},
		{"{\"type\":\"string\"}", -1},
		/* one character at its longest canonical form: a 6-byte \u00xx escape, plus the quotes */
		{"{\"type\":\"string\",\"maxLength\":1}", 8},
		{"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}}", -1},
		{"{\"enum\":[\"a\",\"bcd\",null]}", 5},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		llm_grammar *g = schema(cases[i].json);
		int64_t		got = g ? llm_grammar_max_bytes(g) : -99;

		CHECK(got == cases[i].want, "max_bytes of schema %zu: %lld (want %lld)%s%s", i, (long long) got,
			  (long long) cases[i].want, g ? "" : ": ", g ? "" : last_err);
		llm_grammar_free(g);
	}
	{
		llm_grammar *g = NULL;
		const char *choices[] = {"bug", "bugfix", "x"};
		size_t		lens[] = {3, 6, 1};

		llm_grammar_compile_regex("[0-9]{3}-[0-9]{4}", 17, &g, last_err, sizeof(last_err));
		CHECK(g && llm_grammar_max_bytes(g) == 8, "max_bytes of a counted regex: 8");
		llm_grammar_free(g);
		g = NULL;
		llm_grammar_compile_regex("ab+c", 4, &g, last_err, sizeof(last_err));
		CHECK(g && llm_grammar_max_bytes(g) == -1, "max_bytes of a regex with +: unbounded");
		llm_grammar_free(g);
		g = NULL;
		llm_grammar_compile_choices(choices, lens, 3, &g, last_err, sizeof(last_err));
		CHECK(g && llm_grammar_max_bytes(g) == 6, "max_bytes of choices: the longest, 6");
		llm_grammar_free(g);
	}
}

int
main(void)
{
	test_mutations();
	test_integers();
	test_numbers();
	test_strings();
	test_objects();
	test_enums();
	test_errors();
	test_normalization();
	test_sizes();
	test_max_bytes();
	return unit_done();
}
