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
SET ROLE regress_llm_member;
SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL AS member_can_generate;
SELECT llm_tokenize('hi') IS NOT NULL AS member_can_tokenize;
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
DROP ROLE regress_llm_plain;
DROP ROLE regress_llm_member;
