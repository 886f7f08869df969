//! Mooncake trace JSON lines (FAST'25): `timestamp` (milliseconds since the
//! trace start, so rows are placed at `--base-time` + timestamp),
//! `input_length`, `output_length`, `hash_ids` (512-token KV-cache blocks,
//! kept in `extra` for prefix-reuse analysis, with any other key).

use std::borrow::Cow;

use serde::Deserialize;

use super::canonical::extra_json;
use super::fields::{self, token_count};
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::record::RequestRecord;

#[derive(Deserialize)]
struct MooncakeLine {
    timestamp: f64,
    input_length: f64,
    output_length: f64,
}

/// The keys read into columns; `hash_ids` and any other key go to `extra`.
const KEYS: &[&str] = &["timestamp", "input_length", "output_length"];

/// Parses one Mooncake line.
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<RequestRecord<'a>, String> {
    let m: MooncakeLine = fields::from_json(line).map_err(|e| format!("invalid Mooncake line: {e}"))?;
    if !m.timestamp.is_finite() || m.timestamp < 0.0 {
        return Err(format!("timestamp must be non-negative milliseconds, got {}", m.timestamp));
    }
    Ok(RequestRecord {
        ts_micros: ctx.base_time_micros + (m.timestamp * 1000.0).round() as i64,
        model: Cow::Owned(ctx.default_model.to_string()),
        prompt_tokens: Some(token_count("input_length", m.input_length)?),
        completion_tokens: token_count("output_length", m.output_length)?,
        extra: std::str::from_utf8(line).ok().and_then(|text| extra_json(&fields::unread_members(text, KEYS, ""))),
        ..Default::default()
    })
}

/// Mooncake trace lines, recognised by `input_length` and `output_length`.
pub struct Mooncake;

impl LogFormat for Mooncake {
    fn name(&self) -> &'static str {
        "mooncake"
    }

    fn about(&self) -> &'static str {
        "Mooncake trace JSON lines (FAST'25): relative ms timestamps, input/output lengths, KV block hashes"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(|o| o.contains_key("input_length") && o.contains_key("output_length"))
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx).map(Parsed::Request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ids_and_any_other_key_are_kept() {
        let line =
            br#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47], "session": 3}"#;
        let ctx = LineContext { base_time_micros: 1_000_000, ..Default::default() };
        let r = parse(line, &ctx).unwrap();
        assert_eq!((r.ts_micros, r.prompt_tokens, r.completion_tokens), (28_482_000, Some(6955), 52));
        assert_eq!(r.extra.as_deref(), Some(r#"{"hash_ids":[46, 47],"session":3}"#));
        let bare = parse(br#"{"timestamp": 0, "input_length": 1, "output_length": 2}"#, &ctx).unwrap();
        assert_eq!(bare.extra, None);
    }
}
