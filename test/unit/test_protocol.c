/*
 * test_protocol.c — the channel's messages (channel/protocol.h): every kind
 * survives encode -> decode unchanged; the decoder refuses every
 * truncation, trailing byte, count over its limit, NUL in a request
 * string, bad enum value and misaligned buffer, and never reads outside
 * the bytes it is given (run under -fsanitize=address,undefined: every
 * single-byte mutation and random messages).
 */
#include <stdlib.h>
#include <string.h>

#include "channel/protocol.c"
#include "unit.h"

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

/* Decode a copy of data at an 8-aligned address (len bytes exactly). */
static llm_wire_result
decode_copy(const void *data, size_t len, llm_wire_msg *m, llm_wire_arrays *a, const char **why)
{
	unsigned char *copy = malloc(len ? len : 1);
	llm_wire_result res;

	memcpy(copy, data, len);
	res = llm_wire_decode(copy, len, m, a, why);
	
	free(copy);
	return res;
}

static llm_wire_arrays arrays;

static int
str_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static int
request_eq(const llm_request *a, const llm_request *b)
{
	const llm_sampling_params *p = &a->params,
			   *q = &b->params;

	if (a->mode != b->mode || a->prompt_kind != b->prompt_kind ||
		(a->prompt == NULL) != (b->prompt == NULL) || (a->system == NULL) != (b->system == NULL) ||
		a->n_messages != b->n_messages || a->n_tokens != b->n_tokens ||
		a->n_continuations != b->n_continuations || a->continuation_eot != b->continuation_eot ||
		a->pooling != b->pooling || a->normalize != b->normalize || a->truncate != b->truncate)
		return 0;
	if (a->prompt && !str_eq(a->prompt, a->prompt_len, b->prompt, b->prompt_len))
		return 0;
	if (a->system && !str_eq(a->system, a->system_len, b->system, b->system_len))
		return 0;
#define X(type, field) if (memcmp(&p->field, &q->field, sizeof(p->field)) != 0) return 0;
	LLM_WIRE_PARAMS(X)
#undef X
	if (p->n_stop != q->n_stop)
		return 0;
	for (int i = 0; i < p->n_stop; i++)
		if (strcmp(p->stop[i], q->stop[i]) != 0)
			return 0;
	for (int i = 0; i < a->n_messages; i++)
		if (strcmp(a->messages[i].role, b->messages[i].role) != 0 ||
			!str_eq(a->messages[i].content, a->messages[i].content_len,
					b->messages[i].content, b->messages[i].content_len))
			return 0;
	for (int i = 0; i < a->n_continuations; i++)
		if (!str_eq(a->continuations[i], a->continuation_lens[i],
					b->continuations[i], b->continuation_lens[i]))
			return 0;
	if (strcmp(a->model ? a->model : "", b->model ? b->model : "") != 0)
		return 0;
	if (a->no_generation_prompt != b->no_generation_prompt || a->thinking != b->thinking ||
		a->strip_thinking != b->strip_thinking ||
		(a->tools == NULL) != (b->tools == NULL) ||
		(a->tools && !str_eq(a->tools, a->tools_len, b->tools, b->tools_len)))
		return 0;
	return a->n_tokens == 0 || memcmp(a->tokens, b->tokens, a->n_tokens * sizeof(int32_t)) == 0;
}

/*
 * d (decoded from len bytes) encoded again: a malloc'ed buffer of len bytes,
 * or NULL when d does not encode or encodes to another size.
 */
static unsigned char *
reencode(const llm_wire_msg *d, size_t len)
{
	unsigned char *buf;

	if (llm_wire_encode(d, NULL, 0) != len)
		return NULL;
	buf = malloc(len);
	if (llm_wire_encode(d, buf, len) != len)
	{
		free(buf);
		return NULL;
	}
	return buf;
}

/*
 * Whether a message the decoder accepted is a message that encodes back to
 * the same bytes after one more decode: what any accepted bytes must be.
 */
static int
round_trips(const llm_wire_msg *d, size_t len)
{
	static llm_wire_arrays again_arrays;
	llm_wire_msg again;
	unsigned char *buf = reencode(d, len),
			   *buf2 = NULL;
	int			same;

	same = buf && llm_wire_decode(buf, len, &again, &again_arrays, NULL) == LLM_WIRE_OK &&
		(buf2 = reencode(&again, len)) != NULL && memcmp(buf, buf2, len) == 0;
	free(buf2);
	free(buf);
	return same;
}

/*
 * Whether a single-byte change the decoder accepted was decoded faithfully:
 * the message encodes back either to the changed bytes (the byte was read as
 * written) or to the original ones (the byte is padding the decoder skips),
 * never to a third message (a byte read as some other value).
 */
static int
faithful(const llm_wire_msg *d, const unsigned char *changed, const unsigned char *original, size_t len)
{
	unsigned char *buf = reencode(d, len);
	int			ok = buf && (memcmp(buf, changed, len) == 0 || memcmp(buf, original, len) == 0);

	free(buf);
	return ok;
}

/* Every prefix and every single-byte change of a valid message: no crash, prefixes refused. */
static void
mutate_all(const unsigned char *msg, size_t len, const char *what)
{
	llm_wire_msg d;
	unsigned char *copy = malloc(len);
	int			prefixes_refused = 1;
	int			decoded = 0;
	int			accepted_reencode = 0;

	for (size_t n = 0; n < len; n++)
		if (decode_copy(msg, n, &d, &arrays, NULL) == LLM_WIRE_OK)
			prefixes_refused = 0;
	CHECK(prefixes_refused, "%s: every proper prefix refused", what);
	for (size_t i = 0; i < len; i++)
		for (int v = 0; v < 256; v += (i < LLM_WIRE_HEADER_SIZE ? 1 : 17))
		{
			memcpy(copy, msg, len);
			copy[i] = (unsigned char) v;
			if (llm_wire_decode(copy, len, &d, &arrays, NULL) == LLM_WIRE_OK)
			{
				decoded++;
				accepted_reencode += faithful(&d, copy, msg, len);
			}
		}
	CHECK(decoded > 0 && accepted_reencode == decoded,
		  "%s: each of the %d single-byte mutations accepted (of %zu bytes) encodes back to the changed or the original bytes (%d do)",
		  what, decoded, len, accepted_reencode);
	free(copy);
}

int
main(void)
{
	llm_wire_msg m,
				d;
	unsigned char *buf;
	size_t		len;
	const char *why = NULL;	/* read as a CHECK argument, possibly before the decode beside it */
	const char *stops[] = {"\n\n", "END"};
	llm_chat_message msgs[] = {{"system", "Be brief.", 9}, {"user", "Hi", 2}};
	const char *conts[] = {"yes", "no"};
	size_t		cont_lens[] = {3, 2};
	int32_t		ids[] = {1, 2, 3, 49151, -7};
	double		scores[] = {-1.5, -0.25};

	/* SUBMIT: TEXT with system and every option */
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.id = 0x0123456789abcdefULL;
	llm_request_init(&m.request);
	m.request.prompt = "What is 2+2?";
	m.request.prompt_len = strlen(m.request.prompt);
	m.request.system = "You are terse.";
	m.request.system_len = strlen(m.request.system);
	m.request.params.max_tokens = 17;
	m.request.params.temperature = 0.7;
	m.request.params.top_p = 0.9;
	m.request.params.top_k = 40;
	m.request.params.min_p = 0.05;
	m.request.params.repetition_penalty = 1.1;
	m.request.params.has_seed = true;
	m.request.params.seed = UINT64_MAX - 3;
	m.request.params.n_stop = 2;
	m.request.params.stop = stops;
	m.request.params.ignore_eos = true;
	m.request.params.cache_salt = (2ULL << 32) | 16384;
	m.request.params.debug_poison_logits = 3;
	m.client.pid = 4242;
	m.client.role = 16384;
	m.client.database = 5;
	buf = encode(&m, &len);
	CHECK(buf != NULL, "TEXT request encodes (%zu bytes)", len);
	CHECK(llm_wire_decode(buf, len, &d, &arrays, &why) == LLM_WIRE_OK, "TEXT request decodes (%s)", why ? why : "ok");
	CHECK(d.kind == LLM_WIRE_SUBMIT && d.id == m.id && request_eq(&m.request, &d.request),
		  "TEXT request: every field survives");
	CHECK(d.client.pid == 4242 && d.client.role == 16384 && d.client.database == 5,
		  "TEXT request: the submitter (pid, role, database) survives");
	CHECK(d.request.prompt >= (const char *) buf && d.request.prompt < (const char *) buf + len &&
		  d.request.prompt[d.request.prompt_len] == '\0', "decoded prompt points into the bytes, NUL-terminated");
	CHECK(llm_wire_encode(&m, buf, len - 1) == len, "a short buffer gets the size back");
	mutate_all(buf, len, "TEXT request");
	CHECK(llm_wire_decode(buf, len, &d, NULL, &why) == LLM_WIRE_MALFORMED, "a request needs arrays to decode into");
	CHECK(llm_wire_decode(buf + 1, len - 1, &d, &arrays, &why) == LLM_WIRE_NO_HEADER, "misaligned buffer refused");
	{
		unsigned char *longer = malloc(len + 1);

		memcpy(longer, buf, len);
		longer[len] = 0;
		CHECK(llm_wire_decode(longer, len + 1, &d, &arrays, &why) == LLM_WIRE_MALFORMED && d.id == m.id,
			  "a trailing byte is refused, the id still known (%s)", why);
		free(longer);
	}
	free(buf);

	/* SUBMIT: MESSAGES, SCORE with continuations, TOKENS */
	m.request.system = NULL;
	m.request.prompt_kind = LLM_PROMPT_MESSAGES;
	m.request.messages = msgs;
	m.request.n_messages = 2;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, &arrays, NULL) == LLM_WIRE_OK && request_eq(&m.request, &d.request),
		  "MESSAGES request round trip");
	free(buf);
	/* RENDER with the chat template's options: tools, enable_thinking, no generation prompt */
	m.request.mode = LLM_MODE_RENDER;
	m.request.tools = "[{\"type\": \"function\"}]";
	m.request.tools_len = strlen(m.request.tools);
	m.request.thinking = -1;
	m.request.no_generation_prompt = true;
	/* no stop strings: with a zeroed stop count they would read as well-formed messages */
	m.request.params.n_stop = 0;
	m.request.params.stop = NULL;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, &arrays, NULL) == LLM_WIRE_OK && request_eq(&m.request, &d.request) &&
		  d.request.thinking == -1 && d.request.no_generation_prompt && d.request.tools_len == m.request.tools_len,
		  "RENDER request with tools, enable_thinking off, no generation prompt: round trip");
	if (buf)
		mutate_all(buf, len, "RENDER request");
	free(buf);
	/* GENERATE of a chat with strip_thinking and enable_thinking on */
	m.request.mode = LLM_MODE_GENERATE;
	m.request.no_generation_prompt = false;
	m.request.thinking = 1;
	m.request.strip_thinking = true;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, &arrays, NULL) == LLM_WIRE_OK && request_eq(&m.request, &d.request) &&
		  d.request.strip_thinking && d.request.thinking == 1,
		  "GENERATE request with strip_thinking and enable_thinking on: round trip");
	free(buf);
	m.request.strip_thinking = false;
	m.request.tools = NULL;
	m.request.tools_len = 0;
	m.request.thinking = 0;
	m.request.no_generation_prompt = false;
	m.request.params.n_stop = 2;
	m.request.params.stop = stops;
	m.request.mode = LLM_MODE_SCORE;
	m.request.continuations = conts;
	m.request.continuation_lens = cont_lens;
	m.request.n_continuations = 2;
	m.request.continuation_eot = true;
	m.request.prompt_kind = LLM_PROMPT_TOKENS;
	m.request.tokens = ids;
	m.request.n_tokens = 5;
	m.request.n_messages = 0;
	m.request.messages = NULL;
	m.request.model = "gemma3";
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, &arrays, NULL) == LLM_WIRE_OK && request_eq(&m.request, &d.request),
		  "SCORE request over TOKENS with continuations round trip");
	CHECK(d.model != NULL && strcmp(d.model, "gemma3") == 0 && d.model == d.request.model,
		  "a request's model alias survives, also as the message's");
	CHECK(d.client.pid == 4242 && d.client.role == 16384 && d.client.database == 5,
		  "beside the model alias, the submitter survives");
	CHECK(len >= 4 + strlen("gemma3") && memcmp(buf + len - strlen("gemma3") - 1, "gemma3", strlen("gemma3")) == 0,
		  "the model alias is the last field of a SUBMIT, after the submitter");
	CHECK(((uintptr_t) d.request.tokens % 4) == 0, "token ids pointed at in place, aligned");
	mutate_all(buf, len, "SCORE request");
	free(buf);

	/* SUBMIT: an EMBED request (the pooling is the request field before the priority) */
	{
		llm_wire_msg em = m;

		em.request.mode = LLM_MODE_EMBED;
		em.request.n_continuations = 0;
		em.request.continuations = NULL;
		em.request.continuation_lens = NULL;
		em.request.continuation_eot = false;
		em.request.pooling = LLM_POOLING_LAST;
		buf = encode(&em, &len);
		CHECK(buf && llm_wire_decode(buf, len, &d, &arrays, NULL) == LLM_WIRE_OK &&
			  d.request.mode == LLM_MODE_EMBED && request_eq(&em.request, &d.request),
			  "EMBED request round trip");
		em.request.pooling = (llm_pooling) LLM_N_POOLINGS;
		CHECK(llm_wire_encode(&em, NULL, 0) == 0, "an unknown pooling cannot be encoded");
		em.request.pooling = LLM_POOLING_LAST;
		em.request.normalize = (llm_embed_norm) LLM_N_EMBED_NORMS;
		CHECK(llm_wire_encode(&em, NULL, 0) == 0, "an unknown normalisation cannot be encoded");
		/* every pooling, normalisation and truncate flag round-trips */
		for (int pl = 0; pl < LLM_N_POOLINGS; pl++)
			for (int nm = 0; nm < LLM_N_EMBED_NORMS; nm++)
				for (int tr = 0; tr < 2; tr++)
				{
					uint8_t    *b2;
					size_t		len2;

					em.request.pooling = (llm_pooling) pl;
					em.request.normalize = (llm_embed_norm) nm;
					em.request.truncate = tr;
					b2 = encode(&em, &len2);
					CHECK(b2 && llm_wire_decode(b2, len2, &d, &arrays, NULL) == LLM_WIRE_OK &&
						  request_eq(&em.request, &d.request) && (int) d.request.pooling == pl &&
						  (int) d.request.normalize == nm && d.request.truncate == (tr != 0),
						  "EMBED options round trip (pooling %d, normalisation %d, truncate %d)", pl, nm, tr);
					free(b2);
				}
		em.request.pooling = LLM_POOLING_LAST;
		em.request.normalize = LLM_EMBED_NORM_MODEL;
		em.request.truncate = false;
		if (buf != NULL)
		{
			/* the pooling: the u32 before the priority, the tags and submitter (5 u32) and the alias */
			size_t		off = len - (4 + strlen("gemma3") + 1) - 5 * 4 - 4 - 4;
			uint32_t	pool;

			memcpy(&pool, buf + off, 4);
			CHECK(pool == LLM_POOLING_LAST, "the pooling's bytes found in the message");
			pool = LLM_N_POOLINGS;
			memcpy(buf + off, &pool, 4);
			CHECK(llm_wire_decode(buf, len, &d, &arrays, &why) == LLM_WIRE_MALFORMED && why &&
				  strstr(why, "pooling"), "an unknown pooling is refused by the decoder (%s)", why);
		}
		free(buf);
	}

	/* what cannot be encoded */
	{
		llm_wire_msg bad = m;
		const char *many[LLM_MAX_STOP_STRINGS + 1];

		for (int i = 0; i <= LLM_MAX_STOP_STRINGS; i++)
			many[i] = "x";
		bad.request.params.stop = many;
		bad.request.params.n_stop = LLM_MAX_STOP_STRINGS + 1;
		CHECK(llm_wire_encode(&bad, NULL, 0) == 0, "17 stop strings cannot be encoded");
		bad.request.params.n_stop = 1;
		many[0] = NULL;
		CHECK(llm_wire_encode(&bad, NULL, 0) == 0, "a NULL stop string cannot be encoded");
		bad = m;
		bad.request.prompt_kind = LLM_PROMPT_RAW;
		bad.request.prompt = "a\0b";
		bad.request.prompt_len = 3;
		CHECK(llm_wire_encode(&bad, NULL, 0) == 0, "a prompt with a NUL byte cannot be encoded");
		bad = m;
		bad.request.mode = 7;
		CHECK(llm_wire_encode(&bad, NULL, 0) == 0, "an unknown mode cannot be encoded");
		bad = m;
		bad.kind = 99;
		CHECK(llm_wire_encode(&bad, NULL, 0) == 0, "an unknown kind cannot be encoded");
		bad = m;
		bad.request.model = "a_model_alias_of_sixty_four_bytes_which_is_one_more_than_allowed";
		CHECK(strlen(bad.request.model) == LLM_MAX_MODEL_ALIAS + 1 && llm_wire_encode(&bad, NULL, 0) == 0,
			  "a model alias over %d bytes cannot be encoded", LLM_MAX_MODEL_ALIAS);
	}

	/* decoder refusals on hand-made bytes */
	{
		unsigned char raw[64] __attribute__((aligned(8)));
		uint32_t	k = LLM_WIRE_SUBMIT,
					body = 0;

		memset(raw, 0, sizeof(raw));
		memcpy(raw, &k, 4);
		CHECK(llm_wire_decode(raw, 8, &d, &arrays, &why) == LLM_WIRE_NO_HEADER, "8 bytes: no header");
		body = 48;
		memcpy(raw + 4, &body, 4);
		CHECK(llm_wire_decode(raw, 64, &d, &arrays, &why) == LLM_WIRE_MALFORMED, "zero mode refused (%s)", why);
		k = 12345;
		memcpy(raw, &k, 4);
		CHECK(llm_wire_decode(raw, 64, &d, &arrays, &why) == LLM_WIRE_MALFORMED && d.kind == 12345,
			  "unknown kind refused, kind reported (%s)", why);
	}
	{
		/* a stop count over the limit in otherwise valid bytes */
		llm_wire_msg ok = m;
		size_t		off;
		uint32_t	big = LLM_MAX_STOP_STRINGS + 1;

		ok.request.params.n_stop = 0;
		ok.request.params.stop = NULL;
		buf = encode(&ok, &len);
		/* the stop count follows header, mode, kind, flags and the options */
		off = LLM_WIRE_HEADER_SIZE + 12 + 4 + 8 + 8 + 4 + 8 + 8 + 1 + 8 + 1 + 8 + 4;
		memcpy(buf + off, &big, 4);
		CHECK(llm_wire_decode(buf, len, &d, &arrays, &why) == LLM_WIRE_MALFORMED && why && strstr(why, "limit"),
			  "stop count over the limit refused (%s)", why);
		free(buf);
	}

	/* TOKENIZE, DETOKENIZE (empty and not), ABORT */
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_TOKENIZE;
	m.id = 5;
	m.text = "Hello world";
	m.text_len = 11;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.kind == LLM_WIRE_TOKENIZE &&
		  str_eq(d.text, d.text_len, m.text, m.text_len) && d.model == NULL, "TOKENIZE round trip");
	free(buf);
	m.model = "small";
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.model != NULL &&
		  strcmp(d.model, "small") == 0 && str_eq(d.text, d.text_len, m.text, m.text_len),
		  "TOKENIZE with a model alias round trip");
	mutate_all(buf, len, "TOKENIZE with a model");
	free(buf);
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_DETOKENIZE;
	m.id = 6;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.n_ids == 0, "empty DETOKENIZE round trip");
	free(buf);
	m.ids = ids;
	m.n_ids = 5;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.n_ids == 5 &&
		  memcmp(d.ids, ids, sizeof(ids)) == 0, "DETOKENIZE round trip");
	mutate_all(buf, len, "DETOKENIZE");
	free(buf);
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_ABORT;
	m.id = 7;
	buf = encode(&m, &len);
	CHECK(buf && len == LLM_WIRE_HEADER_SIZE && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK &&
		  d.kind == LLM_WIRE_ABORT && d.id == 7, "ABORT is a bare header");
	free(buf);

	/* responses */
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_TEXT;
	m.id = 8;
	m.text = "a\0b";			/* model output may hold any byte */
	m.text_len = 3;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && str_eq(d.text, d.text_len, "a\0b", 3),
		  "TEXT with a NUL byte round trip");
	free(buf);
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_DONE;
	m.id = 9;
	m.finish_reason = LLM_FINISH_LENGTH;
	m.usage.prompt_tokens = 30;
	m.usage.cached_tokens = 16;
	m.usage.completion_tokens = 8;
	m.usage.n_preemptions = 1;
	m.usage.ttft_ms = 12.5;
	m.usage.total_ms = 99.25;
	m.scores = scores;
	m.n_scores = 2;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.finish_reason == LLM_FINISH_LENGTH &&
		  memcmp(&d.usage, &m.usage, sizeof(d.usage)) == 0 && d.n_scores == 2 &&
		  memcmp(d.scores, scores, sizeof(scores)) == 0 && ((uintptr_t) d.scores % 8) == 0,
		  "DONE with usage and scores round trip");
	mutate_all(buf, len, "DONE");
	free(buf);
	m.finish_reason = 9;
	CHECK(llm_wire_encode(&m, NULL, 0) == 0, "an unknown finish reason cannot be encoded");
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_ERROR;
	m.id = 10;
	m.sqlstate = 0x1234;
	m.text = "prompt must not be empty";
	m.text_len = strlen(m.text);
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.sqlstate == 0x1234 &&
		  str_eq(d.text, d.text_len, m.text, m.text_len), "ERROR round trip");
	free(buf);
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_TOKENS;
	m.id = 11;
	m.ids = ids;
	m.n_ids = 5;
	buf = encode(&m, &len);
	CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.n_ids == 5 &&
		  memcmp(d.ids, ids, sizeof(ids)) == 0, "TOKENS round trip");
	free(buf);

	/* VECTOR: usage and floats; malformed lengths refused */
	{
		float		vec[7] = {0.5f, -1.25f, 3.0e-8f, -0.0f, 1.0e30f, 42.0f, -7.5f};
		uint32_t	count;
		size_t		count_off;

		memset(&m, 0, sizeof(m));
		m.kind = LLM_WIRE_VECTOR;
		m.id = 12;
		m.usage.prompt_tokens = 9;
		m.usage.cached_tokens = 0;
		m.usage.total_ms = 3.5;
		m.vector = vec;
		m.n_vector = 7;
		buf = encode(&m, &len);
		CHECK(buf && llm_wire_decode(buf, len, &d, NULL, NULL) == LLM_WIRE_OK && d.kind == LLM_WIRE_VECTOR &&
			  d.n_vector == 7 && memcmp(d.vector, vec, sizeof(vec)) == 0 &&
			  memcmp(&d.usage, &m.usage, sizeof(d.usage)) == 0 && ((uintptr_t) d.vector % 4) == 0,
			  "VECTOR with usage round trip, floats bit for bit, pointed at in place");
		mutate_all(buf, len, "VECTOR");
		/* the count follows the header and the usage (4 i32, 2 f64) */
		count_off = LLM_WIRE_HEADER_SIZE + 4 * 4 + 2 * 8;
		memcpy(&count, buf + count_off, 4);
		CHECK(buf && count == 7, "the vector's count found in the message");
		count = 8;
		memcpy(buf + count_off, &count, 4);
		CHECK(llm_wire_decode(buf, len, &d, NULL, &why) == LLM_WIRE_MALFORMED && why && strstr(why, "longer"),
			  "a count one over the floats there refused (%s)", why);
		count = 6;
		memcpy(buf + count_off, &count, 4);
		CHECK(llm_wire_decode(buf, len, &d, NULL, &why) == LLM_WIRE_MALFORMED && why && strstr(why, "after"),
			  "a count one under the floats there refused (%s)", why);
		count = 0;
		memcpy(buf + count_off, &count, 4);
		CHECK(llm_wire_decode(buf, len, &d, NULL, &why) == LLM_WIRE_MALFORMED && why,
			  "an empty vector refused (%s)", why);
		count = LLM_WIRE_MAX_VECTOR + 1;
		memcpy(buf + count_off, &count, 4);
		CHECK(llm_wire_decode(buf, len, &d, NULL, &why) == LLM_WIRE_MALFORMED && why && strstr(why, "limit"),
			  "a count over LLM_WIRE_MAX_VECTOR refused (%s)", why);
		free(buf);
		m.n_vector = 0;
		CHECK(llm_wire_encode(&m, NULL, 0) == 0, "an empty vector cannot be encoded");
		m.n_vector = LLM_WIRE_MAX_VECTOR + 1;
		CHECK(llm_wire_encode(&m, NULL, 0) == 0, "a vector over LLM_WIRE_MAX_VECTOR cannot be encoded");
		m.n_vector = 3;
		m.vector = NULL;
		CHECK(llm_wire_encode(&m, NULL, 0) == 0, "a NULL vector cannot be encoded");
	}

	/* random messages with a plausible header */
	{
		unsigned char *r = malloc(4096);
		uint64_t	s = 88172645463325252ULL;
		int			ok = 0;
		int			ok_reencode = 0;

		for (int it = 0; it < 200000; it++)
		{
			size_t		n = LLM_WIRE_HEADER_SIZE + (it % 512);
			uint32_t	kind = 1 + (it % 20),
						body = (uint32_t) (n - LLM_WIRE_HEADER_SIZE);

			for (size_t i = 0; i < n; i++)
			{
				s ^= s << 13;
				s ^= s >> 7;
				s ^= s << 17;
				r[i] = (unsigned char) (it % 3 == 0 ? (s & 3) : s);
			}
			memcpy(r, &kind, 4);
			memcpy(r + 4, &body, 4);
			if (llm_wire_decode(r, n, &d, &arrays, NULL) == LLM_WIRE_OK)
			{
				ok++;
				ok_reencode += round_trips(&d, n);
			}
		}
		CHECK(ok_reencode == ok,
			  "each of the %d random messages accepted (of 200000) re-encodes to a message of its size that round-trips (%d do)",
			  ok, ok_reencode);
		free(r);
	}
	return unit_done();
}
