/*
 * fuzz_protocol.c — libFuzzer target: the channel's message decoder
 * (channel/protocol.c).
 *
 * Any bytes are decoded from an 8-byte-aligned exact-size copy.  A refusal
 * must name its defect.  An accepted message must re-encode to exactly as
 * many bytes, whose decoding is accepted again and re-encodes to the same
 * bytes (encode . decode is a fixed point: what the worker reads is what the
 * backend meant), and a decoded SUBMIT goes through llm_request_validate,
 * which must either accept it or say why.  Any violation aborts.
 */
#include <stdlib.h>
#include <string.h>

#include "channel/protocol.h"

static llm_wire_arrays arrays,
			arrays2;

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	unsigned char *copy = aligned_alloc(8, (size + 7) / 8 * 8 + 8);
	llm_wire_msg m,
				m2;
	const char *why = NULL;
	llm_wire_result r;

	memcpy(copy, data, size);
	r = llm_wire_decode(copy, size, &m, &arrays, &why);
	if (r != LLM_WIRE_OK)
	{
		if (why == NULL || why[0] == '\0')
			abort();
	}
	else
	{
		size_t		n = llm_wire_encode(&m, NULL, 0);
		unsigned char *again,
				   *third;

		if (n != size)
			abort();
		again = aligned_alloc(8, (n + 7) / 8 * 8);
		third = aligned_alloc(8, (n + 7) / 8 * 8);
		if (llm_wire_encode(&m, again, n) != n)
			abort();
		if (llm_wire_decode(again, n, &m2, &arrays2, &why) != LLM_WIRE_OK)
			abort();
		if (llm_wire_encode(&m2, third, n) != n || memcmp(again, third, n) != 0)
			abort();
		if (m2.kind != m.kind || m2.id != m.id)
			abort();
		if (m.kind == LLM_WIRE_SUBMIT)
		{
			char		err[512] = "";

			if (llm_request_validate(&m.request, err, sizeof(err)) != LLM_OK && err[0] == '\0')
				abort();
		}
		free(again);
		free(third);
	}
	free(copy);
	return 0;
}
