/*
 * mailbox_submit.c — the submitting backends' side of the asynchronous
 * request store (mailbox.h): submit (the role's share and the token limit
 * checked), fetch (waiting on the store's condition variable), cancel, and
 * a role's own requests.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"

#include "client.h"
#include "protocol.h"
#include "common/registry.h"
#include "mailbox_internal.h"

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
	int			cap = async_max_requests_per_role > 0 ? async_max_requests_per_role : async_store->n_entries / 2;

	return Max(Min(cap, async_store->n_entries), 1);
}

/*
 * Entries role holds (any state but FREE, except those of failed
 * statements the worker is about to free); caller holds the lock.
 */
static int
role_entries(Oid role)
{
	int			n = 0;

	for (int i = 0; i < async_store->n_entries; i++)
		if (async_store->entries[i].state != LLM_ASYNC_FREE && async_store->entries[i].role == role &&
			!async_store->entries[i].drop_at_end)
			n++;
	return n;
}

static void role_full(int cap);

uint64
llm_async_submit(const llm_request *req, bool on_error_null, int exec_level, const char *notify)
{
	llm_wire_msg m;
	size_t		len;
	dsa_pointer chunk;
	LlmAsyncEntry *e = NULL;
	uint64		id;
	LlmQuotaTicket ticket;
	int			cap;

	llm_async_attach();
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.request = *req;
	m.role_id = GetUserId();
	m.database_id = MyDatabaseId;
	llm_fill_client(&m.client);

	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	id = async_store->next_id++;
	LWLockRelease(async_store->lock);
	m.id = id;
	len = llm_wire_encode(&m, NULL, 0);
	if (len == 0)
		elog(ERROR, "llm: request cannot be encoded");
	/* under the role's token limit (ERROR 53400 over it); refunded if it is not stored */
	(void) llm_quota_admit(req, llm_quota_session_limit(), &ticket, NULL);
	chunk = dsa_allocate_extended(async_area, len, DSA_ALLOC_NO_OOM);
	if (!DsaPointerIsValid(chunk))
	{
		llm_quota_refund(&ticket);
		store_full("no memory left for the request, llm.async_memory");
	}
	(void) llm_wire_encode(&m, dsa_get_address(async_area, chunk), len);

	/* an error (a full store, a cancel while waiting) must not keep the chunk or the reservation */
	PG_TRY();
	{
		for (TimestampTz start = GetCurrentTimestamp();;)
		{
			int			dropping = 0;
			bool		over_cap;

			LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
			cap = role_cap();
			for (int pass = 0; pass < 2 && e == NULL; pass++)
			{
				if (pass == 1 && async_sweep_locked(GetCurrentTimestamp()) == 0)
					break;
				if (role_entries(GetUserId()) >= cap)
					continue;
				for (int i = 0; i < async_store->n_entries; i++)
					if (async_store->entries[i].state == LLM_ASYNC_FREE)
					{
						e = &async_store->entries[i];
						break;
					}
			}
			if (e != NULL)
				break;			/* the lock still held */
			over_cap = role_entries(GetUserId()) >= cap;
			for (int i = 0; i < async_store->n_entries; i++)
				if (async_store->entries[i].drop_at_end)
					dropping++;
			LWLockRelease(async_store->lock);
			if (over_cap)
				role_full(cap);
			/* entries of failed statements are freed once the worker has aborted them: wait for that */
			if (dropping == 0 || TimestampDifferenceExceeds(start, GetCurrentTimestamp(), llm_worker_wait_timeout()))
				store_full("every entry is in use, llm.async_max_requests");
			(void) ConditionVariableTimedSleep(&async_store->cv, 100, PG_WAIT_EXTENSION);
		}
	}
	PG_CATCH();
	{
		ConditionVariableCancelSleep();
		dsa_free(async_area, chunk);
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
	async_store->version++;
	LWLockRelease(async_store->lock);
	async_track_submitted(id, exec_level);
	async_wake_worker();
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
	LlmAsyncEntry *e = async_find_entry(id);

	if (e == NULL)
		return NULL;
	if (e->role != GetUserId() && !superuser())
	{
		LWLockRelease(async_store->lock);
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

		LWLockAcquire(async_store->lock, LW_SHARED);
		e = entry_for_caller(id);
		if (e == NULL)
		{
			LWLockRelease(async_store->lock);
			if (sleeping)
				ConditionVariableCancelSleep();
			no_such_request(id);
		}
		if (async_is_final(e->state) || !wait)
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
				memcpy(out->text, dsa_get_address(async_area, e->text), e->text_len);
			out->text[e->text_len] = '\0';
			LWLockRelease(async_store->lock);
			break;
		}
		LWLockRelease(async_store->lock);

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
			ConditionVariablePrepareToSleep(&async_store->cv);
			sleeping = true;
			continue;			/* recheck: it may have ended before we were on the list */
		}
		(void) ConditionVariableTimedSleep(&async_store->cv, 1000, PG_WAIT_EXTENSION);
	}
	if (sleeping)
		ConditionVariableCancelSleep();
}

bool
llm_async_cancel(uint64 id)
{
	LlmAsyncEntry *e;
	bool		ended = false;

	llm_async_attach();
	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	e = entry_for_caller(id);
	if (e == NULL)
	{
		LWLockRelease(async_store->lock);
		return false;
	}
	switch (e->state)
	{
		case LLM_ASYNC_QUEUED:
			async_release_chunks(e);
			llm_quota_refund(&e->quota);
			e->state = LLM_ASYNC_CANCELLED;
			e->ended_at = GetCurrentTimestamp();
			if (e->notify[0] != '\0')
			{
				e->notify_pending = true;
				async_note_notify_wake(e->database);
			}
			ended = true;
			break;
		case LLM_ASYNC_RUNNING:
			e->cancel_requested = true;
			async_store->version++;
			break;
		default:
			async_free_entry(e);
			break;
	}
	LWLockRelease(async_store->lock);
	async_wake_notified();
	if (ended)
		ConditionVariableBroadcast(&async_store->cv);
	else
		async_wake_worker();
	return true;
}

/*
 * Drop entry e for its owner, who will never fetch it: QUEUED is freed now
 * (nothing ran); RUNNING is cancelled and freed as soon as the worker has
 * aborted it; an ended one is freed.  Returns whether the worker must look.
 * Caller holds the lock exclusively.
 */
bool
async_drop_entry(LlmAsyncEntry *e)
{
	switch (e->state)
	{
		case LLM_ASYNC_FREE:
			return false;
		case LLM_ASYNC_RUNNING:
			e->cancel_requested = true;
			e->drop_at_end = true;
			async_store->version++;
			return true;
		default:
			async_free_entry(e);
			return false;
	}
}

void
async_wake_worker(void)
{
	Latch	   *worker_latch;

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	worker_latch = llm_shared->worker_latch;
	LWLockRelease(llm_shared->lock);
	if (worker_latch)
		SetLatch(worker_latch);
}

/* ----- a role's own requests ----- */

int64
llm_async_cancel_all(void)
{
	int64		n = 0;
	bool		wake = false;
	Oid			role = GetUserId();

	llm_async_attach();
	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	for (int i = 0; i < async_store->n_entries; i++)
	{
		LlmAsyncEntry *e = &async_store->entries[i];

		if (e->state == LLM_ASYNC_FREE || e->role != role)
			continue;
		wake |= async_drop_entry(e);
		n++;
	}
	LWLockRelease(async_store->lock);
	ConditionVariableBroadcast(&async_store->cv);
	if (wake)
		async_wake_worker();
	return n;
}

int
llm_async_list(LlmAsyncListed **out)
{
	Oid			role = GetUserId();
	int			n = 0;
	LlmAsyncListed *list;

	llm_async_attach();
	list = palloc(sizeof(LlmAsyncListed) * Max(async_store->n_entries, 1));
	LWLockAcquire(async_store->lock, LW_SHARED);
	for (int i = 0; i < async_store->n_entries; i++)
	{
		LlmAsyncEntry *e = &async_store->entries[i];

		if (e->state == LLM_ASYNC_FREE || e->role != role)
			continue;
		list[n].id = e->id;
		list[n].state = e->state;
		list[n].cancelling = e->cancel_requested;
		list[n].submitted_at = e->submitted_at;
		list[n].ended_at = e->ended_at;
		n++;
	}
	LWLockRelease(async_store->lock);
	*out = list;
	return n;
}

