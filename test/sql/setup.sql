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
-- wait_until(cond, seconds): wait (up to seconds, default 60) until the
-- query cond returns true; returns whether that happened.  Every wait of
-- the suites is a condition for it.
CREATE FUNCTION wait_until(cond text, seconds int DEFAULT 60) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	ok boolean;
BEGIN
	FOR i IN 1..seconds * 10 LOOP
		EXECUTE cond INTO ok;
		IF ok THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN false;
END
$$;
-- wait_model(ctx): wait (up to 60 s) until the worker has a ready model,
-- with context length ctx when ctx is given; returns the model's status.
CREATE FUNCTION wait_model(ctx int DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
SELECT wait_until(format($q$SELECT info->>'status' = 'ready' AND (%1$L IS NULL OR (info->>'context_length')::int = %1$L)
                          FROM llm_model_info() AS info$q$, ctx));
SELECT llm_model_info()->>'status';
$$;
-- wait_idle(): wait (up to 10 s) until no request runs or waits and no KV
-- block is held by a request; returns whether that happened.
CREATE FUNCTION wait_idle() RETURNS boolean LANGUAGE sql AS $$
SELECT wait_until('SELECT requests_running = 0 AND requests_waiting = 0 AND kv_blocks_used = 0 FROM llm_stat', 10)
$$;
-- wait_engine(key, value): wait until the loaded engine's llm_model_info()
-- 'model' entry key equals value (the worker reloads on configuration change)
CREATE FUNCTION wait_engine(key text, val text) RETURNS boolean LANGUAGE sql AS $$
SELECT wait_until(format($q$SELECT info->>'status' = 'ready' AND info->'model'->>%L = %L
                          FROM llm_model_info() AS info$q$, key, val))
$$;
-- wait_recent(n): wait (up to 30 s) until n records are visible in
-- llm_recent_requests() (a finished call's record is there when it returns;
-- a cancelled one's by the end of the worker's step); returns how many there are
CREATE FUNCTION wait_recent(n int) RETURNS bigint LANGUAGE sql AS $$
SELECT wait_until(format('SELECT count(*) >= %s FROM llm_recent_requests()', n), 30);
SELECT count(*) FROM llm_recent_requests();
$$;
-- same_as_row_by_row(q): q's rows in order with the LLM Batch node and
-- without it (llm.enable_batch_scan = off): identical, and as many
-- generations (llm_stat.requests_finished)
CREATE FUNCTION same_as_row_by_row(q text, OUT rows bigint, OUT same boolean, OUT same_requests boolean)
LANGUAGE plpgsql AS $$
DECLARE
	a text[];
	b text[];
	n0 bigint;
	n1 bigint;
	n2 bigint;
	dedup text := current_setting('llm.dedup_calls');
BEGIN
	-- the node's calls, one for one with row by row: no sharing of identical calls
	PERFORM set_config('llm.dedup_calls', 'off', true);
	PERFORM wait_idle();
	SELECT requests_finished INTO n0 FROM llm_stat;
	EXECUTE 'SELECT array_agg(t::text) FROM (' || q || ') t' INTO a;
	PERFORM wait_idle();
	SELECT requests_finished INTO n1 FROM llm_stat;
	SET LOCAL llm.enable_batch_scan = off;
	EXECUTE 'SELECT array_agg(t::text) FROM (' || q || ') t' INTO b;
	SET LOCAL llm.enable_batch_scan = on;
	PERFORM set_config('llm.dedup_calls', dedup, true);
	PERFORM wait_idle();
	SELECT requests_finished INTO n2 FROM llm_stat;
	rows := coalesce(cardinality(a), 0);
	same := a IS NOT DISTINCT FROM b;
	same_requests := n1 - n0 = n2 - n1;
END
$$;
SELECT wait_model();
SELECT info->>'status' AS status, (info->>'context_length')::int AS context_length,
       info->>'model_path' LIKE '%/extension/llm/SmolLM2-135M-Instruct.Q4_1.gguf' AS default_path,
       info->'error' AS error
FROM llm_model_info() AS info;
SELECT worker_pid IS NOT NULL AS worker_running, model_status FROM llm_stat;
SELECT count(*) AS llm_workers FROM pg_stat_activity WHERE backend_type = 'llm worker';
