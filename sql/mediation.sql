-- mediation: causal-mediation effects from the `interventions` table, each the
-- mean with its seeded 95% percentile-bootstrap interval (formulas:
-- docs/metrics.md, "Mediation"). Corruption (intervention `corrupt`): TE, IE
-- and DE per restored layer, and the gate perturbation's delta (`perturb`);
-- noise/perturbation samples are averaged per prompt first, the interval is
-- over prompts. Per-layer changes (`weight-noise`, `skip-layer`): TE, DE (the
-- direct path only) and IE = TE - DE per (prompt, noise draw), the interval
-- over those cells; a draw counts when it has both its total and its direct
-- run. Parameters: resamples, seed.
WITH runs AS (
    SELECT prompt_id, metric, intervention, layer, position, avg(value) AS y
    FROM interventions
    WHERE intervention IN ('clean', 'corrupt', 'restore', 'perturb')
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
),
-- One cell per (prompt, draw) of a changed layer: its total and direct runs side by side.
changed AS (
    SELECT prompt_id, metric, CAST(intervention AS VARCHAR) AS intervention, CAST(weight AS VARCHAR) AS weight,
           sigma, layer, sample,
           avg(value) FILTER (WHERE path = 'total') AS y_total,
           avg(value) FILTER (WHERE path = 'direct') AS y_direct
    FROM interventions
    WHERE intervention IN ('weight-noise', 'skip-layer')
    GROUP BY prompt_id, metric, intervention, weight, sigma, layer, sample
),
layer_cells AS (
    SELECT g.metric, g.intervention, g.weight, g.sigma, g.layer,
           g.y_total - c.y AS te, g.y_direct - c.y AS de, g.y_total - g.y_direct AS ie
    FROM changed g
    JOIN clean c ON c.prompt_id = g.prompt_id AND c.metric = g.metric
    WHERE g.y_total IS NOT NULL AND g.y_direct IS NOT NULL
),
per_unit AS (
    SELECT metric, 'corrupt' AS intervention, CAST(NULL AS VARCHAR) AS weight, CAST(NULL AS DOUBLE) AS sigma,
           layer, 'te' AS effect, te AS value FROM effects
    UNION ALL
    SELECT metric, 'corrupt', NULL, NULL, layer, 'ie', ie FROM effects
    UNION ALL
    SELECT metric, 'corrupt', NULL, NULL, layer, 'de', de FROM effects
    UNION ALL
    SELECT p.metric, 'perturb', NULL, NULL, p.layer, 'perturb', p.y - c.y
    FROM perturb p
    JOIN clean c ON c.prompt_id = p.prompt_id AND c.metric = p.metric
    UNION ALL
    SELECT metric, intervention, weight, sigma, layer, 'te', te FROM layer_cells
    UNION ALL
    SELECT metric, intervention, weight, sigma, layer, 'de', de FROM layer_cells
    UNION ALL
    SELECT metric, intervention, weight, sigma, layer, 'ie', ie FROM layer_cells
),
summary AS (
    SELECT metric, intervention, weight, sigma, layer, effect, count(*) AS n, avg(value) AS mean,
           bootstrap_mean_ci(value, {{resamples}}, {{seed}}) AS ci
    FROM per_unit
    GROUP BY metric, intervention, weight, sigma, layer, effect
)
SELECT metric, intervention, weight, sigma, layer, effect, n, mean, ci['lo'] AS ci_lo, ci['hi'] AS ci_hi
FROM summary
ORDER BY metric, intervention, weight, sigma, layer, effect
