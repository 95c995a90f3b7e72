--
-- semjoin_basic: llm_join(input, question, candidates) returns the 1-based
-- positions of the candidates for which
-- llm_filter(input || E'\n\nCandidate:\n' || candidate, question) is true,
-- each row's candidates scored in forked requests sharing its prompt.  Its
-- answers are compared with the n x m llm_filter calls; NULLs, LEFT and
-- semi joins, chunking past 64 candidates on a small context, errors.
--
SET llm.batch_window = 8;
CREATE TABLE sj_tickets(id int, body text);
INSERT INTO sj_tickets VALUES
  (1, 'My new phone''s battery is dead by noon every single day.'),
  (2, 'The coffee machine leaks water all over the kitchen counter.'),
  (3, 'I ordered running shoes in size 42 but got size 38.'),
  (4, 'The laptop screen flickers when I open a video call.'),
  (5, NULL);
CREATE TABLE sj_products(pid int, name text);
INSERT INTO sj_products VALUES
  (1, 'Smartphone'), (2, 'Coffee maker'), (3, 'Sports shoes'), (4, 'Laptop'), (5, 'Garden hose'),
  (6, NULL), (7, '');
CREATE VIEW sj_cands AS SELECT array_agg(pid ORDER BY pid) AS pids, array_agg(name ORDER BY pid) AS names
                        FROM sj_products;
\set q 'Is the candidate the product that the text is about?'

-- the n x m pairwise answers, each its own llm_filter call (an empty candidate names nothing)
CREATE TABLE sj_pairs AS
  SELECT t.id, p.pid, llm_filter(t.body || E'\n\nCandidate:\n' || p.name, :'q') AS yes
  FROM sj_tickets t CROSS JOIN sj_products p WHERE p.name <> '';
-- the same join, one llm_join call per ticket
CREATE TABLE sj_joined AS
  SELECT t.id, c.pids[m.i] AS pid
  FROM sj_tickets t CROSS JOIN sj_cands c
  LEFT JOIN LATERAL unnest(llm_join(t.body, :'q', c.names)) AS m(i) ON true;
-- equal: every pair llm_filter says yes to, and no other
SELECT (SELECT count(*) FROM sj_pairs WHERE yes) AS pairs_yes,
       (SELECT count(*) FROM sj_pairs WHERE NOT yes) AS pairs_no,
       (SELECT count(*) FROM sj_joined WHERE pid IS NOT NULL) AS joined,
       (SELECT count(*) FROM ((SELECT id, pid FROM sj_pairs WHERE yes)
                              EXCEPT (SELECT id, pid FROM sj_joined WHERE pid IS NOT NULL)) d) AS only_pairs,
       (SELECT count(*) FROM ((SELECT id, pid FROM sj_joined WHERE pid IS NOT NULL)
                              EXCEPT (SELECT id, pid FROM sj_pairs WHERE yes)) d) AS only_joined;
-- the LEFT join keeps every ticket: the NULL body and tickets without a match with a NULL product
SELECT id, pid FROM sj_joined ORDER BY id, pid;
-- an inner join drops them
SELECT t.id, c.pids[m.i] AS pid
FROM sj_tickets t CROSS JOIN sj_cands c, unnest(llm_join(t.body, :'q', c.names)) AS m(i)
ORDER BY 1, 2;
-- semi join: the tickets with at least one match; anti join: with none
SELECT t.id FROM sj_tickets t CROSS JOIN sj_cands c
WHERE cardinality(llm_join(t.body, :'q', c.names)) > 0 ORDER BY 1;
SELECT t.id FROM sj_tickets t CROSS JOIN sj_cands c
WHERE cardinality(llm_join(t.body, :'q', c.names)) = 0 ORDER BY 1;

-- NULLs: a NULL input is NULL; NULL candidates are none; a NULL or empty candidate never matches
SELECT llm_join(NULL, :'q', ARRAY['Laptop']) AS null_input,
       llm_join('The laptop is slow.', :'q', NULL) AS null_candidates,
       llm_join('The laptop is slow.', :'q', '{}') AS no_candidates,
       llm_join('The laptop is slow.', :'q', ARRAY[NULL, '']) AS null_and_empty;
-- positions are the array's, past the NULL and empty ones (the same pair answers as above)
SELECT llm_join(body, :'q', ARRAY[NULL, '', 'Smartphone', NULL, 'Garden hose', 'Laptop'])
       = ARRAY(SELECT CASE pid WHEN 1 THEN 3 WHEN 5 THEN 5 WHEN 4 THEN 6 END FROM sj_pairs
               WHERE sj_pairs.id = t.id AND yes AND pid IN (1, 4, 5) ORDER BY 1) AS positions_same
FROM sj_tickets t WHERE id <= 4 ORDER BY id;

-- errors, each with its SQLSTATE
SELECT try_sql($$SELECT llm_join('x', NULL, ARRAY['a'])$$) AS null_question;
SELECT try_sql($$SELECT llm_join('x', '', ARRAY['a'])$$) AS empty_question;
SELECT try_sql($$SELECT llm_join('', 'Is it?', ARRAY['a'])$$) AS empty_input;
SELECT try_sql($$SELECT llm_join('x', 'Is it?', ARRAY[['a'], ['b']])$$) AS two_dimensions;
SELECT try_sql($$SELECT llm_join('x', 'Is it?', ARRAY['a'], on_error => 'maybe')$$) AS bad_on_error;
SELECT try_sql($$SELECT llm_join('x', 'Is it?', ARRAY['a'], model => 'nope')$$) AS unknown_model;

-- a small context: 70 candidates, far more tokens than its 256, go in two forked requests
-- (64 candidates each at most) whose answers are the 70 llm_filter calls'
SELECT current_setting('llm.model') AS smol \gset
SELECT format('tiny=%s (context_length=256, kv_cache_size=8MB)', :'smol') AS models \gset
ALTER SYSTEM SET llm.models = :'models';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 2 AND bool_and(state = 'ready') FROM llm_models$$);
CREATE TABLE sj_many AS
  SELECT g AS pos, (ARRAY['Smartphone', 'Coffee maker', 'Laptop', 'Garden hose', 'Sports shoes',
                          'Desk lamp', 'Printer'])[1 + (g - 1) % 7] || ' model ' || g AS name
  FROM generate_series(1, 70) g;
SELECT requests_finished AS tiny_before FROM llm_models WHERE alias = 'tiny' \gset
CREATE TABLE sj_many_joined AS
  SELECT llm_join(body, :'q', (SELECT array_agg(name ORDER BY pos) FROM sj_many), model => 'tiny') AS hits
  FROM sj_tickets WHERE id = 1;
SELECT requests_finished - :tiny_before AS join_requests FROM llm_models WHERE alias = 'tiny';
SELECT (SELECT hits FROM sj_many_joined)
       = ARRAY(SELECT pos FROM sj_many
               WHERE llm_filter((SELECT body FROM sj_tickets WHERE id = 1) || E'\n\nCandidate:\n' || name,
                                :'q', model => 'tiny')
               ORDER BY pos) AS chunked_same,
       cardinality((SELECT hits FROM sj_many_joined)) AS hits;
-- a pair that does not fit the context is llm_filter's error, or NULL with on_error => 'null'
SELECT repeat('The phone is slow. ', 40) AS long_text \gset
SELECT try_sql(format($$SELECT llm_filter(%L || E'\n\nCandidate:\n' || 'Phone', %L, model => 'tiny')$$,
                      :'long_text', :'q')) AS filter_too_long;
SELECT try_sql(format($$SELECT llm_join(%L, %L, ARRAY['Phone'], model => 'tiny')$$, :'long_text', :'q'))
       AS join_too_long;
SELECT llm_join(:'long_text', :'q', ARRAY['Phone'], model => 'tiny', on_error => 'null') IS NULL AS null_on_error;
ALTER SYSTEM RESET llm.models;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 1 FROM llm_models$$);
SELECT wait_model();
DROP VIEW sj_cands;
DROP TABLE sj_tickets, sj_products, sj_pairs, sj_joined, sj_many, sj_many_joined;
