/*
 * progress.c — per-backend progress slots of the running statement's LLM
 * work (progress.h) and llm_progress(), the function behind the
 * llm_progress view.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "progress.h"
#include "registry.h"

PG_FUNCTION_INFO_V1(pg_llm_progress);

typedef struct LlmProgressSlot
{
	uint32		changecount;	/* odd while the owner writes */
	int32		pid;			/* 0: never used since the slot's backend started */
	TimestampTz statement_start;	/* the statement the counters belong to */
	TimestampTz first_call;		/* its first request */
	TimestampTz last_change;
	LLM_COUNTERS(LLM_FIELD_PROGRESS)	/* stats.h */
} LlmProgressSlot;

static LlmProgressSlot *slots = NULL;
static bool exit_registered = false;

static Size
progress_size(void)
{
	return mul_size(MaxBackends, sizeof(LlmProgressSlot));
}

static void
progress_init(void *mem, bool found)
{
	slots = mem;
	if (!found)
		memset(slots, 0, progress_size());
}

void
llm_progress_request(void)
{
	llm_registry_add_shmem("llm progress", progress_size, progress_init, 0);
}

static void
slot_clear(int code, Datum arg)
{
	LlmProgressSlot *s = &slots[MyBackendId - 1];

	s->changecount++;
	pg_write_barrier();
	s->pid = 0;
	s->statement_start = 0;
	pg_write_barrier();
	s->changecount++;
}

/* This backend's slot, opened for writing (changecount odd) with the counters of the current statement. */
static LlmProgressSlot *
slot_begin(void)
{
	LlmProgressSlot *s;
	TimestampTz stmt = GetCurrentStatementStartTimestamp();
	TimestampTz now = GetCurrentTimestamp();

	if (slots == NULL || MyBackendId == InvalidBackendId || MyBackendId > MaxBackends)
		return NULL;
	if (!exit_registered)
	{
		before_shmem_exit(slot_clear, (Datum) 0);
		exit_registered = true;
	}
	s = &slots[MyBackendId - 1];
	s->changecount++;
	pg_write_barrier();
	if (s->pid != MyProcPid || s->statement_start != stmt)
	{
		s->pid = MyProcPid;
		s->statement_start = stmt;
		s->first_call = now;
#define ZERO(type, name, kind, m, u, p) LLM_IF_##p(s->name = 0;)
		LLM_COUNTERS(ZERO)
#undef ZERO
	}
	s->last_change = now;
	return s;
}

static void
slot_end(LlmProgressSlot *s)
{
	pg_write_barrier();
	s->changecount++;
}

void
llm_progress_note_submitted(void)
{
	LlmProgressSlot *s = slot_begin();

	if (s == NULL)
		return;
	s->requests_submitted++;
	slot_end(s);
}

void
llm_progress_note_finished(const llm_usage *usage)
{
	LlmProgressSlot *s = slot_begin();

	if (s == NULL)
		return;
	s->requests_finished++;
	s->prompt_tokens += usage->prompt_tokens;
	s->cached_tokens += usage->cached_tokens;
	s->completion_tokens += usage->completion_tokens;
	slot_end(s);
}

void
llm_progress_note_failed(void)
{
	LlmProgressSlot *s = slot_begin();

	if (s == NULL)
		return;
	s->requests_failed++;
	slot_end(s);
}

void
llm_progress_note_aborted(void)
{
	LlmProgressSlot *s = slot_begin();

	if (s == NULL)
		return;
	s->requests_aborted++;
	slot_end(s);
}

void
llm_progress_note_batch_row(void)
{
	LlmProgressSlot *s = slot_begin();

	if (s == NULL)
		return;
	s->batch_rows++;
	slot_end(s);
}

void
llm_progress_note_saved(const LlmRoleUsage *saved)
{
	LlmProgressSlot *s = slot_begin();

	if (s == NULL)
		return;
#define ADD_SAVED(type, name, kind, m, u, p) LLM_IF_##p(s->name += saved->name;)
	LLM_COUNTERS_SAVED(ADD_SAVED)
#undef ADD_SAVED
	slot_end(s);
}

void
llm_progress_note_cascade_call(LlmCascadeCallKind kind)
{
	LlmProgressSlot *s = slot_begin();

	if (s == NULL)
		return;
	if (kind == LLM_CASCADE_CALL_SMALL)
		s->cascade_small_calls++;
	else if (kind == LLM_CASCADE_CALL_SAMPLE)
		s->cascade_sample_calls++;
	else
		s->cascade_large_calls++;
	slot_end(s);
}

/* A consistent copy of slot i (the changecount protocol); false if it was never used. */
static bool
slot_copy(int i, LlmProgressSlot *out)
{
	volatile LlmProgressSlot *s = &slots[i];

	for (;;)
	{
		uint32		before = s->changecount;

		pg_read_barrier();
		memcpy(out, (const void *) s, sizeof(LlmProgressSlot));
		pg_read_barrier();
		if (before == s->changecount && (before & 1) == 0)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	return out->pid != 0 && out->statement_start != 0;
}

#define PROGRESS_COUNTER(type, name, kind, m, u, p) LLM_IF_##p(+1)
#define LLM_PROGRESS_COLS (4 LLM_COUNTERS(PROGRESS_COUNTER))

/*
 * llm_progress() -> setof (pid, statement_start, first_call, last_change,
 * then the slot's counters in LLM_COUNTERS order: calls_submitted,
 * calls_finished, calls_failed, calls_aborted, prompt_tokens,
 * cached_tokens, completion_tokens, batch_rows, calls_shared,
 * lift_rows_below, lift_rows_reached, cascade_small_calls,
 * cascade_sample_calls, cascade_large_calls): every slot
 * in use, whatever its backend runs now; the llm_progress view keeps the
 * ones of statements still running.
 */
Datum
pg_llm_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (slots == NULL)
		return (Datum) 0;
	for (int i = 0; i < MaxBackends; i++)
	{
		LlmProgressSlot s;
		Datum		values[LLM_PROGRESS_COLS];
		bool		nulls[LLM_PROGRESS_COLS];
		int			c = 0;

		if (!slot_copy(i, &s))
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int32GetDatum(s.pid);
		values[c++] = TimestampTzGetDatum(s.statement_start);
		values[c++] = TimestampTzGetDatum(s.first_call);
		values[c++] = TimestampTzGetDatum(s.last_change);
		/* the counters in list order (all int64, bigint columns) */
#define PUT(type, name, kind, m, u, p) LLM_IF_##p(values[c++] = Int64GetDatum(s.name);)
		LLM_COUNTERS(PUT)
#undef PUT
		Assert(c == LLM_PROGRESS_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
