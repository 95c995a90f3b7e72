--
-- stream_generate: llm_generate_stream and llm_chat_stream return a
-- generation as rows while it is produced.  How the text is cut into rows
-- depends on timing, so the rows are compared joined, never one by one.
--
SELECT wait_idle();
-- the same arguments, defaults included, as llm_generate and llm_chat
-- (whose defaults test/sql/arguments.sql checks against the argument table),
-- llm_chat's chat template arguments included
SELECT s.proname, pg_get_function_arguments(s.oid) = pg_get_function_arguments(g.oid) AS same_arguments,
       pg_get_function_result(s.oid) AS result
FROM pg_proc s JOIN pg_proc g ON g.prosrc = replace(s.prosrc, '_stream', '')
WHERE s.prosrc IN ('pg_llm_generate_stream', 'pg_llm_chat_stream')
ORDER BY 1;
-- the deltas joined are llm_generate's text (greedy, stop strings, seeded
-- sampling); the last row carries delta '' and the usage, NULL elsewhere
CREATE TEMP VIEW stream_cases(prompt, max_tokens, temperature, seed, stop, raw) AS VALUES
	('What is the capital of Australia?', 24, 0::float8, NULL::bigint, NULL::text[], false),
	('1, 2, 3, 4, 5, 6, 7, 8,', 20, 0, NULL, ARRAY['12', '99'], true),
	('Write one word.', 16, 0.8, 42, NULL, false),
	('Tell me a story about a dragon.', 40, 0.9, 7, NULL, false);
SELECT c.prompt, s.joined = llm_generate(c.prompt, max_tokens => c.max_tokens, temperature => c.temperature,
                                        seed => c.seed, stop => c.stop, raw => c.raw) AS same_as_generate,
       s.rows >= 2 AS rows_ok, s.usage_rows, s.last_is_usage
FROM stream_cases c, LATERAL (
	SELECT string_agg((x).delta, '') AS joined, count(*) AS rows,
	       count(*) FILTER (WHERE (x).finish_reason IS NOT NULL) AS usage_rows,
	       (array_agg((x).delta ORDER BY n DESC))[1] = '' AS last_is_usage
	FROM (SELECT x, row_number() OVER () AS n
	      FROM (SELECT llm_generate_stream(c.prompt, max_tokens => c.max_tokens, temperature => c.temperature,
	                                       seed => c.seed, stop => c.stop, raw => c.raw) AS x) r) q) s
ORDER BY c.prompt;
-- the usage row against llm_complete's
SELECT (x).finish_reason, (x).prompt_tokens, (x).completion_tokens,
       ((x).finish_reason, (x).prompt_tokens, (x).completion_tokens) =
       (SELECT finish_reason, prompt_tokens, completion_tokens FROM llm_complete('Say hello.', max_tokens => 8))
       AS same_as_complete
FROM (SELECT llm_generate_stream('Say hello.', max_tokens => 8) AS x) r
WHERE (x).finish_reason IS NOT NULL;
-- a delta row has no usage
SELECT count(*) FILTER (WHERE (x).finish_reason IS NULL AND (x).prompt_tokens IS NULL
                        AND (x).completion_tokens IS NULL AND (x).delta <> '') = count(*) - 1 AS deltas_bare
FROM (SELECT llm_generate_stream('Say hello.', max_tokens => 8) AS x) r;
-- messages: llm_chat_stream joined is llm_chat's text
SELECT string_agg((x).delta, '') = llm_chat('[{"role": "user", "content": "Name three fruits."}]', max_tokens => 24)
       AS chat_same
FROM (SELECT llm_chat_stream('[{"role": "user", "content": "Name three fruits."}]', max_tokens => 24) AS x) r;
SELECT string_agg((x).delta, '') = llm_chat('[{"role": "user", "content": "Hi"}]', system => 'Answer in French.',
                                            max_tokens => 16) AS chat_system_same
FROM (SELECT llm_chat_stream('[{"role": "user", "content": "Hi"}]', system => 'Answer in French.', max_tokens => 16) AS x) r;
-- characters of several bytes (split across tokens by the byte-level
-- tokenizer) arrive whole: a delta with a partial character would fail the
-- conversion to text
SELECT string_agg((x).delta, '') = llm_generate('Translate to Japanese: good morning, thank you very much.', max_tokens => 32)
       AS utf8_same,
       max(octet_length((x).delta) - char_length((x).delta)) > 0 AS has_multibyte
FROM (SELECT llm_generate_stream('Translate to Japanese: good morning, thank you very much.', max_tokens => 32) AS x) r;
-- in FROM the set is materialised first, with the same rows
SELECT string_agg(delta, '') = llm_generate('Say hello.', max_tokens => 8) AS from_same,
       count(*) FILTER (WHERE finish_reason IS NOT NULL) AS usage_rows
FROM llm_generate_stream('Say hello.', max_tokens => 8);
-- NULL prompt: no rows; an empty prompt fails, or with on_error => 'null'
-- is one row with delta NULL and finish_reason 'error'; a bad option fails
-- before anything is sent
SELECT count(*) AS null_prompt_rows FROM (SELECT llm_generate_stream(NULL) AS x) r;
SELECT try_sql($$SELECT llm_generate_stream('')$$);
SELECT (x).delta IS NULL AS delta_null, (x).finish_reason FROM (SELECT llm_generate_stream('', on_error => 'null') AS x) r;
SELECT try_sql($$SELECT llm_generate_stream('hi', max_tokens => -1)$$);
SELECT try_sql($$SELECT llm_chat_stream('[]')$$);
SELECT wait_idle();
