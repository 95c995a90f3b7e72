/*
 * server.c — the worker's end of the channels (server.h):
 * the scan of the registry's slots, attach and drop, receiving, and the
 * outboxes.
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "common/registry.h"
#include "server.h"

/*
 * A response waiting to be written into a channel's response queue.  A text
 * delta stays raw text (so later deltas of its request can be merged in)
 * until its first send attempt encodes it; from then on its bytes must not
 * change, as shm_mq may have taken part of them.
 */
typedef struct OutMsg
{
	dlist_node	node;
	uint64		id;
	bool		raw_text;		/* data is unencoded text of request id */
	char	   *data;
	Size		len;
	Size		cap;
} OutMsg;

typedef struct WorkerChannel
{
	bool		in_use;
	uint64		seen_seq;		/* slot seq last looked at (attached or refused) */
	int			pid;
	dsm_segment *seg;
	shm_mq_handle *req;
	shm_mq_handle *resp;
	dlist_head	outbox;
	bool		gone;			/* counterparty detached or misbehaved: drop at next chance */
} WorkerChannel;

static MemoryContext wch_cxt;
static WorkerChannel *channels;
static int	n_channels;
static uint32 my_generation;
static uint64 seen_slots_version = PG_UINT64_MAX;
static WchDropCallback drop_callback;

void
wch_init(int n_slots, uint32 gen, MemoryContext cxt, WchDropCallback on_drop)
{
	wch_cxt = cxt;
	n_channels = n_slots;
	my_generation = gen;
	drop_callback = on_drop;
	channels = MemoryContextAllocZero(cxt, sizeof(WorkerChannel) * n_slots);
	for (int i = 0; i < n_slots; i++)
		dlist_init(&channels[i].outbox);
}

/* ---------- outbox ---------- */

static OutMsg *
outmsg_new(uint64 id, bool raw_text, Size len)
{
	OutMsg	   *m = MemoryContextAlloc(wch_cxt, sizeof(OutMsg));

	m->id = id;
	m->raw_text = raw_text;
	m->cap = Max(len, 256);
	m->data = MemoryContextAlloc(wch_cxt, m->cap);
	m->len = 0;
	return m;
}

static void
outmsg_free(OutMsg *m)
{
	pfree(m->data);
	pfree(m);
}

/* Encode m into a new outbox entry; a message this worker cannot encode is a bug. */
static OutMsg *
outmsg_encoded(const llm_wire_msg *msg)
{
	Size		len = llm_wire_encode(msg, NULL, 0);
	OutMsg	   *m;

	if (len == 0)
		elog(ERROR, "llm worker: response cannot be encoded");
	m = outmsg_new(msg->id, false, len);
	m->len = llm_wire_encode(msg, m->data, m->cap);
	return m;
}

void
wch_queue(int slot, const llm_wire_msg *msg)
{
	WorkerChannel *ch = &channels[slot];
	OutMsg	   *m;

	if (!ch->in_use || ch->gone)
		return;
	if (msg->kind != LLM_WIRE_TEXT)
	{
		dlist_push_tail(&ch->outbox, &outmsg_encoded(msg)->node);
		return;
	}
	if (!dlist_is_empty(&ch->outbox))
	{
		m = dlist_tail_element(OutMsg, node, &ch->outbox);
		if (m->raw_text && m->id == msg->id)
		{
			if (m->len + msg->text_len > m->cap)
			{
				m->cap = Max(m->cap * 2, m->len + msg->text_len);
				m->data = repalloc(m->data, m->cap);
			}
			memcpy(m->data + m->len, msg->text, msg->text_len);
			m->len += msg->text_len;
			return;
		}
	}
	m = outmsg_new(msg->id, true, msg->text_len);
	memcpy(m->data, msg->text, msg->text_len);
	m->len = msg->text_len;
	dlist_push_tail(&ch->outbox, &m->node);
}

void
wch_queue_error(int slot, uint64 id, int sqlstate, const char *message)
{
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_ERROR;
	m.id = id;
	m.sqlstate = sqlstate;
	m.text = message;
	m.text_len = strlen(message);
	wch_queue(slot, &m);
}

/* Give a raw text delta its encoded form, fixed from now on. */
static void
encode_text(OutMsg *m)
{
	llm_wire_msg msg;
	OutMsg	   *enc;

	memset(&msg, 0, sizeof(msg));
	msg.kind = LLM_WIRE_TEXT;
	msg.id = m->id;
	msg.text = m->data;
	msg.text_len = m->len;
	enc = outmsg_encoded(&msg);
	pfree(m->data);
	m->data = enc->data;
	m->len = enc->len;
	m->cap = enc->cap;
	m->raw_text = false;
	pfree(enc);
}

/* Send queued responses without blocking; stop at the first that does not fit. */
static void
flush_outbox(WorkerChannel *ch)
{
	while (ch->in_use && !ch->gone && !dlist_is_empty(&ch->outbox))
	{
		OutMsg	   *m = dlist_head_element(OutMsg, node, &ch->outbox);
		shm_mq_result res;

		if (m->raw_text)
			encode_text(m);
		res = shm_mq_send(ch->resp, m->len, m->data, true, true);
		if (res == SHM_MQ_SUCCESS)
		{
			dlist_delete(&m->node);
			outmsg_free(m);
		}
		else if (res == SHM_MQ_WOULD_BLOCK)
			break;
		else
		{
			ch->gone = true;
			break;
		}
	}
}

void
wch_flush_all(void)
{
	for (int i = 0; i < n_channels; i++)
		if (channels[i].in_use)
			flush_outbox(&channels[i]);
}

/* ---------- attach and drop ---------- */

static void
drop_channel(int i)
{
	WorkerChannel *ch = &channels[i];
	dlist_mutable_iter it;

	if (!ch->in_use)
		return;
	drop_callback(i);
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
	ch->seg = NULL;
	ch->req = ch->resp = NULL;
	ch->pid = 0;
}

static void
attach_channel(int i, dsm_handle handle, int pid)
{
	WorkerChannel *ch = &channels[i];
	dsm_segment *seg;
	shm_toc    *toc;
	llm_channel_header *hdr;
	shm_mq	   *reqmq;
	shm_mq	   *respmq;
	MemoryContext old;

	old = MemoryContextSwitchTo(wch_cxt);
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
	dlist_init(&ch->outbox);
	MemoryContextSwitchTo(old);
}

void
wch_scan(void)
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

/* ---------- receiving ---------- */

bool
wch_receive(int slot, const void **data, Size *len)
{
	WorkerChannel *ch = &channels[slot];

	if (ch->in_use && !ch->gone)
	{
		void	   *p;
		shm_mq_result res = shm_mq_receive(ch->req, len, &p, true);

		if (res == SHM_MQ_SUCCESS)
		{
			*data = p;
			return true;
		}
		if (res == SHM_MQ_DETACHED)
			ch->gone = true;	/* backend exited or dropped the channel */
	}
	if (ch->in_use && ch->gone)
		drop_channel(slot);
	return false;
}

void
wch_mark_gone(int slot)
{
	channels[slot].gone = true;
}

int
wch_pid(int slot)
{
	return channels[slot].in_use ? channels[slot].pid : 0;
}
