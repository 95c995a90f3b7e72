/*
 * client.c — backend side of the DSM/shm_mq channel to the llm worker.
 *
 * See client.h for the contract and protocol.h for the messages.  The
 * channel is created lazily on first use, published in this backend's slot
 * of the registry (registry.h) and survives transactions (the mapping is pinned);
 * it is rebuilt when the worker generation changed (a queue's sender and
 * receiver can be set only once, so a restarted worker cannot reuse it).
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "client.h"
#include "common/progress.h"
#include "common/quota.h"
#include "common/registry.h"

/*
 * From libpq/libpq.h, which we cannot include: it pulls in libpq-be.h and so
 * the GSSAPI headers, a build dependency for nothing.  The client-socket wait
 * set of a regular backend (NULL in background workers); the socket is at
 * position 0, and each user sets its events before waiting (as
 * pq_check_connection() does).
 */
extern PGDLLIMPORT WaitEventSet *FeBeWaitSet;
#define LLM_FEBE_SOCKET_POS 0
#define LLM_FEBE_NEVENTS 3

/* How often a waiting backend re-checks that the worker is alive (ms). */
#define LLM_ALIVE_CHECK_MS 1000

/* llm.worker_wait_timeout (ms): how long a submission waits for a running worker */
static int	worker_wait_timeout_ms = 30000;

typedef struct LlmChannel
{
	dsm_segment *seg;
	shm_mq_handle *req;
	shm_mq_handle *resp;
	uint32		generation;
	bool		send_in_progress;	/* a message is partly in the request queue */
} LlmChannel;

/* nest_level of a request that outlives transactions (llm_submit_session) */
#define SESSION_LEVEL (-1)

/* One submitted request, until its result is taken or it is aborted. */
typedef struct PendingRequest
{
	uint64		id;				/* hash key */
	int			nest_level;		/* transaction nesting level at submit, or SESSION_LEVEL */
	bool		generation;		/* a SUBMIT: counted in llm_progress */
	bool		done;
	bool		failed;
	bool		started;		/* any output arrived */
	StringInfoData text;		/* TEXT deltas (UTF-8) not yet taken by llm_take_text */
	int32	   *tokens;			/* TOKENS */
	int			n_tokens;
	llm_finish_reason finish_reason;	/* DONE */
	llm_usage	usage;
	double	   *scores;
	int			n_scores;
	float	   *vector;			/* VECTOR (with finish_reason, usage) */
	int			n_vector;
	int			sqlstate;		/* ERROR */
	char	   *message;
	LlmQuotaTicket quota;		/* a SUBMIT's reservation, settled when it ends */
} PendingRequest;

static MemoryContext channel_cxt = NULL;
static LlmChannel *channel = NULL;
static HTAB *pending = NULL;
static uint64 next_request_id = 1;
static bool callbacks_registered = false;

static void llm_xact_callback(XactEvent event, void *arg);
static void llm_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								 SubTransactionId parentSubid, void *arg);
static void llm_backend_exit(int code, Datum arg);

static void
check_registry(void)
{
	if (llm_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_llm is not initialized"),
				 errhint("Add 'llm' to shared_preload_libraries in postgresql.conf and restart the server.")));
	if (IsParallelWorker())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("llm functions cannot run in a parallel worker")));
	if (MyBackendId == InvalidBackendId || MyBackendId > llm_shared->n_slots)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this process cannot use pg_llm (no backend id)")));
}

static void
init_local_state(void)
{
	HASHCTL		ctl;

	if (channel_cxt != NULL)
		return;
	channel_cxt = AllocSetContextCreate(TopMemoryContext, "llm channel",
										ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(PendingRequest);
	ctl.hcxt = channel_cxt;
	pending = hash_create("llm pending requests", 64, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	if (!callbacks_registered)
	{
		RegisterXactCallback(llm_xact_callback, NULL);
		RegisterSubXactCallback(llm_subxact_callback, NULL);
		before_shmem_exit(llm_backend_exit, (Datum) 0);
		callbacks_registered = true;
	}
}

/* Is the worker of generation gen still running? */
static bool
worker_alive(uint32 gen)
{
	bool		alive;

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	alive = llm_shared->worker_pid != 0 && llm_shared->generation == gen;
	LWLockRelease(llm_shared->lock);
	return alive;
}

/*
 * Wait for the latch, a timeout, postmaster death or the client's socket
 * closing; then service interrupts (cancel, statement_timeout, terminate).
 */
static void
wait_latch(long timeout_ms)
{
	if (FeBeWaitSet != NULL)
	{
		WaitEvent	events[LLM_FEBE_NEVENTS];
		int			n;

		ModifyWaitEvent(FeBeWaitSet, LLM_FEBE_SOCKET_POS, WL_SOCKET_CLOSED, NULL);
		n = WaitEventSetWait(FeBeWaitSet, timeout_ms, events, lengthof(events), PG_WAIT_EXTENSION);
		for (int i = 0; i < n; i++)
		{
			if (events[i].events & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (events[i].events & WL_POSTMASTER_DEATH)
				proc_exit(1);
			if (events[i].events & WL_SOCKET_CLOSED)
				ereport(FATAL,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("connection to client lost while waiting for the llm worker")));
		}
	}
	else
	{
		int			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								   timeout_ms, PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
}

/* Clear our registry slot if it still names seg's handle. */
static void
unpublish(dsm_handle handle)
{
	LlmChannelSlot *slot = &llm_shared->slots[MyBackendId - 1];
	Latch	   *worker_latch = NULL;

	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	if (slot->handle == handle)
	{
		slot->handle = DSM_HANDLE_INVALID;
		slot->pid = 0;
		slot->latch = NULL;
		slot->seq++;
		llm_shared->slots_version++;
		worker_latch = llm_shared->worker_latch;
	}
	LWLockRelease(llm_shared->lock);
	if (worker_latch)
		SetLatch(worker_latch);
}

/*
 * Detach from the channel; the worker sees the detach (or the cleared slot)
 * and aborts every request of ours.  Outstanding local requests are marked
 * failed with reason.
 */
static void
drop_channel(const char *reason)
{
	HASH_SEQ_STATUS st;
	PendingRequest *p;
	dsm_handle	handle;

	if (channel == NULL)
		return;
	handle = dsm_segment_handle(channel->seg);
	shm_mq_detach(channel->req);
	shm_mq_detach(channel->resp);
	dsm_detach(channel->seg);
	pfree(channel);
	channel = NULL;
	unpublish(handle);

	hash_seq_init(&st, pending);
	while ((p = hash_seq_search(&st)) != NULL)
	{
		if (!p->done)
		{
			p->done = true;
			p->failed = true;
			p->sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
			p->message = MemoryContextStrdup(channel_cxt, reason);
			llm_quota_settle(&p->quota, NULL);
			if (p->generation)
				llm_progress_note_failed();
		}
	}
}

static void
llm_backend_exit(int code, Datum arg)
{
	HASH_SEQ_STATUS st;
	PendingRequest *p;

	/* requests still in flight end with us: charged what they reserved */
	if (pending != NULL)
	{
		hash_seq_init(&st, pending);
		while ((p = hash_seq_search(&st)) != NULL)
			llm_quota_settle(&p->quota, NULL);
	}
	/* the DSM mapping goes away with the process; just leave the registry clean */
	if (channel != NULL && llm_shared != NULL)
		unpublish(dsm_segment_handle(channel->seg));
}

/* Wait up to llm.worker_wait_timeout for a running worker; returns its generation. */
static uint32
wait_for_worker(void)
{
	TimestampTz start = GetCurrentTimestamp();

	for (;;)
	{
		uint32		gen = 0;
		int			pid;

		LWLockAcquire(llm_shared->lock, LW_SHARED);
		pid = llm_shared->worker_pid;
		gen = llm_shared->generation;
		LWLockRelease(llm_shared->lock);
		if (pid != 0)
			return gen;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), worker_wait_timeout_ms))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("llm worker is not running"),
					 errdetail("Waited %d ms for it to start (llm.worker_wait_timeout).",
							   worker_wait_timeout_ms),
					 errhint("Check the server log for errors of the \"llm worker\" process.")));
		wait_latch(100);
	}
}

static void
create_channel(void)
{
	shm_toc_estimator e;
	Size		size;
	dsm_segment *seg;
	shm_toc    *toc;
	llm_channel_header *hdr;
	shm_mq	   *reqmq;
	shm_mq	   *respmq;
	uint32		gen;
	LlmChannelSlot *slot;
	Latch	   *worker_latch;
	MemoryContext old;

	gen = wait_for_worker();

	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, sizeof(llm_channel_header));
	shm_toc_estimate_chunk(&e, LLM_REQUEST_QUEUE_SIZE);
	shm_toc_estimate_chunk(&e, LLM_RESPONSE_QUEUE_SIZE);
	shm_toc_estimate_keys(&e, 3);
	size = shm_toc_estimate(&e);

	old = MemoryContextSwitchTo(channel_cxt);
	seg = dsm_create(size, 0);
	dsm_pin_mapping(seg);		/* lives for the session, not the transaction */
	toc = shm_toc_create(LLM_CHANNEL_MAGIC, dsm_segment_address(seg), size);

	hdr = shm_toc_allocate(toc, sizeof(llm_channel_header));
	hdr->magic = LLM_CHANNEL_MAGIC;
	hdr->backend_pid = MyProcPid;
	hdr->generation = gen;
	shm_toc_insert(toc, LLM_CHANNEL_KEY_HEADER, hdr);

	reqmq = shm_mq_create(shm_toc_allocate(toc, LLM_REQUEST_QUEUE_SIZE), LLM_REQUEST_QUEUE_SIZE);
	shm_toc_insert(toc, LLM_CHANNEL_KEY_REQUEST, reqmq);
	shm_mq_set_sender(reqmq, MyProc);

	respmq = shm_mq_create(shm_toc_allocate(toc, LLM_RESPONSE_QUEUE_SIZE), LLM_RESPONSE_QUEUE_SIZE);
	shm_toc_insert(toc, LLM_CHANNEL_KEY_RESPONSE, respmq);
	shm_mq_set_receiver(respmq, MyProc);

	channel = palloc0(sizeof(LlmChannel));
	channel->seg = seg;
	channel->req = shm_mq_attach(reqmq, seg, NULL);
	channel->resp = shm_mq_attach(respmq, seg, NULL);
	channel->generation = gen;
	MemoryContextSwitchTo(old);

	slot = &llm_shared->slots[MyBackendId - 1];
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	slot->handle = dsm_segment_handle(seg);
	slot->generation = gen;
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	slot->seq++;
	llm_shared->slots_version++;
	worker_latch = llm_shared->worker_latch;
	LWLockRelease(llm_shared->lock);
	if (worker_latch)
		SetLatch(worker_latch);
}

static void
ensure_channel(void)
{
	check_registry();
	init_local_state();
	if (channel != NULL && (channel->send_in_progress || !worker_alive(channel->generation)))
		drop_channel("llm worker exited while the request was in progress");
	if (channel == NULL)
		create_channel();
}

static void
raise_worker_gone(void)
{
	drop_channel("llm worker exited while the request was in progress");
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("llm worker exited while the request was in progress"),
			 errhint("The worker restarts automatically; retry the statement.")));
}

/* Apply one response message to its pending request. */
static void
dispatch(const char *data, Size nbytes)
{
	llm_wire_msg m;
	const char *why;
	PendingRequest *p;

	if (llm_wire_decode(data, nbytes, &m, NULL, &why) != LLM_WIRE_OK)
		elog(ERROR, "llm: malformed response message (%zu bytes): %s", nbytes, why);

	p = hash_search(pending, &m.id, HASH_FIND, NULL);
	if (p == NULL || p->done)
		return;					/* aborted or unknown: ignore */

	switch (m.kind)
	{
		case LLM_WIRE_TEXT:
			appendBinaryStringInfo(&p->text, m.text, m.text_len);
			p->started = true;
			break;
		case LLM_WIRE_DONE:
			p->done = true;
			p->finish_reason = m.finish_reason;
			p->usage = m.usage;
			llm_quota_settle(&p->quota, &m.usage);
			p->n_scores = m.n_scores;
			if (m.n_scores > 0)
			{
				p->scores = MemoryContextAlloc(channel_cxt, m.n_scores * sizeof(double));
				memcpy(p->scores, m.scores, m.n_scores * sizeof(double));
			}
			if (p->generation)
				llm_progress_note_finished(&m.usage);
			break;
		case LLM_WIRE_ERROR:
			p->done = true;
			p->failed = true;
			p->sqlstate = m.sqlstate;
			p->message = MemoryContextAlloc(channel_cxt, m.text_len + 1);
			memcpy(p->message, m.text, m.text_len);
			p->message[m.text_len] = '\0';
			llm_quota_settle(&p->quota, NULL);
			if (p->generation)
				llm_progress_note_failed();
			break;
		case LLM_WIRE_VECTOR:
			p->done = true;
			p->finish_reason = LLM_FINISH_STOP;
			p->usage = m.usage;
			llm_quota_settle(&p->quota, &m.usage);
			p->n_vector = m.n_vector;
			p->vector = MemoryContextAlloc(channel_cxt, m.n_vector * sizeof(float));
			memcpy(p->vector, m.vector, m.n_vector * sizeof(float));
			if (p->generation)
				llm_progress_note_finished(&m.usage);
			break;
		case LLM_WIRE_TOKENS:
			p->done = true;
			p->n_tokens = m.n_ids;
			p->tokens = MemoryContextAlloc(channel_cxt, Max(m.n_ids, 1) * sizeof(int32));
			memcpy(p->tokens, m.ids, m.n_ids * sizeof(int32));
			break;
		default:
			elog(ERROR, "llm: unexpected response kind %u", (unsigned) m.kind);
	}
}

/* Receive and dispatch every available message; true if any arrived. */
static bool
receive_available(void)
{
	bool		any = false;

	while (channel != NULL)
	{
		Size		nbytes;
		void	   *data;
		shm_mq_result res;

		res = shm_mq_receive(channel->resp, &nbytes, &data, true);
		if (res == SHM_MQ_WOULD_BLOCK)
			break;
		if (res == SHM_MQ_DETACHED)
			raise_worker_gone();
		dispatch(data, nbytes);
		any = true;
	}
	return any;
}

void
llm_channel_poll(bool block)
{
	if (channel == NULL)
		return;
	if (receive_available() || !block)
		return;
	wait_latch(LLM_ALIVE_CHECK_MS);
	if (channel != NULL && !worker_alive(channel->generation))
	{
		/* the worker may have sent its last messages before exiting */
		receive_available();
		raise_worker_gone();
	}
}

/* Send one message, waiting (interruptibly) while the request queue is full. */
static void
channel_send(const char *data, Size len)
{
	channel->send_in_progress = true;
	for (;;)
	{
		shm_mq_result res = shm_mq_send(channel->req, len, data, true, true);

		if (res == SHM_MQ_SUCCESS)
			break;
		if (res == SHM_MQ_DETACHED)
			raise_worker_gone();
		/* full: keep draining responses so the worker's buffers shrink */
		if (!receive_available())
		{
			wait_latch(LLM_ALIVE_CHECK_MS);
			if (!worker_alive(channel->generation))
				raise_worker_gone();
		}
	}
	channel->send_in_progress = false;
}

/*
 * Register a pending request for m (its id assigned here) at nest_level,
 * then send it.  A SUBMIT is admitted under the token limit first
 * (quota.h): over it, with retry_at NULL, ERROR 53400; else 0 is returned
 * with *retry_at set, nothing sent.
 */
static uint64
submit_at(llm_wire_msg *m, int nest_level, int limit, TimestampTz *retry_at)
{
	PendingRequest *p;
	bool		found;
	uint64		id;
	size_t		len;
	char	   *buf;
	MemoryContext old;
	LlmQuotaTicket ticket = {0};

	ensure_channel();
	id = next_request_id++;
	m->id = id;
	len = llm_wire_encode(m, NULL, 0);
	if (len == 0)
		elog(ERROR, "llm: request cannot be encoded");
	buf = palloc(len);
	(void) llm_wire_encode(m, buf, len);
	if (m->kind == LLM_WIRE_SUBMIT && !llm_quota_admit(&m->request, limit, &ticket, retry_at))
	{
		pfree(buf);
		return 0;
	}

	/* from here the ticket is the pending request's: settled when it ends, is aborted or we exit */
	p = hash_search(pending, &id, HASH_ENTER, &found);
	memset(((char *) p) + sizeof(uint64), 0, sizeof(PendingRequest) - sizeof(uint64));
	p->nest_level = nest_level;
	p->generation = m->kind == LLM_WIRE_SUBMIT;
	p->quota = ticket;
	old = MemoryContextSwitchTo(channel_cxt);
	initStringInfo(&p->text);
	MemoryContextSwitchTo(old);
	if (p->generation)
		llm_progress_note_submitted();

	if (nest_level == SESSION_LEVEL)
	{
		/* no (sub)transaction abort forgets it: an error while sending must */
		PG_TRY();
		{
			channel_send(buf, len);
		}
		PG_CATCH();
		{
			llm_abort_request(id);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	else
		channel_send(buf, len);
	pfree(buf);
	return id;
}

static uint64
submit(llm_wire_msg *m)
{
	return submit_at(m, GetCurrentTransactionNestLevel(), 0, NULL);
}

void
llm_fill_client(llm_wire_client *client)
{
	client->pid = MyProcPid;
	client->role = GetUserId();
	client->database = MyDatabaseId;
}

/* The SUBMIT message of req from this backend (role, database, client). */
static void
submit_message(llm_wire_msg *m, const llm_request *req)
{
	memset(m, 0, sizeof(*m));
	m->kind = LLM_WIRE_SUBMIT;
	m->request = *req;
	m->role_id = GetUserId();
	m->database_id = MyDatabaseId;
	llm_fill_client(&m->client);
}

uint64
llm_submit(const llm_request *req)
{
	llm_wire_msg m;

	submit_message(&m, req);
	return submit_at(&m, GetCurrentTransactionNestLevel(), llm_quota_session_limit(), NULL);
}

uint64
llm_submit_session(const llm_request *req, int limit, TimestampTz *retry_at)
{
	llm_wire_msg m;

	submit_message(&m, req);
	return submit_at(&m, SESSION_LEVEL, limit, retry_at);
}

uint64
llm_submit_tokenize(const char *model, const char *utf8, int len)
{
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_TOKENIZE;
	m.model = model;
	m.text = utf8;
	m.text_len = len;
	return submit(&m);
}

uint64
llm_submit_detokenize(const char *model, const int32 *ids, int n)
{
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_DETOKENIZE;
	m.model = model;
	m.ids = ids;
	m.n_ids = n;
	return submit(&m);
}

bool
llm_request_is_done(uint64 id)
{
	PendingRequest *p;

	if (pending == NULL)
		return true;
	p = hash_search(pending, &id, HASH_FIND, NULL);
	return p == NULL || p->done;
}

bool
llm_request_pending(uint64 id)
{
	return pending != NULL && hash_search(pending, &id, HASH_FIND, NULL) != NULL;
}

bool
llm_request_started(uint64 id)
{
	PendingRequest *p;

	if (pending == NULL)
		return true;
	p = hash_search(pending, &id, HASH_FIND, NULL);
	return p == NULL || p->done || p->started;
}

bool
llm_take_text(uint64 id, StringInfo out)
{
	PendingRequest *p;

	if (pending == NULL)
		return false;
	p = hash_search(pending, &id, HASH_FIND, NULL);
	if (p == NULL || p->failed || p->text.len == 0)
		return false;
	appendBinaryStringInfo(out, p->text.data, p->text.len);
	resetStringInfo(&p->text);
	return true;
}

void
llm_wait_request(uint64 id)
{
	while (!llm_request_is_done(id))
		llm_channel_poll(true);
}

/* Free a request's buffers and remove it from the table. */
static void
forget(PendingRequest *p)
{
	uint64		id = p->id;

	/* aborted before its end: what it used is not known */
	llm_quota_settle(&p->quota, NULL);
	if (p->text.data)
		pfree(p->text.data);
	if (p->tokens)
		pfree(p->tokens);
	if (p->message)
		pfree(p->message);
	if (p->scores)
		pfree(p->scores);
	if (p->vector)
		pfree(p->vector);
	hash_search(pending, &id, HASH_REMOVE, NULL);
}

LlmResult *
llm_take_result(uint64 id)
{
	PendingRequest *p;
	LlmResult  *r = palloc0(sizeof(LlmResult));

	p = pending ? hash_search(pending, &id, HASH_FIND, NULL) : NULL;
	if (p == NULL || !p->done)
		elog(ERROR, "llm: request " UINT64_FORMAT " is not finished", id);

	if (p->failed)
	{
		r->failed = true;
		r->sqlstate = p->sqlstate ? p->sqlstate : ERRCODE_INTERNAL_ERROR;
		r->message = pstrdup(p->message ? p->message : "unknown error");
	}
	else
	{
		r->text = palloc(p->text.len + 1);
		memcpy(r->text, p->text.data, p->text.len);
		r->text[p->text.len] = '\0';
		r->text_len = p->text.len;
		if (p->tokens)
		{
			r->n_tokens = p->n_tokens;
			r->tokens = palloc(Max(p->n_tokens, 1) * sizeof(int32));
			memcpy(r->tokens, p->tokens, p->n_tokens * sizeof(int32));
		}
		r->finish_reason = p->finish_reason;
		r->usage = p->usage;
		if (p->n_scores > 0)
		{
			r->n_scores = p->n_scores;
			r->scores = palloc(p->n_scores * sizeof(double));
			memcpy(r->scores, p->scores, p->n_scores * sizeof(double));
		}
		if (p->n_vector > 0)
		{
			r->n_vector = p->n_vector;
			r->vector = palloc(p->n_vector * sizeof(float));
			memcpy(r->vector, p->vector, p->n_vector * sizeof(float));
		}
	}

	forget(p);
	return r;
}

/*
 * Tell the worker to drop request id.  Never waits: if the abort message
 * cannot go out at once (queue full, or a message half written because an
 * error interrupted a send) the whole channel is dropped instead, which
 * aborts every request of this backend in the worker.
 */
static void
send_abort(uint64 id)
{
	llm_wire_msg m;
	uint64		buf[LLM_WIRE_HEADER_SIZE / sizeof(uint64)];
	shm_mq_result res;

	if (channel == NULL)
		return;
	if (!channel->send_in_progress)
	{
		memset(&m, 0, sizeof(m));
		m.kind = LLM_WIRE_ABORT;
		m.id = id;
		if (llm_wire_encode(&m, buf, sizeof(buf)) != sizeof(buf))
			elog(ERROR, "llm: abort message cannot be encoded");
		res = shm_mq_send(channel->req, sizeof(buf), buf, true, true);
		if (res == SHM_MQ_SUCCESS)
			return;
		if (res == SHM_MQ_WOULD_BLOCK)
			channel->send_in_progress = true;
	}
	drop_channel("request aborted");
}

void
llm_abort_request(uint64 id)
{
	PendingRequest *p;

	if (pending == NULL)
		return;
	p = hash_search(pending, &id, HASH_FIND, NULL);
	if (p == NULL)
		return;
	if (!p->done)
	{
		send_abort(id);
		if (p->generation)
			llm_progress_note_aborted();
	}
	forget(p);
}

/* Abort and forget every request submitted at nesting level >= level. */
static void
abort_from_level(int level)
{
	HASH_SEQ_STATUS st;
	PendingRequest *p;
	uint64	   *ids;
	int			n = 0;
	long		total;

	if (pending == NULL || (total = hash_get_num_entries(pending)) == 0)
	{
		if (channel != NULL && channel->send_in_progress)
			drop_channel("request aborted");
		return;
	}
	ids = MemoryContextAlloc(channel_cxt, total * sizeof(uint64));
	hash_seq_init(&st, pending);
	while ((p = hash_seq_search(&st)) != NULL)
		if (p->nest_level >= level)
			ids[n++] = p->id;
	for (int i = 0; i < n; i++)
		llm_abort_request(ids[i]);
	pfree(ids);
	if (channel != NULL && channel->send_in_progress)
		drop_channel("request aborted");
}

static void
llm_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			/* nothing may outlive the transaction */
			abort_from_level(0);
			break;
		default:
			break;
	}
}

static void
llm_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		abort_from_level(GetCurrentTransactionNestLevel());
	else if (event == SUBXACT_EVENT_COMMIT_SUB && pending != NULL)
	{
		/*
		 * The parent answers for what a released subtransaction submitted
		 * and left running (a stream's cursor fetched from inside it), so a
		 * later sibling's rollback leaves it alone.
		 */
		int			level = GetCurrentTransactionNestLevel();
		HASH_SEQ_STATUS st;
		PendingRequest *p;

		hash_seq_init(&st, pending);
		while ((p = hash_seq_search(&st)) != NULL)
			if (p->nest_level >= level)
				p->nest_level = level - 1;
	}
}

int
llm_worker_wait_timeout(void)
{
	return worker_wait_timeout_ms;
}

void
llm_channel_define_gucs(void)
{
	DefineCustomIntVariable("llm.worker_wait_timeout",
							"How long a request waits for the llm worker to be running before failing.",
							"Covers a worker that is starting or restarting after an exit.",
							&worker_wait_timeout_ms,
							30000, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
}
