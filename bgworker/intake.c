/*
 * intake.c — request intake and event routing of the worker (intake.h).
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "utils/memutils.h"

#include "intake.h"
#include "registry.h"
#include "protocol.h"
#include "sqlstate.h"
#include "stats.h"
#include "worker_channel.h"

/* A request living in the engine. */
typedef struct WorkerRequest
{
	dlist_node	node;			/* in its slot's list */
	int			slot;
	uint64		client_id;		/* the backend's id */
	uint64		engine_id;
	llm_engine *engine;			/* the model's engine it lives in */
	int			model;			/* its model's row (registry.h) */
	bool		grammar;		/* constrained: a length finish is no valid result */
	int32		max_tokens;
	Oid			role;			/* accounting tags of the request (protocol.h) */
	Oid			database;
	llm_priority priority;		/* the request's class, counted in llm_usage */
	int32		n_tokens_out;	/* tokens generated so far (TEXT events) */
} WorkerRequest;

static MemoryContext intake_cxt;
static dlist_head *slot_requests;	/* per slot: its WorkerRequests */
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
}

static void
free_request(WorkerRequest *r)
{
	dlist_delete(&r->node);
	pfree(r);
}

static void
answer_error(int slot, uint64 id, llm_status st, const char *err)
{
	wch_queue_error(slot, id, llm_status_sqlstate(st), err && err[0] ? err : llm_status_name(st));
}

/* ---------- requests ---------- */

static void
submit(int slot, const llm_wire_msg *m, llm_engine *engine, int model)
{
	WorkerRequest *r;
	char		err[1100];
	llm_status	st;

	llm_request req = m->request;

	r = MemoryContextAlloc(intake_cxt, sizeof(WorkerRequest));
	r->slot = slot;
	r->client_id = m->id;
	r->engine_id = next_engine_id++;
	r->engine = engine;
	r->model = model;
	r->grammar = m->request.grammar != NULL;
	r->max_tokens = m->request.params.max_tokens;
	r->role = m->role_id;
	r->database = m->database_id;
	r->priority = m->request.priority;
	r->n_tokens_out = 0;
	/* fair share among sessions: every channel is one (scheduler.h) */
	req.session = (uint64) slot + 1;
	err[0] = '\0';
	st = llm_engine_submit(engine, r->engine_id, &req, r, err, sizeof(err));
	if (st != LLM_OK)
	{
		answer_error(slot, m->id, st, err);
		llm_stats_note_failed(model);
		pfree(r);
		return;
	}
	dlist_push_tail(&slot_requests[slot], &r->node);
}

static void
tokenize(int slot, const llm_wire_msg *m, llm_engine *engine)
{
	int32	   *ids;
	int64		n;
	char		err[512];
	llm_wire_msg out;

	err[0] = '\0';
	n = llm_engine_tokenize(engine, m->text, m->text_len, &ids, err, sizeof(err));
	if (n < 0)
	{
		answer_error(slot, m->id, LLM_ERR_INVALID_TEXT, err[0] ? err : "could not tokenize the text");
		return;
	}
	memset(&out, 0, sizeof(out));
	out.kind = LLM_WIRE_TOKENS;
	out.id = m->id;
	out.ids = ids;
	out.n_ids = (int32) n;
	wch_queue(slot, &out);
	free(ids);
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
			llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
			llm_stats_note_aborted(r->model);
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
			wch_queue_error(slot, m.id, sqlstate, msg);
			llm_stats_note_failed(model);
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
			tokenize(slot, &m, engine);
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
		llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
		llm_stats_note_aborted(r->model);
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
			llm_stats_note_usage(r->role, r->database, r->priority, NULL, r->n_tokens_out);
			wch_queue_error(i, r->client_id, sqlstate, message);
			llm_stats_note_failed(r->model);
			free_request(r);
		}
	}
	llm_stats_note_change();
}

/* ---------- engine events ---------- */

void
intake_on_event(const llm_event *ev, void *cb_arg)
{
	WorkerRequest *r = (WorkerRequest *) ev->user_data;
	llm_wire_msg m;

	if (r == NULL)
		return;
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
			if (r->grammar && ev->finish_reason == LLM_FINISH_LENGTH)
			{
				/*
				 * Cut before the output was complete under its grammar: the
				 * text is not a valid result, so it is not returned as one
				 * (the request still finished with "length" in the stats).
				 */
				char		msg[256];

				if (ev->usage.completion_tokens >= r->max_tokens)
					snprintf(msg, sizeof(msg), "the output reached max_tokens (%d) before it was complete "
							 "under its grammar (choices, regex or json_schema); raise max_tokens",
							 r->max_tokens);
				else
					snprintf(msg, sizeof(msg), "the output reached the context length after %d tokens "
							 "before it was complete under its grammar (choices, regex or json_schema)",
							 ev->usage.completion_tokens);
				wch_queue_error(r->slot, r->client_id, ERRCODE_PROGRAM_LIMIT_EXCEEDED, msg);
				llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage);
				free_request(r);
				break;
			}
			m.kind = LLM_WIRE_DONE;
			m.finish_reason = ev->finish_reason;
			m.usage = ev->usage;
			m.scores = ev->scores;
			m.n_scores = ev->n_scores;
			wch_queue(r->slot, &m);
			llm_stats_note_finished(r->model, ev->finish_reason, &ev->usage);
			llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			free_request(r);
			break;
		case LLM_EVENT_ERROR:
			answer_error(r->slot, r->client_id, ev->status, ev->text);
			llm_stats_note_failed(r->model);
			llm_stats_note_usage(r->role, r->database, r->priority, &ev->usage, 0);
			free_request(r);
			break;
	}
	llm_stats_note_change();
}
