/*
 * protocol.c — encoding and decoding of the channel's messages
 * (protocol.h).  No PostgreSQL calls, no allocation: the encoder writes into
 * the caller's buffer, the decoder points into the caller's bytes.
 */
#include "protocol.h"

#include <string.h>

#define FLAG_PROMPT		0x01u		/* SUBMIT: a prompt string follows */
#define FLAG_SYSTEM		0x02u		/* SUBMIT: a system string follows */
#define FLAG_EOT		0x04u		/* SUBMIT: continuation_eot */
#define FLAG_GRAMMAR	0x08u		/* SUBMIT: a grammar source follows the token ids */
#define FLAG_ECHO		0x10u		/* SUBMIT: continuation_echo */
#define FLAG_TOOLS		0x20u		/* SUBMIT: a tools JSON string follows the grammar */
#define FLAG_NO_GEN		0x40u		/* SUBMIT: no_generation_prompt */
#define FLAG_THINK_ON	0x80u		/* SUBMIT: thinking 1 */
#define FLAG_THINK_OFF	0x100u		/* SUBMIT: thinking -1 */
#define FLAG_STRIP_THINK 0x200u		/* SUBMIT: strip_thinking */
#define FLAGS_KNOWN		(FLAG_PROMPT | FLAG_SYSTEM | FLAG_EOT | FLAG_GRAMMAR | FLAG_ECHO | FLAG_TOOLS | \
						 FLAG_NO_GEN | FLAG_THINK_ON | FLAG_THINK_OFF | FLAG_STRIP_THINK)

static bool
valid_mode(uint32_t v)
{
	return v == LLM_MODE_GENERATE || v == LLM_MODE_SCORE || v == LLM_MODE_EMBED || v == LLM_MODE_RENDER;
}

static bool
valid_prompt_kind(uint32_t v)
{
	return v >= LLM_PROMPT_TEXT && v <= LLM_PROMPT_TOKENS;
}

static bool
valid_priority(uint32_t v)
{
	return v < LLM_N_PRIORITIES;
}

/*
 * The embedding options travel as one u32 where the pooling alone used to:
 * bits 0-7 the pooling, bits 8-15 the normalisation, bit 16 truncate.
 */
#define EMBED_NORM_SHIFT	8
#define EMBED_TRUNCATE		(1u << 16)

static bool
valid_pooling(uint32_t v)
{
	return (v & 0xff) < LLM_N_POOLINGS && ((v >> EMBED_NORM_SHIFT) & 0xff) < LLM_N_EMBED_NORMS &&
		(v & ~(0xffffu | EMBED_TRUNCATE)) == 0;
}

static bool
valid_finish(uint32_t v)
{
	return v <= LLM_FINISH_ERROR;
}

/* ---------- writer ---------- */

typedef struct writer
{
	unsigned char *buf;
	size_t		cap;
	size_t		len;			/* bytes the message needs so far (written while <= cap) */
	bool		bad;			/* the message cannot be encoded */
} writer;

static void
put_raw(writer *w, const void *p, size_t n)
{
	if (w->buf != NULL && w->len + n <= w->cap && n > 0)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
}

/* put_u32, put_i32, put_u64, put_f64: a scalar as its bytes */
#define PUT_SCALAR(name, ctype) \
static void \
put_##name(writer *w, ctype v) \
{ \
	put_raw(w, &v, sizeof(v)); \
}
PUT_SCALAR(u32, uint32_t)
PUT_SCALAR(i32, int32_t)
PUT_SCALAR(u64, uint64_t)
PUT_SCALAR(f64, double)

static void
put_flag(writer *w, bool v)
{
	unsigned char b = v ? 1 : 0;

	put_raw(w, &b, 1);
}

/* Zero bytes up to the next multiple of align from the message start. */
static void
put_pad(writer *w, size_t align)
{
	static const unsigned char zeros[8];

	put_raw(w, zeros, (align - w->len % align) % align);
}

static void
put_len(writer *w, size_t len)
{
	if (len > UINT32_MAX)
		w->bad = true;
	put_u32(w, (uint32_t) len);
}

/* A request string: length, bytes, NUL; no NUL inside. */
static void
put_str(writer *w, const char *s, size_t len)
{
	if (s == NULL || memchr(s, '\0', len) != NULL)
	{
		w->bad = true;
		return;
	}
	put_len(w, len);
	put_raw(w, s, len);
	put_raw(w, "", 1);
}

/* Response text: length, bytes. */
static void
put_bytes(writer *w, const char *s, size_t len)
{
	if (s == NULL && len > 0)
	{
		w->bad = true;
		return;
	}
	put_len(w, len);
	put_raw(w, s, len);
}

/* A count within limit whose array must be there when it is non-zero. */
static void
put_count(writer *w, int64_t n, int64_t limit, const void *array)
{
	if (n < 0 || n > limit || (n > 0 && array == NULL))
		w->bad = true;
	put_u32(w, (uint32_t) n);
}

static void
put_ids(writer *w, const int32_t *ids, int32_t n)
{
	put_count(w, n, INT32_MAX, ids);
	put_pad(w, sizeof(int32_t));
	if (!w->bad && n > 0)
		put_raw(w, ids, (size_t) n * sizeof(int32_t));
}

/* The routing alias: a request string, empty for the default model. */
static void
put_model(writer *w, const char *model)
{
	size_t		len = model ? strlen(model) : 0;

	if (len > LLM_MAX_MODEL_ALIAS)
		w->bad = true;
	put_str(w, model ? model : "", len);
}

static void
put_request(writer *w, const llm_request *r)
{
	const llm_sampling_params *p = &r->params;
	uint32_t	flags = 0;
	uint32_t	embed;

	if (!valid_mode(r->mode) || !valid_prompt_kind(r->prompt_kind))
	{
		w->bad = true;
		return;
	}
	if (r->prompt != NULL)
		flags |= FLAG_PROMPT;
	if (r->system != NULL)
		flags |= FLAG_SYSTEM;
	if (r->continuation_eot)
		flags |= FLAG_EOT;
	if (r->grammar != NULL)
		flags |= FLAG_GRAMMAR;
	if (r->continuation_echo)
		flags |= FLAG_ECHO;
	if (r->tools != NULL)
		flags |= FLAG_TOOLS;
	if (r->no_generation_prompt)
		flags |= FLAG_NO_GEN;
	if (r->thinking > 0)
		flags |= FLAG_THINK_ON;
	else if (r->thinking < 0)
		flags |= FLAG_THINK_OFF;
	if (r->strip_thinking)
		flags |= FLAG_STRIP_THINK;
	put_u32(w, r->mode);
	put_u32(w, r->prompt_kind);
	put_u32(w, flags);
#define X(type, field) put_##type(w, p->field);
	LLM_WIRE_PARAMS(X)
#undef X
	put_count(w, p->n_stop, LLM_MAX_STOP_STRINGS, p->stop);
	put_count(w, r->n_messages, LLM_MAX_MESSAGES, r->messages);
	put_count(w, r->n_continuations, LLM_MAX_CONTINUATIONS, r->continuations);
	put_count(w, r->n_continuations, LLM_MAX_CONTINUATIONS, r->continuation_lens);
	if (w->bad)
		return;
	if (r->prompt != NULL)
		put_str(w, r->prompt, r->prompt_len);
	if (r->system != NULL)
		put_str(w, r->system, r->system_len);
	for (int i = 0; i < p->n_stop && !w->bad; i++)
		put_str(w, p->stop[i], p->stop[i] ? strlen(p->stop[i]) : 0);
	for (int i = 0; i < r->n_messages && !w->bad; i++)
	{
		const llm_chat_message *msg = &r->messages[i];

		put_str(w, msg->role, msg->role ? strlen(msg->role) : 0);
		put_str(w, msg->content, msg->content_len);
	}
	for (int i = 0; i < r->n_continuations && !w->bad; i++)
		put_str(w, r->continuations[i], r->continuation_lens[i]);
	put_ids(w, r->tokens, r->n_tokens);
	/* a grammar source is bytes (a choices source holds binary lengths) */
	if (r->grammar != NULL)
		put_bytes(w, r->grammar, r->grammar_len);
	if (r->tools != NULL)
		put_str(w, r->tools, r->tools_len);
	if ((unsigned) r->pooling >= LLM_N_POOLINGS || (unsigned) r->normalize >= LLM_N_EMBED_NORMS)
		w->bad = true;
	embed = (uint32_t) r->pooling | ((uint32_t) r->normalize << EMBED_NORM_SHIFT) | (r->truncate ? EMBED_TRUNCATE : 0);
	if (!valid_priority(r->priority) || !valid_pooling(embed))
		w->bad = true;
	if (r->continuation_answers < 0 || r->continuation_answers > r->n_continuations)
		w->bad = true;
	put_u32(w, (uint32_t) r->continuation_answers);
	put_u32(w, embed);
	put_u32(w, r->priority);
}

/* The usage of a final answer (DONE, VECTOR). */
static void
put_usage(writer *w, const llm_usage *u)
{
	put_i32(w, u->prompt_tokens);
	put_i32(w, u->cached_tokens);
	put_i32(w, u->completion_tokens);
	put_i32(w, u->n_preemptions);
	put_f64(w, u->ttft_ms);
	put_f64(w, u->total_ms);
}

size_t
llm_wire_encode(const llm_wire_msg *m, void *buf, size_t cap)
{
	writer		w = {buf, cap, 0, false};
	size_t		body;

	put_u32(&w, m->kind);
	put_u32(&w, 0);				/* body_len, set below */
	put_u64(&w, m->id);
	switch (m->kind)
	{
		case LLM_WIRE_SUBMIT:
			put_request(&w, &m->request);
			put_u32(&w, m->role_id);
			put_u32(&w, m->database_id);
			put_i32(&w, m->client.pid);
			put_u32(&w, m->client.role);
			put_u32(&w, m->client.database);
			put_model(&w, m->request.model);
			break;
		case LLM_WIRE_TOKENIZE:
			put_str(&w, m->text, m->text_len);
			put_model(&w, m->model);
			break;
		case LLM_WIRE_DETOKENIZE:
			put_ids(&w, m->ids, m->n_ids);
			put_model(&w, m->model);
			break;
		case LLM_WIRE_TOKENS:
			put_ids(&w, m->ids, m->n_ids);
			break;
		case LLM_WIRE_ABORT:
			break;
		case LLM_WIRE_TEXT:
			put_bytes(&w, m->text, m->text_len);
			break;
		case LLM_WIRE_DONE:
			if (!valid_finish(m->finish_reason))
				w.bad = true;
			put_u32(&w, m->finish_reason);
			put_usage(&w, &m->usage);
			put_count(&w, m->n_scores, LLM_MAX_CONTINUATIONS, m->scores);
			put_pad(&w, sizeof(double));
			if (!w.bad && m->n_scores > 0)
				put_raw(&w, m->scores, (size_t) m->n_scores * sizeof(double));
			break;
		case LLM_WIRE_ERROR:
			put_i32(&w, m->sqlstate);
			put_bytes(&w, m->text, m->text_len);
			break;
		case LLM_WIRE_VECTOR:
			put_usage(&w, &m->usage);
			if (m->n_vector < 1)
				w.bad = true;
			put_count(&w, m->n_vector, LLM_WIRE_MAX_VECTOR, m->vector);
			put_pad(&w, sizeof(float));
			if (!w.bad)
				put_raw(&w, m->vector, (size_t) m->n_vector * sizeof(float));
			break;
		default:
			w.bad = true;
	}
	if (w.bad)
		return 0;
	body = w.len - LLM_WIRE_HEADER_SIZE;
	if (body > UINT32_MAX)
		return 0;
	if (buf != NULL && w.len <= cap)
	{
		uint32_t	b = (uint32_t) body;

		memcpy((unsigned char *) buf + sizeof(uint32_t), &b, sizeof(b));
	}
	return w.len;
}

/* ---------- reader ---------- */

typedef struct reader
{
	const unsigned char *base;
	size_t		len;
	size_t		pos;
	const char *why;			/* first defect */
} reader;

static bool
fail(reader *r, const char *why)
{
	if (r->why == NULL)
		r->why = why;
	return false;
}

static bool
get_raw(reader *r, void *out, size_t n)
{
	if (r->len - r->pos < n)
		return fail(r, "message truncated");
	memcpy(out, r->base + r->pos, n);
	r->pos += n;
	return true;
}

/* get_u32, get_i32, get_u64, get_f64: a scalar from its bytes */
#define GET_SCALAR(name, ctype) \
static bool \
get_##name(reader *r, ctype *v) \
{ \
	return get_raw(r, v, sizeof(*v)); \
}
GET_SCALAR(u32, uint32_t)
GET_SCALAR(i32, int32_t)
GET_SCALAR(u64, uint64_t)
GET_SCALAR(f64, double)

static bool
get_flag(reader *r, bool *v)
{
	unsigned char b;

	if (!get_raw(r, &b, 1))
		return false;
	if (b > 1)
		return fail(r, "flag byte neither 0 nor 1");
	*v = b == 1;
	return true;
}

static bool
get_pad(reader *r, size_t align)
{
	size_t		n = (align - r->pos % align) % align;

	if (r->len - r->pos < n)
		return fail(r, "message truncated");
	r->pos += n;
	return true;
}

static bool
get_count(reader *r, uint32_t limit, int32_t *n)
{
	uint32_t	v;

	if (!get_u32(r, &v))
		return false;
	if (v > limit)
		return fail(r, "count over its limit");
	*n = (int32_t) v;
	return true;
}

static bool
get_str(reader *r, const char **s, size_t *len)
{
	uint32_t	n;
	const char *p;

	if (!get_u32(r, &n))
		return false;
	if (r->len - r->pos < (size_t) n + 1)
		return fail(r, "string longer than the message");
	p = (const char *) r->base + r->pos;
	if (p[n] != '\0')
		return fail(r, "string without its NUL terminator");
	if (memchr(p, '\0', n) != NULL)
		return fail(r, "string with a NUL byte");
	*s = p;
	*len = n;
	r->pos += (size_t) n + 1;
	return true;
}

static bool
get_bytes(reader *r, const char **s, size_t *len)
{
	uint32_t	n;

	if (!get_u32(r, &n))
		return false;
	if (r->len - r->pos < n)
		return fail(r, "text longer than the message");
	*s = (const char *) r->base + r->pos;
	*len = n;
	r->pos += n;
	return true;
}

/* An array of n elements of size elem at an aligned offset, pointed at in place. */
static bool
get_array(reader *r, int32_t n, size_t elem, const void **out)
{
	if (!get_pad(r, elem))
		return false;
	if ((r->len - r->pos) / elem < (size_t) n)
		return fail(r, "array longer than the message");
	*out = n > 0 ? r->base + r->pos : NULL;
	r->pos += (size_t) n * elem;
	return true;
}

static bool
get_ids(reader *r, const int32_t **ids, int32_t *n)
{
	const void *p;

	if (!get_count(r, INT32_MAX, n) || !get_array(r, *n, sizeof(int32_t), &p))
		return false;
	*ids = p;
	return true;
}

/* The routing alias: NULL when empty. */
static bool
get_model(reader *r, const char **model)
{
	size_t		len;

	if (!get_str(r, model, &len))
		return false;
	if (len > LLM_MAX_MODEL_ALIAS)
		return fail(r, "model alias too long");
	if (len == 0)
		*model = NULL;
	return true;
}

static bool
get_request(reader *r, llm_request *q, llm_wire_arrays *a)
{
	llm_sampling_params *p = &q->params;
	uint32_t	mode,
				kind,
				flags;
	int32_t		n_stop,
				n_messages,
				n_cont,
				n_cont_lens;
	size_t		len;

	memset(q, 0, sizeof(*q));
	if (!get_u32(r, &mode) || !get_u32(r, &kind) || !get_u32(r, &flags))
		return false;
	if (!valid_mode(mode))
		return fail(r, "unknown request mode");
	if (!valid_prompt_kind(kind))
		return fail(r, "unknown prompt kind");
	if (flags & ~FLAGS_KNOWN)
		return fail(r, "unknown request flags");
	q->mode = (llm_request_mode) mode;
	q->prompt_kind = (llm_prompt_kind) kind;
	q->continuation_eot = (flags & FLAG_EOT) != 0;
	q->continuation_echo = (flags & FLAG_ECHO) != 0;
#define X(type, field) if (!get_##type(r, &p->field)) return false;
	LLM_WIRE_PARAMS(X)
#undef X
	if (!get_count(r, LLM_MAX_STOP_STRINGS, &n_stop) ||
		!get_count(r, LLM_MAX_MESSAGES, &n_messages) ||
		!get_count(r, LLM_MAX_CONTINUATIONS, &n_cont) ||
		!get_count(r, LLM_MAX_CONTINUATIONS, &n_cont_lens))
		return false;
	if (n_cont != n_cont_lens)
		return fail(r, "continuation counts differ");
	if ((flags & FLAG_PROMPT) && !get_str(r, &q->prompt, &q->prompt_len))
		return false;
	if ((flags & FLAG_SYSTEM) && !get_str(r, &q->system, &q->system_len))
		return false;
	for (int i = 0; i < n_stop; i++)
		if (!get_str(r, &a->stop[i], &len))
			return false;
	p->n_stop = n_stop;
	p->stop = n_stop > 0 ? a->stop : NULL;
	for (int i = 0; i < n_messages; i++)
	{
		llm_chat_message *msg = &a->messages[i];

		if (!get_str(r, &msg->role, &len) || !get_str(r, &msg->content, &msg->content_len))
			return false;
	}
	q->n_messages = n_messages;
	q->messages = n_messages > 0 ? a->messages : NULL;
	for (int i = 0; i < n_cont; i++)
		if (!get_str(r, &a->continuations[i], &a->continuation_lens[i]))
			return false;
	q->n_continuations = n_cont;
	q->continuations = n_cont > 0 ? a->continuations : NULL;
	q->continuation_lens = n_cont > 0 ? a->continuation_lens : NULL;
	if (!get_ids(r, &q->tokens, &q->n_tokens))
		return false;
	if ((flags & FLAG_GRAMMAR) && !get_bytes(r, &q->grammar, &q->grammar_len))
		return false;
	if ((flags & FLAG_TOOLS) && !get_str(r, &q->tools, &q->tools_len))
		return false;
	if ((flags & FLAG_THINK_ON) && (flags & FLAG_THINK_OFF))
		return fail(r, "enable_thinking both on and off");
	q->no_generation_prompt = (flags & FLAG_NO_GEN) != 0;
	q->thinking = (flags & FLAG_THINK_ON) ? 1 : (flags & FLAG_THINK_OFF) ? -1 : 0;
	q->strip_thinking = (flags & FLAG_STRIP_THINK) != 0;
	{
		uint32_t	answers;

		if (!get_u32(r, &answers))
			return false;
		if (answers > (uint32_t) q->n_continuations)
			return fail(r, "more continuation answers than continuations");
		q->continuation_answers = (int32_t) answers;
	}
	{
		uint32_t	pooling;

		if (!get_u32(r, &pooling))
			return false;
		if (!valid_pooling(pooling))
			return fail(r, "unknown pooling, normalisation or embedding flag");
		q->pooling = (llm_pooling) (pooling & 0xff);
		q->normalize = (llm_embed_norm) ((pooling >> EMBED_NORM_SHIFT) & 0xff);
		q->truncate = (pooling & EMBED_TRUNCATE) != 0;
	}
	{
		uint32_t	prio;

		if (!get_u32(r, &prio))
			return false;
		if (!valid_priority(prio))
			return fail(r, "unknown priority");
		q->priority = (llm_priority) prio;
	}
	return true;
}

static bool
get_usage(reader *r, llm_usage *u)
{
	return get_i32(r, &u->prompt_tokens) &&
		get_i32(r, &u->cached_tokens) &&
		get_i32(r, &u->completion_tokens) &&
		get_i32(r, &u->n_preemptions) &&
		get_f64(r, &u->ttft_ms) &&
		get_f64(r, &u->total_ms);
}

/* VECTOR: usage, then 1..LLM_WIRE_MAX_VECTOR floats in place. */
static bool
get_vector(reader *r, llm_wire_msg *m)
{
	const void *v;

	if (!get_usage(r, &m->usage) || !get_count(r, LLM_WIRE_MAX_VECTOR, &m->n_vector))
		return false;
	if (m->n_vector < 1)
		return fail(r, "empty vector");
	if (!get_array(r, m->n_vector, sizeof(float), &v))
		return false;
	m->vector = v;
	return true;
}

static bool
get_done(reader *r, llm_wire_msg *m)
{
	uint32_t	finish;
	const void *scores;

	if (!get_u32(r, &finish))
		return false;
	if (!valid_finish(finish))
		return fail(r, "unknown finish reason");
	m->finish_reason = (llm_finish_reason) finish;
	if (!get_usage(r, &m->usage) ||
		!get_count(r, LLM_MAX_CONTINUATIONS, &m->n_scores) ||
		!get_array(r, m->n_scores, sizeof(double), &scores))
		return false;
	m->scores = scores;
	return true;
}

static bool
get_body(reader *r, llm_wire_msg *m, llm_wire_arrays *arrays)
{
	switch (m->kind)
	{
		case LLM_WIRE_SUBMIT:
			if (arrays == NULL)
				return fail(r, "no room for a request's arrays");
			if (!get_request(r, &m->request, arrays) || !get_u32(r, &m->role_id) ||
				!get_u32(r, &m->database_id) ||
				!get_i32(r, &m->client.pid) || !get_u32(r, &m->client.role) ||
				!get_u32(r, &m->client.database) || !get_model(r, &m->request.model))
				return false;
			m->model = m->request.model;
			return true;
		case LLM_WIRE_TOKENIZE:
			return get_str(r, &m->text, &m->text_len) && get_model(r, &m->model);
		case LLM_WIRE_DETOKENIZE:
			return get_ids(r, &m->ids, &m->n_ids) && get_model(r, &m->model);
		case LLM_WIRE_TOKENS:
			return get_ids(r, &m->ids, &m->n_ids);
		case LLM_WIRE_ABORT:
			return true;
		case LLM_WIRE_TEXT:
			return get_bytes(r, &m->text, &m->text_len);
		case LLM_WIRE_DONE:
			return get_done(r, m);
		case LLM_WIRE_ERROR:
			return get_i32(r, &m->sqlstate) && get_bytes(r, &m->text, &m->text_len);
		case LLM_WIRE_VECTOR:
			return get_vector(r, m);
	}
	return fail(r, "unknown message kind");
}

llm_wire_result
llm_wire_decode(const void *data, size_t len, llm_wire_msg *m, llm_wire_arrays *arrays,
				const char **why)
{
	reader		r = {data, len, 0, NULL};
	uint32_t	kind,
				body_len;

	memset(m, 0, sizeof(*m));
	if (why)
		*why = NULL;
	if (data == NULL || ((uintptr_t) data % 8) != 0)
	{
		if (why)
			*why = "message not 8-byte aligned";
		return LLM_WIRE_NO_HEADER;
	}
	if (!get_u32(&r, &kind) || !get_u32(&r, &body_len) || !get_u64(&r, &m->id))
	{
		if (why)
			*why = "message shorter than its header";
		return LLM_WIRE_NO_HEADER;
	}
	m->kind = (llm_wire_kind) kind;
	if ((size_t) body_len != len - LLM_WIRE_HEADER_SIZE)
		fail(&r, "body length differs from the message's");
	else if (get_body(&r, m, arrays) && r.pos != len)
		fail(&r, "bytes after the body");
	if (r.why != NULL)
	{
		uint64_t	id = m->id;

		memset(m, 0, sizeof(*m));
		m->kind = (llm_wire_kind) kind;
		m->id = id;
		if (why)
			*why = r.why;
		return LLM_WIRE_MALFORMED;
	}
	return LLM_WIRE_OK;
}
