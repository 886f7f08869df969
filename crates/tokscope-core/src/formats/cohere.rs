//! Cohere chat responses: v2 (`usage.tokens`, `usage.billed_units`), v1
//! (`meta.tokens`), and v2 stream events logged one per line (the
//! `message-end` event is the request; the others are skipped). The token
//! counts are what the model read and wrote (`tokens`); what Cohere billed
//! (`billed_units`, without the system preamble) is kept in `extra`. No
//! response names its model: `--model` does.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::fields;
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::record::{Attribution, RequestRecord};

/// The keys read into columns (`message`: its text; `chat_history`, v1's
/// restatement of the conversation, is dropped).
const RESPONSE_KEYS: &[&str] =
    &["id", "response_id", "text", "finish_reason", "usage", "meta", "chat_history", "delta", "type"];
/// The v2 stream's event types.
const STREAM_EVENTS: &[&str] = &[
    "message-start",
    "content-start",
    "content-delta",
    "content-end",
    "tool-plan-delta",
    "tool-call-start",
    "tool-call-delta",
    "tool-call-end",
    "citation-start",
    "citation-end",
    "message-end",
    "debug",
];

/// The usage object of a response: v2's `usage`, v1's `meta`.
fn usage_of(obj: &Map<String, Value>) -> Option<&Value> {
    obj.get("usage")
        .or_else(|| obj.get("meta"))
        .filter(|u| u.get("tokens").is_some() || u.get("billed_units").is_some())
}

/// Whether `obj` is a Cohere chat response (a `finish_reason` with Cohere's
/// `tokens` or `billed_units`) or a v2 stream event.
fn is_cohere(obj: &Map<String, Value>) -> bool {
    (obj.get("finish_reason").is_some_and(Value::is_string) && usage_of(obj).is_some())
        || obj.get("type").and_then(Value::as_str).is_some_and(|t| STREAM_EVENTS.contains(&t))
            && (obj.contains_key("delta") || obj.contains_key("index"))
}

/// The text of a response: v1's `text`, v2's text content blocks.
fn text_of(obj: &Map<String, Value>) -> Option<String> {
    if let Some(t) = obj.get("text").and_then(Value::as_str) {
        return Some(t.to_string());
    }
    let Some(Value::Array(blocks)) = obj.get("message").and_then(|m| m.get("content")) else { return None };
    let text: String = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    (!text.is_empty()).then_some(text)
}

/// The request of a response (or of a stream's `message-end` event's delta).
fn parse_response(
    obj: &Map<String, Value>,
    raw: &str,
    ctx: &LineContext<'_>,
) -> Result<RequestRecord<'static>, String> {
    let usage = usage_of(obj).ok_or("missing usage")?;
    let counts = usage.get("tokens").or_else(|| usage.get("billed_units")).ok_or("missing usage.tokens")?;
    let count = |k: &str| {
        let v = counts.get(k).and_then(Value::as_f64).ok_or_else(|| format!("missing usage.tokens.{k}"))?;
        fields::token_count(&format!("usage.tokens.{k}"), v)
    };
    let (prompt, completion) = (count("input_tokens")?, count("output_tokens")?);
    let cached = fields::opt_token_count("usage.cached_tokens", usage.get("cached_tokens").and_then(Value::as_f64))?
        .unwrap_or(0);
    if cached > prompt {
        return Err(format!("usage.cached_tokens ({cached}) exceed usage.tokens.input_tokens ({prompt})"));
    }
    let mut extra = fields::members_to_values(fields::unread_members(raw, RESPONSE_KEYS, ""));
    if let Some(billed) = usage.get("billed_units") {
        extra.insert("billed_units".to_string(), billed.clone());
    }
    if let Some(calls) = obj.get("message").and_then(|m| m.get("tool_calls")) {
        extra.insert("tool_calls".to_string(), calls.clone());
    }
    let id = obj.get("id").or_else(|| obj.get("response_id")).and_then(Value::as_str);
    Ok(RequestRecord {
        request_id: id.map(|s| Cow::Owned(s.to_string())),
        ts_micros: ctx.base_time_micros,
        model: Cow::Owned(ctx.default_model.to_string()),
        prompt_tokens: Some(prompt),
        completion_tokens: completion,
        cached_tokens: cached,
        finish_reason_raw: obj.get("finish_reason").and_then(Value::as_str).map(|r| Cow::Owned(r.to_string())),
        model_output: text_of(obj).map(Cow::Owned),
        extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        attribution: Attribution { provider: Some(Cow::Borrowed("cohere")), ..Default::default() },
        ..Default::default()
    })
}

/// Cohere chat responses and v2 stream events.
pub struct Cohere;

impl LogFormat for Cohere {
    fn name(&self) -> &'static str {
        "cohere"
    }

    fn about(&self) -> &'static str {
        "Cohere chat responses (v2 and v1) and v2 stream events one per line (message-end is the request)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(is_cohere)
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        let raw = simdutf8::basic::from_utf8(line).map_err(|_| "invalid UTF-8".to_string())?;
        let obj: Map<String, Value> = fields::from_json(line).map_err(|e| format!("invalid Cohere response: {e}"))?;
        match obj.get("type").and_then(Value::as_str) {
            Some("message-end") => match obj.get("delta") {
                Some(Value::Object(delta)) => {
                    parse_response(delta, &Value::Object(delta.clone()).to_string(), ctx).map(Parsed::Request)
                }
                _ => Err("message-end without a delta".to_string()),
            },
            Some(t) if STREAM_EVENTS.contains(&t) => Ok(Parsed::not_a_request()),
            _ => parse_response(&obj, raw, ctx).map(Parsed::Request),
        }
    }
}
