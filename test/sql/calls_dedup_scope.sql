--
-- calls_dedup_scope: two statements sent in one query string (one simple
-- Query message: one statement start time, one implicit transaction) are
-- two top-level statements: they do not share calls
-- (docs/BATCH_SCAN.md, "Deduplication", Scope).
--
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT llm_generate('Say yes.', max_tokens => 3) IS NOT NULL AS first \; SELECT llm_generate('Say yes.', max_tokens => 3) IS NOT NULL AS second;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
-- within one statement they do
SELECT requests_finished AS f0 FROM llm_stat \gset
SELECT llm_generate('Say yes.', max_tokens => 3) = llm_generate('Say yes.', max_tokens => 3) AS same;
SELECT requests_finished - :f0 AS requests FROM llm_stat;
