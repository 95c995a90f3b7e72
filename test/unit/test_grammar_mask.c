/*
 * test_grammar_mask.c — token index, allowed-token masks, mask cache and
 * logits masking (grammar.h).
 *
 * Synthetic vocabulary: duplicates, empty tokens, special and
 * end-of-generation ids, a NUL byte, a token longer than the trie's depth
 * limit, tokens ending inside a UTF-8 character; masks against brute force,
 * advance_token, mask_apply, the cache (hits, CLOCK eviction, several
 * grammars).
 *
 * Real vocabulary (the default model, or $LLM_TEST_MODEL; skipped when
 * absent): the index built from the tokenizer; for several schemas, regexes
 * and choices, the mask of many reachable states (from random walks and
 * random byte walks) equals brute force over all 49,152 tokens (a token is
 * allowed iff it is end-of-generation in an accepting state, or an ordinary
 * non-empty token whose bytes lead to a live state); special ids never
 * allowed; every reachable state allows some token; a token may end inside
 * a UTF-8 character and only its continuation bytes follow.  Property test:
 * random walks taking any allowed token (biased to finish) always end in a
 * string the grammar accepts, and for schemas one that this file's own JSON
 * parser reads, that is compact and canonical, and that this file's own
 * validator accepts against the schema (PCRE2 for patterns).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "unit.h"
#include "engine/grammar/grammar.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

#include <math.h>
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x452821E638D01377ull;

static uint64_t
rnd(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static bool
bit(const uint32_t *m, int32_t id)
{
	return (m[id >> 5] >> (id & 31)) & 1;
}

/* A vocabulary as plain arrays, for brute force. */
typedef struct vocab
{
	int32_t		n;
	const char **bytes;
	int32_t    *lens;
	bool	   *special;
	bool	   *eog;
	int32_t    *eog_ids;
	int32_t		n_eog;
} vocab;

static bool
brute_allowed(const vocab *v, const llm_grammar *g, llm_grammar_state s, int32_t id)
{
	if (v->eog[id])
		return llm_grammar_is_accepting(g, s);
	if (v->special[id] || v->lens[id] == 0)
		return false;
	return llm_grammar_advance(g, s, v->bytes[id], v->lens[id]) != LLM_GRAMMAR_DEAD;
}

/* Printable form of bytes for messages (non-printable bytes as \xHH). */
static const char *
shown(const char *b, int32_t n)
{
	static char buf[128];
	size_t		w = 0;

	for (int32_t i = 0; i < n && w + 5 < sizeof(buf); i++)
	{
		unsigned char c = (unsigned char) b[i];

		if (c >= 0x20 && c < 0x7F)
			buf[w++] = (char) c;
		else
			w += (size_t) snprintf(buf + w, sizeof(buf) - w, "\\x%02X", c);
	}
	buf[w] = '\0';
	return buf;
}

/* Mismatches between the computed mask of s and brute force (first one described in why). */
static int32_t
compare_mask(const vocab *v, const llm_token_index *ix, const llm_grammar *g, llm_grammar_state s,
			 char *why, size_t whylen, int32_t *n_allowed)
{
	uint32_t   *m = malloc(sizeof(uint32_t) * llm_token_index_mask_words(ix));
	int32_t		n = llm_grammar_mask_compute(ix, g, s, m),
				bad = 0,
				cnt = 0;

	for (int32_t id = 0; id < v->n; id++)
	{
		bool		want = brute_allowed(v, g, s, id);

		cnt += want;
		if (want != bit(m, id) && bad++ == 0)
			snprintf(why, whylen, "state %u token %d (%s): mask %d, brute force %d", s, id,
					 shown(v->bytes[id], v->lens[id] > 20 ? 20 : v->lens[id]), bit(m, id), want);
	}
	/* bits past n_vocab stay clear */
	for (int32_t id = v->n; id < llm_token_index_mask_words(ix) * 32; id++)
		if (bit(m, id) && bad++ == 0)
			snprintf(why, whylen, "state %u: bit %d past the vocabulary set", s, id);
	if (n != cnt && bad++ == 0)
		snprintf(why, whylen, "state %u: count %d, brute force %d", s, n, cnt);
	*n_allowed = cnt;
	free(m);
	return bad;
}

/* ---------- synthetic vocabulary ---------- */

static void
test_synthetic(void)
{
	static char longtok[70001];
	const char *toks[] = {"a", "b", "ab", "abc", "", "ab", "<s>", "</s>", "x\0y", "\xC3", "\xA9", "\xC3\xA9",
	"c", longtok, "ba", "<pad>", "\"", "abcabc"};
	int32_t		lens[] = {1, 1, 2, 3, 0, 2, 3, 4, 3, 1, 1, 2, 1, 70000, 2, 5, 1, 6};
	bool		special[] = {0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
	int32_t		eog[] = {7, 7};
	enum
	{
	NV = 18};
	bool		is_eog[NV] = {0};
	vocab		v = {NV, toks, lens, special, is_eog, eog, 1};
	char		err[256];
	llm_token_index *ix;
	static const char *const patterns[] = {"(a|b|c)*", "ab(c|ab)*", "a{3,1000}b", "\xC3\xA9+", "x\\0y|", "ba?", "[^a]*",
	"(abc){2}", "a+"};

	memset(longtok, 'a', 70000);
	is_eog[7] = true;
	ix = llm_token_index_create(NV, toks, lens, special, eog, 2, err, sizeof(err));
	CHECK(ix != NULL, "synthetic index (%s)", err);
	if (ix == NULL)
		return;
	CHECK(llm_token_index_n_vocab(ix) == NV && llm_token_index_mask_words(ix) == 1, "n_vocab and mask words");
	/* trie nodes: root; a ab abc abca abcab abcabc; b ba; c; x x\0 x\0y; \xC3 \xC3\xA9; \xA9; " */
	CHECK(llm_token_index_n_nodes(ix) == 17, "trie has 17 nodes (got %d)", llm_token_index_n_nodes(ix));
	for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++)
	{
		llm_grammar *g = NULL;
		llm_grammar_status st = llm_grammar_compile_regex(patterns[p], strlen(patterns[p]), &g, err, sizeof(err));
		int32_t		bad = 0,
					n_allowed;
		char		why[256] = "";

		if (st != LLM_GRAMMAR_OK)
		{
			CHECK(0, "compile %s: %s", patterns[p], err);
			continue;
		}
		for (llm_grammar_state s = 0; s <= (llm_grammar_state) llm_grammar_n_states(g); s++)
			bad += compare_mask(&v, ix, g, s, why, sizeof(why), &n_allowed);
		CHECK(bad == 0, "/%s/: masks of all %d states equal brute force %s", patterns[p], llm_grammar_n_states(g), why);
		llm_grammar_free(g);
	}
	{
		llm_grammar *g = NULL;
		uint32_t	m[1];
		llm_grammar_state s;

		llm_grammar_compile_regex("(a|b)*", 6, &g, err, sizeof(err));
		llm_grammar_mask_compute(ix, g, llm_grammar_start(g), m);
		CHECK(bit(m, 2) && bit(m, 5), "both ids of duplicate bytes \"ab\" allowed");
		CHECK(bit(m, 7) && !bit(m, 6) && !bit(m, 15) && !bit(m, 4), "EOG in an accepting state; special and empty never");
		CHECK(bit(m, 13), "a 70000-byte token is walked outside the trie");
		s = llm_grammar_advance_token(ix, g, llm_grammar_start(g), 2);
		CHECK(s != LLM_GRAMMAR_DEAD && s == llm_grammar_advance(g, llm_grammar_start(g), "ab", 2),
			  "advance_token follows the token's bytes");
		CHECK(llm_grammar_advance_token(ix, g, s, 7) == LLM_GRAMMAR_DEAD &&
			  llm_grammar_advance_token(ix, g, s, 6) == LLM_GRAMMAR_DEAD &&
			  llm_grammar_advance_token(ix, g, s, 4) == LLM_GRAMMAR_DEAD &&
			  llm_grammar_advance_token(ix, g, s, 3) == LLM_GRAMMAR_DEAD &&
			  llm_grammar_advance_token(ix, g, s, -1) == LLM_GRAMMAR_DEAD &&
			  llm_grammar_advance_token(ix, g, s, NV) == LLM_GRAMMAR_DEAD,
			  "advance_token: EOG, special, empty, disallowed and out-of-range ids are DEAD");
		llm_grammar_free(g);
		/* a token may end inside a character: \xC3 then only \xA9 */
		llm_grammar_compile_regex("\xC3\xA9+", 3, &g, err, sizeof(err));
		s = llm_grammar_advance_token(ix, g, llm_grammar_start(g), 9);
		llm_grammar_mask_compute(ix, g, s, m);
		CHECK(s != LLM_GRAMMAR_DEAD && m[0] == (1u << 10), "after a token ending mid-character only its continuation");
		llm_grammar_free(g);
	}
	/* mask_apply: a partial word, a full one, an empty one, a partial tail */
	{
		float		logits[102];
		uint32_t	m[4] = {0x80000001u, 0xFFFFFFFFu, 0u, 0x20u};
		bool		ok = true;

		for (int i = 0; i < 102; i++)
			logits[i] = (float) i;
		llm_grammar_mask_apply(m, 102, logits);
		for (int i = 0; i < 102; i++)
		{
			bool		keep = (m[i / 32] >> (i % 32)) & 1;

			ok = ok && (keep ? logits[i] == (float) i : (isinf(logits[i]) && logits[i] < 0));
		}
		CHECK(ok, "mask_apply sets exactly the disallowed logits to -inf (102 ids)");
	}
	/* bad input */
	{
		int32_t		bad_eog[] = {NV};
		int32_t		neg_len[] = {1, -1};

		CHECK(llm_token_index_create(NV, toks, lens, special, bad_eog, 1, err, sizeof(err)) == NULL &&
			  strstr(err, "out of range"), "EOG id out of range rejected: %s", err);
		CHECK(llm_token_index_create(2, toks, neg_len, NULL, NULL, 0, err, sizeof(err)) == NULL,
			  "negative length rejected: %s", err);
		CHECK(llm_token_index_create(0, toks, lens, NULL, NULL, 0, err, sizeof(err)) == NULL, "empty vocabulary rejected");
	}

	/* cache */
	{
		llm_grammar *g1 = NULL,
				   *g2 = NULL;
		llm_mask_cache *c = llm_mask_cache_create(ix, 3 * sizeof(uint32_t));
		llm_mask_cache_stats st;
		bool		ok = true;
		int32_t		na;

		llm_grammar_compile_regex("(a|b|c)*", 8, &g1, err, sizeof(err));
		llm_grammar_compile_regex("ab(c|ab)*", 9, &g2, err, sizeof(err));
		CHECK(c && g1 && g2, "cache of 3 masks");
		for (int round = 0; round < 200 && c && g1 && g2; round++)
		{
			llm_grammar *g = (rnd() & 1) ? g1 : g2;
			llm_grammar_state s = (llm_grammar_state) (rnd() % (llm_grammar_n_states(g) + 1));
			const uint32_t *m = llm_mask_cache_get(c, g, s, &na);
			uint32_t	want[1];
			int32_t		wn = llm_grammar_mask_compute(ix, g, s, want);

			ok = ok && m && m[0] == want[0] && na == wn;
		}
		if (c)
		{
			llm_mask_cache_get_stats(c, &st);
			CHECK(ok, "200 random lookups over two grammars equal fresh masks");
			CHECK(st.capacity == 3 && st.entries == 3 && st.hits + st.misses == 200 && st.hits > 0 &&
				  st.evictions > 0 && st.evictions == st.misses - 3,
				  "stats: capacity 3, %llu hits, %llu misses, %llu evictions", (unsigned long long) st.hits,
				  (unsigned long long) st.misses, (unsigned long long) st.evictions);
			/* a hot entry survives: CLOCK gives it a second chance */
			{
				const uint32_t *m;
				uint64_t	h0;

				llm_mask_cache_get(c, g1, 1, NULL);
				llm_mask_cache_get_stats(c, &st);
				h0 = st.hits;
				for (int i = 0; i < 10; i++)
				{
					llm_mask_cache_get(c, g1, 1, NULL);
					llm_mask_cache_get(c, g2, (llm_grammar_state) (1 + i % 3), NULL);
				}
				m = llm_mask_cache_get(c, g1, 1, NULL);
				llm_mask_cache_get_stats(c, &st);
				CHECK(m && st.hits >= h0 + 11, "a mask used every other call stays cached");
			}
		}
		llm_mask_cache_free(c);
		llm_grammar_free(g1);
		llm_grammar_free(g2);
	}
	llm_token_index_free(ix);
}

/* ---------- an independent JSON reader and schema validator ---------- */

typedef struct jv
{
	int			type;			/* 'n' null, 'b' bool, 'd' number, 's' string, 'a' array, 'o' object */
	bool		b;
	char	   *text;			/* number text or decoded string */
	size_t		len;
	int			n;
	struct jv **items;
	char	  **keys;
	size_t	   *key_lens;
} jv;

typedef struct jreader
{
	const char *s;
	size_t		n,
				pos;
	bool		ok;
} jreader;

static void
jv_free(jv *v)
{
	if (v == NULL)
		return;
	for (int i = 0; i < v->n; i++)
	{
		jv_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->key_lens);
	free(v->text);
	free(v);
}

static int
hex1(char c)
{
	return (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 :
		(c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
}

static void
put_cp(char *out, size_t *w, uint32_t cp)
{
	if (cp < 0x80)
		out[(*w)++] = (char) cp;
	else if (cp < 0x800)
	{
		out[(*w)++] = (char) (0xC0 | (cp >> 6));
		out[(*w)++] = (char) (0x80 | (cp & 63));
	}
	else if (cp < 0x10000)
	{
		out[(*w)++] = (char) (0xE0 | (cp >> 12));
		out[(*w)++] = (char) (0x80 | ((cp >> 6) & 63));
		out[(*w)++] = (char) (0x80 | (cp & 63));
	}
	else
	{
		out[(*w)++] = (char) (0xF0 | (cp >> 18));
		out[(*w)++] = (char) (0x80 | ((cp >> 12) & 63));
		out[(*w)++] = (char) (0x80 | ((cp >> 6) & 63));
		out[(*w)++] = (char) (0x80 | (cp & 63));
	}
}

/* UTF-8 validity of s[0..n) (no overlongs, surrogates, > U+10FFFF). */
static bool
utf8_ok(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;)
	{
		unsigned	c = s[i],
					len,
					cp;

		if (c < 0x80)
		{
			i++;
			continue;
		}
		len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
		if (len == 0 || i + len > n)
			return false;
		cp = c & (0x3F >> (len - 1));
		for (unsigned k = 1; k < len; k++)
		{
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 63);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
			cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

static char *
read_string(jreader *r, size_t *len)
{
	char	   *out = malloc(r->n - r->pos + 1);
	size_t		w = 0;

	r->pos++;
	while (r->pos < r->n && r->s[r->pos] != '"')
	{
		unsigned char c = (unsigned char) r->s[r->pos];

		if (c < 0x20)
			goto bad;
		if (c != '\\')
		{
			out[w++] = (char) c;
			r->pos++;
			continue;
		}
		if (r->pos + 1 >= r->n)
			goto bad;
		c = (unsigned char) r->s[r->pos + 1];
		r->pos += 2;
		if (c == 'u')
		{
			uint32_t	cp = 0;

			for (int k = 0; k < 4; k++)
			{
				int			h = r->pos < r->n ? hex1(r->s[r->pos++]) : -1;

				if (h < 0)
					goto bad;
				cp = cp * 16 + (uint32_t) h;
			}
			if (cp >= 0xD800 && cp <= 0xDFFF)
				goto bad;		/* the outputs under test never need surrogate escapes */
			put_cp(out, &w, cp);
			continue;
		}
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				out[w++] = (char) c;
				break;
			case 'b':
				out[w++] = '\b';
				break;
			case 'f':
				out[w++] = '\f';
				break;
			case 'n':
				out[w++] = '\n';
				break;
			case 'r':
				out[w++] = '\r';
				break;
			case 't':
				out[w++] = '\t';
				break;
			default:
				goto bad;
		}
	}
	if (r->pos >= r->n || !utf8_ok((unsigned char *) out, w))
		goto bad;
	r->pos++;
	out[w] = '\0';
	*len = w;
	return out;
bad:
	free(out);
	r->ok = false;
	return NULL;
}

static jv *
read_value(jreader *r, int depth)
{
	jv		   *v;
	const char *s = r->s;

	if (!r->ok || r->pos >= r->n || depth > 100)
	{
		r->ok = false;
		return NULL;
	}
	v = calloc(1, sizeof(jv));
	switch (s[r->pos])
	{
		case 'n':
		case 't':
		case 'f':
			{
				const char *w = s[r->pos] == 'n' ? "null" : s[r->pos] == 't' ? "true" : "false";
				size_t		wl = strlen(w);

				if (r->n - r->pos < wl || memcmp(s + r->pos, w, wl) != 0)
					break;
				v->type = s[r->pos] == 'n' ? 'n' : 'b';
				v->b = s[r->pos] == 't';
				r->pos += wl;
				return v;
			}
		case '"':
			v->type = 's';
			v->text = read_string(r, &v->len);
			if (v->text)
				return v;
			break;
		case '[':
		case '{':
			{
				bool		obj = s[r->pos] == '{';

				v->type = obj ? 'o' : 'a';
				r->pos++;
				if (r->pos < r->n && s[r->pos] == (obj ? '}' : ']'))
				{
					r->pos++;
					return v;
				}
				for (;;)
				{
					char	   *key = NULL;
					size_t		kl = 0;
					jv		   *item;

					if (obj)
					{
						if (r->pos >= r->n || s[r->pos] != '"' || (key = read_string(r, &kl)) == NULL ||
							r->pos >= r->n || s[r->pos] != ':')
						{
							free(key);
							r->ok = false;
							break;
						}
						r->pos++;
					}
					item = read_value(r, depth + 1);
					if (item == NULL)
					{
						free(key);
						break;
					}
					v->items = realloc(v->items, sizeof(jv *) * (v->n + 1));
					v->items[v->n] = item;
					if (obj)
					{
						v->keys = realloc(v->keys, sizeof(char *) * (v->n + 1));
						v->key_lens = realloc(v->key_lens, sizeof(size_t) * (v->n + 1));
						v->keys[v->n] = key;
						v->key_lens[v->n] = kl;
					}
					v->n++;
					if (r->pos < r->n && s[r->pos] == ',')
					{
						r->pos++;
						continue;
					}
					if (r->pos < r->n && s[r->pos] == (obj ? '}' : ']'))
					{
						r->pos++;
						return v;
					}
					r->ok = false;
					break;
				}
				break;
			}
		default:
			{
				/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
				size_t		st = r->pos;

				if (s[r->pos] == '-')
					r->pos++;
				if (r->pos < r->n && s[r->pos] == '0')
					r->pos++;
				else if (r->pos < r->n && s[r->pos] >= '1' && s[r->pos] <= '9')
					while (r->pos < r->n && s[r->pos] >= '0' && s[r->pos] <= '9')
						r->pos++;
				else
					break;
				if (r->pos < r->n && s[r->pos] == '.')
				{
					r->pos++;
					if (r->pos >= r->n || s[r->pos] < '0' || s[r->pos] > '9')
						break;
					while (r->pos < r->n && s[r->pos] >= '0' && s[r->pos] <= '9')
						r->pos++;
				}
				if (r->pos < r->n && (s[r->pos] == 'e' || s[r->pos] == 'E'))
				{
					r->pos++;
					if (r->pos < r->n && (s[r->pos] == '+' || s[r->pos] == '-'))
						r->pos++;
					if (r->pos >= r->n || s[r->pos] < '0' || s[r->pos] > '9')
						break;
					while (r->pos < r->n && s[r->pos] >= '0' && s[r->pos] <= '9')
						r->pos++;
				}
				v->type = 'd';
				v->len = r->pos - st;
				v->text = malloc(v->len + 1);
				memcpy(v->text, s + st, v->len);
				v->text[v->len] = '\0';
				return v;
			}
	}
	r->ok = false;
	jv_free(v);
	return NULL;
}

/* Parse text with no whitespace at all (the outputs must be compact). */
static jv *
read_compact(const char *s, size_t n)
{
	jreader		r = {s, n, 0, true};
	jv		   *v = read_value(&r, 0);

	if (v && (!r.ok || r.pos != n))
	{
		jv_free(v);
		return NULL;
	}
	return v;
}

static jv *
read_json(const char *s)
{
	/* schemas in this file are written without whitespace too */
	return read_compact(s, strlen(s));
}

static const jv *
member(const jv *o, const char *key)
{
	if (o == NULL || o->type != 'o')
		return NULL;
	for (int i = 0; i < o->n; i++)
		if (o->key_lens[i] == strlen(key) && memcmp(o->keys[i], key, o->key_lens[i]) == 0)
			return o->items[i];
	return NULL;
}

/* Canonical compact text of v (strings: \" \\ \b \f \n \r \t, \u00xx for other controls, all else raw). */
static void
canon(const jv *v, char **buf, size_t *w, size_t *cap)
{
	char		tmp[16];

#define PUT(p, l) do { size_t l_ = (l); if (*w + l_ + 1 > *cap) { *cap = (*w + l_ + 1) * 2; *buf = realloc(*buf, *cap); } \
		memcpy(*buf + *w, (p), l_); *w += l_; } while (0)
	switch (v->type)
	{
		case 'n':
			PUT("null", 4);
			break;
		case 'b':
			PUT(v->b ? "true" : "false", v->b ? 4 : 5);
			break;
		case 'd':
			PUT(v->text, v->len);
			break;
		case 's':
		case 'k':
			PUT("\"", 1);
			for (size_t i = 0; i < v->len; i++)
			{
				unsigned char c = (unsigned char) v->text[i];
				const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f" :
					c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;

				if (e)
					PUT(e, 2);
				else if (c < 0x20)
				{
					snprintf(tmp, sizeof(tmp), "\\u%04x", c);
					PUT(tmp, 6);
				}
				else
					PUT(v->text + i, 1);
			}
			PUT("\"", 1);
			break;
		default:
			PUT(v->type == 'o' ? "{" : "[", 1);
			for (int i = 0; i < v->n; i++)
			{
				if (i)
					PUT(",", 1);
				if (v->type == 'o')
				{
					jv			k = {.type = 'k', .text = v->keys[i], .len = v->key_lens[i]};

					canon(&k, buf, w, cap);
					PUT(":", 1);
				}
				canon(v->items[i], buf, w, cap);
			}
			PUT(v->type == 'o' ? "}" : "]", 1);
	}
#undef PUT
}

/* sign of (decimal text t) - b, exactly; t is plain or exponent-free JSON number text */
static int
cmp_dec_int(const char *t, long long b)
{
	char		bs[32];
	bool		neg = *t == '-',
				bneg = b < 0;
	const char *ip = neg ? t + 1 : t;
	size_t		il = strspn(ip, "0123456789");
	bool		frac = false;
	int			mag;

	for (const char *f = ip + il + (ip[il] == '.'); ip[il] == '.' && *f; f++)
		frac |= *f != '0';
	snprintf(bs, sizeof(bs), "%llu", bneg ? (unsigned long long) (-(b + 1)) + 1 : (unsigned long long) b);
	if (il == 1 && ip[0] == '0' && !frac)
		neg = false;			/* zero */
	if (neg != bneg)
		return neg ? -1 : 1;
	/* compare magnitudes |t| vs |b| */
	if (il != strlen(bs))
		mag = il > strlen(bs) ? 1 : -1;
	else
	{
		int			c = memcmp(ip, bs, il);

		mag = c > 0 ? 1 : c < 0 ? -1 : (frac ? 1 : 0);
	}
	return neg ? -mag : mag;
}

static size_t
n_chars(const char *s, size_t n)
{
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
		k += ((unsigned char) s[i] & 0xC0) != 0x80;
	return k;
}

static bool
full_match(const char *re, const char *s, size_t n)
{
	int			ec;
	PCRE2_SIZE	eo;
	pcre2_code *pc = pcre2_compile((PCRE2_SPTR) re, PCRE2_ZERO_TERMINATED,
								   PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &ec, &eo, NULL);
	pcre2_match_data *md;
	int			rc;

	if (pc == NULL)
		return false;
	md = pcre2_match_data_create_from_pattern(pc, NULL);
	rc = pcre2_match(pc, (PCRE2_SPTR) s, n, 0, 0, md, NULL);
	pcre2_match_data_free(md);
	pcre2_code_free(pc);
	return rc >= 0;
}

static bool
is_date(const char *s, size_t n)
{
	int			y,
				m,
				d;
	char		tail;

	if (n != 10 || s[4] != '-' || s[7] != '-')
		return false;
	for (int i = 0; i < 10; i++)
		if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))
			return false;
	if (sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3)
		return false;
	return m >= 1 && m <= 12 && d >= 1 && d <= 31;
}

static bool equal_values(const jv *a, const jv *b);

static bool
equal_values(const jv *a, const jv *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case 'n':
			return true;
		case 'b':
			return a->b == b->b;
		case 'd':
			return strtod(a->text, NULL) == strtod(b->text, NULL);
		case 's':
			return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
		default:
			return false;
	}
}

/* Is v valid against schema sc (the subset grammar.h documents)?  why gets the first reason. */
static bool
validate(const jv *v, const jv *sc, char *why, size_t wl)
{
	const jv   *t = member(sc, "type"),
			   *k;
	bool		type_ok = t == NULL;

#define NO(...) do { snprintf(why, wl, __VA_ARGS__); return false; } while (0)
	if ((k = member(sc, "anyOf")))
	{
		for (int i = 0; i < k->n; i++)
			if (validate(v, k->items[i], why, wl))
				return true;
		NO("no anyOf branch matches");
	}
	if ((k = member(sc, "enum")))
	{
		bool		found = false;

		for (int i = 0; i < k->n && !found; i++)
			found = equal_values(v, k->items[i]);
		if (!found)
			NO("not in enum");
	}
	if ((k = member(sc, "const")) && !equal_values(v, k))
		NO("not the const");
	if (t)
	{
		int			n = t->type == 'a' ? t->n : 1;

		for (int i = 0; i < n && !type_ok; i++)
		{
			const char *name = (t->type == 'a' ? t->items[i] : t)->text;

			type_ok = (strcmp(name, "null") == 0 && v->type == 'n') ||
				(strcmp(name, "boolean") == 0 && v->type == 'b') ||
				(strcmp(name, "string") == 0 && v->type == 's') ||
				(strcmp(name, "array") == 0 && v->type == 'a') ||
				(strcmp(name, "object") == 0 && v->type == 'o') ||
				(strcmp(name, "number") == 0 && v->type == 'd') ||
				(strcmp(name, "integer") == 0 && v->type == 'd' &&
				 strtod(v->text, NULL) == floor(strtod(v->text, NULL)));
		}
		if (!type_ok)
			NO("wrong type");
	}
	if (v->type == 's')
	{
		size_t		nc = n_chars(v->text, v->len);

		if ((k = member(sc, "minLength")) && nc < (size_t) atoll(k->text))
			NO("shorter than minLength");
		if ((k = member(sc, "maxLength")) && nc > (size_t) atoll(k->text))
			NO("longer than maxLength");
		if ((k = member(sc, "pattern")) && !full_match(k->text, v->text, v->len))
			NO("pattern %s does not match", k->text);
		if ((k = member(sc, "format")) && strcmp(k->text, "date") == 0 && !is_date(v->text, v->len))
			NO("not a date");
	}
	if (v->type == 'd')
	{
		if ((k = member(sc, "minimum")) && cmp_dec_int(v->text, atoll(k->text)) < 0)
			NO("below minimum");
		if ((k = member(sc, "maximum")) && cmp_dec_int(v->text, atoll(k->text)) > 0)
			NO("above maximum");
		if ((k = member(sc, "exclusiveMinimum")) && cmp_dec_int(v->text, atoll(k->text)) <= 0)
			NO("not above exclusiveMinimum");
		if ((k = member(sc, "exclusiveMaximum")) && cmp_dec_int(v->text, atoll(k->text)) >= 0)
			NO("not below exclusiveMaximum");
		if (strchr(v->text, 'e') || strchr(v->text, 'E'))
			NO("exponent in a number");
		if (strcmp(v->text, "-0") == 0 || (v->text[0] == '-' && strtod(v->text, NULL) == 0))
			NO("negative zero");
		if (member(sc, "type") && member(sc, "type")->type == 's' && strcmp(member(sc, "type")->text, "integer") == 0 &&
			(strtoll(v->text, NULL, 10) == LLONG_MAX || strtoll(v->text, NULL, 10) == LLONG_MIN) &&
			strcmp(v->text, "9223372036854775807") != 0 && strcmp(v->text, "-9223372036854775808") != 0)
			NO("integer outside int64");
	}
	if (v->type == 'a')
	{
		if ((k = member(sc, "minItems")) && v->n < atoi(k->text))
			NO("fewer than minItems");
		if ((k = member(sc, "maxItems")) && v->n > atoi(k->text))
			NO("more than maxItems");
		if ((k = member(sc, "items")))
			for (int i = 0; i < v->n; i++)
				if (!validate(v->items[i], k, why, wl))
					return false;
	}
	if (v->type == 'o')
	{
		const jv   *props = member(sc, "properties"),
				   *req = member(sc, "required");
		int			last = -1;

		for (int i = 0; i < v->n; i++)
		{
			int			p = -1;

			for (int j = 0; props && j < props->n; j++)
				if (props->key_lens[j] == v->key_lens[i] && memcmp(props->keys[j], v->keys[i], v->key_lens[i]) == 0)
					p = j;
			if (p < 0)
				NO("key %s not in properties", v->keys[i]);
			if (p <= last)
				NO("key %s out of schema order or repeated", v->keys[i]);
			last = p;
			if (!validate(v->items[i], props->items[p], why, wl))
				return false;
		}
		for (int j = 0; req && j < req->n; j++)
		{
			bool		found = false;

			for (int i = 0; i < v->n && !found; i++)
				found = v->key_lens[i] == req->items[j]->len &&
					memcmp(v->keys[i], req->items[j]->text, v->key_lens[i]) == 0;
			if (!found)
				NO("required %s missing", req->items[j]->text);
		}
	}
#undef NO
	return true;
}

/* ---------- real vocabulary ---------- */

static vocab rv;

static bool
load_real(llm_tokenizer *t)
{
	int32_t		n = llm_tokenizer_n_vocab(t);

	rv.n = n;
	rv.bytes = calloc(n, sizeof(char *));
	rv.lens = calloc(n, sizeof(int32_t));
	rv.special = calloc(n, 1);
	rv.eog = calloc(n, 1);
	for (int32_t i = 0; i < n; i++)
	{
		int			len = llm_token_to_bytes(t, i, NULL, 0);
		char	   *b = malloc(len + 1);

		llm_token_to_bytes(t, i, b, len);
		b[len] = '\0';
		rv.bytes[i] = b;
		rv.lens[i] = len;
		rv.special[i] = len > 0 && llm_tokenizer_special_id(t, b) == i;
		rv.eog[i] = llm_tokenizer_is_eog(t, i);
	}
	return true;
}

/* Shortest distance (in bytes) from each state to acceptance, by backward BFS over all byte transitions. */
static int32_t *
distances(const llm_grammar *g)
{
	int32_t		n = llm_grammar_n_states(g);
	int32_t    *dist = malloc(sizeof(int32_t) * (n + 1));
	int32_t    *head = malloc(sizeof(int32_t) * (n + 1));
	int32_t    *next = malloc(sizeof(int32_t) * (size_t) (n + 1) * 256);
	int32_t    *from = malloc(sizeof(int32_t) * (size_t) (n + 1) * 256);
	int32_t    *queue = malloc(sizeof(int32_t) * (n + 1));
	int32_t		ne = 0,
				qh = 0,
				qt = 0;

	for (int32_t s = 0; s <= n; s++)
	{
		dist[s] = -1;
		head[s] = -1;
	}
	for (int32_t s = 1; s <= n; s++)
		for (int b = 0; b < 256; b++)
		{
			uint8_t		byte = (uint8_t) b;
			llm_grammar_state t = llm_grammar_advance(g, s, &byte, 1);

			if (t == LLM_GRAMMAR_DEAD)
				continue;
			from[ne] = s;
			next[ne] = head[t];
			head[t] = ne++;
		}
	for (int32_t s = 1; s <= n; s++)
		if (llm_grammar_is_accepting(g, s))
		{
			dist[s] = 0;
			queue[qt++] = s;
		}
	while (qh < qt)
	{
		int32_t		t = queue[qh++];

		for (int32_t e = head[t]; e >= 0; e = next[e])
			if (dist[from[e]] < 0)
			{
				dist[from[e]] = dist[t] + 1;
				queue[qt++] = from[e];
			}
	}
	free(head);
	free(next);
	free(from);
	free(queue);
	return dist;
}

typedef struct walk_stats
{
	int			walks,
				finished,
				accepted,
				valid,
				masks_ok,
				states_checked,
				mismatches,
				never_empty,
				special_leak,
				mid_char_tokens;
	char		why[512];
} walk_stats;

/*
 * Random walks over allowed tokens; every visited state's mask is compared
 * with brute force (up to max_checks states); the finished strings go to
 * check(), which returns false with a reason.
 */
static void
walks(const llm_token_index *ix, const llm_grammar *g, int n_walks, int max_checks,
	  bool (*check) (const char *s, size_t n, const void *arg, char *why, size_t wl), const void *arg,
	  walk_stats *ws)
{
	int32_t    *dist = distances(g);
	int32_t		nw = llm_token_index_mask_words(ix);
	uint32_t   *m = malloc(sizeof(uint32_t) * nw);
	int32_t    *allowed = malloc(sizeof(int32_t) * rv.n);
	char	   *out = malloc(65536);

	memset(ws, 0, sizeof(*ws));
	for (int w = 0; w < n_walks; w++)
	{
		llm_grammar_state s = llm_grammar_start(g);
		size_t		n = 0;
		bool		done = false;

		ws->walks++;
		for (int step = 0; step < 2000 && !done; step++)
		{
			int32_t		na = 0,
						cnt;

			cnt = llm_grammar_mask_compute(ix, g, s, m);
			if (ws->states_checked < max_checks && (rnd() % 3 == 0 || step < 3))
			{
				int32_t		bn;
				char		why[256] = "";

				ws->states_checked++;
				if (compare_mask(&rv, ix, g, s, why, sizeof(why), &bn) && ws->mismatches++ == 0)
					snprintf(ws->why, sizeof(ws->why), "mask: %s", why);
			}
			for (int32_t id = 0; id < rv.n; id++)
				if (bit(m, id))
				{
					allowed[na++] = id;
					if (rv.special[id] && !rv.eog[id])
						ws->special_leak++;
					if (rv.eog[id] && !llm_grammar_is_accepting(g, s))
						ws->special_leak++;
				}
			if (na != cnt || na == 0)
			{
				if (ws->never_empty++ == 0)
					snprintf(ws->why, sizeof(ws->why), "state %u allows %d tokens (count %d)", s, na, cnt);
				break;
			}
			{
				int32_t		pick = -1;

				/* accepting: stop now and then (EOG is one of the allowed ids) */
				if (llm_grammar_is_accepting(g, s) && (rnd() % 3 == 0 || !llm_grammar_can_continue(g, s)))
				{
					for (int32_t i = 0; i < na && pick < 0; i++)
						if (rv.eog[allowed[i]])
							pick = allowed[i];
				}
				else if ((int) (rnd() % 100) < (step < 40 ? 15 : 90))
				{
					/* toward acceptance: best of a sample */
					int32_t		best = INT32_MAX;

					for (int k = 0; k < 48; k++)
					{
						int32_t		id = allowed[rnd() % na];
						llm_grammar_state t;

						if (rv.eog[id])
							continue;
						t = llm_grammar_advance(g, s, rv.bytes[id], rv.lens[id]);
						if (dist[t] < best)
						{
							best = dist[t];
							pick = id;
						}
					}
				}
				if (pick < 0)
				{
					/* any allowed ordinary token */
					for (int k = 0; k < 64 && (pick < 0 || rv.eog[pick]); k++)
						pick = allowed[rnd() % na];
					if (rv.eog[pick] && !llm_grammar_is_accepting(g, s))
						pick = -1;
				}
				if (pick < 0)
					continue;
				if (rv.eog[pick])
				{
					done = true;
					break;
				}
				if (n + rv.lens[pick] > 65536)
					break;
				memcpy(out + n, rv.bytes[pick], rv.lens[pick]);
				n += rv.lens[pick];
				s = llm_grammar_advance_token(ix, g, s, pick);
				/* a token ending inside a character: the state waits for continuation bytes */
				{
					size_t		k = n;

					while (k > 0 && ((unsigned char) out[k - 1] & 0xC0) == 0x80)
						k--;
					if (k > 0 && (unsigned char) out[k - 1] >= 0xC0)
					{
						size_t		need = (unsigned char) out[k - 1] >= 0xF0 ? 4 : (unsigned char) out[k - 1] >= 0xE0 ? 3 : 2;

						if (n - (k - 1) < need)
							ws->mid_char_tokens++;
					}
				}
				if (s == LLM_GRAMMAR_DEAD)
				{
					if (ws->mismatches++ == 0)
						snprintf(ws->why, sizeof(ws->why), "an allowed token led to DEAD");
					break;
				}
			}
		}
		if (!done)
			continue;
		ws->finished++;
		if (!llm_grammar_matches(g, out, n))
		{
			if (ws->accepted == ws->finished - 1 && ws->why[0] == '\0')
				snprintf(ws->why, sizeof(ws->why), "walk ended in a rejected string: %s", shown(out, (int32_t) n));
			continue;
		}
		ws->accepted++;
		{
			char		why[256] = "";

			if (check(out, n, arg, why, sizeof(why)))
				ws->valid++;
			else if (ws->why[0] == '\0')
				snprintf(ws->why, sizeof(ws->why), "%s: %s", why, shown(out, (int32_t) n));
		}
	}
	free(dist);
	free(m);
	free(allowed);
	free(out);
}

static bool
check_schema(const char *s, size_t n, const void *arg, char *why, size_t wl)
{
	const jv   *sc = arg;
	jv		   *v = read_compact(s, n);
	char	   *buf = NULL;
	size_t		w = 0,
				cap = 0;
	bool		ok;

	if (v == NULL)
	{
		snprintf(why, wl, "not compact JSON");
		return false;
	}
	canon(v, &buf, &w, &cap);
	if (w != n || memcmp(buf, s, n) != 0)
	{
		snprintf(why, wl, "not canonical (canonical: %s)", shown(buf, (int32_t) w));
		ok = false;
	}
	else
		ok = validate(v, sc, why, wl);
	free(buf);
	jv_free(v);
	return ok;
}

static bool
check_regex(const char *s, size_t n, const void *arg, char *why, size_t wl)
{
	if (!full_match(arg, s, n))
	{
		snprintf(why, wl, "PCRE2 does not match");
		return false;
	}
	return true;
}

static bool
check_choice(const char *s, size_t n, const void *arg, char *why, size_t wl)
{
	const char *const *c = arg;

	for (; *c; c++)
		if (strlen(*c) == n && memcmp(*c, s, n) == 0)
			return true;
	snprintf(why, wl, "not one of the choices");
	return false;
}

static void
report(const char *name, const walk_stats *ws, int min_finished)
{
	CHECK(ws->mismatches == 0, "%s: masks of %d visited states equal brute force over the vocabulary %s", name,
		  ws->states_checked, ws->mismatches ? ws->why : "");
	CHECK(ws->never_empty == 0 && ws->special_leak == 0,
		  "%s: every state allows a token; special ids never, EOG only when accepting %s", name,
		  ws->never_empty ? ws->why : "");
	CHECK(ws->finished >= min_finished && ws->accepted == ws->finished && ws->valid == ws->accepted,
		  "%s: %d/%d walks finished, all accepted (%d) and valid (%d) %s", name, ws->finished, ws->walks,
		  ws->accepted, ws->valid, ws->valid != ws->finished ? ws->why : "");
}

static const char *const property_schemas[] = {
	"{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":80},"
	"\"priority\":{\"enum\":[\"low\",\"medium\",\"high\",\"urgent\"]},"
	"\"category\":{\"type\":\"string\",\"enum\":[\"bug\",\"billing\",\"account\",\"feature\",\"other\"]},"
	"\"customer_id\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":999999},\"summary\":{\"type\":\"string\",\"maxLength\":200}},"
	"\"required\":[\"title\",\"priority\",\"category\",\"customer_id\",\"summary\"]}",

	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":12,"
	"\"pattern\":\"[A-Za-z\xC3\x80-\xC3\xBF ]+\"},\"age\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":150},"
	"\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":6},\"maxItems\":3},"
	"\"address\":{\"type\":\"object\",\"properties\":{\"zip\":{\"type\":\"string\",\"pattern\":\"\\\\d{5}\"},"
	"\"city\":{\"type\":\"string\",\"maxLength\":10}},\"required\":[\"zip\"]},"
	"\"kind\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"boolean\"},{\"enum\":[\"a\\\"b\",\"\xC3\xA9\",\"tab\\t\"]}]},"
	"\"when\":{\"type\":\"string\",\"format\":\"date\"},\"big\":{\"type\":\"integer\"}},\"required\":[\"name\",\"age\"]}",

	"{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"exclusiveMinimum\":-1000,\"exclusiveMaximum\":1000},"
	"\"minItems\":1,\"maxItems\":5}",

	"{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"k\\\"ey\":{\"type\":\"string\"},"
	"\"v\":{\"type\":[\"number\",\"null\"],\"exclusiveMaximum\":0}},\"required\":[\"v\"]},\"maxItems\":3}",
};

/* The checker itself rejects what it must (so the property test can fail). */
static void
test_checker(void)
{
	static const struct
	{
		int			schema;
		const char *s;
		bool		valid;
	}			cases[] = {
		{0, "{\"title\":\"t\",\"priority\":\"low\",\"category\":\"bug\",\"customer_id\":1,\"summary\":\"s\"}", true},
		{0, "{\"priority\":\"low\",\"title\":\"t\",\"category\":\"bug\",\"customer_id\":1,\"summary\":\"s\"}", false},
		{0, "{\"title\":\"t\",\"priority\":\"lo\",\"category\":\"bug\",\"customer_id\":1,\"summary\":\"s\"}", false},
		{0, "{\"title\":\"t\",\"priority\":\"low\",\"category\":\"bug\",\"customer_id\":0,\"summary\":\"s\"}", false},
		{0, "{\"title\":\"t\",\"priority\":\"low\",\"category\":\"bug\",\"customer_id\":1}", false},
		{0, "{\"title\":\"t\",\"priority\":\"low\",\"category\":\"bug\",\"customer_id\":1,\"summary\":\"s\",\"x\":1}", false},
		{0, "{\"title\":\"\\u00e9\",\"priority\":\"low\",\"category\":\"bug\",\"customer_id\":1,\"summary\":\"s\"}", false},
		{0, "{\"title\": \"t\",\"priority\":\"low\",\"category\":\"bug\",\"customer_id\":1,\"summary\":\"s\"}", false},
		{1, "{\"name\":\"Zo\xC3\xA9\",\"age\":-5,\"score\":1.0,\"kind\":\"a\\\"b\",\"when\":\"2024-02-30\"}", true},
		{1, "{\"name\":\"Zo\xC3\xA9\",\"age\":151}", false},
		{1, "{\"name\":\"Zo1\",\"age\":1}", false},
		{1, "{\"name\":\"Z\",\"age\":1,\"score\":1.01}", false},
		{1, "{\"name\":\"Z\",\"age\":1,\"when\":\"2024-13-01\"}", false},
		{1, "{\"name\":\"Z\",\"age\":1,\"big\":9223372036854775808}", false},
		{1, "{\"name\":\"Z\",\"age\":-0}", false},
		{2, "[999,-999]", true},
		{2, "[1000]", false},
		{2, "[]", false},
		{3, "[{\"v\":-0.5},{\"k\\\"ey\":\"x\",\"v\":null}]", true},
		{3, "[{\"v\":0}]", false},
	};
	bool		ok = true;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		jv		   *sc = read_json(property_schemas[cases[i].schema]);
		char		why[256] = "";
		bool		got = sc && check_schema(cases[i].s, strlen(cases[i].s), sc, why, sizeof(why));

		if (got != cases[i].valid)
		{
			CHECK(0, "checker on case %zu: expected %d (%s)", i, cases[i].valid, why);
			ok = false;
		}
		jv_free(sc);
	}
	CHECK(ok, "the independent checker accepts and rejects its %zu known cases", sizeof(cases) / sizeof(cases[0]));
}

static void
test_real(const char *path)
{
	char		err[256];
	gguf_file  *f = gguf_open(path, err, sizeof(err));
	llm_tokenizer *t = f ? llm_tokenizer_create(f, err, sizeof(err)) : NULL;
	llm_token_index *ix;
	int32_t		n_special = 0,
				n_eog = 0;

	CHECK(t != NULL, "tokenizer of %s (%s)", path, err);
	if (t == NULL)
	{
		if (f)
			gguf_close(f);
		return;
	}
	load_real(t);
	ix = llm_token_index_from_tokenizer(t, err, sizeof(err));
	CHECK(ix != NULL && llm_token_index_n_vocab(ix) == rv.n, "token index of %d tokens (%s)", rv.n, err);
	if (ix == NULL)
		return;
	for (int32_t i = 0; i < rv.n; i++)
	{
		n_special += rv.special[i];
		n_eog += rv.eog[i];
	}
	printf("# vocabulary: %d tokens, %d special, %d end-of-generation, %d trie nodes, %zu bytes\n", rv.n, n_special,
		   n_eog, llm_token_index_n_nodes(ix), llm_token_index_memory(ix));
	CHECK(n_special > 0 && n_eog > 0 && llm_tokenizer_special_id(t, "<|im_end|>") >= 0 &&
		  rv.eog[llm_tokenizer_special_id(t, "<|im_end|>")], "special ids and <|im_end|> as end-of-generation");

	for (size_t i = 0; i < sizeof(property_schemas) / sizeof(property_schemas[0]); i++)
	{
		llm_grammar *g = NULL;
		jv		   *sc = read_json(property_schemas[i]);
		walk_stats	ws;
		char		name[32];

		snprintf(name, sizeof(name), "schema %zu", i + 1);
		if (llm_grammar_compile_json_schema(property_schemas[i], strlen(property_schemas[i]), &g, err, sizeof(err)) ||
			sc == NULL)
		{
			CHECK(0, "%s compiles (%s) and the test reads it", name, err);
			jv_free(sc);
			continue;
		}
		walks(ix, g, 30, 60, check_schema, sc, &ws);
		report(name, &ws, 20);
		jv_free(sc);
		llm_grammar_free(g);
	}
	{
		static const char *const regexes[] = {
			"[\\x{400}-\\x{4FF}]{2,6}( [a-z]+)?", "(\\d{3}-){2}\\d{4}", "[^\"\\n]{1,10}!", "(yes|no)[.!?]",
			"\\w+( \\w+){0,3}\\.", "[\xE4\xB8\x80-\xE9\xBF\xBF]{1,8}", ".{0,40}", "\\s*[\\x{1F600}-\\x{1F64F}]\\s*",
		};

		int			mid_char = 0;

		for (size_t i = 0; i < sizeof(regexes) / sizeof(regexes[0]); i++)
		{
			llm_grammar *g = NULL;
			walk_stats	ws;

			if (llm_grammar_compile_regex(regexes[i], strlen(regexes[i]), &g, err, sizeof(err)))
			{
				CHECK(0, "/%s/ compiles (%s)", regexes[i], err);
				continue;
			}
			walks(ix, g, 25, 25, check_regex, regexes[i], &ws);
			report(regexes[i], &ws, 15);
			mid_char += ws.mid_char_tokens;
			llm_grammar_free(g);
		}
		CHECK(mid_char > 0, "the walks took %d tokens that end inside a UTF-8 character", mid_char);
	}
	{
		const char *choices[] = {"yes", "no", "maybe", "no way", "n", "caf\xC3\xA9 au lait", NULL};
		size_t		lens[6];
		llm_grammar *g = NULL;
		walk_stats	ws;

		for (int i = 0; i < 6; i++)
			lens[i] = strlen(choices[i]);
		llm_grammar_compile_choices(choices, lens, 6, &g, err, sizeof(err));
		CHECK(g != NULL, "choices compile");
		if (g)
		{
			walks(ix, g, 40, 40, check_choice, choices, &ws);
			report("choices", &ws, 30);
			llm_grammar_free(g);
		}
	}
	/*
	 * Every state of small grammars against brute force: bounded strings
	 * (plain-text runs that end at a cliff), runs ending where only some
	 * plain characters continue, patterns that exclude non-ASCII text.
	 */
	{
		static const struct
		{
			bool		schema;
			const char *src;
		}			small[] = {
			{true, "{\"type\":\"string\",\"maxLength\":12}"},
			{true, "{\"type\":\"string\",\"minLength\":2,\"maxLength\":5,\"pattern\":\".*\"}"},
			{true, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":3},"
			"\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}"},
			{false, ".{3}[a-z]+"},
			{false, "[^\"]{0,6}x"},
			{false, "[\\x{400}-\\x{4FF} ]{0,9}"},
			{false, "[ -~]{0,4}"},
			{false, "(\\w|\xC3\xA9){2,7}\\."},
		};

		for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
		{
			llm_grammar *g = NULL;
			int32_t		bad = 0,
						na;
			char		why[256] = "";

			if (small[i].schema)
				llm_grammar_compile_json_schema(small[i].src, strlen(small[i].src), &g, err, sizeof(err));
			else
				llm_grammar_compile_regex(small[i].src, strlen(small[i].src), &g, err, sizeof(err));
			if (g == NULL)
			{
				CHECK(0, "%s compiles (%s)", small[i].src, err);
				continue;
			}
			for (llm_grammar_state st = 1; st <= (llm_grammar_state) llm_grammar_n_states(g); st++)
				bad += compare_mask(&rv, ix, g, st, why, sizeof(why), &na);
			CHECK(bad == 0, "%s: masks of all %d states equal brute force %s", small[i].src, llm_grammar_n_states(g), why);
			llm_grammar_free(g);
		}
	}
	/* a token ending inside a character: one byte of "é" inside a string, then only continuations */
	{
		llm_grammar *g = NULL;
		int32_t		c3 = -1;
		uint32_t   *m = malloc(sizeof(uint32_t) * llm_token_index_mask_words(ix));
		llm_grammar_state s;
		bool		ok = true;

		llm_grammar_compile_json_schema("{\"type\":\"string\"}", 17, &g, err, sizeof(err));
		for (int32_t id = 0; id < rv.n; id++)
			if (rv.lens[id] == 1 && (unsigned char) rv.bytes[id][0] == 0xC3 && !rv.special[id])
				c3 = id;
		CHECK(g && c3 >= 0, "the vocabulary has the single byte 0xC3 as a token");
		if (g && c3 >= 0)
		{
			s = llm_grammar_advance(g, llm_grammar_start(g), "\"", 1);
			llm_grammar_mask_compute(ix, g, s, m);
			ok = bit(m, c3);
			s = llm_grammar_advance_token(ix, g, s, c3);
			llm_grammar_mask_compute(ix, g, s, m);
			for (int32_t id = 0; id < rv.n; id++)
				if (bit(m, id) != (!rv.special[id] && rv.lens[id] > 0 &&
								   ((unsigned char) rv.bytes[id][0] >= 0x80 && (unsigned char) rv.bytes[id][0] <= 0xBF) &&
								   llm_grammar_advance(g, s, rv.bytes[id], rv.lens[id]) != LLM_GRAMMAR_DEAD))
					ok = false;
			CHECK(ok && s != LLM_GRAMMAR_DEAD && !llm_grammar_is_accepting(g, s),
				  "inside a string after 0xC3: only tokens starting with a continuation byte");
		}
		free(m);
		llm_grammar_free(g);
	}
	/* the mask cache over the real vocabulary: warm equals cold */
	{
		llm_grammar *g = NULL;
		llm_mask_cache *c = llm_mask_cache_create(ix, 64 << 20);
		uint32_t   *m = malloc(sizeof(uint32_t) * llm_token_index_mask_words(ix));
		bool		ok = true;
		llm_mask_cache_stats st;

		llm_grammar_compile_json_schema(property_schemas[0], strlen(property_schemas[0]), &g, err, sizeof(err));
		for (int r = 0; r < 2 && g && c; r++)
			for (llm_grammar_state s = 0; s <= (llm_grammar_state) llm_grammar_n_states(g); s += 7)
			{
				int32_t		na;
				const uint32_t *cm = llm_mask_cache_get(c, g, s, &na);
				int32_t		n = llm_grammar_mask_compute(ix, g, s, m);

				ok = ok && cm && na == n && memcmp(cm, m, sizeof(uint32_t) * llm_token_index_mask_words(ix)) == 0;
			}
		if (c)
		{
			llm_mask_cache_get_stats(c, &st);
			CHECK(ok && st.hits == st.misses && st.evictions == 0, "cached masks equal computed ones (%llu hits)",
				  (unsigned long long) st.hits);
		}
		free(m);
		llm_mask_cache_free(c);
		llm_grammar_free(g);
	}
	llm_token_index_free(ix);
	llm_tokenizer_destroy(t);
	gguf_close(f);
}

int
main(void)
{
	const char *path = getenv("LLM_TEST_MODEL");
	FILE	   *fp;

	test_synthetic();
	test_checker();
	if (path == NULL)
		path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	fp = fopen(path, "rb");
	if (fp == NULL)
		printf("ok # SKIP real vocabulary checks: %s not found (set LLM_TEST_MODEL)\n", path);
	else
	{
		fclose(fp);
		test_real(path);
	}
	return unit_done();
}
