/* pg_llm 0.3 -> 0.4.  Each feature of 0.4 has its own block below, in the
   order the features landed; a fresh install of 0.4 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.4'" to load this file. \quit

-- Quotas
-- llm.max_tokens_per_minute is applied at admission: each request reserves
-- what it may use before it is sent.  A job's rows that do not fit wait:
-- llm_jobs shows until when and why.
ALTER TABLE llm_job ADD COLUMN throttled_until timestamptz, ADD COLUMN throttled_reason text;

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
       CASE WHEN j.state = 'running' AND j.throttled_until > now() THEN j.throttled_until END AS throttled_until,
       CASE WHEN j.state = 'running' AND j.throttled_until > now() THEN j.throttled_reason END AS throttled_reason
FROM llm_job j
LEFT JOIN LATERAL (
	SELECT count(*) AS queued,
	       count(*) FILTER (WHERE claimed_by IS NOT NULL AND lease_until > now()) AS in_flight
	FROM llm_job_queue WHERE job_id = j.id) q ON true
WHERE pg_has_role(j.owner, 'USAGE') OR pg_has_role('pg_read_all_stats', 'USAGE');

COMMENT ON VIEW llm_jobs IS
'Jobs of llm_enrich: state, rows total / done / failed / in flight / queued, tokens in and out, recent rows per second and ETA, times, last error, and while the owner''s token limit (llm.max_tokens_per_minute) holds its rows back, until when and why. Shows the jobs of roles the caller has the privileges of (all to pg_read_all_stats).';

-- end of quotas

-- Asynchronous store
-- a role lists its own asynchronous requests and drops them all
CREATE FUNCTION llm_async_requests(
	OUT id bigint, OUT status text, OUT submitted_at timestamptz, OUT ended_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_async_requests'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION llm_cancel_all() RETURNS bigint
AS 'MODULE_PATHNAME', 'pg_llm_cancel_all'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION llm_async_requests() IS 'The current role''s asynchronous requests (llm_submit) in the store: id, status (queued, running, cancelling, done, failed, cancelled), submitted and ended times.';
COMMENT ON FUNCTION llm_cancel_all() IS 'Drop every asynchronous request of the current role: queued and running ones cancelled, results discarded, their entries freed; returns how many.';

REVOKE ALL ON FUNCTION llm_async_requests() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_cancel_all() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_async_requests() TO llm_user;
GRANT EXECUTE ON FUNCTION llm_cancel_all() TO llm_user;

-- end of asynchronous store
