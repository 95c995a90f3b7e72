/*
 * batch_dedup.h — one LLM Batch node's table of the calls it sent, so that
 * rows whose request is identical and deterministic share one request and
 * its answer (docs/BATCH_SCAN.md, "Deduplication").
 *
 * The key of a call is the SUBMIT message the worker would receive for it
 * (channel/protocol.h, llm_wire_encode) with the backend's current role and
 * database and no request id: the model's alias, the prompt and system
 * message as given to the chat template (or the messages, tokens, raw
 * text), every sampling option, the grammar, continuations, pooling,
 * priority and cache salt — everything the worker's answer can depend on,
 * with every llm.* setting that shapes a request already applied by the
 * request builder.  A request that samples (temperature > 0) without a seed
 * has no key: it is never shared.
 *
 * Entries live in the table's memory context (a child of the executor's);
 * the table stops taking new entries once that context holds more than
 * limit bytes (work_mem), and entries are never removed, so a call's id
 * never changes under a row that shares it.  Backend-local, no locking.
 */
#ifndef LLM_BATCH_DEDUP_H
#define LLM_BATCH_DEDUP_H

#include "postgres.h"

#include "fmgr.h"

#include "channel/client.h"
#include "engine/request.h"
#include "engine/util/hash.h"

typedef struct BatchDedupCall
{
	uint64		id;				/* request in flight; 0 once taken or aborted */
	LlmResult  *result;			/* the finished request's result, once taken */
	int			refs;			/* rows waiting on it (not yet holding result) */
	bool		dead;			/* aborted before it finished: never shared again */
	uint64		hash;
	char	   *key;
	size_t		key_len;
} BatchDedupCall;

typedef struct BatchDedup
{
	MemoryContext cxt;			/* entries, keys, results */
	Size		limit;			/* bytes of cxt past which no entry is added */
	llm_hash_index index;		/* slots palloc'd in cxt */
	BatchDedupCall **calls;		/* each allocated alone: rows keep pointers to them */
	uint32		n_calls;
	uint32		cap_calls;
	bool		full;			/* the limit was reached */
} BatchDedup;

/* A table in a new child context of parent; limit in bytes. */
extern BatchDedup *llm_dedup_create(MemoryContext parent, Size limit);

/*
 * The key of req as this backend would submit it, in *key (palloc'd in
 * CurrentMemoryContext) and its FNV-1a 64 hash; false when req is never
 * shared (sampling without a seed).
 */
extern bool llm_dedup_key(const llm_request *req, char **key, size_t *key_len, uint64 *hash);

/* The call with this key, or NULL. */
extern BatchDedupCall *llm_dedup_find(BatchDedup *d, const char *key, size_t key_len, uint64 hash);

/*
 * Record request id under key (refs 1, no result); NULL when the table is
 * over its limit (the caller then keeps the request to itself).
 */
extern BatchDedupCall *llm_dedup_add(BatchDedup *d, const char *key, size_t key_len, uint64 hash,
									 uint64 id);

/*
 * The row-by-row path (calls evaluated one at a time, outside an LLM Batch
 * node): send req and wait for its result, or take the result of an
 * identical call the same call site (flinfo, the executor's per-expression
 * function data) already ran in this top-level statement (same key, same
 * rules; llm.dedup_calls off or flinfo NULL: never).  The result is
 * read-only: it may be the call site's shared copy, which lives until the
 * call site's memory goes, the statement or the transaction ends.  A
 * shared call is counted in calls_shared.
 */
extern LlmResult *llm_row_shared_run(FmgrInfo *flinfo, const llm_request *req);

#endif
