/*
 * model_path_test_util.h — where the unit tests find the Gemma 3 model:
 * $LLM_TEST_MODEL_GEMMA3, else the file next to $LLM_TEST_MODEL (the
 * directory test/run-unit passes the default model from), else models/.  A
 * test whose file is missing skips (make model MODEL=gemma3-270m fetches it).
 */
#ifndef LLM_MODEL_PATH_TEST_UTIL_H
#define LLM_MODEL_PATH_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GEMMA_FILE	"gemma-3-270m-q4_k_m.gguf"

/* The path of the Gemma 3 file, in buf[0..cap) or a static string. */
static inline const char *
gemma_path(char *buf, size_t cap)
{
	const char *p = getenv("LLM_TEST_MODEL_GEMMA3");
	const char *smol = getenv("LLM_TEST_MODEL");

	if (p != NULL && p[0] != '\0')
		return p;
	if (smol != NULL && strrchr(smol, '/') != NULL)
	{
		snprintf(buf, cap, "%.*s/" GEMMA_FILE, (int) (strrchr(smol, '/') - smol), smol);
		if (access(buf, R_OK) == 0)
			return buf;
	}
	return "models/" GEMMA_FILE;
}

#endif
