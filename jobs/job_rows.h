/*
 * job_rows.h — a job (one row of llm_job) and the statements on its target
 * table that the claim/write protocol runs (docs/JOBS.md).
 *
 * A job fills output_column of every row of target (found by its primary
 * key) where output_column IS NULL and where_clause holds, with the result
 * of generating from prompt, an SQL expression over the row, under the
 * generation options it keeps by name (sql_args.h).  Its statements run as
 * its owner with the search_path captured when it was created
 * (llm_job_enter), so the expressions mean what they meant then and the
 * owner's privileges and row security apply.
 *
 * Statements (n keys: $1..$n are the key columns, in their own types):
 *   read   SELECT prompt::text, out IS NULL, coalesce(where, false)
 *          FROM [ONLY] target WHERE keys                      (to submit)
 *   lock   the same, FOR UPDATE SKIP LOCKED                   (to write)
 *   exists SELECT 1 ... WHERE keys          (locked, or gone? see lock)
 *   write  UPDATE [ONLY] target SET out = $n+1 WHERE keys
 *   fill   SELECT keys FROM [ONLY] target WHERE out IS NULL AND where
 * The write runs only after lock returned the row with out still NULL,
 * where still true and the prompt text equal to the one the result was
 * generated from: a result is never written for inputs it was not made
 * from (the row is queued again instead).
 *
 * Expressions: prompt and where_clause must each parse as one expression
 * (llm_job_check_expression); they are pasted into the statements above
 * inside parentheses, with a newline before the closing one (so a trailing
 * "--" comment cannot swallow it), exactly as that check parsed them.  A volatile expression
 * is refused: the write compares the prompt evaluated again.
 */
#ifndef LLM_JOB_ROWS_H
#define LLM_JOB_ROWS_H

#include "postgres.h"

#include "access/attnum.h"
#include "executor/spi.h"
#include "nodes/bitmapset.h"
#include "utils/jsonb.h"

typedef enum LlmJobState
{
	LLM_JOB_QUEUED = 0,
	LLM_JOB_RUNNING,
	LLM_JOB_PAUSED,
	LLM_JOB_DONE,
	LLM_JOB_FAILED,
	LLM_JOB_CANCELLED
} LlmJobState;

extern const char *llm_job_state_name(LlmJobState s);
extern LlmJobState llm_job_state_from_name(const char *name);

#define LLM_JOB_MAX_KEYS 32

typedef struct LlmJob
{
	/* the llm_job row */
	int64		id;
	Oid			owner;
	Oid			target;
	char	   *output_column;
	char	   *prompt;
	char	   *where_clause;	/* NULL: every row */
	Jsonb	   *options;
	bool		continuous;
	int			max_attempts;
	char	   *search_path;
	LlmJobState state;
	char	   *notify;			/* NOTIFY channel when the job ends; NULL: none (set at insert only) */
	/* resolved from the catalog (llm_job_resolve) */
	bool		resolved;
	bool		partitioned;
	char	   *target_sql;		/* [ONLY] "schema"."table" */
	AttrNumber	out_attnum;
	Oid			out_type;
	int32		out_typmod;
	/*
	 * What the output column holds: LLM_JOB_OUT_TEXT a generation's text
	 * (through the column's input function); an embedding column (real[] or
	 * float8[], or pgvector's vector, or a domain over one) gets the row's
	 * embedding (an EMBED request of the prompt's text) written as an
	 * array literal ('{...}') or a vector literal ('[...]').
	 */
	enum
	{
		LLM_JOB_OUT_TEXT = 0,
		LLM_JOB_OUT_ARRAY,
		LLM_JOB_OUT_VECTOR
	}			out_kind;
	int			n_keys;
	AttrNumber	key_attnums[LLM_JOB_MAX_KEYS];
	Oid			key_types[LLM_JOB_MAX_KEYS];
	/* prepared by llm_job_prepare (kept plans when keep) */
	SPIPlanPtr	read_plan;
	SPIPlanPtr	lock_plan;
	SPIPlanPtr	exists_plan;
	SPIPlanPtr	write_plan;
	bool		kept;
	/* prepared by llm_job_prepare_batch (kept); NULL: rows are written one at a time */
	SPIPlanPtr	lock_rows_plan;
	SPIPlanPtr	exist_rows_plan;
	SPIPlanPtr	write_rows_plan;
} LlmJob;

/* ERROR 42601 unless expr (what: its argument's name) is one SQL expression. */
extern void llm_job_check_expression(const char *expr, const char *what);

/*
 * Resolve job's target from the catalog (relation, output column, primary
 * key).  With raise, problems are ERRORs with their SQLSTATE; else the
 * message is returned (NULL: resolved) and job->resolved stays false.
 */
extern char *llm_job_resolve(LlmJob *job, bool raise);

/*
 * Prepare job's statements as the current user with the current
 * search_path (keep: SPI_keepplan, for the runner).  Raises what parsing
 * raises (undefined column, bad type, ...).
 */
extern void llm_job_prepare(LlmJob *job, bool keep);

/*
 * Prepare, kept, the statements on many rows at once (the runner's write
 * of every row finished in one pass): as the current user with the current
 * search_path, like llm_job_prepare.  Their keys travel as one array per
 * key column, joined to the table through ROWS FROM (pg_catalog.unnest
 * of each) under the alias _llm_u (columns _llm_k1.., _llm_v, _llm_i); a
 * table whose columns or name clash with those makes the statement fail
 * to parse, which is raised (the caller then writes that job's rows one
 * at a time).  False,
 * with nothing prepared, when a key column's or the output column's type
 * has no array type.
 *   lock rows   SELECT i, prompt::text, out IS NULL, coalesce(where, false)
 *               FROM target JOIN unnest(keys) WITH ORDINALITY ON keys
 *               FOR UPDATE OF target SKIP LOCKED
 *   exist rows  SELECT i FROM target JOIN unnest(keys) ...
 *   write rows  UPDATE target SET out = v FROM unnest(keys, values) WHERE keys
 */
extern bool llm_job_prepare_batch(LlmJob *job);

/*
 * Initialise, without running it, SELECT (prompt), (where_clause) FROM
 * target WHERE false as the current user with the current search_path:
 * the executor checks what running the job's statements would check
 * (SELECT on the columns read, EXECUTE on every function and operator
 * called) and raises PostgreSQL's own error (42501).
 */
extern void llm_job_check_rights(const LlmJob *job);

/* Free kept plans, the batch ones too (the definition changed or the job is forgotten). */
extern void llm_job_unprepare(LlmJob *job);

/*
 * After llm_job_prepare: the target's columns the prompt and where clause
 * read (attribute numbers offset by FirstLowInvalidHeapAttributeNumber,
 * whole-row references as every column), and whether either expression
 * is volatile.
 */
extern Bitmapset *llm_job_read_columns(LlmJob *job, bool *volatile_expr);

/* Run job's statements as its owner with its search_path, until llm_job_leave. */
typedef struct LlmJobContext
{
	Oid			save_user;
	int			save_sec;
	int			guc_level;
} LlmJobContext;

extern void llm_job_enter(const LlmJob *job, LlmJobContext *c);
extern void llm_job_leave(LlmJobContext *c);

/* A row as the read and lock statements see it. */
typedef struct LlmJobRow
{
	bool		found;
	char	   *prompt;			/* NULL: the expression is NULL for this row */
	bool		output_null;
	bool		matches;		/* the where clause holds */
} LlmJobRow;

/*
 * Why a row needs no result (llm_job.skipped_by_reason counts them by
 * these names): it is gone under its key (deleted, truncated, its key
 * changed, moved to another partition or its partition detached), its
 * output is no longer NULL, the where clause no longer holds, or the
 * prompt is NULL for it.
 */
typedef enum LlmSkipReason
{
	LLM_SKIP_NONE = -1,
	LLM_SKIP_DELETED = 0,
	LLM_SKIP_FILLED,
	LLM_SKIP_WHERE,
	LLM_SKIP_PROMPT_NULL,
	LLM_SKIP_N
} LlmSkipReason;

extern const char *llm_skip_reason_name(LlmSkipReason r);

/* Why row (as read or locked, found) needs no result; LLM_SKIP_NONE: it does. */
extern LlmSkipReason llm_job_row_skip_reason(const LlmJobRow *row);

/* read / lock (SKIP LOCKED) the row of key (text[]); strings in the caller's context cxt. */
extern void llm_job_read_row(LlmJob *job, Datum key, bool lock, LlmJobRow *row, MemoryContext cxt);

/* Does a row with key exist (after lock found none: locked by someone else)? */
extern bool llm_job_row_exists(LlmJob *job, Datum key);

/* Write value (the output text, database encoding) into the row of key; returns rows updated. */
extern uint64 llm_job_write_row(LlmJob *job, Datum key, const char *value);

/*
 * The same for keys[0..n) in one statement each (after
 * llm_job_prepare_batch): rows[i] is what llm_job_read_row(lock) gives
 * for keys[i]; exists[i] whether a row of keys[i] exists; values[i] (the
 * output text) written into the row of keys[i], returning rows updated.
 * The keys are distinct.
 */
extern void llm_job_lock_rows(LlmJob *job, const Datum *keys, int n, LlmJobRow *rows, MemoryContext cxt);
extern void llm_job_rows_exist(LlmJob *job, const Datum *keys, int n, bool *exists);
extern uint64 llm_job_write_rows(LlmJob *job, const Datum *keys, char *const *values, int n);

/*
 * The key (text[]) of a row of the target from its key columns' values (in
 * key order: key_attnums), as the queue stores it.
 */
extern Datum llm_job_key_of(const LlmJob *job, const Datum *values, const bool *isnull);

/* The fill statement's text: every row the job needs, its key columns. */
extern char *llm_job_fill_sql(const LlmJob *job);

#endif
