/*
 * channel.c — backend side of the DSM/shm_mq channel to the llm worker.
 *
 * See channel.h for the contract and protocol.h for the wire format.  The
 * channel is created lazily on first use, published in this backend's slot
 * of the registry (llm.h) and survives transactions (the mapping is pinned);
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
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "channel.h"
#include "llm.h"

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

typedef struct LlmChannel
{
	dsm_segment *seg;
	shm_mq_handle *req;
	shm_mq_handle *resp;
	uint32		generation;
	bool		send_in_progress;	/* a message is partly in the request queue */
} LlmChannel;

/* One submitted request, until its result is taken or it is aborted. */
typedef struct PendingRequest
{
	uint64		id;				/* hash key */
	int			nest_level;		/* transaction nesting level at submit */
	LlmRequestKind kind;
	bool		done;
	bool		failed;
	StringInfoData text;		/* TEXT deltas (UTF-8) */
	int32	   *tokens;
	int			n_tokens;
	LlmResponseMsg final;		/* the DONE / ERROR header */
	char	   *message;		/* ERROR payload */
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
			p->final.sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
			p->message = MemoryContextStrdup(channel_cxt, reason);
		}
	}
}

static void
llm_backend_exit(int code, Datum arg)
{
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
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), llm_worker_wait_timeout_ms))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("llm worker is not running"),
					 errdetail("Waited %d ms for it to start (llm.worker_wait_timeout).",
							   llm_worker_wait_timeout_ms),
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
	LlmChannelHeader *hdr;
	shm_mq	   *reqmq;
	shm_mq	   *respmq;
	uint32		gen;
	LlmChannelSlot *slot;
	Latch	   *worker_latch;
	MemoryContext old;

	gen = wait_for_worker();

	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, sizeof(LlmChannelHeader));
	shm_toc_estimate_chunk(&e, LLM_REQUEST_QUEUE_SIZE);
	shm_toc_estimate_chunk(&e, LLM_RESPONSE_QUEUE_SIZE);
	shm_toc_estimate_keys(&e, 3);
	size = shm_toc_estimate(&e);

	old = MemoryContextSwitchTo(channel_cxt);
	seg = dsm_create(size, 0);
	dsm_pin_mapping(seg);		/* lives for the session, not the transaction */
	toc = shm_toc_create(LLM_CHANNEL_MAGIC, dsm_segment_address(seg), size);

	hdr = shm_toc_allocate(toc, sizeof(LlmChannelHeader));
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
	LlmResponseMsg h;
	const char *payload;
	PendingRequest *p;

	if (nbytes < sizeof(h))
		elog(ERROR, "llm: malformed response message (%zu bytes)", nbytes);
	memcpy(&h, data, sizeof(h));
	if (h.payload_len != nbytes - sizeof(h))
		elog(ERROR, "llm: malformed response message (payload %u of %zu bytes)",
			 h.payload_len, nbytes);
	payload = data + sizeof(h);

	p = hash_search(pending, &h.id, HASH_FIND, NULL);
	if (p == NULL || p->done)
		return;					/* aborted or unknown: ignore */

	switch ((LlmResponseKind) h.kind)
	{
		case LLM_RESP_TEXT:
			appendBinaryStringInfo(&p->text, payload, h.payload_len);
			break;
		case LLM_RESP_DONE:
			p->done = true;
			p->final = h;
			break;
		case LLM_RESP_ERROR:
			p->done = true;
			p->failed = true;
			p->final = h;
			p->message = MemoryContextAlloc(channel_cxt, h.payload_len + 1);
			memcpy(p->message, payload, h.payload_len);
			p->message[h.payload_len] = '\0';
			break;
		case LLM_RESP_TOKENS:
			p->done = true;
			p->final = h;
			p->n_tokens = h.payload_len / sizeof(int32);
			p->tokens = MemoryContextAlloc(channel_cxt, Max(h.payload_len, 1));
			memcpy(p->tokens, payload, h.payload_len);
			break;
		default:
			elog(ERROR, "llm: unknown response kind %u", h.kind);
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

static void
append_string(StringInfo buf, const char *s, uint32 len)
{
	appendBinaryStringInfo(buf, (const char *) &len, sizeof(len));
	appendBinaryStringInfo(buf, s, len);
}

/* Register a pending request, then send header + payload. */
static uint64
submit(LlmRequestMsg *hdr, const char *payload, uint32 payload_len)
{
	PendingRequest *p;
	StringInfoData msg;
	bool		found;
	uint64		id;
	MemoryContext old;

	ensure_channel();
	id = next_request_id++;
	hdr->id = id;
	hdr->payload_len = payload_len;

	p = hash_search(pending, &id, HASH_ENTER, &found);
	memset(((char *) p) + sizeof(uint64), 0, sizeof(PendingRequest) - sizeof(uint64));
	p->nest_level = GetCurrentTransactionNestLevel();
	p->kind = hdr->kind;
	old = MemoryContextSwitchTo(channel_cxt);
	initStringInfo(&p->text);
	MemoryContextSwitchTo(old);

	initStringInfo(&msg);
	appendBinaryStringInfo(&msg, (const char *) hdr, sizeof(*hdr));
	appendBinaryStringInfo(&msg, payload, payload_len);
	channel_send(msg.data, msg.len);
	pfree(msg.data);
	return id;
}

/*
 * Prefix-cache isolation key of this session's next request, by
 * llm.prefix_cache_isolation: 0 (shared by all), or a tag and the current
 * role's or database's OID.  The worker mixes it with the model identity into
 * the first block's hash, so keys that differ never share a block.
 */
uint64
llm_prefix_cache_salt(void)
{
	switch (llm_prefix_cache_isolation)
	{
		case LLM_PREFIX_ISOLATION_ROLE:
			return ((uint64) LLM_PREFIX_ISOLATION_ROLE << 32) | (uint64) GetUserId();
		case LLM_PREFIX_ISOLATION_DATABASE:
			return ((uint64) LLM_PREFIX_ISOLATION_DATABASE << 32) | (uint64) MyDatabaseId;
		default:
			return 0;
	}
}

uint64
llm_submit_generate(const LlmGenRequest *req)
{
	LlmRequestMsg hdr;
	StringInfoData payload;
	uint64		id;

	memset(&hdr, 0, sizeof(hdr));
	hdr.kind = req->kind;
	hdr.max_tokens = req->max_tokens;
	hdr.top_k = req->top_k;
	hdr.temperature = req->temperature;
	hdr.top_p = req->top_p;
	hdr.min_p = req->min_p;
	hdr.repetition_penalty = req->repetition_penalty;
	hdr.seed = req->seed;
	hdr.n_stop = req->n_stop;
	hdr.debug_poison = llm_debug_poison_logits;
	hdr.cache_salt = llm_prefix_cache_salt();
	if (req->has_seed)
		hdr.flags |= LLM_REQ_FLAG_SEED;
	if (req->raw)
		hdr.flags |= LLM_REQ_FLAG_RAW;
	if (req->ignore_eos)
		hdr.flags |= LLM_REQ_FLAG_IGNORE_EOS;

	initStringInfo(&payload);
	for (int i = 0; i < req->n_stop; i++)
		append_string(&payload, req->stop[i], strlen(req->stop[i]));
	if (req->kind == LLM_REQ_GENERATE)
	{
		if (req->system != NULL)
		{
			hdr.flags |= LLM_REQ_FLAG_SYSTEM;
			append_string(&payload, req->system, strlen(req->system));
		}
		append_string(&payload, req->prompt, strlen(req->prompt));
	}
	else
	{
		Assert(req->kind == LLM_REQ_CHAT);
		hdr.n_messages = req->n_messages;
		for (int i = 0; i < req->n_messages; i++)
		{
			append_string(&payload, req->roles[i], strlen(req->roles[i]));
			append_string(&payload, req->contents[i], strlen(req->contents[i]));
		}
	}
	id = submit(&hdr, payload.data, payload.len);
	pfree(payload.data);
	return id;
}

uint64
llm_submit_tokenize(const char *utf8, int len)
{
	LlmRequestMsg hdr;
	StringInfoData payload;
	uint64		id;

	memset(&hdr, 0, sizeof(hdr));
	hdr.kind = LLM_REQ_TOKENIZE;
	initStringInfo(&payload);
	append_string(&payload, utf8, len);
	id = submit(&hdr, payload.data, payload.len);
	pfree(payload.data);
	return id;
}

uint64
llm_submit_detokenize(const int32 *ids, int n)
{
	LlmRequestMsg hdr;

	memset(&hdr, 0, sizeof(hdr));
	hdr.kind = LLM_REQ_DETOKENIZE;
	return submit(&hdr, (const char *) ids, n * sizeof(int32));
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

void
llm_wait_request(uint64 id)
{
	while (!llm_request_is_done(id))
		llm_channel_poll(true);
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
		r->sqlstate = p->final.sqlstate ? p->final.sqlstate : ERRCODE_INTERNAL_ERROR;
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
		r->finish_reason = p->final.finish_reason == LLM_WIRE_FINISH_LENGTH ? "length" : "stop";
		r->prompt_tokens = p->final.prompt_tokens;
		r->cached_tokens = p->final.cached_tokens;
		r->completion_tokens = p->final.completion_tokens;
		r->ttft_ms = p->final.ttft_ms;
		r->total_ms = p->final.total_ms;
	}

	if (p->text.data)
		pfree(p->text.data);
	if (p->tokens)
		pfree(p->tokens);
	if (p->message)
		pfree(p->message);
	hash_search(pending, &id, HASH_REMOVE, NULL);
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
	LlmRequestMsg hdr;
	shm_mq_result res;

	if (channel == NULL)
		return;
	if (!channel->send_in_progress)
	{
		memset(&hdr, 0, sizeof(hdr));
		hdr.kind = LLM_REQ_ABORT;
		hdr.id = id;
		res = shm_mq_send(channel->req, sizeof(hdr), &hdr, true, true);
		if (res == SHM_MQ_SUCCESS)
			return;
		if (res == SHM_MQ_WOULD_BLOCK)
			channel->send_in_progress = true;
	}
	drop_channel("request aborted");
}

static void
forget(PendingRequest *p)
{
	uint64		id = p->id;

	if (p->text.data)
		pfree(p->text.data);
	if (p->tokens)
		pfree(p->tokens);
	if (p->message)
		pfree(p->message);
	hash_search(pending, &id, HASH_REMOVE, NULL);
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
		send_abort(id);
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
}
