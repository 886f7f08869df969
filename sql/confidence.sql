-- confidence: where a model becomes unsure, per model x context bin x eos_status.
-- Columns and formulas: docs/metrics.md#confidence
-- Parameters: {{low_logprob}} (a token is low-confidence when logprob < it),
-- {{high_entropy_bits}} (a token is high-entropy when entropy_bits > it).
WITH flagged AS (
  SELECT
    t.request_id, t.position, t.logprob, t.entropy_bits,
    t.logprob < {{low_logprob}} AS low
  FROM tokens t
  WHERE t.source = 'gateway'
),
per_request AS (
  SELECT
    f.request_id,
    count(*)                                   AS tokens,
    avg(f.logprob)                             AS mean_logprob,
    count(*) FILTER (WHERE f.low)              AS low_tokens,
    count(*) FILTER (WHERE f.entropy_bits > {{high_entropy_bits}}) AS high_entropy_tokens,
    count(f.entropy_bits)                      AS tokens_with_entropy,
    count(*) - 1 - min(f.position) FILTER (WHERE f.low) AS first_low_from_end,
    longest_run(f.position) FILTER (WHERE f.low) AS longest_low_span
  FROM flagged f
  GROUP BY f.request_id
)
SELECT
  r.model,
  r.context_bin,
  r.eos_status,
  count(*)                                                            AS requests,
  sum(p.tokens)                                                       AS tokens,
  sum(p.mean_logprob * p.tokens) / sum(p.tokens)                      AS mean_logprob,
  CAST(sum(p.low_tokens) AS DOUBLE) / sum(p.tokens)                   AS low_confidence_share,
  CAST(sum(p.high_entropy_tokens) AS DOUBLE) / NULLIF(sum(p.tokens_with_entropy), 0) AS high_entropy_share,
  avg(p.longest_low_span)                                             AS longest_low_span_mean,
  max(p.longest_low_span)                                             AS longest_low_span_max,
  quantile_cont(p.first_low_from_end, 0.50)                           AS first_low_from_end_p50
FROM per_request p
JOIN requests r ON r.request_id = p.request_id
GROUP BY r.model, r.context_bin, r.context_bin_lo, r.eos_status
ORDER BY r.model, r.context_bin_lo, r.eos_status
