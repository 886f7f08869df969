-- reconcile_requests: the requests whose logged and priced costs differ by more
-- than {{tolerance}} (relative: x the larger of the two), largest difference first;
-- the rows behind the reconcile job's `mismatched_requests`.
-- Columns and formulas: docs/metrics.md#reconcile
WITH priced AS (
  SELECT
    date, ts, request_id, model, source_format,
    prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens,
    logged_cost_usd, {{> price}}
  FROM requests
),
compared AS (
  SELECT *, {{> priced_cost_usd}}, {{> cost_mismatch}}
  FROM priced
)
SELECT
  date,
  ts,
  request_id,
  model,
  source_format,
  prompt_tokens,
  cached_tokens,
  cache_write_tokens,
  completion_tokens,
  priced_cost_usd,
  logged_cost_usd,
  logged_cost_usd - priced_cost_usd AS difference_usd,
  logged_cost_usd / NULLIF(priced_cost_usd, 0) AS logged_to_priced_ratio
FROM compared
WHERE cost_mismatch
ORDER BY abs(logged_cost_usd - priced_cost_usd) DESC, ts, request_id
