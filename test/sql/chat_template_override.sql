--
-- chat_template_override: llm.chat_template (or a model's chat_template in
-- llm.models) given as Jinja text or as an absolute path to a .jinja file,
-- compiled at load instead of the model file's own template; a template
-- outside the interpreter's subset is refused at load with line:column
-- (a reload keeps the model serving with its previous settings).
--
SELECT current_setting('llm.model') AS smol \gset
SELECT '/tmp/pg_llm_tpl_' || pg_backend_pid() || '.jinja' AS tpl_path \gset
COPY (SELECT '{% for m in messages %}<<{{ m.role | upper }}>> {{ m.content }}' || chr(10) || '{% endfor %}'
             || '{% if add_generation_prompt %}<<ASSISTANT>>{% endif %}') TO :'tpl_path';

-- neither a family name, a template nor an absolute path: refused by the setting
ALTER SYSTEM SET llm.models = 'a=/x.gguf (chat_template=relative/t.jinja)';
ALTER SYSTEM SET llm.chat_template = 'klingon';

-- a file, per model
SELECT format('file=%s (chat_template=%s, kv_cache_size=8MB)', :'smol', :'tpl_path') AS models \gset
ALTER SYSTEM SET llm.models = :'models';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 2 AND bool_and(state = 'ready') FROM llm_models$$);
SELECT llm_render_chat('[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]', model => 'file');
SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]', false, model => 'file');
-- the default model keeps the file's own
SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]') LIKE '<|im_start|>system%' AS default_own;

-- inline text, for llm.model
ALTER SYSTEM SET llm.chat_template = '{% if tools %}{{ raise_exception(''tools: '' ~ tools | length) }}{% endif %}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]') = '[user:Hi]'$$);
SELECT llm_render_chat('[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]');
-- llm_chat passes tools => to the template
SELECT try_sql($$SELECT llm_chat('[{"role": "user", "content": "Hi"}]', max_tokens => 4,
                                 tools => '[{"type": "function", "function": {"name": "f"}}]')$$) AS chat_tools;
SELECT try_sql($$SELECT llm_chat('[{"role": "user", "content": "Hi"}]', tools => '{"a": 1}')$$) AS chat_tools_not_array;
-- a per-model setting wins over llm.chat_template
SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]', false, model => 'file');

-- outside the subset: refused at load, line:column; the previous template keeps serving
ALTER SYSTEM SET llm.chat_template = '{% for m in messages %}{{ m.content }}{% endif %}';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT llm_model_info()->>'error' LIKE 'new llm.chat_template%'$$);
SELECT regexp_replace(llm_model_info()->>'error', '= ''.*'' not', '= ''...'' not') AS refused;
SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]') AS still_inline;

ALTER SYSTEM RESET llm.chat_template;
ALTER SYSTEM RESET llm.models;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 1 FROM llm_models$$);
SELECT wait_until($$SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]') LIKE '<|im_start|>system%'$$);
SELECT wait_model();

-- strip_thinking (default true) cuts a leading <think>...</think> section
-- from free text only: a constrained output (here choices) is exactly one of
-- its choices, with or without enable_thinking
SELECT llm_chat('[{"role": "user", "content": "Capital of France?"}]', max_tokens => 32,
                choices => ARRAY[E'<think>\nFrance.\n</think>\n\nParis']) AS constrained_whole;
SELECT llm_chat('[{"role": "user", "content": "Capital of France?"}]', max_tokens => 32,
                choices => ARRAY[E'<think>\nFrance.\n</think>\n\nParis'], strip_thinking => false) AS kept;
SELECT llm_chat('[{"role": "user", "content": "Capital of France?"}]', max_tokens => 32,
                choices => ARRAY[E'France.</think> Paris'], enable_thinking => true) AS opened_constrained_whole;
SELECT llm_chat('[{"role": "user", "content": "Capital of France?"}]', max_tokens => 32,
                choices => ARRAY[E'France.</think> Paris']) AS not_opened_kept;
