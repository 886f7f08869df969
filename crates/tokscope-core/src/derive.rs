//! Derived analytic columns, computed once at ingest. Each function here is the
//! single implementation of a definition in `docs/metrics.md`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use regex::Regex;
use serde::Deserialize;

use crate::attribution::AttributeMap;
use crate::error::{Error, Result};
use crate::record::{Attribution, LineOrigin, ProfileRecord, RequestRecord, TokenRecord};
use crate::redact::Redactor;

/// Context-length bins over `prompt_tokens`: half-open intervals `[lo, hi)`,
/// the last one open-ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextBins {
    edges: Vec<i64>,
    labels: Vec<String>,
}

/// The `context_bin` of a request whose prompt length the log does not give.
pub const UNKNOWN_BIN: &str = "unknown";

/// Default bin edges: 0, 1K, 2K, ..., 128K with K = 1024.
pub const DEFAULT_BIN_EDGES: [i64; 9] = [0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

impl Default for ContextBins {
    fn default() -> Self {
        Self::new(DEFAULT_BIN_EDGES.to_vec()).expect("default edges are valid")
    }
}

fn edge_label(v: i64) -> String {
    if v == 0 {
        "0".to_string()
    } else if v % 1024 == 0 {
        format!("{}K", v / 1024)
    } else {
        v.to_string()
    }
}

impl ContextBins {
    /// Bins from strictly increasing edges starting at 0.
    pub fn new(edges: Vec<i64>) -> Result<Self> {
        if edges.first() != Some(&0) {
            return Err(config_err!("context bin edges must start at 0"));
        }
        if edges.windows(2).any(|w| w[0] >= w[1]) {
            return Err(config_err!("context bin edges must be strictly increasing"));
        }
        let labels = edges
            .iter()
            .enumerate()
            .map(|(i, &lo)| match edges.get(i + 1) {
                Some(&hi) => format!("{}-{}", edge_label(lo), edge_label(hi)),
                None => format!("{}+", edge_label(lo)),
            })
            .collect();
        Ok(Self { edges, labels })
    }

    /// Parses `--bins`: comma-separated edges, `K` meaning 1024 (`0,1K,4K,32K`).
    pub fn parse(spec: &str) -> Result<Self> {
        let edges = spec
            .split(',')
            .map(|s| {
                let s = s.trim();
                let (num, mult) = match s.strip_suffix(['K', 'k']) {
                    Some(n) => (n, 1024),
                    None => (s, 1),
                };
                num.parse::<i64>().map(|n| n * mult).map_err(|_| config_err!("bad context bin edge {s:?} in --bins"))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(edges)
    }

    /// The bin of a prompt length: `(label, lower edge)`.
    pub fn bin(&self, prompt_tokens: i64) -> (&str, i64) {
        let i = self.edges.partition_point(|&e| e <= prompt_tokens).saturating_sub(1);
        (&self.labels[i], self.edges[i])
    }

    /// The bin of a prompt length that may be unknown: `(label, lower
    /// edge)`, and [`UNKNOWN_BIN`] with no edge when the log gives no length.
    pub fn bin_of(&self, prompt_tokens: Option<i64>) -> (&str, Option<i64>) {
        match prompt_tokens {
            Some(n) => {
                let (label, lo) = self.bin(n);
                (label, Some(lo))
            }
            None => (UNKNOWN_BIN, None),
        }
    }

    /// The bin labels in order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }
}

/// End-of-sequence markers searched at the end of raw model output.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EosMarkers {
    default: Vec<String>,
    per_model: HashMap<String, Vec<String>>,
}

/// Markers every model is checked for.
pub const DEFAULT_EOS_MARKERS: [&str; 8] = [
    "<|endoftext|>",
    "<|im_end|>",
    "</s>",
    "<|eot_id|>",
    "<|end|>",
    "[EOS]",
    "<|end▁of▁sentence|>",
    "<｜end▁of▁sentence｜>",
];

impl Default for EosMarkers {
    fn default() -> Self {
        Self { default: DEFAULT_EOS_MARKERS.iter().map(|s| s.to_string()).collect(), per_model: HashMap::new() }
    }
}

impl EosMarkers {
    /// Defaults plus an override file: a JSON object mapping a model name to
    /// extra markers, with `"*"` adding markers for every model.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
        let map: HashMap<String, Vec<String>> =
            serde_json::from_str(&text).map_err(|source| Error::Json { path: path.into(), source })?;
        let mut markers = Self::default();
        for (model, extra) in map {
            if model == "*" {
                markers.default.extend(extra);
            } else {
                markers.per_model.insert(model, extra);
            }
        }
        Ok(markers)
    }

    /// `model`'s markers: every model's, then its own.
    fn for_model<'s>(&'s self, model: Option<&str>) -> impl Iterator<Item = &'s String> {
        let own = model.and_then(|m| self.per_model.get(m)).map(Vec::as_slice).unwrap_or(&[]);
        self.default.iter().chain(own)
    }

    /// Whether the right-trimmed output ends with one of `model`'s markers.
    pub fn ends_with_marker(&self, model: &str, output: &str) -> bool {
        let out = output.trim_end();
        self.for_model(Some(model)).any(|m| out.ends_with(m.as_str()))
    }

    /// What answers whether a token is a marker ([`MarkerMatcher::is_marker`]),
    /// built once for many tokens (a column): it turns most tokens away by
    /// their first byte before comparing any marker.
    pub fn matcher(&self) -> MarkerMatcher<'_> {
        let mut first_bytes = [false; 256];
        for m in self.default.iter().chain(self.per_model.values().flatten()) {
            if let Some(&b) = m.as_bytes().first() {
                first_bytes[usize::from(b)] = true;
            }
        }
        MarkerMatcher { markers: self, first_bytes }
    }
}

/// [`EosMarkers`] with the markers' first bytes at hand.
#[derive(Debug)]
pub struct MarkerMatcher<'a> {
    markers: &'a EosMarkers,
    /// Whether some marker of some model starts with this byte.
    first_bytes: [bool; 256],
}

impl MarkerMatcher<'_> {
    /// Whether `token`, trimmed of whitespace, is one of `model`'s markers
    /// (with no model, one of every model's markers).
    pub fn is_marker(&self, model: Option<&str>, token: &str) -> bool {
        // A token that starts and ends with a printable ASCII character is
        // its own trim (`str::trim` decodes characters from both ends).
        let bytes = token.as_bytes();
        let own_trim =
            bytes.first().is_some_and(u8::is_ascii_graphic) && bytes.last().is_some_and(u8::is_ascii_graphic);
        let token = if own_trim { token } else { token.trim() };
        if token.as_bytes().first().is_some_and(|&b| !self.first_bytes[usize::from(b)]) {
            return false;
        }
        self.markers.for_model(model).any(|m| m == token)
    }
}

/// A model or model-version condition of a [`VariantMap`] rule.
#[derive(Debug, Clone)]
enum NameMatch {
    /// The whole name, exactly.
    Exact(String),
    /// A regular expression matching the whole name.
    Pattern(Regex),
}

impl NameMatch {
    fn new(exact: Option<String>, pattern: Option<String>, what: &str, rule: usize) -> Result<Option<Self>> {
        match (exact, pattern) {
            (Some(_), Some(_)) => Err(config_err!("--variants rule {rule}: give {what} or {what}_pattern, not both")),
            (Some(name), None) => Ok(Some(NameMatch::Exact(name))),
            (None, Some(p)) => Regex::new(&format!("^(?:{p})$"))
                .map(|r| Some(NameMatch::Pattern(r)))
                .map_err(|e| config_err!("--variants rule {rule}: bad {what}_pattern {p:?}: {e}")),
            (None, None) => Ok(None),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            NameMatch::Exact(n) => n == name,
            NameMatch::Pattern(r) => r.is_match(name),
        }
    }
}

/// One rule of a `--variants` file, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantRuleSpec {
    arm: String,
    model: Option<String>,
    model_pattern: Option<String>,
    model_version: Option<String>,
    model_version_pattern: Option<String>,
}

#[derive(Debug, Clone)]
struct VariantRule {
    arm: String,
    model: Option<NameMatch>,
    model_version: Option<NameMatch>,
}

/// The `--variants FILE` mapping from model names and versions to experiment
/// arms, for logs that do not name the arm (docs/metrics.md, `variant`): a
/// JSON array of rules `{"arm": NAME, "model" | "model_pattern": ...,
/// "model_version" | "model_version_pattern": ...}`; a rule matches when all
/// of its conditions do (patterns are regular expressions over the whole
/// name), and the first matching rule names the arm.
#[derive(Debug, Clone, Default)]
pub struct VariantMap {
    rules: Vec<VariantRule>,
}

impl VariantMap {
    /// Reads a `--variants` file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
        let specs: Vec<VariantRuleSpec> =
            serde_json::from_str(&text).map_err(|source| Error::Json { path: path.into(), source })?;
        Self::from_rules(specs)
    }

    /// The mapping from a JSON text (the contents of a `--variants` file).
    pub fn from_json(text: &str) -> Result<Self> {
        let specs: Vec<VariantRuleSpec> = serde_json::from_str(text).map_err(|e| config_err!("--variants: {e}"))?;
        Self::from_rules(specs)
    }

    fn from_rules(specs: Vec<VariantRuleSpec>) -> Result<Self> {
        let mut rules = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let n = i + 1;
            if spec.arm.trim().is_empty() {
                return Err(config_err!("--variants rule {n}: `arm` is empty"));
            }
            let model = NameMatch::new(spec.model, spec.model_pattern, "model", n)?;
            let model_version = NameMatch::new(spec.model_version, spec.model_version_pattern, "model_version", n)?;
            if model.is_none() && model_version.is_none() {
                return Err(config_err!(
                    "--variants rule {n}: needs model, model_pattern, model_version or model_version_pattern"
                ));
            }
            rules.push(VariantRule { arm: spec.arm, model, model_version });
        }
        Ok(VariantMap { rules })
    }

    /// The arm of the first rule whose conditions all hold; a version
    /// condition never holds for a request without a version.
    pub fn arm(&self, model: &str, model_version: Option<&str>) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| {
                r.model.as_ref().is_none_or(|m| m.matches(model))
                    && r.model_version.as_ref().is_none_or(|m| model_version.is_some_and(|v| m.matches(v)))
            })
            .map(|r| r.arm.as_str())
    }
}

/// `has_eos_marker` as defined in docs/metrics.md: `Some` only when the log
/// holds the raw output (special tokens kept); true when it ends with one of
/// `model`'s markers or, for formats that flag special tokens, when the last
/// token is special.
pub fn has_eos_marker(markers: &EosMarkers, rec: &RequestRecord<'_>) -> Option<bool> {
    match (&rec.model_output, rec.output_is_raw) {
        (Some(out), true) => Some(markers.ends_with_marker(&rec.model, out) || rec.last_token_special == Some(true)),
        _ => None,
    }
}

/// The normalised finish reasons.
pub mod finish {
    /// Natural stop: EOS, stop sequence, end of turn.
    pub const STOP: &str = "stop";
    /// Output cap reached.
    pub const LENGTH: &str = "length";
    /// Stopped to call a tool.
    pub const TOOL_CALLS: &str = "tool_calls";
    /// Stopped by a safety filter.
    pub const CONTENT_FILTER: &str = "content_filter";
    /// The request failed.
    pub const ERROR: &str = "error";
    /// Any other logged reason.
    pub const OTHER: &str = "other";
}

/// The one finish-reason mapping every format uses (the table in
/// docs/metrics.md, "Finish reasons"): each value producers are known to log,
/// compared after trimming and ASCII lowercasing, and the normalised value it
/// maps to. `""` (logged empty) maps to no reason at all.
pub const FINISH_REASONS: &[(&str, Option<&str>)] = &[
    // Natural stops: EOS token, stop sequence, end of turn.
    ("stop", Some(finish::STOP)),
    ("eos", Some(finish::STOP)),
    ("eos_token", Some(finish::STOP)),
    ("stop_sequence", Some(finish::STOP)),
    ("end_turn", Some(finish::STOP)),
    ("end", Some(finish::STOP)),
    ("complete", Some(finish::STOP)),
    ("completed", Some(finish::STOP)),
    ("finished", Some(finish::STOP)),
    ("pause_turn", Some(finish::STOP)),
    ("finish_reason_stop", Some(finish::STOP)),
    ("finish", Some(finish::STOP)),
    // The output cap.
    ("length", Some(finish::LENGTH)),
    ("max_tokens", Some(finish::LENGTH)),
    ("max_length", Some(finish::LENGTH)),
    ("max_new_tokens", Some(finish::LENGTH)),
    ("max_output_tokens", Some(finish::LENGTH)),
    ("model_length", Some(finish::LENGTH)),
    ("model_context_window_exceeded", Some(finish::LENGTH)),
    ("finish_reason_max_tokens", Some(finish::LENGTH)),
    ("error_limit", Some(finish::LENGTH)),
    // A tool or function call.
    ("tool_calls", Some(finish::TOOL_CALLS)),
    ("tool_call", Some(finish::TOOL_CALLS)),
    ("tool-calls", Some(finish::TOOL_CALLS)),
    ("tool_use", Some(finish::TOOL_CALLS)),
    ("function_call", Some(finish::TOOL_CALLS)),
    ("function_calls", Some(finish::TOOL_CALLS)),
    // A safety or policy filter.
    ("content_filter", Some(finish::CONTENT_FILTER)),
    ("content-filter", Some(finish::CONTENT_FILTER)),
    ("safety", Some(finish::CONTENT_FILTER)),
    ("refusal", Some(finish::CONTENT_FILTER)),
    ("recitation", Some(finish::CONTENT_FILTER)),
    ("blocklist", Some(finish::CONTENT_FILTER)),
    ("prohibited_content", Some(finish::CONTENT_FILTER)),
    ("spii", Some(finish::CONTENT_FILTER)),
    ("image_safety", Some(finish::CONTENT_FILTER)),
    ("guardrail_intervened", Some(finish::CONTENT_FILTER)),
    ("content_filtered", Some(finish::CONTENT_FILTER)),
    ("error_toxic", Some(finish::CONTENT_FILTER)),
    // The request failed or was stopped from outside.
    ("error", Some(finish::ERROR)),
    ("abort", Some(finish::ERROR)),
    ("aborted", Some(finish::ERROR)),
    ("cancelled", Some(finish::ERROR)),
    ("canceled", Some(finish::ERROR)),
    ("timeout", Some(finish::ERROR)),
    ("user_cancel", Some(finish::ERROR)),
    // Reasons producers log that are none of the above.
    ("other", Some(finish::OTHER)),
    ("unknown", Some(finish::OTHER)),
    ("finish_reason_unspecified", Some(finish::OTHER)),
    ("language", Some(finish::OTHER)),
    ("malformed_function_call", Some(finish::OTHER)),
    ("unexpected_tool_call", Some(finish::OTHER)),
    ("incomplete", Some(finish::OTHER)),
    ("load", Some(finish::OTHER)),
    ("unload", Some(finish::OTHER)),
    // Logged, but empty: no reason.
    ("", None),
];

/// A logged finish reason looked up in [`FINISH_REASONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// In the table: its normalised value (`None` for a reason logged empty).
    Mapped(Option<&'static str>),
    /// Not in the table: stored as `other`, and counted per file
    /// (`LineCounts::finish_reasons_unmapped`) so that a new value shows.
    Unmapped,
}

impl FinishReason {
    /// The `finish_reason` column's value.
    pub fn normalized(self) -> Option<&'static str> {
        match self {
            FinishReason::Mapped(v) => v,
            FinishReason::Unmapped => Some(finish::OTHER),
        }
    }
}

/// Looks `raw` up in [`FINISH_REASONS`] (trimmed, ASCII lowercased).
pub fn map_finish_reason(raw: &str) -> FinishReason {
    let key = raw.trim();
    FINISH_REASONS
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map_or(FinishReason::Unmapped, |(_, v)| FinishReason::Mapped(*v))
}

/// Maps the finish reasons of OpenAI, Anthropic, TGI, vLLM, Gemini and others
/// onto `stop|length|tool_calls|content_filter|error|other` ([`FINISH_REASONS`]);
/// a value not in the table is `other`, an empty one `None`.
pub fn normalize_finish_reason(raw: &str) -> Option<&'static str> {
    map_finish_reason(raw).normalized()
}

/// The values of `eos_status`.
pub mod eos {
    /// Ended properly.
    pub const EOS: &str = "eos";
    /// Stopped at the output cap.
    pub const LENGTH: &str = "length";
    /// Raw output without an EOS marker, below the cap, not a length stop.
    pub const IMPLICIT_TRUNCATION: &str = "implicit_truncation";
    /// No raw output and no decisive finish reason.
    pub const UNKNOWN: &str = "unknown";
}

/// `eos_status` as defined in docs/metrics.md. `has_eos_marker` is `Some` only
/// for formats that log the raw output.
pub fn eos_status(
    has_eos_marker: Option<bool>,
    finish_reason: Option<&str>,
    completion_tokens: i64,
    max_tokens: Option<i64>,
) -> &'static str {
    let at_cap = max_tokens.is_some_and(|m| completion_tokens >= m);
    let length_stop = finish_reason == Some(finish::LENGTH) || at_cap;
    match has_eos_marker {
        Some(true) => eos::EOS,
        Some(false) if length_stop => eos::LENGTH,
        Some(false) => eos::IMPLICIT_TRUNCATION,
        None => match finish_reason {
            Some(finish::STOP) | Some(finish::TOOL_CALLS) => eos::EOS,
            _ if length_stop => eos::LENGTH,
            _ => eos::UNKNOWN,
        },
    }
}

/// Decode-phase timing: `(tpot_ms, decode_tps, e2e_tps)`, each `None` where
/// its definition does not apply (see docs/metrics.md).
pub fn timing(
    completion_tokens: i64,
    ttft_ms: Option<f64>,
    latency_ms: Option<f64>,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let tpot = match (ttft_ms, latency_ms) {
        (Some(t), Some(l)) if completion_tokens > 1 && l >= t => Some((l - t) / (completion_tokens - 1) as f64),
        _ => None,
    };
    let decode_tps = tpot.filter(|&t| t > 0.0).map(|t| 1000.0 / t);
    let e2e_tps = latency_ms.filter(|&l| l > 0.0).map(|l| completion_tokens as f64 * 1000.0 / l);
    (tpot, decode_tps, e2e_tps)
}

/// A request's own decode timings from its per-token data (docs/metrics.md):
/// `(itl_std_ms, first_token_emitted_ms, last_token_emitted_ms)`. The sample
/// standard deviation of the tokens' `itl_ms` (null ones left out; `None` with
/// fewer than two), and the `emitted_ms` of the first and of the last token
/// (`None` without tokens or when that token has no time).
pub fn token_timing(tokens: &[TokenRecord<'_>]) -> (Option<f64>, Option<f64>, Option<f64>) {
    let itl_std = crate::stats::sample_std_dev(tokens.iter().filter_map(|t| t.itl_ms));
    let emitted = |t: Option<&TokenRecord<'_>>| t.and_then(|t| t.emitted_ms);
    (itl_std, emitted(tokens.first()), emitted(tokens.last()))
}

/// Shannon entropy in bits of the top-k distribution renormalised to sum to 1
/// (a lower-resolution estimate of the full distribution's entropy).
pub fn topk_entropy_bits(logprobs: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = logprobs.iter().copied().filter(|l| l.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = finite.iter().map(|l| (l - max).exp()).sum();
    let h = finite
        .iter()
        .map(|l| {
            let p = (l - max).exp() / z;
            if p > 0.0 {
                -p * p.log2()
            } else {
                0.0
            }
        })
        .sum::<f64>();
    Some(h.max(0.0))
}

/// `logprob(top1) - logprob(top2)`, `None` with fewer than two alternatives.
pub fn top1_margin(logprobs: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = logprobs.iter().copied().filter(|l| l.is_finite()).collect();
    if sorted.len() < 2 {
        return None;
    }
    sorted.sort_by(|a, b| b.total_cmp(a));
    Some(sorted[0] - sorted[1])
}

/// [`topk_entropy_bits`] of a token's logged alternatives.
pub fn alternatives_entropy_bits(alternatives: &[(Cow<'_, str>, f64)]) -> Option<f64> {
    topk_entropy_bits(&alternatives.iter().map(|(_, lp)| *lp).collect::<Vec<_>>())
}

/// [`top1_margin`] of a token's logged alternatives.
pub fn alternatives_top1_margin(alternatives: &[(Cow<'_, str>, f64)]) -> Option<f64> {
    top1_margin(&alternatives.iter().map(|(_, lp)| *lp).collect::<Vec<_>>())
}

/// Problems in a request's per-token data, as `token_issues` codes
/// (docs/metrics.md). The request is always kept; these flag what to distrust.
pub fn token_issues(completion_tokens: i64, tokens: &[TokenRecord<'_>]) -> Vec<&'static str> {
    let mut issues = Vec::new();
    if tokens.is_empty() {
        return issues;
    }
    if tokens.len() as i64 != completion_tokens {
        issues.push("token_count_mismatch");
    }
    let times: Vec<f64> = tokens.iter().filter_map(|t| t.emitted_ms).collect();
    if times.windows(2).any(|w| w[1] < w[0]) {
        issues.push("non_monotonic_token_times");
    }
    if tokens.iter().any(|t| t.itl_ms.is_some_and(|v| v < 0.0)) {
        issues.push("negative_itl");
    }
    // A logged token (it has text) without a usable log-probability.
    if tokens.iter().any(|t| t.token.is_some() && !t.logprob.is_some_and(f64::is_finite)) {
        issues.push("missing_logprob");
    }
    let with_top = tokens.iter().filter(|t| t.top_logprobs.as_ref().is_some_and(|v| !v.is_empty())).count();
    if with_top > 0 && with_top < tokens.len() {
        issues.push("missing_top_logprobs");
    }
    issues
}

/// A text's UTF-8 length in bytes, as an `Int64` column holds it.
fn text_bytes(text: &str) -> i64 {
    i64::try_from(text.len()).unwrap_or(i64::MAX)
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The `date` partition of a UTC timestamp in microseconds: days since the epoch.
pub fn day_of(ts_micros: i64) -> i32 {
    // Any i64 of microseconds is within ±107 million days: the cast cannot truncate.
    ts_micros.div_euclid(MICROS_PER_DAY) as i32
}

/// Settings for deriving columns, shared by every batch of an ingest run.
#[derive(Debug, Clone, Default)]
pub struct DeriveSettings {
    /// Context-length bins.
    pub bins: ContextBins,
    /// EOS markers.
    pub markers: EosMarkers,
    /// Redaction of prompts, outputs, `extra`, token texts and rejected lines.
    pub redaction: Redactor,
    /// Experiment arms of requests that do not log one (`--variants`).
    pub variants: VariantMap,
    /// The user's own fields sent to attribution columns (`--attribute`).
    pub attributes: AttributeMap,
}

/// The derived columns of one request (docs/metrics.md), computed once by
/// [`derive_request`]; `catalog::requests` and `catalog::tokens` store them.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestDerived<'r> {
    /// The logged id, else `<source_file>:<source_line>`.
    pub request_id: Cow<'r, str>,
    /// [`normalize_finish_reason`] of the logged reason.
    pub finish_reason: Option<&'static str>,
    /// The logged reason is not in [`FINISH_REASONS`] (stored as `other`).
    pub finish_reason_unmapped: bool,
    /// [`has_eos_marker`].
    pub has_eos_marker: Option<bool>,
    /// [`eos_status`].
    pub eos_status: &'static str,
    /// The bin of `prompt_tokens` ([`UNKNOWN_BIN`] when it is not logged).
    pub context_bin: &'r str,
    /// Its lower edge; `None` for [`UNKNOWN_BIN`].
    pub context_bin_lo: Option<i64>,
    /// `prompt_tokens + completion_tokens`; `None` when `prompt_tokens` is.
    pub total_tokens: Option<i64>,
    /// [`timing`]: time per output token.
    pub tpot_ms: Option<f64>,
    /// [`timing`]: decode tokens per second.
    pub decode_tps: Option<f64>,
    /// [`timing`]: end-to-end tokens per second.
    pub e2e_tps: Option<f64>,
    /// The prompt as stored (after redaction).
    pub prompt: Option<Cow<'r, str>>,
    /// UTF-8 length of the prompt as logged, in bytes (kept under redaction).
    pub prompt_bytes: Option<i64>,
    /// The output as stored (after redaction; the EOS marker was looked for before).
    pub model_output: Option<Cow<'r, str>>,
    /// UTF-8 length of the output as logged, in bytes (kept under redaction).
    pub model_output_bytes: Option<i64>,
    /// Unknown input keys as stored (after redaction: they may hold any text).
    pub extra: Option<Cow<'r, str>>,
    /// The redaction token texts get (`tokens.token`, top alternatives).
    pub redaction: &'r Redactor,
    /// Per-token rows written for the request; null without per-token data.
    pub output_token_count: Option<i64>,
    /// [`token_timing`]: the standard deviation of the request's inter-token latencies.
    pub itl_std_ms: Option<f64>,
    /// [`token_timing`]: when its first token was emitted.
    pub first_token_emitted_ms: Option<f64>,
    /// [`token_timing`]: when its last token was emitted.
    pub last_token_emitted_ms: Option<f64>,
    /// The text of the request's last per-token row, as `tokens.token` stores it (redacted alike).
    pub last_token: Option<Cow<'r, str>>,
    /// Its logprob.
    pub last_token_logprob: Option<f64>,
    /// Its `is_special` flag.
    pub last_token_is_special: Option<bool>,
    /// The parser's issue codes followed by [`token_issues`].
    pub token_issues: Vec<&'r str>,
    /// [`day_of`] `ts`: the `date` partition.
    pub day: i32,
    /// The logged arm, else the `--variants` mapping's.
    pub variant: Option<&'r str>,
    /// [`attribution`]: the format's attribution with the `--attribute`
    /// mappings applied, its `user_id` redacted like the texts.
    pub attribution: Attribution<'r>,
}

/// Every derived column of `rec`, as docs/metrics.md defines them.
pub fn derive_request<'r>(
    rec: &'r RequestRecord<'_>,
    origin: &LineOrigin<'_>,
    settings: &'r DeriveSettings,
) -> RequestDerived<'r> {
    let request_id = match rec.request_id.as_deref() {
        Some(id) => Cow::Borrowed(id),
        None => Cow::Owned(format!("{}:{}", origin.file, origin.line_no)),
    };
    let mapped = rec.finish_reason_raw.as_deref().map(map_finish_reason);
    let finish_reason = mapped.and_then(FinishReason::normalized);
    let has_eos_marker = has_eos_marker(&settings.markers, rec);
    let (context_bin, context_bin_lo) = settings.bins.bin_of(rec.prompt_tokens);
    let (tpot_ms, decode_tps, e2e_tps) = timing(rec.completion_tokens, rec.ttft_ms, rec.latency_ms);
    let (itl_std_ms, first_token_emitted_ms, last_token_emitted_ms) = token_timing(&rec.tokens);
    let last = rec.tokens.last();
    let mut issues: Vec<&'r str> = rec.token_issues.iter().map(String::as_str).collect();
    issues.extend(token_issues(rec.completion_tokens, &rec.tokens));
    RequestDerived {
        request_id,
        finish_reason,
        finish_reason_unmapped: mapped == Some(FinishReason::Unmapped),
        has_eos_marker,
        eos_status: eos_status(has_eos_marker, finish_reason, rec.completion_tokens, rec.max_tokens),
        context_bin,
        context_bin_lo,
        total_tokens: rec.prompt_tokens.map(|p| p.saturating_add(rec.completion_tokens)),
        tpot_ms,
        decode_tps,
        e2e_tps,
        prompt: settings.redaction.text(rec.prompt.as_deref()),
        prompt_bytes: rec.prompt.as_ref().map(|t| text_bytes(t)),
        model_output: settings.redaction.text(rec.model_output.as_deref()),
        model_output_bytes: rec.model_output.as_ref().map(|t| text_bytes(t)),
        extra: settings.redaction.text(rec.extra.as_deref()),
        redaction: &settings.redaction,
        output_token_count: (!rec.tokens.is_empty()).then_some(rec.tokens.len() as i64),
        itl_std_ms,
        first_token_emitted_ms,
        last_token_emitted_ms,
        last_token: settings.redaction.text(last.and_then(|t| t.token.as_deref())),
        last_token_logprob: last.and_then(|t| t.logprob),
        last_token_is_special: last.and_then(|t| t.is_special),
        token_issues: issues,
        day: day_of(rec.ts_micros),
        variant: rec.variant.as_deref().or_else(|| settings.variants.arm(&rec.model, rec.model_version.as_deref())),
        attribution: attribution(rec, settings),
    }
}

/// A request's attribution as stored: what its format read, each column a
/// `--attribute` mapping names replaced by the mapped field where `extra`
/// holds it, and `user_id` (personal data) under the texts' redaction.
pub fn attribution<'r>(rec: &'r RequestRecord<'_>, settings: &DeriveSettings) -> Attribution<'r> {
    let borrowed = |a: &'r Attribution<'_>| Attribution {
        user_id: a.user_id.as_deref().map(Cow::Borrowed),
        team: a.team.as_deref().map(Cow::Borrowed),
        project: a.project.as_deref().map(Cow::Borrowed),
        environment: a.environment.as_deref().map(Cow::Borrowed),
        tags: a.tags.iter().map(|t| Cow::Borrowed(t.as_ref())).collect(),
        key_alias: a.key_alias.as_deref().map(Cow::Borrowed),
        provider: a.provider.as_deref().map(Cow::Borrowed),
    };
    let mut out = match settings.attributes.apply(&rec.attribution, rec.extra.as_deref()) {
        Some(mapped) => mapped,
        None => borrowed(&rec.attribution),
    };
    out.user_id = match out.user_id.take() {
        Some(Cow::Borrowed(id)) => settings.redaction.text(Some(id)),
        Some(Cow::Owned(id)) => settings.redaction.text(Some(&id)).map(|c| Cow::Owned(c.into_owned())),
        None => None,
    };
    out
}

/// `bad_decode_latency`: a `decode_latency_ms` entry of a profile is not a
/// finite, non-negative number (docs/metrics.md, `profiles`).
pub const BAD_DECODE_LATENCY: &str = "bad_decode_latency";

/// The derived columns of one engine profiling record (docs/metrics.md, `profiles`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileDerived<'r> {
    /// [`decode_ms`].
    pub decode_ms: Option<f64>,
    /// `prefill_latency_ms + decode_ms`.
    pub engine_ms: Option<f64>,
    /// Decode-step jitter: the sample standard deviation of the usable
    /// `decode_latency_ms` entries ([`crate::stats::sample_std_dev`]); `None`
    /// with fewer than two.
    pub decode_step_std_ms: Option<f64>,
    /// The parser's issue codes.
    pub issues: Vec<&'r str>,
    /// [`day_of`] the engine's `ts`, or day 0 (1970-01-01) without one.
    pub day: i32,
}

/// `decode_ms`: the sum of the per-token decode latencies, when every entry
/// is a usable number; `None` otherwise.
pub fn decode_ms(decode_latency_ms: &[Option<f64>]) -> Option<f64> {
    decode_latency_ms.iter().copied().sum()
}

/// Every derived column of a profiling record.
pub fn derive_profile<'r>(rec: &'r ProfileRecord<'_>) -> ProfileDerived<'r> {
    let decode = match (rec.decode_latency_ms.is_empty(), rec.decode_total_ms) {
        (true, Some(total)) => Some(total),
        _ => decode_ms(&rec.decode_latency_ms),
    };
    ProfileDerived {
        decode_ms: decode,
        engine_ms: decode.map(|d| rec.prefill_latency_ms + d),
        decode_step_std_ms: crate::stats::sample_std_dev(rec.decode_latency_ms.iter().flatten().copied()),
        issues: rec.issues.iter().map(String::as_str).collect(),
        day: rec.ts_micros.map(day_of).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_rules_match_in_file_order() {
        let map = VariantMap::from_json(
            r#"[{"arm": "candidate", "model_pattern": "llama-.*-ft-[0-9]+"},
                {"arm": "control", "model": "llama-3.1-8b-instruct", "model_version": "2024-07"},
                {"arm": "v2", "model_version_pattern": "2025-.*"}]"#,
        )
        .unwrap();
        assert_eq!(map.arm("llama-3.1-8b-ft-12", None), Some("candidate"));
        // The pattern covers the whole name.
        assert_eq!(map.arm("llama-3.1-8b-ft-12-old", None), None);
        assert_eq!(map.arm("llama-3.1-8b-instruct", Some("2024-07")), Some("control"));
        assert_eq!(map.arm("llama-3.1-8b-instruct", None), None);
        assert_eq!(map.arm("anything", Some("2025-01")), Some("v2"));
        assert_eq!(VariantMap::default().arm("m", None), None);
    }

    #[test]
    fn variant_rules_are_validated() {
        let err = |json: &str| VariantMap::from_json(json).unwrap_err().to_string();
        assert!(err(r#"[{"arm": "a"}]"#).contains("rule 1: needs model"));
        assert!(err(r#"[{"arm": "a", "model": "m", "model_pattern": "m"}]"#).contains("not both"));
        assert!(err(r#"[{"arm": "a", "model_pattern": "("}]"#).contains("bad model_pattern"));
        assert!(err(r#"[{"arm": " ", "model": "m"}]"#).contains("empty"));
        assert!(err(r#"[{"arm": "a", "modle": "m"}]"#).contains("unknown field"));
    }

    #[test]
    fn logged_variant_wins_over_the_mapping() {
        let settings = DeriveSettings {
            variants: VariantMap::from_json(r#"[{"arm": "mapped", "model": "m"}]"#).unwrap(),
            ..Default::default()
        };
        let origin = LineOrigin { file: "f", format: "canonical", line_no: 1, byte_offset: 0 };
        let mut rec = RequestRecord { model: "m".into(), ..Default::default() };
        assert_eq!(derive_request(&rec, &origin, &settings).variant, Some("mapped"));
        rec.variant = Some("logged".into());
        assert_eq!(derive_request(&rec, &origin, &settings).variant, Some("logged"));
    }

    #[test]
    fn profile_decode_sums_only_usable_entries() {
        let mut rec = ProfileRecord {
            request_id: "r".into(),
            prefill_latency_ms: 45.0,
            decode_latency_ms: vec![Some(12.5), Some(10.0), Some(10.5), Some(11.0)],
            ..Default::default()
        };
        let d = derive_profile(&rec);
        assert_eq!((d.decode_ms, d.engine_ms, d.day), (Some(44.0), Some(89.0), 0));
        // Steps 12.5, 10, 10.5, 11: mean 11, squares 2.25 + 1 + 0.25 + 0 = 3.5 over 3.
        assert_eq!(d.decode_step_std_ms, Some((3.5f64 / 3.0).sqrt()));
        rec.decode_latency_ms.push(None);
        rec.ts_micros = Some(1_717_243_200_250_000);
        let d = derive_profile(&rec);
        assert_eq!((d.decode_ms, d.engine_ms), (None, None));
        assert_eq!(d.decode_step_std_ms, Some((3.5f64 / 3.0).sqrt()), "an unusable entry is left out");
        assert_eq!(d.day, 19_875); // 2024-06-01
        assert_eq!(decode_ms(&[]), Some(0.0));
        // An engine that logs the decode time as one figure (vLLM's metrics).
        let rec = ProfileRecord { decode_latency_ms: Vec::new(), decode_total_ms: Some(500.0), ..rec };
        let d = derive_profile(&rec);
        assert_eq!((d.decode_ms, d.engine_ms, d.decode_step_std_ms), (Some(500.0), Some(545.0), None));
    }

    #[test]
    fn default_bins_edges_and_labels() {
        let b = ContextBins::default();
        assert_eq!(b.bin(0), ("0-1K", 0));
        assert_eq!(b.bin(1023), ("0-1K", 0));
        assert_eq!(b.bin(1024), ("1K-2K", 1024));
        assert_eq!(b.bin(131071), ("64K-128K", 65536));
        assert_eq!(b.bin(131072), ("128K+", 131072));
        assert_eq!(b.bin(10_000_000), ("128K+", 131072));
        assert_eq!(b.labels().len(), 9);
    }

    #[test]
    fn an_unlogged_prompt_length_is_the_unknown_bin_without_an_edge() {
        let b = ContextBins::default();
        assert_eq!(b.bin_of(Some(1024)), ("1K-2K", Some(1024)));
        assert_eq!(b.bin_of(None), ("unknown", None));
        let rec =
            RequestRecord { completion_tokens: 7, finish_reason_raw: Some("eos_token".into()), ..Default::default() };
        let origin = LineOrigin { file: "f", format: "tgi", line_no: 1, byte_offset: 0 };
        let settings = DeriveSettings::default();
        let d = derive_request(&rec, &origin, &settings);
        assert_eq!((d.context_bin, d.context_bin_lo, d.total_tokens), ("unknown", None, None));
        assert_eq!(d.eos_status, "eos", "the EOS analysis needs no prompt length");
    }

    #[test]
    fn bins_parse_and_validate() {
        let b = ContextBins::parse("0,512,4K").unwrap();
        assert_eq!(b.labels(), &["0-512", "512-4K", "4K+"]);
        assert_eq!(b.bin(512), ("512-4K", 512));
        assert!(ContextBins::parse("1,2").is_err());
        assert!(ContextBins::parse("0,4K,2K").is_err());
        assert!(ContextBins::parse("0,x").is_err());
    }

    #[test]
    fn eos_marker_after_trailing_whitespace() {
        let m = EosMarkers::default();
        assert!(m.ends_with_marker("any", "The end.<|im_end|>\n  "));
        assert!(m.ends_with_marker("any", "fin</s>"));
        assert!(m.ends_with_marker("any", "x<｜end▁of▁sentence｜>"));
        assert!(!m.ends_with_marker("any", "</s> and more"));
        assert!(!m.ends_with_marker("any", ""));
    }

    #[test]
    fn marker_tokens_trimmed_and_per_model() {
        let mut m = EosMarkers::default();
        m.per_model.insert("m1".into(), vec!["<eom>".into(), "".into(), "终".into()]);
        // The definition, without the first-byte shortcut or the ASCII trim.
        let reference = |model: Option<&str>, token: &str| m.for_model(model).any(|x| x == token.trim());
        let tokens = [
            "</s>",
            " </s>",
            "</s>\n",
            "\u{3000}</s>\u{3000}",
            "</s",
            "<",
            "x",
            "",
            "  ",
            "<|eot_id|>",
            "[EOS]",
            "<eom>",
            " <eom> ",
            "终",
            " 终",
            "é",
            "<|end▁of▁sentence|>",
            "<｜end▁of▁sentence｜>",
        ];
        let matcher = m.matcher();
        for model in [None, Some("m1"), Some("m2")] {
            for t in tokens {
                assert_eq!(matcher.is_marker(model, t), reference(model, t), "{model:?} {t:?}");
            }
        }
        // By hand: a model's own markers only with that model; an empty
        // marker matches a token of whitespace only.
        assert!(matcher.is_marker(Some("m1"), " <eom> ") && !matcher.is_marker(None, "<eom>"));
        assert!(matcher.is_marker(Some("m1"), "  ") && !matcher.is_marker(Some("m2"), "  "));
        assert!(matcher.is_marker(None, "\u{3000}</s>\u{3000}") && !matcher.is_marker(None, "</s"));
    }

    #[test]
    fn eos_status_definition() {
        use eos::*;
        assert_eq!(eos_status(Some(true), Some("length"), 10, Some(10)), EOS);
        assert_eq!(eos_status(Some(false), Some("length"), 5, Some(10)), LENGTH);
        assert_eq!(eos_status(Some(false), Some("stop"), 10, Some(10)), LENGTH);
        assert_eq!(eos_status(Some(false), Some("stop"), 9, Some(10)), IMPLICIT_TRUNCATION);
        assert_eq!(eos_status(Some(false), None, 9, None), IMPLICIT_TRUNCATION);
        assert_eq!(eos_status(None, Some("stop"), 9, None), EOS);
        assert_eq!(eos_status(None, Some("length"), 9, None), LENGTH);
        assert_eq!(eos_status(None, None, 10, Some(10)), LENGTH);
        assert_eq!(eos_status(None, Some("error"), 3, None), UNKNOWN);
        assert_eq!(eos_status(None, None, 3, None), UNKNOWN);
    }

    #[test]
    fn finish_reasons_normalise() {
        // The values issue 42 names, each by hand.
        for (raw, want) in [
            ("stop", Some("stop")),
            ("length", Some("length")),
            ("tool_calls", Some("tool_calls")),
            ("tool_call", Some("tool_calls")),
            ("tool-calls", Some("tool_calls")),
            ("function_call", Some("tool_calls")),
            ("content_filter", Some("content_filter")),
            ("end_turn", Some("stop")),
            ("max_tokens", Some("length")),
            ("stop_sequence", Some("stop")),
            ("eos_token", Some("stop")),
            ("STOP", Some("stop")),
            ("MAX_TOKENS", Some("length")),
            ("SAFETY", Some("content_filter")),
            (" Tool_Use ", Some("tool_calls")),
            // Bedrock (Converse, Titan) and Cohere.
            ("guardrail_intervened", Some("content_filter")),
            ("CONTENT_FILTERED", Some("content_filter")),
            ("FINISH", Some("stop")),
            ("COMPLETE", Some("stop")),
            ("TOOL_CALL", Some("tool_calls")),
            ("ERROR_TOXIC", Some("content_filter")),
            ("ERROR_LIMIT", Some("length")),
            ("USER_CANCEL", Some("error")),
            ("", None),
            ("  ", None),
        ] {
            assert_eq!(map_finish_reason(raw), FinishReason::Mapped(want), "{raw:?}");
            assert_eq!(normalize_finish_reason(raw), want, "{raw:?}");
        }
        assert_eq!(map_finish_reason("weird"), FinishReason::Unmapped);
        assert_eq!(normalize_finish_reason("weird"), Some("other"));
        assert_eq!(map_finish_reason("other"), FinishReason::Mapped(Some("other")), "a known other is not counted");
        // Every key is lowercase and trimmed, and listed once.
        for (i, (k, _)) in FINISH_REASONS.iter().enumerate() {
            assert_eq!(*k, k.trim().to_ascii_lowercase(), "{k:?}");
            assert!(FINISH_REASONS[..i].iter().all(|(o, _)| o != k), "{k:?} listed twice");
        }
    }

    #[test]
    fn timing_definitions() {
        assert_eq!(timing(11, Some(100.0), Some(600.0)), (Some(50.0), Some(20.0), Some(11.0 * 1000.0 / 600.0)));
        assert_eq!(timing(1, Some(100.0), Some(600.0)), (None, None, Some(1000.0 / 600.0)));
        assert_eq!(timing(5, None, Some(0.0)), (None, None, None));
        assert_eq!(timing(5, Some(700.0), Some(600.0)).0, None);
    }

    #[test]
    fn token_timing_definitions() {
        let tok = |t: Option<f64>, itl: Option<f64>| TokenRecord { emitted_ms: t, itl_ms: itl, ..Default::default() };
        // Times 100, 110, 130, 160: ITLs (null), 10, 20, 30 -> sample std 10.
        let tokens = [
            tok(Some(100.0), None),
            tok(Some(110.0), Some(10.0)),
            tok(Some(130.0), Some(20.0)),
            tok(Some(160.0), Some(30.0)),
        ];
        assert_eq!(token_timing(&tokens), (Some(10.0), Some(100.0), Some(160.0)));
        // One ITL: no deviation; the last token without a time has none.
        assert_eq!(token_timing(&[tok(Some(5.0), Some(5.0)), tok(None, None)]), (None, Some(5.0), None));
        assert_eq!(token_timing(&[]), (None, None, None));
    }

    #[test]
    fn token_issue_codes() {
        let tok = |lp: Option<f64>, t: Option<f64>, top: bool| TokenRecord {
            token: Some("x".into()),
            logprob: lp,
            emitted_ms: t,
            top_logprobs: top.then(|| vec![("a".into(), -0.1)]),
            ..Default::default()
        };
        assert!(token_issues(2, &[tok(Some(-0.1), Some(10.0), true), tok(Some(-0.2), Some(20.0), true)]).is_empty());
        assert!(token_issues(5, &[]).is_empty());
        assert_eq!(
            token_issues(3, &[tok(Some(-0.1), Some(30.0), true), tok(None, Some(20.0), false)]),
            vec!["token_count_mismatch", "non_monotonic_token_times", "missing_logprob", "missing_top_logprobs"]
        );
    }

    #[test]
    fn entropy_and_margin() {
        let ln_half = 0.5f64.ln();
        assert!((topk_entropy_bits(&[ln_half, ln_half]).unwrap() - 1.0).abs() < 1e-12);
        // Unnormalised top-k: 0.2 and 0.2 renormalise to 0.5/0.5.
        assert!((topk_entropy_bits(&[0.2f64.ln(), 0.2f64.ln()]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(topk_entropy_bits(&[0.0]), Some(0.0));
        assert_eq!(topk_entropy_bits(&[]), None);
        assert!((top1_margin(&[-0.1, -2.1, -3.0]).unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(top1_margin(&[-0.1]), None);
    }
}
