/*
 * huge_pages.h — memory for weights and the KV cache on transparent huge pages.
 *
 * A decode step streams every weight (≈ 97 MB for SmolLM2-135M Q4_1) and the
 * sequences' KV rows (tens of MB) once.  On 4 KiB pages that is one TLB miss
 * and page walk per 4 KiB, and the walks' page-table lines compete with the
 * data in the caches; on 2 MiB pages (Linux THP, madvise mode) a step needs
 * a few hundred translations instead of tens of thousands.  If the kernel
 * gives no huge pages, the memory is still ordinary anonymous memory.
 */
#ifndef LLM_HUGE_PAGES_H
#define LLM_HUGE_PAGES_H

#include <stddef.h>

/* Zeroed memory of n bytes, 2 MiB-aligned, advised for huge pages; NULL on OOM. */
void	   *llm_huge_alloc(size_t n);

/* Release memory from llm_huge_alloc (n as passed to it); NULL is ignored. */
void		llm_huge_free(void *p, size_t n);

/*
 * A bump arena of huge-page chunks for read-mostly data that lives as long as
 * the arena (the CPU backend's copies of the weights).  Allocations are
 * 64-byte aligned.
 */
typedef struct llm_huge_arena llm_huge_arena;

llm_huge_arena *llm_huge_arena_create(void);
void	   *llm_huge_arena_alloc(llm_huge_arena *a, size_t n);
void		llm_huge_arena_destroy(llm_huge_arena *a);

#endif
