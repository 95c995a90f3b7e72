--
-- setup: helpers for the other suites, and a ready model.
--
-- try_sql(query): run query, return 'ok' or 'SQLSTATE: message' (keeps
-- expected output free of source line numbers).
CREATE FUNCTION try_sql(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
-- wait_model(ctx): wait (up to 60 s) until the worker has a ready model,
-- with context length ctx when ctx is given.
CREATE FUNCTION wait_model(ctx int DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	info jsonb;
BEGIN
	FOR i IN 1..600 LOOP
		info := llm_model_info();
		EXIT WHEN info->>'status' = 'ready'
			AND (ctx IS NULL OR (info->>'context_length')::int = ctx);
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN info->>'status';
END
$$;
-- wait_idle(): wait (up to 10 s) until no request runs or waits and no KV
-- block is held by a request; returns whether that happened.
CREATE FUNCTION wait_idle() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..100 LOOP
		IF (SELECT requests_running = 0 AND requests_waiting = 0 AND kv_blocks_used = 0 FROM llm_stat) THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN false;
END
$$;
SELECT wait_model();
SELECT info->>'status' AS status, (info->>'context_length')::int AS context_length,
       info->>'model_path' LIKE '%/extension/llm/SmolLM2-135M-Instruct.Q4_1.gguf' AS default_path,
       info->'error' AS error
FROM llm_model_info() AS info;
SELECT worker_pid IS NOT NULL AS worker_running, model_status FROM llm_stat;
SELECT count(*) AS llm_workers FROM pg_stat_activity WHERE backend_type = 'llm worker';
