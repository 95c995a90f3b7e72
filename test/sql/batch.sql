--
-- batch: the LLM Batch executor node (docs/BATCH_SCAN.md).  Every result is
-- compared with llm.batch_window = 1 (row at a time): same rows, same order,
-- same values.
--
CREATE TABLE tickets AS
  SELECT i AS id, 'Say the number ' || i || ' in words.' AS body FROM generate_series(1, 40) i;
CREATE FUNCTION explain_batch(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		RETURN NEXT regexp_replace(l, '(Prompt Tokens|Cached Tokens|Completion Tokens|Mean TTFT|Max Requests in Flight): [0-9.]+', '\1: N');
	END LOOP;
END
$$;

-- plans: the node sits above the projecting node; the window is read at executor start
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, max_tokens => 8) FROM tickets;
SET llm.batch_window = 8;
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body, max_tokens => 8) FROM tickets ORDER BY id;
RESET llm.batch_window;
EXPLAIN (COSTS OFF, VERBOSE)
  SELECT id || ': ' || upper(llm_generate(body, max_tokens => 8)) AS s FROM tickets;
-- fallbacks (ordinary row-by-row calls): conditional branches, OR in a qual,
-- aggregate arguments under FILTER, one-row Result (quals and aggregates: batch_quals, batch_aggregates)
EXPLAIN (COSTS OFF) SELECT CASE WHEN id > 2 THEN llm_generate(body) END FROM tickets;
EXPLAIN (COSTS OFF) SELECT coalesce(body, llm_generate(body)) FROM tickets;
EXPLAIN (COSTS OFF) SELECT id FROM tickets WHERE id = 1 OR llm_generate(body) = 'x';
EXPLAIN (COSTS OFF) SELECT string_agg(llm_generate(body), ',') FILTER (WHERE id > 2) FROM tickets;
EXPLAIN (COSTS OFF) SELECT llm_generate('hi');
SET llm.enable_batch_scan = off;
EXPLAIN (COSTS OFF) SELECT llm_generate(body) FROM tickets;
RESET llm.enable_batch_scan;

-- 40 rows, CREATE TABLE AS: batched vs row at a time
CREATE TABLE batched AS SELECT id, llm_generate(body, max_tokens => 8) AS g FROM tickets;
SET llm.batch_window = 1;
CREATE TABLE single AS SELECT id, llm_generate(body, max_tokens => 8) AS g FROM tickets;
RESET llm.batch_window;
SELECT count(*) AS rows, count(*) FILTER (WHERE b.g = s.g) AS same FROM batched b JOIN single s USING (id);
-- emitted in scan order
SELECT array_agg(id) = array_agg(id ORDER BY id) AS in_order, count(*) AS rows
FROM (SELECT id, llm_generate(body, max_tokens => 8) AS g FROM tickets) s;
SELECT id, g FROM batched ORDER BY id LIMIT 3;

-- nested expressions and two calls per row
CREATE TABLE two_b AS
  SELECT id, id || ': ' || upper(llm_generate(body, max_tokens => 6)) AS u,
         llm_generate(body || ' Be brief.', max_tokens => 6) AS v FROM tickets WHERE id <= 12;
SET llm.batch_window = 1;
CREATE TABLE two_s AS
  SELECT id, id || ': ' || upper(llm_generate(body, max_tokens => 6)) AS u,
         llm_generate(body || ' Be brief.', max_tokens => 6) AS v FROM tickets WHERE id <= 12;
RESET llm.batch_window;
SELECT count(*) AS rows, count(*) FILTER (WHERE b.u = s.u AND b.v = s.v) AS same
FROM two_b b JOIN two_s s USING (id);
SELECT u FROM two_b ORDER BY id LIMIT 2;

-- LIMIT: the node sits above the Limit, so only the 3 rows are generated
-- (rows past the LIMIT would ask for 256 tokens): nothing read ahead, nothing
-- aborted, nothing keeps running (read-ahead below a LIMIT: batch_shapes)
SELECT wait_idle();
SELECT requests_aborted AS aborted_before, requests_finished AS finished_before FROM llm_stat \gset
SELECT id, llm_generate(body, max_tokens => CASE WHEN id <= 3 THEN 8 ELSE 256 END) = g AS same
FROM tickets JOIN single USING (id) LIMIT 3;
SELECT wait_idle();
SELECT requests_running, requests_waiting FROM llm_stat;
SELECT requests_aborted = :aborted_before AS none_aborted, requests_finished - :finished_before AS generated FROM llm_stat;

-- an argument error of a row beyond the LIMIT is never raised (as row by row)
SELECT id, llm_generate(body, max_tokens => CASE WHEN id = 6 THEN 0 ELSE 4 END) AS reply
FROM tickets LIMIT 2;
SELECT try_sql($$SELECT llm_generate(body, max_tokens => CASE WHEN id = 6 THEN 0 ELSE 4 END) FROM tickets$$);

-- UPDATE ... SET c = llm_generate(...)
ALTER TABLE tickets ADD COLUMN summary text;
EXPLAIN (COSTS OFF) UPDATE tickets SET summary = llm_generate(body, max_tokens => 8) WHERE id <= 12;
UPDATE tickets SET summary = llm_generate(body, max_tokens => 8) WHERE id <= 12;
SELECT count(*) FILTER (WHERE summary IS NOT NULL) AS updated,
       count(*) FILTER (WHERE summary = s.g) AS same FROM tickets JOIN single s USING (id);

-- INSERT ... SELECT, with triggers seeing the generated values
CREATE TABLE ins (id int, g text);
CREATE TABLE ins_log (id int, g text);
CREATE FUNCTION ins_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.g := '[' || NEW.g || ']';
	RETURN NEW;
END
$$;
CREATE FUNCTION ins_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ins_log VALUES (NEW.id, NEW.g);
	RETURN NULL;
END
$$;
CREATE TRIGGER ins_before BEFORE INSERT ON ins FOR EACH ROW EXECUTE FUNCTION ins_before();
CREATE TRIGGER ins_after AFTER INSERT ON ins FOR EACH ROW EXECUTE FUNCTION ins_after();
EXPLAIN (COSTS OFF) INSERT INTO ins SELECT id, llm_generate(body, max_tokens => 8) FROM tickets WHERE id <= 12;
INSERT INTO ins SELECT id, llm_generate(body, max_tokens => 8) FROM tickets WHERE id <= 12;
SELECT count(*) AS rows, count(*) FILTER (WHERE i.g = '[' || s.g || ']' AND l.g = i.g) AS same
FROM ins i JOIN ins_log l USING (id) JOIN single s USING (id);
-- a trigger that generates itself: row by row inside, batched outside
CREATE TABLE notes (id int, body text, reply text);
CREATE FUNCTION notes_reply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.reply := llm_generate(NEW.body, max_tokens => 8);
	RETURN NEW;
END
$$;
CREATE TRIGGER notes_reply BEFORE INSERT ON notes FOR EACH ROW EXECUTE FUNCTION notes_reply();
INSERT INTO notes (id, body) SELECT id, body FROM tickets WHERE id <= 4;
SELECT count(*) FILTER (WHERE n.reply = s.g) AS same FROM notes n JOIN single s USING (id);

-- views
CREATE VIEW ticket_replies AS SELECT id, llm_generate(body, max_tokens => 8) AS g FROM tickets;
EXPLAIN (COSTS OFF) SELECT * FROM ticket_replies WHERE id <= 12;
SELECT count(*) AS rows, count(*) FILTER (WHERE v.g = s.g) AS same
FROM (SELECT * FROM ticket_replies WHERE id <= 12) v JOIN single s USING (id);

-- rescans: the inner side of a nested loop, with a changing parameter
SELECT k, array_agg(g ORDER BY id) = (SELECT array_agg(g ORDER BY id) FROM single WHERE id <= 3) AS same
FROM (VALUES (1), (2)) v(k),
     LATERAL (SELECT id, llm_generate(body, max_tokens => 8 + k - k) AS g FROM tickets WHERE id <= 3) s
GROUP BY k ORDER BY k;

-- on_error => 'null': failing rows give NULL, counted in llm_stat, one WARNING for the statement
SELECT requests_failed AS failed_before FROM llm_stat \gset
SELECT id, g IS NULL AS is_null
FROM (SELECT id, llm_generate(CASE WHEN id % 4 = 0 THEN repeat('word ', 9000) ELSE body END,
                              max_tokens => 4, on_error => 'null') AS g
      FROM tickets WHERE id <= 8) s;
SELECT requests_failed - :failed_before AS failed FROM llm_stat;
-- same summary on the plain function path (a CASE branch is not batched)
SELECT count(*) FROM (SELECT CASE WHEN id > 0 THEN llm_generate('', on_error => 'null') END FROM tickets WHERE id <= 3) s;

-- EXPLAIN ANALYZE
SELECT explain_batch($$SELECT llm_generate(body, max_tokens => 8) FROM tickets WHERE id <= 12$$);
SET llm.batch_window = 1;
SELECT explain_batch($$SELECT llm_generate(body, max_tokens => 8) FROM tickets WHERE id <= 2$$);
RESET llm.batch_window;

SELECT wait_idle();
