--
-- embed_sql: llm_embed and the functions over embeddings, on the served
-- model (its EMBED request: the pooled final hidden state).  Values are
-- compared with each other (a call alone, in a batch, by the LLM Batch
-- node, truncated), never with printed floats.
--
-- NULL gives NULL; one text gives a vector of the model's embedding length
SELECT llm_embed(NULL::text) IS NULL AS null_in_null_out;
-- SmolLM2-135M's hidden size is 576
SELECT array_ndims(e) AS ndims, array_length(e, 1) AS width
FROM llm_embed('The cat sat on the mat.') e;
-- the same text, the same bits; another text, another vector
SELECT llm_embed('The cat sat on the mat.') = llm_embed('The cat sat on the mat.') AS repeatable,
       llm_embed('The cat sat on the mat.') <> llm_embed('Stock markets fell sharply.') AS differs;
-- bad input and options: SQLSTATEs
SELECT try_sql($$SELECT llm_embed('')$$) AS empty;
SELECT llm_embed('', on_error => 'null') IS NULL AS empty_null;
SELECT try_sql($$SELECT llm_embed('x', model => 'nope')$$) AS unknown_model;
SELECT try_sql($$SELECT llm_embed('x', on_error => 'maybe')$$) AS bad_on_error;
-- volatility: STABLE (computed once per statement where the planner may), not IMMUTABLE
SELECT p.oid::regprocedure AS function, provolatile
FROM pg_proc p WHERE proname IN ('llm_embed', 'llm_similarity', 'llm_rerank', 'llm_chunk', 'llm_cosine_distance')
ORDER BY p.oid::regprocedure::text;

-- the array form: one row per input, NULL rows of NULLs, same bits as alone
SELECT array_dims(llm_embed(ARRAY['one', NULL, 'three'])) AS dims;
SELECT
(SELECT bool_and(x IS NULL) FROM unnest((llm_embed(ARRAY['one', NULL, 'three']))[2:2][:]) x) AS null_row_all_null;
SELECT ARRAY(SELECT unnest((llm_embed(ARRAY['one', NULL, 'three']))[3:3][:])) = llm_embed('three') AS batched_same_as_alone;
SELECT llm_embed(ARRAY[]::text[]) = '{}'::real[] AS empty_array, llm_embed(ARRAY[NULL]::text[]) IS NULL AS all_null;
SELECT try_sql($$SELECT llm_embed(ARRAY[['a'], ['b']])$$) AS two_dims;

-- the LLM Batch node evaluates llm_embed in target lists, UPDATE, INSERT ... SELECT, CREATE TABLE AS
CREATE TABLE embed_docs (id int PRIMARY KEY, body text, emb real[]);
INSERT INTO embed_docs VALUES
  (1, 'I was charged twice for my subscription.', NULL),
  (2, 'The app crashes when I open settings.', NULL),
  (3, 'How do I change my password?', NULL),
  (4, NULL, NULL),
  (5, 'Refund my last payment please.', NULL),
  (6, 'Dark mode makes the text unreadable.', NULL);
EXPLAIN (COSTS OFF) SELECT id, llm_embed(body) FROM embed_docs;
SELECT rows, same, same_requests FROM same_as_row_by_row('SELECT id, llm_embed(body) FROM embed_docs ORDER BY id');
EXPLAIN (COSTS OFF) UPDATE embed_docs SET emb = llm_embed(body);
UPDATE embed_docs SET emb = llm_embed(body);
SELECT id, emb IS NULL AS no_emb, emb = llm_embed(body) AS same_as_alone FROM embed_docs ORDER BY id;
CREATE TABLE embed_copy AS SELECT id, llm_embed(body) AS emb FROM embed_docs;
SELECT count(*) FILTER (WHERE c.emb IS NOT DISTINCT FROM d.emb) AS same_rows FROM embed_copy c JOIN embed_docs d USING (id);
CREATE TABLE embed_ins (id int, emb real[]);
EXPLAIN (COSTS OFF) INSERT INTO embed_ins SELECT id, llm_embed(body) FROM embed_docs;
INSERT INTO embed_ins SELECT id, llm_embed(body) FROM embed_docs;
SELECT count(*) FILTER (WHERE c.emb IS NOT DISTINCT FROM d.emb) AS same_rows FROM embed_ins c JOIN embed_docs d USING (id);

-- cosine distance over real[], no pgvector needed
SELECT llm_cosine_distance('{1,0}', '{0,1}') AS orthogonal, round(llm_cosine_distance('{1,2}', '{2,4}')::numeric, 12) AS same_direction,
       llm_cosine_distance('{1,0}', '{-1,0}') AS opposite, llm_cosine_distance('{0,0}', '{1,0}') AS zero_norm,
       llm_cosine_distance(NULL, '{1}') IS NULL AS strict;
SELECT try_sql($$SELECT llm_cosine_distance('{1,2}', '{1,2,3}')$$) AS lengths,
       try_sql($$SELECT llm_cosine_distance('{1,NULL}', '{1,2}')$$) AS null_elem,
       try_sql($$SELECT llm_cosine_distance('{{1,2}}', '{1,2}')$$) AS two_dims,
       try_sql($$SELECT llm_cosine_distance('{}', '{}')$$) AS empty;
-- nearest neighbours by distance; self distance 0
SELECT round(llm_cosine_distance(emb, emb)::numeric, 6) AS self FROM embed_docs WHERE id = 1;
SELECT id FROM embed_docs WHERE emb IS NOT NULL
ORDER BY llm_cosine_distance(emb, llm_embed('I was charged twice for my subscription.')) LIMIT 1;

-- llm_similarity is the cosine of the two embeddings
SELECT llm_similarity(NULL, 'x') IS NULL AS null_a, llm_similarity('x', NULL) IS NULL AS null_b;
SELECT abs(llm_similarity('The cat sat.', 'A dog ran.') - (1 - llm_cosine_distance(llm_embed('The cat sat.'), llm_embed('A dog ran.')))) < 1e-12 AS is_cosine,
       abs(llm_similarity('Same text.', 'Same text.') - 1) < 1e-6 AS self_one;
SELECT try_sql($$SELECT llm_similarity('', 'x')$$) AS empty;

-- llm_rerank: every document once, best first, scores the cosines
SELECT count(*) AS n, count(DISTINCT index) AS distinct_index, min(index) AS lo, max(index) AS hi
FROM llm_rerank('refund', ARRAY['a', 'b', NULL, 'd']);
SELECT index, score IS NULL AS null_score FROM llm_rerank('refund', ARRAY['a', 'b', NULL, 'd']) WHERE score IS NULL;
SELECT bool_and(abs(r.score - llm_similarity('refund please', d.body)) < 1e-12) AS scores_are_similarity,
       bool_and(r.ord = 1 OR r.score <= lag_score) AS best_first
FROM (SELECT index, score, row_number() OVER () AS ord, lag(score) OVER () AS lag_score
      FROM llm_rerank('refund please', ARRAY(SELECT body FROM embed_docs WHERE body IS NOT NULL ORDER BY id))) r
JOIN (SELECT row_number() OVER (ORDER BY id) AS i, body FROM embed_docs WHERE body IS NOT NULL) d ON d.i = r.index;
SELECT count(*) AS no_rows FROM llm_rerank(NULL, ARRAY['a']);

-- llm_chunk: pieces within max_tokens (the model's tokenizer), in order, at sentence ends
CREATE TABLE embed_long AS
SELECT string_agg(format('Sentence number %s talks about topic %s in a few words.', i, i % 7), ' ') ||
       E'\n\nA second paragraph starts here. It is short.' AS body
FROM generate_series(1, 40) i;
SELECT count(*) > 1 AS several, bool_and(array_length(llm_tokenize(c), 1) <= 48) AS all_fit,
       bool_and(c ~ '[.]$') AS end_at_sentence
FROM llm_chunk((SELECT body FROM embed_long), 48) c;
-- without overlap the pieces are the text again (whitespace between them aside)
SELECT regexp_replace(string_agg(c, ' '), '\s+', ' ', 'g') = regexp_replace(body, '\s+', ' ', 'g') AS covers_text
FROM embed_long, LATERAL llm_chunk(body, 48) c GROUP BY body;
-- with overlap each next piece starts with the end of the previous one
SELECT count(*) > 1 AS several, bool_and(array_length(llm_tokenize(c), 1) <= 48) AS all_fit
FROM llm_chunk((SELECT body FROM embed_long), 48, 16) c;
SELECT bool_and(right(prev, 20) = right(split_part(c, '.', 1) || '.', 20) OR position(split_part(c, '.', 1) in prev) > 0) AS overlaps
FROM (SELECT c, lag(c) OVER () AS prev FROM llm_chunk((SELECT body FROM embed_long), 48, 16) c) s WHERE prev IS NOT NULL;
-- one sentence longer than max_tokens: token windows
SELECT count(*) AS windows, bool_and(array_length(llm_tokenize(c), 1) <= 8) AS all_fit
FROM llm_chunk(repeat('word', 30), 8) c;
SELECT try_sql($$SELECT llm_chunk('x', 0)$$) AS zero_max, try_sql($$SELECT llm_chunk('x', 4, 4)$$) AS overlap_too_big,
       try_sql($$SELECT llm_chunk('x', 4, model => 'nope')$$) AS unknown_model;
SELECT count(*) AS none_for_null FROM llm_chunk(NULL, 10);
SELECT count(*) AS none_for_empty FROM llm_chunk('', 10);

-- inputs over the model's limit: 54000, or cut to the limit with truncate => true
SELECT current_setting('llm.model') AS smol,
       format('small=%s (context_length=64, kv_cache_size=8MB)', current_setting('llm.model')) AS models \gset
ALTER SYSTEM SET llm.models = :'models';
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 2 AND bool_and(state = 'ready') FROM llm_models$$);
SELECT array_length(llm_tokenize(repeat(' a', 64), model => 'small'), 1) AS limit_tokens;
-- (the SQLSTATE only: the message is the engine's)
SELECT left(try_sql($$SELECT llm_embed(repeat(' a', 100), model => 'small')$$), 5) AS over_limit;
SELECT left(try_sql($$SELECT llm_embed(repeat(' a', 100), model => 'small', truncate => false)$$), 5) AS over_limit_explicit;
SET client_min_messages = error;
SELECT llm_embed(repeat(' a', 100), model => 'small', on_error => 'null') IS NULL AS over_limit_null;
RESET client_min_messages;
-- truncated: the embedding of the first 64 tokens, bit for bit
SELECT llm_embed(repeat(' a', 100), model => 'small', truncate => true) = llm_embed(repeat(' a', 64), model => 'small') AS truncated_is_prefix;
SELECT llm_embed(repeat(' a', 64), model => 'small', truncate => true) = llm_embed(repeat(' a', 64), model => 'small') AS at_limit_unchanged;
SELECT left(try_sql($$SELECT llm_embed(ARRAY[repeat(' a', 100)], model => 'small')$$), 5) AS array_over_limit;
SELECT ARRAY(SELECT unnest(llm_embed(ARRAY[repeat(' a', 100)], model => 'small', truncate => true))) = llm_embed(repeat(' a', 64), model => 'small') AS array_truncated;
ALTER SYSTEM RESET llm.models;
SELECT pg_reload_conf();
SELECT wait_until($$SELECT count(*) = 1 FROM llm_models$$);
DROP TABLE embed_docs, embed_copy, embed_ins, embed_long;
SELECT wait_idle();
