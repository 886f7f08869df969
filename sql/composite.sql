-- composite: one serving score per model from throughput, p95 latency, retrieval recall and semantic similarity.
-- Columns and formulas: docs/metrics.md#composite
-- qps = (requests - 1) / (last ts - first ts, seconds); latency_p95_ms over
-- the model's requests; recall_mean, semantic_similarity_mean over its
-- evaluation records. composite = w1 * qps / qps_scale + w2 * (1 -
-- latency_p95_ms / latency_budget_ms) + w3 * recall_mean + w4 * semantic_similarity_mean.
WITH traffic AS (
  SELECT
    model,
    count(*) AS requests,
    (count(*) - 1) / NULLIF(max(date_part('epoch', ts)) - min(date_part('epoch', ts)), 0) AS qps,
    quantile_cont(latency_ms, 0.95) AS latency_p95_ms
  FROM requests
  GROUP BY model
),
judged AS (
  SELECT
    r.model,
    count(*)                   AS evals,
    avg(e.recall)              AS recall_mean,
    avg(e.semantic_similarity) AS semantic_similarity_mean
  FROM evals e
  JOIN requests r ON e.request_id = r.request_id
  GROUP BY r.model
)
SELECT
  t.model,
  t.requests,
  t.qps,
  t.latency_p95_ms,
  COALESCE(j.evals, 0) AS evals,
  j.recall_mean,
  j.semantic_similarity_mean,
  {{w1}} * t.qps / {{qps_scale}}
    + {{w2}} * (1 - t.latency_p95_ms / {{latency_budget_ms}})
    + {{w3}} * j.recall_mean
    + {{w4}} * j.semantic_similarity_mean AS composite
FROM traffic t
LEFT JOIN judged j ON t.model = j.model
ORDER BY t.model
