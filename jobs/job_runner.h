/*
 * job_runner.h — what the job runner's files share (not an API).  Calls
 * point one way: job_runner.c (the loop) -> job_write.c (finished rows)
 * -> job_claim.c (the jobs, and claiming their rows) -> runner_state.c
 * (the state below, the rows' lifecycle, guarded steps) -> job_shared.c
 * (identical calls of a job's rows sharing one request).  One
 * runner process per database; nothing here is in shared memory, so no
 * locking: the state is the process's own.
 */
#ifndef LLM_JOB_RUNNER_H
#define LLM_JOB_RUNNER_H

#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "pg/batch/batch_dedup.h"
#include "pg/batch/batch_scan.h"
#include "channel/client.h"
#include "job_queue.h"
#include "common/job_registry.h"
#include "job_rows.h"
#include "common/model_list.h"
#include "common/quota.h"
#include "common/registry.h"
#include "pg/sql/sql_args.h"
#include "common/utf8_text.h"

/* how soon a write held back by a locked target row is tried again */
#define DEFER_MS 200
/* the rate shown as rows_per_s is measured over this much recent time */
#define RATE_WINDOW_MS 60000
#define RATE_SAMPLES 64

typedef struct RunnerJob
{
	LlmJob	   *def;
	MemoryContext cxt;			/* def and its strings */
	char	   *model;			/* the alias its options name (in cxt), NULL: the default model */
	bool		listed;			/* in the last fetch of active jobs */
	bool		prepared;
	bool		stale;			/* its table changed: resolve and prepare again */
	bool		batch;			/* its finished rows are written together (llm_job_prepare_batch) */
	bool		exhausted;		/* its last claim got fewer rows than asked: none to claim until a wake */
	llm_priority ceiling;		/* its owner's llm.max_priority, read once per submitting transaction */
	int			token_limit;	/* its owner's llm.max_tokens_per_minute, read with the ceiling */
	bool		ceiling_read;
	TimestampTz throttled_until;	/* its rows wait for the owner's token limit until then */
	bool		throttle_shown; /* llm_job.throttled_until is set */
	int			in_flight;
	LlmJobCounts counts;		/* since the last report */
	int64		total_done;		/* by this runner */
	TimestampTz rate_t[RATE_SAMPLES];
	int64		rate_done[RATE_SAMPLES];
	int			rate_n;
	double		rate;
	BatchDedup *shared;			/* its rows' shareable calls (job_shared.c), in runner_cxt; NULL: none yet */
} RunnerJob;

typedef enum RowState
{
	ROW_CLAIMED,				/* to read and submit (transaction B) */
	ROW_RUNNING,				/* its request in flight */
	ROW_FINISHED				/* its result taken, to write (transaction A) */
} RowState;

typedef struct RunnerRow
{
	dlist_node	node;
	RunnerJob  *job;
	RowState	state;
	Datum		key;			/* text[], in runner_cxt */
	int			attempts;		/* including this claim */
	char	   *prompt;			/* the text the request was made from */
	uint64		request;		/* its own request in flight (0: none, or call) */
	BatchDedupCall *call;		/* the job's shared request it waits on (job_shared.c), or NULL */
	LlmResult  *result;			/* its own, even when a shared call answered it */
	TimestampTz retry_at;		/* a held-back write: not before */
	char		model_sha256[65];	/* the sha256 of the job's model file when submitted */
} RunnerRow;

/* the runner's state (runner_state.c) */
extern MemoryContext runner_cxt;
extern List *runner_jobs;		/* RunnerJob * */
extern dlist_head runner_rows;	/* RunnerRow, in claim order */
extern int	runner_n_rows;
extern int64 runner_token;		/* this runner's claims in llm_job_queue */

/* a step run in a subtransaction (runner_guarded) */
typedef void (*StepFn) (void *arg);

/* runner_state.c */
extern RunnerRow *runner_row_new(RunnerJob *rj, Datum key, int attempts);
extern void runner_row_forget(RunnerRow *r);
extern void runner_forget_job_rows(RunnerJob *rj);
extern ErrorData *runner_guarded(StepFn fn, void *arg);
extern bool runner_job_level(int sqlstate);
extern bool runner_transient(int sqlstate);

/* job_claim.c */
extern void runner_count_skip(RunnerJob *rj, LlmSkipReason reason);
extern void runner_report_counts(RunnerJob *rj);
extern void runner_fail_job(RunnerJob *rj, const char *msg);
extern bool runner_job_failed(const RunnerJob *rj);
extern bool runner_throttled(const RunnerJob *rj, TimestampTz now);
extern void runner_show_throttle(RunnerJob *rj, bool on);
extern void runner_forget_failed_rows(void);
extern bool runner_job_ready(RunnerJob *rj);
extern void runner_refresh_jobs(void);
extern int runner_window_size(void);
extern int runner_window_cap(void);
extern bool runner_job_active(const RunnerJob *rj);
extern int runner_job_share(void);
extern void runner_claim_rows(List *runnable);

/* job_shared.c */
extern bool runner_submit_shared(RunnerRow *r, const llm_request *req, TimestampTz *throttled_until);
extern bool runner_answer_ready(const RunnerRow *r);
extern void runner_take_answer(RunnerRow *r);
extern void runner_leave_call(RunnerRow *r);
extern void runner_drop_shared(RunnerJob *rj);

/* job_write.c */
extern void runner_row_failed(RunnerRow *r, int sqlstate, const char *message);
extern bool runner_write_due(const RunnerRow *r, TimestampTz now);
extern void runner_write_job_results(RunnerJob *rj, TimestampTz now);
extern void runner_drop_vanished_rows(RunnerJob *rj);

#endif
