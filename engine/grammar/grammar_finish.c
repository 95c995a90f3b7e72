/*
 * grammar_finish.c — the end of every grammar compile (g_finish, called by
 * the choices, regex and JSON Schema compilers): tree -> minimal DFA ->
 * row-offset table, the plain-text runs, the longest output, the source's
 * hash and the object's id; and llm_grammar_free, the object's one owner.
 */
#include "grammar_impl.h"
#include "engine/util/hash.h"
#include "engine/util/text_util.h"

#include <stdlib.h>
#include <string.h>

static uint64_t next_grammar_id;

/* llm_grammar_hash: FNV-1a 64, then the splitmix64 finalizer (FNV's low bits are weak). */
static uint64_t
hash_bytes(const char *s, size_t n)
{
	return llm_mix64(llm_fnv1a64(s, n));
}

/* ---------- plain-text runs (grammar_impl.h) ---------- */

/* UTF-8 decoder states: 0 at a boundary, 1-3 continuation bytes owed, 4-7 restricted second bytes. */
static const struct
{
	uint8_t		lo,
				hi,
				next;
}			utf8_cont[8] = {
	{0, 0, 0}, {0x80, 0xBF, 0}, {0x80, 0xBF, 1}, {0x80, 0xBF, 2},
	{0xA0, 0xBF, 1}, {0x80, 0x9F, 1}, {0x90, 0xBF, 2}, {0x80, 0x8F, 2},
};

static int
utf8_lead(int b)
{
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
	return -1;
}

/*
 * The common next state of every non-ASCII character from q (each through
 * live intermediate states), or 0 when they do not all meet in want.  A
 * depth-first walk over (decoder state, grammar state) pairs; pairs already
 * checked are skipped.
 */
static bool
utf8_all_reach(const llm_grammar *g, uint32_t q, int u, uint32_t want, uint32_t (*seen)[2], int *n_seen)
{
	for (int i = 0; i < *n_seen; i++)
		if (seen[i][0] == (uint32_t) u && seen[i][1] == q)
			return true;
	if (*n_seen >= 64)
		return false;			/* unusual structure: no shortcut, never a wrong one */
	seen[*n_seen][0] = (uint32_t) u;
	seen[*n_seen][1] = q;
	(*n_seen)++;
	for (int b = utf8_cont[u].lo; b <= utf8_cont[u].hi; b++)
	{
		uint32_t	t = g->trans[q + g->cls[b]];

		if (t == 0)
			return false;
		if (utf8_cont[u].next == 0)
		{
			if (t != want)
				return false;
		}
		else if (!utf8_all_reach(g, t, utf8_cont[u].next, want, seen, n_seen))
			return false;
	}
	return true;
}

/* Row offset of the one next state of every plain character from row offset q, or 0. */
static uint32_t
plain_next(const llm_grammar *g, uint32_t q, bool ascii_only)
{
	uint32_t	n = 0;
	uint32_t	seen[64][2];
	int			n_seen = 0;

	for (int b = 0x20; b < 0x80; b++)
	{
		uint32_t	t;

		if (b == '"' || b == '\\')
			continue;
		t = g->trans[q + g->cls[b]];
		if (t == 0 || (n != 0 && t != n))
			return 0;
		n = t;
	}
	if (ascii_only)
		return n;
	for (int b = 0xC2; b <= 0xF4; b++)
	{
		uint32_t	t = g->trans[q + g->cls[b]];

		if (t == 0 || !utf8_all_reach(g, t, utf8_lead(b), n, seen, &n_seen))
			return 0;
	}
	return n;
}

/* Every plain ASCII byte (and, unless ascii_only, every byte >= 0x80) is dead at row offset q. */
static bool
plain_cliff(const llm_grammar *g, uint32_t q, bool ascii_only)
{
	for (int b = 0x20; b < 0x100; b++)
	{
		if (b == '"' || b == '\\')
			continue;
		if (ascii_only && b >= 0x80)
			break;
		if (g->trans[q + g->cls[b]] != 0)
			return false;
	}
	return true;
}

static bool
compute_runs(llm_grammar *g)
{
	uint32_t	nc = (uint32_t) g->n_classes;
	uint32_t   *next_full = malloc(sizeof(uint32_t) * g->n_rows),
			   *next_ascii = malloc(sizeof(uint32_t) * g->n_rows);

	g->run_full = calloc(g->n_rows, 1);
	g->run_ascii = calloc(g->n_rows, 1);
	if (!next_full || !next_ascii || !g->run_full || !g->run_ascii)
	{
		free(next_full);
		free(next_ascii);
		return false;
	}
	g->inv_classes = (uint32_t) (((uint64_t) 1 << 32) / nc + (((uint64_t) 1 << 32) % nc != 0));
	next_full[0] = next_ascii[0] = 0;
	for (int32_t q = 1; q < g->n_rows; q++)
	{
		next_ascii[q] = plain_next(g, (uint32_t) q * nc, true);
		next_full[q] = next_ascii[q] ? plain_next(g, (uint32_t) q * nc, false) : 0;
	}
	for (int32_t q = 1; q < g->n_rows; q++)
	{
		int			rf = 0,
					ra = 0;
		uint32_t	ef = (uint32_t) q,
					ea = (uint32_t) q;

		for (; next_full[ef] != 0 && rf < G_RUN_CAP; ef = next_full[ef] / nc)
			rf++;
		for (; next_ascii[ea] != 0 && ra < G_RUN_CAP; ea = next_ascii[ea] / nc)
			ra++;
		g->run_full[q] = (uint8_t) (rf | (rf < G_RUN_CAP && plain_cliff(g, ef * nc, false) ? G_RUN_CLIFF : 0));
		g->run_ascii[q] = (uint8_t) (ra | (ra < G_RUN_CAP && plain_cliff(g, ea * nc, true) ? G_RUN_CLIFF : 0));
	}
	free(next_full);
	free(next_ascii);
	return true;
}

/*
 * The longest string the minimal trimmed DFA d accepts, in bytes, or -1
 * when it accepts strings of any length.  Every state of d is reachable
 * and reaches acceptance, so the language is infinite exactly when a cycle
 * exists; otherwise the answer is the longest path from the start.  An
 * iterative depth-first walk (no recursion: up to 65,536 live states) that
 * finishes each state after its successors.  -2 when memory runs out.
 */
static int64_t
longest_output(const gdfa *d)
{
	int32_t		n = d->n_states,
				nc = d->n_classes;
	int64_t    *len = malloc(sizeof(int64_t) * (size_t) n);
	uint8_t    *mark = calloc((size_t) n, 1);	/* 0 new, 1 on the stack, 2 done */
	int32_t    *stack = malloc(sizeof(int32_t) * (size_t) n);
	int32_t    *next_cls = malloc(sizeof(int32_t) * (size_t) n);
	int32_t		top = 0;
	int64_t		result = -2;

	if (len == NULL || mark == NULL || stack == NULL || next_cls == NULL)
		goto out;
	stack[top++] = d->start;
	mark[d->start] = 1;
	next_cls[d->start] = 0;
	result = -1;
	while (top > 0)
	{
		int32_t		q = stack[top - 1];
		bool		pushed = false;

		while (next_cls[q] < nc)
		{
			int32_t		t = d->trans[(size_t) q * nc + next_cls[q]++];

			if (t == 0 || mark[t] == 2)
				continue;
			if (mark[t] == 1)
				goto out;		/* a cycle: unbounded */
			mark[t] = 1;
			next_cls[t] = 0;
			stack[top++] = t;
			pushed = true;
			break;
		}
		if (pushed)
			continue;
		/* all successors done: the longest continuation from q */
		len[q] = d->accept[q] ? 0 : -1;
		for (int32_t k = 0; k < nc; k++)
		{
			int32_t		t = d->trans[(size_t) q * nc + k];

			if (t != 0 && len[t] >= 0 && len[t] + 1 > len[q])
				len[q] = len[t] + 1;
		}
		mark[q] = 2;
		top--;
	}
	result = len[d->start];
out:
	free(len);
	free(mark);
	free(stack);
	free(next_cls);
	return result;
}

llm_grammar_status
g_finish(gctx *c, const gnode *root, llm_grammar_kind kind, const char *source, size_t len,
		 llm_grammar **out)
{
	int32_t		nfa_states = 0,
				dfa_states = 0;
	gdfa	   *d;
	llm_grammar *g;

	*out = NULL;
	d = g_compile_tree(c, root, &nfa_states, &dfa_states);
	if (d == NULL)
		return c->status;
	if (d->n_states <= 1)
	{
		gdfa_free(d);
		gctx_fail(c, LLM_GRAMMAR_INVALID, "the grammar accepts no string");
		return c->status;
	}
	if (d->n_states - 1 > LLM_GRAMMAR_MAX_STATES)
	{
		gctx_fail(c, LLM_GRAMMAR_TOO_LARGE, "grammar too large: %d states (at most %d)",
				  d->n_states - 1, LLM_GRAMMAR_MAX_STATES);
		gdfa_free(d);
		return c->status;
	}
	g = calloc(1, sizeof(llm_grammar));
	if (g)
	{
		g->trans = malloc(sizeof(uint32_t) * (size_t) d->n_states * d->n_classes);
		g->flags = calloc(d->n_states, 1);
		g->source = malloc(len + 1);
	}
	if (g == NULL || g->trans == NULL || g->flags == NULL || g->source == NULL)
	{
		llm_grammar_free(g);
		gdfa_free(d);
		gctx_fail(c, LLM_GRAMMAR_NO_MEMORY, "out of memory compiling the grammar");
		return c->status;
	}
	g->kind = kind;
	g->n_rows = d->n_states;
	g->n_classes = d->n_classes;
	memcpy(g->cls, d->cls, 256);
	for (int32_t q = 0; q < d->n_states; q++)
	{
		bool		cont = false;

		for (int32_t k = 0; k < d->n_classes; k++)
		{
			int32_t		t = d->trans[(size_t) q * d->n_classes + k];

			g->trans[(size_t) q * d->n_classes + k] = (uint32_t) t * (uint32_t) d->n_classes;
			cont |= t != 0;
		}
		g->flags[q] = (d->accept[q] ? G_FLAG_ACCEPT : 0) | (cont ? G_FLAG_CONTINUE : 0);
	}
	g->max_bytes = longest_output(d);
	if (g->max_bytes < -1 || !compute_runs(g))
	{
		llm_grammar_free(g);
		gdfa_free(d);
		gctx_fail(c, LLM_GRAMMAR_NO_MEMORY, "out of memory compiling the grammar");
		return c->status;
	}
	memcpy(g->source, source, len);
	g->source[len] = '\0';
	g->source_len = len;
	g->hash = hash_bytes(source, len);
	g->id = __atomic_add_fetch(&next_grammar_id, 1, __ATOMIC_RELAXED);
	g->nfa_states = nfa_states;
	g->dfa_states = dfa_states;
	gdfa_free(d);
	*out = g;
	return LLM_GRAMMAR_OK;
}

/* ---------- the object ---------- */

void
llm_grammar_free(llm_grammar *g)
{
	if (g == NULL)
		return;
	free(g->trans);
	free(g->flags);
	free(g->run_full);
	free(g->run_ascii);
	free(g->source);
	free(g);
}
