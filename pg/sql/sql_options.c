/*
 * sql_options.c — a call's generation options as one jsonb object
 * {name: value}, both ways (sql_args.h): read by name into a call
 * (llm_agg's options argument, llm_call_read_jsonb; a job's stored options,
 * llm_call_read_stored) through the argument table and the one read of
 * sql_args.c, and encoded from a call's arguments for storing
 * (llm_call_options_encode), in the encoding the reader reads.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include <math.h>

#include "sql_args_internal.h"

/* ---------- read: jsonb -> the options of a call ---------- */

/* A jsonb option value as the value of row d; ERROR naming the key if it cannot be one. */
static Datum
jsonb_option_value(const LlmArgDesc *d, JsonbValue *v)
{
	Oid			input;
	Oid			ioparam;
	char	   *text;

	if (d->type == TEXTARRAYOID)
	{
		JsonbIterator *it;
		JsonbValue	e;
		JsonbIteratorToken tok;
		ArrayBuildState *ab = NULL;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option %s must be a JSON array of strings", d->name)));
		ab = initArrayResult(TEXTOID, CurrentMemoryContext, false);
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			if (e.type == jbvNull)
				ab = accumArrayResult(ab, (Datum) 0, true, TEXTOID, CurrentMemoryContext);
			else if (e.type == jbvString)
				ab = accumArrayResult(ab, PointerGetDatum(cstring_to_text_with_len(e.val.string.val,
																				   e.val.string.len)),
									  false, TEXTOID, CurrentMemoryContext);
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option %s must be a JSON array of strings", d->name)));
		}
		return makeArrayResult(ab, CurrentMemoryContext);
	}
	if (d->type == JSONBOID)
		return JsonbPGetDatum(JsonbValueToJsonb(v));
	switch (v->type)
	{
		case jbvString:
			text = pnstrdup(v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
			break;
		case jbvBool:
			text = v->val.boolean ? "true" : "false";
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option %s must be a JSON string, number or boolean", d->name)));
	}
	getTypeInputInfo(d->type, &input, &ioparam);
	return OidInputFunctionCall(input, text, ioparam, -1);
}

/*
 * The options of a jsonb object as values of the argument table's rows
 * (vals[0 .. llm_arg_n_options()), NULL for absent or JSON null): ERROR 22023 for a key that
 * is no generation option (keys in skip left to the caller) or a value that
 * cannot be the option's.
 */
static void
jsonb_values(Jsonb *opts, const char *const *skip, NullableDatum *vals)
{
	JsonbIterator *it;
	JsonbValue	k,
				v;
	JsonbIteratorToken tok;

	for (int r = 0; r < llm_arg_n_options(); r++)
	{
		vals[r].isnull = true;
		vals[r].value = (Datum) 0;
	}
	if (opts == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(opts))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object of generation options")));
	it = JsonbIteratorInit(&opts->root);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;
		int			r;
		bool		skipped = false;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		for (const char *const *sk = skip; sk && *sk; sk++)
			skipped |= strcmp(*sk, key) == 0;
		if (skipped)
			continue;
		r = llm_arg_row_by_name(key);
		if (r < 0 || r >= llm_arg_n_options())
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown option \"%s\"", key),
					 errhint("The options are those of llm_generation_arguments().")));
		if (v.type == jbvNull)
			continue;
		vals[r].value = jsonb_option_value(llm_arg_row(r), &v);
		vals[r].isnull = false;
	}
}

void
llm_call_read_jsonb(Jsonb *opts, const char *const *skip, LlmCall *call)
{
	NullableDatum *vals = palloc(sizeof(NullableDatum) * llm_arg_n_options());

	jsonb_values(opts, skip, vals);
	llm_call_read_values(vals, llm_arg_n_options(), false, call);
}


/* ---------- written: a call's options -> jsonb ---------- */

/* Value v of row d as JSON, in the encoding jsonb_option_value reads back. */
static void
append_json_value(StringInfo buf, const LlmArgDesc *d, Datum v)
{
	switch (d->type)
	{
		case INT4OID:
			appendStringInfo(buf, "%d", DatumGetInt32(v));
			break;
		case INT8OID:
			appendStringInfo(buf, INT64_FORMAT, DatumGetInt64(v));
			break;
		case FLOAT8OID:
			{
				char	   *out = DatumGetCString(DirectFunctionCall1(float8out, v));

				/* JSON has no NaN or Infinity: those go as strings (float8in reads both) */
				if (isfinite(DatumGetFloat8(v)))
					appendStringInfoString(buf, out);
				else
					escape_json(buf, out);
				break;
			}
		case BOOLOID:
			appendStringInfoString(buf, DatumGetBool(v) ? "true" : "false");
			break;
		case TEXTOID:
			escape_json(buf, TextDatumGetCString(v));
			break;
		case TEXTARRAYOID:
			{
				ArrayType  *arr = DatumGetArrayTypeP(v);
				Datum	   *elems;
				bool	   *nulls;
				int			n;

				if (ARR_NDIM(arr) > 1)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("%s must be a one-dimensional array", d->name)));
				deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
				appendStringInfoChar(buf, '[');
				for (int i = 0; i < n; i++)
				{
					if (i > 0)
						appendStringInfoString(buf, ", ");
					if (nulls[i])
						appendStringInfoString(buf, "null");
					else
						escape_json(buf, TextDatumGetCString(elems[i]));
				}
				appendStringInfoChar(buf, ']');
				break;
			}
		case JSONBOID:
			{
				Jsonb	   *jb = DatumGetJsonbP(v);

				appendStringInfoString(buf, JsonbToCString(NULL, &jb->root, VARSIZE(jb)));
				break;
			}
		default:
			elog(ERROR, "llm: no JSON encoding of type %u for argument %s", d->type, d->name);
	}
}

Jsonb *
llm_call_options_encode(const LlmArgMap *map, const NullableDatum *args, int nargs)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int r = 0; r < llm_arg_n_options(); r++)
	{
		int			pos = llm_arg_map_pos(map, r);

		if (pos < 0 || pos >= nargs || args[pos].isnull)
			continue;
		if (!first)
			appendStringInfoString(&buf, ", ");
		first = false;
		escape_json(&buf, llm_arg_row(r)->name);
		appendStringInfoString(&buf, ": ");
		append_json_value(&buf, llm_arg_row(r), args[pos].value);
	}
	appendStringInfoChar(&buf, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

void
llm_call_read_stored(Jsonb *options, LlmCall *call)
{
	NullableDatum *vals = palloc(sizeof(NullableDatum) * llm_arg_n_options());

	jsonb_values(options, NULL, vals);
	llm_call_read_values(vals, llm_arg_n_options(), true, call);
}

char *
llm_call_options_model(Jsonb *options)
{
	JsonbValue *v;

	if (options == NULL || !JB_ROOT_IS_OBJECT(options))
		return NULL;
	v = getKeyJsonValueFromContainer(&options->root, "model", strlen("model"), NULL);
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}
