//! The input formats. Each format is one module that implements [`LogFormat`]
//! (its name, how to recognise it from one line, how to parse one line);
//! [`FORMATS`] registers them in detection order.
//!
//! Adding a format: a module here implementing [`LogFormat`], and one line
//! in [`FORMATS`].
//!
//! Most formats hold one record per line ([`Framing::Lines`]); lines are
//! parsed in parallel and independently, and the one piece of per-file state
//! is a CSV header naming the columns ([`LogFormat::header`], read once from
//! the file's first line and handed to every line in [`LineContext`]). A
//! format whose input is one JSON document holding an array of records (a
//! profiler trace) says [`Framing::JsonEventArray`] and is recognised from
//! the file's first bytes ([`LogFormat::detect_head`]); each array element is
//! then parsed as a line is.

pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod canonical;
pub mod cohere;
pub mod csv;
pub mod envelope;
pub mod eval;
pub mod fields;
pub mod gemini;
pub mod helicone;
pub mod kernel_trace;
pub mod langfuse;
pub mod litellm;
pub mod moe_routing;
pub mod mooncake;
pub mod ollama;
pub mod openai;
pub mod openai_responses;
pub mod openai_stream;
pub mod otel;
pub mod profile;
pub mod secrets;
pub mod tgi;
pub mod vllm;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;
use std::str::FromStr;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::catalog::append::{AnyTableRow, TableRow};
use crate::error::Error;
use crate::record::{ProfileRecord, RequestRecord};

pub use self::csv::CsvHeader;
pub use self::fields::TimeUnit;

/// Every format, in detection order: the first whose [`LogFormat::detect`]
/// accepts a file's line wins, so the most specific come first and the
/// canonical format, which accepts any object with token counts, comes last.
pub static FORMATS: &[&dyn LogFormat] = &[
    &kernel_trace::KernelTrace,
    &otel::Otel,
    &openai_stream::OpenAiStream,
    &gemini::GeminiStream,
    &ollama::OllamaStream,
    &azure::AzureCsv,
    &moe_routing::MoeRouting,
    &litellm::LiteLlm,
    &openai::OpenAiBatch,
    &mooncake::Mooncake,
    &helicone::Helicone,
    &langfuse::Langfuse,
    &bedrock::Bedrock,
    &gemini::Gemini,
    &ollama::Ollama,
    &cohere::Cohere,
    &openai_responses::OpenAiResponses,
    &openai::OpenAiChat,
    &anthropic::Anthropic,
    &tgi::Tgi,
    &vllm::Vllm,
    &eval::Eval,
    &profile::Profile,
    &canonical::Canonical,
];

/// One input format.
pub trait LogFormat: Sync {
    /// The name used by `--format` and stored in `source_format`.
    fn name(&self) -> &'static str;
    /// One line on what it is, for `--help` and the docs.
    fn about(&self) -> &'static str;
    /// Whether a file holding this line is in this format.
    fn detect(&self, line: &Probe<'_>) -> bool;
    /// Parses one non-blank line (one array element for [`Framing::JsonEventArray`]).
    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String>;
    /// What `rejects.raw_line` keeps of a rejected line or record: the bytes
    /// as logged, less the secrets the format knows its lines carry (hashed
    /// API keys, pre-signed URLs; see [`secrets`]). The default keeps all.
    fn reject_raw<'a>(&self, raw: &'a [u8], _ctx: &LineContext<'_>) -> Cow<'a, [u8]> {
        Cow::Borrowed(raw)
    }
    /// The per-file state read from a file's first non-blank line: the
    /// column names when that line is a CSV header this format reads rows
    /// by. `None` (the default) for formats whose lines stand alone.
    fn header(&self, _first_line: &[u8]) -> Option<CsvHeader> {
        None
    }
    /// How the input is cut into records.
    fn framing(&self) -> Framing {
        Framing::Lines
    }
    /// Whether a file whose first bytes (up to [`HEAD_BYTES`]) are `head` is
    /// in this format: for formats whose first line says nothing (a
    /// pretty-printed JSON document starts with `{`). Tried before any line.
    fn detect_head(&self, _head: &[u8]) -> bool {
        false
    }
}

/// How many bytes of a file's head [`LogFormat::detect_head`] sees.
pub const HEAD_BYTES: usize = 64 * 1024;

/// How a format's input is cut into records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One record per line (JSON lines, CSV).
    Lines,
    /// One JSON document: the array under `key` of the top-level object, or
    /// a bare top-level array; each element is a record
    /// ([`crate::event_array`]).
    JsonEventArray {
        /// The top-level key whose value is the array of records.
        key: &'static str,
    },
    /// JSON that is not JSON lines (pretty-printed documents, one after
    /// another, or arrays of records): each top-level value is a record, and
    /// each element of a top-level array ([`crate::event_array::EventSplitter::records`]).
    /// Chosen by the reader from a file's head ([`crate::event_array::is_json_document`])
    /// for every format framed by lines, so every JSON-based format reads it.
    JsonRecords,
    /// Server-sent event streams saved as sent: each stream, its lines up to
    /// `data: [DONE]` joined by `\n`, is one record ([`crate::event_stream`]).
    EventStream,
}

/// One line offered to [`LogFormat::detect`], parsed as JSON at most once
/// however many formats look at it.
pub struct Probe<'l> {
    line: &'l [u8],
    json: OnceCell<Option<Map<String, Value>>>,
    first_element: OnceCell<Option<Map<String, Value>>>,
}

impl<'l> Probe<'l> {
    /// A probe of one line.
    pub fn new(line: &'l [u8]) -> Self {
        Probe { line, json: OnceCell::new(), first_element: OnceCell::new() }
    }

    /// The raw line.
    pub fn line(&self) -> &'l [u8] {
        self.line
    }

    /// The line as a JSON object; `None` when it is not one.
    pub fn object(&self) -> Option<&Map<String, Value>> {
        self.json
            .get_or_init(|| match fields::from_json(self.line) {
                Ok(Value::Object(map)) => Some(map),
                _ => None,
            })
            .as_ref()
    }

    /// The line's record: its object, or the first element when the line is
    /// a JSON array of objects (a JSON-format export written on one line).
    pub fn record(&self) -> Option<&Map<String, Value>> {
        if self.line.trim_ascii_start().first() != Some(&b'[') {
            return self.object();
        }
        self.first_element.get_or_init(|| first_array_element(self.line)).as_ref()
    }

    /// The response object: the envelope's `response` when the line is a
    /// gateway envelope (see [`envelope`]), else the line's object. A
    /// LiteLLM payload (`startTime`) or an OpenAI Batch line (`custom_id`)
    /// also holds a `response`, but is no envelope: it has none.
    pub fn response(&self) -> Option<&Map<String, Value>> {
        let obj = self.object()?;
        if obj.contains_key("startTime") || obj.contains_key("custom_id") {
            return None;
        }
        Some(obj.get("response").and_then(Value::as_object).unwrap_or(obj))
    }
}

/// The first element of a JSON array of objects, read without building the
/// others (they are only checked to be JSON).
fn first_array_element(line: &[u8]) -> Option<Map<String, Value>> {
    struct First;
    impl<'de> serde::de::Visitor<'de> for First {
        type Value = Option<Map<String, Value>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON array")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element::<Value>()?;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(match first {
                Some(Value::Object(map)) => Some(map),
                _ => None,
            })
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    serde::Deserializer::deserialize_seq(&mut de, First).ok().flatten()
}

/// A format, as chosen by `--format` or detected: a handle on a registered
/// [`LogFormat`].
#[derive(Clone, Copy)]
pub struct Format(&'static dyn LogFormat);

impl Format {
    /// The format's name.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// What it is.
    pub fn about(self) -> &'static str {
        self.0.about()
    }

    /// Every registered format, in detection order.
    pub fn all() -> impl Iterator<Item = Format> {
        FORMATS.iter().map(|f| Format(*f))
    }

    /// Every format's name, in detection order.
    pub fn names() -> Vec<&'static str> {
        FORMATS.iter().map(|f| f.name()).collect()
    }

    /// How the format's input is cut into records.
    pub fn framing(self) -> Framing {
        self.0.framing()
    }

    /// The first format that recognises a file from its first bytes.
    pub fn detect_head(head: &[u8]) -> Option<Format> {
        FORMATS.iter().find(|f| f.detect_head(head)).map(|f| Format(*f))
    }

    /// The first format that recognises `line`.
    pub fn detect(line: &[u8]) -> Option<Format> {
        let probe = Probe::new(line);
        FORMATS.iter().find(|f| f.detect(&probe)).map(|f| Format(*f))
    }

    /// The per-file state this format reads from a file's first line (see [`LogFormat::header`]).
    pub fn header(self, first_line: &[u8]) -> Option<CsvHeader> {
        self.0.header(first_line)
    }

    /// What `rejects.raw_line` keeps of a rejected line or record (see [`LogFormat::reject_raw`]).
    pub fn reject_raw<'a>(self, raw: &'a [u8], ctx: &LineContext<'_>) -> Cow<'a, [u8]> {
        self.0.reject_raw(raw, ctx)
    }

    /// Parses one non-blank line of this format. Lines written by Python's
    /// `json.dumps` may hold the non-JSON numbers `NaN` and `Infinity` (in
    /// logprobs, typically): such a line is parsed again with them read as
    /// `null`, and the request keeps a `non_finite_number` token issue.
    pub fn parse<'a>(self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        match self.0.parse(line, ctx) {
            Err(e) if fields::has_non_finite_literal(line) => {
                let cleaned = fields::null_non_finite_literals(line);
                match self.0.parse(&cleaned, ctx) {
                    Ok(Parsed::Request(rec)) => Ok(Parsed::Request(flag_non_finite(rec))),
                    Ok(Parsed::Rows { rows, skipped }) => {
                        let rows = rows.into_iter().map(Row::flag_non_finite).collect();
                        Ok(Parsed::Rows { rows, skipped })
                    }
                    Ok(Parsed::Skip) => Ok(Parsed::Skip),
                    Err(_) => Err(e),
                }
            }
            other => other,
        }
    }
}

/// A record parsed from a line whose `NaN`/`Infinity` literals were read as
/// null: detached from the rewritten line and flagged.
fn flag_non_finite(rec: RequestRecord<'_>) -> RequestRecord<'static> {
    let mut rec = rec.into_owned();
    rec.token_issues.push(fields::issue::NON_FINITE_NUMBER.to_string());
    rec
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Format {}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Format({})", self.name())
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Format::all()
            .find(|f| f.name() == s)
            .ok_or_else(|| config_err!("unknown format {s:?}; expected one of {}", Format::names().join(", ")))
    }
}

/// What a line turned into.
// Returned by value once per line and consumed at once: boxing the record
// would add an allocation per line on ingest's hot path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Parsed<'a> {
    /// A request row: what most formats make of a line.
    Request(RequestRecord<'a>),
    /// Any number of rows from one line (an OTLP line holds many spans), and
    /// how many records in the line were not rows (spans that are not model
    /// calls): skipped and counted, not rejected.
    Rows {
        /// The rows, in input order.
        rows: Vec<Row<'a>>,
        /// Records in the line that are not rows.
        skipped: u64,
    },
    /// A line that carries no row, such as a CSV header.
    Skip,
}

impl Parsed<'_> {
    /// A line whose one record is valid but not a request (an embedding
    /// call, a cache hit, a span of another kind): skipped and counted.
    pub fn not_a_request() -> Self {
        Parsed::Rows { rows: Vec::new(), skipped: 1 }
    }

    /// The same rows, detached from the text they were parsed from (a
    /// line rewritten before parsing: a CSV row as JSON, `NaN` as `null`).
    pub fn into_owned(self) -> Parsed<'static> {
        match self {
            Parsed::Request(rec) => Parsed::Request(rec.into_owned()),
            Parsed::Rows { rows, skipped } => {
                Parsed::Rows { rows: rows.into_iter().map(Row::into_owned).collect(), skipped }
            }
            Parsed::Skip => Parsed::Skip,
        }
    }
}

/// One row of a line that yields several ([`Parsed::Rows`]), or rows of
/// another table than `requests`. A table that a format fills needs no
/// variant here: its rows come as [`Row::Table`] ([`Row::table`]).
// Most rows are requests: boxing them to shrink the rare reject would add an
// allocation per row (as for `Parsed`).
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Row<'a> {
    /// A `requests` row (with its `tokens` rows).
    Request(RequestRecord<'a>),
    /// A `profiles` row (with its `tokens` rows, `source = 'engine'`).
    Profile(ProfileRecord<'a>),
    /// A begin or end trace event: a `kernels` row once the reader pairs it
    /// (per pid and tid, as a stack); until then the event is not counted.
    KernelSpan(kernel_trace::SpanEvent),
    /// A record of the line that is rejected while the others are kept: a
    /// `rejects` row naming the record.
    Reject(RecordReject<'a>),
    /// A row of any other table (`kernels`, `moe_routing`, `evals`): the row
    /// knows its table and how it is appended.
    Table(Box<dyn AnyTableRow>),
}

impl Row<'_> {
    /// A row of the table `row` belongs to.
    pub fn table(row: impl TableRow) -> Row<'static> {
        Row::Table(Box::new(row))
    }

    /// The row as a `T` (a [`TableRow`] type), if it is one.
    pub fn as_table_row<T: TableRow>(&self) -> Option<&T> {
        match self {
            Row::Table(row) => row.as_any().downcast_ref(),
            _ => None,
        }
    }

    /// The same row, detached from the text it was parsed from.
    pub fn into_owned(self) -> Row<'static> {
        match self {
            Row::Request(rec) => Row::Request(rec.into_owned()),
            Row::Profile(rec) => Row::Profile(rec.into_owned()),
            Row::Reject(r) => Row::Reject(r.into_owned()),
            Row::KernelSpan(s) => Row::KernelSpan(s),
            Row::Table(row) => Row::Table(row),
        }
    }

    /// The row parsed from a line whose `NaN`/`Infinity` literals were read
    /// as null: detached from the rewritten line and flagged `non_finite_number`.
    fn flag_non_finite(self) -> Row<'static> {
        match self {
            Row::Request(rec) => Row::Request(flag_non_finite(rec)),
            Row::Profile(rec) => {
                let mut rec = rec.into_owned();
                rec.issues.push(fields::issue::NON_FINITE_NUMBER.to_string());
                Row::Profile(rec)
            }
            other => other.into_owned(),
        }
    }
}

/// A record rejected inside a line of several.
#[derive(Debug)]
pub struct RecordReject<'a> {
    /// Which record: an OTLP span's `spanId`, `[i]` for element i of an array.
    pub record: String,
    /// Why it was rejected.
    pub error: String,
    /// The record's own JSON text.
    pub raw: Cow<'a, [u8]>,
}

impl RecordReject<'_> {
    /// The same reject, detached from the input line.
    pub fn into_owned(self) -> RecordReject<'static> {
        RecordReject { record: self.record, error: self.error, raw: Cow::Owned(self.raw.into_owned()) }
    }
}

/// Parses a line that holds a JSON array of records (a JSON-format export
/// written on one line) with `parse_record`, one record per element: each
/// element's rows are kept, and an element that fails is a [`Row::Reject`]
/// named `[i]` while the others are kept.
pub fn parse_array_line<'a>(
    line: &'a [u8],
    parse_record: impl Fn(&'a [u8]) -> Result<Parsed<'a>, String>,
) -> Result<Parsed<'a>, String> {
    let items: Vec<&'a RawValue> =
        fields::from_json(line).map_err(|e| format!("invalid JSON array of records: {e}"))?;
    Ok(parse_records(items, |i| format!("[{i}]"), parse_record))
}

/// Parses the records `items` of one line with `parse_record`: each
/// record's rows are kept, and a record that fails is a [`Row::Reject`]
/// named `name(i)` while the others are kept.
pub fn parse_records<'a>(
    items: Vec<&'a RawValue>,
    name: impl Fn(usize) -> String,
    parse_record: impl Fn(&'a [u8]) -> Result<Parsed<'a>, String>,
) -> Parsed<'a> {
    let (mut rows, mut skipped) = (Vec::new(), 0);
    for (i, item) in items.into_iter().enumerate() {
        let raw = item.get().as_bytes();
        match parse_record(raw) {
            Ok(Parsed::Request(rec)) => rows.push(Row::Request(rec)),
            Ok(Parsed::Rows { rows: more, skipped: s }) => {
                rows.extend(more);
                skipped += s;
            }
            Ok(Parsed::Skip) => skipped += 1,
            Err(error) => rows.push(Row::Reject(RecordReject { record: name(i), error, raw: Cow::Borrowed(raw) })),
        }
    }
    Parsed::Rows { rows, skipped }
}

/// Per-file settings a parser may need.
#[derive(Debug, Clone)]
pub struct LineContext<'a> {
    /// Model name for formats that log none (traces).
    pub default_model: &'a str,
    /// Start of a trace whose timestamps are relative (Mooncake), and arrival
    /// of a response that carries no time, microseconds since the epoch.
    pub base_time_micros: i64,
    /// Unit of durations logged as bare numbers whose unit the log does not
    /// say (Langfuse's `latency`, `time_to_first_token`): `--time-unit`.
    pub time_unit: TimeUnit,
    /// The file's CSV header, when its format reads rows by column name.
    pub header: Option<&'a CsvHeader>,
}

impl Default for LineContext<'_> {
    fn default() -> Self {
        LineContext { default_model: "unknown", base_time_micros: 0, time_unit: TimeUnit::default(), header: None }
    }
}

/// Test support shared by the formats' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::record::RequestRecord;

    /// A request's id, arrival, model, token counts and output cap; then its
    /// TTFT, latency, finish reason, logged cost and session: one value to
    /// compare with a row of hand-written expectations.
    pub type Summary<'r> = (
        (&'r str, i64, &'r str, i64, i64, i64, i64, Option<i64>, Option<i64>),
        (Option<f64>, Option<f64>, Option<&'r str>, Option<f64>, Option<&'r str>),
    );

    /// The [`Summary`] of a request (its id and prompt length must be set).
    pub fn summary<'r>(r: &'r RequestRecord<'_>) -> Summary<'r> {
        (
            (
                r.request_id.as_deref().expect("request id"),
                r.ts_micros,
                r.model.as_ref(),
                r.prompt_tokens.expect("a prompt length"),
                r.completion_tokens,
                r.cached_tokens,
                r.cache_write_tokens,
                r.reasoning_tokens,
                r.max_tokens,
            ),
            (r.ttft_ms, r.latency_ms, r.finish_reason_raw.as_deref(), r.logged_cost_usd, r.session_id.as_deref()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        let names = Format::names();
        for name in &names {
            assert_eq!(name.parse::<Format>().map(Format::name).ok(), Some(*name));
            assert_eq!(names.iter().filter(|n| *n == name).count(), 1, "{name} registered twice");
        }
        let err = "nope".parse::<Format>().unwrap_err().to_string();
        assert!(err.contains("canonical") && err.contains("mooncake"), "{err}");
    }

    /// One record of each format as its producer writes it (a sample's first
    /// line, or a bare provider response), with every format that accepts it.
    fn first_line(text: &str) -> &str {
        text.lines().next().expect("a first line")
    }

    fn samples() -> Vec<(&'static str, String)> {
        let sample = |f: &str| -> String {
            let text = match f {
                "canonical" => include_str!("../../../../sample_logs/canonical.jsonl"),
                "openai_chat" => include_str!("../../../../sample_logs/openai_chat.jsonl"),
                "openai_batch" => include_str!("../../../../sample_logs/openai_batch.jsonl"),
                "openai_responses" => include_str!("../../../../sample_logs/openai_responses.jsonl"),
                "anthropic" => include_str!("../../../../sample_logs/anthropic.jsonl"),
                "tgi" => include_str!("../../../../sample_logs/tgi.jsonl"),
                "vllm" => include_str!("../../../../sample_logs/vllm.jsonl"),
                "otel" => include_str!("../../../../sample_logs/otel.jsonl"),
                "helicone" => include_str!("../../../../sample_logs/helicone.jsonl"),
                "litellm" => include_str!("../../../../sample_logs/litellm.jsonl"),
                "litellm_csv" => include_str!("../../../../sample_logs/litellm_spendlogs.csv"),
                "langfuse" => include_str!("../../../../sample_logs/langfuse.jsonl"),
                "mooncake" => include_str!("../../../../sample_logs/mooncake_head.jsonl"),
                "azure_csv" => include_str!("../../../../sample_logs/azure_conv_head.csv"),
                "profile" => include_str!("../../../../sample_logs/profile.jsonl"),
                "moe_routing" => include_str!("../../../../tests/data/formats/moe_routing.sample.csv"),
                "eval" => include_str!("../../../../tests/data/formats/eval.sample.jsonl"),
                _ => unreachable!("{f}"),
            };
            first_line(text).to_string()
        };
        let real = |f: &str| -> String {
            let text = match f {
                "litellm_gcs" => include_str!("../../../../tests/data/real/litellm_gcs.ndjson"),
                "openinference" => include_str!("../../../../tests/data/real/otel_openinference.jsonl"),
                "bedrock_log" => include_str!("../../../../tests/data/real/bedrock_invocation_built.jsonl"),
                "bedrock_converse" => include_str!("../../../../tests/data/real/bedrock_converse.jsonl"),
                "gemini" => include_str!("../../../../tests/data/real/gemini_generate_content.jsonl"),
                "gemini_chunks" => include_str!("../../../../tests/data/real/gemini_stream_chunks.jsonl"),
                "gemini_array" => include_str!("../../../../tests/data/real/gemini_stream_array.json"),
                "ollama" => include_str!("../../../../tests/data/real/ollama_responses.jsonl"),
                "ollama_stream" => include_str!("../../../../tests/data/real/ollama_chat_stream.ndjson"),
                "cohere" => include_str!("../../../../tests/data/real/cohere_chat.jsonl"),
                "cohere_v2" => include_str!("../../../../tests/data/real/cohere_vercel.jsonl"),
                "cohere_stream" => include_str!("../../../../tests/data/real/cohere_stream_chunks.jsonl"),
                _ => unreachable!("{f}"),
            };
            first_line(text).to_string()
        };
        vec![
            ("canonical", sample("canonical")),
            ("openai_chat", sample("openai_chat")),
            ("openai_batch", sample("openai_batch")),
            ("openai_responses", sample("openai_responses")),
            ("anthropic", sample("anthropic")),
            ("tgi", sample("tgi")),
            ("vllm", sample("vllm")),
            ("otel", sample("otel")),
            ("otel", real("openinference")),
            ("helicone", sample("helicone")),
            ("litellm", sample("litellm")),
            ("litellm", real("litellm_gcs")),
            ("litellm", sample("litellm_csv")),
            ("langfuse", sample("langfuse")),
            ("mooncake", sample("mooncake")),
            ("azure_csv", sample("azure_csv")),
            ("profile", sample("profile")),
            ("moe_routing", sample("moe_routing")),
            ("eval", sample("eval")),
            ("bedrock", real("bedrock_log")),
            ("bedrock", real("bedrock_converse")),
            ("gemini", real("gemini")),
            ("gemini", real("gemini_chunks")),
            ("gemini", real("gemini_array")),
            ("ollama", real("ollama")),
            ("ollama", real("ollama_stream")),
            ("cohere", real("cohere")),
            ("cohere", real("cohere_v2")),
            ("cohere", real("cohere_stream")),
            ("cohere", r#"{"type":"content-end","index":0}"#.to_string()),
            ("bedrock", r#"{"@timestamp":"2025-03-11 00:38:02.000","@message":"{\"schemaType\":\"ModelInvocationLog\",\"requestId\":\"r\"}"}"#.to_string()),
            // Bare provider responses, as the providers return them.
            ("anthropic", r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}"#.to_string()),
            ("openai_chat", r#"{"id":"chatcmpl-1","object":"chat.completion","created":1737710446,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}"#.to_string()),
            ("openai_responses", r#"{"id":"resp_1","object":"response","created_at":1737710446,"status":"completed","model":"gpt-4o","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}"#.to_string()),
            ("tgi", r#"{"generated_text":"Hi","details":{"finish_reason":"eos_token","generated_tokens":2,"seed":null,"prefill":[],"tokens":[{"id":1,"text":"Hi","logprob":-0.1,"special":false},{"id":2,"text":"</s>","logprob":-0.01,"special":true}]}}"#.to_string()),
        ]
    }

    #[test]
    fn every_pair_of_formats_is_told_apart() {
        let probe_all = |line: &str| -> Vec<&'static str> {
            let probe = Probe::new(line.as_bytes());
            FORMATS.iter().filter(|f| f.detect(&probe)).map(|f| f.name()).collect()
        };
        // Each record is accepted by its own format alone, whatever the
        // detection order: every pair of formats is told apart by the
        // formats' own discriminators (`type: message`, `object:
        // chat.completion`, `object: response`, `generated_text`, ...).
        for (format, line) in samples() {
            assert_eq!(probe_all(&line), [format], "{line}");
            assert_eq!(Format::detect(line.as_bytes()).map(Format::name), Some(format));
        }
    }

    #[test]
    fn detection_picks_the_specific_format_first() {
        let detect = |line: &str| Format::detect(line.as_bytes()).map(Format::name);
        assert_eq!(detect(r#"{"resourceSpans":[]}"#), Some("otel"));
        assert_eq!(detect(r#"{"resourceLogs":[]}"#), None);
        assert_eq!(detect("TIMESTAMP,ContextTokens,GeneratedTokens"), Some("azure_csv"));
        assert_eq!(detect("request_id,call_type,spend,startTime,endTime"), Some("litellm"));
        assert_eq!(
            detect(
                r#"{"id":"c","startTime":1.0,"response_cost":0.1,"prompt_tokens":1,"response":{"choices":[],"usage":{}}}"#
            ),
            Some("litellm")
        );
        assert_eq!(detect(r#"[{"request_id":"r","spend":0.1,"startTime":"2024-06-01T00:00:00Z"}]"#), Some("litellm"));
        assert_eq!(detect(r#"{"custom_id":"a","response":{"body":{}}}"#), Some("openai_batch"));
        assert_eq!(detect(r#"{"timestamp":0,"input_length":1,"output_length":2}"#), Some("mooncake"));
        assert_eq!(
            detect(
                r#"{"request_id":"r","request_created_at":"2024-06-01 12:00:00.000","delay_ms":1,"prompt_tokens":1}"#
            ),
            Some("helicone")
        );
        assert_eq!(
            detect(r#"{"id":"o","trace_id":"t","type":"GENERATION","usage_details":{"input":"1"}}"#),
            Some("langfuse")
        );
        assert_eq!(detect(r#"[{"id":"o","provided_model_name":"m","usage_details":{}}]"#), Some("langfuse"));
        assert_eq!(detect("id,trace_id,type,start_time,usage_details"), Some("langfuse"));
        assert_eq!(detect(r#"{"object":"response","output":[],"usage":{"input_tokens":1}}"#), Some("openai_responses"));
        assert_eq!(
            detect(r#"{"ts":1,"response":{"output":[],"status":"completed","usage":{"input_tokens":1}}}"#),
            Some("openai_responses")
        );
        assert_eq!(detect(r#"{"object":"chat.completion","choices":[],"usage":{}}"#), Some("openai_chat"));
        assert_eq!(detect(r#"{"ts":1,"response":{"type":"message","usage":{"input_tokens":1}}}"#), Some("anthropic"));
        assert_eq!(detect(r#"{"generated_text":"x","details":{"finish_reason":"eos_token"}}"#), Some("tgi"));
        assert_eq!(
            detect(r#"{"request_id":"r","inference_steps":2,"prefill_latency_ms":1,"decode_latency_ms":[1]}"#),
            Some("profile")
        );
        assert_eq!(detect(r#"{"ts":1,"prompt_tokens":1,"completion_tokens":2}"#), Some("canonical"));
        assert_eq!(detect(r#"{"prompt_tokens":1,"completion_tokens":2}"#), None, "canonical lines have a ts");
        assert_eq!(detect("not json"), None);
    }
}
