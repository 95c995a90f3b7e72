/* pg_llm 0.2 — SQL interface.  Requires shared_preload_libraries = 'llm'. */

/*
 * Argument policy (README, "Argument and upgrade policy"): a later version
 * adds optional arguments to a generation function only at the END of its
 * argument list, with a DEFAULT equal to the library's argument table
 * (llm_generation_arguments()), and its update script widens the existing
 * function in place with llm_widen_function(); arguments are never
 * renamed, retyped, reordered or removed, and no overload is ever added.
 */

\echo Use "CREATE EXTENSION llm" to load this file. \quit

-- The role allowed to run generations.  Roles are cluster-wide: it is created
-- by the first CREATE EXTENSION in the cluster and kept by DROP EXTENSION.
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'llm_user') THEN
		CREATE ROLE llm_user NOLOGIN;
	END IF;
END
$$;

CREATE FUNCTION llm_generate(
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
	on_error text DEFAULT 'raise')
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) IS
'Generate a reply to prompt (chat template applied unless raw). NULL prompt gives NULL; a NULL option means its default. Errors: 22023 invalid argument or empty prompt, 54000 prompt longer than the context, 55000 worker not running. on_error => ''null'' turns a per-row failure into NULL plus a WARNING.';

CREATE FUNCTION llm_generate(
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
	on_error text DEFAULT 'raise')
RETURNS text[]
AS 'MODULE_PATHNAME', 'pg_llm_generate_array'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) IS
'Generate replies to all prompts at once (they share the worker''s batches); NULL elements give NULL; same options and errors as llm_generate(text).';

CREATE FUNCTION llm_complete(
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

COMMENT ON FUNCTION llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) IS
'llm_generate with usage: text, finish_reason (stop | length | error), prompt/cached/completion token counts, time to first token and total time (ms).';

CREATE FUNCTION llm_chat(
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
	on_error text DEFAULT 'raise')
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_chat'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text) IS
'Generate the assistant reply to an OpenAI-style conversation [{"role": "system"|"user"|"assistant", "content": "..."}]; system, if given, is put first.';

CREATE FUNCTION llm_tokenize(text)
RETURNS int[]
AS 'MODULE_PATHNAME', 'pg_llm_tokenize'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_tokenize(text) IS
'Token ids of the text under the loaded model''s tokenizer, as plain text (special tokens are never parsed, no BOS).';

CREATE FUNCTION llm_detokenize(int[])
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_detokenize'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_detokenize(int[]) IS
'Text of token ids (special tokens as their text; invalid UTF-8 becomes U+FFFD). Error 22023 for an id outside the vocabulary.';

CREATE FUNCTION llm_model_info()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pg_llm_model_info'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION llm_model_info() IS
'Worker and model status (status, worker_pid, model_path, device, context_length, error) and the loaded model''s description.';

CREATE FUNCTION llm_stat(
	OUT worker_pid int,
	OUT model_status text,
	OUT requests_running int,
	OUT requests_waiting int,
	OUT requests_finished bigint,
	OUT requests_failed bigint,
	OUT requests_aborted bigint,
	OUT prompt_tokens bigint,
	OUT cached_tokens bigint,
	OUT prefix_query_tokens bigint,
	OUT prefix_hit_tokens bigint,
	OUT prefix_hit_rate float8,
	OUT completion_tokens bigint,
	OUT batch_size int,
	OUT max_batch_size int,
	OUT kv_blocks_used int,
	OUT kv_blocks_cached int,
	OUT kv_blocks_total int,
	OUT steps bigint,
	OUT preemptions bigint,
	OUT ttft_mean_ms float8,
	OUT ttft_p99_ms float8,
	OUT tpot_mean_ms float8,
	OUT tpot_p99_ms float8,
	OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'pg_llm_stat'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION llm_stat() IS
'Worker statistics: requests, tokens, prefix-cache lookups (prompt tokens queried and hit, hit rate), batch sizes, KV cache blocks, and mean/p99 time to first token and time per output token (ms) over the last 1024 requests.';

CREATE VIEW llm_stat AS SELECT * FROM llm_stat();

COMMENT ON VIEW llm_stat IS 'One row of llm worker statistics (see llm_stat()).';

CREATE FUNCTION llm_stat_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'pg_llm_stat_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION llm_stat_reset() IS
'Reset the cumulative counters, the max batch size and the latency samples of llm_stat, and empty llm_recent_requests().';

-- One row per request the worker finished recently (ring of the last 4096,
-- oldest first; cleared by llm_stat_reset()).  seq: 1, 2, ... since the
-- reset; outcome: stop | length | error | aborted; token counts as in
-- llm_complete; ttft_ms / total_ms: worker-side time from the request's
-- arrival in the engine to its first token / to its end (ms); tpot_ms:
-- (total_ms - ttft_ms) / (completion_tokens - 1), NULL under 2 tokens.
-- Failed and aborted requests have NULL counts and times.
CREATE FUNCTION llm_recent_requests(
	OUT seq bigint,
	OUT finished_at timestamptz,
	OUT outcome text,
	OUT prompt_tokens int,
	OUT cached_tokens int,
	OUT completion_tokens int,
	OUT ttft_ms float8,
	OUT tpot_ms float8,
	OUT total_ms float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_recent_requests'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 4096;

COMMENT ON FUNCTION llm_recent_requests() IS
'The last 4096 requests the worker finished (oldest first): outcome, prompt/cached/completion tokens, time to first token, time per output token and total time measured in the worker (ms). Cleared by llm_stat_reset().';

CREATE FUNCTION llm_generation_arguments(
	OUT name text,
	OUT type regtype,
	OUT default_value text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_generation_arguments'
LANGUAGE C STABLE PARALLEL SAFE ROWS 16;

COMMENT ON FUNCTION llm_generation_arguments() IS
'The optional arguments of the generation functions as the library reads them (by name): name, type and default (input text; NULL for DEFAULT NULL).';

CREATE FUNCTION llm_widen_function(target regprocedure, template regprocedure)
RETURNS void
AS 'MODULE_PATHNAME', 'pg_llm_widen_function'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION llm_widen_function(regprocedure, regprocedure) IS
'Extension updates only (superuser): give target the argument list of template (target''s arguments, then new ones with defaults) in place, keeping its OID, and drop template.';

-- Generation is granted to llm_user only, never to PUBLIC.
REVOKE ALL ON FUNCTION llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_tokenize(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_detokenize(int[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_model_info() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_stat() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_stat_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_recent_requests() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_generation_arguments() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_widen_function(regprocedure, regprocedure) FROM PUBLIC;
REVOKE ALL ON llm_stat FROM PUBLIC;

GRANT EXECUTE ON FUNCTION llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_tokenize(text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_detokenize(int[]) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_model_info() TO llm_user, pg_monitor;
GRANT EXECUTE ON FUNCTION llm_stat() TO llm_user, pg_monitor;
GRANT SELECT ON llm_stat TO llm_user, pg_monitor;
GRANT EXECUTE ON FUNCTION llm_recent_requests() TO llm_user, pg_monitor;
GRANT EXECUTE ON FUNCTION llm_generation_arguments() TO llm_user;
