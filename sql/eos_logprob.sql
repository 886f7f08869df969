-- eos_logprob: how sure was the model of its last token? For requests whose
-- last token is an EOS marker, the distribution of its logprob; for
-- implicit_truncation requests, the logprob of the last token logged.
-- Columns and formulas: docs/metrics.md#eos_logprob
WITH last_tokens AS (
  SELECT
    request_id,
    last_value(logprob ORDER BY position)    AS logprob,
    last_value(token ORDER BY position)      AS token,
    last_value(is_special ORDER BY position) AS is_special
  FROM tokens
  WHERE source = 'gateway'
  GROUP BY request_id
),
classified AS (
  SELECT
    r.model, r.context_bin, r.context_bin_lo, l.logprob,
    CASE
      WHEN coalesce(l.is_special, false) OR is_eos_marker(l.token, r.model) THEN 'eos_token'
      WHEN r.eos_status = 'implicit_truncation' THEN 'implicit_truncation'
    END AS last_token_kind
  FROM last_tokens l
  JOIN requests r ON r.request_id = l.request_id
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
WHERE last_token_kind IS NOT NULL
GROUP BY model, context_bin, context_bin_lo, last_token_kind
ORDER BY model, context_bin_lo, last_token_kind
