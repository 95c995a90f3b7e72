--
-- stream_abort: a stream ended early aborts its request in the worker,
-- which frees its KV blocks at its next step (llm_stat), while the
-- transaction goes on; a slow reader does not change the text.
--
SELECT wait_idle();
SELECT requests_aborted AS aborted0 FROM llm_stat \gset
-- closing a cursor after the first row
BEGIN;
DECLARE c CURSOR FOR
	SELECT (x).delta <> '' AS got_text
	FROM (SELECT llm_generate_stream('1, 2, 3, 4, 5,', raw => true, max_tokens => 4000) AS x) r;
FETCH 1 FROM c;
SELECT requests_running AS running_while_open FROM llm_stat;
CLOSE c;
SELECT wait_idle() AS idle_after_close;
SELECT requests_aborted - :aborted0 AS aborted FROM llm_stat;
COMMIT;
-- a LIMIT reached ends the query, and the request with it
BEGIN;
SELECT (x).delta <> '' AS got_text
FROM (SELECT llm_generate_stream('1, 2, 3, 4, 5,', raw => true, max_tokens => 4000) AS x) r LIMIT 1;
SELECT wait_idle() AS idle_after_limit;
SELECT requests_aborted - :aborted0 AS aborted FROM llm_stat;
COMMIT;
-- an error after rows were sent (here the statement's timeout, a cancel)
-- ends the cursor with that error; the request is aborted with the
-- transaction
BEGIN;
DECLARE c CURSOR FOR
	SELECT (x).delta <> '' AS got_text
	FROM (SELECT llm_generate_stream('1, 2, 3, 4, 5,', raw => true, max_tokens => 4000) AS x) r;
FETCH 1 FROM c;
SET LOCAL statement_timeout = '300ms';
FETCH ALL FROM c;
ROLLBACK;
SELECT wait_idle() AS idle_after_error;
SELECT requests_aborted - :aborted0 AS aborted FROM llm_stat;
-- a cursor first fetched inside a savepoint that is released belongs to
-- the transaction: a later savepoint rolled back leaves its request alone
BEGIN;
DECLARE c CURSOR FOR
	SELECT (x).finish_reason
	FROM (SELECT llm_generate_stream('What is the capital of Australia?', max_tokens => 24) AS x) r;
SAVEPOINT a;
FETCH 1 FROM c;
RELEASE a;
SAVEPOINT b;
ROLLBACK TO b;
MOVE ALL IN c;
COMMIT;
SELECT wait_idle();
-- a slow reader: the worker does not wait for it (the request finishes
-- while the cursor is open and unread, its deltas waiting in the channel)
-- and the text is unchanged
CREATE FUNCTION stream_read_slowly(p text, n int, OUT joined text, OUT finished_unread boolean)
LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	d text;
	rows int := 0;
BEGIN
	joined := '';
	OPEN c FOR SELECT (x).delta FROM (SELECT llm_generate_stream(p, max_tokens => n) AS x) r;
	LOOP
		FETCH c INTO d;
		EXIT WHEN NOT FOUND;
		joined := joined || d;
		rows := rows + 1;
		IF rows = 1 THEN
			finished_unread := wait_until('SELECT requests_running = 0 AND requests_waiting = 0 AND kv_blocks_used = 0 FROM llm_stat');
		END IF;
	END LOOP;
	CLOSE c;
END
$$;
SELECT joined = llm_generate('What is the capital of Australia?', max_tokens => 48) AS slow_same, finished_unread
FROM stream_read_slowly('What is the capital of Australia?', 48);
SELECT wait_idle();
