/* hash.c — llm_hash_index's storage (hash.h). */
#include "hash.h"

#include <stdlib.h>

bool
llm_hash_index_init(llm_hash_index *x, uint64_t n_entries, uint64_t min_slots)
{
	uint64_t	cap = 1;

	while (cap < min_slots || cap < n_entries * 2)
		cap <<= 1;
	x->slots = calloc(cap, sizeof(uint32_t));
	x->mask = x->slots != NULL ? cap - 1 : 0;
	return x->slots != NULL;
}

void
llm_hash_index_free(llm_hash_index *x)
{
	free(x->slots);
	x->slots = NULL;
	x->mask = 0;
}

bool
llm_hash_index_grow(llm_hash_index *x, uint32_t n_ids, llm_hash_of hash_of, const void *ctx)
{
	uint64_t	mask = x->mask * 2 + 1;
	uint32_t   *slots = calloc(mask + 1, sizeof(uint32_t));

	if (slots == NULL)
		return false;
	for (uint32_t id = 0; id < n_ids; id++)
	{
		uint64_t	i = hash_of(ctx, id) & mask;

		while (slots[i] != 0)
			i = (i + 1) & mask;
		slots[i] = id + 1;
	}
	free(x->slots);
	x->slots = slots;
	x->mask = mask;
	return true;
}
