/*
 * request.h — the one description of a request and of how it ended, shared
 * by every driver of the engine: the SQL functions (which build it), the
 * channel (which carries it, channel/protocol.c), the worker (which hands it to
 * the engine), the CLI and the tests.
 *
 * Plain C, no PostgreSQL headers.  A request only points at its strings and
 * arrays; whoever keeps a request longer than the call that received it
 * copies them (the engine does in llm_engine_submit, the channel's decoder
 * into its message buffer).
 *
 * A request has two checks, each written once here: its options
 * (llm_request_validate_options: sampling, stop, limits, class, grammar
 * options, model alias; no prompt needed) and its prompt
 * (llm_request_validate_prompt: the prompt or messages, and what the request
 * does with them: its mode, a SCORE request's continuations).  The SQL
 * functions run each once, in the backend before anything is sent: the
 * options when a call's arguments are read (a bad option is an ERROR
 * whatever on_error says), the prompt when it is set (a refused prompt is a
 * per-call failure).  The engine runs both (llm_request_validate) once on
 * submission, since the channel's decoder checks shapes and bounds but not
 * values: a request from another driver or a damaged message never reaches
 * the step.
 */
#ifndef LLM_REQUEST_H
#define LLM_REQUEST_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "engine/text/chat_template.h"

/* Limits every driver enforces (validate checks them). */
#define LLM_MAX_STOP_STRINGS	16
#define LLM_MAX_STOP_LEN		256		/* bytes */
#define LLM_MAX_MESSAGES		1024
#define LLM_MAX_CONTINUATIONS	256

/* Error codes of requests and API calls; the worker maps them to SQLSTATEs. */
typedef enum llm_status
{
	LLM_OK = 0,
	LLM_ERR_INVALID_PARAM,		/* 22023 invalid_parameter_value */
	LLM_ERR_PROMPT_TOO_LONG,	/* 54000 program_limit_exceeded */
	LLM_ERR_EMPTY_PROMPT,		/* 22023 */
	LLM_ERR_INVALID_TEXT,		/* 22021 character_not_in_repertoire (bad UTF-8) */
	LLM_ERR_NONFINITE,			/* XX000 internal_error: non-finite logits */
	LLM_ERR_OUT_OF_MEMORY,		/* 53200 out_of_memory */
	LLM_ERR_DUPLICATE_ID,		/* XX000 internal_error */
	LLM_ERR_BACKEND,			/* XX000 compute backend failure */
	LLM_ERR_MODEL				/* 58P01 / XX000 model could not be loaded */
} llm_status;

const char *llm_status_name(llm_status s);

/*
 * How a request ended: the one encoding used by the engine's events, the
 * channel, the statistics (llm_recent_requests.outcome) and SQL
 * (llm_complete.finish_reason), by llm_finish_reason_name().
 */
typedef enum llm_finish_reason
{
	LLM_FINISH_NONE = 0,		/* not finished */
	LLM_FINISH_STOP,			/* "stop": end-of-generation token or stop string */
	LLM_FINISH_LENGTH,			/* "length": max_tokens or the context length reached */
	LLM_FINISH_ABORT,			/* "aborted": the client went away or cancelled */
	LLM_FINISH_ERROR			/* "error": failed (engine error, model reload, ...) */
} llm_finish_reason;

const char *llm_finish_reason_name(llm_finish_reason r);

/*
 * Scheduling class of a request, in the order the scheduler serves them
 * (scheduler.h): a lower value goes first, like a nice value.  Interactive
 * is what a single call someone waits for gets (the default, and the value
 * of a zeroed request); batch is bulk work (the LLM Batch node's windows,
 * llm_generate(text[]), jobs).
 */
typedef enum llm_priority
{
	LLM_PRIORITY_INTERACTIVE = 0,
	LLM_PRIORITY_BATCH = 1
} llm_priority;

#define LLM_N_PRIORITIES 2

/* "interactive" / "batch" (the SQL spelling); "unknown" out of range. */
const char *llm_priority_name(llm_priority p);
/* The class named name (exact, lower case); false if there is none. */
bool		llm_priority_from_name(const char *name, llm_priority *out);

/* What a finished request used. */
typedef struct llm_usage
{
	int32_t		prompt_tokens;
	int32_t		cached_tokens;	/* prompt tokens served from the prefix cache */
	int32_t		completion_tokens;
	double		ttft_ms;		/* submission -> first token sampled */
	double		total_ms;		/* submission -> finished */
	int32_t		n_preemptions;
	/*
	 * Compute time attributed to the request: each step's forward time
	 * shared among the step's requests in proportion to their token rows.
	 */
	double		busy_ms;
	int32_t		draft_tokens;	/* speculative tokens proposed (engine.h, speculation) */
	int32_t		accepted_tokens;	/* of those, accepted */
	/*
	 * SCORE: the token rows computed past the prompt's ids, over all the
	 * request's sequences: each continuation's tokens (for continuation
	 * answers, each end's rest once and each pair's answer); rows computed
	 * again after a preemption count again.  0 for GENERATE and EMBED.
	 */
	int32_t		continuation_tokens;
} llm_usage;

/* Sampling and stopping options of a GENERATE request. */
typedef struct llm_sampling_params
{
	int32_t		max_tokens;		/* >= 1; generation also stops at the context length */
	double		temperature;	/* >= 0; 0 = greedy argmax (seed, top_* ignored) */
	double		top_p;			/* (0, 1] */
	int32_t		top_k;			/* >= 0; 0 = off */
	double		min_p;			/* [0, 1] */
	double		repetition_penalty; /* > 0; 1 = off (CTRL-style, over prompt+output) */
	bool		has_seed;
	uint64_t	seed;			/* per-request RNG seed; random if !has_seed */
	int			n_stop;			/* <= LLM_MAX_STOP_STRINGS */
	const char *const *stop;	/* non-empty, <= LLM_MAX_STOP_LEN bytes each; matched on
								 * output text across token boundaries, not included */
	bool		ignore_eos;		/* benchmarks: do not stop at end-of-generation tokens */
	uint64_t	cache_salt;		/* prefix-cache isolation key (0 = shared by all) */
	int32_t		debug_poison_logits;	/* test hook: poison this many logits rows */
} llm_sampling_params;

void		llm_sampling_params_defaults(llm_sampling_params *p);

/* What the prompt is; the engine turns every kind into token ids. */
typedef enum llm_prompt_kind
{
	LLM_PROMPT_TEXT = 1,		/* user message rendered with the chat template (+ system) */
	LLM_PROMPT_RAW,				/* text tokenized as is, no template; after the BOS when the tokenizer adds one (Gemma) */
	LLM_PROMPT_MESSAGES,		/* a conversation rendered with the chat template */
	LLM_PROMPT_TOKENS			/* token ids, used as given */
} llm_prompt_kind;

/* What to do with the prompt. */
typedef enum llm_request_mode
{
	LLM_MODE_GENERATE = 1,		/* sample up to max_tokens; TEXT events, then FINISHED */
	LLM_MODE_SCORE,				/* no sampling: the log-probability of each continuation
								 * after the prompt, in the FINISHED event */
	LLM_MODE_EMBED,				/* no sampling: the prompt's final hidden state, pooled
								 * (llm_pooling), in a VECTOR event */
	LLM_MODE_RENDER				/* no model run: a TEXT or MESSAGES prompt as the chat
								 * template renders it (llm_engine_render), answered at once */
} llm_request_mode;

/*
 * EMBED: how the prompt's final hidden states (after the final norm, one
 * of the model's embedding length per token) become one vector.
 *   MODEL (the zeroed value): what the model file declares
 *     (<arch>.pooling_type: mean, CLS or last), LAST when it declares none
 *     (a decoder file such as SmolLM2's);
 *   LAST: the state of the prompt's last token, the one row a prefill
 *     computes anyway;
 *   MEAN: the mean of every prompt token's state (a hidden row per token,
 *     summed in position order in double as the rows arrive, so chunking
 *     and batching change nothing), sentence-transformers' mean pooling;
 *   CLS: the state of the prompt's first token (BERT's [CLS]).
 */
typedef enum llm_pooling
{
	LLM_POOLING_MODEL = 0,
	LLM_POOLING_LAST,
	LLM_POOLING_MEAN,
	LLM_POOLING_CLS
} llm_pooling;

#define LLM_N_POOLINGS 4

/*
 * EMBED: the pooled vector's normalisation.  MODEL (the zeroed value): L2
 * when the model file declares a pooling (an embedding model: all-MiniLM's
 * sentence-transformers pipeline ends with Normalize), none otherwise; L2:
 * v / max(||v||_2, 1e-12) (torch.nn.functional.normalize), the norm in
 * double; NONE: the pooled state as is.
 */
typedef enum llm_embed_norm
{
	LLM_EMBED_NORM_MODEL = 0,
	LLM_EMBED_NORM_NONE,
	LLM_EMBED_NORM_L2
} llm_embed_norm;

#define LLM_N_EMBED_NORMS 3

typedef struct llm_request
{
	llm_request_mode mode;
	llm_prompt_kind prompt_kind;
	/* TEXT, RAW: the prompt (UTF-8, NUL-free) */
	const char *prompt;
	size_t		prompt_len;
	/* TEXT: system message, or NULL for the template's default */
	const char *system;
	size_t		system_len;
	/* MESSAGES: 1..LLM_MAX_MESSAGES messages */
	const llm_chat_message *messages;
	int32_t		n_messages;
	/* TOKENS: 1.. ids */
	const int32_t *tokens;
	int32_t		n_tokens;

	llm_sampling_params params;

	/*
	 * SCORE: 1..LLM_MAX_CONTINUATIONS non-empty UTF-8 continuations, each
	 * tokenized as plain text and appended to the prompt's ids; with
	 * continuation_eot the model's end-of-turn token follows each one (so a
	 * label that is a prefix of another does not win by stopping early).
	 */
	int32_t		n_continuations;
	const char *const *continuations;
	const size_t *continuation_lens;
	bool		continuation_eot;

	/*
	 * GENERATE: constrained decoding.  grammar[0..grammar_len) is a tagged
	 * grammar source (grammar.h, llm_grammar_compile_source: a kind byte,
	 * then choices, a regex or a JSON schema), or NULL.  The output is then
	 * exactly a string of the grammar's language: end-of-generation only in
	 * accepting states, and the request finishes with "stop" as soon as the
	 * output is complete and cannot continue.  A request cut by max_tokens
	 * or the context finishes with "length" and its output is then not a
	 * complete string of the language.  Incompatible with stop strings and
	 * ignore_eos (validate refuses them).
	 */
	const char *grammar;
	size_t		grammar_len;

	/*
	 * SCORE: the request's text output (one TEXT event before FINISHED) is
	 * the JSON array of its continuations, in order, so a client that keeps
	 * only the result can name its scores.
	 */
	bool		continuation_echo;

	/*
	 * Scheduling (scheduler.h): the request's class, and its fair-share
	 * key: requests with the same session share one share of their class
	 * (the worker gives every backend channel its own; 0 is a session like
	 * any other, the one every request of the CLI and the tests is in).
	 */
	llm_priority priority;
	uint64_t	session;

	/*
	 * The alias of the model that serves the request (UTF-8, NUL-free, at
	 * most LLM_MAX_MODEL_ALIAS bytes), or NULL for the default model.  A
	 * driver serving several models routes by it; the engine never reads it.
	 */
	const char *model;

	/* EMBED: the pooling of the hidden states (the zeroed value: the model's); 0 for other modes */
	llm_pooling pooling;

	/*
	 * TEXT, MESSAGES: what the chat template gets besides the messages
	 * (chat_template.h, llm_chat_options).  no_generation_prompt: render
	 * without the assistant turn's opening (the zeroed value adds it);
	 * thinking: enable_thinking, 0 not passed, 1 true, -1 false; tools: a
	 * JSON array of tool schemas (tools_len bytes, NUL-free), or NULL.
	 */
	bool		no_generation_prompt;
	int8_t		thinking;
	const char *tools;
	size_t		tools_len;
	/*
	 * GENERATE with a TEXT or MESSAGES prompt: the output is the answer after
	 * a leading <think>...</think> section and the whitespace after it
	 * (engine/text/thinking.h; the section opened by the prompt when
	 * thinking is 1).  The engine sends no TEXT until the answer's start is
	 * known, then the answer only, so the deltas joined are the stripped
	 * output whatever their cuts; stop strings and max_tokens apply to the
	 * whole output.  Ignored for other prompts and modes (a RAW or TOKENS
	 * prompt is not a chat) and with a grammar (the output is exactly a
	 * string of the grammar's language, whatever it holds).  false (the zeroed value): the output as
	 * generated.
	 */
	bool		strip_thinking;
	/* EMBED: the normalisation of the pooled vector (the zeroed value: the model's); 0 for other modes */
	llm_embed_norm normalize;
	/*
	 * EMBED: a prompt of more tokens than the engine's embedding limit
	 * (llm_engine_embed_max_tokens) is cut to it when true: its first
	 * limit - 1 tokens and, when the tokenizer appended an end token (BERT's
	 * [SEP]) to a text prompt, that token, as sentence-transformers
	 * truncates; otherwise its first limit tokens.  false: such a prompt is
	 * refused (LLM_ERR_PROMPT_TOO_LONG, naming the limit).  false for other
	 * modes.
	 */
	bool		truncate;
	/*
	 * SCORE with a TEXT prompt: when > 0, the last continuation_answers
	 * continuations are answers and the n_continuations -
	 * continuation_answers before them end the user's message.  Each pair
	 * (end k, answer a) is scored as the SCORE request of the user message
	 * prompt + end k (chat template and system as for the prompt alone)
	 * with the one continuation a (+ end of turn with continuation_eot)
	 * would score it: its sequence holds exactly that request's token ids,
	 * and its score sums the log-probabilities of answer a's tokens only.
	 * The pairs' sequences fork from the longest common prefix of their ids
	 * (so what the tokenizer does at the join of prompt and end k changes
	 * no id).  Scores in the FINISHED event at k * continuation_answers + a;
	 * at most LLM_MAX_CONTINUATIONS pairs; no continuation_echo.  0 (the
	 * zeroed value): every continuation follows the prompt's chat.
	 */
	int32_t		continuation_answers;
} llm_request;

#define LLM_MAX_MODEL_ALIAS 63

/* A GENERATE request over an empty TEXT prompt with default options. */
void		llm_request_init(llm_request *r);

/*
 * The checks return LLM_OK, or LLM_ERR_INVALID_PARAM / LLM_ERR_EMPTY_PROMPT
 * with a message naming the argument (as the SQL functions name it) in err.
 *
 * llm_request_validate_options: every option, whatever the prompt (which
 * may not be set yet): the sampling parameters and stop strings, the
 * class, the grammar source and what it excludes (stop, ignore_eos), the
 * model alias's length, and the system message of a TEXT or RAW prompt
 * (none with RAW, no NUL), by the prompt kind alone.
 *
 * llm_request_validate_prompt: the request's mode, its prompt by kind
 * (TEXT / RAW: present, not empty, no NUL; MESSAGES: 1..LLM_MAX_MESSAGES
 * with role and content; TOKENS: not empty), a SCORE request's
 * continuations (none otherwise, and no continuation_echo), and a grammar
 * only on a GENERATE request.
 *
 * llm_request_validate: both, the prompt's check first.
 */
llm_status	llm_request_validate_options(const llm_request *r, char *err, size_t errlen);
llm_status	llm_request_validate_prompt(const llm_request *r, char *err, size_t errlen);
llm_status	llm_request_validate(const llm_request *r, char *err, size_t errlen);

/*
 * A deep copy of r in one malloc'd block (free() it): every string and
 * array it points at (prompt, system, messages, tokens, stop strings,
 * continuations, grammar, model alias) copied, so the copy outlives the
 * caller's buffers.  NULL: out of memory.
 */
llm_request *llm_request_copy(const llm_request *r);

#endif
