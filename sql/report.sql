-- report: eos, latency and cost side by side per model x context bin; the
-- report `tokscope run` prints. One pass over `requests`, with the same
-- metrics (sql/metrics.sql) as eos.sql, latency.sql and cost.sql.
-- Columns and formulas: docs/metrics.md#report
WITH priced AS (
  SELECT
    {{by}}, context_bin, context_bin_lo, eos_status,
    ttft_ms, tpot_ms, latency_ms, decode_tps, e2e_tps,
    prompt_tokens, completion_tokens, logged_cost_usd,
    {{> price}}
  FROM {{requests}}
)
SELECT
  {{by}},
  context_bin,
  {{> requests}},
  {{> eos}},
  {{> length}},
  {{> implicit_truncation}},
  {{> unknown}},
  {{> eos_compliance_rate}},
  {{> implicit_truncation_rate}},
  {{> ttft_p50_ms}},
  {{> ttft_p95_ms}},
  {{> ttft_p99_ms}},
  {{> tpot_p50_ms}},
  {{> tpot_p95_ms}},
  {{> latency_p50_ms}},
  {{> latency_p95_ms}},
  {{> decode_tps_p50}},
  {{> e2e_tps_mean}},
  {{> unpriced_requests}},
  {{> uncosted_requests}},
  {{> cost_source}},
  {{> cost_usd}},
  {{> logged_cost_share}},
  {{> cost_per_1k_tokens}},
  {{> input_share}},
  {{> cached_share}},
  {{> output_share}}
FROM priced
GROUP BY {{by}}, context_bin, context_bin_lo
ORDER BY {{by}}, context_bin_lo
