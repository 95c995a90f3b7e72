--
-- batch_security: the LLM Batch node keeps PostgreSQL's order of quals of
-- different security levels.  A row-level security policy's quals and a
-- security-barrier view's quals run before the query's own quals, unless
-- those are leakproof; a query's function never sees a row the policy or
-- the view refuses, batched or not (docs/BATCH_SCAN.md, "Security levels").
--
-- bsec_leaky(text) is a user's function that shows what it is called with:
-- a NOTICE, and a row in bsec_seen (order-free, for the default window).
-- bsec_seen_by(q) runs q batched (the default window) and row by row
-- (llm.enable_batch_scan = off), each undone afterwards, and counts what
-- the functions saw in each run.
--
CREATE ROLE regress_bsec_owner IN ROLE llm_user;
CREATE ROLE regress_bsec_reader IN ROLE llm_user;
CREATE TABLE bsec_seen (what text);
GRANT SELECT, INSERT, DELETE ON bsec_seen TO PUBLIC;
CREATE FUNCTION bsec_leaky(text) RETURNS boolean LANGUAGE plpgsql COST 0.0001 AS $$
BEGIN
	INSERT INTO bsec_seen VALUES ('leaky: ' || $1);
	RAISE NOTICE 'bsec_leaky saw: %', $1;
	RETURN true;
END
$$;
-- declared leakproof (only a superuser may), so the planner may run it
-- before a policy's quals; its NOTICEs show that it does
CREATE FUNCTION bsec_sealed(text) RETURNS boolean LANGUAGE plpgsql LEAKPROOF COST 0.0001 AS $$
BEGIN
	INSERT INTO bsec_seen VALUES ('sealed: ' || $1);
	RAISE NOTICE 'bsec_sealed saw: %', $1;
	RETURN true;
END
$$;
-- a call-free condition the planner orders after a model call (cost)
CREATE FUNCTION bsec_costly(text) RETURNS boolean LANGUAGE plpgsql COST 100000 AS $$
BEGIN
	RETURN length($1) > 0;
END
$$;
CREATE FUNCTION bsec_run(q text, batch boolean) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
	seen text[];
BEGIN
	BEGIN
		PERFORM set_config('llm.enable_batch_scan', batch::text, true);
		SET LOCAL client_min_messages = warning;
		DELETE FROM bsec_seen;
		EXECUTE q;
		SELECT array_agg(what) INTO seen FROM bsec_seen;
		RAISE EXCEPTION USING ERRCODE = 'LB001';
	EXCEPTION WHEN SQLSTATE 'LB001' THEN
		RETURN seen;
	END;
END
$$;
CREATE FUNCTION bsec_seen_by(q text) RETURNS TABLE (saw text, batched bigint, row_by_row bigint)
LANGUAGE sql AS $$
SELECT saw, count(*) FILTER (WHERE b), count(*) FILTER (WHERE NOT b)
FROM (SELECT unnest(bsec_run(q, true)) AS saw, true AS b
      UNION ALL SELECT unnest(bsec_run(q, false)), false) s
GROUP BY saw ORDER BY saw
$$;
-- the LLM Batch node's request count under EXPLAIN ANALYZE
CREATE FUNCTION bsec_requests(q text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	plan jsonb;
BEGIN
	SET LOCAL client_min_messages = warning;
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ' || q INTO plan;
	RETURN jsonb_path_query_first(plan, 'strict $.**? (@."Custom Plan Provider" == "LLM Batch")')->'LLM Requests';
END
$$;

-- the model's answers: the policies below admit rows 1 and 3
CREATE TABLE bsec_docs (id int PRIMARY KEY, body text);
INSERT INTO bsec_docs VALUES
  (1, 'I love eating pizza with cheese.'),
  (2, 'Secret: the vault code is 4411.'),
  (3, 'Fresh apples and bananas are on sale.'),
  (4, 'Private: salary review for Bob is due.');
SELECT id, llm_filter(body, 'Is this about food?') AS food FROM bsec_docs ORDER BY id;
CREATE TABLE bsec_notes AS SELECT * FROM bsec_docs;
CREATE TABLE bsec_plain AS SELECT * FROM bsec_docs;
CREATE TABLE bsec_open AS SELECT * FROM bsec_docs;
CREATE TABLE bsec_parts (id int, body text) PARTITION BY RANGE (id);
CREATE TABLE bsec_parts_low PARTITION OF bsec_parts FOR VALUES FROM (1) TO (3);
CREATE TABLE bsec_parts_high PARTITION OF bsec_parts FOR VALUES FROM (3) TO (5);
INSERT INTO bsec_parts SELECT * FROM bsec_docs;
GRANT SELECT ON bsec_open TO PUBLIC;
ALTER TABLE bsec_docs OWNER TO regress_bsec_owner;
ALTER TABLE bsec_notes OWNER TO regress_bsec_owner;
ALTER TABLE bsec_plain OWNER TO regress_bsec_owner;
ALTER TABLE bsec_parts OWNER TO regress_bsec_owner;

SET ROLE regress_bsec_owner;
ALTER TABLE bsec_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY bsec_food ON bsec_docs FOR SELECT USING (llm_filter(body, 'Is this about food?'));
GRANT SELECT ON bsec_docs TO regress_bsec_reader;
ALTER TABLE bsec_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY bsec_food ON bsec_parts FOR SELECT USING (llm_filter(body, 'Is this about food?'));
GRANT SELECT ON bsec_parts TO regress_bsec_reader;
-- SELECT: every row; UPDATE and DELETE: only what the model admits
ALTER TABLE bsec_notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY bsec_read ON bsec_notes FOR SELECT USING (true);
CREATE POLICY bsec_change ON bsec_notes FOR UPDATE USING (llm_filter(body, 'Is this about food?')) WITH CHECK (true);
CREATE POLICY bsec_drop ON bsec_notes FOR DELETE USING (llm_filter(body, 'Is this about food?'));
GRANT SELECT, UPDATE, DELETE ON bsec_notes TO regress_bsec_reader;
RESET ROLE;
CREATE VIEW bsec_food_view WITH (security_barrier) AS
  SELECT id, body FROM bsec_plain WHERE llm_filter(body, 'Is this about food?');
ALTER VIEW bsec_food_view OWNER TO regress_bsec_owner;
GRANT SELECT, UPDATE, DELETE ON bsec_food_view TO regress_bsec_reader;

--
-- a policy for SELECT: the user's cheap leaky qual stays above the policy's
-- model call, inside the node, which evaluates it after the call
--
SET ROLE regress_bsec_reader;
EXPLAIN (COSTS OFF) SELECT id FROM bsec_docs WHERE bsec_leaky(body);
-- window 1: the NOTICEs in row order
SET llm.batch_window = 1;
SELECT id FROM bsec_docs WHERE bsec_leaky(body);
RESET llm.batch_window;
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_docs WHERE bsec_leaky(body)$$);
SELECT id FROM bsec_docs WHERE bsec_leaky(body) ORDER BY id;
-- a built-in comparison is leakproof: the planner may use it first (here
-- as the index condition)
EXPLAIN (COSTS OFF) SELECT id FROM bsec_docs WHERE id < 4 AND bsec_leaky(body);
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_docs WHERE id < 4 AND bsec_leaky(body)$$);
-- the user's own model call runs after the policy too, batched in the same
-- node: one request per row for the policy, one per admitted row for the user
EXPLAIN (COSTS OFF) SELECT id FROM bsec_docs WHERE bsec_leaky(body) AND llm_filter(body, 'Is this about fruit?');
SELECT bsec_requests($$SELECT id FROM bsec_docs WHERE bsec_leaky(body) AND llm_filter(body, 'Is this about fruit?')$$) AS requests;
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_docs WHERE bsec_leaky(body) AND llm_filter(body, 'Is this about fruit?')$$);
-- a leakproof qual may run first (below the node, on every row), as row by row
EXPLAIN (COSTS OFF) SELECT id FROM bsec_docs WHERE bsec_sealed(body) AND bsec_leaky(body);
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_docs WHERE bsec_sealed(body) AND bsec_leaky(body)$$);
-- a table of the same statement without a policy: its quals are all of one
-- level, so its call-free condition stays below its node and runs first
EXPLAIN (COSTS OFF) SELECT d.id FROM bsec_docs d JOIN bsec_open o USING (id)
WHERE bsec_leaky(d.body) AND llm_filter(o.body, 'Is this about fruit?') AND bsec_costly(o.body);
SELECT * FROM bsec_seen_by($$SELECT d.id FROM bsec_docs d JOIN bsec_open o USING (id)
WHERE bsec_leaky(d.body) AND llm_filter(o.body, 'Is this about fruit?') AND bsec_costly(o.body)$$);
-- a partitioned table: each partition's scan gets the policy's quals
EXPLAIN (COSTS OFF) SELECT id FROM bsec_parts WHERE bsec_leaky(body);
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_parts WHERE bsec_leaky(body)$$);
RESET ROLE;

--
-- FORCE ROW LEVEL SECURITY: the owner is subject to the policy too
--
SET ROLE regress_bsec_owner;
ALTER TABLE bsec_docs FORCE ROW LEVEL SECURITY;
EXPLAIN (COSTS OFF) SELECT id FROM bsec_docs WHERE bsec_leaky(body);
SET llm.batch_window = 1;
SELECT id FROM bsec_docs WHERE bsec_leaky(body);
RESET llm.batch_window;
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_docs WHERE bsec_leaky(body)$$);
ALTER TABLE bsec_docs NO FORCE ROW LEVEL SECURITY;
-- without FORCE the owner is not subject to it: no model call at all
EXPLAIN (COSTS OFF) SELECT id FROM bsec_docs WHERE bsec_leaky(body);
RESET ROLE;

--
-- policies for UPDATE and DELETE: their USING quals before the user's WHERE
--
SET ROLE regress_bsec_reader;
EXPLAIN (COSTS OFF) UPDATE bsec_notes SET body = body || '!' WHERE bsec_leaky(body);
SELECT * FROM bsec_seen_by($$UPDATE bsec_notes SET body = body || '!' WHERE bsec_leaky(body)$$);
EXPLAIN (COSTS OFF) DELETE FROM bsec_notes WHERE bsec_leaky(body);
SELECT * FROM bsec_seen_by($$DELETE FROM bsec_notes WHERE bsec_leaky(body)$$);
-- window 1: the NOTICEs in row order
SET llm.batch_window = 1;
BEGIN;
UPDATE bsec_notes SET body = body || '!' WHERE bsec_leaky(body) RETURNING id;
ROLLBACK;
BEGIN;
DELETE FROM bsec_notes WHERE bsec_leaky(body) RETURNING id;
ROLLBACK;
RESET llm.batch_window;
RESET ROLE;

--
-- a security-barrier view whose qual calls the model, a leaky qual outside:
-- SELECT keeps the view a subquery (the qual above it); UPDATE and DELETE
-- through it make the view's qual a security qual of the table
--
SET ROLE regress_bsec_reader;
EXPLAIN (COSTS OFF) SELECT id FROM bsec_food_view WHERE bsec_leaky(body);
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_food_view WHERE bsec_leaky(body)$$);
EXPLAIN (COSTS OFF) UPDATE bsec_food_view SET body = body || '!' WHERE bsec_leaky(body);
SELECT * FROM bsec_seen_by($$UPDATE bsec_food_view SET body = body || '!' WHERE bsec_leaky(body)$$);
EXPLAIN (COSTS OFF) DELETE FROM bsec_food_view WHERE bsec_leaky(body);
SELECT * FROM bsec_seen_by($$DELETE FROM bsec_food_view WHERE bsec_leaky(body)$$);
-- a leakproof qual through the view: pushed below the view's qual, as row by row
EXPLAIN (COSTS OFF) SELECT id FROM bsec_food_view WHERE bsec_sealed(body);
SELECT * FROM bsec_seen_by($$SELECT id FROM bsec_food_view WHERE bsec_sealed(body)$$);
RESET ROLE;

-- nothing changed
SELECT count(*) AS unchanged FROM bsec_notes n JOIN bsec_docs d USING (id, body);
SELECT count(*) AS unchanged FROM bsec_plain p JOIN bsec_docs d USING (id, body);
SELECT count(*) AS seen_left FROM bsec_seen;

DROP TABLE bsec_docs, bsec_notes, bsec_plain, bsec_open, bsec_parts, bsec_seen CASCADE;
DROP FUNCTION bsec_leaky(text), bsec_sealed(text), bsec_costly(text), bsec_run(text, boolean),
  bsec_seen_by(text), bsec_requests(text);
DROP ROLE regress_bsec_owner, regress_bsec_reader;
