-- eos: EOS compliance per model x context bin.
-- Columns and formulas: docs/metrics.md#eos. Reads request_counts (each row
-- stands for `requests` requests), so the metrics are included `| counted`.
SELECT
  {{by}},
  context_bin,
  {{> requests | counted}},
  {{> eos | counted}},
  {{> length | counted}},
  {{> implicit_truncation | counted}},
  {{> unknown | counted}},
  {{> eos_compliance_rate | counted}},
  {{> eos_marker_rate | counted}},
  {{> implicit_truncation_rate | counted}}
FROM {{request_counts}}
GROUP BY {{by}}, context_bin, context_bin_lo
ORDER BY {{by}}, context_bin_lo
