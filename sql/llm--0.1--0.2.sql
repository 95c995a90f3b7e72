/* pg_llm 0.1 -> 0.2: the argument table's introspection and the widening helper. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.2'" to load this file. \quit

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

REVOKE ALL ON FUNCTION llm_generation_arguments() FROM PUBLIC;
REVOKE ALL ON FUNCTION llm_widen_function(regprocedure, regprocedure) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm_generation_arguments() TO llm_user;
