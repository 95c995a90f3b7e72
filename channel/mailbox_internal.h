/*
 * mailbox_internal.h — the asynchronous request store's shared state and
 * the calls between its files (the contract is mailbox.h):
 *   mailbox.c             the store: shared memory, settings, entries'
 *                         memory and expiry, states, notifications;
 *   mailbox_submit.c      the submitting backends' side: submit, fetch,
 *                         cancel, a role's own requests;
 *   mailbox_unreturned.c  ids no statement has returned yet, dropped with
 *                         a failed (sub)transaction;
 *   mailbox_worker.c      the worker's side: take, finish, fail, requeue.
 * Locking: async_store->lock guards every entry and the store's counters;
 * the functions below that take an entry expect it held (exclusively when
 * they change it), as each says.
 */
#ifndef LLM_MAILBOX_INTERNAL_H
#define LLM_MAILBOX_INTERNAL_H

#include "postgres.h"

#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "utils/dsa.h"
#include "utils/timestamp.h"

#include "common/quota.h"
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

/* The store (shared memory) and this process's mapping of its area (mailbox.c). */
extern LlmAsyncStore *async_store;
extern dsa_area *async_area;

/* llm.async_max_requests_per_role: 0 means half the store */
extern int	async_max_requests_per_role;

/* DONE, FAILED or CANCELLED */
extern bool async_is_final(LlmAsyncState s);

/* Free what entry e holds in the area; caller holds the lock exclusively. */
extern void async_release_chunks(LlmAsyncEntry *e);

/* Free entry e whole (a QUEUED one's reservation refunded); caller holds the lock exclusively. */
extern void async_free_entry(LlmAsyncEntry *e);

/* Free ended entries past llm.async_result_ttl: how many; caller holds the lock exclusively. */
extern int	async_sweep_locked(TimestampTz now);

/* The entry with id, NULL if none; caller holds the lock. */
extern LlmAsyncEntry *async_find_entry(uint64 id);

/*
 * Note that database's job runner must be woken for a notification (under
 * the lock); async_wake_notified wakes the noted runners (without it).
 */
extern void async_note_notify_wake(Oid database);
extern void async_wake_notified(void);

/*
 * Drop entry e for its owner, who will never fetch it (mailbox_submit.c);
 * true when the worker must look.  Caller holds the lock exclusively.
 */
extern bool async_drop_entry(LlmAsyncEntry *e);

/* Set the worker's latch (mailbox_submit.c). */
extern void async_wake_worker(void);

/* Note an id llm_submit gave out at executor level exec_level (mailbox_unreturned.c). */
extern void async_track_submitted(uint64 id, int exec_level);

#endif
