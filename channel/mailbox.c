/*
 * mailbox.c — the store of asynchronous requests (mailbox.h):
 * its shared memory and settings, the submitting backends' side and the
 * worker's side.
 */
#include "postgres.h"

#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "utils/dsa.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "client.h"
#include "protocol.h"
#include "common/job_registry.h"
#include "common/quota.h"
#include "common/registry.h"
#include "mailbox.h"

typedef struct LlmAsyncEntry
{
	uint64		id;
	LlmAsyncState state;
	bool		cancel_requested;	/* RUNNING: llm_cancel asked the worker to abort it */
	bool		drop_at_end;	/* RUNNING: nobody wants the result; freed when it ends */
	bool		on_error_null;
	Oid			role;			/* submitter: who may fetch or cancel */
	uint32		generation;		/* RUNNING: the worker generation running it */
	TimestampTz submitted_at;
	TimestampTz ended_at;		/* DONE, FAILED, CANCELLED */
	dsa_pointer request;		/* QUEUED, RUNNING: the encoded SUBMIT message */
	Size		request_len;
	dsa_pointer text;			/* DONE: the output (UTF-8), InvalidDsaPointer if empty */
	Size		text_len;
	llm_finish_reason finish_reason;
	llm_usage	usage;
	int			sqlstate;		/* FAILED */
	char		error[LLM_ASYNC_ERROR_LEN];
	LlmQuotaTicket quota;		/* QUEUED, RUNNING: its reservation under the token limit */
	Oid			database;		/* submitter's database: where its notification goes */
	char		notify[NAMEDATALEN];	/* NOTIFY channel at its end; "" for none */
	bool		notify_pending; /* ended with a channel; not yet taken by the database's runner */
} LlmAsyncEntry;

typedef struct LlmAsyncStore
{
	LWLock	   *lock;
	ConditionVariable cv;		/* broadcast when an entry ends */
	int			area_tranche;	/* LWLock tranche of the area's own locks */
	uint64		next_id;
	uint64		version;		/* bumped when the worker has something to look at */
	int			n_entries;
	Size		area_offset;	/* from the store's start */
	Size		area_size;
	LlmAsyncEntry entries[FLEXIBLE_ARRAY_MEMBER];
} LlmAsyncStore;

/* settings */
static int	async_max_requests = 1024;
static int	async_memory_mb = 32;
static int	async_result_ttl_s = 600;
static int	async_max_requests_per_role = 0;	/* 0: half of async_max_requests */

static LlmAsyncStore *store = NULL;
static dsa_area *area = NULL;

/*
 * Databases whose runner must be woken for a notification: noted by
 * end_entry under the store's lock, woken by wake_notified after it is
 * released (the job registry has its own lock).
 */
static Oid	notify_wakes[LLM_JOB_MAX_DATABASES];
static int	n_notify_wakes = 0;

static void
note_notify_wake(Oid database)
{
	for (int i = 0; i < n_notify_wakes; i++)
		if (notify_wakes[i] == database)
			return;
	/* no more databases than the job registry serves have runners */
	if (n_notify_wakes < LLM_JOB_MAX_DATABASES)
		notify_wakes[n_notify_wakes++] = database;
}

/* Wake the runners noted; call without the store's lock. */
static void
wake_notified(void)
{
	for (int i = 0; i < n_notify_wakes; i++)
		llm_jobs_wake_database(notify_wakes[i]);
	n_notify_wakes = 0;
}

const char *
llm_async_state_name(LlmAsyncState s)
{
	switch (s)
	{
		case LLM_ASYNC_QUEUED:
			return "queued";
		case LLM_ASYNC_RUNNING:
			return "running";
		case LLM_ASYNC_DONE:
			return "done";
		case LLM_ASYNC_FAILED:
			return "failed";
		case LLM_ASYNC_CANCELLED:
			return "cancelled";
		default:
			return "free";
	}
}

static bool
is_final(LlmAsyncState s)
{
	return s == LLM_ASYNC_DONE || s == LLM_ASYNC_FAILED || s == LLM_ASYNC_CANCELLED;
}

/* ---------- shared memory ---------- */

static Size
entries_end(void)
{
	return MAXALIGN(add_size(offsetof(LlmAsyncStore, entries),
							 mul_size(async_max_requests, sizeof(LlmAsyncEntry))));
}

static Size
store_size(void)
{
	return add_size(entries_end(), mul_size((Size) async_memory_mb, 1024 * 1024));
}

static void
store_init(void *mem, bool found)
{
	dsa_area   *a;

	store = mem;
	if (found)
		return;
	memset(store, 0, entries_end());
	store->lock = &(GetNamedLWLockTranche("llm async"))->lock;
	ConditionVariableInit(&store->cv);
	store->next_id = (uint64) GetCurrentTimestamp();
	store->n_entries = async_max_requests;
	store->area_offset = entries_end();
	store->area_size = store_size() - entries_end();
	store->area_tranche = LWLockNewTrancheId();
	/* in plain shared memory, never growing: the postmaster cannot make DSM segments */
	a = dsa_create_in_place((char *) store + store->area_offset, store->area_size,
							store->area_tranche, NULL);
	dsa_pin(a);
	dsa_set_size_limit(a, store->area_size);
	dsa_detach(a);
}

void
llm_result_store_request(void)
{
	llm_registry_add_shmem("llm async", store_size, store_init, 1);
}

void
llm_async_attach(void)
{
	MemoryContext old;

	if (area != NULL)
		return;
	if (store == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_llm is not initialized"),
				 errhint("Add 'llm' to shared_preload_libraries in postgresql.conf and restart the server.")));
	LWLockRegisterTranche(store->area_tranche, "llm async area");
	old = MemoryContextSwitchTo(TopMemoryContext);
	area = dsa_attach_in_place((char *) store + store->area_offset, NULL);
	dsa_pin_mapping(area);
	MemoryContextSwitchTo(old);
}

/* Free what entry e holds in the area; caller holds the lock exclusively. */
static void
release_chunks(LlmAsyncEntry *e)
{
	if (DsaPointerIsValid(e->request))
		dsa_free(area, e->request);
	if (DsaPointerIsValid(e->text))
		dsa_free(area, e->text);
	e->request = InvalidDsaPointer;
	e->text = InvalidDsaPointer;
	e->request_len = e->text_len = 0;
}

static void
free_entry(LlmAsyncEntry *e)
{
	/* a request freed before it ended never ran (QUEUED): nothing to charge */
	llm_quota_refund(&e->quota);
	release_chunks(e);
	memset(e, 0, sizeof(*e));
	e->request = InvalidDsaPointer;
	e->text = InvalidDsaPointer;
}

/* Free ended entries past their time to live; caller holds the lock exclusively. */
static int
sweep_locked(TimestampTz now)
{
	int			freed = 0;

	for (int i = 0; i < store->n_entries; i++)
	{
		LlmAsyncEntry *e = &store->entries[i];

		if (is_final(e->state) &&
			TimestampDifferenceExceeds(e->ended_at, now, async_result_ttl_s * 1000))
		{
			free_entry(e);
			freed++;
		}
	}
	return freed;
}

/* The entry with id; caller holds the lock. */
static LlmAsyncEntry *
find_entry(uint64 id)
{
	for (int i = 0; i < store->n_entries; i++)
		if (store->entries[i].state != LLM_ASYNC_FREE && store->entries[i].id == id)
			return &store->entries[i];
	return NULL;
}

/* ---------- backend side ---------- */

static void
store_full(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("the llm asynchronous request store is full (%s)", what),
			 errhint("Fetch or cancel finished requests (llm_result, llm_cancel), wait for results to expire "
					 "(llm.async_result_ttl), or raise llm.async_max_requests / llm.async_memory.")));
}

/* The most entries one role may hold: llm.async_max_requests_per_role, 0 meaning half the store. */
static int
role_cap(void)
{
	int			cap = async_max_requests_per_role > 0 ? async_max_requests_per_role : store->n_entries / 2;

	return Max(Min(cap, store->n_entries), 1);
}

/*
 * Entries role holds (any state but FREE, except those of failed
 * statements the worker is about to free); caller holds the lock.
 */
static int
role_entries(Oid role)
{
	int			n = 0;

	for (int i = 0; i < store->n_entries; i++)
		if (store->entries[i].state != LLM_ASYNC_FREE && store->entries[i].role == role &&
			!store->entries[i].drop_at_end)
			n++;
	return n;
}

static void role_full(int cap);
static void track_submitted(uint64 id, int exec_level);

uint64
llm_async_submit(const llm_request *req, bool on_error_null, int exec_level, const char *notify)
{
	llm_wire_msg m;
	size_t		len;
	dsa_pointer chunk;
	LlmAsyncEntry *e = NULL;
	uint64		id;
	Latch	   *worker_latch;
	LlmQuotaTicket ticket;
	int			cap;

	llm_async_attach();
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.request = *req;
	m.role_id = GetUserId();
	m.database_id = MyDatabaseId;
	llm_fill_client(&m.client);

	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	id = store->next_id++;
	LWLockRelease(store->lock);
	m.id = id;
	len = llm_wire_encode(&m, NULL, 0);
	if (len == 0)
		elog(ERROR, "llm: request cannot be encoded");
	/* under the role's token limit (ERROR 53400 over it); refunded if it is not stored */
	(void) llm_quota_admit(req, llm_quota_session_limit(), &ticket, NULL);
	chunk = dsa_allocate_extended(area, len, DSA_ALLOC_NO_OOM);
	if (!DsaPointerIsValid(chunk))
	{
		llm_quota_refund(&ticket);
		store_full("no memory left for the request, llm.async_memory");
	}
	(void) llm_wire_encode(&m, dsa_get_address(area, chunk), len);

	/* an error (a full store, a cancel while waiting) must not keep the chunk or the reservation */
	PG_TRY();
	{
		for (TimestampTz start = GetCurrentTimestamp();;)
		{
			int			dropping = 0;
			bool		over_cap;

			LWLockAcquire(store->lock, LW_EXCLUSIVE);
			cap = role_cap();
			for (int pass = 0; pass < 2 && e == NULL; pass++)
			{
				if (pass == 1 && sweep_locked(GetCurrentTimestamp()) == 0)
					break;
				if (role_entries(GetUserId()) >= cap)
					continue;
				for (int i = 0; i < store->n_entries; i++)
					if (store->entries[i].state == LLM_ASYNC_FREE)
					{
						e = &store->entries[i];
						break;
					}
			}
			if (e != NULL)
				break;			/* the lock still held */
			over_cap = role_entries(GetUserId()) >= cap;
			for (int i = 0; i < store->n_entries; i++)
				if (store->entries[i].drop_at_end)
					dropping++;
			LWLockRelease(store->lock);
			if (over_cap)
				role_full(cap);
			/* entries of failed statements are freed once the worker has aborted them: wait for that */
			if (dropping == 0 || TimestampDifferenceExceeds(start, GetCurrentTimestamp(), llm_worker_wait_timeout()))
				store_full("every entry is in use, llm.async_max_requests");
			(void) ConditionVariableTimedSleep(&store->cv, 100, PG_WAIT_EXTENSION);
		}
	}
	PG_CATCH();
	{
		ConditionVariableCancelSleep();
		dsa_free(area, chunk);
		llm_quota_refund(&ticket);
		PG_RE_THROW();
	}
	PG_END_TRY();
	ConditionVariableCancelSleep();
	memset(e, 0, sizeof(*e));
	e->id = id;
	e->state = LLM_ASYNC_QUEUED;
	e->on_error_null = on_error_null;
	e->role = GetUserId();
	e->submitted_at = GetCurrentTimestamp();
	e->request = chunk;
	e->request_len = len;
	e->text = InvalidDsaPointer;
	e->quota = ticket;
	e->database = MyDatabaseId;
	if (notify != NULL)
		strlcpy(e->notify, notify, sizeof(e->notify));
	store->version++;
	LWLockRelease(store->lock);
	track_submitted(id, exec_level);

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	worker_latch = llm_shared->worker_latch;
	LWLockRelease(llm_shared->lock);
	if (worker_latch)
		SetLatch(worker_latch);
	return id;
}

static void
role_full(int cap)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("role \"%s\" holds its share of the llm asynchronous request store (%d requests)",
					GetUserNameFromId(GetUserId(), true) ? GetUserNameFromId(GetUserId(), true) : "?", cap),
			 errhint("Fetch or cancel its requests (llm_result, llm_cancel, llm_cancel_all), wait for results "
					 "to expire (llm.async_result_ttl), or raise llm.async_max_requests_per_role.")));
}

/* Entry id for the caller, who must be its submitter or a superuser; caller holds the lock. */
static LlmAsyncEntry *
entry_for_caller(uint64 id)
{
	LlmAsyncEntry *e = find_entry(id);

	if (e == NULL)
		return NULL;
	if (e->role != GetUserId() && !superuser())
	{
		LWLockRelease(store->lock);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("llm request " INT64_FORMAT " belongs to another role", (int64) id),
				 errhint("Only the role that submitted a request, or a superuser, may fetch or cancel it.")));
	}
	return e;
}

static void
no_such_request(uint64 id)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("llm request " INT64_FORMAT " does not exist", (int64) id),
			 errhint("Results are kept for llm.async_result_ttl after the request ends, until llm_cancel, "
					 "or until the server restarts.")));
}

void
llm_async_fetch(uint64 id, bool wait, LlmAsyncResult *out)
{
	TimestampTz no_worker_since = 0;
	bool		sleeping = false;

	llm_async_attach();
	memset(out, 0, sizeof(*out));
	for (;;)
	{
		LlmAsyncEntry *e;
		bool		worker_up;

		LWLockAcquire(store->lock, LW_SHARED);
		e = entry_for_caller(id);
		if (e == NULL)
		{
			LWLockRelease(store->lock);
			if (sleeping)
				ConditionVariableCancelSleep();
			no_such_request(id);
		}
		if (is_final(e->state) || !wait)
		{
			out->state = e->state;
			out->on_error_null = e->on_error_null;
			out->finish_reason = e->finish_reason;
			out->usage = e->usage;
			out->sqlstate = e->sqlstate;
			memcpy(out->error, e->error, sizeof(out->error));
			out->text_len = (int) e->text_len;
			out->text = palloc(e->text_len + 1);
			if (e->text_len > 0)
				memcpy(out->text, dsa_get_address(area, e->text), e->text_len);
			out->text[e->text_len] = '\0';
			LWLockRelease(store->lock);
			break;
		}
		LWLockRelease(store->lock);

		LWLockAcquire(llm_shared->lock, LW_SHARED);
		worker_up = llm_shared->worker_pid != 0;
		LWLockRelease(llm_shared->lock);
		if (worker_up)
			no_worker_since = 0;
		else if (no_worker_since == 0)
			no_worker_since = GetCurrentTimestamp();
		else if (TimestampDifferenceExceeds(no_worker_since, GetCurrentTimestamp(),
											llm_worker_wait_timeout()))
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("llm worker is not running"),
					 errdetail("Waited %d ms for it to start (llm.worker_wait_timeout); request " INT64_FORMAT
							   " stays queued.", llm_worker_wait_timeout(), (int64) id),
					 errhint("Check the server log for errors of the \"llm worker\" process.")));
		}
		if (!sleeping)
		{
			ConditionVariablePrepareToSleep(&store->cv);
			sleeping = true;
			continue;			/* recheck: it may have ended before we were on the list */
		}
		(void) ConditionVariableTimedSleep(&store->cv, 1000, PG_WAIT_EXTENSION);
	}
	if (sleeping)
		ConditionVariableCancelSleep();
}

bool
llm_async_cancel(uint64 id)
{
	LlmAsyncEntry *e;
	Latch	   *worker_latch = NULL;
	bool		ended = false;

	llm_async_attach();
	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	e = entry_for_caller(id);
	if (e == NULL)
	{
		LWLockRelease(store->lock);
		return false;
	}
	switch (e->state)
	{
		case LLM_ASYNC_QUEUED:
			release_chunks(e);
			llm_quota_refund(&e->quota);
			e->state = LLM_ASYNC_CANCELLED;
			e->ended_at = GetCurrentTimestamp();
			if (e->notify[0] != '\0')
			{
				e->notify_pending = true;
				note_notify_wake(e->database);
			}
			ended = true;
			break;
		case LLM_ASYNC_RUNNING:
			e->cancel_requested = true;
			store->version++;
			break;
		default:
			free_entry(e);
			break;
	}
	LWLockRelease(store->lock);
	wake_notified();
	if (ended)
		ConditionVariableBroadcast(&store->cv);
	else
	{
		LWLockAcquire(llm_shared->lock, LW_SHARED);
		worker_latch = llm_shared->worker_latch;
		LWLockRelease(llm_shared->lock);
		if (worker_latch)
			SetLatch(worker_latch);
	}
	return true;
}

/*
 * Drop entry e for its owner, who will never fetch it: QUEUED is freed now
 * (nothing ran); RUNNING is cancelled and freed as soon as the worker has
 * aborted it; an ended one is freed.  Returns whether the worker must look.
 * Caller holds the lock exclusively.
 */
static bool
drop_entry(LlmAsyncEntry *e)
{
	switch (e->state)
	{
		case LLM_ASYNC_FREE:
			return false;
		case LLM_ASYNC_RUNNING:
			e->cancel_requested = true;
			e->drop_at_end = true;
			store->version++;
			return true;
		default:
			free_entry(e);
			return false;
	}
}

static void
wake_worker(void)
{
	Latch	   *worker_latch;

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	worker_latch = llm_shared->worker_latch;
	LWLockRelease(llm_shared->lock);
	if (worker_latch)
		SetLatch(worker_latch);
}

/* ----- ids no statement has returned yet ----- */

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

static void
track_submitted(uint64 id, int exec_level)
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

	if (n_unreturned == 0 || store == NULL || area == NULL)
	{
		n_unreturned = 0;
		return;
	}
	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n_unreturned; i++)
	{
		LlmAsyncEntry *e;

		if (unreturned[i].xact_level < level)
		{
			unreturned[kept++] = unreturned[i];
			continue;
		}
		e = find_entry(unreturned[i].id);
		if (e != NULL)
			wake |= drop_entry(e);
	}
	LWLockRelease(store->lock);
	n_unreturned = kept;
	ConditionVariableBroadcast(&store->cv);
	if (wake)
		wake_worker();
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

/* ----- a role's own requests ----- */

int64
llm_async_cancel_all(void)
{
	int64		n = 0;
	bool		wake = false;
	Oid			role = GetUserId();

	llm_async_attach();
	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	for (int i = 0; i < store->n_entries; i++)
	{
		LlmAsyncEntry *e = &store->entries[i];

		if (e->state == LLM_ASYNC_FREE || e->role != role)
			continue;
		wake |= drop_entry(e);
		n++;
	}
	LWLockRelease(store->lock);
	ConditionVariableBroadcast(&store->cv);
	if (wake)
		wake_worker();
	return n;
}

int
llm_async_list(LlmAsyncListed **out)
{
	Oid			role = GetUserId();
	int			n = 0;
	LlmAsyncListed *list;

	llm_async_attach();
	list = palloc(sizeof(LlmAsyncListed) * Max(store->n_entries, 1));
	LWLockAcquire(store->lock, LW_SHARED);
	for (int i = 0; i < store->n_entries; i++)
	{
		LlmAsyncEntry *e = &store->entries[i];

		if (e->state == LLM_ASYNC_FREE || e->role != role)
			continue;
		list[n].id = e->id;
		list[n].state = e->state;
		list[n].cancelling = e->cancel_requested;
		list[n].submitted_at = e->submitted_at;
		list[n].ended_at = e->ended_at;
		n++;
	}
	LWLockRelease(store->lock);
	*out = list;
	return n;
}

/* ---------- worker side ---------- */

/* e ends in state: its request freed, its reservation settled; freed whole if nobody wants it. */
static void
end_entry(LlmAsyncEntry *e, LlmAsyncState state)
{
	if (DsaPointerIsValid(e->request))
		dsa_free(area, e->request);
	e->request = InvalidDsaPointer;
	e->request_len = 0;
	e->state = state;
	e->cancel_requested = false;
	e->ended_at = GetCurrentTimestamp();
	llm_quota_settle(&e->quota, state == LLM_ASYNC_DONE ? &e->usage : NULL);
	if (e->drop_at_end)
		free_entry(e);
	else if (e->notify[0] != '\0')
	{
		e->notify_pending = true;
		note_notify_wake(e->database);
	}
}


static uint64 seen_version = 0;
static bool seen_any = false;

int
llm_async_take(uint32 generation, LlmAsyncTaken *out, int max, bool *more,
			   LlmAsyncTaken *cancel, int *n_cancel)
{
	int			n = 0;

	*more = false;
	*n_cancel = 0;
	if (store == NULL)
		return 0;
	llm_async_attach();
	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	if (seen_any && store->version == seen_version)
	{
		LWLockRelease(store->lock);
		return 0;
	}
	for (int i = 0; i < store->n_entries; i++)
	{
		LlmAsyncEntry *e = &store->entries[i];
		bool		not_here = e->state == LLM_ASYNC_QUEUED ||
			(e->state == LLM_ASYNC_RUNNING && e->generation != generation);

		if (not_here && e->cancel_requested)
		{
			/* cancelled while no engine of this worker ran it */
			end_entry(e, LLM_ASYNC_CANCELLED);
		}
		else if (not_here)
		{
			if (n == max)
			{
				*more = true;
				continue;
			}
			e->state = LLM_ASYNC_RUNNING;
			e->generation = generation;
			out[n].index = i;
			out[n].id = e->id;
			out[n].request = dsa_get_address(area, e->request);
			out[n].request_len = e->request_len;
			n++;
		}
		else if (e->state == LLM_ASYNC_RUNNING && e->cancel_requested)
		{
			if (*n_cancel == max)
			{
				*more = true;
				continue;
			}
			cancel[*n_cancel].index = i;
			cancel[*n_cancel].id = e->id;
			cancel[*n_cancel].request = NULL;
			cancel[*n_cancel].request_len = 0;
			(*n_cancel)++;
		}
	}
	if (!*more)
	{
		seen_version = store->version;
		seen_any = true;
	}
	LWLockRelease(store->lock);
	wake_notified();
	ConditionVariableBroadcast(&store->cv);
	return n;
}

/* The entry (index, id) if it is still the one the worker runs; caller holds the lock. */
static LlmAsyncEntry *
running_entry(int index, uint64 id)
{
	LlmAsyncEntry *e;

	if (index < 0 || index >= store->n_entries)
		return NULL;
	e = &store->entries[index];
	return (e->id == id && e->state == LLM_ASYNC_RUNNING) ? e : NULL;
}

void
llm_async_finish(int index, uint64 id, const char *text, Size len,
				 llm_finish_reason reason, const llm_usage *usage)
{
	LlmAsyncEntry *e;

	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	e = running_entry(index, id);
	if (e != NULL)
	{
		dsa_pointer chunk = InvalidDsaPointer;

		if (len > 0)
			chunk = dsa_allocate_extended(area, len, DSA_ALLOC_NO_OOM);
		if (len > 0 && !DsaPointerIsValid(chunk))
		{
			e->sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
			strlcpy(e->error, "no room for the result in the llm asynchronous request store (llm.async_memory)",
					sizeof(e->error));
			end_entry(e, LLM_ASYNC_FAILED);
		}
		else
		{
			if (len > 0)
				memcpy(dsa_get_address(area, chunk), text, len);
			e->text = chunk;
			e->text_len = len;
			e->finish_reason = reason;
			e->usage = *usage;
			end_entry(e, LLM_ASYNC_DONE);
		}
	}
	LWLockRelease(store->lock);
	wake_notified();
	ConditionVariableBroadcast(&store->cv);
}

/*
 * Ends the entry (index, id) in a final state if the worker still runs it:
 * the one shape of a failure and a cancellation (message NULL: none).
 */
static void
end_running(int index, uint64 id, LlmAsyncState state, int sqlstate, const char *message)
{
	LlmAsyncEntry *e;

	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	e = running_entry(index, id);
	if (e != NULL)
	{
		if (message != NULL)
		{
			e->sqlstate = sqlstate;
			strlcpy(e->error, message, sizeof(e->error));
		}
		end_entry(e, state);
	}
	LWLockRelease(store->lock);
	wake_notified();
	ConditionVariableBroadcast(&store->cv);
}

void
llm_async_fail(int index, uint64 id, int sqlstate, const char *message)
{
	end_running(index, id, LLM_ASYNC_FAILED, sqlstate, message);
}

void
llm_async_cancelled(int index, uint64 id)
{
	end_running(index, id, LLM_ASYNC_CANCELLED, 0, NULL);
}

void
llm_async_requeue(int index, uint64 id)
{
	LlmAsyncEntry *e;

	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	e = running_entry(index, id);
	if (e != NULL)
	{
		e->state = LLM_ASYNC_QUEUED;
		e->generation = 0;
		store->version++;
	}
	LWLockRelease(store->lock);
}

void
llm_async_sweep(void)
{
	static TimestampTz last = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (store == NULL || !TimestampDifferenceExceeds(last, now, 1000))
		return;
	last = now;
	llm_async_attach();
	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	(void) sweep_locked(now);
	LWLockRelease(store->lock);
}

/* ---------- notifications (the job runner of the entry's database) ---------- */

int
llm_async_take_notices(Oid database, LlmAsyncNotice *out, int max, bool *more)
{
	int			n = 0;

	*more = false;
	if (store == NULL)
		return 0;
	llm_async_attach();
	LWLockAcquire(store->lock, LW_EXCLUSIVE);
	for (int i = 0; i < store->n_entries; i++)
	{
		LlmAsyncEntry *e = &store->entries[i];

		if (!e->notify_pending || e->database != database)
			continue;
		if (n == max)
		{
			*more = true;
			break;
		}
		out[n].id = e->id;
		out[n].state = e->state;
		memcpy(out[n].channel, e->notify, sizeof(out[n].channel));
		e->notify_pending = false;
		n++;
	}
	LWLockRelease(store->lock);
	return n;
}

/* ---------- settings ---------- */

void
llm_result_store_define_gucs(void)
{
	DefineCustomIntVariable("llm.async_max_requests",
							"Asynchronous requests (llm_submit) the server keeps at once, running or with a result.",
							"Each holds its request until it ends and its result until llm.async_result_ttl passed.",
							&async_max_requests,
							1024, 16, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("llm.async_memory",
							"Shared memory for the requests and results of llm_submit.",
							"Allocated at server start; llm_submit fails when it is full.",
							&async_memory_mb,
							32, 1, 65536,
							PGC_POSTMASTER, GUC_UNIT_MB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("llm.async_result_ttl",
							"How long the result of an asynchronous request is kept after it ends.",
							"Until then llm_result can fetch it any number of times; llm_cancel drops it earlier.",
							&async_result_ttl_s,
							600, 1, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("llm.async_max_requests_per_role",
							"Entries of the asynchronous request store one role may hold at once; 0 = half of llm.async_max_requests.",
							"So that one role's requests never fill the store for the others; over it llm_submit fails with SQLSTATE 53400.",
							&async_max_requests_per_role,
							0, 0, 1000000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
}
