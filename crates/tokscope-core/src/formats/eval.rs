//! Evaluation records (tokscope's own layout), JSON lines keyed by the
//! `request_id` of the scored request: `task`, `reference` (gold answer),
//! `relevance_true` and `relevance_model` (two distributions over the same
//! candidates, objects `candidate -> probability`), `recall`,
//! `semantic_similarity`, `factscore`, `human_score`, and ranked retrieval
//! results: `retrieved` (item ids, best first) and `relevant` (the ids that
//! should be retrieved); all but `request_id` optional.
//!
//! A line is rejected when it is not a JSON object, has no `request_id`, or
//! holds a score or probability that is not a number. Values that are
//! numbers but make no sense keep the record and add an issue code
//! (docs/metrics.md): a score outside its range is stored as null, a
//! distribution that is not one is kept as logged.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{fields, LineContext, LogFormat, Parsed, Probe, Row};
use crate::catalog::evals::EvalRow;

/// Keys that make a line with a `request_id` an evaluation record.
const EVAL_KEYS: [&str; 8] = [
    "relevance_true",
    "relevance_model",
    "recall",
    "semantic_similarity",
    "factscore",
    "human_score",
    "reference",
    "retrieved",
];

/// How far from 1 a distribution's sum may be (the same tolerance as `kl_divergence`).
pub const SUM_TOLERANCE: f64 = crate::stats::kl::SUM_TOLERANCE;

/// Issue codes of the `evals.issues` column.
pub mod issue {
    /// A relevance distribution has a negative entry or does not sum to 1 within 1e-6.
    pub const NOT_NORMALIZED: &str = "not_normalized";
    /// `relevance_true` and `relevance_model` name different candidates.
    pub const CANDIDATE_MISMATCH: &str = "candidate_mismatch";
    /// Only one of the two distributions is logged.
    pub const MISSING_DISTRIBUTION: &str = "missing_distribution";
}

/// The score fields, each with its valid range and the issue code of a value outside it.
const SCORES: [(&str, f64, f64, &str); 4] = [
    ("recall", 0.0, 1.0, "recall_out_of_range"),
    ("semantic_similarity", -1.0, 1.0, "semantic_similarity_out_of_range"),
    ("factscore", 0.0, 1.0, "factscore_out_of_range"),
    ("human_score", 1.0, 5.0, "human_score_out_of_range"),
];

fn text(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{field} must be a string, got {other}")),
    }
}

/// A relevance distribution, candidates sorted by name.
fn distribution(obj: &Map<String, Value>, field: &str) -> Result<Option<BTreeMap<String, f64>>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(d)) => d
            .iter()
            .map(|(candidate, p)| match p.as_f64() {
                Some(p) => Ok((candidate.clone(), p)),
                None => Err(format!("{field}.{candidate} must be a number, got {p}")),
            })
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Some),
        Some(other) => Err(format!("{field} must be an object of candidate: probability, got {other}")),
    }
}

/// A list of item ids (strings, or numbers written as text), in logged order.
fn ids(obj: &Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(format!("{field} must hold item ids (strings or numbers), got {other}")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(format!("{field} must be an array of item ids, got {other}")),
    }
}

fn is_distribution(d: &BTreeMap<String, f64>) -> bool {
    d.values().all(|p| p.is_finite() && *p >= 0.0) && (d.values().sum::<f64>() - 1.0).abs() <= SUM_TOLERANCE
}

/// Parses one evaluation line.
pub fn parse_record(line: &[u8]) -> Result<EvalRow, String> {
    let obj: Map<String, Value> = fields::from_json(line).map_err(|e| format!("invalid evaluation JSON line: {e}"))?;
    let request_id = match obj.get("request_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        None | Some(Value::Null) => return Err("missing required field request_id".to_string()),
        Some(other) => return Err(format!("request_id must be a non-empty string, got {other}")),
    };
    let mut row = EvalRow {
        request_id,
        task: text(&obj, "task")?,
        reference: text(&obj, "reference")?,
        retrieved: ids(&obj, "retrieved")?,
        relevant: ids(&obj, "relevant")?,
        ..Default::default()
    };

    let mut scores = [None; 4];
    for (slot, (field, lo, hi, out_of_range)) in scores.iter_mut().zip(SCORES) {
        let v = match obj.get(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_f64().ok_or_else(|| format!("{field} must be a number, got {v}"))?),
        };
        *slot = match v {
            Some(x) if !(lo..=hi).contains(&x) => {
                row.issues.push(out_of_range);
                None
            }
            other => other,
        };
    }
    [row.recall, row.semantic_similarity, row.factscore, row.human_score] = scores;

    match (distribution(&obj, "relevance_true")?, distribution(&obj, "relevance_model")?) {
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => row.issues.push(issue::MISSING_DISTRIBUTION),
        (Some(t), Some(m)) if !t.keys().eq(m.keys()) => row.issues.push(issue::CANDIDATE_MISMATCH),
        (Some(t), Some(m)) => {
            if !is_distribution(&t) || !is_distribution(&m) {
                row.issues.push(issue::NOT_NORMALIZED);
            }
            row.relevance_true = Some(t.values().copied().collect());
            row.relevance_model = Some(m.values().copied().collect());
            row.candidates = Some(t.into_keys().collect());
        }
    }
    Ok(row)
}

/// Evaluation records, recognised by a `request_id` with any evaluation key
/// and no token counts.
pub struct Eval;

impl LogFormat for Eval {
    fn name(&self) -> &'static str {
        "eval"
    }

    fn about(&self) -> &'static str {
        "evaluation records by request_id: reference, relevance distributions, recall, ranked retrieval results, \
         similarity, FactScore, human score"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(|o| {
            o.contains_key("request_id")
                && EVAL_KEYS.iter().any(|k| o.contains_key(*k))
                && !o.contains_key("prompt_tokens")
                && !o.contains_key("completion_tokens")
        })
    }

    fn parse<'a>(&self, line: &'a [u8], _ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        Ok(Parsed::Rows { rows: vec![Row::table(parse_record(line)?)], skipped: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_are_aligned_by_sorted_candidate() {
        let r = parse_record(
            br#"{"request_id":"a","relevance_true":{"d2":0.25,"d1":0.75},"relevance_model":{"d1":0.5,"d2":0.5}}"#,
        )
        .unwrap();
        assert_eq!(r.candidates, Some(vec!["d1".to_string(), "d2".to_string()]));
        assert_eq!(r.relevance_true, Some(vec![0.75, 0.25]));
        assert_eq!(r.relevance_model, Some(vec![0.5, 0.5]));
        assert!(r.issues.is_empty());
    }

    #[test]
    fn problems_keep_the_record_with_an_issue() {
        let r = parse_record(br#"{"request_id":"a","recall":1.2,"human_score":0,"factscore":0.5}"#).unwrap();
        assert_eq!((r.recall, r.human_score, r.factscore), (None, None, Some(0.5)));
        assert_eq!(r.issues, ["recall_out_of_range", "human_score_out_of_range"]);
        let r = parse_record(br#"{"request_id":"a","relevance_true":{"a":1},"relevance_model":{"b":1}}"#).unwrap();
        assert_eq!((r.issues.as_slice(), r.relevance_true), ([issue::CANDIDATE_MISMATCH].as_slice(), None));
        let r =
            parse_record(br#"{"request_id":"a","relevance_true":{"a":0.6,"b":0.6},"relevance_model":{"a":1,"b":0}}"#)
                .unwrap();
        assert_eq!((r.issues.as_slice(), r.relevance_true), ([issue::NOT_NORMALIZED].as_slice(), Some(vec![0.6, 0.6])));
        let r = parse_record(br#"{"request_id":"a","relevance_true":{"a":1}}"#).unwrap();
        assert_eq!(r.issues, [issue::MISSING_DISTRIBUTION]);
    }

    #[test]
    fn non_numbers_and_missing_ids_are_rejected() {
        assert!(parse_record(br#"{"task":"qa","recall":0.5}"#).unwrap_err().contains("request_id"));
        assert!(parse_record(br#"{"request_id":"a","recall":"high"}"#)
            .unwrap_err()
            .contains("recall must be a number"));
        assert!(parse_record(br#"{"request_id":"a","relevance_true":{"x":"1"}}"#)
            .unwrap_err()
            .contains("relevance_true.x"));
        assert!(parse_record(br#"{"request_id":"gw-11","task":"qa","recall":0.9,"factscore": "#).is_err());
    }

    #[test]
    fn ranked_retrieval_results_keep_their_order() {
        let r = parse_record(br#"{"request_id":"a","retrieved":["d7","d2",9],"relevant":["d2"]}"#).unwrap();
        assert_eq!(r.retrieved, Some(vec!["d7".to_string(), "d2".to_string(), "9".to_string()]));
        assert_eq!(r.relevant, Some(vec!["d2".to_string()]));
        assert!(parse_record(br#"{"request_id":"a","retrieved":"d7,d2"}"#).unwrap_err().contains("array"));
        assert!(parse_record(br#"{"request_id":"a","retrieved":[{"id":1}]}"#).unwrap_err().contains("item ids"));
        assert!(Eval.detect(&Probe::new(br#"{"request_id":"a","retrieved":["d1"],"relevant":["d1"]}"#)));
    }

    #[test]
    fn detected_by_request_id_and_an_evaluation_key() {
        let detect = |l: &str| Eval.detect(&Probe::new(l.as_bytes()));
        assert!(detect(r#"{"request_id":"a","factscore":0.5}"#));
        assert!(!detect(r#"{"request_id":"a","task":"qa"}"#));
        assert!(!detect(r#"{"request_id":"a","reference":"x","prompt_tokens":3}"#));
    }
}
