-- load_summary: a load test's whole run per model: throughput over the wall time, latency percentiles.
-- Columns and formulas: docs/metrics.md#load_summary
-- Wall time runs from the first arrival to the last completion (ts + latency_ms).
-- {{by}}: the grouping column (model by default; `--param by=variant` gives each arm's run).
WITH spans AS (
  -- Microseconds since the epoch, the tables' unit (via nanoseconds, dates outside 1677-2262 would fail).
  SELECT
    {{by}}, completion_tokens, total_tokens, ttft_ms, latency_ms,
    CAST(arrow_cast(ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) AS start_us,
    CAST(arrow_cast(ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) + CAST(round(latency_ms * 1000) AS BIGINT) AS end_us
  FROM {{requests}}
),
run AS (
  SELECT
    {{by}},
    count(*)                                          AS requests,
    min(start_us)                                     AS first_us,
    max(coalesce(end_us, start_us))                   AS last_us,
    sum(completion_tokens)                            AS output_tokens,
    sum(total_tokens)                                 AS total_tokens,
    sum(latency_ms)                                   AS busy_ms,
    avg(latency_ms)                                   AS mean_latency_ms,
    max_overlap(start_us, end_us)                     AS peak_concurrency,
    quantile_cont(ttft_ms, 0.50)                      AS ttft_p50_ms,
    quantile_cont(ttft_ms, 0.95)                      AS ttft_p95_ms,
    quantile_cont(ttft_ms, 0.99)                      AS ttft_p99_ms,
    quantile_cont(latency_ms, 0.50)                   AS e2e_p50_ms,
    quantile_cont(latency_ms, 0.95)                   AS e2e_p95_ms,
    quantile_cont(latency_ms, 0.99)                   AS e2e_p99_ms
  FROM spans
  GROUP BY {{by}}
)
SELECT
  {{by}},
  requests,
  arrow_cast(to_timestamp_micros(first_us), 'Timestamp(Microsecond, Some("UTC"))') AS first_arrival,
  arrow_cast(to_timestamp_micros(last_us), 'Timestamp(Microsecond, Some("UTC"))')  AS last_completion,
  CAST(last_us - first_us AS DOUBLE) / 1e6                                         AS wall_s,
  output_tokens,
  total_tokens,
  requests * 1e6 / NULLIF(last_us - first_us, 0)                                   AS qps,
  output_tokens * 1e6 / NULLIF(last_us - first_us, 0)                              AS output_tokens_per_s,
  total_tokens * 1e6 / NULLIF(last_us - first_us, 0)                               AS tokens_per_s,
  busy_ms * 1e3 / NULLIF(last_us - first_us, 0)                                    AS mean_concurrency,
  peak_concurrency,
  mean_latency_ms,
  ttft_p50_ms, ttft_p95_ms, ttft_p99_ms,
  e2e_p50_ms, e2e_p95_ms, e2e_p99_ms
FROM run
ORDER BY {{by}}
