-- ab: two experiment arms compared per context bin and overall ('all'), one row per metric.
-- Columns and formulas: docs/metrics.md#ab
-- Parameters: {{a}} and {{b}} (the arms, `--param a=ARM --param b=ARM`; by default the
-- first two `variant` values in name order), {{resamples}} and {{seed}} (bootstraps).
-- Each arm's values are collected with count / array_agg, then compared by
-- compare_proportions, compare_medians and compare_cost_per_1k; Holm's correction
-- runs across the bins of one metric.
WITH variants AS (
  SELECT DISTINCT variant FROM requests WHERE variant IS NOT NULL
),
first_arm AS (
  SELECT coalesce({{a}}, min(variant) FILTER (WHERE variant IS DISTINCT FROM {{b}})) AS arm_a
  FROM variants
),
arms AS (
  SELECT f.arm_a, coalesce({{b}}, min(v.variant) FILTER (WHERE v.variant <> f.arm_a)) AS arm_b
  FROM first_arm f CROSS JOIN variants v
  GROUP BY f.arm_a
),
tagged AS (
  SELECT
    a.arm_a, a.arm_b, r.context_bin, r.context_bin_lo, r.eos_status, r.ttft_ms, r.tpot_ms,
    r.variant = a.arm_a AS in_a,
    r.prompt_tokens + r.completion_tokens AS tokens,
    price_usd(r.model, r.ts, r.prompt_tokens, r.cached_tokens, r.cache_write_tokens, r.completion_tokens)['total_usd'] AS cost_usd
  FROM requests r CROSS JOIN arms a
  WHERE r.variant = a.arm_a OR r.variant = a.arm_b
),
per_bin AS (
  SELECT
    arm_a, arm_b,
    coalesce(context_bin, 'all') AS context_bin,
    context_bin_lo,
    count(*) FILTER (WHERE in_a)                                                    AS requests_a,
    count(*) FILTER (WHERE NOT in_a)                                                AS requests_b,
    count(*) FILTER (WHERE in_a AND eos_status = 'eos')                             AS eos_a,
    count(*) FILTER (WHERE NOT in_a AND eos_status = 'eos')                         AS eos_b,
    count(*) FILTER (WHERE in_a AND eos_status IN ('eos', 'implicit_truncation'))     AS ended_a,
    count(*) FILTER (WHERE NOT in_a AND eos_status IN ('eos', 'implicit_truncation')) AS ended_b,
    count(*) FILTER (WHERE in_a AND eos_status = 'implicit_truncation')             AS truncated_a,
    count(*) FILTER (WHERE NOT in_a AND eos_status = 'implicit_truncation')         AS truncated_b,
    array_agg(ttft_ms) FILTER (WHERE in_a AND ttft_ms IS NOT NULL)                  AS ttft_a,
    array_agg(ttft_ms) FILTER (WHERE NOT in_a AND ttft_ms IS NOT NULL)              AS ttft_b,
    array_agg(tpot_ms) FILTER (WHERE in_a AND tpot_ms IS NOT NULL)                  AS tpot_a,
    array_agg(tpot_ms) FILTER (WHERE NOT in_a AND tpot_ms IS NOT NULL)              AS tpot_b,
    array_agg(cost_usd) FILTER (WHERE in_a AND cost_usd IS NOT NULL)                AS cost_a,
    array_agg(tokens) FILTER (WHERE in_a AND cost_usd IS NOT NULL)                  AS tokens_a,
    array_agg(cost_usd) FILTER (WHERE NOT in_a AND cost_usd IS NOT NULL)            AS cost_b,
    array_agg(tokens) FILTER (WHERE NOT in_a AND cost_usd IS NOT NULL)              AS tokens_b
  FROM tagged
  GROUP BY GROUPING SETS ((arm_a, arm_b, context_bin, context_bin_lo), (arm_a, arm_b))
),
compared AS (
  SELECT
    arm_a, arm_b, context_bin, context_bin_lo,
    requests_a, requests_b, ended_a, ended_b,
    CAST(coalesce(cardinality(ttft_a), 0) AS BIGINT) AS ttft_n_a,
    CAST(coalesce(cardinality(ttft_b), 0) AS BIGINT) AS ttft_n_b,
    CAST(coalesce(cardinality(tpot_a), 0) AS BIGINT) AS tpot_n_a,
    CAST(coalesce(cardinality(tpot_b), 0) AS BIGINT) AS tpot_n_b,
    CAST(coalesce(cardinality(cost_a), 0) AS BIGINT) AS cost_n_a,
    CAST(coalesce(cardinality(cost_b), 0) AS BIGINT) AS cost_n_b,
    compare_proportions(eos_a, ended_a, eos_b, ended_b)                                  AS eos_cmp,
    compare_proportions(truncated_a, requests_a, truncated_b, requests_b)                AS truncation_cmp,
    compare_medians(ttft_a, ttft_b, {{resamples}}, {{seed}})                             AS ttft_cmp,
    compare_medians(tpot_a, tpot_b, {{resamples}}, {{seed}})                             AS tpot_cmp,
    compare_cost_per_1k(cost_a, tokens_a, cost_b, tokens_b, {{resamples}}, {{seed}})    AS cost_cmp
  FROM per_bin
),
long AS (
  SELECT
    c.context_bin, c.context_bin_lo, m.ord, m.metric, c.arm_a, c.arm_b,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.ended_a WHEN 'implicit_truncation_rate' THEN c.requests_a
      WHEN 'ttft_p50_ms' THEN c.ttft_n_a WHEN 'tpot_p50_ms' THEN c.tpot_n_a ELSE c.cost_n_a END AS n_a,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.ended_b WHEN 'implicit_truncation_rate' THEN c.requests_b
      WHEN 'ttft_p50_ms' THEN c.ttft_n_b WHEN 'tpot_p50_ms' THEN c.tpot_n_b ELSE c.cost_n_b END AS n_b,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.eos_cmp['value_a'] WHEN 'implicit_truncation_rate' THEN c.truncation_cmp['value_a']
      WHEN 'ttft_p50_ms' THEN c.ttft_cmp['value_a'] WHEN 'tpot_p50_ms' THEN c.tpot_cmp['value_a'] ELSE c.cost_cmp['value_a'] END AS value_a,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.eos_cmp['value_b'] WHEN 'implicit_truncation_rate' THEN c.truncation_cmp['value_b']
      WHEN 'ttft_p50_ms' THEN c.ttft_cmp['value_b'] WHEN 'tpot_p50_ms' THEN c.tpot_cmp['value_b'] ELSE c.cost_cmp['value_b'] END AS value_b,
    CASE m.metric WHEN 'cost_per_1k_tokens' THEN 'ratio' ELSE 'difference' END AS effect,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.eos_cmp['diff'] WHEN 'implicit_truncation_rate' THEN c.truncation_cmp['diff']
      WHEN 'ttft_p50_ms' THEN c.ttft_cmp['diff'] WHEN 'tpot_p50_ms' THEN c.tpot_cmp['diff'] ELSE c.cost_cmp['ratio'] END AS diff,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.eos_cmp['ci_low'] WHEN 'implicit_truncation_rate' THEN c.truncation_cmp['ci_low']
      WHEN 'ttft_p50_ms' THEN c.ttft_cmp['ci_low'] WHEN 'tpot_p50_ms' THEN c.tpot_cmp['ci_low'] ELSE c.cost_cmp['ci_low'] END AS ci_low,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.eos_cmp['ci_high'] WHEN 'implicit_truncation_rate' THEN c.truncation_cmp['ci_high']
      WHEN 'ttft_p50_ms' THEN c.ttft_cmp['ci_high'] WHEN 'tpot_p50_ms' THEN c.tpot_cmp['ci_high'] ELSE c.cost_cmp['ci_high'] END AS ci_high,
    CASE m.metric
      WHEN 'eos_compliance_rate' THEN c.eos_cmp['p_value'] WHEN 'implicit_truncation_rate' THEN c.truncation_cmp['p_value']
      WHEN 'ttft_p50_ms' THEN c.ttft_cmp['p_value'] WHEN 'tpot_p50_ms' THEN c.tpot_cmp['p_value'] END AS p_value
  FROM compared c
  CROSS JOIN (VALUES (1, 'eos_compliance_rate'), (2, 'implicit_truncation_rate'), (3, 'ttft_p50_ms'),
                     (4, 'tpot_p50_ms'), (5, 'cost_per_1k_tokens')) AS m(ord, metric)
)
SELECT
  context_bin, metric, arm_a, arm_b, n_a, n_b, value_a, value_b, effect, diff, ci_low, ci_high, p_value,
  holm_adjust(p_value) OVER (PARTITION BY metric, context_bin_lo IS NULL) AS p_value_holm
FROM long
ORDER BY ord, context_bin_lo NULLS LAST
