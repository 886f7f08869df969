-- ab: two experiment arms compared per context bin and overall ('all'), one row per metric.
-- Columns and formulas: docs/metrics.md#ab
-- Arm A is the control and arm B the treatment: every effect is B against A
-- (diff = value_b - value_a; value_b / value_a for the ratios).
-- Parameters: {{a}} and {{b}} (the arms, `--param a=ARM --param b=ARM`; by default the
-- first two `variant` values in name order), {{resamples}} and {{seed}} (bootstraps),
-- {{split}} (the share of requests meant for arm B) and {{srm_alpha}} (the
-- sample-ratio-mismatch threshold).
-- Each arm's values are collected with count / array_agg, then compared by the
-- compare_* functions (each returning the same struct, listed in one array);
-- Holm's correction runs across the bins of one metric.
WITH variants AS (
  -- Each variant beside the first arm: the given one, else the first in name order that is not arm B.
  SELECT
    variant,
    coalesce({{a}}, min(CASE WHEN variant IS DISTINCT FROM {{b}} THEN variant END) OVER ()) AS arm_a
  FROM (SELECT DISTINCT variant FROM requests WHERE variant IS NOT NULL)
),
arms AS (
  SELECT arm_a, coalesce({{b}}, min(variant) FILTER (WHERE variant <> arm_a)) AS arm_b
  FROM variants
  GROUP BY arm_a
),
tagged AS (
  SELECT
    a.arm_a, a.arm_b, r.context_bin, r.context_bin_lo, r.eos_status, r.has_eos_marker,
    r.ttft_ms, r.tpot_ms, r.latency_ms, r.decode_tps, r.completion_tokens, r.itl_std_ms,
    r.variant = a.arm_a AS in_a,
    -- Token times of the requests logged with per-token data (the jitter job's requests).
    r.output_token_count IS NOT NULL AS token_timed,
    {{> first_token_ms}},
    {{> last_token_ms}},
    kv_cache_bytes(r.model, r.prompt_tokens + r.completion_tokens) / 1073741824.0 AS kv_cache_gib,
    r.prompt_tokens + r.completion_tokens AS tokens,
    price_usd(r.model, r.ts, r.prompt_tokens, r.cached_tokens, r.cache_write_tokens, r.completion_tokens)['total_usd'] AS cost_usd,
    -- Microseconds since the epoch, the tables' unit.
    CAST(arrow_cast(r.ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) AS start_us,
    CAST(arrow_cast(r.ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) + CAST(round(r.latency_ms * 1000) AS BIGINT) AS end_us
  FROM requests r CROSS JOIN arms a
  WHERE r.variant = a.arm_a OR r.variant = a.arm_b
),
per_bin AS (
  SELECT
    arm_a, arm_b,
    coalesce(context_bin, 'all') AS context_bin,
    context_bin_lo,
    -- The group's first arrival and last completion (both arms): the experiment window.
    min(start_us)                                                                     AS first_us,
    max(coalesce(end_us, start_us))                                                   AS last_us,
    count(*) FILTER (WHERE in_a)                                                      AS requests_a,
    count(*) FILTER (WHERE NOT in_a)                                                  AS requests_b,
    count(*) FILTER (WHERE in_a AND eos_status = 'eos')                               AS eos_a,
    count(*) FILTER (WHERE NOT in_a AND eos_status = 'eos')                           AS eos_b,
    count(*) FILTER (WHERE in_a AND eos_status IN ('eos', 'implicit_truncation'))     AS ended_a,
    count(*) FILTER (WHERE NOT in_a AND eos_status IN ('eos', 'implicit_truncation')) AS ended_b,
    count(*) FILTER (WHERE in_a AND has_eos_marker)                                   AS marked_a,
    count(*) FILTER (WHERE NOT in_a AND has_eos_marker)                               AS marked_b,
    count(*) FILTER (WHERE in_a AND has_eos_marker IS NOT NULL)                       AS raw_output_a,
    count(*) FILTER (WHERE NOT in_a AND has_eos_marker IS NOT NULL)                   AS raw_output_b,
    count(*) FILTER (WHERE in_a AND eos_status = 'implicit_truncation')               AS truncated_a,
    count(*) FILTER (WHERE NOT in_a AND eos_status = 'implicit_truncation')           AS truncated_b,
    coalesce(sum(completion_tokens) FILTER (WHERE in_a), 0)                           AS output_tokens_a,
    coalesce(sum(completion_tokens) FILTER (WHERE NOT in_a), 0)                       AS output_tokens_b,
    array_agg(ttft_ms) FILTER (WHERE in_a AND ttft_ms IS NOT NULL)                    AS ttft_a,
    array_agg(ttft_ms) FILTER (WHERE NOT in_a AND ttft_ms IS NOT NULL)                AS ttft_b,
    array_agg(tpot_ms) FILTER (WHERE in_a AND tpot_ms IS NOT NULL)                    AS tpot_a,
    array_agg(tpot_ms) FILTER (WHERE NOT in_a AND tpot_ms IS NOT NULL)                AS tpot_b,
    array_agg(latency_ms) FILTER (WHERE in_a AND latency_ms IS NOT NULL)              AS e2e_a,
    array_agg(latency_ms) FILTER (WHERE NOT in_a AND latency_ms IS NOT NULL)          AS e2e_b,
    array_agg(decode_tps) FILTER (WHERE in_a AND decode_tps IS NOT NULL)              AS decode_tps_a,
    array_agg(decode_tps) FILTER (WHERE NOT in_a AND decode_tps IS NOT NULL)          AS decode_tps_b,
    array_agg(itl_std_ms) FILTER (WHERE in_a AND itl_std_ms IS NOT NULL)              AS itl_std_a,
    array_agg(itl_std_ms) FILTER (WHERE NOT in_a AND itl_std_ms IS NOT NULL)          AS itl_std_b,
    array_agg(last_token_ms - first_token_ms) FILTER (WHERE in_a AND token_timed AND last_token_ms - first_token_ms IS NOT NULL)     AS tail_a,
    array_agg(last_token_ms - first_token_ms) FILTER (WHERE NOT in_a AND token_timed AND last_token_ms - first_token_ms IS NOT NULL) AS tail_b,
    array_agg(kv_cache_gib) FILTER (WHERE in_a AND kv_cache_gib IS NOT NULL)          AS kv_a,
    array_agg(kv_cache_gib) FILTER (WHERE NOT in_a AND kv_cache_gib IS NOT NULL)      AS kv_b,
    array_agg(cost_usd) FILTER (WHERE in_a AND cost_usd IS NOT NULL)                  AS cost_a,
    array_agg(tokens) FILTER (WHERE in_a AND cost_usd IS NOT NULL)                    AS tokens_a,
    array_agg(cost_usd) FILTER (WHERE NOT in_a AND cost_usd IS NOT NULL)              AS cost_b,
    array_agg(tokens) FILTER (WHERE NOT in_a AND cost_usd IS NOT NULL)                AS tokens_b
  FROM tagged
  GROUP BY GROUPING SETS ((arm_a, arm_b, context_bin, context_bin_lo), (arm_a, arm_b))
),
windowed AS (
  -- The experiment window: the first arrival to the last completion, both arms, over every group.
  SELECT *, CAST(max(last_us) OVER () - min(first_us) OVER () AS DOUBLE) / 1e6 AS window_s FROM per_bin
),
compared AS (
  -- Element i of each list is metric i of the list in `long` below.
  SELECT
    p.arm_a, p.arm_b, p.context_bin, p.context_bin_lo,
    p.output_tokens_a / NULLIF(p.window_s, 0) AS output_tokens_per_s_a,
    p.output_tokens_b / NULLIF(p.window_s, 0) AS output_tokens_per_s_b,
    [p.requests_a, p.ended_a, p.raw_output_a, p.requests_a,
     CAST(coalesce(cardinality(p.ttft_a), 0) AS BIGINT), CAST(coalesce(cardinality(p.ttft_a), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.tpot_a), 0) AS BIGINT), CAST(coalesce(cardinality(p.tpot_a), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.e2e_a), 0) AS BIGINT), CAST(coalesce(cardinality(p.decode_tps_a), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.itl_std_a), 0) AS BIGINT), CAST(coalesce(cardinality(p.tail_a), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.kv_a), 0) AS BIGINT), p.requests_a,
     CAST(coalesce(cardinality(p.cost_a), 0) AS BIGINT)] AS n_a,
    [p.requests_b, p.ended_b, p.raw_output_b, p.requests_b,
     CAST(coalesce(cardinality(p.ttft_b), 0) AS BIGINT), CAST(coalesce(cardinality(p.ttft_b), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.tpot_b), 0) AS BIGINT), CAST(coalesce(cardinality(p.tpot_b), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.e2e_b), 0) AS BIGINT), CAST(coalesce(cardinality(p.decode_tps_b), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.itl_std_b), 0) AS BIGINT), CAST(coalesce(cardinality(p.tail_b), 0) AS BIGINT),
     CAST(coalesce(cardinality(p.kv_b), 0) AS BIGINT), p.requests_b,
     CAST(coalesce(cardinality(p.cost_b), 0) AS BIGINT)] AS n_b,
    [sample_ratio_test(p.requests_a, p.requests_b, {{split}}),
     compare_proportions(p.eos_a, p.ended_a, p.eos_b, p.ended_b),
     compare_proportions(p.marked_a, p.raw_output_a, p.marked_b, p.raw_output_b),
     compare_proportions(p.truncated_a, p.requests_a, p.truncated_b, p.requests_b),
     compare_medians(p.ttft_a, p.ttft_b, {{resamples}}, {{seed}}),
     compare_quantiles(p.ttft_a, p.ttft_b, 0.95, {{resamples}}, {{seed}}),
     compare_medians(p.tpot_a, p.tpot_b, {{resamples}}, {{seed}}),
     compare_quantiles(p.tpot_a, p.tpot_b, 0.95, {{resamples}}, {{seed}}),
     compare_quantiles(p.e2e_a, p.e2e_b, 0.95, {{resamples}}, {{seed}}),
     compare_medians(p.decode_tps_a, p.decode_tps_b, {{resamples}}, {{seed}}),
     compare_medians(p.itl_std_a, p.itl_std_b, {{resamples}}, {{seed}}),
     compare_std_devs(p.tail_a, p.tail_b, {{resamples}}, {{seed}}),
     compare_medians(p.kv_a, p.kv_b, {{resamples}}, {{seed}}),
     NULL,
     compare_cost_per_1k(p.cost_a, p.tokens_a, p.cost_b, p.tokens_b, {{resamples}}, {{seed}})] AS comparisons
  FROM windowed p
),
long AS (
  SELECT
    c.context_bin, c.context_bin_lo, m.ord, m.metric, c.arm_a, c.arm_b, m.effect,
    c.n_a[m.ord] AS n_a, c.n_b[m.ord] AS n_b, c.comparisons[m.ord] AS cmp,
    c.output_tokens_per_s_a, c.output_tokens_per_s_b
  FROM compared c
  CROSS JOIN (VALUES
    (1, 'sample_ratio', 'difference'), (2, 'eos_compliance_rate', 'difference'),
    (3, 'eos_marker_rate', 'difference'), (4, 'implicit_truncation_rate', 'difference'),
    (5, 'ttft_p50_ms', 'difference'), (6, 'ttft_p95_ms', 'difference'),
    (7, 'tpot_p50_ms', 'difference'), (8, 'tpot_p95_ms', 'difference'),
    (9, 'e2e_p95_ms', 'difference'), (10, 'decode_tps_p50', 'difference'),
    (11, 'itl_std_p50_ms', 'difference'), (12, 'tail_token_jitter_ms', 'difference'),
    (13, 'kv_cache_gib_p50', 'difference'), (14, 'output_tokens_per_s', 'ratio'),
    (15, 'cost_per_1k_tokens', 'ratio')) AS m(ord, metric, effect)
),
tested AS (
  SELECT
    context_bin, context_bin_lo, ord, metric, arm_a, arm_b, n_a, n_b,
    -- Throughput over the experiment window has no interval or test: the arms' values and their ratio.
    CASE WHEN metric = 'output_tokens_per_s' THEN output_tokens_per_s_a ELSE cmp['value_a'] END AS value_a,
    CASE WHEN metric = 'output_tokens_per_s' THEN output_tokens_per_s_b ELSE cmp['value_b'] END AS value_b,
    effect,
    CASE WHEN metric = 'output_tokens_per_s' THEN output_tokens_per_s_b / NULLIF(output_tokens_per_s_a, 0)
         ELSE cmp['diff'] END AS diff,
    cmp['ci_low'] AS ci_low,
    cmp['ci_high'] AS ci_high,
    cmp['p_value'] AS p_value,
    holm_adjust(cmp['p_value']) OVER (PARTITION BY metric, context_bin_lo IS NULL) AS p_value_holm
  FROM long
)
SELECT
  context_bin, metric, arm_a, arm_b, n_a, n_b, value_a, value_b, effect, diff, ci_low, ci_high, p_value, p_value_holm,
  -- The bin's split failed the sample-ratio check: its comparisons may be biased.
  coalesce(bool_or(metric = 'sample_ratio' AND p_value_holm < {{srm_alpha}}) OVER (PARTITION BY context_bin), false)
    AS sample_ratio_mismatch
FROM tested
ORDER BY ord, context_bin_lo NULLS LAST
