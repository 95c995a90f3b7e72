/* pg_llm 0.6 -> 0.7.  Each feature of 0.7 has its own block below, in the
   order the features landed; a fresh install of 0.7 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.7'" to load this file. \quit

-- llm_usage: cascade calls and continuation tokens
-- llm_usage gains the model cascades' calls (common/stats.h,
-- LLM_COUNTERS_CASCADE), as llm_progress has them: the small model's calls,
-- the sampled rows' large-model calls and the other large-model calls, per
-- role and database, noted by each LLM Batch node when it ends; and
-- continuation_tokens, the token rows scoring requests computed past their
-- prompt (llm_classify's labels, llm_filter's answers, llm_join's
-- candidates and each pair's answers), which tokens_last_minute now
-- includes.  The function is widened in place (its OID and grants kept)
-- and the view gets four more columns.
CREATE FUNCTION llm_usage_0_7_cascade(
	OUT role_oid oid,
	OUT database_oid oid,
	OUT requests bigint,
	OUT prompt_tokens bigint,
	OUT cached_tokens bigint,
	OUT completion_tokens bigint,
	OUT busy_ms float8,
	OUT calls_shared bigint,
	OUT lift_rows_below bigint,
	OUT lift_rows_reached bigint,
	OUT tokens_last_minute bigint,
	OUT interactive_requests bigint,
	OUT batch_requests bigint,
	OUT cascade_small_calls bigint,
	OUT cascade_sample_calls bigint,
	OUT cascade_large_calls bigint,
	OUT continuation_tokens bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_usage'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 128;
SELECT llm_widen_result('llm_usage()'::regprocedure, 'llm_usage_0_7_cascade()'::regprocedure);

COMMENT ON FUNCTION llm_usage() IS
'Token usage per (role, database) from the llm worker''s shared memory: requests, prompt/cached/completion tokens, compute time (ms), calls saved by sharing and by lifting filters above joins, tokens of the last minute (prompt, completion and continuation), requests per scheduling class, model cascades'' calls (small model, sampled large, other large), continuation tokens of scoring requests. Reset by llm_stat_reset() (except the last minute).';

CREATE OR REPLACE VIEW llm_usage AS
	SELECT r.rolname AS role, d.datname AS database, u.requests, u.prompt_tokens, u.cached_tokens,
		   u.completion_tokens, u.busy_ms, u.tokens_last_minute, u.interactive_requests, u.batch_requests,
		   u.calls_shared, u.lift_rows_below, u.lift_rows_reached,
		   u.lift_rows_below - u.lift_rows_reached AS calls_saved_by_lift,
		   u.cascade_small_calls, u.cascade_sample_calls, u.cascade_large_calls, u.continuation_tokens
	FROM llm_usage() u
	LEFT JOIN pg_roles r ON r.oid = u.role_oid
	LEFT JOIN pg_database d ON d.oid = u.database_oid;
-- end of llm_usage: cascade calls and continuation tokens
