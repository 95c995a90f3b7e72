/* sql_result.c — a finished request's value in SQL (sql_result.h). */
#include "postgres.h"

#include "on_error.h"
#include "sql_result.h"
#include "utf8_text.h"

LlmResult *
llm_local_failure(int sqlstate, const char *message)
{
	LlmResult  *res = palloc0(sizeof(LlmResult));

	res->failed = true;
	res->sqlstate = sqlstate;
	res->message = pstrdup(message);
	return res;
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
llm_text_value(const LlmResult *res, bool on_error_null, bool *isnull)
{
	*isnull = !llm_result_usable(res, on_error_null);
	if (*isnull)
		return (Datum) 0;
	return PointerGetDatum(llm_utf8_to_text(res->text, res->text_len));
}
