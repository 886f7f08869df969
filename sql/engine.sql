-- engine: the engine's profiles aggregated per model x variant x context bin: queue, prefill, decode and
-- overhead percentiles, KV-cache hit rate, CUDA kernel time and decode-step jitter.
-- Columns and formulas: docs/metrics.md#engine
-- Each profile is joined to the gateway's request by request_id for its context bin, arm and
-- end-to-end latency; a profile without a request has a null bin (and overhead) and comes last.
-- overhead_ms is gateway_engine's: latency_ms - prefill - decode, queueing included (queue_ms is
-- that part of it the engine logs).
WITH joined AS (
  SELECT
    coalesce(r.model, p.model)                       AS model,
    r.variant,
    r.context_bin,
    r.context_bin_lo,
    r.request_id IS NOT NULL                         AS matched,
    p.queue_ms,
    p.prefill_latency_ms                             AS prefill_ms,
    p.decode_ms,
    r.latency_ms - p.prefill_latency_ms - p.decode_ms AS overhead_ms,
    p.kv_cache_hit_ratio,
    p.cuda_kernel_avg_us,
    p.decode_step_std_ms
  FROM profiles p
  LEFT JOIN requests r ON r.request_id = p.request_id
)
SELECT
  model,
  variant,
  context_bin,
  count(*)                                          AS profiles,
  count(*) FILTER (WHERE matched)                   AS matched,
  quantile_cont(queue_ms, 0.50)                     AS queue_p50_ms,
  quantile_cont(queue_ms, 0.95)                     AS queue_p95_ms,
  quantile_cont(prefill_ms, 0.50)                   AS prefill_p50_ms,
  quantile_cont(prefill_ms, 0.95)                   AS prefill_p95_ms,
  quantile_cont(decode_ms, 0.50)                    AS decode_p50_ms,
  quantile_cont(decode_ms, 0.95)                    AS decode_p95_ms,
  quantile_cont(overhead_ms, 0.50)                  AS overhead_p50_ms,
  quantile_cont(overhead_ms, 0.95)                  AS overhead_p95_ms,
  avg(kv_cache_hit_ratio)                           AS kv_cache_hit_rate,
  quantile_cont(cuda_kernel_avg_us, 0.50)           AS cuda_kernel_us_p50,
  quantile_cont(cuda_kernel_avg_us, 0.95)           AS cuda_kernel_us_p95,
  quantile_cont(decode_step_std_ms, 0.50)           AS decode_step_std_p50_ms,
  quantile_cont(decode_step_std_ms, 0.95)           AS decode_step_std_p95_ms
FROM joined
GROUP BY model, variant, context_bin, context_bin_lo
ORDER BY model, variant NULLS LAST, context_bin_lo NULLS LAST
