/*
 * job_shared.c — identical calls of one job's rows share one request
 * (docs/JOBS.md, "Shared calls"), with the LLM Batch node's table and key
 * (pg/batch/batch_dedup.h): the SUBMIT wire encoding of the request as the
 * job's role would send it, followed by the sha256 of the model file it is
 * sent to (so an answer of a model replaced under its alias is never taken
 * for the new one).  Unseeded sampling has no key and is never shared.
 *
 * Each job the runner runs has its own table (RunnerJob.shared), created at
 * its first shareable call, in runner_cxt, bounded by the runner's work_mem
 * (past it no new call is recorded; recorded ones are still shared), and
 * deleted when the job leaves the runner (done, cancelled, paused, failed,
 * deleted) or the runner exits.  An entry (BatchDedupCall) is, as the
 * runner uses it:
 *   in flight    id != 0: refs rows (RunnerRow.call) wait on request id;
 *   answered     result != NULL, not failed: a later row with its key takes
 *                a copy at once, without a request;
 *   free         id == 0 and result == NULL: its request was aborted (no
 *                row waited on it any more) or failed; the next row with
 *                its key sends a new request and the entry is in flight
 *                again (a failure is never handed to a later row: each
 *                retry is a new request).
 * A row that shares an answer gets its own copy (RunnerRow.result), so the
 * write protocol, the failures (attempts, max_attempts) and the counts are
 * each row's own, exactly as for a row with its own request; the request's
 * tokens are counted once, by the job and by its owner's token limit (only
 * the request that is sent is admitted under it).  A row that leaves while
 * waiting (deleted, skipped, its job paused) aborts the request only when
 * no other row waits on it.
 *
 * llm.dedup_calls off (the runner's setting: postgresql.conf, or ALTER
 * DATABASE ... SET for the runner of one database, read when the runner
 * starts or reloads its configuration): every row sends its own request,
 * as before; rows already waiting on a shared request still get its answer.
 *
 * The runner's own memory, no locking (job_runner.h).
 */
#include "job_runner.h"
#include "lib/stringinfo.h"

#include "common/stats.h"
#include "engine/util/hash.h"

/*
 * An embedding's value as the text the write passes through the output
 * column's input function: an array literal {v1,...} or a vector literal
 * [v1,...], each float with 9 significant digits (exact for a float:
 * it reads back as the same bits).  In CurrentMemoryContext.
 */
static void
vector_as_text(LlmResult *res, int out_kind)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, out_kind == LLM_JOB_OUT_VECTOR ? '[' : '{');
	for (int i = 0; i < res->n_vector; i++)
		appendStringInfo(&s, "%s%.9g", i > 0 ? "," : "", (double) res->vector[i]);
	appendStringInfoChar(&s, out_kind == LLM_JOB_OUT_VECTOR ? ']' : '}');
	res->text = s.data;
	res->text_len = s.len;
	pfree(res->vector);
	res->vector = NULL;
	res->n_vector = 0;
}

/* A request of rj answered with res (in CurrentMemoryContext): its text to write, its tokens counted once. */
static void
request_answered(RunnerJob *rj, LlmResult *res)
{
	if (!res->failed && res->vector != NULL)
		vector_as_text(res, rj->def->out_kind);
	if (!res->failed)
	{
		rj->counts.tokens_in += res->usage.prompt_tokens;
		rj->counts.tokens_out += res->usage.completion_tokens;
	}
}

/* What the write protocol reads of a shared answer, copied into runner_cxt for one row. */
static LlmResult *
answer_copy(const LlmResult *src)
{
	LlmResult  *res = MemoryContextAllocZero(runner_cxt, sizeof(LlmResult));

	res->failed = src->failed;
	res->sqlstate = src->sqlstate;
	res->finish_reason = src->finish_reason;
	if (src->message != NULL)
		res->message = MemoryContextStrdup(runner_cxt, src->message);
	if (src->text != NULL)
	{
		res->text = MemoryContextAlloc(runner_cxt, src->text_len + 1);
		memcpy(res->text, src->text, src->text_len);
		res->text[src->text_len] = '\0';
		res->text_len = src->text_len;
	}
	return res;
}

/*
 * Send row r's request req (transaction B, as the job's role), or share an
 * identical one of its job: r is then ROW_RUNNING (its own request in
 * r->request, or waiting on r->call) or ROW_FINISHED (a copy of an answer
 * the job already has); r->model_sha256 is the model file's.  False when
 * the owner's token limit holds the request back (*throttled_until: until
 * when; nothing sent, r unchanged).
 */
bool
runner_submit_shared(RunnerRow *r, const llm_request *req, TimestampTz *throttled_until)
{
	RunnerJob  *rj = r->job;
	char	   *key = NULL;
	size_t		key_len = 0;
	uint64		hash = 0;
	BatchDedupCall *c = NULL;
	uint64		id;

	llm_registry_model_sha256(req->model, r->model_sha256);
	if (llm_dedup_calls)
	{
		char	   *wire;
		size_t		wire_len;
		size_t		sha_len = strlen(r->model_sha256);

		if (llm_dedup_key(req, &wire, &wire_len, &hash))
		{
			key_len = wire_len + sha_len;
			key = palloc(key_len);
			memcpy(key, wire, wire_len);
			memcpy(key + wire_len, r->model_sha256, sha_len);
			pfree(wire);
			hash = llm_fnv1a64(key, key_len);
			if (rj->shared == NULL)
				rj->shared = llm_dedup_create(runner_cxt, (Size) work_mem * 1024);
			c = llm_dedup_find(rj->shared, key, key_len, hash);
		}
	}
	if (c != NULL && c->id != 0)
	{
		/* an identical call of the job is in flight: its answer, when it comes */
		c->refs++;
		r->call = c;
		r->state = ROW_RUNNING;
		llm_dedup_note_shared();
		pfree(key);
		return true;
	}
	if (c != NULL && c->result != NULL && !c->result->failed)
	{
		/* the job already has this call's answer */
		r->result = answer_copy(c->result);
		r->state = ROW_FINISHED;
		llm_dedup_note_shared();
		pfree(key);
		return true;
	}
	id = llm_submit_session(req, rj->token_limit, throttled_until);
	if (id == 0)
	{
		if (key != NULL)
			pfree(key);
		return false;
	}
	r->state = ROW_RUNNING;
	if (c != NULL && c->result == NULL)
	{
		/* a free entry: in flight again, with this request */
		c->id = id;
		c->refs = 1;
		c->dead = false;
		r->call = c;
	}
	else if (c == NULL && key != NULL)
		r->call = llm_dedup_add(rj->shared, key, key_len, hash, id, NULL);
	if (r->call == NULL)
		r->request = id;		/* unshared: no key, the table full, or a failure still handed out */
	if (key != NULL)
		pfree(key);
	return true;
}

/* Whether running row r's answer arrived (its own request's or the shared one's). */
bool
runner_answer_ready(const RunnerRow *r)
{
	if (r->call != NULL)
		return r->call->result != NULL || llm_request_is_done(r->call->id);
	return llm_request_is_done(r->request);
}

/*
 * Take running row r's answer (runner_answer_ready): r is then
 * ROW_FINISHED with a result of its own in runner_cxt.  The first row to
 * take a shared request's answer takes it into the job's table; a failed
 * one is dropped from the table once every waiting row has its copy.
 */
void
runner_take_answer(RunnerRow *r)
{
	RunnerJob  *rj = r->job;
	BatchDedupCall *c = r->call;
	MemoryContext old;

	if (c == NULL)
	{
		old = MemoryContextSwitchTo(runner_cxt);
		r->result = llm_take_result(r->request);
		r->request = 0;
		request_answered(rj, r->result);
		MemoryContextSwitchTo(old);
		r->state = ROW_FINISHED;
		return;
	}
	if (c->result == NULL)
	{
		old = MemoryContextSwitchTo(rj->shared->cxt);
		c->result = llm_take_result(c->id);
		c->id = 0;
		request_answered(rj, c->result);
		MemoryContextSwitchTo(old);
	}
	r->result = answer_copy(c->result);
	r->call = NULL;
	r->state = ROW_FINISHED;
	if (--c->refs == 0 && c->result->failed)
	{
		/* every row that shared it has the failure: the next row with this call asks again */
		if (c->result->message != NULL)
			pfree(c->result->message);
		if (c->result->text != NULL)
			pfree(c->result->text);
		pfree(c->result);
		c->result = NULL;
	}
}

/*
 * Row r stops waiting on its shared request (it is forgotten): the request
 * is aborted when no other row waits on it; its entry is free again.
 */
void
runner_leave_call(RunnerRow *r)
{
	BatchDedupCall *c = r->call;

	r->call = NULL;
	if (--c->refs == 0 && c->id != 0)
	{
		llm_abort_request(c->id);
		c->id = 0;
		c->dead = true;
	}
}

/* The job leaves the runner (its rows forgotten already): its table goes. */
void
runner_drop_shared(RunnerJob *rj)
{
	if (rj->shared == NULL)
		return;
	MemoryContextDelete(rj->shared->cxt);
	rj->shared = NULL;
}
