/*
 * batch_dedup.h — the table of the calls one top-level statement sent, so
 * that calls whose request is identical and deterministic share one
 * request and its answer: across the rows of an LLM Batch node, across the
 * statement's nodes and across its row-by-row call sites
 * (docs/BATCH_SCAN.md, "Deduplication").
 *
 * The key of a call is the SUBMIT message the worker would receive for it
 * (channel/protocol.h, llm_wire_encode) with the backend's current role and
 * database and no request id: the model's alias, the prompt and system
 * message as given to the chat template (or the messages, tokens, raw
 * text), every sampling option, the grammar, continuations, pooling and
 * cache salt — everything the worker's answer can depend on, with every
 * llm.* setting that shapes a request already applied by the request
 * builder.  Not the priority class, which only orders the worker's queue:
 * a shared request runs at its sender's class (an interactive row call may
 * wait on a node's batch-class request).  A request that samples (temperature > 0) without a seed
 * has no key: it is never shared.
 *
 * One table per top-level statement (counted as it starts: a statement
 * of a query string, a FETCH, a CALL with all it runs; and the
 * transaction's local id), in a child context of TopTransactionContext.
 * A node attaches to the table of the statement that starts it and keeps
 * it until its executor memory goes (a cursor's node keeps its own
 * statement's table while later statements get theirs); a table no node
 * holds goes when another statement's is made, or with the transaction.
 * The table stops taking new entries once its context holds more than
 * limit bytes (work_mem), and entries are never removed, so a call's entry
 * never changes under a row that shares it.
 *
 * Subtransactions: a request in flight is shared only with calls made at
 * the subtransaction that sent it or one begun inside it (channel/client.h aborts a
 * (sub)transaction's requests with it, so whoever shares one goes with it
 * too); a subtransaction's abort marks its requests still in flight dead,
 * its release makes them its parent's (as channel/client.h counts them).
 * A finished answer is plain memory and is shared everywhere.
 * Backend-local, no locking.
 */
#ifndef LLM_BATCH_DEDUP_H
#define LLM_BATCH_DEDUP_H

#include "postgres.h"

#include "fmgr.h"

#include "channel/client.h"
#include "engine/request.h"
#include "engine/util/hash.h"

struct BatchScanState;

typedef struct BatchDedupCall
{
	uint64		id;				/* request in flight; 0 once taken or aborted */
	LlmResult  *result;			/* the finished request's result, once taken */
	int			refs;			/* rows of any node waiting on it (not yet holding result) */
	bool		dead;			/* aborted before it finished: never shared again */
	struct BatchScanState *owner;	/* the node that sent it and counts it in flight;
									 * NULL: the row path's, or that node was done first */
	SubTransactionId subxid;	/* the subtransaction that sent it (its parent once released) */
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

/* Install the hooks that count top-level statements (_PG_init). */
extern void llm_dedup_init(void);

/* A table in a new child context of parent; limit in bytes. */
extern BatchDedup *llm_dedup_create(MemoryContext parent, Size limit);

/*
 * The current top-level statement's table (made on first use, limit
 * work_mem), held by the caller until CurrentMemoryContext is reset or
 * deleted (an LLM Batch node: its executor memory, which holds the node
 * and *owner_in_flight).  When that memory goes with *owner_in_flight > 0,
 * the entries owner still counts in flight lose their owner: a node whose
 * portal failed (an error inside a subtransaction while a cursor opened
 * outside it was fetching) goes without its end, and its requests at an
 * enclosing subtransaction stay shareable.
 */
extern BatchDedup *llm_dedup_statement_attach(struct BatchScanState *owner,
											  const int *owner_in_flight);

/* The current statement's table, for a use that ends before the statement does. */
extern BatchDedup *llm_dedup_statement(void);

/*
 * Whether a call may take c's answer now: not dead, and finished or sent
 * at the current subtransaction or an enclosing one.
 */
extern bool llm_dedup_shareable(const BatchDedupCall *c);

/*
 * The key of req as this backend would submit it, in *key (palloc'd in
 * CurrentMemoryContext) and its FNV-1a 64 hash; false when req is never
 * shared (sampling without a seed).
 */
extern bool llm_dedup_key(const llm_request *req, char **key, size_t *key_len, uint64 *hash);

/*
 * Count one call answered by another call's request, outside an LLM Batch
 * node (which counts its own at its end): in the statement's llm_progress
 * and the current role's llm_usage.
 */
extern void llm_dedup_note_shared(void);

/*
 * Leave owner's requests in flight to no one (owner NULL: whoever takes one
 * counts it); returns how many owner counted.
 */
extern uint32 llm_dedup_disown(BatchDedup *d, const struct BatchScanState *owner);

/* The call with this key, or NULL. */
extern BatchDedupCall *llm_dedup_find(BatchDedup *d, const char *key, size_t key_len, uint64 hash);

/*
 * Record request id, sent by owner (NULL: none) at the current
 * subtransaction, under key (refs 1, no result); NULL when the table is
 * over its limit (the caller then keeps the request to itself).
 */
extern BatchDedupCall *llm_dedup_add(BatchDedup *d, const char *key, size_t key_len, uint64 hash,
									 uint64 id, struct BatchScanState *owner);

/*
 * The row-by-row path (calls evaluated one at a time, outside an LLM Batch
 * node): send req and wait for its result, or take the answer of an
 * identical call this top-level statement sent (any node's or call site's,
 * finished or in flight; same key, same rules; llm.dedup_calls off or
 * flinfo NULL: never).  The result is read-only: it may be the statement's
 * shared copy, which lives until the next statement's table replaces it or
 * the transaction ends.  A shared call is counted in calls_shared.
 */
extern LlmResult *llm_row_shared_run(FmgrInfo *flinfo, const llm_request *req);

#endif
