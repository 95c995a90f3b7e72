--
-- batch_shapes: the LLM Batch node in LIMIT / OFFSET, ORDER BY ... LIMIT,
-- parallel (Gather, Gather Merge), CREATE TABLE AS, materialized view, join
-- and subquery plans (docs/BATCH_SCAN.md).  Every result is compared with
-- the row-by-row reference (llm.enable_batch_scan = off) or with
-- llm.batch_window = 1: same rows, same order, same values.
--
CREATE TABLE bs AS
  SELECT i AS id, 'Say the number ' || i || ' in words.' AS body FROM generate_series(1, 24) i;
ANALYZE bs;
-- EXPLAIN ANALYZE with the run-dependent numbers masked
CREATE FUNCTION explain_shape(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		l := regexp_replace(l, '(Prompt Tokens|Cached Tokens|Completion Tokens|Mean TTFT|Max Requests in Flight): [0-9.]+', '\1: N');
		l := regexp_replace(l, 'Memory: [0-9]+kB', 'Memory: NkB');
		l := regexp_replace(l, 'Workers Launched: [0-9]+', 'Workers Launched: N');
		l := regexp_replace(l, '\(actual rows=([0-9]+) loops=[0-9]+\)', '(actual rows=\1)');
		RETURN NEXT l;
	END LOOP;
END
$$;
-- the first LLM Batch node's counters from EXPLAIN ANALYZE
CREATE FUNCTION batch_counts(q text, OUT requests int, OUT used int, OUT aborted int, OUT max_in_flight int)
LANGUAGE plpgsql AS $$
DECLARE
	plan jsonb;
	node jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ' || q INTO plan;
	node := jsonb_path_query_first(plan, 'strict $.**? (@."Custom Plan Provider" == "LLM Batch")');
	requests := node->'LLM Requests';
	used := node->'LLM Requests Used';
	aborted := node->'LLM Requests Aborted';
	max_in_flight := node->'Max Requests in Flight';
END
$$;
SET llm.enable_batch_scan = off;
CREATE TABLE bs_ref AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs;
RESET llm.enable_batch_scan;

-- LIMIT: the node goes above the Limit (which does not project), so the
-- Limit passes it only the rows it returns: LIMIT requests, none aborted
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, max_tokens => 6) FROM bs LIMIT 5;
SELECT * FROM batch_counts($$SELECT id, llm_generate(body, max_tokens => 6) FROM bs LIMIT 5$$);
-- OFFSET: the rows skipped are never generated
SELECT requests, used, aborted FROM batch_counts($$SELECT id, llm_generate(body, max_tokens => 6) FROM bs ORDER BY id LIMIT 3 OFFSET 2$$);
SELECT array_agg(id ORDER BY n) AS ids, bool_and(t.g = r.g) AS same
FROM (SELECT row_number() OVER () AS n, * FROM
      (SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs ORDER BY id DESC LIMIT 3 OFFSET 2) s) t
JOIN bs_ref r USING (id);
-- LIMIT $1 (a generic plan: the count is a Param)
PREPARE bs_limit(int) AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs ORDER BY id LIMIT $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE bs_limit(4);
SELECT requests, used, aborted FROM batch_counts('EXECUTE bs_limit(4)');
CREATE TEMP TABLE bs_lim AS EXECUTE bs_limit(4);
RESET plan_cache_mode;
SELECT count(*) AS rows, count(*) FILTER (WHERE l.g = r.g) AS same FROM bs_lim l JOIN bs_ref r USING (id);
-- WITH TIES compares the key columns below the node
EXPLAIN (COSTS OFF) SELECT id / 5 AS k, llm_generate(body, max_tokens => 6) FROM bs ORDER BY id / 5 FETCH FIRST 2 ROWS WITH TIES;
SELECT k, count(*) AS rows, bool_and(s.g = r.g) AS same
FROM (SELECT id, id / 5 AS k, llm_generate(body, max_tokens => 6) AS g FROM bs ORDER BY id / 5 FETCH FIRST 2 ROWS WITH TIES) s
JOIN bs_ref r USING (id) GROUP BY k;

-- ORDER BY ... LIMIT: PostgreSQL postpones the volatile call above the Sort
-- and the Limit bounds the Sort (top-N heapsort); the plan is the same as
-- without the node, plus the node on top
SET llm.enable_batch_scan = off;
SELECT explain_shape($$SELECT id, llm_generate(body, max_tokens => 6) FROM bs ORDER BY id DESC LIMIT 3$$);
RESET llm.enable_batch_scan;
SELECT explain_shape($$SELECT id, llm_generate(body, max_tokens => 6) FROM bs ORDER BY id DESC LIMIT 3$$);
-- ordered by the call itself: every row is generated below the Sort
EXPLAIN (COSTS OFF) SELECT id FROM bs ORDER BY llm_generate(body, max_tokens => 6), id LIMIT 2;
SELECT array_agg(id) AS ids FROM (SELECT id FROM bs ORDER BY llm_generate(body, max_tokens => 6), id LIMIT 2) s;
SELECT array_agg(id) AS ids FROM (SELECT id FROM bs_ref ORDER BY g, id LIMIT 2) s;

-- below a Limit the node must stay when it filters (its qual decides which
-- rows the Limit counts): rows read ahead and not consumed are aborted,
-- at most the window of them (rows past the first two ask for 200 tokens)
SET llm.batch_window = 4;
EXPLAIN (COSTS OFF) SELECT id FROM bs WHERE llm_generate(body, max_tokens => 6) <> '' LIMIT 2;
SELECT requests_aborted AS aborted_before FROM llm_stat \gset
SELECT requests <= 2 + 4 AS bounded, used, aborted = requests - used AS rest_aborted, max_in_flight <= 4 AS within_window
FROM batch_counts($$SELECT id FROM bs WHERE llm_generate(body, max_tokens => CASE WHEN id <= 2 THEN 6 ELSE 200 END) <> '' LIMIT 2$$);
SELECT wait_idle();
SELECT requests_aborted > :aborted_before AS aborted_in_worker FROM llm_stat;
RESET llm.batch_window;

-- parallel plans: Gather projects the call; the node goes above it
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF, VERBOSE) SELECT id, llm_generate(body, max_tokens => 6) FROM bs;
SELECT requests, used, max_in_flight > 1 AS batched FROM batch_counts($$SELECT id, llm_generate(body, max_tokens => 6) FROM bs$$);
SELECT count(*) AS rows, count(*) FILTER (WHERE s.g = r.g) AS same
FROM (SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs) s JOIN bs_ref r USING (id);
-- CREATE TABLE AS
EXPLAIN (COSTS OFF) CREATE TABLE bs_ctas AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs;
CREATE TABLE bs_ctas AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs;
SELECT count(*) AS rows, count(*) FILTER (WHERE c.g = r.g) AS same FROM bs_ctas c JOIN bs_ref r USING (id);
-- a materialized view, created and refreshed (the worker's batch shows it)
EXPLAIN (COSTS OFF) CREATE MATERIALIZED VIEW bs_mv AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs;
CREATE MATERIALIZED VIEW bs_mv AS SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs;
SELECT wait_idle();
SELECT llm_stat_reset();
REFRESH MATERIALIZED VIEW bs_mv;
SELECT max_batch_size > 1 AS refresh_batched FROM llm_stat;
SELECT count(*) AS rows, count(*) FILTER (WHERE m.g = r.g) AS same FROM bs_mv m JOIN bs_ref r USING (id);
-- a join with a larger table
CREATE TABLE bs_big AS SELECT i AS id, md5(i::text) AS h FROM generate_series(1, 20000) i;
ANALYZE bs_big;
EXPLAIN (COSTS OFF) SELECT b.id, llm_generate(s.body || ' ' || b.h, max_tokens => 6) FROM bs_big b JOIN bs s ON s.id = b.id;
SELECT requests, max_in_flight > 1 AS batched
FROM batch_counts($$SELECT b.id, llm_generate(s.body || ' ' || b.h, max_tokens => 6) FROM bs_big b JOIN bs s ON s.id = b.id$$);
SET llm.batch_window = 1;
CREATE TEMP TABLE bs_join1 AS SELECT b.id, llm_generate(s.body || ' ' || b.h, max_tokens => 6) AS g FROM bs_big b JOIN bs s ON s.id = b.id;
RESET llm.batch_window;
CREATE TEMP TABLE bs_joinw AS SELECT b.id, llm_generate(s.body || ' ' || b.h, max_tokens => 6) AS g FROM bs_big b JOIN bs s ON s.id = b.id;
SELECT count(*) AS rows, count(*) FILTER (WHERE w.g = o.g) AS same FROM bs_joinw w JOIN bs_join1 o USING (id);
-- a subquery that is not pulled up
EXPLAIN (COSTS OFF) SELECT * FROM (SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs OFFSET 0) s WHERE id > 20;
SELECT count(*) AS rows, count(*) FILTER (WHERE s.g = r.g) AS same
FROM (SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs OFFSET 0) s JOIN bs_ref r USING (id) WHERE s.id > 20;
-- a Gather below a top-N Sort: the node above the Limit
EXPLAIN (COSTS OFF) SELECT b.id, llm_generate('Say ' || b.h, max_tokens => 6) FROM bs_big b ORDER BY b.h LIMIT 3;
SELECT requests, used, aborted FROM batch_counts($$SELECT b.id, llm_generate('Say ' || b.h, max_tokens => 6) FROM bs_big b ORDER BY b.h LIMIT 3$$);
-- Gather Merge projects the call: the node above it keeps the order
EXPLAIN (COSTS OFF) SELECT b.id, llm_generate('Say ' || b.h, max_tokens => 6) FROM bs_big b WHERE b.id % 1000 = 0 ORDER BY b.h;
SET llm.batch_window = 1;
CREATE TEMP TABLE bs_gm1 AS
  SELECT row_number() OVER () AS n, * FROM
    (SELECT b.id, llm_generate('Say ' || b.h, max_tokens => 6) AS g FROM bs_big b WHERE b.id % 1000 = 0 ORDER BY b.h) s;
RESET llm.batch_window;
CREATE TEMP TABLE bs_gmw AS
  SELECT row_number() OVER () AS n, * FROM
    (SELECT b.id, llm_generate('Say ' || b.h, max_tokens => 6) AS g FROM bs_big b WHERE b.id % 1000 = 0 ORDER BY b.h) s;
SELECT count(*) AS rows, count(*) FILTER (WHERE w.id = o.id AND w.g = o.g) AS same FROM bs_gmw w JOIN bs_gm1 o USING (n);
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- a cursor fetched in parts: the rows read ahead wait for the next FETCH
-- (PL/pgSQL's FOR loops fetch this way); CLOSE aborts what is left
BEGIN;
DECLARE bs_cur CURSOR FOR SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs ORDER BY id;
FETCH 2 FROM bs_cur;
FETCH 3 FROM bs_cur;
CLOSE bs_cur;
COMMIT;
SELECT id, g FROM bs_ref WHERE id <= 5 ORDER BY id;
SELECT wait_idle();
DO $$
DECLARE
	r record;
	n int := 0;
	same int := 0;
BEGIN
	FOR r IN SELECT s.id, s.g, b.g AS ref FROM (SELECT id, llm_generate(body, max_tokens => 6) AS g FROM bs) s
	         JOIN bs_ref b USING (id) LOOP
		n := n + 1;
		same := same + (r.g = r.ref)::int;
	END LOOP;
	RAISE NOTICE 'FOR loop: % rows, % same', n, same;
END
$$;

-- the window fills with long outputs: rows finished but not yet returned do
-- not block reading ahead, and the window grows as the engine starts rows
-- (llm.max_running_requests is 16 here)
SET llm.batch_window = 16;
SELECT requests, max_in_flight FROM batch_counts($$SELECT id, llm_generate(body, max_tokens => 32) FROM bs$$);
RESET llm.batch_window;

SELECT wait_idle();
