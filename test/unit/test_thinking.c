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

/*
 * Every prefix of s that llm_thinking_prefix_settled settles has the offset
 * of the whole text: so a stream that emits from it once settled, and the
 * rest at the end by llm_thinking_answer_offset, emits exactly answer(s).
 */
static bool
prefixes_agree(const char *s, bool opened)
{
	size_t		len = strlen(s);
	size_t		whole = llm_thinking_answer_offset(s, len, opened);
	bool		was_settled = false;

	for (size_t n = 0; n <= len; n++)
	{
		size_t		off = (size_t) -1;
		bool		settled = llm_thinking_prefix_settled(s, n, opened, &off);

		if (was_settled && !settled)
			return false;		/* once settled it stays settled */
		if (settled && (off != whole || (off != 0 && off >= n)))
			return false;
		was_settled = settled;
	}
	return true;
}

int
main(void)
{
	static const char *const streams[] = {
		"<think>\nLet me see.\n</think>\n\nParis.", "  \n<think></think>Paris.",
		"Let me see.\n</think>\n\nParis.", "<think>still thinking", "Paris. <think>x</think> y",
		"<think>a</think>b</think>c", "<think>a</think>", "<thi", "", "  ", "<thinking>no", "<think>a</think>  \n ",
		"</think>x", "<tx",
	};

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
	for (int i = 0; i < (int) (sizeof(streams) / sizeof(streams[0])); i++)
		for (int opened = 0; opened <= 1; opened++)
			CHECK(prefixes_agree(streams[i], opened),
				  "every settled prefix of \"%s\" (opened %d) has the whole text's offset", streams[i], opened);
	{
		size_t		off = 99;

		CHECK(!llm_thinking_prefix_settled("<think>a</think>  ", 18, false, &off),
			  "whitespace after the close: not settled yet");
		CHECK(llm_thinking_prefix_settled("<think>a</think> b", 18, false, &off) && off == 17,
			  "the first answer byte settles it");
		CHECK(llm_thinking_prefix_settled(" Paris", 6, false, &off) && off == 0,
			  "text first: settled, nothing stripped");
		CHECK(!llm_thinking_prefix_settled(" <thin", 6, false, &off), "a prefix of the tag: not settled");
		CHECK(!llm_thinking_prefix_settled("Paris", 5, true, &off), "opened: not settled before the close");
	}
	return unit_done();
}
