-- Causal-tracing heatmap: mean indirect effect of restoring layer x position
-- (single-position `restore` rows) over prompts, per metric.
-- IE(l, i) = y(corrupt, restore l at i) - y(corrupt), samples averaged per prompt first.
WITH runs AS (
    SELECT prompt_id, metric, intervention, layer, position, avg(value) AS y
    FROM interventions
    GROUP BY prompt_id, metric, intervention, layer, position
),
corrupt AS (SELECT prompt_id, metric, y FROM runs WHERE intervention = 'corrupt')
SELECT r.metric, r.layer, r.position, avg(r.y - k.y) AS ie, count(*) AS prompts
FROM runs r
JOIN corrupt k ON k.prompt_id = r.prompt_id AND k.metric = r.metric
WHERE r.intervention = 'restore' AND r.position IS NOT NULL
GROUP BY r.metric, r.layer, r.position
ORDER BY r.metric, r.layer, r.position
