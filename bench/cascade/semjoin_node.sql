-- semjoin_node.sql: the semantic join of bench/cascade/semjoin.c in SQL,
-- llm_join per row of the first :n_rows messages of rows.tsv against the 30
-- products of candidates.txt, two ways on the same server:
--   row by row  llm.enable_batch_scan = off: each row's request sent and
--               waited for before the next row's;
--   batched     the LLM Batch node (llm.batch_window rows in flight).
-- Per way: requests, prompt and continuation tokens (llm_usage of the
-- current role), wall seconds, pairs matched; then whether the answers are
-- equal.  Run with psql, the extension installed and its worker ready:
--   psql -v rows_file=.../rows.tsv -v cands_file=.../candidates.txt \
--        -v n_rows=100 -f bench/cascade/semjoin_node.sql
\set ON_ERROR_STOP on
\pset pager off
CREATE TEMP TABLE sj_rows(id int, label text, body text);
CREATE TEMP TABLE sj_cands_in(name text);
SELECT format('\copy sj_rows FROM %L', :'rows_file') AS c1, format('\copy sj_cands_in FROM %L', :'cands_file') AS c2 \gset
:c1
:c2
DELETE FROM sj_rows WHERE id > :n_rows;
CREATE TEMP TABLE sj_cands AS SELECT array_agg(name) AS names FROM sj_cands_in;
\set q 'Is the candidate the product that the text is about?'
CREATE TEMP VIEW my_usage AS
  SELECT coalesce(sum(requests), 0) AS requests, coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
         coalesce(sum(continuation_tokens), 0) AS continuation_tokens
  FROM llm_usage WHERE role = current_user AND database = current_database();
CREATE TEMP TABLE sj_result(way text, requests bigint, prompt_tokens bigint, continuation_tokens bigint,
                            seconds float8, pairs bigint);

SELECT pg_sleep(1);
SELECT requests AS r0, prompt_tokens AS p0, continuation_tokens AS c0, clock_timestamp() AS t0 FROM my_usage \gset
SET llm.enable_batch_scan = off;
CREATE TEMP TABLE sj_alone AS SELECT r.id, llm_join(r.body, :'q', c.names) AS m FROM sj_rows r CROSS JOIN sj_cands c;
RESET llm.enable_batch_scan;
SELECT extract(epoch FROM clock_timestamp() - :'t0') AS secs \gset
SELECT pg_sleep(1);
INSERT INTO sj_result SELECT 'row by row', requests - :r0, prompt_tokens - :p0, continuation_tokens - :c0, :secs,
                             (SELECT sum(cardinality(m)) FROM sj_alone) FROM my_usage;

SELECT requests AS r0, prompt_tokens AS p0, continuation_tokens AS c0, clock_timestamp() AS t0 FROM my_usage \gset
CREATE TEMP TABLE sj_batched AS SELECT r.id, llm_join(r.body, :'q', c.names) AS m FROM sj_rows r CROSS JOIN sj_cands c;
SELECT extract(epoch FROM clock_timestamp() - :'t0') AS secs \gset
SELECT pg_sleep(1);
INSERT INTO sj_result SELECT 'batched', requests - :r0, prompt_tokens - :p0, continuation_tokens - :c0, :secs,
                             (SELECT sum(cardinality(m)) FROM sj_batched) FROM my_usage;

SELECT way, requests, prompt_tokens, continuation_tokens, round(seconds::numeric, 1) AS seconds, pairs FROM sj_result;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.m IS NOT DISTINCT FROM b.m) AS answers_equal
FROM sj_alone a JOIN sj_batched b USING (id);
