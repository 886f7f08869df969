//! `profiles`: one row per engine profiling record (the `profile` format).
//! Rows are joined to `requests` by `request_id` in SQL (the `gateway_engine`
//! job), so the two logs can be ingested in any order and `requests` rows are
//! never rewritten; the per-token decode latencies go to `tokens` with
//! `source = 'engine'`.

use super::columns::table;
use crate::derive::ProfileDerived;
use crate::record::{LineOrigin, ProfileRecord};

table! {
    /// One row per engine profiling record: the engine's own timing of a request.
    pub table ProfilesBuilder(p: &ProfileRecord<'_>, d: &ProfileDerived<'_>, o: &LineOrigin<'_>) {
        name: "profiles",
        key: ["request_id"],
        partition: Date,
        written_by: Ingest,
    } {
        /// Joins requests.request_id.
        request_id: Utf8 [NoStatistics] = p.request_id.as_ref(),
        /// When the engine received the request, on the engine's clock (its offset from the gateway's: `gateway_engine`); null when not logged.
        ts: TimestampUtc nullable = p.ts_micros,
        /// Serving process / replica.
        engine_id: Utf8 nullable [Dictionary] = p.engine_id.as_deref(),
        /// GPU index.
        gpu_id: Int64 nullable [Dictionary] = p.gpu_id,
        /// Model as the engine names it; null when not logged (the joined request's model applies).
        model: Utf8 nullable [Dictionary] = p.model.as_deref(),
        /// Forward passes that touched the request (prefill chunks + decode steps).
        inference_steps: Int64 nullable = p.inference_steps,
        /// Share of the prompt served from the KV / prefix cache.
        kv_cache_hit_ratio: Float64 nullable = p.kv_cache_hit_ratio,
        /// Mean CUDA kernel time over the request's steps, microseconds.
        cuda_kernel_avg_us: Float64 nullable = p.cuda_kernel_avg_us,
        /// Time in the engine's queue before the request's first scheduled step; null when not logged.
        queue_ms: Float64 nullable = p.queue_ms,
        /// Time spent in prefill.
        prefill_latency_ms: Float64 = p.prefill_latency_ms,
        /// Entries of decode_latency_ms (generated tokens as the engine counts them), or the tokens an engine without per-token entries logs.
        decode_tokens: Int64 = p.decode_tokens.unwrap_or_else(|| i64::try_from(p.decode_latency_ms.len()).unwrap_or(i64::MAX)),
        /// Sum of decode_latency_ms (or the decode time an engine without per-token entries logs); null when an entry is not a usable number.
        decode_ms: Float64 nullable = d.decode_ms,
        /// prefill_latency_ms + decode_ms.
        engine_ms: Float64 nullable = d.engine_ms,
        /// Sample standard deviation of the usable decode_latency_ms entries (decode-step jitter); null with fewer than two.
        decode_step_std_ms: Float64 nullable [Incompressible] = d.decode_step_std_ms,
        /// Problems in the record (codes in docs/metrics.md); null when none. The record is always kept.
        issues: Utf8List nullable = Some(d.issues.as_slice()),
        /// Input path or object URL.
        source_file: Utf8 [Dictionary] = o.file,
        /// 1-based line number in the decompressed input.
        source_line: UInt64 = o.line_no,
        /// Unknown input keys as a JSON object.
        extra: Utf8 nullable [NoStatistics] = p.extra.as_deref(),
    }
}
