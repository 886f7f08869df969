-- moe_load: per MoE layer, how evenly the router spreads token assignments over the experts.
-- Columns and formulas: docs/metrics.md#moe_load
-- Records are summed per layer x expert; experts 0..num_experts-1 without a
-- record have load 0. num_experts = the largest logged num_experts or
-- max(expert_id) + 1; top_k = the largest logged k (inconsistent says the
-- layer's records disagree). Hot experts: load strictly above the layer's
-- 90th percentile of expert loads (quantile_cont, type 7).
WITH per_expert AS (
  SELECT layer, expert_id, sum(tokens) AS tokens
  FROM moe_routing
  GROUP BY layer, expert_id
),
layer_shape AS (
  SELECT
    layer,
    CAST(greatest(max(num_experts), max(expert_id) + 1) AS BIGINT)  AS num_experts,
    max(k)                                                         AS top_k,
    count(DISTINCT k) > 1 OR count(DISTINCT num_experts) > 1       AS inconsistent
  FROM moe_routing
  GROUP BY layer
),
experts AS (
  SELECT layer, unnest(range(0, num_experts)) AS expert_id
  FROM layer_shape
),
loads AS (
  SELECT e.layer, e.expert_id, CAST(COALESCE(p.tokens, 0) AS DOUBLE) AS tokens
  FROM experts e
  LEFT JOIN per_expert p ON e.layer = p.layer AND e.expert_id = p.expert_id
),
load_stats AS (
  SELECT
    layer,
    sum(tokens)                 AS assignments,
    avg(tokens)                 AS load_mean,
    max(tokens)                 AS load_max,
    stddev_pop(tokens)          AS load_std,
    quantile_cont(tokens, 0.90) AS load_p90
  FROM loads
  GROUP BY layer
),
shares AS (
  SELECT
    l.layer, l.expert_id,
    l.tokens / NULLIF(s.assignments, 0) AS share,
    l.tokens > s.load_p90               AS hot
  FROM loads l
  JOIN load_stats s ON l.layer = s.layer
),
per_layer AS (
  SELECT
    layer,
    array_agg(share ORDER BY expert_id)                                  AS expert_shares,
    array_agg(expert_id ORDER BY expert_id) FILTER (WHERE hot)           AS hot_experts,
    COALESCE(sum(share) FILTER (WHERE hot), 0)                           AS hot_share,
    -sum(CASE WHEN share > 0 THEN share * log2(share) ELSE 0 END)        AS routing_entropy_bits
  FROM shares
  GROUP BY layer
)
SELECT
  p.layer,
  ls.num_experts,
  ls.top_k,
  CAST(ls.top_k AS DOUBLE) / ls.num_experts                      AS sparsity,
  CAST(s.assignments AS BIGINT)                                  AS assignments,
  s.assignments / ls.top_k                                       AS routed_tokens,
  p.expert_shares,
  p.hot_experts,
  p.hot_share,
  s.load_max / NULLIF(s.load_mean, 0)                            AS imbalance_max_mean,
  s.load_std / NULLIF(s.load_mean, 0)                            AS load_cv,
  p.routing_entropy_bits,
  redundancy_bound(p.routing_entropy_bits, ls.top_k, ls.num_experts) AS redundancy_bound,
  ls.inconsistent
FROM per_layer p
JOIN layer_shape ls ON p.layer = ls.layer
JOIN load_stats s ON p.layer = s.layer
ORDER BY p.layer
