/*
 * test_kv_copy.c — the CPU backend's copy_blocks (backend.h): after K/V
 * rows are stored by rope_store_kv into scattered blocks of a 3-layer
 * cache, copying blocks leaves every layer's K and V arrays byte for byte
 * equal to a reference made here by memcpy of the same blocks (the copied
 * blocks equal their sources, nothing else changes), for F16 and Q8_0
 * rows, with one KV group and with a local group (a local-group copy
 * touches only the local layer, a global one only the others).  Bad calls
 * (no kv_init, an unknown or missing group, ids out of range, a
 * destination that is also a source or repeated) fail with a message and
 * copy nothing.
 */
#include "unit.h"
#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/quant.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum
{
	N_LAYERS = 3,
	N_HEADS = 4,
	N_KV = 2,
	HD = 64,
	BS = 16,
	N_BLOCKS = 8,
	N_LOCAL = 6,
	N_TOK = 40					/* 2.5 blocks */
};

static uint64_t rng_state = 12345;

static float
rnd(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (float) ((double) (z >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static const uint8_t layer_local[N_LAYERS] = {0, 1, 0};

static size_t
block_bytes(int dtype)
{
	return (size_t) BS * N_KV * llm_kv_row_bytes(dtype, HD);
}

static size_t
layer_bytes(int dtype, bool local, int l)
{
	return (size_t) (local && layer_local[l] ? N_LOCAL : N_BLOCKS) * block_bytes(dtype);
}

/* Every layer's K then V array, concatenated, into out (the sizes of layer_bytes). */
static void
snapshot(llm_backend *b, int dtype, bool local, uint8_t *out)
{
	for (int l = 0; l < N_LAYERS; l++)
		for (int v = 0; v < 2; v++)
		{
			memcpy(out, llm_backend_cpu_kv(b, l, v), layer_bytes(dtype, local, l));
			out += layer_bytes(dtype, local, l);
		}
}

/* The reference copy: blocks src[i] -> dst[i] in the layers of group, on a snapshot. */
static void
ref_copy(uint8_t *snap, int dtype, bool local, int group, const int32_t *src, const int32_t *dst, int n)
{
	size_t		bb = block_bytes(dtype);

	for (int l = 0; l < N_LAYERS; l++)
	{
		bool		in = (local && layer_local[l]) == (group == LLM_KV_GROUP_LOCAL);

		for (int v = 0; v < 2; v++)
		{
			if (in)
				for (int i = 0; i < n; i++)
					memcpy(snap + (size_t) dst[i] * bb, snap + (size_t) src[i] * bb, bb);
			snap += layer_bytes(dtype, local, l);
		}
	}
}

/* One prefill step of N_TOK random tokens at the block tables' slots, every layer's K/V stored. */
static int
fill(llm_backend *b, bool local, const int32_t *bt, const int32_t *lbt)
{
	int32_t		tok[N_TOK],
				pos[N_TOK],
				slot[N_TOK],
				lslot[N_TOK],
				ss[2] = {0, N_TOK},
				kvl[1] = {N_TOK};
	float	   *q = malloc(sizeof(float) * N_TOK * N_HEADS * HD),
			   *k = malloc(sizeof(float) * N_TOK * N_KV * HD),
			   *v = malloc(sizeof(float) * N_TOK * N_KV * HD);
	llm_step_desc d;
	int			rc = 0;

	for (int i = 0; i < N_TOK; i++)
	{
		tok[i] = 0;
		pos[i] = i;
		slot[i] = bt[i / BS] * BS + i % BS;
		lslot[i] = lbt[i / BS] * BS + i % BS;
	}
	d = (llm_step_desc) {N_TOK, 1, tok, pos, slot, ss, kvl, bt, 3, NULL, 0, NULL,
						 local ? lslot : NULL, local ? lbt : NULL, NULL};
	if (b->ops->begin_step(b, &d) != 0)
		rc = -1;
	for (int l = 0; l < N_LAYERS && rc == 0; l++)
	{
		for (int i = 0; i < N_TOK * N_HEADS * HD; i++)
			q[i] = rnd();
		for (int i = 0; i < N_TOK * N_KV * HD; i++)
		{
			k[i] = rnd();
			v[i] = rnd();
		}
		if (b->ops->rope_store_kv(b, l, q, k, v, N_HEADS, 10000.0f) != 0)
			rc = -1;
	}
	if (rc != 0)
		printf("# fill: %s\n", b->ops->last_error(b));
	free(q);
	free(k);
	free(v);
	return rc;
}

static void
test_copy(int dtype, bool local)
{
	const char *name = dtype == LLM_KV_Q8_0 ? "q8_0" : "f16";
	const char *groups = local ? "with a local group" : "one group";
	char		err[256];
	llm_backend *b = llm_backend_cpu_create(1, err, sizeof(err));
	llm_kv_geometry g = {N_LAYERS, N_KV, HD, BS, N_BLOCKS, dtype, local ? layer_local : NULL,
						 local ? N_LOCAL : 0, local ? 32 : 0};
	size_t		total = 0;
	uint8_t    *ref,
			   *got,
			   *before;
	static const int32_t bt[3] = {5, 2, 7},
				lbt[3] = {4, 1, 3};

	if (!CHECK(b != NULL, "cpu backend: %s", b ? "" : err))
		return;
	{
		int32_t		s0 = 0,
					d0 = 1;

		CHECK(b->ops->copy_blocks != NULL && b->ops->copy_blocks(b, LLM_KV_GROUP_GLOBAL, &s0, &d0, 1) != 0,
			  "copy_blocks before kv_init fails: %s", b->ops->last_error(b));
	}
	if (!CHECK(b->ops->kv_init(b, &g) == 0, "%s, %s: kv_init", name, groups))
	{
		b->ops->destroy(b);
		return;
	}
	for (int l = 0; l < N_LAYERS; l++)
		total += 2 * layer_bytes(dtype, local, l);
	ref = malloc(total);
	got = malloc(total);
	before = malloc(total);
	if (!CHECK(fill(b, local, bt, local ? lbt : bt) == 0, "%s, %s: %d tokens stored in blocks 5, 2, 7%s",
			   name, groups, N_TOK, local ? " (local 4, 1, 3)" : ""))
		goto done;
	snapshot(b, dtype, local, before);
	memcpy(ref, before, total);

	/* the full block 5 and the partly filled last block 7 into fresh blocks 1 and 3 */
	{
		const int32_t src[2] = {5, 7},
					dst[2] = {1, 3};

		ref_copy(ref, dtype, local, LLM_KV_GROUP_GLOBAL, src, dst, 2);
		CHECK(memcmp(ref, before, total) != 0, "%s, %s: the reference copy changes the cache (the check can fail)",
			  name, groups);
		CHECK(b->ops->copy_blocks(b, LLM_KV_GROUP_GLOBAL, src, dst, 2) == 0, "%s, %s: copy 5 -> 1, 7 -> 3: %s",
			  name, groups, b->ops->last_error(b));
		snapshot(b, dtype, local, got);
		CHECK(memcmp(got, ref, total) == 0,
			  "%s, %s: every layer's K and V equal the reference: blocks 1 and 3 copies of 5 and 7 in the "
			  "global layers, nothing else changed", name, groups);
	}
	if (local)
	{
		const int32_t src[2] = {3, 4},
					dst[2] = {0, 5};

		ref_copy(ref, dtype, local, LLM_KV_GROUP_LOCAL, src, dst, 2);
		CHECK(b->ops->copy_blocks(b, LLM_KV_GROUP_LOCAL, src, dst, 2) == 0, "%s: local copy 3 -> 0, 4 -> 5: %s",
			  name, b->ops->last_error(b));
		snapshot(b, dtype, local, got);
		CHECK(memcmp(got, ref, total) == 0,
			  "%s: local-group copy: only the local layer's blocks 0 and 5 changed, to copies of 3 and 4", name);
	}
	else
	{
		const int32_t s0 = 0,
					d0 = 1;

		CHECK(b->ops->copy_blocks(b, LLM_KV_GROUP_LOCAL, &s0, &d0, 1) != 0,
			  "%s: a local-group copy without a local group fails: %s", name, b->ops->last_error(b));
	}
	/* bad calls: an error, nothing copied (the valid first pair neither) */
	{
		const int32_t ok_src[2] = {2, N_BLOCKS},
					ok_dst[2] = {6, 4};
		const int32_t same_src[2] = {2, 6},
					same_dst[2] = {6, 4};
		const int32_t twice_src[2] = {2, 5},
					twice_dst[2] = {6, 6};

		CHECK(b->ops->copy_blocks(b, LLM_KV_GROUP_GLOBAL, ok_src, ok_dst, 2) != 0,
			  "%s, %s: a source out of range fails: %s", name, groups, b->ops->last_error(b));
		CHECK(b->ops->copy_blocks(b, LLM_KV_GROUP_GLOBAL, same_src, same_dst, 2) != 0,
			  "%s, %s: a destination that is also a source fails: %s", name, groups, b->ops->last_error(b));
		CHECK(b->ops->copy_blocks(b, LLM_KV_GROUP_GLOBAL, twice_src, twice_dst, 2) != 0,
			  "%s, %s: a destination named twice fails: %s", name, groups, b->ops->last_error(b));
		CHECK(b->ops->copy_blocks(b, 2, ok_src, ok_dst, 1) != 0, "%s, %s: an unknown group fails: %s", name,
			  groups, b->ops->last_error(b));
		CHECK(b->ops->copy_blocks(b, LLM_KV_GROUP_GLOBAL, NULL, NULL, 0) == 0, "%s, %s: n 0 does nothing", name,
			  groups);
		snapshot(b, dtype, local, got);
		CHECK(memcmp(got, ref, total) == 0, "%s, %s: after the failed calls the cache is unchanged", name, groups);
	}
done:
	free(ref);
	free(got);
	free(before);
	b->ops->destroy(b);
}

int
main(void)
{
	test_copy(LLM_KV_F16, false);
	test_copy(LLM_KV_Q8_0, false);
	test_copy(LLM_KV_F16, true);
	test_copy(LLM_KV_Q8_0, true);
	return unit_done();
}
