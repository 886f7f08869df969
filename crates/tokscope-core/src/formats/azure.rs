//! Azure LLM inference trace CSV (Splitwise, 2023): `TIMESTAMP,ContextTokens,
//! GeneratedTokens`, zone-less timestamps with 7-digit fractions taken as UTC.
//! The trace names no model: rows get the `--model` default or `azure:<file stem>`.

use std::borrow::Cow;

use super::fields::{parse_datetime_micros, token_count};
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::record::RequestRecord;

const HEADER: &[u8] = b"TIMESTAMP,ContextTokens,GeneratedTokens";

/// True for the trace's header line.
pub fn is_header(line: &[u8]) -> bool {
    line.trim_ascii() == HEADER
}

/// Parses one CSV line (the header parses to [`Parsed::Skip`]).
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
    if is_header(line) {
        return Ok(Parsed::Skip);
    }
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8: {e}"))?;
    let cols: Vec<&str> = text.split(',').map(str::trim).collect();
    let [ts, context, generated] = cols.as_slice() else {
        return Err(format!("expected 3 columns (TIMESTAMP,ContextTokens,GeneratedTokens), found {}", cols.len()));
    };
    let num = |name: &str, v: &str| {
        v.parse::<f64>().map_err(|_| format!("{name} is not a number: {v:?}")).and_then(|x| token_count(name, x))
    };
    Ok(Parsed::Request(RequestRecord {
        ts_micros: parse_datetime_micros(ts)?,
        model: Cow::Owned(ctx.default_model.to_string()),
        prompt_tokens: Some(num("ContextTokens", context)?),
        completion_tokens: num("GeneratedTokens", generated)?,
        ..Default::default()
    }))
}

/// The Azure trace CSV, recognised by its header line.
pub struct AzureCsv;

impl LogFormat for AzureCsv {
    fn name(&self) -> &'static str {
        "azure_csv"
    }

    fn about(&self) -> &'static str {
        "Azure LLM inference trace CSV (2023): TIMESTAMP,ContextTokens,GeneratedTokens"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        is_header(line.line())
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx)
    }
}
