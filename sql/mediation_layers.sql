-- mediation_layers: the direct and indirect effect of each changed layer
-- (`weight-noise`, `skip-layer`), for the dashboard's chart: per study (metric
-- and change), layer and effect (de, ie), the mean over (prompt, noise draw)
-- cells with its seeded 95% percentile-bootstrap interval. The cells and
-- effects are the `mediation` job's, written again here because a job is one
-- query (docs/metrics.md, "Mediation"; tests/model/mediation.rs checks the two
-- agree); TE = DE + IE is in that job. Parameters: resamples, seed.
WITH clean AS (
    SELECT prompt_id, metric, avg(value) AS y FROM interventions WHERE intervention = 'clean' GROUP BY prompt_id, metric
),
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
    SELECT g.metric || ', ' || g.intervention || coalesce(' ' || g.weight, '')
               || coalesce(' sigma ' || CAST(g.sigma AS VARCHAR), '') AS study,
           g.layer, g.y_direct - c.y AS de, g.y_total - g.y_direct AS ie
    FROM changed g
    JOIN clean c ON c.prompt_id = g.prompt_id AND c.metric = g.metric
    WHERE g.y_total IS NOT NULL AND g.y_direct IS NOT NULL
),
per_unit AS (
    SELECT study, layer, 'de' AS effect, de AS value FROM layer_cells
    UNION ALL
    SELECT study, layer, 'ie', ie FROM layer_cells
),
summary AS (
    SELECT study, layer, effect, count(*) AS n, avg(value) AS mean,
           bootstrap_mean_ci(value, {{resamples}}, {{seed}}) AS ci
    FROM per_unit
    GROUP BY study, layer, effect
)
SELECT study, layer, effect, n, mean, ci['lo'] AS ci_lo, ci['hi'] AS ci_hi
FROM summary
ORDER BY study, layer, effect
