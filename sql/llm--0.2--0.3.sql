/* pg_llm 0.2 -> 0.3.  Each feature of 0.3 has its own block below. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.3'" to load this file. \quit

-- structured output and the SQL AI functions (docs/STRUCTURED_OUTPUT.md)
--
-- choices, regex and json_schema are appended to llm_generate (both),
-- llm_complete and llm_chat in place (llm_widen_function: same OIDs, stored
-- views keep working); llm_extract, llm_classify, llm_classify_scores,
-- llm_filter and the llm_agg aggregate are new.

CREATE FUNCTION llm_generate_grammar(
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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
                          'llm_generate_grammar(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb)');

CREATE FUNCTION llm_generate_grammar(
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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'pg_llm_generate_array'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
                          'llm_generate_grammar(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb)');

CREATE FUNCTION llm_complete_grammar(
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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
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
                          'llm_complete_grammar(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb)');

CREATE FUNCTION llm_chat_grammar(
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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_chat'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text)',
                          'llm_chat_grammar(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb)');

COMMENT ON FUNCTION llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb) IS
'Generate a reply to prompt (chat template applied unless raw). NULL prompt gives NULL; a NULL option means its default. choices, regex or json_schema (one of them) constrain the output to exactly one choice, a full match of the pattern, or compact JSON valid against the schema (docs/STRUCTURED_OUTPUT.md). Errors: 22023 invalid argument, grammar or empty prompt, 54000 prompt longer than the context or output cut by max_tokens before its grammar was complete, 55000 worker not running. on_error => ''null'' turns a per-row failure into NULL plus a WARNING.';

CREATE FUNCTION llm_extract(
	input text,
	json_schema jsonb,
	instruction text DEFAULT NULL,
	max_tokens int DEFAULT 256,
	temperature float8 DEFAULT 0,
	top_p float8 DEFAULT 1,
	top_k int DEFAULT 0,
	min_p float8 DEFAULT 0,
	repetition_penalty float8 DEFAULT 1,
	seed bigint DEFAULT NULL,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pg_llm_extract'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_extract(text, jsonb, text, int, float8, float8, int, float8, float8, bigint, text, text) IS
'The information json_schema describes, extracted from input: always a value valid against the schema (constrained decoding). NULL input gives NULL. Errors: 22023 unsupported or invalid schema, 54000 output cut by max_tokens before it was complete.';

CREATE FUNCTION llm_classify(
	input text,
	labels text[],
	instruction text DEFAULT NULL,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise')
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_classify'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_classify(text, text[], text, text, text) IS
'The label of labels the model finds most likely for input, by the log-likelihood of each label followed by the end of the turn (no decoding): always exactly one of labels. NULL input gives NULL. Errors: 22023 labels NULL, empty, with a NULL, empty or duplicate element.';

CREATE FUNCTION llm_classify_scores(
	input text,
	labels text[],
	instruction text DEFAULT NULL,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pg_llm_classify_scores'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_classify_scores(text, text[], text, text, text) IS
'llm_classify''s scores as {label: probability}: the softmax over the labels of their log-likelihoods, summing to 1.';

CREATE FUNCTION llm_filter(
	input text,
	question text,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise')
RETURNS boolean
AS 'MODULE_PATHNAME', 'pg_llm_filter'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_filter(text, text, text, text) IS
'Whether the answer to the yes/no question about input is yes, by the likelihood of the yes and no answers (no decoding); for WHERE and JOIN ON (high COST: cheaper conditions run first). NULL input gives NULL.';

CREATE FUNCTION llm_agg_trans(internal, text, text)
RETURNS internal
AS 'MODULE_PATHNAME', 'pg_llm_agg_trans'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION llm_agg_trans(internal, text, text, jsonb)
RETURNS internal
AS 'MODULE_PATHNAME', 'pg_llm_agg_trans'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION llm_agg_final(internal)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_agg_final'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

-- aggregates take no defaults: the options are a third argument
CREATE AGGREGATE llm_agg(input text, instruction text) (
	SFUNC = llm_agg_trans,
	STYPE = internal,
	FINALFUNC = llm_agg_final,
	PARALLEL = RESTRICTED
);

CREATE AGGREGATE llm_agg(input text, instruction text, options jsonb) (
	SFUNC = llm_agg_trans,
	STYPE = internal,
	FINALFUNC = llm_agg_final,
	PARALLEL = RESTRICTED
);

COMMENT ON AGGREGATE llm_agg(text, text) IS
'One answer to instruction over all non-NULL inputs, whatever their total length: map-reduce over context-sized chunks, generated together as one batch per level (docs/STRUCTURED_OUTPUT.md). No rows give NULL.';

COMMENT ON AGGREGATE llm_agg(text, text, jsonb) IS
'llm_agg with options: generation options by name ({"max_tokens": 128, "on_error": "null", ...}) and chunk_tokens (the most tokens of rows per chunk).';

REVOKE ALL ON FUNCTION llm_extract(text, jsonb, text, int, float8, float8, int, float8, float8, bigint, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_classify(text, text[], text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_classify_scores(text, text[], text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_filter(text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg_trans(internal, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg_trans(internal, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg_final(internal) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg(text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_extract(text, jsonb, text, int, float8, float8, int, float8, float8, bigint, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_classify(text, text[], text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_classify_scores(text, text[], text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_filter(text, text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_agg(text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_agg(text, text, jsonb) TO llm_user;

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function(
	'llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb)'::regprocedure,
	'llm_widen_template_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text)'::regprocedure);

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'pg_llm_generate_array'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function(
	'llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb)'::regprocedure,
	'llm_widen_template_generate_array(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text)'::regprocedure);

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
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
	'llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb)'::regprocedure,
	'llm_widen_template_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text)'::regprocedure);

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_chat'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function(
	'llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb)'::regprocedure,
	'llm_widen_template_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text)'::regprocedure);

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_generate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text)',
						  'llm_generate_next(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text)');

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'pg_llm_generate_array'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text)',
						  'llm_generate_next(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text)');

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL,
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
SELECT llm_widen_function('llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text)',
						  'llm_complete_next(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text)');

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
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_chat'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text)',
						  'llm_chat_next(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text, text)');

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
	OUT sha256 text,
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
'The models the worker serves (llm.model as ''default'', then llm.models'' aliases): file and its sha256, architecture, parameter count, context length, state (loading | ready | failed) and error, requests, tokens, batch sizes and KV cache blocks per model.';

CREATE VIEW llm_models AS SELECT * FROM llm_models();

COMMENT ON VIEW llm_models IS 'One row per model the llm worker serves (see llm_models()).';

REVOKE ALL ON FUNCTION llm_models() FROM PUBLIC;
REVOKE ALL ON llm_models FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_models() TO llm_user, pg_monitor;
GRANT SELECT ON llm_models TO llm_user, pg_monitor;
-- end of several models
