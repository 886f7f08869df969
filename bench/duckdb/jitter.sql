-- DuckDB's spelling of the jitter job (sql/jitter.sql), for bench/jobs.sh.
-- tokscope reads each request's timings from the requests columns ingest
-- derives (itl_std_ms, first_token_emitted_ms, last_token_emitted_ms); a
-- reader without them computes them from the tokens table, as here (the same
-- definitions: docs/metrics.md). The bench checks that both engines give the
-- same table before timing them.
WITH per_request AS (
  SELECT
    request_id,
    stddev_samp(itl_ms) AS itl_std_ms,
    first(emitted_ms ORDER BY position) AS first_token_ms,
    last(emitted_ms ORDER BY position) AS last_token_ms
  FROM tokens
  WHERE source = 'gateway'
  GROUP BY request_id
)
SELECT
  r.model,
  r.context_bin,
  count(*)                                                  AS requests,
  quantile_cont(p.itl_std_ms, 0.50)                         AS itl_std_p50_ms,
  quantile_cont(p.itl_std_ms, 0.95)                         AS itl_std_p95_ms,
  quantile_cont(coalesce(p.first_token_ms, r.ttft_ms), 0.50) AS first_token_p50_ms,
  quantile_cont(coalesce(p.first_token_ms, r.ttft_ms), 0.95) AS first_token_p95_ms,
  quantile_cont(coalesce(p.first_token_ms, r.ttft_ms), 0.99) AS first_token_p99_ms,
  quantile_cont(coalesce(p.last_token_ms, r.latency_ms), 0.50) AS last_token_p50_ms,
  quantile_cont(coalesce(p.last_token_ms, r.latency_ms), 0.95) AS last_token_p95_ms,
  quantile_cont(coalesce(p.last_token_ms, r.latency_ms), 0.99) AS last_token_p99_ms
FROM per_request p
JOIN requests r ON r.request_id = p.request_id
GROUP BY r.model, r.context_bin, r.context_bin_lo
ORDER BY r.model, r.context_bin_lo

