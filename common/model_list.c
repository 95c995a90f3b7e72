/*
 * model_list.c — llm.models: its GUC, its parser, the engine config of each
 * model and the check of a call's alias (model_list.h).
 */
#include "postgres.h"

#include <ctype.h>

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "settings.h"
#include "model_list.h"

static char *models_value = NULL;

/* The parse of the value seen last (in TopMemoryContext). */
static char *parsed_value = NULL;
static LlmModelList parsed_list;

static bool
parse_failed(char *err, size_t errlen, const char *fmt, const char *arg)
{
	snprintf(err, errlen, fmt, arg);
	return false;
}

/* s[0..len) with surrounding white space removed, as a palloc'd string. */
static char *
trimmed(const char *s, size_t len)
{
	while (len > 0 && isspace((unsigned char) *s))
		s++, len--;
	while (len > 0 && isspace((unsigned char) s[len - 1]))
		len--;
	return pnstrdup(s, len);
}

static bool
valid_alias(const char *a)
{
	if (a[0] == '\0' || strlen(a) > LLM_MAX_MODEL_ALIAS || !(islower((unsigned char) a[0]) || a[0] == '_'))
		return false;
	for (const char *p = a; *p; p++)
		if (!(islower((unsigned char) *p) || isdigit((unsigned char) *p) || *p == '_'))
			return false;
	return true;
}

/*
 * One "name=value" of an entry's settings into spec, checked by applying it
 * to a scratch config (the same parse llm_model_config applies later).
 */
static bool
parse_setting(const char *item, LlmModelSpec *spec, char *err, size_t errlen)
{
	const char *eq = strchr(item, '=');
	char	   *name;
	char	   *value;
	llm_engine_config scratch;
	LlmModelSetting *s;

	if (eq == NULL)
		return parse_failed(err, errlen, "model setting \"%s\" is not name=value", item);
	name = trimmed(item, eq - item);
	value = trimmed(eq + 1, strlen(eq + 1));
	llm_engine_config_defaults(&scratch);
	if (!llm_engine_config_set(&scratch, name, value, err, errlen))
		return false;
	for (int i = 0; i < spec->n_settings; i++)
		if (pg_strcasecmp(spec->settings[i].name, name) == 0)
			return parse_failed(err, errlen, "model setting %s appears twice", name);
	if (spec->n_settings == LLM_MAX_MODEL_SETTINGS)
	{
		snprintf(err, errlen, "at most %d settings per model", LLM_MAX_MODEL_SETTINGS);
		return false;
	}
	if (strlen(name) >= sizeof(s->name) || strlen(value) >= sizeof(s->value))
		return parse_failed(err, errlen, "model setting %s has a value too long", name);
	s = &spec->settings[spec->n_settings++];
	strlcpy(s->name, name, sizeof(s->name));
	strlcpy(s->value, value, sizeof(s->value));
	return true;
}

/* One entry "alias=path (settings)" into spec. */
static bool
parse_entry(const char *entry, LlmModelSpec *spec, char *err, size_t errlen)
{
	const char *eq = strchr(entry, '=');
	const char *open;
	char	   *alias;
	char	   *path;

	memset(spec, 0, sizeof(*spec));
	if (eq == NULL)
		return parse_failed(err, errlen, "entry \"%s\" is not alias=path", entry);
	alias = trimmed(entry, eq - entry);
	if (!valid_alias(alias))
	{
		snprintf(err, errlen,
				 "model alias \"%s\" is not a lower-case identifier of at most %d bytes ([a-z_][a-z0-9_]*)",
				 alias, LLM_MAX_MODEL_ALIAS);
		return false;
	}
	if (strcmp(alias, LLM_DEFAULT_MODEL) == 0)
		return parse_failed(err, errlen, "model alias \"%s\" is reserved for llm.model", alias);
	strlcpy(spec->alias, alias, sizeof(spec->alias));
	open = strchr(eq + 1, '(');
	path = trimmed(eq + 1, open ? (size_t) (open - eq - 1) : strlen(eq + 1));
	if (path[0] == '\0')
		return parse_failed(err, errlen, "model \"%s\" has no path", alias);
	if (strlen(path) >= MAXPGPATH || strchr(path, ')') != NULL)
		return parse_failed(err, errlen, "model \"%s\" has an invalid path", alias);
	strlcpy(spec->path, path, sizeof(spec->path));
	if (open != NULL)
	{
		const char *close = strchr(open, ')');
		const char *p = open + 1;
		char	   *rest;

		if (close == NULL)
			return parse_failed(err, errlen, "settings of model \"%s\" lack their \")\"", alias);
		rest = trimmed(close + 1, strlen(close + 1));
		if (rest[0] != '\0')
			return parse_failed(err, errlen, "unexpected text after the settings of model \"%s\"", alias);
		/* items separated by commas or white space; "name = value" may have spaces around '=' */
		while (p < close)
		{
			const char *start;
			const char *eqs;
			char	   *item;

			while (p < close && (isspace((unsigned char) *p) || *p == ','))
				p++;
			if (p >= close)
				break;
			start = p;
			while (p < close && *p != '=' && *p != ',')
				p++;
			eqs = p;
			if (p < close && *p == '=')
			{
				p++;
				while (p < close && isspace((unsigned char) *p))
					p++;
				while (p < close && !isspace((unsigned char) *p) && *p != ',')
					p++;
			}
			item = pnstrdup(start, p - start);
			if (eqs >= close || *eqs != '=')
				return parse_failed(err, errlen, "model setting \"%s\" is not name=value", trimmed(item, strlen(item)));
			if (!parse_setting(item, spec, err, errlen))
				return false;
		}
	}
	return true;
}

bool
llm_model_list_parse(const char *value, LlmModelList *out, char *err, size_t errlen)
{
	const char *p = value ? value : "";

	memset(out, 0, sizeof(*out));
	if (trimmed(p, strlen(p))[0] == '\0')
		return true;			/* no models besides llm.model */
	for (;;)
	{
		const char *start = p;
		int			depth = 0;
		char	   *entry;

		/* an entry ends at a comma outside parentheses */
		while (*p && !(*p == ',' && depth == 0))
		{
			if (*p == '(')
				depth++;
			else if (*p == ')')
				depth--;
			p++;
		}
		entry = trimmed(start, p - start);
		if (entry[0] == '\0')
			return parse_failed(err, errlen, "%s", "empty entry in the model list");
		if (out->n == lengthof(out->models))
		{
			snprintf(err, errlen, "at most %d models besides llm.model", (int) lengthof(out->models));
			return false;
		}
		if (!parse_entry(entry, &out->models[out->n], err, errlen))
			return false;
		for (int i = 0; i < out->n; i++)
			if (strcmp(out->models[i].alias, out->models[out->n].alias) == 0)
				return parse_failed(err, errlen, "model alias \"%s\" appears twice", out->models[i].alias);
		out->n++;
		if (*p == '\0')
			return true;
		p++;					/* the comma */
	}
}

static bool
check_models(char **newval, void **extra, GucSource source)
{
	LlmModelList list;
	char		err[512];
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "llm.models check",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	bool		ok = llm_model_list_parse(*newval, &list, err, sizeof(err));

	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	if (!ok)
		GUC_check_errdetail("%s", err);
	return ok;
}

void
llm_model_list_define_gucs(void)
{
	DefineCustomStringVariable("llm.models",
							   "Models the llm worker serves besides llm.model, by alias: 'alias=path (settings), ...'.",
							   "Calls choose one with model => 'alias'. Reloading the configuration loads, "
							   "reloads or drops only the models whose entry changed.",
							   &models_value,
							   "",
							   PGC_SIGHUP, 0,
							   check_models, NULL, NULL);
}

const LlmModelList *
llm_model_list_current(void)
{
	const char *now = models_value ? models_value : "";

	if (parsed_value == NULL || strcmp(parsed_value, now) != 0)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		char		err[512];

		if (parsed_value)
			pfree(parsed_value);
		parsed_value = pstrdup(now);
		/* the check hook accepted the value; a failure here leaves no models */
		if (!llm_model_list_parse(now, &parsed_list, err, sizeof(err)))
			memset(&parsed_list, 0, sizeof(parsed_list));
		MemoryContextSwitchTo(old);
	}
	return &parsed_list;
}

void
llm_model_config(const LlmModelSpec *spec, llm_engine_config *c, MemoryContext cxt)
{
	llm_engine_config_from_gucs(c, cxt);
	if (spec == NULL)
		return;
	c->model_path = MemoryContextStrdup(cxt, spec->path);
	for (int i = 0; i < spec->n_settings; i++)
	{
		char		err[256];
		MemoryContext old = MemoryContextSwitchTo(cxt);	/* a text setting's copy lives as long as c */

		/* checked when the value was parsed; never raise here: the worker calls this */
		if (!llm_engine_config_set(c, spec->settings[i].name, spec->settings[i].value, err, sizeof(err)))
			elog(WARNING, "model \"%s\": %s; the llm.* value is used", spec->alias, err);
		MemoryContextSwitchTo(old);
	}
}

char *
llm_model_known_aliases(void)
{
	const LlmModelList *l = llm_model_list_current();
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, LLM_DEFAULT_MODEL);
	for (int i = 0; i < l->n; i++)
		appendStringInfo(&buf, ", %s", l->models[i].alias);
	return buf.data;
}

char *
llm_model_unknown_message(const char *alias)
{
	return psprintf("unknown model \"%s\" (known: %s)", alias, llm_model_known_aliases());
}

bool
llm_model_alias_known(const char *alias)
{
	const LlmModelList *l;

	if (alias == NULL || strcmp(alias, LLM_DEFAULT_MODEL) == 0)
		return true;
	l = llm_model_list_current();
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->models[i].alias, alias) == 0)
			return true;
	return false;
}

void
llm_model_alias_check(const char *alias)
{
	if (llm_model_alias_known(alias))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s", llm_model_unknown_message(alias)),
			 errhint("Models are named by llm.models; model => NULL or 'default' is llm.model.")));
}
