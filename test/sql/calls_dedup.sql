--
-- calls_dedup: within one LLM Batch node, identical deterministic calls share
-- one request (docs/BATCH_SCAN.md, "Deduplication"); llm.dedup_calls = off
-- calls the model once per row.  Counts come from llm_stat and llm_usage.
--
CREATE TABLE dup AS
  SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'Say hello.' ELSE 'Say goodbye.' END AS body
  FROM generate_series(1, 1000) i;
CREATE FUNCTION explain_dedup(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		RETURN NEXT regexp_replace(l, '(Prompt Tokens|Cached Tokens|Completion Tokens|Mean TTFT|Max Requests in Flight): [0-9.]+', '\1: N');
	END LOOP;
END
$$;
CREATE VIEW my_usage AS
  SELECT requests FROM llm_usage()
  WHERE role_oid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
    AND database_oid = (SELECT oid FROM pg_database WHERE datname = current_database());
SHOW llm.dedup_calls;

-- 1,000 rows holding 2 distinct texts: 2 requests, counted once in llm_usage
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT coalesce((SELECT requests FROM my_usage), 0) AS u0 \gset
CREATE TABLE shared AS SELECT id, llm_generate(body, max_tokens => 4) AS g FROM dup;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
SELECT requests - :u0 AS usage_requests FROM my_usage;
SELECT count(*) AS rows, count(g) AS answered FROM shared;
SELECT d.body, count(DISTINCT s.g) AS answers FROM shared s JOIN dup d USING (id) GROUP BY d.body ORDER BY d.body;

-- switched off: one request per row, the same answers
SET llm.dedup_calls = off;
SELECT requests_finished AS f0 FROM llm_stat \gset
CREATE TABLE unshared AS SELECT id, llm_generate(body, max_tokens => 4) AS g FROM dup WHERE id <= 12;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
SELECT explain_dedup($$SELECT llm_generate(body, max_tokens => 4) FROM dup WHERE id <= 6$$);
RESET llm.dedup_calls;
SELECT count(*) AS rows, count(*) FILTER (WHERE s.g = u.g) AS equal FROM unshared u JOIN shared s USING (id);

-- EXPLAIN ANALYZE says how many calls were answered by another row's request
SELECT explain_dedup($$SELECT llm_generate(body, max_tokens => 4) FROM dup WHERE id <= 6$$);
-- a moved qual's calls are shared too
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(*) FROM dup WHERE id <= 20 AND llm_generate(body, max_tokens => 4) IS NOT NULL;
SELECT requests_finished - :f0 AS requests FROM llm_stat;

-- every option is in the key: 2 texts x 3 max_tokens = 6 requests for 30 rows
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 2 + id % 3) AS g FROM dup WHERE id <= 30) s;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
-- so is the system message
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 4,
                                          system => CASE WHEN id <= 5 THEN 'Be brief.' ELSE 'Be kind.' END) AS g
                      FROM dup WHERE id <= 10) s;
SELECT requests_finished - :f0 AS requests FROM llm_stat;

-- seeded sampling is shared; sampling without a seed never is
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 4, temperature => 0.8, seed => 7) AS g
                      FROM dup WHERE id <= 10) s;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 4, temperature => 0.8) AS g
                      FROM dup WHERE id <= 10) s;
SELECT requests_finished - :f0 AS requests FROM llm_stat;

-- a shared failed call: one failed request, each row its own on_error outcome
SELECT requests_failed AS e0 FROM llm_stat \gset
SELECT id, g IS NULL AS is_null
FROM (SELECT id, llm_generate(CASE WHEN id % 4 = 0 THEN repeat('word ', 9000) ELSE body END,
                              max_tokens => 4, on_error => 'null') AS g
      FROM dup WHERE id <= 12) s;
SELECT requests_failed - :e0 AS failed FROM llm_stat;
-- on_error is not part of the request: rows 1-4 take NULL, row 5 raises
SELECT requests_failed AS e0 FROM llm_stat \gset
SELECT try_sql($$SELECT count(*) FROM (SELECT llm_generate(repeat('word ', 9000), max_tokens => 4,
                 on_error => CASE WHEN id <= 4 THEN 'null' ELSE 'raise' END) FROM dup WHERE id <= 8) s$$);
SELECT requests_failed - :e0 AS failed FROM llm_stat;

-- memory: keys and answers within work_mem; past it, calls are no longer
-- shared.  40 distinct calls twice, each key over 1 kB (its stop strings)
CREATE TABLE long_dup AS
  SELECT i AS id, 'Say ' || ((i - 1) % 40) || '.' AS body FROM generate_series(1, 80) i;
CREATE FUNCTION long_key_calls() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 1,
      stop => ARRAY[repeat('w', 250), repeat('x', 250), repeat('y', 250), repeat('z', 250)]) AS g
    FROM long_dup) s
$$;
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT long_key_calls();
SELECT requests_finished - :f0 AS requests FROM llm_stat;
SET work_mem = '64kB';
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT long_key_calls();
SELECT requests_finished - :f0 > 40 AS some_unshared, requests_finished - :f0 < 80 AS some_shared FROM llm_stat;
RESET work_mem;

DROP TABLE dup, shared, unshared, long_dup CASCADE;
DROP FUNCTION explain_dedup(text), long_key_calls();
