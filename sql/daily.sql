-- daily: cost and quality per UTC day x model, the trends a scheduled export charts.
-- Columns and formulas: docs/metrics.md#daily
WITH priced AS (
  SELECT date, {{by}}, eos_status, ttft_ms, prompt_tokens, completion_tokens, logged_cost_usd, {{> price}}
  FROM {{requests}}
)
SELECT
  date,
  {{by}},
  {{> requests}},
  {{> tokens}},
  {{> cost_usd}},
  {{> cost_per_1k_tokens}},
  {{> eos_compliance_rate}},
  {{> implicit_truncation_rate}},
  {{> ttft_p50_ms}},
  {{> ttft_p95_ms}}
FROM priced
GROUP BY date, {{by}}
ORDER BY date, {{by}}
