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
