/*
 * grammar.c — the front door of the grammar compiler (grammar.h): the
 * choices source, llm_grammar_compile_source dispatching to the regex
 * (grammar_regex.c) and JSON Schema (grammar_schema.c) compilers, and the
 * automaton queries.  Every compile ends in grammar_finish.c; nothing
 * below calls back into this file.
 */
#include "grammar_impl.h"
#include "engine/util/text_util.h"

#include <stdlib.h>
#include <string.h>

/* ---------- choices ---------- */

typedef struct choice_ref
{
	const char *s;
	size_t		n;
} choice_ref;

static int
cmp_choice(const void *a, const void *b)
{
	const choice_ref *x = a,
			   *y = b;
	size_t		n = x->n < y->n ? x->n : y->n;
	int			r = n ? memcmp(x->s, y->s, n) : 0;

	if (r)
		return r;
	return (x->n > y->n) - (x->n < y->n);
}

llm_grammar_status
llm_grammar_compile_choices(const char *const *choices, const size_t *lens, int32_t n,
							llm_grammar **out, char *err, size_t errlen)
{
	gctx		c;
	choice_ref *refs;
	gnode_list	alts = {0};
	size_t		total = 0,
				w = 1;
	char	   *src;
	llm_grammar_status st;
	int32_t		m = 0;

	*out = NULL;
	gctx_init(&c, err, errlen);
	c.where = "choices";
	if (n < 1 || n > LLM_GRAMMAR_MAX_CHOICES)
	{
		gctx_fail(&c, n < 1 ? LLM_GRAMMAR_INVALID : LLM_GRAMMAR_TOO_LARGE,
				  "need 1 to %d choices, got %d", LLM_GRAMMAR_MAX_CHOICES, n);
		goto out;
	}
	refs = gctx_alloc(&c, sizeof(choice_ref) * n);
	if (refs == NULL)
		goto out;
	for (int32_t i = 0; i < n; i++)
	{
		size_t		bad;

		if (choices[i] == NULL && lens[i] > 0)
		{
			gctx_fail(&c, LLM_GRAMMAR_INVALID, "choice %d is NULL", i + 1);
			goto out;
		}
		bad = llm_utf8_first_invalid(choices[i], lens[i]);
		if (bad != lens[i])
		{
			gctx_fail(&c, LLM_GRAMMAR_INVALID, "choice %d is not valid UTF-8 (byte %zu)", i + 1, bad);
			goto out;
		}
		total += lens[i] + 4;
		if (total > LLM_GRAMMAR_MAX_SOURCE)
		{
			gctx_fail(&c, LLM_GRAMMAR_TOO_LARGE, "choices too long: more than %d bytes together",
					  LLM_GRAMMAR_MAX_SOURCE);
			goto out;
		}
		refs[i].s = choices[i];
		refs[i].n = lens[i];
	}
	/* normalized: sorted, deduplicated, each as a 4-byte length and its bytes */
	qsort(refs, n, sizeof(choice_ref), cmp_choice);
	src = gctx_alloc(&c, total + 1);
	if (src == NULL)
		goto out;
	src[0] = (char) LLM_GRAMMAR_CHOICES;
	for (int32_t i = 0; i < n; i++)
	{
		uint32_t	len = (uint32_t) refs[i].n;

		if (i > 0 && cmp_choice(&refs[i - 1], &refs[i]) == 0)
			continue;
		refs[m++] = refs[i];
		memcpy(src + w, &len, 4);
		if (len)
			memcpy(src + w + 4, refs[i].s, len);
		w += 4 + len;
		if (!gnode_list_push(&c, &alts, g_bytes(&c, refs[i].s, refs[i].n)))
			goto out;
	}
	g_finish(&c, g_alt(&c, alts.v, alts.n), LLM_GRAMMAR_CHOICES, src, w, out);
out:
	st = c.status;
	gctx_done(&c);
	return st;
}

/* ---------- tagged sources ---------- */

llm_grammar_status
llm_grammar_compile_source(const char *src, size_t len, llm_grammar **out, char *err, size_t errlen)
{
	const char **choices;
	size_t	   *lens;
	int32_t		n = 0;
	size_t		at;
	llm_grammar_status st;

	*out = NULL;
	if (src == NULL || len < 1)
	{
		llm_set_err(err, errlen, "grammar source is empty");
		return LLM_GRAMMAR_INVALID;
	}
	switch ((llm_grammar_kind) (uint8_t) src[0])
	{
		case LLM_GRAMMAR_REGEX:
			return llm_grammar_compile_regex(src + 1, len - 1, out, err, errlen);
		case LLM_GRAMMAR_JSON_SCHEMA:
			return llm_grammar_compile_json_schema(src + 1, len - 1, out, err, errlen);
		case LLM_GRAMMAR_CHOICES:
			break;
		default:
			llm_set_err(err, errlen, "grammar source has unknown kind %d", (uint8_t) src[0]);
			return LLM_GRAMMAR_INVALID;
	}
	/* count, then point at, the length-prefixed choices */
	for (at = 1; at < len; n++)
	{
		uint32_t	m;

		if (len - at < 4)
			break;
		memcpy(&m, src + at, 4);
		if (m > len - at - 4)
			break;
		at += 4 + (size_t) m;
		if (n == LLM_GRAMMAR_MAX_CHOICES)
		{
			llm_set_err(err, errlen, "choices: more than %d choices", LLM_GRAMMAR_MAX_CHOICES);
			return LLM_GRAMMAR_TOO_LARGE;
		}
	}
	if (at != len || n == 0)
	{
		llm_set_err(err, errlen, "choices: malformed grammar source");
		return LLM_GRAMMAR_INVALID;
	}
	choices = malloc(sizeof(char *) * (size_t) n);
	lens = malloc(sizeof(size_t) * (size_t) n);
	if (choices == NULL || lens == NULL)
	{
		free(choices);
		free(lens);
		llm_set_err(err, errlen, "out of memory compiling the grammar");
		return LLM_GRAMMAR_NO_MEMORY;
	}
	at = 1;
	for (int32_t i = 0; i < n; i++)
	{
		uint32_t	m;

		memcpy(&m, src + at, 4);
		choices[i] = src + at + 4;
		lens[i] = m;
		at += 4 + (size_t) m;
	}
	st = llm_grammar_compile_choices(choices, lens, n, out, err, errlen);
	free(choices);
	free(lens);
	return st;
}

/* ---------- the object ---------- */

llm_grammar_kind
llm_grammar_kind_of(const llm_grammar *g)
{
	return g->kind;
}

const char *
llm_grammar_source(const llm_grammar *g, size_t *len)
{
	if (len)
		*len = g->source_len;
	return g->source;
}

uint64_t
llm_grammar_hash(const llm_grammar *g)
{
	return g->hash;
}

uint64_t
llm_grammar_id(const llm_grammar *g)
{
	return g->id;
}

int32_t
llm_grammar_n_states(const llm_grammar *g)
{
	return g->n_rows - 1;
}

int32_t
llm_grammar_n_classes(const llm_grammar *g)
{
	return g->n_classes;
}

size_t
llm_grammar_memory(const llm_grammar *g)
{
	return sizeof(*g) + sizeof(uint32_t) * (size_t) g->n_rows * g->n_classes + 3 * (size_t) g->n_rows +
		g->source_len + 1;
}

void
llm_grammar_build_sizes(const llm_grammar *g, int32_t *nfa_states, int32_t *dfa_states)
{
	if (nfa_states)
		*nfa_states = g->nfa_states;
	if (dfa_states)
		*dfa_states = g->dfa_states;
}

int64_t
llm_grammar_max_bytes(const llm_grammar *g)
{
	return g->max_bytes;
}

llm_grammar_state
llm_grammar_start(const llm_grammar *g)
{
	return 1;
}

llm_grammar_state
llm_grammar_advance(const llm_grammar *g, llm_grammar_state s, const void *bytes, size_t n)
{
	const uint8_t *b = bytes;
	uint32_t	off;

	if (s == LLM_GRAMMAR_DEAD || s >= (uint32_t) g->n_rows)
		return LLM_GRAMMAR_DEAD;
	off = s * (uint32_t) g->n_classes;
	for (size_t i = 0; i < n; i++)
	{
		off = g->trans[off + g->cls[b[i]]];
		if (off == 0)
			return LLM_GRAMMAR_DEAD;
	}
	return off / (uint32_t) g->n_classes;
}

bool
llm_grammar_is_accepting(const llm_grammar *g, llm_grammar_state s)
{
	return s < (uint32_t) g->n_rows && (g->flags[s] & G_FLAG_ACCEPT);
}

bool
llm_grammar_can_continue(const llm_grammar *g, llm_grammar_state s)
{
	return s < (uint32_t) g->n_rows && (g->flags[s] & G_FLAG_CONTINUE);
}

bool
llm_grammar_matches(const llm_grammar *g, const void *s, size_t n)
{
	return llm_grammar_is_accepting(g, llm_grammar_advance(g, llm_grammar_start(g), s, n));
}
