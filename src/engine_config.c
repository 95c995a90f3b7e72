/*
 * engine_config.c — the engine's GUCs, one table row each, and the
 * llm_engine_config built from them (engine_config.h).
 *
 * A row names the GUC as PostgreSQL shows it (name, descriptions, context,
 * unit flags, boot value and bounds) and the llm_engine_config field its
 * value goes to.  The GUC machinery writes into the row's own value slot,
 * so no global variable is declared per setting.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "engine_config.h"

typedef enum EngineGucType
{
	EG_STRING,
	EG_ENUM,					/* the option's name goes to a string field */
	EG_INT,						/* int field; int64 field when scale != 0 */
	EG_BOOL
} EngineGucType;

typedef struct EngineGuc
{
	const char *name;
	const char *short_desc;
	const char *long_desc;		/* NULL: none */
	EngineGucType type;
	GucContext	context;
	int			flags;			/* GUC_UNIT_* */
	int			boot_int;		/* EG_INT, EG_ENUM: boot value */
	int			min_int;
	int			max_int;
	bool		boot_bool;
	const char *(*boot_string) (void);	/* EG_STRING: computed boot value */
	const struct config_enum_entry *options;	/* EG_ENUM */
	size_t		field;			/* offsetof(llm_engine_config, ...) */
	int64		scale;			/* EG_INT into an int64 field: value * scale */
	/* where the GUC machinery keeps the value */
	union
	{
		char	   *s;
		int			i;
		bool		b;
	}			value;
} EngineGuc;

/*
 * Default llm.model: the model `make install` puts under the share directory,
 * $sharedir/extension/llm/SmolLM2-135M-Instruct.Q4_1.gguf.
 */
static const char *
default_model_path(void)
{
	char		sharepath[MAXPGPATH];
	char	   *path = malloc(MAXPGPATH);

	if (path == NULL)
		return "SmolLM2-135M-Instruct.Q4_1.gguf";
	get_share_path(my_exec_path, sharepath);
	snprintf(path, MAXPGPATH, "%s/extension/llm/SmolLM2-135M-Instruct.Q4_1.gguf", sharepath);
	return path;
}

/* Values are positions in this list; the engine gets the name. */
static const struct config_enum_entry device_options[] = {
	{"auto", 0, false},
	{"cpu", 1, false},
	{"cuda", 2, false},
	{NULL, 0, false}
};

/* The chat template families (chat_template.h) and auto: what the GGUF says. */
static const struct config_enum_entry chat_template_options[] = {
	{"auto", 0, false},
	{"none", 1, false},
	{"chatml", 2, false},
	{"gemma", 3, false},
	{NULL, 0, false}
};

/* Names as the engine takes them (llm_engine_config.kv_cache_dtype). */
static const struct config_enum_entry kv_cache_dtype_options[] = {
	{"f16", 0, false},
	{"q8_0", 1, false},
	{NULL, 0, false}
};

#define FIELD(f) offsetof(llm_engine_config, f)

static EngineGuc engine_gucs[] = {
	{
		.name = "llm.model",
		.short_desc = "Path of the GGUF model file the llm worker loads.",
		.long_desc = "Reloading the configuration (SIGHUP) with a new value makes the worker load the new model; "
		"running requests are then aborted.",
		.type = EG_STRING, .context = PGC_SIGHUP,
		.boot_string = default_model_path,
		.field = FIELD(model_path),
	},
	{
		.name = "llm.device",
		.short_desc = "Compute device of the llm worker: auto, cpu or cuda.",
		.long_desc = "auto uses CUDA when the engine was built with it and a GPU is present, else the CPU.",
		.type = EG_ENUM, .context = PGC_SIGHUP,
		.boot_int = 0, .options = device_options,
		.field = FIELD(device),
	},
	{
		.name = "llm.threads",
		.short_desc = "Number of CPU compute threads of the llm worker (0 = all online CPUs).",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 0, .min_int = 0, .max_int = 1024,
		.field = FIELD(n_threads),
	},
	{
		.name = "llm.context_length",
		.short_desc = "Maximum tokens per sequence, prompt plus output (0 = the model's context length).",
		.long_desc = "A prompt alone longer than this is an error; prompt plus max_tokens over it stops with finish reason 'length'.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 0, .min_int = 0, .max_int = 1048576,
		.field = FIELD(n_ctx),
	},
	{
		.name = "llm.kv_cache_size",
		.short_desc = "Memory for the paged KV cache of the llm worker (0 = automatic).",
		.long_desc = "Automatic: enough for max_running_requests full contexts, capped at 1 GB.",
		.type = EG_INT, .context = PGC_SIGHUP, .flags = GUC_UNIT_MB,
		.boot_int = 0, .min_int = 0, .max_int = 1024 * 1024,
		.field = FIELD(kv_cache_bytes), .scale = 1024 * 1024,
	},
	{
		.name = "llm.block_size",
		.short_desc = "Tokens per KV cache block (paging and prefix-caching granularity).",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 16, .min_int = 1, .max_int = 1024,
		.field = FIELD(block_size),
	},
	{
		.name = "llm.max_batched_tokens",
		.short_desc = "Token budget of one engine step (decode tokens plus prefill chunks).",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 512, .min_int = 1, .max_int = 1048576,
		.field = FIELD(max_batched_tokens),
	},
	{
		.name = "llm.max_running_requests",
		.short_desc = "Maximum number of requests in one engine step; more wait in a queue.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 64, .min_int = 1, .max_int = 65536,
		.field = FIELD(max_running),
	},
	{
		.name = "llm.prefix_caching",
		.short_desc = "Reuse KV cache blocks of identical prompt prefixes across requests.",
		.type = EG_BOOL, .context = PGC_SIGHUP,
		.boot_bool = true,
		.field = FIELD(prefix_caching),
	},
	{
		.name = "llm.interactive_reserved_slots",
		.short_desc = "Running slots batch requests leave free for interactive ones (-1 = automatic).",
		.long_desc = "An interactive request then starts at the next engine step.  Automatic: one per 16 of "
		"llm.max_running_requests, at least one; at most llm.max_running_requests - 1.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = -1, .min_int = -1, .max_int = 65535,
		.field = FIELD(reserved_interactive),
	},
	{
		.name = "llm.interactive_step_tokens",
		.short_desc = "Tokens of an engine step that holds interactive work, batch work filling up to it "
		"(-1 = automatic, 0 = no cap).",
		.long_desc = "Keeps the steps of an interactive request about as short as they would be without the batch "
		"work.  Automatic: what takes at most twice the time of the interactive work alone, by a model of step "
		"time the worker fits to its steps.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = -1, .min_int = -1, .max_int = 1048576,
		.field = FIELD(interactive_step_tokens),
	},
	{
		.name = "llm.prefill_cap_tokens",
		.short_desc = "Prefill tokens per engine step while many requests of a class decode (0 = no cap).",
		.long_desc = "Applies once llm.prefill_cap_decodes requests of the class decode in the step.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 0, .min_int = 0, .max_int = 1048576,
		.field = FIELD(prefill_cap),
	},
	{
		.name = "llm.prefill_cap_decodes",
		.short_desc = "Decoding requests of a class from which llm.prefill_cap_tokens applies.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 16, .min_int = 1, .max_int = 65536,
		.field = FIELD(prefill_cap_decodes),
	},
	{
		.name = "llm.batch_prefill_tokens",
		.short_desc = "Prefill tokens per engine step of batch requests (0 = no cap).",
		.long_desc = "An interactive request arriving during a step waits for it: the cap keeps a step where "
		"batch rows join about as long as a decode step. A GPU, whose steps cost about the same up to "
		"hundreds of tokens, may want it larger or 0.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 128, .min_int = 0, .max_int = 1048576,
		.field = FIELD(batch_prefill_tokens),
	},
	{
		.name = "llm.speculative_tokens",
		.short_desc = "Draft tokens per request and step of speculative decoding by prompt lookup (0 = off).",
		.long_desc = "Drafts copy what followed the output's last tokens earlier in the prompt or output; "
		"they are verified in the same step, so the output is the one plain decoding gives.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 4, .min_int = 0, .max_int = 16,
		.field = FIELD(spec_tokens),
	},
	{
		.name = "llm.speculative_max_batch",
		.short_desc = "Speculate only while at most this many requests run in the engine's batch.",
		.long_desc = "Draft tokens cost compute in large batches, where batching already pays.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 1, .min_int = 1, .max_int = 65536,
		.field = FIELD(spec_max_batch),
	},
	{
		.name = "llm.chat_template",
		.short_desc = "Chat template of llm_chat and text prompts: auto, none, chatml or gemma.",
		.long_desc = "auto uses the family of the model file's tokenizer.chat_template; a model without one "
		"(a base model) then serves raw prompts only and llm_chat is an error. A family named here is used "
		"whatever the file says; its marker tokens must be in the model's vocabulary.",
		.type = EG_ENUM, .context = PGC_SIGHUP,
		.boot_int = 0, .options = chat_template_options,
		.field = FIELD(chat_template),
	},
	{
		.name = "llm.kv_cache_dtype",
		.short_desc = "Element type of the llm worker's KV cache: f16 or q8_0.",
		.long_desc = "q8_0 stores blocks of 32 int8 values with an fp16 scale: about half the memory "
		"and bandwidth of f16, so llm.kv_cache_size holds 1.88 times the tokens; outputs may differ "
		"slightly from f16. The CPU backend only.",
		.type = EG_ENUM, .context = PGC_SIGHUP,
		.boot_int = 0, .options = kv_cache_dtype_options,
		.field = FIELD(kv_cache_dtype),
	},
};

void
llm_engine_config_define_gucs(void)
{
	for (int i = 0; i < lengthof(engine_gucs); i++)
	{
		EngineGuc  *g = &engine_gucs[i];

		switch (g->type)
		{
			case EG_STRING:
				DefineCustomStringVariable(g->name, g->short_desc, g->long_desc, &g->value.s,
										   g->boot_string(), g->context, g->flags,
										   NULL, NULL, NULL);
				break;
			case EG_ENUM:
				DefineCustomEnumVariable(g->name, g->short_desc, g->long_desc, &g->value.i,
										 g->boot_int, g->options, g->context, g->flags,
										 NULL, NULL, NULL);
				break;
			case EG_INT:
				DefineCustomIntVariable(g->name, g->short_desc, g->long_desc, &g->value.i,
										g->boot_int, g->min_int, g->max_int, g->context, g->flags,
										NULL, NULL, NULL);
				break;
			case EG_BOOL:
				DefineCustomBoolVariable(g->name, g->short_desc, g->long_desc, &g->value.b,
										 g->boot_bool, g->context, g->flags,
										 NULL, NULL, NULL);
				break;
		}
	}
}

static const char *
enum_name(const struct config_enum_entry *options, int value)
{
	for (const struct config_enum_entry *o = options; o->name != NULL; o++)
		if (o->val == value)
			return o->name;
	return options[0].name;
}

void
llm_engine_config_from_gucs(llm_engine_config *c, MemoryContext cxt)
{
	llm_engine_config_defaults(c);
	for (int i = 0; i < lengthof(engine_gucs); i++)
	{
		const EngineGuc *g = &engine_gucs[i];
		char	   *field = (char *) c + g->field;

		switch (g->type)
		{
			case EG_STRING:
				*(const char **) field = MemoryContextStrdup(cxt, g->value.s ? g->value.s : "");
				break;
			case EG_ENUM:
				*(const char **) field = enum_name(g->options, g->value.i);
				break;
			case EG_INT:
				if (g->scale != 0)
					*(int64_t *) field = (int64_t) g->value.i * g->scale;
				else
					*(int *) field = g->value.i;
				break;
			case EG_BOOL:
				*(bool *) field = g->value.b;
				break;
		}
	}
}
