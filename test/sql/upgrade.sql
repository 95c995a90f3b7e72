--
-- upgrade: ALTER EXTENSION llm UPDATE from 0.1 to the default version
-- (whatever it is: the chain of update scripts) with user objects depending
-- on the generation functions (a view, a materialized view, SQL-standard
-- function bodies): they keep working, every 0.1 function keeps its OID, and
-- the updated extension equals a fresh install of the default version.
--
-- what describes the extension's objects, defined in both databases
SELECT $sql$
CREATE FUNCTION extension_objects() RETURNS TABLE(object text, description text) LANGUAGE sql AS $$
  SELECT p.oid::regprocedure::text,
         concat_ws(' | ', pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), p.prokind,
                   p.provolatile, p.proparallel, p.proisstrict, p.prorows, p.prosrc, p.probin,
                   p.proacl::text, obj_description(p.oid, 'pg_proc'))
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
  UNION ALL
  SELECT c.oid::regclass::text,
         concat_ws(' | ', c.relkind, pg_get_viewdef(c.oid), c.relacl::text, obj_description(c.oid, 'pg_class'))
  FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
$$;
$sql$ AS extension_objects \gset
CREATE DATABASE llm_upgrade;
\c llm_upgrade
SET client_min_messages = warning;
CREATE EXTENSION llm VERSION '0.1';
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'llm';
CREATE TABLE tickets AS SELECT i AS id, 'Say the number ' || i || ' in words.' AS body FROM generate_series(1, 3) i;
CREATE VIEW ticket_replies AS SELECT id, llm_generate(body, max_tokens => 6) AS reply FROM tickets;
CREATE MATERIALIZED VIEW ticket_usage AS
  SELECT t.id, c.* FROM tickets t, LATERAL llm_complete(t.body, max_tokens => 4) c;
CREATE FUNCTION chat_reply(p text) RETURNS text LANGUAGE sql
BEGIN ATOMIC
  SELECT llm_chat(jsonb_build_array(jsonb_build_object('role', 'user', 'content', p)), max_tokens => 6);
END;
CREATE FUNCTION replies(p text[]) RETURNS text[] LANGUAGE sql
BEGIN ATOMIC
  SELECT llm_generate(p, 6, stop => ARRAY['!']);
END;
CREATE TABLE before AS
  SELECT (SELECT array_agg(reply ORDER BY id) FROM ticket_replies) AS view_replies,
         (SELECT array_agg(text ORDER BY id) FROM ticket_usage) AS matview_texts,
         chat_reply('Say hi.') AS chat, replies(ARRAY['Say a.', 'Say b.']) AS array_replies;
CREATE TABLE procs_before AS SELECT oid AS fn, proname FROM pg_proc WHERE proname LIKE 'llm\_%';

ALTER EXTENSION llm UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'llm') AS updated_to_default
FROM pg_extension WHERE extname = 'llm';
-- the functions kept their OIDs (later versions only add), the dependents work unchanged
SELECT count(*) = (SELECT count(*) FROM procs_before) AS same_oids
FROM procs_before b JOIN pg_proc p ON p.oid = b.fn AND p.proname = b.proname;
REFRESH MATERIALIZED VIEW ticket_usage;
SELECT b.view_replies = (SELECT array_agg(reply ORDER BY id) FROM ticket_replies) AS view_same,
       b.matview_texts = (SELECT array_agg(text ORDER BY id) FROM ticket_usage) AS matview_same,
       b.chat = chat_reply('Say hi.') AS atomic_chat_same,
       b.array_replies = replies(ARRAY['Say a.', 'Say b.']) AS atomic_array_same
FROM before b;
SELECT count(*) AS generation_arguments FROM llm_generation_arguments();

-- the extension's objects as a fresh install has them
:extension_objects
SELECT count(*) AS objects, md5(string_agg(object || ': ' || description, E'\n' ORDER BY object)) AS digest
FROM extension_objects() \gset upgraded_
SELECT object FROM extension_objects() ORDER BY object;
-- EXECUTE for llm_user (and monitoring roles), never PUBLIC
SELECT p.oid::regprocedure AS function, has_function_privilege('public', p.oid, 'EXECUTE') AS public_exec,
       has_function_privilege('llm_user', p.oid, 'EXECUTE') AS llm_user_exec
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
ORDER BY p.oid::regprocedure::text;

\c contrib_regression
:extension_objects
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'llm') AS fresh_is_default
FROM pg_extension WHERE extname = 'llm';
SELECT count(*) = :upgraded_objects AS same_objects,
       md5(string_agg(object || ': ' || description, E'\n' ORDER BY object)) = :'upgraded_digest' AS same_definitions
FROM extension_objects();
-- the last release's update alone: 0.6 -> the default equals it too
CREATE DATABASE llm_upgrade_last;
\c llm_upgrade_last
SET client_min_messages = warning;
CREATE EXTENSION llm VERSION '0.6';
RESET client_min_messages;
ALTER EXTENSION llm UPDATE;
:extension_objects
SELECT count(*) = :upgraded_objects AS last_same_objects,
       md5(string_agg(object || ': ' || description, E'\n' ORDER BY object)) = :'upgraded_digest' AS last_same_definitions
FROM extension_objects();
\c contrib_regression
DROP DATABASE llm_upgrade_last;
DROP FUNCTION extension_objects();
DROP DATABASE llm_upgrade;
SELECT wait_idle();
