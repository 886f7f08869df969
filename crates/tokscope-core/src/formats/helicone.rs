//! Helicone's JSONL export (`@helicone/export`): each line is a request row of
//! Helicone's API as stored in ClickHouse, written verbatim. Helicone stores
//! prompt tokens without the cache reads and writes it counts apart (old rows
//! without cache columns include them), so tokscope adds them back. Bodies are
//! optional (`--include-body`): finish reason, output, output cap and
//! reasoning tokens come from them when present. Pre-signed body URLs are
//! never kept.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::fields::{self, TsValue};
use super::openai::ChatChoice;
use super::{secrets, LineContext, LogFormat, Parsed, Probe};
use crate::attribution::{self, AttributionKeys};
use crate::record::{Attribution, RequestRecord, TokenRecord};

/// `cache_reference_id` of a row that is not a Helicone cache hit.
const NO_CACHE_HIT: &str = "00000000-0000-0000-0000-000000000000";

/// Endpoints whose calls generate no text.
const NON_GENERATION_PATHS: &[&str] = &["/embeddings", "/moderations", "/images/", "/audio/"];

#[derive(Deserialize)]
struct Row<'a> {
    #[serde(borrow, default)]
    request_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request_created_at: Option<TsValue<'a>>,
    #[serde(borrow, default)]
    response_created_at: Option<TsValue<'a>>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    response_status: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    delay_ms: Option<f64>,
    /// Older rows and the CSV subset: milliseconds.
    #[serde(default, deserialize_with = "fields::opt_number")]
    latency: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    time_to_first_token: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    prompt_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    completion_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    prompt_cache_read_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    prompt_cache_write_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    prompt_audio_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    cost: Option<f64>,
    /// The cost's name in older rows.
    #[serde(default, rename = "costUSD", deserialize_with = "fields::opt_number")]
    cost_usd: Option<f64>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response_model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request_model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    target_url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request_path: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    cache_reference_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request_properties: Option<&'a RawValue>,
    /// The user the caller named (`Helicone-User-Id`): personal data, in
    /// `requests.user_id` only (redacted by `--redact`), never in `extra`.
    #[serde(default)]
    request_user_id: Option<Value>,
    #[serde(borrow, default)]
    request_body: Option<&'a RawValue>,
    #[serde(borrow, default)]
    response_body: Option<&'a RawValue>,
}

/// The parts of a stored request body that matter.
#[derive(Deserialize, Default)]
struct RequestBody<'a> {
    #[serde(default, deserialize_with = "fields::opt_number")]
    max_completion_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    max_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    max_output_tokens: Option<f64>,
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    prompt: Option<&'a RawValue>,
}

/// The keys of a row read into columns (the model's, one of three, apart);
/// the user id is stored in `user_id` alone (`request_user_id`).
const ROW_KEYS: &[&str] = &[
    "request_id",
    "request_created_at",
    "response_created_at",
    "response_status",
    "delay_ms",
    "latency",
    "time_to_first_token",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "prompt_cache_read_tokens",
    "prompt_cache_write_tokens",
    "cost",
    "costUSD",
    "cache_reference_id",
    "request_body",
    "response_body",
    "request_user_id",
];

/// The keys of a request body read into columns (output cap, prompt).
const REQUEST_BODY_KEYS: &[&str] =
    &["max_completion_tokens", "max_tokens", "max_output_tokens", "messages", "input", "prompt"];

/// The parts of a stored response body that matter: OpenAI Chat Completions or Anthropic Messages.
#[derive(Deserialize, Default)]
struct ResponseBody<'a> {
    #[serde(borrow, default)]
    choices: Vec<ChatChoice<'a>>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    usage: Option<BodyUsage>,
    #[serde(borrow, default)]
    error: Option<BodyError<'a>>,
}

#[derive(Deserialize)]
struct ContentBlock<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct BodyUsage {
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct BodyError<'a> {
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
}

/// A stored body: an object, or JSON text in a string; a placeholder saying
/// the body was not exported (`helicone_message`) is no body.
fn body_json<'a>(raw: Option<&'a RawValue>) -> Option<Cow<'a, str>> {
    let raw = raw?;
    let text: Cow<'a, str> = match raw.get().as_bytes().first() {
        Some(b'{') => Cow::Borrowed(raw.get()),
        Some(b'"') => serde_json::from_str::<Cow<'a, str>>(raw.get()).ok()?,
        _ => return None,
    };
    let keys: Map<String, Value> = serde_json::from_str(&text).ok()?;
    (!(keys.len() == 1 && keys.contains_key("helicone_message"))).then_some(text)
}

/// What the stored bodies say, detached from them (a body given as a JSON
/// string is unescaped into a buffer of its own).
#[derive(Default)]
struct BodyFacts {
    finish_reason: Option<String>,
    output: Option<String>,
    tokens: Vec<TokenRecord<'static>>,
    reasoning_tokens: Option<f64>,
    prompt: Option<String>,
    max_tokens: Option<f64>,
    error: Option<String>,
    system_fingerprint: Option<String>,
    /// What no column holds of the bodies: `request_body.<key>`, `response_body.<key>`.
    unread: Map<String, Value>,
}

impl BodyFacts {
    fn read(request: Option<&RawValue>, response: Option<&RawValue>) -> Result<BodyFacts, String> {
        let mut facts = BodyFacts::default();
        if let Some(text) = body_json(request) {
            let req: RequestBody<'_> = serde_json::from_str(&text).unwrap_or_default();
            facts.max_tokens = req.max_completion_tokens.or(req.max_tokens).or(req.max_output_tokens);
            if let Some(raw) = req.messages.or(req.input).or(req.prompt) {
                facts.prompt = fields::text_or_json(raw).map_err(|e| e.to_string())?.map(Cow::into_owned);
            }
            facts.keep(fields::unread_members(&text, REQUEST_BODY_KEYS, "request_body."));
        }
        let Some(text) = body_json(response) else { return Ok(facts) };
        let resp: ResponseBody<'_> = serde_json::from_str(&text).unwrap_or_default();
        facts.error = resp.error.and_then(|e| e.message).map(Cow::into_owned);
        facts.reasoning_tokens = resp.usage.and_then(|u| u.completion_tokens_details).and_then(|d| d.reasoning_tokens);
        facts.system_fingerprint = resp.system_fingerprint.map(Cow::into_owned);
        const PREFIX: &str = "response_body.";
        if let Some(choice) = resp.choices.into_iter().next() {
            // A Chat Completion: its first choice is read as the `openai_chat` format reads it.
            let parts = choice.into_parts()?.into_owned();
            facts.finish_reason = parts.finish_reason.map(Cow::into_owned);
            facts.output = parts.output.map(Cow::into_owned);
            facts.tokens = parts.tokens;
            let read = ["model", "system_fingerprint", "choices"];
            facts.keep(fields::unread_nested(&text, &read, &[("usage", super::openai::USAGE_KEYS)], PREFIX));
            facts.keep(super::openai::first_choice_unread(text.as_bytes(), PREFIX));
        } else if let Some(blocks) = resp.content {
            // An Anthropic message: the text blocks are the output, the others kept.
            facts.finish_reason = resp.stop_reason.map(Cow::into_owned);
            let (mut output, mut others) = (String::new(), Vec::new());
            for raw in blocks {
                match serde_json::from_str::<ContentBlock<'_>>(raw.get()) {
                    Ok(b) if b.kind.as_deref().unwrap_or("text") == "text" => output.extend(b.text),
                    _ => others.push(raw.get()),
                }
            }
            facts.output = (!output.is_empty()).then_some(output);
            let read = ["type", "role", "model", "content", "stop_reason"];
            facts.keep(fields::unread_nested(&text, &read, &[("usage", super::anthropic::USAGE_KEYS)], PREFIX));
            let others = fields::json_array(&others);
            facts.keep(others.as_deref().and_then(|o| fields::kept_member(Cow::Borrowed("response_body.content"), o)));
        } else {
            // Another body (a Responses API object, an error): not read, kept whole.
            facts.keep(fields::unread_members(&text, &[], PREFIX));
        }
        Ok(facts)
    }
}

impl BodyFacts {
    /// Keeps members of a body in `extra`, leaving out those that say nothing.
    fn keep<'m>(&mut self, members: impl IntoIterator<Item = fields::Member<'m>>) {
        let members = members.into_iter().filter(|(_, v)| !fields::is_empty_value(v)).collect();
        self.unread.extend(fields::members_to_values(members));
    }
}

/// Parses one export line.
pub fn parse(line: &[u8]) -> Result<Parsed<'_>, String> {
    let row: Row<'_> = fields::from_json(line).map_err(|e| format!("invalid Helicone row: {e}"))?;
    if row.cache_reference_id.as_deref().is_some_and(|c| !c.is_empty() && c != NO_CACHE_HIT) {
        // Served from Helicone's cache: no model call happened.
        return Ok(Parsed::not_a_request());
    }
    let endpoint = row.target_url.as_deref().or(row.request_path.as_deref()).unwrap_or("");
    if NON_GENERATION_PATHS.iter().any(|p| endpoint.contains(p)) {
        return Ok(Parsed::not_a_request());
    }
    let request_id = row.request_id.clone().ok_or("missing required field request_id")?;
    let ts = row.request_created_at.as_ref().ok_or("missing required field request_created_at")?.to_micros()?;
    let status = fields::opt_token_count("response_status", row.response_status)?.map(|s| s as i32);
    if row.prompt_tokens == Some(-1.0) || row.completion_tokens == Some(-1.0) {
        return Err("token counts are -1: Helicone could not count the tokens of this stream".into());
    }
    let body = BodyFacts::read(row.request_body, row.response_body)?;
    let prompt = fields::opt_token_count("prompt_tokens", row.prompt_tokens)?;
    let completion = fields::opt_token_count("completion_tokens", row.completion_tokens)?;
    let failed = status.is_some_and(|s| s >= 400);
    let (prompt, completion) = match (prompt, completion) {
        (Some(p), Some(c)) if !(failed && p == 0 && c == 0) => (p, c),
        _ if failed => {
            let why = body.error.as_deref().unwrap_or("no error message");
            return Err(format!("request failed with HTTP {}: {why}", status.unwrap_or_default()));
        }
        _ => return Err("missing prompt_tokens or completion_tokens".into()),
    };
    let cached = fields::opt_token_count("prompt_cache_read_tokens", row.prompt_cache_read_tokens)?.unwrap_or(0);
    let cache_write = fields::opt_token_count("prompt_cache_write_tokens", row.prompt_cache_write_tokens)?.unwrap_or(0);
    let audio = fields::opt_token_count("prompt_audio_tokens", row.prompt_audio_tokens)?.unwrap_or(0);

    let finish = body.finish_reason.map(Cow::Owned).or_else(|| failed.then_some(Cow::Borrowed("error")));
    let latency_ms = match (row.delay_ms.or(row.latency), &row.response_created_at) {
        (Some(ms), _) => fields::duration_ms("delay_ms", Some(ms))?,
        (None, Some(end)) => {
            Some(fields::elapsed_ms("response_created_at - request_created_at", ts, end.to_micros()?)?)
        }
        (None, None) => None,
    };
    let properties: Option<Map<String, Value>> =
        row.request_properties.and_then(|raw| serde_json::from_str(raw.get()).ok());
    let session_id = properties
        .as_ref()
        .and_then(|p| p.get("Helicone-Session-Id"))
        .and_then(Value::as_str)
        .map(|s| Cow::Owned(s.to_string()));
    // Custom properties (`Helicone-Property-*`) are the request's tags; Helicone's own (`Helicone-Session-Id`, ...) are not.
    let mut attribution = Attribution {
        user_id: row.request_user_id.as_ref().and_then(attribution::scalar).map(Cow::Owned),
        tags: attribution::member_tags(properties.iter().flatten().filter(|(k, _)| !k.starts_with("Helicone-"))),
        ..Default::default()
    };
    let (model_key, model) =
        [("model", row.model), ("response_model", row.response_model), ("request_model", row.request_model)]
            .into_iter()
            .find_map(|(key, m)| Some((key, m?)))
            .ok_or("missing model (model, response_model or request_model)")?;
    // What no column holds: the row's other keys as logged (empty ones say
    // nothing), then the bodies' (credentials and signed URLs never).
    let read: Vec<&str> = ROW_KEYS.iter().copied().chain([model_key]).collect();
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8: {e}"))?;
    let row_unread = fields::unread_members(text, &read, "").into_iter().filter(|(_, v)| !fields::is_empty_value(v));
    let mut extra = fields::members_to_values(row_unread.collect());
    extra.extend(body.unread);
    attribution.provider = attribution::from_members(&extra, &ATTRIBUTION).provider;
    Ok(Parsed::Request(RequestRecord {
        request_id: Some(request_id),
        ts_micros: ts,
        session_id,
        model,
        model_version: body.system_fingerprint.map(Cow::Owned),
        status,
        prompt_tokens: Some(prompt + cached + cache_write + audio),
        completion_tokens: completion,
        cached_tokens: cached,
        cache_write_tokens: cache_write,
        reasoning_tokens: fields::opt_token_count("reasoning_tokens", body.reasoning_tokens)?,
        max_tokens: fields::opt_token_count("max_tokens", body.max_tokens)?,
        ttft_ms: fields::duration_ms("time_to_first_token", row.time_to_first_token)?,
        latency_ms,
        finish_reason_raw: finish,
        prompt: body.prompt.map(Cow::Owned),
        model_output: body.output.map(Cow::Owned),
        output_is_raw: false,
        tokens: body.tokens,
        logged_cost_usd: fields::cost_usd("cost", row.cost.or(row.cost_usd))?,
        extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        attribution,
        ..Default::default()
    }))
}

/// The provider Helicone names (docs/metrics.md, "Attribution"; its user and
/// custom properties are read apart).
const ATTRIBUTION: AttributionKeys = AttributionKeys { provider: &["provider"], ..AttributionKeys::NONE };

/// Helicone's JSONL export rows, recognised by `request_created_at` with Helicone's columns.
pub struct Helicone;

impl LogFormat for Helicone {
    fn name(&self) -> &'static str {
        "helicone"
    }

    fn about(&self) -> &'static str {
        "Helicone JSONL export rows (request_created_at, delay_ms, prompt/cache token columns, cost, optional bodies)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(|o| {
            o.contains_key("request_created_at")
                && (o.contains_key("delay_ms") || o.contains_key("response_status"))
                && (o.contains_key("prompt_tokens") || o.contains_key("request_model") || o.contains_key("provider"))
        })
    }

    fn parse<'a>(&self, line: &'a [u8], _ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line)
    }

    fn reject_raw<'a>(&self, raw: &'a [u8], _ctx: &LineContext<'_>) -> Cow<'a, [u8]> {
        // Pre-signed S3 URLs carry credentials in their query string.
        secrets::scrub_json(raw, secrets::is_credential_key)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::summary;
    use super::*;

    const SAMPLE: &str = include_str!("../../../../sample_logs/helicone.jsonl");

    fn line(n: usize) -> Result<Parsed<'static>, String> {
        parse(SAMPLE.lines().nth(n - 1).expect("sample line").as_bytes())
    }

    fn request(n: usize) -> RequestRecord<'static> {
        match line(n) {
            Ok(Parsed::Request(r)) => r,
            other => panic!("line {n}: {other:?}"),
        }
    }

    fn extra(r: &RequestRecord<'_>) -> Value {
        serde_json::from_str(r.extra.as_deref().unwrap_or("{}")).unwrap()
    }

    #[test]
    fn attribution_user_custom_properties_and_provider() {
        // The sample's rows, by hand: request_user_id, request_properties, provider.
        let a = request(1).attribution;
        assert_eq!((a.user_id.as_deref(), a.provider.as_deref()), (Some("user-1"), Some("openai")));
        assert_eq!(a.tags, vec!["app:search"]);
        let a = request(2).attribution;
        assert_eq!((a.user_id.as_deref(), a.provider.as_deref(), a.tags.len()), (Some("user-2"), Some("anthropic"), 0));
        let a = request(3).attribution;
        assert_eq!((a.user_id, a.tags.len()), (None, 0));
        // Helicone's own properties are no tags; the user id never reaches `extra`.
        let row = r#"{"request_id":"r","request_created_at":"2024-06-01 12:00:00","delay_ms":5,"prompt_tokens":1,"completion_tokens":1,"model":"m","request_user_id":"u-9","request_properties":{"Helicone-Session-Id":"s1","team":"ads"}}"#;
        let r = match parse(row.as_bytes()) {
            Ok(Parsed::Request(r)) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (r.attribution.user_id.as_deref(), r.attribution.tags.clone()),
            (Some("u-9"), vec!["team:ads".into()])
        );
        assert!(!r.extra.as_deref().unwrap_or("").contains("u-9"), "{:?}", r.extra);
    }

    #[test]
    fn openai_row_adds_cache_reads_back_and_drops_the_signed_url() {
        let r = request(1);
        // Helicone's prompt_tokens 476 excludes the 1024 read from the cache.
        let id = "a0e1b2c3-0000-4000-8000-000000000001";
        assert_eq!(
            (summary(&r).0, r.status),
            ((id, 1_717_243_200_000_000, "gpt-4o-2024-08-06", 1500, 85, 1024, 0, None, None), Some(200))
        );
        assert_eq!((r.ttft_ms, r.latency_ms, r.logged_cost_usd), (Some(420.0), Some(1800.0), Some(0.00332)));
        assert_eq!(
            (r.finish_reason_raw.as_deref(), r.model_output.as_deref(), r.prompt.as_deref()),
            (None, None, None)
        );
        // Every key no column holds, as logged; not the signed URL, the user id, or
        // the empty columns (null, {}, []); the bodies are Helicone's placeholder.
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"cache_enabled":false,"country_code":"FR","properties":{"app":"search"},"provider":"OPENAI","request_properties":{"app":"search"},"response_id":"c1f0a6b2-0000-4000-8000-000000000001","storage_location":"s3","target_url":"https://api.openai.com/v1/chat/completions","updated_at":"2024-06-01 12:00:02.000"}"#
            )
        );
    }

    #[test]
    fn anthropic_row_with_bodies() {
        let r = request(2);
        let id = "a0e1b2c3-0000-4000-8000-000000000002";
        assert_eq!(
            (summary(&r).0, r.status),
            (
                (id, 1_717_243_260_000_000, "claude-sonnet-4-5-20250929", 4600, 300, 4000, 100, None, Some(1024)),
                Some(200)
            )
        );
        assert_eq!((r.ttft_ms, r.latency_ms, r.logged_cost_usd), (Some(950.0), Some(5500.0), Some(0.0141)));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("end_turn"));
        assert_eq!(r.model_output.as_deref(), Some("Here is the summary."));
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role":"user","content":"Summarise this document."}]"#));
        // The bodies' keys no column holds come after the row's.
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"cache_enabled":false,"country_code":"DE","provider":"ANTHROPIC","request_body.model":"claude-sonnet-4-5","request_body.stream":true,"response_body.id":"msg_h2","response_id":"c1f0a6b2-0000-4000-8000-000000000002","storage_location":"clickhouse","target_url":"https://api.anthropic.com/v1/messages","updated_at":"2024-06-01 12:01:06.000"}"#
            )
        );
    }

    #[test]
    fn old_row_shape_without_cache_columns() {
        let r = request(3);
        let id = "a0e1b2c3-0000-4000-8000-000000000003";
        assert_eq!(
            (summary(&r).0, r.status),
            ((id, 1_717_243_320_000_000, "gpt-4o-mini-2024-07-18", 1500, 60, 0, 0, None, None), Some(200))
        );
        assert_eq!((r.ttft_ms, r.latency_ms, r.logged_cost_usd), (None, Some(3000.0), Some(0.000297)));
        assert_eq!(r.finish_reason_raw, None);
    }

    #[test]
    fn reasoning_and_length_from_openai_bodies() {
        let r = request(4);
        let id = "a0e1b2c3-0000-4000-8000-000000000004";
        assert_eq!(
            (summary(&r).0, r.status),
            ((id, 1_717_243_380_000_000, "o3-mini-2025-01-31", 200, 900, 0, 0, Some(700), None), Some(200))
        );
        assert_eq!((r.ttft_ms, r.latency_ms, r.logged_cost_usd), (Some(4500.0), Some(6000.0), Some(0.00418)));
        assert_eq!((r.finish_reason_raw.as_deref(), r.model_output.as_deref()), (Some("stop"), Some("42")));
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"cache_enabled":false,"country_code":"FR","provider":"OPENAI","request_body.model":"o3-mini","request_body.stream":true,"response_body.created":1717243326,"response_body.id":"chatcmpl-h4","response_body.message.role":"assistant","response_body.object":"chat.completion","response_id":"c1f0a6b2-0000-4000-8000-000000000004","storage_location":"clickhouse","target_url":"https://api.openai.com/v1/chat/completions","updated_at":"2024-06-01 12:03:07.000"}"#
            )
        );
        let r = request(5);
        let id = "a0e1b2c3-0000-4000-8000-000000000005";
        assert_eq!(
            (summary(&r).0, r.status),
            ((id, 1_717_243_440_250_000, "gpt-4o-mini-2024-07-18", 900, 256, 0, 0, None, Some(256)), Some(200))
        );
        assert_eq!((r.ttft_ms, r.latency_ms, r.logged_cost_usd), (None, Some(5500.0), Some(0.0002885)));
        assert_eq!(
            (r.finish_reason_raw.as_deref(), r.model_output.as_deref()),
            (Some("length"), Some("Once upon a time"))
        );
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role":"user","content":"Tell me a long story."}]"#));
    }

    #[test]
    fn failures_uncounted_streams_cache_hits_and_embeddings() {
        let err = line(6).unwrap_err();
        assert!(err.contains("HTTP 429") && err.contains("Rate limit reached"), "{err}");
        assert!(line(7).unwrap_err().contains("-1"));
        for n in [8, 9] {
            assert!(matches!(line(n), Ok(Parsed::Rows { ref rows, skipped: 1 }) if rows.is_empty()), "line {n}");
        }
        let err = line(10).unwrap_err();
        assert!(err.contains("not a number"), "{err}");
        assert_eq!(SAMPLE.lines().count(), 10);
    }

    #[test]
    fn signed_urls_never_reach_rejects() {
        let row = SAMPLE.lines().next().unwrap().replace(r#""prompt_tokens":"476""#, r#""prompt_tokens":"x""#);
        assert!(parse(row.as_bytes()).is_err());
        let kept =
            String::from_utf8(Helicone.reject_raw(row.as_bytes(), &LineContext::default()).into_owned()).unwrap();
        assert!(row.contains("X-Amz-Signature") && !kept.contains("X-Amz-Signature"), "{kept}");
        assert!(kept.contains(r#""signed_body_url":"REDACTED""#));
    }

    #[test]
    fn tool_calls_and_unread_bodies_are_kept_and_keys_never() {
        // A body that is JSON text, with a tool call, an API key in the request body,
        // headers, a model other than the one read, and audio tokens added to the prompt.
        let req = r#"{\"model\":\"gpt-4o\",\"messages\":[],\"tools\":[{\"type\":\"function\"}],\"api_key\":\"sk-1\"}"#;
        let resp = r#"{\"id\":\"c1\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\",\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"call_1\"}]}}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"x\":3}}"#;
        let row = format!(
            r#"{{"request_id":"h","request_created_at":"2024-06-01 12:00:00","response_status":200,"delay_ms":10,"model":"gpt-4o-2024-08-06","request_model":"gpt-4o","prompt_tokens":1,"completion_tokens":2,"prompt_audio_tokens":4,"request_headers":{{"Helicone-Auth":"Bearer sk-h"}},"request_body":"{req}","response_body":"{resp}"}}"#
        );
        let r = match parse(row.as_bytes()) {
            Ok(Parsed::Request(r)) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (r.prompt_tokens, r.model.as_ref(), r.model_version.as_deref()),
            (Some(5), "gpt-4o-2024-08-06", Some("fp_1"))
        );
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"prompt_audio_tokens":4,"request_body.model":"gpt-4o","request_body.tools":[{"type":"function"}],"request_model":"gpt-4o","response_body.id":"c1","response_body.message.tool_calls":[{"id":"call_1"}],"response_body.usage.x":3}"#
            )
        );
        // An Anthropic tool call, and a body no format reads (a Responses object), kept whole.
        let anthropic = r#"{"request_id":"h","request_created_at":"2024-06-01 12:00:00","response_status":200,"delay_ms":10,"request_model":"claude","prompt_tokens":1,"completion_tokens":2,"response_body":{"id":"m","type":"message","content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"t"}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":2}}}"#;
        let x = extra(&request_of(anthropic));
        assert_eq!(
            x,
            serde_json::json!({"response_body.content": [{"type": "tool_use", "id": "t"}], "response_body.id": "m"})
        );
        let responses =
            anthropic.replace(r#"{"id":"m","type":"message","content""#, r#"{"id":"m","object":"response","output""#);
        let x = extra(&request_of(&responses));
        assert_eq!(x["response_body.output"][1]["type"], "tool_use");
        assert_eq!(x["response_body.object"], "response");
    }

    fn request_of(row: &str) -> RequestRecord<'static> {
        match parse(row.as_bytes()) {
            Ok(Parsed::Request(r)) => r.into_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failed_request_with_usage_is_kept_as_an_error() {
        let row = br#"{"request_id":"x","request_created_at":"2024-06-01 12:00:00.000","response_status":500,"delay_ms":100,"request_model":"gpt-4o","prompt_tokens":10,"completion_tokens":3,"response_body":{"error":{"message":"boom"}}}"#;
        match parse(row) {
            Ok(Parsed::Request(r)) => {
                assert_eq!(
                    (r.status, r.finish_reason_raw.as_deref(), r.prompt_tokens),
                    (Some(500), Some("error"), Some(10))
                )
            }
            other => panic!("{other:?}"),
        }
        let no_time = br#"{"request_id":"x","response_status":200,"delay_ms":1,"request_model":"m","prompt_tokens":1,"completion_tokens":1}"#;
        assert!(parse(no_time).unwrap_err().contains("request_created_at"));
    }
}
