--
-- validation: bad arguments are refused before anything is generated, with
-- SQLSTATE 22023 (invalid_parameter_value) naming the argument.
--
-- the greedy reply later calls must give again (an error left no stale state)
SELECT llm_generate('Say yes.', max_tokens => 4) AS say_yes \gset
SELECT q, try_sql(q) FROM (VALUES
  ($$SELECT llm_generate('hi', max_tokens => 0)$$),
  ($$SELECT llm_generate('hi', max_tokens => -1)$$),
  ($$SELECT llm_generate('hi', max_tokens => -2)$$),
  ($$SELECT llm_generate('hi', temperature => -0.1)$$),
  ($$SELECT llm_generate('hi', temperature => 'NaN')$$),
  ($$SELECT llm_generate('hi', temperature => 'Infinity')$$),
  ($$SELECT llm_generate('hi', top_p => 0)$$),
  ($$SELECT llm_generate('hi', top_p => 1.5)$$),
  ($$SELECT llm_generate('hi', top_k => -1)$$),
  ($$SELECT llm_generate('hi', min_p => -0.1)$$),
  ($$SELECT llm_generate('hi', min_p => 1.1)$$),
  ($$SELECT llm_generate('hi', repetition_penalty => 0)$$),
  ($$SELECT llm_generate('hi', repetition_penalty => -1)$$),
  ($$SELECT llm_generate('hi', on_error => 'ignore')$$),
  ($$SELECT llm_generate('hi', stop => ARRAY[NULL::text])$$),
  ($$SELECT llm_generate('hi', stop => ARRAY[''])$$),
  ($$SELECT llm_generate('hi', stop => array_fill('x'::text, ARRAY[17]))$$),
  ($$SELECT llm_generate('hi', stop => ARRAY[repeat('x', 300)])$$),
  ($$SELECT llm_generate('hi', raw => true, system => 'be brief')$$),
  ($$SELECT llm_generate('')$$),
  ($$SELECT llm_generate(ARRAY['ok', ''])$$),
  ($$SELECT llm_complete('', max_tokens => 1)$$),
  ($$SELECT llm_generate(ARRAY['hi'], max_tokens => 0)$$),
  ($$SELECT llm_chat('{}')$$),
  ($$SELECT llm_chat('[]')$$),
  ($$SELECT llm_chat('"hello"')$$),
  ($$SELECT llm_chat('[1]')$$),
  ($$SELECT llm_chat('[{"role": "user"}]')$$),
  ($$SELECT llm_chat('[{"role": "user", "content": 5}]')$$),
  ($$SELECT llm_chat('[{"role": "robot", "content": "x"}]')$$),
  ($$SELECT llm_chat('[{"role": "user", "content": "x"}]', max_tokens => 0)$$),
  ($$SELECT llm_detokenize(ARRAY[-1])$$),
  ($$SELECT llm_detokenize(ARRAY[49152])$$),
  ($$SELECT llm_detokenize(ARRAY[1, NULL])$$)
) AS t(q);
-- an error raised outside try_sql, then the next call works
SELECT llm_generate('hi', max_tokens => 0);
SELECT llm_generate('', max_tokens => 1);
-- a blank prompt is a real prompt
SELECT finish_reason, completion_tokens > 0 AS blank_ok FROM llm_complete(' ', max_tokens => 4);
-- on_error => 'null': a failing prompt gives NULL and a WARNING; bad options still raise
SELECT llm_generate('', on_error => 'null') IS NULL AS empty_is_null;
SELECT llm_generate(ARRAY['', 'Say yes.'], max_tokens => 4, on_error => 'null') AS mixed;
SELECT text IS NULL AS text_null, finish_reason FROM llm_complete('', on_error => 'null');
SELECT try_sql($$SELECT llm_generate('hi', max_tokens => 0, on_error => 'null')$$);
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes' AS next_call_works;
SELECT wait_idle();
-- non-finite logits (developer hook): a per-request ERROR, never a run of garbage tokens
SET llm.debug_poison_logits = 1;
SELECT try_sql($$SELECT llm_generate('Say yes.', max_tokens => 4)$$);
SET llm.debug_poison_logits = 1;
SELECT llm_generate('Say yes.', max_tokens => 4, on_error => 'null') IS NULL AS poisoned_is_null;
RESET llm.debug_poison_logits;
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes' AS next_call_works;
SELECT wait_idle();
