/*
 * protocol.h — the backend <-> worker channel: the layout of its DSM
 * segment and the messages on its two queues.
 *
 * Plain C, no PostgreSQL headers: both ends encode and decode through this
 * file only (channel/client.c sends requests and reads responses,
 * worker/intake.c reads requests, channel/server.c sends
 * responses), and the decoder is a pure function of the bytes, so it can be
 * fuzzed on its own.
 *
 * Segment (shm_toc, created by the backend, attached by the worker):
 *   key 0: llm_channel_header (magic, creator pid, worker generation)
 *   key 1: request shm_mq  (backend -> worker), LLM_REQUEST_QUEUE_SIZE bytes
 *   key 2: response shm_mq (worker -> backend), LLM_RESPONSE_QUEUE_SIZE bytes
 *
 * A message is a 16-byte header { uint32 kind; uint32 body_len; uint64 id }
 * followed by body_len bytes.  id is the backend-chosen request id, unique
 * per channel: many requests share one channel.  Scalars are in the
 * machine's byte order and layout (both ends are the same build of llm.so)
 * and are read with memcpy, never in place.  Arrays of ids, scores and floats start
 * at offsets aligned to their element size, so a decoded message points at
 * them in the received bytes: the decoder requires the message to start
 * 8-byte aligned (shm_mq delivers messages MAXALIGN'ed) and refuses anything
 * else.  Strings of a request are uint32 length + bytes + a NUL byte, and
 * contain no NUL (so they are C strings in place); text of a response is
 * uint32 length + bytes (model output is not under anyone's control).
 *
 * Requests (backend -> worker):
 *   SUBMIT      an llm_request (request.h): mode, prompt kind, flags, the
 *               sampling options of LLM_WIRE_PARAMS, counts, then prompt,
 *               system, stop strings, messages (role, content),
 *               continuations, token ids, the grammar source (bytes:
 *               length + bytes) when its flag is set, the tools JSON of a
 *               chat prompt when its flag is set (flags also carry
 *               no_generation_prompt, enable_thinking and strip_thinking), the embedding
 *               options (one u32: pooling in bits 0-7, normalisation in
 *               bits 8-15, truncate in bit 16), priority; then the
 *               accounting tags (role, database); then the submitter
 *               (llm_wire_client: pid, role, database).  Not on the wire:
 *               the request's session, which the worker sets from the channel
 *   TOKENIZE    text: its token ids as plain text (answer: TOKENS)
 *   DETOKENIZE  token ids: their text (answer: TEXT, then DONE)
 *   SUBMIT, TOKENIZE and DETOKENIZE end with the alias of the model that
 *   serves them (a request string, empty for the default model, at most
 *   LLM_MAX_MODEL_ALIAS bytes)
 *   ABORT       nothing: drop request id (no answer follows)
 * Responses (worker -> backend):
 *   TEXT        a UTF-8 delta of the request's output (several are merged
 *               into one while they wait to be sent)
 *   DONE        ends a SUBMIT or DETOKENIZE: finish reason, usage, and the
 *               scores of a SCORE request (one per continuation)
 *   ERROR       ends any request: SQLSTATE (MAKE_SQLSTATE encoding), message
 *   TOKENS      ends a TOKENIZE: token ids
 *   VECTOR      ends a SUBMIT of an EMBED request: usage, then its vector
 *               (count, 1..LLM_WIRE_MAX_VECTOR, then that many floats at
 *               a 4-byte aligned offset)
 * An aborted request gets no further messages.
 */
#ifndef LLM_PROTOCOL_H
#define LLM_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/request.h"

/* ---------- segment ---------- */

#define LLM_CHANNEL_MAGIC		0x4c4c4d43	/* "LLMC" */
#define LLM_CHANNEL_KEY_HEADER	0
#define LLM_CHANNEL_KEY_REQUEST	1
#define LLM_CHANNEL_KEY_RESPONSE 2

#define LLM_REQUEST_QUEUE_SIZE	(256 * 1024)
#define LLM_RESPONSE_QUEUE_SIZE	(256 * 1024)

/*
 * Locking: none.  Written once by the creating backend before it publishes
 * the segment's handle in its registry slot (under the registry's lock),
 * never written again; the worker reads it after attaching.  The two queues
 * synchronise themselves (shm_mq: one sender, one receiver each).
 */
typedef struct llm_channel_header
{
	uint32_t	magic;
	int32_t		backend_pid;
	uint32_t	generation;		/* worker generation the channel was built for */
} llm_channel_header;

/* ---------- messages ---------- */

#define LLM_WIRE_HEADER_SIZE	16

typedef enum llm_wire_kind
{
	/* backend -> worker */
	LLM_WIRE_SUBMIT = 1,
	LLM_WIRE_TOKENIZE,
	LLM_WIRE_DETOKENIZE,
	LLM_WIRE_ABORT,
	/* worker -> backend */
	LLM_WIRE_TEXT = 16,
	LLM_WIRE_DONE,
	LLM_WIRE_ERROR,
	LLM_WIRE_TOKENS,
	LLM_WIRE_VECTOR
} llm_wire_kind;

/*
 * The longest vector a VECTOR message carries: 4 times the largest
 * embedding length of current models (16,384), 256 KiB of floats.
 */
#define LLM_WIRE_MAX_VECTOR		65536

/*
 * The scalar fields of llm_sampling_params, in wire order, with their wire
 * type: a new scalar option is one row here (its pointer fields, stop, are
 * encoded with the strings).
 */
#define LLM_WIRE_PARAMS(X) \
	X(i32, max_tokens) \
	X(f64, temperature) \
	X(f64, top_p) \
	X(i32, top_k) \
	X(f64, min_p) \
	X(f64, repetition_penalty) \
	X(flag, has_seed) \
	X(u64, seed) \
	X(flag, ignore_eos) \
	X(u64, cache_salt) \
	X(i32, debug_poison_logits)

/*
 * Who submitted a SUBMIT request: the backend's pid, its current role and
 * database (OIDs), so the worker's records (llm_recent_requests) can be tied
 * to a session.  Informational only: the worker trusts nothing in it.
 */
typedef struct llm_wire_client
{
	int32_t		pid;
	uint32_t	role;
	uint32_t	database;
} llm_wire_client;

/*
 * One message, decoded or to encode.  Which fields count depends on kind;
 * the others are zero.  A decoded message points into the received bytes
 * (and into an llm_wire_arrays for the pointer arrays of a request): it is
 * valid while both are.
 */
typedef struct llm_wire_msg
{
	llm_wire_kind kind;
	uint64_t	id;
	/* SUBMIT */
	llm_request request;
	/* TOKENIZE: the text (a C string in place); TEXT: the delta; ERROR: the message */
	const char *text;
	size_t		text_len;
	/* DETOKENIZE, TOKENS */
	const int32_t *ids;
	int32_t		n_ids;
	/* DONE */
	llm_finish_reason finish_reason;
	llm_usage	usage;
	const double *scores;
	int32_t		n_scores;		/* <= LLM_MAX_CONTINUATIONS */
	/* VECTOR (with usage): n_vector floats, pointing into the received bytes */
	const float *vector;
	int32_t		n_vector;
	/* ERROR */
	int32_t		sqlstate;
	/*
	 * SUBMIT: who the request's tokens are accounted to (the backend's
	 * current role and database OIDs; opaque to the engine)
	 */
	uint32_t	role_id;
	uint32_t	database_id;
	/* SUBMIT: the submitter */
	llm_wire_client client;
	/*
	 * TOKENIZE, DETOKENIZE: the model's alias, NULL or "" for the default
	 * (SUBMIT carries it as request.model); decoded: a C string in place,
	 * NULL when empty, for all three kinds (SUBMIT: equal to request.model)
	 */
	const char *model;
} llm_wire_msg;

/* Where a decoded request's pointer arrays live (the strings stay in the message). */
typedef struct llm_wire_arrays
{
	const char *stop[LLM_MAX_STOP_STRINGS];
	llm_chat_message messages[LLM_MAX_MESSAGES];
	const char *continuations[LLM_MAX_CONTINUATIONS];
	size_t		continuation_lens[LLM_MAX_CONTINUATIONS];
} llm_wire_arrays;

/*
 * Encode m into buf (cap bytes).  Returns the message's size, having written
 * it only if that is <= cap (so a first call with cap 0 sizes the buffer),
 * or 0 if m cannot be a message: an unknown kind, a count over request.h's
 * limits, a NULL array with a non-zero count, a request string with a NUL
 * byte, a length over UINT32_MAX.  Whatever it encodes decodes back equal.
 */
size_t		llm_wire_encode(const llm_wire_msg *m, void *buf, size_t cap);

typedef enum llm_wire_result
{
	LLM_WIRE_OK = 0,
	LLM_WIRE_NO_HEADER,			/* shorter than a header, or not 8-byte aligned: nothing is known */
	LLM_WIRE_MALFORMED			/* m->kind and m->id are the header's; the rest is not usable */
} llm_wire_result;

/*
 * Decode the message in data[0..len) into m, trusting nothing: every length
 * and count is checked against the bytes left and request.h's limits, every
 * enum value against its range, every request string for its NUL
 * terminator and the absence of other NULs, and nothing may follow the
 * body.  *why (if not NULL) names the first defect found.  Options are not
 * checked here: that is llm_request_validate's job.
 */
llm_wire_result llm_wire_decode(const void *data, size_t len, llm_wire_msg *m,
								llm_wire_arrays *arrays, const char **why);

#endif
