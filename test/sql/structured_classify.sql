--
-- structured_classify: llm_classify and llm_classify_scores score every
-- label after one shared prompt (SCORE requests, each label followed by the
-- end of the turn): exactly one label always comes back, probabilities sum
-- to 1, labels sharing a prefix work, bad label arrays are ERROR 22023, a
-- NULL input is NULL; batched by the LLM Batch node with the same values.
--
SET llm.batch_window = 8;
CREATE TABLE sc_tickets(id int, body text);
INSERT INTO sc_tickets VALUES
  (1, 'I was charged twice for my subscription this month. Please refund the second payment.'),
  (2, 'The router''s power light blinks red after the firmware update and it will not boot.'),
  (3, 'The phone app closes right after the splash screen since version 4.4.6.'),
  (4, 'Files I add on my laptop never show up on my other computer; the sync client says up to date.'),
  (5, NULL);
SELECT id, llm_classify(body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync']) AS product
FROM sc_tickets ORDER BY id;
-- always one of the labels, whatever the input
SELECT bool_and(llm_classify(body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync'])
                IN ('Billing', 'Router RX', 'Mobile App', 'Sync')) AS always_a_label
FROM sc_tickets WHERE body IS NOT NULL;
-- scores: a probability per label, summing to 1; the argmax is llm_classify's label
SELECT id, (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(s) k) AS labels,
       round((SELECT sum(v::numeric) FROM jsonb_each_text(s) e(k, v)), 6) AS total,
       (SELECT k FROM jsonb_each_text(s) e(k, v) ORDER BY v::float8 DESC LIMIT 1)
         = llm_classify(body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync']) AS argmax_is_label
FROM (SELECT id, body, llm_classify_scores(body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync']) AS s
      FROM sc_tickets WHERE body IS NOT NULL) q ORDER BY id;
-- an instruction and a system message change the prompt, not the contract
SELECT llm_classify('The charge on my card is wrong.', ARRAY['urgent', 'not urgent'],
                    instruction => 'Tickets about money are urgent.') IN ('urgent', 'not urgent') AS with_instruction,
       llm_classify('The charge on my card is wrong.', ARRAY['urgent', 'not urgent'],
                    system => 'You sort support tickets.') IN ('urgent', 'not urgent') AS with_system;
-- labels sharing a prefix: each can win (bug does not win by stopping early)
SELECT body, llm_classify(body, ARRAY['bug', 'bugfix']) AS label,
       round((llm_classify_scores(body, ARRAY['bug', 'bugfix']) ->> 'bugfix')::numeric, 3) AS p_bugfix
FROM (VALUES ('Reply with the single word: bug'), ('Reply with the single word: bugfix')) v(body);
-- one label: always it, with probability 1
SELECT llm_classify('anything', ARRAY['only']) AS label, llm_classify_scores('anything', ARRAY['only']) AS scores;
-- NULL input: NULL, nothing sent (the labels are not even read)
SELECT llm_classify(NULL, ARRAY['a', 'b']) IS NULL AS null_input,
       llm_classify_scores(NULL, NULL) IS NULL AS null_scores;
-- bad labels: 22023, also with on_error => 'null'
SELECT try_sql($$SELECT llm_classify('x', ARRAY[]::text[])$$) AS empty_labels;
SELECT try_sql($$SELECT llm_classify('x', NULL)$$) AS null_labels;
SELECT try_sql($$SELECT llm_classify('x', ARRAY['a', NULL], on_error => 'null')$$) AS null_label;
SELECT try_sql($$SELECT llm_classify('x', ARRAY['a', ''])$$) AS empty_label;
SELECT try_sql($$SELECT llm_classify_scores('x', ARRAY['bug', 'feature', 'bug'])$$) AS duplicate_label;
SELECT try_sql($$SELECT llm_classify('x', ARRAY[['a', 'b'], ['c', 'd']])$$) AS two_dimensional;
SELECT try_sql($$SELECT llm_classify('x', ARRAY['a'], on_error => 'maybe')$$) AS bad_on_error;
SELECT try_sql($$SELECT llm_classify('x', (SELECT array_agg(g::text) FROM generate_series(1, 257) g))$$) AS too_many;
SELECT wait_idle();
-- the LLM Batch node: batched, the same labels and scores as row by row
EXPLAIN (COSTS OFF)
SELECT id, llm_classify(body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync']) FROM sc_tickets;
SELECT wait_idle();
SELECT llm_stat_reset();
CREATE TABLE sc_batched AS
  SELECT id, llm_classify(body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync']) AS label,
         llm_classify_scores(body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync']) AS scores
  FROM sc_tickets;
SET llm.enable_batch_scan = off;
SELECT b.id, b.label IS NOT DISTINCT FROM llm_classify(t.body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync'])
       AND b.scores IS NOT DISTINCT FROM llm_classify_scores(t.body, ARRAY['Billing', 'Router RX', 'Mobile App', 'Sync'])
       AS same_row_by_row
FROM sc_batched b JOIN sc_tickets t USING (id) ORDER BY b.id;
RESET llm.enable_batch_scan;
-- scoring generates nothing: 4 rows row by row and 4 batched: llm_classify's
-- and llm_classify_scores' identical request of a row is sent once, by the
-- node and by the statement's two row-by-row call sites (llm.dedup_calls)
SELECT wait_recent(8) AS requests;
SELECT count(*) AS requests, sum(completion_tokens) AS completion_tokens FROM llm_recent_requests();
DROP TABLE sc_tickets, sc_batched;
RESET llm.batch_window;
SELECT wait_idle();
