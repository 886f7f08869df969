-- report: eos, latency and cost side by side per model x context bin; the
-- report `tokscope run` prints. One pass over `requests`: each column is the
-- same expression as in eos.sql, latency.sql and cost.sql (a test checks the
-- columns match), documented in docs/metrics.md#report.
WITH r AS (
  SELECT
    model, context_bin, context_bin_lo, eos_status,
    ttft_ms, tpot_ms, latency_ms, decode_tps, e2e_tps,
    prompt_tokens, completion_tokens,
    price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens) AS p
  FROM requests
)
SELECT
  model,
  context_bin,
  -- eos
  count(*)                                                   AS requests,
  count(*) FILTER (WHERE eos_status = 'eos')                 AS eos,
  count(*) FILTER (WHERE eos_status = 'length')              AS length,
  count(*) FILTER (WHERE eos_status = 'implicit_truncation') AS implicit_truncation,
  count(*) FILTER (WHERE eos_status = 'unknown')             AS unknown,
  CAST(count(*) FILTER (WHERE eos_status = 'eos') AS DOUBLE)
    / NULLIF(count(*) FILTER (WHERE eos_status IN ('eos', 'implicit_truncation')), 0)
                                                             AS eos_compliance_rate,
  CAST(count(*) FILTER (WHERE eos_status = 'implicit_truncation') AS DOUBLE) / count(*)
                                                             AS implicit_truncation_rate,
  -- latency
  quantile_cont(ttft_ms, 0.50)    AS ttft_p50_ms,
  quantile_cont(ttft_ms, 0.95)    AS ttft_p95_ms,
  quantile_cont(ttft_ms, 0.99)    AS ttft_p99_ms,
  quantile_cont(tpot_ms, 0.50)    AS tpot_p50_ms,
  quantile_cont(tpot_ms, 0.95)    AS tpot_p95_ms,
  quantile_cont(latency_ms, 0.50) AS latency_p50_ms,
  quantile_cont(latency_ms, 0.95) AS latency_p95_ms,
  quantile_cont(decode_tps, 0.50) AS decode_tps_p50,
  avg(e2e_tps)                    AS e2e_tps_mean,
  -- cost
  count(*) FILTER (WHERE p IS NULL) AS unpriced_requests,
  sum(p['total_usd'])               AS cost_usd,
  1000 * sum(p['total_usd'])
    / NULLIF(sum(prompt_tokens + completion_tokens) FILTER (WHERE p IS NOT NULL), 0)
                                    AS cost_per_1k_tokens,
  sum(p['input_usd'] + p['cache_write_usd']) / NULLIF(sum(p['total_usd']), 0) AS input_share,
  sum(p['cached_input_usd']) / NULLIF(sum(p['total_usd']), 0)                 AS cached_share,
  sum(p['output_usd']) / NULLIF(sum(p['total_usd']), 0)                       AS output_share
FROM r
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo
