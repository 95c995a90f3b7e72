/*
 * worker.c — the llm background worker: owns the engine (model, KV cache,
 * scheduler) and serves every backend's channel.
 *
 * Loop: reload config on SIGHUP -> attach/drop channels named in the
 * registry -> drain request queues (tokenize, validate, queue in the engine)
 * -> one engine step if there is work -> route events to per-channel
 * outboxes -> send outboxes without blocking -> sleep on the latch when idle.
 *
 * It never crashes on bad input or a bad model: a model that cannot be loaded
 * leaves the worker up answering every request with an ERROR naming the file
 * and the reason, until a configuration reload loads it.  An ereport(ERROR)
 * in this process has no handler above it and so becomes FATAL, i.e. a clean
 * proc_exit(1) and a restart after bgw_restart_time, never a crash-restart of
 * the server.  The engine is plain C (malloc'd memory, its own compute
 * threads with signals blocked) and never calls into PostgreSQL.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"
#include "utils/timestamp.h"

#include "engine.h"
#include "llm.h"
#include "protocol.h"

/* A response waiting to be written into a channel's response queue. */
typedef struct OutMsg
{
	dlist_node	node;
	Size		len;
	Size		cap;
	char	   *data;			/* LlmResponseMsg + payload */
} OutMsg;

/* A request living in the engine. */
typedef struct WorkerRequest
{
	dlist_node	node;			/* in its channel's requests */
	int			slot;
	uint64		client_id;		/* the backend's id */
	uint64		engine_id;
} WorkerRequest;

typedef struct WorkerChannel
{
	bool		in_use;
	uint64		seen_seq;		/* slot seq last looked at (attached or refused) */
	int			pid;
	dsm_segment *seg;
	shm_mq_handle *req;
	shm_mq_handle *resp;
	dlist_head	requests;
	dlist_head	outbox;
	bool		head_attempted; /* outbox head partly sent: must not change */
	bool		gone;			/* counterparty detached: drop at next scan */
} WorkerChannel;

/* Engine settings the engine was created with, to detect changes on reload. */
typedef struct LoadedConfig
{
	char		model_path[MAXPGPATH];
	int			device;
	int			threads;
	int			context_length;
	int			kv_cache_size_mb;
	int			block_size;
	int			max_batched_tokens;
	int			max_running_requests;
	bool		prefix_caching;
} LoadedConfig;

/* Counter deltas accumulated during a loop iteration, published at its end. */
typedef struct StatsDelta
{
	int64		finished;
	int64		failed;
	int64		aborted;
	int64		prompt_tokens;
	int64		cached_tokens;
	int64		completion_tokens;
	int64		steps;
	int			n_ttft;
	int			n_tpot;
	float		ttft[64];
	float		tpot[64];
} StatsDelta;

static volatile sig_atomic_t got_sigterm = false;

static MemoryContext worker_cxt;
static MemoryContext msg_cxt;
static WorkerChannel *channels;
static int	n_channels;
static uint32 my_generation;
static uint64 seen_slots_version = PG_UINT64_MAX;
static llm_engine *engine = NULL;
static LoadedConfig loaded;
static int	model_sqlstate;
static char model_error[LLM_MODEL_ERROR_LEN];
static uint64 next_engine_id = 1;
static StatsDelta delta;

/*
 * Records of requests finished since the last publish, copied into
 * llm_shared->recent by publish_stats(); when it fills up within one loop
 * iteration (many requests failed at once) it is flushed on its own.
 */
#define PENDING_RECORDS 256
static LlmRequestRecord pending_records[PENDING_RECORDS];
static int	n_pending_records = 0;
static bool stats_dirty = true;
static int64 last_engine_preemptions = 0;
static int64 last_engine_prefix_queries = 0;
static int64 last_engine_prefix_hits = 0;

static void
worker_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	got_sigterm = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

/* ---------- outbox ---------- */

static OutMsg *
outmsg_new(const LlmResponseMsg *h, const char *payload, uint32 len)
{
	OutMsg	   *m = MemoryContextAlloc(worker_cxt, sizeof(OutMsg));

	m->cap = Max(sizeof(LlmResponseMsg) + len, 256);
	m->data = MemoryContextAlloc(worker_cxt, m->cap);
	m->len = sizeof(LlmResponseMsg) + len;
	memcpy(m->data, h, sizeof(LlmResponseMsg));
	if (len > 0)
		memcpy(m->data + sizeof(LlmResponseMsg), payload, len);
	return m;
}

static void
outmsg_free(OutMsg *m)
{
	pfree(m->data);
	pfree(m);
}

/*
 * Queue a response.  Text deltas of one request are merged into the last
 * queued TEXT message of that request unless it is partly sent already, so a
 * slow reader gets few large messages rather than one per token.
 */
static void
queue_response(WorkerChannel *ch, const LlmResponseMsg *h, const char *payload, uint32 len)
{
	if (!ch->in_use || ch->gone)
		return;
	if (h->kind == LLM_RESP_TEXT && !dlist_is_empty(&ch->outbox))
	{
		OutMsg	   *tail = dlist_tail_element(OutMsg, node, &ch->outbox);
		bool		tail_is_busy_head = ch->head_attempted &&
			dlist_head_element(OutMsg, node, &ch->outbox) == tail;
		LlmResponseMsg th;

		memcpy(&th, tail->data, sizeof(th));
		if (!tail_is_busy_head && th.kind == LLM_RESP_TEXT && th.id == h->id)
		{
			if (tail->len + len > tail->cap)
			{
				tail->cap = Max(tail->cap * 2, tail->len + len);
				tail->data = repalloc(tail->data, tail->cap);
			}
			memcpy(tail->data + tail->len, payload, len);
			tail->len += len;
			th.payload_len += len;
			memcpy(tail->data, &th, sizeof(th));
			return;
		}
	}
	dlist_push_tail(&ch->outbox, &outmsg_new(h, payload, len)->node);
}

static void
queue_error(WorkerChannel *ch, uint64 client_id, int sqlstate, const char *message)
{
	LlmResponseMsg h;

	memset(&h, 0, sizeof(h));
	h.kind = LLM_RESP_ERROR;
	h.id = client_id;
	h.sqlstate = sqlstate;
	h.payload_len = strlen(message);
	queue_response(ch, &h, message, h.payload_len);
}

/* Send queued responses without blocking; stop at the first that does not fit. */
static void
flush_outbox(WorkerChannel *ch)
{
	while (ch->in_use && !ch->gone && !dlist_is_empty(&ch->outbox))
	{
		OutMsg	   *m = dlist_head_element(OutMsg, node, &ch->outbox);
		shm_mq_result res = shm_mq_send(ch->resp, m->len, m->data, true, true);

		if (res == SHM_MQ_SUCCESS)
		{
			dlist_delete(&m->node);
			outmsg_free(m);
			ch->head_attempted = false;
		}
		else if (res == SHM_MQ_WOULD_BLOCK)
		{
			ch->head_attempted = true;
			break;
		}
		else
		{
			ch->gone = true;
			break;
		}
	}
}

/* ---------- status mapping ---------- */

static int
status_sqlstate(llm_status s)
{
	switch (s)
	{
		case LLM_ERR_INVALID_PARAM:
		case LLM_ERR_EMPTY_PROMPT:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case LLM_ERR_PROMPT_TOO_LONG:
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		case LLM_ERR_INVALID_TEXT:
			return ERRCODE_CHARACTER_NOT_IN_REPERTOIRE;
		case LLM_ERR_OUT_OF_MEMORY:
			return ERRCODE_OUT_OF_MEMORY;
		default:
			return ERRCODE_INTERNAL_ERROR;
	}
}

/* ---------- per-request records (llm_recent_requests) ---------- */

/* Copy the pending records into the shared ring; caller holds the lock exclusively. */
static void
append_recent_locked(void)
{
	LlmRecentRequests *ring = &llm_shared->recent;

	for (int i = 0; i < n_pending_records; i++)
	{
		ring->rec[ring->written % LLM_RECENT_REQUESTS] = pending_records[i];
		ring->written++;
	}
	n_pending_records = 0;
}

/*
 * Note one finished request for llm_recent_requests().  usage NULL: the
 * request failed or was aborted before the engine reported its usage.
 */
static void
record_request(LlmRequestOutcome outcome, const llm_usage *usage)
{
	LlmRequestRecord *rec;

	if (n_pending_records == PENDING_RECORDS)
	{
		LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
		append_recent_locked();
		LWLockRelease(llm_shared->lock);
	}
	rec = &pending_records[n_pending_records++];
	rec->finished_at = GetCurrentTimestamp();
	rec->outcome = outcome;
	if (usage)
	{
		rec->prompt_tokens = usage->prompt_tokens;
		rec->cached_tokens = usage->cached_tokens;
		rec->completion_tokens = usage->completion_tokens;
		rec->ttft_ms = usage->completion_tokens > 0 ? usage->ttft_ms : -1.0;
		rec->total_ms = usage->total_ms;
	}
	else
	{
		rec->prompt_tokens = rec->cached_tokens = rec->completion_tokens = -1;
		rec->ttft_ms = rec->total_ms = -1.0;
	}
	stats_dirty = true;
}

/* One request failed: count it and record it (without usage). */
static void
count_failed(void)
{
	delta.failed++;
	record_request(LLM_OUTCOME_ERROR, NULL);
}

/* ---------- requests ---------- */

static void
free_request(WorkerRequest *r)
{
	dlist_delete(&r->node);
	pfree(r);
}

/* Abort every request of a channel in the engine (no events follow). */
static void
abort_channel_requests(WorkerChannel *ch)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &ch->requests)
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		if (engine)
			llm_engine_abort(engine, r->engine_id);
		delta.aborted++;
		record_request(LLM_OUTCOME_ABORTED, NULL);
		free_request(r);
	}
	stats_dirty = true;
}

/* Fail every live request with an ERROR (engine reload). */
static void
fail_all_requests(int sqlstate, const char *message)
{
	for (int i = 0; i < n_channels; i++)
	{
		WorkerChannel *ch = &channels[i];
		dlist_mutable_iter it;

		if (!ch->in_use)
			continue;
		dlist_foreach_modify(it, &ch->requests)
		{
			WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

			if (engine)
				llm_engine_abort(engine, r->engine_id);
			queue_error(ch, r->client_id, sqlstate, message);
			count_failed();
			free_request(r);
		}
	}
	stats_dirty = true;
}

/* ---------- engine events ---------- */

static void
on_engine_event(const llm_event *ev, void *cb_arg)
{
	WorkerRequest *r = (WorkerRequest *) ev->user_data;
	WorkerChannel *ch;
	LlmResponseMsg h;

	if (r == NULL)
		return;
	ch = &channels[r->slot];
	memset(&h, 0, sizeof(h));
	h.id = r->client_id;

	switch (ev->kind)
	{
		case LLM_EVENT_TEXT:
			if (ev->text_len > 0)
			{
				h.kind = LLM_RESP_TEXT;
				h.payload_len = ev->text_len;
				queue_response(ch, &h, ev->text, ev->text_len);
			}
			break;
		case LLM_EVENT_FINISHED:
			h.kind = LLM_RESP_DONE;
			h.finish_reason = ev->finish_reason == LLM_FINISH_LENGTH ?
				LLM_WIRE_FINISH_LENGTH : LLM_WIRE_FINISH_STOP;
			h.prompt_tokens = ev->usage.prompt_tokens;
			h.cached_tokens = ev->usage.cached_tokens;
			h.completion_tokens = ev->usage.completion_tokens;
			h.ttft_ms = ev->usage.ttft_ms;
			h.total_ms = ev->usage.total_ms;
			queue_response(ch, &h, NULL, 0);
			delta.finished++;
			delta.prompt_tokens += ev->usage.prompt_tokens;
			delta.cached_tokens += ev->usage.cached_tokens;
			delta.completion_tokens += ev->usage.completion_tokens;
			if (ev->usage.completion_tokens > 0 && delta.n_ttft < lengthof(delta.ttft))
				delta.ttft[delta.n_ttft++] = ev->usage.ttft_ms;
			if (ev->usage.completion_tokens > 1 && delta.n_tpot < lengthof(delta.tpot))
				delta.tpot[delta.n_tpot++] = (ev->usage.total_ms - ev->usage.ttft_ms) /
					(ev->usage.completion_tokens - 1);
			record_request(ev->finish_reason == LLM_FINISH_LENGTH ?
						   LLM_OUTCOME_LENGTH : LLM_OUTCOME_STOP, &ev->usage);
			free_request(r);
			break;
		case LLM_EVENT_ERROR:
			queue_error(ch, r->client_id, status_sqlstate(ev->status),
						ev->text && ev->text[0] ? ev->text : llm_status_name(ev->status));
			count_failed();
			free_request(r);
			break;
	}
	stats_dirty = true;
}

/* ---------- shared stats ---------- */

/* engine step count at the last publish: each step's batch size counts once */
static int64 published_steps = -1;

static void
publish_stats(void)
{
	llm_engine_stats es;

	if (!stats_dirty)
		return;
	memset(&es, 0, sizeof(es));
	if (engine)
		llm_engine_get_stats(engine, &es);

	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	{
		LlmStats   *s = &llm_shared->stats;

		s->requests_running = es.n_running;
		s->requests_waiting = es.n_waiting;
		/* idle: no current batch; the max folds in each step once, so a reset sticks */
		s->batch_size = es.n_running > 0 ? es.last_batch_seqs : 0;
		if (es.n_steps != published_steps)
		{
			s->max_batch_size = Max(s->max_batch_size, es.last_batch_seqs);
			published_steps = es.n_steps;
		}
		s->kv_blocks_used = es.kv_blocks_used;
		s->kv_blocks_cached = es.kv_blocks_cached;
		s->kv_blocks_total = es.kv_blocks_total;
		s->requests_finished += delta.finished;
		s->requests_failed += delta.failed;
		s->requests_aborted += delta.aborted;
		s->prompt_tokens += delta.prompt_tokens;
		s->cached_tokens += delta.cached_tokens;
		s->completion_tokens += delta.completion_tokens;
		s->steps += delta.steps;
		if (engine && es.n_preemptions >= last_engine_preemptions)
			s->preemptions += es.n_preemptions - last_engine_preemptions;
		if (engine && es.prefix_queries >= last_engine_prefix_queries &&
			es.cached_prompt_tokens >= last_engine_prefix_hits)
		{
			s->prefix_query_tokens += es.prefix_queries - last_engine_prefix_queries;
			s->prefix_hit_tokens += es.cached_prompt_tokens - last_engine_prefix_hits;
		}
		for (int i = 0; i < delta.n_ttft; i++)
			llm_latency_add(&s->ttft, delta.ttft[i]);
		for (int i = 0; i < delta.n_tpot; i++)
			llm_latency_add(&s->tpot, delta.tpot[i]);
		append_recent_locked();
	}
	LWLockRelease(llm_shared->lock);
	last_engine_preemptions = es.n_preemptions;
	last_engine_prefix_queries = es.prefix_queries;
	last_engine_prefix_hits = es.cached_prompt_tokens;
	memset(&delta, 0, sizeof(delta));
	stats_dirty = false;
}

/* ---------- model loading ---------- */

static void
snapshot_config(LoadedConfig *c)
{
	memset(c, 0, sizeof(*c));
	strlcpy(c->model_path, llm_model_path ? llm_model_path : "", MAXPGPATH);
	c->device = llm_device;
	c->threads = llm_threads;
	c->context_length = llm_context_length;
	c->kv_cache_size_mb = llm_kv_cache_size_mb;
	c->block_size = llm_block_size;
	c->max_batched_tokens = llm_max_batched_tokens;
	c->max_running_requests = llm_max_running_requests;
	c->prefix_caching = llm_prefix_caching;
}

static void
set_model_state(LlmModelState state)
{
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	llm_shared->model_state = state;
	strlcpy(llm_shared->model_path, loaded.model_path, MAXPGPATH);
	llm_shared->model_sqlstate = model_sqlstate;
	strlcpy(llm_shared->model_error, state == LLM_MODEL_FAILED ? model_error : "",
			LLM_MODEL_ERROR_LEN);
	strlcpy(llm_shared->device, llm_device_name(loaded.device), sizeof(llm_shared->device));
	if (state == LLM_MODEL_READY)
	{
		size_t		need;

		llm_shared->n_ctx = llm_engine_n_ctx(engine);
		need = llm_engine_model_info_json(engine, llm_shared->model_info, LLM_MODEL_INFO_LEN);
		if (need >= LLM_MODEL_INFO_LEN)
			strlcpy(llm_shared->model_info, "{}", LLM_MODEL_INFO_LEN);
	}
	else
	{
		llm_shared->n_ctx = 0;
		llm_shared->model_info[0] = '\0';
	}
	LWLockRelease(llm_shared->lock);
	stats_dirty = true;
}

/* (Re)create the engine from the current GUCs; failure is recorded, not raised. */
static void
load_engine(void)
{
	llm_engine_config cfg;
	struct stat st;
	char		err[LLM_MODEL_ERROR_LEN];

	if (engine)
	{
		llm_engine_destroy(engine);
		engine = NULL;
	}
	snapshot_config(&loaded);
	model_error[0] = '\0';
	model_sqlstate = 0;
	set_model_state(LLM_MODEL_LOADING);
	set_ps_display("loading model");

	if (loaded.model_path[0] == '\0')
	{
		model_sqlstate = ERRCODE_UNDEFINED_FILE;
		snprintf(model_error, sizeof(model_error), "llm.model is empty");
	}
	else if (stat(loaded.model_path, &st) != 0)
	{
		model_sqlstate = ERRCODE_UNDEFINED_FILE;
		snprintf(model_error, sizeof(model_error), "could not access model file \"%s\": %m",
				 loaded.model_path);
	}
	else
	{
		llm_engine_config_defaults(&cfg);
		cfg.model_path = loaded.model_path;
		cfg.device = llm_device_name(loaded.device);
		cfg.n_threads = loaded.threads;
		cfg.n_ctx = loaded.context_length;
		cfg.block_size = loaded.block_size;
		cfg.kv_cache_bytes = (int64_t) loaded.kv_cache_size_mb * 1024 * 1024;
		cfg.max_batched_tokens = loaded.max_batched_tokens;
		cfg.max_running = loaded.max_running_requests;
		cfg.prefix_caching = loaded.prefix_caching;
		err[0] = '\0';
		engine = llm_engine_create(&cfg, err, sizeof(err));
		if (engine == NULL)
		{
			model_sqlstate = ERRCODE_INTERNAL_ERROR;
			snprintf(model_error, sizeof(model_error), "could not load model file \"%s\": %s",
					 loaded.model_path, err[0] ? err : "unknown error");
		}
	}

	if (engine)
	{
		set_model_state(LLM_MODEL_READY);
		ereport(LOG,
				(errmsg("llm worker loaded model \"%s\" (device %s, context %d tokens)",
						loaded.model_path, llm_device_name(loaded.device),
						llm_engine_n_ctx(engine))));
		set_ps_display("ready");
	}
	else
	{
		set_model_state(LLM_MODEL_FAILED);
		ereport(WARNING,
				(errmsg("llm worker: %s", model_error),
				 errhint("Fix llm.model and reload the configuration (SELECT pg_reload_conf()).")));
		set_ps_display("model failed");
	}
	last_engine_preemptions = 0;
	last_engine_prefix_queries = 0;
	last_engine_prefix_hits = 0;
}

static void
reload_config(void)
{
	LoadedConfig now;

	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	snapshot_config(&now);
	if (engine != NULL && memcmp(&now, &loaded, sizeof(now)) == 0)
		return;
	/* changed settings, or a failed model to retry */
	if (engine != NULL)
		fail_all_requests(ERRCODE_OPERATOR_INTERVENTION,
						  "request aborted: the llm worker is reloading its model after a configuration change");
	publish_stats();
	load_engine();
}

/* ---------- channels ---------- */

static void
drop_channel(int i)
{
	WorkerChannel *ch = &channels[i];
	dlist_mutable_iter it;

	if (!ch->in_use)
		return;
	abort_channel_requests(ch);
	dlist_foreach_modify(it, &ch->outbox)
	{
		OutMsg	   *m = dlist_container(OutMsg, node, it.cur);

		dlist_delete(&m->node);
		outmsg_free(m);
	}
	shm_mq_detach(ch->req);
	shm_mq_detach(ch->resp);
	dsm_detach(ch->seg);
	ch->in_use = false;
	ch->gone = false;
	ch->head_attempted = false;
	ch->seg = NULL;
	ch->req = ch->resp = NULL;
}

static void
attach_channel(int i, dsm_handle handle, int pid)
{
	WorkerChannel *ch = &channels[i];
	dsm_segment *seg;
	shm_toc    *toc;
	LlmChannelHeader *hdr;
	shm_mq	   *reqmq;
	shm_mq	   *respmq;
	MemoryContext old;

	old = MemoryContextSwitchTo(worker_cxt);
	seg = dsm_attach(handle);
	if (seg == NULL)
	{
		MemoryContextSwitchTo(old);
		return;					/* the backend is gone already */
	}
	dsm_pin_mapping(seg);
	toc = shm_toc_attach(LLM_CHANNEL_MAGIC, dsm_segment_address(seg));
	hdr = toc ? shm_toc_lookup(toc, LLM_CHANNEL_KEY_HEADER, true) : NULL;
	reqmq = toc ? shm_toc_lookup(toc, LLM_CHANNEL_KEY_REQUEST, true) : NULL;
	respmq = toc ? shm_toc_lookup(toc, LLM_CHANNEL_KEY_RESPONSE, true) : NULL;
	if (hdr == NULL || reqmq == NULL || respmq == NULL ||
		hdr->magic != LLM_CHANNEL_MAGIC || hdr->generation != my_generation)
	{
		ereport(LOG, (errmsg("llm worker: ignoring malformed channel of process %d", pid)));
		dsm_detach(seg);
		MemoryContextSwitchTo(old);
		return;
	}
	shm_mq_set_receiver(reqmq, MyProc);
	shm_mq_set_sender(respmq, MyProc);
	ch->req = shm_mq_attach(reqmq, seg, NULL);
	ch->resp = shm_mq_attach(respmq, seg, NULL);
	ch->seg = seg;
	ch->pid = pid;
	ch->in_use = true;
	ch->gone = false;
	ch->head_attempted = false;
	dlist_init(&ch->requests);
	dlist_init(&ch->outbox);
	MemoryContextSwitchTo(old);
}

/* Attach new channels, drop replaced/cleared/detached ones. */
static void
scan_channels(void)
{
	uint64		version;
	LlmChannelSlot *snap;

	for (int i = 0; i < n_channels; i++)
		if (channels[i].in_use && channels[i].gone)
			drop_channel(i);

	LWLockAcquire(llm_shared->lock, LW_SHARED);
	version = llm_shared->slots_version;
	LWLockRelease(llm_shared->lock);
	if (version == seen_slots_version)
		return;

	snap = palloc(sizeof(LlmChannelSlot) * n_channels);
	LWLockAcquire(llm_shared->lock, LW_SHARED);
	version = llm_shared->slots_version;
	memcpy(snap, llm_shared->slots, sizeof(LlmChannelSlot) * n_channels);
	LWLockRelease(llm_shared->lock);

	for (int i = 0; i < n_channels; i++)
	{
		WorkerChannel *ch = &channels[i];

		if (snap[i].seq == ch->seen_seq)
			continue;
		/* the slot changed: the old channel (if any) is finished */
		drop_channel(i);
		ch->seen_seq = snap[i].seq;
		if (snap[i].handle != DSM_HANDLE_INVALID && snap[i].generation == my_generation)
			attach_channel(i, snap[i].handle, snap[i].pid);
	}
	pfree(snap);
	seen_slots_version = version;
}

/* ---------- request parsing ---------- */

typedef struct Reader
{
	const char *p;
	const char *end;
} Reader;

/* Next length-prefixed string, copied NUL-terminated into msg_cxt; NULL if malformed. */
static char *
read_string(Reader *rd, uint32 *len_out)
{
	uint32		len;
	char	   *s;

	if (rd->end - rd->p < (ptrdiff_t) sizeof(uint32))
		return NULL;
	memcpy(&len, rd->p, sizeof(uint32));
	rd->p += sizeof(uint32);
	if ((Size) (rd->end - rd->p) < len)
		return NULL;
	s = MemoryContextAlloc(msg_cxt, (Size) len + 1);
	memcpy(s, rd->p, len);
	s[len] = '\0';
	rd->p += len;
	if (len_out)
		*len_out = len;
	return s;
}

static void
model_unavailable(WorkerChannel *ch, uint64 id)
{
	char		msg[LLM_MODEL_ERROR_LEN + 64];

	snprintf(msg, sizeof(msg), "llm model is not available: %s",
			 model_error[0] ? model_error : "the model is not loaded");
	queue_error(ch, id, model_sqlstate ? model_sqlstate : ERRCODE_INTERNAL_ERROR, msg);
	count_failed();
	stats_dirty = true;
}

static void
handle_generate(WorkerChannel *ch, int slot, const LlmRequestMsg *h, Reader *rd)
{
	llm_request req;
	char	  **stops = NULL;
	char		err[1100];
	llm_status	st;
	WorkerRequest *r;
	uint32		len;

	if (h->n_stop < 0 || h->n_stop > LLM_MAX_STOP_STRINGS ||
		h->n_messages < 0 || h->n_messages > LLM_MAX_MESSAGES)
	{
		queue_error(ch, h->id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
		return;
	}
	if (h->n_stop > 0)
		stops = MemoryContextAlloc(msg_cxt, sizeof(char *) * h->n_stop);
	for (int i = 0; i < h->n_stop; i++)
		if ((stops[i] = read_string(rd, NULL)) == NULL)
		{
			queue_error(ch, h->id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
			return;
		}

	llm_request_init(&req);
	if (h->kind == LLM_REQ_GENERATE)
	{
		if (h->flags & LLM_REQ_FLAG_SYSTEM)
		{
			if ((req.system = read_string(rd, &len)) == NULL)
			{
				queue_error(ch, h->id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
				return;
			}
			req.system_len = len;
		}
		if ((req.prompt = read_string(rd, &len)) == NULL)
		{
			queue_error(ch, h->id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
			return;
		}
		req.prompt_len = len;
		req.prompt_kind = (h->flags & LLM_REQ_FLAG_RAW) ? LLM_PROMPT_RAW : LLM_PROMPT_TEXT;
	}
	else
	{
		llm_chat_message *msgs = MemoryContextAlloc(msg_cxt, sizeof(llm_chat_message) * Max(h->n_messages, 1));

		for (int i = 0; i < h->n_messages; i++)
		{
			uint32		clen = 0;

			msgs[i].role = read_string(rd, NULL);
			msgs[i].content = msgs[i].role ? read_string(rd, &clen) : NULL;
			if (msgs[i].content == NULL)
			{
				queue_error(ch, h->id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
				return;
			}
			msgs[i].content_len = clen;
		}
		req.prompt_kind = LLM_PROMPT_MESSAGES;
		req.messages = msgs;
		req.n_messages = h->n_messages;
	}

	req.params.max_tokens = h->max_tokens;
	req.params.temperature = h->temperature;
	req.params.top_p = h->top_p;
	req.params.top_k = h->top_k;
	req.params.min_p = h->min_p;
	req.params.repetition_penalty = h->repetition_penalty;
	req.params.has_seed = (h->flags & LLM_REQ_FLAG_SEED) != 0;
	req.params.seed = h->seed;
	req.params.n_stop = h->n_stop;
	req.params.stop = (const char *const *) stops;
	req.params.ignore_eos = (h->flags & LLM_REQ_FLAG_IGNORE_EOS) != 0;
	req.params.cache_salt = h->cache_salt;
	req.params.debug_poison_logits = h->debug_poison;

	r = MemoryContextAlloc(worker_cxt, sizeof(WorkerRequest));
	r->slot = slot;
	r->client_id = h->id;
	r->engine_id = next_engine_id++;
	err[0] = '\0';
	st = llm_engine_submit(engine, r->engine_id, &req, r, err, sizeof(err));
	if (st != LLM_OK)
	{
		queue_error(ch, h->id, status_sqlstate(st), err[0] ? err : llm_status_name(st));
		count_failed();
		pfree(r);
		return;
	}
	dlist_push_tail(&ch->requests, &r->node);
}

static void
handle_tokenize(WorkerChannel *ch, const LlmRequestMsg *h, Reader *rd)
{
	uint32		len;
	char	   *text = read_string(rd, &len);
	int32	   *ids;
	int64		n;
	char		err[512];
	LlmResponseMsg rh;

	if (text == NULL)
	{
		queue_error(ch, h->id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
		return;
	}
	err[0] = '\0';
	n = llm_engine_tokenize(engine, text, len, &ids, err, sizeof(err));
	if (n < 0)
	{
		queue_error(ch, h->id, ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
					err[0] ? err : "could not tokenize the text");
		return;
	}
	memset(&rh, 0, sizeof(rh));
	rh.kind = LLM_RESP_TOKENS;
	rh.id = h->id;
	rh.payload_len = n * sizeof(int32);
	queue_response(ch, &rh, (const char *) ids, rh.payload_len);
	free(ids);
}

static void
handle_detokenize(WorkerChannel *ch, const LlmRequestMsg *h, Reader *rd)
{
	int			n = (rd->end - rd->p) / sizeof(int32);
	int32	   *ids = MemoryContextAlloc(msg_cxt, Max(n, 1) * sizeof(int32));
	char	   *text;
	int64		len;
	char		err[256];
	LlmResponseMsg rh;

	memcpy(ids, rd->p, n * sizeof(int32));
	len = llm_engine_detokenize(engine, ids, n, &text, err, sizeof(err));
	if (len < 0)
	{
		queue_error(ch, h->id, ERRCODE_INVALID_PARAMETER_VALUE, err);
		return;
	}
	memset(&rh, 0, sizeof(rh));
	rh.kind = LLM_RESP_TEXT;
	rh.id = h->id;
	rh.payload_len = len;
	if (len > 0)
		queue_response(ch, &rh, text, len);
	free(text);
	rh.kind = LLM_RESP_DONE;
	rh.payload_len = 0;
	queue_response(ch, &rh, NULL, 0);
}

static void
handle_abort(WorkerChannel *ch, uint64 client_id)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &ch->requests)
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		if (r->client_id == client_id)
		{
			if (engine)
				llm_engine_abort(engine, r->engine_id);
			free_request(r);
			delta.aborted++;
			record_request(LLM_OUTCOME_ABORTED, NULL);
			stats_dirty = true;
			return;
		}
	}
}

static void
handle_message(int slot, const char *data, Size nbytes)
{
	WorkerChannel *ch = &channels[slot];
	LlmRequestMsg h;
	Reader		rd;

	if (nbytes < sizeof(h))
	{
		ereport(LOG, (errmsg("llm worker: malformed request from process %d", ch->pid)));
		ch->gone = true;
		return;
	}
	memcpy(&h, data, sizeof(h));
	if (h.payload_len != nbytes - sizeof(h))
	{
		queue_error(ch, h.id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
		return;
	}
	rd.p = data + sizeof(h);
	rd.end = rd.p + h.payload_len;

	if (h.kind == LLM_REQ_ABORT)
	{
		handle_abort(ch, h.id);
		return;
	}
	if (engine == NULL)
	{
		model_unavailable(ch, h.id);
		return;
	}
	switch ((LlmRequestKind) h.kind)
	{
		case LLM_REQ_GENERATE:
		case LLM_REQ_CHAT:
			handle_generate(ch, slot, &h, &rd);
			break;
		case LLM_REQ_TOKENIZE:
			handle_tokenize(ch, &h, &rd);
			break;
		case LLM_REQ_DETOKENIZE:
			handle_detokenize(ch, &h, &rd);
			break;
		default:
			queue_error(ch, h.id, ERRCODE_PROTOCOL_VIOLATION, "unknown llm request kind");
	}
	stats_dirty = true;
}

static void
drain_requests(void)
{
	for (int i = 0; i < n_channels; i++)
	{
		WorkerChannel *ch = &channels[i];

		while (ch->in_use && !ch->gone)
		{
			Size		nbytes;
			void	   *data;
			shm_mq_result res = shm_mq_receive(ch->req, &nbytes, &data, true);

			if (res == SHM_MQ_WOULD_BLOCK)
				break;
			if (res == SHM_MQ_DETACHED)
			{
				ch->gone = true;	/* backend exited or dropped the channel */
				break;
			}
			{
				/* everything a request needs only while it is parsed lives in msg_cxt */
				MemoryContext old = MemoryContextSwitchTo(msg_cxt);

				handle_message(i, data, nbytes);
				MemoryContextSwitchTo(old);
				MemoryContextReset(msg_cxt);
			}
		}
		if (ch->in_use && ch->gone)
			drop_channel(i);
	}
}

/* ---------- lifecycle ---------- */

/* Runs before the DSM mappings go: unregister and wake every waiting backend. */
static void
worker_exit(int code, Datum arg)
{
	Latch	  **latches;
	int			n = 0;

	if (llm_shared == NULL)
		return;
	LWLockReleaseAll();			/* exiting on FATAL: never while holding the registry lock */
	latches = malloc(sizeof(Latch *) * Max(llm_shared->n_slots, 1));
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	if (llm_shared->worker_pid == MyProcPid)
	{
		llm_shared->worker_pid = 0;
		llm_shared->worker_latch = NULL;
		llm_shared->model_state = LLM_MODEL_NONE;
		llm_shared->stats.requests_running = 0;
		llm_shared->stats.requests_waiting = 0;
		llm_shared->stats.kv_blocks_used = 0;
		llm_shared->stats.batch_size = 0;
	}
	for (int i = 0; i < llm_shared->n_slots && latches; i++)
		if (llm_shared->slots[i].handle != DSM_HANDLE_INVALID && llm_shared->slots[i].latch)
			latches[n++] = llm_shared->slots[i].latch;
	LWLockRelease(llm_shared->lock);
	for (int i = 0; i < n; i++)
		SetLatch(latches[i]);
	free(latches);
}

void
llm_worker_main(Datum arg)
{
	pqsignal(SIGTERM, worker_sigterm);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGINT, SIG_IGN);	/* a cancel must not kill the worker */
	BackgroundWorkerUnblockSignals();

	/* shared catalogs only: puts us in pg_stat_activity, pg_terminate_backend works */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	if (llm_shared == NULL)
		ereport(FATAL, (errmsg("llm worker: shared memory registry missing")));

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "llm worker", ALLOCSET_DEFAULT_SIZES);
	msg_cxt = AllocSetContextCreate(worker_cxt, "llm worker message", ALLOCSET_DEFAULT_SIZES);
	n_channels = llm_shared->n_slots;
	channels = MemoryContextAllocZero(worker_cxt, sizeof(WorkerChannel) * n_channels);
	for (int i = 0; i < n_channels; i++)
	{
		dlist_init(&channels[i].requests);
		dlist_init(&channels[i].outbox);
	}

	before_shmem_exit(worker_exit, (Datum) 0);
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	my_generation = ++llm_shared->generation;
	llm_shared->worker_pid = MyProcPid;
	llm_shared->worker_latch = MyLatch;
	LWLockRelease(llm_shared->lock);

	load_engine();

	while (!got_sigterm)
	{
		bool		busy;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		scan_channels();
		drain_requests();
		publish_stats();		/* show new/aborted requests before a long step */

		busy = engine != NULL && llm_engine_has_work(engine);
		if (busy)
		{
			llm_status st = llm_engine_step(engine, on_engine_event, NULL);

			delta.steps++;
			stats_dirty = true;
			if (st != LLM_OK)
				ereport(WARNING,
						(errmsg("llm worker: engine step failed: %s; its requests were failed",
								llm_status_name(st))));
		}

		for (int i = 0; i < n_channels; i++)
			if (channels[i].in_use)
				flush_outbox(&channels[i]);
		publish_stats();

		if (!busy && !got_sigterm)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000L, PG_WAIT_EXTENSION);
	}

	/* exit 1: restart after bgw_restart_time (pg_terminate_backend); at shutdown nothing restarts */
	proc_exit(1);
}
