--
-- encoding: text crosses to the worker as UTF-8 and comes back in the
-- database encoding; characters it cannot represent become '?'.
--
CREATE DATABASE llm_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c llm_latin1
SET client_min_messages = warning;
CREATE EXTENSION llm;
RESET client_min_messages;
SELECT llm_detokenize(llm_tokenize('caf' || chr(233))) = 'caf' || chr(233) AS latin1_roundtrip;
SELECT llm_tokenize('caf' || chr(233)) AS latin1_ids;
-- the token ids of "👩‍👩‍👧 family" (five characters outside LATIN1, then ASCII)
SELECT llm_detokenize(ARRAY[10813, 235, 119, 321, 231, 10813, 235, 119, 321, 231, 10813, 235, 117, 1564]) AS replaced;
SELECT length(llm_generate('Write the word caf' || chr(233) || ' three times.', max_tokens => 12)) > 0 AS generated;
\c contrib_regression
DROP DATABASE llm_latin1;
-- UTF-8 database: the same ids give the characters
SELECT llm_detokenize(ARRAY[10813, 235, 119, 321, 231, 10813, 235, 119, 321, 231, 10813, 235, 117, 1564]) AS emoji;
