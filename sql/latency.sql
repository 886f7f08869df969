-- latency: TTFT, TPOT, end-to-end latency and throughput per model x context bin.
-- Columns and formulas: docs/metrics.md#latency
-- quantile_cont is tokscope's exact quantile (linear interpolation between
-- closest ranks, DuckDB's quantile_cont); nulls are skipped.
SELECT
  model,
  context_bin,
  quantile_cont(ttft_ms, 0.50)    AS ttft_p50_ms,
  quantile_cont(ttft_ms, 0.95)    AS ttft_p95_ms,
  quantile_cont(ttft_ms, 0.99)    AS ttft_p99_ms,
  quantile_cont(tpot_ms, 0.50)    AS tpot_p50_ms,
  quantile_cont(tpot_ms, 0.95)    AS tpot_p95_ms,
  quantile_cont(latency_ms, 0.50) AS latency_p50_ms,
  quantile_cont(latency_ms, 0.95) AS latency_p95_ms,
  quantile_cont(decode_tps, 0.50) AS decode_tps_p50,
  avg(e2e_tps)                    AS e2e_tps_mean
FROM requests
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo
