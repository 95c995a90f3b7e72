/*
 * quota.h — llm.max_tokens_per_minute: the per-role token limit, enforced
 * at admission by reservations in main shared memory.
 *
 * A request is admitted only if it fits: before it is sent (a statement's
 * call, the LLM Batch node's rows, llm_agg's pieces, llm_submit's store
 * entry, a job's row) it reserves an upper bound of the tokens it can use
 * (llm_quota_bound), capped at the limit, in the ledger of its (role,
 * database); when it ends the reservation is replaced by what it used.  A
 * request fits when the tokens charged in the window (llm.quota_window_ms,
 * a minute) plus those reserved by requests in flight plus its own
 * reservation stay within the limit, or when nothing is charged or
 * reserved at all: one request bigger than the limit runs alone, the one
 * request of slack.  So in any window a role's tokens in a database stay
 * within the limit plus one request, however many sessions submit at once.
 *
 * What a request is charged when it ends: prompt tokens (cached ones
 * included) and completion tokens as the worker reports them, plus for a
 * SCORE request the upper bound of its continuations' tokens (their bytes
 * and two tokens each; with continuation answers, an llm_join request,
 * each candidate's bytes, two tokens and the template's per-message tokens,
 * plus every answer's bound once per candidate: the worker counts them in
 * llm_usage.continuation_tokens, but the answer that settles the ticket
 * does not carry them).  A
 * request that failed, was aborted or was cancelled while running is
 * charged its whole reservation (what it used is not known); one cancelled
 * before it ran is charged nothing.
 *
 * The ledger counts every request, limited or not, so a limit set later
 * sees what the role used before it; when its table is full the requests
 * of roles without a limit go uncounted and a limited call fails.
 *
 * Locking: one LWLock (tranche "llm quota") guards the whole ledger; it is
 * taken briefly at each admission and each end.  Nothing else is taken
 * while it is held, so it nests inside any other lock of the library (the
 * asynchronous store settles under its own lock).
 */
#ifndef LLM_QUOTA_H
#define LLM_QUOTA_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "engine/request.h"

/* Define llm.max_tokens_per_minute and llm.quota_window_ms (from _PG_init). */
extern void llm_quota_define_gucs(void);

/* Request the ledger's shared memory (from _PG_init, before llm_registry_request). */
extern void llm_quota_request(void);

/* This session's llm.max_tokens_per_minute (0: no limit). */
extern int	llm_quota_session_limit(void);

/*
 * A request's reservation, kept by whoever ends it (a backend's pending
 * request, an entry of the asynchronous store) and settled exactly once.
 */
typedef struct LlmQuotaTicket
{
	bool		active;			/* reserved and not yet settled */
	Oid			role;
	Oid			database;
	int64		reserved;		/* tokens reserved at admission */
	int64		extra;			/* charged on top of the reported usage (SCORE continuations) */
} LlmQuotaTicket;

/*
 * Admit req for the current role in this database under limit (0: no
 * limit, only counted).  True and *ticket set when it fits.  Otherwise
 * (ticket inactive): with retry_at NULL, ERROR 53400; else false and
 * *retry_at the earliest time it may fit (jobs wait, they do not fail).
 */
extern bool llm_quota_admit(const llm_request *req, int limit, LlmQuotaTicket *ticket,
							TimestampTz *retry_at);

/*
 * End a reservation: usage, what the request used (NULL: unknown, charge
 * the reservation), replaces it.  A no-op for an inactive ticket; the
 * ticket becomes inactive.
 */
extern void llm_quota_settle(LlmQuotaTicket *ticket, const llm_usage *usage);

/* End a reservation of a request that never ran: nothing is charged. */
extern void llm_quota_refund(LlmQuotaTicket *ticket);

/*
 * The token limit of role as a new session of it in this database would
 * have it (pg_db_role_setting, llm_role_setting), for the job runner.
 */
extern int	llm_quota_role_limit(Oid role);

#endif
