--
-- arguments: the library reads the generation functions' optional arguments
-- by name through one table (llm_generation_arguments()); every optional
-- argument of every generation function must be a row of it with the same
-- type and a SQL DEFAULT equal to the row's default.
--
SELECT name, type, default_value FROM llm_generation_arguments();
CREATE FUNCTION arguments_check() RETURNS TABLE(function text, optional_arguments int, all_known boolean,
                                                same_types boolean, same_defaults boolean)
LANGUAGE plpgsql AS $$
DECLARE
	r record;
	same boolean;
BEGIN
	FOR r IN
		SELECT p.proname || '(' || p.proargtypes[0]::regtype || ', ...)' AS fn, a.n, p.proargnames[a.n] AS arg,
		       p.proargtypes[a.n - 1]::regtype AS argtype,
		       pg_get_function_arg_default(p.oid, a.n) AS sql_default,
		       t.name IS NOT NULL AS known, t.type AS table_type, t.default_value
		FROM pg_proc p
		JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
		JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
		CROSS JOIN LATERAL generate_series(2, p.pronargs) a(n)
		LEFT JOIN llm_generation_arguments() t ON t.name = p.proargnames[a.n]
		WHERE p.prosrc IN ('pg_llm_generate', 'pg_llm_generate_array', 'pg_llm_complete', 'pg_llm_chat')
		ORDER BY 1, 2
	LOOP
		same := false;
		IF r.known THEN
			EXECUTE format('SELECT (%s)::%s IS NOT DISTINCT FROM (%L)::%s',
						   r.sql_default, r.argtype, r.default_value, r.argtype) INTO same;
		END IF;
		function := r.fn;
		optional_arguments := 1;
		all_known := r.known;
		same_types := r.known AND r.table_type = r.argtype;
		same_defaults := same;
		RETURN NEXT;
	END LOOP;
END
$$;
SELECT function, sum(optional_arguments) AS optional_arguments, bool_and(all_known) AS all_known,
       bool_and(same_types) AS same_types, bool_and(same_defaults) AS same_defaults
FROM arguments_check() GROUP BY function ORDER BY function;
-- llm_generate(text) takes every row (the batchable function has them all)
SELECT count(*) AS rows, count(*) FILTER (WHERE p.proargnames @> ARRAY[t.name]) AS in_llm_generate
FROM llm_generation_arguments() t,
     (SELECT proargnames FROM pg_proc WHERE proname = 'llm_generate' AND proargtypes[0] = 'text'::regtype) p;
-- a NULL argument means the row's default, a named one goes where its name says
SELECT llm_generate('1, 2, 3, 4, 5, 6, 7, 8,', raw => true, max_tokens => 20, stop => ARRAY['12'])
     = llm_generate('1, 2, 3, 4, 5, 6, 7, 8,', 20, NULL, NULL, NULL, NULL, NULL, NULL, ARRAY['12'], NULL, true) AS by_name_and_position;
DROP FUNCTION arguments_check();
SELECT wait_idle();
