//! Ollama `/api/chat` and `/api/generate` responses. Durations are in
//! nanoseconds and `created_at` is when the reply ended, so the request
//! arrived `total_duration` before it. A streamed reply logged chunk by
//! chunk (newline-delimited JSON) is one request: its last chunk (`done:
//! true`) carries the counts and durations. Among other lines (`ollama`)
//! the other chunks are skipped; a file that starts with a stream
//! (`ollama_stream`) is read stream by stream, each chunk's `created_at` the
//! time its token was sent (a `tokens` row each).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::fields;
use super::{Framing, LineContext, LogFormat, Parsed, Probe, Row};
use crate::record::{Attribution, RequestRecord, TokenRecord};

/// The keys read into columns (`context`, the generate reply's token ids
/// for the next call, is dropped: it restates the conversation).
const RESPONSE_KEYS: &[&str] = &[
    "model",
    "created_at",
    "message",
    "response",
    "done",
    "done_reason",
    "total_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "context",
];
/// The message keys read into columns.
const MESSAGE_KEYS: &[&str] = &["role", "content"];

/// Whether `obj` is an Ollama reply or chunk: `done`, `created_at` and a
/// `message` (chat) or `response` (generate).
fn is_reply(obj: &Map<String, Value>) -> bool {
    obj.get("done").is_some_and(Value::is_boolean)
        && obj.get("created_at").is_some_and(Value::is_string)
        && (obj.contains_key("message") || obj.get("response").is_some_and(Value::is_string))
}

/// A duration logged in nanoseconds, in milliseconds rounded to the microsecond.
fn ns_to_ms(field: &str, v: Option<&Value>) -> Result<Option<f64>, String> {
    let ns = v.map(|v| v.as_f64().ok_or_else(|| format!("{field} must be a number of nanoseconds"))).transpose()?;
    fields::duration_ms(field, ns.map(|ns| (ns / 1e3).round() / 1e3))
}

/// One reply (or its last chunk).
fn parse_reply(obj: &Map<String, Value>, raw: &str, ctx: &LineContext<'_>) -> Result<RequestRecord<'static>, String> {
    let count = |k: &str| fields::opt_token_count(k, obj.get(k).and_then(Value::as_f64));
    let completion = count("eval_count")?.ok_or("missing eval_count")?;
    let latency = ns_to_ms("total_duration", obj.get("total_duration"))?;
    let ended = fields::parse_datetime_micros(obj.get("created_at").and_then(Value::as_str).unwrap_or_default())?;
    // Arrival: the reply's end less its total duration.
    let ts = ended - latency.map_or(0, |ms| (ms * 1e3).round() as i64);
    let text = obj
        .get("message")
        .and_then(|m| m.get("content"))
        .or_else(|| obj.get("response"))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty());
    let extra = fields::members_to_values(fields::unread_nested(raw, RESPONSE_KEYS, &[("message", MESSAGE_KEYS)], ""));
    Ok(RequestRecord {
        ts_micros: ts,
        model: obj
            .get("model")
            .and_then(Value::as_str)
            .map_or_else(|| Cow::Owned(ctx.default_model.to_string()), |m| Cow::Owned(m.to_string())),
        prompt_tokens: count("prompt_eval_count")?,
        completion_tokens: completion,
        latency_ms: latency,
        prefill_latency_ms: ns_to_ms("prompt_eval_duration", obj.get("prompt_eval_duration"))?,
        finish_reason_raw: obj.get("done_reason").and_then(Value::as_str).map(|r| Cow::Owned(r.to_string())),
        model_output: text.map(|t| Cow::Owned(t.to_string())),
        extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        attribution: Attribution { provider: Some(Cow::Borrowed("ollama")), ..Default::default() },
        ..Default::default()
    })
}

/// Ollama chat and generate replies.
pub struct Ollama;

impl LogFormat for Ollama {
    fn name(&self) -> &'static str {
        "ollama"
    }

    fn about(&self) -> &'static str {
        "Ollama /api/chat and /api/generate replies (a streamed reply's chunks one per line: its last one is the request)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(is_reply)
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        let raw = simdutf8::basic::from_utf8(line).map_err(|_| "invalid UTF-8".to_string())?;
        let obj: Map<String, Value> = fields::from_json(line).map_err(|e| format!("invalid Ollama reply: {e}"))?;
        match obj.get("done").and_then(Value::as_bool) {
            Some(true) => parse_reply(&obj, raw, ctx).map(Parsed::Request),
            Some(false) => Ok(Parsed::not_a_request()),
            None => Err("missing done".to_string()),
        }
    }
}

/// The request of one stream's chunks (`lines`, the last one `done`): the
/// last chunk's counts and durations, the texts joined, and a token row per
/// chunk with text, sent at its `created_at`.
fn parse_stream(lines: &[&[u8]], ctx: &LineContext<'_>) -> Result<RequestRecord<'static>, String> {
    let chunks: Vec<Map<String, Value>> = lines
        .iter()
        .map(|l| fields::from_json(l).map_err(|e| format!("invalid Ollama chunk: {e}")))
        .collect::<Result<_, _>>()?;
    let last = chunks.last().ok_or("an empty stream")?;
    if last.get("done").and_then(Value::as_bool) != Some(true) {
        return Err("the stream ends before its last chunk (done: true)".to_string());
    }
    let raw = Value::Object(last.clone()).to_string();
    let mut rec = parse_reply(last, &raw, ctx)?;
    let (mut text, mut tokens, mut previous) = (String::new(), Vec::new(), None::<f64>);
    for chunk in &chunks[..chunks.len() - 1] {
        let piece = chunk
            .get("message")
            .and_then(|m| m.get("content"))
            .or_else(|| chunk.get("response"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if piece.is_empty() {
            continue;
        }
        let sent = fields::parse_datetime_micros(chunk.get("created_at").and_then(Value::as_str).unwrap_or_default())?;
        let emitted = fields::elapsed_ms("created_at - arrival", rec.ts_micros, sent)?;
        text.push_str(piece);
        tokens.push(TokenRecord {
            token: Some(Cow::Owned(piece.to_string())),
            emitted_ms: Some(emitted),
            itl_ms: previous.map(|p| ((emitted - p) * 1e3).round() / 1e3),
            ..Default::default()
        });
        previous = Some(emitted);
    }
    rec.ttft_ms = tokens.first().and_then(|t| t.emitted_ms);
    rec.model_output = (!text.is_empty()).then_some(Cow::Owned(text));
    rec.tokens = tokens;
    Ok(rec)
}

/// Whether a file's first line is a streamed chunk before the last.
fn starts_with_a_stream(head: &[u8]) -> bool {
    let first = head.split(|&b| b == b'\n').map(<[u8]>::trim_ascii).find(|l| !l.is_empty());
    first.is_some_and(|l| {
        fields::from_json::<Map<String, Value>>(l)
            .is_ok_and(|o| is_reply(&o) && o.get("done").and_then(Value::as_bool) == Some(false))
    })
}

/// Ollama streamed replies saved as received: newline-delimited chunks.
pub struct OllamaStream;

impl LogFormat for OllamaStream {
    fn name(&self) -> &'static str {
        "ollama_stream"
    }

    fn about(&self) -> &'static str {
        "Ollama streamed replies saved as received (newline-delimited chunks), one request per stream, a token row per chunk"
    }

    /// Never from a line: a stream is recognised from the file head.
    fn detect(&self, _line: &Probe<'_>) -> bool {
        false
    }

    fn detect_head(&self, head: &[u8]) -> bool {
        starts_with_a_stream(head)
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    fn parse<'a>(&self, stream: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        let lines: Vec<&[u8]> =
            stream.split(|&b| b == b'\n').map(<[u8]>::trim_ascii).filter(|l| !l.is_empty()).collect();
        Ok(Parsed::Rows { rows: vec![Row::Request(parse_stream(&lines, ctx)?)], skipped: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_arrived_its_total_duration_before_created_at() {
        let line = br#"{"model":"m","created_at":"2024-01-01T00:00:10Z","response":"x","done":true,"total_duration":2500000000,"prompt_eval_count":3,"eval_count":4}"#;
        let Ok(Parsed::Request(r)) = Ollama.parse(line, &LineContext::default()) else { panic!() };
        // 2024-01-01T00:00:10Z is 1704067210 s; 2.5 s before it.
        assert_eq!(r.ts_micros, 1_704_067_207_500_000);
        assert_eq!((r.latency_ms, r.prompt_tokens, r.completion_tokens), (Some(2500.0), Some(3), 4));
    }
}
