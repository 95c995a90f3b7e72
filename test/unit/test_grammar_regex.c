/*
 * test_grammar_regex.c — the regex and choices sources of grammar.h and the
 * automaton they compile to.
 *
 * Checks: accept/reject tables (literals, escapes, \uXXXX and surrogate
 * pairs, classes with ranges, negation and shorthand, UTF-8 classes across
 * every encoding length, `.`, counted repetition, alternation, groups,
 * anchors at the ends); every rejected construct with its offset; limits
 * (counts, state limits, "accepts no string"); choices (prefix choices
 * complete on their own, duplicates, UTF-8 check); automaton invariants
 * (every reachable state can still accept, can_continue agrees with the
 * transitions, DEAD is absorbing); minimal state counts of known languages;
 * and a cross-check against PCRE2 (full match, UTF mode) on random strings
 * generated from the automaton and mutated, including invalid UTF-8.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "unit.h"
#include "engine/grammar/grammar.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t
rnd(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static llm_grammar *
compile(const char *re, char *err, size_t errlen, llm_grammar_status *st)
{
	llm_grammar *g = NULL;

	*st = llm_grammar_compile_regex(re, strlen(re), &g, err, errlen);
	return g;
}

/* ---------- accept / reject ---------- */

typedef struct match_case
{
	const char *re;
	const char *s;
	bool		match;
} match_case;

static const match_case match_cases[] = {
	{"abc", "abc", true}, {"abc", "ab", false}, {"abc", "abcd", false}, {"abc", "", false},
	{"", "", true}, {"", "a", false}, {"()", "", true}, {"(?:)", "", true},
	{"a|bc|", "a", true}, {"a|bc|", "bc", true}, {"a|bc|", "", true}, {"a|bc|", "b", false},
	{"^abc$", "abc", true}, {"^abc$", "xabc", false}, {"a\\$", "a$", true}, {"\\^a", "^a", true},
	/* escapes */
	{"\\n\\t\\r\\f\\v\\0", "\n\t\r\f\v", false},
	{"a\\.b", "a.b", true}, {"a\\.b", "axb", false}, {"\\\\", "\\", true}, {"\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|", "*+?()[]{}|", true},
	{"\\x41\\x{e9}\\x{1F600}", "A\xC3\xA9\xF0\x9F\x98\x80", true},
	{"\\u00e9", "\xC3\xA9", true}, {"\\u00E9", "\xC3\xA9", true}, {"\\u20AC", "\xE2\x82\xAC", true},
	{"\\uD83D\\uDE00", "\xF0\x9F\x98\x80", true}, {"\\uD83D\\uDE00", "\xED\xA0\xBD\xED\xB8\x80", false},
	{"\\-\\/\\:\\#\\~\\@", "-/:#~@", true}, {"]}", "]}", true},
	/* classes */
	{"[abc]", "b", true}, {"[abc]", "d", false}, {"[a-z]+", "hello", true}, {"[a-z]+", "Hello", false},
	{"[^abc]", "d", true}, {"[^abc]", "a", false}, {"[^abc]", "\n", true}, {"[^abc]", "\xE2\x82\xAC", true},
	{"[]a]", "]", true}, {"[]a]", "a", true}, {"[^]a]", "]", false}, {"[^]a]", "b", true},
	{"[a-]", "-", true}, {"[-a]", "-", true}, {"[a\\-z]", "-", true}, {"[a\\-z]", "b", false},
	{"[\\d_]+", "12_3", true}, {"[\\w]+", "aZ_9", true}, {"[\\s]", "\v", true}, {"[\\D]", "5", false},
	{"[\\]]", "]", true}, {"[\\\\]", "\\", true}, {"[.]", ".", true}, {"[.]", "a", false},
	{"[\\u00e0-\\u00ff]", "\xC3\xA9", true}, {"[\\u00e0-\\u00ff]", "\xC3\x9F", false},
	{"[\xC3\xA0-\xC3\xBF]+", "\xC3\xA9\xC3\xA8", true},
	/* UTF-8 encoding-length boundaries inside one class */
	{"[\\x{7F}-\\x{80}]", "\x7F", true}, {"[\\x{7F}-\\x{80}]", "\xC2\x80", true}, {"[\\x{7F}-\\x{80}]", "\xC2\x81", false},
	{"[\\x{7FF}-\\x{800}]", "\xDF\xBF", true}, {"[\\x{7FF}-\\x{800}]", "\xE0\xA0\x80", true},
	{"[\\x{7FF}-\\x{800}]", "\xE0\xA0\x81", false},
	{"[\\x{FFFF}-\\x{10000}]", "\xEF\xBF\xBF", true}, {"[\\x{FFFF}-\\x{10000}]", "\xF0\x90\x80\x80", true},
	{"[\\x{FFFF}-\\x{10000}]", "\xF0\x90\x80\x81", false},
	{"[\\x{10FFFF}]", "\xF4\x8F\xBF\xBF", true}, {"[\\x{D7FF}-\\x{E000}]", "\xED\x9F\xBF", true},
	{"[\\x{D7FF}-\\x{E000}]", "\xEE\x80\x80", true}, {"[\\x{D7FF}-\\x{E000}]", "\xED\xA0\x80", false},
	{"[\\x{100}-\\x{10FFFF}]", "\xC4\x80", true}, {"[\\x{100}-\\x{10FFFF}]", "\xC3\xBF", false},
	{"[\\x{100}-\\x{10FFFF}]", "\xF4\x90\x80\x80", false},
	/* shorthand */
	{"\\d+", "0123456789", true}, {"\\d", "a", false}, {"\\d", "\xD9\xA3", false},
	{"\\w+", "abc_XYZ_09", true}, {"\\w", "-", false}, {"\\w", "\xC3\xA9", false},
	{"\\s+", " \t\n\r\f\v", true}, {"\\s", "a", false}, {"\\S", " ", false}, {"\\S", "\xC3\xA9", true},
	{"\\D", "x", true}, {"\\W", "-", true}, {"\\W", "a", false},
	/* dot */
	{".", "a", true}, {".", "\xC3\xA9", true}, {".", "\xE2\x82\xAC", true}, {".", "\xF0\x9F\x98\x80", true},
	{".", "\n", false}, {".", "\r", true}, {".", "", false}, {".", "ab", false}, {"..", "\xC3\xA9x", true},
	{".", "\xC3", false}, {".", "\x80", false}, {".", "\xC0\xAF", false}, {".", "\xED\xA0\x80", false},
	{".", "\xF4\x90\x80\x80", false}, {".", "\xFF", false}, {".", "\xE0\x80\xAF", false},
	/* quantifiers */
	{"a*", "", true}, {"a*", "aaaa", true}, {"a+", "", false}, {"a+", "aaa", true}, {"a?", "", true},
	{"a?", "aa", false}, {"a{3}", "aaa", true}, {"a{3}", "aa", false}, {"a{3}", "aaaa", false},
	{"a{2,}", "a", false}, {"a{2,}", "aaaaaaa", true}, {"a{2,4}", "aaaa", true}, {"a{2,4}", "aaaaa", false},
	{"a{0}", "", true}, {"a{0}", "a", false}, {"a{0,0}b", "b", true}, {"(ab){2}", "abab", true},
	{"(ab){2}", "aba", false}, {"(a|bc){2,3}", "bca", true}, {"(a|bc){2,3}", "abcbca", false},
	{"(a*)*b", "aab", true}, {"(a*)+", "", true}, {"(a?){3}", "a", true}, {"(a|b)*abb", "babb", true},
	{"x{1000}", NULL, true},
	/* groups and alternation */
	{"(a|b)c", "bc", true}, {"(?:a|b)c", "ac", true}, {"a(b|c|)d", "ad", true}, {"((a))", "a", true},
	{"(a|ab)(c|bcd)(d*)", "abcd", true}, {"colou?r", "color", true}, {"colou?r", "colour", true},
	{"[0-9]{4}-[0-9]{2}", "2024-01", true}, {"[0-9]{4}-[0-9]{2}", "2024-1", false},
};

static void
test_match_table(void)
{
	int			bad = 0;

	for (size_t i = 0; i < sizeof(match_cases) / sizeof(match_cases[0]); i++)
	{
		const match_case *m = &match_cases[i];
		char		err[256];
		llm_grammar_status st;
		llm_grammar *g = compile(m->re, err, sizeof(err), &st);
		bool		got;
		char		big[1001];

		if (g == NULL)
		{
			CHECK(0, "compile /%s/: %s", m->re, err);
			bad++;
			continue;
		}
		if (m->s == NULL)
		{
			memset(big, 'x', 1000);
			got = llm_grammar_matches(g, big, 1000) && !llm_grammar_matches(g, big, 999);
		}
		else
			got = llm_grammar_matches(g, m->s, strlen(m->s));
		if (got != m->match)
		{
			CHECK(0, "/%s/ on \"%s\": expected %s", m->re, m->s ? m->s : "x{1000}", m->match ? "match" : "no match");
			bad++;
		}
		llm_grammar_free(g);
	}
	/* a NUL byte from \0 is a real byte of the output */
	{
		char		err[256];
		llm_grammar_status st;
		llm_grammar *g = compile("a\\0b", err, sizeof(err), &st);

		CHECK(g && llm_grammar_matches(g, "a\0b", 3) && !llm_grammar_matches(g, "ab", 2), "\\0 is a NUL byte");
		llm_grammar_free(g);
		g = compile("\\n\\t\\r\\f\\v\\0", err, sizeof(err), &st);
		CHECK(g && llm_grammar_matches(g, "\n\t\r\f\v\0", 6), "control escapes");
		llm_grammar_free(g);
	}
	CHECK(bad == 0, "match table: %zu cases, %d wrong", sizeof(match_cases) / sizeof(match_cases[0]), bad);
}

/* ---------- errors ---------- */

typedef struct error_case
{
	const char *re;
	llm_grammar_status status;
	const char *what;			/* substring of the message */
	int			offset;			/* -1: no offset in the message */
} error_case;

static const error_case error_cases[] = {
	{"\\1", LLM_GRAMMAR_INVALID, "backreference", 0},
	{"(a)\\2", LLM_GRAMMAR_INVALID, "backreference", 3},
	{"\\k<x>", LLM_GRAMMAR_INVALID, "backreference", 0},
	{"a(?=b)", LLM_GRAMMAR_INVALID, "lookahead", 1},
	{"a(?!b)", LLM_GRAMMAR_INVALID, "lookahead", 1},
	{"(?<=a)b", LLM_GRAMMAR_INVALID, "lookbehind", 0},
	{"(?<!a)b", LLM_GRAMMAR_INVALID, "lookbehind", 0},
	{"(?<n>a)", LLM_GRAMMAR_INVALID, "named group", 0},
	{"(?P<n>a)", LLM_GRAMMAR_INVALID, "named group", 0},
	{"(?i)a", LLM_GRAMMAR_INVALID, "group flags", 0},
	{"(?>a)", LLM_GRAMMAR_INVALID, "atomic group", 0},
	{"a*?", LLM_GRAMMAR_INVALID, "lazy quantifier", 2},
	{"a+?", LLM_GRAMMAR_INVALID, "lazy quantifier", 2},
	{"a??", LLM_GRAMMAR_INVALID, "lazy quantifier", 2},
	{"a{2,3}?", LLM_GRAMMAR_INVALID, "lazy quantifier", 6},
	{"a*+", LLM_GRAMMAR_INVALID, "possessive quantifier", 2},
	{"a**", LLM_GRAMMAR_INVALID, "quantifier after a quantifier", 2},
	{"a{2}{3}", LLM_GRAMMAR_INVALID, "quantifier after a quantifier", 4},
	{"*a", LLM_GRAMMAR_INVALID, "nothing to repeat", 0},
	{"a|+", LLM_GRAMMAR_INVALID, "nothing to repeat", 2},
	{"(?:*)", LLM_GRAMMAR_INVALID, "nothing to repeat", 3},
	{"{2}", LLM_GRAMMAR_INVALID, "nothing to repeat", 0},
	{"a^b", LLM_GRAMMAR_INVALID, "anchor ^", 1},
	{"a$b", LLM_GRAMMAR_INVALID, "anchor $", 1},
	{"(^a)", LLM_GRAMMAR_INVALID, "anchor ^", 1},
	{"(a$)", LLM_GRAMMAR_INVALID, "anchor $", 2},
	{"a\\b", LLM_GRAMMAR_INVALID, "word boundary", 1},
	{"\\Aa", LLM_GRAMMAR_INVALID, "anchor escape", 0},
	{"a\\z", LLM_GRAMMAR_INVALID, "anchor escape", 1},
	{"\\p{L}", LLM_GRAMMAR_INVALID, "property class", 0},
	{"[\\P{L}]", LLM_GRAMMAR_INVALID, "property class", 1},
	{"\\q", LLM_GRAMMAR_INVALID, "unknown escape \\q", 0},
	{"\\", LLM_GRAMMAR_INVALID, "trailing backslash", 0},
	{"\\012", LLM_GRAMMAR_INVALID, "octal", 0},
	{"\\xZ1", LLM_GRAMMAR_INVALID, "\\x escape", 0},
	{"\\x{110000}", LLM_GRAMMAR_INVALID, "scalar value", 0},
	{"\\x{D800}", LLM_GRAMMAR_INVALID, "scalar value", 0},
	{"\\u12", LLM_GRAMMAR_INVALID, "\\u escape", 0},
	{"\\uDE00", LLM_GRAMMAR_INVALID, "lone low surrogate", 0},
	{"x\\uD83D", LLM_GRAMMAR_INVALID, "lone high surrogate", 1},
	{"\\uD83Dx", LLM_GRAMMAR_INVALID, "lone high surrogate", 0},
	{"a{3,2}", LLM_GRAMMAR_INVALID, "n < m", 1},
	{"a{,3}", LLM_GRAMMAR_INVALID, "counted repetition", 1},
	{"a{x}", LLM_GRAMMAR_INVALID, "counted repetition", 1},
	{"a{2", LLM_GRAMMAR_INVALID, "counted repetition", 1},
	{"a{1001}", LLM_GRAMMAR_TOO_LARGE, "over the limit 1000", 1},
	{"a{1,99999999999}", LLM_GRAMMAR_TOO_LARGE, "over the limit", 1},
	{"(a", LLM_GRAMMAR_INVALID, "missing )", 0},
	{"a(b(c)", LLM_GRAMMAR_INVALID, "missing )", 1},
	{"a)", LLM_GRAMMAR_INVALID, "unmatched )", 1},
	{"[abc", LLM_GRAMMAR_INVALID, "missing ]", 0},
	{"x[]", LLM_GRAMMAR_INVALID, "missing ]", 1},
	{"[z-a]", LLM_GRAMMAR_INVALID, "out of order", 1},
	{"[\\d-z]", LLM_GRAMMAR_INVALID, "class shorthand", 3},
	{"[a-\\d]", LLM_GRAMMAR_INVALID, "class shorthand", 2},
	{"[[:alpha:]]", LLM_GRAMMAR_INVALID, "POSIX class", 1},
	{"\xC3", LLM_GRAMMAR_INVALID, "not valid UTF-8", 0},
	{"ab\xFF", LLM_GRAMMAR_INVALID, "not valid UTF-8", 2},
	{"\\\xC3\xA9", LLM_GRAMMAR_INVALID, "non-ASCII", 0},
	/* the language is empty */
	{"[^\\x{0}-\\x{10FFFF}]", LLM_GRAMMAR_INVALID, "accepts no string", -1},
	{"a[^\\s\\S]b", LLM_GRAMMAR_INVALID, "accepts no string", -1},
	{"a{0}[^\\d\\D]", LLM_GRAMMAR_INVALID, "accepts no string", -1},
	/* exponential subset construction */
	{"(a|b)*a(a|b){20}", LLM_GRAMMAR_TOO_LARGE, "more than 262144 states while being built", -1},
	/* built, but over the final state limit: 2^17 states */
	{"(a|b)*a(a|b){16}", LLM_GRAMMAR_TOO_LARGE, "131072 states (at most 65536)", -1},
	/* nesting */
	{"((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))",
	LLM_GRAMMAR_TOO_LARGE, "nested deeper", 64},
};

static void
test_errors(void)
{
	for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++)
	{
		const error_case *e = &error_cases[i];
		char		err[512];
		char		want_off[64];
		llm_grammar_status st;
		llm_grammar *g = compile(e->re, err, sizeof(err), &st);
		bool		ok = g == NULL && st == e->status && strstr(err, e->what) != NULL &&
			strncmp(err, "regex: ", 7) == 0;

		if (e->offset >= 0)
		{
			snprintf(want_off, sizeof(want_off), "at offset %d", e->offset);
			ok = ok && strstr(err, want_off) != NULL;
		}
		CHECK(ok, "/%s/ rejected: \"%s\" (status %d)", e->re, err, (int) st);
		llm_grammar_free(g);
	}
	/* limits just inside are fine */
	{
		char		err[256];
		llm_grammar_status st;
		llm_grammar *g = compile("(a|b)*a(a|b){14}", err, sizeof(err), &st);
		int32_t		nfa,
					dfa;

		CHECK(g && llm_grammar_n_states(g) == 32768,
			  "(a|b)*a(a|b){14}: the minimal DFA has 2^15 states (got %d, %s)", g ? llm_grammar_n_states(g) : -1, err);
		if (g)
		{
			llm_grammar_build_sizes(g, &nfa, &dfa);
			CHECK(nfa > 0 && dfa >= 32768, "build sizes reported (nfa %d, dfa %d)", nfa, dfa);
			CHECK(llm_grammar_memory(g) >= (size_t) 32768 * 4 * llm_grammar_n_classes(g), "memory counts the table");
		}
		llm_grammar_free(g);
	}
	CHECK(LLM_GRAMMAR_MAX_STATES >= 32768 && LLM_GRAMMAR_MAX_BUILD_STATES >= LLM_GRAMMAR_MAX_STATES,
		  "documented limits are ordered");
}

/* ---------- known minimal sizes ---------- */

static void
test_sizes(void)
{
	static const struct
	{
		const char *re;
		int32_t		states;
	}			cases[] = {
		{"abc", 4},
		/* start, accept, 1-3 continuation bytes pending, and the four restricted second bytes E0 ED F0 F4 */
		{".", 9},
		{".*", 8},
		{"[a-z]+", 2},
		{"(a|b)*abb", 4},
		{"a{3,5}", 6},
		{"(abc|abd|abe)", 4},
		{"[\\x{0}-\\x{10FFFF}]", 9},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		char		err[256];
		llm_grammar_status st;
		llm_grammar *g = compile(cases[i].re, err, sizeof(err), &st);

		CHECK(g && llm_grammar_n_states(g) == cases[i].states, "/%s/ has %d states (got %d)",
			  cases[i].re, cases[i].states, g ? llm_grammar_n_states(g) : -1);
		llm_grammar_free(g);
	}
}

/* ---------- automaton invariants ---------- */

/* Every reachable state can reach acceptance; can_continue matches the transitions; DEAD absorbs. */
static void
check_invariants(const llm_grammar *g, const char *name)
{
	int32_t		n = llm_grammar_n_states(g);
	uint8_t    *seen = calloc(n + 1, 1);
	uint8_t    *live = calloc(n + 1, 1);
	int32_t    *queue = malloc(sizeof(int32_t) * (n + 1));
	int32_t		qh = 0,
				qt = 0;
	bool		cont_ok = true,
				in_range = true,
				changed = true;
	int32_t		reached = 0,
				n_live = 0;

	queue[qt++] = (int32_t) llm_grammar_start(g);
	seen[llm_grammar_start(g)] = 1;
	while (qh < qt)
	{
		int32_t		s = queue[qh++];
		bool		any = false;

		reached++;
		for (int b = 0; b < 256; b++)
		{
			uint8_t		byte = (uint8_t) b;
			llm_grammar_state t = llm_grammar_advance(g, s, &byte, 1);

			if (t == LLM_GRAMMAR_DEAD)
				continue;
			any = true;
			if ((int32_t) t > n)
			{
				in_range = false;
				continue;
			}
			if (!seen[t])
			{
				seen[t] = 1;
				queue[qt++] = (int32_t) t;
			}
		}
		if (any != llm_grammar_can_continue(g, s))
			cont_ok = false;
	}
	/* liveness: fixpoint of "accepting or has a live successor" */
	while (changed)
	{
		changed = false;
		for (int32_t k = 0; k < qt; k++)
		{
			int32_t		s = queue[k];

			if (live[s])
				continue;
			if (llm_grammar_is_accepting(g, s))
				live[s] = 1;
			else
				for (int b = 0; b < 256 && !live[s]; b++)
				{
					uint8_t		byte = (uint8_t) b;
					llm_grammar_state t = llm_grammar_advance(g, s, &byte, 1);

					if (t != LLM_GRAMMAR_DEAD && (int32_t) t <= n && live[t])
						live[s] = 1;
				}
			if (live[s])
			{
				changed = true;
				n_live++;
			}
		}
	}
	CHECK(in_range && cont_ok && reached == n && n_live == n,
		  "%s: %d states all reachable (%d) and live (%d), can_continue consistent", name, n, reached, n_live);
	{
		uint8_t		x = 'a';

		CHECK(llm_grammar_advance(g, LLM_GRAMMAR_DEAD, &x, 1) == LLM_GRAMMAR_DEAD &&
			  !llm_grammar_is_accepting(g, LLM_GRAMMAR_DEAD) && !llm_grammar_can_continue(g, LLM_GRAMMAR_DEAD) &&
			  llm_grammar_advance(g, (llm_grammar_state) (n + 1), &x, 0) == LLM_GRAMMAR_DEAD,
			  "%s: DEAD and out-of-range states are dead", name);
	}
	free(seen);
	free(live);
	free(queue);
}

/* ---------- PCRE2 cross-check ---------- */

/* Bytes from each state to acceptance (backward BFS over all byte transitions); -1 if none. */
static int32_t *
distances(const llm_grammar *g)
{
	int32_t		n = llm_grammar_n_states(g);
	int32_t    *dist = malloc(sizeof(int32_t) * (n + 1));
	bool		changed = true;

	for (int32_t s = 0; s <= n; s++)
		dist[s] = (s > 0 && llm_grammar_is_accepting(g, s)) ? 0 : -1;
	/* Bellman-Ford style relaxation: fine for the small automata of this file */
	while (changed)
	{
		changed = false;
		for (int32_t s = 1; s <= n; s++)
			for (int b = 0; b < 256; b++)
			{
				uint8_t		byte = (uint8_t) b;
				llm_grammar_state t = llm_grammar_advance(g, s, &byte, 1);

				if (t != LLM_GRAMMAR_DEAD && dist[t] >= 0 && (dist[s] < 0 || dist[t] + 1 < dist[s]))
				{
					dist[s] = dist[t] + 1;
					changed = true;
				}
			}
	}
	return dist;
}

/*
 * A random accepted string of g: random bytes, stopping at accepting states
 * with probability 1/4; past half the buffer, the byte closest to
 * acceptance.
 */
static size_t
random_member(const llm_grammar *g, uint8_t *out, size_t cap)
{
	llm_grammar_state s = llm_grammar_start(g);
	size_t		n = 0;
	int32_t    *dist = distances(g);

	for (;;)
	{
		uint8_t		opts[256];
		int			no = 0;
		int			best = -1;

		if (llm_grammar_is_accepting(g, s) && (!llm_grammar_can_continue(g, s) || rnd() % 4 == 0 || n > cap / 2))
			break;
		for (int b = 0; b < 256; b++)
		{
			uint8_t		byte = (uint8_t) b;
			llm_grammar_state t = llm_grammar_advance(g, s, &byte, 1);

			if (t == LLM_GRAMMAR_DEAD)
				continue;
			opts[no++] = byte;
			if (best < 0 || dist[t] < dist[llm_grammar_advance(g, s, &opts[best], 1)])
				best = no - 1;
		}
		if (no == 0 || n >= cap)
			break;
		out[n] = opts[n > cap / 2 ? best : (int) (rnd() % no)];
		s = llm_grammar_advance(g, s, &out[n], 1);
		n++;
	}
	free(dist);
	return n;
}

static size_t
mutate(uint8_t *s, size_t n, size_t cap)
{
	static const char *const pieces[] = {"a", "z", "0", "9", "_", "-", " ", "\n", "\t", "\xC3\xA9", "\xE2\x82\xAC",
	"\xF0\x9F\x98\x80", "\xC3", "\x80", "\xFF", "\xED\xA0\x80", ".", "b", "A", "]", "\\"};
	int			op = (int) (rnd() % 3);
	size_t		at = n ? rnd() % (n + 1) : 0;

	if (op == 0 && n > 0)
	{
		/* delete one byte */
		if (at == n)
			at--;
		memmove(s + at, s + at + 1, n - at - 1);
		return n - 1;
	}
	{
		const char *p = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
		size_t		pl = strlen(p);

		if (n + pl > cap)
			return n;
		if (op == 2 && at < n)
		{
			/* replace one byte */
			memmove(s + at + pl, s + at + 1, n - at - 1);
			memcpy(s + at, p, pl);
			return n - 1 + pl;
		}
		memmove(s + at + pl, s + at, n - at);
		memcpy(s + at, p, pl);
		return n + pl;
	}
}

static const char *const pcre_patterns[] = {
	"[a-z]+(-[a-z0-9]+)*", "(\\d{1,3}\\.){3}\\d{1,3}", "[^\\s]+ [^\\s]+", ".{2,5}", "(a|ab|abc)*c?",
	"[\\x{80}-\\x{7FF}]+x", "[\\x{800}-\\x{FFFF}\\d]{1,3}", "[^a-z\\x{E9}]*", "(?:\\w+\\s?){1,4}",
	"\\w+@\\w+\\.(com|org)", "[\\x{c0}-\\x{24f}]{2}|[\\x{1F600}-\\x{1F64F}]", "(x|y)*x(x|y){3}",
	"[A-Z][a-z]*( [A-Z][a-z]*){0,2}", "\\S\\s\\S", ".*\\n.*", "[^\\n]{0,3}\\.", "(\\+|-)?[0-9]+(\\.[0-9]+)?",
	"[\\x{0}-\\x{7F}]*\\x{10FFFF}", "a{2}b{0,2}c{1,}", "(ab|cd|)(ef)?",
};

static void
test_pcre(void)
{
	for (size_t i = 0; i < sizeof(pcre_patterns) / sizeof(pcre_patterns[0]); i++)
	{
		const char *re = pcre_patterns[i];
		char		err[256];
		llm_grammar_status st;
		llm_grammar *g = compile(re, err, sizeof(err), &st);
		int			ec;
		PCRE2_SIZE	eo;
		pcre2_code *pc = pcre2_compile((PCRE2_SPTR) re, PCRE2_ZERO_TERMINATED,
									   PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &ec, &eo, NULL);
		pcre2_match_data *md = pc ? pcre2_match_data_create_from_pattern(pc, NULL) : NULL;
		int			disagree = 0,
					n_match = 0,
					n_tests = 0;
		char		first_bad[128] = "";

		if (g == NULL || pc == NULL || md == NULL)
		{
			CHECK(0, "/%s/ compiles in both (%s)", re, err);
			llm_grammar_free(g);
			pcre2_code_free(pc);
			continue;
		}
		check_invariants(g, re);
		for (int k = 0; k < 400; k++)
		{
			uint8_t		buf[256];
			size_t		n = random_member(g, buf, 200);
			int			muts = k % 4;

			for (int m = 0; m < muts; m++)
				n = mutate(buf, n, sizeof(buf));
			{
				bool		mine = llm_grammar_matches(g, buf, n);
				int			rc = pcre2_match(pc, buf, n, 0, 0, md, NULL);
				bool		theirs = rc >= 0;

				n_tests++;
				n_match += mine;
				if (mine != theirs && disagree++ == 0)
					snprintf(first_bad, sizeof(first_bad), "%.*s (mine %d, pcre2 %d)", (int) (n < 60 ? n : 60),
							 (const char *) buf, mine, rc);
			}
		}
		CHECK(disagree == 0 && n_match > 0 && n_match < n_tests,
			  "/%s/ agrees with PCRE2 on %d strings (%d matching)%s%s", re, n_tests, n_match,
			  disagree ? ": first disagreement " : "", first_bad);
		pcre2_match_data_free(md);
		pcre2_code_free(pc);
		llm_grammar_free(g);
	}
}

/* ---------- choices ---------- */

static void
test_choices(void)
{
	const char *c1[] = {"bug", "bugfix", "feature", "bug", "", "caf\xC3\xA9"};
	size_t		l1[] = {3, 6, 7, 3, 0, 5};
	const char *c2[] = {"feature", "bugfix", "caf\xC3\xA9", "bug", ""};
	size_t		l2[] = {7, 6, 5, 3, 0};
	llm_grammar *g = NULL,
			   *h = NULL;
	char		err[256];
	llm_grammar_status st;
	llm_grammar_state s;

	st = llm_grammar_compile_choices(c1, l1, 6, &g, err, sizeof(err));
	CHECK(st == LLM_GRAMMAR_OK && g, "choices compile (%s)", err);
	if (g == NULL)
		return;
	CHECK(llm_grammar_kind_of(g) == LLM_GRAMMAR_CHOICES, "kind is choices");
	CHECK(llm_grammar_matches(g, "bug", 3) && llm_grammar_matches(g, "bugfix", 6) &&
		  llm_grammar_matches(g, "feature", 7) && llm_grammar_matches(g, "", 0) &&
		  llm_grammar_matches(g, "caf\xC3\xA9", 5), "every choice is accepted");
	CHECK(!llm_grammar_matches(g, "bugf", 4) && !llm_grammar_matches(g, "bugs", 4) &&
		  !llm_grammar_matches(g, "featur", 6) && !llm_grammar_matches(g, "caf", 3) &&
		  !llm_grammar_matches(g, "bugfixx", 7), "nothing else is");
	s = llm_grammar_advance(g, llm_grammar_start(g), "bug", 3);
	CHECK(llm_grammar_is_accepting(g, s) && llm_grammar_can_continue(g, s),
		  "after \"bug\": complete and can continue (to bugfix)");
	s = llm_grammar_advance(g, s, "fix", 3);
	CHECK(llm_grammar_is_accepting(g, s) && !llm_grammar_can_continue(g, s), "after \"bugfix\": complete and final");
	/* the same set in another order with one duplicate less: same normalized source and hash */
	st = llm_grammar_compile_choices(c2, l2, 5, &h, err, sizeof(err));
	CHECK(st == LLM_GRAMMAR_OK && h && llm_grammar_hash(g) == llm_grammar_hash(h) &&
		  llm_grammar_n_states(g) == llm_grammar_n_states(h), "choice order and duplicates do not change the hash");
	if (h)
	{
		size_t		la,
					lb;
		const char *sa = llm_grammar_source(g, &la),
				   *sb = llm_grammar_source(h, &lb);

		CHECK(la == lb && memcmp(sa, sb, la) == 0 && llm_grammar_id(g) != llm_grammar_id(h),
			  "equal normalized sources, distinct object ids");
	}
	check_invariants(g, "choices");
	llm_grammar_free(g);
	llm_grammar_free(h);

	{
		const char *bad[] = {"ok", "\xC3("};
		size_t		lb[] = {2, 2};

		g = NULL;
		st = llm_grammar_compile_choices(bad, lb, 2, &g, err, sizeof(err));
		CHECK(st == LLM_GRAMMAR_INVALID && g == NULL && strstr(err, "choice 2 is not valid UTF-8"),
			  "invalid UTF-8 choice rejected: %s", err);
		st = llm_grammar_compile_choices(bad, lb, 0, &g, err, sizeof(err));
		CHECK(st == LLM_GRAMMAR_INVALID && g == NULL && strstr(err, "choices"), "no choices rejected: %s", err);
	}
	/* many choices: a prefix-heavy list stays small after minimization */
	{
		enum
		{
		N = 2000};
		static char buf[N][16];
		const char *cs[N];
		size_t		ls[N];
		bool		ok = true;

		for (int i = 0; i < N; i++)
		{
			ls[i] = (size_t) snprintf(buf[i], sizeof(buf[i]), "item-%d", i);
			cs[i] = buf[i];
		}
		st = llm_grammar_compile_choices(cs, ls, N, &g, err, sizeof(err));
		CHECK(st == LLM_GRAMMAR_OK, "2000 choices compile (%s)", err);
		if (g)
		{
			for (int i = 0; i < N; i++)
				ok = ok && llm_grammar_matches(g, cs[i], ls[i]);
			CHECK(ok && !llm_grammar_matches(g, "item-2000", 9) && !llm_grammar_matches(g, "item-", 5) &&
				  !llm_grammar_matches(g, "item-01", 7), "each of 2000 choices and nothing else (%d states)",
				  llm_grammar_n_states(g));
			llm_grammar_free(g);
		}
	}
}

/* ---------- hashing ---------- */

static void
test_hash(void)
{
	char		err[256];
	llm_grammar_status st;
	llm_grammar *a = compile("[a-z]+", err, sizeof(err), &st);
	llm_grammar *b = compile("[a-z]+", err, sizeof(err), &st);
	llm_grammar *c = compile("[a-z]*", err, sizeof(err), &st);

	CHECK(a && b && c && llm_grammar_hash(a) == llm_grammar_hash(b) && llm_grammar_hash(a) != llm_grammar_hash(c),
		  "equal patterns hash equal, different ones differ");
	CHECK(a && b && llm_grammar_id(a) != llm_grammar_id(b), "each compile has its own id");
	CHECK(a && llm_grammar_kind_of(a) == LLM_GRAMMAR_REGEX, "kind is regex");
	llm_grammar_free(a);
	llm_grammar_free(b);
	llm_grammar_free(c);
}

/* Random patterns over the metacharacters: each compiles to a sound automaton or fails with a message. */
static void
test_random_patterns(void)
{
	static const char *const pieces[] = {"a", "b", "(", ")", "(?:", "[", "]", "^", "-", "|", "*", "+", "?", "{", "}",
		"{2}", "{1,3}", "{2,}", ",", ".", "\\", "\\d", "\\w", "\\s", "\\S", "\\u00e9", "\\x{1F600}", "\\n",
		"\xC3\xA9", "$", "\\1", "(?=", "0", "9", "[^", "\\]", "\\.", ":"};
	int			ok = 0,
				failed = 0,
				bad = 0;

	for (int k = 0; k < 4000; k++)
	{
		char		re[128];
		size_t		n = 0;
		int			len = 1 + (int) (rnd() % 12);
		char		err[256] = "";
		llm_grammar_status st;
		llm_grammar *g;

		for (int i = 0; i < len; i++)
		{
			const char *p = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
			size_t		pl = strlen(p);

			if (n + pl >= sizeof(re))
				break;
			memcpy(re + n, p, pl);
			n += pl;
		}
		re[n] = '\0';
		g = compile(re, err, sizeof(err), &st);
		if (g)
		{
			uint8_t		buf[256];
			size_t		m = random_member(g, buf, sizeof(buf));

			ok++;
			if (!llm_grammar_matches(g, buf, m) || llm_grammar_n_states(g) < 1)
			{
				if (bad++ < 3)
					printf("# /%s/: random member not accepted\n", re);
			}
			llm_grammar_free(g);
		}
		else if ((st == LLM_GRAMMAR_INVALID || st == LLM_GRAMMAR_TOO_LARGE) && strncmp(err, "regex: ", 7) == 0)
			failed++;
		else if (bad++ < 3)
			printf("# /%s/: status %d, message \"%s\"\n", re, (int) st, err);
	}
	CHECK(bad == 0 && ok > 100 && failed > 100,
		  "4000 random patterns: %d compiled (a random member each accepted), %d rejected with a message, %d wrong",
		  ok, failed, bad);
}

int
main(void)
{
	test_random_patterns();
	test_match_table();
	test_errors();
	test_sizes();
	test_pcre();
	test_choices();
	test_hash();
	return unit_done();
}
