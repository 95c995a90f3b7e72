--
-- prefix_cache: outputs with llm.prefix_caching on are identical to the same
-- prompts' outputs with it off (greedy): prompts exactly k blocks long,
-- k blocks + 1, shorter than a block, prompts sharing a prefix that ends
-- mid-block, repeats, 8 prompts at once, a flood evicting cached blocks from
-- a tiny pool, preemption; cached_tokens and llm_stat's prefix columns;
-- llm.prefix_cache_isolation.
--
-- pc_run(ids, max_tokens): llm_complete the prompts of pc_prompts in the
-- order given, one at a time (a plain join would leave the order to the planner)
CREATE FUNCTION pc_run(ids int[], max_tokens int)
RETURNS TABLE (ord int, pid int, out_text text, n_prompt int, n_cached int) LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..array_length(ids, 1) LOOP
		SELECT i, pp.id, c.text, c.prompt_tokens, c.cached_tokens
		INTO ord, pid, out_text, n_prompt, n_cached
		FROM pc_prompts pp, llm_complete(pp.p, raw => pp.raw, max_tokens => pc_run.max_tokens) AS c
		WHERE pp.id = ids[i];
		RETURN NEXT;
	END LOOP;
END
$$;
SELECT wait_idle();
SHOW llm.prefix_cache_isolation;
SELECT (llm_model_info())->'model'->>'block_size' AS block_size,
       (llm_model_info())->'model'->>'prefix_caching' AS prefix_caching;
-- the prompts: raw token slices of exact lengths, and chat prompts sharing an
-- instruction (its end falls mid-block) with different tickets
CREATE TABLE pc_prompts (id int PRIMARY KEY, p text, raw boolean, grp text);
INSERT INTO pc_prompts
SELECT n, llm_detokenize((llm_tokenize('The history of relational databases begins in 1970, when Edgar Codd '
       'published a paper describing data as relations and queries as operations on sets. Early systems such as '
       'System R and Ingres turned the idea into software, and SQL became the standard language.'))[1:n]), true, 'len'
FROM unnest(ARRAY[9, 16, 17, 32, 33, 48, 49]) AS n;
INSERT INTO pc_prompts
SELECT 100 + i, 'Classify the support ticket below as billing, shipping, returns or technical, rate its urgency '
       'from 1 to 5, and summarize it in one sentence. Ticket: ' || t, false, 'shared'
FROM unnest(ARRAY['I was charged twice for order 4411.', 'The parcel never arrived.',
                  'How do I send back a broken kettle?', 'The app crashes when I log in.']) WITH ORDINALITY AS x(t, i);
INSERT INTO pc_prompts
SELECT 200 + i, 'Translate the customer message below into plain English and list the actions our team must take, '
       'in order of importance. Message: ' || t, false, 'batch'
FROM unnest(ARRAY['Paket kam nie an.', 'Je veux un remboursement.', 'Il prodotto è rotto.', 'No puedo entrar.',
                  'Faktura jest błędna.', 'Levering is te laat.', 'Ürün eksik geldi.', 'Conta bloqueada.'])
     WITH ORDINALITY AS x(t, i);
INSERT INTO pc_prompts
SELECT 300 + i, 'Say one word about ' || t || '.', false, 'small'
FROM unnest(ARRAY['cats', 'dogs', 'rain', 'snow', 'tea', 'salt', 'gold', 'ink']) WITH ORDINALITY AS x(t, i);
INSERT INTO pc_prompts
SELECT 400 + i, t, true, 'flood'
FROM unnest(ARRAY['Mountains form when tectonic plates collide and push the crust upward over millions of years.',
                  'Bread rises because yeast ferments sugars and releases carbon dioxide into the dough.',
                  'Octopuses have three hearts, blue blood and can change the colour of their skin.',
                  'A prime number has exactly two divisors: one and the number itself, like 7 or 13.',
                  'Violins are usually made of spruce and maple, with strings of gut, steel or nylon.',
                  'Lighthouses guided ships along dangerous coasts long before radio navigation existed.',
                  'Honey never spoils because its low water content and acidity stop bacteria from growing.',
                  'Comets are made of ice and dust and grow bright tails when they pass close to the Sun.'])
     WITH ORDINALITY AS x(t, i);
-- start from an empty cache whatever earlier suites cached (a reload that
-- changes an engine setting reloads the engine)
ALTER SYSTEM SET llm.prefix_caching = off;
SELECT pg_reload_conf();
SELECT wait_engine('prefix_caching', 'false');
ALTER SYSTEM RESET llm.prefix_caching;
SELECT pg_reload_conf();
SELECT wait_engine('prefix_caching', 'true');
-- every call its own request, so that repeats reach the cache (one statement
-- would share them: docs/BATCH_SCAN.md, "Deduplication")
SET llm.dedup_calls = off;
-- 1. cache on: every prompt twice, one at a time
SELECT llm_stat_reset();
CREATE TABLE pc_on AS
SELECT pid AS id, (ord - 1) / 11 + 1 AS pass, out_text AS text, n_prompt AS prompt_tokens, n_cached AS cached_tokens
FROM pc_run(ARRAY[9, 16, 17, 32, 33, 48, 49, 101, 102, 103, 104, 9, 16, 17, 32, 33, 48, 49, 101, 102, 103, 104], 8);
-- exact lengths; repeats reuse every full block but the one holding the last token
SELECT id, prompt_tokens, cached_tokens FROM pc_on WHERE pass = 2 AND id < 100 ORDER BY id;
-- the first ticket misses; the others share the instruction's full blocks
SELECT id, prompt_tokens, cached_tokens, cached_tokens % 16 = 0 AS whole_blocks
FROM pc_on WHERE pass = 1 AND id >= 100 ORDER BY id;
SELECT count(*) FILTER (WHERE on2.text = on1.text) AS repeats_identical,
       count(*) FILTER (WHERE on2.cached_tokens >= on1.cached_tokens) AS repeats_cache_more
FROM pc_on on1 JOIN pc_on on2 USING (id) WHERE on1.pass = 1 AND on2.pass = 2;
-- 8 prompts sharing an instruction arrive together (array form)
CREATE TABLE pc_on_batch AS
SELECT 200 + i AS id, t AS text
FROM unnest(llm_generate(ARRAY(SELECT p FROM pc_prompts WHERE grp = 'batch' ORDER BY id), max_tokens => 8))
     WITH ORDINALITY AS x(t, i);
SELECT wait_idle();
-- llm_stat: queried and hit prompt tokens, hit rate
SELECT prefix_query_tokens > 0 AS queried, prefix_hit_tokens > 0 AS hit,
       prefix_query_tokens = prompt_tokens AS every_prompt_queried,
       prefix_hit_tokens >= cached_tokens AS hits_cover_usage,
       prefix_hit_rate = prefix_hit_tokens::float8 / prefix_query_tokens AS rate_consistent,
       prefix_hit_rate > 0.3 AS rate_high
FROM llm_stat;
-- 2. cache off: the same prompts
ALTER SYSTEM SET llm.prefix_caching = off;
SELECT pg_reload_conf();
SELECT wait_engine('prefix_caching', 'false');
SELECT llm_stat_reset();
CREATE TABLE pc_off AS
SELECT pid AS id, out_text AS text, n_prompt AS prompt_tokens, n_cached AS cached_tokens
FROM pc_run(ARRAY[9, 16, 17, 32, 33, 48, 49, 101, 102, 103, 104, 301], 8);
CREATE TABLE pc_off_long AS
SELECT id, llm_generate(p, max_tokens => 16) AS text FROM pc_prompts WHERE grp = 'small';
CREATE TABLE pc_off_batch AS
SELECT id, llm_generate(p, max_tokens => 8) AS text FROM pc_prompts WHERE grp = 'batch';
SELECT count(*) AS prompts, sum(cached_tokens) AS cached FROM pc_off;
SELECT prefix_query_tokens, prefix_hit_tokens, prefix_hit_rate FROM llm_stat;
-- identical text, cache on (cold and warm) vs off
SELECT count(*) AS compared, count(*) FILTER (WHERE o.text = f.text) AS identical,
       count(*) FILTER (WHERE o.prompt_tokens = f.prompt_tokens) AS same_prompt_tokens
FROM pc_on o JOIN pc_off f USING (id);
SELECT count(*) AS compared, count(*) FILTER (WHERE o.text = f.text) AS identical
FROM pc_on_batch o JOIN pc_off_batch f USING (id);
-- 3. a tiny KV pool (11 blocks of 16 tokens), cache on
ALTER SYSTEM SET llm.prefix_caching = on;
ALTER SYSTEM SET llm.kv_cache_size = '4MB';
SELECT pg_reload_conf();
SELECT wait_engine('kv_blocks', '11');
SELECT llm_stat_reset();
-- a prompt, its repeat, a flood of 8 unrelated prompts, the prompt again
CREATE TABLE pc_tiny AS
SELECT ord AS step, pid, out_text AS text, n_cached AS cached_tokens
FROM pc_run(ARRAY[301, 301, 401, 402, 403, 404, 405, 406, 407, 408, 301], 8);
SELECT step, t.cached_tokens > 0 AS hit, t.text = f.text AS same_as_off
FROM pc_tiny t JOIN pc_off f ON f.id = t.pid
ORDER BY step;
-- under preemption: 8 prompts of 16 new tokens each at once do not fit 11 blocks
SELECT count(*) AS compared, count(*) FILTER (WHERE x.t = f.text) AS identical
FROM unnest(llm_generate(ARRAY(SELECT p FROM pc_prompts WHERE grp = 'small' ORDER BY id), max_tokens => 16))
     WITH ORDINALITY AS x(t, i)
JOIN pc_off_long f ON f.id = 300 + x.i;
SELECT preemptions > 0 AS preempted FROM llm_stat;
ALTER SYSTEM RESET llm.kv_cache_size;
ALTER SYSTEM RESET llm.prefix_caching;
SELECT pg_reload_conf();
SELECT wait_engine('kv_blocks', '728') AND wait_engine('prefix_caching', 'true') AS restored;
-- 4. isolation: role (default) keeps roles apart, database shares within it
CREATE ROLE pc_alice;
CREATE ROLE pc_bob;
GRANT llm_user TO pc_alice, pc_bob;
SET ROLE pc_alice;
SELECT try_sql('SET llm.prefix_cache_isolation = none') AS alice_sets_isolation;
SELECT (llm_complete('Role isolation probe: describe a lighthouse keeper''s day in detail.', max_tokens => 2)).cached_tokens AS alice_first;
SELECT (llm_complete('Role isolation probe: describe a lighthouse keeper''s day in detail.', max_tokens => 2)).cached_tokens > 0 AS alice_again_hits;
SET ROLE pc_bob;
SELECT (llm_complete('Role isolation probe: describe a lighthouse keeper''s day in detail.', max_tokens => 2)).cached_tokens AS bob_no_hit;
RESET ROLE;
SET llm.prefix_cache_isolation = database;
SET ROLE pc_alice;
SELECT (llm_complete('Database isolation probe: describe a baker''s morning in detail.', max_tokens => 2)).cached_tokens AS alice_first;
SET ROLE pc_bob;
SELECT (llm_complete('Database isolation probe: describe a baker''s morning in detail.', max_tokens => 2)).cached_tokens > 0 AS bob_hits_same_database;
RESET ROLE;
SET llm.prefix_cache_isolation = none;
SELECT (llm_complete('Database isolation probe: describe a baker''s morning in detail.', max_tokens => 2)).cached_tokens AS none_is_another_key;
RESET llm.prefix_cache_isolation;
SELECT wait_idle();
DROP ROLE pc_alice;
DROP ROLE pc_bob;
DROP TABLE pc_prompts, pc_on, pc_on_batch, pc_off, pc_off_long, pc_off_batch, pc_tiny;
DROP FUNCTION pc_run(int[], int);
RESET llm.dedup_calls;
