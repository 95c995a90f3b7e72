/* sql_result.c — a finished request's value in SQL (sql_result.h). */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "ai_prompts.h"
#include "engine/grammar/json_min.h"
#include "on_error.h"
#include "sql_result.h"
#include "common/utf8_text.h"

/* n elements of src, palloc'd */
#define palloc_array_copy(src, n) memcpy(palloc(sizeof(*(src)) * Max((n), 1)), (src), sizeof(*(src)) * (n))

LlmResult *
llm_local_failure(int sqlstate, const char *message)
{
	LlmResult  *res = palloc0(sizeof(LlmResult));

	res->failed = true;
	res->sqlstate = sqlstate;
	res->message = pstrdup(message);
	return res;
}

LlmResult *
llm_result_copy(const LlmResult *res)
{
	LlmResult  *c = palloc(sizeof(LlmResult));

	*c = *res;
	if (res->message != NULL)
		c->message = pstrdup(res->message);
	if (res->text != NULL)
	{
		c->text = palloc(res->text_len + 1);
		memcpy(c->text, res->text, res->text_len + 1);
	}
	if (res->tokens != NULL)
		c->tokens = palloc_array_copy(res->tokens, res->n_tokens);
	if (res->scores != NULL)
		c->scores = palloc_array_copy(res->scores, res->n_scores);
	if (res->vector != NULL)
		c->vector = palloc_array_copy(res->vector, res->n_vector);
	return c;
}

void
llm_raise_result(const LlmResult *res)
{
	ereport(ERROR,
			(errcode(res->sqlstate),
			 errmsg("%s", llm_utf8_to_cstring(res->message, strlen(res->message)))));
	pg_unreachable();
}

bool
llm_result_usable(const LlmResult *res, bool on_error_null)
{
	if (!res->failed)
		return true;
	if (!on_error_null)
		llm_raise_result(res);
	llm_note_null_failure(res->sqlstate, llm_utf8_to_cstring(res->message, strlen(res->message)));
	return false;
}

Datum
llm_text_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull)
{
	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	return PointerGetDatum(llm_utf8_to_text(res->text, res->text_len));
}

Datum
llm_jsonb_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull)
{
	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(llm_utf8_to_cstring(res->text, res->text_len)));
}

/* The labels a SCORE result's echo names, in the database encoding; n must match the scores. */
static char **
echoed_labels(const LlmResult *res)
{
	char		err[256];
	llm_json_doc *doc = llm_json_parse(res->text, res->text_len, 2, NULL, err, sizeof(err));
	const llm_json *root = doc ? llm_json_root(doc) : NULL;
	char	  **labels;

	if (root == NULL || root->type != LLM_JSON_ARRAY || root->n != res->n_scores || root->n < 1)
	{
		llm_json_free(doc);
		elog(ERROR, "llm: scoring result without its labels");
	}
	labels = palloc(sizeof(char *) * root->n);
	for (int i = 0; i < root->n; i++)
	{
		if (root->items[i]->type != LLM_JSON_STRING)
		{
			llm_json_free(doc);
			elog(ERROR, "llm: scoring result without its labels");
		}
		labels[i] = llm_utf8_to_cstring(root->items[i]->text, (int) root->items[i]->len);
	}
	llm_json_free(doc);
	return labels;
}

static int
best_score(const LlmResult *res)
{
	int			best = 0;

	for (int i = 1; i < res->n_scores; i++)
		if (res->scores[i] > res->scores[best])
			best = i;
	return best;
}

Datum
llm_label_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull)
{
	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	return CStringGetTextDatum(echoed_labels(res)[best_score(res)]);
}

Datum
llm_label_scores_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull)
{
	char	  **labels;
	double		max,
				sum = 0.0;
	JsonbParseState *state = NULL;
	JsonbValue *obj;

	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	labels = echoed_labels(res);
	max = res->scores[best_score(res)];
	for (int i = 0; i < res->n_scores; i++)
		sum += exp(res->scores[i] - max);
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < res->n_scores; i++)
	{
		JsonbValue	k,
					v;

		k.type = jbvString;
		k.val.string.val = labels[i];
		k.val.string.len = strlen(labels[i]);
		pushJsonbValue(&state, WJB_KEY, &k);
		v.type = jbvNumeric;
		v.val.numeric = DatumGetNumeric(DirectFunctionCall1(float8_numeric,
															Float8GetDatum(exp(res->scores[i] - max) / sum)));
		pushJsonbValue(&state, WJB_VALUE, &v);
	}
	obj = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(obj));
}

/* log(sum(exp(x[i]))) over x[0..n) */
static double
log_sum_exp(const double *x, int n)
{
	double		max = x[0],
				sum = 0.0;

	for (int i = 1; i < n; i++)
		if (x[i] > max)
			max = x[i];
	for (int i = 0; i < n; i++)
		sum += exp(x[i] - max);
	return max + log(sum);
}

bool
llm_yes_no_scores(const double *scores)
{
	return log_sum_exp(scores, LLM_FILTER_N_YES) >
		log_sum_exp(scores + LLM_FILTER_N_YES, LLM_FILTER_N_ANSWERS - LLM_FILTER_N_YES);
}

Datum
llm_yes_no_value(const LlmResult *res, const void *value_arg, bool on_error_null, bool *isnull)
{
	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	if (res->n_scores != LLM_FILTER_N_ANSWERS)
		elog(ERROR, "llm: yes/no result with %d scores", res->n_scores);
	return BoolGetDatum(llm_yes_no_scores(res->scores));
}
