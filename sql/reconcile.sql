-- reconcile: the cost each request's gateway logged against its price (--pricing;
-- the bundled LiteLLM table by default), per UTC day x model.
-- Columns and formulas: docs/metrics.md#reconcile
-- {{tolerance}}: relative (`--param tolerance=0.01`); a request whose two costs
-- differ by more than tolerance x the larger of the two is mismatched, and
-- reconcile_requests lists it.
WITH priced AS (
  SELECT date, model, logged_cost_usd, {{> price}}
  FROM requests
),
compared AS (
  SELECT date, model, logged_cost_usd, {{> priced_cost_usd}}, {{> cost_mismatch}}
  FROM priced
)
SELECT
  date,
  model,
  count(*) AS requests,
  count(*) FILTER (WHERE priced_cost_usd IS NOT NULL AND logged_cost_usd IS NOT NULL) AS compared_requests,
  count(*) FILTER (WHERE priced_cost_usd IS NOT NULL AND logged_cost_usd IS NULL) AS priced_only_requests,
  count(*) FILTER (WHERE priced_cost_usd IS NULL AND logged_cost_usd IS NOT NULL) AS logged_only_requests,
  sum(priced_cost_usd) FILTER (WHERE logged_cost_usd IS NOT NULL) AS priced_cost_usd,
  sum(logged_cost_usd) FILTER (WHERE priced_cost_usd IS NOT NULL) AS logged_cost_usd,
  sum(logged_cost_usd - priced_cost_usd) AS difference_usd,
  sum(logged_cost_usd) FILTER (WHERE priced_cost_usd IS NOT NULL)
    / NULLIF(sum(priced_cost_usd) FILTER (WHERE logged_cost_usd IS NOT NULL), 0) AS logged_to_priced_ratio,
  count(*) FILTER (WHERE cost_mismatch) AS mismatched_requests
FROM compared
GROUP BY date, model
ORDER BY date, model
