--
-- structured_extract: llm_extract returns jsonb valid against its schema by
-- construction (constrained decoding), batched by the LLM Batch node with
-- the same values as row by row; an invalid or unsupported schema is ERROR
-- 22023 whatever on_error says; a schema whose only valid output is longer
-- than max_tokens is ERROR 54000 (NULL with on_error => 'null'); a NULL
-- input is NULL.
--
SET llm.batch_window = 8;
CREATE TABLE se_tickets(id int, body text);
INSERT INTO se_tickets VALUES
  (1, 'Hello, I was charged twice for my subscription in March (invoice INV-2024-0042). Please refund it. Elena'),
  (2, 'Since the firmware update the router RX-500 will not boot, the power light blinks red. Urgent, our office is offline!'),
  (3, 'The app closes right after the splash screen on my Pixel 7 since version 4.4.6. Nadia'),
  (4, NULL);
CREATE TABLE se_schema AS SELECT $${
  "type": "object",
  "properties": {
    "product": {"enum": ["Cloud Suite", "Billing", "Router RX", "Sync", "Mobile App"]},
    "priority": {"enum": ["low", "normal", "high", "urgent"]},
    "customer": {"type": ["string", "null"], "maxLength": 30},
    "summary": {"type": "string", "maxLength": 80},
    "refund_requested": {"type": "boolean"}
  },
  "required": ["product", "priority", "customer", "summary", "refund_requested"]
}$$::jsonb AS s;
SELECT id, llm_extract(body, s, max_tokens => 120) AS fields FROM se_tickets, se_schema ORDER BY id;
-- valid by construction: the keys, the types, the enums
SELECT id, (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(f) k) AS keys,
       f ->> 'product' IN ('Cloud Suite', 'Billing', 'Router RX', 'Sync', 'Mobile App') AS product_ok,
       f ->> 'priority' IN ('low', 'normal', 'high', 'urgent') AS priority_ok,
       jsonb_typeof(f -> 'refund_requested') = 'boolean' AS refund_ok,
       length(f ->> 'summary') <= 80 AS summary_ok
FROM (SELECT id, llm_extract(body, s, max_tokens => 120) AS f FROM se_tickets, se_schema WHERE body IS NOT NULL) q
ORDER BY id;
-- an instruction and the other options
SELECT jsonb_typeof(llm_extract('Order KS-478575 arrived broken.', '{"type": "object", "properties": {"order": {"type": "string", "pattern": "KS-[0-9]{6}"}}, "required": ["order"]}',
                   instruction => 'The order number starts with KS-.')) AS with_instruction;
SELECT llm_extract('Meet me on the second of May 2024.', '{"type": "string", "format": "date"}') #>> '{}' ~ '^\d{4}-\d{2}-\d{2}$'
       AS date_format;
SELECT jsonb_typeof(llm_extract('Any numbers here: 3, 5, 8?', '{"type": "array", "items": {"type": "integer"}, "maxItems": 4}',
                   temperature => 0.8, seed => 7)) AS sampled_array;
-- NULL input: NULL without work (its schema is not read either)
SELECT llm_extract(NULL, '{"type": "string"}') IS NULL AS null_input;
-- a schema whose only valid output is longer than max_tokens: length is no result
SELECT try_sql($$SELECT llm_extract('x', '{"type": "string", "minLength": 200}', max_tokens => 8)$$) AS too_short;
SELECT llm_extract('x', '{"type": "string", "minLength": 200}', max_tokens => 8, on_error => 'null') IS NULL AS too_short_null;
-- invalid or unsupported schemas: 22023 always, never NULL
SELECT try_sql($$SELECT llm_extract('x', NULL)$$) AS null_schema;
SELECT try_sql($$SELECT llm_extract('x', '{"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {}}', on_error => 'null')$$) AS unsupported;
SELECT try_sql($$SELECT llm_extract('x', '{"type": "widget"}')$$) AS bad_type;
SELECT try_sql($$SELECT llm_extract('x', '{"type": "string", "pattern": "(a|b"}')$$) AS bad_pattern;
SELECT try_sql($$SELECT llm_extract('x', '{"enum": []}')$$) AS empty_enum;
SELECT try_sql($$SELECT llm_extract('x', '{"type": "string", "minLength": 3, "maxLength": 2}')$$) AS accepts_nothing;
SELECT try_sql($$SELECT llm_extract('x', '{"type": "object", "properties": {"a": {"type": "string", "pattern": "[0-9]+", "format": "date", "maxLength": 4}}, "required": ["a"]}')$$) AS intersection_empty;
SELECT try_sql($$SELECT llm_extract('x', '{}')$$) AS any_value;
SELECT try_sql($$SELECT llm_extract('x', '{"type": "string"}', max_tokens => 0)$$) AS bad_option;
SELECT wait_idle();
-- the LLM Batch node: batched, the same values as row by row
EXPLAIN (COSTS OFF) SELECT id, llm_extract(body, s) FROM se_tickets, se_schema;
CREATE TABLE se_batched AS SELECT id, llm_extract(body, s, max_tokens => 120) AS f FROM se_tickets, se_schema;
SET llm.enable_batch_scan = off;
SELECT b.id, b.f IS NOT DISTINCT FROM llm_extract(t.body, s, max_tokens => 120) AS same_row_by_row
FROM se_batched b JOIN se_tickets t USING (id), se_schema ORDER BY b.id;
RESET llm.enable_batch_scan;
-- per-row failures under on_error => 'null' in a batch: NULL rows, one WARNING for the statement
SELECT id, llm_extract(body, '{"type": "string", "minLength": 100}', max_tokens => 6, on_error => 'null') IS NULL AS is_null
FROM se_tickets ORDER BY id;
DROP TABLE se_tickets, se_schema, se_batched;
RESET llm.batch_window;
SELECT wait_idle();
