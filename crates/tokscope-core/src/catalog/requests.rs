//! `requests`: one row per logged request. Parsed columns come from the
//! [`RequestRecord`]; derived ones from [`RequestDerived`] (docs/metrics.md).
//!
//! Adding a column: a field in `RequestRecord` (or `RequestDerived`, with its
//! definition in `derive.rs`) and one line below.

use super::columns::table;
use crate::derive::RequestDerived;
use crate::record::{LineOrigin, RequestRecord};

table! {
    /// One row per logged request; derived columns are computed once, at ingest.
    pub table RequestsBuilder(r: &RequestRecord<'_>, d: &RequestDerived<'_>, o: &LineOrigin<'_>) {
        name: "requests",
        key: ["request_id"],
        partition: Date,
        written_by: Ingest,
    } {
        /// Request id as logged; else `<source_file>:<source_line>`.
        request_id: Utf8 [NoStatistics] = d.request_id.as_ref(),
        /// Arrival time, UTC.
        ts: TimestampUtc = r.ts_micros,
        /// Session / conversation id.
        session_id: Utf8 nullable = r.session_id.as_deref(),
        /// Input format (`tokscope formats` lists them).
        source_format: Utf8 [Dictionary] = o.format,
        /// Input path or object URL.
        source_file: Utf8 [Dictionary] = o.file,
        /// 1-based line number in the decompressed input.
        source_line: UInt64 = o.line_no,
        /// Model name as logged (traces: --model or `<format>:<file stem>`).
        model: Utf8 [Dictionary] = r.model.as_ref(),
        /// Model version / snapshot (OpenAI: system_fingerprint).
        model_version: Utf8 nullable [Dictionary] = r.model_version.as_deref(),
        /// Experiment arm: the logged `variant` / `arm` / `experiment`, else the --variants mapping; null when neither names one.
        variant: Utf8 nullable [Dictionary] = d.variant,
        /// End user the request ran for (docs/metrics.md, "Attribution"); keyed hash under `--redact hash`, null under `drop`.
        user_id: Utf8 nullable [Dictionary] = d.attribution.user_id.as_deref(),
        /// Team the request ran for.
        team: Utf8 nullable [Dictionary] = d.attribution.team.as_deref(),
        /// Project, application or service.
        project: Utf8 nullable [Dictionary] = d.attribution.project.as_deref(),
        /// Deployment environment (prod, staging, ...).
        environment: Utf8 nullable [Dictionary] = d.attribution.environment.as_deref(),
        /// Tags as logged (`key:value` kept whole); null when none.
        tags: Utf8List nullable = Some(d.attribution.tag_refs().as_slice()),
        /// Name of the API key (never the key or its hash).
        key_alias: Utf8 nullable [Dictionary] = d.attribution.key_alias.as_deref(),
        /// Who served the request: the API provider, or the engine of a self-hosted model.
        provider: Utf8 nullable [Dictionary] = d.attribution.provider.as_deref(),
        /// HTTP status.
        status: Int32 nullable [Dictionary] = r.status,
        /// Whole prompt, cached tokens included (docs/metrics.md); null when the log does not give it.
        prompt_tokens: Int64 nullable = r.prompt_tokens,
        /// Generated tokens, reasoning included.
        completion_tokens: Int64 = r.completion_tokens,
        /// Prompt tokens read from a prompt cache; 0 when absent.
        cached_tokens: Int64 = r.cached_tokens,
        /// Prompt tokens written to a prompt cache; 0 when absent.
        cache_write_tokens: Int64 = r.cache_write_tokens,
        /// Reasoning tokens (subset of completion_tokens).
        reasoning_tokens: Int64 nullable = r.reasoning_tokens,
        /// prompt_tokens + completion_tokens; null when prompt_tokens is.
        total_tokens: Int64 nullable = d.total_tokens,
        /// Output cap of the request.
        max_tokens: Int64 nullable [Dictionary] = r.max_tokens,
        /// Time to first token.
        ttft_ms: Float64 nullable = r.ttft_ms,
        /// End-to-end latency.
        latency_ms: Float64 nullable = r.latency_ms,
        /// Prefill time when logged.
        prefill_latency_ms: Float64 nullable = r.prefill_latency_ms,
        /// (latency_ms - ttft_ms) / (completion_tokens - 1).
        tpot_ms: Float64 nullable [Incompressible] = d.tpot_ms,
        /// 1000 / tpot_ms.
        decode_tps: Float64 nullable [Incompressible] = d.decode_tps,
        /// completion_tokens * 1000 / latency_ms.
        e2e_tps: Float64 nullable [Incompressible] = d.e2e_tps,
        /// Share of the prompt served from the KV cache, when logged.
        kv_cache_hit_ratio: Float64 nullable = r.kv_cache_hit_ratio,
        /// Cost the gateway or tracing tool logged, USD (LiteLLM, Langfuse, Helicone); null when not logged.
        logged_cost_usd: Float64 nullable = r.logged_cost_usd,
        /// stop|length|tool_calls|content_filter|error|other.
        finish_reason: Utf8 nullable [Dictionary] = d.finish_reason,
        /// Finish reason exactly as logged.
        finish_reason_raw: Utf8 nullable [Dictionary] = r.finish_reason_raw.as_deref(),
        /// Raw output ends with an EOS marker; null without raw output.
        has_eos_marker: Boolean nullable = d.has_eos_marker,
        /// eos|length|implicit_truncation|unknown.
        eos_status: Utf8 [Dictionary] = d.eos_status,
        /// Context-length bin label of prompt_tokens; `unknown` when prompt_tokens is null.
        context_bin: Utf8 [Dictionary] = d.context_bin,
        /// Lower edge of context_bin; null for `unknown`.
        context_bin_lo: Int64 nullable [Dictionary] = d.context_bin_lo,
        /// Prompt text, or chat messages as JSON (keyed hash under `--redact hash`, null under `drop`).
        prompt: Utf8 nullable [NoStatistics] = d.prompt.as_deref(),
        /// UTF-8 length of the prompt as logged, bytes (kept under redaction).
        prompt_bytes: Int64 nullable = d.prompt_bytes,
        /// Output text (raw with special tokens for canonical/TGI; redacted like prompt).
        model_output: Utf8 nullable [NoStatistics] = d.model_output.as_deref(),
        /// UTF-8 length of the output as logged, bytes (kept under redaction).
        model_output_bytes: Int64 nullable = d.model_output_bytes,
        /// Number of per-token rows in `tokens` for this request.
        output_token_count: Int64 nullable = d.output_token_count,
        /// Sample standard deviation of the request's per-token itl_ms; null with fewer than two.
        itl_std_ms: Float64 nullable [Incompressible] = d.itl_std_ms,
        /// emitted_ms of the request's first per-token row; null without one.
        first_token_emitted_ms: Float64 nullable = d.first_token_emitted_ms,
        /// emitted_ms of its last per-token row; null without one.
        last_token_emitted_ms: Float64 nullable = d.last_token_emitted_ms,
        /// Text of its last per-token row, as tokens.token stores it (redacted alike); null without one.
        last_token: Utf8 nullable [Dictionary] = d.last_token.as_deref(),
        /// logprob of its last per-token row.
        last_token_logprob: Float64 nullable [Incompressible] = d.last_token_logprob,
        /// is_special of its last per-token row (TGI).
        last_token_is_special: Boolean nullable = d.last_token_is_special,
        /// Problems in the per-token data (codes in docs/metrics.md); null when none. The request is always kept.
        token_issues: Utf8List nullable = Some(d.token_issues.as_slice()),
        /// Unknown input keys as a JSON object (redacted like prompt).
        extra: Utf8 nullable [NoStatistics] = d.extra.as_deref(),
    }
}
