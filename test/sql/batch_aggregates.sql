--
-- batch_aggregates: calls whose result feeds an aggregate are evaluated by
-- an LLM Batch node between the Agg and its input, when the aggregate
-- evaluates its arguments for every row (not under FILTER); a statement-level
-- AFTER trigger with a transition table enriches inserted rows in one batched
-- UPDATE (docs/BATCH_SCAN.md).  Values and request counts are compared with
-- row-by-row evaluation (llm.enable_batch_scan = off).
--
CREATE TABLE ba AS
  SELECT i AS id, i % 3 AS grp, 'Say the number ' || i || ' in words.' AS body FROM generate_series(1, 12) i;
ANALYZE ba;

-- count and string_agg over calls: the node below the Agg appends the results
EXPLAIN (COSTS OFF, VERBOSE) SELECT count(llm_generate(body, max_tokens => 3)) FROM ba;
SELECT * FROM same_as_row_by_row($$SELECT count(llm_generate(body, max_tokens => 3)) FROM ba$$);
SELECT * FROM same_as_row_by_row($$SELECT string_agg(llm_generate(body, max_tokens => 3), '|' ORDER BY id) FROM ba$$);
SELECT string_agg(llm_generate(body, max_tokens => 3), '|' ORDER BY id) FROM ba WHERE id <= 4;
-- grouped (hashed and sorted), DISTINCT, in an expression, ORDER BY the call
EXPLAIN (COSTS OFF) SELECT grp, max(length(llm_generate(body, max_tokens => 3))) FROM ba GROUP BY grp;
SELECT * FROM same_as_row_by_row($$SELECT grp, max(length(llm_generate(body, max_tokens => 3))) FROM ba GROUP BY grp ORDER BY grp$$);
SET enable_hashagg = off;
EXPLAIN (COSTS OFF) SELECT grp, count(DISTINCT llm_generate(body, max_tokens => 3)) FROM ba GROUP BY grp;
SELECT * FROM same_as_row_by_row($$SELECT grp, count(DISTINCT llm_generate(body, max_tokens => 3)) FROM ba GROUP BY grp$$);
RESET enable_hashagg;
SELECT * FROM same_as_row_by_row($$SELECT string_agg(body, '|' ORDER BY llm_generate(body, max_tokens => 3), id) FROM ba$$);
-- an aggregate over a volatile call is never shared: in the target list and
-- in HAVING it is two aggregates, two calls per row, as row by row
EXPLAIN (COSTS OFF, VERBOSE)
  SELECT grp, count(llm_generate(body, max_tokens => 3)) FROM ba GROUP BY grp HAVING count(llm_generate(body, max_tokens => 3)) > 1;
SELECT * FROM same_as_row_by_row($$SELECT grp, count(llm_generate(body, max_tokens => 3)) FROM ba GROUP BY grp HAVING count(llm_generate(body, max_tokens => 3)) > 1$$);
-- a FILTER clause is evaluated for every row: batched; arguments under FILTER are not
EXPLAIN (COSTS OFF) SELECT count(*) FILTER (WHERE llm_generate(body, max_tokens => 3) LIKE 'The%') FROM ba;
SELECT * FROM same_as_row_by_row($$SELECT count(*) FILTER (WHERE llm_generate(body, max_tokens => 3) LIKE 'The%') FROM ba$$);
EXPLAIN (COSTS OFF) SELECT string_agg(llm_generate(body, max_tokens => 3), '|') FILTER (WHERE id > 6) FROM ba;
-- a window aggregate's argument is not batched
EXPLAIN (COSTS OFF) SELECT count(llm_generate(body, max_tokens => 3)) OVER () FROM ba;

-- a statement-level AFTER trigger with a transition table: one UPDATE
-- enriches every inserted row, batched like any statement
CREATE TABLE inbox (id int PRIMARY KEY, body text, summary text);
CREATE FUNCTION inbox_enrich() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE inbox i SET summary = llm_generate(n.body, max_tokens => 6)
	FROM new_rows n WHERE i.id = n.id;
	RETURN NULL;
END
$$;
CREATE TRIGGER inbox_enrich AFTER INSERT ON inbox REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION inbox_enrich();
SELECT wait_idle();
SELECT llm_stat_reset();
INSERT INTO inbox (id, body) SELECT id, body FROM ba;
SELECT max_batch_size > 1 AS trigger_batched FROM llm_stat;
SET llm.enable_batch_scan = off;
CREATE TEMP TABLE inbox_ref AS SELECT id, llm_generate(body, max_tokens => 6) AS summary FROM ba;
RESET llm.enable_batch_scan;
SELECT count(*) AS rows, count(*) FILTER (WHERE i.summary = r.summary) AS same FROM inbox i JOIN inbox_ref r USING (id);

SELECT wait_idle();
