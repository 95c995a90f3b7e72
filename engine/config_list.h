/*
 * config_list.h — the engine's settings, one row each: the one list from
 * which llm_engine_config's fields (engine.h), their defaults, their range
 * checks and the equality a reload uses (engine_config.c), the llm.* GUCs
 * and the per-model settings of llm.models (common/settings.c) and
 * llm-cli's flags (tools/llm_cli.c) all come.  Adding a setting is one row
 * here plus the code that reads the field.
 *
 * LLM_ENGINE_SETTINGS(INT, BOOL, STR, ENUM) expands each row to one of the
 * caller's four macros:
 *
 *   INT(field, guc, cli, def, min, max, unit, per_model, range, short_desc, long_desc)
 *   BOOL(field, guc, cli, def, per_model, short_desc, long_desc)
 *   STR(field, guc, cli, short_desc, long_desc)
 *   ENUM(field, guc, cli, options, strict, per_model, range, short_desc, long_desc)
 *
 * field      the llm_engine_config member, also the setting's name in the
 *            engine's messages ("max_running must be at least 1, not 0");
 * guc        its GUC ("llm.max_running_requests"), NULL for a setting only
 *            a driver sets in code; every GUC of the list is PGC_SIGHUP (the
 *            worker rebuilds its configuration at a reload);
 * cli        llm-cli's flag, NULL for none; a BOOL flag takes no value and
 *            sets the opposite of the default;
 * def, min, max  INT: in the setting's unit, as the GUC shows them; the
 *            field holds value * LLM_SETTING_SCALE_<unit> (an MB setting
 *            keeps bytes in an int64_t field, others an int);
 * unit       NONE, MS or MB (the GUC's unit; llm-cli takes the same unit);
 * per_model  whether an entry of llm.models may set it for its model
 *            (model_list.h), by its GUC name without "llm.";
 * range      the engine's message for a value out of range, "<field> must
 *            be <range>, not <value>": a printf format given (min, max) as
 *            long long, after scaling; one that prints both (two %lld) also
 *            answers a value above the maximum, else that one gets "at most
 *            <max>".  ENUM: the text naming the options;
 * options    ENUM: an X-list macro of the names (identifiers, stringized),
 *            the first the default; a NULL field means the default;
 * strict     ENUM: the engine refuses a name outside the options (the
 *            device is not strict: "cuda:N" is valid, the backend loader
 *            checks it);
 * STR        a free string, default NULL, never per model (its value would
 *            need a memory context); its check is the code that reads it.
 *
 * Plain C, no PostgreSQL: the engine and its drivers include it through
 * engine.h.
 */
#ifndef LLM_CONFIG_LIST_H
#define LLM_CONFIG_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/spec/spec_lookup.h"

/*
 * The shortest context a configuration may name (n_ctx, when not 0): an
 * empty user turn of either chat template family (ChatML 8 tokens, Gemma
 * 9 with its BOS) plus one generated token, rounded up to one KV block of
 * the default size.  The llm.context_length GUC refuses less.  A plain
 * number: n_ctx's range text prints it.
 */
#define LLM_MIN_N_CTX 16

#define LLM_SETTING_STR_(x) #x
#define LLM_SETTING_STR(x) LLM_SETTING_STR_(x)

/* Names the GUCs of the device and the KV cache type offer, and the chat template families. */
#define LLM_DEVICE_OPTIONS(X) X(auto) X(cpu) X(cuda)
#define LLM_CHAT_TEMPLATE_OPTIONS(X) X(auto) X(none) X(chatml) X(gemma)
#define LLM_KV_CACHE_DTYPE_OPTIONS(X) X(f16) X(q8_0)
#define LLM_ENCODER_ARITHMETIC_OPTIONS(X) X(auto) X(exact)

/* An INT setting's C type and scale (field = value * scale) by unit. */
#define LLM_SETTING_CTYPE_NONE int
#define LLM_SETTING_CTYPE_MS int
#define LLM_SETTING_CTYPE_MB int64_t
#define LLM_SETTING_SCALE_NONE 1
#define LLM_SETTING_SCALE_MS 1
#define LLM_SETTING_SCALE_MB ((int64_t) 1 << 20)

#define LLM_ENGINE_SETTINGS(INT, BOOL, STR, ENUM) \
	/* GGUF file (required: the check refuses NULL and "") */ \
	STR(model_path, "llm.model", "-m", \
		"Path of the GGUF model file the llm worker loads.", \
		"Reloading the configuration (SIGHUP) with a new value makes the worker load the new model; " \
		"running requests are then aborted.") \
	/* "cpu", "cuda", "cuda:N" or "auto" (default; NULL = "auto") */ \
	ENUM(device, "llm.device", "--device", LLM_DEVICE_OPTIONS, false, false, NULL, \
		 "Compute device of the llm worker: auto, cpu or cuda.", \
		 "auto uses CUDA when the engine was built with it and a GPU is present, else the CPU.") \
	/* CPU compute threads; 0 = all online CPUs */ \
	INT(n_threads, "llm.threads", "-t", 0, 0, 1024, NONE, false, \
		">= %lld (0 = all online CPUs)", \
		"Number of CPU compute threads of the llm worker (0 = all online CPUs).", NULL) \
	/* max tokens per sequence; 0 = the model's context length; else at least LLM_MIN_N_CTX */ \
	INT(n_ctx, "llm.context_length", "--ctx", 0, 0, 1048576, NONE, true, \
		"0 (the model's context length) or at least " LLM_SETTING_STR(LLM_MIN_N_CTX), \
		"Maximum tokens per sequence, prompt plus output (0 = the model's context length).", \
		"A prompt alone longer than this is an error; prompt plus max_tokens over it stops with finish reason 'length'.") \
	/* \
	 * KV memory budget in bytes; 0 = enough for max_running full \
	 * contexts, capped at 1 GiB; resolved to whole blocks \
	 */ \
	INT(kv_cache_bytes, "llm.kv_cache_size", "--kv-mb", 0, 0, 1024 * 1024, MB, true, \
		">= %lld (0 = automatic)", \
		"Memory for the paged KV cache of the llm worker (0 = automatic).", \
		"Automatic: enough for max_running_requests full contexts, capped at 1 GB.") \
	/* tokens per KV block */ \
	INT(block_size, "llm.block_size", "--block-size", 16, 1, 1024, NONE, true, \
		"at least %lld", \
		"Tokens per KV cache block (paging and prefix-caching granularity).", NULL) \
	/* token budget per step (prefill chunking) */ \
	INT(max_batched_tokens, "llm.max_batched_tokens", "--max-batched-tokens", 512, 1, 1048576, NONE, true, \
		"at least %lld", \
		"Token budget of one engine step (decode tokens plus prefill chunks).", NULL) \
	/* max sequences in a step */ \
	INT(max_running, "llm.max_running_requests", "--max-running", 64, 1, 65536, NONE, true, \
		"at least %lld", \
		"Maximum number of requests in one engine step; more wait in a queue.", NULL) \
	/* reuse full KV blocks across requests */ \
	BOOL(prefix_caching, "llm.prefix_caching", "--no-prefix-cache", true, true, \
		 "Reuse KV cache blocks of identical prompt prefixes across requests.", NULL) \
	/* \
	 * Scheduling between classes and sessions (scheduler.h): running \
	 * slots batch requests leave free for interactive ones (at most \
	 * max_running - 1; -1 = automatic: max_running / 16, at least 1, \
	 * i.e. 4 of the default 64) \
	 */ \
	INT(reserved_interactive, "llm.interactive_reserved_slots", "--interactive-reserved-slots", \
		-1, -1, 65535, NONE, true, \
		">= 0 (-1 = automatic)", \
		"Running slots batch requests leave free for interactive ones (-1 = automatic).", \
		"An interactive request then starts at the next engine step.  Automatic: one per 16 of " \
		"llm.max_running_requests, at least one; at most llm.max_running_requests - 1.") \
	/* \
	 * the step's total tokens while an interactive request is in it, \
	 * batch work filling up to it (0 = no cap; -1 = automatic: what takes \
	 * at most interactive_step_slowdown percent longer than the \
	 * interactive work alone by a model of step time fitted to the steps \
	 * run, scheduler.h) \
	 */ \
	INT(interactive_step_tokens, "llm.interactive_step_tokens", "--interactive-step-tokens", \
		-1, -1, 1048576, NONE, true, \
		">= %lld (-1 = automatic, 0 = no cap)", \
		"Tokens of an engine step that holds interactive work, batch work filling up to it " \
		"(-1 = automatic, 0 = no cap).", \
		"Keeps the steps of an interactive request about as short as they would be without the batch " \
		"work.  Automatic: what takes at most llm.interactive_step_slowdown percent longer than the interactive " \
		"work alone, by a model of step time the worker fits to its steps.") \
	/* prefill tokens per step of a class once prefill_cap_decodes of its sequences decode (0 = no cap) */ \
	INT(prefill_cap, "llm.prefill_cap_tokens", "--prefill-cap-tokens", 0, 0, 1048576, NONE, true, \
		">= %lld (0 = no cap)", \
		"Prefill tokens per engine step while many requests of a class decode (0 = no cap).", \
		"Applies once llm.prefill_cap_decodes requests of the class decode in the step.") \
	INT(prefill_cap_decodes, "llm.prefill_cap_decodes", "--prefill-cap-decodes", 16, 1, 65536, NONE, true, \
		"at least %lld", \
		"Decoding requests of a class from which llm.prefill_cap_tokens applies.", NULL) \
	/* \
	 * Prefill tokens per step of the batch class (scheduler.h, "Batch \
	 * prefill per step"), so an interactive request arriving during a \
	 * batch step waits about one decode step, not a step of \
	 * max_batched_tokens of prefill (0 = no cap; 128: on two AVX2 cores \
	 * such a chunk costs about what 100 decode rows do, a full 512-token \
	 * one four times that; a GPU, whose steps take about the same time up \
	 * to hundreds of tokens, wants it larger or 0). \
	 */ \
	INT(batch_prefill_tokens, "llm.batch_prefill_tokens", "--batch-prefill-tokens", 128, 0, 1048576, NONE, true, \
		">= %lld (0 = no cap)", \
		"Prefill tokens per engine step of batch requests (0 = no cap).", \
		"An interactive request arriving during a step waits for it: the cap keeps a step where " \
		"batch rows join about as long as a decode step. A GPU, whose steps cost about the same up to " \
		"hundreds of tokens, may want it larger or 0.") \
	/* \
	 * Short steps (scheduler.h): the batch class's tokens per step are \
	 * steered so that a step of batch work alone takes about batch_step_ms \
	 * by the rate such steps measure (raised to ten times a small step's \
	 * time, so the fixed cost stays under a tenth of a step on a loaded \
	 * host), since an interactive request arriving during a step waits \
	 * for it (0 = no cap; a GPU's cap is max_batched_tokens). \
	 */ \
	INT(batch_step_ms, "llm.batch_step_ms", "--batch-step-ms", 100, 0, 3600000, MS, true, \
		">= %lld (0 = no cap)", \
		"Engine step time the batch requests' tokens per step are steered to (0 = no cap).", \
		"An interactive request arriving during a step waits for it: batch work then runs in more, " \
		"shorter steps, their tokens set from the rate batch steps measure.  Raised to ten times a small " \
		"step's time, so a step's fixed cost stays under a tenth of it; a GPU, whose steps cost about the " \
		"same up to hundreds of tokens, gets no cap in effect.") \
	/* \
	 * with interactive_step_tokens automatic, batch work may make a step \
	 * holding interactive work at most this many percent longer than that \
	 * work alone (100 is twice) \
	 */ \
	INT(interactive_step_slowdown, "llm.interactive_step_slowdown", "--interactive-step-slowdown", \
		25, 0, 10000, NONE, true, \
		">= %lld (percent)", \
		"Percent longer than alone batch work may make an engine step holding interactive work.", \
		"Used when llm.interactive_step_tokens is -1 (automatic), by the step-time model; at least " \
		"one batch token joins such a step.  100 allows twice the time.") \
	/* \
	 * Speculative decoding by prompt lookup (spec_lookup.h): up to \
	 * spec_tokens draft tokens per sequence and step (0 = off), only while \
	 * at most spec_max_batch sequences run (1: at 4 sequences it measured \
	 * slower than plain decoding on an AVX2 host, whose batched steps are \
	 * already compute-bound). \
	 */ \
	INT(spec_tokens, "llm.speculative_tokens", "--spec", 4, 0, LLM_SPEC_MAX_TOKENS, NONE, true, \
		"in [%lld, %lld] (0 = off)", \
		"Draft tokens per request and step of speculative decoding by prompt lookup (0 = off).", \
		"Drafts copy what followed the output's last tokens earlier in the prompt or output; " \
		"they are verified in the same step, so the output is the one plain decoding gives.") \
	INT(spec_max_batch, "llm.speculative_max_batch", "--spec-max-batch", 1, 1, 65536, NONE, true, \
		"at least %lld", \
		"Speculate only while at most this many requests run in the engine's batch.", \
		"Draft tokens cost compute in large batches, where batching already pays.") \
	/* \
	 * "auto" (default; NULL = "auto"): the GGUF's own \
	 * tokenizer.chat_template rendered by the Jinja interpreter, "none" \
	 * when it has none or it is refused; "none", "chatml", "gemma": that \
	 * built-in family whatever the file says (its marker tokens must be in \
	 * the vocabulary); else a template the load compiles, refusing the \
	 * load when it is outside the interpreter's subset: Jinja text (it \
	 * contains "{{" or "{%") or an absolute path to a file holding one \
	 * (chat_template.h, llm_chat_source_of); not strict, engine_config_check \
	 * refuses any other value \
	 */ \
	ENUM(chat_template, "llm.chat_template", "--chat-template", LLM_CHAT_TEMPLATE_OPTIONS, false, true, \
		 "auto, none, chatml, gemma, a Jinja template or an absolute path to one", \
		 "Chat template of llm_chat and text prompts: auto, none, chatml, gemma, a Jinja template or a file path.", \
		 "auto renders the model file's own tokenizer.chat_template (Jinja); a model without one " \
		 "(a base model) then serves raw prompts only and llm_chat is an error. A family named here is used " \
		 "whatever the file says; its marker tokens must be in the model's vocabulary.") \
	/* \
	 * element type of the KV cache: "f16" (default; NULL = "f16") or \
	 * "q8_0" (blocks of 32 int8 + fp16 scale: 34 bytes per 32 values \
	 * instead of 64, so a budget holds 64/34 times the blocks; the \
	 * backend must support it) \
	 */ \
	ENUM(kv_cache_dtype, "llm.kv_cache_dtype", "--kv-cache-dtype", LLM_KV_CACHE_DTYPE_OPTIONS, true, true, \
		 "\"f16\" or \"q8_0\"", \
		 "Element type of the llm worker's KV cache: f16 or q8_0.", \
		 "q8_0 stores blocks of 32 int8 values with an fp16 scale: about half the memory " \
		 "and bandwidth of f16, so llm.kv_cache_size holds 1.88 times the tokens; outputs may differ " \
		 "slightly from f16. The CPU backend only.") \
	/* \
	 * encoder models' layer matrices: auto lets the backend compute them \
	 * in its faster arithmetic (backend.h load_weight_encoder; CPU: F16 \
	 * matrices on AMX-BF16 tiles where the CPU and the kernel allow, \
	 * kernels/cpu/amx_bf16.h), exact in llama.cpp's kernels; decoders are \
	 * always exact \
	 */ \
	ENUM(encoder_arithmetic, "llm.encoder_arithmetic", "--encoder-arithmetic", LLM_ENCODER_ARITHMETIC_OPTIONS, \
		 true, false, "\"auto\" or \"exact\"", \
		 "Arithmetic of encoder (embedding) models' matrices: auto or exact.", \
		 "auto computes an encoder's F16 matrices on AMX-BF16 tiles where the CPU and the kernel allow: " \
		 "faster, and embeddings then differ in their low bits between hosts with and without AMX (within " \
		 "the same fidelity bound). exact uses llama.cpp's arithmetic everywhere. Decoder models are " \
		 "always exact.") \
	/* \
	 * CPU: compute threads from the process's shared pool of n_threads, \
	 * for engines one thread steps in turn (several models in one \
	 * driver); default a pool of its own \
	 */ \
	BOOL(shared_threads, NULL, NULL, false, false, \
		 "Compute threads from the process's shared pool (several models in one driver).", NULL) \
	/* \
	 * keep every position of a model's sliding-window layers (one KV \
	 * group); default: their KV lives in a local group freed behind the \
	 * window (scheduler.h), where the backend supports it (CPU) \
	 */ \
	BOOL(kv_keep_windowed, NULL, "--keep-window-kv", false, false, \
		 "Keep every position of sliding-window layers (one KV group).", NULL)

/* What a row of the list is, at run time (llm_settings[], engine.h). */
typedef enum llm_setting_kind
{
	LLM_SETTING_INT,
	LLM_SETTING_BOOL,
	LLM_SETTING_STR,
	LLM_SETTING_ENUM
} llm_setting_kind;

typedef enum llm_setting_unit
{
	LLM_SETTING_UNIT_NONE,
	LLM_SETTING_UNIT_MS,
	LLM_SETTING_UNIT_MB
} llm_setting_unit;

/* One row of LLM_ENGINE_SETTINGS, columns as above. */
typedef struct llm_setting
{
	const char *field;
	size_t		offset;			/* offsetof(llm_engine_config, field) */
	llm_setting_kind kind;
	const char *guc;
	const char *cli;
	int64_t		def;			/* INT: in unit; BOOL: 0 or 1 */
	int64_t		min;
	int64_t		max;
	llm_setting_unit unit;
	int64_t		scale;			/* INT: field = value * scale */
	const char *const *options; /* ENUM: NULL-terminated, the first the default */
	bool		strict;
	bool		per_model;
	const char *range;
	const char *short_desc;
	const char *long_desc;		/* NULL: none */
} llm_setting;

#define LLM_SETTING_COUNT_(...) + 1
/* Rows of the list. */
#define LLM_N_SETTINGS (0 LLM_ENGINE_SETTINGS(LLM_SETTING_COUNT_, LLM_SETTING_COUNT_, \
											  LLM_SETTING_COUNT_, LLM_SETTING_COUNT_))

#endif
