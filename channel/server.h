/*
 * server.h — the worker's end of the backends' channels (protocol.h):
 * attach and drop them as the registry's slots change, hand out their
 * request messages, and send responses through a per-channel outbox without
 * ever blocking, so a slow reader never stalls the others.
 *
 * Channels are indexed by registry slot (BackendId - 1).  A channel found
 * detached, replaced or cleared is dropped; dropping calls the on_drop
 * callback given to wch_init first, so the requests of that slot can be
 * aborted in the engine.  Responses to a slot without a live channel are
 * discarded.
 */
#ifndef LLM_WORKER_CHANNEL_H
#define LLM_WORKER_CHANNEL_H

#include "postgres.h"

#include "protocol.h"

typedef void (*WchDropCallback) (int slot);

/* Set up n_slots channel slots for worker generation gen (memory from cxt). */
extern void wch_init(int n_slots, uint32 gen, MemoryContext cxt, WchDropCallback on_drop);

/* Attach new channels, drop replaced, cleared and detached ones. */
extern void wch_scan(void);

/*
 * The next request message of slot's channel, valid until the next call for
 * that slot; false when there is none now (a channel found detached or
 * marked gone is dropped then).
 */
extern bool wch_receive(int slot, const void **data, Size *len);

/* The backend of slot's channel sent garbage: drop the channel at the next chance. */
extern void wch_mark_gone(int slot);

/* pid of the backend owning slot's channel (0 if none). */
extern int	wch_pid(int slot);

/*
 * Queue a response (encoded here; text deltas of one request are merged
 * into the last queued, not yet attempted text message of that request).
 */
extern void wch_queue(int slot, const llm_wire_msg *m);

/* Queue an ERROR response. */
extern void wch_queue_error(int slot, uint64 id, int sqlstate, const char *message);

/* Send what fits of every outbox, without blocking. */
extern void wch_flush_all(void);

#endif
