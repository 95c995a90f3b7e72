--
-- batch_quals: batchable calls in quals (WHERE, an inner join's ON, HAVING)
-- are evaluated by the LLM Batch node: the call-free conjuncts stay below,
-- the conjuncts with calls are evaluated by the node after their calls
-- return, and the target list's calls run only for the rows that pass
-- (docs/BATCH_SCAN.md).  Results and request counts are compared with
-- row-by-row evaluation (llm.enable_batch_scan = off).
--
CREATE TABLE bq AS
  SELECT i AS id, 'Say the number ' || i || ' in words.' AS body FROM generate_series(1, 16) i;
ANALYZE bq;
-- the first LLM Batch node's counters from EXPLAIN ANALYZE
CREATE FUNCTION qual_counts(q text, OUT requests int, OUT used int, OUT removed int)
LANGUAGE plpgsql AS $$
DECLARE
	node jsonb;
	plan jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ' || q INTO plan;
	node := jsonb_path_query_first(plan, 'strict $.**? (@."Custom Plan Provider" == "LLM Batch")');
	requests := node->'LLM Requests';
	used := node->'LLM Requests Used';
	removed := node->'Rows Removed by LLM Filter';
END
$$;

-- WHERE: a conjunct with a call moves into the node, the others stay below
EXPLAIN (COSTS OFF) SELECT id FROM bq WHERE llm_generate(body, max_tokens => 3) <> '';
EXPLAIN (COSTS OFF) SELECT id, body FROM bq WHERE length(llm_generate(body, max_tokens => 3)) > 3 AND id % 2 = 0;
SELECT * FROM same_as_row_by_row($$SELECT id FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%'$$);
SELECT * FROM same_as_row_by_row($$SELECT id, body FROM bq WHERE length(llm_generate(body, max_tokens => 3)) > 10 AND id % 2 = 0$$);
SELECT id FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%' ORDER BY id;
-- a boolean SQL function over a call (inlined: the call is batched)
CREATE FUNCTION says_number(p text) RETURNS boolean LANGUAGE sql AS
$$ SELECT llm_generate(p, max_tokens => 3) LIKE 'The number%' $$;
EXPLAIN (COSTS OFF) SELECT id FROM bq WHERE says_number(body);
SELECT * FROM same_as_row_by_row($$SELECT id FROM bq WHERE says_number(body)$$);
SELECT * FROM same_as_row_by_row($$SELECT id FROM bq WHERE NOT says_number(body)$$);
SELECT * FROM same_as_row_by_row($$SELECT id FROM bq WHERE llm_generate(body, max_tokens => 3) IN ('The number', '4 in words')$$);

-- stages: the target list's calls only for the rows the qual passes, and a
-- second conjunct's calls only for the rows the first passes (as row by row)
EXPLAIN (COSTS OFF, VERBOSE)
  SELECT id, llm_generate(body, max_tokens => 6) FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%';
SELECT requests, used, removed FROM qual_counts($$SELECT id, llm_generate(body, max_tokens => 6) FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%'$$);
SELECT * FROM same_as_row_by_row($$SELECT id, llm_generate(body, max_tokens => 6) FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%'$$);
SELECT * FROM same_as_row_by_row($$SELECT id FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%' AND llm_generate(body || ' Be brief.', max_tokens => 3) LIKE '%1%'$$);
-- the target list is evaluated only for rows that pass: no division by zero for id 3
SELECT id, 12 / (id - 3) AS q FROM bq
WHERE length(llm_generate(body, max_tokens => 3)) + CASE WHEN id = 3 THEN -1000 ELSE 0 END > 0 AND id < 6 ORDER BY id;
-- window 1: same rows
SET llm.batch_window = 1;
CREATE TEMP TABLE bq_w1 AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%';
RESET llm.batch_window;
CREATE TEMP TABLE bq_w AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bq WHERE llm_generate(body, max_tokens => 3) LIKE 'The%';
SELECT (SELECT array_agg(id || g) FROM bq_w) = (SELECT array_agg(id || g) FROM bq_w1) AS same_rows_in_order;

-- joins: an inner join's ON (and WHERE over a join) in the node above it;
-- an outer join's ON stays in the join (row by row)
CREATE TABLE bq2 AS SELECT id, 'Name the color ' || id || '.' AS body FROM bq WHERE id <= 8;
ANALYZE bq2;
EXPLAIN (COSTS OFF) SELECT a.id FROM bq a JOIN bq2 b ON a.id = b.id AND llm_generate(a.body || b.body, max_tokens => 3) LIKE 'The%';
SELECT * FROM same_as_row_by_row($$SELECT a.id FROM bq a JOIN bq2 b ON a.id = b.id AND llm_generate(a.body || b.body, max_tokens => 3) LIKE 'The%'$$);
EXPLAIN (COSTS OFF) SELECT a.id, b.id FROM bq a LEFT JOIN bq2 b ON a.id = b.id AND llm_generate(a.body || b.body, max_tokens => 3) LIKE 'The%';
EXPLAIN (COSTS OFF) SELECT a.id, b.id FROM bq a LEFT JOIN bq2 b ON a.id = b.id WHERE llm_generate(a.body || coalesce(b.body, ''), max_tokens => 3) LIKE 'The%';
SELECT * FROM same_as_row_by_row($$SELECT a.id, b.id FROM bq a LEFT JOIN bq2 b ON a.id = b.id WHERE llm_generate(a.body || coalesce(b.body, ''), max_tokens => 3) LIKE 'The%'$$);
-- the inner side of a nested loop, rescanned per outer row
SELECT * FROM same_as_row_by_row($$SELECT k, s.id FROM (VALUES (1), (2)) v(k),
  LATERAL (SELECT id FROM bq2 WHERE id <= 3 + k - k AND llm_generate(body, max_tokens => 2 + k - k) LIKE 'The%') s$$);

-- HAVING
EXPLAIN (COSTS OFF) SELECT id % 3 AS r, count(*) FROM bq GROUP BY id % 3 HAVING llm_generate('Say ' || count(*), max_tokens => 3) LIKE 'The%';
SELECT * FROM same_as_row_by_row($$SELECT id % 3 AS r, count(*) FROM bq GROUP BY id % 3 HAVING llm_generate('Say ' || count(*), max_tokens => 3) LIKE '%'$$);

-- UPDATE ... WHERE with a call
CREATE TABLE bq_upd AS SELECT id, body, NULL::text AS s FROM bq;
CREATE TABLE bq_upd_ref AS SELECT id, body, NULL::text AS s FROM bq;
EXPLAIN (COSTS OFF) UPDATE bq_upd SET s = llm_generate(body, max_tokens => 6) WHERE llm_generate(body, max_tokens => 3) LIKE 'The%';
UPDATE bq_upd SET s = llm_generate(body, max_tokens => 6) WHERE llm_generate(body, max_tokens => 3) LIKE 'The%';
SET llm.enable_batch_scan = off;
UPDATE bq_upd_ref SET s = llm_generate(body, max_tokens => 6) WHERE llm_generate(body, max_tokens => 3) LIKE 'The%';
RESET llm.enable_batch_scan;
SELECT count(*) FILTER (WHERE u.s IS NOT NULL) AS updated, count(*) FILTER (WHERE u.s IS NOT DISTINCT FROM r.s) AS same
FROM bq_upd u JOIN bq_upd_ref r USING (id);

-- failures: on_error => 'null' gives NULL (the row fails the qual), one WARNING
SELECT count(*) AS kept FROM bq
WHERE llm_generate(CASE WHEN id % 4 = 0 THEN repeat('word ', 9000) ELSE body END, max_tokens => 2, on_error => 'null') IS NOT NULL;
-- a raising failure and an invalid option are raised at the row's turn, as row by row
SELECT try_sql($$SELECT id FROM bq WHERE llm_generate(CASE WHEN id = 5 THEN repeat('word ', 9000) ELSE body END, max_tokens => 2) <> ''$$);
SELECT try_sql($$SELECT id FROM bq WHERE llm_generate(body, max_tokens => CASE WHEN id = 5 THEN 0 ELSE 2 END) <> ''$$);
-- ... and not at all when a LIMIT stops before that row
SELECT id FROM bq WHERE llm_generate(body, max_tokens => CASE WHEN id = 5 THEN 0 ELSE 2 END) <> '' LIMIT 2;

-- fallbacks: a call in an OR branch, a call under CASE in a qual
EXPLAIN (COSTS OFF) SELECT id FROM bq WHERE id = 1 OR llm_generate(body, max_tokens => 3) LIKE 'The%';
EXPLAIN (COSTS OFF) SELECT id FROM bq WHERE CASE WHEN id > 2 THEN llm_generate(body, max_tokens => 3) LIKE 'The%' END;

SELECT wait_idle();
