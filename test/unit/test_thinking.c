/*
 * test_thinking.c — the answer after a leading <think>...</think> section
 * (thinking.h): a leading section and the whitespace after it stripped, a
 * section the prompt opened, nothing stripped without "</think>" or when
 * the section is not at the start.
 */
#include "unit.h"
#include "engine/text/thinking.h"

#include <string.h>

static const char *
answer(const char *s, bool opened)
{
	return s + llm_thinking_answer_offset(s, strlen(s), opened);
}

int
main(void)
{
	CHECK(strcmp(answer("<think>\nLet me see.\n</think>\n\nParis.", false), "Paris.") == 0,
		  "a leading section and the whitespace after it are stripped");
	CHECK(strcmp(answer("  \n<think></think>Paris.", false), "Paris.") == 0,
		  "leading whitespace and an empty section");
	CHECK(strcmp(answer("Let me see.\n</think>\n\nParis.", true), "Paris.") == 0,
		  "a section the prompt opened ends at the first </think>");
	CHECK(strcmp(answer("Let me see.\n</think>\n\nParis.", false), "Let me see.\n</think>\n\nParis.") == 0,
		  "no <think> and not opened: nothing stripped");
	CHECK(strcmp(answer("<think>still thinking", false), "<think>still thinking") == 0,
		  "no </think>: nothing stripped");
	CHECK(strcmp(answer("Paris. <think>x</think> y", false), "Paris. <think>x</think> y") == 0,
		  "a section after text is the answer's");
	CHECK(strcmp(answer("<think>a</think>b</think>c", false), "b</think>c") == 0,
		  "the first </think> closes the section");
	CHECK(strcmp(answer("<think>a</think>", false), "") == 0, "a section alone leaves an empty answer");
	CHECK(llm_thinking_answer_offset("<thi", 4, false) == 0, "a text shorter than the tag");
	CHECK(llm_thinking_answer_offset("", 0, true) == 0, "an empty text");
	return unit_done();
}
