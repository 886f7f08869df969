//! A streamed OpenAI Chat Completion saved as the server sent it: its
//! server-sent events (`data: {"object": "chat.completion.chunk", ...}`, a
//! blank line after each, `data: [DONE]` at the end), as a proxy that keeps
//! raw response bodies, `curl -N` or the openai client's raw streaming
//! response write them. The reader hands each stream over whole
//! ([`Framing::EventStream`]), and a stream is one request: the content
//! deltas joined, the finish reason of the chunk that carries one, the usage
//! of the last chunk (sent only when the request asked for
//! `stream_options.include_usage`: without it the prompt length is unknown,
//! and the output is counted by its logprobs), and a `tokens` row per entry
//! of the chunks' logprobs.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::fields::{self, TsValue};
use super::openai::{ChoiceLogprobs, ServerTimes, Usage};
use super::{Framing, LineContext, LogFormat, Parsed, Probe};
use crate::event_stream::{data_payload, is_done};
use crate::record::{RequestRecord, TokenRecord};

/// The keys of a chunk that are read; the others go to `extra`.
const KNOWN_KEYS: &[&str] = &["id", "object", "created", "model", "system_fingerprint", "choices", "usage"];

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    created: Option<f64>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Vec<ChunkChoice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    /// Groq's: its `usage` (older streams carry the usage only here).
    #[serde(default)]
    x_groq: Option<XGroq>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct XGroq {
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ChunkChoice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    logprobs: Option<ChoiceLogprobs<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
}

/// The stream's events' data, in order: each event's `data:` lines joined
/// by `\n` (comments and the other fields left out), and whether `[DONE]` ended it.
pub(crate) fn event_payloads(stream: &[u8]) -> (Vec<Vec<u8>>, bool) {
    let (mut events, mut current, mut done) = (Vec::new(), None::<Vec<u8>>, false);
    for line in stream.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            events.extend(current.take());
        } else if is_done(line) {
            done = true;
        } else if let Some(payload) = data_payload(line) {
            match current.as_mut() {
                Some(data) => {
                    data.push(b'\n');
                    data.extend_from_slice(payload);
                }
                None => current = Some(payload.to_vec()),
            }
        }
    }
    events.extend(current);
    (events, done)
}

/// What the stream's chunks add up to.
#[derive(Default)]
struct Gathered {
    id: Option<String>,
    created: Option<f64>,
    model: Option<String>,
    fingerprint: Option<String>,
    output: Option<String>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    tokens: Vec<TokenRecord<'static>>,
    extra: Map<String, Value>,
    chunks: usize,
    /// Whether a chunk had Groq's `x_groq`.
    groq: bool,
}

impl Gathered {
    fn add(&mut self, payload: &[u8]) -> Result<(), String> {
        let chunk: Chunk<'_> = fields::from_json(payload).map_err(|e| format!("invalid stream chunk: {e}"))?;
        if let Some(error) = chunk.error {
            return Err(format!("the stream ended with an error: {}", error.get()));
        }
        if chunk.object.as_deref().is_some_and(|o| o != "chat.completion.chunk") {
            return Err(format!("not a chat.completion.chunk: object {:?}", chunk.object.as_deref().unwrap_or("")));
        }
        if self.chunks == 0 {
            // Keys the chunks carry beyond those read (service_tier, obfuscation, ...).
            self.extra = fields::unread_values(payload, KNOWN_KEYS);
        }
        self.chunks += 1;
        let own = |c: Option<Cow<'_, str>>| c.map(Cow::into_owned);
        self.id = self.id.take().or(own(chunk.id));
        self.created = self.created.or(chunk.created);
        self.model = self.model.take().or(own(chunk.model));
        self.fingerprint = self.fingerprint.take().or(own(chunk.system_fingerprint));
        self.groq |= chunk.x_groq.is_some();
        if let Some(usage) = chunk.usage.or_else(|| chunk.x_groq.and_then(|x| x.usage)) {
            self.usage = Some(usage);
        }
        // One answer: the first choice (`n` > 1 interleaves others, left out).
        for choice in chunk.choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(text) = choice.delta.and_then(|d| d.content).filter(|t| !t.is_empty()) {
                self.output.get_or_insert_with(String::new).push_str(&text);
            }
            let entries = choice.logprobs.and_then(|l| l.content).unwrap_or_default();
            self.tokens.extend(entries.into_iter().map(|e| e.into_token().into_owned()));
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        Ok(())
    }
}

/// Parses one stream (the reader's record: its lines joined by `\n`).
pub fn parse(stream: &[u8], ctx: &LineContext<'_>) -> Result<RequestRecord<'static>, String> {
    let (events, done) = event_payloads(stream);
    let mut g = Gathered::default();
    for payload in &events {
        g.add(payload)?;
    }
    if g.chunks == 0 {
        return Err("no chat.completion.chunk event in the stream".into());
    }
    let (prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost, server) = match g.usage {
        Some(usage) => {
            let u = usage.counts()?;
            (
                Some(u.prompt_tokens),
                u.completion_tokens,
                u.cached_tokens,
                u.reasoning_tokens,
                u.logged_cost_usd,
                u.server,
            )
        }
        None if !g.tokens.is_empty() => (None, g.tokens.len() as i64, 0, None, None, ServerTimes::default()),
        None => {
            return Err("the stream has no usage (request it with stream_options.include_usage) \
                        and no logprobs to count its tokens by"
                .into())
        }
    };
    if !done {
        g.extra.insert("stream_done".into(), Value::Bool(false));
    }
    let ts_micros = match g.created {
        Some(secs) => TsValue::EpochMillis(secs * 1000.0).to_micros()?,
        None => ctx.base_time_micros,
    };
    Ok(RequestRecord {
        request_id: g.id.map(Cow::Owned),
        ts_micros,
        model: Cow::Owned(g.model.unwrap_or_else(|| ctx.default_model.to_string())),
        model_version: g.fingerprint.map(Cow::Owned),
        prompt_tokens,
        completion_tokens,
        cached_tokens,
        reasoning_tokens,
        ttft_ms: server.ttft_ms,
        latency_ms: server.latency_ms,
        prefill_latency_ms: server.prefill_ms,
        logged_cost_usd: cost,
        finish_reason_raw: g.finish_reason.map(Cow::Owned),
        model_output: g.output.map(Cow::Owned),
        output_is_raw: false,
        tokens: g.tokens,
        extra: (!g.extra.is_empty()).then(|| Value::Object(g.extra).to_string()),
        attribution: crate::record::Attribution {
            provider: g.groq.then_some(Cow::Borrowed("groq")),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// Whether the first event of a file's head is a `chat.completion.chunk`.
fn starts_with_a_chunk(head: &[u8]) -> bool {
    for line in head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l)) {
        if line.is_empty() || line.starts_with(b":") || line.starts_with(b"event:") || line.starts_with(b"id:") {
            continue;
        }
        return data_payload(line).is_some_and(|p| {
            fields::from_json::<Map<String, Value>>(p)
                .is_ok_and(|o| o.get("object").and_then(Value::as_str) == Some("chat.completion.chunk"))
        });
    }
    false
}

/// Streamed Chat Completions, one request per stream.
pub struct OpenAiStream;

impl LogFormat for OpenAiStream {
    fn name(&self) -> &'static str {
        "openai_stream"
    }

    fn about(&self) -> &'static str {
        "Streamed OpenAI Chat Completions saved as sent (data: chat.completion.chunk events up to data: [DONE]): one request per stream"
    }

    fn detect(&self, _line: &Probe<'_>) -> bool {
        // Recognised from the file's head only: its lines are not requests on their own.
        false
    }

    fn detect_head(&self, head: &[u8]) -> bool {
        starts_with_a_chunk(head)
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    fn parse<'a>(&self, stream: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(stream, ctx).map(Parsed::Request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(body: &str) -> String {
        format!(
            r#"data: {{"id":"c1","object":"chat.completion.chunk","created":1737710446,"model":"m","service_tier":"default",{body}}}"#
        )
    }

    #[test]
    fn a_stream_is_one_request() {
        let stream = [
            chunk(r#""choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]"#),
            chunk(
                r#""choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}]},"finish_reason":null}]"#,
            ),
            chunk(r#""choices":[{"index":0,"delta":{},"finish_reason":"stop"}]"#),
            chunk(r#""choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":4}}"#),
            "data: [DONE]".to_string(),
        ]
        .join("\n\n");
        let r = parse(stream.as_bytes(), &LineContext::default()).unwrap();
        assert_eq!((r.request_id.as_deref(), r.ts_micros, r.model.as_ref()), (Some("c1"), 1_737_710_446_000_000, "m"));
        assert_eq!((r.prompt_tokens, r.completion_tokens, r.cached_tokens), (Some(9), 1, 4));
        assert_eq!((r.model_output.as_deref(), r.finish_reason_raw.as_deref()), (Some("Hi"), Some("stop")));
        assert_eq!((r.tokens.len(), r.tokens[0].logprob), (1, Some(-0.5)));
        assert_eq!(r.extra.as_deref(), Some(r#"{"service_tier":"default"}"#));
    }

    #[test]
    fn without_usage_the_prompt_is_unknown_and_the_logprobs_count() {
        let stream = [
            chunk(r#""choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-1.0}]}}]"#),
            chunk(r#""choices":[{"index":0,"delta":{"content":"b"},"logprobs":{"content":[{"token":"b","logprob":-2.0}]},"finish_reason":"length"}]"#),
        ]
        .join("\n\n");
        let r = parse(stream.as_bytes(), &LineContext::default()).unwrap();
        assert_eq!((r.prompt_tokens, r.completion_tokens, r.model_output.as_deref()), (None, 2, Some("ab")));
        assert_eq!(r.extra.as_deref(), Some(r#"{"service_tier":"default","stream_done":false}"#));
    }

    #[test]
    fn errors_and_streams_without_counts_are_rejected() {
        let ctx = LineContext::default();
        let no_counts = chunk(r#""choices":[{"index":0,"delta":{"content":"a"}}]"#);
        assert!(parse(no_counts.as_bytes(), &ctx).unwrap_err().contains("include_usage"));
        let error = "data: {\"error\":{\"message\":\"overloaded\"}}\n\ndata: [DONE]";
        assert!(parse(error.as_bytes(), &ctx).unwrap_err().contains("overloaded"));
        assert!(parse(b"data: [DONE]", &ctx).unwrap_err().contains("no chat.completion.chunk"));
        assert!(parse(b"data: {\"object\":\"chat.completion\"}", &ctx)
            .unwrap_err()
            .contains("not a chat.completion.chunk"));
    }

    #[test]
    fn the_head_of_a_stream_is_recognised() {
        assert!(starts_with_a_chunk(b": keep-alive\n\ndata: {\"object\":\"chat.completion.chunk\"}\n\n"));
        assert!(!starts_with_a_chunk(b"data: {\"object\":\"chat.completion\"}\n"));
        assert!(!starts_with_a_chunk(b"{\"object\":\"chat.completion.chunk\"}\n"));
        let real = include_bytes!("../../../../tests/data/real/openai_stream.sse");
        assert_eq!(super::super::Format::detect_head(real).map(super::super::Format::name), Some("openai_stream"));
    }
}
