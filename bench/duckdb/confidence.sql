-- DuckDB's spelling of the confidence job (sql/confidence.sql) with its default
-- parameters, for bench/jobs.sh: DuckDB has no longest_run aggregate, so the
-- longest low-confidence span is found the standard SQL way (gaps and islands:
-- a window numbers each request's low positions, a run shares
-- position - row_number()). The fastest DuckDB spelling measured; collecting
-- each request's low positions with list() and counting the most frequent
-- position - index took 4-5x as long. The bench checks that both engines give
-- the same table before timing them.
WITH flagged AS (
  SELECT
    t.request_id, t.position, t.logprob, t.entropy_bits,
    t.logprob < -0.6931471805599453 AS low
  FROM tokens t
  WHERE t.source = 'gateway'
),
islands AS (
  -- Consecutive low-confidence positions share position - row_number().
  SELECT request_id, position - row_number() OVER (PARTITION BY request_id ORDER BY position) AS island
  FROM flagged
  WHERE low
),
per_request AS (
  SELECT
    f.request_id,
    count(*)                                   AS tokens,
    avg(f.logprob)                             AS mean_logprob,
    count(*) FILTER (WHERE f.low)              AS low_tokens,
    count(*) FILTER (WHERE f.entropy_bits > 1.0) AS high_entropy_tokens,
    count(f.entropy_bits)                      AS tokens_with_entropy,
    count(*) - 1 - min(f.position) FILTER (WHERE f.low) AS first_low_from_end
  FROM flagged f
  GROUP BY f.request_id
),
longest AS (
  SELECT request_id, max(run) AS longest_low_span
  FROM (SELECT request_id, island, count(*) AS run FROM islands GROUP BY request_id, island) runs
  GROUP BY request_id
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
  avg(coalesce(l.longest_low_span, 0))                                AS longest_low_span_mean,
  max(coalesce(l.longest_low_span, 0))                                AS longest_low_span_max,
  quantile_cont(p.first_low_from_end, 0.50)                           AS first_low_from_end_p50
FROM per_request p
JOIN requests r ON r.request_id = p.request_id
LEFT JOIN longest l ON l.request_id = p.request_id
GROUP BY r.model, r.context_bin, r.context_bin_lo, r.eos_status
ORDER BY r.model, r.context_bin_lo, r.eos_status
