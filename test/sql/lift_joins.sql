--
-- lift_joins: a model-calling filter runs at the join where the fewest rows
-- reach it (docs/FILTER_PLACEMENT.md; llm.lift_filters),
-- only where the answer cannot change.  Calls are counted with llm_stat;
-- each text is distinct, so call sharing does not hide a call.
--
CREATE FUNCTION lift_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		RETURN NEXT l;
	END LOOP;
END
$$;
-- the statement's model calls (requests the worker finished)
CREATE FUNCTION lift_calls(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	f0 bigint;
BEGIN
	SELECT requests_finished INTO f0 FROM llm_stat;
	EXECUTE q;
	RETURN (SELECT requests_finished - f0 FROM llm_stat);
END
$$;
-- whether EXPLAIN shows the lift
CREATE FUNCTION lift_fired(q text) RETURNS boolean LANGUAGE sql AS $$
SELECT bool_or(l LIKE '%LLM Filter Lifted%') FROM lift_plan(q) l
$$;

-- 500 customers, 10 of them gold; 1,000 tickets, 20 of them from gold customers
CREATE TABLE cust (id int PRIMARY KEY, name text, tier text);
INSERT INTO cust SELECT i, 'Customer ' || i, CASE WHEN i % 50 = 0 THEN 'gold' ELSE 'basic' END
  FROM generate_series(1, 500) i;
CREATE TABLE tick (id int PRIMARY KEY, cust_id int, body text, urgent boolean);
INSERT INTO tick SELECT i,
    CASE WHEN i <= 20 THEN 50 * (1 + (i - 1) % 10) ELSE 1 + (i % 490) + (i % 490) / 49 END,
    (ARRAY['I love eating pizza with cheese.', 'Secret: the vault code is 4411.',
           'Fresh apples and bananas are on sale.'])[1 + i % 3] || ' (ticket ' || i || ')',
    i % 7 = 0
  FROM generate_series(1, 1000) i;
ANALYZE cust;
ANALYZE tick;
SELECT count(*) AS gold_tickets FROM tick t JOIN cust c ON c.id = t.cust_id WHERE c.tier = 'gold';

-- the example: the call moves from the scan of tick to the join, 20 calls
SELECT * FROM lift_plan($$SELECT count(*) FROM tick t JOIN cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$);
SELECT lift_calls($$SELECT count(*) FROM tick t JOIN cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$) AS calls;
SELECT count(*) AS food_tickets FROM tick t JOIN cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?');
-- the same answer from the scan of the 20 gold tickets alone
CREATE TABLE gold_tick AS SELECT t.* FROM tick t JOIN cust c ON c.id = t.cust_id WHERE c.tier = 'gold';
SELECT count(*) AS food_tickets FROM gold_tick WHERE llm_filter(body, 'Is this about food or eating?');
-- switched off: PostgreSQL's placement, on the scan of tick
SET llm.lift_filters = off;
SELECT * FROM lift_plan($$SELECT count(*) FROM tick t JOIN cust c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$);
RESET llm.lift_filters;

-- small tables for the rules: 20 customers (3 gold), 40 tickets (4 from gold customers;
-- customer 150's one ticket is not about food)
CREATE TABLE sc AS SELECT * FROM cust WHERE id <= 20 OR id IN (50, 100, 150);
DELETE FROM sc WHERE id IN (18, 19, 20);
CREATE TABLE st AS SELECT id, CASE WHEN id <= 4 THEN (ARRAY[100, 50, 100, 150])[id] ELSE 1 + id % 17 END AS cust_id,
    body, urgent FROM tick WHERE id <= 40;
CREATE TABLE sn AS SELECT id AS tick_id, 'note ' || id AS note FROM st WHERE id % 3 = 0;
ANALYZE sc;
ANALYZE st;
ANALYZE sn;
SELECT tier, count(*) FROM sc GROUP BY tier ORDER BY tier;

-- through the preserved side of a LEFT join to the inner join above it: 4 calls
SELECT lift_fired($$SELECT t.id FROM (st t LEFT JOIN sn n ON n.tick_id = t.id) JOIN sc c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$) AS lifted;
SELECT lift_calls($$SELECT t.id FROM (st t LEFT JOIN sn n ON n.tick_id = t.id) JOIN sc c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')$$) AS calls;
SELECT t.id, n.note FROM (st t LEFT JOIN sn n ON n.tick_id = t.id) JOIN sc c ON c.id = t.cust_id
  WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?') ORDER BY t.id;

-- the nullable side of a LEFT join: an ON condition on it decides which rows
-- match, never which rows come out; it stays below the join (every gold
-- customer comes out, with its food tickets or NULL)
SELECT lift_fired($$SELECT c.id, t.id FROM sc c LEFT JOIN st t ON t.cust_id = c.id
  AND llm_filter(t.body, 'Is this about food or eating?') WHERE c.tier = 'gold'$$) AS lifted;
SELECT c.id, t.id AS tick FROM sc c LEFT JOIN st t ON t.cust_id = c.id
  AND llm_filter(t.body, 'Is this about food or eating?') WHERE c.tier = 'gold' ORDER BY 1, 2;

-- FULL join: both sides nullable, never lifted
SELECT lift_fired($$SELECT c.id, t.id FROM (SELECT * FROM sc WHERE tier = 'gold') c
  FULL JOIN (SELECT * FROM st WHERE llm_filter(body, 'Is this about food or eating?')) t ON t.cust_id = c.id$$) AS lifted;
SELECT count(*) AS rows, count(c.id) AS customers, count(t.id) AS tickets
  FROM (SELECT * FROM sc WHERE tier = 'gold') c
  FULL JOIN (SELECT * FROM st WHERE llm_filter(body, 'Is this about food or eating?')) t ON t.cust_id = c.id;

-- semi join: the outer side's filter is lifted; the inner side's stays
-- (a semi join stops at the first match: above it, a gold customer whose
-- first ticket is not about food would be lost)
SELECT lift_fired($$SELECT c.id FROM sc c WHERE c.tier = 'gold'
  AND EXISTS (SELECT 1 FROM st t WHERE t.cust_id = c.id AND llm_filter(t.body, 'Is this about food or eating?'))$$) AS lifted;
SELECT c.id FROM sc c WHERE c.tier = 'gold'
  AND EXISTS (SELECT 1 FROM st t WHERE t.cust_id = c.id AND llm_filter(t.body, 'Is this about food or eating?')) ORDER BY 1;
SET llm.lift_filters = off;
SELECT c.id FROM sc c WHERE c.tier = 'gold'
  AND EXISTS (SELECT 1 FROM st t WHERE t.cust_id = c.id AND llm_filter(t.body, 'Is this about food or eating?')) ORDER BY 1;
RESET llm.lift_filters;
-- anti join: tickets of customers who are not basic, the call on the outer side
SELECT lift_fired($$SELECT t.id FROM st t WHERE llm_filter(t.body, 'Is this about food or eating?')
  AND NOT EXISTS (SELECT 1 FROM sc c WHERE c.id = t.cust_id AND c.tier = 'basic')$$) AS lifted;
SELECT t.id FROM st t WHERE llm_filter(t.body, 'Is this about food or eating?')
  AND NOT EXISTS (SELECT 1 FROM sc c WHERE c.id = t.cust_id AND c.tier = 'basic') ORDER BY 1;
-- the inner side of an anti join: never (a customer whose only ticket is
-- not about food would be dropped)
SELECT c.id FROM sc c WHERE c.tier = 'gold'
  AND NOT EXISTS (SELECT 1 FROM st t WHERE t.cust_id = c.id AND NOT llm_filter(t.body, 'Is this about food or eating?')) ORDER BY 1;
SET llm.lift_filters = off;
SELECT c.id FROM sc c WHERE c.tier = 'gold'
  AND NOT EXISTS (SELECT 1 FROM st t WHERE t.cust_id = c.id AND NOT llm_filter(t.body, 'Is this about food or eating?')) ORDER BY 1;
RESET llm.lift_filters;

-- LIMIT, GROUP BY, DISTINCT: the filter stays below them (above, the LIMIT
-- would count rows the filter removes; the groups would be of other rows)
SELECT lift_fired($$SELECT t.id FROM (SELECT * FROM st WHERE llm_filter(body, 'Is this about food or eating?') ORDER BY id LIMIT 3) t
  JOIN sc c ON c.id = t.cust_id WHERE c.tier = 'basic'$$) AS lifted;
SELECT t.id FROM (SELECT * FROM st WHERE llm_filter(body, 'Is this about food or eating?') ORDER BY id LIMIT 3) t
  JOIN sc c ON c.id = t.cust_id WHERE c.tier = 'basic' ORDER BY 1;
SELECT lift_fired($$SELECT g.cust_id, g.n FROM (SELECT cust_id, count(*) AS n FROM st
  WHERE llm_filter(body, 'Is this about food or eating?') GROUP BY cust_id) g JOIN sc c ON c.id = g.cust_id WHERE c.tier = 'gold'$$) AS lifted;
SELECT g.cust_id, g.n FROM (SELECT cust_id, count(*) AS n FROM st
  WHERE llm_filter(body, 'Is this about food or eating?') GROUP BY cust_id) g JOIN sc c ON c.id = g.cust_id WHERE c.tier = 'gold' ORDER BY 1;

-- 1:N: each customer meets several urgent tickets.  A deterministic call on
-- the customer (greedy, or seeded sampling) is lifted to the join when fewer
-- rows reach it there; sampling without a seed never is (it would be drawn
-- once per ticket instead of once per customer)
SELECT count(*) AS urgent_pairs, count(DISTINCT c.id) AS customers
  FROM sc c JOIN st t ON t.cust_id = c.id WHERE t.urgent AND t.id > 20;
SELECT lift_fired($$SELECT c.id, t.id FROM sc c JOIN st t ON t.cust_id = c.id
  WHERE t.urgent AND t.id > 20 AND llm_generate(c.name, max_tokens => 1, temperature => 0.8) IS NOT NULL$$) AS lifted;
SELECT lift_calls($$SELECT c.id, t.id FROM sc c JOIN st t ON t.cust_id = c.id
  WHERE t.urgent AND t.id > 20 AND llm_generate(c.name, max_tokens => 1, temperature => 0.8) IS NOT NULL$$) AS calls;
SELECT lift_fired($$SELECT c.id, t.id FROM sc c JOIN st t ON t.cust_id = c.id
  WHERE t.urgent AND t.id > 20 AND llm_generate(c.name, max_tokens => 1, temperature => 0.8, seed => 7) IS NOT NULL$$) AS lifted;
SELECT lift_calls($$SELECT c.id, t.id FROM sc c JOIN st t ON t.cust_id = c.id
  WHERE t.urgent AND t.id > 20 AND llm_generate(c.name, max_tokens => 1, temperature => 0.8, seed => 7) IS NOT NULL$$) AS calls;
SELECT lift_fired($$SELECT c.id, t.id FROM sc c JOIN st t ON t.cust_id = c.id
  WHERE t.urgent AND t.id > 20 AND llm_generate(c.name, max_tokens => 1) IS NOT NULL$$) AS lifted;

-- security levels: a row-level security policy's or a security-barrier
-- view's model call runs at the scan, before the user's leaky condition
-- there, even where fewer rows reach the join (lifted, the leaky function
-- would see the rows the policy refuses)
CREATE ROLE regress_lift_owner IN ROLE llm_user;
CREATE ROLE regress_lift_reader IN ROLE llm_user;
CREATE TABLE lift_seen (what text);
GRANT SELECT, INSERT, DELETE ON lift_seen TO PUBLIC;
CREATE FUNCTION lift_leaky(text) RETURNS boolean LANGUAGE plpgsql COST 0.0001 AS $$
BEGIN
	INSERT INTO lift_seen VALUES ($1);
	RETURN true;
END
$$;
-- 40 rows of 4 texts (the policy admits the food ones); one row picked by the join
CREATE TABLE rdocs (id int, body text);
INSERT INTO rdocs SELECT i, (ARRAY['I love eating pizza with cheese.', 'Secret: the vault code is 4411.',
    'Fresh apples and bananas are on sale.', 'Private: salary review for Bob is due.'])[1 + (i - 1) % 4]
  FROM generate_series(1, 40) i;
CREATE TABLE rplain AS SELECT * FROM rdocs;
CREATE TABLE rkeys AS SELECT i AS id, i = 1 AS pick FROM generate_series(1, 40) i;
ANALYZE rdocs;
ANALYZE rplain;
ANALYZE rkeys;
GRANT SELECT ON rkeys TO PUBLIC;
ALTER TABLE rdocs OWNER TO regress_lift_owner;
ALTER TABLE rplain OWNER TO regress_lift_owner;
SET ROLE regress_lift_owner;
ALTER TABLE rdocs ENABLE ROW LEVEL SECURITY;
CREATE POLICY lift_food ON rdocs FOR SELECT USING (llm_filter(body, 'Is this about food?'));
GRANT SELECT ON rdocs TO regress_lift_reader;
RESET ROLE;
CREATE VIEW rfood WITH (security_barrier) AS
  SELECT id, body FROM rplain WHERE llm_filter(body, 'Is this about food?');
ALTER VIEW rfood OWNER TO regress_lift_owner;
GRANT SELECT ON rfood TO regress_lift_reader;

SET ROLE regress_lift_reader;
SELECT lift_fired($$SELECT d.id FROM rdocs d JOIN rkeys k ON k.id = d.id WHERE k.pick AND lift_leaky(d.body)$$) AS lifted;
DELETE FROM lift_seen;
SELECT d.id FROM rdocs d JOIN rkeys k ON k.id = d.id WHERE k.pick AND lift_leaky(d.body);
SELECT DISTINCT what AS leaky_saw FROM lift_seen ORDER BY 1;
SELECT lift_fired($$SELECT f.id FROM rfood f JOIN rkeys k ON k.id = f.id WHERE k.pick AND lift_leaky(f.body)$$) AS lifted;
DELETE FROM lift_seen;
SELECT f.id FROM rfood f JOIN rkeys k ON k.id = f.id WHERE k.pick AND lift_leaky(f.body);
SELECT DISTINCT what AS leaky_saw FROM lift_seen ORDER BY 1;
RESET ROLE;
