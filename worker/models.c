/*
 * models.c — the worker's served models (models.h): loading, reloading,
 * routing and the step loop's turn.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"

#include "common/settings.h"
#include "file_digest.h"
#include "common/model_list.h"
#include "models.h"
#include "common/registry.h"
#include "common/stats.h"

typedef struct ServedModel
{
	bool		in_use;
	char		alias[LLM_MAX_MODEL_ALIAS + 1];
	llm_engine *engine;			/* NULL: not loaded (error below) */
	llm_engine_config loaded;	/* the config it was created from (or failed to be) */
	MemoryContext loaded_cxt;	/* loaded's strings */
	int			sqlstate;		/* not loaded: SQLSTATE to answer with */
	char		error[LLM_MODEL_ERROR_LEN];
	char		sha256[LLM_SHA256_HEX_LEN];	/* loaded: the file's digest ("" if unreadable) */
} ServedModel;

static MemoryContext models_cxt;
static ModelsFailFn fail_requests;
static ServedModel served[LLM_MAX_MODELS];

/* ---------- the registry's rows ---------- */

static void
set_row(int row, LlmModelState state)
{
	ServedModel *m = &served[row];
	LlmModelRow *r = &llm_shared->models[row];
	int32		overhead = -1;

	if (state == LLM_MODEL_READY)
	{
		llm_request probe;
		int32_t    *ids = NULL;
		char		err[128];

		/* a one-byte user message: the template's own tokens, plus one */
		llm_request_init(&probe);
		probe.prompt_kind = LLM_PROMPT_TEXT;
		probe.prompt = "x";
		probe.prompt_len = 1;
		overhead = (int32) llm_engine_prompt_ids(m->engine, &probe, &ids, err, sizeof(err));
		free(ids);
	}
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	r->in_use = m->in_use;
	strlcpy(r->alias, m->alias, sizeof(r->alias));
	strlcpy(r->path, m->loaded.model_path ? m->loaded.model_path : "", sizeof(r->path));
	r->state = state;
	strlcpy(r->error, state == LLM_MODEL_FAILED ? m->error : "", sizeof(r->error));
	/* ready, but its own chat template refused: it serves raw prompts only, and says why */
	if (state == LLM_MODEL_READY && llm_engine_chat_refused(m->engine) != NULL)
		strlcpy(r->error, llm_engine_chat_refused(m->engine), sizeof(r->error));
	if (state == LLM_MODEL_READY)
	{
		strlcpy(r->sha256, m->sha256, sizeof(r->sha256));
		strlcpy(r->architecture, llm_engine_architecture(m->engine), sizeof(r->architecture));
		r->n_params = llm_engine_n_params(m->engine);
		r->n_ctx = llm_engine_n_ctx(m->engine);
		r->n_embd = llm_engine_n_embd(m->engine);
		r->prompt_overhead = overhead;
		if (llm_engine_model_info_json(m->engine, r->info, sizeof(r->info)) >= sizeof(r->info))
			strlcpy(r->info, "{}", sizeof(r->info));
	}
	else
	{
		r->sha256[0] = '\0';
		r->architecture[0] = '\0';
		r->n_params = 0;
		r->n_ctx = 0;
		r->n_embd = 0;
		r->prompt_overhead = -1;
		r->info[0] = '\0';
	}
	strlcpy(r->device, m->loaded.device ? m->loaded.device : "", sizeof(r->device));
	LWLockRelease(llm_shared->lock);
	llm_stats_note_change();
}

static void
clear_row(int row)
{
	LlmModelRow *r = &llm_shared->models[row];

	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	llm_stats_row_retired_locked(row);
	memset(r, 0, sizeof(*r));
	LWLockRelease(llm_shared->lock);
	llm_stats_note_change();
}

/*
 * Row keeps serving, but the last configuration change for it could not be
 * applied: its error (llm_models; llm_model_info() for the default model)
 * shows why until the next load clears it; "" clears it.
 */
static void
set_row_warning(int row, const char *msg)
{
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	strlcpy(llm_shared->models[row].error, msg, sizeof(llm_shared->models[row].error));
	LWLockRelease(llm_shared->lock);
	llm_stats_note_change();
}

/* ---------- loading ---------- */

static void
unload(ServedModel *m, const char *why)
{
	if (m->engine)
	{
		fail_requests(m->engine, ERRCODE_OPERATOR_INTERVENTION, why);
		llm_engine_destroy(m->engine);
		m->engine = NULL;
	}
}

/* Row's config becomes c (adopted, with its context): the engine comes next. */
static void
adopt_config(ServedModel *m, const llm_engine_config *c, MemoryContext cxt)
{
	if (m->loaded_cxt)
		MemoryContextDelete(m->loaded_cxt);
	m->loaded = *c;
	m->loaded.shared_threads = true;	/* one pool of compute threads for every model */
	m->loaded_cxt = cxt;
	m->error[0] = '\0';
	m->sqlstate = 0;
	m->sha256[0] = '\0';
}

static const char *
fix_hint(int row)
{
	return row == 0 ? "Fix llm.model and reload the configuration (SELECT pg_reload_conf())." :
		"Fix llm.models and reload the configuration (SELECT pg_reload_conf()).";
}

/*
 * The setting at field (the engine's LLM_CONFIG_NO_FIELD: none) with its
 * value in c, as the row's owner would change it: "llm.chat_template =
 * 'gemma'", or for a model of llm.models whose entry sets it,
 * "chat_template = 'gemma' (llm.models)"; NULL when no setting is at fault.
 */
static char *
setting_text(const LlmModelSpec *spec, const llm_engine_config *c, size_t field)
{
	const char *guc = llm_engine_config_field_guc(field);
	char	   *value;
	char	   *text = NULL;

	if (guc == NULL)
		return NULL;
	value = llm_engine_config_field_value(c, field);
	for (int i = 0; spec != NULL && i < spec->n_settings; i++)
		if (pg_strcasecmp(spec->settings[i].name, guc + 4) == 0)
		{
			text = psprintf("%s = '%s' (llm.models)", guc + 4, value);
			break;
		}
	if (text == NULL)
		text = psprintf("%s = '%s'", guc, value);
	pfree(value);
	return text;
}

/* Announce row's load: its engine ready, or why it has none (m->error). */
static void
announce(int row)
{
	ServedModel *m = &served[row];
	char		err[LLM_MODEL_ERROR_LEN];

	if (m->engine)
	{
		/*
		 * The digest of the file, read once per load right after it, before
		 * the model is announced ready (a file overwritten in between would
		 * show the new bytes' digest: replace a model under a new path).
		 */
		if (!llm_file_sha256(m->loaded.model_path, m->sha256, err, sizeof(err)))
			ereport(WARNING,
					(errmsg("llm worker: no sha256 for model file \"%s\": %s", m->loaded.model_path, err)));
		set_row(row, LLM_MODEL_READY);
		if (row == 0)
			ereport(LOG,
					(errmsg("llm worker loaded model \"%s\" (device %s, context %d tokens)",
							m->loaded.model_path, m->loaded.device, llm_engine_n_ctx(m->engine))));
		else
			ereport(LOG,
					(errmsg("llm worker loaded model %s \"%s\" (device %s, context %d tokens)",
							m->alias, m->loaded.model_path, m->loaded.device,
							llm_engine_n_ctx(m->engine))));
		if (llm_engine_chat_refused(m->engine) != NULL)
			ereport(WARNING,
					(errmsg("llm worker: model \"%s\" serves raw prompts only: %s", m->loaded.model_path,
							llm_engine_chat_refused(m->engine)),
					 errhint("Set llm.chat_template to a built-in family, or give the model a template the engine renders.")));
		if (llm_engine_notes(m->engine)[0] != '\0')
			ereport(WARNING,
					(errmsg("llm worker: llm.threads = %d clamped: %s", m->loaded.n_threads,
							llm_engine_notes(m->engine)),
					 errhint("Set llm.threads to at most the number of CPUs, or 0 for all of them.")));
	}
	else
	{
		set_row(row, LLM_MODEL_FAILED);
		if (row == 0)
			ereport(WARNING, (errmsg("llm worker: %s", m->error), errhint("%s", fix_hint(row))));
		else
			ereport(WARNING,
					(errmsg("llm worker: model %s: %s", m->alias, m->error), errhint("%s", fix_hint(row))));
	}
	set_ps_display(served[0].engine ? "ready" : "model failed");
}

/*
 * Create row's engine from its config; failure is recorded in the row
 * (naming the setting at fault, spec: its llm.models entry), not raised.
 */
static void
create_engine(int row, const LlmModelSpec *spec)
{
	ServedModel *m = &served[row];
	struct stat st;
	char		err[LLM_MODEL_ERROR_LEN];
	size_t		field = LLM_CONFIG_NO_FIELD;
	char	   *setting;

	if (m->loaded.model_path[0] == '\0')
	{
		m->sqlstate = ERRCODE_UNDEFINED_FILE;
		snprintf(m->error, sizeof(m->error), "llm.model is empty");
	}
	else if (stat(m->loaded.model_path, &st) != 0)
	{
		m->sqlstate = ERRCODE_UNDEFINED_FILE;
		snprintf(m->error, sizeof(m->error), "could not access model file \"%s\": %m",
				 m->loaded.model_path);
	}
	else if (m->loaded.kv_cache_bytes > 0 &&
			 llm_engine_check_kv_budget(m->loaded.kv_cache_bytes, err, sizeof(err)) != 0)
	{
		/* named as the row's owner set it: the GUC, or its llm.models entry */
		setting = setting_text(spec, &m->loaded, offsetof(llm_engine_config, kv_cache_bytes));
		m->sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
		snprintf(m->error, sizeof(m->error), "%s refused: %s", setting, err);
		pfree(setting);
	}
	else
	{
		err[0] = '\0';
		m->engine = llm_engine_create_ex(&m->loaded, &field, err, sizeof(err));
		if (m->engine == NULL)
		{
			setting = field == offsetof(llm_engine_config, model_path) ? NULL :
				setting_text(spec, &m->loaded, field);
			m->sqlstate = setting ? ERRCODE_INVALID_PARAMETER_VALUE : ERRCODE_INTERNAL_ERROR;
			if (setting)
			{
				snprintf(m->error, sizeof(m->error), "%s refused: %s", setting,
						 err[0] ? err : "unknown error");
				pfree(setting);
			}
			else
				snprintf(m->error, sizeof(m->error), "could not load model file \"%s\": %s",
						 m->loaded.model_path, err[0] ? err : "unknown error");
		}
	}
}

/* (Re)create row's engine from config c (adopted, with its context); failure is recorded, not raised. */
static void
load(int row, const llm_engine_config *c, MemoryContext cxt, bool fresh, const LlmModelSpec *spec)
{
	ServedModel *m = &served[row];

	adopt_config(m, c, cxt);
	llm_stats_engine_replaced(row, fresh);
	set_row(row, LLM_MODEL_LOADING);
	set_ps_display(row == 0 ? "loading model" : psprintf("loading model %s", m->alias));
	create_engine(row, spec);
	announce(row);
}

/* The config spec (NULL: the default model) describes now, in a context of its own. */
static MemoryContext
current_config(const LlmModelSpec *spec, llm_engine_config *c)
{
	MemoryContext cxt = AllocSetContextCreate(models_cxt, "llm model config", ALLOCSET_SMALL_SIZES);

	llm_model_config(spec, c, cxt);
	c->shared_threads = true;
	return cxt;
}

/*
 * Serving row keeps its engine: the new configuration could not be
 * applied, for the reason in msg (WARNING, and the row's error until the
 * next reload).
 */
static void
keep_serving(int row, const char *msg)
{
	ereport(WARNING,
			(errmsg("llm worker: %s", msg),
			 errhint("Fix the setting named and reload the configuration (SELECT pg_reload_conf()); "
					 "the previous settings serve until then.")));
	set_row_warning(row, msg);
}

/*
 * Serving row changes to config now (context cxt, adopted on success).
 * Nothing is given up before the new configuration has passed every
 * check that needs neither weights nor KV cache
 * (llm_engine_check_config: settings, file, chat template, device, KV
 * budget); a failure leaves the old engine serving, its requests
 * untouched, the setting at fault named.  Then the new engine is built
 * beside the old one where both fit (on the CPU, the two KV budgets
 * within llm_engine_check_kv_budget's share), so a failure there too
 * leaves the old one serving; else (a GPU, or memory for one only) the
 * old one goes first and, if the new one still fails, its configuration
 * is loaded again.
 */
static void
replace(int row, const llm_engine_config *now, MemoryContext cxt, const LlmModelSpec *spec)
{
	ServedModel *m = &served[row];
	llm_engine_config old_resolved;
	llm_engine_config resolved;
	llm_engine *next = NULL;
	size_t		field = LLM_CONFIG_NO_FIELD;
	char		err[LLM_MODEL_ERROR_LEN];
	char	   *setting;
	bool		file_changed = strcmp(now->model_path, m->loaded.model_path) != 0;
	bool		beside;
	int			rc = -1;

	err[0] = '\0';
	set_ps_display(row == 0 ? "checking new model configuration" :
				   psprintf("checking new configuration of model %s", m->alias));
	if (now->model_path[0] == '\0')
	{
		field = offsetof(llm_engine_config, model_path);
		snprintf(err, sizeof(err), "llm.model is empty");
	}
	else if (file_changed && llm_engine_check_model_file(now->model_path, err, sizeof(err)) != 0)
		field = offsetof(llm_engine_config, model_path);
	else
		rc = llm_engine_check_config(now, &resolved, &field, err, sizeof(err));

	if (rc == 0)
	{
		char		why[LLM_MODEL_ERROR_LEN];

		llm_engine_get_config(m->engine, &old_resolved);
		why[0] = '\0';
		if (strcmp(resolved.device ? resolved.device : "", "cpu") != 0)
			snprintf(why, sizeof(why), "device %s: one copy of the model in its memory", resolved.device);
		else
			(void) llm_engine_check_kv_budget(old_resolved.kv_cache_bytes + resolved.kv_cache_bytes,
											  why, sizeof(why));
		beside = why[0] == '\0';
		if (!beside)
			ereport(LOG,
					(errmsg("llm worker: %snew configuration checked; the serving engine goes before it is built "
							"(the two engines together: %s)",
							row == 0 ? "" : psprintf("model %s: ", m->alias), why)));
		if (beside)
		{
			set_ps_display(row == 0 ? "loading model" : psprintf("loading model %s", m->alias));
			err[0] = '\0';
			next = llm_engine_create_ex(now, &field, err, sizeof(err));
			if (next == NULL)
			{
				rc = -1;
				if (err[0] == '\0')
					snprintf(err, sizeof(err), "unknown error");
			}
		}
	}

	if (rc != 0)
	{
		char		msg[LLM_MODEL_ERROR_LEN];

		setting = field == offsetof(llm_engine_config, model_path) && !file_changed ? NULL :
			setting_text(spec, now, field);
		if (field == offsetof(llm_engine_config, model_path) && file_changed)
		{
			if (row == 0)
				snprintf(msg, sizeof(msg), "new llm.model \"%s\" not loaded: %s; still serving \"%s\"",
						 now->model_path, err, m->loaded.model_path);
			else
				snprintf(msg, sizeof(msg), "model %s: new file \"%s\" not loaded: %s; still serving \"%s\"",
						 m->alias, now->model_path, err, m->loaded.model_path);
		}
		else if (row == 0)
			snprintf(msg, sizeof(msg), "new %s not applied: %s; still serving with the previous settings",
					 setting ? setting : "configuration", err);
		else
			snprintf(msg, sizeof(msg), "model %s: new %s not applied: %s; still serving with the previous settings",
					 m->alias, setting ? setting : "configuration", err);
		keep_serving(row, msg);
		if (setting)
			pfree(setting);
		MemoryContextDelete(cxt);
		set_ps_display(served[0].engine ? "ready" : "model failed");
		return;
	}

	/* the old engine goes: its requests fail, the new one (or its config) takes the row */
	{
		llm_engine_config old = m->loaded;
		MemoryContext old_cxt = m->loaded_cxt;

		m->loaded_cxt = NULL;	/* kept for a reload of the old configuration */
		unload(m, "request aborted: the llm worker is reloading its model after a configuration change");
		adopt_config(m, now, cxt);
		llm_stats_engine_replaced(row, false);
		if (next != NULL)
		{
			m->engine = next;
			MemoryContextDelete(old_cxt);
			announce(row);
			return;
		}
		set_row(row, LLM_MODEL_LOADING);
		set_ps_display(row == 0 ? "loading model" : psprintf("loading model %s", m->alias));
		create_engine(row, spec);
		if (m->engine != NULL)
		{
			MemoryContextDelete(old_cxt);
			announce(row);
			return;
		}
		/* the new configuration failed where only one engine fits: the old one again */
		{
			char		msg[LLM_MODEL_ERROR_LEN];

			snprintf(msg, sizeof(msg), "%s%s; the previous settings were loaded again",
					 row == 0 ? "" : psprintf("model %s: ", m->alias), m->error);
			adopt_config(m, &old, old_cxt);
			create_engine(row, NULL);
			announce(row);
			if (m->engine != NULL)
				keep_serving(row, msg);
		}
	}
}

/* Bring row (alias, spec) to the config the settings describe now. */
static void
refresh(int row, const char *alias, const LlmModelSpec *spec)
{
	ServedModel *m = &served[row];
	llm_engine_config now;
	MemoryContext cxt = current_config(spec, &now);
	bool		fresh = !m->in_use;

	if (m->in_use && m->engine != NULL && llm_engine_config_equal(&now, &m->loaded))
	{
		/* back to the configuration being served: a refused change is no longer pending */
		set_row_warning(row, "");
		MemoryContextDelete(cxt);
		return;
	}
	if (m->in_use && m->engine != NULL)
	{
		/* changed settings or file of a model that serves */
		replace(row, &now, cxt, spec);
		return;
	}
	/* a failed model to retry, or a new alias */
	m->in_use = true;
	strlcpy(m->alias, alias, sizeof(m->alias));
	load(row, &now, cxt, fresh, spec);
}

void
models_init(MemoryContext cxt, ModelsFailFn fail)
{
	models_cxt = cxt;
	fail_requests = fail;
	memset(served, 0, sizeof(served));
	for (int row = 0; row < LLM_MAX_MODELS; row++)
		clear_row(row);
	models_reload();
}

void
models_reload(void)
{
	const LlmModelList *list = llm_model_list_current();
	int			row_of[LLM_MAX_MODELS - 1];

	/* aliases gone from llm.models first: their memory is free for the others */
	for (int row = 1; row < LLM_MAX_MODELS; row++)
	{
		ServedModel *m = &served[row];
		bool		listed = false;

		if (!m->in_use)
			continue;
		for (int i = 0; i < list->n; i++)
			listed |= strcmp(list->models[i].alias, m->alias) == 0;
		if (listed)
			continue;
		unload(m, psprintf("request aborted: model %s was removed from llm.models", m->alias));
		if (m->loaded_cxt)
			MemoryContextDelete(m->loaded_cxt);
		memset(m, 0, sizeof(*m));
		clear_row(row);
		ereport(LOG, (errmsg("llm worker dropped a model removed from llm.models")));
	}

	refresh(0, LLM_DEFAULT_MODEL, NULL);

	/* rows: an alias keeps its own, a new one takes the first free row */
	for (int i = 0; i < list->n; i++)
	{
		row_of[i] = -1;
		for (int row = 1; row < LLM_MAX_MODELS; row++)
			if (served[row].in_use && strcmp(served[row].alias, list->models[i].alias) == 0)
				row_of[i] = row;
	}
	for (int i = 0; i < list->n; i++)
	{
		if (row_of[i] < 0)
			for (int row = 1; row < LLM_MAX_MODELS && row_of[i] < 0; row++)
			{
				bool		taken = served[row].in_use;

				for (int j = 0; j < list->n; j++)
					taken |= row_of[j] == row;
				if (!taken)
					row_of[i] = row;
			}
		refresh(row_of[i], list->models[i].alias, &list->models[i]);
	}
}

llm_engine *
models_route(const char *alias, int *row, int *sqlstate, char *msg, size_t msglen)
{
	int			found = -1;

	if (alias == NULL || strcmp(alias, LLM_DEFAULT_MODEL) == 0)
		found = 0;
	else
		for (int r = 1; r < LLM_MAX_MODELS; r++)
			if (served[r].in_use && strcmp(served[r].alias, alias) == 0)
				found = r;
	*row = found;
	if (found < 0)
	{
		*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
		strlcpy(msg, llm_model_unknown_message(alias), msglen);
		return NULL;
	}
	if (served[found].engine == NULL)
	{
		*sqlstate = served[found].sqlstate ? served[found].sqlstate : ERRCODE_INTERNAL_ERROR;
		snprintf(msg, msglen, "llm model %sis not available: %s",
				 found == 0 ? "" : psprintf("%s ", served[found].alias),
				 served[found].error[0] ? served[found].error : "the model is not loaded");
		return NULL;
	}
	return served[found].engine;
}

bool
models_step(llm_event_cb cb)
{
	bool		busy = false;

	for (int row = 0; row < LLM_MAX_MODELS; row++)
	{
		ServedModel *m = &served[row];
		llm_status	st;

		if (m->engine == NULL || !llm_engine_has_work(m->engine))
			continue;
		busy = true;
		st = llm_engine_step(m->engine, cb, NULL);
		llm_stats_note_step(row);
		if (st != LLM_OK && row == 0)
			ereport(WARNING,
					(errmsg("llm worker: engine step failed: %s; its requests were failed",
							llm_status_name(st))));
		else if (st != LLM_OK)
			ereport(WARNING,
					(errmsg("llm worker: engine step of model %s failed: %s; its requests were failed",
							m->alias, llm_status_name(st))));
	}
	return busy;
}

int
models_engines(llm_engine **engines)
{
	for (int row = 0; row < LLM_MAX_MODELS; row++)
		engines[row] = served[row].engine;
	return LLM_MAX_MODELS;
}

void
models_shutdown(void)
{
	for (int row = 0; row < LLM_MAX_MODELS; row++)
		if (served[row].engine)
		{
			llm_engine_destroy(served[row].engine);
			served[row].engine = NULL;
		}
}
