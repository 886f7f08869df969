-- throughput: load over time per model x window ({{window}} microseconds, `--param window=60s`).
-- Columns and formulas: docs/metrics.md#throughput
-- Windows are aligned to multiples of the window since the Unix epoch (UTC). A request
-- is in flight over [ts, ts + latency_ms); it counts (requests, rates, percentiles) in the
-- window where it arrives, and in every window it overlaps for the concurrency columns.
-- {{by}}: the grouping column (model by default; `--param by=variant` gives each arm's load).
WITH spans AS (
  -- Microseconds since the epoch, the tables' unit (via nanoseconds, dates outside 1677-2262 would fail).
  SELECT
    {{by}}, completion_tokens, ttft_ms, latency_ms,
    CAST(arrow_cast(ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) AS start_us,
    CAST(arrow_cast(ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) + CAST(round(latency_ms * 1000) AS BIGINT) AS end_us
  FROM {{requests}}
),
aligned AS (
  SELECT
    *,
    start_us - ((start_us % {{window}}) + {{window}}) % {{window}} AS arrival_window_us,
    (end_us - 1) - (((end_us - 1) % {{window}}) + {{window}}) % {{window}} AS last_window_us
  FROM spans
),
windows AS (
  -- One row per request and window it touches: its arrival window, then each
  -- later window its span reaches (none when latency_ms is null or 0).
  SELECT
    *,
    unnest(generate_series(arrival_window_us, greatest(arrival_window_us, coalesce(last_window_us, arrival_window_us)), {{window}})) AS window_us
  FROM aligned
),
clipped AS (
  SELECT
    {{by}}, completion_tokens, ttft_ms, latency_ms, window_us,
    window_us = arrival_window_us AS arrived,
    greatest(start_us, window_us) AS from_us,
    CASE WHEN end_us IS NOT NULL THEN least(end_us, window_us + {{window}}) END AS to_us
  FROM windows
)
SELECT
  {{by}},
  arrow_cast(to_timestamp_micros(window_us), 'Timestamp(Microsecond, Some("UTC"))') AS window_start,
  count(*) FILTER (WHERE arrived)                                          AS requests,
  count(*) FILTER (WHERE arrived) * 1e6 / {{window}}                       AS qps,
  coalesce(sum(completion_tokens) FILTER (WHERE arrived), 0) * 1e6 / {{window}} AS output_tokens_per_s,
  CAST(coalesce(sum(greatest(to_us - from_us, 0)), 0) AS DOUBLE) / {{window}} AS mean_concurrency,
  max_overlap(from_us, to_us)                                              AS peak_concurrency,
  quantile_cont(ttft_ms, 0.50) FILTER (WHERE arrived)                      AS ttft_p50_ms,
  quantile_cont(ttft_ms, 0.95) FILTER (WHERE arrived)                      AS ttft_p95_ms,
  quantile_cont(ttft_ms, 0.99) FILTER (WHERE arrived)                      AS ttft_p99_ms,
  quantile_cont(latency_ms, 0.50) FILTER (WHERE arrived)                   AS e2e_p50_ms,
  quantile_cont(latency_ms, 0.95) FILTER (WHERE arrived)                   AS e2e_p95_ms,
  quantile_cont(latency_ms, 0.99) FILTER (WHERE arrived)                   AS e2e_p99_ms
FROM clipped
GROUP BY {{by}}, window_us
ORDER BY {{by}}, window_us
