/*
 * engine.h — the inference engine: model + tokenizer + paged KV cache +
 * continuous-batching scheduler + sampler, driven one step at a time.
 *
 * Plain C, no PostgreSQL headers: the background worker (bgworker/) and the
 * CLI (tools/) are its two drivers.  Not thread-safe: one driver thread calls
 * everything; compute threads live inside the backend.
 *
 * Lifecycle of a request: llm_engine_add_request() queues it (waiting);
 * llm_engine_step() runs one iteration (Orca-style iteration-level
 * scheduling, Yu et al. OSDI 2022; chunked prefill as in Sarathi/vLLM) and
 * reports events through the callback: TEXT deltas as tokens are sampled,
 * then exactly one FINISHED or ERROR per request.  llm_engine_abort() drops a
 * request at once (no event) and frees its KV blocks.
 */
#ifndef LLM_ENGINE_H
#define LLM_ENGINE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "chat_template.h"
#include "request.h"

typedef struct llm_engine llm_engine;

typedef struct llm_engine_config
{
	const char *model_path;		/* GGUF file */
	const char *device;			/* "cpu", "cuda", "auto"; NULL = "auto" */
	int			n_threads;		/* CPU compute threads; <= 0: all online CPUs */
	int			n_ctx;			/* max tokens per sequence; <= 0: the model's context length */
	int			block_size;		/* tokens per KV block; <= 0: 16 */
	int64_t		kv_cache_bytes;	/* KV memory budget; <= 0: enough for max_running * n_ctx, capped at 1 GiB */
	int			max_batched_tokens;	/* token budget per step (prefill chunking); <= 0: 512 */
	int			max_running;	/* max sequences in a step; <= 0: 64 */
	bool		prefix_caching; /* reuse full KV blocks across requests */
} llm_engine_config;

/* Defaults for every field (model_path NULL). */
void		llm_engine_config_defaults(llm_engine_config *c);

/* True when an engine created from a would be the same as one from b (strings compared by value). */
bool		llm_engine_config_equal(const llm_engine_config *a, const llm_engine_config *b);

typedef enum llm_event_kind
{
	LLM_EVENT_TEXT,				/* text delta (valid UTF-8, may be empty) */
	LLM_EVENT_FINISHED,			/* final: finish_reason + usage */
	LLM_EVENT_ERROR				/* final: status + message */
} llm_event_kind;

typedef struct llm_event
{
	llm_event_kind kind;
	uint64_t	request_id;
	void	   *user_data;		/* as given to add_request */
	const char *text;			/* TEXT: delta; ERROR: message (NUL-terminated) */
	size_t		text_len;
	int32_t		token_id;		/* TEXT: the sampled token, -1 for a flush */
	llm_finish_reason finish_reason;
	llm_status	status;
	llm_usage	usage;
	/* FINISHED of a SCORE request: per continuation, the sum of the natural
	 * log-probabilities of its tokens (n_scores = n_continuations) */
	const double *scores;
	int32_t		n_scores;
} llm_event;

typedef void (*llm_event_cb) (const llm_event *ev, void *cb_arg);

/* Load model and allocate everything; NULL + message on failure (never aborts). */
llm_engine *llm_engine_create(const llm_engine_config *c, char *err, size_t errlen);
void		llm_engine_destroy(llm_engine *e);

const llm_tokenizer *llm_engine_tokenizer(const llm_engine *e);
const llm_chat_template *llm_engine_chat_template(const llm_engine *e);
int32_t		llm_engine_n_ctx(const llm_engine *e);

/*
 * Model facts for llm_model_info(): writes a JSON object into out (cap
 * bytes, NUL-terminated); returns length needed.
 */
size_t		llm_engine_model_info_json(const llm_engine *e, char *out, size_t cap);

/*
 * Queue a request (request.h): validates it, turns its prompt into token ids
 * (chat template, tokenizer) and queues it; everything it points at is
 * copied.  id must be unique among live requests.  Errors (nothing queued,
 * no event): INVALID_PARAM / EMPTY_PROMPT (validation; also a prompt that
 * cannot be rendered: invalid UTF-8, an unknown role, a TEXT/MESSAGES prompt
 * on a model without a chat template), PROMPT_TOO_LONG (the prompt's ids alone fill the context; err
 * names both lengths), OUT_OF_MEMORY, DUPLICATE_ID.
 */
llm_status	llm_engine_submit(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
							  char *err, size_t errlen);

/*
 * Token ids of text as plain text (no template, no BOS) into a malloc'd
 * array (*ids, free() it); returns the count, or -1 + err (invalid UTF-8).
 */
int64_t		llm_engine_tokenize(const llm_engine *e, const char *text, size_t len, int32_t **ids,
								char *err, size_t errlen);

/*
 * Text of token ids (special tokens as their text; invalid UTF-8 as U+FFFD)
 * into a malloc'd NUL-terminated buffer (*text, free() it); returns its
 * length, or -1 + err (an id outside the vocabulary).
 */
int64_t		llm_engine_detokenize(const llm_engine *e, const int32_t *ids, int32_t n, char **text,
								  char *err, size_t errlen);

/*
 * Queue a request over prompt token ids (n >= 1, copied).  id must be unique
 * among live requests.  Errors: PROMPT_TOO_LONG if n >= n_ctx (no room for one
 * generated token), EMPTY_PROMPT, INVALID_PARAM.  A request whose
 * prompt + max_tokens exceeds n_ctx is accepted and stops with
 * LLM_FINISH_LENGTH at the context.
 */
llm_status	llm_engine_add_request(llm_engine *e, uint64_t id, const int32_t *prompt, int32_t n,
								   const llm_sampling_params *p, void *user_data,
								   char *err, size_t errlen);

/* Drop a live request (waiting or running) and free its KV blocks; no event.  False if unknown. */
bool		llm_engine_abort(llm_engine *e, uint64_t id);

/* True while any request is waiting or running. */
bool		llm_engine_has_work(const llm_engine *e);

/*
 * One iteration: schedule, forward, sample, emit events through cb.  Returns
 * LLM_OK, or an error for an engine-wide failure (backend error): then every
 * live request has received an ERROR event and been dropped.
 */
llm_status	llm_engine_step(llm_engine *e, llm_event_cb cb, void *cb_arg);

typedef struct llm_engine_stats
{
	int32_t		n_waiting;
	int32_t		n_running;
	int32_t		last_batch_seqs;	/* sequences in the last step */
	int32_t		max_batch_seqs;		/* max sequences seen in one step */
	int32_t		last_batch_tokens;
	int32_t		kv_blocks_total;
	int32_t		kv_blocks_used;		/* referenced by live requests */
	int32_t		kv_blocks_cached;	/* unreferenced but holding a reusable prefix */
	int64_t		n_steps;
	int64_t		n_preemptions;
	int64_t		prompt_tokens;		/* cumulative */
	int64_t		cached_prompt_tokens;
	int64_t		completion_tokens;
	int64_t		prefix_queries;		/* prompt tokens looked up in the prefix cache */
} llm_engine_stats;

void		llm_engine_get_stats(const llm_engine *e, llm_engine_stats *out);

/* Test hook: force the next n logits rows to NaN (non-finite logits path). */
void		llm_engine_debug_poison_logits(llm_engine *e, int n);

/*
 * Test hook: prefill ids (n >= 1) alone in one step on fresh blocks and copy
 * the last position's n_vocab logits to out.  Requires no live requests.
 */
llm_status	llm_engine_debug_prompt_logits(llm_engine *e, const int32_t *ids, int32_t n,
										   float *out, char *err, size_t errlen);

/* Vocabulary size (length of a logits row). */
int32_t		llm_engine_n_vocab(const llm_engine *e);

#endif
