/*
 * huge_pages.h — page-size choice for the CPU backend's big arrays: the
 * weights on transparent huge pages, the KV cache on base pages.
 *
 * A decode step streams every weight (≈ 97 MB for SmolLM2-135M Q4_1) once.
 * On 4 KiB pages that is one TLB miss and page walk per 4 KiB, and the
 * walks' page-table lines compete with the data in the caches; on 2 MiB
 * pages (Linux THP, madvise mode) a step needs a few hundred translations
 * instead of tens of thousands.  If the kernel gives no huge pages, the
 * memory is still ordinary anonymous memory.
 *
 * The KV cache is the opposite case: a large pool (up to 1 GiB by default)
 * written a few rows at a time, long after it is mapped.  The first write to
 * a page makes the kernel zero the whole page: 2 MiB for a huge page, so a
 * short prompt's first K/V rows in each layer's array zero megabytes it never
 * uses, on the prompt's critical path (and on a VM fresh huge pages also pay
 * the host's faults).  On base pages the first touch zeroes 4 KiB, close to
 * what is written, and memory becomes resident only as blocks are used.
 * Prefaulting the pool at load instead would make the worker resident at
 * the whole budget from the start and cost seconds of load per GiB on a VM.
 */
#ifndef LLM_HUGE_PAGES_H
#define LLM_HUGE_PAGES_H

#include <stddef.h>

/* Zeroed memory of n bytes, 2 MiB-aligned, advised for huge pages; NULL on OOM. */
void	   *llm_huge_alloc(size_t n);

/* Release memory from llm_huge_alloc (n as passed to it); NULL is ignored. */
void		llm_huge_free(void *p, size_t n);

/*
 * Zeroed memory of n bytes on base pages: aligned to the page size, advised
 * never to be huge (MADV_NOHUGEPAGE, which also holds under THP "always"),
 * not populated (pages become resident on first touch); NULL for n = 0 or
 * on OOM.
 */
void	   *llm_base_pages_alloc(size_t n);

/* Release memory from llm_base_pages_alloc (n as passed to it); NULL is ignored. */
void		llm_base_pages_free(void *p, size_t n);

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
