/*
 * grammar_impl.h — internals of the grammar compiler (grammar.h), shared by
 * its files and by nothing else:
 *
 *   gctx     one compile: an arena for every AST node, the first error
 *   gnode    the intermediate form every source compiles to: a regular
 *            expression tree over characters and bytes (plus an object node
 *            whose optional members share their comma logic, and a node
 *            embedding a finished DFA)
 *   gnfa     Thompson NFA over byte ranges emitted from a tree
 *   gdfa     DFA over byte classes: subset construction, minimization
 *            (trimmed: every state but 0 reaches acceptance), intersection
 *
 * Pipeline: source -> gnode (grammar_regex.c, grammar_schema.c with
 * grammar_numeric.c, choices in grammar.c) -> gnfa (grammar_nfa.c) -> gdfa -> minimal gdfa
 * (grammar_dfa.c) -> llm_grammar (grammar_finish.c).  grammar.c, the front door,
 * calls the source compilers; they call grammar_finish.c, never grammar.c.
 */
#ifndef LLM_GRAMMAR_IMPL_H
#define LLM_GRAMMAR_IMPL_H

#include "grammar.h"

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

/* ---------- compile context ---------- */

typedef struct garena_block garena_block;

typedef struct gctx
{
	garena_block *blocks;
	llm_grammar_status status;	/* first failure */
	char	   *err;
	size_t		errlen;
	const char *where;			/* prefix for messages ("regex", "$.properties.a.pattern") */
} gctx;

void		gctx_init(gctx *c, char *err, size_t errlen);
void		gctx_done(gctx *c);
/* Zeroed arena memory freed by gctx_done; NULL (status NO_MEMORY) on failure. */
void	   *gctx_alloc(gctx *c, size_t n);
/* Record the first failure; later ones are ignored.  Always returns false. */
bool		gctx_fail(gctx *c, llm_grammar_status st, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));
bool		gctx_failed(const gctx *c);
char	   *gctx_strdup(gctx *c, const char *s, size_t n);

/* ---------- code point sets ---------- */

#define G_MAX_CP		0x10FFFF

typedef struct gcp_range
{
	uint32_t	lo,
				hi;
} gcp_range;

/* A set of Unicode scalar values: sorted, disjoint, non-adjacent ranges, no surrogates. */
typedef struct gcpset
{
	gcp_range  *r;
	int32_t		n,
				cap;
} gcpset;

bool		gcpset_add(gctx *c, gcpset *s, uint32_t lo, uint32_t hi);	/* any order; normalizes */
bool		gcpset_add_set(gctx *c, gcpset *s, const gcpset *t);
bool		gcpset_complement(gctx *c, const gcpset *s, gcpset *out);
bool		gcpset_contains(const gcpset *s, uint32_t cp);
/* out = s minus [lo, hi] */
bool		gcpset_remove(gctx *c, const gcpset *s, uint32_t lo, uint32_t hi, gcpset *out);

/* ---------- tree ---------- */

typedef enum gnode_kind
{
	G_EMPTY = 1,				/* the empty string */
	G_BYTES,					/* bytes[0..len) */
	G_BYTE_RANGE,				/* one byte in [lo, hi] */
	G_CLASS,					/* one character of set (as UTF-8); empty set = nothing */
	G_CAT,						/* kids in sequence */
	G_ALT,						/* any one kid (n >= 1) */
	G_REPEAT,					/* kid 0 repeated min..max times (max < 0: unbounded) */
	G_OBJECT,					/* "{" members "}": kids = members ("key":value),
								 * required[i]; commas between present members */
	G_DFA						/* the language of a finished DFA */
} gnode_kind;

typedef struct gdfa gdfa;

typedef struct gnode
{
	gnode_kind	kind;
	int32_t		n;
	struct gnode **kids;
	const uint8_t *bytes;
	size_t		len;
	uint8_t		lo,
				hi;
	gcpset		set;
	int32_t		min,
				max;
	bool	   *required;
	const gdfa *dfa;
} gnode;

gnode	   *g_empty(gctx *c);
gnode	   *g_bytes(gctx *c, const void *bytes, size_t len);	/* copied */
gnode	   *g_lit(gctx *c, const char *s);	/* NUL-terminated literal */
gnode	   *g_byte_range(gctx *c, uint8_t lo, uint8_t hi);
gnode	   *g_class(gctx *c, const gcpset *set);	/* set copied */
gnode	   *g_class_range(gctx *c, uint32_t lo, uint32_t hi);
/* kids[0..n): NULL kids make the result NULL (a failure already recorded) */
gnode	   *g_cat(gctx *c, gnode *const *kids, int32_t n);
gnode	   *g_alt(gctx *c, gnode *const *kids, int32_t n);
gnode	   *g_cat2(gctx *c, gnode *a, gnode *b);
gnode	   *g_cat3(gctx *c, gnode *a, gnode *b, gnode *d);
gnode	   *g_alt2(gctx *c, gnode *a, gnode *b);
gnode	   *g_repeat(gctx *c, gnode *kid, int32_t min, int32_t max);
gnode	   *g_object(gctx *c, gnode *const *members, const bool *required, int32_t n);
gnode	   *g_dfa_node(gctx *c, const gdfa *d);

/* Growable list of nodes in the arena (for building CAT / ALT). */
typedef struct gnode_list
{
	gnode	  **v;
	int32_t		n,
				cap;
} gnode_list;

bool		gnode_list_push(gctx *c, gnode_list *l, gnode *g);

/*
 * The tree of a regex pattern (grammar_regex.c); NULL on error (message
 * prefixed by c->where).  json_string: the pattern describes a decoded JSON
 * string value; the tree describes its canonical JSON-escaped text instead
 * (without the quotes).
 */
gnode	   *g_parse_regex(gctx *c, const char *pattern, size_t len, bool json_string);

/*
 * Characters of set as the canonical escaped text inside a JSON string
 * (grammar_schema.c uses it for strings; grammar_regex.c for patterns).
 */
gnode	   *g_json_chars(gctx *c, const gcpset *set);
/* A literal UTF-8 string value as the canonical escaped text inside a JSON string. */
gnode	   *g_json_chars_lit(gctx *c, const uint8_t *s, size_t n);

/* Decimal integers without leading zeros in [lo, hi] (grammar_numeric.c). */
gnode	   *g_uint_range(gctx *c, uint64_t lo, uint64_t hi);
/* JSON integers (optional '-', no "-0") in [lo, hi]. */
gnode	   *g_int_range(gctx *c, int64_t lo, int64_t hi);

/*
 * JSON numbers in plain decimal notation (no exponent) within bounds:
 * has_lo: value >= lo (lo_excl: > lo); has_hi likewise; bounds integral.
 */
gnode	   *g_number_range(gctx *c, bool has_lo, int64_t lo, bool lo_excl,
						   bool has_hi, int64_t hi, bool hi_excl);

/* ---------- NFA ---------- */

typedef enum gnfa_kind
{
	GNFA_EPS = 1,				/* epsilon to out (if >= 0) and out2 (if >= 0) */
	GNFA_RANGE,					/* a byte in [lo, hi] to out */
	GNFA_MATCH					/* accepting */
} gnfa_kind;

typedef struct gnfa_state
{
	int32_t		out,
				out2;
	uint8_t		lo,
				hi;
	uint8_t		kind;
} gnfa_state;

typedef struct gnfa
{
	gnfa_state *s;				/* malloc'ed */
	int32_t		n,
				cap;
	int32_t		start;
} gnfa;

/* Emit the tree as an NFA (start .. one MATCH state).  false on failure. */
bool		gnfa_build(gctx *c, const gnode *root, gnfa *out);
void		gnfa_free(gnfa *n);

/* ---------- DFA ---------- */

struct gdfa
{
	int32_t		n_states;		/* rows, the dead state 0 included */
	int32_t		n_classes;
	int32_t		start;
	uint8_t		cls[256];		/* byte -> class */
	int32_t    *trans;			/* n_states * n_classes targets (malloc'ed) */
	uint8_t    *accept;			/* n_states (malloc'ed) */
};

/* Subset construction; NULL on failure (limits: LLM_GRAMMAR_MAX_BUILD_STATES). */
gdfa	   *gdfa_from_nfa(gctx *c, const gnfa *n);
/*
 * Minimal trimmed equivalent: unreachable states and states that cannot
 * reach acceptance removed (their transitions go to 0), equivalent states
 * merged, start = 1 (or n_states == 1 when nothing is accepted), identical
 * byte classes merged.  NULL on failure; d is left untouched.
 */
gdfa	   *gdfa_minimize(gctx *c, const gdfa *d);
/* The language of a and b (product construction, then minimized). */
gdfa	   *gdfa_intersect(gctx *c, const gdfa *a, const gdfa *b);
void		gdfa_free(gdfa *d);

/* Tree -> minimal DFA in one call (NULL on failure). */
gdfa	   *g_compile_tree(gctx *c, const gnode *root, int32_t *nfa_states, int32_t *dfa_states);

/* ---------- the compiled grammar (grammar.c; read by grammar_mask.c) ---------- */

#define G_FLAG_ACCEPT	1
#define G_FLAG_CONTINUE	2

struct llm_grammar
{
	llm_grammar_kind kind;
	uint64_t	hash;
	uint64_t	id;
	char	   *source;			/* normalized source (kind tag byte first) */
	size_t		source_len;
	int32_t		n_rows;			/* states, the dead state 0 included */
	int32_t		n_classes;
	uint8_t		cls[256];
	/*
	 * trans[s * n_classes + cls[b]] = target * n_classes: entries are row
	 * offsets, so a walk adds instead of multiplying; 0 is the dead row.
	 */
	uint32_t   *trans;
	uint8_t    *flags;			/* per state: G_FLAG_* */
	int32_t		nfa_states,
				dfa_states;
	int64_t		max_bytes;		/* llm_grammar_max_bytes */

	/*
	 * Plain-text runs, for skipping whole trie subtrees in mask walks: a
	 * state is plain when every plain character (printable ASCII but `"`
	 * and `\`, and for run_full also every non-ASCII scalar value) leads
	 * from it to one same next state, through live intermediate states.
	 * run_*[s] & G_RUN_MASK: how many plain states follow one another from
	 * s along those characters (capped at G_RUN_CAP): that many plain
	 * characters from s are all alive.  G_RUN_CLIFF: the run ends (below
	 * the cap) at a state where every plain byte (run_full: and every byte
	 * >= 0x80) is dead, so one plain character more is never alive.
	 */
	uint8_t    *run_full;		/* n_rows */
	uint8_t    *run_ascii;		/* n_rows */
	uint32_t	inv_classes;	/* ceil(2^32 / n_classes): row = (offset * inv) >> 32 */
};

#define G_RUN_CAP	31
#define G_RUN_MASK	0x7F
#define G_RUN_CLIFF	0x80

/*
 * grammar_finish.c: compile a tree into *out (all compile entry points end
 * here, never in grammar.c, the front door that calls them): minimal DFA,
 * "accepts no string" and state-limit checks; source[0..len) is the
 * normalized source (copied).
 */
llm_grammar_status g_finish(gctx *c, const gnode *root, llm_grammar_kind kind,
							const char *source, size_t len, llm_grammar **out);

#endif
