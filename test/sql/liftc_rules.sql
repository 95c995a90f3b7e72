--
-- liftc_rules: the places a model-calling filter is never lifted to
-- (docs/FILTER_PLACEMENT.md, "When it applies"), each with data where
-- lifting it would change the answer or the calls: a customer whose tickets
-- are of both kinds, in both orders, so that whichever ticket a semi or
-- anti join, a LIMIT or a GROUP BY meets first, a filter above it decides
-- differently from the filter below it.  Each answer is checked against the
-- same query with llm.lift_filters off.
--
CREATE FUNCTION liftc_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		RETURN NEXT l;
	END LOOP;
END
$$;
-- the statement's model calls (requests the worker finished)
CREATE FUNCTION liftc_calls(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	f0 bigint;
BEGIN
	SELECT requests_finished INTO f0 FROM llm_stat;
	EXECUTE q;
	RETURN (SELECT requests_finished - f0 FROM llm_stat);
END
$$;
-- whether EXPLAIN shows a lift
CREATE FUNCTION liftc_fired(q text) RETURNS boolean LANGUAGE sql AS $$
SELECT bool_or(l LIKE '%LLM Filter Lifted%') FROM liftc_plan(q) l
$$;
-- the rows of q with the lift on and off, as one text each: equal when the placement did not change the answer
CREATE FUNCTION liftc_same(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	a text;
	b text;
BEGIN
	EXECUTE 'SELECT string_agg(r::text, '';'') FROM (' || q || ') r' INTO a;
	SET LOCAL llm.lift_filters = off;
	EXECUTE 'SELECT string_agg(r::text, '';'') FROM (' || q || ') r' INTO b;
	SET LOCAL llm.lift_filters = on;
	RETURN a IS NOT DISTINCT FROM b;
END
$$;

-- 30 customers, 1-5 gold.  Customer 1's tickets: two not about food, then
-- one about food; customer 4's: food first, then not; customer 2: food
-- only; customer 3: not food only; customer 5: no ticket.  Tickets 8-60
-- belong to basic customers.  Every text is distinct (call sharing hides
-- no call).
CREATE TABLE lc_cust (id int PRIMARY KEY, tier text);
INSERT INTO lc_cust SELECT i, CASE WHEN i <= 5 THEN 'gold' ELSE 'basic' END FROM generate_series(1, 30) i;
CREATE TABLE lc_tick (id int PRIMARY KEY, cust_id int, body text);
INSERT INTO lc_tick VALUES
  (1, 1, 'Secret: the vault code is 4411. (ticket 1)'),
  (2, 1, 'Secret: the vault code is 4411. (ticket 2)'),
  (3, 1, 'I love eating pizza with cheese. (ticket 3)'),
  (4, 2, 'Fresh apples and bananas are on sale. (ticket 4)'),
  (5, 3, 'Secret: the vault code is 4411. (ticket 5)'),
  (6, 4, 'I love eating pizza with cheese. (ticket 6)'),
  (7, 4, 'Secret: the vault code is 4411. (ticket 7)');
INSERT INTO lc_tick SELECT i, 6 + i % 25,
    (ARRAY['I love eating pizza with cheese.', 'Secret: the vault code is 4411.',
           'Fresh apples and bananas are on sale.'])[1 + i % 3] || ' (ticket ' || i || ')'
  FROM generate_series(8, 60) i;
ANALYZE lc_cust;
ANALYZE lc_tick;
-- which tickets the model finds about food (the scan alone, nothing to lift)
SELECT id, cust_id FROM lc_tick WHERE id <= 7 AND llm_filter(body, 'Is this about food or eating?') ORDER BY id;

-- semi join, the filter on its inner side (IN: PostgreSQL keeps an EXISTS
-- with a volatile condition as a SubPlan): it stays there (above it, the
-- join would stop at a customer's first ticket whatever it is about)
SELECT * FROM liftc_plan($$SELECT c.id FROM lc_cust c WHERE c.tier = 'gold'
  AND c.id IN (SELECT t.cust_id FROM lc_tick t WHERE llm_filter(t.body, 'Is this about food or eating?'))$$);
SELECT c.id FROM lc_cust c WHERE c.tier = 'gold'
  AND c.id IN (SELECT t.cust_id FROM lc_tick t WHERE llm_filter(t.body, 'Is this about food or eating?')) ORDER BY 1;
SELECT liftc_same($$SELECT c.id FROM lc_cust c WHERE c.tier = 'gold'
  AND c.id IN (SELECT t.cust_id FROM lc_tick t WHERE llm_filter(t.body, 'Is this about food or eating?')) ORDER BY 1$$) AS same;
-- the same as a nested loop semi join (the inner scan runs per customer,
-- in ticket order)
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_hashagg = off;
SET enable_sort = off;
SELECT * FROM liftc_plan($$SELECT c.id FROM lc_cust c WHERE c.tier = 'gold'
  AND c.id IN (SELECT t.cust_id FROM lc_tick t WHERE llm_filter(t.body, 'Is this about food or eating?'))$$);
SELECT c.id FROM lc_cust c WHERE c.tier = 'gold'
  AND c.id IN (SELECT t.cust_id FROM lc_tick t WHERE llm_filter(t.body, 'Is this about food or eating?')) ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_hashagg;
RESET enable_sort;

-- anti join (a LEFT join where the right side's join column is NULL),
-- the filter on its inner side: gold customers with no ticket about food
-- (3 and 5); above the join the filter would see no ticket at all
SELECT * FROM liftc_plan($$SELECT c.id FROM lc_cust c LEFT JOIN (SELECT * FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?')) t ON t.cust_id = c.id WHERE c.tier = 'gold' AND t.cust_id IS NULL$$);
SELECT c.id FROM lc_cust c LEFT JOIN (SELECT * FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?')) t ON t.cust_id = c.id WHERE c.tier = 'gold' AND t.cust_id IS NULL ORDER BY 1;
SELECT liftc_same($$SELECT c.id FROM lc_cust c LEFT JOIN (SELECT * FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?')) t ON t.cust_id = c.id WHERE c.tier = 'gold' AND t.cust_id IS NULL ORDER BY 1$$) AS same;
-- the nullable side of a LEFT join (kept as one: the NULL test is on
-- another column): the same customers
SELECT * FROM liftc_plan($$SELECT c.id FROM lc_cust c LEFT JOIN (SELECT * FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?')) t ON t.cust_id = c.id WHERE c.tier = 'gold' AND t.id IS NULL$$);
SELECT liftc_same($$SELECT c.id FROM lc_cust c LEFT JOIN (SELECT * FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?')) t ON t.cust_id = c.id WHERE c.tier = 'gold' AND t.id IS NULL ORDER BY 1$$) AS same;

-- LIMIT: the first 3 food tickets (3, 4, 6), then their gold customers;
-- above the LIMIT the filter would keep the food ones of tickets 1-3.  The
-- subquery returns the columns the join uses only, so its subquery scan
-- is dropped and the LIMIT is the join's child.
SELECT * FROM liftc_plan($$SELECT t.id FROM (SELECT id, cust_id FROM lc_tick WHERE llm_filter(body, 'Is this about food or eating?')
  ORDER BY id LIMIT 3) t JOIN lc_cust c ON c.id = t.cust_id WHERE c.tier = 'gold'$$);
SELECT t.id FROM (SELECT id, cust_id FROM lc_tick WHERE llm_filter(body, 'Is this about food or eating?')
  ORDER BY id LIMIT 3) t JOIN lc_cust c ON c.id = t.cust_id WHERE c.tier = 'gold' ORDER BY 1;
SELECT liftc_same($$SELECT t.id FROM (SELECT id, cust_id FROM lc_tick WHERE llm_filter(body, 'Is this about food or eating?')
  ORDER BY id LIMIT 3) t JOIN lc_cust c ON c.id = t.cust_id WHERE c.tier = 'gold' ORDER BY 1$$) AS same;

-- GROUP BY: food tickets per gold customer (one each for 1, 2 and 4);
-- above the grouping the counts would be of all tickets
SELECT * FROM liftc_plan($$SELECT g.cust_id, g.n FROM (SELECT cust_id, count(*) AS n FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?') GROUP BY cust_id) g
  JOIN lc_cust c ON c.id = g.cust_id WHERE c.tier = 'gold'$$);
SELECT g.cust_id, g.n FROM (SELECT cust_id, count(*) AS n FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?') GROUP BY cust_id) g
  JOIN lc_cust c ON c.id = g.cust_id WHERE c.tier = 'gold' ORDER BY 1;
SELECT liftc_same($$SELECT g.cust_id, g.n FROM (SELECT cust_id, count(*) AS n FROM lc_tick
  WHERE llm_filter(body, 'Is this about food or eating?') GROUP BY cust_id) g
  JOIN lc_cust c ON c.id = g.cust_id WHERE c.tier = 'gold' ORDER BY 1$$) AS same;

-- where it is lifted, for contrast: the inner join of the same tables, 7
-- calls (the gold customers' tickets) instead of 60
SELECT liftc_fired($$SELECT t.id FROM lc_tick t JOIN lc_cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$) AS lifted;
SELECT liftc_calls($$SELECT t.id FROM lc_tick t JOIN lc_cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$) AS calls;

-- 1:N: each gold customer meets its tickets (up to 3).  A sampling call
-- without a seed on the customer is never lifted to that join (it would be
-- drawn once per ticket, not once per customer): one call per customer
-- at the scan (30), never one per joined row (7).  Seeded, it is lifted and
-- the copies of a customer share one call: 4 calls for 7 rows.
CREATE TABLE lc_name AS SELECT id, 'Customer number ' || id AS name FROM lc_cust;
ANALYZE lc_name;
SELECT liftc_fired($$SELECT n.id, t.id FROM lc_name n JOIN lc_tick t ON t.cust_id = n.id
  WHERE t.id <= 7 AND llm_generate(n.name, max_tokens => 1, temperature => 0.8) IS NOT NULL$$) AS lifted;
SELECT liftc_calls($$SELECT n.id, t.id FROM lc_name n JOIN lc_tick t ON t.cust_id = n.id
  WHERE t.id <= 7 AND llm_generate(n.name, max_tokens => 1, temperature => 0.8) IS NOT NULL$$) AS calls;
SELECT liftc_fired($$SELECT n.id, t.id FROM lc_name n JOIN lc_tick t ON t.cust_id = n.id
  WHERE t.id <= 7 AND llm_generate(n.name, max_tokens => 1, temperature => 0.8, seed => 3) IS NOT NULL$$) AS lifted;
SELECT liftc_calls($$SELECT n.id, t.id FROM lc_name n JOIN lc_tick t ON t.cust_id = n.id
  WHERE t.id <= 7 AND llm_generate(n.name, max_tokens => 1, temperature => 0.8, seed => 3) IS NOT NULL$$) AS calls;
-- an unseeded sample is never shared: 7 rows of one text, 7 calls (seeded: 1)
SELECT liftc_calls($$SELECT llm_generate('Customer number 1', max_tokens => 1, temperature => 0.8)
  FROM lc_tick WHERE id <= 7$$) AS calls;
SELECT liftc_calls($$SELECT llm_generate('Customer number 1', max_tokens => 1, temperature => 0.8, seed => 3)
  FROM lc_tick WHERE id <= 7$$) AS calls;

-- security levels.  A security-barrier view's and a row-level security
-- policy's model call stays on its scan, before the user's non-leakproof
-- condition there, although one row reaches the join; lifted, the leaky
-- function would see every row the view or policy refuses.
CREATE ROLE regress_liftc_owner IN ROLE llm_user;
CREATE ROLE regress_liftc_reader IN ROLE llm_user;
CREATE TABLE lc_seen (what text);
GRANT SELECT, INSERT, DELETE ON lc_seen TO PUBLIC;
CREATE FUNCTION lc_leaky(text) RETURNS boolean LANGUAGE plpgsql COST 0.0001 AS $$
BEGIN
	INSERT INTO lc_seen VALUES ($1);
	RETURN true;
END
$$;
CREATE TABLE lc_docs AS SELECT id, body FROM lc_tick;
CREATE TABLE lc_plain AS SELECT id, body FROM lc_tick;
CREATE TABLE lc_pick AS SELECT id, id = 3 AS pick FROM lc_tick;
ANALYZE lc_docs;
ANALYZE lc_plain;
ANALYZE lc_pick;
GRANT SELECT ON lc_pick TO PUBLIC;
ALTER TABLE lc_docs OWNER TO regress_liftc_owner;
ALTER TABLE lc_plain OWNER TO regress_liftc_owner;
SET ROLE regress_liftc_owner;
ALTER TABLE lc_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY lc_food ON lc_docs FOR SELECT USING (llm_filter(body, 'Is this about food or eating?'));
GRANT SELECT ON lc_docs TO regress_liftc_reader;
RESET ROLE;
CREATE VIEW lc_food_view WITH (security_barrier) AS
  SELECT id, body FROM lc_plain WHERE llm_filter(body, 'Is this about food or eating?');
ALTER VIEW lc_food_view OWNER TO regress_liftc_owner;
GRANT SELECT ON lc_food_view TO regress_liftc_reader;

SET ROLE regress_liftc_reader;
-- the view: the leaky function sees the view's rows only (no secret)
SELECT * FROM liftc_plan($$SELECT f.id FROM lc_food_view f JOIN lc_pick k ON k.id = f.id WHERE k.pick AND lc_leaky(f.body)$$);
DELETE FROM lc_seen;
SELECT f.id FROM lc_food_view f JOIN lc_pick k ON k.id = f.id WHERE k.pick AND lc_leaky(f.body);
SELECT count(*) FILTER (WHERE what LIKE 'Secret%') AS secrets_seen FROM lc_seen;
-- the view with no condition of the reader's on it, and the reader's
-- non-leakproof condition in the join: PostgreSQL drops the view's
-- subquery node from the finished plan, and the view's model call is still
-- not lifted above the join, where that condition would see the rows the
-- view refuses (tickets 1 and 2)
SELECT * FROM liftc_plan($$SELECT f.id FROM lc_food_view f JOIN lc_pick k ON k.id >= f.id AND lc_leaky(f.body || k.id)
  WHERE k.pick$$);
DELETE FROM lc_seen;
SELECT f.id FROM lc_food_view f JOIN lc_pick k ON k.id >= f.id AND lc_leaky(f.body || k.id) WHERE k.pick ORDER BY 1;
SELECT count(*) FILTER (WHERE what LIKE 'Secret%') AS secrets_seen FROM lc_seen;
-- the policy: the same
SELECT * FROM liftc_plan($$SELECT d.id FROM lc_docs d JOIN lc_pick k ON k.id = d.id WHERE k.pick AND lc_leaky(d.body)$$);
DELETE FROM lc_seen;
SELECT d.id FROM lc_docs d JOIN lc_pick k ON k.id = d.id WHERE k.pick AND lc_leaky(d.body);
SELECT count(*) FILTER (WHERE what LIKE 'Secret%') AS secrets_seen FROM lc_seen;
-- the reader's own model filter on the table with the policy stays too
-- (the finished plan no longer tells the policy's quals from the query's):
-- the policy's 60 calls, then the reader's on every row it admits (lifted:
-- on the one row of the join)
SELECT liftc_fired($$SELECT d.id FROM lc_docs d JOIN lc_pick k ON k.id = d.id
  WHERE k.pick AND llm_filter(d.body, 'Is this about cheese?')$$) AS lifted;
SELECT liftc_calls($$SELECT d.id FROM lc_docs d JOIN lc_pick k ON k.id = d.id
  WHERE k.pick AND llm_filter(d.body, 'Is this about cheese?')$$) - 60 AS reader_calls;
RESET ROLE;

DROP VIEW lc_food_view;
DROP TABLE lc_cust, lc_tick, lc_name, lc_seen, lc_docs, lc_plain, lc_pick;
DROP FUNCTION lc_leaky(text), liftc_plan(text), liftc_calls(text), liftc_fired(text), liftc_same(text);
DROP ROLE regress_liftc_owner, regress_liftc_reader;
