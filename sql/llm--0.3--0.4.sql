/* pg_llm 0.3 -> 0.4.  Each feature of 0.4 has its own block below, in the
   order the features landed; a fresh install of 0.4 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.4'" to load this file. \quit

-- background workers that come back
-- Every background worker of the extension comes back after
-- pg_terminate_backend or an error of its own; llm_jobs says when nothing
-- works on a job: runner_pid is the job runner of the job's database (NULL
-- when none runs) and stalled_since is set while a queued or running job's
-- database has had no runner for longer than three llm.job_naptime plus the
-- launcher's delay between two starts (no free runner slot, the launcher
-- away, llm.enable_jobs off).  Both NULL for jobs that need no runner.
CREATE FUNCTION llm_job_runner_state(OUT runner_pid int, OUT stalled_since timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'pg_llm_job_runner_state'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_job_runner_state() IS
'The job runner of the current database (its pid, NULL when none runs) and, when none has run for longer than a few llm.job_naptime, since when (see the llm_jobs view).';

REVOKE ALL ON FUNCTION llm_job_runner_state() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_job_runner_state() TO llm_user, pg_monitor;

-- end of background workers that come back

-- llm_extract: max_tokens follows the schema's bound
--
-- max_tokens DEFAULT NULL: a NULL max_tokens is the schema's longest output
-- in bytes when the schema is bounded (every string and array bounded, as
-- maxLength, maxItems, enum or a pattern's {m,n} counts do), at least 256,
-- so that every output can complete; an unbounded schema keeps 256.
-- CREATE OR REPLACE keeps the function's OID, privileges and dependants.
CREATE OR REPLACE FUNCTION llm_extract(
	input text,
	json_schema jsonb,
	instruction text DEFAULT NULL,
	max_tokens int DEFAULT NULL,
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
'The information json_schema describes, extracted from input: always a value valid against the schema (constrained decoding). NULL input gives NULL. max_tokens NULL (the default): the schema''s longest output in bytes when it is bounded (at least 256), else 256. Errors: 22023 unsupported or invalid schema, 54000 output cut by max_tokens before it was complete.';

-- Jobs on partitioned tables, TRUNCATE, privileges: rows a job skipped are
-- counted by reason (deleted: gone under their key, by a DELETE, a
-- TRUNCATE, a changed key, a move to another partition or a detached
-- partition; filled: the output was set meanwhile; where_false: the where
-- clause no longer holds; prompt_null: the prompt is NULL for the row),
-- shown in llm_jobs after its other columns.
ALTER TABLE llm_job ADD COLUMN skipped_by_reason jsonb NOT NULL DEFAULT '{}';

-- end of jobs on partitioned tables, TRUNCATE, privileges

-- Quotas
-- llm.max_tokens_per_minute is applied at admission: each request reserves
-- what it may use before it is sent.  A job's rows that do not fit wait:
-- llm_jobs shows until when and why.
ALTER TABLE llm_job ADD COLUMN throttled_until timestamptz, ADD COLUMN throttled_reason text;

-- end of quotas

-- Asynchronous store
-- a role lists its own asynchronous requests and drops them all
CREATE FUNCTION llm_async_requests(
	OUT id bigint, OUT status text, OUT submitted_at timestamptz, OUT ended_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pg_llm_async_requests'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION llm_cancel_all() RETURNS bigint
AS 'MODULE_PATHNAME', 'pg_llm_cancel_all'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION llm_async_requests() IS 'The current role''s asynchronous requests (llm_submit) in the store: id, status (queued, running, cancelling, done, failed, cancelled), submitted and ended times.';
COMMENT ON FUNCTION llm_cancel_all() IS 'Drop every asynchronous request of the current role: queued and running ones cancelled, results discarded, their entries freed; returns how many.';

REVOKE ALL ON FUNCTION llm_async_requests() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_cancel_all() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_async_requests() TO llm_user;
GRANT EXECUTE ON FUNCTION llm_cancel_all() TO llm_user;

-- end of asynchronous store

-- the llm_jobs view, once, with the columns the blocks above add: the
-- runner and since when none has run for the job (background workers that
-- come back), rows skipped by reason (jobs on partitioned tables), until when
-- and why the owner's token limit holds the job back (quotas).

CREATE OR REPLACE VIEW llm_jobs AS
SELECT j.id, current_database() AS database, j.target AS "table", j.output_column AS "column",
       j.state, j.mode, j.owner,
       j.rows_done + j.rows_failed + j.rows_skipped + coalesce(q.queued, 0) AS rows_total,
       j.rows_done, j.rows_failed, coalesce(q.in_flight, 0) AS rows_in_flight,
       coalesce(q.queued, 0) AS rows_queued, j.rows_skipped, j.rows_requeued,
       j.tokens_in, j.tokens_out,
       CASE WHEN j.state = 'running' THEN j.rows_per_s END AS rows_per_s,
       CASE WHEN j.state = 'running' AND j.rows_per_s > 0
            THEN make_interval(secs => coalesce(q.queued, 0) / j.rows_per_s) END AS eta,
       j.created_at, j.started_at, j.finished_at, j.last_error,
       CASE WHEN j.state IN ('queued', 'running') THEN r.runner_pid END AS runner_pid,
       CASE WHEN j.state IN ('queued', 'running') THEN r.stalled_since END AS stalled_since,
       j.skipped_by_reason,
       CASE WHEN j.state = 'running' AND j.throttled_until > now() THEN j.throttled_until END AS throttled_until,
       CASE WHEN j.state = 'running' AND j.throttled_until > now() THEN j.throttled_reason END AS throttled_reason
FROM llm_job j
LEFT JOIN LATERAL (
	SELECT count(*) AS queued,
	       count(*) FILTER (WHERE claimed_by IS NOT NULL AND lease_until > now()) AS in_flight
	FROM llm_job_queue WHERE job_id = j.id) q ON true
CROSS JOIN llm_job_runner_state() r
WHERE pg_has_role(j.owner, 'USAGE') OR pg_has_role('pg_read_all_stats', 'USAGE');

COMMENT ON VIEW llm_jobs IS
'Jobs of llm_enrich: state, rows total / done / failed / in flight / queued, tokens in and out, recent rows per second and ETA, times, last error, the runner of an active job (runner_pid) and since when none has run for it (stalled_since), rows skipped by reason (deleted, filled, where_false, prompt_null), and while the owner''s token limit (llm.max_tokens_per_minute) holds its rows back, until when and why (throttled_until, throttled_reason). Shows the jobs of roles the caller has the privileges of (all to pg_read_all_stats).';

-- end of the llm_jobs view

-- streaming and notifications
--
-- llm_generate_stream / llm_chat_stream return a generation as rows while
-- the worker produces it (docs/STREAMING.md): each row the text since the
-- previous one, the last row delta '' with finish_reason and the token
-- counts (NULL on the other rows).  Called in a target list (through a
-- cursor: each FETCH returns as soon as the worker sent the delta); in FROM
-- PostgreSQL materialises the whole set first.  Options as llm_generate /
-- llm_chat, read by name through the argument table.
CREATE FUNCTION llm_generate_stream(
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
RETURNS TABLE(delta text, finish_reason text, prompt_tokens int, completion_tokens int)
AS 'MODULE_PATHNAME', 'pg_llm_generate_stream'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED ROWS 64;

COMMENT ON FUNCTION llm_generate_stream(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text) IS
'llm_generate as rows while it is generated: delta (the text since the previous row; their concatenation is llm_generate''s result), then a last row with delta '''', finish_reason, prompt_tokens and completion_tokens. Call it in a target list or through a cursor (in FROM the whole set is materialised first); closing the cursor aborts the generation.';

CREATE FUNCTION llm_chat_stream(
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
RETURNS TABLE(delta text, finish_reason text, prompt_tokens int, completion_tokens int)
AS 'MODULE_PATHNAME', 'pg_llm_chat_stream'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED ROWS 64;

COMMENT ON FUNCTION llm_chat_stream(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text, text) IS
'llm_chat as rows while it is generated, like llm_generate_stream.';

REVOKE ALL ON FUNCTION llm_generate_stream(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_chat_stream(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_generate_stream(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_chat_stream(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text, text) TO llm_user;

-- llm_submit(..., notify): when the request finishes, fails or is
-- cancelled, NOTIFY notify with the payload '<id> <status>' (no text, no
-- prompt), sent by the job runner of the submitter's database.
CREATE FUNCTION llm_submit_0_4(
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
	notify text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'pg_llm_submit'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_submit(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text)',
                          'llm_submit_0_4(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text, text)');

COMMENT ON FUNCTION llm_submit(text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text[], text, jsonb, text, text, text) IS
'Submit a generation (options as llm_generate) that outlives the statement, the transaction and the session; returns its id at once. Fetch it with llm_result, drop it with llm_cancel; results are kept for llm.async_result_ttl. With notify, NOTIFY that channel with ''<id> <status>'' when it ends.';

-- llm_enrich(..., notify): NOTIFY notify with 'job <id> <state>' when the
-- job ends (done, failed, cancelled).
ALTER TABLE llm_job ADD COLUMN notify text;

CREATE FUNCTION llm_enrich_0_4(
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
	model text DEFAULT NULL,
	notify text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'pg_llm_enrich'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
SELECT llm_widen_function('llm_enrich(regclass, name, text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text, int, text[], text, jsonb, text, text)',
                          'llm_enrich_0_4(regclass, name, text, int, float8, float8, int, float8, float8, bigint, text[], text, boolean, text, text, int, text[], text, jsonb, text, text, text)');

-- end of streaming and notifications
-- chat templates: the prompt as the model's chat template renders it, and
-- its size as a call is charged (answered by the worker without running the
-- model).

CREATE FUNCTION llm_render_chat(messages jsonb, add_generation_prompt boolean DEFAULT true,
                                model text DEFAULT NULL, tools jsonb DEFAULT NULL,
                                enable_thinking boolean DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_render_chat'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_render_chat(jsonb, boolean, text, jsonb, boolean) IS
'The prompt of messages exactly as the model sees it: its chat template (the model file''s own Jinja template, or llm.chat_template) rendered as HF transformers'' apply_chat_template(tokenize => false) does, with add_generation_prompt, tools (a JSON array of tool schemas) and enable_thinking passed to the template.';

CREATE FUNCTION llm_count_tokens(prompt text, model text DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'pg_llm_count_tokens'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_count_tokens(text, text) IS
'The prompt tokens llm_generate(prompt) is charged for: the text as the user turn of the chat template, template included.';

CREATE FUNCTION llm_count_tokens(messages jsonb, model text DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'pg_llm_count_tokens_messages'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION llm_count_tokens(jsonb, text) IS
'The prompt tokens llm_chat(messages) is charged for, chat template included.';

REVOKE ALL ON FUNCTION llm_render_chat(jsonb, boolean, text, jsonb, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_count_tokens(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_count_tokens(jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_render_chat(jsonb, boolean, text, jsonb, boolean) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_count_tokens(text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_count_tokens(jsonb, text) TO llm_user;

-- end of chat templates
-- embeddings and retrieval
-- llm_embed makes an embedding of a text (an EMBED request: one prefill,
-- the model's pooled final hidden state); llm_similarity, llm_rerank and
-- llm_cosine_distance compare them; llm_chunk cuts documents into pieces
-- that fit the model.  See docs/EMBEDDINGS.md.
--
-- Volatility: the functions that call a model are STABLE, so a query's
-- embedding is computed once per statement where the planner may (an index
-- scan's key: ORDER BY embedding <=> llm_embed($1) LIMIT k), never once per
-- row as a VOLATILE function would be; they are not IMMUTABLE because the
-- served model file can change (a reload, llm.models), which must never
-- leave a generated column or an expression index holding vectors of
-- another model.  llm_cosine_distance is arithmetic: IMMUTABLE STRICT.
CREATE FUNCTION llm_embed(
	input text,
	model text DEFAULT NULL,
	truncate boolean DEFAULT false,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL)
RETURNS real[]
AS 'MODULE_PATHNAME', 'pg_llm_embed'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED COST 1000;

COMMENT ON FUNCTION llm_embed(text, text, boolean, text, text) IS
'The embedding of input by the model (model => alias, NULL the default): a real[] of the model''s embedding length. NULL input gives NULL. STABLE, not VOLATILE, so a query''s embedding is computed once and an index can serve ORDER BY embedding <=> llm_embed($1); not IMMUTABLE, because the model file can change under a generated column or an expression index. Errors: 54000 an input over the model''s limit unless truncate => true (then cut to the limit), 22023 empty input or bad options; on_error => ''null'' turns a failed input into NULL.';

CREATE FUNCTION llm_embed(
	inputs text[],
	model text DEFAULT NULL,
	truncate boolean DEFAULT false,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL)
RETURNS real[]
AS 'MODULE_PATHNAME', 'pg_llm_embed_array'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED COST 1000;

COMMENT ON FUNCTION llm_embed(text[], text, boolean, text, text) IS
'The embeddings of inputs, all sent at once: a two-dimensional real[] whose row i is inputs[i]''s embedding; a NULL input (or a failure under on_error => ''null'') is a row of NULLs; NULL when no input has an embedding; an empty array gives an empty array. Same options, errors and volatility as llm_embed(text).';

CREATE FUNCTION llm_similarity(a text, b text, model text DEFAULT NULL)
RETURNS float8
AS 'MODULE_PATHNAME', 'pg_llm_similarity'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED COST 1000;

COMMENT ON FUNCTION llm_similarity(text, text, text) IS
'The cosine similarity of the embeddings of a and b (1 same direction, -1 opposite). NULL if either is NULL. STABLE as llm_embed.';

CREATE FUNCTION llm_rerank(query text, documents text[], model text DEFAULT NULL)
RETURNS TABLE(index int, score float8)
AS 'MODULE_PATHNAME', 'pg_llm_rerank'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED COST 1000 ROWS 10;

COMMENT ON FUNCTION llm_rerank(text, text[], text) IS
'Each document''s relevance to query as the cosine similarity of their embeddings, best first: index is the document''s position in documents. A NULL document has score NULL and comes last. One embedding per document and one for the query, all sent at once.';

CREATE FUNCTION llm_chunk(input text, max_tokens int, overlap int DEFAULT 0, model text DEFAULT NULL)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'pg_llm_chunk'
LANGUAGE C CALLED ON NULL INPUT STABLE PARALLEL RESTRICTED COST 1000 ROWS 10;

COMMENT ON FUNCTION llm_chunk(text, int, int, text) IS
'input cut at sentence and paragraph ends into pieces of at most max_tokens tokens of the model''s tokenizer (as llm_tokenize counts them, without special tokens), in order; each next piece starts with the whole sentences of the previous one that fit in overlap tokens. A sentence longer than max_tokens is cut into windows of tokens. Errors: 22023 max_tokens < 1 or overlap outside 0 .. max_tokens - 1.';

CREATE FUNCTION llm_cosine_distance(real[], real[])
RETURNS float8
AS 'MODULE_PATHNAME', 'pg_llm_cosine_distance'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION llm_cosine_distance(real[], real[]) IS
'1 - the cosine similarity of two embeddings as real[] (pgvector''s <=> on vector; NaN when either is all zeros). Errors: 22000 different lengths or empty, 22004 NULL elements, 22023 not one-dimensional.';

REVOKE ALL ON FUNCTION llm_embed(text, text, boolean, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_embed(text[], text, boolean, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_similarity(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_rerank(text, text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_chunk(text, int, int, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_embed(text, text, boolean, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_embed(text[], text, boolean, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_similarity(text, text, text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_rerank(text, text[], text) TO llm_user;
GRANT EXECUTE ON FUNCTION llm_chunk(text, int, int, text) TO llm_user;

-- Jobs that fill embedding columns:
-- llm_enrich on a real[], float8[] or pgvector vector column fills it with
-- each row's embedding of the prompt's text (docs/EMBEDDINGS.md).  The
-- sha256 of the model file that made the rows a job wrote last is kept in
-- llm_job.model_sha256 and shown by llm_jobs, next to the job's counts, for
-- every job: after a model change, the rows to make again are those of
-- jobs whose model_sha256 is not the served model's (llm_models.sha256).
ALTER TABLE llm_job ADD COLUMN model_sha256 text;

CREATE OR REPLACE VIEW llm_jobs AS
SELECT j.id, current_database() AS database, j.target AS "table", j.output_column AS "column",
       j.state, j.mode, j.owner,
       j.rows_done + j.rows_failed + j.rows_skipped + coalesce(q.queued, 0) AS rows_total,
       j.rows_done, j.rows_failed, coalesce(q.in_flight, 0) AS rows_in_flight,
       coalesce(q.queued, 0) AS rows_queued, j.rows_skipped, j.rows_requeued,
       j.tokens_in, j.tokens_out,
       CASE WHEN j.state = 'running' THEN j.rows_per_s END AS rows_per_s,
       CASE WHEN j.state = 'running' AND j.rows_per_s > 0
            THEN make_interval(secs => coalesce(q.queued, 0) / j.rows_per_s) END AS eta,
       j.created_at, j.started_at, j.finished_at, j.last_error,
       CASE WHEN j.state IN ('queued', 'running') THEN r.runner_pid END AS runner_pid,
       CASE WHEN j.state IN ('queued', 'running') THEN r.stalled_since END AS stalled_since,
       j.skipped_by_reason,
       CASE WHEN j.state = 'running' AND j.throttled_until > now() THEN j.throttled_until END AS throttled_until,
       CASE WHEN j.state = 'running' AND j.throttled_until > now() THEN j.throttled_reason END AS throttled_reason,
       j.model_sha256
FROM llm_job j
LEFT JOIN LATERAL (
	SELECT count(*) AS queued,
	       count(*) FILTER (WHERE claimed_by IS NOT NULL AND lease_until > now()) AS in_flight
	FROM llm_job_queue WHERE job_id = j.id) q ON true
CROSS JOIN llm_job_runner_state() r
WHERE pg_has_role(j.owner, 'USAGE') OR pg_has_role('pg_read_all_stats', 'USAGE');

COMMENT ON COLUMN llm_jobs.model_sha256 IS
'The sha256 of the model file that made the rows the job wrote last (llm_models.sha256 of its model then); NULL before its first row.';

-- end of embeddings and retrieval

-- chat template options of llm_chat
--
-- llm_chat gains tools and enable_thinking (passed to the chat template, as
-- llm_render_chat's) and strip_thinking (default true: the answer after a
-- leading <think>...</think> section and the whitespace after it), appended
-- in place so the function keeps its OID and grants.
CREATE FUNCTION llm_chat_0_4(
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
	model text DEFAULT NULL,
	tools jsonb DEFAULT NULL,
	enable_thinking boolean DEFAULT NULL,
	strip_thinking boolean DEFAULT true)
RETURNS text
AS 'MODULE_PATHNAME', 'pg_llm_chat'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;
SELECT llm_widen_function('llm_chat(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text, text)',
                          'llm_chat_0_4(jsonb, int, float8, float8, int, float8, float8, bigint, text[], text, text, text[], text, jsonb, text, text, jsonb, boolean, boolean)');

-- end of chat template options of llm_chat
