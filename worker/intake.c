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

/* A request living in the engine. */
typedef struct WorkerRequest
{
	dlist_node	node;			/* in its slot's list, or in async_requests */
	int			slot;			/* ASYNC_SLOT: an asynchronous request (mailbox.h) */
	uint64		client_id;		/* the backend's id, or the store entry's id */
	uint64		engine_id;
	llm_engine *engine;			/* the model's engine it lives in */
	int			model;			/* its model's row (registry.h) */
	bool		grammar;		/* constrained: a length finish is no valid result */
	uint8		grammar_kind;	/* its llm_grammar_kind (the source's first byte), for messages */
	bool		tokenize;		/* an llm_tokenize() text on the tokenizer thread: ends with TOKENS */
	int32		max_tokens;
	Oid			role;			/* accounting tags of the request (protocol.h) */
	Oid			database;
	llm_priority priority;		/* the request's class, counted in llm_usage */
	int32		n_tokens_out;	/* tokens generated so far (TEXT events) */
	llm_wire_client client;		/* its submitter */
	int			async_index;	/* asynchronous: the store entry */
	StringInfoData text;		/* asynchronous: the output so far */
	/* asynchronous, ended in an engine step: its outcome, stored by intake_async_deliver */
	llm_finish_reason end_reason;
	llm_usage	end_usage;
	int			end_sqlstate;	/* 0: finished, end_reason and end_usage; else failed */
	char	   *end_message;	/* failed: the message (intake_cxt) */
} WorkerRequest;

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

static void
answer_error(int slot, uint64 id, llm_status st, const char *err)
{
	wch_queue_error(slot, id, llm_status_sqlstate(st), err && err[0] ? err : llm_status_name(st));
}

/* ---------- requests ---------- */

/* m names no model that can serve it: answer with the router's error (model: its row, or -1). */
static void
route_failed(int slot, const llm_wire_msg *m, int model, int sqlstate, const char *msg)
{
	llm_wire_client client = m->client;

	if (client.pid == 0)
		client.pid = wch_pid(slot);
	wch_queue_error(slot, m->id, sqlstate, msg);
	llm_stats_note_failed(model, &client);
}

/*
 * Hand m's request to engine (model row model) as r (slot, client_id and
 * async fields set by the caller).
 */
static llm_status
engine_submit(WorkerRequest *r, const llm_wire_msg *m, llm_engine *engine, int model,
			  char *err, size_t errsize)
{
	llm_request req = m->request;

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
	return llm_engine_submit(engine, r->engine_id, &req, r, err, errsize);
}

static void
submit(int slot, const llm_wire_msg *m, llm_engine *engine, int model)
{
	WorkerRequest *r;
	char		err[1100];
	llm_status	st;

	r = MemoryContextAllocZero(intake_cxt, sizeof(WorkerRequest));
	r->slot = slot;
	r->client_id = m->id;
	st = engine_submit(r, m, engine, model, err, sizeof(err));
	if (st != LLM_OK)
	{
		answer_error(slot, m->id, st, err);
		llm_stats_note_failed(model, &r->client);
		pfree(r);
		return;
	}
	dlist_push_tail(&slot_requests[slot], &r->node);
}

/* The TOKENS answer to a channel's llm_tokenize() request. */
static void
answer_tokens(int slot, uint64 id, const int32 *ids, int64 n)
{
	llm_wire_msg out;

	memset(&out, 0, sizeof(out));
	out.kind = LLM_WIRE_TOKENS;
	out.id = id;
	out.ids = (int32 *) ids;
	out.n_ids = (int32) n;
	wch_queue(slot, &out);
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
	WorkerRequest *r;
	int32	   *ids;
	int64		n;
	char		err[1100];
	llm_status	st;

	r = MemoryContextAllocZero(intake_cxt, sizeof(WorkerRequest));
	r->slot = slot;
	r->client_id = m->id;
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
		answer_error(slot, m->id, st, err);
		pfree(r);
		return;
	}
	if (ids != NULL)
	{
		answer_tokens(slot, m->id, ids, n);
		free(ids);
		pfree(r);
		return;
	}
	dlist_push_tail(&slot_requests[slot], &r->node);
}

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
		answer_error(slot, m->id, LLM_ERR_INVALID_PARAM, err);
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

static void
abort_request(int slot, uint64 client_id)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &slot_requests[slot])
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		if (r->client_id == client_id)
		{
			llm_engine_abort(r->engine, r->engine_id);
			if (!r->tokenize)
			{
				llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
				llm_stats_note_aborted(r->model, &r->client);
			}
			free_request(r);
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
			route_failed(slot, &m, model, sqlstate, msg);
			llm_stats_note_change();
			return;
		}
	}
	switch (m.kind)
	{
		case LLM_WIRE_SUBMIT:
			submit(slot, &m, engine, model);
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
	{
		WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

		llm_engine_abort(r->engine, r->engine_id);
		if (!r->tokenize)
		{
			llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
			llm_stats_note_aborted(r->model, &r->client);
		}
		free_request(r);
	}
	llm_stats_note_change();
}

void
intake_fail_engine(llm_engine *e, int sqlstate, const char *message)
{
	for (int i = 0; i < n_slots; i++)
	{
		dlist_mutable_iter it;

		dlist_foreach_modify(it, &slot_requests[i])
		{
			WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

			if (r->engine != e)
				continue;
			llm_engine_abort(e, r->engine_id);
			wch_queue_error(i, r->client_id, sqlstate, message);
			if (!r->tokenize)
			{
				llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
				llm_stats_note_failed(r->model, &r->client);
			}
			free_request(r);
		}
	}
	{
		dlist_mutable_iter it;

		/*
		 * asynchronous requests outlive the engine: routed again, the next
		 * engine of their alias runs them
		 */
		dlist_foreach_modify(it, &async_requests)
		{
			WorkerRequest *r = dlist_container(WorkerRequest, node, it.cur);

			if (r->engine != e)
				continue;
			llm_engine_abort(e, r->engine_id);
			llm_async_requeue(r->async_index, r->client_id);
			llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
			llm_stats_note_aborted(r->model, &r->client);
			free_request(r);
		}
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

static void async_end(WorkerRequest *r, int sqlstate, const char *message);

/* Store entry (index, id) failed before reaching an engine: stored by intake_async_deliver. */
static void
async_fail_later(int index, uint64 id, int sqlstate, const char *message)
{
	WorkerRequest *r = MemoryContextAllocZero(intake_cxt, sizeof(WorkerRequest));

	r->slot = ASYNC_SLOT;
	r->client_id = id;
	r->async_index = index;
	dlist_push_tail(&async_requests, &r->node);
	async_end(r, sqlstate, message);
}

/* One entry taken from the store: decode its SUBMIT message and start it. */
static void
async_submit(const LlmAsyncTaken *t)
{
	llm_wire_msg m;
	const char *why;
	char		err[LLM_MODEL_ERROR_LEN + 128];
	WorkerRequest *r;
	llm_status	st;
	llm_engine *engine;
	int			model;
	int			sqlstate;

	if (llm_wire_decode(t->request, t->request_len, &m, &wire_arrays, &why) != LLM_WIRE_OK ||
		m.kind != LLM_WIRE_SUBMIT)
	{
		async_fail_later(t->index, t->id, ERRCODE_PROTOCOL_VIOLATION, "malformed llm request");
		llm_stats_note_failed(-1, NULL);
		return;
	}
	engine = route(m.model, &model, &sqlstate, err, sizeof(err));
	if (engine == NULL)
	{
		async_fail_later(t->index, t->id, sqlstate, err);
		llm_stats_note_failed(model, &m.client);
		return;
	}
	r = MemoryContextAllocZero(intake_cxt, sizeof(WorkerRequest));
	r->slot = ASYNC_SLOT;
	r->client_id = t->id;
	r->async_index = t->index;
	st = engine_submit(r, &m, engine, model, err, sizeof(err));
	if (st != LLM_OK)
	{
		async_fail_later(t->index, t->id, llm_status_sqlstate(st), err[0] ? err : llm_status_name(st));
		llm_stats_note_failed(model, &r->client);
		pfree(r);
		return;
	}
	{
		MemoryContext old = MemoryContextSwitchTo(intake_cxt);

		initStringInfo(&r->text);
		MemoryContextSwitchTo(old);
	}
	dlist_push_tail(&async_requests, &r->node);
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
			if (r == NULL)
				continue;
			llm_engine_abort(r->engine, r->engine_id);
			llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
			llm_stats_note_aborted(r->model, &r->client);
			free_request(r);
		}
		if (n > 0 || n_cancel > 0)
			llm_stats_note_change();
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
 * r ended in this engine step: noted in the statistics now, its outcome
 * kept for intake_async_deliver, which stores it after the statistics are
 * published (a backend that sees the result in the store then sees it
 * counted).
 */
static void
async_end(WorkerRequest *r, int sqlstate, const char *message)
{
	r->end_sqlstate = sqlstate;
	if (sqlstate != 0)
		r->end_message = MemoryContextStrdup(intake_cxt, message);
	dlist_delete(&r->node);
	dlist_push_tail(&async_ended, &r->node);
}

/* An event of an asynchronous request: its output collects here, its end goes to the store. */
static void
async_event(WorkerRequest *r, const llm_event *ev)
{
	char		msg[256];

	switch (ev->kind)
	{
		case LLM_EVENT_TEXT:
			if (ev->token_id >= 0)
				r->n_tokens_out++;
			appendBinaryStringInfo(&r->text, ev->text, ev->text_len);
			break;
		case LLM_EVENT_FINISHED:
			llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage, &r->client);
			r->end_reason = ev->finish_reason;
			r->end_usage = ev->usage;
			if (grammar_cut(r, ev, msg, sizeof(msg)))
				async_end(r, ERRCODE_PROGRAM_LIMIT_EXCEEDED, msg);
			else
				async_end(r, 0, NULL);
			break;
		case LLM_EVENT_ERROR:
			llm_stats_note_failed(r->model, &r->client);
			if (queued(ev))
				llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			async_end(r, llm_status_sqlstate(ev->status),
					  ev->text && ev->text[0] ? ev->text : llm_status_name(ev->status));
			break;
		case LLM_EVENT_TOKENS:
			break;				/* only tokenize requests have them */
		case LLM_EVENT_VECTOR:
			/* an asynchronous result is text: no SQL function submits an EMBED request this way */
			llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage, &r->client);
			async_end(r, ERRCODE_FEATURE_NOT_SUPPORTED, "an asynchronous request cannot keep a vector answer");
			break;
	}
	llm_stats_note_change();
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

void
intake_on_event(const llm_event *ev, void *cb_arg)
{
	WorkerRequest *r = (WorkerRequest *) ev->user_data;
	llm_wire_msg m;
	char		msg[256];

	if (r == NULL)
		return;
	if (r->slot == ASYNC_SLOT)
	{
		async_event(r, ev);
		return;
	}
	if (r->tokenize)
	{
		/* an llm_tokenize() text, answered as the inline path answers it; no statistics */
		if (ev->kind == LLM_EVENT_TOKENS)
			answer_tokens(r->slot, r->client_id, ev->ids, ev->n_ids);
		else
			answer_error(r->slot, r->client_id, ev->status, ev->text);
		free_request(r);
		return;
	}
	memset(&m, 0, sizeof(m));
	m.id = r->client_id;

	switch (ev->kind)
	{
		case LLM_EVENT_TEXT:
			if (ev->token_id >= 0)
				r->n_tokens_out++;
			if (ev->text_len > 0)
			{
				m.kind = LLM_WIRE_TEXT;
				m.text = ev->text;
				m.text_len = ev->text_len;
				wch_queue(r->slot, &m);
			}
			break;
		case LLM_EVENT_FINISHED:
			if (grammar_cut(r, ev, msg, sizeof(msg)))
			{
				wch_queue_error(r->slot, r->client_id, ERRCODE_PROGRAM_LIMIT_EXCEEDED, msg);
				llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage, &r->client);
				llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
				free_request(r);
				break;
			}
			m.kind = LLM_WIRE_DONE;
			m.finish_reason = ev->finish_reason;
			m.usage = ev->usage;
			m.scores = ev->scores;
			m.n_scores = ev->n_scores;
			wch_queue(r->slot, &m);
			llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage, &r->client);
			llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			free_request(r);
			break;
		case LLM_EVENT_ERROR:
			answer_error(r->slot, r->client_id, ev->status, ev->text);
			llm_stats_note_failed(r->model, &r->client);
			if (queued(ev))
				llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			free_request(r);
			break;
		case LLM_EVENT_VECTOR:
			m.kind = LLM_WIRE_VECTOR;
			m.usage = ev->usage;
			m.vector = ev->vector;
			m.n_vector = ev->n_vector;
			wch_queue(r->slot, &m);
			llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage, &r->client);
			llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			free_request(r);
			break;
		case LLM_EVENT_TOKENS:
			break;				/* only tokenize requests have them */
	}
	llm_stats_note_change();
}
