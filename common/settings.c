/*
 * settings.c — the engine's GUCs, one table row each, and the
 * llm_engine_config built from them (settings.h).
 *
 * A row names the GUC as PostgreSQL shows it (name, descriptions, context,
 * unit flags, boot value and bounds), the llm_engine_config field its
 * value goes to, and whether a model of llm.models may set it for itself.  The GUC machinery writes into the row's own value slot,
 * so no global variable is declared per setting.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "settings.h"

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
	bool		per_model;		/* also settable per model in llm.models (model_list.h) */
	GucIntCheckHook check_int;	/* EG_INT: values the bounds let through that have no use */
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

/*
 * llm.context_length: 0 (the model's) or a context that holds a chat turn
 * and one generated token (LLM_MIN_N_CTX); anything between is refused
 * here, as it would be by every load.
 */
static bool
check_context_length(int *newval, void **extra, GucSource source)
{
	if (*newval != 0 && *newval < LLM_MIN_N_CTX)
	{
		GUC_check_errdetail("A context length of %d is too short: it must be 0 (the model's context length) "
							"or at least %d tokens, an empty chat turn and one generated token.",
							*newval, LLM_MIN_N_CTX);
		return false;
	}
	return true;
}

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
		.check_int = check_context_length,
		.field = FIELD(n_ctx),
		.per_model = true,
	},
	{
		.name = "llm.kv_cache_size",
		.short_desc = "Memory for the paged KV cache of the llm worker (0 = automatic).",
		.long_desc = "Automatic: enough for max_running_requests full contexts, capped at 1 GB.",
		.type = EG_INT, .context = PGC_SIGHUP, .flags = GUC_UNIT_MB,
		.boot_int = 0, .min_int = 0, .max_int = 1024 * 1024,
		.field = FIELD(kv_cache_bytes), .scale = 1024 * 1024,
		.per_model = true,
	},
	{
		.name = "llm.block_size",
		.short_desc = "Tokens per KV cache block (paging and prefix-caching granularity).",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 16, .min_int = 1, .max_int = 1024,
		.field = FIELD(block_size),
		.per_model = true,
	},
	{
		.name = "llm.max_batched_tokens",
		.short_desc = "Token budget of one engine step (decode tokens plus prefill chunks).",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 512, .min_int = 1, .max_int = 1048576,
		.field = FIELD(max_batched_tokens),
		.per_model = true,
	},
	{
		.name = "llm.max_running_requests",
		.short_desc = "Maximum number of requests in one engine step; more wait in a queue.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 64, .min_int = 1, .max_int = 65536,
		.field = FIELD(max_running),
		.per_model = true,
	},
	{
		.name = "llm.prefix_caching",
		.short_desc = "Reuse KV cache blocks of identical prompt prefixes across requests.",
		.type = EG_BOOL, .context = PGC_SIGHUP,
		.boot_bool = true,
		.field = FIELD(prefix_caching),
		.per_model = true,
	},
	{
		.name = "llm.interactive_reserved_slots",
		.short_desc = "Running slots batch requests leave free for interactive ones (-1 = automatic).",
		.long_desc = "An interactive request then starts at the next engine step.  Automatic: one per 16 of "
		"llm.max_running_requests, at least one; at most llm.max_running_requests - 1.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = -1, .min_int = -1, .max_int = 65535,
		.field = FIELD(reserved_interactive),
		.per_model = true,
	},
	{
		.name = "llm.interactive_step_tokens",
		.short_desc = "Tokens of an engine step that holds interactive work, batch work filling up to it "
		"(-1 = automatic, 0 = no cap).",
		.long_desc = "Keeps the steps of an interactive request about as short as they would be without the batch "
		"work.  Automatic: what takes at most llm.interactive_step_slowdown percent longer than the interactive "
		"work alone, by a model of step time the worker fits to its steps.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = -1, .min_int = -1, .max_int = 1048576,
		.field = FIELD(interactive_step_tokens),
		.per_model = true,
	},
	{
		.name = "llm.prefill_cap_tokens",
		.short_desc = "Prefill tokens per engine step while many requests of a class decode (0 = no cap).",
		.long_desc = "Applies once llm.prefill_cap_decodes requests of the class decode in the step.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 0, .min_int = 0, .max_int = 1048576,
		.field = FIELD(prefill_cap),
		.per_model = true,
	},
	{
		.name = "llm.prefill_cap_decodes",
		.short_desc = "Decoding requests of a class from which llm.prefill_cap_tokens applies.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 16, .min_int = 1, .max_int = 65536,
		.field = FIELD(prefill_cap_decodes),
		.per_model = true,
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
		.per_model = true,
	},
	{
		.name = "llm.batch_step_ms",
		.short_desc = "Engine step time the batch requests' tokens per step are steered to (0 = no cap).",
		.long_desc = "An interactive request arriving during a step waits for it: batch work then runs in more, "
		"shorter steps, their tokens set from the rate batch steps measure.  Raised to ten times a small "
		"step's time, so a step's fixed cost stays under a tenth of it; a GPU, whose steps cost about the "
		"same up to hundreds of tokens, gets no cap in effect.",
		.type = EG_INT, .context = PGC_SIGHUP, .flags = GUC_UNIT_MS,
		.boot_int = 100, .min_int = 0, .max_int = 3600000,
		.field = FIELD(batch_step_ms),
		.per_model = true,
	},
	{
		.name = "llm.interactive_step_slowdown",
		.short_desc = "Percent longer than alone batch work may make an engine step holding interactive work.",
		.long_desc = "Used when llm.interactive_step_tokens is -1 (automatic), by the step-time model; at least "
		"one batch token joins such a step.  100 allows twice the time.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 25, .min_int = 0, .max_int = 10000,
		.field = FIELD(interactive_step_slowdown),
		.per_model = true,
	},
	{
		.name = "llm.speculative_tokens",
		.short_desc = "Draft tokens per request and step of speculative decoding by prompt lookup (0 = off).",
		.long_desc = "Drafts copy what followed the output's last tokens earlier in the prompt or output; "
		"they are verified in the same step, so the output is the one plain decoding gives.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 4, .min_int = 0, .max_int = 16,
		.field = FIELD(spec_tokens),
		.per_model = true,
	},
	{
		.name = "llm.speculative_max_batch",
		.short_desc = "Speculate only while at most this many requests run in the engine's batch.",
		.long_desc = "Draft tokens cost compute in large batches, where batching already pays.",
		.type = EG_INT, .context = PGC_SIGHUP,
		.boot_int = 1, .min_int = 1, .max_int = 65536,
		.field = FIELD(spec_max_batch),
		.per_model = true,
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
		.per_model = true,
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
		.per_model = true,
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
										g->check_int, NULL, NULL);
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

/* The per-model row named name (without "llm.", any case, as GUC names), NULL if none. */
static const EngineGuc *
per_model_row(const char *name)
{
	for (int i = 0; i < lengthof(engine_gucs); i++)
	{
		const EngineGuc *g = &engine_gucs[i];

		if (g->per_model && strncmp(g->name, "llm.", 4) == 0 && pg_strcasecmp(g->name + 4, name) == 0)
			return g;
	}
	return NULL;
}

char *
llm_engine_config_per_model_names(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < lengthof(engine_gucs); i++)
		if (engine_gucs[i].per_model)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", engine_gucs[i].name + 4);
	return buf.data;
}

bool
llm_engine_config_set(llm_engine_config *c, const char *name, const char *value, char *err, size_t errlen)
{
	const EngineGuc *g = per_model_row(name);
	char	   *field;
	int			v;
	bool		b;

	if (g == NULL)
	{
		char	   *known = llm_engine_config_per_model_names();

		snprintf(err, errlen, "unknown model setting \"%s\" (known: %s)", name, known);
		pfree(known);
		return false;
	}
	field = (char *) c + g->field;
	switch (g->type)
	{
		case EG_BOOL:
			if (!parse_bool(value, &b))
			{
				snprintf(err, errlen, "model setting %s must be a boolean", name);
				return false;
			}
			*(bool *) field = b;
			return true;
		case EG_ENUM:
			for (const struct config_enum_entry *o = g->options; o->name != NULL; o++)
				if (pg_strcasecmp(o->name, value) == 0)
				{
					*(const char **) field = o->name;
					return true;
				}
			{
				StringInfoData buf;

				initStringInfo(&buf);
				for (const struct config_enum_entry *o = g->options; o->name != NULL; o++)
					appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", o->name);
				snprintf(err, errlen, "model setting %s must be one of: %s", name, buf.data);
				pfree(buf.data);
			}
			return false;
		case EG_INT:
			if (!parse_int(value, &v, g->flags, NULL) || v < g->min_int || v > g->max_int)
			{
				snprintf(err, errlen, "model setting %s must be an integer%s from %d to %d", name,
						 (g->flags & GUC_UNIT_MB) ? " (MB, or with a unit)" : "", g->min_int, g->max_int);
				return false;
			}
			if (g->check_int != NULL)
			{
				void	   *extra = NULL;

				GUC_check_errdetail_string = NULL;
				if (!g->check_int(&v, &extra, PGC_S_FILE))
				{
					snprintf(err, errlen, "model setting %s: %s", name,
							 GUC_check_errdetail_string ? GUC_check_errdetail_string : "invalid value");
					return false;
				}
			}
			if (g->scale != 0)
				*(int64_t *) field = (int64_t) v * g->scale;
			else
				*(int *) field = v;
			return true;
		case EG_STRING:
			break;
	}
	/* no string row is per-model: its value would need a memory context */
	snprintf(err, errlen, "model setting %s cannot be set per model", name);
	return false;
}

/* The row whose value goes to field; NULL if none. */
static const EngineGuc *
field_row(size_t field)
{
	for (int i = 0; i < lengthof(engine_gucs); i++)
		if (engine_gucs[i].field == field)
			return &engine_gucs[i];
	return NULL;
}

const char *
llm_engine_config_field_guc(size_t field)
{
	const EngineGuc *g = field == LLM_CONFIG_NO_FIELD ? NULL : field_row(field);

	return g ? g->name : NULL;
}

char *
llm_engine_config_field_value(const llm_engine_config *c, size_t field)
{
	const EngineGuc *g = field == LLM_CONFIG_NO_FIELD ? NULL : field_row(field);
	const char *f;

	if (g == NULL)
		return NULL;
	f = (const char *) c + g->field;
	switch (g->type)
	{
		case EG_STRING:
		case EG_ENUM:
			{
				const char *v = *(const char *const *) f;

				/* an enum's NULL is its first option, as the engine reads it */
				return pstrdup(v ? v : (g->type == EG_ENUM ? g->options[0].name : ""));
			}
		case EG_INT:
			{
				int64		v = g->scale != 0 ? *(const int64_t *) f / g->scale : *(const int *) f;
				const char *unit = (g->flags & GUC_UNIT_MB) ? "MB" : (g->flags & GUC_UNIT_MS) ? "ms" : "";

				return psprintf(INT64_FORMAT "%s", v, unit);
			}
		case EG_BOOL:
			return pstrdup(*(const bool *) f ? "on" : "off");
	}
	return NULL;
}
