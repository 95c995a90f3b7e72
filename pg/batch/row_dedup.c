/*
 * row_dedup.c — the row-by-row path's shared calls (batch_dedup.h,
 * llm_row_shared_run): calls the LLM Batch node does not batch (a function
 * scan run per outer row, a PL/pgSQL expression, a target list the rewrite
 * leaves alone) share one request per call site within the current
 * top-level statement, with the node's key and rules.
 *
 * A call site is an FmgrInfo: the executor's data of one function call in
 * one expression, living in its fn_mcxt (the query's memory, or longer for
 * a PL/pgSQL expression).  Its table is a child context of fn_mcxt, so it
 * goes with the call site; a reset callback takes it out of the list.  It
 * also belongs to the top-level statement that was running when it was
 * made (its start timestamp and the transaction's local id): the first call
 * of another statement empties it, and so two runs of one query, or two
 * loop iterations of a PL/pgSQL function's statements, are not merged
 * beyond what one statement asked.  Memory per table bounded by work_mem;
 * past it, calls are no longer shared.  Backend-local, no locking.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "batch_dedup.h"
#include "batch_scan.h"
#include "common/progress.h"
#include "common/registry.h"

typedef struct RowSite
{
	FmgrInfo   *flinfo;
	BatchDedup *table;
	TimestampTz statement;
	LocalTransactionId lxid;
	MemoryContextCallback gone;
	struct RowSite *next;
} RowSite;

static RowSite *sites = NULL;	/* in TopMemoryContext */

/* The table's memory went (fn_mcxt reset or deleted): forget the site. */
static void
site_gone(void *arg)
{
	RowSite   **p = &sites;

	while (*p != NULL && *p != arg)
		p = &(*p)->next;
	if (*p != NULL)
	{
		RowSite    *s = *p;

		*p = s->next;
		pfree(s);
	}
}

/* A table for flinfo in this statement: its own, emptied if another statement's. */
static BatchDedup *
site_table(FmgrInfo *flinfo)
{
	TimestampTz stmt = GetCurrentStatementStartTimestamp();
	RowSite    *s;

	for (s = sites; s != NULL; s = s->next)
		if (s->flinfo == flinfo)
			break;
	if (s != NULL && (s->statement != stmt || s->lxid != MyProc->lxid))
	{
		/* deleting the table's context runs site_gone, which frees s */
		MemoryContextDelete(s->table->cxt);
		s = NULL;
	}
	if (s == NULL)
	{
		s = MemoryContextAllocZero(TopMemoryContext, sizeof(RowSite));
		s->flinfo = flinfo;
		s->table = llm_dedup_create(flinfo->fn_mcxt, (Size) work_mem * 1024);
		s->statement = stmt;
		s->lxid = MyProc->lxid;
		s->gone.func = site_gone;
		s->gone.arg = s;
		MemoryContextRegisterResetCallback(s->table->cxt, &s->gone);
		s->next = sites;
		sites = s;
	}
	return s->table;
}

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
	d = site_table(flinfo);
	c = llm_dedup_find(d, key, key_len, hash);
	if (c != NULL && c->result != NULL)
	{
		LlmRoleUsage saved = {0};

		/* an identical call of this site ran in this statement: its answer (each row its own on_error) */
		pfree(key);
		saved.calls_shared = 1;
		llm_progress_note_saved(&saved);
		llm_stats_note_saved(&saved);
		return c->result;
	}
	res = run_one(req, d->full ? CurrentMemoryContext : d->cxt);
	c = llm_dedup_add(d, key, key_len, hash, 0);
	if (c != NULL)
		c->result = res;
	pfree(key);
	return res;
}
