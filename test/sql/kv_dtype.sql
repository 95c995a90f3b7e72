--
-- kv_dtype: llm.kv_cache_dtype.  f16 by default; a value outside f16/q8_0
-- is refused; a reload with q8_0 rebuilds the pool, which then holds 64/34
-- times the blocks of the same llm.kv_cache_size (a q8_0 row of 64 values
-- is 68 bytes, an f16 row 128); q8_0 serves, batch-invariant and through
-- the prefix cache.  q8_0 text is not compared with f16 text: it may differ
-- (docs/PERFORMANCE.md measures how often).  RESET restores the f16 pool.
--
SELECT wait_idle();
SHOW llm.kv_cache_dtype;
CREATE TABLE kv_pools AS
SELECT 'f16'::text AS dtype, (m->>'kv_blocks')::int AS kv_blocks, (m->>'kv_cache_bytes')::bigint AS kv_cache_bytes,
       (SELECT kv_blocks_total FROM llm_stat) AS stat_blocks
FROM (SELECT (llm_model_info())->'model' AS m) AS x
WHERE m->>'kv_cache_dtype' = 'f16';
SELECT * FROM kv_pools;

-- the setting takes f16 or q8_0, from the configuration only
ALTER SYSTEM SET llm.kv_cache_dtype = 'q4_0';
SET llm.kv_cache_dtype = 'q8_0';

-- f16 outputs, to run the same prompts on q8_0
CREATE TABLE kv_prompts (id int PRIMARY KEY, p text);
INSERT INTO kv_prompts VALUES
  (1, 'What is the capital of Australia?'),
  (2, 'Explain what a B-tree index is in two sentences.'),
  (3, 'Name the planets of the solar system in order.'),
  (4, 'Write a haiku about databases.');
CREATE TABLE kv_f16 AS
SELECT id, c.text, c.finish_reason, c.completion_tokens
FROM kv_prompts, llm_complete(p, max_tokens => 24) AS c;

ALTER SYSTEM SET llm.kv_cache_dtype = 'q8_0';
SELECT pg_reload_conf();
SELECT wait_engine('kv_cache_dtype', 'q8_0');
SHOW llm.kv_cache_dtype;
INSERT INTO kv_pools
SELECT 'q8_0', (m->>'kv_blocks')::int, (m->>'kv_cache_bytes')::bigint,
       (SELECT kv_blocks_total FROM llm_stat)
FROM (SELECT (llm_model_info())->'model' AS m) AS x;
-- the same llm.kv_cache_size, 64/34 = 1.88 times the blocks
SELECT * FROM kv_pools ORDER BY dtype;
SELECT round(q.kv_blocks::numeric / f.kv_blocks, 2) AS block_ratio,
       f.kv_cache_bytes / f.kv_blocks AS f16_block_bytes, q.kv_cache_bytes / q.kv_blocks AS q8_0_block_bytes
FROM kv_pools f, kv_pools q WHERE f.dtype = 'f16' AND q.dtype = 'q8_0';

-- q8_0 serves: one at a time, then the four in one batch (same tokens)
CREATE TABLE kv_q8 AS
SELECT id, c.text, c.finish_reason, c.completion_tokens, c.cached_tokens
FROM kv_prompts, llm_complete(p, max_tokens => 24) AS c;
SELECT id, finish_reason, completion_tokens > 0 AS generated, length(text) > 0 AS has_text
FROM kv_q8 ORDER BY id;
SELECT count(*) AS compared, count(*) FILTER (WHERE x.t = q.text) AS identical
FROM unnest(llm_generate(ARRAY(SELECT p FROM kv_prompts ORDER BY id), max_tokens => 24))
     WITH ORDINALITY AS x(t, i)
JOIN kv_q8 q ON q.id = x.i;
-- a repeat hits the prefix cache (q8_0 blocks) and gives the same text
SELECT c.cached_tokens > 0 AS hit, c.text = q.text AS same_text
FROM kv_prompts p, llm_complete(p.p, max_tokens => 24) AS c, kv_q8 q
WHERE p.id = 2 AND q.id = 2;
SELECT wait_idle();

ALTER SYSTEM RESET llm.kv_cache_dtype;
SELECT pg_reload_conf();
SELECT wait_engine('kv_cache_dtype', 'f16') AND wait_engine('kv_blocks', (SELECT kv_blocks::text FROM kv_pools WHERE dtype = 'f16')) AS restored;
-- f16 again gives the f16 text
SELECT count(*) AS compared, count(*) FILTER (WHERE c.text = f.text) AS identical
FROM kv_prompts p, llm_complete(p.p, max_tokens => 24) AS c, kv_f16 f
WHERE f.id = p.id;
DROP TABLE kv_pools, kv_prompts, kv_f16, kv_q8;
