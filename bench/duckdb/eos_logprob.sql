-- DuckDB's spelling of the eos_logprob job (sql/eos_logprob.sql), for
-- bench/jobs.sh: each request's last token computed from the token rows, as a
-- reader without the requests columns ingest derives (last_token,
-- last_token_logprob, last_token_is_special) does; is_eos_marker is a DuckDB
-- macro of bench/jobs.sh with the default markers. The bench checks that both
-- engines give the same table before timing them.
WITH last_tokens AS (
  SELECT
    request_id,
    last(logprob ORDER BY position)    AS logprob,
    last(token ORDER BY position)      AS token,
    last(is_special ORDER BY position) AS is_special
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

