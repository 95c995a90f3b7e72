/*
 * kv_block_pool.h — the paged KV cache's block allocator and prefix cache.
 *
 * Blocks are indices 0..n_blocks-1 into the backend's KV arrays
 * (backend.h).  Each has a reference count; blocks with count 0 sit on one
 * intrusive LRU free list (least recently released first).  A full block can
 * be registered in the prefix cache under a chained hash of (parent hash,
 * its block_size token ids, how many of them are prompt rows); it then stays
 * reusable while unreferenced and is
 * evicted — removed from the hash table, so its old hash never matches again
 * — only when allocation takes it from the free list.  Lookups verify the
 * token ids, the prompt-row count and the parent block identity, never
 * trusting the hash alone.
 *
 * The prompt-row count is part of a block's identity because the CPU backend
 * computes generated-token (decode) rows in llama.cpp's one-token order and
 * prompt rows in the batched order: the same token ids at the same positions
 * give K/V that may differ in the last bits depending on which rows were
 * prompt, so a block is only reused where recomputing it would have produced
 * the same rows.
 *
 * Design follows vLLM's automatic prefix caching (vllm/v1/core/block_pool.py,
 * kv_cache_utils.py) and PagedAttention (Kwon et al., SOSP 2023).  Not thread-safe.
 */
#ifndef LLM_KV_BLOCK_POOL_H
#define LLM_KV_BLOCK_POOL_H

#include <stdint.h>
#include <stdbool.h>

typedef struct llm_block_pool llm_block_pool;

/* Pool of n_blocks blocks of block_size tokens; NULL on out of memory. */
llm_block_pool *llm_block_pool_create(int32_t n_blocks, int32_t block_size);
void		llm_block_pool_destroy(llm_block_pool *p);

int32_t		llm_block_pool_n_blocks(const llm_block_pool *p);
int32_t		llm_block_pool_block_size(const llm_block_pool *p);
/* Blocks with reference count 0 (allocatable, cached or not). */
int32_t		llm_block_pool_n_free(const llm_block_pool *p);
/* Blocks with count 0 that still hold a registered prefix. */
int32_t		llm_block_pool_n_cached_free(const llm_block_pool *p);

/*
 * Take the least recently released free block (evicting its cached prefix,
 * if any); returns its id with reference count 1, or -1 when none is free.
 */
int32_t		llm_block_alloc(llm_block_pool *p);
void		llm_block_retain(llm_block_pool *p, int32_t id);
/* Drop one reference; at 0 the block goes to the tail of the free list. */
void		llm_block_release(llm_block_pool *p, int32_t id);
int32_t		llm_block_refcount(const llm_block_pool *p, int32_t id);

/*
 * Chained block hash: h = H(parent_hash, prompt_rows, tokens[0..block_size)),
 * prompt_rows in [0, block_size] being how many leading tokens of the block
 * are prompt (the rest were generated).  The first block's parent_hash is the
 * caller's salt (model identity mixed with the isolation key).
 */
uint64_t	llm_block_hash(uint64_t parent_hash, const int32_t *tokens, int32_t block_size,
						   int32_t prompt_rows);

/* Salt of a sequence's first block: model identity mixed with an isolation key. */
uint64_t	llm_prefix_salt(uint64_t model_identity, uint64_t cache_salt);

/*
 * Prefix-cache lookup of the block following parent_id (-1 for the first
 * block) whose tokens are tokens[0..block_size), prompt-row count prompt_rows
 * and hash is hash.  On a verified hit the block is retained (count + 1) and
 * its id returned; else -1.
 */
int32_t		llm_block_lookup(llm_block_pool *p, uint64_t hash, int32_t parent_id,
							 const int32_t *tokens, int32_t prompt_rows);

/*
 * Register full block id, held by the caller, as holding tokens (prompt_rows
 * of them prompt) after parent_id with hash.  Returns the block the caller
 * should keep in its table: id itself (now registered, or already so), or —
 * when an equal block is already registered and id is private to the caller
 * (count 1) — that block, retained for the caller, with id released.  The
 * second case makes requests that prefilled the same prefix concurrently
 * converge on one copy, so later requests can follow their chain.
 */
int32_t		llm_block_register(llm_block_pool *p, int32_t id, uint64_t hash, int32_t parent_id,
							   const int32_t *tokens, int32_t prompt_rows);

/*
 * Anchored entries: a pool whose blocks hang off another pool's chain (the
 * sliding-window layers' pool, kv_block_pool groups in scheduler.h).  The
 * block's identity is (hash, tokens, prompt rows, anchor), the anchor being
 * a block of the other pool and that block's generation there
 * (llm_block_generation), so an entry stops matching once its anchor is
 * evicted and reused.  Lookup retains like llm_block_lookup; probe only
 * tells whether lookup would hit, changing nothing (not even LRU order).
 */
uint32_t	llm_block_generation(const llm_block_pool *p, int32_t id);
int32_t		llm_block_lookup_anchored(llm_block_pool *p, uint64_t hash, int32_t anchor_id,
									  uint32_t anchor_gen, const int32_t *tokens, int32_t prompt_rows);
bool		llm_block_probe_anchored(const llm_block_pool *p, uint64_t hash, int32_t anchor_id,
									 uint32_t anchor_gen, const int32_t *tokens, int32_t prompt_rows);
int32_t		llm_block_register_anchored(llm_block_pool *p, int32_t id, uint64_t hash, int32_t anchor_id,
										uint32_t anchor_gen, const int32_t *tokens, int32_t prompt_rows);

/* Internal-consistency check for tests: 0 if fine, else -1 with a message. */
int			llm_block_pool_check(const llm_block_pool *p, char *err, int errlen);

#endif
