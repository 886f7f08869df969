-- quality: answer quality per model x task: mean sentence BLEU-4 against the reference, mean FactScore, and their blend f1_fact.
-- Columns and formulas: docs/metrics.md#quality
-- bleu4 = sacreBLEU sentence BLEU / 100 of the request's model_output against
-- the record's reference (both present); f1_fact = bleu_weight * bleu4_mean +
-- factscore_weight * factscore_mean. Records whose request is not in the
-- dataset are kept under a null model.
WITH scored AS (
  SELECT
    r.model,
    e.task,
    bleu4(r.model_output, e.reference) AS bleu,
    e.factscore
  FROM evals e
  LEFT JOIN requests r ON e.request_id = r.request_id
)
SELECT
  model,
  task,
  count(*)          AS evals,
  count(bleu)       AS bleu_scored,
  avg(bleu)         AS bleu4_mean,
  count(factscore)  AS factscore_scored,
  avg(factscore)    AS factscore_mean,
  {{bleu_weight}} * avg(bleu) + {{factscore_weight}} * avg(factscore) AS f1_fact
FROM scored
GROUP BY model, task
ORDER BY model NULLS LAST, task NULLS LAST
