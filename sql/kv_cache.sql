-- kv_cache: KV-cache memory per request and per GPU, per model x context bin.
-- Columns and formulas: docs/metrics.md#kv_cache
-- kv_cache_bytes(model, tokens) = 2 * layers * kv_heads * head_dim * bytes_per_elem * tokens,
-- null when the model's architecture is not known (--architectures); with a
-- third argument tp, one GPU's share: ceil(kv_heads / tp) heads instead of kv_heads.
-- Parameter tp: tensor-parallel degree; 0 (default) takes the architecture's
-- `tensor_parallel`, else 1 (kv_tensor_parallel).
-- A request whose prompt length is not logged (the `unknown` bin) has no size.
WITH kv AS (
  SELECT
    model, context_bin, context_bin_lo, prompt_tokens,
    kv_cache_bytes(model, prompt_tokens + completion_tokens)          AS kv_bytes,
    kv_cache_bytes(model, prompt_tokens + completion_tokens, {{tp}}) AS kv_bytes_per_gpu,
    kv_tensor_parallel(model, {{tp}})                                 AS tp
  FROM requests
)
SELECT
  model,
  context_bin,
  count(*)                                 AS requests,
  count(*) FILTER (WHERE kv_bytes IS NULL AND prompt_tokens IS NOT NULL) AS unknown_architecture_requests,
  max(tp)                                  AS tensor_parallel,
  avg(kv_bytes) / 1073741824.0             AS kv_cache_gib_mean,
  max(kv_bytes) / 1073741824.0             AS kv_cache_gib_max,
  avg(kv_bytes_per_gpu) / 1073741824.0     AS kv_cache_gib_per_gpu_mean,
  max(kv_bytes_per_gpu) / 1073741824.0     AS kv_cache_gib_per_gpu_max
FROM kv
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo
