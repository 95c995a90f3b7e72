--
-- privileges_shapes: every place the LLM Batch node evaluates a call itself
-- (a qual, an aggregate's input, above a Limit, above a Gather) checks
-- EXECUTE for the current user like an ordinary call: the plan shows the
-- node, a role without llm_user gets 42501, a member gets the rows.
--
CREATE ROLE regress_llm_shapes_plain;
CREATE ROLE regress_llm_shapes_member IN ROLE llm_user;
CREATE TABLE ps_rows AS SELECT g FROM generate_series(1, 3) g;
GRANT SELECT ON ps_rows TO PUBLIC;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
CREATE TABLE ps_cases (name text, q text);
INSERT INTO ps_cases VALUES
  ('qual', $$SELECT g FROM ps_rows WHERE llm_generate('Say ' || g, max_tokens => 1) IS NOT NULL$$),
  ('aggregate', $$SELECT count(llm_generate('Say ' || g, max_tokens => 1)) FROM ps_rows$$),
  ('above limit', $$SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM ps_rows LIMIT 2$$),
  ('above gather', $$SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM ps_rows$$);
GRANT SELECT ON ps_cases TO PUBLIC;
-- the node is in every plan
CREATE FUNCTION ps_has_node(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	plan json;
BEGIN
	EXECUTE 'EXPLAIN (COSTS OFF, FORMAT JSON) ' || q INTO plan;
	RETURN plan::text LIKE '%"Custom Plan Provider": "LLM Batch"%';
END
$$;
SELECT name, ps_has_node(q) AS batched FROM ps_cases ORDER BY name;
EXPLAIN (COSTS OFF) SELECT g, llm_generate('Say ' || g, max_tokens => 1) FROM ps_rows;
SET ROLE regress_llm_shapes_plain;
SELECT name, try_sql(q) AS plain FROM ps_cases ORDER BY name;
RESET ROLE;
SET ROLE regress_llm_shapes_member;
SELECT name, try_sql(q) AS member FROM ps_cases ORDER BY name;
RESET ROLE;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE ps_rows, ps_cases;
DROP FUNCTION ps_has_node(text);
DROP ROLE regress_llm_shapes_plain, regress_llm_shapes_member;
SELECT wait_idle();
