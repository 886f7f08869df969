//! The canonical tables written by ingest and read by every job: `requests`,
//! `tokens` and `rejects`. Column meanings are documented once, in
//! `schemas/*.json` and `docs/metrics.md`; this module is their Arrow form.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

/// Name of the hive partition column (`date=YYYY-MM-DD`) of `requests` and `tokens`.
/// It is a directory level, not a column inside the Parquet files.
pub const DATE_PARTITION: &str = "date";

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The `requests` table: one row per logged request (the `date` partition column excluded).
pub fn requests_schema() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        Field::new("request_id", Utf8, false),
        Field::new("ts", ts_type(), false),
        Field::new("session_id", Utf8, true),
        Field::new("source_format", Utf8, false),
        Field::new("source_file", Utf8, false),
        Field::new("source_line", UInt64, false),
        Field::new("model", Utf8, false),
        Field::new("model_version", Utf8, true),
        Field::new("status", Int32, true),
        Field::new("prompt_tokens", Int64, false),
        Field::new("completion_tokens", Int64, false),
        Field::new("cached_tokens", Int64, false),
        Field::new("cache_write_tokens", Int64, false),
        Field::new("reasoning_tokens", Int64, true),
        Field::new("total_tokens", Int64, false),
        Field::new("max_tokens", Int64, true),
        Field::new("ttft_ms", Float64, true),
        Field::new("latency_ms", Float64, true),
        Field::new("prefill_latency_ms", Float64, true),
        Field::new("tpot_ms", Float64, true),
        Field::new("decode_tps", Float64, true),
        Field::new("e2e_tps", Float64, true),
        Field::new("kv_cache_hit_ratio", Float64, true),
        Field::new("finish_reason", Utf8, true),
        Field::new("finish_reason_raw", Utf8, true),
        Field::new("has_eos_marker", Boolean, true),
        Field::new("eos_status", Utf8, false),
        Field::new("context_bin", Utf8, false),
        Field::new("context_bin_lo", Int64, false),
        Field::new("prompt", Utf8, true),
        Field::new("model_output", Utf8, true),
        Field::new("output_token_count", Int64, true),
        Field::new("token_issues", List(Arc::new(Field::new("item", Utf8, true))), true),
        Field::new("extra", Utf8, true),
    ]))
}

/// Element type of `tokens.top_logprobs`.
pub fn top_logprob_fields() -> Fields {
    Fields::from(vec![
        Field::new("token", DataType::Utf8, false),
        Field::new("logprob", DataType::Float64, true),
    ])
}

/// The `tokens` table: one row per output token of requests that logged per-token data.
pub fn tokens_schema() -> SchemaRef {
    use DataType::*;
    let top = Field::new("item", Struct(top_logprob_fields()), false);
    Arc::new(Schema::new(vec![
        Field::new("request_id", Utf8, false),
        Field::new("model", Utf8, false),
        Field::new("context_bin", Utf8, false),
        Field::new("position", Int32, false),
        Field::new("token", Utf8, true),
        Field::new("token_bytes", Binary, true),
        Field::new("logprob", Float64, true),
        Field::new("top_logprobs", List(Arc::new(top)), true),
        Field::new("entropy_bits", Float64, true),
        Field::new("top1_margin", Float64, true),
        Field::new("is_special", Boolean, true),
        Field::new("emitted_ms", Float64, true),
        Field::new("itl_ms", Float64, true),
    ]))
}

/// The `rejects` table: one row per input line that could not become a request.
pub fn rejects_schema() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        Field::new("source_file", Utf8, false),
        Field::new("source_format", Utf8, true),
        Field::new("source_line", UInt64, false),
        Field::new("byte_offset", UInt64, false),
        Field::new("error", Utf8, false),
        Field::new("raw_line", Binary, false),
        Field::new("raw_line_truncated", Boolean, false),
    ]))
}

/// The `replay_verdicts` table (written by `tokscope replay`): one row per
/// replayed request, keyed by `request_id` (a rerun replaces the row).
pub fn replay_verdicts_schema() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        Field::new("request_id", Utf8, false),
        Field::new("verdict", Utf8, false),
        Field::new("reason", Utf8, true),
        Field::new("p_eos_at_cut", Float64, true),
        Field::new("threshold", Float64, false),
        Field::new("continuation", Utf8, true),
        Field::new("continuation_ended_with_eos", Boolean, true),
        Field::new("prompt_tokens_replayed", Int64, false),
        Field::new("output_tokens_replayed", Int64, false),
        Field::new("cut_in_special_token", Boolean, false),
        Field::new("cut_in_utf8_char", Boolean, false),
        Field::new("deterministic", Boolean, true),
        Field::new("device", Utf8, false),
        Field::new("model", Utf8, false),
        Field::new("replayed_at", ts_type(), false),
    ]))
}
