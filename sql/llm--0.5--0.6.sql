/* pg_llm 0.5 -> 0.6.  Each feature of 0.6 has its own block below, in the
   order the features landed; a fresh install of 0.6 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.6'" to load this file. \quit

-- semantic joins
-- llm_join(input, question, candidates): the 1-based positions of the
-- candidates for which llm_filter(input || E'\n\nCandidate:\n' || candidate,
-- question) is true, each row's candidates scored in forked requests that
-- share the row's prompt (docs/SEMANTIC_JOINS.md).  An array rather than a
-- set so that it composes in target lists, WHERE (cardinality, = ANY) and
-- LEFT JOIN LATERAL unnest(...).
CREATE FUNCTION llm_join(
	input text,
	question text,
	candidates text[],
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL,
	model text DEFAULT NULL,
	tools jsonb DEFAULT NULL,
	enable_thinking boolean DEFAULT NULL)
RETURNS int[]
AS 'MODULE_PATHNAME', 'pg_llm_join'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_join(text, text, text[], text, text, text, text, jsonb, boolean) IS
'The 1-based positions of the candidates for which llm_filter(input || E''\n\nCandidate:\n'' || candidate, question) is true, one forked request per row (and per 64 candidates). NULL input gives NULL; NULL candidates give {}; a NULL or empty candidate never matches.';

REVOKE ALL ON FUNCTION llm_join(text, text, text[], text, text, text, text, jsonb, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_join(text, text, text[], text, text, text, text, jsonb, boolean) TO llm_user;
-- end of semantic joins
-- calls saved
--
-- llm_usage and llm_progress gain the calls the LLM Batch nodes saved
-- (common/stats.h, LLM_COUNTERS_SAVED): calls_shared (answered by an
-- identical call's request), lift_rows_below (rows of the scans filters
-- were lifted from: the calls PostgreSQL's placement would have made) and
-- lift_rows_reached (rows that reached those filters at their join);
-- calls_saved_by_lift is their difference (negative where the planner's
-- estimates were wrong).  The functions' result types change, so they and
-- their views are made again with the same grants.

DROP VIEW llm_usage;
DROP FUNCTION llm_usage();
CREATE FUNCTION llm_usage(
	OUT role_oid oid,
	OUT database_oid oid,
	OUT requests bigint,
	OUT prompt_tokens bigint,
	OUT cached_tokens bigint,
	OUT completion_tokens bigint,
	OUT busy_ms float8,
	OUT calls_shared bigint,
	OUT lift_rows_below bigint,
	OUT lift_rows_reached bigint,
	OUT tokens_last_minute bigint,
	OUT interactive_requests bigint,
	OUT batch_requests bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_usage'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 128;

COMMENT ON FUNCTION llm_usage() IS
'Token usage per (role, database) from the llm worker''s shared memory: requests, prompt/cached/completion tokens, compute time (ms), calls saved by sharing and by lifting filters above joins, tokens of the last minute, requests per scheduling class. Reset by llm_stat_reset() (except the last minute).';

CREATE VIEW llm_usage AS
	SELECT r.rolname AS role, d.datname AS database, u.requests, u.prompt_tokens, u.cached_tokens,
		   u.completion_tokens, u.busy_ms, u.tokens_last_minute, u.interactive_requests, u.batch_requests,
		   u.calls_shared, u.lift_rows_below, u.lift_rows_reached,
		   u.lift_rows_below - u.lift_rows_reached AS calls_saved_by_lift
	FROM llm_usage() u
	LEFT JOIN pg_roles r ON r.oid = u.role_oid
	LEFT JOIN pg_database d ON d.oid = u.database_oid;

COMMENT ON VIEW llm_usage IS 'Token usage of the llm worker per role and database, and the calls saved (see llm_usage()).';

REVOKE ALL ON FUNCTION llm_usage() FROM PUBLIC;
REVOKE ALL ON llm_usage FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_usage() TO llm_user, pg_monitor;
GRANT SELECT ON llm_usage TO llm_user, pg_monitor;

DROP VIEW llm_progress;
DROP FUNCTION llm_progress();
CREATE FUNCTION llm_progress(
	OUT pid int,
	OUT statement_start timestamptz,
	OUT first_call timestamptz,
	OUT last_change timestamptz,
	OUT calls_submitted bigint,
	OUT calls_finished bigint,
	OUT calls_failed bigint,
	OUT calls_aborted bigint,
	OUT prompt_tokens bigint,
	OUT cached_tokens bigint,
	OUT completion_tokens bigint,
	OUT batch_rows bigint,
	OUT calls_shared bigint,
	OUT lift_rows_below bigint,
	OUT lift_rows_reached bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_progress'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 100;

COMMENT ON FUNCTION llm_progress() IS
'Raw per-backend LLM counters of the statement each backend last ran (see the llm_progress view).';

CREATE VIEW llm_progress AS
SELECT p.pid, a.datname AS database, a.usename AS role, a.backend_type,
       p.calls_submitted, p.calls_finished, p.calls_failed, p.calls_aborted,
       p.calls_submitted - p.calls_finished - p.calls_failed - p.calls_aborted AS calls_in_flight,
       p.prompt_tokens, p.cached_tokens, p.completion_tokens,
       p.batch_rows AS batch_rows_done,
       clock_timestamp() - p.statement_start AS elapsed,
       p.statement_start, p.last_change, a.query,
       p.calls_shared, p.lift_rows_below, p.lift_rows_reached,
       p.lift_rows_below - p.lift_rows_reached AS calls_saved_by_lift
FROM llm_progress() p
JOIN pg_stat_activity a ON a.pid = p.pid AND a.query_start = p.statement_start AND a.state = 'active';

COMMENT ON VIEW llm_progress IS
'One row per running statement that calls the llm worker: calls submitted / finished / failed / aborted / in flight, tokens, rows returned by its LLM Batch nodes, elapsed time, calls saved by sharing (as they are shared) and by lifting filters above joins (when each LLM Batch node ends). Like pg_stat_activity, other roles'' statements show only to members of pg_read_all_stats.';

REVOKE ALL ON FUNCTION llm_progress() FROM PUBLIC;
REVOKE ALL ON llm_progress FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_progress() TO llm_user, pg_monitor;
GRANT SELECT ON llm_progress TO llm_user, pg_monitor;
-- end of calls saved

-- model cascades
--
-- llm_filter and llm_classify take a small model for a cascade
-- (docs/CASCADES.md): cascade (an llm.models alias; NULL: llm.cascade_model,
-- empty for none), the targets (llm_filter: precision_target and
-- recall_target; llm_classify: accuracy_target), cascade_delta and
-- cascade_seed; NULL takes the llm.cascade_* setting.  An LLM Batch node
-- answers its rows with the small model where the learnt threshold allows
-- and the call's model elsewhere; a call evaluated alone reads and checks
-- them and answers with the call's model.  Each function is widened in
-- place (its OID, grants, comment, cost support and dependants kept).
DO $cascade$
DECLARE
	common constant text := 'cascade text DEFAULT NULL';
	r record;
	tpl text;
BEGIN
	FOR r IN
		SELECT p.oid::regprocedure AS target, p.proname, p.probin, p.prosrc,
		       pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result, w.added
		FROM (VALUES
			('pg_llm_filter', common || ', precision_target float8 DEFAULT NULL, recall_target float8 DEFAULT NULL'
			                  || ', cascade_delta float8 DEFAULT NULL, cascade_seed bigint DEFAULT NULL'),
			('pg_llm_classify', common || ', accuracy_target float8 DEFAULT NULL'
			                    || ', cascade_delta float8 DEFAULT NULL, cascade_seed bigint DEFAULT NULL')) w(symbol, added)
		JOIN pg_proc p ON p.prosrc = w.symbol AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
		JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
		JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
		ORDER BY 1
	LOOP
		tpl := r.proname || '_0_5_cascade';
		EXECUTE format('CREATE FUNCTION %I(%s, %s) RETURNS %s AS %L, %L LANGUAGE C', tpl,
					   r.args, r.added, r.result, r.probin, r.prosrc);
		PERFORM llm_widen_function(r.target,
								   (SELECT p.oid FROM pg_proc p
								    WHERE p.proname = tpl AND p.pronamespace = (SELECT pronamespace FROM pg_proc WHERE oid = r.target))::regprocedure);
	END LOOP;
END
$cascade$;

-- llm_progress: the running statement's cascade calls (small model, the
-- sample's large-model calls, the other large-model calls), as three more
-- columns of the function (widened in place) and of the view.
CREATE FUNCTION llm_progress_0_6_cascade(
	OUT pid int,
	OUT statement_start timestamptz,
	OUT first_call timestamptz,
	OUT last_change timestamptz,
	OUT calls_submitted bigint,
	OUT calls_finished bigint,
	OUT calls_failed bigint,
	OUT calls_aborted bigint,
	OUT prompt_tokens bigint,
	OUT cached_tokens bigint,
	OUT completion_tokens bigint,
	OUT batch_rows bigint,
	OUT calls_shared bigint,
	OUT lift_rows_below bigint,
	OUT lift_rows_reached bigint,
	OUT cascade_small_calls bigint,
	OUT cascade_sample_calls bigint,
	OUT cascade_large_calls bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_progress'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 100;
SELECT llm_widen_result('llm_progress()'::regprocedure, 'llm_progress_0_6_cascade()'::regprocedure);

CREATE OR REPLACE VIEW llm_progress AS
SELECT p.pid, a.datname AS database, a.usename AS role, a.backend_type,
       p.calls_submitted, p.calls_finished, p.calls_failed, p.calls_aborted,
       p.calls_submitted - p.calls_finished - p.calls_failed - p.calls_aborted AS calls_in_flight,
       p.prompt_tokens, p.cached_tokens, p.completion_tokens,
       p.batch_rows AS batch_rows_done,
       clock_timestamp() - p.statement_start AS elapsed,
       p.statement_start, p.last_change, a.query,
       p.calls_shared, p.lift_rows_below, p.lift_rows_reached,
       p.lift_rows_below - p.lift_rows_reached AS calls_saved_by_lift,
       p.cascade_small_calls, p.cascade_sample_calls, p.cascade_large_calls
FROM llm_progress() p
JOIN pg_stat_activity a ON a.pid = p.pid AND a.query_start = p.statement_start AND a.state = 'active';
-- end of model cascades
