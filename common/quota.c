/*
 * quota.c — the token limit's ledger in main shared memory and its
 * settings (quota.h).
 *
 * The ledger has one entry per (role, database): the tokens reserved by
 * its requests in flight, and the tokens charged to it in time buckets.
 * A bucket is a sixtieth of the window (llm.quota_window_ms); the window
 * counts every bucket that overlaps it, so a charge counts for at least a
 * full window.  A request is charged when it ends, so from its admission
 * (reserved) to a window after its end (charged) it counts against every
 * later admission: the requests admitted in any window were all admitted
 * while the earlier ones counted.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "quota.h"
#include "registry.h"
#include "engine/request.h"
#include "settings.h"

#define QUOTA_ENTRIES 256
#define QUOTA_SLICES 60			/* buckets per window */
#define QUOTA_RING 64			/* > QUOTA_SLICES: the window's buckets never share a place */

/* the model's template tokens while its overhead is unknown (not loaded yet) */
#define QUOTA_UNKNOWN_OVERHEAD 256
/* tokens on top of a text's bytes: a SentencePiece tokenizer's leading space marker, an end of turn */
#define QUOTA_TEXT_SLACK 2

typedef struct QuotaEntry
{
	Oid			role;			/* InvalidOid: free */
	Oid			database;
	int64		reserved;
	int64		slice_ms;		/* bucket width the buckets were written with */
	int64		slot[QUOTA_RING];	/* bucket index (time / slice_ms) each place holds */
	int64		tokens[QUOTA_RING];
} QuotaEntry;

typedef struct QuotaLedger
{
	LWLock	   *lock;
	QuotaEntry	entries[QUOTA_ENTRIES];
} QuotaLedger;

static QuotaLedger *ledger = NULL;

/* llm.max_tokens_per_minute: 0 = no limit */
static int	max_tokens_per_minute = 0;

/* llm.quota_window_ms: the window the limit applies to (a minute; shorter only in tests) */
static int	quota_window_ms = 60000;

static Size
ledger_size(void)
{
	return sizeof(QuotaLedger);
}

static void
ledger_init(void *mem, bool found)
{
	ledger = mem;
	if (found)
		return;
	memset(ledger, 0, sizeof(QuotaLedger));
	ledger->lock = &(GetNamedLWLockTranche("llm quota"))->lock;
}

void
llm_quota_request(void)
{
	llm_registry_add_shmem("llm quota", ledger_size, ledger_init, 1);
}

int
llm_quota_session_limit(void)
{
	return max_tokens_per_minute;
}

static int64
slice_ms(void)
{
	return Max(quota_window_ms / QUOTA_SLICES, 1);
}

static int64
now_ms(void)
{
	return (int64) (GetCurrentTimestamp() / 1000);
}

/* Tokens charged to e in the window ending at slot now; caller holds the lock. */
static int64
charged(const QuotaEntry *e, int64 now)
{
	int64		sum = 0;

	for (int i = 0; i < QUOTA_RING; i++)
		if (e->slot[i] >= now - QUOTA_SLICES && e->slot[i] <= now)
			sum += e->tokens[i];
	return sum;
}

/*
 * Bring e's buckets to the current bucket width: a changed width (the
 * test setting) puts what the window held into the current bucket, which
 * counts it a little longer, never less.  Caller holds the lock exclusively.
 */
static void
rebucket(QuotaEntry *e, int64 width, int64 t_ms)
{
	int64		held;

	if (e->slice_ms == width)
		return;
	held = e->slice_ms > 0 ? charged(e, t_ms / e->slice_ms) : 0;
	memset(e->slot, 0, sizeof(e->slot));
	memset(e->tokens, 0, sizeof(e->tokens));
	e->slice_ms = width;
	e->slot[(t_ms / width) % QUOTA_RING] = t_ms / width;
	e->tokens[(t_ms / width) % QUOTA_RING] = held;
}

static void
charge(QuotaEntry *e, int64 tokens)
{
	int64		width = slice_ms();
	int64		t = now_ms();
	int64		now;
	int			at;

	rebucket(e, width, t);
	now = t / width;
	at = (int) (now % QUOTA_RING);
	if (e->slot[at] != now)
	{
		e->slot[at] = now;
		e->tokens[at] = 0;
	}
	e->tokens[at] += tokens;
}

/* The entry of (role, database), made if absent and make; NULL if none is free.  Lock held exclusively. */
static QuotaEntry *
entry(Oid role, Oid database, bool make)
{
	QuotaEntry *idle = NULL;

	for (int i = 0; i < QUOTA_ENTRIES; i++)
	{
		QuotaEntry *e = &ledger->entries[i];

		if (e->role == role && e->database == database)
			return e;
		if (idle == NULL && make &&
			(e->role == InvalidOid ||
			 (e->reserved == 0 && (e->slice_ms == 0 || charged(e, now_ms() / e->slice_ms) == 0))))
			idle = e;
	}
	if (idle != NULL)
	{
		memset(idle, 0, sizeof(*idle));
		idle->role = role;
		idle->database = database;
	}
	return idle;
}

/* Upper bound of the tokens text of len bytes becomes (each token covers at least a byte). */
static int64
text_bound(size_t len)
{
	return (int64) len + QUOTA_TEXT_SLACK;
}

/* An upper bound of the prompt tokens of req: its texts' bytes and the template's tokens per message. */
static int64
prompt_bound(const llm_request *req)
{
	int64		overhead;
	int64		n = 0;

	if (req->prompt_kind == LLM_PROMPT_TOKENS)
		return req->n_tokens;
	overhead = llm_registry_prompt_overhead(req->model);
	if (overhead < 0)
		overhead = QUOTA_UNKNOWN_OVERHEAD;
	switch (req->prompt_kind)
	{
		case LLM_PROMPT_MESSAGES:
			for (int i = 0; i < req->n_messages; i++)
				n += text_bound(req->messages[i].content ? strlen(req->messages[i].content) : 0) + overhead;
			break;
		case LLM_PROMPT_RAW:
			n = text_bound(req->prompt_len) + 1;	/* a BOS */
			break;
		default:
			n = text_bound(req->prompt_len) + overhead;
			if (req->system != NULL)
				n += text_bound(req->system_len);
			break;
	}
	return n;
}

/*
 * What a SCORE request's continuations can cost (not in its reported
 * usage); 0 for GENERATE.  With continuation answers (llm_join) each end is
 * a chat of its own after the common prefix: its bytes and the template's
 * per-message tokens, then every answer again (one sequence per pair).
 */
static int64
continuation_bound(const llm_request *req)
{
	int64		n = 0;
	int			ends;
	int64		answers = 0;
	int64		overhead;

	if (req->mode != LLM_MODE_SCORE)
		return 0;
	if (req->continuation_answers <= 0)
	{
		for (int k = 0; k < req->n_continuations; k++)
			n += text_bound(req->continuation_lens[k]);
		return n;
	}
	ends = req->n_continuations - req->continuation_answers;
	for (int a = ends; a < req->n_continuations; a++)
		answers += text_bound(req->continuation_lens[a]);
	overhead = llm_registry_prompt_overhead(req->model);
	if (overhead < 0)
		overhead = QUOTA_UNKNOWN_OVERHEAD;
	for (int k = 0; k < ends; k++)
		n += text_bound(req->continuation_lens[k]) + overhead + answers;
	return n;
}

/*
 * When a request of need tokens may fit into e under limit: the end of the
 * bucket after which enough charged tokens have left the window; if even
 * an empty window would not do (reservations in flight), when the newest
 * bucket leaves it.  Caller holds the lock.
 */
static TimestampTz
retry_time(const QuotaEntry *e, int64 need, int64 limit, int64 now)
{
	int64		held = charged(e, now);
	int64		last = now;

	for (int64 s = now - QUOTA_SLICES; s <= now; s++)
	{
		const int	at = (int) (((s % QUOTA_RING) + QUOTA_RING) % QUOTA_RING);

		if (e->slot[at] != s || e->tokens[at] == 0)
			continue;
		held -= e->tokens[at];
		last = s;
		if (held + e->reserved + need <= limit)
			break;
	}
	/* a bucket's tokens leave the window QUOTA_SLICES + 1 buckets after it */
	return (TimestampTz) ((last + QUOTA_SLICES + 1) * e->slice_ms) * 1000;
}

bool
llm_quota_admit(const llm_request *req, int limit, LlmQuotaTicket *ticket, TimestampTz *retry_at)
{
	Oid			role = GetUserId();
	int64		bound = prompt_bound(req) + continuation_bound(req) +
		(req->mode == LLM_MODE_GENERATE ? req->params.max_tokens : 0);
	int64		need = limit > 0 ? Min(bound, (int64) limit) : bound;
	QuotaEntry *e;
	int64		held = 0;
	int64		reserved = 0;
	TimestampTz retry = 0;
	bool		fits;

	memset(ticket, 0, sizeof(*ticket));
	if (ledger == NULL)
		return true;
	LWLockAcquire(ledger->lock, LW_EXCLUSIVE);
	e = entry(role, MyDatabaseId, true);
	if (e == NULL)
	{
		LWLockRelease(ledger->lock);
		if (limit <= 0)
			return true;		/* uncounted: the ledger is full of busy roles */
		if (retry_at != NULL)
		{
			*retry_at = GetCurrentTimestamp() + (TimestampTz) slice_ms() * 1000;
			return false;
		}
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("token limit of role \"%s\" cannot be applied: too many roles used tokens in the last window",
						GetUserNameFromId(role, true) ? GetUserNameFromId(role, true) : "?"),
				 errhint("Retry later.")));
	}
	rebucket(e, slice_ms(), now_ms());
	if (limit > 0)
	{
		int64		now = now_ms() / e->slice_ms;

		held = charged(e, now);
		reserved = e->reserved;
		fits = (held == 0 && reserved == 0) || held + reserved + need <= limit;
		if (!fits)
			retry = retry_time(e, need, limit, now);
	}
	else
		fits = true;
	if (fits)
	{
		e->reserved += need;
		ticket->active = true;
		ticket->role = role;
		ticket->database = MyDatabaseId;
		ticket->reserved = need;
		ticket->extra = continuation_bound(req);
	}
	LWLockRelease(ledger->lock);
	if (fits)
		return true;
	if (retry_at != NULL)
	{
		*retry_at = Max(retry, GetCurrentTimestamp() + 1000);
		return false;
	}
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("token limit of role \"%s\" exceeded: %lld tokens in the last minute, "
					"llm.max_tokens_per_minute = %d",
					GetUserNameFromId(role, true) ? GetUserNameFromId(role, true) : "?",
					(long long) (held + reserved), limit),
			 errdetail("%lld tokens used and %lld reserved by requests in flight; this request may use up to %lld.",
					   (long long) held, (long long) reserved, (long long) need),
			 errhint("Retry later, or ask a superuser to raise llm.max_tokens_per_minute for the role.")));
	return false;				/* keep the compiler quiet */
}

/* End ticket, charging tokens; the ticket becomes inactive. */
static void
end_ticket(LlmQuotaTicket *ticket, int64 tokens)
{
	QuotaEntry *e;

	if (!ticket->active || ledger == NULL)
		return;
	ticket->active = false;
	LWLockAcquire(ledger->lock, LW_EXCLUSIVE);
	e = entry(ticket->role, ticket->database, false);
	if (e != NULL)
	{
		e->reserved = Max(e->reserved - ticket->reserved, 0);
		if (tokens > 0)
			charge(e, tokens);
	}
	LWLockRelease(ledger->lock);
}

void
llm_quota_settle(LlmQuotaTicket *ticket, const llm_usage *usage)
{
	if (usage == NULL)
		end_ticket(ticket, ticket->reserved);
	else
		end_ticket(ticket, (int64) usage->prompt_tokens + usage->completion_tokens + ticket->extra);
}

void
llm_quota_refund(LlmQuotaTicket *ticket)
{
	end_ticket(ticket, 0);
}

int
llm_quota_role_limit(Oid role)
{
	char	   *value = llm_role_setting(role, "llm.max_tokens_per_minute");
	int			limit = max_tokens_per_minute;

	if (value != NULL && !parse_int(value, &limit, 0, NULL))
		limit = max_tokens_per_minute;
	return Max(limit, 0);
}

void
llm_quota_define_gucs(void)
{
	DefineCustomIntVariable("llm.max_tokens_per_minute",
							"Tokens the current role's requests may use per minute in a database; 0 = no limit.",
							"Set per role by a superuser (ALTER ROLE ... SET).  Each request reserves what it may "
							"use before it is sent; a statement's request that does not fit fails with SQLSTATE "
							"53400, a job's waits.",
							&max_tokens_per_minute,
							0, 0, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("llm.quota_window_ms",
							"Developer option: the window llm.max_tokens_per_minute applies to.",
							"A minute; tests shorten it to see the window refill.  Server-wide, so every "
							"session and the job runners count the same window.",
							&quota_window_ms,
							60000, 600, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
}
