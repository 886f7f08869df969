-- cost: spend per model x context bin from the prices given with --pricing.
-- Columns and formulas: docs/metrics.md#cost
-- price_usd(...) is a struct of the request's cost by part, null when the
-- model has no price at ts: such requests are counted, never priced at 0.
WITH priced AS (
  SELECT {{by}}, context_bin, context_bin_lo, prompt_tokens, completion_tokens, {{> price}}
  FROM {{requests}}
)
SELECT
  {{by}},
  context_bin,
  {{> requests}},
  {{> unpriced_requests}},
  {{> cost_usd}},
  {{> cost_per_1k_tokens}},
  {{> input_share}},
  {{> cached_share}},
  {{> output_share}}
FROM priced
GROUP BY {{by}}, context_bin, context_bin_lo
ORDER BY {{by}}, context_bin_lo
