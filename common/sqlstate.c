/* sqlstate.c — engine status -> SQLSTATE (sqlstate.h). */
#include "postgres.h"

#include "sqlstate.h"

static const struct
{
	llm_status	status;
	int			sqlstate;
}			status_sqlstates[] = {
	{LLM_ERR_INVALID_PARAM, ERRCODE_INVALID_PARAMETER_VALUE},
	{LLM_ERR_EMPTY_PROMPT, ERRCODE_INVALID_PARAMETER_VALUE},
	{LLM_ERR_PROMPT_TOO_LONG, ERRCODE_PROGRAM_LIMIT_EXCEEDED},
	{LLM_ERR_INVALID_TEXT, ERRCODE_CHARACTER_NOT_IN_REPERTOIRE},
	{LLM_ERR_OUT_OF_MEMORY, ERRCODE_OUT_OF_MEMORY},
	{LLM_ERR_NONFINITE, ERRCODE_INTERNAL_ERROR},
	{LLM_ERR_DUPLICATE_ID, ERRCODE_INTERNAL_ERROR},
	{LLM_ERR_BACKEND, ERRCODE_INTERNAL_ERROR},
	{LLM_ERR_MODEL, ERRCODE_INTERNAL_ERROR},
};

int
llm_status_sqlstate(llm_status s)
{
	for (int i = 0; i < lengthof(status_sqlstates); i++)
		if (status_sqlstates[i].status == s)
			return status_sqlstates[i].sqlstate;
	return ERRCODE_INTERNAL_ERROR;
}
