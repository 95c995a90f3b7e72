/*
 * prompts.h — the prompts of llm_filter and llm_classify (pg/sql/ai_prompts.c,
 * the same text byte for byte, without an instruction) for the benchmark
 * programs of bench/cascade/, which run the engine without PostgreSQL.
 * Results are malloc'd.
 */
#ifndef LLM_BENCH_CASCADE_PROMPTS_H
#define LLM_BENCH_CASCADE_PROMPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *
prompt_filter(const char *input, const char *question)
{
	const char *fmt = "Answer the question about the text with yes or no.\n\nQuestion: %s\n\nText:\n%s";
	size_t		n = strlen(fmt) + strlen(input) + strlen(question) + 1;
	char	   *s = malloc(n);

	snprintf(s, n, fmt, question, input);
	return s;
}

static inline char *
prompt_classify(const char *input, char *const *labels, int n)
{
	size_t		cap = strlen(input) + 256;
	char	   *s;

	for (int i = 0; i < n; i++)
		cap += strlen(labels[i]) + 2;
	s = malloc(cap);
	strcpy(s, "Classify the text into exactly one of these categories: ");
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			strcat(s, ", ");
		strcat(s, labels[i]);
	}
	strcat(s, ".\nAnswer with the category only.\n\nText:\n");
	strcat(s, input);
	return s;
}

#endif
