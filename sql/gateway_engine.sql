-- gateway_engine: the gateway's access log joined to the engine's profiling records, per model x context bin.
-- Columns and formulas: docs/metrics.md#gateway_engine
-- A request is matched when both sides log its request_id; percentiles are over matched pairs.
-- Engine-only records carry no context bin (it is the gateway request's): their row has a null bin.
WITH joined AS (
  SELECT
    coalesce(r.model, p.model)                       AS model,
    r.context_bin,
    r.context_bin_lo,
    r.request_id IS NOT NULL AND p.request_id IS NOT NULL AS matched,
    p.request_id IS NULL                             AS gateway_only,
    r.request_id IS NULL                             AS engine_only,
    -- In microseconds, the tables' unit (via nanoseconds, dates outside 1677-2262 would fail).
    CAST(CAST(arrow_cast(r.ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT)
      - CAST(arrow_cast(p.ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) AS DOUBLE) / 1e3 AS clock_offset_ms,
    p.prefill_latency_ms                             AS prefill_ms,
    p.decode_ms,
    r.latency_ms - p.prefill_latency_ms - p.decode_ms AS overhead_ms,
    r.latency_ms                                     AS e2e_ms
  FROM requests r
  FULL OUTER JOIN profiles p ON r.request_id = p.request_id
)
SELECT
  model,
  context_bin,
  count(*) FILTER (WHERE matched)                           AS matched,
  count(*) FILTER (WHERE gateway_only)                      AS gateway_only,
  count(*) FILTER (WHERE engine_only)                       AS engine_only,
  quantile_cont(clock_offset_ms, 0.50)                      AS clock_offset_ms,
  quantile_cont(prefill_ms, 0.50) FILTER (WHERE matched)    AS prefill_ms_p50,
  quantile_cont(prefill_ms, 0.95) FILTER (WHERE matched)    AS prefill_ms_p95,
  quantile_cont(decode_ms, 0.50) FILTER (WHERE matched)     AS decode_ms_p50,
  quantile_cont(decode_ms, 0.95) FILTER (WHERE matched)     AS decode_ms_p95,
  quantile_cont(overhead_ms, 0.50)                          AS overhead_ms_p50,
  quantile_cont(overhead_ms, 0.95)                          AS overhead_ms_p95,
  quantile_cont(e2e_ms, 0.50) FILTER (WHERE matched)        AS e2e_ms_p50,
  quantile_cont(e2e_ms, 0.95) FILTER (WHERE matched)        AS e2e_ms_p95
FROM joined
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo NULLS LAST
