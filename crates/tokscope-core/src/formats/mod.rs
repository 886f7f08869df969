//! The input formats. Each format is one module that implements [`LogFormat`]
//! (its name, how to recognise it from one line, how to parse one line);
//! [`FORMATS`] registers them in detection order.
//!
//! Adding a format: a module here implementing [`LogFormat`], and one line
//! in [`FORMATS`].

pub mod anthropic;
pub mod azure;
pub mod canonical;
pub mod envelope;
pub mod fields;
pub mod mooncake;
pub mod openai;
pub mod profile;
pub mod tgi;

use std::cell::OnceCell;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::error::Error;
use crate::record::{ProfileRecord, RequestRecord};

/// Every format, in detection order: the first whose [`LogFormat::detect`]
/// accepts a file's line wins, so the most specific come first and the
/// canonical format, which accepts any object with token counts, comes last.
pub static FORMATS: &[&dyn LogFormat] = &[
    &azure::AzureCsv,
    &openai::OpenAiBatch,
    &mooncake::Mooncake,
    &openai::OpenAiChat,
    &anthropic::Anthropic,
    &tgi::Tgi,
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
    /// Parses one non-blank line.
    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String>;
}

/// One line offered to [`LogFormat::detect`], parsed as JSON at most once
/// however many formats look at it.
pub struct Probe<'l> {
    line: &'l [u8],
    json: OnceCell<Option<Map<String, Value>>>,
}

impl<'l> Probe<'l> {
    /// A probe of one line.
    pub fn new(line: &'l [u8]) -> Self {
        Probe { line, json: OnceCell::new() }
    }

    /// The raw line.
    pub fn line(&self) -> &'l [u8] {
        self.line
    }

    /// The line as a JSON object; `None` when it is not one.
    pub fn object(&self) -> Option<&Map<String, Value>> {
        self.json
            .get_or_init(|| match serde_json::from_slice(self.line) {
                Ok(Value::Object(map)) => Some(map),
                _ => None,
            })
            .as_ref()
    }

    /// The response object: the envelope's `response` when the line is a
    /// gateway envelope (see [`envelope`]), else the line's object.
    pub fn response(&self) -> Option<&Map<String, Value>> {
        let obj = self.object()?;
        Some(obj.get("response").and_then(Value::as_object).unwrap_or(obj))
    }
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

    /// The first format that recognises `line`.
    pub fn detect(line: &[u8]) -> Option<Format> {
        let probe = Probe::new(line);
        FORMATS.iter().find(|f| f.detect(&probe)).map(|f| Format(*f))
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

/// One row of a line that yields several ([`Parsed::Rows`]), or rows of
/// another table than `requests`. Adding a table that a format fills: a
/// variant here, and its case in the reader's `SliceBuilders`.
#[derive(Debug)]
pub enum Row<'a> {
    /// A `requests` row (with its `tokens` rows).
    Request(RequestRecord<'a>),
    /// A `profiles` row (with its `tokens` rows, `source = 'engine'`).
    Profile(ProfileRecord<'a>),
}

impl Row<'_> {
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
        }
    }
}

/// Per-file settings a parser may need.
#[derive(Debug, Clone)]
pub struct LineContext<'a> {
    /// Model name for formats that log none (traces).
    pub default_model: &'a str,
    /// Start of a trace whose timestamps are relative (Mooncake), microseconds since the epoch.
    pub base_time_micros: i64,
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

    #[test]
    fn detection_picks_the_specific_format_first() {
        let detect = |line: &str| Format::detect(line.as_bytes()).map(Format::name);
        assert_eq!(detect("TIMESTAMP,ContextTokens,GeneratedTokens"), Some("azure_csv"));
        assert_eq!(detect(r#"{"custom_id":"a","response":{"body":{}}}"#), Some("openai_batch"));
        assert_eq!(detect(r#"{"timestamp":0,"input_length":1,"output_length":2}"#), Some("mooncake"));
        assert_eq!(detect(r#"{"object":"chat.completion","choices":[],"usage":{}}"#), Some("openai_chat"));
        assert_eq!(detect(r#"{"ts":1,"response":{"type":"message","usage":{"input_tokens":1}}}"#), Some("anthropic"));
        assert_eq!(detect(r#"{"generated_text":"x","details":{"finish_reason":"eos_token"}}"#), Some("tgi"));
        assert_eq!(
            detect(r#"{"request_id":"r","inference_steps":2,"prefill_latency_ms":1,"decode_latency_ms":[1]}"#),
            Some("profile")
        );
        assert_eq!(detect(r#"{"prompt_tokens":1,"completion_tokens":2}"#), Some("canonical"));
        assert_eq!(detect("not json"), None);
    }
}
