/*
 * stmt_dedup.c — the lifetime of the statement-wide tables of shared calls
 * (batch_dedup.h): one per top-level statement, found by the statement's
 * number and the transaction's local id, held by the LLM Batch nodes that
 * attached to it.
 *
 * A top-level statement is numbered as it starts: a utility statement the
 * client sent (PROCESS_UTILITY_TOPLEVEL: FETCH, EXECUTE, CALL, DO,
 * EXPLAIN, ...) or an executor started outside any executor run and any
 * utility statement (a query the client sent); with the statement start
 * timestamp, which alone would not do (the statements of one query string
 * share it), so that a call the planner evaluates before its statement's
 * executor starts is not taken for the previous statement's.
 *
 * The bookkeeping (StmtTable) lives in TopMemoryContext, apart from the
 * table's own context, because the two go in either order: at a
 * transaction's abort the executor's memory (which detaches its nodes) may
 * go before or after TopTransactionContext (which holds the tables).  A
 * table's context going clears its StmtTable's pointer; the last holder's
 * detach frees a StmtTable whose table went, or deletes a table that is no
 * longer its statement's.
 *
 * A subtransaction's abort marks every entry it (or a subtransaction begun
 * inside it) sent and that is still in flight dead: channel/client.h has
 * aborted those requests.  Its release moves those entries to its parent,
 * as channel/client.h moves their requests.  Backend-local, no locking.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "batch_dedup.h"
#include "pg/sql/on_error.h"

typedef struct StmtTable
{
	BatchDedup *table;			/* NULL once its memory went */
	uint64		statement;		/* statement_seq when it was made */
	TimestampTz start;			/* and the statement start timestamp */
	LocalTransactionId lxid;
	int			holders;		/* attached nodes whose memory has not gone */
	MemoryContextCallback gone;
	struct StmtTable *next;
} StmtTable;

typedef struct StmtHold
{
	StmtTable  *table;
	struct BatchScanState *owner;	/* compared, never dereferenced */
	const int  *owner_in_flight;	/* its count of requests in flight (batch_node.h) */
	MemoryContextCallback cb;
} StmtHold;

static StmtTable *tables = NULL;	/* newest first; the head may be the current statement's */
static bool subxact_callback_set = false;

static uint64 statement_seq = 0;	/* top-level statements started by this backend */
static int	utility_depth = 0;		/* utility statements running */
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* A query the client sent starts (not one a function or a utility statement runs). */
static void
dedup_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (llm_exec_nesting() == 0 && utility_depth == 0)
		statement_seq++;
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
dedup_ProcessUtility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					 ProcessUtilityContext context, ParamListInfo params,
					 QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (context == PROCESS_UTILITY_TOPLEVEL)
		statement_seq++;
	utility_depth++;
	PG_TRY();
	{
		if (prev_ProcessUtility)
			prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		utility_depth--;
	}
	PG_END_TRY();
}

void
llm_dedup_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = dedup_ExecutorStart;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = dedup_ProcessUtility;
}

static void
forget(StmtTable *t)
{
	StmtTable **p = &tables;

	while (*p != NULL && *p != t)
		p = &(*p)->next;
	if (*p != NULL)
		*p = t->next;
	pfree(t);
}

static bool
is_current(const StmtTable *t)
{
	return t == tables && t->table != NULL &&
		t->statement == statement_seq && t->start == GetCurrentStatementStartTimestamp() &&
		t->lxid == MyProc->lxid;
}

/* The table's context went (the transaction ended, or it was deleted below). */
static void
table_gone(void *arg)
{
	StmtTable  *t = arg;

	t->table = NULL;
	if (t->holders == 0)
		forget(t);
}

/* A holder's memory went. */
static void
hold_gone(void *arg)
{
	StmtHold   *h = arg;
	StmtTable  *t = h->table;

	/*
	 * Whoever takes a request the holder left in flight counts it.  A node
	 * that reached its end owns none (in_flight 0); the count lives in the
	 * memory going, whose own blocks are freed after its callbacks run.
	 */
	if (t->table != NULL && h->owner != NULL && *h->owner_in_flight > 0)
		(void) llm_dedup_disown(t->table, h->owner);
	if (--t->holders > 0)
		return;
	if (t->table == NULL)
		forget(t);
	else if (!is_current(t))
		MemoryContextDelete(t->table->cxt);	/* table_gone forgets t */
}

/* Mark the requests still in flight that an aborted subtransaction sent dead. */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (StmtTable *t = tables; t != NULL; t = t->next)
	{
		if (t->table == NULL)
			continue;
		for (uint32 i = 0; i < t->table->n_calls; i++)
		{
			BatchDedupCall *c = t->table->calls[i];

			/* subtransactions begun after mySubid and not aborted were inside it */
			if (c->id == 0 || c->result != NULL || c->subxid < mySubid)
				continue;
			if (event == SUBXACT_EVENT_COMMIT_SUB)
				c->subxid = parentSubid;	/* released: its requests are the parent's now */
			else
			{
				c->id = 0;
				c->dead = true;
			}
		}
	}
}

BatchDedup *
llm_dedup_statement(void)
{
	StmtTable  *t = tables;

	if (t != NULL && is_current(t))
		return t->table;
	if (!subxact_callback_set)
	{
		RegisterSubXactCallback(subxact_callback, NULL);
		subxact_callback_set = true;
	}
	/* the previous statement's table, if no node holds it, is not needed any more */
	if (t != NULL && t->holders == 0 && t->table != NULL)
		MemoryContextDelete(t->table->cxt);
	t = MemoryContextAllocZero(TopMemoryContext, sizeof(StmtTable));
	t->table = llm_dedup_create(TopTransactionContext, (Size) work_mem * 1024);
	t->statement = statement_seq;
	t->start = GetCurrentStatementStartTimestamp();
	t->lxid = MyProc->lxid;
	t->gone.func = table_gone;
	t->gone.arg = t;
	MemoryContextRegisterResetCallback(t->table->cxt, &t->gone);
	t->next = tables;
	tables = t;
	return t->table;
}

BatchDedup *
llm_dedup_statement_attach(struct BatchScanState *owner, const int *owner_in_flight)
{
	BatchDedup *d = llm_dedup_statement();
	StmtHold   *h = palloc(sizeof(StmtHold));

	h->table = tables;
	h->owner = owner;
	h->owner_in_flight = owner_in_flight;
	h->table->holders++;
	h->cb.func = hold_gone;
	h->cb.arg = h;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &h->cb);
	return d;
}
