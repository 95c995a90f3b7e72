/* pg_llm 0.3 -> 0.4.  Each feature of 0.4 has its own block below, in the
   order the features landed; a fresh install of 0.4 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.4'" to load this file. \quit

-- Jobs on partitioned tables, TRUNCATE, privileges: rows a job skipped are
-- counted by reason (deleted: gone under their key, by a DELETE, a
-- TRUNCATE, a changed key, a move to another partition or a detached
-- partition; filled: the output was set meanwhile; where_false: the where
-- clause no longer holds; prompt_null: the prompt is NULL for the row),
-- shown in llm_jobs after its other columns.
ALTER TABLE llm_job ADD COLUMN skipped_by_reason jsonb NOT NULL DEFAULT '{}';

CREATE OR REPLACE VIEW llm_jobs AS
SELECT j.id, current_database() AS database, j.target AS "table", j.output_column AS "column",
       j.state, j.mode, j.owner,
       j.rows_done + j.rows_failed + j.rows_skipped + coalesce(q.queued, 0) AS rows_total,
       j.rows_done, j.rows_failed, coalesce(q.in_flight, 0) AS rows_in_flight,
       coalesce(q.queued, 0) AS rows_queued, j.rows_skipped, j.rows_requeued,
       j.tokens_in, j.tokens_out,
       CASE WHEN j.state = 'running' THEN j.rows_per_s END AS rows_per_s,
       CASE WHEN j.state = 'running' AND j.rows_per_s > 0
            THEN make_interval(secs => coalesce(q.queued, 0) / j.rows_per_s) END AS eta,
       j.created_at, j.started_at, j.finished_at, j.last_error,
       j.skipped_by_reason
FROM llm_job j
LEFT JOIN LATERAL (
	SELECT count(*) AS queued,
	       count(*) FILTER (WHERE claimed_by IS NOT NULL AND lease_until > now()) AS in_flight
	FROM llm_job_queue WHERE job_id = j.id) q ON true
WHERE pg_has_role(j.owner, 'USAGE') OR pg_has_role('pg_read_all_stats', 'USAGE');

COMMENT ON VIEW llm_jobs IS
'Jobs of llm_enrich: state, rows total / done / failed / in flight / queued, tokens in and out, recent rows per second and ETA, times, last error, rows skipped by reason (deleted, filled, where_false, prompt_null). Shows the jobs of roles the caller has the privileges of (all to pg_read_all_stats).';

-- end of jobs on partitioned tables, TRUNCATE, privileges
