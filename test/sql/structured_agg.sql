--
-- structured_agg: llm_agg answers one instruction over all rows by
-- map-reduce: rows packed into chunks of the context (or of chunk_tokens),
-- one generation per chunk sent together, the answers combined level by
-- level until one remains.  NULL inputs are skipped, no rows give NULL.
--
CREATE TABLE sa_tickets(id int, body text);
INSERT INTO sa_tickets VALUES
  (1, 'I was charged twice for March.'),
  (2, 'The router blinks red and will not boot.'),
  (3, NULL),
  (4, 'The phone app crashes at start.'),
  (5, 'My files do not sync to the laptop.'),
  (6, 'Please refund my last payment.'),
  (7, 'The app logs me out every hour.');
-- everything fits one chunk: one generation
SELECT wait_idle();
SELECT llm_stat_reset();
SELECT llm_agg(body, 'List the products these tickets are about.', '{"max_tokens": 24}' ORDER BY id) AS answer
FROM sa_tickets;
SELECT wait_recent(1) AS requests;
SELECT count(*) AS generations FROM llm_recent_requests() WHERE completion_tokens > 0;
-- chunks of 50 tokens: several first-level answers, then combined
SELECT wait_idle();
SELECT llm_stat_reset();
SELECT llm_agg(body, 'List the products these tickets are about.', '{"chunk_tokens": 50, "max_tokens": 12}' ORDER BY id)
       AS answer
FROM sa_tickets;
SELECT wait_recent(3) AS requests;
SELECT count(*) AS generations, count(*) FILTER (WHERE outcome = 'length') AS cut_at_max_tokens
FROM llm_recent_requests() WHERE completion_tokens > 0;
-- a row longer than a chunk is cut into pieces
SELECT llm_agg(repeat('The router blinks red. ', 20), 'What is wrong?', '{"chunk_tokens": 60, "max_tokens": 8}')
       AS long_row;
-- no rows, only NULL inputs: NULL
SELECT llm_agg(body, 'Summarize.') IS NULL AS no_rows FROM sa_tickets WHERE false;
SELECT llm_agg(body, 'Summarize.') IS NULL AS only_nulls FROM sa_tickets WHERE body IS NULL;
-- grouped
SELECT id % 2 AS grp, llm_agg(body, 'Name the product in one word.', '{"max_tokens": 6}' ORDER BY id) AS answer
FROM sa_tickets GROUP BY id % 2 ORDER BY grp;
-- errors
SELECT try_sql($$SELECT llm_agg(body, NULL) FROM sa_tickets$$) AS null_instruction;
SELECT try_sql($$SELECT llm_agg(body, 'Row ' || id) FROM sa_tickets$$) AS varying_instruction;
SELECT try_sql($$SELECT llm_agg(body, 'x', '{"temprature": 1}') FROM sa_tickets$$) AS unknown_option;
SELECT try_sql($$SELECT llm_agg(body, 'x', '{"max_tokens": "many"}') FROM sa_tickets$$) AS bad_value;
SELECT try_sql($$SELECT llm_agg(body, 'x', '[1, 2]') FROM sa_tickets$$) AS not_an_object;
SELECT try_sql($$SELECT llm_agg(body, 'x', '{"regex": "a+"}') FROM sa_tickets$$) AS grammar;
SELECT try_sql($$SELECT llm_agg(body, 'x', '{"chunk_tokens": 20, "max_tokens": 64}') FROM sa_tickets$$) AS cannot_combine;
SELECT try_sql($$SELECT llm_agg(body, 'x', '{"chunk_tokens": 0}') FROM sa_tickets$$) AS bad_chunk_tokens;
SELECT try_sql($$SELECT llm_agg(body, 'x', '{"stop": ["a", 1]}') FROM sa_tickets$$) AS bad_stop;
-- options by name reach the generations: max_tokens, stop
SELECT length(llm_agg(body, 'Write a long story about these tickets.', '{"max_tokens": 3}')) < 40 AS max_tokens_applies
FROM sa_tickets;
SELECT llm_agg(body, 'Say hello.', '{"max_tokens": 20, "stop": ["l"], "on_error": "null"}') AS with_stop FROM sa_tickets;
DROP TABLE sa_tickets;
SELECT wait_idle();
