//! Anthropic Messages responses (bare or in a gateway envelope). Anthropic
//! counts cache reads and writes apart from `input_tokens`; tokscope folds
//! them in so that `prompt_tokens` means the whole prompt for every provider.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::canonical::extra_json;
use super::envelope;
use super::fields::{self};
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::record::RequestRecord;

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    /// Each block read on its own: text blocks are the output, the others (tool calls) kept in `extra`.
    #[serde(borrow, default)]
    content: Vec<&'a RawValue>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ContentBlock<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Usage {
    input_tokens: Option<f64>,
    output_tokens: Option<f64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<f64>,
    #[serde(default)]
    cache_read_input_tokens: Option<f64>,
}

/// Parses one Messages response line.
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<RequestRecord<'a>, String> {
    let (env, body) = envelope::open(line)?;
    let msg: Message<'_> = fields::from_json(body).map_err(|e| format!("invalid Anthropic message: {e}"))?;
    let usage = msg.usage.ok_or("missing required field usage")?;
    let input = fields::token_count("usage.input_tokens", usage.input_tokens.ok_or("missing usage.input_tokens")?)?;
    let output = fields::token_count("usage.output_tokens", usage.output_tokens.ok_or("missing usage.output_tokens")?)?;
    let cache_read = fields::opt_token_count("cache_read_input_tokens", usage.cache_read_input_tokens)?.unwrap_or(0);
    let cache_write =
        fields::opt_token_count("cache_creation_input_tokens", usage.cache_creation_input_tokens)?.unwrap_or(0);
    let (mut text, mut other_blocks) = (Vec::<Cow<'_, str>>::new(), Vec::new());
    for raw in msg.content {
        let block: ContentBlock<'_> =
            serde_json::from_str(raw.get()).map_err(|e| format!("invalid content block: {e}"))?;
        match block.kind.as_deref().unwrap_or("text") {
            "text" => text.extend(block.text),
            _ => other_blocks.push(raw.get()),
        }
    }
    // What no column holds: the tool calls and other blocks, the message's and usage's other keys.
    let blocks = fields::json_array(&other_blocks);
    let mut unread = envelope::unread(line, body, MESSAGE_KEYS, &[("usage", USAGE_KEYS)]);
    unread.extend(blocks.as_deref().and_then(|b| fields::kept_member(Cow::Borrowed("content"), b)));
    let output_text = match text.len() {
        0 => None,
        1 => text.into_iter().next(),
        _ => Some(Cow::Owned(text.concat())),
    };
    let model = msg
        .model
        .or_else(|| env.request.as_ref().and_then(|r| r.model.clone()))
        .unwrap_or_else(|| Cow::Owned(ctx.default_model.to_string()));
    let (ttft_ms, latency_ms) = env.timings()?;
    let (max_tokens, invalid_max) = env.max_tokens();
    let attribution = env.attribution(Some(provider_of_message_id(msg.id.as_deref())));
    Ok(fields::with_invalid(
        RequestRecord {
            request_id: env.request_id.clone().or(msg.id),
            ts_micros: env.ts_micros(None, ctx)?,
            session_id: env.session_id.clone(),
            variant: env.variant(),
            model,
            status: env.status()?,
            prompt_tokens: Some(input + cache_read + cache_write),
            completion_tokens: output,
            cached_tokens: cache_read,
            cache_write_tokens: cache_write,
            max_tokens,
            ttft_ms,
            latency_ms,
            finish_reason_raw: msg.stop_reason,
            prompt: env.prompt()?,
            model_output: output_text,
            output_is_raw: false,
            extra: extra_json(&unread),
            attribution,
            ..Default::default()
        },
        "max_tokens",
        invalid_max,
    ))
}

/// Who served a Messages response, by its id: Claude on Bedrock and on
/// Vertex AI answer with ids of their own prefixes (`msg_bdrk_`, `msg_vrtx_`).
fn provider_of_message_id(id: Option<&str>) -> &'static str {
    match id {
        Some(id) if id.starts_with("msg_bdrk_") => "bedrock",
        Some(id) if id.starts_with("msg_vrtx_") => "vertex_ai",
        _ => "anthropic",
    }
}

/// A message's keys read into columns (`content`: its text blocks).
pub(crate) const MESSAGE_KEYS: &[&str] = &["id", "type", "role", "model", "content", "stop_reason", "usage"];
/// The usage keys read into columns.
pub(crate) const USAGE_KEYS: &[&str] =
    &["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"];

/// Anthropic Messages responses, bare or in an envelope.
pub struct Anthropic;

impl LogFormat for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn about(&self) -> &'static str {
        "Anthropic Messages response objects (bare or in a gateway envelope)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        // `type: message` is a Messages response's own discriminator; without
        // it (a gateway that dropped it), content blocks with Anthropic's
        // usage, and none of a Responses object's keys.
        line.response().is_some_and(|r| {
            r.get("type").and_then(|t| t.as_str()) == Some("message")
                || (r.get("usage").is_some_and(|u| u.get("input_tokens").is_some())
                    && r.get("content").is_some_and(Value::is_array)
                    && !r.contains_key("output")
                    && !r.contains_key("object"))
        })
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx).map(Parsed::Request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_tokens_fold_into_prompt_tokens() {
        let line = br#"{"ts":1717236000000,"latency_ms":1500,"request":{"max_tokens":1024},"response":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}],"stop_reason":"end_turn","usage":{"input_tokens":100,"output_tokens":20,"cache_creation_input_tokens":30,"cache_read_input_tokens":500}}}"#;
        let r = parse(line, &LineContext::default()).unwrap();
        assert_eq!(
            (r.prompt_tokens, r.cached_tokens, r.cache_write_tokens, r.completion_tokens),
            (Some(630), 500, 30, 20)
        );
        assert_eq!(r.model_output.as_deref(), Some("Hi there"));
        assert_eq!(r.max_tokens, Some(1024));
    }

    #[test]
    fn a_bare_message_arrives_at_the_base_time() {
        let line = br#"{"id":"msg_1","type":"message","model":"claude","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}"#;
        let ctx = LineContext { base_time_micros: 1_717_200_000_000_000, ..Default::default() };
        assert_eq!(parse(line, &ctx).unwrap().ts_micros, 1_717_200_000_000_000);
    }
}
