/*
 * mailbox_unreturned.c — the ids of asynchronous requests that no
 * statement has returned yet (mailbox.h, llm_async_query_finished): a
 * request whose id was lost with a failed statement is dropped when its
 * (sub)transaction aborts.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"

#include "mailbox_internal.h"

/*
 * An id this backend's llm_submit gave out that no statement has returned
 * yet: the (sub)transaction level and the executor nesting level of the
 * call.  Once the query that made the call finishes (its executor's finish
 * at a lower nesting level), or the transaction commits, the id is
 * returned: it may be anywhere (a table, a variable, the client) and the
 * request lives on as documented.  An id still unreturned when its
 * (sub)transaction aborts was lost with the failed statement: its request
 * is dropped at once.
 */
typedef struct Unreturned
{
	uint64		id;
	int			xact_level;
	int			exec_level;
} Unreturned;

static Unreturned *unreturned = NULL;	/* TopMemoryContext */
static int	n_unreturned = 0;
static int	cap_unreturned = 0;
static bool xact_callbacks = false;

static void async_xact_callback(XactEvent event, void *arg);
static void async_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								   SubTransactionId parentSubid, void *arg);

void
async_track_submitted(uint64 id, int exec_level)
{
	if (!xact_callbacks)
	{
		RegisterXactCallback(async_xact_callback, NULL);
		RegisterSubXactCallback(async_subxact_callback, NULL);
		xact_callbacks = true;
	}
	if (n_unreturned == cap_unreturned)
	{
		int			cap = Max(cap_unreturned * 2, 64);

		unreturned = unreturned == NULL
			? MemoryContextAlloc(TopMemoryContext, cap * sizeof(Unreturned))
			: repalloc(unreturned, cap * sizeof(Unreturned));
		cap_unreturned = cap;
	}
	unreturned[n_unreturned].id = id;
	unreturned[n_unreturned].xact_level = GetCurrentTransactionNestLevel();
	unreturned[n_unreturned].exec_level = exec_level;
	n_unreturned++;
}

void
llm_async_query_finished(int level)
{
	int			kept = 0;

	for (int i = 0; i < n_unreturned; i++)
		if (unreturned[i].exec_level <= level)
			unreturned[kept++] = unreturned[i];
	n_unreturned = kept;
}

/* Drop the requests of the unreturned ids made at (sub)transaction level >= level. */
static void
drop_unreturned(int level)
{
	int			kept = 0;
	bool		wake = false;

	if (n_unreturned == 0 || async_store == NULL || async_area == NULL)
	{
		n_unreturned = 0;
		return;
	}
	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n_unreturned; i++)
	{
		LlmAsyncEntry *e;

		if (unreturned[i].xact_level < level)
		{
			unreturned[kept++] = unreturned[i];
			continue;
		}
		e = async_find_entry(unreturned[i].id);
		if (e != NULL)
			wake |= async_drop_entry(e);
	}
	LWLockRelease(async_store->lock);
	n_unreturned = kept;
	ConditionVariableBroadcast(&async_store->cv);
	if (wake)
		async_wake_worker();
}

static void
async_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			drop_unreturned(0);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			/* what the committed statements made is theirs now */
			n_unreturned = 0;
			break;
		default:
			break;
	}
}

static void
async_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event == SUBXACT_EVENT_ABORT_SUB)
		drop_unreturned(level);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		/* the parent now answers for them */
		for (int i = 0; i < n_unreturned; i++)
			if (unreturned[i].xact_level >= level)
				unreturned[i].xact_level = level - 1;
	}
}

