-- latency: TTFT, TPOT, end-to-end latency and throughput per model x context bin.
-- Columns and formulas: docs/metrics.md#latency
-- {{by}}: the grouping column (model by default; `--param by=model_version` compares versions).
-- quantile_cont is tokscope's exact quantile (linear interpolation between
-- closest ranks, DuckDB's quantile_cont); nulls are skipped.
SELECT
  {{by}},
  context_bin,
  {{> ttft_p50_ms}},
  {{> ttft_p95_ms}},
  {{> ttft_p99_ms}},
  {{> tpot_p50_ms}},
  {{> tpot_p95_ms}},
  {{> latency_p50_ms}},
  {{> latency_p95_ms}},
  {{> decode_tps_p50}},
  {{> e2e_tps_mean}}
FROM {{requests}}
GROUP BY {{by}}, context_bin, context_bin_lo
ORDER BY {{by}}, context_bin_lo
