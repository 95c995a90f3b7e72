/*
 * test_json_min.c — the strict JSON reader and compact writer (json_min.h).
 *
 * Checks: every value kind with offsets, member order, escapes and
 * surrogate pairs decoded, U+0000 inside strings; rejection (with offsets)
 * of comments, trailing commas, leading zeros, bad numbers, raw controls,
 * lone surrogates, invalid UTF-8, duplicate keys, trailing garbage, depth
 * over the limit; the compact canonical writer, and write(parse(x)) being a
 * fixed point.
 */
#include "unit.h"
#include "engine/grammar/json_min.h"

#include <stdlib.h>
#include <string.h>

static llm_json_doc *
parse(const char *s, char *err, size_t errlen)
{
	bool		oom;

	return llm_json_parse(s, strlen(s), 16, &oom, err, errlen);
}

static void
test_values(void)
{
	char		err[256];
	const char *src = " {\"a\" : [1, -2.5e+3, true, false, null], \"b\\u00e9\\n\": \"x\\\"\\\\\\/\\b\\f\\r\\t\\uD83D\\uDE00\\u0000y\", \"c\":{}} ";
	llm_json_doc *d = parse(src, err, sizeof(err));
	const llm_json *r,
			   *a,
			   *b;

	CHECK(d != NULL, "parse a document (%s)", err);
	if (d == NULL)
		return;
	r = llm_json_root(d);
	CHECK(r->type == LLM_JSON_OBJECT && r->n == 3 && r->offset == 1, "root object of 3 members at offset 1");
	CHECK(strcmp(r->keys[0], "a") == 0 && strcmp(r->keys[1], "b\xC3\xA9\n") == 0 && strcmp(r->keys[2], "c") == 0,
		  "keys decoded, in source order");
	a = llm_json_member(r, "a");
	CHECK(a && a->type == LLM_JSON_ARRAY && a->n == 5 && a->items[0]->type == LLM_JSON_NUMBER &&
		  strcmp(a->items[0]->text, "1") == 0 && strcmp(a->items[1]->text, "-2.5e+3") == 0 &&
		  a->items[2]->type == LLM_JSON_BOOL && a->items[2]->boolean && !a->items[3]->boolean &&
		  a->items[4]->type == LLM_JSON_NULL, "array items: numbers keep their text, literals");
	CHECK(a && a->items[1]->offset == 12, "item offsets (%zu)", a ? a->items[1]->offset : 0);
	b = llm_json_member(r, "b\xC3\xA9\n");
	CHECK(b && b->type == LLM_JSON_STRING && b->len == 14 &&
		  memcmp(b->text, "x\"\\/\b\f\r\t\xF0\x9F\x98\x80\0y", 14) == 0, "escapes and a surrogate pair decoded, NUL kept");
	CHECK(llm_json_member(r, "missing") == NULL && llm_json_member(a, "a") == NULL, "member lookup misses");
	{
		char		out[256];
		size_t		n = llm_json_write(r, out, sizeof(out));
		const char *want = "{\"a\":[1,-2.5e+3,true,false,null],\"b\xC3\xA9\\n\":\"x\\\"\\\\/\\b\\f\\r\\t\xF0\x9F\x98\x80\\u0000y\",\"c\":{}}";

		CHECK(n == strlen(want) && memcmp(out, want, n) == 0, "compact canonical writing: %.*s", (int) n, out);
		/* the writer's output is a fixed point */
		{
			char		out2[256];
			llm_json_doc *d2;
			size_t		n2;

			out[n] = '\0';
			d2 = parse(out, err, sizeof(err));
			n2 = d2 ? llm_json_write(llm_json_root(d2), out2, sizeof(out2)) : 0;
			CHECK(d2 && n2 == n && memcmp(out, out2, n) == 0, "write(parse(write(x))) == write(x)");
			llm_json_free(d2);
		}
		/* truncated writes report the full length */
		CHECK(llm_json_write(r, out, 5) == n && llm_json_write(r, NULL, 0) == n, "length without room");
	}
	llm_json_free(d);
	{
		char		out[32];
		size_t		n = llm_json_write_string("\x01\x1f\x7f", 3, out, sizeof(out));

		CHECK(n == 15 && memcmp(out, "\"\\u0001\\u001f\x7f\"", 15) == 0, "controls as \\u00xx lowercase, DEL raw");
	}
}

static const struct
{
	const char *src;
	const char *what;
	int			offset;
}			bad[] = {
	{"", "end of input", 0},
	{"[1,]", "unexpected character", 3},
	{"{\"a\":1,}", "expected a string key", 7},
	{"[01]", "leading zero", 1},
	{"[1.]", "fraction", 1},
	{"[.5]", "unexpected character", 1},
	{"[1e]", "exponent", 1},
	{"[+1]", "unexpected character", 1},
	{"[-]", "bad number", 1},
	{"\"a\nb\"", "raw control", 2},
	{"\"\\uD800\"", "lone high surrogate", 1},
	{"\"\\uDC00\"", "lone low surrogate", 1},
	{"\"\\u12\"", "bad \\u escape", 1},
	{"\"\\x\"", "bad escape", 1},
	{"\"\xC3\"", "invalid UTF-8", 1},
	{"\"abc", "unterminated string", 0},
	{"{\"a\":1,\"a\":2}", "duplicate key", 7},
	{"[1] x", "trailing characters", 4},
	{"// c\n1", "unexpected character", 0},
	{"[1 2]", "expected ',' or ']'", 3},
	{"{\"a\" 1}", "expected ':'", 5},
	{"tru", "unexpected character", 0},
	{"[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]", "nesting too deep", 16},
};

static void
test_errors(void)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		char		err[256],
					want[64];
		llm_json_doc *d = parse(bad[i].src, err, sizeof(err));

		snprintf(want, sizeof(want), "at offset %d", bad[i].offset);
		CHECK(d == NULL && strstr(err, bad[i].what) && strstr(err, want), "reject bad document %zu: %s", i, err);
		llm_json_free(d);
	}
	{
		char		err[64];
		llm_json_doc *d = parse("[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]", err, sizeof(err));

		CHECK(d != NULL, "16 levels are within a depth limit of 16");
		llm_json_free(d);
	}
}

int
main(void)
{
	test_values();
	test_errors();
	return unit_done();
}
