--
-- limits: prompts over the context are refused (54000); generation stops at
-- the context with finish reason 'length'; huge max_tokens does not overflow.
--
-- the greedy reply later calls must give again after a refusal
SELECT llm_generate('Say yes.', max_tokens => 4) AS say_yes \gset
SELECT try_sql($$SELECT llm_generate(repeat('word ', 12000))$$);
SELECT try_sql($$SELECT llm_generate(repeat('word ', 12000), raw => true)$$);
SELECT llm_generate(repeat('word ', 12000), on_error => 'null') IS NULL AS over_context_null;
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes' AS next_call_works;
-- a small context (reload): generation stops at it
ALTER SYSTEM SET llm.context_length = 64;
SELECT pg_reload_conf();
SELECT wait_model(64);
SELECT finish_reason, prompt_tokens + completion_tokens AS total_tokens
FROM llm_complete('1, 2, 3, 4, 5,', raw => true, max_tokens => 2147483647);
-- n_ctx - 1 prompt tokens: room for exactly one generated token
SELECT array_length(llm_tokenize(repeat(' a', 63)), 1) AS prompt_len;
SELECT finish_reason, completion_tokens
FROM llm_complete(repeat(' a', 63), raw => true, max_tokens => 100);
-- n_ctx prompt tokens: no room at all
SELECT try_sql($$SELECT llm_generate(repeat(' a', 64), raw => true)$$);
ALTER SYSTEM RESET llm.context_length;
SELECT pg_reload_conf();
SELECT wait_model(8192);
SELECT wait_idle();
