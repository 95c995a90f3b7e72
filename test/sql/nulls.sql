--
-- nulls: a NULL prompt gives NULL, a NULL option means its default.
--
SELECT llm_generate(NULL) IS NULL AS null_prompt;
SELECT llm_generate(NULL::text[]) IS NULL AS null_array;
SELECT llm_complete(NULL) IS NULL AS null_complete;
SELECT llm_chat(NULL) IS NULL AS null_chat;
SELECT llm_tokenize(NULL) IS NULL AS null_tokenize;
SELECT llm_detokenize(NULL) IS NULL AS null_detokenize;
SELECT llm_generate('Reply with just the word yes.', max_tokens => NULL, temperature => NULL, top_p => NULL,
                    top_k => NULL, min_p => NULL, repetition_penalty => NULL, seed => NULL,
                    stop => NULL, system => NULL, raw => NULL, on_error => NULL)
     = llm_generate('Reply with just the word yes.') AS null_means_default;
-- max_tokens => NULL is the default 256: a counting continuation that does
-- not stop by itself ends at exactly 256 tokens
SELECT completion_tokens = 256 AND finish_reason = 'length' AS default_max_tokens
FROM llm_complete('1, 2, 3, 4, 5, 6, 7, 8,', raw => true, max_tokens => NULL);
