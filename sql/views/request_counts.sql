-- request_counts as SQL over requests: what a dataset whose requests predate
-- the table reads under that name, and the definition ingest's counts are
-- tested against (docs/metrics.md#request_counts).
SELECT
  model,
  variant,
  context_bin,
  context_bin_lo,
  eos_status,
  has_eos_marker,
  count(*) AS requests,
  date
FROM requests
GROUP BY date, model, variant, context_bin, context_bin_lo, eos_status, has_eos_marker
