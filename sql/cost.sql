-- cost: spend per model x context bin, from the prices (--pricing; the bundled
-- LiteLLM table by default), else from the cost the request's gateway logged.
-- Columns and formulas: docs/metrics.md#cost
-- price_usd(...) is a struct of the request's cost by part, null when the
-- model has no price at ts: such requests take their logged cost, else are
-- counted as uncosted, never costed at 0.
WITH priced AS (
  SELECT {{by}}, context_bin, context_bin_lo, prompt_tokens, completion_tokens, logged_cost_usd, {{> price}}
  FROM {{requests}}
)
SELECT
  {{by}},
  context_bin,
  {{> requests}},
  {{> unpriced_requests}},
  {{> uncosted_requests}},
  {{> cost_source}},
  {{> cost_usd}},
  {{> logged_cost_share}},
  {{> cost_per_1k_tokens}},
  {{> input_share}},
  {{> cached_share}},
  {{> output_share}}
FROM priced
GROUP BY {{by}}, context_bin, context_bin_lo
ORDER BY {{by}}, context_bin_lo
