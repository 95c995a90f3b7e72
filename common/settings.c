/*
 * engine_config.c — the engine's GUCs, one per row of the engine's settings
 * list that names one (config_list.h), and the llm_engine_config built from
 * them (settings.h).
 *
 * Name, descriptions, boot value, bounds, unit and the per-model mark come
 * from the row; what only a GUC has (llm.model's boot value, the installed
 * model; llm.context_length's check hook) is in guc_extras.  The GUC
 * machinery writes into each GUC's own value slot, so no global variable is
 * declared per setting.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_db_role_setting.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "settings.h"

/*
 * A GUC of one row of the list: where the GUC machinery keeps its value,
 * and an ENUM row's options as PostgreSQL takes them (values: positions).
 */
typedef struct EngineGuc
{
	const llm_setting *s;
	int			flags;			/* GUC_UNIT_* */
	struct config_enum_entry *options;
	union
	{
		char	   *s;
		int			i;
		bool		b;
	}			value;
} EngineGuc;

static EngineGuc engine_gucs[LLM_N_SETTINGS];
static int	n_engine_gucs;

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

typedef const char *(*BootString) (void);

/*
 * llm.chat_template: a name of its row, Jinja text or an absolute path
 * (llm_chat_source_of); the load compiles a template and refuses it there.
 */
static bool
check_chat_template(char **newval, void **extra, GucSource source)
{
	const llm_setting *s = llm_setting_at(FIELD(chat_template));

	if (*newval == NULL || llm_chat_source_of(*newval) != LLM_CHAT_SOURCE_NAME)
		return true;
	for (const char *const *o = s->options; *o != NULL; o++)
		if (pg_strcasecmp(*o, *newval) == 0)
			return true;
	GUC_check_errdetail("llm.chat_template must be %s.", s->range);
	return false;
}

/*
 * What only the GUCs have, by the config field: llm.model's boot value (the
 * engine has no default file), llm.context_length's check of the values its
 * bounds let through (with the GUC's detail message).
 */
static const struct
{
	size_t		field;
	BootString	boot_string;
	GucIntCheckHook check_int;
	GucStringCheckHook open_enum;	/* an ENUM row that also takes text: a string GUC so checked */
}			guc_extras[] = {
	{FIELD(model_path), default_model_path, NULL, NULL},
	{FIELD(n_ctx), NULL, check_context_length, NULL},
	{FIELD(chat_template), NULL, NULL, check_chat_template},
};

static BootString
extra_boot_string(size_t field)
{
	for (int i = 0; i < lengthof(guc_extras); i++)
		if (guc_extras[i].field == field)
			return guc_extras[i].boot_string;
	return NULL;
}

static GucStringCheckHook
extra_open_enum(size_t field)
{
	for (int i = 0; i < lengthof(guc_extras); i++)
		if (guc_extras[i].field == field)
			return guc_extras[i].open_enum;
	return NULL;
}

static GucIntCheckHook
extra_check_int(size_t field)
{
	for (int i = 0; i < lengthof(guc_extras); i++)
		if (guc_extras[i].field == field)
			return guc_extras[i].check_int;
	return NULL;
}

static int
unit_flags(llm_setting_unit unit)
{
	switch (unit)
	{
		case LLM_SETTING_UNIT_MS:
			return GUC_UNIT_MS;
		case LLM_SETTING_UNIT_MB:
			return GUC_UNIT_MB;
		case LLM_SETTING_UNIT_NONE:
			break;
	}
	return 0;
}

/* An ENUM row's options for DefineCustomEnumVariable, in TopMemoryContext. */
static struct config_enum_entry *
enum_entries(const llm_setting *s)
{
	int			n = 0;
	struct config_enum_entry *e;

	while (s->options[n] != NULL)
		n++;
	e = MemoryContextAllocZero(TopMemoryContext, (n + 1) * sizeof(*e));
	for (int i = 0; i < n; i++)
	{
		e[i].name = s->options[i];
		e[i].val = i;
	}
	return e;
}

/*
 * Every row of the list with a GUC: its name, descriptions, default,
 * bounds and unit from the row; context PGC_SIGHUP (the worker rebuilds
 * its config at a reload).
 */
void
llm_engine_config_define_gucs(void)
{
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];
		EngineGuc  *g;

		if (s->guc == NULL)
			continue;
		g = &engine_gucs[n_engine_gucs++];
		g->s = s;
		g->flags = unit_flags(s->unit);
		switch (s->kind)
		{
			case LLM_SETTING_STR:
				{
					BootString	boot = extra_boot_string(s->offset);

					DefineCustomStringVariable(s->guc, s->short_desc, s->long_desc, &g->value.s,
											   boot ? boot() : "", PGC_SIGHUP, g->flags,
											   NULL, NULL, NULL);
				}
				break;
			case LLM_SETTING_ENUM:
				if (extra_open_enum(s->offset) != NULL)
				{
					/* options or a text: a string GUC, the first option its default */
					DefineCustomStringVariable(s->guc, s->short_desc, s->long_desc, &g->value.s,
											   s->options[0], PGC_SIGHUP, g->flags,
											   extra_open_enum(s->offset), NULL, NULL);
					break;
				}
				g->options = enum_entries(s);
				/* the first option is the default */
				DefineCustomEnumVariable(s->guc, s->short_desc, s->long_desc, &g->value.i,
										 0, g->options, PGC_SIGHUP, g->flags,
										 NULL, NULL, NULL);
				break;
			case LLM_SETTING_INT:
				DefineCustomIntVariable(s->guc, s->short_desc, s->long_desc, &g->value.i,
										(int) s->def, (int) s->min, (int) s->max, PGC_SIGHUP, g->flags,
										extra_check_int(s->offset), NULL, NULL);
				break;
			case LLM_SETTING_BOOL:
				DefineCustomBoolVariable(s->guc, s->short_desc, s->long_desc, &g->value.b,
										 s->def != 0, PGC_SIGHUP, g->flags,
										 NULL, NULL, NULL);
				break;
		}
	}
}

void
llm_engine_config_from_gucs(llm_engine_config *c, MemoryContext cxt)
{
	llm_engine_config_defaults(c);
	for (int i = 0; i < n_engine_gucs; i++)
	{
		const EngineGuc *g = &engine_gucs[i];
		const llm_setting *s = g->s;
		char	   *field = (char *) c + s->offset;

		switch (s->kind)
		{
			case LLM_SETTING_STR:
				*(const char **) field = MemoryContextStrdup(cxt, g->value.s ? g->value.s : "");
				break;
			case LLM_SETTING_ENUM:
				if (g->options == NULL)
				{
					/* an open ENUM row: an option by its static name, else the text */
					const char *v = g->value.s ? g->value.s : s->options[0];

					*(const char **) field = MemoryContextStrdup(cxt, v);
					for (const char *const *o = s->options; *o != NULL; o++)
						if (pg_strcasecmp(*o, v) == 0)
							*(const char **) field = *o;
					break;
				}
				/* the option's static name */
				*(const char **) field = s->options[g->value.i];
				break;
			case LLM_SETTING_INT:
				llm_setting_set_int(c, s, (int64_t) g->value.i * s->scale);
				break;
			case LLM_SETTING_BOOL:
				*(bool *) field = g->value.b;
				break;
		}
	}
}

/* The per-model row named name (without "llm.", any case, as GUC names), NULL if none. */
static const llm_setting *
per_model_row(const char *name)
{
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];

		if (s->per_model && s->guc != NULL && strncmp(s->guc, "llm.", 4) == 0 &&
			pg_strcasecmp(s->guc + 4, name) == 0)
			return s;
	}
	return NULL;
}

char *
llm_engine_config_per_model_names(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < LLM_N_SETTINGS; i++)
		if (llm_settings[i].per_model && llm_settings[i].guc != NULL)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", llm_settings[i].guc + 4);
	return buf.data;
}

bool
llm_engine_config_set(llm_engine_config *c, const char *name, const char *value, char *err, size_t errlen)
{
	const llm_setting *s = per_model_row(name);
	char	   *field;
	int			v;
	bool		b;
	int			flags;
	GucIntCheckHook check_int;

	if (s == NULL)
	{
		char	   *known = llm_engine_config_per_model_names();

		snprintf(err, errlen, "unknown model setting \"%s\" (known: %s)", name, known);
		pfree(known);
		return false;
	}
	field = (char *) c + s->offset;
	switch (s->kind)
	{
		case LLM_SETTING_BOOL:
			if (!parse_bool(value, &b))
			{
				snprintf(err, errlen, "model setting %s must be a boolean", name);
				return false;
			}
			*(bool *) field = b;
			return true;
		case LLM_SETTING_ENUM:
			for (const char *const *o = s->options; *o != NULL; o++)
				if (pg_strcasecmp(*o, value) == 0)
				{
					*(const char **) field = *o;
					return true;
				}
			if (extra_open_enum(s->offset) != NULL && llm_chat_source_of(value) != LLM_CHAT_SOURCE_NAME)
			{
				/* a text: in the caller's memory context, as long as the config */
				*(const char **) field = pstrdup(value);
				return true;
			}
			{
				StringInfoData buf;

				initStringInfo(&buf);
				for (const char *const *o = s->options; *o != NULL; o++)
					appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", *o);
				if (extra_open_enum(s->offset) != NULL)
					appendStringInfoString(&buf, ", a Jinja template or an absolute path to one");
				snprintf(err, errlen, "model setting %s must be one of: %s", name, buf.data);
				pfree(buf.data);
			}
			return false;
		case LLM_SETTING_INT:
			flags = unit_flags(s->unit);
			if (!parse_int(value, &v, flags, NULL) || v < s->min || v > s->max)
			{
				snprintf(err, errlen, "model setting %s must be an integer%s from %d to %d", name,
						 (flags & GUC_UNIT_MB) ? " (MB, or with a unit)" : "", (int) s->min, (int) s->max);
				return false;
			}
			check_int = extra_check_int(s->offset);
			if (check_int != NULL)
			{
				void	   *extra = NULL;

				GUC_check_errdetail_string = NULL;
				if (!check_int(&v, &extra, PGC_S_FILE))
				{
					snprintf(err, errlen, "model setting %s: %s", name,
							 GUC_check_errdetail_string ? GUC_check_errdetail_string : "invalid value");
					return false;
				}
			}
			llm_setting_set_int(c, s, (int64_t) v * s->scale);
			return true;
		case LLM_SETTING_STR:
			break;
	}
	/* no string row is per-model: its value would need a memory context */
	snprintf(err, errlen, "model setting %s cannot be set per model", name);
	return false;
}

/* The row with a GUC whose value goes to field; NULL if none. */
static const llm_setting *
field_row(size_t field)
{
	const llm_setting *s = field == LLM_CONFIG_NO_FIELD ? NULL : llm_setting_at(field);

	return s != NULL && s->guc != NULL ? s : NULL;
}

const char *
llm_engine_config_field_guc(size_t field)
{
	const llm_setting *s = field_row(field);

	return s ? s->guc : NULL;
}

char *
llm_engine_config_field_value(const llm_engine_config *c, size_t field)
{
	const llm_setting *s = field_row(field);
	const char *f;

	if (s == NULL)
		return NULL;
	f = (const char *) c + s->offset;
	switch (s->kind)
	{
		case LLM_SETTING_STR:
		case LLM_SETTING_ENUM:
			{
				const char *v = *(const char *const *) f;

				/* an enum's NULL is its first option, as the engine reads it */
				return pstrdup(v ? v : (s->kind == LLM_SETTING_ENUM ? s->options[0] : ""));
			}
		case LLM_SETTING_INT:
			{
				int64		v = llm_setting_get_int(c, s) / s->scale;
				const char *unit = s->unit == LLM_SETTING_UNIT_MB ? "MB" : s->unit == LLM_SETTING_UNIT_MS ? "ms" : "";

				return psprintf(INT64_FORMAT "%s", v, unit);
			}
		case LLM_SETTING_BOOL:
			return pstrdup(*(const bool *) f ? "on" : "off");
	}
	return NULL;
}

/* ---------- a role's stored settings ---------- */

/*
 * The value entry (database, role) of pg_db_role_setting gives setting name
 * (a later item of one entry replaces an earlier one, as when a session
 * applies them) into *out (palloc'd); false if it does not name it.
 */
static bool
stored_setting(Relation rel, Oid database, Oid role, const char *name, char **out)
{
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(database));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(role));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, NULL, 2, keys);
	while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		config = heap_getattr(tup, Anum_pg_db_role_setting_setconfig, RelationGetDescr(rel), &isnull);
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (isnull)
			continue;
		deconstruct_array(DatumGetArrayTypeP(config), TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		for (int i = 0; i < n; i++)
		{
			char	   *item;
			char	   *eq;

			if (nulls[i])
				continue;
			item = TextDatumGetCString(elems[i]);
			eq = strchr(item, '=');
			if (eq != NULL && eq - item == (int) strlen(name) && pg_strncasecmp(item, name, eq - item) == 0)
			{
				*out = pstrdup(eq + 1);
				found = true;
			}
			pfree(item);
		}
	}
	systable_endscan(scan);
	return found;
}

char *
llm_role_setting(Oid role, const char *name)
{
	/* the order in which a new session applies them: the first found wins */
	const Oid	entries[4][2] = {
		{MyDatabaseId, role}, {InvalidOid, role}, {MyDatabaseId, InvalidOid}, {InvalidOid, InvalidOid}
	};
	Relation	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	char	   *value = NULL;

	for (int i = 0; i < lengthof(entries); i++)
		if (stored_setting(rel, entries[i][0], entries[i][1], name, &value))
			break;
	table_close(rel, AccessShareLock);
	return value;
}
