/*
 * models.h — the models the worker serves: one engine per alias (the
 * default model, llm.model, and llm.models' entries, model_list.h), each
 * with its own KV cache and scheduler, all on one pool of compute threads
 * (llm_engine_config.shared_threads); their loading, their reload after a
 * configuration change, the routing of an alias to its engine, and the
 * step loop's turn.
 *
 * Rows: model i lives in row i of the registry's model table (registry.h),
 * row 0 the default model; an alias keeps its row while it stays in
 * llm.models, a new alias takes a free row.  The row shows the model's
 * identity and state (row 0's to llm_model_info() and llm_stat too).
 *
 * Reload: only a model whose engine config changed (or that failed to
 * load) is reloaded, and only its requests are failed (57000 "request
 * aborted: ... reloading"); an alias gone from llm.models has its requests
 * failed and its engine destroyed; the others keep serving.  A model that
 * serves keeps its engine until the new config has been checked
 * (llm_engine_check_config) and, on the CPU where both fit, built: a
 * failure leaves it serving with the setting at fault named in its row
 * (docs/MODELS.md, "Reloading").  Loading is synchronous: while a model
 * loads no other model steps (their requests wait, none is aborted).
 *
 * Step: every model with work runs one step per loop iteration, in row
 * order, each on the whole thread pool (docs/MODELS.md, "The step loop").
 */
#ifndef LLM_MODELS_H
#define LLM_MODELS_H

#include "postgres.h"

#include "engine/engine.h"

/* Called before an engine is destroyed: fail its requests with sqlstate and message. */
typedef void (*ModelsFailFn) (llm_engine *e, int sqlstate, const char *message);

/* Load every configured model (memory from cxt). */
extern void models_init(MemoryContext cxt, ModelsFailFn fail);

/* After a configuration reload: drop, load or reload what changed. */
extern void models_reload(void);

/*
 * The engine serving alias (NULL = the default model) and its row; NULL
 * when none does, with the SQLSTATE and message to answer with in
 * *sqlstate and msg (an unknown alias: 22023 naming the known ones; a
 * model that failed to load: its error).
 */
extern llm_engine *models_route(const char *alias, int *row, int *sqlstate, char *msg, size_t msglen);

/* One step of every model with work, events to cb; false when none had work. */
extern bool models_step(llm_event_cb cb);

/* The engine of each row (NULL where none is loaded) into engines[LLM_MAX_MODELS]; returns LLM_MAX_MODELS. */
extern int	models_engines(llm_engine **engines);

/* Destroy every engine (worker exit). */
extern void models_shutdown(void);

#endif
