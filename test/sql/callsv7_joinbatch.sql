--
-- callsv7_joinbatch: llm_join calls evaluated by the LLM Batch node, many
-- rows' forked requests in flight at once, with the answers of the calls
-- made row by row (llm.enable_batch_scan = off): in a target list, in WHERE,
-- with NULL inputs, no candidates, more candidates than one request holds
-- (answered by the call's build, two requests), and rows sharing one
-- request (identical text and candidates sent) whose NULL candidates sit at
-- other positions: each row keeps its own positions.
--
SET llm.batch_window = 8;
CREATE FUNCTION explain_join(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		RETURN NEXT regexp_replace(l, '(Prompt Tokens|Cached Tokens|Completion Tokens|Mean TTFT|Max Requests in Flight): [0-9.]+', '\1: N');
	END LOOP;
END
$$;
CREATE TABLE jb_tickets(id int, body text);
INSERT INTO jb_tickets VALUES
  (1, 'My new phone''s battery is dead by noon every single day.'),
  (2, 'The coffee machine leaks water all over the kitchen counter.'),
  (3, 'I ordered running shoes in size 42 but got size 38.'),
  (4, 'The laptop screen flickers when I open a video call.'),
  (5, NULL),
  (6, 'The garden hose split open the first time I used it.'),
  (7, 'My phone charger stopped working after a week.');
CREATE TABLE jb_products(pid int, name text);
INSERT INTO jb_products VALUES
  (1, 'Smartphone'), (2, 'Coffee maker'), (3, 'Sports shoes'), (4, 'Laptop'), (5, 'Garden hose'),
  (6, NULL), (7, '');
CREATE VIEW jb_cands AS SELECT array_agg(name ORDER BY pid) AS names FROM jb_products;
\set q 'Is the candidate the product that the text is about?'

-- row by row: the reference answers
SET llm.enable_batch_scan = off;
CREATE TABLE jb_alone AS
  SELECT t.id, llm_join(t.body, :'q', c.names) AS m FROM jb_tickets t CROSS JOIN jb_cands c;
CREATE TABLE jb_alone_where AS
  SELECT t.id FROM jb_tickets t CROSS JOIN jb_cands c WHERE cardinality(llm_join(t.body, :'q', c.names)) > 0;
RESET llm.enable_batch_scan;

-- the LLM Batch node evaluates the calls: one request per row with a text, several in flight
SELECT * FROM explain_join($$SELECT t.id, llm_join(t.body, 'Is the candidate the product that the text is about?', c.names) AS m
                            FROM jb_tickets t CROSS JOIN jb_cands c$$);
CREATE TABLE jb_batched AS
  SELECT t.id, llm_join(t.body, :'q', c.names) AS m FROM jb_tickets t CROSS JOIN jb_cands c;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.m IS NOT DISTINCT FROM b.m) AS same,
       count(*) FILTER (WHERE b.m IS NULL) AS null_rows
FROM jb_alone a JOIN jb_batched b USING (id);
-- in WHERE (a conjunct of the node), the same rows
SELECT * FROM explain_join($$SELECT t.id FROM jb_tickets t CROSS JOIN jb_cands c
                            WHERE cardinality(llm_join(t.body, 'Is the candidate the product that the text is about?', c.names)) > 0$$);
SELECT (SELECT array_agg(id ORDER BY id) FROM jb_alone_where)
       = (SELECT array_agg(t.id ORDER BY t.id) FROM jb_tickets t CROSS JOIN jb_cands c
          WHERE cardinality(llm_join(t.body, :'q', c.names)) > 0) AS where_same;

-- no candidate to send ('{}', no request) and NULL candidates, in the node
SELECT * FROM explain_join($$SELECT id, llm_join(body, 'Is it?', CASE WHEN id % 2 = 0 THEN ARRAY[NULL, '']
                                                                 ELSE NULL END) FROM jb_tickets$$);
SELECT id, llm_join(body, :'q', CASE WHEN id % 2 = 0 THEN ARRAY[NULL, ''] ELSE NULL END) AS m
FROM jb_tickets ORDER BY id;

-- rows sharing one request: the same text and candidates sent, NULLs at other positions
SELECT * FROM explain_join($$SELECT g, llm_join('My new phone''s battery is dead by noon every single day.',
                                               'Is the candidate the product that the text is about?',
                                               CASE WHEN g % 2 = 0 THEN ARRAY['Laptop', NULL, 'Smartphone', 'Garden hose', 'the router', 'my laptop']
                                                    ELSE ARRAY[NULL, NULL, 'Laptop', 'Smartphone', NULL, 'Garden hose', 'the router', 'my laptop'] END)
                            FROM generate_series(1, 4) g$$);
SET llm.enable_batch_scan = off;
SELECT llm_join('My new phone''s battery is dead by noon every single day.', :'q',
                ARRAY['Laptop', 'Smartphone', 'Garden hose', 'the router', 'my laptop']) AS dense \gset
RESET llm.enable_batch_scan;
SELECT cardinality(:'dense'::int[]) > 0 AS dense_matches;
SELECT g, m = ARRAY(SELECT (CASE WHEN g % 2 = 0 THEN ARRAY[1, 3, 4, 5, 6] ELSE ARRAY[3, 4, 6, 7, 8] END)[i]
                    FROM unnest(:'dense'::int[]) WITH ORDINALITY u(i, k) ORDER BY k) AS own_positions
FROM (SELECT g, llm_join('My new phone''s battery is dead by noon every single day.', :'q',
                         CASE WHEN g % 2 = 0 THEN ARRAY['Laptop', NULL, 'Smartphone', 'Garden hose', 'the router', 'my laptop']
                              ELSE ARRAY[NULL, NULL, 'Laptop', 'Smartphone', NULL, 'Garden hose', 'the router', 'my laptop'] END) AS m
      FROM generate_series(1, 4) g) s ORDER BY g;

-- 70 candidates: more than one request holds, answered by the call's build in two requests
CREATE TABLE jb_many AS SELECT array_agg(CASE WHEN i % 10 = 0 THEN 'Laptop' ELSE 'Part ' || i END ORDER BY i) AS names
FROM generate_series(1, 70) i;
SET llm.enable_batch_scan = off;
CREATE TABLE jb_many_alone AS
  SELECT t.id, llm_join(t.body, :'q', c.names) AS m FROM jb_tickets t CROSS JOIN jb_many c WHERE t.id IN (3, 4);
RESET llm.enable_batch_scan;
SELECT * FROM explain_join($$SELECT t.id, llm_join(t.body, 'Is the candidate the product that the text is about?', c.names)
                            FROM jb_tickets t CROSS JOIN jb_many c WHERE t.id IN (3, 4)$$);
SELECT a.id, a.m = b.m AS same
FROM jb_many_alone a
JOIN (SELECT t.id, llm_join(t.body, :'q', c.names) AS m FROM jb_tickets t CROSS JOIN jb_many c WHERE t.id IN (3, 4)) b
  USING (id) ORDER BY 1;

-- errors as row by row: raised when the row is reached
SELECT try_sql($$SELECT id, llm_join(CASE WHEN id = 3 THEN '' ELSE body END, 'Is it?', ARRAY['a']) FROM jb_tickets$$)
  AS empty_input_in_node;

DROP TABLE jb_tickets, jb_products, jb_alone, jb_alone_where, jb_batched, jb_many, jb_many_alone CASCADE;
DROP FUNCTION explain_join(text);
SELECT wait_idle();
