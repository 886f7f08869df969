-- Metrics shared by several jobs (most of them aggregates), each defined once
-- here (their meaning: docs/metrics.md). A job includes one as `{{> name}}`, which
-- expands to `<expression> AS name`; `tokscope job NAME --show-sql` prints a
-- job with every include expanded. Metrics over `priced` rows need the
-- column `price` from `{{> price}}`, the cost metrics also `logged_cost_usd`
-- (a request's cost is its price, else its logged cost: docs/metrics.md#cost).
-- A job over `request_counts` includes a
-- metric made of counts as `{{> name | counted}}`: each `count(*)` sums the
-- rows' `requests` instead.

-- metric: price
price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens)

-- metric: requests
count(*)

-- metric: eos
count(*) FILTER (WHERE eos_status = 'eos')

-- metric: length
count(*) FILTER (WHERE eos_status = 'length')

-- metric: implicit_truncation
count(*) FILTER (WHERE eos_status = 'implicit_truncation')

-- metric: unknown
count(*) FILTER (WHERE eos_status = 'unknown')

-- metric: eos_compliance_rate
CAST(count(*) FILTER (WHERE eos_status = 'eos') AS DOUBLE)
  / NULLIF(count(*) FILTER (WHERE eos_status IN ('eos', 'implicit_truncation')), 0)

-- metric: eos_marker_rate
CAST(count(*) FILTER (WHERE has_eos_marker) AS DOUBLE)
  / NULLIF(count(*) FILTER (WHERE has_eos_marker IS NOT NULL), 0)

-- metric: implicit_truncation_rate
CAST(count(*) FILTER (WHERE eos_status = 'implicit_truncation') AS DOUBLE) / count(*)

-- metric: ttft_p50_ms
quantile_cont(ttft_ms, 0.50)

-- metric: ttft_p95_ms
quantile_cont(ttft_ms, 0.95)

-- metric: ttft_p99_ms
quantile_cont(ttft_ms, 0.99)

-- metric: tpot_p50_ms
quantile_cont(tpot_ms, 0.50)

-- metric: tpot_p95_ms
quantile_cont(tpot_ms, 0.95)

-- metric: latency_p50_ms
quantile_cont(latency_ms, 0.50)

-- metric: latency_p95_ms
quantile_cont(latency_ms, 0.95)

-- metric: decode_tps_p50
quantile_cont(decode_tps, 0.50)

-- metric: e2e_tps_mean
avg(e2e_tps)

-- metric: unpriced_requests
count(*) FILTER (WHERE price IS NULL)

-- metric: uncosted_requests
count(*) FILTER (WHERE price IS NULL AND logged_cost_usd IS NULL)

-- metric: cost_source
concat_ws('+',
  CASE WHEN count(*) FILTER (WHERE price IS NOT NULL) > 0 THEN 'priced' END,
  CASE WHEN count(*) FILTER (WHERE price IS NULL AND logged_cost_usd IS NOT NULL) > 0 THEN 'logged' END,
  CASE WHEN count(*) FILTER (WHERE price IS NULL AND logged_cost_usd IS NULL) > 0 THEN 'none' END)

-- metric: cost_usd
sum(coalesce(price['total_usd'], logged_cost_usd))

-- metric: logged_cost_share
coalesce(sum(logged_cost_usd) FILTER (WHERE price IS NULL), 0)
  / NULLIF(sum(coalesce(price['total_usd'], logged_cost_usd)), 0)

-- metric: priced_cost_usd
price['total_usd']

-- metric: cost_mismatch
abs(logged_cost_usd - price['total_usd'])
  > {{tolerance}} * greatest(abs(logged_cost_usd), abs(price['total_usd']))

-- metric: cost_per_1k_tokens
1000 * sum(coalesce(price['total_usd'], logged_cost_usd)) FILTER (WHERE prompt_tokens + completion_tokens IS NOT NULL)
  / NULLIF(sum(prompt_tokens + completion_tokens)
      FILTER (WHERE coalesce(price['total_usd'], logged_cost_usd) IS NOT NULL), 0)

-- metric: input_share
sum(price['input_usd'] + price['cache_write_usd']) / NULLIF(sum(price['total_usd']), 0)

-- metric: cached_share
sum(price['cached_input_usd']) / NULLIF(sum(price['total_usd']), 0)

-- metric: output_share
sum(price['output_usd']) / NULLIF(sum(price['total_usd']), 0)

-- metric: tokens
sum(prompt_tokens + completion_tokens)

-- metric: first_token_ms
coalesce(first_token_emitted_ms, ttft_ms)

-- metric: last_token_ms
coalesce(last_token_emitted_ms, latency_ms)

-- metric: tail_token_jitter_ms
stddev_samp(last_token_ms - first_token_ms)
