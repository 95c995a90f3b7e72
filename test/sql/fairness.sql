--
-- fairness: scheduling classes (priority => argument, llm.priority, the
-- superuser-set ceiling llm.max_priority), per-role token accounting
-- (llm_usage) and the per-role quota llm.max_tokens_per_minute (SQLSTATE
-- 53400); and output cut by max_tokens never ends in U+FFFD.
--
SELECT name, type, default_value FROM llm_generation_arguments() WHERE name = 'priority';
SELECT p.oid::regprocedure AS function
FROM pg_proc p
WHERE p.proname IN ('llm_generate', 'llm_complete', 'llm_chat') AND 'priority' = ANY (p.proargnames)
ORDER BY 1;
SELECT name, setting, context, enumvals FROM pg_settings
WHERE name IN ('llm.priority', 'llm.max_priority', 'llm.max_tokens_per_minute') ORDER BY name;
-- a class per call; greedy text does not depend on it
SELECT llm_generate('Say yes.', max_tokens => 4, priority => 'batch')
     = llm_generate('Say yes.', max_tokens => 4, priority => 'interactive') AS same_text;
SELECT llm_generate(ARRAY['Say yes.', 'Say no.'], max_tokens => 4, priority => 'interactive')
     = llm_generate(ARRAY['Say yes.', 'Say no.'], max_tokens => 4) AS array_same;
SELECT (llm_complete('Say yes.', max_tokens => 4, priority => 'batch')).text
         = (llm_complete('Say yes.', max_tokens => 4)).text AS complete_ok,
       llm_chat('[{"role": "user", "content": "Say yes."}]', max_tokens => 4, priority => 'batch')
         = llm_chat('[{"role": "user", "content": "Say yes."}]', max_tokens => 4) AS chat_ok;
SELECT q, try_sql(q) FROM (VALUES
  ($$SELECT llm_generate('hi', priority => 'urgent')$$),
  ($$SELECT llm_generate('hi', priority => '')$$),
  ($$SELECT llm_generate(ARRAY['hi'], priority => 'Batch')$$)
) AS t(q);
-- the replies of the default class, which the calls below must give again
SELECT llm_generate('hi', max_tokens => 1) AS hi_1, llm_generate('Say yes.', max_tokens => 4) AS say_yes_4,
       llm_generate('Say yes.', max_tokens => 2) AS say_yes_2 \gset
SELECT llm_generate('hi', max_tokens => 1, priority => NULL) = :'hi_1' AS null_is_default;
-- the session's class
SET llm.priority = 'batch';
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes_4' AS batch_session;
RESET llm.priority;
-- the ceiling: lowering is always allowed, raising above it is refused
SET llm.max_priority = 'batch';
SELECT try_sql($$SET llm.priority = 'interactive'$$) AS set_above_ceiling;
SELECT try_sql($$SELECT llm_generate('hi', max_tokens => 1, priority => 'interactive')$$) AS call_above_ceiling;
SELECT llm_generate('hi', max_tokens => 1, priority => 'batch') = :'hi_1' AS at_ceiling;
SELECT llm_generate('hi', max_tokens => 1) = :'hi_1' AS default_under_ceiling;
RESET llm.max_priority;
SET llm.priority = 'interactive';
RESET llm.priority;
-- only a superuser sets the ceiling and the quota
CREATE ROLE regress_fair_user IN ROLE llm_user;
SET ROLE regress_fair_user;
SELECT try_sql($$SET llm.max_priority = 'interactive'$$) AS user_sets_ceiling;
SELECT try_sql($$SET llm.max_tokens_per_minute = 0$$) AS user_sets_quota;
SET llm.priority = 'batch';
SELECT llm_generate('Say yes.', max_tokens => 4) = :'say_yes_4' AS user_lowers;
RESET llm.priority;
RESET ROLE;
-- accounting per role: wait until the worker has published the last request
SELECT wait_until($$SELECT coalesce(sum(requests), 0) >= 1 FROM llm_usage WHERE role = 'regress_fair_user'$$, 10);
SELECT role, database = current_database() AS this_database, requests, prompt_tokens > 0 AS prompt,
       completion_tokens BETWEEN 1 AND 4 AS completion, cached_tokens <= prompt_tokens AS cached,
       busy_ms > 0 AS busy, tokens_last_minute = prompt_tokens + completion_tokens AS last_minute,
       interactive_requests, batch_requests
FROM llm_usage WHERE role = 'regress_fair_user';
-- the class each call reaches the worker with, counted per role: one role per case
CREATE TABLE fair_rows AS SELECT g FROM generate_series(1, 3) g;
-- class_of(q, n): run q as a new role, wait for its n requests to be accounted, show their classes
CREATE FUNCTION class_of(q text, n bigint, ceiling text DEFAULT NULL, session_class text DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	res text;
BEGIN
	CREATE ROLE regress_fair_cls IN ROLE llm_user;
	GRANT SELECT ON fair_rows TO regress_fair_cls;
	IF ceiling IS NOT NULL THEN
		PERFORM set_config('llm.max_priority', ceiling, true);
	END IF;
	IF session_class IS NOT NULL THEN
		PERFORM set_config('llm.priority', session_class, true);
	END IF;
	SET LOCAL ROLE regress_fair_cls;
	EXECUTE q;
	RESET ROLE;
	PERFORM set_config('llm.max_priority', 'interactive', true);
	PERFORM set_config('llm.priority', 'interactive', true);
	FOR i IN 1..100 LOOP
		SELECT interactive_requests || ' interactive, ' || batch_requests || ' batch'
		  INTO res FROM llm_usage WHERE role = 'regress_fair_cls' AND requests >= n;
		EXIT WHEN res IS NOT NULL;
		PERFORM pg_sleep(0.1);
	END LOOP;
	REVOKE SELECT ON fair_rows FROM regress_fair_cls;
	DROP ROLE regress_fair_cls;
	RETURN res;
END
$$;
SELECT q, class_of(q, n) FROM (VALUES
  ($$SELECT llm_generate('Say yes.', max_tokens => 1)$$, 1),
  ($$SELECT llm_generate('Say yes.', max_tokens => 1, priority => 'batch')$$, 1),
  ($$SELECT llm_generate(ARRAY['Say yes.', 'Say no.'], max_tokens => 1)$$, 2),
  ($$SELECT llm_generate(ARRAY['Say yes.', 'Say no.'], max_tokens => 1, priority => 'interactive')$$, 2),
  ($$SELECT g, llm_generate('Row ' || g, max_tokens => 1) FROM fair_rows$$, 3),
  ($$SELECT g, llm_generate('Row ' || g, max_tokens => 1, priority => 'interactive') FROM fair_rows$$, 3)
) AS t(q, n);
-- the session's class, llm.priority: a call may raise itself above it under the default ceiling
SELECT class_of($$SELECT llm_generate('Say yes.', max_tokens => 1)$$, 1, NULL, 'batch') AS batch_session,
       class_of($$SELECT llm_generate('Say yes.', max_tokens => 1, priority => 'interactive')$$, 1, NULL, 'batch')
         AS raised_call;
-- the node the rows above ran through
EXPLAIN (COSTS OFF) SELECT g, llm_generate('Row ' || g, max_tokens => 1) FROM fair_rows;
-- under a ceiling of batch every call is batch, and raising is refused
SELECT class_of($$SELECT llm_generate('Say yes.', max_tokens => 1)$$, 1, 'batch') AS default_under_ceiling,
       class_of($$SELECT llm_generate('Say yes.', max_tokens => 1, priority => 'batch')$$, 1, 'batch') AS batch_under_ceiling;
SELECT try_sql($$SELECT class_of($q$SELECT llm_generate('Say yes.', max_tokens => 1, priority => 'interactive')$q$, 1, 'batch')$$)
  AS raise_under_ceiling;
DROP FUNCTION class_of(text, bigint, text, text);
DROP TABLE fair_rows;
-- the quota: a call is refused once the role used the tokens of a minute
SET llm.max_tokens_per_minute = 1;
SET ROLE regress_fair_user;
SELECT try_sql($$SELECT llm_generate('Say yes.', max_tokens => 2)$$) AS over_quota;
SELECT try_sql($$SELECT llm_generate(ARRAY['Say yes.'], max_tokens => 2)$$) AS array_over_quota;
RESET ROLE;
RESET llm.max_tokens_per_minute;
SET ROLE regress_fair_user;
SELECT llm_generate('Say yes.', max_tokens => 2) = :'say_yes_2' AS quota_lifted;
RESET ROLE;
SELECT wait_until($$SELECT coalesce(sum(requests), 0) >= 2 FROM llm_usage WHERE role = 'regress_fair_user'$$, 10);
SELECT requests FROM llm_usage WHERE role = 'regress_fair_user';
-- llm_stat_reset() clears the counters, not the last minute
SELECT wait_idle();
SELECT llm_stat_reset();
SELECT count(*) AS rows_after_reset, bool_and(requests = 0) AS zeroed, bool_and(tokens_last_minute > 0) AS window_kept
FROM llm_usage WHERE role = 'regress_fair_user';
DROP ROLE regress_fair_user;
-- max_tokens cutting through a character of several tokens drops its bytes
SELECT k, strpos(llm_generate('Reply with exactly these three emoji and nothing else: 🎉🐙🚀', max_tokens => k),
                 U&'\FFFD') AS replacement_at
FROM generate_series(1, 12) k
WHERE strpos(llm_generate('Reply with exactly these three emoji and nothing else: 🎉🐙🚀', max_tokens => k),
             U&'\FFFD') <> 0;
