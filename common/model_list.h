/*
 * model_list.h — the models the worker serves, by alias: llm.models
 * (PGC_SIGHUP) parsed into a list, the engine config of each, and the
 * check of an alias a call names.
 *
 * The default model is llm.model with the llm.* engine settings; its alias
 * is "default" (LLM_DEFAULT_MODEL), and a call without model => takes it.
 * llm.models adds up to LLM_MAX_MODELS - 1 more:
 *
 *     llm.models = 'small=/m/SmolLM2.gguf (context_length=512, kv_cache_size=64MB),
 *                   gemma3=/m/gemma-3-270m.gguf'
 *
 * an entry is alias=path, optionally followed by per-model settings in
 * parentheses (comma- or space-separated name=value) that replace the
 * llm.* setting of the same name for that model: every engine setting the
 * settings list marks per-model (config_list.h: context_length,
 * kv_cache_size, chat_template, ...), with its GUC's bounds and values; a
 * name given twice is refused.  llm.model, llm.threads and llm.device are
 * the worker's, shared by every model (one pool of compute threads).  An alias is a lower-case
 * identifier ([a-z_][a-z0-9_]*, at most LLM_MAX_MODEL_ALIAS bytes), unique,
 * never "default"; a path is everything between '=' and '(' or the next
 * top-level comma, trimmed (so it cannot contain ',', '(' or ')').  A
 * malformed value is refused by the GUC's check hook (the old value stays).
 *
 * Every process defines the GUC (_PG_init).  Backends check the alias a
 * call names against the current value (llm_model_alias_check); the worker
 * builds each model's engine config (llm_model_config) and reloads only the
 * models whose config changed.
 */
#ifndef LLM_MODEL_LIST_H
#define LLM_MODEL_LIST_H

#include "postgres.h"

#include "engine/engine.h"

/* Served models, the default one included (rows of the registry's model table). */
#define LLM_MAX_MODELS 8

/* The alias of the model llm.model names. */
#define LLM_DEFAULT_MODEL "default"

/* Per-model settings one entry may carry. */
#define LLM_MAX_MODEL_SETTINGS 16

/* One "name=value" of an entry, checked at parse (llm_engine_config_set). */
typedef struct LlmModelSetting
{
	char		name[NAMEDATALEN];
	char		value[64];
} LlmModelSetting;

/* One model to serve: alias, file and per-model settings (in the order given). */
typedef struct LlmModelSpec
{
	char		alias[LLM_MAX_MODEL_ALIAS + 1];
	char		path[MAXPGPATH];
	int			n_settings;
	LlmModelSetting settings[LLM_MAX_MODEL_SETTINGS];
} LlmModelSpec;

typedef struct LlmModelList
{
	int			n;
	LlmModelSpec models[LLM_MAX_MODELS - 1];
} LlmModelList;

/* Define llm.models (from _PG_init). */
extern void llm_model_list_define_gucs(void);

/*
 * Parse a value of llm.models into *out: true, or false with a message in
 * err (the check hook's detail).
 */
extern bool llm_model_list_parse(const char *value, LlmModelList *out, char *err, size_t errlen);

/* The list the current value of llm.models names (parsed once per value). */
extern const LlmModelList *llm_model_list_current(void);

/*
 * The engine config of spec (NULL: the default model): the llm.* settings
 * (llm_engine_config_from_gucs), then spec's path and per-model settings.
 * Strings are copied into cxt.
 */
extern void llm_model_config(const LlmModelSpec *spec, llm_engine_config *c, MemoryContext cxt);

/*
 * The known aliases ("default" first, then llm.models' in order) as one
 * string "default, a, b" for messages, palloc'd.
 */
extern char *llm_model_known_aliases(void);

/* The message for an unknown alias, naming the known ones, palloc'd. */
extern char *llm_model_unknown_message(const char *alias);

/*
 * A call's model => value: NULL and "default" name the default model; any
 * other alias must be one of llm.models', else ERROR 22023 listing the
 * known ones.
 */
extern void llm_model_alias_check(const char *alias);

/* Whether llm_model_alias_check accepts alias (no ERROR). */
extern bool llm_model_alias_known(const char *alias);

#endif
