/*
 * test_wire_priority.c — the scheduling and accounting fields of a SUBMIT
 * (channel/protocol.h): the request's priority and the role and database tags
 * survive encode -> decode; an unknown priority is refused by the encoder
 * and by the decoder; the session is never carried; the one check refuses
 * an out-of-range priority and names the classes.
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
	buf = aligned_alloc(8, (need + 7) / 8 * 8);
	if (llm_wire_encode(m, buf, need) != need)
		abort();
	return buf;
}

static llm_wire_msg
submit_msg(llm_priority p)
{
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.id = 42;
	llm_request_init(&m.request);
	m.request.prompt = "What is 2+2?";
	m.request.prompt_len = strlen(m.request.prompt);
	m.request.priority = p;
	m.request.session = 99;		/* the worker's business: not on the wire */
	m.role_id = 16384;
	m.database_id = 5;
	return m;
}

int
main(void)
{
	for (int p = 0; p < LLM_N_PRIORITIES; p++)
	{
		llm_wire_msg m = submit_msg((llm_priority) p),
					d;
		size_t		len;
		unsigned char *buf = encode(&m, &len);
		const char *why = NULL;

		CHECK(buf != NULL, "%s: encodes", llm_priority_name((llm_priority) p));
		if (buf == NULL)
			continue;
		CHECK(llm_wire_decode(buf, len, &d, &arrays, &why) == LLM_WIRE_OK && d.request.priority == (llm_priority) p &&
			  d.role_id == 16384 && d.database_id == 5 && d.request.session == 0 &&
			  d.request.prompt_len == m.request.prompt_len,
			  "%s: priority, role and database round-trip; no session (%s)", llm_priority_name((llm_priority) p),
			  why ? why : "ok");
		/*
		 * the priority is the u32 before the two tags (u32 each), which the
		 * submitter (pid, role, database: 12 bytes) and the model alias
		 * follow (the default model's: an empty string, its u32 length and
		 * NUL byte)
		 */
		if (p == 0)
		{
			uint32_t	bad = LLM_N_PRIORITIES;
			size_t		after_priority = 4 + 4 + 12 + 4 + 1;
			uint32_t	at,
						tag;

			memcpy(&at, buf + len - after_priority - 4, 4);
			memcpy(&tag, buf + len - after_priority, 4);
			CHECK(at == (uint32_t) p && tag == 16384,
				  "the priority sits %zu bytes before the end, the role tag right after it", after_priority);
			memcpy(buf + len - after_priority - 4, &bad, 4);
			CHECK(llm_wire_decode(buf, len, &d, &arrays, &why) == LLM_WIRE_MALFORMED && why &&
				  strcmp(why, "unknown priority") == 0, "unknown priority refused by the decoder (%s)", why);
			CHECK(llm_wire_decode(buf, len - after_priority, &d, &arrays, &why) == LLM_WIRE_MALFORMED,
				  "a SUBMIT without its tags is refused");
		}
		free(buf);
	}
	{
		llm_wire_msg m = submit_msg((llm_priority) 5);
		char		err[128];

		CHECK(llm_wire_encode(&m, NULL, 0) == 0, "unknown priority refused by the encoder");
		CHECK(llm_request_validate(&m.request, err, sizeof(err)) == LLM_ERR_INVALID_PARAM &&
			  strcmp(err, "priority must be 'interactive' or 'batch'") == 0, "validate refuses it: %s", err);
	}
	{
		llm_priority p;

		CHECK(llm_priority_from_name("batch", &p) && p == LLM_PRIORITY_BATCH &&
			  llm_priority_from_name("interactive", &p) && p == LLM_PRIORITY_INTERACTIVE &&
			  !llm_priority_from_name("Batch", &p) && !llm_priority_from_name("", &p) &&
			  !llm_priority_from_name(NULL, &p), "class names: exact, lower case");
		llm_request r;

		llm_request_init(&r);
		CHECK(r.priority == LLM_PRIORITY_INTERACTIVE && r.session == 0, "a new request is interactive, session 0");
	}
	return unit_done();
}
