-- recall_at_k: the top-K recall curve, K = 1..{{max_k}}, of evaluation records with ranked retrieval results, per model.
-- Columns and formulas: docs/metrics.md#recall_at_k
-- A record's recall at K: the share of its distinct relevant ids found among the first K
-- retrieved; the curve is its mean over the records (those with a retrieved list and at least
-- one relevant id). A record whose request is not in the dataset has a null model.
WITH ranked AS (
  SELECT r.model, e.request_id, e.source_file, e.source_line, e.retrieved,
    array_distinct(e.relevant) AS relevant
  FROM evals e
  LEFT JOIN requests r ON r.request_id = e.request_id
  WHERE e.retrieved IS NOT NULL AND cardinality(e.relevant) > 0
),
items AS (
  -- One row per relevant id of a record.
  SELECT model, source_file, source_line, retrieved, cardinality(relevant) AS n_relevant, unnest(relevant) AS item
  FROM ranked
),
found AS (
  -- The rank (1-based) at which the id was first retrieved; null when it was not.
  SELECT model, source_file, source_line, n_relevant, array_position(retrieved, item) AS item_rank
  FROM items
),
per_k AS (
  -- Each relevant id once per K (a list unnested, not a table function: plans stay serialisable).
  SELECT model, source_file, source_line, n_relevant, item_rank, unnest(generate_series(1, {{max_k}})) AS k
  FROM found
),
per_record AS (
  SELECT model, source_file, source_line, k,
    CAST(count(*) FILTER (WHERE item_rank <= k) AS DOUBLE) / max(n_relevant) AS recall
  FROM per_k
  GROUP BY model, source_file, source_line, k
)
SELECT
  model,
  k,
  count(*)      AS records,
  avg(recall)   AS recall_at_k
FROM per_record
GROUP BY model, k
ORDER BY model NULLS LAST, k
