//! `replay_verdicts`: what a real decoder says about each replayed request
//! (definitions in docs/replay.md). Written by `tokscope replay`, keyed by
//! `request_id`: a rerun replaces the row.

use super::columns::table;

/// The outcome classes of a replayed request (docs/replay.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The model stops here with probability >= threshold.
    NaturalStop,
    /// The model would have continued: the output was cut.
    ConfirmedTruncation,
    /// The request does not fit in the model's context window.
    PromptTruncated,
    /// The request could not be replayed (see `reason`).
    Error,
}

impl Verdict {
    /// The value stored in `replay_verdicts.verdict`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NaturalStop => "natural_stop",
            Verdict::ConfirmedTruncation => "confirmed_truncation",
            Verdict::PromptTruncated => "prompt_truncated",
            Verdict::Error => "error",
        }
    }
}

/// One replayed request (run-level columns are in [`RunInfo`]).
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictRow {
    /// The request.
    pub request_id: String,
    /// The outcome.
    pub verdict: Verdict,
    /// Why, for `error` and `prompt_truncated`.
    pub reason: Option<String>,
    /// P(EOS | prompt, logged output); null when nothing was replayed.
    pub p_eos_at_cut: Option<f64>,
    /// Greedy continuation after the cut (special tokens skipped).
    pub continuation: Option<String>,
    /// Whether that continuation ended with EOS within its budget.
    pub continuation_ended_with_eos: Option<bool>,
    /// Prompt tokens (BOS included) run through the model, or counted when too long.
    pub prompt_tokens_replayed: i64,
    /// Logged-output tokens teacher-forced after the prompt.
    pub output_tokens_replayed: i64,
    /// The cut falls inside a special delimiter such as `<|user|>`.
    pub cut_in_special_token: bool,
    /// The cut falls inside a multi-byte UTF-8 character.
    pub cut_in_utf8_char: bool,
    /// With `repeat >= 2`: whether every run gave identical ids and P(EOS) bits.
    pub deterministic: Option<bool>,
}

impl VerdictRow {
    /// An `error` verdict for a request that could not be replayed.
    pub fn error(request_id: &str, reason: impl Into<String>) -> Self {
        VerdictRow {
            request_id: request_id.to_string(),
            verdict: Verdict::Error,
            reason: Some(reason.into()),
            p_eos_at_cut: None,
            continuation: None,
            continuation_ended_with_eos: None,
            prompt_tokens_replayed: 0,
            output_tokens_replayed: 0,
            cut_in_special_token: false,
            cut_in_utf8_char: false,
            deterministic: None,
        }
    }
}

/// Columns shared by every row of one replay run.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The replayed checkpoint (model directory name).
    pub model: String,
    /// The backend that ran it (`cpu`, `cuda:0`).
    pub device: String,
    /// The `--threshold` used.
    pub threshold: f64,
    /// When the run started, microseconds since the epoch (UTC).
    pub replayed_at_micros: i64,
}

table! {
    /// One row per replayed request: the decoder's verdict on its ending.
    pub table VerdictsBuilder(v: &VerdictRow, run: &RunInfo) {
        name: "replay_verdicts",
        key: ["request_id"],
        partition: None,
        written_by: Replay,
    } {
        /// Joins requests.request_id.
        request_id: Utf8 = v.request_id.as_str(),
        /// natural_stop|confirmed_truncation|prompt_truncated|error (docs/replay.md).
        verdict: Utf8 [Dictionary] = v.verdict.as_str(),
        /// Why, for `error` and `prompt_truncated`.
        reason: Utf8 nullable = v.reason.as_deref(),
        /// P(EOS | prompt, logged output), the softmax mass of every EOS id; null when nothing was replayed.
        p_eos_at_cut: Float64 nullable = v.p_eos_at_cut,
        /// The --threshold of the run: P(EOS) at or above it is a natural stop.
        threshold: Float64 = run.threshold,
        /// Greedy continuation after the cut (special tokens skipped).
        continuation: Utf8 nullable = v.continuation.as_deref(),
        /// Whether that continuation ended with EOS within its budget.
        continuation_ended_with_eos: Boolean nullable = v.continuation_ended_with_eos,
        /// Prompt tokens (BOS included) run through the model, or counted when too long.
        prompt_tokens_replayed: Int64 = v.prompt_tokens_replayed,
        /// Logged-output tokens teacher-forced after the prompt.
        output_tokens_replayed: Int64 = v.output_tokens_replayed,
        /// The cut falls inside a special delimiter such as `<|user|>`.
        cut_in_special_token: Boolean = v.cut_in_special_token,
        /// The cut falls inside a multi-byte UTF-8 character.
        cut_in_utf8_char: Boolean = v.cut_in_utf8_char,
        /// With --repeat 2 or more: whether every run gave identical ids and P(EOS) bits; else null.
        deterministic: Boolean nullable = v.deterministic,
        /// The backend that ran it: cpu or cuda:N.
        device: Utf8 [Dictionary] = run.device.as_str(),
        /// The replayed checkpoint (model directory name).
        model: Utf8 [Dictionary] = run.model.as_str(),
        /// When the replay run started, UTC.
        replayed_at: TimestampUtc = run.replayed_at_micros,
    }
}
