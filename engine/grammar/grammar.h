/*
 * grammar.h — constrained decoding: grammars compiled to byte automata, and
 * the allowed-token masks a logits processor applies at each decode step.
 *
 * A grammar (a list of choices, a regular expression, or a JSON schema) is
 * compiled once into a minimal DFA over BYTES whose language is exactly the
 * set of complete outputs.  Working on bytes makes partial UTF-8 across
 * tokens natural: a token may end inside a multi-byte character, the state
 * then sits between its bytes and the next token continues it.  Every state
 * but the dead one can still reach acceptance (the automaton is trimmed), so
 * a generation that only takes allowed tokens can always finish.
 *
 * The supported regex and JSON-schema subsets, the output normalization and
 * the limits are documented at the compile functions below.
 *
 * Token masks: a token index (llm_token_index) is built once per vocabulary
 * (a trie of every token's bytes in preorder) and shared by all grammars; the
 * mask of a DFA state is computed by walking the trie against the DFA,
 * skipping whole subtrees at the dead state, and cached per (grammar, state)
 * in a bounded mask cache (llm_mask_cache).  A token is allowed in state s
 * iff
 *   - it is an end-of-generation token and s is accepting, or
 *   - it is an ordinary token with non-empty bytes and advancing s by its
 *     bytes does not reach the dead state.
 * Special/control tokens that are not end-of-generation, and tokens with no
 * bytes (they could never advance the grammar), are never allowed.  A state
 * that accepts and cannot continue allows only end-of-generation tokens: the
 * driver should finish the request there whether or not the vocabulary has
 * one (llm_grammar_can_continue).  With a byte-level vocabulary (every
 * single byte a token, as in GPT-2-style BPE) every live state allows at
 * least one token; llm_grammar_mask_compute returns the count so a driver
 * can fail a request whose vocabulary cannot continue.
 *
 * Ownership and threads: a grammar and a token index are malloc'ed and
 * immutable after creation: share them between requests and threads; free
 * each once, after its last user.  A mask cache is mutable and not
 * thread-safe: one thread uses it at a time.  Nothing here calls PostgreSQL
 * or aborts; every failure is a status and a message in err.
 */
#ifndef LLM_GRAMMAR_H
#define LLM_GRAMMAR_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

/* ---------- limits (checked at compile time; exceeding one is LLM_GRAMMAR_TOO_LARGE) ---------- */

/* Live states of the final (minimized) automaton. */
#define LLM_GRAMMAR_MAX_STATES			65536
/*
 * States the subset construction may create before minimization.  It also
 * stops when its transition table or its store of NFA sets would pass 32
 * MiB, and minimization when it would see more than 4M live transitions, so
 * the largest accepted compiles peak near 300 MiB; realistic schemas need a
 * few MiB.
 */
#define LLM_GRAMMAR_MAX_BUILD_STATES	262144
/* States of the intermediate NFA (Thompson construction). */
#define LLM_GRAMMAR_MAX_NFA_STATES		(1 << 21)
/* Largest count in a counted repetition {m,n}, minItems/maxItems, minLength/maxLength. */
#define LLM_GRAMMAR_MAX_REPEAT			1000
/* Source text bytes (pattern, schema JSON text, all choices together). */
#define LLM_GRAMMAR_MAX_SOURCE			(1 << 20)
/* Nesting depth: regex groups, schema levels, JSON nesting of the schema text. */
#define LLM_GRAMMAR_MAX_DEPTH			64
/* Number of choices of a choices grammar. */
#define LLM_GRAMMAR_MAX_CHOICES			65536

/* Outcome of a compile call; the glue maps them to SQLSTATEs. */
typedef enum llm_grammar_status
{
	LLM_GRAMMAR_OK = 0,
	LLM_GRAMMAR_INVALID,		/* 22023 invalid_parameter_value: bad or unsupported source,
								 * or a grammar that accepts no string */
	LLM_GRAMMAR_TOO_LARGE,		/* 54000 program_limit_exceeded: a limit above */
	LLM_GRAMMAR_NO_MEMORY		/* 53200 out_of_memory */
} llm_grammar_status;

typedef enum llm_grammar_kind
{
	LLM_GRAMMAR_CHOICES = 1,
	LLM_GRAMMAR_REGEX,
	LLM_GRAMMAR_JSON_SCHEMA
} llm_grammar_kind;

typedef struct llm_grammar llm_grammar;

/*
 * A DFA state: an index 0..n_states; 0 is the dead state (no continuation
 * can be accepted), llm_grammar_start() the start.  States are plain values:
 * a request keeps its current state in its own memory.
 */
typedef uint32_t llm_grammar_state;

#define LLM_GRAMMAR_DEAD	((llm_grammar_state) 0)

/*
 * Choices: the output is exactly one of the n strings (valid UTF-8, may be
 * empty, duplicates allowed); a choice that is a prefix of another is still
 * complete on its own ("bug" and "bugfix" both accepted).  1 <= n <=
 * LLM_GRAMMAR_MAX_CHOICES.
 */
llm_grammar_status llm_grammar_compile_choices(const char *const *choices, const size_t *lens, int32_t n,
											   llm_grammar **out, char *err, size_t errlen);

/*
 * Regex: the whole output must match (anchored at both ends; a leading `^`
 * and a trailing `$` are accepted and mean nothing more).  The pattern is
 * UTF-8 and matches characters (code points) written as UTF-8:
 *   literals     any character but the metacharacters .[]{}()*+?|\^$ ;
 *                `]` and `}` on their own are literals
 *   escapes      \n \t \r \f \v \0, \xHH, \uXXXX (a surrogate pair of two
 *                \u escapes is one character; a lone surrogate is an
 *                error), and \ before any ASCII punctuation (\. \\ \- ...)
 *   classes      [abc] [a-z] [^...] with ranges and escapes inside; `]`
 *                first or `-` first/last is literal; a negated class
 *                matches every other Unicode scalar value, newline included
 *   shorthand    \d [0-9]  \w [A-Za-z0-9_]  \s [ \t\n\r\f\v] (ASCII, as in
 *                RE2 and PCRE without UCP), \D \W \S their complements;
 *                also inside classes
 *   .            any Unicode scalar value except \n
 *   quantifiers  * + ? {m} {m,} {m,n} (greedy; m <= n <= LLM_GRAMMAR_MAX_REPEAT)
 *   alternation  |, with empty branches allowed
 *   groups       ( ) and (?: ) (both non-capturing for matching)
 * Errors name the construct and its byte offset: backreferences, lookaround
 * and other (?...) groups, lazy (*?) and possessive (*+) quantifiers, ^ or $
 * anywhere but the ends, \b \B \A \z \Z \p \P \k \g and other unknown
 * escapes, POSIX classes [[:alpha:]], malformed {m,n}, m > n, counts over
 * the limit, a quantifier with nothing to repeat, unbalanced parentheses or
 * brackets, invalid UTF-8 in the pattern.  Empty groups and empty branches
 * are fine.  A pattern that matches nothing (e.g. [^\s\S]) is an error
 * ("accepts no string").
 */
llm_grammar_status llm_grammar_compile_regex(const char *pattern, size_t len,
											 llm_grammar **out, char *err, size_t errlen);

/*
 * JSON schema (its JSON text): the output is one COMPACT JSON value valid
 * against the schema: no insignificant whitespace, object keys in the order
 * of "properties", strings in canonical escaping (\" \\ \b \f \n \r \t,
 * other controls as \u00xx lowercase, everything else raw UTF-8; no other
 * escapes), numbers in plain decimal notation (no exponent, no leading
 * zeros, no "-0").  Supported keywords:
 *   type          "string" | "integer" | "number" | "boolean" | "null" |
 *                 "object" | "array", or an array of those (any of them)
 *   object        properties (schema order), required (names in
 *                 properties; always present), optional properties present
 *                 in order or absent; additionalProperties must be false or
 *                 absent, and absent means false: only the listed
 *                 properties are ever generated
 *   string        minLength / maxLength (in characters, an escape counting
 *                 as the one character it stands for), pattern (the regex
 *                 subset above, matching the whole decoded value, which
 *                 is then written with canonical escapes), format "date"
 *                 (YYYY-MM-DD, month 01-12, day 01-31), "time" (hh:mm:ss,
 *                 optional fraction, then Z or +hh:mm / -hh:mm),
 *                 "date-time" (date T time), "uuid" (8-4-4-4-12 hex, either
 *                 case), "ipv4" (dotted quad, no leading zeros); several of
 *                 these on one string must all hold (their automata are
 *                 intersected)
 *   integer       minimum / maximum / exclusiveMinimum / exclusiveMaximum
 *                 (numbers), enforced exactly; without bounds the int64
 *                 range [-2^63, 2^63-1] (so the value always fits a bigint)
 *   number        the same bounds; integral bounds are exact (e.g.
 *                 [0, 1] accepts 0, 0.25, 1, 1.000 but not 1.5), fractional
 *                 bounds are tightened to the integer inward (minimum 0.5
 *                 acts as 1, maximum 2.5 as 2); fraction digits unbounded;
 *                 without bounds unbounded
 *   boolean, null
 *   array         items (required: one schema for every item), minItems,
 *                 maxItems (counts and lengths at most LLM_GRAMMAR_MAX_REPEAT)
 *   enum, const   scalar values (string, number, boolean, null), combinable
 *                 only with type (values of other types are dropped)
 *   anyOf         any of the subschemas
 *   ignored       title, description, $schema, $id, $comment, default,
 *                 examples, deprecated, readOnly, writeOnly, $defs,
 *                 definitions
 * Anything else ($ref, oneOf, allOf, not, if/then/else, patternProperties,
 * dependentRequired, uniqueItems, prefixItems, contains, minProperties,
 * multipleOf, propertyNames, nullable, unknown words, ...), a keyword that
 * applies to none of the schema's types, anyOf beside other keywords, a
 * schema without type/enum/const/anyOf (any value), the boolean schemas,
 * and items as an array are errors naming the keyword and its JSON path
 * ("json_schema: $.properties.a.uniqueItems: ..."); so is a schema
 * accepting no value.  The schema text itself must be strict JSON
 * (json_min.h: duplicate keys are an error).
 */
llm_grammar_status llm_grammar_compile_json_schema(const char *schema, size_t len,
												   llm_grammar **out, char *err, size_t errlen);

/*
 * A grammar from a tagged source: byte 0 is its llm_grammar_kind, the rest
 * its source as llm_grammar_source() writes it -- choices: each choice as a
 * 4-byte length (machine byte order) and its bytes, in any order, at least
 * one; regex: the pattern; JSON schema: the schema's JSON text.  A
 * normalized source is a tagged source and compiles to an equal automaton
 * (with the same normalized source), so a driver that checked a grammar can
 * send its normalized source to another process, which compiles it again
 * (and may cache it by those bytes).  Errors as the compile functions, plus
 * an unknown tag or a malformed choices list (LLM_GRAMMAR_INVALID).
 */
llm_grammar_status llm_grammar_compile_source(const char *src, size_t len,
											  llm_grammar **out, char *err, size_t errlen);

void		llm_grammar_free(llm_grammar *g);

llm_grammar_kind llm_grammar_kind_of(const llm_grammar *g);

/*
 * The normalized source: a kind tag and the source in one canonical form
 * (choices: sorted and deduplicated; regex: as given; schema: re-written as
 * compact JSON).  Equal normalized sources compile to identical automata; a
 * cache of compiled grammars keyed by llm_grammar_hash() must compare these
 * bytes on a hit (the hash is not collision-resistant).
 */
const char *llm_grammar_source(const llm_grammar *g, size_t *len);
/* 64-bit FNV-1a-based hash of the normalized source. */
uint64_t	llm_grammar_hash(const llm_grammar *g);
/* Process-unique id of this compiled object (mask caches key on it). */
uint64_t	llm_grammar_id(const llm_grammar *g);

/* Live states (the dead state not counted); <= LLM_GRAMMAR_MAX_STATES. */
int32_t		llm_grammar_n_states(const llm_grammar *g);
/* Byte equivalence classes of the transition table. */
int32_t		llm_grammar_n_classes(const llm_grammar *g);
/* Bytes the grammar object holds (table, flags, source). */
size_t		llm_grammar_memory(const llm_grammar *g);
/* Sizes on the way: NFA states and DFA states before minimization. */
void		llm_grammar_build_sizes(const llm_grammar *g, int32_t *nfa_states, int32_t *dfa_states);

/*
 * The longest complete output in bytes, or -1 when outputs of any length
 * are complete (a `*`, `+` or `{m,}` in a pattern, an unbounded string,
 * array or number).  A token covers at least one byte and a request ends as
 * soon as its state accepts and cannot continue, so max_tokens at least
 * this always lets a constrained output complete.
 */
int64_t		llm_grammar_max_bytes(const llm_grammar *g);

llm_grammar_state llm_grammar_start(const llm_grammar *g);
/* The state after n more bytes (DEAD stays DEAD). */
llm_grammar_state llm_grammar_advance(const llm_grammar *g, llm_grammar_state s, const void *bytes, size_t n);
/* The bytes seen so far form a complete output. */
bool		llm_grammar_is_accepting(const llm_grammar *g, llm_grammar_state s);
/* Some non-empty continuation leads to acceptance (false for DEAD). */
bool		llm_grammar_can_continue(const llm_grammar *g, llm_grammar_state s);
/* The whole string s[0..n) is accepted. */
bool		llm_grammar_matches(const llm_grammar *g, const void *s, size_t n);

/* ---------- token masks ---------- */

typedef struct llm_token_index llm_token_index;

/*
 * Token index of a vocabulary of n_vocab ids: bytes[i][0..lens[i]) are the
 * bytes of id i as they appear in text; special[i] marks special/control
 * ids (never allowed unless end-of-generation); eog[0..n_eog) are the
 * end-of-generation ids (allowed exactly in accepting states; they need not
 * be marked special).  Everything is copied.  NULL + message on bad input
 * or allocation failure.
 */
llm_token_index *llm_token_index_create(int32_t n_vocab, const char *const *bytes, const int32_t *lens,
										const bool *special, const int32_t *eog, int32_t n_eog,
										char *err, size_t errlen);

struct llm_tokenizer;

/*
 * Token index of a tokenizer's vocabulary (tokenizer.h): bytes by
 * llm_token_to_bytes, special = the CONTROL / USER_DEFINED ids (those
 * llm_tokenizer_special_id finds by their text), eog = llm_tokenizer_is_eog.
 */
llm_token_index *llm_token_index_from_tokenizer(const struct llm_tokenizer *t, char *err, size_t errlen);
void		llm_token_index_free(llm_token_index *ix);

int32_t		llm_token_index_n_vocab(const llm_token_index *ix);
/* 32-bit words of one mask: (n_vocab + 31) / 32. */
int32_t		llm_token_index_mask_words(const llm_token_index *ix);
/* Trie nodes (the root included) and bytes held. */
int32_t		llm_token_index_n_nodes(const llm_token_index *ix);
size_t		llm_token_index_memory(const llm_token_index *ix);

/*
 * The state after token id from s: DEAD for an id that is special,
 * end-of-generation, empty, out of range, or not allowed in s.  (An
 * end-of-generation token ends the output: the driver finishes the request
 * instead of advancing.)
 */
llm_grammar_state llm_grammar_advance_token(const llm_token_index *ix, const llm_grammar *g,
											llm_grammar_state s, int32_t id);

/*
 * Compute the allowed-token mask of state s into mask[0..mask_words): bit
 * (id % 32) of word id / 32 is set iff id is allowed (bits >= n_vocab are
 * clear).  Returns the number of allowed ids (0 for DEAD), or -1 when
 * scratch memory cannot be allocated.  Pure: safe from any thread.
 */
int32_t		llm_grammar_mask_compute(const llm_token_index *ix, const llm_grammar *g,
									 llm_grammar_state s, uint32_t *mask);

/* Set logits[id] = -INFINITY for every id in [0, n_vocab) whose mask bit is clear. */
void		llm_grammar_mask_apply(const uint32_t *mask, int32_t n_vocab, float *logits);

/*
 * Bounded cache of masks per (grammar id, state) over one token index, at
 * most max_bytes of mask memory (at least one mask is always kept); CLOCK
 * eviction.  Not thread-safe.
 */
typedef struct llm_mask_cache llm_mask_cache;

typedef struct llm_mask_cache_stats
{
	uint64_t	hits;
	uint64_t	misses;
	uint64_t	evictions;
	int32_t		entries;		/* masks held now */
	int32_t		capacity;		/* masks max_bytes allows */
} llm_mask_cache_stats;

llm_mask_cache *llm_mask_cache_create(const llm_token_index *ix, size_t max_bytes);
void		llm_mask_cache_free(llm_mask_cache *c);

/*
 * The mask of state s of g (computed on a miss).  The pointer is valid until
 * the next call on this cache; *n_allowed (when not NULL) gets the count.
 * NULL when memory runs out.  g must be a grammar the cache's index can be
 * used with (any: grammars are vocabulary-independent).
 */
const uint32_t *llm_mask_cache_get(llm_mask_cache *c, const llm_grammar *g, llm_grammar_state s,
								   int32_t *n_allowed);
void		llm_mask_cache_get_stats(const llm_mask_cache *c, llm_mask_cache_stats *st);

#endif
