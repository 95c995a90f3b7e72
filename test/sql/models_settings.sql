--
-- models_settings: per-model engine settings in llm.models (every engine
-- setting the GUC table marks per-model, with its GUC's bounds and values),
-- and the AI functions' model => and priority =>.  'bare' is SmolLM2 without
-- its chat template (what a base model is), 'small' SmolLM2 with settings of
-- its own; both route like the generation functions.
--
SELECT current_setting('llm.model') AS smol \gset

-- refused settings, each with the GUC's own bounds or values
ALTER SYSTEM SET llm.models = 'a=/x.gguf (chat_template=klingon)';
ALTER SYSTEM SET llm.models = 'a=/x.gguf (prefix_caching=maybe)';
ALTER SYSTEM SET llm.models = 'a=/x.gguf (kv_cache_size=-1)';
ALTER SYSTEM SET llm.models = 'a=/x.gguf (speculative_tokens=17)';
ALTER SYSTEM SET llm.models = 'a=/x.gguf (context_length=64, context_length=128)';
-- the worker's own settings are not per model
ALTER SYSTEM SET llm.models = 'a=/x.gguf (threads=2)';
ALTER SYSTEM SET llm.models = 'a=/x.gguf (model=/y.gguf)';
SELECT alias FROM llm_models;

SELECT format('bare=%s (chat_template=none, kv_cache_size=8MB), '
              'small=%s (context_length=256, kv_cache_size=8MB, prefix_caching=off, KV_CACHE_DTYPE = F16)',
              :'smol', :'smol') AS models \gset
ALTER SYSTEM SET llm.models = :'models';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 3 AND bool_and(state = 'ready') FROM llm_models$$);
SELECT alias, context_length, state, error FROM llm_models ORDER BY alias;

-- 'bare' serves raw prompts only, like a model file without a chat template
SELECT try_sql($$SELECT llm_generate('Hi', model => 'bare')$$) AS bare_chat;
SELECT llm_generate('The capital of France is', raw => true, max_tokens => 8, model => 'bare')
     = llm_generate('The capital of France is', raw => true, max_tokens => 8) AS bare_raw_same;
SELECT try_sql($$SELECT llm_classify('I was charged twice', ARRAY['billing', 'bug'], model => 'bare')$$) AS bare_classify;
SELECT try_sql($$SELECT llm_classify('I was charged twice', ARRAY['billing', 'bug'],
                                     model => 'bare', on_error => 'null')$$) AS bare_classify_null;

-- the AI functions take model =>: 'small' is the same file, so the same answers
CREATE TABLE ms_tickets (id int, body text);
INSERT INTO ms_tickets VALUES
  (1, 'I was charged twice for my subscription this month.'),
  (2, 'The app crashes when I open the settings page.'),
  (3, 'How do I export my data to CSV?'),
  (4, 'Please refund the duplicate payment.');
CREATE TABLE ms_default AS
  SELECT id, llm_classify(body, ARRAY['billing', 'bug', 'question']) AS c,
         llm_classify_scores(body, ARRAY['billing', 'bug', 'question']) AS s,
         llm_filter(body, 'Is this about money?') AS f,
         llm_extract(body, '{"type": "object", "properties": {"topic": {"enum": ["billing", "bug", "question"]}},
                             "required": ["topic"]}', max_tokens => 16) AS e
  FROM ms_tickets;
SELECT requests_finished AS small_before FROM llm_models WHERE alias = 'small' \gset
SELECT count(*) AS rows,
       count(*) FILTER (WHERE llm_classify(body, ARRAY['billing', 'bug', 'question'], model => 'small') = c) AS classify_same,
       count(*) FILTER (WHERE llm_classify_scores(body, ARRAY['billing', 'bug', 'question'], model => 'small') = s) AS scores_same,
       count(*) FILTER (WHERE llm_filter(body, 'Is this about money?', model => 'small') = f) AS filter_same,
       count(*) FILTER (WHERE llm_extract(body, '{"type": "object", "properties": {"topic": {"enum": ["billing", "bug", "question"]}},
                             "required": ["topic"]}', max_tokens => 16, model => 'small') = e) AS extract_same
FROM ms_default JOIN ms_tickets USING (id);
SELECT wait_idle();
-- 4 rows x 4 functions went to 'small'; llm_classify and llm_classify_scores
-- send the same request for a row, which the node sends once (llm.dedup_calls): 12
SELECT requests_finished - :small_before AS small_finished FROM llm_models WHERE alias = 'small';

-- the LLM Batch node batches the AI functions' calls of each model
EXPLAIN (COSTS OFF)
  SELECT id, llm_classify(body, ARRAY['billing', 'bug'], model => 'small') FROM ms_tickets;
SELECT count(*) FILTER (WHERE b.c = d.c) AS batched_same
FROM (SELECT id, llm_classify(body, ARRAY['billing', 'bug', 'question'], model => 'small') AS c FROM ms_tickets) b
JOIN ms_default d USING (id);

-- an unknown alias or class is an option error, whatever on_error says
SELECT try_sql($$SELECT llm_filter('x', 'Is it?', model => 'nope', on_error => 'null')$$) AS unknown_model;
SELECT try_sql($$SELECT llm_extract('x', '{"type": "object"}', model => 'nope')$$) AS unknown_model_extract;
SELECT try_sql($$SELECT llm_classify('x', ARRAY['a', 'b'], priority => 'urgent')$$) AS unknown_class;
-- a lower class gives the same answer
SELECT llm_classify(body, ARRAY['billing', 'bug', 'question'], priority => 'batch') = c AS batch_class_same
FROM ms_default JOIN ms_tickets USING (id) WHERE id = 1;

ALTER SYSTEM RESET llm.models;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 1 FROM llm_models$$);
SELECT wait_model();
DROP TABLE ms_tickets, ms_default;
