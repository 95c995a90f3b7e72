--
-- callsv7_join: what an llm_join request is charged.  A row's candidates go
-- in one forked scoring request per 64 candidates: llm_usage counts the
-- requests, their prompt (the common prefix) in prompt_tokens, and the rows
-- computed past it (each candidate's rest and each pair's answer) in
-- continuation_tokens; the token quota charges at least what llm_usage
-- shows, every pair's answer included.
--
CREATE ROLE regress_callsv7 IN ROLE llm_user;
SET ROLE regress_callsv7;
SELECT llm_join('My new blender broke after two days.', 'Is the candidate the product that the text is about?',
                array_agg('p' || i ORDER BY i)) AS matches_60
FROM generate_series(1, 60) i \gset
RESET ROLE;
SELECT wait_until($$SELECT coalesce(sum(requests), 0) >= 1 FROM llm_usage WHERE role = 'regress_callsv7'$$, 10);
-- one request for 60 candidates; at least one row per pair (60 x 4 answers) past the prompt
SELECT requests, prompt_tokens > 0 AS prompt, completion_tokens,
       continuation_tokens >= 60 * 4 AS every_pair_computed,
       tokens_last_minute = prompt_tokens + completion_tokens + continuation_tokens AS last_minute
FROM llm_usage WHERE role = 'regress_callsv7';
SELECT prompt_tokens + continuation_tokens AS join_tokens FROM llm_usage WHERE role = 'regress_callsv7' \gset
-- the quota's ledger charged the request at least that (its error states the tokens charged in the window)
SET llm.max_tokens_per_minute = 1;
SET ROLE regress_callsv7;
SELECT (regexp_match(try_sql($$SELECT llm_join('Another text.', 'Is it?', ARRAY['a'])$$),
                     '^53400: .* exceeded: (\d+) tokens'))[1]::bigint >= :join_tokens AS quota_charged_pairs;
RESET ROLE;
RESET llm.max_tokens_per_minute;
-- 70 candidates: 2 requests, each charged its own pairs
SELECT llm_stat_reset();
SET ROLE regress_callsv7;
SELECT llm_join('My new blender broke after two days.', 'Is the candidate the product that the text is about?',
                array_agg('p' || i ORDER BY i)) AS matches_70
FROM generate_series(1, 70) i \gset
RESET ROLE;
SELECT wait_until($$SELECT coalesce(sum(requests), 0) >= 2 FROM llm_usage WHERE role = 'regress_callsv7'$$, 10);
SELECT requests, continuation_tokens >= 70 * 4 AS every_pair_computed
FROM llm_usage WHERE role = 'regress_callsv7';
-- llm_classify's labels and llm_filter's answers are continuation rows too; a generation has none
SELECT llm_stat_reset();
SET ROLE regress_callsv7;
SELECT llm_classify('The parcel arrived broken.', '{complaint,praise,question}') AS label \gset
RESET ROLE;
SELECT wait_until($$SELECT coalesce(sum(requests), 0) >= 1 FROM llm_usage WHERE role = 'regress_callsv7'$$, 10);
SELECT requests, continuation_tokens >= 3 AS labels_computed FROM llm_usage WHERE role = 'regress_callsv7';
SELECT llm_stat_reset();
SET ROLE regress_callsv7;
SELECT llm_generate('Say yes.', max_tokens => 2) AS gen \gset
RESET ROLE;
SELECT wait_until($$SELECT coalesce(sum(requests), 0) >= 1 FROM llm_usage WHERE role = 'regress_callsv7'$$, 10);
SELECT requests, continuation_tokens AS generate_continuation_tokens FROM llm_usage WHERE role = 'regress_callsv7';
SELECT wait_idle();
SELECT llm_stat_reset();
DROP ROLE regress_callsv7;
