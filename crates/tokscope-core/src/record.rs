//! A parsed line before it becomes Arrow columns. The request formats parse a
//! line into a [`RequestRecord`] (the engine profiling format into a
//! [`ProfileRecord`]); [`crate::derive`] computes the derived columns and
//! [`crate::catalog`] declares how both become Arrow. Strings borrow from the
//! input line where they need no unescaping.

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
    /// Experiment arm as logged (`variant`, `arm` or `experiment`).
    pub variant: Option<Cow<'a, str>>,
    /// HTTP status.
    pub status: Option<i32>,
    /// All prompt tokens, cached ones included (see docs/metrics.md for
    /// Anthropic); `None` when the log does not say (a TGI `/generate`
    /// response without `prefill`): the row is kept, its context bin `unknown`.
    pub prompt_tokens: Option<i64>,
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
    /// The request's cost as the gateway or tracing tool logged it, in USD
    /// (LiteLLM, Langfuse, Helicone); `None` when not logged.
    pub logged_cost_usd: Option<f64>,
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
    /// Problems found in the per-token data (the request is kept; see docs/metrics.md).
    pub token_issues: Vec<String>,
    /// Who the request is for and who served it, as the log names them.
    pub attribution: Attribution<'a>,
}

/// Who a request is attributed to (docs/metrics.md, "Attribution"): the
/// end user, the team, project and environment it ran for, its tags, the
/// API key's name (never the key), and the provider that served it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Attribution<'a> {
    /// End user (personal data: redacted by `--redact`).
    pub user_id: Option<Cow<'a, str>>,
    /// Team.
    pub team: Option<Cow<'a, str>>,
    /// Project, application or service.
    pub project: Option<Cow<'a, str>>,
    /// Deployment environment (prod, staging, ...).
    pub environment: Option<Cow<'a, str>>,
    /// Tags as written (`key:value` kept whole), in log order.
    pub tags: Vec<Cow<'a, str>>,
    /// The name of the API key (its alias; never the key or its hash).
    pub key_alias: Option<Cow<'a, str>>,
    /// Who served the request: an API provider, or the engine of a self-hosted model.
    pub provider: Option<Cow<'a, str>>,
}

impl Attribution<'_> {
    /// The tags as string slices (a list column's value).
    pub fn tag_refs(&self) -> Vec<&str> {
        self.tags.iter().map(|t| t.as_ref()).collect()
    }

    /// The same attribution with every string copied.
    pub fn into_owned(self) -> Attribution<'static> {
        Attribution {
            user_id: owned_opt(self.user_id),
            team: owned_opt(self.team),
            project: owned_opt(self.project),
            environment: owned_opt(self.environment),
            tags: self.tags.into_iter().map(owned).collect(),
            key_alias: owned_opt(self.key_alias),
            provider: owned_opt(self.provider),
        }
    }
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

fn owned<'b>(c: Cow<'_, str>) -> Cow<'b, str> {
    Cow::Owned(c.into_owned())
}

fn owned_opt<'b>(c: Option<Cow<'_, str>>) -> Option<Cow<'b, str>> {
    c.map(owned)
}

impl RequestRecord<'_> {
    /// The same record with every borrowed string copied, detached from the input line.
    pub fn into_owned(self) -> RequestRecord<'static> {
        RequestRecord {
            request_id: owned_opt(self.request_id),
            ts_micros: self.ts_micros,
            session_id: owned_opt(self.session_id),
            model: owned(self.model),
            model_version: owned_opt(self.model_version),
            variant: owned_opt(self.variant),
            status: self.status,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            cached_tokens: self.cached_tokens,
            cache_write_tokens: self.cache_write_tokens,
            reasoning_tokens: self.reasoning_tokens,
            max_tokens: self.max_tokens,
            ttft_ms: self.ttft_ms,
            latency_ms: self.latency_ms,
            prefill_latency_ms: self.prefill_latency_ms,
            kv_cache_hit_ratio: self.kv_cache_hit_ratio,
            logged_cost_usd: self.logged_cost_usd,
            finish_reason_raw: owned_opt(self.finish_reason_raw),
            prompt: owned_opt(self.prompt),
            model_output: owned_opt(self.model_output),
            output_is_raw: self.output_is_raw,
            last_token_special: self.last_token_special,
            tokens: self.tokens.into_iter().map(TokenRecord::into_owned).collect(),
            extra: self.extra,
            token_issues: self.token_issues,
            attribution: self.attribution.into_owned(),
        }
    }
}

impl TokenRecord<'_> {
    /// The same token with its strings copied.
    pub fn into_owned(self) -> TokenRecord<'static> {
        TokenRecord {
            token: owned_opt(self.token),
            token_bytes: self.token_bytes,
            logprob: self.logprob,
            top_logprobs: self.top_logprobs.map(|v| v.into_iter().map(|(t, l)| (owned(t), l)).collect()),
            is_special: self.is_special,
            emitted_ms: self.emitted_ms,
            itl_ms: self.itl_ms,
        }
    }
}

/// One engine profiling record (the `profile` format): the serving engine's
/// own timing of one request, joined to the gateway's `requests` row by
/// `request_id` in SQL.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProfileRecord<'a> {
    /// Join key to `requests.request_id`.
    pub request_id: Cow<'a, str>,
    /// When the engine received the request, on the engine's clock
    /// (microseconds since the epoch); `None` when not logged.
    pub ts_micros: Option<i64>,
    /// Serving process or replica.
    pub engine_id: Option<Cow<'a, str>>,
    /// GPU index.
    pub gpu_id: Option<i64>,
    /// Model as the engine names it.
    pub model: Option<Cow<'a, str>>,
    /// Forward passes that touched the request (prefill chunks and decode steps).
    pub inference_steps: Option<i64>,
    /// Share of the prompt served from the KV / prefix cache (0..=1).
    pub kv_cache_hit_ratio: Option<f64>,
    /// Mean CUDA kernel time over the request's steps, microseconds.
    pub cuda_kernel_avg_us: Option<f64>,
    /// Time the request waited in the engine's queue before its first
    /// scheduled step, milliseconds; `None` when not logged.
    pub queue_ms: Option<f64>,
    /// Time spent in prefill.
    pub prefill_latency_ms: f64,
    /// One entry per generated token; `None` for an entry that is not a
    /// finite, non-negative number (flagged in `issues`).
    pub decode_latency_ms: Vec<Option<f64>>,
    /// The decode time as one figure, for an engine that logs no per-token
    /// entries (vLLM's request metrics): used when `decode_latency_ms` is empty.
    pub decode_total_ms: Option<f64>,
    /// Tokens generated, for an engine that logs no per-token entries; else
    /// the number of entries.
    pub decode_tokens: Option<i64>,
    /// Unknown keys of the input object, as a compact JSON object.
    pub extra: Option<String>,
    /// Problems found in the record (it is kept; see docs/metrics.md).
    pub issues: Vec<String>,
}

impl ProfileRecord<'_> {
    /// The same record with every borrowed string copied.
    pub fn into_owned(self) -> ProfileRecord<'static> {
        ProfileRecord {
            request_id: owned(self.request_id),
            ts_micros: self.ts_micros,
            engine_id: owned_opt(self.engine_id),
            gpu_id: self.gpu_id,
            model: owned_opt(self.model),
            inference_steps: self.inference_steps,
            kv_cache_hit_ratio: self.kv_cache_hit_ratio,
            cuda_kernel_avg_us: self.cuda_kernel_avg_us,
            queue_ms: self.queue_ms,
            prefill_latency_ms: self.prefill_latency_ms,
            decode_latency_ms: self.decode_latency_ms,
            decode_total_ms: self.decode_total_ms,
            decode_tokens: self.decode_tokens,
            extra: self.extra,
            issues: self.issues,
        }
    }
}

/// Where a line came from.
#[derive(Debug, Clone, Copy)]
pub struct LineOrigin<'a> {
    /// Input location.
    pub file: &'a str,
    /// Format name.
    pub format: &'a str,
    /// 1-based line number.
    pub line_no: u64,
    /// Byte offset of the line in the decompressed input.
    pub byte_offset: u64,
}
