/*
 * engine.h — the inference engine: model + tokenizer + paged KV cache +
 * continuous-batching scheduler + sampler, driven one step at a time.
 *
 * Plain C, no PostgreSQL headers: the inference worker (worker/) and the
 * CLI (tools/) are its two drivers.  Not thread-safe: one driver thread calls
 * everything; compute threads live inside the backend, the grammar compile
 * thread inside the grammar store (lp_grammar.h).
 *
 * Lifecycle of a request: llm_engine_submit() queues it (waiting);
 * llm_engine_step() runs one iteration (Orca-style iteration-level
 * scheduling, Yu et al. OSDI 2022; chunked prefill as in Sarathi/vLLM) and
 * reports events through the callback: for a GENERATE request TEXT deltas
 * as tokens are sampled, then exactly one FINISHED or ERROR; for a SCORE
 * request exactly one FINISHED (with the scores) or ERROR; for an EMBED
 * request exactly one VECTOR (with the pooled hidden state) or ERROR.
 * llm_engine_abort() drops a request at once (no event) and frees its KV
 * blocks.
 */
#ifndef LLM_ENGINE_H
#define LLM_ENGINE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "engine/text/chat_template.h"
#include "config_list.h"
#include "engine/grammar/lp_grammar.h"
#include "request.h"

typedef struct llm_engine llm_engine;

/*
 * The engine's one configuration: one field per row of config_list.h's
 * LLM_ENGINE_SETTINGS, in its order, with the contract written at the row.
 * Start from llm_engine_config_defaults() and change what the driver sets;
 * llm_engine_create() rejects values out of the row's range (no silent
 * re-defaulting) and resolves the "auto" ones, once, from the model and
 * backend: llm_engine_get_config() and llm_engine_model_info_json() report
 * the resolved values.
 */
#define LLM_CONFIG_FIELD_INT(f, guc, cli, def, min, max, unit, ...) LLM_SETTING_CTYPE_##unit f;
#define LLM_CONFIG_FIELD_BOOL(f, ...) bool f;
#define LLM_CONFIG_FIELD_STR(f, ...) const char *f;
typedef struct llm_engine_config
{
	LLM_ENGINE_SETTINGS(LLM_CONFIG_FIELD_INT, LLM_CONFIG_FIELD_BOOL, LLM_CONFIG_FIELD_STR, LLM_CONFIG_FIELD_STR)
} llm_engine_config;
#undef LLM_CONFIG_FIELD_INT
#undef LLM_CONFIG_FIELD_BOOL
#undef LLM_CONFIG_FIELD_STR

/*
 * The list at run time, one entry per row in its order (LLM_N_SETTINGS):
 * what the drivers iterate to define their GUCs and flags.
 */
extern const llm_setting llm_settings[LLM_N_SETTINGS];

/* The row whose field is at offset (offsetof(llm_engine_config, f)); NULL if none. */
const llm_setting *llm_setting_at(size_t offset);

/* An INT row's field of c, as stored (an MB row: bytes). */
int64_t		llm_setting_get_int(const llm_engine_config *c, const llm_setting *s);

/* Store v (as stored: an MB row's bytes) in an INT row's field of c. */
void		llm_setting_set_int(llm_engine_config *c, const llm_setting *s, int64_t v);

/*
 * Which setting a configuration failure is due to: offsetof(llm_engine_config,
 * field) of it, or LLM_CONFIG_NO_FIELD (out of memory, an internal error).
 * A driver maps it to its own name of the setting.
 */
#define LLM_CONFIG_NO_FIELD ((size_t) -1)

/* The defaults of every row (model_path NULL, an ENUM its first option). */
void		llm_engine_config_defaults(llm_engine_config *c);

/*
 * 0 when a KV cache of bytes is within the engine's share of this
 * machine's memory: at most half of the physical memory
 * (sysconf(_SC_PHYS_PAGES)); else -1 + err naming both sizes.
 * llm_engine_create applies it to the resolved budget.
 */
int			llm_engine_check_kv_budget(int64_t bytes, char *err, size_t errlen);

/*
 * True when an engine created from a would be the same as one from b: every
 * row of the list compared (strings by value; NULL is "" for a STR row, the
 * first option for an ENUM row).
 */
bool		llm_engine_config_equal(const llm_engine_config *a, const llm_engine_config *b);

typedef enum llm_event_kind
{
	LLM_EVENT_TEXT,				/* text delta (valid UTF-8, may be empty) */
	LLM_EVENT_FINISHED,			/* final: finish_reason + usage */
	LLM_EVENT_ERROR,			/* final: status + message */
	LLM_EVENT_TOKENS,			/* final, llm_engine_tokenize_request only: ids */
	LLM_EVENT_VECTOR			/* final, EMBED only: the vector, finish_reason STOP, usage */
} llm_event_kind;

typedef struct llm_event
{
	llm_event_kind kind;
	uint64_t	request_id;
	void	   *user_data;		/* as given to llm_engine_submit */
	const char *text;			/* TEXT: delta; ERROR: message (NUL-terminated) */
	size_t		text_len;
	int32_t		token_id;		/* TEXT: the sampled token, -1 for a flush */
	llm_finish_reason finish_reason;
	llm_status	status;
	llm_usage	usage;
	/* FINISHED of a SCORE request: per continuation, the sum of the natural
	 * log-probabilities of its tokens (n_scores = n_continuations); valid
	 * during the callback only */
	const double *scores;
	int32_t		n_scores;
	/* TOKENS: the text's token ids; valid during the callback only */
	const int32_t *ids;
	int64_t		n_ids;
	/*
	 * VECTOR: the request's pooled final hidden state, n_vector =
	 * llm_engine_n_embd floats (for LLM_POOLING_LAST: the hidden state of
	 * the prompt's last token after the final norm, bit-identical to that
	 * row of llm_model_forward_out whatever else the step computed); valid
	 * during the callback only
	 */
	const float *vector;
	int32_t		n_vector;
} llm_event;

typedef void (*llm_event_cb) (const llm_event *ev, void *cb_arg);

/* Load model and allocate everything; NULL + message on failure (never aborts). */
llm_engine *llm_engine_create(const llm_engine_config *c, char *err, size_t errlen);

/* llm_engine_create, and on failure *field: the setting at fault (LLM_CONFIG_NO_FIELD: none). */
llm_engine *llm_engine_create_ex(const llm_engine_config *c, size_t *field, char *err, size_t errlen);

/*
 * Check that llm_engine_create(c) would get past everything that needs
 * neither the weights nor the KV cache: the settings' ranges, the model
 * file (opened and validated, its tokenizer built, its architecture known
 * and hyper-parameters valid), the chat template against the vocabulary,
 * the device (the backend opened: CUDA loadable with a device present),
 * the KV geometry and the resolved budget (llm_engine_check_kv_budget,
 * at least 2 blocks) and the context.  What it cannot see: the weights'
 * tensors and the allocations themselves (weights, KV cache).  0, with
 * the resolved configuration in *resolved when not NULL (strings: c's;
 * an "auto" device as the backend's static name, e.g. "cpu");
 * or -1 + err and *field (llm_engine_create_ex).  Memory it takes is
 * given back before it returns, so a driver checks a new configuration
 * with it while the old engine serves.
 */
int			llm_engine_check_config(const llm_engine_config *c, llm_engine_config *resolved,
									size_t *field, char *err, size_t errlen);
/*
 * Free everything.  Joins the grammar store's compile thread, which first
 * finishes a compile in progress (bounded by grammar.h's limits:
 * milliseconds for realistic grammars, under a second measured at the
 * state limits; lp_grammar.h, Shutdown).
 */
void		llm_engine_destroy(llm_engine *e);

const llm_tokenizer *llm_engine_tokenizer(const llm_engine *e);
const llm_chat_template *llm_engine_chat_template(const llm_engine *e);
/*
 * Why the model file's chat template was refused at load (a construct
 * outside the Jinja subset, named with line:column): the model then serves
 * raw prompts only.  NULL when it was not.
 */
const char *llm_engine_chat_refused(const llm_engine *e);

/*
 * A TEXT or MESSAGES request's prompt as the chat template renders it (with
 * its options: add_generation_prompt, tools, enable_thinking): *text
 * malloc'd (NUL-terminated, *len bytes), what HF's apply_chat_template
 * gives; returns the prompt's token count, what the request would be
 * charged.  -1 + err as a submission of the request would fail (the
 * template's raise_exception: "chat template: " + its message).  Read-only
 * on the engine: any thread.
 */
int64_t		llm_engine_render(const llm_engine *e, const llm_request *req, char **text, size_t *len,
							  char *err, size_t errlen);
int32_t		llm_engine_n_ctx(const llm_engine *e);

/* The configuration the engine runs with: every auto value resolved (strings owned by e). */
void		llm_engine_get_config(const llm_engine *e, llm_engine_config *out);

/*
 * Model facts for llm_model_info(): writes a JSON object into out (cap
 * bytes, NUL-terminated); returns length needed.
 */
size_t		llm_engine_model_info_json(const llm_engine *e, char *out, size_t cap);

/*
 * Queue a request (request.h): validates it, turns its prompt into token ids
 * (chat template, tokenizer) and queues it; everything it points at is
 * copied.  id must be unique among live requests.  Errors (nothing queued,
 * no event): INVALID_PARAM / EMPTY_PROMPT (validation; also a prompt or
 * continuation that cannot be rendered: invalid UTF-8, an unknown role, a
 * TEXT/MESSAGES prompt on a model without a chat template, a token id
 * outside the vocabulary, continuation_eot on a model without an
 * end-of-turn token), PROMPT_TOO_LONG (GENERATE: the prompt's ids alone
 * fill the context; SCORE: prompt + a continuation (+ end of turn) exceed
 * it; err names the lengths), OUT_OF_MEMORY, DUPLICATE_ID.
 *
 * GENERATE: a request whose prompt + max_tokens exceeds n_ctx is accepted
 * and stops with LLM_FINISH_LENGTH at the context.  A grammar (request.h)
 * the engine's grammar store holds compiled is attached here; any other is
 * compiled on the store's compile thread (lp_grammar.h), never here: the
 * request is queued waiting for its grammar (counted in n_waiting, not
 * admitted by the scheduler: no KV blocks, no prefill) and joins the
 * scheduler at the first step after the compile finished, with the same
 * processor, so its output is what it would have been with the grammar
 * compiled inline.  A source that does not compile then finishes the
 * request with one ERROR event (no other event before it) of the status
 * and message submission used to return: INVALID_PARAM (err names the
 * construct), PROMPT_TOO_LONG (over a grammar limit), OUT_OF_MEMORY.
 * Requests for a source being compiled share that one compile.
 *
 * A prompt of at least LLM_TOKENIZE_INLINE_BYTES bytes of text (prompt,
 * system or messages, plus all continuations) is tokenized (and its chat
 * template rendered) on the engine's tokenizer thread, never here: the
 * request waits outside the scheduler (counted in n_waiting, abortable)
 * and is submitted over its ids at the first step after the thread
 * finished, in the order such requests came, so its ids and its output
 * are what an inline submission gives.  An error found then (an invalid
 * prompt, a prompt or continuation too long for the context, an empty
 * prompt, out of memory) finishes the request with one ERROR event of
 * the status and message submission returns for a smaller prompt.
 * Validation, the size bound and a duplicate id are still answered here.
 *
 * SCORE: for each continuation k (tokenized as plain text, followed by the
 * model's end-of-turn token when continuation_eot: <|im_end|> for ChatML,
 * <end_of_turn> for Gemma, else the EOS token if it ends generation),
 * scores[k] = sum over its tokens t_j of log softmax(logits after prompt +
 * t_0..t_{j-1})[t_j], natural log, float64 sums over the fp32 rows, no
 * sampling options or processors applied (params other than cache_salt are
 * ignored).  The FINISHED event carries scores[0..n_continuations) in
 * continuation order, finish_reason LLM_FINISH_STOP, usage.prompt_tokens =
 * the prompt's ids, completion_tokens 0.  Each continuation is one
 * sequence of its own (prompt + continuation) whose prefill asks for the
 * logits of every row from the prompt's last token on; the sequences share
 * the prompt's full KV blocks (through the prefix cache, or, with prefix
 * caching off, among themselves only).  With two or more continuations the
 * prompt has a sequence of its own, computed once, whose last row scores
 * every continuation's first token; each continuation's sequence then
 * shares its full blocks, gets a private copy of its partly filled last
 * block (backend copy_blocks; without the op, or with no block free for
 * the copy, it recomputes that block) and computes only its own tokens.
 * With one continuation, its sequence computes the whole prompt.
 *
 * EMBED: one sequence of the prompt's ids (at most n_ctx of them), no
 * sampling, no speculation, sampling params other than cache_salt ignored.
 * Its prefill is that of a GENERATE request (prefix cache, chunking,
 * preemption alike); the step that completes it asks the forward for the
 * hidden state of the last token instead of its logits (llm_forward_out),
 * and the request ends with one VECTOR event (usage.prompt_tokens = the
 * prompt's ids, completion_tokens 0).
 */
llm_status	llm_engine_submit(llm_engine *e, uint64_t id, const llm_request *req, void *user_data,
							  char *err, size_t errlen);

/*
 * The token ids llm_engine_submit would queue for req's prompt (req
 * validated first) into a malloc'd array (*ids, free() it); returns the
 * count, or -1 + err (and *ids NULL).
 */
int64_t		llm_engine_prompt_ids(const llm_engine *e, const llm_request *req, int32_t **ids,
								  char *err, size_t errlen);

/*
 * Token ids of text as plain text (no template, no BOS) into a malloc'd
 * array (*ids, free() it); returns the count, or -1 + err (invalid UTF-8).
 */
int64_t		llm_engine_tokenize(const llm_engine *e, const char *text, size_t len, int32_t **ids,
								char *err, size_t errlen);

/*
 * Text below this many bytes is tokenized on the caller's (driver's)
 * thread: 16 KiB take 1 to 2 ms (SmolLM2, bench/tokenize_stall), less than
 * the step by which the hand-over to the tokenizer thread delays the
 * request; a larger text goes to the tokenizer thread (llm_engine_submit,
 * llm_engine_tokenize_request), where 1 MB takes about 0.3 s.
 */
#define LLM_TOKENIZE_INLINE_BYTES 16384

/*
 * llm_engine_tokenize of text for a driver that answers later: below
 * LLM_TOKENIZE_INLINE_BYTES it tokenizes now (LLM_OK with *ids (free() it)
 * and *n, or LLM_ERR_INVALID_TEXT + err; no event).  A larger text is
 * tokenized on the tokenizer thread as request id (*ids NULL, *n -1,
 * LLM_OK; DUPLICATE_ID / OUT_OF_MEMORY + err): a later llm_engine_step
 * sends its one final event, TOKENS with the ids, or ERROR with
 * LLM_ERR_INVALID_TEXT and the message the inline call gives.
 * llm_engine_abort drops it; until its event it counts as waiting.
 */
llm_status	llm_engine_tokenize_request(llm_engine *e, uint64_t id, const char *text, size_t len,
										void *user_data, int32_t **ids, int64_t *n,
										char *err, size_t errlen);

/*
 * Text of token ids (special tokens as their text; invalid UTF-8 as U+FFFD)
 * into a malloc'd NUL-terminated buffer (*text, free() it); returns its
 * length, or -1 + err (an id outside the vocabulary).
 */
int64_t		llm_engine_detokenize(const llm_engine *e, const int32_t *ids, int32_t n, char **text,
								  char *err, size_t errlen);

/*
 * llm_engine_submit() of a GENERATE request over prompt token ids (n >= 1,
 * copied) with options p: the same checks, errors and behaviour.
 */
llm_status	llm_engine_add_request(llm_engine *e, uint64_t id, const int32_t *prompt, int32_t n,
								   const llm_sampling_params *p, void *user_data,
								   char *err, size_t errlen);

/* Drop a live request (waiting or running) and free its KV blocks; no event.  False if unknown. */
bool		llm_engine_abort(llm_engine *e, uint64_t id);

/* True while any request is waiting or running. */
bool		llm_engine_has_work(const llm_engine *e);

/*
 * One iteration: submit the requests whose prompt the tokenizer thread
 * finished (or fail them; an llm_engine_tokenize_request gets its event),
 * admit the requests whose grammar finished compiling (or
 * fail those whose compile failed), schedule, forward, process logits,
 * sample or score, emit events through cb (which must not call back into
 * the engine).  When the only work left is requests waiting for their
 * grammar or their tokens, it waits at most a couple of milliseconds for a compile to
 * finish (engine_internal.h ENGINE_GRAMMAR_IDLE_MS) instead of returning
 * at once, so a driver looping on it does not spin.  Returns
 * LLM_OK, or an error for an engine-wide failure (backend error): then every
 * live request has received an ERROR event and been dropped.
 */
llm_status	llm_engine_step(llm_engine *e, llm_event_cb cb, void *cb_arg);

typedef struct llm_engine_stats
{
	int32_t		n_waiting;			/* live requests none of whose sequences runs */
	int32_t		n_running;			/* live requests with a sequence in the running set */
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
	int64_t		computed_tokens;	/* cumulative token rows through the forward pass */
	int64_t		logits_rows;		/* cumulative logits rows the forward pass produced */
	int64_t		draft_tokens;		/* cumulative speculative tokens proposed and computed */
	int64_t		accepted_tokens;	/* of those, accepted */
	/*
	 * With a local KV group (sliding-window layers, scheduler.h) the
	 * kv_blocks_* counts above are of both pools' blocks together; these
	 * are the local pool's alone (0 without one), and the bytes of both:
	 * a global block holds the other layers' K/V of block_size positions,
	 * a local one the sliding-window layers'.
	 */
	int32_t		kv_local_blocks_total;
	int32_t		kv_local_blocks_used;
	int32_t		kv_local_blocks_cached;
	int64_t		kv_bytes_total;
	int64_t		kv_bytes_used;		/* of blocks referenced by live requests */
	/* bytes of one block of each pool; their sum is one block of every layer */
	int64_t		kv_block_bytes;
	int64_t		kv_local_block_bytes;	/* 0 without a local group */
	/* cumulative KV blocks copied (both pools) for SCORE continuations forking from their prompt */
	int64_t		copied_blocks;
	/*
	 * Steps by what they carried (cumulative): steps holding work of the
	 * interactive class, with their token rows and forward time; steps of
	 * batch work only, likewise, and the longest of these (what an
	 * interactive request arriving during one waits at most).
	 */
	int64_t		interactive_steps;
	int64_t		interactive_step_tokens;
	double		interactive_step_ms;
	int64_t		batch_steps;
	int64_t		batch_step_tokens;
	double		batch_step_ms;
	double		batch_step_max_ms;
} llm_engine_stats;

void		llm_engine_get_stats(const llm_engine *e, llm_engine_stats *out);

/*
 * Constrained decoding: grammars compiled and held, token index build time,
 * mask cache, and the time to mask one row; compiles pending on the
 * compile thread, requests waiting for a grammar, failures, the longest
 * wait (lp_grammar.h).
 */
void		llm_engine_grammar_stats(const llm_engine *e, llm_grammar_store_stats *out);

/*
 * How a SCORE request of several continuations shares its prompt's KV:
 * COPY (the default where the backend has copy_blocks): the prompt's own
 * sequence computes it once, then each continuation shares its full blocks
 * and gets a copy of its partly filled last block; RECOMPUTE: the same
 * sequences, but every continuation recomputes that last block, as when
 * the pool has no block free for a copy; PER_CONTINUATION: one sequence per
 * continuation, each computing the prompt's last block and its last row.
 * The scores are bit-identical in all three.
 */
typedef enum llm_score_sharing
{
	LLM_SCORE_SHARE_COPY = 0,
	LLM_SCORE_SHARE_RECOMPUTE,
	LLM_SCORE_SHARE_PER_CONTINUATION
} llm_score_sharing;

/* Test hook: the sharing of SCORE requests submitted from now on (COPY falls back to RECOMPUTE without copy_blocks). */
void		llm_engine_debug_score_sharing(llm_engine *e, llm_score_sharing mode);

/*
 * Test hooks (lp_grammar.h, "Test seam"): hold (true) or open the gate of
 * the grammar compile thread, which starts no compile while held, so a
 * test keeps requests waiting for their grammar as long as it likes; and,
 * with the gate open, wait until every queued compile has finished and
 * collect them (false while held).
 */
void		llm_engine_debug_grammar_hold(llm_engine *e, bool hold);
bool		llm_engine_debug_grammar_drain(llm_engine *e);

/*
 * Test seams of the tokenizer thread, as for grammars: while held it starts
 * no job (a large prompt stays "being tokenized" for exactly the steps a
 * test chooses); drain waits until every queued job finished (false while
 * held); inline_bytes replaces LLM_TOKENIZE_INLINE_BYTES for this engine.
 */
void		llm_engine_debug_tokenize_hold(llm_engine *e, bool hold);
bool		llm_engine_debug_tokenize_drain(llm_engine *e);
void		llm_engine_debug_tokenize_inline_bytes(llm_engine *e, size_t bytes);

/* Test hook: force the next n logits rows to NaN (non-finite logits path). */
void		llm_engine_debug_poison_logits(llm_engine *e, int n);

/*
 * Test hook: prefill ids (n >= 1) alone in one step on fresh blocks and copy
 * the last position's n_vocab logits to out.  Requires no live requests.
 */
llm_status	llm_engine_debug_prompt_logits(llm_engine *e, const int32_t *ids, int32_t n,
										   float *out, char *err, size_t errlen);

/*
 * Test hook: as llm_engine_debug_prompt_logits, but copy the logits of every
 * position from .. n-1 (0 <= from < n) of that one prefill to out
 * ([n - from][n_vocab]).
 */
llm_status	llm_engine_debug_prompt_logits_rows(llm_engine *e, const int32_t *ids, int32_t n,
												int32_t from, float *out, char *err, size_t errlen);

/*
 * What llm_engine_create adjusted in the configuration it was given (a
 * thread count above the CPUs this process may run on, clamped), one
 * sentence each, or "" (owned by e).
 */
const char *llm_engine_notes(const llm_engine *e);

/*
 * The compute kernels e runs on (static string): on the CPU backend its
 * implementation (kernels/cpu/dispatch.h: "scalar", "avx2", "avx512vnni";
 * an encoder's F16 matrices may also run on AMX-BF16 tiles, see
 * llm.encoder_arithmetic), otherwise the backend's name ("cuda").
 */
const char *llm_engine_kernels(const llm_engine *e);

/*
 * Check that path is a GGUF file the engine can open: the file mapped, its
 * header, metadata and tensor directory read and validated (gguf.h), and
 * general.architecture present.  0, or -1 + err.  Loads no weights (an
 * architecture the engine lacks, or a tensor it rejects, is found only by
 * llm_engine_create): a driver checks a new model file with it before
 * giving up the engine it has.
 */
int			llm_engine_check_model_file(const char *path, char *err, size_t errlen);

/* Vocabulary size (length of a logits row). */
int32_t		llm_engine_n_vocab(const llm_engine *e);

/* The model's embedding length (length of an EMBED request's vector). */
int32_t		llm_engine_n_embd(const llm_engine *e);

/*
 * The most tokens an EMBED request's prompt may have (llm_request.truncate
 * cuts a longer one to it, else it is refused): the model's own limit
 * (<arch>.embedding.max_seq_length: all-MiniLM-L6-v2's 256, although its
 * positions go to 512), or, without one, its trained context for a model
 * whose sequences are computed whole (an encoder) and the engine's context
 * for a decoder; never more than the context, and for an encoder never
 * more than max_batched_tokens (its sequence is computed in one step).
 */
int32_t		llm_engine_embed_max_tokens(const llm_engine *e);

/*
 * The pooling an EMBED request with LLM_POOLING_MODEL gets on this model
 * (LAST, MEAN or CLS), and whether LLM_EMBED_NORM_MODEL normalises (L2).
 */
llm_pooling llm_engine_embed_pooling(const llm_engine *e);
bool		llm_engine_embed_normalizes(const llm_engine *e);

/* Parameter count of the model: the elements of every tensor in its file. */
int64_t		llm_engine_n_params(const llm_engine *e);

/* The model's architecture, general.architecture of its file (owned by e). */
const char *llm_engine_architecture(const llm_engine *e);

#endif
