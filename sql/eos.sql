-- eos: EOS compliance per model x context bin.
-- Columns and formulas: docs/metrics.md#eos
SELECT
  model,
  context_bin,
  count(*)                                                   AS requests,
  count(*) FILTER (WHERE eos_status = 'eos')                 AS eos,
  count(*) FILTER (WHERE eos_status = 'length')              AS length,
  count(*) FILTER (WHERE eos_status = 'implicit_truncation') AS implicit_truncation,
  count(*) FILTER (WHERE eos_status = 'unknown')             AS unknown,
  CAST(count(*) FILTER (WHERE eos_status = 'eos') AS DOUBLE)
    / NULLIF(count(*) FILTER (WHERE eos_status IN ('eos', 'implicit_truncation')), 0)
                                                             AS eos_compliance_rate,
  CAST(count(*) FILTER (WHERE eos_status = 'implicit_truncation') AS DOUBLE) / count(*)
                                                             AS implicit_truncation_rate
FROM requests
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo
