/*
 * sql_args_internal.h — the argument table's rows and the one read of a
 * call's options, shared by the two files of the options' code:
 * sql_args.c (the tables, the per-call-site maps, a call's arguments) and
 * sql_options.c (a call's options as a jsonb object, read and written).
 * Other files use sql_args.h.
 */
#ifndef LLM_SQL_ARGS_INTERNAL_H
#define LLM_SQL_ARGS_INTERNAL_H

#include "sql_args.h"

/* One row of the argument table (a generation option) or of the AI functions' inputs. */
typedef struct LlmArgDesc LlmArgDesc;

struct LlmArgDesc
{
	const char *name;			/* as in the functions' SQL declarations */
	Oid			type;
	const char *default_value;	/* the SQL DEFAULT, as input text of type; NULL: DEFAULT NULL */
	/* a non-NULL value (or the default) applied to the call */
	void		(*apply) (const LlmArgDesc *arg, LlmCall *call, Datum value);
	size_t		param;			/* apply_param: offsetof(llm_sampling_params, the field) */
	/*
	 * A chat template argument: what it sets reaches the template only
	 * (request.h: tools, thinking), so the functions that render without
	 * generating read it too (llm_read_template_args).
	 */
	bool		template_arg;
};

/*
 * The rows: the generation options first (0 .. llm_arg_n_options() - 1, in
 * the order of their SQL declarations), then the AI functions' inputs.
 */
extern int	llm_arg_n_options(void);
extern const LlmArgDesc *llm_arg_row(int r);

/* The row named name (an option or an input), -1 if none. */
extern int	llm_arg_row_by_name(const char *name);

/* Row r's input position in map's function, -1 if the function lacks it. */
extern int	llm_arg_map_pos(const LlmArgMap *map, int r);

/*
 * The one read of a call's options: vals[r] (n rows, NULL for absent)
 * applied in the table's order, absent ones taking the table's default, then
 * the session's request settings and the checks.  A stored call (a job's
 * options) skips the caller's own check, the class ceiling: the call
 * that stored the options made them as its caller.
 */
extern void llm_call_read_values(const NullableDatum *vals, int n, bool stored, LlmCall *call);

#endif
