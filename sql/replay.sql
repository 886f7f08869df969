-- replay: replay verdicts per model x context bin (tokscope replay writes replay_verdicts).
-- Verdict definitions: docs/replay.md#verdicts
SELECT
  r.model,
  r.context_bin,
  count(*)                                                       AS replayed,
  count(*) FILTER (WHERE v.verdict = 'natural_stop')             AS natural_stop,
  count(*) FILTER (WHERE v.verdict = 'confirmed_truncation')     AS confirmed_truncation,
  count(*) FILTER (WHERE v.verdict = 'prompt_truncated')         AS prompt_truncated,
  count(*) FILTER (WHERE v.verdict = 'error')                    AS error,
  CAST(count(*) FILTER (WHERE v.verdict = 'confirmed_truncation') AS DOUBLE)
    / NULLIF(count(*) FILTER (WHERE v.verdict IN ('natural_stop', 'confirmed_truncation')), 0)
                                                                 AS confirmed_truncation_rate,
  avg(v.p_eos_at_cut)                                            AS mean_p_eos_at_cut
FROM replay_verdicts v
JOIN requests r ON r.request_id = v.request_id
GROUP BY r.model, r.context_bin, r.context_bin_lo
ORDER BY r.context_bin_lo, r.model
