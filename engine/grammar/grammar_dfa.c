/*
 * grammar_dfa.c — byte DFAs of the grammar compiler (grammar_impl.h):
 * subset construction from the NFA, minimization, product intersection.
 *
 * Bytes are grouped into equivalence classes first (every NFA byte range
 * boundary starts a class), so a DFA row holds one target per class, not
 * per byte.  State 0 is always the dead state (the empty NFA set).
 *
 * Minimization is Valmari's partition refinement ("Fast brief practical DFA
 * minimization", Information Processing Letters 112(6), 2012): O(m log n)
 * over the m live transitions, and it first removes the states that are
 * unreachable or cannot reach acceptance, which is exactly the trimming the
 * token masks rely on (every state but 0 can still finish).
 */
#include "grammar_impl.h"
#include "engine/util/hash.h"

#include <stdlib.h>
#include <string.h>

/*
 * Memory caps of one compile, in 4-byte entries: the construction's
 * transition table, its store of NFA sets, one state's per-class target
 * lists, and the live transitions minimization works on (about 12 entries
 * each).  Together with the NFA they keep a compile's peak near 300 MiB.
 */
#define MAX_BUILD_TABLE		(8u << 20)
#define MAX_SET_POOL		(8u << 20)
#define MAX_BUCKETS			(8u << 20)
#define MAX_LIVE_TRANS		(4u << 20)

static bool
too_large_states(gctx *c)
{
	return gctx_fail(c, LLM_GRAMMAR_TOO_LARGE,
					 "grammar too large: the automaton needs more than %d states while being built",
					 LLM_GRAMMAR_MAX_BUILD_STATES);
}

static bool
no_memory(gctx *c)
{
	return gctx_fail(c, LLM_GRAMMAR_NO_MEMORY, "out of memory compiling the grammar");
}

void
gdfa_free(gdfa *d)
{
	if (d == NULL)
		return;
	free(d->trans);
	free(d->accept);
	free(d);
}

static gdfa *
gdfa_alloc(gctx *c, int32_t n_states, int32_t n_classes)
{
	gdfa	   *d = calloc(1, sizeof(gdfa));

	if (d == NULL)
	{
		no_memory(c);
		return NULL;
	}
	d->n_states = n_states;
	d->n_classes = n_classes;
	d->trans = calloc((size_t) n_states * n_classes, sizeof(int32_t));
	d->accept = calloc(n_states, 1);
	if (d->trans == NULL || d->accept == NULL)
	{
		gdfa_free(d);
		no_memory(c);
		return NULL;
	}
	return d;
}

/* ---------- subset construction ---------- */

typedef struct subset_builder
{
	gctx	   *c;
	const gnfa *nfa;
	/* NFA sets of the DFA states: pool[set_off[i] .. set_off[i] + set_len[i]) */
	int32_t    *pool;
	size_t		pool_n,
				pool_cap;
	size_t	   *set_off;
	int32_t    *set_len;
	uint32_t   *set_hash;
	int32_t		n_states,
				cap_states;
	/* open-addressing table of DFA ids (-1 empty) */
	llm_hash_index table;		/* DFA states by hash_set of their NFA set */
	/* closure scratch */
	uint32_t   *mark;
	uint32_t	stamp;
	int32_t    *stack;
	int32_t    *result;
	/* growing transition table */
	int32_t    *trans;
	uint8_t    *accept;
	int32_t		n_classes;
} subset_builder;

/* Order-independent hash of a set of NFA ids (sets are kept unsorted). */
static uint32_t
hash_set(const int32_t *s, int32_t n)
{
	uint64_t	h = (uint64_t) n * 0x9E3779B97F4A7C15ull;

	for (int32_t i = 0; i < n; i++)
	{
		uint64_t	z = (uint64_t) (uint32_t) s[i] * 0xBF58476D1CE4E5B9ull;

		h += z ^ (z >> 31);
	}
	return (uint32_t) (h ^ (h >> 32));
}

/*
 * Epsilon closure of seeds[0..n) into sb->result (in discovery order);
 * returns its size.  Its members keep mark == stamp until the next closure,
 * which is how intern_set compares sets without sorting them.
 */
static int32_t
closure(subset_builder *sb, const int32_t *seeds, int32_t n)
{
	const gnfa_state *s = sb->nfa->s;
	int32_t		sp = 0,
				nr = 0;

	if (++sb->stamp == 0)
	{
		memset(sb->mark, 0, sizeof(uint32_t) * sb->nfa->n);
		sb->stamp = 1;
	}
	for (int32_t i = 0; i < n; i++)
		if (sb->mark[seeds[i]] != sb->stamp)
		{
			sb->mark[seeds[i]] = sb->stamp;
			sb->stack[sp++] = seeds[i];
		}
	while (sp > 0)
	{
		int32_t		q = sb->stack[--sp];

		if (s[q].kind != GNFA_EPS)
		{
			sb->result[nr++] = q;
			continue;
		}
		if (s[q].out2 >= 0 && sb->mark[s[q].out2] != sb->stamp)
		{
			sb->mark[s[q].out2] = sb->stamp;
			sb->stack[sp++] = s[q].out2;
		}
		if (s[q].out >= 0 && sb->mark[s[q].out] != sb->stamp)
		{
			sb->mark[s[q].out] = sb->stamp;
			sb->stack[sp++] = s[q].out;
		}
	}
	return nr;
}

static uint64_t
set_hash_of(const void *ctx, uint32_t id)
{
	return ((const subset_builder *) ctx)->set_hash[id];
}

/* Whether DFA state id's NFA set is the last closure's result r[0..n) (key: n): same size, every member marked. */
static bool
set_eq(const void *ctx, uint32_t id, const void *key)
{
	const subset_builder *sb = ctx;
	const uint32_t *hn = key;	/* {hash, n} */
	const int32_t *m;
	int32_t		n = (int32_t) hn[1],
				k = 0;

	if (sb->set_hash[id] != hn[0] || sb->set_len[id] != n)
		return false;
	m = sb->pool + sb->set_off[id];
	while (k < n && sb->mark[m[k]] == sb->stamp)
		k++;
	return k == n;
}

/*
 * The DFA id of NFA set r[0..n) (the last closure's result, or the empty
 * set), adding a state when new; -1 on failure.  Equal sets: same size and
 * every member of the stored one marked by the last closure.
 */
static int32_t
intern_set(subset_builder *sb, const int32_t *r, int32_t n)
{
	uint32_t	h = hash_set(r, n);
	uint32_t	key[2] = {h, (uint32_t) n};
	uint32_t   *slot = llm_hash_index_slot(&sb->table, h, set_eq, sb, key);
	int32_t		id;

	if (*slot != 0)
		return (int32_t) *slot - 1;
	if (sb->n_states >= LLM_GRAMMAR_MAX_BUILD_STATES)
	{
		too_large_states(sb->c);
		return -1;
	}
	if ((size_t) (sb->n_states + 1) * sb->n_classes > MAX_BUILD_TABLE)
	{
		gctx_fail(sb->c, LLM_GRAMMAR_TOO_LARGE,
				  "grammar too large: the automaton's table would exceed %u MiB while being built",
				  (unsigned) (MAX_BUILD_TABLE * 4 >> 20));
		return -1;
	}
	if (sb->pool_n + n > MAX_SET_POOL)
	{
		gctx_fail(sb->c, LLM_GRAMMAR_TOO_LARGE,
				  "grammar too large: the subset construction would hold more than %u MiB of NFA sets",
				  (unsigned) (MAX_SET_POOL * 4 >> 20));
		return -1;
	}
	if (sb->n_states == sb->cap_states)
	{
		int32_t		cap = sb->cap_states * 2;
		size_t	   *so = realloc(sb->set_off, sizeof(size_t) * cap);
		int32_t    *sl;
		uint32_t   *sh;
		int32_t    *tr;
		uint8_t    *ac;

		if (so == NULL)
			return no_memory(sb->c), -1;
		sb->set_off = so;
		sl = realloc(sb->set_len, sizeof(int32_t) * cap);
		if (sl == NULL)
			return no_memory(sb->c), -1;
		sb->set_len = sl;
		sh = realloc(sb->set_hash, sizeof(uint32_t) * cap);
		if (sh == NULL)
			return no_memory(sb->c), -1;
		sb->set_hash = sh;
		tr = realloc(sb->trans, sizeof(int32_t) * (size_t) cap * sb->n_classes);
		if (tr == NULL)
			return no_memory(sb->c), -1;
		sb->trans = tr;
		ac = realloc(sb->accept, cap);
		if (ac == NULL)
			return no_memory(sb->c), -1;
		sb->accept = ac;
		sb->cap_states = cap;
	}
	if (sb->pool_n + n > sb->pool_cap)
	{
		size_t		cap = sb->pool_cap * 2;
		int32_t    *p;

		while (cap < sb->pool_n + n)
			cap *= 2;
		p = realloc(sb->pool, sizeof(int32_t) * cap);
		if (p == NULL)
			return no_memory(sb->c), -1;
		sb->pool = p;
		sb->pool_cap = cap;
	}
	id = sb->n_states++;
	memcpy(sb->pool + sb->pool_n, r, sizeof(int32_t) * n);
	sb->set_off[id] = sb->pool_n;
	sb->set_len[id] = n;
	sb->set_hash[id] = h;
	sb->pool_n += n;
	memset(sb->trans + (size_t) id * sb->n_classes, 0, sizeof(int32_t) * sb->n_classes);
	sb->accept[id] = 0;
	for (int32_t k = 0; k < n; k++)
		if (sb->nfa->s[r[k]].kind == GNFA_MATCH)
			sb->accept[id] = 1;
	*slot = (uint32_t) id + 1;
	if ((uint32_t) sb->n_states * 2 > sb->table.mask &&
		!llm_hash_index_grow(&sb->table, (uint32_t) sb->n_states, set_hash_of, sb))
	{
		no_memory(sb->c);
		return -1;
	}
	return id;
}

gdfa *
gdfa_from_nfa(gctx *c, const gnfa *nfa)
{
	subset_builder sb = {0};
	uint8_t		boundary[257] = {0};
	uint8_t		cls[256];
	int32_t		n_classes = 0;
	int32_t    *bucket = NULL,
			   *bucket_n = NULL,
			   *bucket_off = NULL;
	size_t		bucket_cap = 0;
	gdfa	   *d = NULL;
	int32_t		start_set;

	/* byte classes: a new class at every range boundary */
	for (int32_t i = 0; i < nfa->n; i++)
		if (nfa->s[i].kind == GNFA_RANGE)
		{
			boundary[nfa->s[i].lo] = 1;
			boundary[nfa->s[i].hi + 1] = 1;
		}
	for (int b = 0; b < 256; b++)
	{
		if (b > 0 && boundary[b])
			n_classes++;
		cls[b] = (uint8_t) n_classes;
	}
	n_classes++;

	sb.c = c;
	sb.nfa = nfa;
	sb.n_classes = n_classes;
	sb.cap_states = 256;
	sb.pool_cap = 4096;
	sb.set_off = malloc(sizeof(size_t) * sb.cap_states);
	sb.set_len = malloc(sizeof(int32_t) * sb.cap_states);
	sb.set_hash = malloc(sizeof(uint32_t) * sb.cap_states);
	sb.trans = malloc(sizeof(int32_t) * (size_t) sb.cap_states * n_classes);
	sb.accept = malloc(sb.cap_states);
	sb.pool = malloc(sizeof(int32_t) * sb.pool_cap);
	(void) llm_hash_index_init(&sb.table, 0, 1024);
	sb.mark = calloc(nfa->n, sizeof(uint32_t));
	sb.stack = malloc(sizeof(int32_t) * nfa->n);
	sb.result = malloc(sizeof(int32_t) * nfa->n);
	/* per-class target lists of one DFA state, counted then filled */
	bucket_n = calloc(n_classes, sizeof(int32_t));
	bucket_off = calloc(n_classes + 1, sizeof(int32_t));
	if (!sb.set_off || !sb.set_len || !sb.set_hash || !sb.trans || !sb.accept || !sb.pool ||
		!sb.table.slots || !sb.mark || !sb.stack || !sb.result || !bucket_n || !bucket_off)
	{
		no_memory(c);
		goto out;
	}

	/* state 0: the empty set (dead) */
	sb.result[0] = 0;
	if (intern_set(&sb, sb.result, 0) != 0)
		goto out;
	{
		int32_t		nr = closure(&sb, &nfa->start, 1);

		start_set = intern_set(&sb, sb.result, nr);
		if (start_set < 0)
			goto out;
	}

	for (int32_t q = 1; q < sb.n_states; q++)
	{
		int32_t		n = sb.set_len[q];
		size_t		off = sb.set_off[q];
		size_t		total = 0;

		for (int32_t k = 0; k < n; k++)
		{
			const gnfa_state *st = &nfa->s[sb.pool[off + k]];

			if (st->kind != GNFA_RANGE)
				continue;
			total += cls[st->hi] - cls[st->lo] + 1;
			for (int32_t cl = cls[st->lo]; cl <= cls[st->hi]; cl++)
				bucket_n[cl]++;
		}
		if (total > MAX_BUCKETS)
		{
			gctx_fail(c, LLM_GRAMMAR_TOO_LARGE,
					  "grammar too large: one automaton state would need more than %u MiB of transitions while being built",
					  (unsigned) (MAX_BUCKETS * 4 >> 20));
			goto out;
		}
		if (total > bucket_cap)
		{
			int32_t    *nb = realloc(bucket, sizeof(int32_t) * total);

			if (nb == NULL)
			{
				no_memory(c);
				goto out;
			}
			bucket = nb;
			bucket_cap = total;
		}
		bucket_off[0] = 0;
		for (int32_t cl = 0; cl < n_classes; cl++)
		{
			bucket_off[cl + 1] = bucket_off[cl] + bucket_n[cl];
			bucket_n[cl] = 0;
		}
		/* sb.pool may move while interning below: read the members first */
		for (int32_t k = 0; k < n; k++)
		{
			const gnfa_state *st = &nfa->s[sb.pool[off + k]];

			if (st->kind != GNFA_RANGE)
				continue;
			for (int32_t cl = cls[st->lo]; cl <= cls[st->hi]; cl++)
				bucket[bucket_off[cl] + bucket_n[cl]++] = st->out;
		}
		for (int32_t cl = 0; cl < n_classes; cl++)
		{
			int32_t		nr,
						id;

			if (bucket_n[cl] == 0)
				continue;
			nr = closure(&sb, bucket + bucket_off[cl], bucket_n[cl]);
			bucket_n[cl] = 0;
			id = intern_set(&sb, sb.result, nr);
			if (id < 0)
				goto out;
			/* intern_set may have moved sb.trans */
			sb.trans[(size_t) q * n_classes + cl] = id;
		}
	}

	d = gdfa_alloc(c, sb.n_states, n_classes);
	if (d == NULL)
		goto out;
	memcpy(d->cls, cls, 256);
	memcpy(d->trans, sb.trans, sizeof(int32_t) * (size_t) sb.n_states * n_classes);
	memcpy(d->accept, sb.accept, sb.n_states);
	d->start = start_set;

out:
	free(bucket);
	free(bucket_n);
	free(bucket_off);
	free(sb.set_off);
	free(sb.set_len);
	free(sb.set_hash);
	free(sb.trans);
	free(sb.accept);
	free(sb.pool);
	llm_hash_index_free(&sb.table);
	free(sb.mark);
	free(sb.stack);
	free(sb.result);
	return d;
}

/* ---------- minimization (Valmari 2012) ---------- */

typedef struct partition
{
	int32_t		z;				/* number of sets */
	int32_t    *E,				/* elements, grouped by set */
			   *L,				/* position of each element in E */
			   *S,				/* set of each element */
			   *F,				/* first position of each set */
			   *P;				/* past-the-end position of each set */
} partition;

typedef struct minimizer
{
	partition	B,				/* blocks of states */
				C;				/* cords of transitions */
	int32_t    *M,				/* marked count per set (shared by B and C) */
			   *W,				/* touched sets */
				w;
	int32_t		nn,
				mm,
				rr;
	int32_t    *T,
			   *Lb,
			   *H;				/* transition tail, label, head */
	int32_t    *A,
			   *Fa;				/* adjacency: transitions of state q at A[Fa[q]..Fa[q+1]) */
} minimizer;

static bool
part_init(partition *p, int32_t n)
{
	size_t		sz = n > 0 ? (size_t) n : 1;

	p->E = malloc(sizeof(int32_t) * sz);
	p->L = malloc(sizeof(int32_t) * sz);
	p->S = malloc(sizeof(int32_t) * sz);
	p->F = malloc(sizeof(int32_t) * sz);
	p->P = malloc(sizeof(int32_t) * sz);
	if (!p->E || !p->L || !p->S || !p->F || !p->P)
		return false;
	p->z = n > 0;
	for (int32_t i = 0; i < n; i++)
	{
		p->E[i] = p->L[i] = i;
		p->S[i] = 0;
	}
	if (p->z)
	{
		p->F[0] = 0;
		p->P[0] = n;
	}
	return true;
}

static void
part_free(partition *p)
{
	free(p->E);
	free(p->L);
	free(p->S);
	free(p->F);
	free(p->P);
}

static inline void
part_mark(minimizer *m, partition *p, int32_t e)
{
	int32_t		s = p->S[e],
				i = p->L[e],
				j = p->F[s] + m->M[s];

	p->E[i] = p->E[j];
	p->L[p->E[i]] = i;
	p->E[j] = e;
	p->L[e] = j;
	if (!m->M[s]++)
		m->W[m->w++] = s;
}

static void
part_split(minimizer *m, partition *p)
{
	while (m->w)
	{
		int32_t		s = m->W[--m->w],
					j = p->F[s] + m->M[s];

		if (j == p->P[s])
		{
			m->M[s] = 0;
			continue;
		}
		if (m->M[s] <= p->P[s] - j)
		{
			p->F[p->z] = p->F[s];
			p->P[p->z] = p->F[s] = j;
		}
		else
		{
			p->P[p->z] = p->P[s];
			p->F[p->z] = p->P[s] = j;
		}
		for (int32_t i = p->F[p->z]; i < p->P[p->z]; i++)
			p->S[p->E[i]] = p->z;
		m->M[s] = m->M[p->z++] = 0;
	}
}

static void
make_adjacent(minimizer *m, const int32_t *K)
{
	for (int32_t q = 0; q <= m->nn; q++)
		m->Fa[q] = 0;
	for (int32_t t = 0; t < m->mm; t++)
		m->Fa[K[t]]++;
	for (int32_t q = 0; q < m->nn; q++)
		m->Fa[q + 1] += m->Fa[q];
	for (int32_t t = m->mm; t--;)
		m->A[--m->Fa[K[t]]] = t;
}

static inline void
reach(minimizer *m, int32_t q)
{
	partition  *B = &m->B;
	int32_t		i = B->L[q];

	if (i >= m->rr)
	{
		B->E[i] = B->E[m->rr];
		B->L[B->E[i]] = i;
		B->E[m->rr] = q;
		B->L[q] = m->rr++;
	}
}

/* Keep the states reached from the ones already reached along K -> Hd, and the transitions between them. */
static void
rem_unreachable(minimizer *m, int32_t *K, int32_t *Hd)
{
	partition  *B = &m->B;
	int32_t		j = 0;

	make_adjacent(m, K);
	for (int32_t i = 0; i < m->rr; i++)
		for (int32_t a = m->Fa[B->E[i]]; a < m->Fa[B->E[i] + 1]; a++)
			reach(m, Hd[m->A[a]]);
	for (int32_t t = 0; t < m->mm; t++)
		if (B->L[K[t]] < m->rr)
		{
			Hd[j] = Hd[t];
			m->Lb[j] = m->Lb[t];
			K[j] = K[t];
			j++;
		}
	m->mm = j;
	B->P[0] = m->rr;
	m->rr = 0;
}

/* Byte classes whose columns are identical in every state merge. */
static gdfa *
merge_classes(gctx *c, gdfa *d)
{
	int32_t		map[256];
	int32_t		n_new = 0;
	int32_t		rep[256];
	uint64_t	col_hash[256];
	gdfa	   *o;

	for (int32_t k = 0; k < d->n_classes; k++)
	{
		uint64_t	h = LLM_FNV64_OFFSET;

		for (int32_t q = 0; q < d->n_states; q++)
			h = llm_fnv1a64_word(h, (uint32_t) d->trans[(size_t) q * d->n_classes + k]);
		col_hash[k] = h;
	}
	for (int32_t k = 0; k < d->n_classes; k++)
	{
		int32_t		found = -1;

		for (int32_t j = 0; j < n_new && found < 0; j++)
		{
			int32_t		r = rep[j];
			bool		same = col_hash[r] == col_hash[k];

			for (int32_t q = 0; q < d->n_states && same; q++)
				same = d->trans[(size_t) q * d->n_classes + r] == d->trans[(size_t) q * d->n_classes + k];
			if (same)
				found = j;
		}
		if (found < 0)
		{
			rep[n_new] = k;
			found = n_new++;
		}
		map[k] = found;
	}
	if (n_new == d->n_classes)
		return d;
	o = gdfa_alloc(c, d->n_states, n_new);
	if (o == NULL)
	{
		gdfa_free(d);
		return NULL;
	}
	for (int b = 0; b < 256; b++)
		o->cls[b] = (uint8_t) map[d->cls[b]];
	for (int32_t q = 0; q < d->n_states; q++)
		for (int32_t j = 0; j < n_new; j++)
			o->trans[(size_t) q * n_new + j] = d->trans[(size_t) q * d->n_classes + rep[j]];
	memcpy(o->accept, d->accept, d->n_states);
	o->start = d->start;
	gdfa_free(d);
	return o;
}

gdfa *
gdfa_minimize(gctx *c, const gdfa *d)
{
	minimizer	m = {0};
	int32_t		nn = d->n_states,
				k = d->n_classes;
	size_t		mm = 0;
	gdfa	   *o = NULL;
	int32_t    *newid = NULL;
	int32_t		ff;
	bool		ok = false;

	for (size_t i = 0; i < (size_t) nn * k; i++)
		mm += d->trans[i] != 0;
	if (mm > MAX_LIVE_TRANS)
	{
		gctx_fail(c, LLM_GRAMMAR_TOO_LARGE, "grammar too large: more than %u live transitions to minimize",
				  MAX_LIVE_TRANS);
		return NULL;
	}
	m.nn = nn;
	m.mm = (int32_t) mm;
	m.T = malloc(sizeof(int32_t) * (mm + 1));
	m.Lb = malloc(sizeof(int32_t) * (mm + 1));
	m.H = malloc(sizeof(int32_t) * (mm + 1));
	m.A = malloc(sizeof(int32_t) * (mm + 1));
	m.Fa = malloc(sizeof(int32_t) * (nn + 1));
	m.M = calloc((mm > (size_t) nn ? mm : (size_t) nn) + 1, sizeof(int32_t));
	m.W = malloc(sizeof(int32_t) * ((mm > (size_t) nn ? mm : (size_t) nn) + 1));
	newid = malloc(sizeof(int32_t) * (nn + 1));
	if (!m.T || !m.Lb || !m.H || !m.A || !m.Fa || !m.M || !m.W || !newid || !part_init(&m.B, nn))
	{
		no_memory(c);
		goto out;
	}
	{
		size_t		t = 0;

		for (int32_t q = 0; q < nn; q++)
			for (int32_t a = 0; a < k; a++)
				if (d->trans[(size_t) q * k + a] != 0)
				{
					m.T[t] = q;
					m.Lb[t] = a;
					m.H[t] = d->trans[(size_t) q * k + a];
					t++;
				}
	}

	/* forward reachability from the start, then backward from the accepting states */
	reach(&m, d->start);
	rem_unreachable(&m, m.T, m.H);
	for (int32_t q = 0; q < nn; q++)
		if (d->accept[q] && m.B.L[q] < m.B.P[0])
			reach(&m, q);
	ff = m.rr;
	rem_unreachable(&m, m.H, m.T);

	if (m.B.L[d->start] >= m.B.P[0])
	{
		/* the start cannot reach acceptance: nothing is accepted */
		o = gdfa_alloc(c, 1, 1);
		if (o == NULL)
			goto out;
		o->start = 0;
		ok = true;
		goto out;
	}

	/* initial partition: accepting states (at the front) vs the rest */
	m.M[0] = ff;
	if (ff)
	{
		m.W[m.w++] = 0;
		part_split(&m, &m.B);
	}

	/* transitions partitioned by label (counting sort) */
	if (!part_init(&m.C, m.mm))
	{
		no_memory(c);
		goto out;
	}
	if (m.mm)
	{
		int32_t		cnt[257] = {0};
		int32_t		a = -1;

		for (int32_t t = 0; t < m.mm; t++)
			cnt[m.Lb[t] + 1]++;
		for (int32_t i = 0; i < 256; i++)
			cnt[i + 1] += cnt[i];
		for (int32_t t = 0; t < m.mm; t++)
			m.C.E[cnt[m.Lb[t]]++] = t;
		m.C.z = 0;
		m.M[0] = 0;
		for (int32_t i = 0; i < m.mm; i++)
		{
			int32_t		t = m.C.E[i];

			if (a < 0)
			{
				a = m.Lb[t];
				m.C.F[0] = 0;
			}
			else if (m.Lb[t] != a)
			{
				a = m.Lb[t];
				m.C.P[m.C.z++] = i;
				m.C.F[m.C.z] = i;
				m.M[m.C.z] = 0;
			}
			m.C.S[t] = m.C.z;
			m.C.L[t] = i;
		}
		m.C.P[m.C.z++] = m.mm;
	}
	else
		m.C.z = 0;

	/* refine blocks by cords and cords by blocks until stable */
	make_adjacent(&m, m.H);
	{
		int32_t		b = 1,
					cc = 0;

		while (cc < m.C.z)
		{
			for (int32_t i = m.C.F[cc]; i < m.C.P[cc]; i++)
				part_mark(&m, &m.B, m.T[m.C.E[i]]);
			part_split(&m, &m.B);
			cc++;
			while (b < m.B.z)
			{
				for (int32_t i = m.B.F[b]; i < m.B.P[b]; i++)
					for (int32_t j = m.Fa[m.B.E[i]]; j < m.Fa[m.B.E[i] + 1]; j++)
						part_mark(&m, &m.C, m.A[j]);
				part_split(&m, &m.C);
				b++;
			}
		}
	}

	/* blocks -> states 1..z, the start's block first */
	if (m.B.z + 1 > LLM_GRAMMAR_MAX_BUILD_STATES)
	{
		too_large_states(c);
		goto out;
	}
	o = gdfa_alloc(c, m.B.z + 1, k);
	if (o == NULL)
		goto out;
	memcpy(o->cls, d->cls, 256);
	{
		int32_t		sb = m.B.S[d->start],
					next = 2;

		for (int32_t b = 0; b < m.B.z; b++)
			newid[b] = (b == sb) ? 1 : next++;
	}
	o->start = 1;
	for (int32_t b = 0; b < m.B.z; b++)
		o->accept[newid[b]] = d->accept[m.B.E[m.B.F[b]]];
	for (int32_t t = 0; t < m.mm; t++)
	{
		int32_t		bt = m.B.S[m.T[t]];

		if (m.B.E[m.B.F[bt]] == m.T[t])
			o->trans[(size_t) newid[bt] * k + m.Lb[t]] = newid[m.B.S[m.H[t]]];
	}
	ok = true;

out:
	free(m.T);
	free(m.Lb);
	free(m.H);
	free(m.A);
	free(m.Fa);
	free(m.M);
	free(m.W);
	free(newid);
	part_free(&m.B);
	part_free(&m.C);
	if (!ok)
	{
		gdfa_free(o);
		return NULL;
	}
	return merge_classes(c, o);
}

/* ---------- intersection ---------- */

#define PAIR_HASH(x, y) ((uint32_t) (x) * 2654435761u ^ (uint32_t) (y) * 40503u)

/* The product states built so far: state id is the pair ((*qa)[id], (*qb)[id]) (arrays that grow). */
typedef struct pair_set
{
	int32_t   **qa;
	int32_t   **qb;
} pair_set;

static bool
pair_eq(const void *ctx, uint32_t id, const void *key)
{
	const pair_set *ps = ctx;
	const int32_t *xy = key;

	return (*ps->qa)[id] == xy[0] && (*ps->qb)[id] == xy[1];
}

static uint64_t
pair_hash_of(const void *ctx, uint32_t id)
{
	const pair_set *ps = ctx;

	return PAIR_HASH((*ps->qa)[id], (*ps->qb)[id]);
}

gdfa *
gdfa_intersect(gctx *c, const gdfa *a, const gdfa *b)
{
	uint8_t		cls[256];
	int32_t		pair_a[256],
				pair_b[256];
	int32_t		n_classes = 0;
	int32_t    *qa = NULL,
			   *qb = NULL,
			   *trans = NULL;
	uint8_t    *acc = NULL;
	llm_hash_index table = {0};	/* product states by PAIR_HASH of (x, y) */
	pair_set	ps = {&qa, &qb};
	int32_t		n = 0,
				cap = 0,
				start = 0;
	gdfa	   *p = NULL,
			   *o = NULL;

	/* product classes: distinct (class in a, class in b) pairs */
	for (int x = 0; x < 256; x++)
	{
		int32_t		k;

		for (k = 0; k < n_classes; k++)
			if (pair_a[k] == a->cls[x] && pair_b[k] == b->cls[x])
				break;
		if (k == n_classes)
		{
			pair_a[k] = a->cls[x];
			pair_b[k] = b->cls[x];
			n_classes++;
		}
		cls[x] = (uint8_t) k;
	}
	if (!llm_hash_index_init(&table, 0, 4096))
		goto oom;

	/* intern (x, y); state 0 is (0, 0) = dead; any pair with a dead side maps to 0 */
	for (int32_t q = -2; q < n; q++)
	{
		for (int32_t k = 0; k < (q < 0 ? 1 : n_classes); k++)
		{
			int32_t		x,
						y,
						id;
			int32_t		key[2];
			uint32_t   *slot;

			if (q == -2)
				x = 0, y = 0;
			else if (q == -1)
				x = a->start, y = b->start;
			else
			{
				x = a->trans[(size_t) qa[q] * a->n_classes + pair_a[k]];
				y = b->trans[(size_t) qb[q] * b->n_classes + pair_b[k]];
			}
			if (x == 0 || y == 0)
				x = y = 0;
			key[0] = x;
			key[1] = y;
			slot = llm_hash_index_slot(&table, PAIR_HASH(x, y), pair_eq, &ps, key);
			id = (int32_t) *slot - 1;
			if (id < 0)
			{
				if (n >= LLM_GRAMMAR_MAX_BUILD_STATES)
				{
					too_large_states(c);
					goto fail;
				}
				if ((size_t) (n + 1) * n_classes > MAX_BUILD_TABLE)
				{
					gctx_fail(c, LLM_GRAMMAR_TOO_LARGE,
							  "grammar too large: the intersected automaton's table would exceed %u MiB",
							  (unsigned) (MAX_BUILD_TABLE * 4 >> 20));
					goto fail;
				}
				if (n == cap)
				{
					int32_t		nc = cap ? cap * 2 : 256;
					int32_t    *na = realloc(qa, sizeof(int32_t) * nc),
							   *nb;
					int32_t    *nt;
					uint8_t    *nacc;

					if (na == NULL)
						goto oom;
					qa = na;
					nb = realloc(qb, sizeof(int32_t) * nc);
					if (nb == NULL)
						goto oom;
					qb = nb;
					nt = realloc(trans, sizeof(int32_t) * (size_t) nc * n_classes);
					if (nt == NULL)
						goto oom;
					trans = nt;
					nacc = realloc(acc, nc);
					if (nacc == NULL)
						goto oom;
					acc = nacc;
					cap = nc;
				}
				id = n++;
				qa[id] = x;
				qb[id] = y;
				acc[id] = a->accept[x] && b->accept[y];
				memset(trans + (size_t) id * n_classes, 0, sizeof(int32_t) * n_classes);
				*slot = (uint32_t) id + 1;
				if ((uint32_t) n * 2 > table.mask && !llm_hash_index_grow(&table, (uint32_t) n, pair_hash_of, &ps))
					goto oom;
			}
			if (q >= 0)
				trans[(size_t) q * n_classes + k] = id;
			else if (q == -1)
				start = id;
		}
	}
	p = gdfa_alloc(c, n, n_classes);
	if (p == NULL)
		goto fail;
	memcpy(p->cls, cls, 256);
	memcpy(p->trans, trans, sizeof(int32_t) * (size_t) n * n_classes);
	memcpy(p->accept, acc, n);
	p->start = start;
	o = gdfa_minimize(c, p);
	goto fail;					/* cleanup */
oom:
	no_memory(c);
fail:
	gdfa_free(p);
	free(qa);
	free(qb);
	free(trans);
	free(acc);
	llm_hash_index_free(&table);
	return o;
}

gdfa *
g_compile_tree(gctx *c, const gnode *root, int32_t *nfa_states, int32_t *dfa_states)
{
	gnfa		n;
	gdfa	   *d,
			   *m;

	if (root == NULL || gctx_failed(c))
		return NULL;
	if (!gnfa_build(c, root, &n))
		return NULL;
	if (nfa_states)
		*nfa_states = n.n;
	d = gdfa_from_nfa(c, &n);
	gnfa_free(&n);
	if (d == NULL)
		return NULL;
	if (dfa_states)
		*dfa_states = d->n_states;
	m = gdfa_minimize(c, d);
	gdfa_free(d);
	return m;
}
