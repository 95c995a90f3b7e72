/*
 * channel.h — backend side of the backend <-> worker channel.
 *
 * A backend submits requests (each gets a per-backend id, increasing), keeps
 * them in a local table until their final message arrives, and takes the
 * result out.  Many requests can be in flight at once (llm_generate(text[]),
 * later the batch scan node); they are multiplexed on one channel.
 *
 * Failure rules:
 *  - an ERROR/cancel/statement_timeout during a wait propagates normally; the
 *    transaction (or subtransaction) abort callback then aborts every request
 *    submitted at that nesting level or deeper (an abort message, or, if the
 *    queue is mid-message, dropping the whole channel: the worker aborts all
 *    requests of a channel it sees detached);
 *  - the worker exiting makes every waiter raise ERROR 55000 at once;
 *  - a channel built for an older worker generation is rebuilt on next use.
 */
#ifndef LLM_CHANNEL_H
#define LLM_CHANNEL_H

#include "postgres.h"

#include "protocol.h"

/* A generation or chat request; all strings UTF-8, NUL-terminated. */
typedef struct LlmGenRequest
{
	LlmRequestKind kind;		/* LLM_REQ_GENERATE or LLM_REQ_CHAT */
	int32		max_tokens;
	double		temperature;
	double		top_p;
	int32		top_k;
	double		min_p;
	double		repetition_penalty;
	bool		has_seed;
	uint64		seed;
	bool		raw;			/* GENERATE: no chat template */
	bool		ignore_eos;
	int			n_stop;
	char	  **stop;
	char	   *system;			/* GENERATE: system message or NULL (template default) */
	char	   *prompt;			/* GENERATE */
	int			n_messages;		/* CHAT */
	char	  **roles;
	char	  **contents;
} LlmGenRequest;

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
	const char *finish_reason;	/* "stop", "length" */
	int32		prompt_tokens;
	int32		cached_tokens;
	int32		completion_tokens;
	double		ttft_ms;
	double		total_ms;
} LlmResult;

extern uint64 llm_submit_generate(const LlmGenRequest *req);
extern uint64 llm_prefix_cache_salt(void);
extern uint64 llm_submit_tokenize(const char *utf8, int len);
extern uint64 llm_submit_detokenize(const int32 *ids, int n);

/* True once the final message of id has arrived (or it failed). */
extern bool llm_request_is_done(uint64 id);

/*
 * Read every available response; if none was available and block is true,
 * wait (interruptibly) for the worker to send something.
 */
extern void llm_channel_poll(bool block);

/* Wait until request id is done. */
extern void llm_wait_request(uint64 id);

/* Copy the result of a done request into CurrentMemoryContext and forget it. */
extern LlmResult *llm_take_result(uint64 id);

/* Abort an outstanding request (no-op if unknown) and forget it. */
extern void llm_abort_request(uint64 id);

#endif
