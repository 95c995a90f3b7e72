/*
 * test_structured_wire.c — the structured-output fields of a SUBMIT
 * (channel/protocol.c): a grammar source (bytes, binary lengths of a choices
 * source included) and continuation_echo survive encode -> decode; a
 * request without them decodes without them; every truncation of a message
 * with a grammar is refused and single-byte mutations never fault.
 */
#include <stdlib.h>
#include <string.h>

#include "channel/protocol.c"
#include "unit.h"

static llm_wire_arrays arrays;

static unsigned char *
encode(const llm_wire_msg *m, size_t *len)
{
	size_t		need = llm_wire_encode(m, NULL, 0);
	unsigned char *buf;

	*len = need;
	if (need == 0)
		return NULL;
	buf = malloc(need);
	if (llm_wire_encode(m, buf, need) != need)
		abort();
	return buf;
}

static llm_wire_result
decode_copy(const void *data, size_t len, llm_wire_msg *m, unsigned char **keep)
{
	unsigned char *copy = malloc(len ? len : 1);

	memcpy(copy, data, len);
	*keep = copy;
	return llm_wire_decode(copy, len, m, &arrays, NULL);
}

int
main(void)
{
	llm_wire_msg m,
				d;
	unsigned char *buf,
			   *keep;
	size_t		len;
	/* a choices source: tag, then 4-byte lengths with NUL bytes in them */
	const char	choices_src[] = {(char) 1, 3, 0, 0, 0, 'b', 'u', 'g', 6, 0, 0, 0, 'b', 'u', 'g', 'f', 'i', 'x'};
	const char *conts[] = {"yes", "no"};
	size_t		cont_lens[] = {3, 2};

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.id = 42;
	llm_request_init(&m.request);
	m.request.prompt = "Classify: it crashes";
	m.request.prompt_len = strlen(m.request.prompt);
	m.request.grammar = choices_src;
	m.request.grammar_len = sizeof(choices_src);
	buf = encode(&m, &len);
	CHECK(buf != NULL, "SUBMIT with a binary grammar source encodes (%zu bytes)", len);
	CHECK(decode_copy(buf, len, &d, &keep) == LLM_WIRE_OK && d.request.grammar != NULL &&
		  d.request.grammar_len == sizeof(choices_src) &&
		  memcmp(d.request.grammar, choices_src, sizeof(choices_src)) == 0 && !d.request.continuation_echo,
		  "grammar source decodes byte for byte");
	free(keep);
	{
		int			refused = 1;
		int			faults = 0;
		unsigned char *copy = malloc(len);

		for (size_t n = 0; n < len; n++)
		{
			if (decode_copy(buf, n, &d, &keep) == LLM_WIRE_OK)
				refused = 0;
			free(keep);
		}
		CHECK(refused, "every proper prefix of it refused");
		for (size_t i = 0; i < len; i++)
			for (int v = 0; v < 256; v += 15)
			{
				memcpy(copy, buf, len);
				copy[i] = (unsigned char) v;
				if (decode_copy(copy, len, &d, &keep) == LLM_WIRE_OK && d.request.grammar != NULL &&
					(const unsigned char *) d.request.grammar + d.request.grammar_len > keep + len)
					faults++;
				free(keep);
			}
		CHECK(faults == 0, "single-byte mutations: a decoded grammar always lies within the message");
		free(copy);
	}
	free(buf);

	/* SCORE with echo, no grammar */
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.id = 43;
	llm_request_init(&m.request);
	m.request.mode = LLM_MODE_SCORE;
	m.request.prompt = "Is it a bug?";
	m.request.prompt_len = strlen(m.request.prompt);
	m.request.n_continuations = 2;
	m.request.continuations = conts;
	m.request.continuation_lens = cont_lens;
	m.request.continuation_eot = true;
	m.request.continuation_echo = true;
	buf = encode(&m, &len);
	CHECK(buf != NULL && decode_copy(buf, len, &d, &keep) == LLM_WIRE_OK && d.request.continuation_echo &&
		  d.request.continuation_eot && d.request.grammar == NULL && d.request.n_continuations == 2,
		  "continuation_echo round-trips, no grammar decoded");
	free(keep);
	free(buf);

	/* an empty grammar source still round-trips (validate refuses it, not the decoder) */
	m.request.mode = LLM_MODE_GENERATE;
	m.request.n_continuations = 0;
	m.request.continuations = NULL;
	m.request.continuation_lens = NULL;
	m.request.continuation_eot = false;
	m.request.continuation_echo = false;
	m.request.grammar = "";
	m.request.grammar_len = 0;
	buf = encode(&m, &len);
	CHECK(buf != NULL && decode_copy(buf, len, &d, &keep) == LLM_WIRE_OK && d.request.grammar != NULL &&
		  d.request.grammar_len == 0, "an empty grammar source round-trips as empty, not absent");
	{
		char		err[128];

		CHECK(llm_request_validate(&d.request, err, sizeof(err)) == LLM_ERR_INVALID_PARAM,
			  "validate refuses it: %s", err);
	}
	free(keep);
	free(buf);
	return unit_done();
}
