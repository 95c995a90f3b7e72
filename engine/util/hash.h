/*
 * hash.h — the engine's hashing: FNV-1a (32 and 64 bit), the splitmix64
 * finalizer, and one open-addressing index over caller-owned entries.
 *
 * FNV-1a values are fixed by the algorithm and never change with the build:
 * llm_grammar_hash (FNV-1a 64 + llm_mix64) and the prefix cache's block
 * hashes (llm_mix64) depend on them.
 *
 * llm_hash_index maps keys to entry ids 0..2^32-2 of an array the caller
 * owns (a vocabulary, a GGUF's keys, ...): the caller hashes the key and
 * says whether entry id equals it (an equality callback, usually a
 * comparison of the stored key with the caller's).  Slots hold id + 1 (0 is
 * empty); probing is linear from hash & mask.  Entries are never removed.
 * The index never looks at keys itself, so one index type serves strings,
 * pairs and sets alike.  Not thread-safe for writers; any number of readers
 * may look up at once once it is built.
 */
#ifndef LLM_UTIL_HASH_H
#define LLM_UTIL_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LLM_FNV32_OFFSET	2166136261u
#define LLM_FNV32_PRIME		16777619u
#define LLM_FNV64_OFFSET	1469598103934665603ull
#define LLM_FNV64_PRIME		1099511628211ull

/* FNV-1a, 32 bit, of p[0..n). */
static inline uint32_t
llm_fnv1a32(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t	h = LLM_FNV32_OFFSET;

	for (size_t i = 0; i < n; i++)
	{
		h ^= b[i];
		h *= LLM_FNV32_PRIME;
	}
	return h;
}

/* FNV-1a, 64 bit, of p[0..n) continued from h (LLM_FNV64_OFFSET to start). */
static inline uint64_t
llm_fnv1a64_from(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
	{
		h ^= b[i];
		h *= LLM_FNV64_PRIME;
	}
	return h;
}

/* FNV-1a, 64 bit, of p[0..n). */
static inline uint64_t
llm_fnv1a64(const void *p, size_t n)
{
	return llm_fnv1a64_from(LLM_FNV64_OFFSET, p, n);
}

/* One FNV-1a 64 step over a whole word v instead of a byte (h ^ v) * prime. */
static inline uint64_t
llm_fnv1a64_word(uint64_t h, uint64_t v)
{
	return (h ^ v) * LLM_FNV64_PRIME;
}

/* The splitmix64 finalizer (Vigna): a bijection of 64-bit values that spreads every input bit. */
static inline uint64_t
llm_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* ---------- open-addressing index ---------- */

typedef struct llm_hash_index
{
	uint32_t   *slots;			/* mask + 1 of them: entry id + 1, 0 = empty */
	uint64_t	mask;			/* slots - 1 (a power of two minus one) */
} llm_hash_index;

/* Whether entry id of the caller's array (ctx) equals key. */
typedef bool (*llm_hash_eq) (const void *ctx, uint32_t id, const void *key);

/*
 * Slots for up to n_entries entries at most half full: the least power of
 * two >= max(min_slots, 2 * n_entries).  false when out of memory (x is
 * then empty).
 */
bool		llm_hash_index_init(llm_hash_index *x, uint64_t n_entries, uint64_t min_slots);
void		llm_hash_index_free(llm_hash_index *x);

/* The hash of entry id, as it was given when the entry went in. */
typedef uint64_t (*llm_hash_of) (const void *ctx, uint32_t id);

/*
 * Double the slots, re-inserting entries 0..n_ids-1 (every entry the index
 * holds; keys distinct) by hash_of, in id order.  false when out of memory
 * (x unchanged).
 */
bool		llm_hash_index_grow(llm_hash_index *x, uint32_t n_ids, llm_hash_of hash_of, const void *ctx);

/*
 * The slot of the entry equal to key (*slot is its id + 1), or the empty
 * slot where an entry with this hash goes (*slot == 0).  Store id + 1 there
 * to insert, or overwrite a found slot to re-point the key at another id.
 * The index must not be full (llm_hash_index_init sizes it so).
 */
static inline uint32_t *
llm_hash_index_slot(const llm_hash_index *x, uint64_t hash, llm_hash_eq eq, const void *ctx,
					const void *key)
{
	uint64_t	i = hash & x->mask;

	while (x->slots[i] != 0 && !eq(ctx, x->slots[i] - 1, key))
		i = (i + 1) & x->mask;
	return &x->slots[i];
}

/* Id of the entry equal to key, or -1. */
static inline int64_t
llm_hash_index_find(const llm_hash_index *x, uint64_t hash, llm_hash_eq eq, const void *ctx,
					const void *key)
{
	uint32_t	s = *llm_hash_index_slot(x, hash, eq, ctx, key);

	return s == 0 ? -1 : (int64_t) s - 1;
}

#endif
