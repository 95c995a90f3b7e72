--
-- generate: greedy generation through the worker (expected text is the real
-- model's output: greedy decoding is deterministic), usage, array form.
--
SELECT llm_generate('What is the capital of Australia?', max_tokens => 24);
SELECT llm_generate('Say hello.', max_tokens => 16) = llm_generate('Say hello.', max_tokens => 16) AS deterministic;
-- raw: the prompt is continued as is, no chat template
SELECT llm_generate('The first three prime numbers are', max_tokens => 12, raw => true);
-- system message replaces the template's default one
SELECT llm_generate('Who are you?', system => 'You are a pirate. Answer in one short sentence.', max_tokens => 24);
-- stop strings end the output and are not included
SELECT llm_generate('1, 2, 3, 4, 5, 6, 7, 8,', raw => true, max_tokens => 20);
SELECT llm_generate('1, 2, 3, 4, 5, 6, 7, 8,', raw => true, max_tokens => 20, stop => ARRAY['12', '99']);
-- seeded sampling is reproducible; temperature 0 ignores the seed
SELECT llm_generate('Write one word.', temperature => 0.8, seed => 42, max_tokens => 16)
     = llm_generate('Write one word.', temperature => 0.8, seed => 42, max_tokens => 16) AS seeded_same;
SELECT llm_generate('Name a color.', max_tokens => 8, seed => 1)
     = llm_generate('Name a color.', max_tokens => 8, seed => 2) AS greedy_ignores_seed;
SELECT llm_generate('Name a color.', max_tokens => 8, temperature => 0, top_p => 0.1, top_k => 3, min_p => 0.5)
     = llm_generate('Name a color.', max_tokens => 8) AS greedy_ignores_filters;
-- llm_complete: text plus usage.  cached_tokens: whole KV blocks, at least
-- the chat template's system prefix (cached by the first statement of this
-- suite), never the last prompt token (its logits are computed)
SELECT text, finish_reason, prompt_tokens, completion_tokens,
       cached_tokens % current_setting('llm.block_size')::int = 0
         AND cached_tokens BETWEEN current_setting('llm.block_size')::int AND prompt_tokens - 1 AS cached_ok,
       ttft_ms > 0 AS ttft_positive, total_ms >= ttft_ms AS total_ge_ttft
FROM llm_complete('Count from 1 to 20.', max_tokens => 5);
SELECT finish_reason, completion_tokens < 64 AS short
FROM llm_complete('Reply with just the word yes.', max_tokens => 64);
-- the second identical prompt reuses every full KV block of the first but
-- the one holding the last prompt token; the first finds nothing, being the
-- first request of a new role (the prefix cache is isolated by role)
CREATE ROLE llm_cache_probe;
GRANT llm_user TO llm_cache_probe;
SET ROLE llm_cache_probe;
SELECT (llm_complete('Explain briefly why the sky is blue.', max_tokens => 2)).cached_tokens = 0 AS first;
SELECT cached_tokens = (prompt_tokens - 1) / current_setting('llm.block_size')::int
         * current_setting('llm.block_size')::int AS second_cached
FROM llm_complete('Explain briefly why the sky is blue.', max_tokens => 2);
RESET ROLE;
DROP ROLE llm_cache_probe;
-- array form: all prompts at once, NULL stays NULL, same text as one by one
SELECT llm_generate(ARRAY['What is 2+2?', NULL, 'Name a fruit.'], max_tokens => 12);
SELECT (llm_generate(ARRAY['What is 2+2?', 'Name a fruit.'], max_tokens => 12))[2]
     = llm_generate('Name a fruit.', max_tokens => 12) AS array_matches_single;
SELECT llm_generate(ARRAY[]::text[]) AS empty_array;
SELECT array_dims(llm_generate(ARRAY[['Say a.', 'Say b.'], ['Say c.', 'Say d.']], max_tokens => 1)) AS two_dims,
       (llm_generate(ARRAY[['Say a.', 'Say b.'], ['Say c.', 'Say d.']], max_tokens => 4))[2][1]
         = llm_generate('Say c.', max_tokens => 4) AS two_dims_in_order;
-- one call per row
SELECT i, llm_generate('Write the number ' || i || ' in words.', max_tokens => 6)
FROM generate_series(1, 3) AS i;
SELECT requests_finished > 0 AS finished, completion_tokens > 0 AS tokens, kv_blocks_total > 0 AS kv,
       max_batch_size >= 1 AS batch, ttft_mean_ms > 0 AS ttft, ttft_p99_ms >= ttft_mean_ms AS p99
FROM llm_stat;
SELECT wait_idle();
