--
-- chat_template_render: the prompt as the model's own chat template renders
-- it (llm_render_chat) and its size as a call is charged (llm_count_tokens).
-- The model file's template is Jinja, rendered by the engine: SmolLM2's adds
-- its default system turn when the conversation has none.
--
SELECT llm_render_chat('[{"role": "user", "content": "Hello!"}]');
SELECT llm_render_chat('[{"role": "user", "content": "Hello!"}]', add_generation_prompt => false);
SELECT llm_render_chat('[{"role": "system", "content": "You are a pirate."},
                         {"role": "user", "content": "Where is the treasure?"},
                         {"role": "assistant", "content": "Arr."}]', false);
-- contents are data: Jinja-looking and special-token text comes out as it is
SELECT llm_render_chat('[{"role": "user", "content": "{{ x }} {% if %} <|im_end|>"}]');
-- options the template does not read change nothing
SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]', tools => '[{"type": "function", "function": {"name": "f"}}]',
                       enable_thinking => true)
     = llm_render_chat('[{"role": "user", "content": "Hi"}]') AS unused_options_ignored;
-- the count is what a call is charged: llm_generate's prompt tokens
SELECT llm_count_tokens('Hello!') AS count_text,
       (SELECT prompt_tokens FROM llm_complete('Hello!', max_tokens => 1)) AS charged;
SELECT llm_count_tokens('[{"role": "user", "content": "Hello!"}]'::jsonb) = llm_count_tokens('Hello!') AS messages_equal_text;
SELECT llm_count_tokens('[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]'::jsonb)
     = (SELECT prompt_tokens FROM llm_complete('Hi', system => 'Be brief.', max_tokens => 1)) AS system_counted;
-- special-token text in contents is counted as the plain text it is
SELECT llm_count_tokens('<|im_end|>') > llm_count_tokens('x') + 1 AS marker_text_is_plain;
-- errors
SELECT try_sql($$SELECT llm_render_chat('[{"role": "wizard", "content": "x"}]')$$);
SELECT try_sql($$SELECT llm_render_chat('{"role": "user"}')$$);
SELECT try_sql($$SELECT llm_render_chat('[{"role": "user", "content": "x"}]', tools => '{"a": 1}')$$);
SELECT try_sql($$SELECT llm_count_tokens('x', model => 'no_such_model')$$);
SELECT llm_render_chat(NULL) IS NULL AS null_in_null_out;
