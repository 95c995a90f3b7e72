/*
 * sql_args.c — the argument table and the function table of the generation
 * functions, the per-call-site maps between them and pg_proc, and the
 * reading and checking of one call's arguments (sql_args.h).  Besides the
 * options, the map knows the AI functions' own inputs (labels, instruction,
 * question: a second table, not listed by llm_generation_arguments()).
 * The same read fed by a jsonb object, and the options encoded as one, are
 * sql_options.c's; the AI functions' builds are sql_ai.c's.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "common/model_list.h"
#include "sql_ai.h"
#include "sql_embed.h"
#include "sql_args_internal.h"
#include "sql_grammar.h"
#include "sql_result.h"
#include "common/settings.h"
#include "common/sqlstate.h"
#include "common/stats.h"
#include "common/utf8_text.h"

PG_FUNCTION_INFO_V1(pg_llm_generation_arguments);

/* llm.prefix_cache_isolation: whose requests may share cached KV blocks */
typedef enum LlmPrefixIsolation
{
	LLM_PREFIX_ISOLATION_NONE = 0,	/* every request */
	LLM_PREFIX_ISOLATION_ROLE,	/* requests of the same current role */
	LLM_PREFIX_ISOLATION_DATABASE	/* requests in the same database */
} LlmPrefixIsolation;

static int	prefix_cache_isolation = LLM_PREFIX_ISOLATION_ROLE;

/* llm.debug_poison_logits: test hook, poison this many logits rows after the next request */
static int	debug_poison_logits = 0;

/* llm.priority, llm.max_priority: llm_priority values (sql_args.h) */
static int	session_priority = LLM_PRIORITY_INTERACTIVE;
static int	max_priority = LLM_PRIORITY_INTERACTIVE;

/* ---------- the argument table ---------- */

static void
invalid_arg(const char *msg)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", msg)));
}

/* An option that is a field of llm_sampling_params: int4 -> int32_t, float8 -> double. */
static void
apply_param(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	char	   *field = (char *) &c->req.params + arg->param;

	switch (arg->type)
	{
		case INT4OID:
			*(int32_t *) field = DatumGetInt32(v);
			break;
		case FLOAT8OID:
			*(double *) field = DatumGetFloat8(v);
			break;
		default:
			elog(ERROR, "llm: no field of type %u for argument %s", arg->type, arg->name);
	}
}

#define PARAM(f) .apply = apply_param, .param = offsetof(llm_sampling_params, f)

static void
apply_seed(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->req.params.has_seed = true;
	c->req.params.seed = (uint64) DatumGetInt64(v);
}

/* stop text[]: UTF-8 copies; a NULL element stays NULL for the check to name */
static void
apply_stop(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	ArrayType  *arr = DatumGetArrayTypeP(v);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	const char **stop;

	if (ARR_NDIM(arr) > 1)
		invalid_arg("stop must be a one-dimensional array");
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	stop = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		stop[i] = nulls[i] ? NULL : llm_text_to_utf8(DatumGetTextPP(elems[i]));
	c->req.params.stop = stop;
	c->req.params.n_stop = n;
}

static void
apply_system(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->req.system = llm_text_to_utf8(DatumGetTextPP(v));
	c->req.system_len = strlen(c->req.system);
}

/* tools => a JSON array of tool schemas, passed to the chat template (as llm_render_chat's) */
static void
apply_tools(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	Jsonb	   *tools = DatumGetJsonbP(v);
	char	   *s;

	if (!JB_ROOT_IS_ARRAY(tools) || JB_ROOT_IS_SCALAR(tools))
		invalid_arg("tools must be a JSON array of tool schemas");
	s = JsonbToCString(NULL, &tools->root, VARSIZE(tools));
	c->req.tools = pg_server_to_any(s, strlen(s), PG_UTF8);
	c->req.tools_len = strlen(c->req.tools);
}

static void
apply_enable_thinking(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->req.thinking = DatumGetBool(v) ? 1 : -1;
}

static void
apply_strip_thinking(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->req.strip_thinking = DatumGetBool(v);
}

static void
apply_raw(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->raw = DatumGetBool(v);
}

/* Refuse a class above llm.max_priority (a lower llm_priority value is a higher class). */
static void
check_ceiling(llm_priority p)
{
	if ((int) p < max_priority)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("priority '%s' is above llm.max_priority = '%s'",
						llm_priority_name(p), llm_priority_name((llm_priority) max_priority)),
				 errhint("A superuser can raise llm.max_priority for the role (ALTER ROLE ... SET llm.max_priority).")));
}

static void
apply_priority(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	char	   *name = text_to_cstring(DatumGetTextPP(v));
	llm_priority p;

	if (!llm_priority_from_name(name, &p))
		invalid_arg("priority must be 'interactive' or 'batch'");
	if (!c->stored)
		check_ceiling(p);
	c->req.priority = p;
	c->explicit_priority = true;
}

/* model text: the alias of the model that serves the call, checked against llm.models */
static void
apply_model(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	char	   *alias = text_to_cstring(DatumGetTextPP(v));

	llm_model_alias_check(alias);
	c->req.model = alias;
}

static void
apply_on_error(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	char	   *mode = text_to_cstring(DatumGetTextPP(v));

	if (strcmp(mode, "null") == 0)
		c->on_error_null = true;
	else if (strcmp(mode, "raise") == 0)
		c->on_error_null = false;
	else
		invalid_arg("on_error must be 'raise' or 'null'");
}

/* A text[] as UTF-8 copies (NULL elements kept as NULL, for the checks to name); ERROR if not 1-D. */
static const char **
utf8_array(Datum v, const char *argname, int *n)
{
	ArrayType  *arr = DatumGetArrayTypeP(v);
	Datum	   *elems;
	bool	   *nulls;
	const char **out;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = nulls[i] ? NULL : llm_text_to_utf8(DatumGetTextPP(elems[i]));
	return out;
}

static void
apply_choices(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->choices = utf8_array(v, arg->name, &c->n_choices);
}

static void
apply_regex(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->regex = llm_text_to_utf8(DatumGetTextPP(v));
}

static void
apply_json_schema(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	Jsonb	   *jb = DatumGetJsonbP(v);
	char	   *json = JsonbToCString(NULL, &jb->root, VARSIZE(jb));

	c->json_schema = llm_text_to_utf8(cstring_to_text(json));
}

static void
apply_labels(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->labels = utf8_array(v, arg->name, &c->n_labels);
}

static void
apply_instruction(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->instruction = llm_text_to_utf8(DatumGetTextPP(v));
}

static void
apply_question(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->question = llm_text_to_utf8(DatumGetTextPP(v));
}

static void
apply_candidates(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->candidates = utf8_array(v, arg->name, &c->n_candidates);
}

/*
 * cascade text: the small model of a cascade, an llm.models alias (22023
 * listing the known ones), which must not be the call's own model.
 */
static void
apply_cascade(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	char	   *alias = text_to_cstring(DatumGetTextPP(v));
	const char *large = c->req.model != NULL ? c->req.model : "default";

	llm_model_alias_check(alias);
	if (strcmp(alias, large) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cascade must name another model than model (both are \"%s\")", alias)));
	c->cascade = alias;
}

/* precision_target, recall_target, accuracy_target: a share of rows, in (0, 1] */
static void
apply_cascade_target(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	double		t = DatumGetFloat8(v);

	if (!(t > 0.0 && t <= 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be in (0, 1], not %g", arg->name, t)));
	*(double *) ((char *) c + arg->param) = t;
}

static void
apply_cascade_delta(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	double		d = DatumGetFloat8(v);

	if (!(d > 0.0 && d < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cascade_delta must be in (0, 1), not %g", d)));
	c->cascade_delta = d;
}

static void
apply_cascade_seed(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->has_cascade_seed = true;
	c->cascade_seed = DatumGetInt64(v);
}

/* llm_embed's truncate: an input over the model's limit is cut to it (request.h) */
static void
apply_truncate(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->req.truncate = DatumGetBool(v);
}

/*
 * Every optional argument of every generation function, in the order of
 * their SQL declarations (also the order values are applied and checked).
 * A new argument: one row here, one line in each function's declaration
 * (appended at the end, README "Argument and upgrade policy").
 */
static const LlmArgDesc arg_table[] = {
	{"max_tokens", INT4OID, "256", PARAM(max_tokens)},
	{"temperature", FLOAT8OID, "0", PARAM(temperature)},
	{"top_p", FLOAT8OID, "1", PARAM(top_p)},
	{"top_k", INT4OID, "0", PARAM(top_k)},
	{"min_p", FLOAT8OID, "0", PARAM(min_p)},
	{"repetition_penalty", FLOAT8OID, "1", PARAM(repetition_penalty)},
	{"seed", INT8OID, NULL, apply_seed},
	{"stop", TEXTARRAYOID, NULL, apply_stop},
	{"system", TEXTOID, NULL, apply_system},
	{"raw", BOOLOID, "false", apply_raw},
	{"on_error", TEXTOID, "raise", apply_on_error},
	{"choices", TEXTARRAYOID, NULL, apply_choices},
	{"regex", TEXTOID, NULL, apply_regex},
	{"json_schema", JSONBOID, NULL, apply_json_schema},
	{"priority", TEXTOID, NULL, apply_priority},
	{"model", TEXTOID, NULL, apply_model},
	{"tools", JSONBOID, NULL, apply_tools, .template_arg = true},
	{"enable_thinking", BOOLOID, NULL, apply_enable_thinking, .template_arg = true},
	{"strip_thinking", BOOLOID, "true", apply_strip_thinking},
};

#define N_ARGS lengthof(arg_table)
/* max_tokens' row: llm_extract's default follows the schema's bound */
#define ARG_MAX_TOKENS 0

/*
 * The AI functions' own inputs after their first argument (sql_ai.h), read
 * by name like the options but not generation options.  json_schema, the
 * second argument of llm_extract, is the option's row.
 */
static const LlmArgDesc input_table[] = {
	{"labels", TEXTARRAYOID, NULL, apply_labels},
	{"instruction", TEXTOID, NULL, apply_instruction},
	{"question", TEXTOID, NULL, apply_question},
	{"truncate", BOOLOID, "false", apply_truncate},
	{"candidates", TEXTARRAYOID, NULL, apply_candidates},
	{"cascade", TEXTOID, NULL, apply_cascade},
	{"precision_target", FLOAT8OID, NULL, apply_cascade_target, .param = offsetof(LlmCall, precision_target)},
	{"recall_target", FLOAT8OID, NULL, apply_cascade_target, .param = offsetof(LlmCall, recall_target)},
	{"accuracy_target", FLOAT8OID, NULL, apply_cascade_target, .param = offsetof(LlmCall, accuracy_target)},
	{"cascade_delta", FLOAT8OID, NULL, apply_cascade_delta},
	{"cascade_seed", INT8OID, NULL, apply_cascade_seed},
};

#define N_ROWS (N_ARGS + lengthof(input_table))

/* Row r of both tables: the options, then the inputs. */
static const LlmArgDesc *
row_desc(int r)
{
	return r < N_ARGS ? &arg_table[r] : &input_table[r - N_ARGS];
}

int
llm_arg_n_options(void)
{
	return N_ARGS;
}

const LlmArgDesc *
llm_arg_row(int r)
{
	return row_desc(r);
}

/* ---------- the function table ---------- */

static const LlmSqlFunction function_table[] = {
	{"pg_llm_generate", TEXTOID, TEXTOID, llm_text_value},
	{"pg_llm_generate_array", TEXTARRAYOID, TEXTARRAYOID, NULL},
	{"pg_llm_complete", TEXTOID, RECORDOID, NULL},
	{"pg_llm_chat", JSONBOID, TEXTOID, NULL},
	{"pg_llm_extract", TEXTOID, JSONBOID, llm_jsonb_value, llm_call_build_extract},
	{"pg_llm_classify", TEXTOID, TEXTOID, llm_label_value, llm_call_build_classify},
	{"pg_llm_classify_scores", TEXTOID, JSONBOID, llm_label_scores_value, llm_call_build_classify},
	{"pg_llm_filter", TEXTOID, BOOLOID, llm_yes_no_value, llm_call_build_filter},
	{"pg_llm_submit", TEXTOID, INT8OID, NULL, NULL, true},
	{"pg_llm_enrich", REGCLASSOID, INT8OID, NULL, NULL, true},
	{"pg_llm_generate_stream", TEXTOID, RECORDOID, NULL},
	{"pg_llm_chat_stream", JSONBOID, RECORDOID, NULL},
	{"pg_llm_embed", TEXTOID, FLOAT4ARRAYOID, llm_vector_value, llm_call_build_embed},
	{"pg_llm_embed_array", TEXTARRAYOID, FLOAT4ARRAYOID, NULL},
	{"pg_llm_similarity", TEXTOID, FLOAT8OID, NULL, NULL, true},
	{"pg_llm_rerank", TEXTOID, RECORDOID, NULL, NULL, true},
	{"pg_llm_join", TEXTOID, INT4ARRAYOID, llm_join_value, llm_call_build_join},
};

static const LlmSqlFunction *
function_by_symbol(HeapTuple proctup)
{
	bool		isnull;
	Datum		src = SysCacheGetAttr(PROCOID, proctup, Anum_pg_proc_prosrc, &isnull);
	char	   *symbol;

	if (isnull)
		return NULL;
	symbol = TextDatumGetCString(src);
	for (int i = 0; i < lengthof(function_table); i++)
		if (strcmp(function_table[i].symbol, symbol) == 0)
			return &function_table[i];
	return NULL;
}

/* ---------- maps ---------- */

struct LlmArgMap
{
	const LlmSqlFunction *fn;
	int			pos[N_ROWS];	/* per row: its input position in the function, -1 if absent */
};

/* The rows' defaults as values, parsed once per backend (TopMemoryContext). */
static NullableDatum defaults[N_ROWS];
static bool defaults_parsed = false;

static void
parse_defaults(void)
{
	MemoryContext old;

	if (defaults_parsed)
		return;
	Assert(strcmp(arg_table[ARG_MAX_TOKENS].name, "max_tokens") == 0);
	old = MemoryContextSwitchTo(TopMemoryContext);
	for (int r = 0; r < N_ROWS; r++)
	{
		const LlmArgDesc *d = row_desc(r);
		Oid			input;
		Oid			ioparam;

		defaults[r].isnull = d->default_value == NULL;
		defaults[r].value = (Datum) 0;
		if (defaults[r].isnull)
			continue;
		getTypeInputInfo(d->type, &input, &ioparam);
		defaults[r].value = OidInputFunctionCall(input, (char *) d->default_value, ioparam, -1);
	}
	MemoryContextSwitchTo(old);
	defaults_parsed = true;
}

static int
row_by_name(const char *name)
{
	if (name == NULL)
		return -1;
	for (int r = 0; r < N_ROWS; r++)
		if (strcmp(row_desc(r)->name, name) == 0)
			return r;
	return -1;
}

int
llm_arg_row_by_name(const char *name)
{
	return row_by_name(name);
}

static LlmArgMap *
build_map(Oid funcid, MemoryContext cxt)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	const LlmSqlFunction *fn;
	bool		isnull;
	Datum		names_d;
	Datum		modes_d;
	char	  **names = NULL;
	int			n_names;
	LlmArgMap  *map;

	parse_defaults();
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", funcid);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	fn = proc->prolang == ClanguageId ? function_by_symbol(tup) : NULL;
	if (fn == NULL || proc->pronargs < 1 || proc->proargtypes.values[0] != fn->prompt_type)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("function %s is not a pg_llm generation function", format_procedure(funcid))));

	names_d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargnames, &isnull);
	if (isnull)
		names_d = PointerGetDatum(NULL);
	modes_d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargmodes, &isnull);
	if (isnull)
		modes_d = PointerGetDatum(NULL);
	n_names = get_func_input_arg_names(names_d, modes_d, &names);

	map = MemoryContextAllocZero(cxt, sizeof(LlmArgMap));
	map->fn = fn;
	for (int r = 0; r < N_ROWS; r++)
		map->pos[r] = -1;
	for (int i = 1; i < proc->pronargs; i++)
	{
		const char *name = i < n_names ? names[i] : NULL;
		int			r = row_by_name(name);

		/* llm_enrich's target, prompt, where_clause, ...: the function reads them itself */
		if (r < 0 && fn->own_arguments)
			continue;
		if (r < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
					 errmsg("argument %d (%s) of function %s is not a pg_llm option",
							i + 1, name ? name : "unnamed", format_procedure(funcid)),
					 errhint("The functions' SQL declarations and the library do not match: update the extension.")));
		if (row_desc(r)->type != proc->proargtypes.values[i])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
					 errmsg("argument %s of function %s must be of type %s",
							name, format_procedure(funcid), format_type_be(row_desc(r)->type))));
		map->pos[r] = i;
	}
	ReleaseSysCache(tup);
	return map;
}

const LlmArgMap *
llm_arg_map(FunctionCallInfo fcinfo)
{
	FmgrInfo   *flinfo = fcinfo->flinfo;

	if (flinfo->fn_extra == NULL)
		flinfo->fn_extra = build_map(flinfo->fn_oid, flinfo->fn_mcxt);
	return flinfo->fn_extra;
}

const LlmArgMap *
llm_arg_map_for(Oid funcid, MemoryContext cxt)
{
	return build_map(funcid, cxt);
}

const LlmSqlFunction *
llm_arg_map_function(const LlmArgMap *map)
{
	return map->fn;
}

int
llm_arg_map_pos(const LlmArgMap *map, int r)
{
	return map->pos[r];
}

int
llm_arg_map_position(const LlmArgMap *map, const char *name)
{
	int			r = row_by_name(name);

	return r < 0 ? -1 : map->pos[r];
}

const LlmSqlFunction *
llm_batchable_function(Oid funcid, int *nargs)
{
	HeapTuple	tup;
	const LlmSqlFunction *match = NULL;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return NULL;
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);

		if (proc->prolang == ClanguageId && !proc->proretset && proc->pronargs >= 1)
		{
			const LlmSqlFunction *fn = function_by_symbol(tup);

			if (fn != NULL && fn->batch_value != NULL && proc->prorettype == fn->result_type &&
				proc->proargtypes.values[0] == fn->prompt_type)
			{
				match = fn;
				*nargs = proc->pronargs;
			}
		}
	}
	ReleaseSysCache(tup);
	return match;
}

/* ---------- one call ---------- */

/*
 * Prefix-cache isolation key of this session's requests, by
 * llm.prefix_cache_isolation: 0 (shared by all), or a tag and the current
 * role's or database's OID.  The engine mixes it with the model identity into
 * the first block's hash, so keys that differ never share a block.
 */
static uint64
prefix_cache_salt(void)
{
	switch (prefix_cache_isolation)
	{
		case LLM_PREFIX_ISOLATION_ROLE:
			return ((uint64) LLM_PREFIX_ISOLATION_ROLE << 32) | (uint64) GetUserId();
		case LLM_PREFIX_ISOLATION_DATABASE:
			return ((uint64) LLM_PREFIX_ISOLATION_DATABASE << 32) | (uint64) MyDatabaseId;
		default:
			return 0;
	}
}

/*
 * The options' check, once per call, before its prompt exists: a bad
 * option is an ERROR whatever on_error says (a refused prompt, checked when
 * it is set, is a per-call failure that on_error may turn into NULL).  The
 * prompt's kind follows raw => true already, for the system option's check.
 */
static void
check_options(LlmCall *call)
{
	char		err[256];
	llm_status	st;

	call->req.prompt_kind = call->raw ? LLM_PROMPT_RAW : LLM_PROMPT_TEXT;
	st = llm_request_validate_options(&call->req, err, sizeof(err));
	if (st != LLM_OK)
		ereport(ERROR, (errcode(llm_status_sqlstate(st)), errmsg("%s", err)));
}

/* The request settings of the session, the grammar compiled, the options checked. */
static void
finish_read(LlmCall *call)
{
	call->req.params.cache_salt = prefix_cache_salt();
	call->req.params.debug_poison_logits = debug_poison_logits;
	llm_call_set_grammar(call);
	check_options(call);
}

/*
 * A fresh call: the session's class (never above the ceiling; a priority
 * option overrides it when the arguments are read).  The role's token limit
 * is applied when a request is sent (quota.h).
 */
static void
start_read(LlmCall *call)
{
	memset(call, 0, sizeof(*call));
	llm_request_init(&call->req);
	call->precision_target = call->recall_target = call->accuracy_target = call->cascade_delta = -1.0;
	call->req.priority = (llm_priority) Max(session_priority, max_priority);
}

/*
 * The one read of a call's options: vals[r] (N_ARGS rows, NULL for absent)
 * applied in the table's order, absent ones taking the table's default, then
 * the session's request settings and the checks.  A stored call (a job's
 * options) skips the caller's own check, the class ceiling: the call
 * that stored the options made them as its caller.
 */
void
llm_call_read_values(const NullableDatum *vals, int n, bool stored, LlmCall *call)
{
	parse_defaults();
	if (stored)
	{
		memset(call, 0, sizeof(*call));
		llm_request_init(&call->req);
		call->precision_target = call->recall_target = call->accuracy_target = call->cascade_delta = -1.0;
		call->stored = true;
	}
	else
		start_read(call);
	call->grammar_max_bytes = -1;
	for (int r = 0; r < n; r++)
	{
		const LlmArgDesc *d = row_desc(r);

		if (!vals[r].isnull)
			d->apply(d, call, vals[r].value);
		else if (!defaults[r].isnull)
			d->apply(d, call, defaults[r].value);
		if (r == ARG_MAX_TOKENS)
			call->max_tokens_default = vals[r].isnull;
	}
	finish_read(call);
}

void
llm_call_read(const LlmArgMap *map, const NullableDatum *args, int nargs, LlmCall *call)
{
	NullableDatum vals[N_ROWS];

	for (int r = 0; r < N_ROWS; r++)
	{
		int			pos = map->pos[r];

		vals[r].isnull = !(pos >= 0 && pos < nargs && !args[pos].isnull);
		vals[r].value = vals[r].isnull ? (Datum) 0 : args[pos].value;
	}
	llm_call_read_values(vals, N_ROWS, false, call);
}

void
llm_call_set_batch(LlmCall *call)
{
	if (!call->explicit_priority)
		call->req.priority = LLM_PRIORITY_BATCH;
}

void
llm_call_cap_priority(LlmCall *call, llm_priority ceiling)
{
	/* a lower llm_priority value is a higher class */
	if (call->req.priority < ceiling)
		call->req.priority = ceiling;
}

LlmResult *
llm_call_set_prompt(LlmCall *call, text *prompt)
{
	return llm_call_set_prompt_utf8(call, llm_text_to_utf8(prompt));
}

LlmResult *
llm_call_set_prompt_utf8(LlmCall *call, const char *prompt)
{
	char		err[256];
	llm_status	st;

	call->req.prompt_kind = call->raw ? LLM_PROMPT_RAW : LLM_PROMPT_TEXT;
	call->req.prompt = prompt;
	call->req.prompt_len = strlen(call->req.prompt);
	st = llm_request_validate_prompt(&call->req, err, sizeof(err));
	if (st == LLM_OK)
		return NULL;
	return llm_local_failure(llm_status_sqlstate(st), err);
}

void
llm_call_set_messages(LlmCall *call, const llm_chat_message *msgs, int n)
{
	char		err[256];
	llm_status	st;

	call->req.prompt_kind = LLM_PROMPT_MESSAGES;
	call->req.messages = msgs;
	call->req.n_messages = n;
	call->req.system = NULL;
	call->req.system_len = 0;
	st = llm_request_validate_prompt(&call->req, err, sizeof(err));
	if (st != LLM_OK)
		ereport(ERROR, (errcode(llm_status_sqlstate(st)), errmsg("%s", err)));
}

bool
llm_call_build_text(const LlmArgMap *map, const NullableDatum *args, int nargs,
					LlmCall *call, LlmResult **refused)
{
	*refused = NULL;
	if (map->fn->batch_build != NULL)
		return map->fn->batch_build(map, args, nargs, call, refused);
	if (nargs < 1 || args[0].isnull)
		return false;
	llm_call_read(map, args, nargs, call);
	*refused = llm_call_set_prompt(call, DatumGetTextPP(args[0].value));
	return true;
}

void
llm_read_template_args(FunctionCallInfo fcinfo, llm_request *req)
{
	LlmCall		call;

	memset(&call, 0, sizeof(call));
	call.req = *req;
	for (int r = 0; r < N_ARGS; r++)
	{
		int			pos;

		if (!arg_table[r].template_arg)
			continue;
		pos = llm_arg_position(fcinfo, arg_table[r].name);
		if (pos >= 0 && !PG_ARGISNULL(pos))
			arg_table[r].apply(&arg_table[r], &call, PG_GETARG_DATUM(pos));
	}
	*req = call.req;
}

/* ---------- introspection ---------- */

/*
 * llm_generation_arguments() -> setof (name text, type regtype,
 * default_value text): the argument table, so a test can compare it with
 * the functions' SQL declarations.
 */
Datum
pg_llm_generation_arguments(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int r = 0; r < N_ARGS; r++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(arg_table[r].name);
		values[1] = ObjectIdGetDatum(arg_table[r].type);
		if (arg_table[r].default_value)
			values[2] = CStringGetTextDatum(arg_table[r].default_value);
		else
			nulls[2] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ---------- settings ---------- */

static const struct config_enum_entry priority_options[] = {
	{"interactive", LLM_PRIORITY_INTERACTIVE, false},
	{"batch", LLM_PRIORITY_BATCH, false},
	{NULL, 0, false}
};

/* SET llm.priority above llm.max_priority is refused; from the role's or the file's defaults it counts as the ceiling. */
static bool
check_session_priority(int *newval, void **extra, GucSource source)
{
	if (source == PGC_S_SESSION && *newval < max_priority)
	{
		GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
		GUC_check_errdetail("llm.max_priority is '%s'; a superuser can raise it for the role.",
							llm_priority_name((llm_priority) max_priority));
		return false;
	}
	return true;
}

llm_priority
llm_role_max_priority(Oid role)
{
	char	   *value = llm_role_setting(role, "llm.max_priority");
	int			ceiling = max_priority;

	if (value != NULL)
		for (const struct config_enum_entry *e = priority_options; e->name; e++)
			if (pg_strcasecmp(e->name, value) == 0)
				ceiling = e->val;
	return (llm_priority) ceiling;
}

static const struct config_enum_entry prefix_isolation_options[] = {
	{"none", LLM_PREFIX_ISOLATION_NONE, false},
	{"role", LLM_PREFIX_ISOLATION_ROLE, false},
	{"database", LLM_PREFIX_ISOLATION_DATABASE, false},
	{NULL, 0, false}
};

void
llm_sql_args_define_gucs(void)
{
	DefineCustomEnumVariable("llm.prefix_cache_isolation",
							 "Which requests may share cached prompt prefixes: none (all), role or database.",
							 "A shared prefix answers faster, so sharing lets one party detect by timing "
							 "that another sent the same prompt start; see docs/PREFIX_CACHING.md.",
							 &prefix_cache_isolation,
							 LLM_PREFIX_ISOLATION_ROLE,
							 prefix_isolation_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.priority",
							 "Scheduling class of this session's single calls: interactive or batch.",
							 "Batch sites (the LLM Batch node, llm_generate(text[])) are batch anyway; "
							 "a priority => argument overrides both.  Never above llm.max_priority.",
							 &session_priority,
							 LLM_PRIORITY_INTERACTIVE,
							 priority_options,
							 PGC_USERSET, 0,
							 check_session_priority, NULL, NULL);

	DefineCustomEnumVariable("llm.max_priority",
							 "Highest scheduling class this session's calls may have.",
							 "Set per role by a superuser (ALTER ROLE ... SET llm.max_priority = 'batch') "
							 "to keep a role's calls out of the interactive class.",
							 &max_priority,
							 LLM_PRIORITY_INTERACTIVE,
							 priority_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.debug_poison_logits",
							"Developer option: make the logits of the next N rows non-finite after this session's next generation request.",
							"Exercises the non-finite-logits error path in tests; superuser only.",
							&debug_poison_logits,
							0, 0, 1000,
							PGC_SUSET, GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
}
