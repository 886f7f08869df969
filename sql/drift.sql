-- drift: intent drift per query-length bin: KL divergence of the model's relevance distribution from the gold one.
-- Columns and formulas: docs/metrics.md#drift
-- Per evaluation record with both distributions (and neither not_normalized):
-- kl_bits = kl_divergence(relevance_true, relevance_model); its request's
-- query length = last_user_words(prompt). Bins: 1..short_max words,
-- short_max+1..medium_max, more; `unknown` when the request or its user
-- message is missing (or empty). drift_share: share of queries with kl_bits > threshold.
WITH scored AS (
  SELECT
    last_user_words(r.prompt)                                AS words,
    kl_divergence(e.relevance_true, e.relevance_model)       AS kl_bits
  FROM evals e
  LEFT JOIN requests r ON e.request_id = r.request_id
  WHERE e.relevance_true IS NOT NULL AND e.relevance_model IS NOT NULL
    AND (e.issues IS NULL OR NOT array_has(e.issues, 'not_normalized'))
),
binned AS (
  SELECT
    kl_bits,
    CASE
      WHEN words IS NULL OR words = 0 THEN 'unknown'
      WHEN words <= {{short_max}} THEN concat('1-', CAST({{short_max}} AS BIGINT))
      WHEN words <= {{medium_max}} THEN concat(CAST({{short_max}} + 1 AS BIGINT), '-', CAST({{medium_max}} AS BIGINT))
      ELSE concat(CAST({{medium_max}} + 1 AS BIGINT), '+')
    END AS word_bin,
    CASE
      WHEN words IS NULL OR words = 0 THEN NULL
      WHEN words <= {{short_max}} THEN 1
      WHEN words <= {{medium_max}} THEN CAST({{short_max}} + 1 AS BIGINT)
      ELSE CAST({{medium_max}} + 1 AS BIGINT)
    END AS word_bin_lo
  FROM scored
)
SELECT
  word_bin,
  word_bin_lo,
  count(*)                                                  AS queries,
  avg(kl_bits)                                              AS kl_bits_mean,
  quantile_cont(kl_bits, 0.95)                              AS kl_bits_p95,
  avg(CASE WHEN kl_bits > {{threshold}} THEN 1.0 ELSE 0.0 END) AS drift_share
FROM binned
GROUP BY word_bin, word_bin_lo
ORDER BY word_bin_lo NULLS LAST
