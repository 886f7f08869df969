-- DuckDB's spelling of the jitter_requests job (sql/jitter_requests.sql), for
-- bench/jobs.sh: each request's timings computed from the tokens table, as a
-- reader without the requests columns ingest derives does (bench/duckdb/jitter.sql).
WITH per_request AS (
  SELECT
    request_id,
    count(*) AS tokens,
    stddev_samp(itl_ms) AS itl_std_ms,
    first(emitted_ms ORDER BY position) AS first_token_ms,
    last(emitted_ms ORDER BY position) AS last_token_ms
  FROM tokens
  WHERE source = 'gateway'
  GROUP BY request_id
)
SELECT
  p.request_id,
  r.model,
  r.context_bin,
  p.tokens,
  p.itl_std_ms,
  coalesce(p.first_token_ms, r.ttft_ms)   AS first_token_ms,
  coalesce(p.last_token_ms, r.latency_ms) AS last_token_ms
FROM per_request p
JOIN requests r ON r.request_id = p.request_id
ORDER BY r.model, r.context_bin_lo, p.request_id

