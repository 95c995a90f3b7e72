--
-- stats_agree_calls: llm_stat, llm_models and llm_usage agree with the calls.
-- The worker publishes its statistics before it answers, so a call that has
-- returned is already counted: finished, not running, its KV blocks
-- released.  A cancelled call (statement_timeout) is counted by the end of
-- the engine step in progress when the cancel arrives.
--
SELECT wait_idle() AS idle_before;
CREATE TEMP TABLE stat_snap (i int, phase text, running int, waiting int, finished bigint, aborted bigint,
                             kv_used int, model_running int, model_finished bigint, model_aborted bigint,
                             model_kv_used int, usage_requests bigint, usage_completion bigint);
CREATE FUNCTION stat_snap_take(i int, phase text) RETURNS void LANGUAGE sql AS $$
INSERT INTO stat_snap
SELECT i, phase, s.requests_running, s.requests_waiting, s.requests_finished, s.requests_aborted, s.kv_blocks_used,
       m.requests_running, m.requests_finished, m.requests_aborted, m.kv_blocks_used,
       coalesce(u.requests, 0), coalesce(u.completion_tokens, 0)
FROM llm_stat s
CROSS JOIN (SELECT * FROM llm_models WHERE alias = 'default') m
LEFT JOIN llm_usage u ON u.role = current_user AND u.database = current_database()
$$;
-- forty calls, each read back in the same PL/pgSQL block right after it
-- returns (no client round trip, llm_stat read first: the quickest look)
CREATE TEMP TABLE call_snap (i int, running int, waiting int, finished_delta bigint, kv_used_delta int,
                             model_running int, model_finished_delta bigint, model_kv_used_delta int,
                             usage_requests_delta bigint, usage_completion_delta bigint);
DO $$
DECLARE
	t text;
	s0 record;
	m0 record;
	u0 record;
	s1 record;
	m1 record;
	u1 record;
BEGIN
	FOR i IN 1..40 LOOP
		SELECT requests_running, requests_waiting, requests_finished, kv_blocks_used INTO s0 FROM llm_stat;
		SELECT requests_running, requests_finished, kv_blocks_used INTO m0 FROM llm_models WHERE alias = 'default';
		SELECT coalesce(sum(requests), 0) AS requests, coalesce(sum(completion_tokens), 0) AS completion INTO u0
		FROM llm_usage WHERE role = current_user AND database = current_database();
		t := llm_generate('Name a color number ' || i || '.', max_tokens => 2);
		SELECT requests_running, requests_waiting, requests_finished, kv_blocks_used INTO s1 FROM llm_stat;
		SELECT requests_running, requests_finished, kv_blocks_used INTO m1 FROM llm_models WHERE alias = 'default';
		SELECT coalesce(sum(requests), 0) AS requests, coalesce(sum(completion_tokens), 0) AS completion INTO u1
		FROM llm_usage WHERE role = current_user AND database = current_database();
		INSERT INTO call_snap VALUES (i, s1.requests_running, s1.requests_waiting,
									  s1.requests_finished - s0.requests_finished, s1.kv_blocks_used - s0.kv_blocks_used,
									  m1.requests_running, m1.requests_finished - m0.requests_finished,
									  m1.kv_blocks_used - m0.kv_blocks_used,
									  u1.requests - u0.requests, u1.completion - u0.completion);
	END LOOP;
END
$$;
SELECT i, running AS running_after, waiting AS waiting_after, finished_delta, kv_used_delta,
       model_running AS model_running_after, model_finished_delta, model_kv_used_delta,
       usage_requests_delta, usage_completion_delta
FROM call_snap ORDER BY i;
DROP TABLE call_snap;
-- a constrained output cut at max_tokens is an error, and its tokens still count in llm_usage
TRUNCATE stat_snap;
SELECT stat_snap_take(1, 'before');
SELECT llm_generate('Write a long number.', regex => '[0-9]{20}', max_tokens => 2, on_error => 'null') IS NULL AS cut;
SELECT stat_snap_take(1, 'after');
SELECT a.finished - b.finished AS finished_delta, a.usage_requests - b.usage_requests AS usage_requests_delta,
       a.usage_completion - b.usage_completion AS usage_completion_delta, a.running AS running_after
FROM stat_snap a JOIN stat_snap b ON a.phase = 'after' AND b.phase = 'before';
-- statement_timeout during a long generation: the backend returns at once,
-- the worker sees the cancel after the step in progress; then all three
-- views agree (a bounded poll, no fixed sleep)
TRUNCATE stat_snap;
SELECT stat_snap_take(1, 'before');
SET statement_timeout = '300ms';
SELECT llm_generate('1, 2, 3, 4, 5, 6, 7, 8, 9, 10,', raw => true, max_tokens => 4000);
RESET statement_timeout;
SELECT wait_until($$SELECT s.requests_running = 0 AND s.requests_waiting = 0 AND s.kv_blocks_used = 0
                          AND s.requests_aborted = (SELECT aborted + 1 FROM stat_snap WHERE phase = 'before')
                   FROM llm_stat s$$, 30) AS aborted_and_released;
SELECT stat_snap_take(1, 'after');
SELECT a.running AS running_after, a.kv_used AS kv_used_after,
       a.aborted - b.aborted AS aborted_delta, a.finished - b.finished AS finished_delta,
       a.model_running AS model_running_after, a.model_kv_used AS model_kv_used_after,
       a.model_aborted - b.model_aborted AS model_aborted_delta,
       a.usage_requests - b.usage_requests AS usage_requests_delta
FROM stat_snap a JOIN stat_snap b ON a.phase = 'after' AND b.phase = 'before';
DROP FUNCTION stat_snap_take(int, text);
DROP TABLE stat_snap;
