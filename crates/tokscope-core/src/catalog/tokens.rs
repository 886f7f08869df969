//! `tokens`: one row per output token of requests that logged per-token data.

use super::columns::{table, Alternatives};
use crate::derive::{self, RequestDerived};
use crate::record::{RequestRecord, TokenRecord};

table! {
    /// One row per output token of a request that logged per-token data.
    pub table TokensBuilder(r: &RequestRecord<'_>, d: &RequestDerived<'_>, position: usize, t: &TokenRecord<'_>) {
        name: "tokens",
        key: ["request_id", "position"],
        partition: Date,
        written_by: "tokscope ingest",
    } {
        /// Joins requests.request_id.
        request_id: Utf8 [NoStatistics] = d.request_id.as_ref(),
        /// Model.
        model: Utf8 [Dictionary] = r.model.as_ref(),
        /// The request's context bin.
        context_bin: Utf8 [Dictionary] = d.context_bin,
        /// 0-based output position.
        position: Int32 = i32::try_from(position).unwrap_or(i32::MAX),
        /// Token text (its keyed hash under `--redact hash`, null under `drop`).
        token: Utf8 nullable = d.redaction.text(t.token.as_deref()).as_deref(),
        /// UTF-8 bytes when logged (null under redaction).
        token_bytes: Binary nullable = t.token_bytes.as_deref().filter(|_| d.redaction.keeps_text()),
        /// Natural-log probability of the token.
        logprob: Float64 nullable = t.logprob,
        /// Top alternatives.
        top_logprobs: TopLogprobs nullable = t.top_logprobs.as_deref().map(|alternatives| Alternatives { alternatives, redaction: d.redaction }),
        /// Entropy of the renormalised top-k distribution, bits.
        entropy_bits: Float64 nullable = t.top_logprobs.as_deref().and_then(derive::alternatives_entropy_bits),
        /// logprob(top1) - logprob(top2).
        top1_margin: Float64 nullable = t.top_logprobs.as_deref().and_then(derive::alternatives_top1_margin),
        /// Special token (TGI).
        is_special: Boolean nullable = t.is_special,
        /// Emission time since arrival.
        emitted_ms: Float64 nullable = t.emitted_ms,
        /// Inter-token latency.
        itl_ms: Float64 nullable = t.itl_ms,
    }
}
