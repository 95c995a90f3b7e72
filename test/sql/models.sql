--
-- models: several models served by the one worker (llm.models), chosen by
-- model => 'alias'.  SmolLM2 under two more aliases: 'small' with settings of
-- its own (context 256, a small KV cache), 'twin' with the llm.* settings.
-- A model is its own engine, so routing never changes greedy text.
--
SELECT current_setting('llm.model') AS smol,
       format('small=%s (context_length=256, kv_cache_size=8MB),twin = %s',
              current_setting('llm.model'), current_setting('llm.model')) AS models \gset
-- a malformed list is refused and changes nothing
ALTER SYSTEM SET llm.models = 'Small=/x.gguf';
ALTER SYSTEM SET llm.models = 'default=/x.gguf';
ALTER SYSTEM SET llm.models = 'a=/x.gguf, a=/y.gguf';
ALTER SYSTEM SET llm.models = 'a=/x.gguf (context=5)';
ALTER SYSTEM SET llm.models = 'a=/x.gguf (block_size=0)';
ALTER SYSTEM SET llm.models = 'a=/x.gguf,';
SELECT alias, state FROM llm_models;

ALTER SYSTEM SET llm.models = :'models';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 3 AND bool_and(state = 'ready') FROM llm_models$$);
SELECT alias, path = :'smol' AS same_file, architecture, parameters, context_length, state, error,
       kv_blocks_total
FROM llm_models;
-- every row shows the sha256 of the file it loaded, as SQL computes it
SELECT encode(sha256(pg_read_binary_file(:'smol')), 'hex') AS smol_sha256 \gset
SELECT alias, sha256 = :'smol_sha256' AS sha256_of_file FROM llm_models;
SELECT (llm_model_info())->>'model_sha256' = :'smol_sha256' AS info_sha256_of_file;
SELECT requests_finished AS small_before FROM llm_models WHERE alias = 'small' \gset
SELECT requests_finished AS twin_before FROM llm_models WHERE alias = 'twin' \gset
SELECT requests_finished AS default_before FROM llm_models WHERE alias = 'default' \gset

-- an unknown alias is an option error, whatever on_error says
SELECT try_sql($$SELECT llm_generate('Hi', model => 'nope')$$) AS unknown;
SELECT try_sql($$SELECT llm_generate('Hi', model => 'nope', on_error => 'null')$$) AS unknown_null;
SELECT try_sql($$SELECT llm_chat('[{"role": "user", "content": "Hi"}]', model => 'Twin')$$) AS unknown_chat;
SELECT try_sql($$SELECT llm_tokenize('Hi', model => 'nope')$$) AS unknown_tokenize;

-- routing by alias gives the text of the same model alone
CREATE TABLE models_prompts AS
  SELECT i AS id, 'Say the number ' || i || ' in words.' AS body FROM generate_series(1, 6) i;
CREATE TABLE models_alone AS
  SELECT id, llm_generate(body, max_tokens => 12) AS g FROM models_prompts;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE llm_generate(body, max_tokens => 12, model => 'twin') = g) AS twin_same,
       count(*) FILTER (WHERE llm_generate(body, max_tokens => 12, model => 'small') = g) AS small_same,
       count(*) FILTER (WHERE llm_generate(body, max_tokens => 12, model => 'default') = g) AS default_same,
       count(*) FILTER (WHERE llm_generate(body, max_tokens => 12, model => NULL) = g) AS null_same
FROM models_alone JOIN models_prompts USING (id);
SELECT llm_generate(ARRAY['Say the number 1 in words.', 'Say the number 2 in words.'], max_tokens => 12, model => 'twin')
     = ARRAY(SELECT g FROM models_alone WHERE id <= 2 ORDER BY id) AS array_same;
SELECT (llm_complete('Say the number 3 in words.', max_tokens => 12, model => 'small')).text
     = (SELECT g FROM models_alone WHERE id = 3) AS complete_same;
SELECT llm_chat('[{"role": "user", "content": "Say the number 4 in words."}]', max_tokens => 12, model => 'twin')
     = (SELECT g FROM models_alone WHERE id = 4) AS chat_same;
SELECT llm_tokenize('Hello models', model => 'twin') = llm_tokenize('Hello models') AS tokenize_same,
       llm_detokenize(llm_tokenize('Hello models'), model => 'small') AS detokenized;

-- each model has its own settings: 'small' stops at its context of 256 tokens
SELECT finish_reason, prompt_tokens + completion_tokens AS total_tokens
FROM llm_complete('1, 2, 3, 4, 5, 6, 7, 8,', raw => true, max_tokens => 400, model => 'small');
SELECT try_sql(format($$SELECT llm_generate(%L, model => 'small')$$, repeat('word ', 300))) AS too_long_for_small;
SELECT finish_reason, prompt_tokens > 256 AS over_small_context, completion_tokens AS fits_twin
FROM llm_complete(repeat('word ', 300), max_tokens => 1, model => 'twin');

-- the LLM Batch node: two models' calls in one statement, each model batching its own
EXPLAIN (COSTS OFF)
  SELECT id, llm_generate(body, max_tokens => 12, model => 'small') AS s,
         llm_generate(body, max_tokens => 12, model => 'twin') AS t FROM models_prompts;
CREATE TABLE models_batched AS
  SELECT id, llm_generate(body, max_tokens => 12, model => 'small') AS s,
         llm_generate(body, max_tokens => 12, model => 'twin') AS t FROM models_prompts;
SELECT count(*) AS rows, count(*) FILTER (WHERE b.s = a.g AND b.t = a.g) AS same
FROM models_batched b JOIN models_alone a USING (id);
SELECT wait_idle();
-- requests counted per model: default 6 + 6 + 6, small 6 + 1 + 1 + 6 (and the
-- too-long prompt failed), twin 6 + 2 + 1 + 1 + 6
SELECT alias, requests_finished - CASE alias WHEN 'small' THEN :small_before WHEN 'twin' THEN :twin_before
                                   ELSE :default_before END AS finished,
       CASE WHEN alias <> 'default' THEN requests_failed END AS failed,
       requests_running, requests_waiting, kv_blocks_used
FROM llm_models;
SELECT (SELECT sum(kv_blocks_total) FROM llm_models) = kv_blocks_total AS kv_total_is_the_sum FROM llm_stat;

-- reloading one model (new settings for 'small') keeps the others
SELECT format('small=%s (context_length=512, kv_cache_size=8MB),twin = %s', :'smol', :'smol') AS models2 \gset
ALTER SYSTEM SET llm.models = :'models2';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 3 AND bool_and(state = 'ready') AND
                          bool_or(alias = 'small' AND context_length = 512) FROM llm_models$$);
SELECT alias, context_length, requests_finished > 0 AS kept_counters FROM llm_models;
SELECT llm_generate('Say the number 5 in words.', max_tokens => 12, model => 'small')
     = (SELECT g FROM models_alone WHERE id = 5) AS reloaded_same;

-- a model dropped from the list is unknown again
ALTER SYSTEM RESET llm.models;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 1 FROM llm_models$$);
SELECT alias, state FROM llm_models;
SELECT try_sql($$SELECT llm_generate('Hi', model => 'small')$$) AS dropped;
SELECT wait_model();
DROP TABLE models_prompts, models_alone, models_batched;
