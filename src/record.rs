//! A parsed request before it becomes Arrow columns. Every input format parses
//! a line into a [`RequestRecord`]; [`crate::ingest::batch`] is the one place
//! that turns records into `RecordBatch`es. Strings borrow from the input line
//! where they need no unescaping.

use std::borrow::Cow;

/// One request, in canonical units (tokens, milliseconds, UTC microseconds).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RequestRecord<'a> {
    /// Request id from the log; `None` makes ingest derive one from file and line.
    pub request_id: Option<Cow<'a, str>>,
    /// Arrival time, microseconds since the Unix epoch, UTC.
    pub ts_micros: i64,
    /// Conversation / session id.
    pub session_id: Option<Cow<'a, str>>,
    /// Model name as logged.
    pub model: Cow<'a, str>,
    /// Model version or snapshot, when logged apart from the name.
    pub model_version: Option<Cow<'a, str>>,
    /// HTTP status.
    pub status: Option<i32>,
    /// All prompt tokens, cached ones included (see docs/metrics.md for Anthropic).
    pub prompt_tokens: i64,
    /// Generated tokens, reasoning tokens included.
    pub completion_tokens: i64,
    /// Prompt tokens served from a prompt cache (a subset of `prompt_tokens`).
    pub cached_tokens: i64,
    /// Prompt tokens written to a prompt cache (a subset of `prompt_tokens`).
    pub cache_write_tokens: i64,
    /// Reasoning ("thinking") tokens, a subset of `completion_tokens`.
    pub reasoning_tokens: Option<i64>,
    /// The request's output cap.
    pub max_tokens: Option<i64>,
    /// Time to first token.
    pub ttft_ms: Option<f64>,
    /// End-to-end latency.
    pub latency_ms: Option<f64>,
    /// Prefill time, when the server logs it.
    pub prefill_latency_ms: Option<f64>,
    /// Share of the prompt served from the KV cache (0..=1).
    pub kv_cache_hit_ratio: Option<f64>,
    /// Finish reason exactly as logged.
    pub finish_reason_raw: Option<Cow<'a, str>>,
    /// The prompt: text, or chat messages kept as compact JSON.
    pub prompt: Option<Cow<'a, str>>,
    /// The model's output.
    pub model_output: Option<Cow<'a, str>>,
    /// True when `model_output` is the raw decoder output with special tokens
    /// kept (full-token logging); only then can an EOS marker be looked for.
    pub output_is_raw: bool,
    /// For formats that log tokens with a `special` flag (TGI): whether the
    /// last token is a special token. `None` elsewhere.
    pub last_token_special: Option<bool>,
    /// Per-token data, in output order; empty when the log has none.
    pub tokens: Vec<TokenRecord<'a>>,
    /// Unknown keys of the input object, as a compact JSON object.
    pub extra: Option<String>,
}

/// One output token with whatever per-token data the log carries.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TokenRecord<'a> {
    /// Token text.
    pub token: Option<Cow<'a, str>>,
    /// UTF-8 bytes of the token, when the log gives them (OpenAI `bytes`).
    pub token_bytes: Option<Vec<u8>>,
    /// Natural-log probability of the sampled token.
    pub logprob: Option<f64>,
    /// Top alternatives: (token, natural-log probability).
    pub top_logprobs: Option<Vec<(Cow<'a, str>, f64)>>,
    /// Whether the token is a special token (TGI).
    pub is_special: Option<bool>,
    /// Emission time, milliseconds since the request arrived.
    pub emitted_ms: Option<f64>,
    /// Inter-token latency: time since the previous token (or arrival, for the first).
    pub itl_ms: Option<f64>,
}
