-- kv_cache: KV-cache memory per request, per model x context bin.
-- Columns and formulas: docs/metrics.md#kv_cache
-- kv_cache_bytes(model, tokens) = 2 * layers * kv_heads * head_dim * bytes_per_elem * tokens,
-- null when the model's architecture is not known (--architectures).
WITH kv AS (
  SELECT
    model, context_bin, context_bin_lo,
    kv_cache_bytes(model, prompt_tokens + completion_tokens) AS kv_bytes
  FROM requests
)
SELECT
  model,
  context_bin,
  count(*)                                 AS requests,
  count(*) FILTER (WHERE kv_bytes IS NULL) AS unknown_architecture_requests,
  avg(kv_bytes) / 1073741824.0             AS kv_cache_gib_mean,
  max(kv_bytes) / 1073741824.0             AS kv_cache_gib_max
FROM kv
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo
