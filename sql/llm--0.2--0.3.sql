/* pg_llm 0.2 -> 0.3.  Each feature's part is one block below, headed by its name. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.3'" to load this file. \quit

-- several models
-- model => 'alias' on every generation function and on llm_tokenize /
-- llm_detokenize (widened in place: same OIDs), and the llm_models view.
CREATE FUNCTION llm_generate_next(
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
	model text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
						  'llm_generate_next(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text)');

CREATE FUNCTION llm_generate_next(
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
	model text DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'pg_llm_generate_array'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
						  'llm_generate_next(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text)');

CREATE FUNCTION llm_complete_next(
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
	model text DEFAULT NULL,
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
SELECT llm_widen_function('llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
						  'llm_complete_next(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text)');

CREATE FUNCTION llm_chat_next(
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
	model text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_chat'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text)',
						  'llm_chat_next(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text)');

-- STRICT functions: the default is 'default' (a NULL model gives NULL)
CREATE FUNCTION llm_tokenize_next(text, model text DEFAULT 'default')
RETURNS int[]
AS 'MODULE_PATHNAME', 'pg_llm_tokenize'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_tokenize(text)', 'llm_tokenize_next(text, text)');

CREATE FUNCTION llm_detokenize_next(int[], model text DEFAULT 'default')
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_detokenize'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_detokenize(int[])', 'llm_detokenize_next(int[], text)');

CREATE FUNCTION llm_models(
	OUT alias text,
	OUT path text,
	OUT architecture text,
	OUT parameters bigint,
	OUT context_length int,
	OUT state text,
	OUT error text,
	OUT requests_running int,
	OUT requests_waiting int,
	OUT requests_finished bigint,
	OUT requests_failed bigint,
	OUT requests_aborted bigint,
	OUT prompt_tokens bigint,
	OUT completion_tokens bigint,
	OUT batch_size int,
	OUT max_batch_size int,
	OUT kv_blocks_used int,
	OUT kv_blocks_total int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_models'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 8;

COMMENT ON FUNCTION llm_models() IS
'The models the worker serves (llm.model as ''default'', then llm.models'' aliases): file, architecture, parameter count, context length, state (loading | ready | failed) and error, requests, tokens, batch sizes and KV cache blocks per model.';

CREATE VIEW llm_models AS SELECT * FROM llm_models();

COMMENT ON VIEW llm_models IS 'One row per model the llm worker serves (see llm_models()).';

REVOKE ALL ON FUNCTION llm_models() FROM PUBLIC;
REVOKE ALL ON llm_models FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_models() TO llm_user, pg_monitor;
GRANT SELECT ON llm_models TO llm_user, pg_monitor;
-- end of several models
