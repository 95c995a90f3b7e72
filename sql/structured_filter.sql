--
-- structured_filter: llm_filter answers a yes/no question about its input
-- by scoring the answers (no decoding), in the select list, WHERE and JOIN
-- ON; its high COST puts cheaper conditions first; a NULL input is NULL
-- (so the row does not pass); a NULL question is ERROR 22023.
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
INSERT INTO sf_questions VALUES (1, 'Is this about money or payments?'), (2, 'Is something broken?');
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
-- the same answers in WHERE, in the select list (batched) and row by row
SELECT array_agg(id ORDER BY id) = (SELECT array_agg(id ORDER BY id) FROM
         (SELECT id, llm_filter(body, 'Is this about money or payments?') AS yes FROM sf_tickets) s WHERE yes)
       AS where_equals_select
FROM sf_tickets WHERE llm_filter(body, 'Is this about money or payments?');
-- NULL input: NULL (not true, so the row does not pass); NULL question: an error
SELECT llm_filter(NULL, 'Is it?') IS NULL AS null_input;
SELECT try_sql($$SELECT llm_filter('x', NULL)$$) AS null_question;
SELECT try_sql($$SELECT id FROM sf_tickets WHERE llm_filter(body, NULL)$$) AS null_question_in_where;
SELECT llm_filter('x', 'Is it?', on_error => 'null', system => 'Answer carefully.') IS NOT NULL AS with_options;
SELECT count(*) AS requests, sum(completion_tokens) AS completion_tokens
FROM (SELECT * FROM llm_recent_requests() ORDER BY seq DESC LIMIT 4) r;
DROP TABLE sf_tickets, sf_questions;
RESET llm.batch_window;
SELECT wait_idle();
