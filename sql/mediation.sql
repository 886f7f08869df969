-- mediation: causal-mediation effects per metric x layer from the
-- `interventions` table: TE, IE, DE and the weight-perturbation delta, each
-- the mean over prompts with its seeded 95% percentile-bootstrap interval
-- (formulas: docs/metrics.md, "Mediation"). Noise/perturbation samples are
-- averaged per prompt first. Parameters: resamples, seed.
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
),
per_prompt AS (
    SELECT metric, layer, 'te' AS effect, prompt_id, te AS value FROM effects
    UNION ALL
    SELECT metric, layer, 'ie' AS effect, prompt_id, ie AS value FROM effects
    UNION ALL
    SELECT metric, layer, 'de' AS effect, prompt_id, de AS value FROM effects
    UNION ALL
    SELECT p.metric, p.layer, 'perturb' AS effect, p.prompt_id, p.y - c.y AS value
    FROM perturb p
    JOIN clean c ON c.prompt_id = p.prompt_id AND c.metric = p.metric
),
summary AS (
    SELECT metric, layer, effect, count(*) AS n, avg(value) AS mean,
           bootstrap_mean_ci(value, {{resamples}}, {{seed}}) AS ci
    FROM per_prompt
    GROUP BY metric, layer, effect
)
SELECT metric, layer, effect, n, mean, ci['lo'] AS ci_lo, ci['hi'] AS ci_hi
FROM summary
ORDER BY metric, layer, effect
