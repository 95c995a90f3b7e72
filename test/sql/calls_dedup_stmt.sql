--
-- calls_dedup_stmt: identical deterministic calls share one request across
-- the LLM Batch nodes and row-by-row call sites of one top-level statement
-- (docs/BATCH_SCAN.md, "Deduplication"), not across statements; a request
-- in flight is shared only within the subtransaction that sent it (or one
-- inside it), and one an aborted subtransaction sent is never shared.
--
CREATE TABLE sdup AS
  SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'Say hello.' ELSE 'Say goodbye.' END AS body
  FROM generate_series(1, 200) i;
CREATE FUNCTION explain_sdup(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		RETURN NEXT regexp_replace(l, '(Prompt Tokens|Cached Tokens|Completion Tokens|Mean TTFT|Max Requests in Flight): [0-9.]+', '\1: N');
	END LOOP;
END
$$;

-- the answers of one request per text, row by row with sharing off
SET llm.dedup_calls = off;
CREATE TABLE sref AS
  SELECT body, llm_generate(body, max_tokens => 4) AS g
  FROM (VALUES ('Say hello.'), ('Say goodbye.')) v(body);
RESET llm.dedup_calls;

-- two nodes of one statement (UNION ALL): 2 requests for 2 texts, not 4
SELECT requests_finished AS f0 FROM llm_stat \gset
CREATE TABLE sunion AS
  SELECT id, llm_generate(body, max_tokens => 4) AS g FROM sdup WHERE id <= 10
  UNION ALL
  SELECT id, llm_generate(body, max_tokens => 4) AS g FROM sdup WHERE id > 190;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
SELECT count(*) AS rows, count(*) FILTER (WHERE u.g = r.g) AS equal
FROM sunion u JOIN sdup d USING (id) JOIN sref r ON r.body = d.body;
-- the second node sends nothing: every call of it is answered by the first's requests
SELECT explain_sdup($$SELECT llm_generate(body, max_tokens => 4) FROM sdup WHERE id <= 10
                      UNION ALL SELECT llm_generate(body, max_tokens => 4) FROM sdup WHERE id > 190$$);

-- a self-join whose two sides each filter: the inner side's calls equal the outer's
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(*) FROM sdup a JOIN sdup b ON b.id = a.id + 1
WHERE a.id <= 20 AND b.id <= 21
  AND llm_filter(a.body, 'Is this a greeting?') IS NOT NULL
  AND llm_filter(b.body, 'Is this a greeting?') IS NOT NULL;
SELECT requests_finished - :f0 AS requests FROM llm_stat;

-- a row-by-row call site (no FROM: no node) and a node in a subquery share
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT llm_generate('Say hello.', max_tokens => 4) =
       (SELECT min(g) FROM (SELECT llm_generate(body, max_tokens => 4) AS g
                            FROM sdup WHERE id % 2 = 0 AND id <= 40) s) AS same;
SELECT requests_finished - :f0 AS requests FROM llm_stat;

-- a PL/pgSQL expression's call shares with the statement's node
CREATE FUNCTION gen_in_plpgsql(t text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN llm_generate(t, max_tokens => 4);
END
$$;
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(*) AS rows, count(*) FILTER (WHERE g = p) AS equal
FROM (SELECT llm_generate(body, max_tokens => 4) AS g, gen_in_plpgsql(body) AS p
      FROM sdup WHERE id <= 30) s;
SELECT requests_finished - :f0 AS requests FROM llm_stat;

-- two statements do not share: the same query again sends its 2 requests again
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 4) AS g FROM sdup WHERE id <= 10) s;
SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 4) AS g FROM sdup WHERE id <= 10) s;
SELECT requests_finished - :f0 AS requests FROM llm_stat;

-- switched off: one request per row in every node
SET llm.dedup_calls = off;
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT count(g) FROM (SELECT llm_generate(body, max_tokens => 4) AS g FROM sdup WHERE id <= 3
                      UNION ALL SELECT llm_generate(body, max_tokens => 4) FROM sdup WHERE id > 197) s;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
RESET llm.dedup_calls;

-- subtransactions: a block that fails while its node's long request is in
-- flight aborts it; a later block of the same statement, a subtransaction
-- begun after it, must not wait on it: it sends its own and gets the answer
SET llm.dedup_calls = off;
CREATE TABLE slong AS SELECT llm_generate('Say goodbye.', max_tokens => 48) AS g;
RESET llm.dedup_calls;
CREATE FUNCTION abort_then_retry() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	first text;
	answer text;
BEGIN
	BEGIN
		-- row 3's 48-token request is in flight when row 2's 1-token answer comes
		OPEN c FOR SELECT llm_generate(body, max_tokens => CASE WHEN id = 2 THEN 1 ELSE 48 END) AS g
				   FROM sdup WHERE id BETWEEN 2 AND 3;
		FETCH c INTO first;
		RAISE EXCEPTION 'stop';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	BEGIN
		SELECT g INTO answer FROM (SELECT llm_generate(body, max_tokens => 48) AS g
								   FROM sdup WHERE id = 3) s;
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	RETURN answer;
END
$$;
SELECT abort_then_retry() = (SELECT g FROM slong) AS same;

-- a released subtransaction's requests in flight are its parent's: a call
-- after the block shares the cursor's request it left running
CREATE FUNCTION release_then_share() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	first text;
	answer text;
BEGIN
	BEGIN
		OPEN c FOR SELECT llm_generate(body, max_tokens => CASE WHEN id = 2 THEN 1 ELSE 48 END) AS g
				   FROM sdup WHERE id BETWEEN 2 AND 3;
		FETCH c INTO first;
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	SELECT g INTO answer FROM (SELECT llm_generate(body, max_tokens => 48) AS g FROM sdup WHERE id = 3) s;
	CLOSE c;
	RETURN answer;
END
$$;
CREATE VIEW my_shared AS
  SELECT coalesce(sum(calls_shared), 0) AS calls_shared FROM llm_usage()
  WHERE role_oid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
    AND database_oid = (SELECT oid FROM pg_database WHERE datname = current_database());
SELECT calls_shared AS s0 FROM my_shared \gset
SELECT release_then_share() = (SELECT g FROM slong) AS same;
SELECT calls_shared - :s0 AS shared FROM my_shared;

DROP VIEW my_shared;
DROP TABLE sdup, sref, sunion, slong;
DROP FUNCTION explain_sdup(text), gen_in_plpgsql(text), abort_then_retry(), release_then_share();
