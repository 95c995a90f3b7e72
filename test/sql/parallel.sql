--
-- parallel: the generating functions are PARALLEL RESTRICTED (channels are
-- per backend), so with force_parallel_mode they run in the leader.
--
CREATE TABLE llm_prompts AS
  SELECT i, 'Write the number ' || i || ' in words.' AS p FROM generate_series(1, 3) AS i;
ANALYZE llm_prompts;
CREATE TABLE llm_serial AS SELECT i, llm_generate(p, max_tokens => 6) AS out FROM llm_prompts;
SELECT p.proname, p.proparallel, p.provolatile
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
ORDER BY p.proname, p.oid::regprocedure::text;
SET force_parallel_mode = on;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT i, llm_generate(p, max_tokens => 6) FROM llm_prompts;
SELECT s.i, s.out = llm_generate(p.p, max_tokens => 6) AS same_as_serial
FROM llm_prompts p JOIN llm_serial s USING (i) ORDER BY s.i;
-- the model's id of 'parallel' (one token), computed in the leader
SELECT llm_tokenize('parallel') = ARRAY[29769] AS tokenize_ok;
SELECT count(*) FROM llm_prompts WHERE llm_generate(p, max_tokens => 1) IS NOT NULL;
SELECT (llm_model_info())->>'status' AS status;
RESET force_parallel_mode;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE llm_prompts, llm_serial;
