/*
 * test_pages.c — the page-size contracts of kernels/cpu/huge_pages.h: what
 * each allocator returns (zeroed, aligned, the size rounding, NULL for 0
 * bytes), which advice the mapping carries (the VmFlags of its VMA in
 * /proc/self/smaps: "hg" MADV_HUGEPAGE, "nh" MADV_NOHUGEPAGE), that a base
 * page mapping is not populated until touched and never holds huge pages,
 * and that the CPU backend's KV cache lives on base pages.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/huge_pages.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB ((size_t) 1 << 20)

typedef struct vma_info
{
	bool		found;
	bool		hg,
				nh;				/* VmFlags */
	long		rss_kb,
				anon_huge_kb;
} vma_info;

/* The smaps entry of the mapping that contains p. */
static vma_info
vma_of(const void *p)
{
	vma_info	v = {0};
	FILE	   *f = fopen("/proc/self/smaps", "r");
	char		line[512];
	bool		in = false;
	uintptr_t	a = (uintptr_t) p;

	if (f == NULL)
		return v;
	while (fgets(line, sizeof(line), f))
	{
		unsigned long lo,
					hi;
		char		dash;

		if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-' && strchr(line, ':') != NULL &&
			strchr(line, ':') > strchr(line, ' '))
		{
			if (in)
				break;
			in = a >= lo && a < hi;
			v.found |= in;
			continue;
		}
		if (!in)
			continue;
		if (strncmp(line, "Rss:", 4) == 0)
			v.rss_kb = atol(line + 4);
		else if (strncmp(line, "AnonHugePages:", 14) == 0)
			v.anon_huge_kb = atol(line + 14);
		else if (strncmp(line, "VmFlags:", 8) == 0)
		{
			v.hg = strstr(line, " hg") != NULL;
			v.nh = strstr(line, " nh") != NULL;
		}
	}
	fclose(f);
	return v;
}

static bool
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void
test_huge_alloc(void)
{
	const size_t n = 3 * MiB + 123;
	uint8_t    *p = llm_huge_alloc(n);
	vma_info	v;

	CHECK(llm_huge_alloc(0) == NULL, "llm_huge_alloc(0) is NULL");
	CHECK(p != NULL, "llm_huge_alloc of %zu bytes", n);
	if (p == NULL)
		return;
	CHECK(((uintptr_t) p & (2 * MiB - 1)) == 0, "huge allocation is 2 MiB-aligned");
	CHECK(all_zero(p, n), "huge allocation is zeroed");
	v = vma_of(p);
#ifdef MADV_HUGEPAGE
	CHECK(v.found && v.hg && !v.nh, "huge allocation is advised MADV_HUGEPAGE (found %d hg %d nh %d)",
		  v.found, v.hg, v.nh);
#endif
	/* the whole rounded range is usable */
	memset(p, 0xA5, 4 * MiB);
	CHECK(p[4 * MiB - 1] == 0xA5, "huge allocation is rounded up to whole huge pages");
	llm_huge_free(p, n);
	llm_huge_free(NULL, n);
}

static void
test_base_pages_alloc(void)
{
	const long	ps = sysconf(_SC_PAGESIZE);
	const size_t n = 8 * MiB + 5;
	uint8_t    *p = llm_base_pages_alloc(n);
	vma_info	v;

	CHECK(llm_base_pages_alloc(0) == NULL, "llm_base_pages_alloc(0) is NULL");
	CHECK(p != NULL, "llm_base_pages_alloc of %zu bytes", n);
	if (p == NULL)
		return;
	CHECK(((uintptr_t) p & (uintptr_t) (ps - 1)) == 0, "base page allocation is aligned to the %ld-byte page", ps);
	v = vma_of(p);
	CHECK(v.found && v.rss_kb == 0, "base page allocation is not populated before the first touch (Rss %ld kB)",
		  v.rss_kb);
#ifdef MADV_NOHUGEPAGE
	CHECK(v.found && v.nh && !v.hg, "base page allocation is advised MADV_NOHUGEPAGE (found %d hg %d nh %d)",
		  v.found, v.hg, v.nh);
#endif
	/* one byte in the middle: resident memory grows by pages, not by the whole range or a huge page */
	p[4 * MiB + 17] = 1;
	v = vma_of(p);
	CHECK(v.rss_kb > 0 && (size_t) v.rss_kb * 1024 < 2 * MiB,
		  "one write makes about one page resident (Rss %ld kB)", v.rss_kb);
	p[4 * MiB + 17] = 0;
	CHECK(all_zero(p, n), "base page allocation is zeroed");
	memset(p, 0x5A, n);
	CHECK(p[n - 1] == 0x5A && p[(n + ps - 1) / ps * ps - 1] == 0, "base page allocation is rounded up to whole pages");
	v = vma_of(p);
	CHECK(v.found && v.anon_huge_kb == 0, "a fully written base page allocation holds no huge pages (%ld kB)",
		  v.anon_huge_kb);
	llm_base_pages_free(p, n);
	llm_base_pages_free(NULL, n);
}

/* Size and Rss of every mapping advised MADV_NOHUGEPAGE (adjacent ones may be merged into one VMA). */
static void
nohuge_totals(size_t *bytes, long *rss_kb)
{
	FILE	   *f = fopen("/proc/self/smaps", "r");
	char		line[512];
	size_t		len = 0;
	long		rss = 0;

	*bytes = 0;
	*rss_kb = 0;
	while (f && fgets(line, sizeof(line), f))
	{
		unsigned long lo,
					hi;
		char		dash;

		if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-' && strchr(line, ':') != NULL &&
			strchr(line, ':') > strchr(line, ' '))
		{
			len = hi - lo;
			rss = 0;
		}
		else if (strncmp(line, "Rss:", 4) == 0)
			rss = atol(line + 4);
		else if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " nh") != NULL)
		{
			*bytes += len;
			*rss_kb += rss;
		}
	}
	if (f)
		fclose(f);
}

/* The backend's KV arrays: base pages, not resident after kv_init, a few pages per stored token. */
static void
test_kv_cache_pages(void)
{
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(1, err, sizeof(err));
	/* 2 layers, 24 MiB per K or V array */
	llm_kv_geometry g = {.n_layers = 2, .n_kv_heads = 3, .head_dim = 64, .block_size = 16, .n_blocks = 4096,
		.kv_dtype = LLM_KV_F16};
	const size_t kv_bytes = (size_t) 2 * 2 * 4096 * 16 * 3 * 64 * 2;
	float		q[9 * 64],
				k[3 * 64],
				v[3 * 64];
	int32_t		id = 0,
				pos = 0,
				slot = 0,
				seq_start[2] = {0, 1},
				kv_len = 1,
				bt = 0;
	llm_step_desc d = {1, 1, &id, &pos, &slot, seq_start, &kv_len, &bt, 1, NULL, 0, NULL, NULL, NULL, NULL};
	size_t		nh0,
				nh1,
				nh2;
	long		rss0,
				rss1,
				rss2;

	CHECK(b != NULL, "CPU backend created (%s)", b ? "" : err);
	if (b == NULL)
		return;
	nohuge_totals(&nh0, &rss0);
	CHECK(b->ops->kv_init(b, &g) == 0, "kv_init of 2 layers x 4096 blocks");
	nohuge_totals(&nh1, &rss1);
	CHECK(nh1 - nh0 >= kv_bytes, "the KV arrays (%zu bytes) are base page mappings (%zu bytes advised nh)",
		  kv_bytes, nh1 - nh0);
	CHECK(rss1 == rss0, "the KV arrays are not resident after kv_init (%ld kB)", rss1 - rss0);
	for (int i = 0; i < 9 * 64; i++)
		q[i] = 0.01f * (float) (i % 17);
	for (int i = 0; i < 3 * 64; i++)
	{
		k[i] = 0.02f * (float) (i % 13);
		v[i] = 0.03f * (float) (i % 11);
	}
	CHECK(b->ops->begin_step(b, &d) == 0 && b->ops->rope_store_kv(b, 0, q, k, v, 9, 10000.0f) == 0 &&
		  b->ops->rope_store_kv(b, 1, q, k, v, 9, 10000.0f) == 0,
		  "one token's K/V stored in both layers");
	nohuge_totals(&nh2, &rss2);
	CHECK(rss2 > rss1 && rss2 - rss1 <= 64,
		  "one token's K/V makes a few base pages resident, not huge pages (%ld kB)", rss2 - rss1);
	b->ops->destroy(b);
}

int
main(void)
{
	test_huge_alloc();
	test_base_pages_alloc();
	test_kv_cache_pages();
	return unit_done();
}
