//! `tokens`: one row per output token, from the gateway's per-token data
//! (`source = 'gateway'`) or from an engine profile's per-token decode
//! latencies (`source = 'engine'`); the key includes `source`, so both sides
//! of one request are kept.

use super::columns::{table, Alternatives};
use crate::derive::{self, RequestDerived};
use crate::record::{ProfileRecord, RequestRecord, TokenRecord};
use crate::redact::{Redactor, DROP_TEXT};

crate::named_enum! {
    /// Who measured a token row.
    pub enum TokenSource as "token source" {
        /// The gateway's access log (per-token logprobs, emission times).
        Gateway = "gateway",
        /// The serving engine's profiling record (`profile` format).
        Engine = "engine",
    }
}

/// The request-level columns a token row repeats.
#[derive(Debug, Clone, Copy)]
pub struct TokenOwner<'r> {
    /// The request.
    pub request_id: &'r str,
    /// Its model, when known.
    pub model: Option<&'r str>,
    /// Its context bin (known for gateway rows only: the bin is the gateway request's).
    pub context_bin: Option<&'r str>,
    /// Who measured the tokens.
    pub source: TokenSource,
    /// How token texts are stored.
    pub redaction: &'r Redactor,
}

impl<'r> TokenOwner<'r> {
    /// The tokens of a gateway request.
    pub fn of_request(r: &'r RequestRecord<'_>, d: &'r RequestDerived<'_>) -> Self {
        TokenOwner {
            request_id: d.request_id.as_ref(),
            model: Some(r.model.as_ref()),
            context_bin: Some(d.context_bin),
            source: TokenSource::Gateway,
            redaction: d.redaction,
        }
    }

    /// The decode steps of an engine profile.
    pub fn of_profile(p: &'r ProfileRecord<'_>) -> Self {
        TokenOwner {
            request_id: p.request_id.as_ref(),
            model: p.model.as_deref(),
            context_bin: None,
            source: TokenSource::Engine,
            redaction: &DROP_TEXT,
        }
    }
}

table! {
    /// One row per output token: the gateway's per-token data, or an engine profile's decode steps.
    pub table TokensBuilder(o: &TokenOwner<'_>, position: usize, t: &TokenRecord<'_>) {
        name: "tokens",
        key: ["request_id", "source", "position"],
        partition: Date,
        written_by: Ingest,
    } {
        /// Joins requests.request_id.
        request_id: Utf8 [NoStatistics] = o.request_id,
        /// Model (engine rows: the profile's model, null when it logs none).
        model: Utf8 nullable [Dictionary] = o.model,
        /// The request's context bin (null on engine rows: join requests for it).
        context_bin: Utf8 nullable [Dictionary] = o.context_bin,
        /// gateway (the access log's per-token data) or engine (a profile's decode_latency_ms).
        source: Utf8 [Dictionary] = o.source.name(),
        /// 0-based output position.
        position: Int32 = i32::try_from(position).unwrap_or(i32::MAX),
        /// Token text (its keyed hash under `--redact hash`, null under `drop`).
        token: Utf8 nullable = o.redaction.text(t.token.as_deref()).as_deref(),
        /// UTF-8 bytes when logged (null under redaction).
        token_bytes: Binary nullable = t.token_bytes.as_deref().filter(|_| o.redaction.keeps_text()),
        /// Natural-log probability of the token.
        logprob: Float64 nullable [Incompressible] = t.logprob,
        /// Top alternatives.
        top_logprobs: TopLogprobs nullable [Incompressible] = t.top_logprobs.as_deref().map(|alternatives| Alternatives { alternatives, redaction: o.redaction }),
        /// Entropy of the renormalised top-k distribution, bits.
        entropy_bits: Float64 nullable [Incompressible] = t.top_logprobs.as_deref().and_then(derive::alternatives_entropy_bits),
        /// logprob(top1) - logprob(top2).
        top1_margin: Float64 nullable [Incompressible] = t.top_logprobs.as_deref().and_then(derive::alternatives_top1_margin),
        /// Special token (TGI).
        is_special: Boolean nullable = t.is_special,
        /// Emission time since arrival.
        emitted_ms: Float64 nullable = t.emitted_ms,
        /// Inter-token latency (engine rows: the decode step's latency).
        itl_ms: Float64 nullable = t.itl_ms,
    }
}
