-- kv_cache_peak: the most KV cache held at once on each GPU, from the GPU ids of the engine's profiles.
-- Columns and formulas: docs/metrics.md#kv_cache_peak
-- A request holds its end-of-request cache (kv_cache_bytes with {{tp}}: one GPU's share) on the GPU
-- its profile names (engine_id, gpu_id) over [ts, ts + latency_ms) of the gateway's log. The peak
-- is the running sum of +bytes at each start and -bytes at each end, ends first at one instant
-- (a request ending at t no longer holds its cache at t), taken at its maximum.
WITH placed AS (
  SELECT
    p.engine_id,
    p.gpu_id,
    -- Microseconds since the epoch, the tables' unit.
    CAST(arrow_cast(r.ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) AS start_us,
    CAST(arrow_cast(r.ts, 'Timestamp(Microsecond, Some("UTC"))') AS BIGINT) + CAST(round(r.latency_ms * 1000) AS BIGINT) AS end_us,
    kv_cache_bytes(r.model, r.prompt_tokens + r.completion_tokens, {{tp}}) AS kv_bytes
  FROM requests r
  JOIN profiles p ON p.request_id = r.request_id
  WHERE p.engine_id IS NOT NULL OR p.gpu_id IS NOT NULL
),
events AS (
  SELECT engine_id, gpu_id, start_us AS t_us, 1 AS starts, kv_bytes AS delta_bytes
  FROM placed WHERE end_us > start_us AND kv_bytes IS NOT NULL
  UNION ALL
  SELECT engine_id, gpu_id, end_us AS t_us, 0 AS starts, -kv_bytes AS delta_bytes
  FROM placed WHERE end_us > start_us AND kv_bytes IS NOT NULL
),
running AS (
  SELECT
    engine_id, gpu_id, t_us,
    sum(delta_bytes) OVER (PARTITION BY engine_id, gpu_id ORDER BY t_us, starts ROWS UNBOUNDED PRECEDING) AS held_bytes
  FROM events
),
peaks AS (
  SELECT engine_id, gpu_id, max(held_bytes) AS peak_bytes,
    first_value(t_us ORDER BY held_bytes DESC, t_us) AS peak_us
  FROM running
  GROUP BY engine_id, gpu_id
),
per_gpu AS (
  SELECT
    engine_id, gpu_id,
    count(*)                                  AS requests,
    count(*) FILTER (WHERE kv_bytes IS NULL)  AS unknown_architecture_requests,
    max_overlap(start_us, end_us)             AS peak_concurrency
  FROM placed
  GROUP BY engine_id, gpu_id
)
SELECT
  g.engine_id,
  g.gpu_id,
  g.requests,
  g.unknown_architecture_requests,
  g.peak_concurrency,
  coalesce(p.peak_bytes, 0) / 1073741824.0 AS kv_cache_gib_peak,
  arrow_cast(to_timestamp_micros(p.peak_us), 'Timestamp(Microsecond, Some("UTC"))') AS peak_at
FROM per_gpu g
LEFT JOIN peaks p ON (g.engine_id IS NOT DISTINCT FROM p.engine_id) AND (g.gpu_id IS NOT DISTINCT FROM p.gpu_id)
ORDER BY g.engine_id, g.gpu_id
