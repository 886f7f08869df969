-- jitter_requests: per-request decode jitter (the rows the jitter job aggregates).
-- Columns and formulas: docs/metrics.md#jitter
SELECT
  t.request_id,
  r.model,
  r.context_bin,
  count(*)                                                     AS tokens,
  stddev_samp(t.itl_ms)                                        AS itl_std_ms,
  coalesce(first_value(t.emitted_ms ORDER BY t.position), min(r.ttft_ms))   AS first_token_ms,
  coalesce(last_value(t.emitted_ms ORDER BY t.position), min(r.latency_ms)) AS last_token_ms
FROM tokens t
JOIN requests r ON r.request_id = t.request_id
WHERE t.source = 'gateway'
GROUP BY t.request_id, r.model, r.context_bin, r.context_bin_lo
ORDER BY r.model, r.context_bin_lo, t.request_id
