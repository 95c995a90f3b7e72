/*
 * intake.c — request intake and event routing of the worker (intake.h).
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "engine/grammar/grammar.h"
#include "intake.h"
#include "common/registry.h"
#include "channel/protocol.h"
#include "channel/mailbox.h"
#include "common/sqlstate.h"
#include "common/stats.h"
#include "channel/server.h"

typedef struct WorkerRequest WorkerRequest;

/* How a request ended, as the statistics count it. */
typedef enum RequestOutcome
{
	OUTCOME_FINISHED,			/* the engine finished it (a grammar cut included) */
	OUTCOME_FAILED,				/* refused, or failed in the engine */
	OUTCOME_ABORTED				/* its client aborted or cancelled it, or it went back to the store */
} RequestOutcome;

/*
 * Where a request's answers go: the channel of the backend that sent it
 * (its outbox, sent after the statistics are published by wch_flush_all),
 * or, for an asynchronous request, its entry of the result store (the
 * output collected here, the end stored by intake_async_deliver after the
 * statistics are published).  Every answer of every path goes through its
 * request's sink; the statistics and the request's memory through
 * finish_request.
 */
typedef struct RequestSink
{
	/* output text of r (len 0: nothing to add) */
	void		(*text) (WorkerRequest *r, const char *text, size_t len);
	/* the final answer of a finished request: finish reason, usage, scores of ev */
	void		(*done) (WorkerRequest *r, const llm_event *ev);
	/* the final answer of an llm_tokenize() request: its ids */
	void		(*tokens) (WorkerRequest *r, const int32 *ids, int64 n);
	/* the final answer of an EMBED request: its vector and usage (ev) */
	void		(*vector) (WorkerRequest *r, const llm_event *ev);
	/* the final answer of a failed request */
	void		(*error) (WorkerRequest *r, int sqlstate, const char *message);

	/*
	 * r's engine is being destroyed: answer it with the error (a channel's
	 * request: OUTCOME_FAILED), or give it back to the store's queue so
	 * that the next engine of its alias runs it (OUTCOME_ABORTED)
	 */
	RequestOutcome (*engine_gone) (WorkerRequest *r, int sqlstate, const char *message);
} RequestSink;

/* A request the intake holds: from its arrival to its final answer, abort or drop. */
struct WorkerRequest
{
	dlist_node	node;			/* in its slot's list, async_requests or async_ended */
	const RequestSink *sink;
	int			slot;			/* ASYNC_SLOT: an asynchronous request (mailbox.h) */
	uint64		client_id;		/* the backend's id, or the store entry's id */
	uint64		engine_id;
	llm_engine *engine;			/* the model's engine it lives in */
	bool		in_engine;		/* the engine accepted it: it counts in llm_usage when it ends */
	int			model;			/* its model's row (registry.h), -1 none */
	bool		grammar;		/* constrained: a length finish is no valid result */
	uint8		grammar_kind;	/* its llm_grammar_kind (the source's first byte), for messages */
	bool		tokenize;		/* an llm_tokenize() text: ends with TOKENS, no statistics */
	int32		max_tokens;
	Oid			role;			/* accounting tags of the request (protocol.h) */
	Oid			database;
	llm_priority priority;		/* the request's class, counted in llm_usage */
	int32		n_tokens_out;	/* tokens generated so far (TEXT events) */
	llm_wire_client client;		/* its submitter */
	int			async_index;	/* asynchronous: the store entry */
	StringInfoData text;		/* asynchronous: the output so far */
	/*
	 * asynchronous, answered: in async_ended until intake_async_deliver
	 * stores the outcome (finish_request leaves it there)
	 */
	bool		answer_pending;
	llm_finish_reason end_reason;
	llm_usage	end_usage;
	int			end_sqlstate;	/* 0: finished, end_reason and end_usage; else failed */
	char	   *end_message;	/* failed: the message (intake_cxt) */
};

#define ASYNC_SLOT (-1)

/* how many store entries one look at the store takes at most */
#define ASYNC_TAKE_BATCH 64

static MemoryContext intake_cxt;
static dlist_head *slot_requests;	/* per slot: its WorkerRequests */
static dlist_head async_requests;	/* the asynchronous ones */
static dlist_head async_ended;	/* asynchronous ones ended, their outcome not yet stored */
static int	n_slots;
static IntakeRouteFn route;
static uint64 next_engine_id = 1;

/* Where a decoded request's arrays live until llm_engine_submit has copied them. */
static llm_wire_arrays wire_arrays;

static const RequestSink channel_sink;
static const RequestSink mailbox_sink;

void
intake_init(int slots, MemoryContext cxt, IntakeRouteFn route_fn)
{
	route = route_fn;
	intake_cxt = cxt;
	n_slots = slots;
	slot_requests = MemoryContextAlloc(cxt, sizeof(dlist_head) * slots);
	for (int i = 0; i < slots; i++)
		dlist_init(&slot_requests[i]);
	dlist_init(&async_requests);
	dlist_init(&async_ended);
}

/*
 * A request arriving with id on slot's channel (or ASYNC_SLOT: the store's
 * entry index), listed there at once so that every path ends it with
 * finish_request; not yet in an engine (model -1).
 */
static WorkerRequest *
new_request(int slot, uint64 id, int async_index)
{
	WorkerRequest *r = MemoryContextAllocZero(intake_cxt, sizeof(WorkerRequest));

	r->slot = slot;
	r->client_id = id;
	r->model = -1;
	if (slot == ASYNC_SLOT)
	{
		r->sink = &mailbox_sink;
		r->async_index = async_index;
		dlist_push_tail(&async_requests, &r->node);
	}
	else
	{
		r->sink = &channel_sink;
		dlist_push_tail(&slot_requests[slot], &r->node);
	}
	return r;
}

static void
free_request(WorkerRequest *r)
{
	dlist_delete(&r->node);
	if (r->text.data)
		pfree(r->text.data);
	if (r->end_message)
		pfree(r->end_message);
	pfree(r);
}

/*
 * Whether the request of an ERROR event had been queued: every queued
 * request has prompt ids; one whose prompt failed on the tokenizer thread
 * has none and, like a submission refused at once, is no request in
 * llm_usage.
 */
static bool
queued(const llm_event *ev)
{
	return ev->usage.prompt_tokens > 0;
}

/*
 * The one end of every request, after its sink has its answer (or, aborted,
 * none): its usage noted (a request the engine accepted counts in
 * llm_usage: by its final event's usage, or by the tokens it produced when
 * it ends without one, ev NULL), its outcome noted, and it is freed (an
 * asynchronous answer waits in async_ended for intake_async_deliver).  An
 * llm_tokenize() request is in no statistics.
 */
static void
finish_request(WorkerRequest *r, RequestOutcome outcome, const llm_event *ev)
{
	if (!r->tokenize)
	{
		if (ev != NULL)
		{
			if (ev->kind == LLM_EVENT_FINISHED || ev->kind == LLM_EVENT_VECTOR || queued(ev))
				llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
		}
		else if (r->in_engine)
			llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
		switch (outcome)
		{
			case OUTCOME_FINISHED:
				Assert(ev != NULL);	/* only the engine finishes a counted request */
				llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage, &r->client);
				break;
			case OUTCOME_FAILED:
				llm_stats_note_failed(r->model, &r->client);
				break;
			case OUTCOME_ABORTED:
				llm_stats_note_aborted(r->model, &r->client);
				break;
		}
	}
	if (!r->answer_pending)
		free_request(r);
}

/* r failed with status st: its sink's ERROR answer (err, or the status's name) */
static void
answer_status(WorkerRequest *r, llm_status st, const char *err)
{
	r->sink->error(r, llm_status_sqlstate(st), err && err[0] ? err : llm_status_name(st));
}

/* ---------- the channel sink: the slot's outbox ---------- */

static void
channel_text(WorkerRequest *r, const char *text, size_t len)
{
	llm_wire_msg m;

	if (len == 0)
		return;
	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_TEXT;
	m.id = r->client_id;
	m.text = text;
	m.text_len = len;
	wch_queue(r->slot, &m);
}

static void
channel_done(WorkerRequest *r, const llm_event *ev)
{
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_DONE;
	m.id = r->client_id;
	m.finish_reason = ev->finish_reason;
	m.usage = ev->usage;
	m.scores = ev->scores;
	m.n_scores = ev->n_scores;
	wch_queue(r->slot, &m);
}

static void
channel_tokens(WorkerRequest *r, const int32 *ids, int64 n)
{
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_TOKENS;
	m.id = r->client_id;
	m.ids = (int32 *) ids;
	m.n_ids = (int32) n;
	wch_queue(r->slot, &m);
}

static void
channel_vector(WorkerRequest *r, const llm_event *ev)
{
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_VECTOR;
	m.id = r->client_id;
	m.usage = ev->usage;
	m.vector = ev->vector;
	m.n_vector = ev->n_vector;
	wch_queue(r->slot, &m);
}

static void
channel_error(WorkerRequest *r, int sqlstate, const char *message)
{
	wch_queue_error(r->slot, r->client_id, sqlstate, message);
}

static RequestOutcome
channel_engine_gone(WorkerRequest *r, int sqlstate, const char *message)
{
	channel_error(r, sqlstate, message);
	return OUTCOME_FAILED;
}

static const RequestSink channel_sink = {
	.text = channel_text,
	.done = channel_done,
	.tokens = channel_tokens,
	.vector = channel_vector,
	.error = channel_error,
	.engine_gone = channel_engine_gone,
};

/* ---------- the mailbox sink: the result store's entry ---------- */

/*
 * r is answered in this engine step: its outcome kept for
 * intake_async_deliver, which stores it after the statistics are published
 * (a backend that sees the result in the store then sees it counted).
 */
static void
mailbox_end(WorkerRequest *r, int sqlstate, const char *message)
{
	r->end_sqlstate = sqlstate;
	if (sqlstate != 0)
		r->end_message = MemoryContextStrdup(intake_cxt, message);
	r->answer_pending = true;
	dlist_delete(&r->node);
	dlist_push_tail(&async_ended, &r->node);
}

static void
mailbox_text(WorkerRequest *r, const char *text, size_t len)
{
	appendBinaryStringInfo(&r->text, text, len);
}

static void
mailbox_done(WorkerRequest *r, const llm_event *ev)
{
	r->end_reason = ev->finish_reason;
	r->end_usage = ev->usage;
	mailbox_end(r, 0, NULL);
}

static void
mailbox_error(WorkerRequest *r, int sqlstate, const char *message)
{
	mailbox_end(r, sqlstate, message);
}

/* an asynchronous result is text: no SQL function submits an EMBED request this way */
static void
mailbox_vector(WorkerRequest *r, const llm_event *ev)
{
	mailbox_end(r, ERRCODE_FEATURE_NOT_SUPPORTED, "an asynchronous request cannot keep a vector answer");
}

static RequestOutcome
mailbox_engine_gone(WorkerRequest *r, int sqlstate, const char *message)
{
	/* asynchronous requests outlive the engine: routed again, the next engine of their alias runs them */
	llm_async_requeue(r->async_index, r->client_id);
	return OUTCOME_ABORTED;
}

/* asynchronous requests are never llm_tokenize() requests: no tokens */
static const RequestSink mailbox_sink = {
	.text = mailbox_text,
	.done = mailbox_done,
	.tokens = NULL,
	.vector = mailbox_vector,
	.error = mailbox_error,
	.engine_gone = mailbox_engine_gone,
};

/* ---------- requests ---------- */

/*
 * Hand m's request to engine (model row model) as r; on refusal r is
 * answered and ended.
 */
static void
engine_submit(WorkerRequest *r, const llm_wire_msg *m, llm_engine *engine, int model)
{
	llm_request req = m->request;
	char		err[LLM_MODEL_ERROR_LEN + 128];
	llm_status	st;

	r->engine_id = next_engine_id++;
	r->engine = engine;
	r->model = model;
	r->client = m->client;
	r->grammar = m->request.grammar != NULL;
	r->grammar_kind = r->grammar && m->request.grammar_len > 0 ? (uint8) m->request.grammar[0] : 0;
	r->max_tokens = m->request.params.max_tokens;
	r->role = m->role_id;
	r->database = m->database_id;
	r->priority = m->request.priority;
	r->n_tokens_out = 0;
	/*
	 * fair share among sessions (scheduler.h): every channel is one; the
	 * asynchronous requests of one submitting backend are one more, after
	 * the channels' numbers
	 */
	if (r->slot == ASYNC_SLOT)
		req.session = (uint64) n_slots + 1 + (uint32) m->client.pid;
	else
		req.session = (uint64) r->slot + 1;
	err[0] = '\0';
	st = llm_engine_submit(engine, r->engine_id, &req, r, err, sizeof(err));
	if (st != LLM_OK)
	{
		answer_status(r, st, err);
		finish_request(r, OUTCOME_FAILED, NULL);
		return;
	}
	r->in_engine = true;
	if (r->slot == ASYNC_SLOT)
	{
		MemoryContext old = MemoryContextSwitchTo(intake_cxt);

		initStringInfo(&r->text);
		MemoryContextSwitchTo(old);
	}
}

/*
 * llm_tokenize(): a short text is answered now; a long one is tokenized on
 * the engine's tokenizer thread as a request of its own, answered from its
 * TOKENS or ERROR event, so the steps of every other session go on
 * meanwhile.
 */
static void
tokenize(int slot, const llm_wire_msg *m, llm_engine *engine, int model)
{
	WorkerRequest *r = new_request(slot, m->id, 0);
	int32	   *ids;
	int64		n;
	char		err[LLM_MODEL_ERROR_LEN + 128];
	llm_status	st;

	r->engine_id = next_engine_id++;
	r->engine = engine;
	r->model = model;
	r->client = m->client;
	r->tokenize = true;
	err[0] = '\0';
	st = llm_engine_tokenize_request(engine, r->engine_id, m->text, m->text_len, r, &ids, &n,
									 err, sizeof(err));
	if (st != LLM_OK)
	{
		answer_status(r, st, err);
		finish_request(r, OUTCOME_FAILED, NULL);
		return;
	}
	if (ids != NULL)
	{
		r->sink->tokens(r, ids, n);
		free(ids);
		finish_request(r, OUTCOME_FINISHED, NULL);
		return;
	}
	r->in_engine = true;
}

/* llm_detokenize(): answered at once, no request in the engine. */
static void
detokenize(int slot, const llm_wire_msg *m, llm_engine *engine)
{
	char	   *text;
	int64		len;
	char		err[256];
	llm_wire_msg out;

	err[0] = '\0';
	len = llm_engine_detokenize(engine, m->ids, m->n_ids, &text, err, sizeof(err));
	if (len < 0)
	{
		wch_queue_error(slot, m->id, llm_status_sqlstate(LLM_ERR_INVALID_PARAM),
						err[0] ? err : llm_status_name(LLM_ERR_INVALID_PARAM));
		return;
	}
	memset(&out, 0, sizeof(out));
	out.id = m->id;
	if (len > 0)
	{
		out.kind = LLM_WIRE_TEXT;
		out.text = text;
		out.text_len = len;
		wch_queue(slot, &out);
	}
	free(text);
	out.kind = LLM_WIRE_DONE;
	out.text = NULL;
	out.text_len = 0;
	wch_queue(slot, &out);
}

/*
 * llm_render_chat(), llm_count_tokens(): a RENDER request answered at once,
 * no request in the engine: the prompt's text, then DONE with its token
 * count as usage.prompt_tokens (in no statistics: nothing ran).
 */
static void
render(int slot, const llm_wire_msg *m, llm_engine *engine)
{
	char	   *text;
	size_t		len;
	int64		n;
	char		err[1100];
	llm_wire_msg out;

	err[0] = '\0';
	n = llm_engine_render(engine, &m->request, &text, &len, err, sizeof(err));
	if (n < 0)
	{
		wch_queue_error(slot, m->id, llm_status_sqlstate(LLM_ERR_INVALID_PARAM),
						err[0] ? err : llm_status_name(LLM_ERR_INVALID_PARAM));
		return;
	}
	memset(&out, 0, sizeof(out));
	out.id = m->id;
	if (len > 0)
	{
		out.kind = LLM_WIRE_TEXT;
		out.text = text;
		out.text_len = len;
		wch_queue(slot, &out);
	}
	free(text);
	out.kind = LLM_WIRE_DONE;
	out.text = NULL;
	out.text_len = 0;
	out.finish_reason = LLM_FINISH_STOP;
	out.usage.prompt_tokens = (int32) Min(n, PG_INT32_MAX);
	wch_queue(slot, &out);
}

/* r leaves its engine unanswered: its client aborted or cancelled it, or went away. */
static void
abort_in_engine(WorkerRequest *r)
{
	llm_engine_abort(r->engine, r->engine_id);
	finish_request(r, OUTCOME_ABORTED, NULL);
}

static void
abort_request(int slot, uint64 client_id)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &slot_requests[slot])
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		if (r->client_id == client_id)
		{
			abort_in_engine(r);
			return;
		}
	}
}

void
intake_message(int slot, const void *data, Size len)
{
	llm_wire_msg m;
	const char *why;
	llm_engine *engine = NULL;
	int			model = -1;

	switch (llm_wire_decode(data, len, &m, &wire_arrays, &why))
	{
		case LLM_WIRE_NO_HEADER:
			ereport(LOG, (errmsg("llm worker: malformed request from process %d", wch_pid(slot)),
						  errdetail("%s", why)));
			wch_mark_gone(slot);
			return;
		case LLM_WIRE_MALFORMED:
			wch_queue_error(slot, m.id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
			return;
		case LLM_WIRE_OK:
			break;
	}
	if (m.kind == LLM_WIRE_ABORT)
	{
		abort_request(slot, m.id);
		return;
	}
	if (m.kind == LLM_WIRE_SUBMIT || m.kind == LLM_WIRE_TOKENIZE || m.kind == LLM_WIRE_DETOKENIZE)
	{
		int			sqlstate;
		char		msg[LLM_MODEL_ERROR_LEN + 128];

		engine = route(m.model, &model, &sqlstate, msg, sizeof(msg));
		if (engine == NULL)
		{
			/* no model can serve it: the router's error (model: its row, or -1) */
			WorkerRequest *r = new_request(slot, m.id, 0);

			r->model = model;
			r->client = m.client;
			if (r->client.pid == 0)
				r->client.pid = wch_pid(slot);
			r->sink->error(r, sqlstate, msg);
			finish_request(r, OUTCOME_FAILED, NULL);
			llm_stats_note_change();
			return;
		}
	}
	switch (m.kind)
	{
		case LLM_WIRE_SUBMIT:
			if (m.request.mode == LLM_MODE_RENDER && slot != ASYNC_SLOT)
				render(slot, &m, engine);
			else
				engine_submit(new_request(slot, m.id, 0), &m, engine, model);
			break;
		case LLM_WIRE_TOKENIZE:
			tokenize(slot, &m, engine, model);
			break;
		case LLM_WIRE_DETOKENIZE:
			detokenize(slot, &m, engine);
			break;
		default:
			wch_queue_error(slot, m.id, ERRCODE_PROTOCOL_VIOLATION, "unknown llm request kind");
	}
	llm_stats_note_change();
}

void
intake_abort_slot(int slot)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &slot_requests[slot])
		abort_in_engine(dlist_container(WorkerRequest, node, it.cur));
	llm_stats_note_change();
}

/* r's engine e is being destroyed: r answered or given back by its sink. */
static void
engine_gone(WorkerRequest *r, llm_engine *e, int sqlstate, const char *message)
{
	llm_engine_abort(e, r->engine_id);
	finish_request(r, r->sink->engine_gone(r, sqlstate, message), NULL);
}

void
intake_fail_engine(llm_engine *e, int sqlstate, const char *message)
{
	dlist_mutable_iter it;

	for (int i = 0; i < n_slots; i++)
	{
		dlist_foreach_modify(it, &slot_requests[i])
		{
			WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

			if (r->engine == e)
				engine_gone(r, e, sqlstate, message);
		}
	}
	dlist_foreach_modify(it, &async_requests)
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		if (r->engine == e)
			engine_gone(r, e, sqlstate, message);
	}
	llm_stats_note_change();
}

/* ---------- asynchronous requests ---------- */

static WorkerRequest *
async_request(uint64 id)
{
	dlist_iter	it;

	dlist_foreach(it, &async_requests)
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		if (r->client_id == id)
			return r;
	}
	return NULL;
}

/* One entry taken from the store: decode its SUBMIT message and start it. */
static void
async_submit(const LlmAsyncTaken *t)
{
	llm_wire_msg m;
	const char *why;
	char		err[LLM_MODEL_ERROR_LEN + 128];
	WorkerRequest *r = new_request(ASYNC_SLOT, t->id, t->index);
	llm_engine *engine;
	int			model;
	int			sqlstate;

	if (llm_wire_decode(t->request, t->request_len, &m, &wire_arrays, &why) != LLM_WIRE_OK ||
		m.kind != LLM_WIRE_SUBMIT)
	{
		r->sink->error(r, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
		finish_request(r, OUTCOME_FAILED, NULL);
		return;
	}
	engine = route(m.model, &model, &sqlstate, err, sizeof(err));
	if (engine == NULL)
	{
		r->model = model;
		r->client = m.client;
		r->sink->error(r, sqlstate, err);
		finish_request(r, OUTCOME_FAILED, NULL);
		return;
	}
	engine_submit(r, &m, engine, model);
}

void
intake_async(uint32 generation)
{
	LlmAsyncTaken taken[ASYNC_TAKE_BATCH];
	LlmAsyncTaken cancel[ASYNC_TAKE_BATCH];
	bool		more = true;

	while (more)
	{
		int			n_cancel;
		int			n = llm_async_take(generation, taken, ASYNC_TAKE_BATCH, &more, cancel, &n_cancel);

		for (int i = 0; i < n; i++)
			async_submit(&taken[i]);
		for (int i = 0; i < n_cancel; i++)
		{
			WorkerRequest *r = async_request(cancel[i].id);

			llm_async_cancelled(cancel[i].index, cancel[i].id);
			if (r != NULL)
				abort_in_engine(r);
		}
		if (n > 0 || n_cancel > 0)
			llm_stats_note_change();
	}
}

void
intake_async_deliver(void)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &async_ended)
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		if (r->end_sqlstate != 0)
			llm_async_fail(r->async_index, r->client_id, r->end_sqlstate, r->end_message);
		else
			llm_async_finish(r->async_index, r->client_id, r->text.data, r->text.len,
							 r->end_reason, &r->end_usage);
		free_request(r);
	}
}

/* ---------- engine events ---------- */

/*
 * A constrained request cut before its output was complete under its
 * grammar: the text is not a valid result, so it is not returned as one
 * (the request still finished with "length" in the stats); true with the
 * error's message in msg: where it was cut, after how many tokens, and
 * what avoids it for the grammar's kind.
 */
static bool
grammar_cut(const WorkerRequest *r, const llm_event *ev, char *msg, size_t size)
{
	const char *what;
	const char *bound;
	int			n = ev->usage.completion_tokens;

	if (!r->grammar || ev->finish_reason != LLM_FINISH_LENGTH)
		return false;
	switch (r->grammar_kind)
	{
		case LLM_GRAMMAR_JSON_SCHEMA:
			what = "the JSON value of its json_schema";
			bound = " or bound the schema (maxLength, maxItems, {m,n} instead of + or * in a pattern)";
			break;
		case LLM_GRAMMAR_REGEX:
			what = "the match of its regex";
			bound = " or bound the regex ({m,n} instead of + or *)";
			break;
		case LLM_GRAMMAR_CHOICES:
			what = "one of its choices";
			bound = "";
			break;
		default:
			what = "its output under its grammar";
			bound = "";
			break;
	}
	if (n >= r->max_tokens)
		snprintf(msg, size, "the output was cut at max_tokens (%d tokens, finish_reason length) "
				 "before %s was complete; raise max_tokens%s", n, what, bound);
	else
		snprintf(msg, size, "the output was cut at the context length (%d tokens, finish_reason length) "
				 "before %s was complete; shorten the prompt%s", n, what, bound);
	return true;
}

void
intake_on_event(const llm_event *ev, void *cb_arg)
{
	WorkerRequest *r = (WorkerRequest *) ev->user_data;
	bool		counted;
	char		msg[256];

	if (r == NULL)
		return;
	counted = !r->tokenize;
	switch (ev->kind)
	{
		case LLM_EVENT_TEXT:
			if (ev->token_id >= 0)
				r->n_tokens_out++;
			r->sink->text(r, ev->text, ev->text_len);
			break;
		case LLM_EVENT_FINISHED:
			if (grammar_cut(r, ev, msg, sizeof(msg)))
				r->sink->error(r, ERRCODE_PROGRAM_LIMIT_EXCEEDED, msg);
			else
				r->sink->done(r, ev);
			finish_request(r, OUTCOME_FINISHED, ev);
			break;
		case LLM_EVENT_ERROR:
			answer_status(r, ev->status, ev->text);
			finish_request(r, OUTCOME_FAILED, ev);
			break;
		case LLM_EVENT_VECTOR:
			r->sink->vector(r, ev);
			finish_request(r, OUTCOME_FINISHED, ev);
			break;
		case LLM_EVENT_TOKENS:
			/* only tokenize requests have them */
			if (r->tokenize)
			{
				r->sink->tokens(r, ev->ids, ev->n_ids);
				finish_request(r, OUTCOME_FINISHED, ev);
			}
			break;
	}
	/* an llm_tokenize() text is in no statistics */
	if (counted)
		llm_stats_note_change();
}
