--
-- structured_generate: choices, regex and json_schema on llm_generate,
-- llm_complete and llm_chat (constrained decoding in the engine): every
-- result is a member of its grammar's language; a cut by max_tokens is no
-- result (ERROR 54000, or NULL with on_error => 'null'); a bad grammar is
-- ERROR 22023 naming the construct, before any work and whatever on_error
-- says; the LLM Batch node batches constrained calls with the same results.
--
SET llm.batch_window = 8;
-- choices: exactly one of them, finished with stop
SELECT llm_generate('Is the sky blue? Answer yes or no.', choices => ARRAY['yes', 'no']) AS choice;
SELECT text, finish_reason, completion_tokens
FROM llm_complete('Which planet is known as the red planet?', choices => ARRAY['Mars', 'Venus', 'Jupiter']);
SELECT llm_chat('[{"role": "user", "content": "Is water wet? Answer yes or no."}]',
                choices => ARRAY['yes', 'no']) AS chat_choice;
SELECT llm_generate(ARRAY['Is fire cold?', NULL, 'Is ice cold?'], choices => ARRAY['yes', 'no']) AS array_choices;
-- choices sharing a prefix are each complete on their own
SELECT out IN ('bug', 'bugfix') AS is_label
FROM (SELECT llm_generate('Reply with the word bugfix.', choices => ARRAY['bug', 'bugfix']) AS out) s;
-- regex: the whole output matches
SELECT out, out ~ '^[0-9]{3}-[0-9]{4}$' AS matches
FROM (SELECT llm_generate('Make up a phone number.', regex => '[0-9]{3}-[0-9]{4}') AS out) s;
SELECT out, out ~ '^(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$' AS matches
FROM (SELECT llm_generate('When did the Berlin wall fall? Give the date.',
                          regex => '(19|20)\d{2}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])') AS out) s;
-- json_schema: compact JSON valid against the schema, keys in the (jsonb) order of properties
SELECT out, out::jsonb ? 'city' AND out::jsonb ? 'population' AS has_keys,
       jsonb_typeof(out::jsonb -> 'population') AS population_type
FROM (SELECT llm_generate('Name a large city and its population as JSON.',
                          json_schema => '{"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                           "population": {"type": "integer", "minimum": 0}},
                                           "required": ["city", "population"]}',
                          max_tokens => 40) AS out) s;
SELECT text::jsonb AS value, finish_reason
FROM llm_complete('Is Paris in France? Answer as JSON.',
                  json_schema => '{"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}');
-- the same normalized grammar written differently: the same output
SELECT llm_generate('Is the sky blue?', json_schema => '{"enum": ["yes", "no"]}')
     = llm_generate('Is the sky blue?', json_schema => '{ "enum" : [ "yes" , "no" ] }') AS same_output;
-- NULL prompt: NULL, nothing is read or sent
SELECT llm_generate(NULL, choices => ARRAY['a']) IS NULL AS null_prompt;
-- a grammar whose shortest output is longer than max_tokens: length is no result
SELECT try_sql($$SELECT llm_generate('Count.', regex => '(ab ){40}', max_tokens => 5)$$) AS cut_raises;
SELECT llm_generate('Count.', regex => '(ab ){40}', max_tokens => 5, on_error => 'null') IS NULL AS cut_is_null;
SELECT * FROM llm_complete('Count.', regex => '(ab ){40}', max_tokens => 5, on_error => 'null');
SELECT outcome, completion_tokens FROM llm_recent_requests() ORDER BY seq DESC LIMIT 1;
-- invalid or unsupported grammars: 22023 naming the construct, also under on_error => 'null'
SELECT try_sql($$SELECT llm_generate('x', regex => '(?=a)b')$$) AS lookahead;
SELECT try_sql($$SELECT llm_generate('x', regex => '(a', on_error => 'null')$$) AS unbalanced;
SELECT try_sql($$SELECT llm_generate('x', regex => '[^\s\S]')$$) AS accepts_nothing;
SELECT try_sql($$SELECT llm_generate('x', regex => 'a{1001}')$$) AS too_large;
SELECT try_sql($$SELECT llm_generate('x', json_schema => '{"type": "object", "properties": {"a": {"$ref": "#"}}}')$$) AS ref;
SELECT try_sql($$SELECT llm_generate('x', json_schema => '{"type": "string", "format": "email"}', on_error => 'null')$$) AS format;
SELECT try_sql($$SELECT llm_generate('x', json_schema => '{"type": "integer", "minimum": 5, "maximum": 2}')$$) AS empty_range;
SELECT try_sql($$SELECT llm_generate('x', json_schema => '{"type": "array"}')$$) AS no_items;
SELECT try_sql($$SELECT llm_generate('x', choices => ARRAY[]::text[])$$) AS empty_choices;
SELECT try_sql($$SELECT llm_generate('x', choices => ARRAY['a', NULL])$$) AS null_choice;
SELECT try_sql($$SELECT llm_generate('x', choices => ARRAY['a'], regex => 'a')$$) AS two_grammars;
SELECT try_sql($$SELECT llm_generate('x', regex => 'a+', stop => ARRAY['!'])$$) AS with_stop;
SELECT try_sql($$SELECT llm_chat('[{"role": "user", "content": "x"}]', regex => '\p{L}')$$) AS chat_bad_regex;
SELECT wait_idle();
-- the LLM Batch node: constrained calls batched, the same values as row by row
CREATE TABLE sg_rows AS SELECT g, 'Is ' || g || ' an even number? Answer yes or no.' AS q FROM generate_series(1, 6) g;
EXPLAIN (COSTS OFF) SELECT g, llm_generate(q, choices => ARRAY['yes', 'no']) FROM sg_rows;
CREATE TABLE sg_batched AS
  SELECT g, llm_generate(q, choices => ARRAY['yes', 'no']) AS a,
         llm_generate(q, json_schema => '{"type": "object", "properties": {"even": {"type": "boolean"}}, "required": ["even"]}') AS j
  FROM sg_rows;
SET llm.enable_batch_scan = off;
SELECT b.g, b.a, b.j::jsonb AS j,
       b.a = llm_generate(r.q, choices => ARRAY['yes', 'no'])
       AND b.j = llm_generate(r.q, json_schema => '{"type": "object", "properties": {"even": {"type": "boolean"}}, "required": ["even"]}')
       AS same_row_by_row
FROM sg_batched b JOIN sg_rows r USING (g) ORDER BY b.g;
RESET llm.enable_batch_scan;
-- a bad grammar in a batched statement: the statement fails with it
SELECT try_sql($$SELECT g, llm_generate(q, regex => '(?<=x)') FROM sg_rows$$) AS batched_bad_regex;
DROP TABLE sg_rows, sg_batched;
RESET llm.batch_window;
SELECT wait_idle();
