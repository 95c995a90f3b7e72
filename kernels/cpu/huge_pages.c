/*
 * huge_pages.c — see huge_pages.h.  mmap(2) + madvise(MADV_HUGEPAGE)
 * (Documentation/admin-guide/mm/transhuge.rst).
 */
#define _GNU_SOURCE
#include "huge_pages.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t) 2 << 20)
#define ARENA_CHUNK ((size_t) 32 << 20)

static size_t
round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

void *
llm_huge_alloc(size_t n)
{
	size_t		len,
				lead;
	uint8_t    *p;

	if (n == 0 || n > SIZE_MAX - 2 * HUGE_PAGE)
		return NULL;
	len = round_up(n, HUGE_PAGE);
	/* over-map by one huge page, then trim to a 2 MiB-aligned range */
	p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	lead = (HUGE_PAGE - ((uintptr_t) p & (HUGE_PAGE - 1))) & (HUGE_PAGE - 1);
	if (lead)
		munmap(p, lead);
	if (HUGE_PAGE - lead)
		munmap(p + lead + len, HUGE_PAGE - lead);
	p += lead;
#ifdef MADV_HUGEPAGE
	(void) madvise(p, len, MADV_HUGEPAGE);	/* advice only: 4 KiB pages still work */
#endif
	return p;
}

void
llm_huge_free(void *p, size_t n)
{
	if (p != NULL && n > 0)
		munmap(p, round_up(n, HUGE_PAGE));
}

static size_t
base_page(void)
{
	long		ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t) ps : 4096;
}

void *
llm_base_pages_alloc(size_t n)
{
	size_t		len;
	void	   *p;

	if (n == 0 || n > SIZE_MAX - base_page())
		return NULL;
	len = round_up(n, base_page());
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_NOHUGEPAGE
	(void) madvise(p, len, MADV_NOHUGEPAGE);	/* advice only: without it THP "always" would give huge pages */
#endif
	return p;
}

void
llm_base_pages_free(void *p, size_t n)
{
	if (p != NULL && n > 0)
		munmap(p, round_up(n, base_page()));
}

typedef struct arena_chunk
{
	struct arena_chunk *next;
	uint8_t    *base;
	size_t		size;
	size_t		used;
} arena_chunk;

struct llm_huge_arena
{
	arena_chunk *chunks;		/* newest first */
};

llm_huge_arena *
llm_huge_arena_create(void)
{
	return calloc(1, sizeof(llm_huge_arena));
}

void *
llm_huge_arena_alloc(llm_huge_arena *a, size_t n)
{
	arena_chunk *c;

	if (a == NULL || n == 0 || n > SIZE_MAX - ARENA_CHUNK)
		return NULL;
	n = round_up(n, 64);
	c = a->chunks;
	if (c == NULL || c->size - c->used < n)
	{
		/* large requests get a chunk of their own behind the current one */
		bool		own = n > ARENA_CHUNK / 4;
		size_t		size = own ? round_up(n, HUGE_PAGE) : ARENA_CHUNK;

		c = malloc(sizeof(arena_chunk));
		if (c == NULL)
			return NULL;
		c->base = llm_huge_alloc(size);
		if (c->base == NULL)
		{
			free(c);
			return NULL;
		}
		c->size = size;
		c->used = 0;
		if (own && a->chunks != NULL)
		{
			c->next = a->chunks->next;
			a->chunks->next = c;
		}
		else
		{
			c->next = a->chunks;
			a->chunks = c;
		}
	}
	c->used += n;
	return c->base + c->used - n;
}

void
llm_huge_arena_destroy(llm_huge_arena *a)
{
	if (a == NULL)
		return;
	while (a->chunks)
	{
		arena_chunk *c = a->chunks;

		a->chunks = c->next;
		llm_huge_free(c->base, c->size);
		free(c);
	}
	free(a);
}
