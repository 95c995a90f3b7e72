--
-- jobs: llm_enrich fills a column in the background (docs/JOBS.md); the
-- llm_jobs and llm_job_errors views; pause / resume / cancel /
-- retry_failed; who may control a job; continuous mode; llm_submit /
-- llm_result / llm_cancel; llm_progress and the submitter columns of
-- llm_recent_requests().  The faults (killed runner and worker, restarts,
-- rows changed in flight, dropped tables and roles) and a job on a second
-- model are in test/t/017_jobs.pl.
--
-- wait_job(id, states): wait (up to 120 s) until job id is in one of states
CREATE FUNCTION wait_job(job bigint, states text[] DEFAULT '{done}') RETURNS text LANGUAGE sql AS $$
SELECT wait_until(format('SELECT state::text = ANY (%L::text[]) FROM llm_jobs WHERE id = %s', states, job), 120);
SELECT state::text FROM llm_jobs WHERE id = job;
$$;
-- wait_given_back(id): wait (up to 30 s) until job id has no row in flight
CREATE FUNCTION wait_given_back(job bigint) RETURNS bigint LANGUAGE sql AS $$
SELECT wait_until(format('SELECT rows_in_flight = 0 FROM llm_jobs WHERE id = %s', job), 30);
SELECT rows_in_flight FROM llm_jobs WHERE id = job;
$$;
-- wait_filled(): wait (up to 120 s) until no row of jt lacks its summary
-- (plpgsql: jt is created below)
CREATE FUNCTION wait_filled() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	PERFORM wait_until('SELECT count(*) = 0 FROM jt WHERE summary IS NULL', 120);
	RETURN (SELECT count(*) FROM jt WHERE summary IS NULL);
END
$$;
CREATE ROLE job_owner;
CREATE ROLE job_other;
GRANT llm_user TO job_owner, job_other;
GRANT CREATE ON SCHEMA public TO job_owner;
SET ROLE job_owner;
CREATE TABLE jt (id int PRIMARY KEY, body text NOT NULL, summary text);
INSERT INTO jt SELECT i, 'Say the number ' || i || ' in words.' FROM generate_series(1, 12) i;
-- the values a job must write: the same generation as a statement's
CREATE TABLE jt_expected AS
  SELECT id, llm_generate('Summarize: ' || body, max_tokens => 4) AS summary FROM jt;
-- a job, and its progress as its owner sees it
SELECT llm_enrich('jt', 'summary', $$'Summarize: ' || body$$, max_tokens => 4) AS job \gset
SELECT wait_job(:job);
SELECT "table", "column", state, mode, owner, rows_total, rows_done, rows_failed, rows_in_flight, rows_queued,
       tokens_in > 0 AS tokens_in, tokens_out > 0 AS tokens_out, started_at IS NOT NULL AS started,
       finished_at >= started_at AS finished, last_error, database = current_database() AS this_database
FROM llm_jobs WHERE id = :job;
SELECT count(*) AS same_as_statement FROM jt JOIN jt_expected e USING (id) WHERE jt.summary = e.summary;
-- rows with a value already are left alone; where_clause limits the rows
UPDATE jt SET summary = NULL WHERE id > 8;
UPDATE jt SET summary = 'kept' WHERE id = 12;
SELECT llm_enrich('jt', 'summary', $$'Summarize: ' || body$$, max_tokens => 4, where_clause => 'id <> 11') AS job \gset
SELECT wait_job(:job);
SELECT id, summary = (SELECT summary FROM jt_expected e WHERE e.id = jt.id) AS generated, summary = 'kept' AS kept
FROM jt WHERE id > 8 ORDER BY id;
SELECT rows_total, rows_done FROM llm_jobs WHERE id = :job;
-- refusals
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body', mode => 'sometimes')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body', max_attempts => 0)$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'nosuch', 'body')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body; DROP TABLE jt')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body) --')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body', where_clause => 'true) FROM pg_authid WHERE (true')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'random()::text')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'summary')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'id', 'body')$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body', temperature => -1)$$);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body', model => 'nosuch')$$);
SELECT try_sql($$SELECT llm_enrich(NULL, 'summary', 'body')$$);
CREATE TABLE jt_nopk (id int, body text, summary text);
SELECT try_sql($$SELECT llm_enrich('jt_nopk', 'summary', 'body')$$);
-- control: pause keeps the rows queued, resume finishes them
UPDATE jt SET summary = NULL;
SELECT llm_enrich('jt', 'summary', $$'Summarize: ' || body$$, max_tokens => 4) AS job \gset
SELECT llm_job_pause(:job);
SELECT try_sql($$SELECT llm_enrich('jt', 'summary', 'body')$$) ~ '^42710: job \d+ \(paused\) already fills column "summary" of table jt' AS second_refused;
SELECT try_sql(format('SELECT llm_job_pause(%s)', :job));
SELECT wait_given_back(:job) AS in_flight, state FROM llm_jobs WHERE id = :job;
-- another role neither sees nor controls the job
RESET ROLE;
SET ROLE job_other;
SELECT count(*) AS other_sees FROM llm_jobs WHERE id = :job;
SELECT regexp_replace(try_sql(format('SELECT llm_job_resume(%s)', :job)), '[0-9]{6,}', 'N', 'g') AS other_resume;
SELECT regexp_replace(try_sql(format('SELECT llm_job_cancel(%s)', :job)), '[0-9]{6,}', 'N', 'g') AS other_cancel;
SELECT try_sql('SELECT count(*) FROM llm_job') AS other_reads_table;
SELECT try_sql('DELETE FROM llm_job_queue') AS other_deletes_queue;
RESET ROLE;
SET ROLE job_owner;
SELECT llm_job_resume(:job);
SELECT wait_job(:job);
SELECT count(*) AS same_as_statement FROM jt JOIN jt_expected e USING (id) WHERE jt.summary = e.summary;
SELECT try_sql(format('SELECT llm_job_resume(%s)', :job)) ~ '^55000: cannot resume job \d+: it is done' AS resume_done;
SELECT regexp_replace(try_sql('SELECT llm_job_cancel(987654)'), '[0-9]{6,}', 'N', 'g') AS no_such_job;
-- failed rows: recorded with their error after max_attempts, retried on demand
UPDATE jt SET summary = NULL;
ALTER TABLE jt ADD CONSTRAINT short_5 CHECK (id <> 5 OR length(summary) < 3);
SELECT llm_enrich('jt', 'summary', $$'Summarize: ' || body$$, max_tokens => 4, max_attempts => 2) AS job \gset
SELECT wait_job(:job);
SELECT rows_done, rows_failed, last_error FROM llm_jobs WHERE id = :job;
SELECT "table", "column", key, attempts, sqlstate, error FROM llm_job_errors WHERE job_id = :job;
ALTER TABLE jt DROP CONSTRAINT short_5;
SELECT llm_job_retry_failed(:job);
SELECT wait_job(:job);
SELECT rows_done, rows_failed FROM llm_jobs WHERE id = :job;
SELECT count(*) AS errors_left FROM llm_job_errors WHERE job_id = :job;
SELECT count(*) AS same_as_statement FROM jt JOIN jt_expected e USING (id) WHERE jt.summary = e.summary;
-- cancel: the queue is emptied, written rows stay
UPDATE jt SET summary = NULL;
SELECT llm_enrich('jt', 'summary', $$'Summarize: ' || body$$, max_tokens => 4) AS job \gset
SELECT llm_job_pause(:job);
SELECT llm_job_cancel(:job);
SELECT state, rows_queued FROM llm_jobs WHERE id = :job;
-- continuous: inserted and updated rows are filled shortly after their commit
UPDATE jt SET summary = NULL;
SELECT llm_enrich('jt', 'summary', $$'Summarize: ' || body$$, max_tokens => 4, mode => 'continuous') AS job \gset
SELECT wait_filled();
INSERT INTO jt VALUES (13, 'Say the number 13 in words.'), (14, 'Say the number 14 in words.');
SELECT wait_filled();
UPDATE jt SET body = 'Say the number 3 in words.' WHERE id = 14;
SELECT wait_filled();
-- an update that does not touch the prompt's inputs keeps the value
UPDATE jt SET summary = summary WHERE id = 13;
SELECT id, summary = llm_generate('Summarize: ' || body, max_tokens => 4) AS fresh FROM jt WHERE id > 12 ORDER BY id;
SELECT state, mode FROM llm_jobs WHERE id = :job;
SELECT tgname ~ '^llm_job_\d+_(enqueue|clear)$' AS job_trigger FROM pg_trigger WHERE tgrelid = 'jt'::regclass ORDER BY tgname;
SELECT llm_job_cancel(:job);
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgrelid = 'jt'::regclass;
INSERT INTO jt VALUES (15, 'Say the number 15 in words.');
SELECT pg_sleep(0.5);
SELECT summary IS NULL AS not_filled_after_cancel FROM jt WHERE id = 15;
-- model => is kept with the other options (here the default model's alias;
-- test/t/017_jobs.pl runs a job on a second model)
UPDATE jt SET summary = NULL WHERE id <= 2;
SELECT llm_enrich('jt', 'summary', $$'Summarize: ' || body$$, max_tokens => 4, where_clause => 'id <= 2',
                  model => 'default') AS job \gset
SELECT wait_job(:job);
SELECT rows_done, rows_failed FROM llm_jobs WHERE id = :job;
SELECT count(*) AS same_as_statement FROM jt JOIN jt_expected e USING (id) WHERE jt.summary = e.summary AND id <= 2;
RESET ROLE;
--
-- llm_submit / llm_result / llm_cancel: requests that outlive the statement
--
SET ROLE job_owner;
BEGIN;
SELECT llm_submit('Say the number 7 in words.', max_tokens => 4) AS req \gset
ROLLBACK;
SELECT text = llm_generate('Say the number 7 in words.', max_tokens => 4) AS same_text, finish_reason,
       completion_tokens, status
FROM llm_result(:req);
SELECT (llm_result(:req, wait => false)).status AS fetched_again;
SELECT text = llm_generate('Say the number 7 in words.', max_tokens => 4) AS same_text
FROM llm_result(llm_submit('Say the number 7 in words.', max_tokens => 4, model => 'default'));
SELECT try_sql($$SELECT llm_submit('x', model => 'nosuch')$$);
RESET ROLE;
SET ROLE job_other;
SELECT regexp_replace(try_sql(format('SELECT llm_result(%s)', :req)), '[0-9]{6,}', 'N', 'g') AS other_fetch;
SELECT regexp_replace(try_sql(format('SELECT llm_cancel(%s)', :req)), '[0-9]{6,}', 'N', 'g') AS other_cancel;
RESET ROLE;
SET ROLE job_owner;
SELECT llm_cancel(:req) AS dropped;
SELECT llm_cancel(:req) AS dropped_again;
SELECT regexp_replace(try_sql(format('SELECT llm_result(%s)', :req)), '[0-9]{6,}', 'N', 'g') AS fetch_dropped;
SELECT llm_submit('Write a long story about a dragon.', max_tokens => 2000, temperature => 0.8, seed => 1) AS req \gset
SELECT llm_cancel(:req) AS cancelled;
SELECT regexp_replace(try_sql(format('SELECT llm_result(%s)', :req)), '[0-9]{6,}', 'N', 'g') AS fetch_cancelled;
SELECT llm_submit('Say yes.', max_tokens => 2, on_error => 'null') AS req \gset
SELECT llm_cancel(:req) AS cancelled;
SET client_min_messages = error;  -- the WARNING names the request's id
SELECT text, finish_reason, status FROM llm_result(:req);
RESET client_min_messages;
SELECT llm_submit(NULL) IS NULL AS null_prompt;
SELECT try_sql($$SELECT llm_submit('x', max_tokens => 0)$$);
RESET ROLE;
--
-- llm_progress: the running statement's LLM work, per backend
--
CREATE FUNCTION progress_probe() RETURNS TABLE (calls_submitted bigint, calls_finished bigint, calls_in_flight bigint,
  completion_tokens bigint, role name, database name)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM llm_generate('Say the number ' || i || ' in words.', max_tokens => 2) FROM generate_series(1, 3) i;
	RETURN QUERY SELECT p.calls_submitted, p.calls_finished, p.calls_in_flight, p.completion_tokens, p.role, p.database
		FROM llm_progress p WHERE p.pid = pg_backend_pid();
END $$;
SELECT calls_submitted, calls_finished, calls_in_flight, completion_tokens, role = current_user AS role,
       database = current_database() AS database
FROM progress_probe();
SELECT count(*) AS after_statement FROM llm_progress WHERE pid = pg_backend_pid();
-- llm_recent_requests(): the submitter of each request
SELECT completion_tokens AS generated FROM llm_complete('Say yes.', max_tokens => 1);
SELECT pg_sleep(0.3);
SELECT pid = pg_backend_pid() AS pid, role = current_user AS role, database = current_database() AS database
FROM llm_recent_requests() ORDER BY seq DESC LIMIT 1;
-- a view on llm_recent_requests() stored before the update keeps working:
-- the columns are appended in place (llm_widen_result), the OID kept
CREATE DATABASE llm_widen_result;
SELECT pg_get_functiondef('try_sql(text)'::regprocedure) AS try_sql_def \gset
\c llm_widen_result
SET client_min_messages = warning;
CREATE EXTENSION llm VERSION '0.2';
RESET client_min_messages;
CREATE VIEW rr AS SELECT seq, outcome FROM llm_recent_requests();
CREATE VIEW rr_all AS SELECT * FROM llm_recent_requests();
SELECT 'llm_recent_requests()'::regprocedure::oid AS before_oid \gset
ALTER EXTENSION llm UPDATE TO '0.3';
SELECT 'llm_recent_requests()'::regprocedure::oid = :before_oid AS same_oid,
       (SELECT (seq, outcome) FROM rr ORDER BY seq DESC LIMIT 1)
         = (SELECT (seq, outcome) FROM llm_recent_requests() ORDER BY seq DESC LIMIT 1) AS view_works,
       (SELECT (seq, outcome, completion_tokens) FROM rr_all ORDER BY seq DESC LIMIT 1)
         = (SELECT (seq, outcome, completion_tokens) FROM llm_recent_requests() ORDER BY seq DESC LIMIT 1) AS star_view_works;
SELECT attname FROM pg_attribute WHERE attrelid = 'rr_all'::regclass AND attnum > 0 ORDER BY attnum;
SELECT string_agg(name, ', ' ORDER BY ord) AS columns
FROM unnest((SELECT proargnames FROM pg_proc WHERE oid = 'llm_recent_requests()'::regprocedure)) WITH ORDINALITY AS a(name, ord);
-- refusals (superuser-only helper for update scripts); try_sql as setup
-- defined it in the first database
:try_sql_def;
CREATE FUNCTION t_bad(OUT seq int, OUT finished_at timestamptz) RETURNS SETOF record LANGUAGE plpgsql AS 'BEGIN RETURN; END';
SELECT try_sql($$SELECT llm_widen_result('llm_recent_requests()', 't_bad()')$$);
CREATE FUNCTION t_none(OUT seq bigint, OUT finished_at timestamptz, OUT outcome text, OUT prompt_tokens int,
  OUT cached_tokens int, OUT completion_tokens int, OUT ttft_ms float8, OUT tpot_ms float8, OUT total_ms float8,
  OUT pid int, OUT role name, OUT database name) RETURNS SETOF record LANGUAGE plpgsql AS 'BEGIN RETURN; END';
SELECT try_sql($$SELECT llm_widen_result('llm_recent_requests()', 't_none()')$$);
\c contrib_regression
DROP DATABASE llm_widen_result;
DROP FUNCTION progress_probe();
DROP TABLE jt, jt_expected, jt_nopk;
REVOKE CREATE ON SCHEMA public FROM job_owner;
DROP ROLE job_owner, job_other;
DROP FUNCTION wait_job(bigint, text[]), wait_given_back(bigint), wait_filled();
SELECT wait_idle();
