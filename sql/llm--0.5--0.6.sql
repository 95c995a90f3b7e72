/* pg_llm 0.5 -> 0.6.  Each feature of 0.6 has its own block below, in the
   order the features landed; a fresh install of 0.6 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.6'" to load this file. \quit

-- semantic joins
-- llm_join(input, question, candidates): the 1-based positions of the
-- candidates for which llm_filter(input || E'\n\nCandidate:\n' || candidate,
-- question) is true, each row's candidates scored in forked requests that
-- share the row's prompt (docs/SEMANTIC_JOINS.md).  An array rather than a
-- set so that it composes in target lists, WHERE (cardinality, = ANY) and
-- LEFT JOIN LATERAL unnest(...).
CREATE FUNCTION llm_join(
	input text,
	question text,
	candidates text[],
	system text DEFAULT NULL,
	on_error text DEFAULT 'raise',
	priority text DEFAULT NULL,
	model text DEFAULT NULL,
	tools jsonb DEFAULT NULL,
	enable_thinking boolean DEFAULT NULL)
RETURNS int[]
AS 'MODULE_PATHNAME', 'pg_llm_join'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED COST 10000;

COMMENT ON FUNCTION llm_join(text, text, text[], text, text, text, text, jsonb, boolean) IS
'The 1-based positions of the candidates for which llm_filter(input || E''\n\nCandidate:\n'' || candidate, question) is true, one forked request per row (and per 64 candidates). NULL input gives NULL; NULL candidates give {}; a NULL or empty candidate never matches.';

REVOKE ALL ON FUNCTION llm_join(text, text, text[], text, text, text, text, jsonb, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_join(text, text, text[], text, text, text, text, jsonb, boolean) TO llm_user;
-- end of semantic joins
