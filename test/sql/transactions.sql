--
-- transactions: errors, rollbacks, savepoints, triggers and timeouts leave
-- no stale state behind.
--
-- the greedy reply later calls must give again (the worker kept no stale state)
SELECT llm_generate('Say yes.', max_tokens => 4) AS say_yes \gset
BEGIN;
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes' AS in_xact;
SELECT 1 / 0;
ROLLBACK;
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes' AS after_rollback;
BEGIN;
SAVEPOINT a;
SELECT llm_generate('x', max_tokens => 0);
ROLLBACK TO a;
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes' AS after_savepoint;
COMMIT;
-- a trigger calling llm_generate, rolled back and committed
CREATE TABLE llm_notes (id int, body text, summary text);
CREATE FUNCTION llm_notes_summarize() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.summary := llm_generate('Summarize in five words: ' || NEW.body, max_tokens => 8);
	RETURN NEW;
END
$$;
CREATE TRIGGER llm_notes_summary BEFORE INSERT ON llm_notes
  FOR EACH ROW EXECUTE FUNCTION llm_notes_summarize();
BEGIN;
INSERT INTO llm_notes (id, body) VALUES (1, 'The printer on floor two is jammed again.');
SELECT count(*) FROM llm_notes;
ROLLBACK;
SELECT count(*) FROM llm_notes;
INSERT INTO llm_notes (id, body) VALUES (2, 'My password reset email never arrives.');
SELECT id, summary = llm_generate('Summarize in five words: ' || body, max_tokens => 8) AS summarized FROM llm_notes;
-- an error in the same statement after the generation
SELECT llm_generate('Say yes.', max_tokens => 4), 1 / 0;
-- SET LOCAL statement_timeout during a long generation: cancelled, then all is idle again
BEGIN;
SET LOCAL statement_timeout = '300ms';
SELECT llm_generate('Write a very long story about a dragon.', max_tokens => 4000, temperature => 0.7, seed => 1);
ROLLBACK;
SELECT wait_idle() AS idle_after_timeout;
-- the same through a PL/pgSQL exception block (a cancel is not caught by WHEN OTHERS)
SET statement_timeout = '300ms';
SELECT try_sql($$SELECT llm_generate('Write a very long story about a dragon.', max_tokens => 4000)$$);
RESET statement_timeout;
SELECT wait_idle() AS idle_after_caught_timeout;
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes' AS next_call_works;
SELECT requests_aborted >= 2 AS aborted_counted FROM llm_stat;
DROP TABLE llm_notes;
DROP FUNCTION llm_notes_summarize();
