/* pg_llm 0.4 -> 0.5.  Each feature of 0.5 has its own block below, in the
   order the features landed; a fresh install of 0.5 is 0.2 plus the updates. */

\echo Use "ALTER EXTENSION llm UPDATE TO '0.5'" to load this file. \quit

-- filters above joins
-- The planner's cost of a model call: llm_filter's declared COST scaled by
-- the called model's weight file size relative to the default model's (a
-- constant model => argument; from the configuration, not from what the
-- worker measured, so cached plans do not change with the worker's state).
CREATE FUNCTION llm_call_cost(internal) RETURNS internal
AS 'MODULE_PATHNAME', 'pg_llm_call_cost'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION llm_call_cost(internal) FROM PUBLIC;
ALTER FUNCTION llm_filter(text, text, text, text, text, text) SUPPORT llm_call_cost;
-- end of filters above joins
-- chat arguments of every chat
--
-- Every function whose prompt goes through the chat template takes its
-- arguments: tools (a JSON array of tool schemas) and enable_thinking,
-- passed to the template as llm_render_chat's, and, where the function
-- returns generated text, strip_thinking (default true: the answer after a
-- leading <think>...</think> section and the whitespace after it; the
-- worker sends no text until the answer's start is known, so a stream's
-- deltas joined are llm_chat's text).  A raw => true prompt is no chat:
-- tools and enable_thinking are refused with it and strip_thinking does
-- nothing.  llm_count_tokens takes the template's two, so it counts what a
-- call with them is charged.  Each function is widened in place (its OID,
-- grants, comment and dependants kept) from its argument list as it stands
-- plus the new arguments: one row per function below.
DO $chat$
DECLARE
	template_args constant text := 'tools jsonb DEFAULT NULL, enable_thinking boolean DEFAULT NULL';
	answer_args constant text := template_args || ', strip_thinking boolean DEFAULT true';
	r record;
	tpl text;
	outs int;
BEGIN
	FOR r IN
		SELECT p.oid::regprocedure AS target, p.proname, p.probin, p.prosrc,
		       pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result, w.added
		FROM (VALUES
			('pg_llm_generate', answer_args),
			('pg_llm_generate_array', answer_args),
			('pg_llm_complete', answer_args),
			('pg_llm_generate_stream', answer_args),
			('pg_llm_chat_stream', answer_args),
			('pg_llm_submit', answer_args),
			('pg_llm_enrich', answer_args),
			('pg_llm_extract', template_args),
			('pg_llm_classify', template_args),
			('pg_llm_classify_scores', template_args),
			('pg_llm_filter', template_args),
			('pg_llm_count_tokens', template_args),
			('pg_llm_count_tokens_messages', template_args)) w(symbol, added)
		JOIN pg_proc p ON p.prosrc = w.symbol AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
		JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
		JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'llm'
		ORDER BY 1
	LOOP
		tpl := r.proname || '_0_4_chat';
		-- the new inputs after the old ones, before any OUT arguments (llm_complete's)
		outs := position(', OUT ' in r.args);
		EXECUTE format('CREATE FUNCTION %I(%s, %s%s) RETURNS %s AS %L, %L LANGUAGE C', tpl,
					   CASE WHEN outs > 0 THEN left(r.args, outs - 1) ELSE r.args END, r.added,
					   CASE WHEN outs > 0 THEN substr(r.args, outs) ELSE '' END,
					   r.result, r.probin, r.prosrc);
		PERFORM llm_widen_function(r.target,
								   (SELECT p.oid FROM pg_proc p
								    WHERE p.proname = tpl AND p.pronamespace = (SELECT pronamespace FROM pg_proc WHERE oid = r.target))::regprocedure);
	END LOOP;
END
$chat$;

COMMENT ON FUNCTION llm_count_tokens(jsonb, text, jsonb, boolean) IS
'The prompt tokens llm_chat(messages) is charged for, chat template included, with the same tools and enable_thinking.';
COMMENT ON FUNCTION llm_count_tokens(text, text, jsonb, boolean) IS
'The prompt tokens llm_generate(prompt) is charged for: the text as the user turn of the chat template, template included, with the same tools and enable_thinking.';

-- end of chat arguments of every chat
