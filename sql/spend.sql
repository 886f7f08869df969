-- spend: who spends what: requests, tokens, cost, EOS compliance, implicit truncation and P95 latency per team (or --param by=...).
-- Columns and formulas: docs/metrics.md#spend
-- The dashboard's "Who spends" section runs it per team, user, tag and provider (jobs::DASHBOARD).
WITH priced AS (
  SELECT {{by}}, eos_status, latency_ms, prompt_tokens, completion_tokens, logged_cost_usd, {{> price}}
  FROM {{requests}}
)
SELECT
  {{by}},
  {{> requests}},
  {{> tokens}},
  {{> unpriced_requests}},
  {{> cost_usd}},
  {{> cost_per_1k_tokens}},
  {{> eos_compliance_rate}},
  {{> implicit_truncation_rate}},
  {{> latency_p95_ms}}
FROM priced
GROUP BY {{by}}
ORDER BY cost_usd DESC NULLS LAST, requests DESC, {{by}}
