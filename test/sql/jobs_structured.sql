--
-- jobs_structured: llm_enrich and llm_submit take every generation option of
-- the scalar calls: choices, regex and json_schema constrain every result of
-- a job and of an asynchronous request exactly as they constrain
-- llm_generate (same texts), invalid options raise the scalar call's error
-- before anything is queued, priority follows llm.max_priority, and a job
-- keeps its options by name in one encoding.  A job killed and resumed with
-- its grammar is in test/t/017_jobs.pl.
--
-- js_wait(id): wait (up to 120 s) until job id is done, failed or cancelled
CREATE FUNCTION js_wait(job bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	s text;
BEGIN
	FOR i IN 1..1200 LOOP
		SELECT state INTO s FROM llm_jobs WHERE id = job;
		EXIT WHEN s IN ('done', 'failed', 'cancelled');
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN s;
END
$$;
CREATE ROLE js_owner;
GRANT llm_user TO js_owner;
GRANT CREATE ON SCHEMA public TO js_owner;
SET ROLE js_owner;
CREATE TYPE js_kind AS ENUM ('bug', 'billing', 'other');
CREATE TABLE js (id int PRIMARY KEY, body text NOT NULL, label text, kind js_kind, info jsonb, code text,
                 short varchar(3));
INSERT INTO js VALUES
  (1, 'The app crashes when I open settings.'),
  (2, 'I was charged twice this month.'),
  (3, 'How do I change my password?'),
  (4, 'Refund my last invoice please.'),
  (5, 'The sync button does nothing.'),
  (6, 'Error 500 on the login page.');
-- choices: every result is one of the labels, and the same as llm_generate's
SELECT llm_enrich('js', 'label', $$'Classify this ticket: ' || body$$, max_tokens => 8,
                  choices => ARRAY['bug', 'billing', 'other']) AS job \gset
SELECT js_wait(:job);
SELECT rows_done, rows_failed FROM llm_jobs WHERE id = :job;
SELECT count(*) FILTER (WHERE label = ANY (ARRAY['bug', 'billing', 'other'])) AS labels, count(*) AS rows FROM js;
SELECT count(*) AS same_as_statement FROM js
WHERE label = llm_generate('Classify this ticket: ' || body, max_tokens => 8, choices => ARRAY['bug', 'billing', 'other']);
-- into an enum column: the labels are its values
SELECT llm_enrich('js', 'kind', $$'Classify this ticket: ' || body$$, max_tokens => 8,
                  choices => ARRAY['bug', 'billing', 'other']) AS job \gset
SELECT js_wait(:job);
SELECT count(*) AS same_as_label FROM js WHERE kind::text = label;
-- a label the column cannot hold is refused at creation, with its type's error
SELECT try_sql($$SELECT llm_enrich('js', 'kind', 'body', choices => ARRAY['bug', 'feature'])$$);
SELECT try_sql($$SELECT llm_enrich('js', 'short', 'body', choices => ARRAY['bug', 'billing'])$$);
-- json_schema into a jsonb column: every result valid against the schema
SELECT llm_enrich('js', 'info', $$'Describe this ticket: ' || body$$, max_tokens => 48,
                  json_schema => '{"type": "object",
                                   "properties": {"area": {"enum": ["app", "billing", "account"]},
                                                  "urgent": {"type": "boolean"}},
                                   "required": ["area", "urgent"]}') AS job \gset
SELECT js_wait(:job);
SELECT rows_done, rows_failed FROM llm_jobs WHERE id = :job;
SELECT count(*) AS valid FROM js
WHERE jsonb_typeof(info) = 'object' AND (SELECT count(*) FROM jsonb_object_keys(info)) = 2
  AND info ->> 'area' IN ('app', 'billing', 'account') AND jsonb_typeof(info -> 'urgent') = 'boolean';
SELECT count(*) AS same_as_statement FROM js
WHERE info = llm_generate('Describe this ticket: ' || body, max_tokens => 48,
                          json_schema => '{"type": "object",
                                           "properties": {"area": {"enum": ["app", "billing", "account"]},
                                                          "urgent": {"type": "boolean"}},
                                           "required": ["area", "urgent"]}')::jsonb;
-- regex
SELECT llm_enrich('js', 'code', $$'Give this ticket a code: ' || body$$, max_tokens => 16,
                  regex => '[A-Z]{2}-[0-9]{3}') AS job \gset
SELECT js_wait(:job);
SELECT count(*) FILTER (WHERE code ~ '^[A-Z]{2}-[0-9]{3}$') AS matching, count(*) AS rows FROM js;
SELECT count(*) AS same_as_statement FROM js
WHERE code = llm_generate('Give this ticket a code: ' || body, max_tokens => 16, regex => '[A-Z]{2}-[0-9]{3}');
-- how a job keeps its options: one JSON object by name (read as superuser:
-- the job tables are the extension's)
RESET ROLE;
SELECT options FROM llm_job WHERE id = :job;
SELECT options FROM llm_job WHERE target = 'js'::regclass AND output_column = 'info';
SET ROLE js_owner;
-- invalid options: llm_enrich and llm_submit raise what llm_generate raises,
-- and nothing is queued
UPDATE js SET label = NULL;
SELECT count(*) AS jobs_before FROM llm_jobs \gset
CREATE TABLE js_bad (opts text);
INSERT INTO js_bad VALUES
  ($$choices => '{}'::text[]$$),
  ($$choices => ARRAY['a', NULL]$$),
  ($$choices => ARRAY[['a'], ['b']]$$),
  ($$regex => '(a'$$),
  ($$regex => 'a{2000}'$$),
  ($$regex => 'a(?=b)'$$),
  ($$json_schema => '{"$ref": "#/x"}'$$),
  ($$json_schema => '{}'$$),
  ($$choices => ARRAY['a'], regex => 'a'$$),
  ($$choices => ARRAY['a'], stop => ARRAY['x']$$),
  ($$priority => 'urgent'$$),
  ($$max_tokens => 0, choices => ARRAY['a']$$);
SELECT opts,
       try_sql(format($$SELECT llm_enrich('js', 'label', 'body', %s)$$, opts)) AS enrich,
       try_sql(format($$SELECT llm_enrich('js', 'label', 'body', %s)$$, opts))
         = try_sql(format($$SELECT llm_generate('x', %s)$$, opts)) AS same_as_generate,
       try_sql(format($$SELECT llm_submit('x', %s)$$, opts))
         = try_sql(format($$SELECT llm_generate('x', %s)$$, opts)) AS submit_same
FROM js_bad;
SELECT count(*) - :jobs_before AS jobs_created FROM llm_jobs;
SELECT count(*) AS rows_filled FROM js WHERE label IS NOT NULL;
-- priority: a job runs in the batch class; priority => may name a class up
-- to llm.max_priority, as for a scalar call
RESET ROLE;
SET llm.max_priority = 'batch';
SET ROLE js_owner;
SELECT try_sql($$SELECT llm_enrich('js', 'label', 'body', priority => 'interactive')$$) AS enrich,
       try_sql($$SELECT llm_enrich('js', 'label', 'body', priority => 'interactive')$$)
         = try_sql($$SELECT llm_generate('x', priority => 'interactive')$$) AS same_as_generate,
       try_sql($$SELECT llm_submit('x', priority => 'interactive')$$)
         = try_sql($$SELECT llm_generate('x', priority => 'interactive')$$) AS submit_same;
SELECT llm_enrich('js', 'label', $$'Classify this ticket: ' || body$$, max_tokens => 8, where_clause => 'id <= 2',
                  choices => ARRAY['bug', 'billing', 'other'], priority => 'batch') AS job \gset
SELECT js_wait(:job);
SELECT count(*) AS same_as_statement FROM js
WHERE id <= 2 AND label = llm_generate('Classify this ticket: ' || body, max_tokens => 8,
                                       choices => ARRAY['bug', 'billing', 'other']);
RESET ROLE;
RESET llm.max_priority;
SET ROLE js_owner;
--
-- llm_submit with choices, regex, json_schema: the texts of llm_generate
--
SELECT status, text = ANY (ARRAY['bug', 'billing', 'other']) AS a_label,
       text = llm_generate('Classify this ticket: I was charged twice.', max_tokens => 8,
                           choices => ARRAY['bug', 'billing', 'other']) AS same_text
FROM llm_result(llm_submit('Classify this ticket: I was charged twice.', max_tokens => 8,
                           choices => ARRAY['bug', 'billing', 'other']));
SELECT status, text ~ '^[A-Z]{2}-[0-9]{3}$' AS matching,
       text = llm_generate('Give this ticket a code: crash.', max_tokens => 16, regex => '[A-Z]{2}-[0-9]{3}') AS same_text
FROM llm_result(llm_submit('Give this ticket a code: crash.', max_tokens => 16, regex => '[A-Z]{2}-[0-9]{3}'));
SELECT status, jsonb_typeof(text::jsonb -> 'urgent') AS urgent,
       text = llm_generate('Describe: crash.', max_tokens => 32,
                           json_schema => '{"type": "object", "properties": {"urgent": {"type": "boolean"}}, "required": ["urgent"]}') AS same_text
FROM llm_result(llm_submit('Describe: crash.', max_tokens => 32,
                           json_schema => '{"type": "object", "properties": {"urgent": {"type": "boolean"}}, "required": ["urgent"]}'));
-- cut short under its grammar: the scalar call's 54000, at llm_result
SELECT try_sql($$SELECT llm_result(llm_submit('Describe: crash.', max_tokens => 2,
                  json_schema => '{"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}'))$$);
RESET ROLE;
DROP TABLE js, js_bad;
DROP TYPE js_kind;
REVOKE CREATE ON SCHEMA public FROM js_owner;
DROP ROLE js_owner;
DROP FUNCTION js_wait(bigint);
SELECT wait_idle();
