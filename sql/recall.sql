-- recall: retrieval recall of evaluation records per model x context bin (long-context fact recall).
-- Columns and formulas: docs/metrics.md#recall
-- Each record takes its request's model and context bin; a record whose request is not in the
-- dataset has neither and comes last.
SELECT
  r.model,
  r.context_bin,
  count(*)                              AS evals,
  count(e.recall)                       AS recall_scored,
  avg(e.recall)                         AS recall_mean,
  quantile_cont(e.recall, 0.50)         AS recall_p50,
  quantile_cont(e.recall, 0.10)         AS recall_p10
FROM evals e
LEFT JOIN requests r ON r.request_id = e.request_id
GROUP BY r.model, r.context_bin, r.context_bin_lo
ORDER BY r.model NULLS LAST, r.context_bin_lo NULLS LAST
