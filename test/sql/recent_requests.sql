--
-- llm_recent_requests(): the worker's record of every finished request
-- (ring of the last 4096), cleared by llm_stat_reset()
--
SELECT llm_stat_reset();
SELECT count(*) AS after_reset FROM llm_recent_requests();
-- three requests (cut by max_tokens or a stop string), one statement each, with
-- their usage as the backend saw it
CREATE TEMP TABLE usage (seq int, finish_reason text, prompt_tokens int, cached_tokens int,
                         completion_tokens int, ttft_ms float8, total_ms float8);
INSERT INTO usage SELECT 1, finish_reason, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms
FROM llm_complete('Write the number seven in words.', max_tokens => 3);
INSERT INTO usage SELECT 2, finish_reason, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms
FROM llm_complete('Say yes.', max_tokens => 40, stop => ARRAY['.', '!']);
INSERT INTO usage SELECT 3, finish_reason, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms
FROM llm_complete('Name a fruit.', max_tokens => 1);
SELECT wait_recent(3);
SELECT seq, finish_reason, completion_tokens FROM usage ORDER BY seq;
-- same counts and times as llm_complete reported, in finishing order
SELECT r.seq, r.outcome, r.outcome = u.finish_reason AS same_outcome,
       r.prompt_tokens = u.prompt_tokens AS same_prompt, r.cached_tokens = u.cached_tokens AS same_cached,
       r.completion_tokens = u.completion_tokens AS same_completion,
       abs(r.ttft_ms - u.ttft_ms) < 0.01 AS same_ttft, abs(r.total_ms - u.total_ms) < 0.01 AS same_total,
       r.ttft_ms > 0 AND r.total_ms >= r.ttft_ms AS times_ordered,
       CASE WHEN r.completion_tokens > 1
            THEN abs(r.tpot_ms - (r.total_ms - r.ttft_ms) / (r.completion_tokens - 1)) < 1e-6
            ELSE r.tpot_ms IS NULL END AS tpot_defined
FROM llm_recent_requests() r JOIN usage u USING (seq) ORDER BY r.seq;
SELECT bool_and(finished_at <= now() + interval '1 minute') AS finished_at_sane,
       bool_and(finished_at >= (SELECT stats_reset FROM llm_stat)) AS after_reset
FROM llm_recent_requests();
-- the token totals agree with llm_stat
SELECT sum(r.completion_tokens) = s.completion_tokens AS completion_matches_stat,
       sum(r.prompt_tokens) = s.prompt_tokens AS prompt_matches_stat,
       count(*) = s.requests_finished AS count_matches_stat
FROM llm_recent_requests() r, llm_stat s GROUP BY s.completion_tokens, s.prompt_tokens, s.requests_finished;
-- a request the worker fails (prompt longer than the context) is recorded without usage
SELECT llm_generate(repeat('word ', 9000), max_tokens => 2, on_error => 'null') IS NULL AS failed_is_null;
SELECT wait_recent(4);
SELECT seq, outcome, prompt_tokens, completion_tokens, ttft_ms, tpot_ms, total_ms
FROM llm_recent_requests() WHERE seq = 4;
-- llm_stat_reset() empties it and restarts seq
SELECT llm_stat_reset();
SELECT count(*) AS after_second_reset FROM llm_recent_requests();
SELECT completion_tokens AS generated FROM llm_complete('Say yes.', max_tokens => 1);
SELECT wait_recent(1);
SELECT seq, outcome, completion_tokens FROM llm_recent_requests();
-- monitoring roles may read it, PUBLIC may not
SELECT has_function_privilege('pg_monitor', 'llm_recent_requests()', 'EXECUTE') AS monitor,
       has_function_privilege('llm_user', 'llm_recent_requests()', 'EXECUTE') AS llm_user,
       has_function_privilege('public', 'llm_recent_requests()', 'EXECUTE') AS public;
