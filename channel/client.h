/*
 * client.h — backend side of the backend <-> worker channel.
 *
 * A backend submits requests (each gets a per-backend id, increasing), keeps
 * them in a local table until their final message arrives, and takes the
 * result out.  Many requests can be in flight at once (llm_generate(text[]),
 * the LLM Batch node); they are multiplexed on one channel.  Messages are
 * encoded and decoded by protocol.c only.
 *
 * Failure rules:
 *  - an ERROR/cancel/statement_timeout during a wait propagates normally; the
 *    transaction (or subtransaction) abort callback then aborts every request
 *    submitted at that nesting level or deeper (a released savepoint's
 *    requests count at its parent's level) (an abort message, or, if the
 *    queue is mid-message, dropping the whole channel: the worker aborts all
 *    requests of a channel it sees detached);
 *  - a request sent with llm_submit_session outlives transactions: only
 *    llm_abort_request, a dropped channel or the process's exit ends it
 *    (the job runner's requests span its short transactions);
 *  - the worker exiting makes every waiter raise ERROR 55000 at once;
 *  - a channel built for an older worker generation is rebuilt on next use;
 *  - a SUBMIT's token reservation (quota.h) is settled exactly once: with
 *    its usage when DONE arrives, else (an ERROR, an abort, a dropped
 *    channel, the backend's exit) at the whole reservation.
 */
#ifndef LLM_CHANNEL_H
#define LLM_CHANNEL_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"

#include "protocol.h"

/* Define the channel's setting, llm.worker_wait_timeout (from _PG_init). */
extern void llm_channel_define_gucs(void);

/* llm.worker_wait_timeout (ms): how long to wait for a running worker. */
extern int	llm_worker_wait_timeout(void);

/* A finished request, copied into the caller's memory context. */
typedef struct LlmResult
{
	bool		failed;
	int			sqlstate;		/* failed: MAKE_SQLSTATE code */
	char	   *message;		/* failed: UTF-8 message */
	char	   *text;			/* UTF-8, NUL-terminated (generation, detokenize) */
	int			text_len;
	int32	   *tokens;			/* tokenize */
	int			n_tokens;
	llm_finish_reason finish_reason;	/* generation: STOP or LENGTH */
	llm_usage	usage;
	double	   *scores;			/* SCORE: one per continuation */
	int			n_scores;
	float	   *vector;			/* EMBED: the pooled hidden state */
	int			n_vector;
} LlmResult;

/*
 * Send a request (request.h; checked by the caller with
 * llm_request_validate_options and llm_request_validate_prompt) and return
 * its id.  Waits (interruptibly) for a
 * running worker and for room in the queue.  The request is first
 * admitted under the session's token limit (quota.h): ERROR 53400 if it
 * does not fit.
 */
extern uint64 llm_submit(const llm_request *req);

/*
 * llm_submit, but not aborted at the end of the (sub)transaction, and
 * admitted under limit (the job owner's): when it does not fit, nothing is
 * sent, 0 is returned and *retry_at says when it may fit.
 */
extern uint64 llm_submit_session(const llm_request *req, int limit, TimestampTz *retry_at);

/* This backend as a request's submitter: pid, current role, database. */
extern void llm_fill_client(llm_wire_client *client);

/* model: the alias of the model whose tokenizer is used (NULL: the default model). */
extern uint64 llm_submit_tokenize(const char *model, const char *utf8, int len);
extern uint64 llm_submit_detokenize(const char *model, const int32 *ids, int n);

/* True once the final message of id has arrived (or it failed). */
extern bool llm_request_is_done(uint64 id);

/*
 * True while id is submitted and neither taken nor aborted: false for a
 * request a (sub)transaction's abort aborted, which is_done reports done.
 */
extern bool llm_request_pending(uint64 id);

/*
 * True once any output of id has arrived (a text delta, or its final
 * message): the worker has admitted it and run its prefill.
 */
extern bool llm_request_started(uint64 id);

/*
 * Read every available response; if none was available and block is true,
 * wait (interruptibly) for the worker to send something.
 */
extern void llm_channel_poll(bool block);

/*
 * Append the text (UTF-8) of request id that arrived since the last call to
 * out and drop it from the request; false when there is none (or the
 * request is unknown or failed).  What is taken is whole TEXT messages, and
 * the worker cuts its deltas at character boundaries (output.c: the
 * detokenizer emits complete UTF-8 only, a held-back stop-string prefix
 * starts at a character), so out gains complete characters.  The final
 * result (llm_take_result) then holds only the text not taken.
 */
extern bool llm_take_text(uint64 id, StringInfo out);

/* Wait until request id is done. */
extern void llm_wait_request(uint64 id);

/* Copy the result of a done request into CurrentMemoryContext and forget it. */
extern LlmResult *llm_take_result(uint64 id);

/* Abort an outstanding request (no-op if unknown) and forget it. */
extern void llm_abort_request(uint64 id);

#endif
