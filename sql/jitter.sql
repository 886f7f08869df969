-- jitter: decode jitter per model x context bin, from per-token timings.
-- Columns and formulas: docs/metrics.md#jitter
-- First-token and last-token latency are kept apart: averages hide both.
-- Each request's jitter and token times are columns of `requests`, derived at
-- ingest from its own per-token data, so the job reads no token rows.
-- {{by}}: the grouping column (model by default; `--param by=model_version` compares versions).
WITH timed AS (
  SELECT
    {{by}},
    context_bin,
    context_bin_lo,
    itl_std_ms,
    {{> first_token_ms}},
    {{> last_token_ms}}
  FROM {{requests}}
  WHERE output_token_count IS NOT NULL
)
SELECT
  {{by}},
  context_bin,
  count(*)                             AS requests,
  quantile_cont(itl_std_ms, 0.50)      AS itl_std_p50_ms,
  quantile_cont(itl_std_ms, 0.95)      AS itl_std_p95_ms,
  quantile_cont(first_token_ms, 0.50)  AS first_token_p50_ms,
  quantile_cont(first_token_ms, 0.95)  AS first_token_p95_ms,
  quantile_cont(first_token_ms, 0.99)  AS first_token_p99_ms,
  quantile_cont(last_token_ms, 0.50)   AS last_token_p50_ms,
  quantile_cont(last_token_ms, 0.95)   AS last_token_p95_ms,
  quantile_cont(last_token_ms, 0.99)   AS last_token_p99_ms,
  {{> tail_token_jitter_ms}}
FROM timed
GROUP BY {{by}}, context_bin, context_bin_lo
ORDER BY {{by}}, context_bin_lo
