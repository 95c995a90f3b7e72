--
-- calls_dedup_failed_portal: a cursor whose FETCH fails inside a PL/pgSQL
-- block (its portal fails: the LLM Batch node never reaches its end) while
-- requests it sent at the enclosing level are in flight; the cursor is then
-- closed (the node's memory goes) and later calls of the same statement
-- take those requests' answers: they must not reach back into the node.
-- Their answers equal those of unshared calls, and the statement sends one
-- request per distinct call.
--
SET statement_timeout = '180s';
CREATE TABLE fp AS
  SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'Say hello.' ELSE 'Say goodbye.' END AS body
  FROM generate_series(1, 12) i;
SET llm.dedup_calls = off;
CREATE TABLE fpref AS
  SELECT body, llm_generate(body, max_tokens => 48) AS g
  FROM (VALUES ('Say hello.'), ('Say goodbye.')) v(body);
RESET llm.dedup_calls;
-- row 2 fails at emission (division by zero above the node); rows 3.. wait
-- on two 48-token requests the node sent before the block began
CREATE FUNCTION fetch_fails_then_share(do_close boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	i int;
	a text;
	r text := '';
BEGIN
	OPEN c FOR SELECT id, g || (1 / (id - 2 + 0 * length(g)))::text
			   FROM (SELECT id, llm_generate(body, max_tokens => CASE WHEN id = 1 THEN 1 WHEN id = 2 THEN 8 ELSE 48 END) AS g
					 FROM fp OFFSET 0) s;
	FETCH c INTO i, a;
	BEGIN
		FETCH c INTO i, a;
	EXCEPTION WHEN division_by_zero THEN
		r := 'caught';
	END;
	IF do_close THEN
		CLOSE c;
	END IF;
	r := r || ' ' || (llm_generate('Say goodbye.', max_tokens => 48) = (SELECT g FROM fpref WHERE body = 'Say goodbye.'))::text;
	r := r || ' ' || (llm_generate('Say hello.', max_tokens => 48) = (SELECT g FROM fpref WHERE body = 'Say hello.'))::text;
	r := r || ' ' || (SELECT count(*) FROM fp JOIN fpref USING (body)
					  WHERE llm_generate(fp.body, max_tokens => 48) = fpref.g)::text;
	RETURN r;
END
$$;
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT fetch_fails_then_share(true);
-- rows 1 and 2's requests, and one per text for the rest
SELECT requests_finished - :f0 AS requests FROM llm_stat;
SELECT fetch_fails_then_share(false);
SELECT fetch_fails_then_share(true) FROM generate_series(1, 3);

DROP FUNCTION fetch_fails_then_share(boolean);
DROP TABLE fp, fpref;
