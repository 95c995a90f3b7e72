/* pg_llm 0.5 -> 0.6.  Each feature of 0.6 has its own block below, in the
   order the features landed; a fresh install of 0.6 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.6'" to load this file. \quit

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
CREATE FUNCTION llm_progress_0_5_cascade(
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
	OUT cascade_small_calls bigint,
	OUT cascade_sample_calls bigint,
	OUT cascade_large_calls bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_progress'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 100;
SELECT llm_widen_result('llm_progress()'::regprocedure, 'llm_progress_0_5_cascade()'::regprocedure);

CREATE OR REPLACE VIEW llm_progress AS
SELECT p.pid, a.datname AS database, a.usename AS role, a.backend_type,
       p.calls_submitted, p.calls_finished, p.calls_failed, p.calls_aborted,
       p.calls_submitted - p.calls_finished - p.calls_failed - p.calls_aborted AS calls_in_flight,
       p.prompt_tokens, p.cached_tokens, p.completion_tokens,
       p.batch_rows AS batch_rows_done,
       clock_timestamp() - p.statement_start AS elapsed,
       p.statement_start, p.last_change, a.query,
       p.cascade_small_calls, p.cascade_sample_calls, p.cascade_large_calls
FROM llm_progress() p
JOIN pg_stat_activity a ON a.pid = p.pid AND a.query_start = p.statement_start AND a.state = 'active';
-- end of model cascades
