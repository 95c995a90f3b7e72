/*
 * sql_args.h — the optional arguments of the generation functions, read by
 * name through one table, and the call (an llm_request plus the call's own
 * options) they describe.
 *
 * A generation function takes its prompt first and optional arguments after
 * it; every optional argument is a row of the argument table (sql_args.c):
 * name, SQL type, default (the DEFAULT of its SQL declaration, as the
 * type's input text), and how a value applies to the call.  A function's
 * arguments are matched to rows by the names in pg_proc.proargnames, once
 * per call site (the map is cached in fn_extra, or kept by the LLM Batch
 * node), never by position.  So a call that passes fewer arguments than the
 * function now has (a plan built before the function was widened by an
 * extension update, see llm_widen_function) reads the ones it passes, and
 * the missing ones, like NULL ones, take the table's default; and a
 * function that lacks a row's argument (an older catalog under a newer
 * library) takes that row's default.
 *
 * The generation functions themselves are rows of a second table, by C
 * symbol: the type of their prompt argument and, for those the LLM Batch
 * node may evaluate, the value of a finished call (batch_scan.c finds its
 * batchable calls through it).
 *
 * Checks: values are checked by request.h's two checks, each once per
 * call, before anything is sent: the options by
 * llm_request_validate_options() when the call's arguments are read (an
 * invalid option is ERROR 22023 with its message, whatever on_error says),
 * the prompt by llm_request_validate_prompt() when it is set.  Only what is
 * SQL's own is checked here: array dimensions, on_error's values, the
 * function's argument names and types.  A prompt refused before sending
 * (empty) is a failed result, which on_error => 'null' turns into NULL.
 */
#ifndef LLM_SQL_ARGS_H
#define LLM_SQL_ARGS_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/jsonb.h"

#include "channel/client.h"
#include "engine/request.h"

/*
 * Define the session settings every request carries, llm.prefix_cache_isolation
 * and llm.debug_poison_logits, and those of its class, llm.priority and
 * llm.max_priority (from _PG_init).
 *
 * Class of a call (request.h's llm_priority; the scheduler serves
 * interactive before batch): a priority => argument names it; else a
 * single call gets the session's class, llm.priority, and a call from a
 * batch site (the LLM Batch node, llm_generate(text[]), jobs:
 * llm_call_set_batch) batch.  llm.max_priority (superuser-set, e.g. per
 * role with ALTER ROLE) is the highest class the session's calls may have:
 * llm.priority above it counts as it, and SET llm.priority above it is
 * refused, as a priority => argument above it is (ERROR 42501).  Lowering
 * is always allowed.
 *
 * The token limit, llm.max_tokens_per_minute, is applied when a request
 * is sent, not when its options are read (quota.h).
 */
extern void llm_sql_args_define_gucs(void);

/* One call of a generation function: its request and its own options. */
typedef struct LlmCall
{
	llm_request req;			/* options applied; the prompt set by the function */
	bool		raw;			/* raw => true: the prompt is tokenized as is */
	bool		on_error_null;	/* on_error => 'null' */

	/*
	 * Grammar options as given (UTF-8; NULL / 0 when absent); llm_call_read
	 * compiles the one given (sql_grammar.h) into req.grammar.
	 */
	const char **choices;		/* choices text[]: n_choices elements, NULL ones kept */
	int			n_choices;
	const char *regex;			/* regex text */
	const char *json_schema;	/* json_schema jsonb: its JSON text */
	int64		grammar_max_bytes;	/* the grammar's longest output in bytes; -1 none or unbounded */
	bool		max_tokens_default; /* max_tokens absent or NULL: the table's default applied */

	/* Inputs of the AI functions (sql_ai.h), UTF-8; NULL when absent or NULL */
	const char **labels;		/* labels text[]: n_labels elements, NULL ones kept */
	int			n_labels;
	const char *instruction;
	const char *question;
	const char **candidates;	/* llm_join's candidates text[]: n_candidates elements, NULL ones kept */
	int			n_candidates;

	/*
	 * A model cascade (llm_filter, llm_classify; docs/CASCADES.md): the
	 * small model's alias, NULL when cascade => is absent or NULL; the
	 * targets, delta and seed as given, negative (seed: has_cascade_seed
	 * false) when absent or NULL, so that the LLM Batch node takes the
	 * llm.cascade_* settings for them.  A call evaluated alone (row by
	 * row, an EvalPlanQual recheck) reads and checks them and answers with
	 * the large model, req.model.
	 */
	const char *cascade;
	double		precision_target;
	double		recall_target;
	double		accuracy_target;
	double		cascade_delta;
	bool		has_cascade_seed;
	int64		cascade_seed;
	bool		explicit_priority;	/* req.priority came from a priority => argument */

	/*
	 * Read from stored options (llm_call_read_stored): the check that
	 * belongs to the caller, its class ceiling, was made by the call that
	 * stored them and is not made again.
	 */
	bool		stored;

	/*
	 * What the call's value needs besides its result (llm_join: the
	 * positions of the candidates sent): flat bytes without pointers, set
	 * by the build in its memory context, NULL / 0 when none.  Whoever
	 * keeps a call's result beyond the build's memory keeps a copy of them
	 * too (the LLM Batch node, per row: a row sharing another row's
	 * request has its own).
	 */
	const void *value_arg;
	Size		value_arg_len;
} LlmCall;

/*
 * The value of a finished call of a batchable function (sql_result.h):
 * value_arg is the call's (LlmCall.value_arg), NULL for functions that
 * need none.
 */
typedef Datum (*LlmCallValueFn) (const LlmResult *res, const void *value_arg, bool on_error_null,
								 bool *isnull);

/* A call of a batchable function from its argument values: llm_call_build_text's contract. */
struct LlmArgMap;
typedef bool (*LlmCallBuildFn) (const struct LlmArgMap *map, const NullableDatum *args, int nargs,
								LlmCall *call, LlmResult **refused);

typedef struct LlmSqlFunction
{
	const char *symbol;			/* C symbol, pg_proc.prosrc */
	Oid			prompt_type;	/* type of the first argument */
	Oid			result_type;	/* pg_proc.prorettype */
	LlmCallValueFn batch_value; /* non-NULL: batchable, and its calls' value */
	/*
	 * Batchable functions: how the LLM Batch node builds a call from its
	 * argument values, exactly as the function does; NULL means
	 * llm_call_build_text (a text prompt first, then the argument table's
	 * options).
	 */
	LlmCallBuildFn batch_build;
	/*
	 * Arguments whose names are no rows of the tables are the function's
	 * own, read by it (llm_enrich's target, prompt, where_clause, mode,
	 * max_attempts) rather than an error; its options still map by name.
	 */
	bool		own_arguments;
} LlmSqlFunction;

/* A function's arguments matched to the table's rows (opaque). */
typedef struct LlmArgMap LlmArgMap;

/* The map of the function fcinfo calls; built at the call site's first call, kept in fn_extra. */
extern const LlmArgMap *llm_arg_map(FunctionCallInfo fcinfo);

/*
 * The map of generation function funcid, allocated in cxt.  ERROR if funcid
 * is not a generation function of this library or has an argument the table
 * does not know (name or type).
 */
extern const LlmArgMap *llm_arg_map_for(Oid funcid, MemoryContext cxt);

/*
 * The input position (0-based, among the function's arguments) of the
 * argument named name, an option or an AI function's input, in map's
 * function; -1 if the function has none by that name.
 */
extern int	llm_arg_map_position(const LlmArgMap *map, const char *name);

/* The generation function a map is for. */
extern const LlmSqlFunction *llm_arg_map_function(const LlmArgMap *map);

/*
 * The batchable generation function funcid is, by its pg_proc row (a C
 * function with a batchable symbol, the row's prompt and result types, not
 * set-returning), with its argument count in *nargs; NULL if it is not one.
 */
extern const LlmSqlFunction *llm_batchable_function(Oid funcid, int *nargs);

/*
 * Read a call's optional arguments (args[0..nargs); args[0] is the prompt,
 * left to the caller), take the session's request settings (prefix-cache
 * salt, poison hook) and check the options: ERROR 22023 naming the bad one.
 */
extern void llm_call_read(const LlmArgMap *map, const NullableDatum *args, int nargs, LlmCall *call);

/*
 * The call comes from a batch site: unless a priority => argument chose its
 * class, it is batch.
 */
extern void llm_call_set_batch(LlmCall *call);

/* Lower the call's class to ceiling if it is above it (lowering is always allowed). */
extern void llm_call_cap_priority(LlmCall *call, llm_priority ceiling);

/*
 * The class ceiling a new session of role in this database would have:
 * llm.max_priority as pg_db_role_setting sets it, in the order a session
 * applies the entries (ALTER ROLE role IN DATABASE, ALTER ROLE role, ALTER
 * DATABASE or ALTER ROLE ALL IN DATABASE, ALTER ROLE ALL; the first that
 * names it wins), else this process's value (the configuration file's).
 * For code that acts for a role without a session of it: the job runner
 * applies its job owner's current ceiling to each request it submits.
 * Needs a transaction.
 */
extern llm_priority llm_role_max_priority(Oid role);


/*
 * Make prompt the call's prompt (user message through the chat template,
 * or with raw => true as is).  Returns NULL, or the failed result of a
 * prompt refused before sending (empty: 22023 "prompt must not be empty").
 */
extern LlmResult *llm_call_set_prompt(LlmCall *call, text *prompt);
/* The same for a UTF-8 prompt (a template's, ai_prompts.h), which the call keeps pointing at. */
extern LlmResult *llm_call_set_prompt_utf8(LlmCall *call, const char *prompt);

/*
 * Make msgs (n, the system argument already among them) the call's prompt
 * and check the request: ERROR 22023 for what the check refuses.
 */
extern void llm_call_set_messages(LlmCall *call, const llm_chat_message *msgs, int n);

/*
 * Make a messages jsonb argument (llm_chat, llm_chat_stream:
 * [{"role": "system"|"user"|"assistant", "content": "..."}, ...], the
 * system option put before them) the call's prompt: ERROR 22023 for a
 * shape or a request the check refuses.
 */
extern void llm_call_set_messages_jsonb(LlmCall *call, Jsonb *messages);
/* A messages array's count (its shape checked, 22023) and its messages, read into msgs. */
extern int	llm_jsonb_messages_count(Jsonb *messages);
extern int	llm_jsonb_messages(Jsonb *messages, llm_chat_message *msgs);

/*
 * The chat template arguments (the argument table's rows marked template:
 * tools, enable_thinking) of a function that renders a chat without
 * generating (llm_render_chat, llm_count_tokens), read by name with
 * the rows' own apply functions and checks (22023) into req; absent or NULL
 * ones leave req's fields as they are.  So a generation function, its
 * render and its count see one template input.
 */
extern void llm_read_template_args(FunctionCallInfo fcinfo, llm_request *req);

/*
 * The call of a batchable function from its argument values, as the
 * function builds it and the LLM Batch node does for each row: its
 * function-table row's build function (sql_ai.h), or for llm_generate(text,
 * ...) the text prompt with its options.  False for a NULL first argument
 * (the value is NULL; options are then not read); else the call, with
 * *refused set to a failed result for a prompt refused before sending, or
 * to a result answered without a request of the call's own (llm_join: no
 * candidate to send, or more candidates than one request holds, sent and
 * waited for by the build), else NULL: the request is to be sent.  Invalid
 * options raise ERROR.
 */
extern bool llm_call_build_text(const LlmArgMap *map, const NullableDatum *args, int nargs,
								LlmCall *call, LlmResult **refused);

/*
 * Position of fcinfo's function's input argument name (one of the
 * function's own arguments, not an option), -1 if the function has none by
 * that name (a declaration from before the argument was added) or the call
 * passes fewer arguments.
 */
extern int	llm_arg_position(FunctionCallInfo fcinfo, const char *name);

/*
 * The notify => argument of llm_submit and llm_enrich: NULL when absent
 * or NULL, else the channel name, checked as pg_notify checks it (ERROR
 * 22023 for an empty name or one of NAMEDATALEN bytes or more).
 */
extern char *llm_notify_channel_arg(FunctionCallInfo fcinfo);

/* ---------- a call's options as one jsonb object (sql_options.c) ---------- */

/*
 * Read options by name from a jsonb object into call (llm_agg's options
 * argument): every key must be a generation option of the argument table
 * (its value a JSON scalar read as the option's input text, or for a text[]
 * option an array of strings), and keys in skip (NULL-terminated) are left
 * to the caller; missing options take their defaults; then the session's
 * request settings and the check, as llm_call_read.  opts may be NULL.
 */
extern void llm_call_read_jsonb(Jsonb *opts, const char *const *skip, LlmCall *call);

/*
 * Options kept for later (a job's, llm_enrich): the generation options a
 * call passes (args[0..nargs) matched by map, the same map llm_call_read
 * reads them with; NULL ones, which take their defaults, left out) as one
 * jsonb object {name: value}, in the encoding llm_call_read_jsonb reads:
 * int and bigint as JSON numbers, float8 as a number (NaN and infinities
 * as strings), boolean as true / false, text as a string, text[] as an
 * array of strings and nulls, jsonb as itself.  An option appended to the
 * table and to the function's declaration is kept with no change here.
 */
extern Jsonb *llm_call_options_encode(const LlmArgMap *map, const NullableDatum *args, int nargs);

/*
 * The call such an object describes, read and checked as llm_call_read
 * reads and checks a call's arguments (the same apply functions and
 * checks: ERROR 22023 naming an unknown or invalid option, 54000 for a
 * grammar over a limit), except the caller's own checks, made when the
 * options were stored (LlmCall.stored): the class ceiling.
 */
extern void llm_call_read_stored(Jsonb *options, LlmCall *call);

/*
 * The model alias such an object names (its model option, palloc'd), NULL
 * for the default model; unchecked (llm_call_read_stored checks it).
 */
extern char *llm_call_options_model(Jsonb *options);

#endif
