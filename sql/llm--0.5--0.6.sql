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
-- end of model cascades
