/*
 * grammar_mask.c — the token index of a vocabulary, allowed-token masks of
 * grammar states, and the bounded mask cache (grammar.h).
 *
 * The index is a trie of the ordinary tokens' bytes laid out in preorder:
 * node i holds its edge byte, its depth, the index one past its subtree
 * (end) and the first token whose bytes end there.  A mask walk is one
 * forward pass over that array with a stack of DFA row offsets per depth:
 * a node's state is its parent's state advanced by its byte; at the dead
 * state the walk jumps to end, skipping every token below.  Since every
 * non-dead state of a grammar can still reach acceptance, a token is allowed
 * exactly when its node is reached.  Cost: the trie nodes whose prefix is
 * still alive, one table lookup each, streaming through memory.
 *
 * Plain-text subtrees: inside a JSON string (or a `.*`-like pattern) almost
 * every token is allowed and a full walk would visit the whole trie.  The
 * index marks each subtree whose remaining bytes are plain text (printable
 * ASCII but `"` and `\`, and well-formed UTF-8) starting at a character
 * boundary, with the most characters any of its tokens adds; the grammar
 * knows for each state how many plain characters in a row stay alive
 * (llm_grammar.run_*).  When that run covers the subtree, every token in it
 * is allowed: they are marked from a preorder list of token ids, with no DFA
 * step.  Such walks touch mostly the nodes above the first marked node of
 * each path (the frontier); those are copied, in preorder, into a small
 * top trie whose frontier nodes point into the full trie (followed only
 * when the run is too short), so the walk streams through the top trie
 * and the token list instead of jumping across the whole node array.  The
 * root's children are reached through a 256-entry table, so a state that
 * allows few first bytes touches few nodes.
 */
#define _GNU_SOURCE				/* qsort_r */
#include "grammar_impl.h"
#include "engine/util/text_util.h"
#include "engine/text/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TK_NORMAL	0
#define TK_SPECIAL	1
#define TK_EOG		2
#define TK_EMPTY	3

#define NO_TOK(ix)	((ix)->n_words * 32)

/* Tokens deeper than this are not in the trie (none in real vocabularies) but walked one by one. */
#define TRIE_MAX_DEPTH	65535

typedef struct tnode
{
	uint32_t	end;			/* one past the last node of this subtree */
	uint32_t	tok;			/* first token ending here; NO_TOK (a spare mask bit) if none */
	uint32_t	tok_lo;			/* this subtree's tokens: pre_tok[tok_lo .. nodes[end].tok_lo) */
	uint16_t	depth;			/* root 0 */
	uint8_t		byte;			/* edge from the parent */
	uint8_t		info;			/* N_* below */
} tnode;

/* A node of the top trie: a node of the full trie above the frontier, or a frontier node (N_SKIP). */
typedef struct ttop
{
	uint32_t	end;			/* one past this subtree in the top trie */
	uint32_t	tok;
	uint32_t	tok_lo,			/* the full subtree's tokens: pre_tok[tok_lo .. tok_hi) */
				tok_hi;
	uint32_t	full;			/* the same node in the full trie */
	uint16_t	depth;
	uint8_t		byte;
	uint8_t		info;
} ttop;

#define N_CHARS		0x1F		/* most characters a token below adds (when N_SKIP) */
#define N_DUP		0x20		/* more tokens with these bytes: dup_next chain from tok */
#define N_ASCII		0x40		/* the bytes below are all ASCII */
#define N_SKIP		0x80		/* plain-text subtree at a character boundary, 1..N_CHARS characters deep */

struct llm_token_index
{
	int32_t		n_vocab;
	int32_t		n_words;
	int32_t		n_nodes;		/* the root included; nodes[n_nodes] is a sentinel (tok_lo = all) */
	tnode	   *nodes;
	ttop	   *top;			/* the top trie (index 0 the root) */
	int32_t		n_top;
	uint32_t	root_child[256];	/* top-trie node of each first byte, 0 if none */
	int32_t    *pre_tok;		/* the trie's tokens in preorder (duplicates included) */
	/*
	 * Under each top-trie frontier node, its tokens again, sorted by the
	 * characters they add below it (sorted_chars): with a run ending at a
	 * cliff, the allowed ones are a prefix
	 */
	int32_t    *sorted_tok;
	uint8_t    *sorted_chars;
	int32_t    *dup_next;		/* n_vocab: next token with the same bytes, -1 */
	uint8_t    *kind;			/* n_vocab: TK_* */
	int32_t    *eog;			/* distinct end-of-generation ids */
	int32_t		n_eog;
	uint64_t   *off;			/* n_vocab + 1: token bytes at bytes[off[i] .. off[i + 1]) */
	uint8_t    *bytes;
	int32_t		max_depth;		/* deepest trie node */
	int32_t    *long_toks;		/* ordinary tokens longer than TRIE_MAX_DEPTH bytes */
	int32_t		n_long;
};

void
llm_token_index_free(llm_token_index *ix)
{
	if (ix == NULL)
		return;
	free(ix->nodes);
	free(ix->top);
	free(ix->pre_tok);
	free(ix->sorted_tok);
	free(ix->sorted_chars);
	free(ix->dup_next);
	free(ix->kind);
	free(ix->eog);
	free(ix->off);
	free(ix->bytes);
	free(ix->long_toks);
	free(ix);
}

static int
cmp_tokens(const void *a, const void *b, void *arg)
{
	const llm_token_index *ix = arg;
	int32_t		x = *(const int32_t *) a,
				y = *(const int32_t *) b;
	uint64_t	nx = ix->off[x + 1] - ix->off[x],
				ny = ix->off[y + 1] - ix->off[y];
	int			r = memcmp(ix->bytes + ix->off[x], ix->bytes + ix->off[y], nx < ny ? nx : ny);

	if (r)
		return r;
	if (nx != ny)
		return nx < ny ? -1 : 1;
	return (x > y) - (x < y);
}

static bool build_top(llm_token_index *ix, const int32_t *tok_chars, const int32_t *chars, char *err, size_t errlen);

/* UTF-8 decoder step: 0 at a boundary, 1-3 continuation bytes owed, 4-7 restricted second bytes, 8 invalid. */
static uint8_t
utf8_step(uint8_t u, uint8_t b)
{
	static const uint8_t lo[8] = {0, 0x80, 0x80, 0x80, 0xA0, 0x80, 0x90, 0x80};
	static const uint8_t hi[8] = {0, 0xBF, 0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
	static const uint8_t next[8] = {0, 0, 1, 2, 1, 1, 2, 2};

	if (u == 8)
		return 8;
	if (u == 0)
	{
		if (b < 0x80)
			return 0;
		if (b >= 0xC2 && b <= 0xDF)
			return 1;
		if (b == 0xE0)
			return 4;
		if (b == 0xED)
			return 5;
		if (b >= 0xE1 && b <= 0xEF)
			return 2;
		if (b == 0xF0)
			return 6;
		if (b >= 0xF1 && b <= 0xF3)
			return 3;
		if (b == 0xF4)
			return 7;
		return 8;
	}
	return (b >= lo[u] && b <= hi[u]) ? next[u] : 8;
}

static bool
plain_byte(uint8_t b)
{
	return b >= 0x80 || (b >= 0x20 && b != '"' && b != '\\');
}

/*
 * Preorder token list, root table and the plain-text subtree marks (N_*):
 * decoder state and character count along each path, then, from the
 * leaves up, whether everything below is plain, ASCII, well-formed, and
 * the most characters below.
 */
static bool
annotate_trie(llm_token_index *ix, int32_t n_tokens, char *err, size_t errlen)
{
	int32_t		n = ix->n_nodes;
	int32_t    *parent = malloc(sizeof(int32_t) * n);
	uint8_t    *u = malloc(n);
	int32_t    *chars = malloc(sizeof(int32_t) * n);
	int32_t    *maxc = malloc(sizeof(int32_t) * n);
	uint8_t    *below = malloc(n);	/* 1 plain, 2 ASCII, 4 well-formed */
	int32_t    *last = malloc(sizeof(int32_t) * ((size_t) ix->max_depth + 1));
	int32_t    *tok_chars = malloc(sizeof(int32_t) * (n_tokens > 0 ? n_tokens : 1));
	int32_t		w = 0;
	bool		ok = false;

	ix->pre_tok = malloc(sizeof(int32_t) * (n_tokens > 0 ? n_tokens : 1));
	if (!parent || !u || !chars || !maxc || !below || !last || !tok_chars || !ix->pre_tok)
	{
		llm_set_err(err, errlen, "token index: out of memory");
		goto out;
	}
	last[0] = 0;
	u[0] = 0;
	chars[0] = 0;
	for (int32_t i = 0; i < n; i++)
	{
		tnode	   *t = &ix->nodes[i];

		if (i > 0)
		{
			int32_t		p = last[t->depth - 1];

			parent[i] = p;
			last[t->depth] = i;
			u[i] = utf8_step(u[p], t->byte);
			chars[i] = chars[p] + ((t->byte & 0xC0) != 0x80);
		}
		maxc[i] = -1;
		below[i] = 7;
		t->tok_lo = (uint32_t) w;
		if (t->tok != (uint32_t) NO_TOK(ix))
			for (int32_t id = (int32_t) t->tok; id >= 0; id = ix->dup_next[id])
			{
				tok_chars[w] = chars[i];
				ix->pre_tok[w++] = id;
			}
	}
	ix->nodes[n].tok_lo = (uint32_t) w;
	for (int32_t i = n - 1; i > 0; i--)
	{
		int32_t		p = parent[i];
		uint8_t		b = ix->nodes[i].byte;
		uint8_t		mine = (plain_byte(b) ? 1 : 0) | (b < 0x80 ? 2 : 0) | (u[i] != 8 ? 4 : 0);
		int32_t		mc = maxc[i] > chars[i] ? maxc[i] : chars[i];

		below[p] &= mine & below[i];
		if (mc > maxc[p])
			maxc[p] = mc;
	}
	for (int32_t i = 1; i < n; i++)
	{
		tnode	   *t = &ix->nodes[i];
		int32_t		cb = maxc[i] - chars[i];

		if (u[i] == 0 && (below[i] & 5) == 5 && maxc[i] >= 0 && cb >= 1 && cb <= N_CHARS)
			t->info |= N_SKIP | (uint8_t) cb | ((below[i] & 2) ? N_ASCII : 0);
	}
	ok = build_top(ix, tok_chars, chars, err, errlen);
out:
	free(tok_chars);
	free(parent);
	free(u);
	free(chars);
	free(maxc);
	free(below);
	free(last);
	return ok;
}

/* The top trie: the full trie in preorder, each N_SKIP node standing for its whole subtree. */
static bool
build_top(llm_token_index *ix, const int32_t *tok_chars, const int32_t *chars, char *err, size_t errlen)
{
	int32_t		n = 0,
				depth = 0;
	uint32_t   *open = malloc(sizeof(uint32_t) * ((size_t) ix->max_depth + 1));

	for (int32_t i = 0; i < ix->n_nodes; n++)
		i = (ix->nodes[i].info & N_SKIP) ? (int32_t) ix->nodes[i].end : i + 1;
	ix->top = malloc(sizeof(ttop) * (n > 0 ? n : 1));
	ix->sorted_tok = malloc(sizeof(int32_t) * ((size_t) ix->nodes[ix->n_nodes].tok_lo + 1));
	ix->sorted_chars = malloc((size_t) ix->nodes[ix->n_nodes].tok_lo + 1);
	if (ix->top == NULL || open == NULL || ix->sorted_tok == NULL || ix->sorted_chars == NULL)
	{
		free(open);
		llm_set_err(err, errlen, "token index: out of memory");
		return false;
	}
	memset(ix->root_child, 0, sizeof(ix->root_child));
	n = 0;
	for (int32_t i = 0; i < ix->n_nodes;)
	{
		const tnode *t = &ix->nodes[i];

		/* the open path is depths 0..depth: close those at t's depth and below it */
		if (i > 0)
			for (int32_t d = depth; d >= t->depth; d--)
				ix->top[open[d]].end = (uint32_t) n;
		ix->top[n] = (ttop) {0, t->tok, t->tok_lo, ix->nodes[t->end].tok_lo, (uint32_t) i, t->depth, t->byte, t->info};
		open[t->depth] = (uint32_t) n;
		depth = t->depth;
		if (t->depth == 1)
			ix->root_child[t->byte] = (uint32_t) n;
		if (t->info & N_SKIP)
		{
			/* this frontier's tokens by added characters (counting sort, stable) */
			uint32_t	lo = t->tok_lo,
						hi = ix->nodes[t->end].tok_lo,
						w = lo;

			for (int32_t c = 0; c <= N_CHARS; c++)
				for (uint32_t k = lo; k < hi; k++)
					if (tok_chars[k] - chars[i] == c)
					{
						ix->sorted_tok[w] = ix->pre_tok[k];
						ix->sorted_chars[w++] = (uint8_t) c;
					}
		}
		n++;
		i = (t->info & N_SKIP) ? (int32_t) t->end : i + 1;
	}
	for (int32_t d = depth; d >= 0; d--)
		ix->top[open[d]].end = (uint32_t) n;
	ix->n_top = n;
	free(open);
	return true;
}

static bool
build_trie(llm_token_index *ix, char *err, size_t errlen)
{
	int32_t    *order = malloc(sizeof(int32_t) * (ix->n_vocab > 0 ? ix->n_vocab : 1));
	int32_t		n_order = 0,
				cap;
	uint32_t   *path = NULL;	/* node index per depth along the previous token */
	int32_t		depth = 0;
	int32_t		prev = -1;

	if (order == NULL)
		goto oom;
	for (int32_t i = 0; i < ix->n_vocab; i++)
	{
		if (ix->kind[i] != TK_NORMAL)
			continue;
		if (ix->off[i + 1] - ix->off[i] > TRIE_MAX_DEPTH)
		{
			int32_t    *l = realloc(ix->long_toks, sizeof(int32_t) * (ix->n_long + 1));

			if (l == NULL)
				goto oom;
			ix->long_toks = l;
			ix->long_toks[ix->n_long++] = i;
			continue;
		}
		order[n_order++] = i;
	}
	qsort_r(order, n_order, sizeof(int32_t), cmp_tokens, ix);

	cap = 1024;
	ix->nodes = malloc(sizeof(tnode) * cap);
	path = malloc(sizeof(uint32_t) * (TRIE_MAX_DEPTH + 1));
	if (ix->nodes == NULL || path == NULL)
		goto oom;
	ix->nodes[0] = (tnode) {0, NO_TOK(ix), 0, 0, 0, 0};
	ix->n_nodes = 1;
	path[0] = 0;
	for (int32_t k = 0; k < n_order; k++)
	{
		int32_t		id = order[k];
		const uint8_t *b = ix->bytes + ix->off[id];
		int32_t		len = (int32_t) (ix->off[id + 1] - ix->off[id]);
		int32_t		lcp = 0;
		uint32_t	leaf;

		if (prev >= 0)
		{
			const uint8_t *pb = ix->bytes + ix->off[prev];
			int32_t		pl = (int32_t) (ix->off[prev + 1] - ix->off[prev]);

			while (lcp < len && lcp < pl && pb[lcp] == b[lcp])
				lcp++;
		}
		/* close the previous token's nodes below the common prefix */
		for (int32_t d = depth; d > lcp; d--)
			ix->nodes[path[d]].end = (uint32_t) ix->n_nodes;
		for (int32_t d = lcp + 1; d <= len; d++)
		{
			if (ix->n_nodes + 1 >= cap)
			{
				tnode	   *nn;

				if (cap > INT32_MAX / 2)
				{
					llm_set_err(err, errlen, "token index: vocabulary too large");
					goto fail;
				}
				cap *= 2;
				nn = realloc(ix->nodes, sizeof(tnode) * cap);
				if (nn == NULL)
					goto oom;
				ix->nodes = nn;
			}
			ix->nodes[ix->n_nodes] = (tnode) {0, NO_TOK(ix), 0, (uint16_t) d, b[d - 1], 0};
			path[d] = (uint32_t) ix->n_nodes++;
		}
		depth = len;
		if (len > ix->max_depth)
			ix->max_depth = len;
		leaf = path[len];
		if (ix->nodes[leaf].tok == (uint32_t) NO_TOK(ix))
			ix->nodes[leaf].tok = (uint32_t) id;
		else
		{
			/* same bytes as an earlier id: chained after the node's first token */
			ix->dup_next[id] = ix->dup_next[ix->nodes[leaf].tok];
			ix->dup_next[ix->nodes[leaf].tok] = id;
			ix->nodes[leaf].info = N_DUP;
		}
		prev = id;
	}
	for (int32_t d = depth; d >= 0; d--)
		ix->nodes[path[d]].end = (uint32_t) ix->n_nodes;
	ix->nodes[ix->n_nodes] = (tnode) {(uint32_t) ix->n_nodes + 1, NO_TOK(ix), 0, 0, 0, 0};
	free(order);
	free(path);
	return annotate_trie(ix, n_order, err, errlen);
oom:
	llm_set_err(err, errlen, "token index: out of memory");
fail:
	free(order);
	free(path);
	return false;
}

llm_token_index *
llm_token_index_create(int32_t n_vocab, const char *const *bytes, const int32_t *lens,
					   const bool *special, const int32_t *eog, int32_t n_eog, char *err, size_t errlen)
{
	llm_token_index *ix;
	uint64_t	total = 0;

	if (n_vocab < 1 || n_eog < 0 || (n_eog > 0 && eog == NULL))
	{
		llm_set_err(err, errlen, "token index: bad vocabulary (n_vocab %d, n_eog %d)", n_vocab, n_eog);
		return NULL;
	}
	for (int32_t i = 0; i < n_vocab; i++)
	{
		if (lens[i] < 0 || (lens[i] > 0 && bytes[i] == NULL))
		{
			llm_set_err(err, errlen, "token index: bad bytes for token %d", i);
			return NULL;
		}
		total += (uint64_t) lens[i];
	}
	for (int32_t i = 0; i < n_eog; i++)
		if (eog[i] < 0 || eog[i] >= n_vocab)
		{
			llm_set_err(err, errlen, "token index: end-of-generation id %d out of range", eog[i]);
			return NULL;
		}
	ix = calloc(1, sizeof(llm_token_index));
	if (ix == NULL)
		goto oom;
	ix->n_vocab = n_vocab;
	ix->n_words = (n_vocab + 31) / 32;
	ix->off = malloc(sizeof(uint64_t) * ((size_t) n_vocab + 1));
	ix->bytes = malloc(total > 0 ? total : 1);
	ix->kind = malloc(n_vocab);
	ix->dup_next = malloc(sizeof(int32_t) * n_vocab);
	ix->eog = malloc(sizeof(int32_t) * (n_eog > 0 ? n_eog : 1));
	if (!ix->off || !ix->bytes || !ix->kind || !ix->dup_next || !ix->eog)
		goto oom;
	total = 0;
	for (int32_t i = 0; i < n_vocab; i++)
	{
		ix->off[i] = total;
		if (lens[i] > 0)
			memcpy(ix->bytes + total, bytes[i], lens[i]);
		total += (uint64_t) lens[i];
		ix->kind[i] = (special && special[i]) ? TK_SPECIAL : (lens[i] == 0 ? TK_EMPTY : TK_NORMAL);
		ix->dup_next[i] = -1;
	}
	ix->off[n_vocab] = total;
	for (int32_t i = 0; i < n_eog; i++)
	{
		if (ix->kind[eog[i]] == TK_EOG)
			continue;
		ix->kind[eog[i]] = TK_EOG;
		ix->eog[ix->n_eog++] = eog[i];
	}
	if (!build_trie(ix, err, errlen))
	{
		llm_token_index_free(ix);
		return NULL;
	}
	return ix;
oom:
	llm_set_err(err, errlen, "token index: out of memory");
	llm_token_index_free(ix);
	return NULL;
}

llm_token_index *
llm_token_index_from_tokenizer(const llm_tokenizer *t, char *err, size_t errlen)
{
	int32_t		n = llm_tokenizer_n_vocab(t);
	int32_t    *lens = malloc(sizeof(int32_t) * (n > 0 ? n : 1));
	const char **ptrs = malloc(sizeof(char *) * (n > 0 ? n : 1));
	bool	   *special = calloc(n > 0 ? n : 1, 1);
	int32_t    *eog = malloc(sizeof(int32_t) * (n > 0 ? n : 1));
	int32_t		n_eog = 0;
	char	   *arena = NULL;
	uint64_t	total = 0;
	llm_token_index *ix = NULL;

	if (!lens || !ptrs || !special || !eog)
	{
		llm_set_err(err, errlen, "token index: out of memory");
		goto out;
	}
	for (int32_t i = 0; i < n; i++)
	{
		lens[i] = llm_token_to_bytes(t, i, NULL, 0);
		if (lens[i] < 0)
		{
			llm_set_err(err, errlen, "token index: token %d has no bytes", i);
			goto out;
		}
		total += (uint64_t) lens[i] + 1;
	}
	arena = malloc(total > 0 ? total : 1);
	if (arena == NULL)
	{
		llm_set_err(err, errlen, "token index: out of memory");
		goto out;
	}
	total = 0;
	for (int32_t i = 0; i < n; i++)
	{
		char	   *p = arena + total;

		llm_token_to_bytes(t, i, p, lens[i]);
		p[lens[i]] = '\0';
		ptrs[i] = p;
		total += (uint64_t) lens[i] + 1;
		/* a special token's bytes are its text, by which the tokenizer finds it */
		special[i] = lens[i] > 0 && llm_tokenizer_special_id(t, p) == i;
		if (llm_tokenizer_is_eog(t, i))
			eog[n_eog++] = i;
	}
	ix = llm_token_index_create(n, ptrs, lens, special, eog, n_eog, err, errlen);
out:
	free(lens);
	free(ptrs);
	free(special);
	free(eog);
	free(arena);
	return ix;
}

int32_t
llm_token_index_n_vocab(const llm_token_index *ix)
{
	return ix->n_vocab;
}

int32_t
llm_token_index_mask_words(const llm_token_index *ix)
{
	return ix->n_words;
}

int32_t
llm_token_index_n_nodes(const llm_token_index *ix)
{
	return ix->n_nodes;
}

size_t
llm_token_index_memory(const llm_token_index *ix)
{
	return sizeof(*ix) + sizeof(tnode) * (size_t) (ix->n_nodes + 1) + sizeof(ttop) * (size_t) ix->n_top +
		(2 * sizeof(int32_t) + 1) * (size_t) ix->n_vocab +
		(sizeof(int32_t) + 1 + sizeof(uint64_t)) * (size_t) ix->n_vocab + ix->off[ix->n_vocab] +
		sizeof(int32_t) * (size_t) (ix->n_eog + ix->n_long);
}

llm_grammar_state
llm_grammar_advance_token(const llm_token_index *ix, const llm_grammar *g, llm_grammar_state s, int32_t id)
{
	if (id < 0 || id >= ix->n_vocab || ix->kind[id] != TK_NORMAL)
		return LLM_GRAMMAR_DEAD;
	return llm_grammar_advance(g, s, ix->bytes + ix->off[id], ix->off[id + 1] - ix->off[id]);
}

static inline void
mark_node(uint32_t *bits, const int32_t *dup, uint32_t tok, uint8_t info)
{
	bits[tok >> 5] |= 1u << (tok & 31);
	if (__builtin_expect(info & N_DUP, 0))
		for (int32_t id = dup[tok]; id >= 0; id = dup[id])
			bits[id >> 5] |= 1u << (id & 31);
}

static inline void
mark_range(uint32_t *bits, const int32_t *pre_tok, uint32_t lo, uint32_t hi)
{
	for (uint32_t k = lo; k < hi; k++)
	{
		uint32_t	id = (uint32_t) pre_tok[k];

		bits[id >> 5] |= 1u << (id & 31);
	}
}

/* The plain-character run of row offset st for a node with these N_* bits (G_RUN_* encoded). */
static inline uint8_t
node_run(const llm_grammar *g, uint32_t st, uint8_t info)
{
	uint32_t	row = (uint32_t) (((uint64_t) st * g->inv_classes) >> 32);

	return (info & N_ASCII) ? g->run_ascii[row] : g->run_full[row];
}

/* Walk full-trie nodes [i, lim) (a subtree whose parent state is on the stack). */
static void
walk_full(const tnode *nd, const int32_t *pre_tok, const int32_t *dup, const llm_grammar *g,
		  uint32_t *stack, uint32_t *bits, uint32_t i, uint32_t lim)
{
	const uint32_t *trans = g->trans;
	const uint8_t *cls = g->cls;

	while (i < lim)
	{
		const tnode *t = &nd[i];
		uint32_t	st = trans[stack[t->depth - 1] + cls[t->byte]];

		if (st == 0)
		{
			i = t->end;
			continue;
		}
		if ((t->info & N_SKIP) && (node_run(g, st, t->info) & G_RUN_MASK) >= (t->info & N_CHARS))
		{
			mark_range(bits, pre_tok, t->tok_lo, nd[t->end].tok_lo);
			i = t->end;
			continue;
		}
		stack[t->depth] = st;
		mark_node(bits, dup, t->tok, t->info);
		i++;
	}
}

int32_t
llm_grammar_mask_compute(const llm_token_index *ix, const llm_grammar *g, llm_grammar_state s, uint32_t *mask)
{
	const tnode *nd = ix->nodes;
	const ttop *top = ix->top;
	const uint32_t *trans = g->trans;
	const uint8_t *cls = g->cls;
	const int32_t *dup = ix->dup_next;
	uint32_t   *scratch,
			   *stack,
			   *bits;
	int32_t		count = 0;
	int32_t		nw = ix->n_words;

	memset(mask, 0, sizeof(uint32_t) * nw);
	if (s == LLM_GRAMMAR_DEAD || s >= (uint32_t) g->n_rows)
		return 0;
	if (g->flags[s] & G_FLAG_CONTINUE)
	{
		/*
		 * bits: the mask plus one spare word that nodes without a token
		 * write to (tok = nw * 32), so marking needs no branch
		 */
		scratch = malloc(sizeof(uint32_t) * ((size_t) ix->max_depth + 1 + nw + 1));
		if (scratch == NULL)
			return -1;
		stack = scratch;
		bits = scratch + ix->max_depth + 1;
		memset(bits, 0, sizeof(uint32_t) * (nw + 1));
		stack[0] = s * (uint32_t) g->n_classes;
		for (int b = 0; b < 256; b++)
		{
			uint32_t	i = ix->root_child[b],
						lim;

			if (i == 0 || trans[stack[0] + cls[b]] == 0)
				continue;
			lim = top[i].end;
			while (i < lim)
			{
				const ttop *t = &top[i];
				uint32_t	st = trans[stack[t->depth - 1] + cls[t->byte]];

				if (st == 0)
				{
					i = t->end;
					continue;
				}
				if (t->info & N_SKIP)
				{
					uint8_t		run = node_run(g, st, t->info);

					if ((run & G_RUN_MASK) >= (t->info & N_CHARS))
						mark_range(bits, ix->pre_tok, t->tok_lo, t->tok_hi);
					else if (run & G_RUN_CLIFF)
					{
						/* exactly the tokens adding at most run characters */
						for (uint32_t k = t->tok_lo; k < t->tok_hi && ix->sorted_chars[k] <= (run & G_RUN_MASK); k++)
						{
							uint32_t	id = (uint32_t) ix->sorted_tok[k];

							bits[id >> 5] |= 1u << (id & 31);
						}
					}
					else
					{
						/* the run is too short for the whole subtree: walk it in the full trie */
						stack[t->depth] = st;
						mark_node(bits, dup, t->tok, t->info);
						walk_full(nd, ix->pre_tok, dup, g, stack, bits, t->full + 1, nd[t->full].end);
					}
					i++;
					continue;
				}
				stack[t->depth] = st;
				mark_node(bits, dup, t->tok, t->info);
				i++;
			}
		}
		memcpy(mask, bits, sizeof(uint32_t) * nw);
		free(scratch);
		for (int32_t k = 0; k < ix->n_long; k++)
		{
			int32_t		id = ix->long_toks[k];

			if (llm_grammar_advance(g, s, ix->bytes + ix->off[id], ix->off[id + 1] - ix->off[id]) != 0)
				mask[id >> 5] |= 1u << (id & 31);
		}
		for (int32_t w = 0; w < nw; w++)
			count += __builtin_popcount(mask[w]);
	}
	if (g->flags[s] & G_FLAG_ACCEPT)
		for (int32_t i = 0; i < ix->n_eog; i++)
		{
			mask[ix->eog[i] >> 5] |= 1u << (ix->eog[i] & 31);
			count++;
		}
	return count;
}

void
llm_grammar_mask_apply(const uint32_t *mask, int32_t n_vocab, float *logits)
{
	int32_t		full = n_vocab / 32;

	for (int32_t w = 0; w < full; w++)
	{
		uint32_t	m = mask[w];
		float	   *l = logits + (size_t) w * 32;

		if (m == 0xFFFFFFFFu)
			continue;
		if (m == 0)
		{
			/* the common case in structural states: a whole word masked (vector stores) */
			for (int b = 0; b < 32; b++)
				l[b] = -INFINITY;
			continue;
		}
		for (int b = 0; b < 32; b++)
			if (!(m & (1u << b)))
				l[b] = -INFINITY;
	}
	for (int32_t i = full * 32; i < n_vocab; i++)
		if (!((mask[i >> 5] >> (i & 31)) & 1))
			logits[i] = -INFINITY;
}

/* ---------- mask cache ---------- */

typedef struct centry
{
	uint64_t	gid;
	uint32_t	state;
	int32_t		n_allowed;
	int32_t		next;			/* bucket chain */
	uint8_t		ref;			/* CLOCK bit */
	uint8_t		used;
	uint32_t   *mask;
} centry;

struct llm_mask_cache
{
	const llm_token_index *ix;
	int32_t		capacity,
				n_entries;
	centry	   *ent;
	int32_t    *buckets;
	uint32_t	bucket_mask;
	int32_t		hand;
	uint64_t	hits,
				misses,
				evictions;
};

#define MAX_CACHE_ENTRIES	(1 << 20)

llm_mask_cache *
llm_mask_cache_create(const llm_token_index *ix, size_t max_bytes)
{
	llm_mask_cache *c = calloc(1, sizeof(llm_mask_cache));
	size_t		per = sizeof(uint32_t) * (size_t) ix->n_words;
	size_t		cap = max_bytes / per;
	uint32_t	nb = 16;

	if (c == NULL)
		return NULL;
	if (cap < 1)
		cap = 1;
	if (cap > MAX_CACHE_ENTRIES)
		cap = MAX_CACHE_ENTRIES;
	while (nb < cap * 2)
		nb *= 2;
	c->ix = ix;
	c->capacity = (int32_t) cap;
	c->ent = calloc(cap, sizeof(centry));
	c->buckets = malloc(sizeof(int32_t) * nb);
	if (c->ent == NULL || c->buckets == NULL)
	{
		llm_mask_cache_free(c);
		return NULL;
	}
	memset(c->buckets, 0xFF, sizeof(int32_t) * nb);
	c->bucket_mask = nb - 1;
	return c;
}

void
llm_mask_cache_free(llm_mask_cache *c)
{
	if (c == NULL)
		return;
	if (c->ent)
		for (int32_t i = 0; i < c->n_entries; i++)
			free(c->ent[i].mask);
	free(c->ent);
	free(c->buckets);
	free(c);
}

static uint32_t
cache_hash(uint64_t gid, uint32_t s)
{
	uint64_t	h = gid * 0x9E3779B97F4A7C15ull ^ ((uint64_t) s * 0xC2B2AE3D27D4EB4Full);

	return (uint32_t) (h ^ (h >> 29));
}

static void
bucket_remove(llm_mask_cache *c, int32_t e)
{
	int32_t    *link = &c->buckets[cache_hash(c->ent[e].gid, c->ent[e].state) & c->bucket_mask];

	while (*link != e)
		link = &c->ent[*link].next;
	*link = c->ent[e].next;
}

const uint32_t *
llm_mask_cache_get(llm_mask_cache *c, const llm_grammar *g, llm_grammar_state s, int32_t *n_allowed)
{
	uint32_t	h = cache_hash(g->id, s) & c->bucket_mask;
	int32_t		e;

	for (e = c->buckets[h]; e >= 0; e = c->ent[e].next)
		if (c->ent[e].gid == g->id && c->ent[e].state == s)
		{
			c->ent[e].ref = 1;
			c->hits++;
			if (n_allowed)
				*n_allowed = c->ent[e].n_allowed;
			return c->ent[e].mask;
		}
	c->misses++;
	if (c->n_entries < c->capacity)
	{
		e = c->n_entries;
		c->ent[e].mask = malloc(sizeof(uint32_t) * c->ix->n_words);
		if (c->ent[e].mask == NULL)
			return NULL;
		c->n_entries++;
	}
	else
	{
		/* CLOCK: the first entry not referenced since the hand last passed */
		while (c->ent[c->hand].ref)
		{
			c->ent[c->hand].ref = 0;
			c->hand = (c->hand + 1) % c->capacity;
		}
		e = c->hand;
		c->hand = (c->hand + 1) % c->capacity;
		if (c->ent[e].used)
		{
			bucket_remove(c, e);
			c->ent[e].used = 0;
			c->evictions++;
		}
	}
	c->ent[e].n_allowed = llm_grammar_mask_compute(c->ix, g, s, c->ent[e].mask);
	if (c->ent[e].n_allowed < 0)
		return NULL;
	c->ent[e].gid = g->id;
	c->ent[e].state = s;
	c->ent[e].ref = 1;
	c->ent[e].used = 1;
	c->ent[e].next = c->buckets[h];
	c->buckets[h] = e;
	if (n_allowed)
		*n_allowed = c->ent[e].n_allowed;
	return c->ent[e].mask;
}

void
llm_mask_cache_get_stats(const llm_mask_cache *c, llm_mask_cache_stats *st)
{
	st->hits = c->hits;
	st->misses = c->misses;
	st->evictions = c->evictions;
	st->entries = 0;
	for (int32_t i = 0; i < c->n_entries; i++)
		st->entries += c->ent[i].used;
	st->capacity = c->capacity;
}
