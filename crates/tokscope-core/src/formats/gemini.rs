//! Gemini and Vertex AI `generateContent` responses, and their streams
//! (`streamGenerateContent`): a JSON array of chunks on one line is one
//! request; chunks one per line give one request, from the chunk that
//! carries the finish reason; a stream saved as its server-sent events
//! (`alt=sse`, `gemini_stream`) gives one request per response id. Gemini counts thinking tokens apart from the
//! candidates' tokens; tokscope folds them in, so that `completion_tokens`
//! is the whole output.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::fields;
use super::openai_stream::event_payloads;
use super::{Framing, LineContext, LogFormat, Parsed, Probe, Row};
use crate::event_stream::data_payload;
use crate::record::{Attribution, RequestRecord};

/// The response keys read into columns; the others go to `extra`.
const RESPONSE_KEYS: &[&str] = &["candidates", "usageMetadata", "modelVersion", "responseId", "createTime"];

/// Whether `obj` is a `generateContent` response or stream chunk: Gemini's
/// `usageMetadata` with its `promptTokenCount`, or `candidates` with a
/// `modelVersion`.
fn is_response(obj: &Map<String, Value>) -> bool {
    obj.get("usageMetadata").is_some_and(|u| u.get("promptTokenCount").is_some() || u.get("totalTokenCount").is_some())
        || (obj.get("candidates").is_some_and(Value::is_array) && obj.get("modelVersion").is_some())
}

/// A token count of `usageMetadata`; Gemini leaves out the counts that are 0.
fn count(usage: &Value, key: &str) -> Result<i64, String> {
    Ok(fields::opt_token_count(&format!("usageMetadata.{key}"), usage.get(key).and_then(Value::as_f64))?.unwrap_or(0))
}

/// The first candidate's finish reason, else the prompt's block reason (a
/// prompt blocked by a safety filter has no candidate).
fn finish_reason(resp: &Value) -> Option<&str> {
    resp.get("candidates")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("finishReason"))
        .and_then(Value::as_str)
        .or_else(|| resp.get("promptFeedback")?.get("blockReason")?.as_str())
}

/// The first candidate's text parts (not its thoughts), joined.
fn text_of(resp: &Value) -> String {
    let parts =
        resp.get("candidates").and_then(|c| c.get(0)).and_then(|c| c.get("content")).and_then(|c| c.get("parts"));
    let Some(Value::Array(parts)) = parts else { return String::new() };
    parts
        .iter()
        .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

/// The request of a response, or of a stream's chunks (`chunks`, in order:
/// the last one's usage, the finish reason of the one that has it, the
/// texts joined).
fn record(chunks: &[Value], raw: &str, ctx: &LineContext<'_>) -> Result<RequestRecord<'static>, String> {
    let last = chunks.last().ok_or("an empty stream")?;
    let usage = chunks.iter().rev().find_map(|c| c.get("usageMetadata")).ok_or("missing usageMetadata")?;
    if usage.get("promptTokenCount").is_none() {
        return Err("missing usageMetadata.promptTokenCount".to_string());
    }
    // `promptTokenCount` includes the cached content; tool results are counted apart.
    let prompt = count(usage, "promptTokenCount")? + count(usage, "toolUsePromptTokenCount")?;
    let cached = count(usage, "cachedContentTokenCount")?;
    let thoughts = usage.get("thoughtsTokenCount").map(|_| count(usage, "thoughtsTokenCount")).transpose()?;
    let completion = count(usage, "candidatesTokenCount")? + thoughts.unwrap_or(0);
    let text: String = chunks.iter().map(text_of).collect();
    let finish = chunks.iter().rev().find_map(finish_reason);
    // Only Vertex AI's responses carry their `createTime`.
    let provider = if last.get("createTime").is_some() { "vertex_ai" } else { "gemini" };
    let ts = match last.get("createTime").and_then(Value::as_str) {
        Some(t) => fields::parse_datetime_micros(t)?,
        None => ctx.base_time_micros,
    };
    let string = |k: &str| last.get(k).and_then(Value::as_str).map(|s| Cow::Owned(s.to_string()));
    let extra = fields::members_to_values(fields::unread_members(raw, RESPONSE_KEYS, ""));
    Ok(RequestRecord {
        request_id: string("responseId"),
        ts_micros: ts,
        model: string("modelVersion").unwrap_or_else(|| Cow::Owned(ctx.default_model.to_string())),
        prompt_tokens: Some(prompt),
        completion_tokens: completion,
        cached_tokens: cached,
        reasoning_tokens: thoughts,
        finish_reason_raw: finish.map(|f| Cow::Owned(f.to_string())),
        model_output: (!text.is_empty()).then_some(Cow::Owned(text)),
        extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        attribution: Attribution { provider: Some(Cow::Borrowed(provider)), ..Default::default() },
        ..Default::default()
    })
}

/// Gemini / Vertex AI `generateContent` responses and stream chunks.
pub struct Gemini;

impl LogFormat for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn about(&self) -> &'static str {
        "Gemini / Vertex AI generateContent responses, and their streams (a JSON array of chunks, or one chunk per line)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.record().is_some_and(is_response)
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        let text = simdutf8::basic::from_utf8(line).map_err(|_| "invalid UTF-8".to_string())?;
        let value: Value = fields::from_json(line).map_err(|e| format!("invalid Gemini response: {e}"))?;
        match value {
            // A stream as the REST API returns it: one request.
            Value::Array(chunks) => {
                let raw = chunks.last().map(Value::to_string).unwrap_or_default();
                record(&chunks, &raw, ctx).map(Parsed::Request)
            }
            // A chunk of a stream logged one per line, before the last: its
            // counts are partial, and the last chunk's are the request's.
            chunk if finish_reason(&chunk).is_none() && chunk.get("candidates").is_some() => {
                Ok(Parsed::not_a_request())
            }
            resp => record(std::slice::from_ref(&resp), text, ctx).map(Parsed::Request),
        }
    }
}

/// Whether the first event of a file's head is a Gemini chunk.
fn starts_with_a_chunk(head: &[u8]) -> bool {
    let first = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .find(|l| !(l.is_empty() || l.starts_with(b":") || l.starts_with(b"event:") || l.starts_with(b"id:")));
    first.and_then(data_payload).is_some_and(|p| {
        fields::from_json::<Map<String, Value>>(p).is_ok_and(|o| is_response(&o) && o.contains_key("candidates"))
    })
}

/// Gemini / Vertex AI streams saved as their server-sent events.
pub struct GeminiStream;

impl LogFormat for GeminiStream {
    fn name(&self) -> &'static str {
        "gemini_stream"
    }

    fn about(&self) -> &'static str {
        "Gemini / Vertex AI streamGenerateContent saved as its server-sent events (alt=sse), one request per response id"
    }

    /// Never from a line: a stream is recognised from the file head.
    fn detect(&self, _line: &Probe<'_>) -> bool {
        false
    }

    fn detect_head(&self, head: &[u8]) -> bool {
        starts_with_a_chunk(head)
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    fn parse<'a>(&self, stream: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        // Gemini ends a stream without `[DONE]`: streams saved one after
        // another are one record, told apart by their chunks' `responseId`.
        let (payloads, _) = event_payloads(stream);
        let mut streams: Vec<(Option<String>, Vec<Value>)> = Vec::new();
        for payload in &payloads {
            let chunk: Value = fields::from_json(payload).map_err(|e| format!("invalid Gemini chunk: {e}"))?;
            let id = chunk.get("responseId").and_then(Value::as_str).map(str::to_string);
            match streams.last_mut() {
                Some((last, chunks)) if *last == id || id.is_none() => chunks.push(chunk),
                _ => streams.push((id, vec![chunk])),
            }
        }
        if streams.is_empty() {
            return Err("no Gemini chunk in the stream".to_string());
        }
        let mut rows = Vec::new();
        for (_, chunks) in &streams {
            let raw = chunks.last().map(Value::to_string).unwrap_or_default();
            rows.push(Row::Request(record(chunks, &raw, ctx)?));
        }
        Ok(Parsed::Rows { rows, skipped: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> RequestRecord<'static> {
        match Gemini.parse(line.as_bytes(), &LineContext::default()) {
            Ok(Parsed::Request(r)) => r.into_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cached_content_is_within_the_prompt_and_tool_prompts_are_added() {
        let r = one(
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"toolUsePromptTokenCount":7,"candidatesTokenCount":5},"modelVersion":"gemini-2.5-pro"}"#,
        );
        assert_eq!(
            (r.prompt_tokens, r.cached_tokens, r.completion_tokens, r.reasoning_tokens),
            (Some(107), 60, 5, None)
        );
        assert_eq!(r.finish_reason_raw.as_deref(), Some("MAX_TOKENS"));
    }

    #[test]
    fn a_blocked_prompt_has_its_block_reason() {
        let r = one(
            r#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}"#,
        );
        assert_eq!((r.prompt_tokens, r.completion_tokens), (Some(8), 0));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("SAFETY"));
    }

    #[test]
    fn thought_parts_are_not_output() {
        let r = one(
            r#"{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"Yes"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"thoughtsTokenCount":3}}"#,
        );
        assert_eq!(r.model_output.as_deref(), Some("Yes"));
        assert_eq!((r.completion_tokens, r.reasoning_tokens), (4, Some(3)));
    }
}
