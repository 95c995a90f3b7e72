/*
 * row_dedup.c — the row-by-row path's shared calls (batch_dedup.h,
 * llm_row_shared_run): calls the LLM Batch node does not batch (a function
 * scan run per outer row, a PL/pgSQL expression, a target list the rewrite
 * leaves alone) use the current top-level statement's table with the
 * node's key and rules: they take the answer of an identical call any node
 * or call site of the statement sent, and leave theirs for the others.
 * Two runs of one query, or two loop iterations of a PL/pgSQL function,
 * within one top-level statement share; two statements do not.  A row
 * call waits for its answer before it returns, so it never holds an entry
 * in flight.  Backend-local, no locking.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"

#include "batch_dedup.h"
#include "batch_node.h"
#include "batch_scan.h"

/* Send req and wait for its result, taken into cxt. */
static LlmResult *
run_one(const llm_request *req, MemoryContext cxt)
{
	uint64		id = llm_submit(req);
	MemoryContext old;
	LlmResult  *res;

	llm_wait_request(id);
	old = MemoryContextSwitchTo(cxt);
	res = llm_take_result(id);
	MemoryContextSwitchTo(old);
	return res;
}

LlmResult *
llm_row_shared_run(FmgrInfo *flinfo, const llm_request *req)
{
	BatchDedup *d;
	BatchDedupCall *c;
	char	   *key;
	size_t		key_len;
	uint64		hash;
	LlmResult  *res;

	if (flinfo == NULL || !llm_dedup_calls || IsParallelWorker() ||
		!llm_dedup_key(req, &key, &key_len, &hash))
		return run_one(req, CurrentMemoryContext);
	d = llm_dedup_statement();
	c = llm_dedup_find(d, key, key_len, hash);
	if (c != NULL && llm_dedup_shareable(c))
	{
		/* finished, or a node's request still in flight: wait for it (each row its own on_error) */
		if (c->result == NULL)
		{
			llm_wait_request(c->id);
			llm_batch_take_shared(d, c, NULL);
		}
		pfree(key);
		llm_dedup_note_shared();
		return c->result;
	}
	res = run_one(req, d->full || c != NULL ? CurrentMemoryContext : d->cxt);
	/* an entry that cannot be shared (aborted, or another subtransaction's) keeps its key */
	if (c == NULL)
	{
		c = llm_dedup_add(d, key, key_len, hash, 0, NULL);
		if (c != NULL)
			c->result = res;
	}
	pfree(key);
	return res;
}
