--
-- widen: how an extension update adds optional arguments to a function that
-- user objects depend on (README, "Argument and upgrade policy"):
-- llm_widen_function() appends them in place, keeping the function's OID,
-- on a scratch C function of the extension (llm_generate's C function under
-- an older, shorter argument list) while a view, a materialized view, a
-- BEGIN ATOMIC function and open cursors depend on it.
--
CREATE FUNCTION scratch_generate(prompt text, max_tokens int DEFAULT 256, stop text[] DEFAULT NULL)
RETURNS text AS '$libdir/llm', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
-- arguments are read by name: stop is the third argument here, the ninth of llm_generate
SELECT scratch_generate('1, 2, 3, 4, 5, 6, 7, 8,', 20, ARRAY['12'])
     = llm_generate('1, 2, 3, 4, 5, 6, 7, 8,', max_tokens => 20, stop => ARRAY['12']) AS same_as_llm_generate;
SELECT scratch_generate('Say yes.', max_tokens => 4) AS before \gset
CREATE TABLE scratch_rows AS SELECT g FROM generate_series(1, 3) g;
CREATE VIEW scratch_view AS SELECT scratch_generate('Say yes.', max_tokens => 4) AS g;
CREATE VIEW scratch_rows_view AS SELECT g, scratch_generate('Say the number ' || g, 4) AS t FROM scratch_rows;
CREATE MATERIALIZED VIEW scratch_mat AS SELECT scratch_generate('Say yes.', 4) AS g;
CREATE FUNCTION scratch_atomic(p text) RETURNS text LANGUAGE sql
BEGIN ATOMIC
  SELECT scratch_generate(p, max_tokens => 4, stop => ARRAY['!']);
END;
CREATE TABLE scratch_before AS SELECT g, t FROM scratch_rows_view;
SELECT oid AS scratch_oid FROM pg_proc WHERE proname = 'scratch_generate' \gset
-- an overload with defaults instead would make existing calls ambiguous
CREATE FUNCTION scratch_generate(prompt text, max_tokens int DEFAULT 256, stop text[] DEFAULT NULL,
                                 system text DEFAULT NULL)
RETURNS text AS '$libdir/llm', 'pg_llm_generate' LANGUAGE C CALLED ON NULL INPUT VOLATILE;
SELECT try_sql($$SELECT scratch_generate('Say yes.', max_tokens => 4)$$) AS with_overload;
DROP FUNCTION scratch_generate(text, int, text[], text);
-- and the function cannot be dropped and recreated while objects depend on it
SELECT try_sql('DROP FUNCTION scratch_generate(text, int, text[])') AS drop_refused;

CREATE FUNCTION scratch_fetch_same(cur refcursor) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r record;
	n int := 0;
	same int := 0;
BEGIN
	LOOP
		FETCH cur INTO r;
		EXIT WHEN NOT FOUND;
		n := n + 1;
		IF r.t = (SELECT b.t FROM scratch_before b WHERE b.g = r.g) THEN
			same := same + 1;
		END IF;
	END LOOP;
	RETURN same || ' of ' || n;
END
$$;
-- cursors planned before the widening and fetched after it: their calls pass
-- three arguments to a function that then has six (batched and row by row)
BEGIN;
DECLARE scratch_one CURSOR FOR SELECT scratch_generate('Say yes.', max_tokens => 4) AS g;
DECLARE scratch_batch CURSOR FOR SELECT g, scratch_generate('Say the number ' || g, 4) AS t FROM scratch_rows;
-- the template: the same arguments, then the new ones, each with a default
CREATE FUNCTION scratch_generate_next(prompt text, max_tokens int DEFAULT 256, stop text[] DEFAULT NULL,
                                      system text DEFAULT NULL, temperature float8 DEFAULT 0,
                                      seed bigint DEFAULT NULL)
RETURNS text AS '$libdir/llm', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('scratch_generate(text, int, text[])', 'scratch_generate_next(text, int, text[], text, float8, bigint)');
FETCH ALL scratch_one \gset fetched_
SELECT :'fetched_g' = :'before' AS cursor_same;
SELECT scratch_fetch_same('scratch_batch') AS batch_cursor_same;
COMMIT;

-- one function, the same OID, the template gone, the new signature
SELECT count(*) AS functions, bool_and(oid = :scratch_oid) AS same_oid
FROM pg_proc WHERE proname IN ('scratch_generate', 'scratch_generate_next');
SELECT pg_get_function_arguments(:scratch_oid);
-- the dependents work as before
SELECT g = :'before' AS view_same FROM scratch_view;
SELECT count(*) AS rows, count(*) FILTER (WHERE v.t = b.t) AS same
FROM scratch_rows_view v JOIN scratch_before b USING (g);
REFRESH MATERIALIZED VIEW scratch_mat;
SELECT g = :'before' AS matview_same FROM scratch_mat;
SELECT scratch_atomic('Say yes.') = scratch_generate('Say yes.', 4, ARRAY['!']) AS atomic_same;
-- the view of rows is still batched, with the function's new argument count
EXPLAIN (COSTS OFF) SELECT * FROM scratch_rows_view;
-- the new arguments by name, the old calls unambiguous
SELECT scratch_generate('Who are you?', max_tokens => 12, system => 'You are a pirate.')
     = llm_generate('Who are you?', max_tokens => 12, system => 'You are a pirate.') AS new_argument;
SELECT scratch_generate('Say yes.', 4) = :'before' AS positional_call;
-- a dump of the view restores onto the widened function through its defaults
SELECT pg_get_viewdef('scratch_view'::regclass) AS viewdef;
DO $$ BEGIN EXECUTE 'CREATE VIEW scratch_restored AS ' || pg_get_viewdef('scratch_view'::regclass); END $$;
SELECT g = :'before' AS restored_same FROM scratch_restored;
SELECT count(DISTINCT refobjid) AS functions, bool_and(refobjid = :scratch_oid) AS same_oid
FROM pg_depend d JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
WHERE r.ev_class IN ('scratch_view'::regclass, 'scratch_restored'::regclass)
  AND d.refclassid = 'pg_proc'::regclass;

-- new arguments of types the update creates: the function depends on them
CREATE FUNCTION scratch_sql(a int, b int DEFAULT 1) RETURNS int LANGUAGE sql AS 'SELECT a + b';
CREATE VIEW scratch_sql_view AS SELECT scratch_sql(1) AS s;
CREATE DOMAIN scratch_level AS text CHECK (VALUE IN ('low', 'high'));
CREATE FUNCTION scratch_sql_next(a int, b int DEFAULT 1, c scratch_level DEFAULT 'low') RETURNS int
LANGUAGE sql AS 'SELECT a + b + length(c)';
SELECT llm_widen_function('scratch_sql(int, int)', 'scratch_sql_next(int, int, scratch_level)');
SELECT s FROM scratch_sql_view;
SELECT scratch_sql(1, c => 'high') AS with_new_argument;
SELECT try_sql('DROP DOMAIN scratch_level') AS domain_drop;

-- what is refused (the reason is the error's detail), with nothing changed
CREATE FUNCTION try_detail(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || d;
END
$$;
CREATE FUNCTION scratch_old(a int, b int DEFAULT 1) RETURNS int LANGUAGE sql AS 'SELECT a';
CREATE FUNCTION scratch_nodefault(a int) RETURNS int LANGUAGE sql AS 'SELECT a';
CREATE FUNCTION scratch_t1(a int, b int DEFAULT 2, c int DEFAULT 0) RETURNS int LANGUAGE sql AS 'SELECT a';
CREATE FUNCTION scratch_t2(b int, a int DEFAULT 1, c int DEFAULT 0) RETURNS int LANGUAGE sql AS 'SELECT a';
CREATE FUNCTION scratch_t3(a int, b int DEFAULT 1, c int DEFAULT 0) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION scratch_t4(a int) RETURNS int LANGUAGE sql AS 'SELECT a';
CREATE FUNCTION scratch_t5(a int, c int) RETURNS int LANGUAGE sql AS 'SELECT a';
CREATE FUNCTION scratch_t6(a int, b int DEFAULT 1, VARIADIC c int[] DEFAULT '{}') RETURNS int LANGUAGE sql AS 'SELECT a';
CREATE FUNCTION scratch_t7(a text, x int DEFAULT 1) RETURNS text LANGUAGE sql AS 'SELECT a';
SELECT target, template, try_detail(format('SELECT llm_widen_function(%L, %L)', target, template)) AS refused
FROM (VALUES ('scratch_old(int, int)', 'scratch_old(int, int)'),
             ('scratch_old(int, int)', 'scratch_t1(int, int, int)'),
             ('scratch_old(int, int)', 'scratch_t2(int, int, int)'),
             ('scratch_old(int, int)', 'scratch_t3(int, int, int)'),
             ('scratch_old(int, int)', 'scratch_t4(int)'),
             ('scratch_nodefault(int)', 'scratch_t5(int, int)'),
             ('scratch_old(int, int)', 'scratch_t6(int, int, int[])'),
             ('upper(text)', 'scratch_t7(text, int)'),
             ('scratch_old(int, int)', 'int4pl(int, int)')) v(target, template);
SELECT pg_get_function_arguments('scratch_old(int, int)'::regprocedure) AS unchanged,
       count(*) AS templates_kept FROM pg_proc WHERE proname ~ '^scratch_t[1-7]$';
-- superusers only: not granted to PUBLIC, and checked inside if granted
CREATE ROLE regress_llm_widener;
SET ROLE regress_llm_widener;
SELECT try_sql($$SELECT llm_widen_function('scratch_old(int, int)', 'scratch_t1(int, int, int)')$$) AS not_granted;
RESET ROLE;
GRANT EXECUTE ON FUNCTION llm_widen_function(regprocedure, regprocedure) TO regress_llm_widener;
SET ROLE regress_llm_widener;
SELECT try_sql($$SELECT llm_widen_function('scratch_old(int, int)', 'scratch_t1(int, int, int)')$$) AS granted;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION llm_widen_function(regprocedure, regprocedure) FROM regress_llm_widener;
DROP ROLE regress_llm_widener;

DROP VIEW scratch_view, scratch_rows_view, scratch_restored, scratch_sql_view;
DROP MATERIALIZED VIEW scratch_mat;
DROP FUNCTION scratch_atomic(text);
DROP FUNCTION scratch_generate(text, int, text[], text, float8, bigint);
DROP FUNCTION scratch_sql(int, int, scratch_level), scratch_old(int, int), scratch_nodefault(int),
  scratch_t1(int, int, int), scratch_t2(int, int, int), scratch_t3(int, int, int), scratch_t4(int),
  scratch_t5(int, int), scratch_t6(int, int, int[]), scratch_t7(text, int), scratch_fetch_same(refcursor), try_detail(text);
DROP DOMAIN scratch_level;
DROP TABLE scratch_rows, scratch_before;
SELECT wait_idle();
