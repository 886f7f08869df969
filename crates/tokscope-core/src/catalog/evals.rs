//! `evals`: one row per evaluation record (the `eval` format), keyed by the
//! `request_id` of the request it scores. Read, joined to `requests`, by the
//! `drift`, `quality` and `composite` jobs.

use super::append::TableRow;
use super::columns::table;
use crate::record::LineOrigin;
use crate::redact::Redactor;

/// One evaluation record, as the `eval` format parses it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalRow {
    /// The scored request (`requests.request_id`).
    pub request_id: String,
    /// Task label (`qa`, `rag`, ...).
    pub task: Option<String>,
    /// The gold answer.
    pub reference: Option<String>,
    /// Candidate names of the two relevance distributions, sorted.
    pub candidates: Option<Vec<String>>,
    /// Gold relevance per candidate, in `candidates` order.
    pub relevance_true: Option<Vec<f64>>,
    /// The model's relevance per candidate, in `candidates` order.
    pub relevance_model: Option<Vec<f64>>,
    /// Retrieval recall in [0, 1].
    pub recall: Option<f64>,
    /// Cosine similarity to the reference in [-1, 1].
    pub semantic_similarity: Option<f64>,
    /// FactScore in [0, 1].
    pub factscore: Option<f64>,
    /// Human rating in [1, 5].
    pub human_score: Option<f64>,
    /// Ids of the retrieved items, best-ranked first.
    pub retrieved: Option<Vec<String>>,
    /// Ids of the items that should have been retrieved.
    pub relevant: Option<Vec<String>>,
    /// Problems found in the record (codes in docs/metrics.md); the record is kept.
    pub issues: Vec<&'static str>,
}

impl EvalRow {
    fn candidate_names(&self) -> Option<Vec<&str>> {
        Self::names(&self.candidates)
    }

    fn names(ids: &Option<Vec<String>>) -> Option<Vec<&str>> {
        ids.as_ref().map(|c| c.iter().map(String::as_str).collect())
    }
}

table! {
    /// One row per evaluation record of a request: reference answer, relevance distributions, scores.
    pub table EvalsBuilder(e: &EvalRow, reference: Option<&str>, o: &LineOrigin<'_>) {
        name: "evals",
        key: ["request_id"],
        partition: None,
        written_by: Ingest,
    } {
        /// The scored request; joins requests.request_id.
        request_id: Utf8 [NoStatistics] = e.request_id.as_str(),
        /// Task label as logged (qa, rag, summarisation, chat, ...).
        task: Utf8 nullable [Dictionary] = e.task.as_deref(),
        /// Gold answer (hashed or dropped with --redact, like outputs).
        reference: Utf8 nullable [NoStatistics] = reference,
        /// Candidate names (documents, options) of the relevance distributions, sorted; null when they are absent or their candidates differ.
        candidates: Utf8List nullable = e.candidate_names().as_deref(),
        /// Gold relevance distribution, aligned with candidates.
        relevance_true: Float64List nullable = e.relevance_true.as_deref(),
        /// The model's relevance distribution, aligned with candidates.
        relevance_model: Float64List nullable = e.relevance_model.as_deref(),
        /// Retrieval recall in [0, 1]; null when absent or out of range.
        recall: Float64 nullable = e.recall,
        /// Semantic similarity (cosine) in [-1, 1]; null when absent or out of range.
        semantic_similarity: Float64 nullable = e.semantic_similarity,
        /// FactScore in [0, 1]; null when absent or out of range.
        factscore: Float64 nullable = e.factscore,
        /// Human rating in [1, 5]; null when absent or out of range.
        human_score: Float64 nullable = e.human_score,
        /// Ids of the items a retrieval step returned, best-ranked first (for recall at K); null when not logged.
        retrieved: Utf8List nullable = EvalRow::names(&e.retrieved).as_deref(),
        /// Ids of the items it should have returned; null when not logged.
        relevant: Utf8List nullable = EvalRow::names(&e.relevant).as_deref(),
        /// Problems in the record (codes in docs/metrics.md); null when none. The record is always kept.
        issues: Utf8List nullable = Some(e.issues.as_slice()),
        /// Input path or object URL.
        source_file: Utf8 [Dictionary] = o.file,
        /// 1-based line number in the decompressed input.
        source_line: UInt64 = o.line_no,
    }
}

impl TableRow for EvalRow {
    type Builder = EvalsBuilder;

    /// The reference answer is redacted like outputs.
    fn append(&self, builder: &mut EvalsBuilder, origin: &LineOrigin<'_>, redaction: &Redactor) -> Option<i32> {
        let reference = redaction.text(self.reference.as_deref());
        builder.append(self, reference.as_deref(), origin);
        None
    }
}
