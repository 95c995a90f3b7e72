/* pg_llm 0.2 -> 0.3 */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.3'" to load this file. \quit

-- fairness
--
-- Priorities, fair share and quotas.
-- Every generation function gains priority => 'interactive' | 'batch'
-- (NULL: the session's class, llm.priority; batch sites are batch), appended
-- in place (llm_widen_function keeps each function's OID).  llm_usage: the
-- tokens each (role, database) used, from the worker's shared memory.

CREATE FUNCTION llm_widen_template_generate(
	prompt text,
	max_tokens int DEFAULT 256,
	temperature float8 DEFAULT 0,
	top_p float8 DEFAULT 1,
	top_k int DEFAULT 0,
	min_p float8 DEFAULT 0,
	repetition_penalty float8 DEFAULT 1,
	seed bigint DEFAULT NULL,
	stop text[] DEFAULT NULL,
	system text DEFAULT NULL,
	raw boolean DEFAULT false,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function(
	'llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)'::regprocedure,
	'llm_widen_template_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text)'::regprocedure);

CREATE FUNCTION llm_widen_template_generate_array(
	prompts text[],
	max_tokens int DEFAULT 256,
	temperature float8 DEFAULT 0,
	top_p float8 DEFAULT 1,
	top_k int DEFAULT 0,
	min_p float8 DEFAULT 0,
	repetition_penalty float8 DEFAULT 1,
	seed bigint DEFAULT NULL,
	stop text[] DEFAULT NULL,
	system text DEFAULT NULL,
	raw boolean DEFAULT false,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'pg_llm_generate_array'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function(
	'llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)'::regprocedure,
	'llm_widen_template_generate_array(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text)'::regprocedure);

CREATE FUNCTION llm_widen_template_complete(
	prompt text,
	max_tokens int DEFAULT 256,
	temperature float8 DEFAULT 0,
	top_p float8 DEFAULT 1,
	top_k int DEFAULT 0,
	min_p float8 DEFAULT 0,
	repetition_penalty float8 DEFAULT 1,
	seed bigint DEFAULT NULL,
	stop text[] DEFAULT NULL,
	system text DEFAULT NULL,
	raw boolean DEFAULT false,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL,
	OUT text text,
	OUT finish_reason text,
	OUT prompt_tokens int,
	OUT cached_tokens int,
	OUT completion_tokens int,
	OUT ttft_ms float8,
	OUT total_ms float8)
RETURNS record
AS 'MODULE_PATHNAME', 'pg_llm_complete'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function(
	'llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)'::regprocedure,
	'llm_widen_template_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text)'::regprocedure);

CREATE FUNCTION llm_widen_template_chat(
	messages jsonb,
	max_tokens int DEFAULT 256,
	temperature float8 DEFAULT 0,
	top_p float8 DEFAULT 1,
	top_k int DEFAULT 0,
	min_p float8 DEFAULT 0,
	repetition_penalty float8 DEFAULT 1,
	seed bigint DEFAULT NULL,
	stop text[] DEFAULT NULL,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_chat'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function(
	'llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text)'::regprocedure,
	'llm_widen_template_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text)'::regprocedure);

-- llm_usage(): one row per (role, database) the worker took requests for
-- since start or llm_stat_reset(): requests, prompt tokens (cached_tokens
-- of them served from the prefix cache), completion tokens, busy_ms (the
-- engine's compute time shared among the requests of each step by their
-- token rows), tokens_last_minute (prompt + completion tokens of the
-- requests that ended in the last 60 s, what llm.max_tokens_per_minute is
-- checked against), and the requests of each scheduling class.
CREATE FUNCTION llm_usage(
	OUT role_oid oid,
	OUT database_oid oid,
	OUT requests bigint,
	OUT prompt_tokens bigint,
	OUT cached_tokens bigint,
	OUT completion_tokens bigint,
	OUT busy_ms float8,
	OUT tokens_last_minute bigint,
	OUT interactive_requests bigint,
	OUT batch_requests bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_usage'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 128;

COMMENT ON FUNCTION llm_usage() IS
'Token usage per (role, database) from the llm worker''s shared memory: requests, prompt/cached/completion tokens, compute time (ms), tokens of the last minute, requests per scheduling class. Reset by llm_stat_reset() (except the last minute).';

CREATE VIEW llm_usage AS
	SELECT r.rolname AS role, d.datname AS database, u.requests, u.prompt_tokens, u.cached_tokens,
		   u.completion_tokens, u.busy_ms, u.tokens_last_minute, u.interactive_requests, u.batch_requests
	FROM llm_usage() u
	LEFT JOIN pg_roles r ON r.oid = u.role_oid
	LEFT JOIN pg_database d ON d.oid = u.database_oid;

COMMENT ON VIEW llm_usage IS 'Token usage of the llm worker per role and database (see llm_usage()).';

REVOKE ALL ON FUNCTION llm_usage() FROM PUBLIC;
REVOKE ALL ON llm_usage FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_usage() TO llm_user, pg_monitor;
GRANT SELECT ON llm_usage TO llm_user, pg_monitor;
-- end of fairness
