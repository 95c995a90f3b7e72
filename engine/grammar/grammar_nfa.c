/*
 * grammar_nfa.c — Thompson construction of a byte NFA from the grammar tree
 * (grammar_impl.h).
 *
 * Each node emits a fragment: a start state and one end state (an epsilon
 * state with no successor yet) that the caller links onward.  Characters of
 * a class become UTF-8 byte-range sequences split the way RE2 and Rust's
 * utf8-ranges do: ranges are cut at the encoding-length boundaries and then
 * wherever a continuation byte would not cover its full 0x80..0xBF span, so
 * each sequence is a product of byte ranges and together they encode
 * exactly the class.  Counted repetition nests its optional copies
 * (x(x(x)?)?)? so that epsilon closures stay small.
 */
#include "grammar_impl.h"
#include "engine/util/utf8_encode.h"

#include <stdlib.h>
#include <string.h>

typedef struct frag
{
	int32_t		start,
				end;
} frag;

typedef struct emitter
{
	gctx	   *c;
	gnfa	   *n;
} emitter;

static int32_t
add_state(emitter *e, gnfa_kind kind, uint8_t lo, uint8_t hi)
{
	gnfa	   *n = e->n;

	if (n->n == n->cap)
	{
		int32_t		cap = n->cap ? n->cap * 2 : 1024;
		gnfa_state *s;

		if (n->n >= LLM_GRAMMAR_MAX_NFA_STATES)
		{
			gctx_fail(e->c, LLM_GRAMMAR_TOO_LARGE,
					  "grammar too large: more than %d NFA states", LLM_GRAMMAR_MAX_NFA_STATES);
			return -1;
		}
		if (cap > LLM_GRAMMAR_MAX_NFA_STATES)
			cap = LLM_GRAMMAR_MAX_NFA_STATES;
		s = realloc(n->s, sizeof(gnfa_state) * cap);
		if (s == NULL)
		{
			gctx_fail(e->c, LLM_GRAMMAR_NO_MEMORY, "out of memory compiling the grammar");
			return -1;
		}
		n->s = s;
		n->cap = cap;
	}
	n->s[n->n].kind = (uint8_t) kind;
	n->s[n->n].lo = lo;
	n->s[n->n].hi = hi;
	n->s[n->n].out = -1;
	n->s[n->n].out2 = -1;
	return n->n++;
}

static int32_t
add_eps(emitter *e)
{
	return add_state(e, GNFA_EPS, 0, 0);
}

static bool emit(emitter *e, const gnode *g, frag *f);

/* ---------- classes ---------- */

typedef struct seq_list
{
	int32_t    *start;			/* first state of each byte sequence */
	int32_t    *last;			/* its last RANGE state (out to be linked) */
	int32_t		n,
				cap;
} seq_list;

static bool
seq_push(emitter *e, seq_list *l, int32_t start, int32_t last)
{
	if (l->n == l->cap)
	{
		int32_t		cap = l->cap ? l->cap * 2 : 16;
		int32_t    *s = gctx_alloc(e->c, sizeof(int32_t) * cap * 2);

		if (s == NULL)
			return false;
		if (l->n)
		{
			memcpy(s, l->start, sizeof(int32_t) * l->n);
			memcpy(s + cap, l->last, sizeof(int32_t) * l->n);
		}
		l->start = s;
		l->last = s + cap;
		l->cap = cap;
	}
	l->start[l->n] = start;
	l->last[l->n] = last;
	l->n++;
	return true;
}

/* One product of byte ranges lo[i]..hi[i], i < len, as a chain of RANGE states. */
static bool
emit_seq(emitter *e, seq_list *l, const uint8_t *lo, const uint8_t *hi, int len)
{
	int32_t		first = -1,
				prev = -1;

	for (int i = 0; i < len; i++)
	{
		int32_t		s = add_state(e, GNFA_RANGE, lo[i], hi[i]);

		if (s < 0)
			return false;
		if (prev >= 0)
			e->n->s[prev].out = s;
		else
			first = s;
		prev = s;
	}
	return seq_push(e, l, first, prev);
}

/* [lo, hi] (no surrogates inside) as UTF-8 sequences. */
static bool
split_utf8(emitter *e, seq_list *l, uint32_t lo, uint32_t hi)
{
	static const uint32_t bounds[3] = {0x7F, 0x7FF, 0xFFFF};
	uint8_t		a[4],
				b[4];
	int			na,
				nb;

	for (int k = 0; k < 3; k++)
		if (lo <= bounds[k] && hi > bounds[k])
			return split_utf8(e, l, lo, bounds[k]) && split_utf8(e, l, bounds[k] + 1, hi);
	if (hi > 0x7F)
		for (int i = 1; i < 4; i++)
		{
			uint32_t	m = (1u << (6 * i)) - 1;

			if ((lo & ~m) != (hi & ~m))
			{
				if ((lo & m) != 0)
					return split_utf8(e, l, lo, lo | m) && split_utf8(e, l, (lo | m) + 1, hi);
				if ((hi & m) != m)
					return split_utf8(e, l, lo, (hi & ~m) - 1) && split_utf8(e, l, hi & ~m, hi);
			}
		}
	na = llm_utf8_encode(lo, a);
	nb = llm_utf8_encode(hi, b);
	(void) nb;
	return emit_seq(e, l, a, b, na);
}

/* A list of alternatives starting at starts[] (each to be linked to end by the caller). */
static int32_t
emit_split_chain(emitter *e, const int32_t *starts, int32_t n)
{
	int32_t		first = -1,
				prev = -1;

	if (n == 1)
		return starts[0];
	for (int32_t i = 0; i < n; i++)
	{
		int32_t		s;

		if (i == n - 1)
		{
			e->n->s[prev].out2 = starts[i];
			break;
		}
		s = add_eps(e);
		if (s < 0)
			return -1;
		e->n->s[s].out = starts[i];
		if (prev >= 0)
			e->n->s[prev].out2 = s;
		else
			first = s;
		prev = s;
	}
	return first;
}

static bool
emit_class(emitter *e, const gcpset *set, frag *f)
{
	seq_list	l = {0};
	int32_t		end = add_eps(e);

	if (end < 0)
		return false;
	f->end = end;
	if (set->n == 0)
	{
		f->start = add_eps(e);	/* no way from start to end: matches nothing */
		return f->start >= 0;
	}
	for (int32_t i = 0; i < set->n; i++)
		if (!split_utf8(e, &l, set->r[i].lo, set->r[i].hi))
			return false;
	for (int32_t i = 0; i < l.n; i++)
		e->n->s[l.last[i]].out = end;
	f->start = emit_split_chain(e, l.start, l.n);
	return f->start >= 0;
}

/* ---------- structure ---------- */

static bool
emit_bytes(emitter *e, const uint8_t *b, size_t len, frag *f)
{
	int32_t		prev = -1;

	f->start = -1;
	for (size_t i = 0; i < len; i++)
	{
		int32_t		s = add_state(e, GNFA_RANGE, b[i], b[i]);

		if (s < 0)
			return false;
		if (prev >= 0)
			e->n->s[prev].out = s;
		else
			f->start = s;
		prev = s;
	}
	f->end = add_eps(e);
	if (f->end < 0)
		return false;
	if (prev >= 0)
		e->n->s[prev].out = f->end;
	else
		f->start = f->end;
	return true;
}

static bool
emit_cat(emitter *e, const gnode *g, frag *f)
{
	for (int32_t i = 0; i < g->n; i++)
	{
		frag		k;

		if (!emit(e, g->kids[i], &k))
			return false;
		if (i == 0)
			*f = k;
		else
		{
			e->n->s[f->end].out = k.start;
			f->end = k.end;
		}
	}
	return true;
}

static bool
emit_alt(emitter *e, const gnode *g, frag *f)
{
	int32_t    *starts = gctx_alloc(e->c, sizeof(int32_t) * g->n);

	if (starts == NULL)
		return false;
	f->end = add_eps(e);
	if (f->end < 0)
		return false;
	for (int32_t i = 0; i < g->n; i++)
	{
		frag		k;

		if (!emit(e, g->kids[i], &k))
			return false;
		starts[i] = k.start;
		e->n->s[k.end].out = f->end;
	}
	f->start = emit_split_chain(e, starts, g->n);
	return f->start >= 0;
}

static bool
emit_repeat(emitter *e, const gnode *g, frag *f)
{
	const gnode *kid = g->kids[0];
	int32_t		end = add_eps(e),
				cur;
	int32_t		fixed = g->min;

	if (end < 0)
		return false;
	/* x{m,}: m-1 copies, then x+ (the last copy loops) */
	if (g->max < 0 && fixed > 0)
		fixed--;
	cur = add_eps(e);
	if (cur < 0)
		return false;
	f->start = cur;
	for (int32_t i = 0; i < fixed; i++)
	{
		frag		k;

		if (!emit(e, kid, &k))
			return false;
		e->n->s[cur].out = k.start;
		cur = k.end;
	}
	if (g->max < 0)
	{
		frag		k;
		int32_t		loop;

		if (!emit(e, kid, &k))
			return false;
		loop = add_eps(e);
		if (loop < 0)
			return false;
		if (g->min > 0)
		{
			/* x+: through k once, then back or out */
			e->n->s[cur].out = k.start;
			e->n->s[k.end].out = loop;
			e->n->s[loop].out = k.start;
			e->n->s[loop].out2 = end;
		}
		else
		{
			/* x*: loop -> k -> loop, loop -> end */
			e->n->s[cur].out = loop;
			e->n->s[loop].out = k.start;
			e->n->s[loop].out2 = end;
			e->n->s[k.end].out = loop;
		}
	}
	else
	{
		/* nested optional copies: each either enters its copy or leaves */
		for (int32_t i = g->min; i < g->max; i++)
		{
			frag		k;
			int32_t		split = add_eps(e);

			if (split < 0 || !emit(e, kid, &k))
				return false;
			e->n->s[cur].out = split;
			e->n->s[split].out = k.start;
			e->n->s[split].out2 = end;
			cur = k.end;
		}
		e->n->s[cur].out = end;
	}
	f->end = end;
	return true;
}

/*
 * "{" members "}" with commas only between present members: entry states
 * first[i] (no member written yet) and more[i] (some written) per member;
 * member i's text is emitted once, reached from first[i] directly and from
 * more[i] through a comma, and continues at more[i + 1].  An optional
 * member may also be skipped (first[i] -> first[i + 1], more[i] ->
 * more[i + 1]).  Linear in the members, however many are optional.
 */
static bool
emit_object(emitter *e, const gnode *g, frag *f)
{
	int32_t		n = g->n;
	int32_t    *first = gctx_alloc(e->c, sizeof(int32_t) * (n + 1) * 2);
	int32_t    *more = first ? first + n + 1 : NULL;
	frag		open,
				close;

	if (first == NULL)
		return false;
	if (!emit_bytes(e, (const uint8_t *) "{", 1, &open) ||
		!emit_bytes(e, (const uint8_t *) "}", 1, &close))
		return false;
	for (int32_t i = 0; i <= n; i++)
	{
		first[i] = add_eps(e);
		more[i] = add_eps(e);
		if (first[i] < 0 || more[i] < 0)
			return false;
	}
	e->n->s[open.end].out = first[0];
	e->n->s[first[n]].out = close.start;
	e->n->s[more[n]].out = close.start;
	for (int32_t i = 0; i < n; i++)
	{
		frag		m;
		int32_t		comma;

		if (!emit(e, g->kids[i], &m))
			return false;
		comma = add_state(e, GNFA_RANGE, ',', ',');
		if (comma < 0)
			return false;
		e->n->s[comma].out = m.start;
		e->n->s[m.end].out = more[i + 1];
		e->n->s[first[i]].out = m.start;
		e->n->s[more[i]].out = comma;
		if (!g->required[i])
		{
			e->n->s[first[i]].out2 = first[i + 1];
			e->n->s[more[i]].out2 = more[i + 1];
		}
	}
	f->start = open.start;
	f->end = close.end;
	return true;
}

/* A finished DFA embedded: one epsilon state per DFA state, one RANGE state per byte run of each live transition. */
static bool
emit_dfa(emitter *e, const gdfa *d, frag *f)
{
	int32_t    *entry;
	int32_t		end;
	/* byte runs of each class */
	int32_t		n_runs = 0;
	uint8_t		run_lo[256],
				run_hi[256],
				run_cls[256];

	end = add_eps(e);
	if (end < 0)
		return false;
	f->end = end;
	entry = gctx_alloc(e->c, sizeof(int32_t) * d->n_states);
	if (entry == NULL)
		return false;
	for (int b = 0; b < 256; b++)
	{
		if (b > 0 && d->cls[b] == d->cls[b - 1])
			run_hi[n_runs - 1] = (uint8_t) b;
		else
		{
			run_lo[n_runs] = run_hi[n_runs] = (uint8_t) b;
			run_cls[n_runs] = d->cls[b];
			n_runs++;
		}
	}
	for (int32_t q = 1; q < d->n_states; q++)
	{
		entry[q] = add_eps(e);
		if (entry[q] < 0)
			return false;
	}
	for (int32_t q = 1; q < d->n_states; q++)
	{
		int32_t		starts[257],
					ns = 0;

		for (int32_t r = 0; r < n_runs; r++)
		{
			int32_t		t = d->trans[(size_t) q * d->n_classes + run_cls[r]];
			int32_t		s;

			if (t == 0)
				continue;
			s = add_state(e, GNFA_RANGE, run_lo[r], run_hi[r]);
			if (s < 0)
				return false;
			e->n->s[s].out = entry[t];
			starts[ns++] = s;
		}
		if (d->accept[q])
			starts[ns++] = end;
		if (ns == 0)
			continue;
		{
			int32_t		head = emit_split_chain(e, starts, ns);

			if (head < 0)
				return false;
			e->n->s[entry[q]].out = head;
		}
	}
	if (d->n_states > 1)
		f->start = entry[d->start];
	else
	{
		f->start = add_eps(e);
		if (f->start < 0)
			return false;
	}
	return true;
}

static bool
emit(emitter *e, const gnode *g, frag *f)
{
	switch (g->kind)
	{
		case G_EMPTY:
			f->start = f->end = add_eps(e);
			return f->start >= 0;
		case G_BYTES:
			return emit_bytes(e, g->bytes, g->len, f);
		case G_BYTE_RANGE:
			f->start = add_state(e, GNFA_RANGE, g->lo, g->hi);
			f->end = add_eps(e);
			if (f->start < 0 || f->end < 0)
				return false;
			e->n->s[f->start].out = f->end;
			return true;
		case G_CLASS:
			return emit_class(e, &g->set, f);
		case G_CAT:
			return emit_cat(e, g, f);
		case G_ALT:
			return emit_alt(e, g, f);
		case G_REPEAT:
			return emit_repeat(e, g, f);
		case G_OBJECT:
			return emit_object(e, g, f);
		case G_DFA:
			return emit_dfa(e, g->dfa, f);
	}
	return gctx_fail(e->c, LLM_GRAMMAR_INVALID, "internal error: unknown grammar node");
}

bool
gnfa_build(gctx *c, const gnode *root, gnfa *out)
{
	emitter		e = {c, out};
	frag		f;
	int32_t		match;

	memset(out, 0, sizeof(*out));
	if (!emit(&e, root, &f))
	{
		gnfa_free(out);
		return false;
	}
	match = add_state(&e, GNFA_MATCH, 0, 0);
	if (match < 0)
	{
		gnfa_free(out);
		return false;
	}
	out->s[f.end].out = match;
	out->start = f.start;
	return true;
}

void
gnfa_free(gnfa *n)
{
	free(n->s);
	memset(n, 0, sizeof(*n));
}
