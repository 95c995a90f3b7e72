--
-- genargs_template: tools and enable_thinking reach the chat template from
-- every function that renders one, as llm_render_chat renders them.  A
-- template that shows both, in plain text (no special tokens), so a
-- rendered prompt given raw is tokenized as the template's output is.
--
SELECT wait_idle();
ALTER SYSTEM SET llm.chat_template = '{% for m in messages %}{{ m.role }}: {{ m.content }} | {% endfor %}{% if tools %}tools: {% for t in tools %}{{ t.function.name }}; {% endfor %}| {% endif %}{% if add_generation_prompt %}assistant: {% if enable_thinking %}<think> {% endif %}{% endif %}';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]') = 'user: Hi | assistant: '$$);
SELECT llm_render_chat('[{"role": "user", "content": "Weather in Paris?"}]',
                       tools => '[{"type": "function", "function": {"name": "get_weather"}}]', enable_thinking => true);
CREATE TEMP VIEW tool_cases(label, tools, enable_thinking) AS VALUES
	('1 none', NULL::jsonb, NULL::boolean),
	('2 tools', '[{"type": "function", "function": {"name": "get_weather"}}, {"type": "function", "function": {"name": "get_time"}}]', NULL),
	('3 thinking', NULL, true),
	('4 both', '[{"type": "function", "function": {"name": "get_weather"}}]', true);
-- llm_chat_stream's prompt is the rendered one: its usage counts it, its
-- deltas are the rendered prompt's continuation, llm_count_tokens agrees
SELECT c.label, s.prompt_tokens,
       s.prompt_tokens = llm_count_tokens('[{"role": "user", "content": "Weather in Paris?"}]'::jsonb,
                                          tools => c.tools, enable_thinking => c.enable_thinking) AS counted,
       s.prompt_tokens = (SELECT prompt_tokens
                          FROM llm_complete(llm_render_chat('[{"role": "user", "content": "Weather in Paris?"}]',
                                                            tools => c.tools, enable_thinking => c.enable_thinking),
                                            raw => true, max_tokens => 8)) AS same_as_render,
       s.joined = llm_generate(llm_render_chat('[{"role": "user", "content": "Weather in Paris?"}]',
                                               tools => c.tools, enable_thinking => c.enable_thinking),
                               raw => true, max_tokens => 8) AS same_text_as_render
FROM tool_cases c, LATERAL (
	SELECT string_agg((x).delta, '') AS joined, max((x).prompt_tokens) AS prompt_tokens
	FROM (SELECT llm_chat_stream('[{"role": "user", "content": "Weather in Paris?"}]', max_tokens => 8,
	                             tools => c.tools, enable_thinking => c.enable_thinking,
	                             strip_thinking => false) AS x) r) s
ORDER BY c.label;
-- a text prompt is the user turn: llm_generate, llm_complete, the stream
-- and llm_submit see the rendered prompt, and llm_count_tokens(text) counts it
SELECT c.label, x.prompt_tokens,
       x.prompt_tokens = llm_count_tokens('Weather in Paris?', tools => c.tools, enable_thinking => c.enable_thinking) AS counted,
       x.prompt_tokens = (SELECT prompt_tokens
                          FROM llm_complete(llm_render_chat('[{"role": "user", "content": "Weather in Paris?"}]',
                                                            tools => c.tools, enable_thinking => c.enable_thinking),
                                            raw => true, max_tokens => 8)) AS same_as_render,
       x.text = llm_generate('Weather in Paris?', max_tokens => 8, tools => c.tools, enable_thinking => c.enable_thinking,
                             strip_thinking => false) AS generate,
       x.text = (SELECT string_agg((s).delta, '')
                 FROM (SELECT llm_generate_stream('Weather in Paris?', max_tokens => 8, tools => c.tools,
                                                  enable_thinking => c.enable_thinking, strip_thinking => false) AS s) r) AS stream,
       x.text = (SELECT text FROM llm_result(llm_submit('Weather in Paris?', max_tokens => 8, tools => c.tools,
                                                        enable_thinking => c.enable_thinking, strip_thinking => false))) AS submit
FROM tool_cases c,
     LATERAL (SELECT * FROM llm_complete('Weather in Paris?', max_tokens => 8, tools => c.tools,
                                         enable_thinking => c.enable_thinking, strip_thinking => false)) x
ORDER BY c.label;
-- the AI functions read them through the same rows: their prompt changes, so their scores
SELECT c.label,
       llm_classify_scores('Sunny and warm.', ARRAY['good', 'bad'], tools => c.tools, enable_thinking => c.enable_thinking)
         IS DISTINCT FROM llm_classify_scores('Sunny and warm.', ARRAY['good', 'bad']) AS classify_changed
FROM tool_cases c ORDER BY c.label;
-- errors: the rows' own checks, on every function
SELECT try_sql($$SELECT count(*) FROM (SELECT llm_chat_stream('[{"role": "user", "content": "Hi"}]', tools => '{"a": 1}')) q$$) AS stream_tools_not_array;
SELECT try_sql($$SELECT llm_classify('x', ARRAY['a', 'b'], tools => '1')$$) AS classify_tools_not_array;
SELECT try_sql($$SELECT llm_count_tokens('[{"role": "user", "content": "Hi"}]'::jsonb, tools => '"x"')$$) AS count_tools_not_array;
SELECT try_sql($$SELECT llm_submit('x', raw => true, tools => '[]')$$) AS submit_raw_tools;

ALTER SYSTEM RESET llm.chat_template;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT llm_render_chat('[{"role": "user", "content": "Hi"}]') LIKE '<|im_start|>system%'$$);
SELECT wait_idle();
