/*
 * protocol.h — wire format of the backend <-> worker channel.
 *
 * Each backend owns one DSM segment (a "channel") laid out with shm_toc:
 *   key 0: LlmChannelHeader (magic, creator pid, worker generation)
 *   key 1: request shm_mq  (backend -> worker), LLM_REQUEST_QUEUE_SIZE bytes
 *   key 2: response shm_mq (worker -> backend), LLM_RESPONSE_QUEUE_SIZE bytes
 *
 * Every shm_mq message starts with a fixed header (copied with memcpy, never
 * dereferenced in place: shm_mq gives no alignment guarantee beyond MAXALIGN
 * of the whole message) followed by a payload.  Many requests share one
 * channel; they are told apart by the backend-chosen 64-bit id.
 *
 * Request payload (after LlmRequestMsg), strings as uint32 length + bytes,
 * all text UTF-8 and NUL-free:
 *   GENERATE:   n_stop stop strings, [system if LLM_REQ_FLAG_SYSTEM], prompt
 *   CHAT:       n_stop stop strings, n_messages x (role, content)
 *   TOKENIZE:   text
 *   DETOKENIZE: int32 ids (payload_len / 4 of them)
 *   ABORT:      nothing
 * Responses (after LlmResponseMsg): TEXT (UTF-8 delta), DONE (usage in the
 * header; ends a GENERATE/CHAT/DETOKENIZE request), ERROR (SQLSTATE in the
 * header, message payload; ends any request), TOKENS (int32 ids; ends a
 * TOKENIZE request).  An aborted request gets no further messages.
 */
#ifndef LLM_PROTOCOL_H
#define LLM_PROTOCOL_H

#include "c.h"

#define LLM_CHANNEL_MAGIC		0x4c4c4d43	/* "LLMC" */
#define LLM_CHANNEL_KEY_HEADER	0
#define LLM_CHANNEL_KEY_REQUEST	1
#define LLM_CHANNEL_KEY_RESPONSE 2

#define LLM_REQUEST_QUEUE_SIZE	(256 * 1024)
#define LLM_RESPONSE_QUEUE_SIZE	(256 * 1024)

/* Caps (LLM_MAX_STOP_STRINGS, ...) are the engine's, request.h. */
#include "request.h"

typedef struct LlmChannelHeader
{
	uint32		magic;
	int32		backend_pid;
	uint32		generation;		/* worker generation the channel was built for */
} LlmChannelHeader;

typedef enum LlmRequestKind
{
	LLM_REQ_GENERATE = 1,
	LLM_REQ_CHAT,
	LLM_REQ_TOKENIZE,
	LLM_REQ_DETOKENIZE,
	LLM_REQ_ABORT
} LlmRequestKind;

#define LLM_REQ_FLAG_RAW		0x01	/* prompt is tokenized as is, no chat template */
#define LLM_REQ_FLAG_SEED		0x02	/* seed is valid */
#define LLM_REQ_FLAG_SYSTEM		0x04	/* GENERATE carries a system message */
#define LLM_REQ_FLAG_IGNORE_EOS	0x08	/* benchmarks: run to max_tokens */

typedef struct LlmRequestMsg
{
	uint32		kind;			/* LlmRequestKind */
	uint32		flags;			/* LLM_REQ_FLAG_* */
	uint64		id;				/* backend-chosen, unique per channel */
	int32		max_tokens;
	int32		top_k;
	double		temperature;
	double		top_p;
	double		min_p;
	double		repetition_penalty;
	uint64		seed;
	int32		n_stop;
	int32		n_messages;
	int32		debug_poison;	/* test hook: poison this many logits rows (llm.debug_poison_logits) */
	uint64		cache_salt;		/* prefix-cache isolation key (llm.prefix_cache_isolation); 0 = shared */
	uint32		payload_len;	/* bytes following this header */
} LlmRequestMsg;

typedef enum LlmResponseKind
{
	LLM_RESP_TEXT = 1,
	LLM_RESP_DONE,
	LLM_RESP_ERROR,
	LLM_RESP_TOKENS
} LlmResponseKind;

/* finish_reason values of DONE; same numbering as the engine's llm_finish_reason. */
#define LLM_WIRE_FINISH_STOP	1
#define LLM_WIRE_FINISH_LENGTH	2

typedef struct LlmResponseMsg
{
	uint32		kind;			/* LlmResponseKind */
	uint32		finish_reason;	/* DONE */
	uint64		id;
	int32		prompt_tokens;	/* DONE: usage */
	int32		cached_tokens;
	int32		completion_tokens;
	int32		sqlstate;		/* ERROR: MAKE_SQLSTATE code */
	double		ttft_ms;
	double		total_ms;
	uint32		payload_len;
} LlmResponseMsg;

#endif
