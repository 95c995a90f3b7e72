/*
 * binary_heap.h — a binary heap of fixed-size elements in caller storage:
 * the priority queue of pending merges of both BPE tokenizers (byte-level
 * BPE by merge rank in bpe.c, SentencePiece by score in
 * spm.c).
 *
 * Contract:
 *  - Order: `before(a, b)` is true when a must come out before b; it must be
 *    a strict weak order (irreflexive, transitive).  llm_heap_pop returns an
 *    element no other element is before.  Among tied elements, which one
 *    comes out first is fixed by the sequence of pushes and pops alone (the
 *    sift order below), so a tokenizer's output is deterministic.
 *  - Storage: `items` is an array of elements of `elem_size` bytes owned by
 *    the caller (malloc'ed, freed by the caller); the heap never allocates.
 *    The caller sizes it for the most elements ever queued at once (each
 *    tokenizer's bound is stated where it allocates); pushing beyond it is
 *    undefined.  The storage stays valid and unmoved between init and the
 *    last pop; init again after reallocating it.
 *  - An element passed to llm_heap_push must not lie inside `items`.
 *  - Cost: push and pop O(log n) comparisons and element copies.  The
 *    functions are static inline so that each tokenizer's comparator and
 *    element size are inlined into its own copy.
 *  - Not thread-safe: one heap per caller (a tokenize call's scratch).
 */
#ifndef LLM_BINARY_HEAP_H
#define LLM_BINARY_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef bool (*llm_heap_before_fn) (const void *a, const void *b);

typedef struct llm_heap
{
	char	   *items;			/* caller storage, elem_size bytes per element */
	size_t		elem_size;
	size_t		n;				/* elements queued */
	llm_heap_before_fn before;
} llm_heap;

#define LLM_HEAP_AT(h, i) ((h)->items + (i) * (h)->elem_size)

/* An empty heap over items. */
static inline void
llm_heap_init(llm_heap *h, void *items, size_t elem_size, llm_heap_before_fn before)
{
	h->items = items;
	h->elem_size = elem_size;
	h->n = 0;
	h->before = before;
}

/* Queue a copy of *item (sift up: parents it comes before move down). */
static inline void
llm_heap_push(llm_heap *h, const void *item)
{
	size_t		i = h->n++;

	while (i > 0)
	{
		size_t		parent = (i - 1) / 2;

		if (!h->before(item, LLM_HEAP_AT(h, parent)))
			break;
		memcpy(LLM_HEAP_AT(h, i), LLM_HEAP_AT(h, parent), h->elem_size);
		i = parent;
	}
	memcpy(LLM_HEAP_AT(h, i), item, h->elem_size);
}

/*
 * Remove the first element into *out; h->n must be > 0.  The last element
 * is sifted down from the root; it stays in its slot (past the new end,
 * never overwritten by the sift) until it is copied into its place.
 */
static inline void
llm_heap_pop(llm_heap *h, void *out)
{
	const char *last;
	size_t		i = 0;

	memcpy(out, LLM_HEAP_AT(h, 0), h->elem_size);
	last = LLM_HEAP_AT(h, --h->n);
	for (;;)
	{
		size_t		c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->before(LLM_HEAP_AT(h, c + 1), LLM_HEAP_AT(h, c)))
			c++;
		if (!h->before(LLM_HEAP_AT(h, c), last))
			break;
		memcpy(LLM_HEAP_AT(h, i), LLM_HEAP_AT(h, c), h->elem_size);
		i = c;
	}
	if (h->n > 0)
		memcpy(LLM_HEAP_AT(h, i), last, h->elem_size);
}

#undef LLM_HEAP_AT

#endif							/* LLM_BINARY_HEAP_H */
