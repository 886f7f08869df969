//! The input formats and their detection. Adding a format is one new module
//! under `ingest/` plus one arm in each `match` here.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::record::RequestRecord;

use super::{anthropic, azure, canonical, fields, mooncake, openai, tgi};

/// A supported access-log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// tokscope's canonical full-token JSON lines.
    Canonical,
    /// OpenAI Chat Completions response objects (optionally in an envelope).
    OpenAiChat,
    /// OpenAI Batch API output lines.
    OpenAiBatch,
    /// Anthropic Messages response objects (optionally in an envelope).
    Anthropic,
    /// Hugging Face TGI `/generate` responses with `details`.
    Tgi,
    /// Azure LLM inference trace CSV (2023).
    AzureCsv,
    /// Mooncake trace JSON lines.
    Mooncake,
}

/// Every format, in detection order.
pub const ALL_FORMATS: [Format; 7] =
    [Format::Canonical, Format::OpenAiChat, Format::OpenAiBatch, Format::Anthropic, Format::Tgi, Format::AzureCsv, Format::Mooncake];

impl Format {
    /// The name used by `--format` and in the `source_format` column.
    pub fn name(self) -> &'static str {
        match self {
            Format::Canonical => "canonical",
            Format::OpenAiChat => "openai_chat",
            Format::OpenAiBatch => "openai_batch",
            Format::Anthropic => "anthropic",
            Format::Tgi => "tgi",
            Format::AzureCsv => "azure_csv",
            Format::Mooncake => "mooncake",
        }
    }

    /// Guesses the format of a file from one of its first lines.
    pub fn detect(line: &[u8]) -> Option<Format> {
        if azure::is_header(line) {
            return Some(Format::AzureCsv);
        }
        let value: serde_json::Value = serde_json::from_slice(line).ok()?;
        let obj = value.as_object()?;
        if obj.contains_key("custom_id") && obj.contains_key("response") {
            return Some(Format::OpenAiBatch);
        }
        if obj.contains_key("input_length") && obj.contains_key("output_length") {
            return Some(Format::Mooncake);
        }
        // An envelope: decide by the wrapped response.
        let inner = obj.get("response").and_then(|r| r.as_object()).unwrap_or(obj);
        if inner.get("object").and_then(|o| o.as_str()) == Some("chat.completion")
            || (inner.contains_key("choices") && inner.contains_key("usage"))
        {
            return Some(Format::OpenAiChat);
        }
        if inner.get("type").and_then(|o| o.as_str()) == Some("message")
            || inner.get("usage").is_some_and(|u| u.get("input_tokens").is_some())
        {
            return Some(Format::Anthropic);
        }
        if inner.contains_key("generated_text") || inner.get("details").is_some_and(|d| d.get("finish_reason").is_some()) {
            return Some(Format::Tgi);
        }
        if obj.contains_key("prompt_tokens") || obj.contains_key("completion_tokens") {
            return Some(Format::Canonical);
        }
        None
    }

    /// Parses one non-blank line of this format. Lines written by Python's
    /// `json.dumps` may hold the non-JSON numbers `NaN` and `Infinity` (in
    /// logprobs, typically): such a line is parsed again with them read as
    /// `null`, and the request keeps a `non_finite_number` token issue.
    pub fn parse<'a>(self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        match self.parse_strict(line, ctx) {
            Err(e) if fields::has_non_finite_literal(line) => {
                let cleaned = fields::null_non_finite_literals(line);
                match self.parse_strict(&cleaned, ctx) {
                    Ok(Parsed::Request(rec)) => {
                        let mut rec = rec.into_owned();
                        rec.token_issues.push(fields::issue::NON_FINITE_NUMBER.to_string());
                        Ok(Parsed::Request(rec))
                    }
                    Ok(Parsed::Skip) => Ok(Parsed::Skip),
                    Err(_) => Err(e),
                }
            }
            other => other,
        }
    }

    fn parse_strict<'a>(self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        match self {
            Format::Canonical => canonical::parse(line).map(Parsed::Request),
            Format::OpenAiChat => openai::parse_chat(line).map(Parsed::Request),
            Format::OpenAiBatch => openai::parse_batch(line).map(Parsed::Request),
            Format::Anthropic => anthropic::parse(line).map(Parsed::Request),
            Format::Tgi => tgi::parse(line).map(Parsed::Request),
            Format::AzureCsv => azure::parse(line, ctx),
            Format::Mooncake => mooncake::parse(line, ctx).map(Parsed::Request),
        }
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
        ALL_FORMATS.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<_> = ALL_FORMATS.iter().map(|f| f.name()).collect();
            Error::Config(format!("unknown format {s:?}; expected one of {}", names.join(", ")))
        })
    }
}

/// What a line turned into.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// A request row.
    Request(RequestRecord<'a>),
    /// A line that carries no request, such as a CSV header.
    Skip,
}

/// Per-file settings a parser may need.
#[derive(Debug, Clone)]
pub struct LineContext<'a> {
    /// Model name for formats that log none (traces); `None` derives one from the file name.
    pub default_model: &'a str,
    /// Start of a trace whose timestamps are relative (Mooncake), microseconds since the epoch.
    pub base_time_micros: i64,
}
