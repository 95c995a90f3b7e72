--
-- tokenize_offload: a text of 16 KiB or more is tokenized on the engine's
-- tokenizer thread, off the worker's step; its ids are those of the inline
-- path, and a long prompt's errors keep their SQLSTATE and message.
--
-- 5,000 words (about 44 KB): its ids equal the ids of its ten 500-word
-- pieces (each under 16 KiB, tokenized inline) put together, since the
-- pre-tokenizer splits before every space-led word
WITH w AS (SELECT i, 'word' || i AS word FROM generate_series(1, 5000) i),
whole AS (SELECT string_agg(word, ' ' ORDER BY i) AS t FROM w),
pieces AS (
  SELECT (i - 1) / 500 AS k, string_agg(CASE WHEN i = 1 THEN '' ELSE ' ' END || word, '' ORDER BY i) AS p
  FROM w GROUP BY 1)
SELECT octet_length(t) >= 16384 AS long_text,
       (SELECT max(octet_length(p)) FROM pieces) < 16384 AS short_pieces,
       llm_tokenize(t) = (SELECT array_agg(id ORDER BY k, ord)
                          FROM pieces, unnest(llm_tokenize(p)) WITH ORDINALITY AS u(id, ord)) AS same_ids_as_pieces,
       array_length(llm_tokenize(t), 1) AS n_tokens,
       llm_detokenize(llm_tokenize(t)) = t AS round_trip
FROM whole;
-- several long texts in one statement, each answered with its own ids, in order
SELECT n, array_length(llm_tokenize(repeat(' lighthouse', n)), 1) =
          n * array_length(llm_tokenize(' lighthouse'), 1) AS ids_per_word
FROM (VALUES (2000), (3000), (1600)) AS v(n);
-- a long prompt that does not fit the context once tokenized: the same error as a short one
SELECT try_sql($$SELECT llm_generate(repeat('word ', 12000), max_tokens => 1)$$);
SELECT try_sql($$SELECT llm_classify(repeat('word ', 1000), ARRAY['yes', repeat(' no', 5000)])$$);
-- the session goes on: a short request right after
SELECT length(llm_generate('Say hi.', max_tokens => 2)) > 0 AS still_serving;
