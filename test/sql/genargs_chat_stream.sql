--
-- genargs_chat_stream: strip_thinking (default true) on every function that
-- returns the text of a chat: the worker sends the answer after a leading
-- <think>...</think> section, so llm_chat, llm_chat_stream, llm_generate
-- (row by row and in the LLM Batch node), llm_generate(text[]),
-- llm_complete, llm_generate_stream and llm_submit give the same text for
-- the same output.  The outputs are forced by choices, and a constrained
-- output is exactly one of its choices: nothing is cut from it, whatever
-- strip_thinking says (the shipped models never write a section freely;
-- test_thinking checks where an answer starts).
--
SELECT wait_idle();
-- the chat arguments of every function that takes one, with their defaults
SELECT p.proname, p.proargtypes[0]::regtype AS first,
       string_agg(a.name || ' ' || pg_get_function_arg_default(p.oid, a.n::int), ', ' ORDER BY a.n) AS chat_arguments
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
CROSS JOIN LATERAL unnest(p.proargnames) WITH ORDINALITY a(name, n)
WHERE a.name IN ('tools', 'enable_thinking', 'strip_thinking')
GROUP BY p.oid, p.proname ORDER BY 1, 2;

CREATE TEMP VIEW think_cases(label, choice, enable_thinking, strip_thinking) AS VALUES
	('1 kept: a grammar', E'<think>\nFrance.\n</think>\n\nParis', NULL::boolean, NULL::boolean),
	('2 kept', E'<think>\nFrance.\n</think>\n\nParis', NULL, false),
	('3 opened by the prompt: kept', E'France.</think> Paris', true, NULL),
	('4 not opened: kept', E'France.</think> Paris', NULL, NULL),
	('5 never closed: kept', E'  <think>still thinking', NULL, NULL),
	('6 only a section: kept', E'<think>a</think>', NULL, NULL),
	('7 no section', E'Paris <think>x</think>', NULL, NULL);
-- llm_chat and llm_chat_stream: the deltas joined are llm_chat's text
SELECT c.label, s.joined, s.joined = llm_chat('[{"role": "user", "content": "Capital of France?"}]', max_tokens => 32,
                                              choices => ARRAY[c.choice], enable_thinking => c.enable_thinking,
                                              strip_thinking => c.strip_thinking) AS same_as_chat,
       s.usage_rows
FROM think_cases c, LATERAL (
	SELECT string_agg((x).delta, '') AS joined,
	       count(*) FILTER (WHERE (x).finish_reason IS NOT NULL) AS usage_rows
	FROM (SELECT llm_chat_stream('[{"role": "user", "content": "Capital of France?"}]', max_tokens => 32,
	                             choices => ARRAY[c.choice], enable_thinking => c.enable_thinking,
	                             strip_thinking => c.strip_thinking) AS x) r) s
ORDER BY c.label;
-- the text functions: the same answers as llm_chat of the same one message
SELECT c.label,
       g.t = llm_chat('[{"role": "user", "content": "Capital of France?"}]', max_tokens => 32,
                      choices => ARRAY[c.choice], enable_thinking => c.enable_thinking,
                      strip_thinking => c.strip_thinking) AS generate_same_as_chat,
       g.t = (SELECT text FROM llm_complete('Capital of France?', max_tokens => 32, choices => ARRAY[c.choice],
                                            enable_thinking => c.enable_thinking, strip_thinking => c.strip_thinking)) AS complete,
       g.t = (llm_generate(ARRAY['Capital of France?'], max_tokens => 32, choices => ARRAY[c.choice],
                           enable_thinking => c.enable_thinking, strip_thinking => c.strip_thinking))[1] AS array,
       g.t = (SELECT string_agg((x).delta, '')
              FROM (SELECT llm_generate_stream('Capital of France?', max_tokens => 32, choices => ARRAY[c.choice],
                                               enable_thinking => c.enable_thinking,
                                               strip_thinking => c.strip_thinking) AS x) r) AS stream,
       g.t = (SELECT text FROM llm_result(llm_submit('Capital of France?', max_tokens => 32, choices => ARRAY[c.choice],
                                                     enable_thinking => c.enable_thinking,
                                                     strip_thinking => c.strip_thinking))) AS submit
FROM think_cases c,
     LATERAL (SELECT llm_generate('Capital of France?', max_tokens => 32, choices => ARRAY[c.choice],
                                  enable_thinking => c.enable_thinking, strip_thinking => c.strip_thinking) AS t) g
ORDER BY c.label;
-- the LLM Batch node's rows are the row-by-row calls' answers
CREATE TEMP TABLE think_rows AS SELECT label, choice, enable_thinking, strip_thinking FROM think_cases;
SELECT * FROM same_as_row_by_row($$SELECT label, llm_generate('Capital of France?', max_tokens => 32, choices => ARRAY[choice],
                                                               enable_thinking => enable_thinking,
                                                               strip_thinking => strip_thinking)
                                  FROM think_rows ORDER BY label$$);
SELECT label, llm_generate('Capital of France?', max_tokens => 32, choices => ARRAY[choice],
                           enable_thinking => enable_thinking, strip_thinking => strip_thinking) AS batched
FROM think_rows ORDER BY label;
-- a raw prompt is no chat: its output as generated; the template's arguments refused
SELECT llm_generate('Capital of France?', raw => true, max_tokens => 32,
                    choices => ARRAY[E'<think>x</think> Paris']) AS raw_kept;
SELECT try_sql($$SELECT llm_generate('x', raw => true, enable_thinking => true)$$) AS raw_thinking;
-- free text (no grammar): the stream's answer is llm_chat's
SELECT (SELECT string_agg((x).delta, '')
        FROM (SELECT llm_chat_stream('[{"role": "user", "content": "Name a colour."}]', max_tokens => 12) AS x) r)
     = llm_chat('[{"role": "user", "content": "Name a colour."}]', max_tokens => 12) AS free_text_same;
SELECT wait_idle();
