-- cost: spend per model x context bin from the prices given with --pricing.
-- Columns and formulas: docs/metrics.md#cost
-- price_usd(...) is a struct of the request's cost by part, null when the
-- model has no price at ts: such requests are counted, never priced at 0.
WITH priced AS (
  SELECT
    model, context_bin, context_bin_lo, prompt_tokens, completion_tokens,
    price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens) AS p
  FROM requests
)
SELECT
  model,
  context_bin,
  count(*)                                     AS requests,
  count(*) FILTER (WHERE p IS NULL)            AS unpriced_requests,
  sum(p['total_usd'])                          AS cost_usd,
  1000 * sum(p['total_usd'])
    / NULLIF(sum(prompt_tokens + completion_tokens) FILTER (WHERE p IS NOT NULL), 0)
                                               AS cost_per_1k_tokens,
  sum(p['input_usd'] + p['cache_write_usd']) / NULLIF(sum(p['total_usd']), 0)
                                               AS input_share,
  sum(p['cached_input_usd']) / NULLIF(sum(p['total_usd']), 0)
                                               AS cached_share,
  sum(p['output_usd']) / NULLIF(sum(p['total_usd']), 0)
                                               AS output_share
FROM priced
GROUP BY model, context_bin, context_bin_lo
ORDER BY model, context_bin_lo
