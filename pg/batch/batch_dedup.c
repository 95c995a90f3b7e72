/*
 * batch_dedup.c — the LLM Batch node's table of shareable calls
 * (batch_dedup.h): keys from the wire encoding of the request, an
 * open-addressing index (engine/util/hash.h) whose slots live in the
 * table's memory context so an error that skips the node's end frees them
 * with the executor's memory.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "batch_dedup.h"
#include "channel/protocol.h"
#include "common/progress.h"
#include "common/registry.h"

#define DEDUP_MIN_SLOTS 64

BatchDedup *
llm_dedup_create(MemoryContext parent, Size limit)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "llm batch dedup", ALLOCSET_DEFAULT_SIZES);
	BatchDedup *d = MemoryContextAllocZero(cxt, sizeof(BatchDedup));

	d->cxt = cxt;
	d->limit = limit;
	d->index.mask = DEDUP_MIN_SLOTS - 1;
	d->index.slots = MemoryContextAllocZero(cxt, sizeof(uint32) * DEDUP_MIN_SLOTS);
	d->cap_calls = DEDUP_MIN_SLOTS / 2;
	d->calls = MemoryContextAllocZero(cxt, sizeof(BatchDedupCall *) * d->cap_calls);
	return d;
}

bool
llm_dedup_key(const llm_request *req, char **key, size_t *key_len, uint64 *hash)
{
	llm_wire_msg m;
	size_t		len;

	/* an unseeded sample differs from call to call: PostgreSQL's volatility is kept */
	if (req->mode == LLM_MODE_GENERATE && req->params.temperature > 0 && !req->params.has_seed)
		return false;
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.request = *req;
	/* the class orders the worker's queue, it does not change an answer */
	m.request.priority = LLM_PRIORITY_BATCH;
	m.role_id = GetUserId();
	m.database_id = MyDatabaseId;
	len = llm_wire_encode(&m, NULL, 0);
	if (len == 0)
		return false;			/* llm_submit refuses it; nothing to share */
	*key = palloc(len);
	(void) llm_wire_encode(&m, *key, len);
	*key_len = len;
	*hash = llm_fnv1a64(*key, len);
	return true;
}

bool
llm_dedup_shareable(const BatchDedupCall *c)
{
	if (c->dead)
		return false;
	return c->result != NULL || c->subxid <= GetCurrentSubTransactionId();
}

typedef struct DedupProbe
{
	const char *key;
	size_t		key_len;
} DedupProbe;

static bool
dedup_eq(const void *ctx, uint32_t id, const void *key)
{
	const BatchDedup *d = ctx;
	const DedupProbe *p = key;
	const BatchDedupCall *c = d->calls[id];

	return c->key_len == p->key_len && memcmp(c->key, p->key, p->key_len) == 0;
}

BatchDedupCall *
llm_dedup_find(BatchDedup *d, const char *key, size_t key_len, uint64 hash)
{
	DedupProbe	p = {key, key_len};
	int64		id = llm_hash_index_find(&d->index, hash, dedup_eq, d, &p);

	return id < 0 ? NULL : d->calls[id];
}

/* Double the slots (entries re-inserted in id order) and the array of entry pointers. */
static void
dedup_grow(BatchDedup *d)
{
	uint64		n_slots = (d->index.mask + 1) * 2;
	uint32	   *slots = MemoryContextAllocZero(d->cxt, sizeof(uint32) * n_slots);
	uint32	   *old = d->index.slots;

	d->index.slots = slots;
	d->index.mask = n_slots - 1;
	for (uint32 i = 0; i < d->n_calls; i++)
	{
		DedupProbe	p = {d->calls[i]->key, d->calls[i]->key_len};

		*llm_hash_index_slot(&d->index, d->calls[i]->hash, dedup_eq, d, &p) = i + 1;
	}
	pfree(old);
	d->cap_calls *= 2;
	d->calls = repalloc(d->calls, sizeof(BatchDedupCall *) * d->cap_calls);
}

BatchDedupCall *
llm_dedup_add(BatchDedup *d, const char *key, size_t key_len, uint64 hash, uint64 id,
			  struct BatchScanState *owner)
{
	DedupProbe	p = {key, key_len};
	BatchDedupCall *c;
	uint32	   *slot;

	if (d->full || MemoryContextMemAllocated(d->cxt, true) > d->limit)
	{
		d->full = true;
		return NULL;
	}
	/* at most half full, so probing always ends at an empty slot */
	if (d->n_calls + 1 > d->cap_calls)
		dedup_grow(d);
	slot = llm_hash_index_slot(&d->index, hash, dedup_eq, d, &p);
	Assert(*slot == 0);
	c = MemoryContextAllocZero(d->cxt, sizeof(BatchDedupCall));
	d->calls[d->n_calls] = c;
	c->id = id;
	c->refs = 1;
	c->owner = owner;
	c->subxid = GetCurrentSubTransactionId();
	c->hash = hash;
	c->key = MemoryContextAlloc(d->cxt, key_len);
	memcpy(c->key, key, key_len);
	c->key_len = key_len;
	*slot = ++d->n_calls;
	return c;
}

uint32
llm_dedup_disown(BatchDedup *d, const struct BatchScanState *owner)
{
	uint32		n = 0;

	for (uint32 i = 0; i < d->n_calls; i++)
		if (d->calls[i]->owner == owner)
		{
			d->calls[i]->owner = NULL;
			n++;
		}
	return n;
}

void
llm_dedup_note_shared(void)
{
	LlmRoleUsage saved = {0};

	saved.calls_shared = 1;
	llm_progress_note_saved(&saved);
	llm_stats_note_saved(&saved);
}
