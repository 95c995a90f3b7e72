/* ai_prompts.c — the AI functions' instruction templates (ai_prompts.h). */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "ai_prompts.h"

const char *const llm_filter_answers[LLM_FILTER_N_ANSWERS] = {"Yes", "yes", "No", "no"};

/* "\n" + instruction, if there is one */
static void
append_instruction(StringInfo s, const char *instruction)
{
	if (instruction != NULL && instruction[0] != '\0')
	{
		appendStringInfoChar(s, '\n');
		appendStringInfoString(s, instruction);
	}
}

char *
llm_prompt_classify(const char *input, const char *const *labels, int n, const char *instruction)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, "Classify the text into exactly one of these categories: ");
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&s, ", ");
		appendStringInfoString(&s, labels[i]);
	}
	appendStringInfoChar(&s, '.');
	append_instruction(&s, instruction);
	appendStringInfoString(&s, "\nAnswer with the category only.\n\nText:\n");
	appendStringInfoString(&s, input);
	return s.data;
}

char *
llm_prompt_filter(const char *input, const char *question)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, "Answer the question about the text with yes or no.\n\nQuestion: ");
	appendStringInfoString(&s, question);
	appendStringInfoString(&s, "\n\nText:\n");
	appendStringInfoString(&s, input);
	return s.data;
}

char *
llm_prompt_join(const char *input, const char *question)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, input);
	appendStringInfoString(&s, LLM_JOIN_SEPARATOR);
	return llm_prompt_filter(s.data, question);
}

char *
llm_prompt_extract(const char *input, const char *schema, const char *instruction)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, "Extract the information from the text as a JSON object with this JSON schema:\n");
	appendStringInfoString(&s, schema);
	append_instruction(&s, instruction);
	appendStringInfoString(&s, "\n\nText:\n");
	appendStringInfoString(&s, input);
	return s.data;
}

char *
llm_prompt_agg_rows(const char *instruction, const char *const *rows, int n)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, instruction);
	appendStringInfoString(&s, "\n\nRows:\n");
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&s, LLM_AGG_SEPARATOR);
		appendStringInfoString(&s, rows[i]);
	}
	return s.data;
}

char *
llm_prompt_agg_combine(const char *instruction, const char *const *parts, int n)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, instruction);
	appendStringInfoString(&s, "\n\nThe rows were too many to read at once, so they were split into parts "
						   "and each part was answered on its own. Combine these answers into one answer.\n\n");
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&s, LLM_AGG_SEPARATOR);
		appendStringInfo(&s, "Part %d:\n", i + 1);
		appendStringInfoString(&s, parts[i]);
	}
	return s.data;
}
