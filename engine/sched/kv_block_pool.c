/* kv_block_pool.c — see kv_block_pool.h. */
#include "kv_block_pool.h"
#include "engine/util/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL (-1)

struct llm_block_pool
{
	int32_t		n_blocks;
	int32_t		block_size;
	int32_t    *ref;
	/* intrusive doubly linked free list (LRU order: head = oldest) */
	int32_t    *prev, *next;
	int32_t		head, tail, n_free;
	/* prefix cache state per block */
	bool	   *registered;
	uint64_t   *hash;
	int32_t    *parent;			/* parent block id at registration */
	int32_t    *prompt_rows;	/* leading prompt tokens of the block (rest generated) */
	uint32_t   *parent_gen;		/* parent's generation at registration */
	uint32_t   *gen;			/* bumped each time the block is reallocated */
	int32_t    *tokens;			/* [n_blocks][block_size] */
	int32_t		n_cached_free;
	/* open-addressing hash table: hash -> block id; tombstones = -2 */
	int32_t    *table;
	uint32_t	table_mask;
};

uint64_t
llm_block_hash(uint64_t parent_hash, const int32_t *tokens, int32_t block_size, int32_t prompt_rows)
{
	uint64_t	h = llm_mix64(parent_hash ^ 0x9e3779b97f4a7c15ULL);

	h = llm_mix64(h ^ ((uint64_t) (uint32_t) prompt_rows << 32) ^ (uint64_t) (uint32_t) block_size);

	for (int32_t i = 0; i < block_size; i++)
		h = llm_mix64(h ^ ((uint64_t) (uint32_t) tokens[i] + 0x9e3779b97f4a7c15ULL * (uint64_t) (i + 1)));
	return h;
}

uint64_t
llm_prefix_salt(uint64_t model_identity, uint64_t cache_salt)
{
	/* two rounds so neither input can cancel the other by xor */
	return llm_mix64(llm_mix64(model_identity ^ 0x6a09e667f3bcc909ULL) ^ cache_salt);
}

llm_block_pool *
llm_block_pool_create(int32_t n_blocks, int32_t block_size)
{
	llm_block_pool *p;
	uint32_t	tsize = 16;

	if (n_blocks <= 0 || block_size <= 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	while (tsize < (uint32_t) n_blocks * 2)
		tsize <<= 1;
	p->n_blocks = n_blocks;
	p->block_size = block_size;
	p->ref = calloc(n_blocks, sizeof(int32_t));
	p->prev = malloc(n_blocks * sizeof(int32_t));
	p->next = malloc(n_blocks * sizeof(int32_t));
	p->registered = calloc(n_blocks, sizeof(bool));
	p->hash = calloc(n_blocks, sizeof(uint64_t));
	p->parent = calloc(n_blocks, sizeof(int32_t));
	p->prompt_rows = calloc(n_blocks, sizeof(int32_t));
	p->parent_gen = calloc(n_blocks, sizeof(uint32_t));
	p->gen = calloc(n_blocks, sizeof(uint32_t));
	p->tokens = calloc((size_t) n_blocks * block_size, sizeof(int32_t));
	p->table = malloc(tsize * sizeof(int32_t));
	if (!p->ref || !p->prev || !p->next || !p->registered || !p->hash || !p->parent ||
		!p->prompt_rows || !p->parent_gen || !p->gen || !p->tokens || !p->table)
	{
		llm_block_pool_destroy(p);
		return NULL;
	}
	p->table_mask = tsize - 1;
	for (uint32_t i = 0; i < tsize; i++)
		p->table[i] = NIL;
	for (int32_t i = 0; i < n_blocks; i++)
	{
		p->prev[i] = i - 1;
		p->next[i] = (i + 1 < n_blocks) ? i + 1 : NIL;
	}
	p->head = 0;
	p->tail = n_blocks - 1;
	p->n_free = n_blocks;
	return p;
}

void
llm_block_pool_destroy(llm_block_pool *p)
{
	if (p == NULL)
		return;
	free(p->ref);
	free(p->prev);
	free(p->next);
	free(p->registered);
	free(p->hash);
	free(p->parent);
	free(p->prompt_rows);
	free(p->parent_gen);
	free(p->gen);
	free(p->tokens);
	free(p->table);
	free(p);
}

int32_t
llm_block_pool_n_blocks(const llm_block_pool *p)
{
	return p->n_blocks;
}

int32_t
llm_block_pool_block_size(const llm_block_pool *p)
{
	return p->block_size;
}

int32_t
llm_block_pool_n_free(const llm_block_pool *p)
{
	return p->n_free;
}

int32_t
llm_block_pool_n_cached_free(const llm_block_pool *p)
{
	return p->n_cached_free;
}

int32_t
llm_block_refcount(const llm_block_pool *p, int32_t id)
{
	return (id >= 0 && id < p->n_blocks) ? p->ref[id] : -1;
}

static void
list_remove(llm_block_pool *p, int32_t id)
{
	if (p->prev[id] != NIL)
		p->next[p->prev[id]] = p->next[id];
	else
		p->head = p->next[id];
	if (p->next[id] != NIL)
		p->prev[p->next[id]] = p->prev[id];
	else
		p->tail = p->prev[id];
	p->prev[id] = p->next[id] = NIL;
	p->n_free--;
	if (p->registered[id])
		p->n_cached_free--;
}

static void
list_append(llm_block_pool *p, int32_t id)
{
	p->prev[id] = p->tail;
	p->next[id] = NIL;
	if (p->tail != NIL)
		p->next[p->tail] = id;
	else
		p->head = id;
	p->tail = id;
	p->n_free++;
	if (p->registered[id])
		p->n_cached_free++;
}

/* Slot of block id in the table, or of the first empty slot for hash. */
static uint32_t
table_find_slot(const llm_block_pool *p, uint64_t hash, int32_t id)
{
	uint32_t	i = (uint32_t) hash & p->table_mask;

	for (;;)
	{
		int32_t		b = p->table[i];

		if (b == NIL || b == id)
			return i;
		i = (i + 1) & p->table_mask;
	}
}

static void
table_remove(llm_block_pool *p, int32_t id)
{
	uint32_t	i = table_find_slot(p, p->hash[id], id);
	uint32_t	j;

	if (p->table[i] != id)
		return;
	/* backward-shift deletion keeps probe chains intact without tombstones */
	p->table[i] = NIL;
	j = i;
	for (;;)
	{
		uint32_t	home;
		int32_t		b;

		j = (j + 1) & p->table_mask;
		b = p->table[j];
		if (b == NIL)
			break;
		home = (uint32_t) p->hash[b] & p->table_mask;
		/* move b into the hole at i if its home is not in (i, j] cyclically */
		if (((j - home) & p->table_mask) >= ((j - i) & p->table_mask))
		{
			p->table[i] = b;
			p->table[j] = NIL;
			i = j;
		}
	}
}

int32_t
llm_block_alloc(llm_block_pool *p)
{
	int32_t		id = p->head;

	if (id == NIL)
		return -1;
	list_remove(p, id);
	if (p->registered[id])
	{
		/* evict: the old hash must never match again */
		table_remove(p, id);
		p->registered[id] = false;
	}
	p->gen[id]++;
	p->ref[id] = 1;
	return id;
}

void
llm_block_retain(llm_block_pool *p, int32_t id)
{
	if (p->ref[id] == 0)
		list_remove(p, id);
	p->ref[id]++;
}

void
llm_block_release(llm_block_pool *p, int32_t id)
{
	if (id < 0 || id >= p->n_blocks || p->ref[id] <= 0)
		return;
	if (--p->ref[id] == 0)
		list_append(p, id);
}

uint32_t
llm_block_generation(const llm_block_pool *p, int32_t id)
{
	return (id >= 0 && id < p->n_blocks) ? p->gen[id] : 0;
}

/*
 * Registered block b holds exactly this content after this parent (hash
 * alone is never trusted); the parent is identified by its id and its
 * generation at registration.
 */
static bool
block_matches(const llm_block_pool *p, int32_t b, uint64_t hash, int32_t parent_id, uint32_t parent_gen,
			  const int32_t *tokens, int32_t prompt_rows)
{
	return p->hash[b] == hash && p->parent[b] == parent_id &&
		p->prompt_rows[b] == prompt_rows &&
		(parent_id < 0 || p->parent_gen[b] == parent_gen) &&
		memcmp(&p->tokens[(size_t) b * p->block_size], tokens,
			   (size_t) p->block_size * sizeof(int32_t)) == 0;
}

/* The registered block matching this content, or NIL. */
static int32_t
find_block(const llm_block_pool *p, uint64_t hash, int32_t parent_id, uint32_t parent_gen,
		   const int32_t *tokens, int32_t prompt_rows)
{
	for (uint32_t i = (uint32_t) hash & p->table_mask; p->table[i] != NIL; i = (i + 1) & p->table_mask)
		if (block_matches(p, p->table[i], hash, parent_id, parent_gen, tokens, prompt_rows))
			return p->table[i];
	return NIL;
}

int32_t
llm_block_lookup(llm_block_pool *p, uint64_t hash, int32_t parent_id, const int32_t *tokens,
				 int32_t prompt_rows)
{
	if (parent_id >= p->n_blocks)
		return -1;
	return llm_block_lookup_anchored(p, hash, parent_id, parent_id >= 0 ? p->gen[parent_id] : 0,
									 tokens, prompt_rows);
}

int32_t
llm_block_lookup_anchored(llm_block_pool *p, uint64_t hash, int32_t anchor_id, uint32_t anchor_gen,
						  const int32_t *tokens, int32_t prompt_rows)
{
	int32_t		b = find_block(p, hash, anchor_id, anchor_gen, tokens, prompt_rows);

	if (b != NIL)
		llm_block_retain(p, b);
	return b;
}

bool
llm_block_probe_anchored(const llm_block_pool *p, uint64_t hash, int32_t anchor_id, uint32_t anchor_gen,
						 const int32_t *tokens, int32_t prompt_rows)
{
	return find_block(p, hash, anchor_id, anchor_gen, tokens, prompt_rows) != NIL;
}

int32_t
llm_block_register(llm_block_pool *p, int32_t id, uint64_t hash, int32_t parent_id,
				   const int32_t *tokens, int32_t prompt_rows)
{
	if (parent_id >= p->n_blocks)
		return id;
	return llm_block_register_anchored(p, id, hash, parent_id, parent_id >= 0 ? p->gen[parent_id] : 0,
									   tokens, prompt_rows);
}

int32_t
llm_block_register_anchored(llm_block_pool *p, int32_t id, uint64_t hash, int32_t anchor_id,
							uint32_t anchor_gen, const int32_t *tokens, int32_t prompt_rows)
{
	uint32_t	i;

	if (id < 0 || id >= p->n_blocks || p->registered[id] || p->ref[id] <= 0)
		return id;
	for (i = (uint32_t) hash & p->table_mask; p->table[i] != NIL; i = (i + 1) & p->table_mask)
	{
		int32_t		b = p->table[i];

		if (block_matches(p, b, hash, anchor_id, anchor_gen, tokens, prompt_rows))
		{
			/* an identical block is cached: share it, drop the private copy */
			if (p->ref[id] != 1)
				return id;
			llm_block_retain(p, b);
			llm_block_release(p, id);
			return b;
		}
	}
	p->registered[id] = true;
	p->hash[id] = hash;
	p->parent[id] = anchor_id;
	p->prompt_rows[id] = prompt_rows;
	p->parent_gen[id] = anchor_id >= 0 ? anchor_gen : 0;
	memcpy(&p->tokens[(size_t) id * p->block_size], tokens, (size_t) p->block_size * sizeof(int32_t));
	p->table[i] = id;
	return id;
}

int
llm_block_pool_check(const llm_block_pool *p, char *err, int errlen)
{
	int32_t		n = 0,
				cached = 0,
				prev = NIL;

	for (int32_t id = p->head; id != NIL; id = p->next[id])
	{
		if (p->ref[id] != 0 || p->prev[id] != prev || ++n > p->n_blocks)
		{
			snprintf(err, errlen, "free list corrupt at block %d", id);
			return -1;
		}
		cached += p->registered[id];
		prev = id;
	}
	if (n != p->n_free || prev != p->tail || cached != p->n_cached_free)
	{
		snprintf(err, errlen, "free list counts wrong: walked %d (cached %d), recorded %d (cached %d)",
				 n, cached, p->n_free, p->n_cached_free);
		return -1;
	}
	n = 0;
	for (int32_t id = 0; id < p->n_blocks; id++)
	{
		if (p->ref[id] < 0)
		{
			snprintf(err, errlen, "negative refcount on block %d", id);
			return -1;
		}
		n += (p->ref[id] == 0);
		if (p->registered[id] && p->table[table_find_slot(p, p->hash[id], id)] != id)
		{
			snprintf(err, errlen, "registered block %d missing from hash table", id);
			return -1;
		}
	}
	if (n != p->n_free)
	{
		snprintf(err, errlen, "%d blocks have refcount 0 but free list holds %d", n, p->n_free);
		return -1;
	}
	return 0;
}
