-- DuckDB's reading of docs/metrics.md for `requests` and the jobs over it,
-- written from the definitions there and from nothing in sql/: every derived
-- column (date, context_bin, finish_reason, has_eos_marker, eos_status,
-- tpot_ms, decode_tps, e2e_tps) is recomputed from the columns the log gave,
-- the stored derived ones are never read, and request_counts, eos and latency
-- are computed from those. The oracle of tests/query/jobs.rs,
-- tests/query/token_jobs.rs and tests/ingest/request_counts.rs.
--
-- Expects a view `requests` over a dataset's `requests` Parquet files.
-- Raw output is read from canonical lines only (TGI's concatenated tokens and
-- their `special` flags are not modelled: a TGI row is an error here).
-- Statements end with ";" at the end of a line.

-- "Ingest-time derived columns", context_bin: half-open [lo, hi), K = 1024.
CREATE TABLE context_bins AS
SELECT * FROM (VALUES
  ('0-1K', 0, 1024),
  ('1K-2K', 1024, 2048),
  ('2K-4K', 2048, 4096),
  ('4K-8K', 4096, 8192),
  ('8K-16K', 8192, 16384),
  ('16K-32K', 16384, 32768),
  ('32K-64K', 32768, 65536),
  ('64K-128K', 65536, 131072),
  ('128K+', 131072, NULL)
) AS b(context_bin, lo, hi);

-- "Finish reasons": the logged value, trimmed, in lower case; anything else is `other`.
CREATE TABLE finish_reasons AS
SELECT * FROM (VALUES
  ('stop', 'stop'), ('eos', 'stop'), ('eos_token', 'stop'), ('stop_sequence', 'stop'),
  ('end_turn', 'stop'), ('end', 'stop'), ('complete', 'stop'), ('completed', 'stop'),
  ('finished', 'stop'), ('pause_turn', 'stop'), ('finish_reason_stop', 'stop'),
  ('length', 'length'), ('max_tokens', 'length'), ('max_length', 'length'),
  ('max_new_tokens', 'length'), ('max_output_tokens', 'length'), ('model_length', 'length'),
  ('model_context_window_exceeded', 'length'), ('finish_reason_max_tokens', 'length'),
  ('tool_calls', 'tool_calls'), ('tool_call', 'tool_calls'), ('tool-calls', 'tool_calls'),
  ('tool_use', 'tool_calls'), ('function_call', 'tool_calls'), ('function_calls', 'tool_calls'),
  ('content_filter', 'content_filter'), ('content-filter', 'content_filter'),
  ('safety', 'content_filter'), ('recitation', 'content_filter'), ('blocklist', 'content_filter'),
  ('prohibited_content', 'content_filter'), ('spii', 'content_filter'),
  ('image_safety', 'content_filter'), ('refusal', 'content_filter'),
  ('error', 'error'), ('abort', 'error'), ('aborted', 'error'), ('cancelled', 'error'),
  ('canceled', 'error'), ('timeout', 'error')
) AS f(logged, finish_reason);

-- has_eos_marker: the default EOS markers.
CREATE TABLE eos_markers AS
SELECT * FROM (VALUES
  ('<|endoftext|>'), ('<|im_end|>'), ('</s>'), ('<|eot_id|>'), ('<|end|>'), ('[EOS]'),
  ('<|end▁of▁sentence|>'), ('<｜end▁of▁sentence｜>')
) AS m(marker);

CREATE VIEW requests_by_definition AS
WITH logged AS (
  -- The columns the log gave, and only those.
  SELECT request_id, ts, model, variant, source_format, prompt_tokens, completion_tokens,
         cached_tokens, cache_write_tokens, max_tokens, ttft_ms, latency_ms, finish_reason_raw,
         model_output, logged_cost_usd
  FROM requests
),
normalised AS (
  SELECT
    l.*,
    CAST(timezone('UTC', l.ts) AS DATE) AS date,
    coalesce(b.context_bin, 'unknown') AS context_bin,
    b.lo AS context_bin_lo,
    CASE WHEN l.finish_reason_raw IS NULL OR l.finish_reason_raw = '' THEN NULL
         ELSE coalesce(f.finish_reason, 'other') END AS finish_reason,
    CASE
      WHEN l.source_format = 'tgi' THEN error('the oracle does not read TGI raw output')
      WHEN l.source_format = 'canonical' AND l.model_output IS NOT NULL THEN EXISTS (
        SELECT 1 FROM eos_markers m
        WHERE ends_with(regexp_replace(l.model_output, '\s+$', ''), m.marker))
    END AS has_eos_marker
  FROM logged l
  LEFT JOIN context_bins b ON l.prompt_tokens >= b.lo AND (b.hi IS NULL OR l.prompt_tokens < b.hi)
  LEFT JOIN finish_reasons f ON f.logged = lower(regexp_replace(l.finish_reason_raw, '^\s+|\s+$', '', 'g'))
),
statused AS (
  SELECT
    *,
    CASE
      WHEN has_eos_marker THEN 'eos'
      WHEN has_eos_marker IS NULL AND finish_reason IN ('stop', 'tool_calls') THEN 'eos'
      WHEN finish_reason = 'length' OR completion_tokens >= max_tokens THEN 'length'
      WHEN has_eos_marker IS NOT NULL THEN 'implicit_truncation'
      ELSE 'unknown'
    END AS eos_status,
    CASE WHEN completion_tokens > 1 AND ttft_ms IS NOT NULL AND latency_ms IS NOT NULL AND latency_ms >= ttft_ms
         THEN (latency_ms - ttft_ms) / (completion_tokens - 1) END AS tpot_ms,
    CASE WHEN latency_ms > 0 THEN completion_tokens * 1000.0 / latency_ms END AS e2e_tps
  FROM normalised
)
SELECT *, CASE WHEN tpot_ms > 0 THEN 1000.0 / tpot_ms END AS decode_tps
FROM statused;

-- request_counts (table): one row per key that occurs, nulls being values of their own.
CREATE VIEW request_counts_by_definition AS
SELECT date, model, variant, context_bin, context_bin_lo, eos_status, has_eos_marker, count(*) AS requests
FROM requests_by_definition
GROUP BY date, model, variant, context_bin, context_bin_lo, eos_status, has_eos_marker;

-- eos, per model x context_bin (context_bin_lo kept for the order: model, then
-- context_bin_lo with `unknown` last).
CREATE VIEW eos_by_definition AS
WITH counted AS (
  SELECT
    model, context_bin, context_bin_lo,
    count(*) AS requests,
    count(*) FILTER (WHERE eos_status = 'eos') AS eos,
    count(*) FILTER (WHERE eos_status = 'length') AS length,
    count(*) FILTER (WHERE eos_status = 'implicit_truncation') AS implicit_truncation,
    count(*) FILTER (WHERE eos_status = 'unknown') AS unknown,
    count(*) FILTER (WHERE has_eos_marker) AS with_marker,
    count(has_eos_marker) AS with_raw_output
  FROM requests_by_definition
  GROUP BY model, context_bin, context_bin_lo
)
SELECT
  model, context_bin, context_bin_lo, requests, eos, length, implicit_truncation, unknown,
  CAST(eos AS DOUBLE) / nullif(eos + implicit_truncation, 0) AS eos_compliance_rate,
  CAST(with_marker AS DOUBLE) / nullif(with_raw_output, 0) AS eos_marker_rate,
  CAST(implicit_truncation AS DOUBLE) / requests AS implicit_truncation_rate
FROM counted;

-- latency, per model x context_bin: DuckDB's quantile_cont is the type-7 quantile.
CREATE VIEW latency_by_definition AS
SELECT
  model, context_bin, context_bin_lo,
  quantile_cont(ttft_ms, 0.50) AS ttft_p50_ms,
  quantile_cont(ttft_ms, 0.95) AS ttft_p95_ms,
  quantile_cont(ttft_ms, 0.99) AS ttft_p99_ms,
  quantile_cont(tpot_ms, 0.50) AS tpot_p50_ms,
  quantile_cont(tpot_ms, 0.95) AS tpot_p95_ms,
  quantile_cont(latency_ms, 0.50) AS latency_p50_ms,
  quantile_cont(latency_ms, 0.95) AS latency_p95_ms,
  quantile_cont(decode_tps, 0.50) AS decode_tps_p50,
  avg(e2e_tps) AS e2e_tps_mean
FROM requests_by_definition
GROUP BY model, context_bin, context_bin_lo;
