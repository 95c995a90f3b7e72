/*
 * models.c — the worker's served models (models.h): loading, reloading,
 * routing and the step loop's turn.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"

#include "file_digest.h"
#include "model_list.h"
#include "models.h"
#include "registry.h"
#include "stats.h"

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
	if (state == LLM_MODEL_READY)
	{
		strlcpy(r->sha256, m->sha256, sizeof(r->sha256));
		strlcpy(r->architecture, llm_engine_architecture(m->engine), sizeof(r->architecture));
		r->n_params = llm_engine_n_params(m->engine);
		r->n_ctx = llm_engine_n_ctx(m->engine);
		r->prompt_overhead = overhead;
	}
	else
	{
		r->sha256[0] = '\0';
		r->architecture[0] = '\0';
		r->n_params = 0;
		r->n_ctx = 0;
		r->prompt_overhead = -1;
	}
	if (row == 0)
	{
		/* the default model is also the registry's model (llm_model_info, llm_stat) */
		llm_shared->model_state = state;
		strlcpy(llm_shared->model_path, r->path, MAXPGPATH);
		llm_shared->model_sqlstate = m->sqlstate;
		strlcpy(llm_shared->model_error, r->error, LLM_MODEL_ERROR_LEN);
		strlcpy(llm_shared->device, m->loaded.device ? m->loaded.device : "", sizeof(llm_shared->device));
		if (state == LLM_MODEL_READY)
		{
			size_t		need;

			llm_shared->n_ctx = r->n_ctx;
			need = llm_engine_model_info_json(m->engine, llm_shared->model_info, LLM_MODEL_INFO_LEN);
			if (need >= LLM_MODEL_INFO_LEN)
				strlcpy(llm_shared->model_info, "{}", LLM_MODEL_INFO_LEN);
		}
		else
		{
			llm_shared->n_ctx = 0;
			llm_shared->model_info[0] = '\0';
		}
	}
	LWLockRelease(llm_shared->lock);
	llm_stats_note_change();
}

static void
clear_row(int row)
{
	LlmModelRow *r = &llm_shared->models[row];

	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	memset(r, 0, sizeof(*r));
	LWLockRelease(llm_shared->lock);
	llm_stats_note_change();
}

/*
 * Row keeps serving, but the last configuration change for it could not be
 * applied: its error (and, for the default model, llm_model_info()) shows
 * why until the next load clears it; "" clears it.
 */
static void
set_row_warning(int row, const char *msg)
{
	LWLockAcquire(llm_shared->lock, LW_EXCLUSIVE);
	strlcpy(llm_shared->models[row].error, msg, sizeof(llm_shared->models[row].error));
	if (row == 0)
		strlcpy(llm_shared->model_error, msg, LLM_MODEL_ERROR_LEN);
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

/* (Re)create row's engine from config c (adopted, with its context); failure is recorded, not raised. */
static void
load(int row, const llm_engine_config *c, MemoryContext cxt, bool fresh)
{
	ServedModel *m = &served[row];
	struct stat st;
	char		err[LLM_MODEL_ERROR_LEN];

	if (m->loaded_cxt)
		MemoryContextDelete(m->loaded_cxt);
	m->loaded = *c;
	m->loaded.shared_threads = true;	/* one pool of compute threads for every model */
	m->loaded_cxt = cxt;
	m->error[0] = '\0';
	m->sqlstate = 0;
	m->sha256[0] = '\0';
	llm_stats_engine_replaced(row, fresh);
	set_row(row, LLM_MODEL_LOADING);
	set_ps_display(row == 0 ? "loading model" : psprintf("loading model %s", m->alias));

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
		m->sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
		snprintf(m->error, sizeof(m->error), "llm.kv_cache_size refused: %s", err);
	}
	else
	{
		err[0] = '\0';
		m->engine = llm_engine_create(&m->loaded, err, sizeof(err));
		if (m->engine == NULL)
		{
			m->sqlstate = ERRCODE_INTERNAL_ERROR;
			snprintf(m->error, sizeof(m->error), "could not load model file \"%s\": %s",
					 m->loaded.model_path, err[0] ? err : "unknown error");
		}
	}

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
			ereport(WARNING,
					(errmsg("llm worker: %s", m->error),
					 errhint("Fix llm.model and reload the configuration (SELECT pg_reload_conf()).")));
		else
			ereport(WARNING,
					(errmsg("llm worker: model %s: %s", m->alias, m->error),
					 errhint("Fix llm.models and reload the configuration (SELECT pg_reload_conf()).")));
	}
	set_ps_display(served[0].engine ? "ready" : "model failed");
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
	/* a new model file is checked before the one serving is given up */
	if (m->in_use && m->engine != NULL && strcmp(now.model_path, m->loaded.model_path) != 0)
	{
		char		err[LLM_MODEL_ERROR_LEN];
		char		msg[LLM_MODEL_ERROR_LEN];

		err[0] = '\0';
		if (now.model_path[0] == '\0')
			snprintf(err, sizeof(err), "llm.model is empty");
		if (err[0] != '\0' || llm_engine_check_model_file(now.model_path, err, sizeof(err)) != 0)
		{
			if (row == 0)
				snprintf(msg, sizeof(msg), "new llm.model \"%s\" not loaded: %s; still serving \"%s\"",
						 now.model_path, err, m->loaded.model_path);
			else
				snprintf(msg, sizeof(msg), "model %s: new file \"%s\" not loaded: %s; still serving \"%s\"",
						 m->alias, now.model_path, err, m->loaded.model_path);
			ereport(WARNING,
					(errmsg("llm worker: %s", msg),
					 errhint(row == 0 ? "Fix llm.model and reload the configuration (SELECT pg_reload_conf())." :
							 "Fix llm.models and reload the configuration (SELECT pg_reload_conf()).")));
			set_row_warning(row, msg);
			MemoryContextDelete(cxt);
			return;
		}
	}
	/* changed settings, a failed model to retry, or a new alias */
	unload(m, "request aborted: the llm worker is reloading its model after a configuration change");
	m->in_use = true;
	strlcpy(m->alias, alias, sizeof(m->alias));
	load(row, &now, cxt, fresh);
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
