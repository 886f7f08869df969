-- The requests columns ingest derives from each request's per-token data
-- (docs/metrics.md, "Ingest-time derived columns"), computed instead from the
-- token rows: DuckDB's `requests` for the jobs that read them (jitter,
-- jitter_requests, eos_logprob) in bench/jobs.sh, which is what a reader
-- without the columns does. Reads the stored requests as `requests_files`
-- and the token rows as `tokens`.
SELECT
  r.* EXCLUDE (output_token_count, itl_std_ms, first_token_emitted_ms, last_token_emitted_ms,
               last_token, last_token_logprob, last_token_is_special),
  t.output_token_count, t.itl_std_ms, t.first_token_emitted_ms, t.last_token_emitted_ms,
  t.last_token, t.last_token_logprob, t.last_token_is_special
FROM requests_files r
LEFT JOIN (
  SELECT
    request_id,
    count(*)                           AS output_token_count,
    stddev_samp(itl_ms)                AS itl_std_ms,
    first(emitted_ms ORDER BY position) AS first_token_emitted_ms,
    last(emitted_ms ORDER BY position)  AS last_token_emitted_ms,
    last(token ORDER BY position)       AS last_token,
    last(logprob ORDER BY position)     AS last_token_logprob,
    last(is_special ORDER BY position)  AS last_token_is_special
  FROM tokens
  WHERE source = 'gateway'
  GROUP BY request_id
) t ON t.request_id = r.request_id
