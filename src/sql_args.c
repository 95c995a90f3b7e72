/*
 * sql_args.c — the argument table and the function table of the generation
 * functions, the per-call-site maps between them and pg_proc, and the
 * reading and checking of one call's arguments (sql_args.h).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "sql_args.h"
#include "sql_result.h"
#include "sqlstate.h"
#include "utf8_text.h"

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

/* ---------- the argument table ---------- */

typedef struct LlmArgDesc LlmArgDesc;

struct LlmArgDesc
{
	const char *name;			/* as in the functions' SQL declarations */
	Oid			type;
	const char *default_value;	/* the SQL DEFAULT, as input text of type; NULL: DEFAULT NULL */
	/* a non-NULL value (or the default) applied to the call */
	void		(*apply) (const LlmArgDesc *arg, LlmCall *call, Datum value);
	size_t		param;			/* apply_param: offsetof(llm_sampling_params, the field) */
};

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

static void
apply_raw(const LlmArgDesc *arg, LlmCall *c, Datum v)
{
	c->raw = DatumGetBool(v);
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
};

#define N_ARGS lengthof(arg_table)

/* ---------- the function table ---------- */

static const LlmSqlFunction function_table[] = {
	{"pg_llm_generate", TEXTOID, TEXTOID, llm_text_value},
	{"pg_llm_generate_array", TEXTARRAYOID, TEXTARRAYOID, NULL},
	{"pg_llm_complete", TEXTOID, RECORDOID, NULL},
	{"pg_llm_chat", JSONBOID, TEXTOID, NULL},
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
	int			pos[N_ARGS];	/* per row: its input position in the function, -1 if absent */
};

/* The rows' defaults as values, parsed once per backend (TopMemoryContext). */
static NullableDatum defaults[N_ARGS];
static bool defaults_parsed = false;

static void
parse_defaults(void)
{
	MemoryContext old;

	if (defaults_parsed)
		return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	for (int r = 0; r < N_ARGS; r++)
	{
		Oid			input;
		Oid			ioparam;

		defaults[r].isnull = arg_table[r].default_value == NULL;
		defaults[r].value = (Datum) 0;
		if (defaults[r].isnull)
			continue;
		getTypeInputInfo(arg_table[r].type, &input, &ioparam);
		defaults[r].value = OidInputFunctionCall(input, (char *) arg_table[r].default_value, ioparam, -1);
	}
	MemoryContextSwitchTo(old);
	defaults_parsed = true;
}

static int
row_by_name(const char *name)
{
	if (name == NULL)
		return -1;
	for (int r = 0; r < N_ARGS; r++)
		if (strcmp(arg_table[r].name, name) == 0)
			return r;
	return -1;
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
	for (int r = 0; r < N_ARGS; r++)
		map->pos[r] = -1;
	for (int i = 1; i < proc->pronargs; i++)
	{
		const char *name = i < n_names ? names[i] : NULL;
		int			r = row_by_name(name);

		if (r < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
					 errmsg("argument %d (%s) of function %s is not a pg_llm option",
							i + 1, name ? name : "unnamed", format_procedure(funcid)),
					 errhint("The functions' SQL declarations and the library do not match: update the extension.")));
		if (arg_table[r].type != proc->proargtypes.values[i])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
					 errmsg("argument %s of function %s must be of type %s",
							name, format_procedure(funcid), format_type_be(arg_table[r].type))));
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
 * The options' check: llm_request_validate over the call with a stand-in
 * prompt, because the prompt is not an option (a refused prompt is a
 * per-call failure that on_error may turn into NULL; a bad option is an
 * ERROR whatever on_error says).
 */
static void
check_options(const LlmCall *call)
{
	llm_request probe = call->req;
	char		err[256];
	llm_status	st;

	probe.prompt_kind = call->raw ? LLM_PROMPT_RAW : LLM_PROMPT_TEXT;
	probe.prompt = "?";
	probe.prompt_len = 1;
	probe.messages = NULL;
	probe.n_messages = 0;
	st = llm_request_validate(&probe, err, sizeof(err));
	if (st != LLM_OK)
		ereport(ERROR, (errcode(llm_status_sqlstate(st)), errmsg("%s", err)));
}

void
llm_call_read(const LlmArgMap *map, const NullableDatum *args, int nargs, LlmCall *call)
{
	memset(call, 0, sizeof(*call));
	llm_request_init(&call->req);
	for (int r = 0; r < N_ARGS; r++)
	{
		int			pos = map->pos[r];

		if (pos >= 0 && pos < nargs && !args[pos].isnull)
			arg_table[r].apply(&arg_table[r], call, args[pos].value);
		else if (!defaults[r].isnull)
			arg_table[r].apply(&arg_table[r], call, defaults[r].value);
	}
	call->req.params.cache_salt = prefix_cache_salt();
	call->req.params.debug_poison_logits = debug_poison_logits;
	check_options(call);
}

LlmResult *
llm_call_set_prompt(LlmCall *call, text *prompt)
{
	char		err[256];
	llm_status	st;

	call->req.prompt_kind = call->raw ? LLM_PROMPT_RAW : LLM_PROMPT_TEXT;
	call->req.prompt = llm_text_to_utf8(prompt);
	call->req.prompt_len = strlen(call->req.prompt);
	st = llm_request_validate(&call->req, err, sizeof(err));
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
	st = llm_request_validate(&call->req, err, sizeof(err));
	if (st != LLM_OK)
		ereport(ERROR, (errcode(llm_status_sqlstate(st)), errmsg("%s", err)));
}

bool
llm_call_build_text(const LlmArgMap *map, const NullableDatum *args, int nargs,
					LlmCall *call, LlmResult **refused)
{
	*refused = NULL;
	if (nargs < 1 || args[0].isnull)
		return false;
	llm_call_read(map, args, nargs, call);
	*refused = llm_call_set_prompt(call, DatumGetTextPP(args[0].value));
	return true;
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

	DefineCustomIntVariable("llm.debug_poison_logits",
							"Developer option: make the logits of the next N rows non-finite after this session's next generation request.",
							"Exercises the non-finite-logits error path in tests; superuser only.",
							&debug_poison_logits,
							0, 0, 1000,
							PGC_SUSET, GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
}
