--
-- structured_filter: llm_filter answers a yes/no question about its input
-- by scoring the answers (no decoding), in the select list, WHERE and JOIN
-- ON; batched there too: the LLM Batch node takes the conjuncts with model
-- calls from a scan's or an inner join's filter (cheaper conjuncts stay
-- below and run first), an outer join's ON condition stays row by row; a
-- NULL input is NULL (so the row does not pass); a NULL question is ERROR
-- 22023.
--
SET llm.batch_window = 8;
CREATE TABLE sf_tickets(id int, body text);
INSERT INTO sf_tickets VALUES
  (1, 'I was charged twice this month. Please refund the second payment.'),
  (2, 'The router will not boot after the firmware update.'),
  (3, 'Please send me a copy of my last invoice, the amount looks wrong.'),
  (4, 'How do I change the color theme of the app?'),
  (5, NULL);
CREATE TABLE sf_questions(qid int, question text);
INSERT INTO sf_questions VALUES (1, 'Is this about money or payments?'), (2, 'Does the text ask for a refund?');
SELECT id, llm_filter(body, 'Is this about money or payments?') AS about_money FROM sf_tickets ORDER BY id;
-- WHERE: the cheap condition is evaluated first
EXPLAIN (COSTS OFF) SELECT id FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?') AND id < 4;
SELECT id FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?') AND id < 4 ORDER BY id;
SELECT id FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?') ORDER BY id;
-- JOIN ON
EXPLAIN (COSTS OFF)
SELECT t.id, q.qid FROM sf_tickets t JOIN sf_questions q ON llm_filter(t.body, q.question) AND t.id <= 4;
SELECT t.id, q.qid FROM sf_tickets t JOIN sf_questions q ON llm_filter(t.body, q.question) AND t.id <= 4
ORDER BY t.id, q.qid;
-- a LEFT JOIN's ON condition decides which rows are null-extended: row by row
EXPLAIN (COSTS OFF)
SELECT t.id, q.qid FROM sf_tickets t LEFT JOIN sf_questions q ON llm_filter(t.body, q.question);
SELECT t.id, q.qid FROM sf_tickets t LEFT JOIN sf_questions q ON llm_filter(t.body, q.question) AND q.qid = 2
ORDER BY t.id, q.qid;
-- other conditions with model calls: NOT, a comparison with llm_classify; UPDATE and DELETE
EXPLAIN (COSTS OFF)
SELECT id FROM sf_tickets
WHERE NOT llm_filter(body, 'Does the text ask for a refund?') AND llm_classify(body, ARRAY['money', 'other']) = 'money';
SELECT id FROM sf_tickets
WHERE NOT llm_filter(body, 'Does the text ask for a refund?') AND llm_classify(body, ARRAY['money', 'other']) = 'money'
ORDER BY id;
CREATE TABLE sf_flags AS SELECT id, body, false AS money FROM sf_tickets;
EXPLAIN (COSTS OFF) UPDATE sf_flags SET money = true WHERE llm_filter(body, 'Does the text ask for a refund?');
UPDATE sf_flags SET money = true WHERE llm_filter(body, 'Does the text ask for a refund?');
DELETE FROM sf_flags WHERE NOT llm_filter(body, 'Does the text ask for a refund?') RETURNING id;
SELECT id, money FROM sf_flags ORDER BY id;
-- with LIMIT: the rows read ahead beyond it are aborted
SELECT id FROM sf_tickets WHERE llm_filter(body, 'Does the text ask for a refund?') LIMIT 1;
SELECT count(*) FROM (SELECT id FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?') LIMIT 1) s;
-- the same answers in WHERE (batched), in the select list (batched) and row by row
SET llm.enable_batch_scan = off;
EXPLAIN (COSTS OFF) SELECT id FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?');
SELECT array_agg(id ORDER BY id) AS row_by_row FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?');
SELECT array_agg(id ORDER BY id) AS refund_row_by_row FROM sf_tickets WHERE llm_filter(body, 'Does the text ask for a refund?');
SELECT array_agg(t.id || ':' || q.qid ORDER BY t.id, q.qid) AS join_row_by_row
FROM sf_tickets t JOIN sf_questions q ON llm_filter(t.body, q.question) AND t.id <= 4;
RESET llm.enable_batch_scan;
SELECT array_agg(id ORDER BY id) AS refund_batched FROM sf_tickets WHERE llm_filter(body, 'Does the text ask for a refund?');
SELECT wait_idle();
SELECT llm_stat_reset();
-- each node its own requests (not the statement's shared ones), so the two paths are compared
SET llm.dedup_calls = off;
SELECT array_agg(id ORDER BY id) = (SELECT array_agg(id ORDER BY id) FROM
         (SELECT id, llm_filter(body, 'Is this about money or payments?') AS yes FROM sf_tickets) s WHERE yes)
       AS where_equals_select
FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?');
RESET llm.dedup_calls;
-- 4 non-NULL rows in each of the two: 8 requests
SELECT wait_recent(8) AS requests;
-- NULL input: NULL (not true, so the row does not pass); NULL question: an error
SELECT llm_filter(NULL, 'Is it?') IS NULL AS null_input;
SELECT try_sql($$SELECT llm_filter('x', NULL)$$) AS null_question;
SELECT try_sql($$SELECT id FROM sf_tickets WHERE llm_filter(body, NULL)$$) AS null_question_in_where;
SELECT wait_idle();
SELECT llm_stat_reset();
SELECT llm_filter('x', 'Is it?', on_error => 'null', system => 'Answer carefully.') IS NOT NULL AS with_options;
-- scoring generates nothing
SELECT wait_recent(1) AS requests;
SELECT count(*) AS requests, sum(completion_tokens) AS completion_tokens FROM llm_recent_requests();
DROP TABLE sf_tickets, sf_questions, sf_flags;
RESET llm.batch_window;
SELECT wait_idle();
-- an empty input or question is refused, as llm_generate refuses an empty prompt
SELECT try_sql($$SELECT llm_filter('', 'Is this a complaint?')$$) AS empty_input,
       try_sql($$SELECT llm_filter('The parcel never came.', '')$$) AS empty_question,
       try_sql($$SELECT llm_classify('', ARRAY['a', 'b'])$$) AS classify_empty,
       try_sql($$SELECT llm_extract('', '{"type": "integer"}')$$) AS extract_empty;
