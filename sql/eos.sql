-- eos: EOS compliance per model x context bin.
-- Columns and formulas: docs/metrics.md#eos
SELECT
  model,
  context_bin,
  {{> requests}},
  {{> eos}},
  {{> length}},
  {{> implicit_truncation}},
  {{> unknown}},
  {{> eos_compliance_rate}},
  {{> eos_marker_rate}},
  {{> implicit_truncation_rate}}
FROM requests
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo
