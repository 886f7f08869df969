-- Per-prompt causal-mediation effects from the `interventions` table
-- (formulas: docs/metrics.md, "Mediation"). One row per metric x layer x
-- effect x prompt; the `mediation` job then summarises each group with its
-- mean and a 95% percentile-bootstrap interval (in Rust: resampling is not SQL).
-- Noise/perturbation samples are averaged per prompt first.
WITH runs AS (
    SELECT prompt_id, metric, intervention, layer, position, avg(value) AS y
    FROM interventions
    GROUP BY prompt_id, metric, intervention, layer, position
),
clean AS (SELECT prompt_id, metric, y FROM runs WHERE intervention = 'clean'),
corrupt AS (SELECT prompt_id, metric, y FROM runs WHERE intervention = 'corrupt'),
-- Layer-level restores only (every corrupted position restored at `layer`);
-- single-position cells (position set) feed the heatmap instead.
restore AS (SELECT prompt_id, metric, layer, y FROM runs WHERE intervention = 'restore' AND position IS NULL),
perturb AS (SELECT prompt_id, metric, layer, y FROM runs WHERE intervention = 'perturb'),
effects AS (
    SELECT r.metric, r.layer, r.prompt_id,
           c.y - k.y AS te,
           r.y - k.y AS ie,
           (c.y - k.y) - (r.y - k.y) AS de
    FROM restore r
    JOIN clean c ON c.prompt_id = r.prompt_id AND c.metric = r.metric
    JOIN corrupt k ON k.prompt_id = r.prompt_id AND k.metric = r.metric
)
SELECT metric, layer, 'te' AS effect, prompt_id, te AS value FROM effects
UNION ALL
SELECT metric, layer, 'ie' AS effect, prompt_id, ie AS value FROM effects
UNION ALL
SELECT metric, layer, 'de' AS effect, prompt_id, de AS value FROM effects
UNION ALL
SELECT p.metric, p.layer, 'perturb' AS effect, p.prompt_id, p.y - c.y AS value
FROM perturb p
JOIN clean c ON c.prompt_id = p.prompt_id AND c.metric = p.metric
ORDER BY metric, layer, effect, prompt_id
