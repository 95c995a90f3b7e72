/* pg_llm 0.2 -> 0.3: what the release changes, one section per feature.
   Each object is created, or widened in place, once and directly in its 0.3
   form; a fresh install of 0.3 is 0.2 plus this script. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.3'" to load this file. \quit

-- The options of the generation functions
--
-- llm_generate (both), llm_complete and llm_chat gain these arguments at the
-- end of their argument lists, in the order of the library's argument table
-- (llm_generation_arguments()), and read them by name:
--   choices, regex, json_schema  structured output: the output is exactly one
--                                choice, a full match of the pattern, or JSON
--                                valid against the schema (docs/STRUCTURED_OUTPUT.md)
--   priority                     the scheduling class, 'interactive' | 'batch'
--                                (NULL: the session's class, llm.priority;
--                                batch sites are batch)
--   model                        the alias of the model that answers (several
--                                models: the llm_models view, docs/MODELS.md)
-- llm_tokenize and llm_detokenize gain model.  Each function is widened in
-- place by llm_widen_function from a template named <function>_0_3 that has
-- the new argument list (same OIDs: views, materialized views and
-- SQL-standard bodies stored against them keep working).

CREATE FUNCTION llm_generate_0_3(
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
SELECT llm_widen_function('llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
                          'llm_generate_0_3(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text)');

CREATE FUNCTION llm_generate_0_3(
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
SELECT llm_widen_function('llm_generate(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
                          'llm_generate_0_3(text[], int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text)');

CREATE FUNCTION llm_complete_0_3(
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
SELECT llm_widen_function('llm_complete(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text)',
                          'llm_complete_0_3(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text)');

CREATE FUNCTION llm_chat_0_3(
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
SELECT llm_widen_function('llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text)',
                          'llm_chat_0_3(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text, text)');

-- STRICT functions: the default is 'default' (a NULL model gives NULL)
CREATE FUNCTION llm_tokenize_0_3(text, model text DEFAULT 'default')
RETURNS int[]
AS 'MODULE_PATHNAME', 'pg_llm_tokenize'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_tokenize(text)', 'llm_tokenize_0_3(text, text)');

CREATE FUNCTION llm_detokenize_0_3(int[], model text DEFAULT 'default')
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_detokenize'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_detokenize(int[])', 'llm_detokenize_0_3(int[], text)');

COMMENT ON FUNCTION llm_generate(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text) IS
'Generate a reply to prompt (chat template applied unless raw). NULL prompt gives NULL; a NULL option means its default. choices, regex or json_schema (one of them) constrain the output to exactly one choice, a full match of the pattern, or compact JSON valid against the schema (docs/STRUCTURED_OUTPUT.md). Errors: 22023 invalid argument, grammar or empty prompt, 54000 prompt longer than the context or output cut by max_tokens before its grammar was complete, 55000 worker not running. on_error => ''null'' turns a per-row failure into NULL plus a WARNING.';

-- end of the options of the generation functions

-- The SQL AI functions (docs/STRUCTURED_OUTPUT.md)
--
-- llm_extract, llm_classify, llm_classify_scores, llm_filter and the llm_agg
-- aggregate.  The functions take the options of the generation functions
-- they use, priority and model included, read by name from the argument
-- table.

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
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pg_llm_extract'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_extract(text, jsonb, text, int, float8, float8, int, float8, float8, bigint, text, text, text, text) IS
'The information json_schema describes, extracted from input: always a value valid against the schema (constrained decoding). NULL input gives NULL. Errors: 22023 unsupported or invalid schema, 54000 output cut by max_tokens before it was complete.';

CREATE FUNCTION llm_classify(
	input text,
	labels text[],
	instruction text DEFAULT NULL,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_classify'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_classify(text, text[], text, text, text, text, text) IS
'The label of labels the model finds most likely for input, by the log-likelihood of each label followed by the end of the turn (no decoding): always exactly one of labels. NULL input gives NULL. Errors: 22023 labels NULL, empty, with a NULL, empty or duplicate element.';

CREATE FUNCTION llm_classify_scores(
	input text,
	labels text[],
	instruction text DEFAULT NULL,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pg_llm_classify_scores'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_classify_scores(text, text[], text, text, text, text, text) IS
'llm_classify''s scores as {label: probability}: the softmax over the labels of their log-likelihoods, summing to 1.';

CREATE FUNCTION llm_filter(
	input text,
	question text,
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pg_llm_filter'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_filter(text, text, text, text, text, text) IS
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

REVOKE ALL ON FUNCTION llm_extract(text, jsonb, text, int, float8, float8, int, float8, float8, bigint, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_classify(text, text[], text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_classify_scores(text, text[], text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_filter(text, text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg_trans(internal, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg_trans(internal, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg_final(internal) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_agg(text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_extract(text, jsonb, text, int, float8, float8, int, float8, float8, bigint, text, text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_classify(text, text[], text, text, text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_classify_scores(text, text[], text, text, text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_filter(text, text, text, text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_agg(text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_agg(text, text, jsonb) TO llm_user;
-- end of the SQL AI functions

-- Fairness
--
-- Priorities, fair share and quotas: the priority option (first section)
-- and llm_usage, the tokens each (role, database) used, from the worker's
-- shared memory.

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

-- Several models
--
-- The model option (first section) and the llm_models view.

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

-- The submitter in llm_recent_requests
--
-- Appending result columns to a function returning record, in place (pg/sql/widen.c).
CREATE FUNCTION llm_widen_result(target regprocedure, template regprocedure)
RETURNS void
AS 'MODULE_PATHNAME', 'pg_llm_widen_result'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION llm_widen_result(regprocedure, regprocedure) IS
'Extension updates only (superuser): give target (returning record) the result columns of template (target''s columns, then new ones) in place, keeping its OID, and drop template.';

REVOKE ALL ON FUNCTION llm_widen_result(regprocedure, regprocedure) FROM PUBLIC;

-- llm_recent_requests() gains the submitter: pid, role, database.  Widened in
-- place so user views on it keep working (they keep their columns).
CREATE FUNCTION llm_recent_requests_0_3(
	OUT seq bigint,
	OUT finished_at timestamptz,
	OUT outcome text,
	OUT prompt_tokens int,
	OUT cached_tokens int,
	OUT completion_tokens int,
	OUT ttft_ms float8,
	OUT tpot_ms float8,
	OUT total_ms float8,
	OUT pid int,
	OUT role name,
	OUT database name)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_recent_requests'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 4096;

SELECT llm_widen_result('llm_recent_requests()', 'llm_recent_requests_0_3()');

COMMENT ON FUNCTION llm_recent_requests() IS
'The last 4096 requests the worker finished (oldest first): outcome, prompt/cached/completion tokens, time to first token, time per output token and total time measured in the worker (ms), and the submitter''s pid, role and database. Cleared by llm_stat_reset().';

-- end of the submitter in llm_recent_requests

-- Progress of running statements
--
-- llm_progress: one row per backend whose current statement has asked the
-- llm worker for something.

CREATE FUNCTION llm_progress(
	OUT pid int,
	OUT statement_start timestamptz,
	OUT first_call timestamptz,
	OUT last_change timestamptz,
	OUT calls_submitted bigint,
	OUT calls_finished bigint,
	OUT calls_failed bigint,
	OUT calls_aborted bigint,
	OUT prompt_tokens bigint,
	OUT cached_tokens bigint,
	OUT completion_tokens bigint,
	OUT batch_rows bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_progress'
LANGUAGE C VOLATILE PARALLEL SAFE ROWS 100;

COMMENT ON FUNCTION llm_progress() IS
'Raw per-backend LLM counters of the statement each backend last ran (see the llm_progress view).';

CREATE VIEW llm_progress AS
SELECT p.pid, a.datname AS database, a.usename AS role, a.backend_type,
       p.calls_submitted, p.calls_finished, p.calls_failed, p.calls_aborted,
       p.calls_submitted - p.calls_finished - p.calls_failed - p.calls_aborted AS calls_in_flight,
       p.prompt_tokens, p.cached_tokens, p.completion_tokens,
       p.batch_rows AS batch_rows_done,
       clock_timestamp() - p.statement_start AS elapsed,
       p.statement_start, p.last_change, a.query
FROM llm_progress() p
JOIN pg_stat_activity a ON a.pid = p.pid AND a.query_start = p.statement_start AND a.state = 'active';

COMMENT ON VIEW llm_progress IS
'One row per running statement that calls the llm worker: calls submitted / finished / failed / aborted / in flight, tokens, rows returned by its LLM Batch nodes, elapsed time. Like pg_stat_activity, other roles'' statements show only to members of pg_read_all_stats.';

REVOKE ALL ON FUNCTION llm_progress() FROM PUBLIC;
REVOKE ALL ON llm_progress FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_progress() TO llm_user, pg_monitor;
GRANT SELECT ON llm_progress TO llm_user, pg_monitor;
-- end of progress of running statements

-- Asynchronous requests (docs/JOBS.md)
--
-- llm_submit returns at once, llm_result fetches, llm_cancel drops.
-- llm_submit takes every generation option of llm_generate, in the
-- argument table's order, read by name.
CREATE FUNCTION llm_submit(
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
RETURNS bigint
AS 'MODULE_PATHNAME', 'pg_llm_submit'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_submit(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text) IS
'Submit a generation (options as llm_generate) that outlives the statement, the transaction and the session; returns its id at once. Fetch it with llm_result, drop it with llm_cancel; results are kept for llm.async_result_ttl.';

CREATE FUNCTION llm_result(
	id bigint,
	wait boolean DEFAULT true,
	OUT text text,
	OUT finish_reason text,
	OUT prompt_tokens int,
	OUT cached_tokens int,
	OUT completion_tokens int,
	OUT ttft_ms float8,
	OUT total_ms float8,
	OUT status text)
RETURNS record
AS 'MODULE_PATHNAME', 'pg_llm_result'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_result(bigint, boolean) IS
'The outcome of an llm_submit request, as llm_complete gives it, with status (queued | running | done | failed | cancelled); waits for it unless wait is false. Only the submitting role or a superuser may fetch it.';

CREATE FUNCTION llm_cancel(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pg_llm_cancel'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_cancel(bigint) IS
'Cancel a queued or running llm_submit request, or drop a finished one''s result; false if there is no such request.';

REVOKE ALL ON FUNCTION llm_submit(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_result(bigint, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_cancel(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_submit(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_result(bigint, boolean) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_cancel(bigint) TO llm_user;
-- end of asynchronous requests

-- Jobs (docs/JOBS.md)
--
-- llm_enrich fills a column in the background, resumably.  It takes every
-- generation option of llm_generate but on_error (a failed row is retried,
-- never written NULL), in the argument table's order, read by name.
CREATE TYPE llm_job_state AS ENUM ('queued', 'running', 'paused', 'done', 'failed', 'cancelled');

CREATE TABLE llm_job (
	id bigserial PRIMARY KEY,
	owner regrole NOT NULL,
	target regclass NOT NULL,
	output_column name NOT NULL,
	prompt text NOT NULL,
	where_clause text,
	options jsonb NOT NULL DEFAULT '{}',
	mode text NOT NULL CHECK (mode IN ('once', 'continuous')),
	max_attempts int NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
	search_path text NOT NULL,
	state llm_job_state NOT NULL DEFAULT 'queued',
	created_at timestamptz NOT NULL DEFAULT now(),
	started_at timestamptz,
	finished_at timestamptz,
	last_progress_at timestamptz,
	rows_done bigint NOT NULL DEFAULT 0,
	rows_failed bigint NOT NULL DEFAULT 0,
	rows_skipped bigint NOT NULL DEFAULT 0,
	rows_requeued bigint NOT NULL DEFAULT 0,
	tokens_in bigint NOT NULL DEFAULT 0,
	tokens_out bigint NOT NULL DEFAULT 0,
	rows_per_s float8,
	last_error text
);

-- one job at a time per column (failed jobs can be resumed, so they count)
CREATE UNIQUE INDEX llm_job_one_per_column ON llm_job (target, output_column)
	WHERE state NOT IN ('done', 'cancelled');

CREATE TABLE llm_job_queue (
	job_id bigint NOT NULL REFERENCES llm_job (id) ON DELETE CASCADE,
	key text[] NOT NULL,
	seq bigserial NOT NULL,
	enqueued_at timestamptz NOT NULL DEFAULT now(),
	attempts int NOT NULL DEFAULT 0,
	claimed_by bigint,
	lease_until timestamptz,
	last_error text,
	PRIMARY KEY (job_id, key)
);

CREATE INDEX llm_job_queue_order ON llm_job_queue (job_id, seq);

CREATE TABLE llm_job_error (
	job_id bigint NOT NULL REFERENCES llm_job (id) ON DELETE CASCADE,
	key text[] NOT NULL,
	attempts int NOT NULL,
	sqlstate text NOT NULL,
	error text NOT NULL,
	failed_at timestamptz NOT NULL,
	PRIMARY KEY (job_id, key)
);

COMMENT ON TABLE llm_job IS 'Jobs of llm_enrich (see the llm_jobs view); written by the extension only.';
COMMENT ON TABLE llm_job_queue IS 'Rows jobs still have to fill, with their claims; written by the extension only.';
COMMENT ON TABLE llm_job_error IS 'Rows jobs gave up on, with their last error (see the llm_job_errors view).';

-- dumped by pg_dump with their data, so a restored database keeps its jobs
SELECT pg_catalog.pg_extension_config_dump('llm_job', '');
SELECT pg_catalog.pg_extension_config_dump('llm_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('llm_job_queue', '');
SELECT pg_catalog.pg_extension_config_dump('llm_job_queue_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('llm_job_error', '');

-- any change of a job (created, controlled, restored) wakes the database's runner at commit
CREATE FUNCTION llm_job_wake()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pg_llm_job_wake'
LANGUAGE C VOLATILE;

CREATE TRIGGER llm_job_wake AFTER INSERT OR UPDATE ON llm_job
	FOR EACH STATEMENT EXECUTE FUNCTION llm_job_wake();

-- the row triggers a continuous job installs on its table
CREATE FUNCTION llm_job_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pg_llm_job_trigger'
LANGUAGE C VOLATILE;

CREATE FUNCTION llm_enrich(
	target regclass,
	output_column name,
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
	where_clause text DEFAULT NULL,
	mode text DEFAULT 'once',
	max_attempts int DEFAULT 3,
	choices text[] DEFAULT NULL,
	regex text DEFAULT NULL,
	json_schema jsonb DEFAULT NULL,
	priority text DEFAULT NULL,
	model text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'pg_llm_enrich'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION llm_enrich(regclass, name, text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text, int, text[], text, jsonb, text, text) IS
'Start a job filling output_column of every row of target where it is NULL (and where_clause holds) with the generation from prompt, an SQL expression over the row, in the background, in short transactions, resumably; mode ''continuous'' also fills rows inserted or updated later. Options as llm_generate (choices, regex and json_schema constrain every result; the job runs in the batch class unless priority says otherwise). Returns the job id (llm_jobs). Needs a primary key.';

CREATE FUNCTION llm_job_pause(job bigint) RETURNS void
AS 'MODULE_PATHNAME', 'pg_llm_job_pause' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION llm_job_resume(job bigint) RETURNS void
AS 'MODULE_PATHNAME', 'pg_llm_job_resume' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION llm_job_cancel(job bigint) RETURNS void
AS 'MODULE_PATHNAME', 'pg_llm_job_cancel' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION llm_job_retry_failed(job bigint) RETURNS bigint
AS 'MODULE_PATHNAME', 'pg_llm_job_retry_failed' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION llm_job_pause(bigint) IS 'Pause a queued or running job: its rows in flight are given back; llm_job_resume continues it.';
COMMENT ON FUNCTION llm_job_resume(bigint) IS 'Resume a paused or failed job.';
COMMENT ON FUNCTION llm_job_cancel(bigint) IS 'Cancel a job: its queue is emptied, a continuous job''s triggers are dropped; written rows stay.';
COMMENT ON FUNCTION llm_job_retry_failed(bigint) IS 'Queue the rows a job gave up on (llm_job_errors) again; returns how many.';

CREATE VIEW llm_jobs AS
SELECT j.id, current_database() AS database, j.target AS "table", j.output_column AS "column",
       j.state, j.mode, j.owner,
       j.rows_done + j.rows_failed + j.rows_skipped + coalesce(q.queued, 0) AS rows_total,
       j.rows_done, j.rows_failed, coalesce(q.in_flight, 0) AS rows_in_flight,
       coalesce(q.queued, 0) AS rows_queued, j.rows_skipped, j.rows_requeued,
       j.tokens_in, j.tokens_out,
       CASE WHEN j.state = 'running' THEN j.rows_per_s END AS rows_per_s,
       CASE WHEN j.state = 'running' AND j.rows_per_s > 0
            THEN make_interval(secs => coalesce(q.queued, 0) / j.rows_per_s) END AS eta,
       j.created_at, j.started_at, j.finished_at, j.last_error
FROM llm_job j
LEFT JOIN LATERAL (
	SELECT count(*) AS queued,
	       count(*) FILTER (WHERE claimed_by IS NOT NULL AND lease_until > now()) AS in_flight
	FROM llm_job_queue WHERE job_id = j.id) q ON true
WHERE pg_has_role(j.owner, 'USAGE') OR pg_has_role('pg_read_all_stats', 'USAGE');

COMMENT ON VIEW llm_jobs IS
'Jobs of llm_enrich: state, rows total / done / failed / in flight / queued, tokens in and out, recent rows per second and ETA, times, last error. Shows the jobs of roles the caller has the privileges of (all to pg_read_all_stats).';

CREATE VIEW llm_job_errors AS
SELECT e.job_id, j.target AS "table", j.output_column AS "column", e.key, e.attempts, e.sqlstate, e.error,
       e.failed_at
FROM llm_job_error e JOIN llm_job j ON j.id = e.job_id
WHERE pg_has_role(j.owner, 'USAGE') OR pg_has_role('pg_read_all_stats', 'USAGE');

COMMENT ON VIEW llm_job_errors IS
'Rows a job gave up on after max_attempts, with the primary key, attempts and last error; llm_job_retry_failed queues them again.';

REVOKE ALL ON FUNCTION llm_job_wake() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_job_trigger() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_enrich(regclass, name, text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text, int, text[], text, jsonb, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_job_pause(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_job_resume(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_job_cancel(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_job_retry_failed(bigint) FROM PUBLIC;
REVOKE ALL ON llm_job, llm_job_queue, llm_job_error, llm_jobs, llm_job_errors FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_job_trigger() TO llm_user;
GRANT EXECUTE ON FUNCTION llm_enrich(regclass, name, text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text, int, text[], text, jsonb, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_job_pause(bigint) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_job_resume(bigint) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_job_cancel(bigint) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_job_retry_failed(bigint) TO llm_user;
GRANT SELECT ON llm_jobs, llm_job_errors TO llm_user, pg_monitor;
-- end of jobs
