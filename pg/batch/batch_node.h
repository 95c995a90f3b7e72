/*
 * batch_node.h — the executor state of one LLM Batch node, shared by the
 * files of the executor half: batch_exec.c runs the node (read-ahead,
 * submission, emission), batch_report.c reports it (EXPLAIN lines, the
 * counts it notes into llm_usage and llm_progress).  Backend-local: one
 * backend's executor, no locking.
 */
#ifndef LLM_BATCH_NODE_H
#define LLM_BATCH_NODE_H

#include "postgres.h"

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "utils/tuplestore.h"

#include "batch_cascade.h"
#include "batch_dedup.h"
#include "channel/client.h"
#include "pg/sql/sql_args.h"

typedef enum RowState
{
	ROW_FREE,					/* slot unused */
	ROW_RUNNING,				/* calls of its current stage in flight */
	ROW_READY,					/* every stage done: can be emitted */
	ROW_FILTERED,				/* a moved qual rejected it */
	ROW_FAILED					/* a qual stage's call failed: raised at emission */
} RowState;

/* One row read ahead, from read until the call after its emission. */
typedef struct BatchRow
{
	MemoryContext cxt;			/* everything of this row; reset on reuse */
	MinimalTuple tuple;			/* copy of the child row */
	RowState	state;
	int			stage;			/* current stage */
	bool		started;		/* the engine started the current stage's calls */
	uint64	   *ids;			/* per call: request id, 0 if none in flight */
	BatchDedupCall **shared;	/* per call: the shared call it waits on, or NULL */
	LlmResult **results;		/* per call: taken (or local) result */
	ErrorData **errors;			/* per call: argument error, raised at emission */
	bool	   *is_null;		/* per call: NULL prompt, the value is NULL */
	bool	   *on_error_null;
	void	  **value_args;		/* per call: its value_arg (sql_args.h), a copy, or NULL */
	Datum	   *values;			/* per call of a qual stage: its value ... */
	bool	   *nulls;			/* ... and whether NULL */
} BatchRow;

typedef struct BatchScanState
{
	CustomScanState css;
	int			n_calls;
	int			n_child;
	int			n_quals;		/* stages 0..n_quals-1: the moved conjuncts */
	int		   *stage;			/* per call: its stage (n_quals: the target list) */
	int		   *nargs;			/* per call: its argument count */
	ExprState ***args;			/* per call: its arguments, over the scan tuple */
	int16	  **arg_typlen;		/* per call and argument: typlen (detoast) */
	ExprState **quals;			/* per qual stage */
	const LlmArgMap **maps;		/* per call: its arguments by name (sql_args.h) */
	LlmCallBuildFn *build;		/* per call: request builder */
	int			max_window;		/* llm.batch_window at executor start (1 in EPQ) */
	int			window;			/* rows with calls in flight at most; grows to max_window */
	int			capacity;		/* rows read and not emitted at most */
	BatchRow   *ring;			/* capacity + 1 rows */
	MemoryContext row_cxt;		/* where ring slots are set up */
	int			ring_size;
	int			head;			/* oldest row not yet emitted */
	int			count;			/* rows read and not yet emitted */
	int			emitted;		/* ring index of the last emitted row, -1 */
	int			n_running;		/* rows in ROW_RUNNING */
	int			in_flight;		/* requests in flight */
	bool		child_exhausted;	/* the child returned its last row */
	bool		child_done;		/* ... and the drained rows are read too */
	bool		drain_child;	/* hot standby: read the child to the end before waiting */
	Tuplestorestate *drained;	/* the child's remaining rows, if drained */
	TupleTableSlot *drained_row;
	TupleTableSlot *child_row;	/* deforms a stored child row */
	TupleTableSlot *eval_slot;	/* scan tuple for arguments and quals of rows read ahead */
	ExprContext *eval_cxt;
	MemoryContext tmp_cxt;		/* per-request temporaries */
	BatchDedup *dedup;			/* the statement's shared calls, or NULL (llm.dedup_calls off) */
	BatchCascade *cascade;		/* the call's model cascade (batch_cascade.h), or NULL */
	/* EXPLAIN ANALYZE */
	int64		n_requests;
	int64		n_used;
	int64		n_aborted;
	int64		n_failed;
	int64		n_filtered;
	int64		n_shared;		/* calls answered by another row's (or node's) request */
	int64		n_child_rows;	/* rows read from the child */
	List	   *lift_scans;		/* PlanState * of the scans its filters were lifted from */
	int			max_in_flight;
	int64		prompt_tokens;
	int64		cached_tokens;
	int64		completion_tokens;
	double		ttft_sum_ms;
	int64		ttft_count;
} BatchScanState;

/*
 * Take shared call c's finished request into d's memory (once) and count it
 * where it belongs: in flight and used by the node that sent it, or by
 * taker if that node was done first (taker NULL: the row path's wait).
 */
extern void llm_batch_take_shared(BatchDedup *d, BatchDedupCall *c, BatchScanState *taker);

/* Abort everything read ahead; the node starts over (rescan) or ends (batch_exec.c). */
extern void llm_batch_release_all(BatchScanState *st);

/*
 * The node's EXPLAIN lines (batch_report.c); under ANALYZE the run is over,
 * so rows still read ahead are released first and the counts are final.
 */
extern void llm_batch_explain(CustomScanState *node, List *ancestors, ExplainState *es);

/*
 * At the node's end: what it saved and its cascade's calls into the role's
 * llm_usage (once per node) and the statement's llm_progress (batch_report.c).
 */
extern void llm_batch_note_saved(BatchScanState *st);

#endif
