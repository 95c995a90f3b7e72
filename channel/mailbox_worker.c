/*
 * mailbox_worker.c — the worker's side of the asynchronous request store
 * (mailbox.h): taking queued entries and cancel requests, ending an entry
 * (its result, failure or cancellation, its reservation settled) or
 * requeueing it.
 */
#include "postgres.h"

#include "mailbox_internal.h"

/* e ends in state: its request freed, its reservation settled; freed whole if nobody wants it. */
static void
end_entry(LlmAsyncEntry *e, LlmAsyncState state)
{
	if (DsaPointerIsValid(e->request))
		dsa_free(async_area, e->request);
	e->request = InvalidDsaPointer;
	e->request_len = 0;
	e->state = state;
	e->cancel_requested = false;
	e->ended_at = GetCurrentTimestamp();
	llm_quota_settle(&e->quota, state == LLM_ASYNC_DONE ? &e->usage : NULL);
	if (e->drop_at_end)
		async_free_entry(e);
	else if (e->notify[0] != '\0')
	{
		e->notify_pending = true;
		async_note_notify_wake(e->database);
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
	if (async_store == NULL)
		return 0;
	llm_async_attach();
	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	if (seen_any && async_store->version == seen_version)
	{
		LWLockRelease(async_store->lock);
		return 0;
	}
	for (int i = 0; i < async_store->n_entries; i++)
	{
		LlmAsyncEntry *e = &async_store->entries[i];
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
			out[n].request = dsa_get_address(async_area, e->request);
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
		seen_version = async_store->version;
		seen_any = true;
	}
	LWLockRelease(async_store->lock);
	async_wake_notified();
	ConditionVariableBroadcast(&async_store->cv);
	return n;
}

/* The entry (index, id) if it is still the one the worker runs; caller holds the lock. */
static LlmAsyncEntry *
running_entry(int index, uint64 id)
{
	LlmAsyncEntry *e;

	if (index < 0 || index >= async_store->n_entries)
		return NULL;
	e = &async_store->entries[index];
	return (e->id == id && e->state == LLM_ASYNC_RUNNING) ? e : NULL;
}

void
llm_async_finish(int index, uint64 id, const char *text, Size len,
				 llm_finish_reason reason, const llm_usage *usage)
{
	LlmAsyncEntry *e;

	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	e = running_entry(index, id);
	if (e != NULL)
	{
		dsa_pointer chunk = InvalidDsaPointer;

		if (len > 0)
			chunk = dsa_allocate_extended(async_area, len, DSA_ALLOC_NO_OOM);
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
				memcpy(dsa_get_address(async_area, chunk), text, len);
			e->text = chunk;
			e->text_len = len;
			e->finish_reason = reason;
			e->usage = *usage;
			end_entry(e, LLM_ASYNC_DONE);
		}
	}
	LWLockRelease(async_store->lock);
	async_wake_notified();
	ConditionVariableBroadcast(&async_store->cv);
}

/*
 * Ends the entry (index, id) in a final state if the worker still runs it:
 * the one shape of a failure and a cancellation (message NULL: none).
 */
static void
end_running(int index, uint64 id, LlmAsyncState state, int sqlstate, const char *message)
{
	LlmAsyncEntry *e;

	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
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
	LWLockRelease(async_store->lock);
	async_wake_notified();
	ConditionVariableBroadcast(&async_store->cv);
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

	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	e = running_entry(index, id);
	if (e != NULL)
	{
		e->state = LLM_ASYNC_QUEUED;
		e->generation = 0;
		async_store->version++;
	}
	LWLockRelease(async_store->lock);
}
