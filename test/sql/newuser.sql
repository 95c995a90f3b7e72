--
-- newuser: what a new user's hostile calls found, each refused with the
-- SQLSTATE a DBA expects (try_sql shows it) and its detail and hint.
--
-- the greedy reply the last call must give again
SELECT llm_generate('Say hi.', max_tokens => 2) AS say_hi \gset
-- a job's target must be a table of its own: a view or a materialized view
-- is the wrong kind of object (42809); a temporary table is one the runner,
-- another session, can never read (0A000, refused before any job exists)
CREATE TABLE nu_jt (id int PRIMARY KEY, body text, out text);
INSERT INTO nu_jt VALUES (1, 'Say hi.');
CREATE VIEW nu_jview AS SELECT * FROM nu_jt;
CREATE MATERIALIZED VIEW nu_jmv AS SELECT * FROM nu_jt;
CREATE TEMP TABLE nu_jtemp (id int PRIMARY KEY, body text, out text);
INSERT INTO nu_jtemp VALUES (1, 'Say hi.');
SELECT try_sql($$SELECT llm_enrich('nu_jview', 'out', 'body')$$);
SELECT try_sql($$SELECT llm_enrich('nu_jmv', 'out', 'body')$$);
SELECT try_sql($$SELECT llm_enrich('nu_jtemp', 'out', 'body')$$);
SELECT llm_enrich('nu_jtemp', 'out', 'body');
SELECT count(*) AS jobs FROM llm_jobs WHERE "table"::text IN ('nu_jview', 'nu_jmv', 'nu_jtemp');
-- a syntax error in a job's prompt or where_clause points into the
-- expression (shown as the statement parsed), not into the caller's query
SELECT llm_enrich('nu_jt', 'out', 'body', where_clause => 'true; DROP TABLE nu_jt');
SELECT llm_enrich('nu_jt', 'out', '');
SELECT llm_enrich('nu_jt', 'out', 'body ||| ''x''');
SELECT count(*) AS jobs FROM llm_jobs WHERE "table"::text = 'nu_jt';
-- llm_result and llm_cancel name a request by the bigint the caller gave
SELECT try_sql($$SELECT * FROM llm_result(-1)$$);
SELECT try_sql($$SELECT * FROM llm_result(-9223372036854775808, wait => false)$$);
SELECT llm_cancel(-1);
-- the extension dropped and created again in another schema, or its schema
-- renamed, in the same session: the job tables are found where they are now
-- (jobs without rows, so no runner writes meanwhile)
CREATE DATABASE llm_newuser;
\c llm_newuser
SET client_min_messages = warning;
CREATE SCHEMA nu_a;
CREATE EXTENSION llm SCHEMA nu_a;
CREATE TABLE nu_t (id int PRIMARY KEY, body text, a text, b text, c text);
INSERT INTO nu_t VALUES (1, 'Say hi.');
SELECT nu_a.llm_enrich('nu_t', 'a', 'body', where_clause => 'false') > 0 AS job_in_a;
DROP EXTENSION llm CASCADE;
CREATE SCHEMA nu_b;
CREATE EXTENSION llm SCHEMA nu_b;
SELECT nu_b.llm_enrich('nu_t', 'b', 'body', where_clause => 'false') > 0 AS job_in_b;
ALTER SCHEMA nu_b RENAME TO nu_c;
SELECT nu_c.llm_enrich('nu_t', 'c', 'body', where_clause => 'false') > 0 AS job_in_c;
SELECT "column", rows_total FROM nu_c.llm_jobs ORDER BY id;
RESET client_min_messages;
\c contrib_regression
DROP DATABASE llm_newuser WITH (FORCE);
-- the documents' examples as written: STRUCTURED_OUTPUT.md's plan of a
-- batched llm_filter; README's MERGE workaround (generate in USING); the
-- STRICT tokenizer functions with a NULL model
CREATE TABLE nu_tickets (id int, body text);
INSERT INTO nu_tickets VALUES (1, 'I was charged twice.');
EXPLAIN (COSTS OFF) SELECT id FROM nu_tickets WHERE llm_filter(body, 'Is this about money?') AND id < 4;
CREATE TABLE nu_summaries (id int PRIMARY KEY, s text);
EXPLAIN (COSTS OFF) MERGE INTO nu_summaries m USING nu_tickets t ON m.id = t.id
  WHEN NOT MATCHED THEN INSERT VALUES (t.id, llm_generate(t.body, max_tokens => 4));
EXPLAIN (COSTS OFF) MERGE INTO nu_summaries m
  USING (SELECT id, llm_generate(body, max_tokens => 4) AS g FROM nu_tickets) t ON m.id = t.id
  WHEN NOT MATCHED THEN INSERT VALUES (t.id, t.g);
SELECT llm_tokenize('hi', NULL) IS NULL AS tokenize_null, llm_detokenize(ARRAY[1], NULL) IS NULL AS detokenize_null;
SELECT try_sql($$SELECT llm_generate('hi', stop => array_fill('x'::text, ARRAY[17]))$$);
SELECT try_sql($$SELECT llm_chat((SELECT jsonb_agg(jsonb_build_object('role', 'user', 'content', 'x')) FROM generate_series(1, 1024)))$$);
DROP TABLE nu_tickets, nu_summaries;
-- a prompt of megabytes that cannot fit the context is refused from its
-- size, before the worker tokenizes it (which held every session's next
-- step for as long as that took)
SELECT try_sql($$SELECT llm_generate(repeat('x', 20000000), max_tokens => 1)$$);
SELECT try_sql($$SELECT llm_chat(jsonb_build_array(jsonb_build_object('role', 'user', 'content', repeat('y', 2000000))))$$);
SELECT try_sql($$SELECT llm_classify('x', ARRAY['a', repeat('z', 2000000)])$$);
SELECT llm_generate('Say hi.', max_tokens => 2) = :'say_hi' AS next_call_works;
