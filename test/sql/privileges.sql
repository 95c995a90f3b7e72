--
-- privileges: generation needs llm_user; server-level settings need a
-- superuser and a reload.
--
CREATE ROLE regress_llm_plain;
CREATE ROLE regress_llm_member IN ROLE llm_user;
SELECT pg_has_role('regress_llm_member', 'llm_user', 'MEMBER') AS member;
SET ROLE regress_llm_plain;
SELECT llm_generate('hi', max_tokens => 1);
SELECT llm_generate(ARRAY['hi'], max_tokens => 1);
SELECT llm_complete('hi', max_tokens => 1);
SELECT llm_chat('[{"role": "user", "content": "hi"}]', max_tokens => 1);
SELECT llm_tokenize('hi');
SELECT llm_detokenize(ARRAY[1]);
SELECT count(*) FROM llm_stat;
SELECT llm_stat_reset();
SET llm.model = '/tmp/other.gguf';
ALTER SYSTEM SET llm.model = '/tmp/other.gguf';
SET llm.context_length = 64;
RESET ROLE;
-- the superuser's reply and tokens, which a member must get too
SELECT llm_generate('Say yes.', max_tokens => 2) AS say_yes, llm_tokenize('hi') AS hi_tokens \gset
SET ROLE regress_llm_member;
SELECT llm_generate('Say yes.', max_tokens => 2) = :'say_yes' AS member_can_generate;
SELECT llm_tokenize('hi') = :'hi_tokens' AS member_can_tokenize;
SELECT worker_pid IS NOT NULL AS member_can_read_stats FROM llm_stat;
SELECT llm_stat_reset();
SET llm.kv_cache_size = '1GB';
SET llm.debug_poison_logits = 1;
SET llm.worker_wait_timeout = '5s';
RESET llm.worker_wait_timeout;
RESET ROLE;
-- even a superuser cannot SET a reload-time setting in a session
SET llm.model = '/tmp/other.gguf';
SET llm.device = 'cpu';
-- the llm prefix is reserved
SET llm.no_such_setting = 1;
-- every setting documented, with its context and unit
SELECT name, unit, context, vartype, boot_val, short_desc <> '' AS described
FROM pg_settings WHERE name LIKE 'llm.%' AND name <> 'llm.model' ORDER BY name;
SELECT boot_val LIKE '%/extension/llm/SmolLM2-135M-Instruct.Q4_1.gguf' AS default_model, context
FROM pg_settings WHERE name = 'llm.model';
-- EXECUTE is not granted to PUBLIC
SELECT p.proname, has_function_privilege('public', p.oid, 'EXECUTE') AS public_exec,
       has_function_privilege('llm_user', p.oid, 'EXECUTE') AS llm_user_exec
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
ORDER BY p.proname, p.oid::regprocedure::text;
--
-- Calls the LLM Batch node evaluates itself are checked as PostgreSQL checks
-- any function call: EXECUTE for the current user at executor start.  Every
-- case runs batched (the plan shows the node) and unbatched, with the same
-- result.
--
CREATE TABLE priv_rows AS SELECT g FROM generate_series(1, 2) g;
GRANT SELECT ON priv_rows TO PUBLIC;
EXPLAIN (COSTS OFF) SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM priv_rows;
CREATE FUNCTION priv_try(q text) RETURNS TABLE(batched text, unbatched text)
LANGUAGE plpgsql AS $$
BEGIN
	SET LOCAL llm.enable_batch_scan = on;
	batched := try_sql(q);
	SET LOCAL llm.enable_batch_scan = off;
	unbatched := try_sql(q);
	RETURN NEXT;
END
$$;
-- a role without the grant: refused, batched or not (EXPLAIN too, like a plain call)
SET ROLE regress_llm_plain;
SELECT * FROM priv_try($$SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM priv_rows$$);
SELECT * FROM priv_try($$EXPLAIN SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM priv_rows$$);
SELECT * FROM priv_try($$SELECT length(llm_generate('Say ' || g, max_tokens => 1)) FROM priv_rows$$);
SELECT * FROM priv_try($$CREATE TEMP TABLE priv_out AS SELECT llm_generate('Say ' || g, max_tokens => 1) AS t FROM priv_rows$$);
-- the error is the one of a plain call: 42501, the function's name (plus a
-- hint naming the grant, which PostgreSQL's own check of a plain call lacks)
SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM priv_rows;
RESET ROLE;
-- a member: allowed, batched or not
SET ROLE regress_llm_member;
SELECT * FROM priv_try($$SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM priv_rows$$);
RESET ROLE;
-- views: the caller's EXECUTE right counts, not the view owner's
CREATE VIEW priv_view AS SELECT g, llm_generate('Say ' || g, max_tokens => 1) AS t FROM priv_rows;
ALTER VIEW priv_view OWNER TO regress_llm_member;
GRANT SELECT ON priv_view TO regress_llm_plain;
SET ROLE regress_llm_plain;
SELECT * FROM priv_try('SELECT * FROM priv_view');
RESET ROLE;
SET ROLE regress_llm_member;
SELECT * FROM priv_try('SELECT * FROM priv_view');
RESET ROLE;
-- SECURITY DEFINER: the owner's rights apply inside, as for any function
CREATE FUNCTION priv_definer_plain() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS
$$ SELECT count(t) FROM (SELECT g, llm_generate('Say ' || g, max_tokens => 1) AS t FROM priv_rows) s $$;
ALTER FUNCTION priv_definer_plain() OWNER TO regress_llm_plain;
CREATE FUNCTION priv_definer_member() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS
$$ SELECT count(t) FROM (SELECT g, llm_generate('Say ' || g, max_tokens => 1) AS t FROM priv_rows) s $$;
ALTER FUNCTION priv_definer_member() OWNER TO regress_llm_member;
-- (the functions' query is batched)
EXPLAIN (COSTS OFF) SELECT count(t) FROM (SELECT g, llm_generate('Say ' || g, max_tokens => 1) AS t FROM priv_rows) s;
-- a member calling a definer owned by a role without the grant: refused
SET ROLE regress_llm_member;
SELECT * FROM priv_try('SELECT priv_definer_plain()');
RESET ROLE;
-- a role without the grant calling a definer owned by a member: allowed
SET ROLE regress_llm_plain;
SELECT * FROM priv_try('SELECT priv_definer_member()');
RESET ROLE;
-- Prepared statements and PL/pgSQL's cached plans are checked at every
-- execution: after a revoked membership (which invalidates no plan) and after
-- a revoked direct grant.
CREATE ROLE regress_llm_revoked IN ROLE llm_user;
CREATE FUNCTION priv_cached() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
	SELECT count(t) INTO n FROM (SELECT g, llm_generate('Say ' || g, max_tokens => 1) AS t FROM priv_rows) s;
	RETURN n;
END
$$;
SET ROLE regress_llm_revoked;
PREPARE priv_batched AS SELECT g, llm_generate('Say ' || g, max_tokens => 1) AS reply FROM priv_rows;
PREPARE priv_unbatched AS SELECT g, llm_generate('Say ' || g, max_tokens => 1) AS reply FROM priv_rows;
-- the generic plans are built here, one with the node and one without
EXPLAIN (COSTS OFF) EXECUTE priv_batched;
SET llm.enable_batch_scan = off;
EXPLAIN (COSTS OFF) EXECUTE priv_unbatched;
RESET llm.enable_batch_scan;
EXECUTE priv_batched;
EXECUTE priv_unbatched;
SELECT priv_cached();
RESET ROLE;
REVOKE llm_user FROM regress_llm_revoked;
SET ROLE regress_llm_revoked;
SELECT try_sql('EXECUTE priv_batched') AS batched, try_sql('EXECUTE priv_unbatched') AS unbatched;
SELECT try_sql('SELECT priv_cached()') AS cached_plan;
RESET ROLE;
-- llm_generate(text, ...) by its first argument: its argument list grows with the versions
SELECT oid::regprocedure AS llm_generate_text FROM pg_proc
WHERE proname = 'llm_generate' AND proargtypes[0] = 'text'::regtype \gset
GRANT EXECUTE ON FUNCTION :llm_generate_text TO regress_llm_revoked;
SET ROLE regress_llm_revoked;
EXECUTE priv_batched;
SELECT priv_cached();
RESET ROLE;
REVOKE EXECUTE ON FUNCTION :llm_generate_text FROM regress_llm_revoked;
SET ROLE regress_llm_revoked;
SELECT * FROM priv_try('EXECUTE priv_batched');
SELECT try_sql('SELECT priv_cached()') AS cached_plan;
DEALLOCATE priv_batched;
DEALLOCATE priv_unbatched;
RESET ROLE;
DROP VIEW priv_view;
DROP FUNCTION priv_definer_plain(), priv_definer_member(), priv_cached(), priv_try(text);
DROP TABLE priv_rows;
DROP ROLE regress_llm_plain;
DROP ROLE regress_llm_member;
DROP ROLE regress_llm_revoked;
