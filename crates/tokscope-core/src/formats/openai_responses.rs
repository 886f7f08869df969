//! OpenAI Responses API objects (`object: "response"`), bare or in a gateway
//! envelope. `usage.input_tokens` includes `input_tokens_details.cached_tokens`
//! (as Chat Completions' `prompt_tokens` does) and `output_tokens` includes
//! reasoning. There is no finish reason: `status` and
//! `incomplete_details.reason` say how the response ended, and are mapped to one.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::canonical::extra_json;
use super::envelope;
use super::fields::{self, LogprobEntry};
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::record::RequestRecord;

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    created_at: Option<f64>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    incomplete_details: Option<IncompleteDetails<'a>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    max_output_tokens: Option<f64>,
    #[serde(borrow, default)]
    output: Vec<OutputItem<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct IncompleteDetails<'a> {
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct OutputItem<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    content: Vec<ContentPart<'a>>,
}

#[derive(Deserialize)]
struct ContentPart<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    logprobs: Option<Vec<LogprobEntry<'a>>>,
    /// Citations of the text (web and file search).
    #[serde(borrow, default)]
    annotations: Option<&'a RawValue>,
}

/// A response's keys read into columns (`output`: the text of its messages,
/// the rest kept by [`other_output`]; `id` only when it is the request id).
const RESPONSE_KEYS: &[&str] =
    &["object", "created_at", "status", "incomplete_details", "model", "max_output_tokens", "output", "usage"];
/// The usage keys read into columns.
const USAGE_KEYS: &[&str] =
    &["input_tokens", "output_tokens", "total_tokens", "input_tokens_details", "output_tokens_details"];

/// What of `output` is not the output text: the items other than messages
/// (function and tool calls, reasoning) as logged, and the parts of messages
/// other than plain text (a refusal; a text part with annotations, kept
/// whole for its citations), in order; `None` when there is none.
fn other_output(output: &RawValue) -> Option<Box<RawValue>> {
    #[derive(Deserialize)]
    struct Item<'a> {
        #[serde(borrow, default, rename = "type")]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        content: Vec<&'a RawValue>,
    }
    let items: Vec<&RawValue> = serde_json::from_str(output.get()).ok()?;
    let mut kept = Vec::new();
    for raw in items {
        let Ok(item) = serde_json::from_str::<Item<'_>>(raw.get()) else { continue };
        if item.kind.as_deref() != Some("message") {
            kept.push(raw.get());
            continue;
        }
        for part in item.content {
            let plain = serde_json::from_str::<ContentPart<'_>>(part.get())
                .is_ok_and(|p| p.kind == "output_text" && p.annotations.is_none_or(fields::is_empty_value));
            if !plain {
                kept.push(part.get());
            }
        }
    }
    fields::json_array(&kept)
}

#[derive(Deserialize)]
struct Usage {
    input_tokens: Option<f64>,
    output_tokens: Option<f64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<f64>,
    /// Cache writes, reported for model families that bill them.
    #[serde(default)]
    cache_write_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<f64>,
}

/// The finish reason a response's `status` and output stand for (docs/metrics.md).
fn finish_reason<'a>(resp: &Response<'a>, has_text: bool) -> Cow<'a, str> {
    let reason = resp.incomplete_details.as_ref().and_then(|d| d.reason.clone());
    match resp.status.as_deref() {
        Some("incomplete") => reason.unwrap_or(Cow::Borrowed("incomplete")),
        Some("failed") => Cow::Borrowed("error"),
        Some("cancelled") => Cow::Borrowed("cancelled"),
        // `completed`, or a response without status.
        _ if has_text => Cow::Borrowed("stop"),
        _ if resp.output.iter().any(|i| i.kind.ends_with("_call")) => Cow::Borrowed("tool_calls"),
        _ if resp.output.iter().flat_map(|i| &i.content).any(|p| p.kind == "refusal") => Cow::Borrowed("refusal"),
        _ => Cow::Borrowed("stop"),
    }
}

/// Parses one Responses API line: a request, a skipped in-flight snapshot, or an error.
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
    let (env, body) = envelope::open(line)?;
    let resp: Response<'_> = fields::from_json(body).map_err(|e| format!("invalid Responses API object: {e}"))?;
    // A background response polled before it finished: the final object is logged later.
    if matches!(resp.status.as_deref(), Some("in_progress" | "queued")) {
        return Ok(Parsed::not_a_request());
    }
    let Some(usage) = resp.usage.as_ref() else {
        let error = resp.error.map(|e| e.get().to_string()).unwrap_or_else(|| "no error given".into());
        return Err(format!(
            "response {} ({}) has no usage: {error}",
            resp.id.as_deref().unwrap_or("without id"),
            resp.status.as_deref().unwrap_or("no status")
        ));
    };
    let input = fields::token_count("usage.input_tokens", usage.input_tokens.ok_or("missing usage.input_tokens")?)?;
    let output = fields::token_count("usage.output_tokens", usage.output_tokens.ok_or("missing usage.output_tokens")?)?;
    let details = usage.input_tokens_details.as_ref();
    let cached = fields::opt_token_count("cached_tokens", details.and_then(|d| d.cached_tokens))?.unwrap_or(0);
    let cache_write =
        fields::opt_token_count("cache_write_tokens", details.and_then(|d| d.cache_write_tokens))?.unwrap_or(0);
    if cached + cache_write > input {
        return Err(format!(
            "cached_tokens ({cached}) + cache_write_tokens ({cache_write}) exceed input_tokens ({input})"
        ));
    }
    let reasoning = fields::opt_token_count(
        "reasoning_tokens",
        usage.output_tokens_details.as_ref().and_then(|d| d.reasoning_tokens),
    )?;

    let has_text =
        resp.output.iter().filter(|i| i.kind == "message").flat_map(|i| &i.content).any(|p| p.kind == "output_text");
    let finish = finish_reason(&resp, has_text);
    let model = resp.model.clone().or_else(|| env.request.as_ref().and_then(|r| r.model.clone()));
    let (max_output_tokens, created_at) = (resp.max_output_tokens, resp.created_at);
    let Response { id, output: items, .. } = resp;
    let (mut text, mut logprobs): (Vec<Cow<'_, str>>, Option<Vec<LogprobEntry<'_>>>) = (Vec::new(), None);
    for item in items.into_iter().filter(|i| i.kind == "message") {
        for part in item.content.into_iter().filter(|p| p.kind == "output_text") {
            text.extend(part.text);
            if let Some(lp) = part.logprobs {
                logprobs.get_or_insert_with(Vec::new).extend(lp);
            }
        }
    }
    // What no column holds: the envelope's other keys, the response's (its
    // own id when the gateway's is the request id), its usage's, and the
    // output that is not text.
    let read: Vec<&str> = RESPONSE_KEYS.iter().copied().chain(env.request_id.is_none().then_some("id")).collect();
    let mut unread = envelope::unread(line, body, &read, &[("usage", USAGE_KEYS)]);
    #[derive(Deserialize)]
    struct Output<'a> {
        #[serde(borrow, default)]
        output: Option<&'a RawValue>,
    }
    let other = fields::from_json::<Output<'_>>(body).ok().and_then(|o| o.output).and_then(other_output);
    unread.extend(other.as_deref().and_then(|o| fields::kept_member(Cow::Borrowed("output"), o)));
    let request_id = env.request_id.clone().or(id);
    let model_output = match text.len() {
        0 => None,
        1 => text.pop(),
        _ => Some(Cow::Owned(text.concat())),
    };
    let (env_max, env_invalid) = env.max_tokens();
    let (own_max, own_invalid) = fields::lenient_token_count("max_output_tokens", max_output_tokens);
    let max_tokens = own_max.or(env_max);
    let invalid_max = own_invalid.or(env_invalid);
    let (ttft_ms, latency_ms) = env.timings()?;
    Ok(Parsed::Request(fields::with_invalid(
        RequestRecord {
            request_id,
            ts_micros: env.ts_micros(created_at, ctx)?,
            session_id: env.session_id.clone(),
            model: model.ok_or("missing required field model")?,
            status: env.status()?,
            prompt_tokens: Some(input),
            completion_tokens: output,
            cached_tokens: cached,
            cache_write_tokens: cache_write,
            reasoning_tokens: reasoning,
            max_tokens,
            ttft_ms,
            latency_ms,
            finish_reason_raw: Some(finish),
            prompt: env.prompt()?,
            model_output,
            output_is_raw: false,
            tokens: fields::merge_token_data(logprobs, None, None, &mut Vec::new()),
            extra: extra_json(&unread),
            attribution: env.attribution(None),
            ..Default::default()
        },
        "max_tokens",
        invalid_max,
    )))
}

/// OpenAI Responses API objects, bare or in an envelope.
pub struct OpenAiResponses;

impl LogFormat for OpenAiResponses {
    fn name(&self) -> &'static str {
        "openai_responses"
    }

    fn about(&self) -> &'static str {
        "OpenAI Responses API objects (bare or in a gateway envelope): status mapped to a finish reason"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.response().is_some_and(|r| {
            r.get("object").and_then(Value::as_str) == Some("response")
                || (r.get("output").is_some_and(Value::is_array)
                    && r.contains_key("status")
                    && r.get("usage").is_some_and(|u| u.get("input_tokens").is_some()))
        })
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::summary;
    use super::*;

    const SAMPLE: &str = include_str!("../../../../sample_logs/openai_responses.jsonl");

    fn line(n: usize) -> Result<Parsed<'static>, String> {
        parse(SAMPLE.lines().nth(n - 1).expect("sample line").as_bytes(), &LineContext::default())
    }

    fn request(n: usize) -> RequestRecord<'static> {
        match line(n) {
            Ok(Parsed::Request(r)) => r,
            other => panic!("line {n}: {other:?}"),
        }
    }

    #[test]
    fn enveloped_response_with_cache_and_logprobs() {
        let r = request(1);
        assert_eq!(
            summary(&r).0,
            ("gw-resp-1", 1_717_243_200_000_000, "gpt-4o-2024-08-06", 1500, 2, 1024, 0, Some(0), Some(256))
        );
        assert_eq!((r.session_id.as_deref(), r.status), (Some("sess-r-1"), Some(200)));
        assert_eq!((r.ttft_ms, r.latency_ms), (Some(420.0), Some(1800.0)));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("stop"));
        assert_eq!(r.prompt.as_deref(), Some("What is the capital of France?"));
        assert_eq!(r.model_output.as_deref(), Some("Paris."));
        assert!(!r.output_is_raw);
        assert_eq!(r.tokens.len(), 2);
        assert_eq!((r.tokens[0].token.as_deref(), r.tokens[0].logprob), (Some("Paris"), Some(-0.01)));
        assert_eq!(r.tokens[0].token_bytes.as_deref(), Some(&b"Paris"[..]));
        assert_eq!(
            r.tokens[0].top_logprobs.as_ref().unwrap().iter().map(|(t, l)| (t.as_ref(), *l)).collect::<Vec<_>>(),
            vec![("Paris", -0.01), ("The", -4.7)]
        );
        assert_eq!((r.tokens[1].token.as_deref(), r.tokens[1].logprob), (Some("."), Some(-0.2)));
        assert_eq!(
            r.tokens[1].top_logprobs.as_ref().unwrap().iter().map(|(t, l)| (t.as_ref(), *l)).collect::<Vec<_>>(),
            vec![(".", -0.2), ("!", -1.8)]
        );
        // The response's own id is kept when the gateway's is the request id; the
        // usage, the text and its logprobs are columns and token rows.
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"id":"resp_001","error":null,"instructions":null,"parallel_tool_calls":true,"temperature":1.0,"tool_choice":"auto","tools":[],"top_logprobs":2}"#
            )
        );
    }

    #[test]
    fn bare_reasoning_response_takes_created_at() {
        let r = request(2);
        assert_eq!(
            summary(&r).0,
            ("resp_002", 1_717_243_260_000_000, "o3-mini-2025-01-31", 200, 900, 0, 0, Some(700), None)
        );
        assert_eq!((r.ttft_ms, r.latency_ms, r.status, r.session_id.as_deref()), (None, None, None, None));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("stop"));
        assert_eq!(r.model_output.as_deref(), Some("42"), "the reasoning item is not output text");
        assert!(r.tokens.is_empty());
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"error":null,"parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":null},"tool_choice":"auto","tools":[],"output":[{"type":"reasoning","id":"rs_002","summary":[]}]}"#
            ),
            "the reasoning item is output that is not text"
        );
    }

    #[test]
    fn incomplete_responses_name_their_reason() {
        let r = request(3);
        assert_eq!(
            summary(&r).0,
            ("gw-resp-3", 1_717_243_320_000_000, "gpt-4o-mini-2024-07-18", 900, 256, 0, 0, Some(0), Some(256))
        );
        assert_eq!((r.ttft_ms, r.latency_ms), (Some(300.0), Some(5500.0)));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("max_output_tokens"));
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role":"user","content":"Tell me a long story."}]"#));
        assert_eq!(r.model_output.as_deref(), Some("Once upon a time"));
        let r = request(4);
        assert_eq!(
            summary(&r).0,
            ("resp_004", 1_717_243_380_000_000, "gpt-4o-2024-08-06", 50, 3, 0, 0, Some(0), Some(1024))
        );
        assert_eq!(r.finish_reason_raw.as_deref(), Some("content_filter"));
        assert_eq!(r.model_output.as_deref(), Some("I can"));
    }

    #[test]
    fn tool_calls_and_refusals_without_text() {
        let r = request(6);
        assert_eq!(
            summary(&r).0,
            ("resp_006", 1_717_243_500_000_000, "gpt-4o-2024-08-06", 80, 18, 0, 0, Some(0), None)
        );
        assert_eq!((r.finish_reason_raw.as_deref(), r.model_output.as_deref()), (Some("tool_calls"), None));
        let x: Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(
            x["output"],
            serde_json::json!([{"type":"function_call","id":"fc_006","call_id":"call_abc","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"}])
        );
        assert_eq!(x["tools"][0]["name"], "get_weather");
        let r = request(7);
        assert_eq!(summary(&r).0, ("resp_007", 1_717_243_560_000_000, "gpt-4o-2024-08-06", 40, 9, 0, 0, Some(0), None));
        assert_eq!((r.finish_reason_raw.as_deref(), r.model_output.as_deref()), (Some("refusal"), None));
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"error":null,"tool_choice":"auto","tools":[],"output":[{"type":"refusal","refusal":"I can't help with that."}]}"#
            )
        );
    }

    #[test]
    fn cited_text_is_kept_whole_and_credentials_never() {
        let line = br#"{"request_id":"gw","headers":{"authorization":"Bearer sk-1"},"request":{"input":"q","api_key":"sk-2","temperature":0.2},"response":{"id":"r","object":"response","created_at":1717243200,"status":"completed","model":"m","output":[{"type":"message","content":[{"type":"output_text","text":"A [1]","annotations":[{"type":"url_citation","url":"https://x"}]}]}],"usage":{"input_tokens":3,"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":5,"input_tokens_details":{"cached_tokens":0},"server_tool_use":1}}}"#;
        let r = match parse(line, &LineContext::default()) {
            Ok(Parsed::Request(r)) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(r.model_output.as_deref(), Some("A [1]"));
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"request.temperature":0.2,"id":"r","usage.server_tool_use":1,"output":[{"type":"output_text","text":"A [1]","annotations":[{"type":"url_citation","url":"https://x"}]}]}"#
            )
        );
    }

    #[test]
    fn failures_without_usage_are_rejected_and_snapshots_skipped() {
        let err = line(5).unwrap_err();
        assert!(err.contains("resp_005") && err.contains("failed") && err.contains("server_error"), "{err}");
        assert!(matches!(line(8), Ok(Parsed::Rows { ref rows, skipped: 1 }) if rows.is_empty()));
        assert!(line(9).unwrap_err().contains("invalid"));
        assert_eq!(SAMPLE.lines().count(), 9);
    }

    #[test]
    fn failed_and_cancelled_with_usage_are_kept_and_cache_writes_read() {
        let usage = r#""usage":{"input_tokens":2600,"input_tokens_details":{"cached_tokens":2000,"cache_write_tokens":400},"output_tokens":5}"#;
        let one = |status: &str| {
            let line = format!(
                r#"{{"id":"r","object":"response","created_at":1717243200,"status":"{status}","model":"m","output":[],{usage}}}"#
            );
            match parse(line.as_bytes(), &LineContext::default()) {
                Ok(Parsed::Request(r)) => r.into_owned(),
                other => panic!("{other:?}"),
            }
        };
        let r = one("failed");
        assert_eq!(
            (r.finish_reason_raw.as_deref(), r.prompt_tokens, r.cached_tokens, r.cache_write_tokens),
            (Some("error"), Some(2600), 2000, 400)
        );
        assert_eq!(one("cancelled").finish_reason_raw.as_deref(), Some("cancelled"));
        assert_eq!(one("incomplete").finish_reason_raw.as_deref(), Some("incomplete"));
        let too_many = br#"{"id":"r","object":"response","created_at":1,"status":"completed","model":"m","output":[],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":11},"output_tokens":1}}"#;
        assert!(parse(too_many, &LineContext::default()).unwrap_err().contains("exceed input_tokens"));
        let no_ts = br#"{"id":"r","object":"response","status":"completed","model":"m","output":[],"usage":{"input_tokens":1,"output_tokens":1}}"#;
        // No time at all: the run's --base-time.
        let base = LineContext { base_time_micros: 1_717_200_000_000_000, ..Default::default() };
        match parse(no_ts, &base) {
            Ok(Parsed::Request(r)) => assert_eq!(r.ts_micros, 1_717_200_000_000_000),
            other => panic!("{other:?}"),
        }
    }
}
