-- jitter_requests: per-request decode jitter (the rows the jitter job aggregates).
-- Columns and formulas: docs/metrics.md#jitter
-- Requests with per-token data only; `tokens` is the number of their token rows.
SELECT
  request_id,
  model,
  context_bin,
  output_token_count AS tokens,
  itl_std_ms,
  {{> first_token_ms}},
  {{> last_token_ms}}
FROM requests
WHERE output_token_count IS NOT NULL
ORDER BY model, context_bin_lo, request_id
