/*
 * settings.h — the settings of the engine: the llm.* GUCs that become
 * an llm_engine_config (engine.h), one per row of the engine's settings list
 * (config_list.h: name, descriptions, default, bounds, unit, the config
 * field the value goes to, with its scale).
 *
 * Every process defines them (_PG_init); only the worker reads them: it
 * builds its config in one place, llm_engine_config_from_gucs(), and after a
 * reload compares the new one with the loaded one (llm_engine_config_equal,
 * every row) to decide whether the model must be reloaded.  Adding an engine
 * setting is one row of the list plus the code that reads it; a row marked
 * per-model can also be given to one model of llm.models (model_list.h), by
 * its name without "llm.", with the same bounds and values as the GUC.
 */
#ifndef LLM_ENGINE_CONFIG_H
#define LLM_ENGINE_CONFIG_H

#include "postgres.h"

#include "engine/engine.h"

/* Define every engine GUC (from _PG_init). */
extern void llm_engine_config_define_gucs(void);

/*
 * The engine config the current GUC values describe: engine defaults, then
 * one field per GUC.  Strings are copied into cxt (the GUC machinery
 * may free its own at the next reload).
 */
extern void llm_engine_config_from_gucs(llm_engine_config *c, MemoryContext cxt);

/*
 * Set the per-model setting name (e.g. "context_length") of c from its text
 * value, parsed and bounded as its GUC is: true, or false with a message in
 * err (unknown name, invalid value) and c unchanged.  Enum values become the
 * option's static name.
 */
extern bool llm_engine_config_set(llm_engine_config *c, const char *name, const char *value,
								  char *err, size_t errlen);

/* The per-model setting names, "a, b, c" in table order, palloc'd. */
extern char *llm_engine_config_per_model_names(void);

/*
 * The GUC ("llm.chat_template") whose value goes to the config field at
 * offset field, as the engine names a failure's setting
 * (llm_engine_check_config); NULL for LLM_CONFIG_NO_FIELD or a field no
 * GUC sets.
 */
extern const char *llm_engine_config_field_guc(size_t field);

/* c's value of that field as the GUC would take it ("gemma", "64MB", "on"), palloc'd; NULL as above. */
extern char *llm_engine_config_field_value(const llm_engine_config *c, size_t field);

/*
 * The value of setting name a new session of role in this database would
 * take from pg_db_role_setting (a new session's order: this database and
 * role, the role, the database, everyone; palloc'd), NULL if no
 * entry names it.  Needs a transaction.
 */
extern char *llm_role_setting(Oid role, const char *name);

#endif
