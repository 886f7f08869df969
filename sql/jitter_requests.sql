-- jitter_requests: per-request decode jitter (the rows the jitter job aggregates).
-- Columns and formulas: docs/metrics.md#jitter
-- Each request's tokens are summed up first and then joined to its request, as
-- in jitter.sql: joining first would carry every token row through the join.
WITH per_request AS (
  SELECT
    request_id,
    count(*) AS tokens,
    {{> itl_std_ms}},
    {{> first_token_ms}},
    {{> last_token_ms}}
  FROM tokens
  WHERE source = 'gateway'
  GROUP BY request_id
)
SELECT
  p.request_id,
  r.model,
  r.context_bin,
  p.tokens,
  p.itl_std_ms,
  coalesce(p.first_token_ms, r.ttft_ms)   AS first_token_ms,
  coalesce(p.last_token_ms, r.latency_ms) AS last_token_ms
FROM per_request p
JOIN requests r ON r.request_id = p.request_id
ORDER BY r.model, r.context_bin_lo, p.request_id
