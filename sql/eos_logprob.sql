-- eos_logprob: how sure was the model of its last token? For requests whose
-- last token is an EOS marker, the distribution of its logprob; for
-- implicit_truncation requests, the logprob of the last token logged.
-- Columns and formulas: docs/metrics.md#eos_logprob
-- Each request's last token is a column of `requests`, derived at ingest from
-- its own per-token data, so the job reads no token rows.
WITH last_tokens AS (
  SELECT
    model, context_bin, context_bin_lo, last_token_logprob AS logprob,
    coalesce(last_token_is_special, false) OR is_eos_marker(last_token, model) AS is_eos,
    eos_status = 'implicit_truncation' AS is_implicit_truncation
  FROM requests
  WHERE output_token_count IS NOT NULL
),
-- Filtering on the two flags rather than on the kind's text lets the filter
-- skip building a string per request.
classified AS (
  SELECT
    model, context_bin, context_bin_lo, logprob,
    CASE WHEN is_eos THEN 'eos_token' ELSE 'implicit_truncation' END AS last_token_kind
  FROM last_tokens
  WHERE is_eos OR is_implicit_truncation
)
SELECT
  model,
  context_bin,
  last_token_kind,
  count(*)                      AS requests,
  avg(logprob)                  AS logprob_mean,
  quantile_cont(logprob, 0.10)  AS logprob_p10,
  quantile_cont(logprob, 0.50)  AS logprob_p50,
  quantile_cont(logprob, 0.90)  AS logprob_p90
FROM classified
GROUP BY model, context_bin, context_bin_lo, last_token_kind
ORDER BY model, context_bin_lo, last_token_kind
