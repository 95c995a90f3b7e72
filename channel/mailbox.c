/*
 * mailbox.c — the store of asynchronous requests (mailbox.h): its shared
 * memory and settings, the entries' memory and expiry, the states' names
 * and the notifications for the job runners.  The submitting backends'
 * side is mailbox_submit.c (and mailbox_unreturned.c), the worker's side
 * mailbox_worker.c; their shared state is mailbox_internal.h.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "common/job_registry.h"
#include "common/registry.h"
#include "mailbox_internal.h"

/* settings */
static int	async_max_requests = 1024;
static int	async_memory_mb = 32;
static int	async_result_ttl_s = 600;
int			async_max_requests_per_role = 0;	/* 0: half of async_max_requests */

LlmAsyncStore *async_store = NULL;
dsa_area   *async_area = NULL;

/*
 * Databases whose runner must be woken for a notification: noted by
 * end_entry under the store's lock, woken by wake_notified after it is
 * released (the job registry has its own lock).
 */
static Oid	notify_wakes[LLM_JOB_MAX_DATABASES];
static int	n_notify_wakes = 0;

void
async_note_notify_wake(Oid database)
{
	for (int i = 0; i < n_notify_wakes; i++)
		if (notify_wakes[i] == database)
			return;
	/* no more databases than the job registry serves have runners */
	if (n_notify_wakes < LLM_JOB_MAX_DATABASES)
		notify_wakes[n_notify_wakes++] = database;
}

/* Wake the runners noted; call without the store's lock. */
void
async_wake_notified(void)
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

bool
async_is_final(LlmAsyncState s)
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

	async_store = mem;
	if (found)
		return;
	memset(async_store, 0, entries_end());
	async_store->lock = &(GetNamedLWLockTranche("llm async"))->lock;
	ConditionVariableInit(&async_store->cv);
	async_store->next_id = (uint64) GetCurrentTimestamp();
	async_store->n_entries = async_max_requests;
	async_store->area_offset = entries_end();
	async_store->area_size = store_size() - entries_end();
	async_store->area_tranche = LWLockNewTrancheId();
	/* in plain shared memory, never growing: the postmaster cannot make DSM segments */
	a = dsa_create_in_place((char *) async_store + async_store->area_offset, async_store->area_size,
							async_store->area_tranche, NULL);
	dsa_pin(a);
	dsa_set_size_limit(a, async_store->area_size);
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

	if (async_area != NULL)
		return;
	if (async_store == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_llm is not initialized"),
				 errhint("Add 'llm' to shared_preload_libraries in postgresql.conf and restart the server.")));
	LWLockRegisterTranche(async_store->area_tranche, "llm async area");
	old = MemoryContextSwitchTo(TopMemoryContext);
	async_area = dsa_attach_in_place((char *) async_store + async_store->area_offset, NULL);
	dsa_pin_mapping(async_area);
	MemoryContextSwitchTo(old);
}

/* Free what entry e holds in the area; caller holds the lock exclusively. */
void
async_release_chunks(LlmAsyncEntry *e)
{
	if (DsaPointerIsValid(e->request))
		dsa_free(async_area, e->request);
	if (DsaPointerIsValid(e->text))
		dsa_free(async_area, e->text);
	e->request = InvalidDsaPointer;
	e->text = InvalidDsaPointer;
	e->request_len = e->text_len = 0;
}

void
async_free_entry(LlmAsyncEntry *e)
{
	/* a request freed before it ended never ran (QUEUED): nothing to charge */
	llm_quota_refund(&e->quota);
	async_release_chunks(e);
	memset(e, 0, sizeof(*e));
	e->request = InvalidDsaPointer;
	e->text = InvalidDsaPointer;
}

/* Free ended entries past their time to live; caller holds the lock exclusively. */
int
async_sweep_locked(TimestampTz now)
{
	int			freed = 0;

	for (int i = 0; i < async_store->n_entries; i++)
	{
		LlmAsyncEntry *e = &async_store->entries[i];

		if (async_is_final(e->state) &&
			TimestampDifferenceExceeds(e->ended_at, now, async_result_ttl_s * 1000))
		{
			async_free_entry(e);
			freed++;
		}
	}
	return freed;
}

/* The entry with id; caller holds the lock. */
LlmAsyncEntry *
async_find_entry(uint64 id)
{
	for (int i = 0; i < async_store->n_entries; i++)
		if (async_store->entries[i].state != LLM_ASYNC_FREE && async_store->entries[i].id == id)
			return &async_store->entries[i];
	return NULL;
}


void
llm_async_sweep(void)
{
	static TimestampTz last = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (async_store == NULL || !TimestampDifferenceExceeds(last, now, 1000))
		return;
	last = now;
	llm_async_attach();
	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	(void) async_sweep_locked(now);
	LWLockRelease(async_store->lock);
}

/* ---------- notifications (the job runner of the entry's database) ---------- */

int
llm_async_take_notices(Oid database, LlmAsyncNotice *out, int max, bool *more)
{
	int			n = 0;

	*more = false;
	if (async_store == NULL)
		return 0;
	llm_async_attach();
	LWLockAcquire(async_store->lock, LW_EXCLUSIVE);
	for (int i = 0; i < async_store->n_entries; i++)
	{
		LlmAsyncEntry *e = &async_store->entries[i];

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
	LWLockRelease(async_store->lock);
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
