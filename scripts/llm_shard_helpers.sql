-- llm_shard_helpers.sql — run one SQL statement on every shard at once from a
-- coordinator, for pg_llm generation over a table spread across servers
-- (docs/SCALING.md).
--
-- Load on the coordinator (psql -f) after
--   CREATE EXTENSION dblink; CREATE EXTENSION postgres_fdw;
-- and one postgres_fdw foreign server plus user mapping per shard.  Each shard
-- has pg_llm preloaded, its own llm worker and its own model file; the
-- coordinator needs neither.
--
-- Why dblink and not a foreign table: postgres_fdw never ships a VOLATILE
-- function, so the generation must be written into the statement the shard
-- runs; a foreign table over a generating view on each shard does that for
-- reads, but the shards then run one after another whenever the planner
-- takes an ordered Append or a Merge Append of remote sorts (ORDER BY on the
-- partition key), and an UPDATE cannot be expressed at all.  dblink sends any
-- statement, and dblink_send_query returns at once, so every shard runs its
-- statement concurrently, each batching its own rows with its own worker.
--
-- Contracts:
--   * servers are foreign-server names; connections are named
--     'llm_shard:' || server and closed before each function returns (also on
--     error and cancel, after a cancel request to every shard still busy).
--   * waiting for a shard polls dblink_is_busy with a short sleep, so a cancel
--     or statement_timeout on the coordinator interrupts it (PostgreSQL 15's
--     dblink_get_result blocks uninterruptibly) and reaches every shard.
--   * every error names the shard it came from and keeps its SQLSTATE.
--   * connecting to every shard comes first: a shard that is down fails the
--     call before any statement is sent anywhere.
--   * no global snapshot: each shard's rows are as of its own snapshot.
--   * connections use the foreign server's options and user mapping (a
--     non-superuser needs a password in the mapping, as for any dblink use).

-- Raise an error with the given SQLSTATE, message and optional detail and
-- hint (NULL or empty: left out).
CREATE FUNCTION llm_shard_raise(sqlstate text, message text, detail text DEFAULT NULL, hint text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	detail := nullif(detail, '');
	hint := nullif(hint, '');
	IF detail IS NULL AND hint IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message;
	ELSIF detail IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, HINT = hint;
	ELSIF hint IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail;
	ELSE
		RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail, HINT = hint;
	END IF;
END
$$;

-- The foreign servers holding the partitions of a partitioned table, in
-- partition order (by partition name): the shards of a logical table.
CREATE FUNCTION llm_shard_servers(parent regclass) RETURNS name[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
	servers name[];
	local_part regclass;
BEGIN
	SELECT c.oid::regclass INTO local_part
	FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
	WHERE i.inhparent = parent AND c.relkind <> 'f'
	LIMIT 1;
	IF local_part IS NOT NULL THEN
		RAISE EXCEPTION 'partition % of % is not a foreign table', local_part, parent
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Every partition must live on a shard (a postgres_fdw foreign table).';
	END IF;
	SELECT array_agg(s.srvname ORDER BY c.relname) INTO servers
	FROM pg_inherits i
	JOIN pg_class c ON c.oid = i.inhrelid
	JOIN pg_foreign_table ft ON ft.ftrelid = c.oid
	JOIN pg_foreign_server s ON s.oid = ft.ftserver
	WHERE i.inhparent = parent;
	IF servers IS NULL THEN
		RAISE EXCEPTION '% has no foreign partitions', parent USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF (SELECT count(DISTINCT x) FROM unnest(servers) x) <> cardinality(servers) THEN
		RAISE EXCEPTION 'two partitions of % are on the same server', parent
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A shard runs one statement over its local table: keep one partition per server.';
	END IF;
	RETURN servers;
END
$$;

-- Close the helper's connections to servers; a shard still running a
-- statement gets a cancel request first.  Closing a connection ends its
-- remote transaction with a rollback.
CREATE FUNCTION llm_shard_close(servers name[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	srv name;
	conn text;
BEGIN
	FOREACH srv IN ARRAY servers LOOP
		conn := 'llm_shard:' || srv;
		CONTINUE WHEN NOT conn = ANY (coalesce(dblink_get_connections(), '{}'));
		BEGIN
			IF dblink_is_busy(conn) = 1 THEN
				PERFORM dblink_cancel_query(conn);
			END IF;
		EXCEPTION WHEN OTHERS THEN
			NULL;				-- the connection is already broken: just close it
		END;
		PERFORM dblink_disconnect(conn);
	END LOOP;
END
$$;

-- Open one connection per server (closing any left by an earlier session
-- error); the first server that cannot be reached fails the call, naming it.
CREATE FUNCTION llm_shard_open(servers name[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	srv name;
	st text;
	msg text;
	det text;
BEGIN
	IF servers IS NULL OR cardinality(servers) = 0 THEN
		RAISE EXCEPTION 'no shard servers given' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF (SELECT count(DISTINCT x) FROM unnest(servers) x) <> cardinality(servers) THEN
		RAISE EXCEPTION 'a shard server is listed twice' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM llm_shard_close(servers);
	FOREACH srv IN ARRAY servers LOOP
		BEGIN
			PERFORM dblink_connect('llm_shard:' || srv, srv);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
			PERFORM llm_shard_close(servers);
			PERFORM llm_shard_raise(st, format('shard "%s" is unreachable: %s', srv, msg), det,
									'Nothing was sent to any shard.');
		END;
	END LOOP;
END
$$;

-- Send sql to a server's open connection without waiting.
CREATE FUNCTION llm_shard_send(srv name, sql text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF dblink_send_query('llm_shard:' || srv, sql) <> 1 THEN
		RAISE EXCEPTION 'could not send the statement to shard "%": %', srv,
			dblink_error_message('llm_shard:' || srv)
			USING ERRCODE = 'connection_failure';
	END IF;
END
$$;

-- Wait, interruptibly, until a server's connection has its result ready.
CREATE FUNCTION llm_shard_wait(srv name) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	WHILE dblink_is_busy('llm_shard:' || srv) = 1 LOOP
		PERFORM pg_sleep(0.02);
	END LOOP;
END
$$;

-- Run one query (a single SELECT; it may call llm_generate and friends) on
-- every server at once; returns all shards' rows as rows of rowtype's
-- composite type (pass NULL::some_type), shard after shard.  No order: put an
-- ORDER BY on the call.
--   SELECT * FROM llm_shard_query(llm_shard_servers('tickets'),
--       $q$SELECT id, llm_generate('Summarize: ' || body, max_tokens => 48) FROM tickets$q$,
--       NULL::ticket_summary) ORDER BY id;
CREATE FUNCTION llm_shard_query(servers name[], query text, rowtype anyelement)
RETURNS SETOF anyelement
LANGUAGE plpgsql AS $$
DECLARE
	coldefs text;
	srv name;
	cur name;
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
	INTO coldefs
	FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid
	WHERE t.oid = pg_typeof(rowtype) AND a.attnum > 0 AND NOT a.attisdropped;
	IF coldefs IS NULL THEN
		RAISE EXCEPTION 'rowtype must be a composite type, not %', pg_typeof(rowtype)
			USING ERRCODE = 'datatype_mismatch', HINT = 'Pass NULL::a_table_or_type.';
	END IF;
	PERFORM llm_shard_open(servers);
	BEGIN
		FOREACH srv IN ARRAY servers LOOP
			cur := srv;
			PERFORM llm_shard_send(srv, query);
		END LOOP;
		FOREACH srv IN ARRAY servers LOOP
			cur := srv;
			PERFORM llm_shard_wait(srv);
			RETURN QUERY EXECUTE format('SELECT * FROM dblink_get_result(%L) AS t(%s)', 'llm_shard:' || srv, coldefs);
			-- the empty result that ends the query
			EXECUTE format('SELECT count(*) FROM dblink_get_result(%L) AS t(%s)', 'llm_shard:' || srv, coldefs);
		END LOOP;
	EXCEPTION
		WHEN query_canceled THEN
			PERFORM llm_shard_close(servers);
			RAISE;
		WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
				hnt = PG_EXCEPTION_HINT;
			PERFORM llm_shard_close(servers);
			PERFORM llm_shard_raise(st, format('shard "%s": %s', cur, msg), det, hnt);
	END;
	PERFORM llm_shard_close(servers);
END
$$;

-- Run one command (e.g. an UPDATE that calls llm_generate) on every server at
-- once, each in its own transaction, and commit them only once every shard
-- has succeeded; an error on any shard (or a cancel) rolls back all of them.
-- Returns each shard's command tag ('UPDATE 256').
--
-- Not atomic across shards: the commits are sent one after another once
-- all have succeeded, so a shard lost between two commits leaves the others
-- committed (the error names the shards committed and the one that failed).
-- Write the command idempotently (UPDATE ... WHERE summary IS NULL) and run it
-- again: it does only what is missing, once per row.  The coordinator's own
-- transaction does not cover the shards: they have committed when this
-- returns.
CREATE FUNCTION llm_shard_exec(servers name[], command text)
RETURNS TABLE (server name, status text)
LANGUAGE plpgsql AS $$
DECLARE
	srv name;
	cur name;
	tags text[] := '{}';		-- per server: the status of its command's last statement
	tag text;
	done name[] := '{}';
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	PERFORM llm_shard_open(servers);
	BEGIN
		FOREACH srv IN ARRAY servers LOOP
			cur := srv;
			PERFORM dblink_exec('llm_shard:' || srv, 'BEGIN');
		END LOOP;
		FOREACH srv IN ARRAY servers LOOP
			cur := srv;
			PERFORM llm_shard_send(srv, command);
		END LOOP;
		FOREACH srv IN ARRAY servers LOOP
			cur := srv;
			PERFORM llm_shard_wait(srv);
			tags := tags || NULL::text;
			-- one status row per statement of the command, then an empty result
			LOOP
				SELECT t.status INTO tag FROM dblink_get_result('llm_shard:' || srv) AS t(status text);
				EXIT WHEN NOT FOUND;
				tags[cardinality(tags)] := tag;
			END LOOP;
		END LOOP;
	EXCEPTION
		WHEN query_canceled THEN
			PERFORM llm_shard_close(servers);
			RAISE;
		WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
				hnt = PG_EXCEPTION_HINT;
			PERFORM llm_shard_close(servers);
			PERFORM llm_shard_raise(st, format('shard "%s": %s', cur, msg), det,
									coalesce(nullif(hnt, ''), 'Rolled back on every shard.'));
	END;
	-- every shard succeeded: commit them all
	FOREACH srv IN ARRAY servers LOOP
		BEGIN
			PERFORM dblink_exec('llm_shard:' || srv, 'COMMIT');
			done := done || srv;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
			PERFORM llm_shard_close(servers);
			RAISE EXCEPTION 'shard "%": commit failed: %', srv, msg
				USING ERRCODE = st,
					  DETAIL = format('Committed on: %s; not committed on: %s.',
									  coalesce(nullif(array_to_string(done, ', '), ''), 'none'),
									  array_to_string(servers[cardinality(done) + 1:], ', ')),
					  HINT = 'Run the (idempotent) command again.';
		END;
	END LOOP;
	PERFORM llm_shard_close(servers);
	RETURN QUERY SELECT * FROM unnest(servers, tags);
END
$$;

-- The model each server's llm worker runs, for the check that every shard
-- computes with the same model (same file content, same device):
--   file_digest  the sha256 of the model file the shard's worker loaded
--                (llm_model_info()'s model_sha256, computed by the worker at
--                load), NULL unless with_digest
--   identity     md5 of the fields that decide the generated text: the
--                model's description (architecture, sizes, vocabulary,
--                weight type, chat template), the device, the extension's
--                version, the file's size and its digest when computed
--   same_as_first  whether identity equals the first server's
-- Check:  SELECT bool_and(same_as_first AND status = 'ready')
--         FROM llm_shard_models(llm_shard_servers('tickets'));
CREATE FUNCTION llm_shard_models(servers name[], with_digest boolean DEFAULT true)
RETURNS TABLE (server name, status text, model_path text, file_size bigint, file_digest text,
			   device text, extension_version text, model jsonb, identity text, same_as_first boolean)
LANGUAGE plpgsql AS $$
DECLARE
	srv name;
	q text;
	first_identity text;
	r record;
	st text;
	msg text;
	det text;
BEGIN
	q := format($q$
		SELECT m->>'status', m->>'model_path', f.size,
			   CASE WHEN %L THEN m->>'model_sha256' END,
			   m->'model'->>'device', (SELECT extversion FROM pg_extension WHERE extname = 'llm'), m->'model'
		FROM llm_model_info() m
		LEFT JOIN LATERAL pg_stat_file(m->>'model_path', true) f ON true$q$, with_digest);
	PERFORM llm_shard_open(servers);
	FOREACH srv IN ARRAY servers LOOP
		BEGIN
			PERFORM llm_shard_send(srv, q);
		EXCEPTION WHEN OTHERS THEN
			PERFORM llm_shard_close(servers);
			RAISE;
		END;
	END LOOP;
	FOREACH srv IN ARRAY servers LOOP
		BEGIN
			PERFORM llm_shard_wait(srv);
			SELECT * INTO r FROM dblink_get_result('llm_shard:' || srv)
				AS t(status text, model_path text, file_size bigint, file_digest text, device text,
					 extension_version text, model jsonb);
			PERFORM * FROM dblink_get_result('llm_shard:' || srv)
				AS t(status text, model_path text, file_size bigint, file_digest text, device text,
					 extension_version text, model jsonb);
		EXCEPTION
			WHEN query_canceled THEN
				PERFORM llm_shard_close(servers);
				RAISE;
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
				PERFORM llm_shard_close(servers);
				PERFORM llm_shard_raise(st, format('shard "%s": %s', srv, msg), det);
		END;
		server := srv;
		status := r.status;
		model_path := r.model_path;
		file_size := r.file_size;
		file_digest := r.file_digest;
		device := r.device;
		extension_version := r.extension_version;
		model := r.model;
		-- engine settings that do not change the text (threads, KV blocks,
		-- scheduler limits, prefix caching) are left out
		identity := md5(concat_ws('|',
			r.model - ARRAY['threads', 'kv_blocks', 'block_size', 'max_batched_tokens', 'max_running',
							'prefix_caching', 'context_length', 'device']::text[],
			r.device, r.extension_version, r.file_size, r.file_digest));
		first_identity := coalesce(first_identity, identity);
		same_as_first := identity = first_identity;
		RETURN NEXT;
	END LOOP;
	PERFORM llm_shard_close(servers);
END
$$;
