/* pg_llm 0.3 -> 0.4.  Each feature of 0.4 has its own block below, in the
   order the features landed; a fresh install of 0.4 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.4'" to load this file. \quit

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
