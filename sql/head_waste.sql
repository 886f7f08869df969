-- head_waste: per attention layer x head of a kernel trace, the work its kernels did against what the GPU could have done in their time.
-- Columns and formulas: docs/metrics.md#head_waste
-- Attention kernels are `kernels` rows with a layer and a head. Work per kernel:
-- args.flops, else the FLOPs model 4 * q_len * kv_len * head_dim when its
-- parameters are all set (> 0), else unknown (the kernel counts in `kernels`
-- and `duration_us` only). expected_flops = peak_tflops * 1e6 FLOP/us * the
-- duration of the kernels whose work is known; waste_ratio = 1 - actual / expected.
WITH attention AS (
  SELECT
    layer, head, dur_us,
    flops IS NULL AS flops_missing,
    COALESCE(flops, CASE WHEN {{q_len}} > 0 AND {{kv_len}} > 0 AND {{head_dim}} > 0
                         THEN 4.0 * {{q_len}} * {{kv_len}} * {{head_dim}} END) AS work
  FROM kernels
  WHERE layer IS NOT NULL AND head IS NOT NULL
),
per_head AS (
  SELECT
    layer, head,
    count(*)                                                  AS kernels,
    sum(dur_us)                                               AS duration_us,
    count(*) FILTER (WHERE flops_missing)                     AS flops_missing,
    count(*) FILTER (WHERE flops_missing AND work IS NOT NULL) AS flops_modelled,
    sum(work)                                                 AS actual_flops,
    sum(dur_us) FILTER (WHERE work IS NOT NULL)               AS counted_us
  FROM attention
  GROUP BY layer, head
)
SELECT
  layer,
  head,
  kernels,
  duration_us,
  flops_missing,
  flops_modelled,
  actual_flops,
  {{peak_tflops}} * 1e6 * counted_us                                 AS expected_flops,
  actual_flops / NULLIF(counted_us, 0) / 1e3                         AS achieved_gflops_per_s,
  1 - actual_flops / NULLIF({{peak_tflops}} * 1e6 * counted_us, 0)   AS waste_ratio,
  1 - actual_flops / NULLIF({{peak_tflops}} * 1e6 * counted_us, 0) > {{threshold}} AS flagged
FROM per_head
ORDER BY layer, head
