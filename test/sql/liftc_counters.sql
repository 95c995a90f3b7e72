--
-- liftc_counters: the calls saved, in llm_progress (the running statement)
-- and llm_usage (the role): calls_shared (answered by an identical call's
-- request), lift_rows_below (rows of the scans filters were lifted from:
-- the calls PostgreSQL's placement makes) and lift_rows_reached (rows that
-- reached those filters at their join); calls_saved_by_lift is the
-- difference.  Each count is checked against llm_stat's finished requests
-- with the rule off.
--
CREATE TABLE lcc_cust (id int PRIMARY KEY, tier text);
INSERT INTO lcc_cust SELECT i, CASE WHEN i % 10 = 0 THEN 'gold' ELSE 'basic' END FROM generate_series(1, 30) i;
CREATE TABLE lcc_tick (id int PRIMARY KEY, cust_id int, body text);
INSERT INTO lcc_tick SELECT i, 1 + i % 30,
    (ARRAY['I love eating pizza with cheese.', 'Secret: the vault code is 4411.',
           'Fresh apples and bananas are on sale.'])[1 + i % 3] || ' (ticket ' || i || ')'
  FROM generate_series(1, 60) i;
-- 2 distinct texts in 40 rows
CREATE TABLE lcc_two AS
  SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'Say hello.' ELSE 'Say goodbye.' END AS body
  FROM generate_series(1, 40) i;
ANALYZE lcc_cust;
ANALYZE lcc_tick;
ANALYZE lcc_two;
SELECT count(*) AS gold_tickets FROM lcc_tick t JOIN lcc_cust c ON c.id = t.cust_id WHERE c.tier = 'gold';

-- this backend's counters of the statement that runs q (read inside it), and llm_stat's finished requests
CREATE FUNCTION lcc_progress(q text) RETURNS TABLE (requests bigint, calls_shared bigint, lift_rows_below bigint,
  lift_rows_reached bigint, calls_saved_by_lift bigint)
LANGUAGE plpgsql AS $$
DECLARE
	f0 bigint;
BEGIN
	SELECT requests_finished INTO f0 FROM llm_stat;
	EXECUTE q;
	RETURN QUERY SELECT (SELECT requests_finished - f0 FROM llm_stat), p.calls_shared, p.lift_rows_below,
		p.lift_rows_reached, p.calls_saved_by_lift
		FROM llm_progress p WHERE p.pid = pg_backend_pid();
END
$$;
-- this role's llm_usage counters (written when each LLM Batch node ends;
-- its requests are the worker's, published a moment later: not compared)
CREATE VIEW lcc_usage AS
  SELECT coalesce(sum(calls_shared), 0) AS calls_shared, coalesce(sum(lift_rows_below), 0) AS lift_rows_below,
         coalesce(sum(lift_rows_reached), 0) AS lift_rows_reached,
         coalesce(sum(calls_saved_by_lift), 0) AS calls_saved_by_lift
  FROM llm_usage WHERE role = current_user AND database = current_database();
CREATE TABLE lcc_u0 AS SELECT * FROM lcc_usage;

-- sharing: 40 rows, 2 requests, 38 calls shared
SELECT * FROM lcc_progress($$SELECT count(llm_generate(body, max_tokens => 2)) FROM lcc_two$$);
-- off: 40 requests, none shared
SET llm.dedup_calls = off;
SELECT * FROM lcc_progress($$SELECT count(llm_generate(body, max_tokens => 2)) FROM lcc_two$$);
RESET llm.dedup_calls;

-- the lift: 60 tickets below, the 6 gold customers' tickets at the join, 6 requests
SELECT * FROM lcc_progress($$SELECT count(*) FROM lcc_tick t JOIN lcc_cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$);
-- off: the 60 requests the lift saved, nothing counted as saved
SET llm.lift_filters = off;
SELECT * FROM lcc_progress($$SELECT count(*) FROM lcc_tick t JOIN lcc_cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$);
RESET llm.lift_filters;
-- a nested loop (the planner keeps the scan with the model filter on its
-- outer side, run once): 20 tickets below, the 2 gold tickets among them
-- at the join; sharing off, so that the rule-off count is one request per
-- row below
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET llm.dedup_calls = off;
SELECT * FROM lcc_progress($$SELECT count(*) FROM lcc_tick t JOIN lcc_cust c ON c.id = t.cust_id
  WHERE t.id <= 20 AND c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$);
SET llm.lift_filters = off;
SELECT * FROM lcc_progress($$SELECT count(*) FROM lcc_tick t JOIN lcc_cust c ON c.id = t.cust_id
  WHERE t.id <= 20 AND c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$);
RESET llm.lift_filters;
RESET llm.dedup_calls;
-- EXPLAIN ANALYZE shows the same two counts on the node
CREATE FUNCTION lcc_explain(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		IF l ~ 'Lifted|Nested Loop|Seq Scan|LLM Requests:|LLM Batch' THEN
			RETURN NEXT regexp_replace(l, '\(actual rows=[0-9]+ loops=[0-9]+\)', '');
		END IF;
	END LOOP;
END
$$;
SELECT lcc_explain($$SELECT count(*) FROM lcc_tick t JOIN lcc_cust c ON c.id = t.cust_id
  WHERE t.id <= 20 AND c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$);
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_indexscan;
RESET enable_bitmapscan;

-- llm_usage: the role's totals of the statements above (the EXPLAIN ANALYZE's included):
-- 38 shared, 60 + 20 + 20 rows below, 6 + 2 + 2 reached
SELECT u.calls_shared - u0.calls_shared AS calls_shared,
       u.lift_rows_below - u0.lift_rows_below AS lift_rows_below,
       u.lift_rows_reached - u0.lift_rows_reached AS lift_rows_reached,
       u.calls_saved_by_lift - u0.calls_saved_by_lift AS calls_saved_by_lift
FROM lcc_usage u, lcc_u0 u0;

-- the row-by-row path (a function scan per outer row, which the LLM Batch
-- node does not batch) shares calls within one call site of the statement
-- too: 2 requests for the 40 rows, 38 shared; off, 40
CREATE TABLE lcc_u1 AS SELECT * FROM lcc_usage;
SELECT * FROM lcc_progress($$SELECT count(c.text) FROM lcc_two t, LATERAL llm_complete(t.body, max_tokens => 2) c$$);
SELECT u.calls_shared - u1.calls_shared AS usage_calls_shared FROM lcc_usage u, lcc_u1 u1;
SET llm.dedup_calls = off;
SELECT * FROM lcc_progress($$SELECT count(c.text) FROM lcc_two t, LATERAL llm_complete(t.body, max_tokens => 2) c$$);
RESET llm.dedup_calls;
-- the answers are the unshared ones
CREATE TABLE lcc_row_on AS SELECT t.id, c.text FROM lcc_two t, LATERAL llm_complete(t.body, max_tokens => 2) c;
SET llm.dedup_calls = off;
CREATE TABLE lcc_row_off AS SELECT t.id, c.text FROM lcc_two t, LATERAL llm_complete(t.body, max_tokens => 2) c
  WHERE t.id <= 4;
RESET llm.dedup_calls;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.text = b.text) AS equal FROM lcc_row_off b JOIN lcc_row_on a USING (id);
-- sampling without a seed is never shared: 10 requests; seeded: 2
SELECT requests FROM lcc_progress($$SELECT count(c.text) FROM lcc_two t,
  LATERAL llm_complete(t.body, max_tokens => 2, temperature => 0.8) c WHERE t.id <= 10$$);
SELECT requests FROM lcc_progress($$SELECT count(c.text) FROM lcc_two t,
  LATERAL llm_complete(t.body, max_tokens => 2, temperature => 0.8, seed => 5) c WHERE t.id <= 10$$);
-- a shared failed call: one failed request per statement (2 here), each
-- row its own on_error outcome (rows 1-2 NULL with finish_reason error,
-- row 3 raises)
SELECT requests_failed AS e0 FROM llm_stat \gset
SELECT t.id, c.text IS NULL AS is_null, c.finish_reason FROM lcc_two t,
  LATERAL llm_complete(repeat('word ', 9000), max_tokens => 2, on_error => 'null') c WHERE t.id <= 2 ORDER BY 1;
SELECT try_sql($$SELECT count(*) FROM lcc_two t, LATERAL llm_complete(repeat('word ', 9000), max_tokens => 2,
  on_error => CASE WHEN t.id <= 2 THEN 'null' ELSE 'raise' END) c WHERE t.id <= 3$$);
SELECT requests_failed - :e0 AS failed FROM llm_stat;
-- a PL/pgSQL expression in a loop is one call site of one statement: 1 request for 5 iterations
CREATE FUNCTION lcc_loop() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	f0 bigint;
	t text;
BEGIN
	SELECT requests_finished INTO f0 FROM llm_stat;
	FOR i IN 1..5 LOOP
		t := llm_generate('Say hello.', max_tokens => 2);
	END LOOP;
	RETURN (SELECT requests_finished - f0 FROM llm_stat);
END
$$;
SELECT lcc_loop() AS requests;
-- the next statement calls again
SELECT lcc_loop() AS requests;

DROP VIEW lcc_usage;
DROP TABLE lcc_cust, lcc_tick, lcc_two, lcc_u0, lcc_u1, lcc_row_on, lcc_row_off;
DROP FUNCTION lcc_progress(text), lcc_explain(text), lcc_loop();
