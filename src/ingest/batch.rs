//! The one place where parsed records become Arrow columns, and where the
//! derived columns (context bin, EOS marker, eos_status, timing) are computed.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, ListBuilder, StringBuilder,
    StructBuilder, TimestampMicrosecondBuilder, UInt64Builder,
};
use arrow::record_batch::RecordBatch;
use sha2::{Digest, Sha256};

use crate::derive::{self, ContextBins, EosMarkers};
use crate::error::Result;
use crate::record::{RequestRecord, TokenRecord};
use crate::schema;

/// How prompts, outputs and token texts are stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Redaction {
    /// Keep them as logged.
    #[default]
    None,
    /// Replace them with the hex SHA-256 of their text (equal texts stay joinable).
    Hash,
    /// Drop them (null).
    Drop,
}

/// Settings for deriving columns, shared by every batch of an ingest run.
#[derive(Debug, Clone, Default)]
pub struct DeriveSettings {
    /// Context-length bins.
    pub bins: ContextBins,
    /// EOS markers.
    pub markers: EosMarkers,
    /// Prompt/output redaction.
    pub redaction: Redaction,
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Days since the epoch of a UTC timestamp in microseconds (the `date` partition).
pub fn day_of(ts_micros: i64) -> i32 {
    ts_micros.div_euclid(MICROS_PER_DAY) as i32
}

/// A batch plus the `date` partition (days since the epoch) of each row.
pub struct DatedBatch {
    /// The rows.
    pub batch: RecordBatch,
    /// Partition day per row.
    pub days: Vec<i32>,
}

/// Where a line came from.
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

fn redact<'s>(text: Option<&'s str>, mode: Redaction, scratch: &'s mut String) -> Option<&'s str> {
    match (text, mode) {
        (None, _) | (_, Redaction::Drop) => None,
        (Some(t), Redaction::None) => Some(t),
        (Some(t), Redaction::Hash) => {
            *scratch = format!("{:x}", Sha256::digest(t.as_bytes()));
            Some(scratch.as_str())
        }
    }
}

/// Builds `requests` and `tokens` batches from records.
pub struct RequestsBuilder {
    request_id: StringBuilder,
    ts: TimestampMicrosecondBuilder,
    session_id: StringBuilder,
    source_format: StringBuilder,
    source_file: StringBuilder,
    source_line: UInt64Builder,
    model: StringBuilder,
    model_version: StringBuilder,
    status: Int32Builder,
    prompt_tokens: Int64Builder,
    completion_tokens: Int64Builder,
    cached_tokens: Int64Builder,
    cache_write_tokens: Int64Builder,
    reasoning_tokens: Int64Builder,
    total_tokens: Int64Builder,
    max_tokens: Int64Builder,
    ttft_ms: Float64Builder,
    latency_ms: Float64Builder,
    prefill_latency_ms: Float64Builder,
    tpot_ms: Float64Builder,
    decode_tps: Float64Builder,
    e2e_tps: Float64Builder,
    kv_cache_hit_ratio: Float64Builder,
    finish_reason: StringBuilder,
    finish_reason_raw: StringBuilder,
    has_eos_marker: BooleanBuilder,
    eos_status: StringBuilder,
    context_bin: StringBuilder,
    context_bin_lo: Int64Builder,
    prompt: StringBuilder,
    model_output: StringBuilder,
    output_token_count: Int64Builder,
    token_issues: ListBuilder<StringBuilder>,
    extra: StringBuilder,
    days: Vec<i32>,
    tokens: TokensBuilder,
}

impl Default for RequestsBuilder {
    fn default() -> Self {
        Self {
            request_id: StringBuilder::new(),
            ts: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            session_id: StringBuilder::new(),
            source_format: StringBuilder::new(),
            source_file: StringBuilder::new(),
            source_line: UInt64Builder::new(),
            model: StringBuilder::new(),
            model_version: StringBuilder::new(),
            status: Int32Builder::new(),
            prompt_tokens: Int64Builder::new(),
            completion_tokens: Int64Builder::new(),
            cached_tokens: Int64Builder::new(),
            cache_write_tokens: Int64Builder::new(),
            reasoning_tokens: Int64Builder::new(),
            total_tokens: Int64Builder::new(),
            max_tokens: Int64Builder::new(),
            ttft_ms: Float64Builder::new(),
            latency_ms: Float64Builder::new(),
            prefill_latency_ms: Float64Builder::new(),
            tpot_ms: Float64Builder::new(),
            decode_tps: Float64Builder::new(),
            e2e_tps: Float64Builder::new(),
            kv_cache_hit_ratio: Float64Builder::new(),
            finish_reason: StringBuilder::new(),
            finish_reason_raw: StringBuilder::new(),
            has_eos_marker: BooleanBuilder::new(),
            eos_status: StringBuilder::new(),
            context_bin: StringBuilder::new(),
            context_bin_lo: Int64Builder::new(),
            prompt: StringBuilder::new(),
            model_output: StringBuilder::new(),
            output_token_count: Int64Builder::new(),
            token_issues: ListBuilder::new(StringBuilder::new()),
            extra: StringBuilder::new(),
            days: Vec::new(),
            tokens: TokensBuilder::default(),
        }
    }
}

impl RequestsBuilder {
    /// Rows appended so far.
    pub fn len(&self) -> usize {
        self.days.len()
    }

    /// True when no row was appended.
    pub fn is_empty(&self) -> bool {
        self.days.is_empty()
    }

    /// Appends one request, deriving the analytic columns.
    pub fn append(&mut self, rec: RequestRecord<'_>, origin: &LineOrigin<'_>, settings: &DeriveSettings) {
        let fallback_id;
        let request_id = match rec.request_id.as_deref() {
            Some(id) => id,
            None => {
                fallback_id = format!("{}:{}", origin.file, origin.line_no);
                &fallback_id
            }
        };
        let finish = rec.finish_reason_raw.as_deref().map(derive::normalize_finish_reason);
        let has_marker = match (&rec.model_output, rec.output_is_raw) {
            (Some(out), true) => {
                Some(settings.markers.ends_with_marker(&rec.model, out) || rec.last_token_special == Some(true))
            }
            _ => None,
        };
        let eos_status = derive::eos_status(has_marker, finish, rec.completion_tokens, rec.max_tokens);
        let (bin, bin_lo) = settings.bins.bin(rec.prompt_tokens);
        let (tpot, decode_tps, e2e_tps) = derive::timing(rec.completion_tokens, rec.ttft_ms, rec.latency_ms);

        self.request_id.append_value(request_id);
        self.ts.append_value(rec.ts_micros);
        self.session_id.append_option(rec.session_id.as_deref());
        self.source_format.append_value(origin.format);
        self.source_file.append_value(origin.file);
        self.source_line.append_value(origin.line_no);
        self.model.append_value(&rec.model);
        self.model_version.append_option(rec.model_version.as_deref());
        self.status.append_option(rec.status);
        self.prompt_tokens.append_value(rec.prompt_tokens);
        self.completion_tokens.append_value(rec.completion_tokens);
        self.cached_tokens.append_value(rec.cached_tokens);
        self.cache_write_tokens.append_value(rec.cache_write_tokens);
        self.reasoning_tokens.append_option(rec.reasoning_tokens);
        self.total_tokens.append_value(rec.prompt_tokens + rec.completion_tokens);
        self.max_tokens.append_option(rec.max_tokens);
        self.ttft_ms.append_option(rec.ttft_ms);
        self.latency_ms.append_option(rec.latency_ms);
        self.prefill_latency_ms.append_option(rec.prefill_latency_ms);
        self.tpot_ms.append_option(tpot);
        self.decode_tps.append_option(decode_tps);
        self.e2e_tps.append_option(e2e_tps);
        self.kv_cache_hit_ratio.append_option(rec.kv_cache_hit_ratio);
        self.finish_reason.append_option(finish);
        self.finish_reason_raw.append_option(rec.finish_reason_raw.as_deref());
        self.has_eos_marker.append_option(has_marker);
        self.eos_status.append_value(eos_status);
        self.context_bin.append_value(bin);
        self.context_bin_lo.append_value(bin_lo);
        let mut scratch = String::new();
        self.prompt.append_option(redact(rec.prompt.as_deref(), settings.redaction, &mut scratch));
        self.model_output.append_option(redact(rec.model_output.as_deref(), settings.redaction, &mut scratch));
        self.output_token_count.append_option((!rec.tokens.is_empty()).then_some(rec.tokens.len() as i64));
        let derived_issues = derive::token_issues(rec.completion_tokens, &rec.tokens);
        if rec.token_issues.is_empty() && derived_issues.is_empty() {
            self.token_issues.append_null();
        } else {
            for issue in rec.token_issues.iter().map(String::as_str).chain(derived_issues) {
                self.token_issues.values().append_value(issue);
            }
            self.token_issues.append(true);
        }
        self.extra.append_option(rec.extra.as_deref());
        let day = day_of(rec.ts_micros);
        self.days.push(day);
        for (pos, tok) in rec.tokens.iter().enumerate() {
            self.tokens.append(request_id, &rec.model, bin, pos, tok, day, settings.redaction);
        }
    }

    /// Finishes the `requests` and `tokens` batches.
    pub fn finish(mut self) -> Result<(DatedBatch, DatedBatch)> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.request_id.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.session_id.finish()),
            Arc::new(self.source_format.finish()),
            Arc::new(self.source_file.finish()),
            Arc::new(self.source_line.finish()),
            Arc::new(self.model.finish()),
            Arc::new(self.model_version.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.prompt_tokens.finish()),
            Arc::new(self.completion_tokens.finish()),
            Arc::new(self.cached_tokens.finish()),
            Arc::new(self.cache_write_tokens.finish()),
            Arc::new(self.reasoning_tokens.finish()),
            Arc::new(self.total_tokens.finish()),
            Arc::new(self.max_tokens.finish()),
            Arc::new(self.ttft_ms.finish()),
            Arc::new(self.latency_ms.finish()),
            Arc::new(self.prefill_latency_ms.finish()),
            Arc::new(self.tpot_ms.finish()),
            Arc::new(self.decode_tps.finish()),
            Arc::new(self.e2e_tps.finish()),
            Arc::new(self.kv_cache_hit_ratio.finish()),
            Arc::new(self.finish_reason.finish()),
            Arc::new(self.finish_reason_raw.finish()),
            Arc::new(self.has_eos_marker.finish()),
            Arc::new(self.eos_status.finish()),
            Arc::new(self.context_bin.finish()),
            Arc::new(self.context_bin_lo.finish()),
            Arc::new(self.prompt.finish()),
            Arc::new(self.model_output.finish()),
            Arc::new(self.output_token_count.finish()),
            Arc::new(self.token_issues.finish()),
            Arc::new(self.extra.finish()),
        ];
        let requests = RecordBatch::try_new(schema::requests_schema(), columns)?;
        let tokens = self.tokens.finish()?;
        Ok((DatedBatch { batch: requests, days: self.days }, tokens))
    }
}

/// Builds the `tokens` batch.
struct TokensBuilder {
    request_id: StringBuilder,
    model: StringBuilder,
    context_bin: StringBuilder,
    position: Int32Builder,
    token: StringBuilder,
    token_bytes: BinaryBuilder,
    logprob: Float64Builder,
    top_logprobs: ListBuilder<StructBuilder>,
    entropy_bits: Float64Builder,
    top1_margin: Float64Builder,
    is_special: BooleanBuilder,
    emitted_ms: Float64Builder,
    itl_ms: Float64Builder,
    days: Vec<i32>,
}

impl Default for TokensBuilder {
    fn default() -> Self {
        let item = StructBuilder::from_fields(schema::top_logprob_fields(), 0);
        let list_field = match schema::tokens_schema().field_with_name("top_logprobs").map(|f| f.data_type().clone()) {
            Ok(arrow::datatypes::DataType::List(f)) => f,
            _ => unreachable!("tokens.top_logprobs is a list by definition"),
        };
        Self {
            request_id: StringBuilder::new(),
            model: StringBuilder::new(),
            context_bin: StringBuilder::new(),
            position: Int32Builder::new(),
            token: StringBuilder::new(),
            token_bytes: BinaryBuilder::new(),
            logprob: Float64Builder::new(),
            top_logprobs: ListBuilder::new(item).with_field(list_field),
            entropy_bits: Float64Builder::new(),
            top1_margin: Float64Builder::new(),
            is_special: BooleanBuilder::new(),
            emitted_ms: Float64Builder::new(),
            itl_ms: Float64Builder::new(),
            days: Vec::new(),
        }
    }
}

impl TokensBuilder {
    #[allow(clippy::too_many_arguments)]
    fn append(&mut self, request_id: &str, model: &str, bin: &str, pos: usize, tok: &TokenRecord<'_>, day: i32, redaction: Redaction) {
        let keep_text = redaction == Redaction::None;
        self.request_id.append_value(request_id);
        self.model.append_value(model);
        self.context_bin.append_value(bin);
        self.position.append_value(pos as i32);
        self.token.append_option(tok.token.as_deref().filter(|_| keep_text));
        self.token_bytes.append_option(tok.token_bytes.as_deref().filter(|_| keep_text));
        self.logprob.append_option(tok.logprob);
        match &tok.top_logprobs {
            Some(alts) => {
                let lps: Vec<f64> = alts.iter().map(|(_, lp)| *lp).collect();
                self.entropy_bits.append_option(derive::topk_entropy_bits(&lps));
                self.top1_margin.append_option(derive::top1_margin(&lps));
                let items = self.top_logprobs.values();
                for (text, lp) in alts {
                    let text = if keep_text { text.as_ref() } else { "" };
                    if let Some(b) = items.field_builder::<StringBuilder>(0) {
                        b.append_value(text);
                    }
                    if let Some(b) = items.field_builder::<Float64Builder>(1) {
                        b.append_option(lp.is_finite().then_some(*lp));
                    }
                    items.append(true);
                }
                self.top_logprobs.append(true);
            }
            None => {
                self.entropy_bits.append_null();
                self.top1_margin.append_null();
                self.top_logprobs.append(false);
            }
        }
        self.is_special.append_option(tok.is_special);
        self.emitted_ms.append_option(tok.emitted_ms);
        self.itl_ms.append_option(tok.itl_ms);
        self.days.push(day);
    }

    fn finish(mut self) -> Result<DatedBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.request_id.finish()),
            Arc::new(self.model.finish()),
            Arc::new(self.context_bin.finish()),
            Arc::new(self.position.finish()),
            Arc::new(self.token.finish()),
            Arc::new(self.token_bytes.finish()),
            Arc::new(self.logprob.finish()),
            Arc::new(self.top_logprobs.finish()),
            Arc::new(self.entropy_bits.finish()),
            Arc::new(self.top1_margin.finish()),
            Arc::new(self.is_special.finish()),
            Arc::new(self.emitted_ms.finish()),
            Arc::new(self.itl_ms.finish()),
        ];
        Ok(DatedBatch { batch: RecordBatch::try_new(schema::tokens_schema(), columns)?, days: self.days })
    }
}

/// Longest raw-line prefix kept in `rejects.raw_line`.
pub const REJECT_SNIPPET_BYTES: usize = 64 * 1024;

/// Builds the `rejects` batch.
#[derive(Default)]
pub struct RejectsBuilder {
    source_file: StringBuilder,
    source_format: StringBuilder,
    source_line: UInt64Builder,
    byte_offset: UInt64Builder,
    error: StringBuilder,
    raw_line: BinaryBuilder,
    raw_line_truncated: BooleanBuilder,
    len: usize,
}

impl RejectsBuilder {
    /// Rows appended so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing was rejected.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records a rejected line; `cut` says the line was already cut while reading.
    pub fn append(&mut self, origin: &LineOrigin<'_>, error: &str, raw: &[u8], cut: bool) {
        let keep = raw.len().min(REJECT_SNIPPET_BYTES);
        self.source_file.append_value(origin.file);
        self.source_format.append_value(origin.format);
        self.source_line.append_value(origin.line_no);
        self.byte_offset.append_value(origin.byte_offset);
        self.error.append_value(error);
        self.raw_line.append_value(&raw[..keep]);
        self.raw_line_truncated.append_value(cut || keep < raw.len());
        self.len += 1;
    }

    /// Finishes the batch.
    pub fn finish(mut self) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.source_file.finish()),
            Arc::new(self.source_format.finish()),
            Arc::new(self.source_line.finish()),
            Arc::new(self.byte_offset.finish()),
            Arc::new(self.error.finish()),
            Arc::new(self.raw_line.finish()),
            Arc::new(self.raw_line_truncated.finish()),
        ];
        Ok(RecordBatch::try_new(schema::rejects_schema(), columns)?)
    }
}
