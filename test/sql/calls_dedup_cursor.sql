--
-- calls_dedup_cursor: a cursor opened outside a subtransaction and fetched
-- inside it keeps working after the subtransaction rolls back (PostgreSQL
-- keeps the portal): the rows it had read ahead, whose requests (its own or
-- shared ones) the rollback aborted, are answered as if nothing happened,
-- with sharing on and off.
--
SET statement_timeout = '180s';
CREATE TABLE cb AS
  SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'Say hello.' ELSE 'Say goodbye.' END AS body
  FROM generate_series(1, 8) i;
SET llm.dedup_calls = off;
CREATE TABLE cref AS
  SELECT id, llm_generate(body, max_tokens => CASE WHEN id = 1 THEN 1 ELSE 24 END) AS g FROM cb;
RESET llm.dedup_calls;

-- row 1's 1-token answer comes first; rows read ahead are in flight (or
-- finished, untaken) when the savepoint rolls back
BEGIN;
DECLARE c CURSOR FOR
  SELECT id, llm_generate(body, max_tokens => CASE WHEN id = 1 THEN 1 ELSE 24 END)
             = (SELECT g FROM cref WHERE cref.id = cb.id) AS same
  FROM cb;
SAVEPOINT s;
FETCH 1 FROM c;
ROLLBACK TO SAVEPOINT s;
FETCH ALL FROM c;
COMMIT;

SET llm.dedup_calls = off;
BEGIN;
DECLARE c CURSOR FOR
  SELECT id, llm_generate(body, max_tokens => CASE WHEN id = 1 THEN 1 ELSE 24 END)
             = (SELECT g FROM cref WHERE cref.id = cb.id) AS same
  FROM cb;
SAVEPOINT s;
FETCH 1 FROM c;
ROLLBACK TO SAVEPOINT s;
FETCH ALL FROM c;
COMMIT;
RESET llm.dedup_calls;

-- PL/pgSQL: the cursor fetched in a block that fails, then outside it
CREATE FUNCTION cursor_across_block() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	i int;
	a text;
	r text := '';
BEGIN
	OPEN c FOR SELECT id, llm_generate(body, max_tokens => CASE WHEN id = 1 THEN 1 ELSE 24 END) AS g FROM cb;
	BEGIN
		FETCH c INTO i, a;
		RAISE EXCEPTION 'stop';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	LOOP
		FETCH c INTO i, a;
		EXIT WHEN NOT FOUND;
		r := r || i || ':' || (a = (SELECT g FROM cref WHERE cref.id = i))::text || ' ';
	END LOOP;
	RETURN r;
END
$$;
SELECT cursor_across_block();
SET llm.dedup_calls = off;
SELECT cursor_across_block();
RESET llm.dedup_calls;

DROP FUNCTION cursor_across_block();
DROP TABLE cb, cref;
