//! OpenTelemetry traces as the Collector's file exporter writes them: OTLP/JSON,
//! one `TracesData` per line (`resourceSpans[].scopeSpans[].spans[]`). A line
//! holds many spans; each GenAI inference span is one request, every other
//! span (HTTP, database, agent, tool, embeddings) is skipped and counted, and
//! an inference span that cannot be read (a failed call without usage) is
//! rejected alone while the line's other spans are kept.
//!
//! Attribute names changed over the GenAI semantic conventions' life; every
//! name a producer is known to write is read (the table in docs/metrics.md).
//! `input_tokens` includes cache reads and writes (the conventions say so);
//! a span whose reads and writes exceed it evidently followed Anthropic's
//! exclusive count, and is repaired and flagged.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

use super::fields;
use super::{LineContext, LogFormat, Parsed, Probe, RecordReject, Row};
use crate::attribution::{self, AttributionKeys};
use crate::record::RequestRecord;

/// Operations that are a model inference call (`gen_ai.operation.name`).
const INFERENCE_OPERATIONS: &[&str] = &["chat", "text_completion", "generate_content"];

/// The names of one quantity, current first, then older and other producers'.
mod names {
    pub const INPUT: &[&str] = &["gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"];
    pub const OUTPUT: &[&str] =
        &["gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"];
    pub const CACHE_READ: &[&str] = &[
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "gen_ai.usage.cached_tokens",
        "gen_ai.usage.input_tokens.cached",
        "llm.token_count.prompt_details.cache_read",
    ];
    pub const CACHE_WRITE: &[&str] = &[
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "gen_ai.usage.cache_write_input_tokens",
        "gen_ai.usage.input_tokens.cache_write",
        "llm.token_count.prompt_details.cache_write",
    ];
    pub const REASONING: &[&str] = &[
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.usage.reasoning_tokens",
        "llm.usage.reasoning_tokens",
        "gen_ai.usage.output_tokens.reasoning",
        "llm.token_count.completion_details.reasoning",
    ];
    pub const RESPONSE_ID: &[&str] = &["gen_ai.response.id", "gen_ai.request.id"];
    pub const MODEL: &[&str] = &["gen_ai.response.model", "gen_ai.request.model", "llm.model_name"];
    pub const PROVIDER: &[&str] = &["gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"];
    pub const SESSION: &[&str] = &["gen_ai.conversation.id", "session.id"];
    /// Seconds.
    pub const TTFT: &[&str] = &["gen_ai.response.time_to_first_chunk", "gen_ai.latency.time_to_first_token"];
    /// Other attributes read into a column, or that say what the span is.
    pub const OTHER: &[&str] = &[
        "gen_ai.latency.e2e",
        "gen_ai.latency.time_in_model_prefill",
        "gen_ai.output.messages",
        "gen_ai.input.messages",
        "gen_ai.response.finish_reasons",
        "gen_ai.completion.0.finish_reason",
        "llm.response.finish_reason",
        "llm.finish_reason",
        "llm.invocation_parameters",
        "gen_ai.request.max_tokens",
        "http.response.status_code",
        "error.type",
        "openinference.span.kind",
        "gen_ai.operation.name",
        "llm.request.type",
    ];
    /// The prompt and output as flattened messages or bodies (the `prompt`
    /// and `model_output` columns, redacted as they are).
    pub const CONTENT_PREFIXES: &[&str] =
        &["gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.", "input.", "output."];
    /// vLLM's own engine span, seconds; kept in `extra` as milliseconds.
    pub const VLLM_TIMES: &[(&str, &str)] = &[
        ("gen_ai.latency.time_in_queue", "queue_ms"),
        ("gen_ai.latency.time_in_model_decode", "decode_ms"),
        ("gen_ai.latency.time_in_model_inference", "inference_ms"),
        ("gen_ai.latency.time_in_scheduler", "scheduler_ms"),
        ("gen_ai.latency.time_in_model_forward", "model_forward_ms"),
        ("gen_ai.latency.time_in_model_execute", "model_execute_ms"),
    ];
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TracesData<'a> {
    #[serde(borrow)]
    resource_spans: Vec<ResourceSpans<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans<'a> {
    #[serde(borrow, default)]
    resource: Option<Attributes<'a>>,
    #[serde(borrow, default)]
    scope_spans: Vec<ScopeSpans<'a>>,
}

#[derive(Deserialize, Default)]
struct Attributes<'a> {
    #[serde(borrow, default)]
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Deserialize)]
struct ScopeSpans<'a> {
    #[serde(borrow, default)]
    scope: Option<Scope<'a>>,
    /// Each span is read on its own, so that one bad span rejects only itself.
    #[serde(borrow, default)]
    spans: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct Scope<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Span<'a> {
    #[serde(borrow, default)]
    trace_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "fields::opt_integer")]
    start_time_unix_nano: Option<i64>,
    #[serde(default, deserialize_with = "fields::opt_integer")]
    end_time_unix_nano: Option<i64>,
    #[serde(borrow, default)]
    attributes: Vec<KeyValue<'a>>,
    #[serde(borrow, default)]
    events: Vec<Event<'a>>,
    #[serde(borrow, default)]
    status: Option<Status<'a>>,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Deserialize)]
struct Status<'a> {
    /// 2 is ERROR (an integer in OTLP/JSON; some writers spell the enum name).
    #[serde(default)]
    code: Option<Value>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
}

impl Status<'_> {
    fn is_error(&self) -> bool {
        match &self.code {
            Some(Value::Number(n)) => n.as_i64() == Some(2),
            Some(Value::String(s)) => s == "STATUS_CODE_ERROR" || s == "2",
            _ => false,
        }
    }
}

#[derive(Deserialize)]
struct KeyValue<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: AnyValue<'a>,
}

/// An OTLP attribute value: exactly one of these is set.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AnyValue<'a> {
    #[serde(borrow, default)]
    string_value: Option<Cow<'a, str>>,
    /// A decimal string in OTLP/JSON (64-bit), or a number.
    #[serde(default, deserialize_with = "fields::opt_number")]
    int_value: Option<f64>,
    #[serde(default)]
    double_value: Option<f64>,
    #[serde(default)]
    bool_value: Option<bool>,
    #[serde(borrow, default)]
    array_value: Option<ValueList<'a>>,
    #[serde(borrow, default)]
    kvlist_value: Option<KeyValueList<'a>>,
}

#[derive(Deserialize, Default)]
struct ValueList<'a> {
    #[serde(borrow, default)]
    values: Vec<AnyValue<'a>>,
}

#[derive(Deserialize, Default)]
struct KeyValueList<'a> {
    #[serde(borrow, default)]
    values: Vec<KeyValue<'a>>,
}

impl<'a> AnyValue<'a> {
    /// As JSON: strings, numbers, booleans, arrays, objects.
    fn to_json(&self) -> Value {
        if let Some(s) = &self.string_value {
            Value::String(s.to_string())
        } else if let Some(n) = self.int_value.or(self.double_value) {
            serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
        } else if let Some(b) = self.bool_value {
            Value::Bool(b)
        } else if let Some(a) = &self.array_value {
            Value::Array(a.values.iter().map(AnyValue::to_json).collect())
        } else if let Some(kv) = &self.kvlist_value {
            Value::Object(kv.values.iter().map(|e| (e.key.to_string(), e.value.to_json())).collect())
        } else {
            Value::Null
        }
    }

    /// Text kept as logged; structured values as compact JSON.
    fn to_text(&self) -> Option<Cow<'a, str>> {
        match (&self.string_value, self.to_json()) {
            (Some(s), _) => Some(s.clone()),
            (None, Value::Null) => None,
            (None, v) => Some(Cow::Owned(v.to_string())),
        }
    }
}

/// A span's attributes, looked up by name.
struct Attrs<'s, 'a>(&'s [KeyValue<'a>]);

impl<'s, 'a> Attrs<'s, 'a> {
    fn get(&self, key: &str) -> Option<&'s AnyValue<'a>> {
        self.0.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
    }

    fn first<'k>(&self, keys: &[&'k str]) -> Option<(&'k str, &'s AnyValue<'a>)> {
        keys.iter().find_map(|k| Some((*k, self.get(k)?)))
    }

    fn text(&self, keys: &[&str]) -> Option<Cow<'a, str>> {
        self.first(keys).and_then(|(_, v)| v.string_value.clone())
    }

    /// A number (int or double; a numeric string is accepted too).
    fn number(&self, keys: &[&str]) -> Result<Option<f64>, String> {
        let Some((key, v)) = self.first(keys) else { return Ok(None) };
        match (v.int_value.or(v.double_value), &v.string_value) {
            (Some(n), _) => Ok(Some(n)),
            (None, Some(s)) => {
                s.trim().parse().map(Some).map_err(|_| format!("attribute {key} is not a number: {s:?}"))
            }
            (None, None) => Err(format!("attribute {key} is not a number")),
        }
    }

    fn tokens(&self, keys: &[&str]) -> Result<Option<i64>, String> {
        let v = self.number(keys)?;
        fields::opt_token_count(self.first(keys).map_or(keys[0], |(k, _)| k), v)
    }

    fn seconds_as_ms(&self, keys: &[&str]) -> Result<Option<f64>, String> {
        let v = self.number(keys)?;
        fields::seconds_to_ms(self.first(keys).map_or(keys[0], |(k, _)| k), v)
    }
}

/// What a span is.
enum SpanKind {
    Inference,
    Other,
}

fn classify(span: &Span<'_>, attrs: &Attrs<'_, '_>) -> SpanKind {
    // OpenInference (Arize Phoenix) marks model calls by their span kind.
    if attrs.text(&["openinference.span.kind"]).is_some_and(|k| k.eq_ignore_ascii_case("LLM")) {
        return SpanKind::Inference;
    }
    let op = attrs.text(&["gen_ai.operation.name"]);
    let legacy_type = attrs.text(&["llm.request.type"]);
    let inference = match (op.as_deref(), legacy_type.as_deref()) {
        (Some(op), _) => INFERENCE_OPERATIONS.contains(&op),
        // OpenLLMetry before it adopted gen_ai.operation.name.
        (None, Some(t)) => t == "chat" || t == "completion",
        // vLLM's engine span; GenAI spans of conventions older than
        // gen_ai.operation.name: a provider and token usage.
        (None, None) => {
            span.name.as_deref() == Some("llm_request")
                || (attrs.first(names::PROVIDER).is_some()
                    && (attrs.first(names::INPUT).is_some() || attrs.first(names::OUTPUT).is_some()))
        }
    };
    if inference {
        SpanKind::Inference
    } else {
        SpanKind::Other
    }
}

/// The first finish reason: an array of strings, or (vLLM) a JSON-encoded array in a string.
fn finish_reason<'a>(v: &AnyValue<'a>) -> Option<Cow<'a, str>> {
    if let Some(a) = &v.array_value {
        return a.values.first().and_then(|x| x.string_value.clone());
    }
    let s = v.string_value.as_ref()?;
    if s.trim_start().starts_with('[') {
        let reasons: Vec<String> = serde_json::from_str(s).ok()?;
        return reasons.into_iter().next().map(Cow::Owned);
    }
    Some(s.clone())
}

/// `gen_ai.output.messages` (a JSON string, or structured): the first
/// message's text parts, and its finish reason.
fn output_messages(v: &AnyValue<'_>) -> (Option<String>, Option<String>) {
    let json = match &v.string_value {
        Some(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        None => v.to_json(),
    };
    let Some(first) = json.as_array().and_then(|a| a.first()) else { return (None, None) };
    let text: Vec<&str> = first
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("content").and_then(Value::as_str))
        .collect();
    let finish = first.get("finish_reason").and_then(Value::as_str).map(str::to_string);
    ((!text.is_empty()).then(|| text.concat()), finish)
}

/// The older `gen_ai.content.completion` event: `gen_ai.completion` holds a
/// JSON list of messages; the first message's content (text as logged when not JSON).
fn completion_event_text(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(msgs)) => match msgs.first().and_then(|m| m.get("content")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        },
        _ => text.to_string(),
    }
}

/// Flattened messages rebuilt as a message list: OpenLLMetry's
/// `gen_ai.prompt.N.role` / `.content` (`prefix` `gen_ai.prompt.`, `suffix` ``),
/// OpenInference's `llm.input_messages.N.message.role` / `.content`.
fn flattened_prompt(attrs: &Attrs<'_, '_>, prefix: &str, suffix: &str) -> Option<String> {
    let mut msgs = Vec::new();
    for i in 0.. {
        let role = attrs.text(&[&format!("{prefix}{i}{suffix}.role")]);
        let content = attrs.text(&[&format!("{prefix}{i}{suffix}.content")]);
        if role.is_none() && content.is_none() {
            break;
        }
        // Built by hand to keep role before content (serde_json sorts object keys).
        msgs.push(format!(
            "{{\"role\":{},\"content\":{}}}",
            serde_json::to_string(role.as_deref().unwrap_or("")).unwrap_or_default(),
            serde_json::to_string(content.as_deref().unwrap_or("")).unwrap_or_default()
        ));
    }
    (!msgs.is_empty()).then(|| format!("[{}]", msgs.join(",")))
}

/// Where a span sits in its line, for the rejects of spans without a `spanId`.
struct SpanContext<'c> {
    service: Option<&'c str>,
    /// The resource's `deployment.environment.name` (or its older name).
    environment: Option<&'c str>,
    scope: Option<&'c str>,
}

/// Attribution from a span's attributes as `extra` keeps them (docs/metrics.md,
/// "Attribution"): the semantic conventions' user, service and environment,
/// OpenInference's and Langfuse's user ids and tags, the GenAI provider.
const ATTRIBUTION: AttributionKeys = AttributionKeys {
    user_id: &["user.id", "enduser.id", "langfuse.user.id"],
    project: &["service.name"],
    environment: &["deployment.environment.name", "deployment.environment", "langfuse.environment"],
    tags: &["tag.tags", "langfuse.trace.tags"],
    provider: &["provider"],
    ..AttributionKeys::NONE
};

/// One inference span into a request.
fn span_record<'a>(span: Span<'a>, ctx: &LineContext<'_>, at: &SpanContext<'_>) -> Result<RequestRecord<'a>, String> {
    let attrs = Attrs(&span.attributes);
    let status_error = span.status.as_ref().is_some_and(Status::is_error);
    let input = attrs.tokens(names::INPUT)?;
    let output = attrs.tokens(names::OUTPUT)?;
    let (Some(input), Some(output)) = (input, output) else {
        let mut why = "inference span without token usage (gen_ai.usage.input_tokens / output_tokens)".to_string();
        if let Some(e) = attrs.text(&["error.type"]) {
            why.push_str(&format!("; error.type {e}"));
        }
        if let Some(m) = span.status.as_ref().and_then(|s| s.message.as_deref()) {
            why.push_str(&format!(": {m}"));
        }
        return Err(why);
    };
    let cache_read = attrs.tokens(names::CACHE_READ)?.unwrap_or(0);
    let cache_write = attrs.tokens(names::CACHE_WRITE)?.unwrap_or(0);
    let mut extra = Map::new();
    // The conventions count cache reads and writes inside input_tokens; a
    // producer that followed Anthropic's exclusive count shows it here.
    let prompt_tokens = if cache_read + cache_write > input {
        extra.insert("input_tokens_excluded_cache".into(), Value::Bool(true));
        input + cache_read + cache_write
    } else {
        input
    };
    let start = span.start_time_unix_nano.ok_or("span without startTimeUnixNano")?;
    if start < 0 {
        return Err(format!("startTimeUnixNano {start} is negative"));
    }
    let latency_ms = match (attrs.seconds_as_ms(&["gen_ai.latency.e2e"])?, span.end_time_unix_nano) {
        (Some(e2e), _) => Some(e2e),
        (None, Some(end)) if end < start => return Err("endTimeUnixNano is before startTimeUnixNano".into()),
        // Whole microseconds first, so the difference carries no float noise.
        (None, Some(end)) => Some(fields::elapsed_ms("span duration", start / 1000, end / 1000)?),
        (None, None) => None,
    };
    let (output_text, output_finish) = match attrs.get("gen_ai.output.messages") {
        Some(v) => output_messages(v),
        None => (None, None),
    };
    let event_attr = |event: &str, key: &str| {
        span.events.iter().filter(|e| e.name.as_deref() == Some(event)).find_map(|e| Attrs(&e.attributes).text(&[key]))
    };
    let model_output = output_text
        .map(Cow::Owned)
        .or_else(|| {
            event_attr("gen_ai.content.completion", "gen_ai.completion").map(|t| Cow::Owned(completion_event_text(&t)))
        })
        .or_else(|| attrs.text(&["gen_ai.completion.0.content", "llm.output_messages.0.message.content"]));
    // OpenInference keeps the request's parameters and the response body as JSON text.
    let invocation = json_attr(&attrs, "llm.invocation_parameters");
    let response_body = json_attr(&attrs, "output.value");
    let body_finish = response_body.as_ref().and_then(|b| {
        let first_choice = b.get("choices").and_then(|c| c.get(0));
        let reason = first_choice.and_then(|c| c.get("finish_reason")).or_else(|| b.get("stop_reason"));
        reason.and_then(Value::as_str).map(|r| Cow::Owned(r.to_string()))
    });
    let finish_reason_raw = attrs
        .get("gen_ai.response.finish_reasons")
        .and_then(finish_reason)
        .or(output_finish.map(Cow::Owned))
        .or_else(|| {
            attrs.text(&["gen_ai.completion.0.finish_reason", "llm.response.finish_reason", "llm.finish_reason"])
        })
        .or(body_finish)
        .or_else(|| status_error.then_some(Cow::Borrowed("error")));
    let prompt = attrs
        .get("gen_ai.input.messages")
        .and_then(AnyValue::to_text)
        .or_else(|| event_attr("gen_ai.content.prompt", "gen_ai.prompt"))
        .or_else(|| flattened_prompt(&attrs, "gen_ai.prompt.", "").map(Cow::Owned))
        .or_else(|| flattened_prompt(&attrs, "llm.input_messages.", ".message").map(Cow::Owned));
    let body_id = response_body.as_ref().and_then(|b| b.get("id")).and_then(Value::as_str);
    let response_id = attrs.text(names::RESPONSE_ID).or_else(|| body_id.map(|id| Cow::Owned(id.to_string())));
    let request_id = match (response_id, &span.trace_id, &span.span_id) {
        (Some(id), _, _) => id,
        (None, Some(t), Some(s)) => Cow::Owned(format!("{t}-{s}")),
        (None, None, Some(s)) => s.clone(),
        _ => return Err("span without spanId and without gen_ai.response.id".into()),
    };
    let invocation_model = invocation.as_ref().and_then(|p| p.get("model")).and_then(Value::as_str);
    let model = attrs
        .text(names::MODEL)
        .or_else(|| invocation_model.map(|m| Cow::Owned(m.to_string())))
        .unwrap_or_else(|| Cow::Owned(ctx.default_model.to_string()));
    let invocation_max = invocation.as_ref().and_then(|p| {
        ["max_completion_tokens", "max_tokens", "max_output_tokens"].iter().find_map(|k| p.get(*k)?.as_f64())
    });
    let max_tokens = match attrs.tokens(&["gen_ai.request.max_tokens"])? {
        Some(m) => Some(m),
        None => fields::opt_token_count("llm.invocation_parameters.max_tokens", invocation_max)?,
    };
    let status = attrs.number(&["http.response.status_code"])?;
    let status = fields::opt_token_count("http.response.status_code", status)?.map(|s| s as i32);

    if let Some(p) = attrs.text(names::PROVIDER) {
        extra.insert("provider".into(), Value::String(p.into_owned()));
    }
    if let Some(e) = attrs.text(&["error.type"]) {
        extra.insert("error.type".into(), Value::String(e.into_owned()));
    }
    if let Some(m) = span.status.as_ref().and_then(|s| s.message.as_deref()) {
        extra.insert("status.message".into(), Value::String(m.to_string()));
    }
    for (key, name) in names::VLLM_TIMES {
        if let Some(ms) = attrs.seconds_as_ms(&[key])? {
            extra.insert((*name).into(), serde_json::Number::from_f64(ms).map_or(Value::Null, Value::Number));
        }
    }
    // Every other attribute as logged, so that nothing the producer wrote is lost.
    for kv in &span.attributes {
        let key = kv.key.as_ref();
        if !is_read(key) && !extra.contains_key(key) {
            extra.insert(key.to_string(), kv.value.to_json());
        }
    }
    for (name, v) in [("trace_id", span.trace_id.as_deref()), ("span_id", span.span_id.as_deref())]
        .into_iter()
        .chain([("service.name", at.service), ("scope", at.scope)])
    {
        if let Some(v) = v {
            extra.insert(name.into(), Value::String(v.to_string()));
        }
    }
    if let Some(env) = at.environment.filter(|_| !extra.contains_key("deployment.environment.name")) {
        extra.insert("deployment.environment.name".into(), Value::String(env.to_string()));
    }
    let attribution = attribution::from_members(&extra, &ATTRIBUTION);
    Ok(RequestRecord {
        request_id: Some(request_id),
        ts_micros: start / 1000,
        session_id: attrs.text(names::SESSION),
        model,
        status,
        prompt_tokens: Some(prompt_tokens),
        completion_tokens: output,
        cached_tokens: cache_read,
        cache_write_tokens: cache_write,
        reasoning_tokens: attrs.tokens(names::REASONING)?,
        max_tokens,
        ttft_ms: attrs.seconds_as_ms(names::TTFT)?,
        latency_ms,
        prefill_latency_ms: attrs.seconds_as_ms(&["gen_ai.latency.time_in_model_prefill"])?,
        finish_reason_raw,
        prompt,
        model_output,
        output_is_raw: false,
        extra: Some(Value::Object(extra).to_string()),
        attribution,
        ..Default::default()
    })
}

/// Whether an attribute is read into a column (or into `extra` under a name of its own).
fn is_read(key: &str) -> bool {
    [names::INPUT, names::OUTPUT, names::CACHE_READ, names::CACHE_WRITE, names::REASONING, names::RESPONSE_ID]
        .into_iter()
        .chain([names::MODEL, names::PROVIDER, names::SESSION, names::TTFT, names::OTHER])
        .any(|keys| keys.contains(&key))
        || names::VLLM_TIMES.iter().any(|(k, _)| *k == key)
        || names::CONTENT_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// A string attribute holding a JSON object (OpenInference's
/// `llm.invocation_parameters`, `output.value`); `None` when absent or not JSON.
fn json_attr(attrs: &Attrs<'_, '_>, key: &str) -> Option<Map<String, Value>> {
    attrs.text(&[key]).and_then(|t| serde_json::from_str(&t).ok())
}

/// The span's id for a reject: its `spanId`, else its place in the line.
fn span_locator(raw: &RawValue, place: impl FnOnce() -> String) -> String {
    #[derive(Deserialize)]
    struct Id {
        #[serde(rename = "spanId")]
        span_id: Option<String>,
    }
    serde_json::from_str::<Id>(raw.get()).ok().and_then(|i| i.span_id).unwrap_or_else(place)
}

/// Parses one OTLP/JSON line: a request per inference span.
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
    if line.trim_ascii_start().first() != Some(&b'{') {
        return Err("not OTLP/JSON: the file exporter's proto or compressed output (length-prefixed binary) \
                    cannot be read; configure it with format: json and no compression"
            .into());
    }
    let data: TracesData<'a> = fields::from_json(line).map_err(|e| format!("invalid OTLP/JSON traces line: {e}"))?;
    let (mut rows, mut skipped) = (Vec::new(), 0);
    for (r, rs) in data.resource_spans.iter().enumerate() {
        let resource = rs.resource.as_ref().map(|a| Attrs(&a.attributes));
        let text = |key: &str| resource.as_ref().and_then(|a| a.get(key)).and_then(|v| v.string_value.as_deref());
        let service = text("service.name");
        let environment = text("deployment.environment.name").or_else(|| text("deployment.environment"));
        for (s, ss) in rs.scope_spans.iter().enumerate() {
            let at = SpanContext { service, environment, scope: ss.scope.as_ref().and_then(|sc| sc.name.as_deref()) };
            for (k, raw) in ss.spans.iter().enumerate() {
                let outcome = serde_json::from_str::<Span<'a>>(raw.get())
                    .map_err(|e| format!("invalid span: {e}"))
                    .and_then(|span| match classify(&span, &Attrs(&span.attributes)) {
                        SpanKind::Inference => span_record(span, ctx, &at).map(Some),
                        SpanKind::Other => Ok(None),
                    });
                match outcome {
                    Ok(Some(rec)) => rows.push(Row::Request(rec)),
                    Ok(None) => skipped += 1,
                    Err(error) => rows.push(Row::Reject(RecordReject {
                        record: span_locator(raw, || format!("resourceSpans[{r}].scopeSpans[{s}].spans[{k}]")),
                        error,
                        raw: Cow::Borrowed(raw.get().as_bytes()),
                    })),
                }
            }
        }
    }
    Ok(Parsed::Rows { rows, skipped })
}

/// OTLP/JSON trace lines, recognised by `resourceSpans`.
pub struct Otel;

impl LogFormat for Otel {
    fn name(&self) -> &'static str {
        "otel"
    }

    fn about(&self) -> &'static str {
        "OpenTelemetry GenAI spans as OTLP/JSON lines (Collector file exporter): one request per inference span"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(|o| o.contains_key("resourceSpans"))
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../../../../sample_logs/otel.jsonl");

    fn ctx() -> LineContext<'static> {
        LineContext { default_model: "otel:otel", ..Default::default() }
    }

    /// The rows, span rejects and skip count of one sample line (1-based).
    fn line(n: usize) -> (Vec<RequestRecord<'static>>, Vec<(String, String)>, u64) {
        let text = SAMPLE.lines().nth(n - 1).expect("sample line");
        match parse(text.as_bytes(), &ctx()).expect("line parses") {
            Parsed::Rows { rows, skipped } => {
                let (mut recs, mut rejects) = (Vec::new(), Vec::new());
                for row in rows {
                    match row {
                        Row::Request(r) => recs.push(r.into_owned()),
                        Row::Reject(r) => rejects.push((r.record, r.error)),
                        other => panic!("an OpenTelemetry span gives requests, not {other:?}"),
                    }
                }
                (recs, rejects, skipped)
            }
            other => panic!("expected rows, got {other:?}"),
        }
    }

    fn extra(r: &RequestRecord<'_>) -> Value {
        serde_json::from_str(r.extra.as_deref().unwrap()).unwrap()
    }

    #[test]
    fn current_names_openai_with_cache_read_and_output_messages() {
        let (rows, rejects, skipped) = line(1);
        assert_eq!((rows.len(), rejects.len(), skipped), (1, 0, 1), "the HTTP parent span is skipped");
        let r = &rows[0];
        assert_eq!(r.request_id.as_deref(), Some("chatcmpl-otel-1"));
        assert_eq!(r.ts_micros, 1_717_243_200_010_000);
        assert_eq!(r.model, "gpt-4o-2024-08-06");
        assert_eq!(r.session_id.as_deref(), Some("conv-otel-1"));
        assert_eq!(r.status, None, "the parent span's HTTP status is not borrowed");
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.cache_write_tokens),
            (Some(1200), 85, 1024, 0)
        );
        assert_eq!((r.reasoning_tokens, r.max_tokens), (None, Some(256)));
        assert_eq!((r.ttft_ms, r.latency_ms, r.prefill_latency_ms), (Some(350.0), Some(1400.0), None));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("stop"));
        assert_eq!(r.model_output.as_deref(), Some("Paris is the capital of France."));
        assert_eq!(r.prompt, None);
        assert!(!r.output_is_raw);
        let x = extra(r);
        assert_eq!(x["provider"], "openai");
        assert_eq!(x["service.name"], "chat-frontend");
        assert_eq!(x["span_id"], "eee19b7ec3c1b175");
        assert_eq!(x.get("input_tokens_excluded_cache"), None);
    }

    #[test]
    fn anthropic_with_cache_creation_and_reasoning() {
        let (rows, rejects, skipped) = line(2);
        assert_eq!((rows.len(), rejects.len(), skipped), (1, 0, 2), "execute_tool and embeddings spans are skipped");
        let r = &rows[0];
        assert_eq!(r.request_id.as_deref(), Some("msg_otel_2"));
        assert_eq!(r.ts_micros, 1_717_243_260_000_000);
        assert_eq!(r.model, "claude-sonnet-4-5-20250929");
        assert_eq!(r.session_id.as_deref(), Some("sess-otel-a"));
        // input_tokens includes the 3000 read and 500 written: taken as logged.
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.cache_write_tokens),
            (Some(5000), 400, 3000, 500)
        );
        assert_eq!((r.reasoning_tokens, r.max_tokens), (Some(120), Some(1024)));
        assert_eq!((r.ttft_ms, r.latency_ms), (Some(1250.0), Some(6250.0)));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("end_turn"));
        assert_eq!(r.model_output.as_deref(), Some("The answer is 42."), "reasoning parts are not output text");
    }

    #[test]
    fn openllmetry_old_names_and_flattened_messages() {
        let (rows, _, skipped) = line(3);
        assert_eq!((rows.len(), skipped), (1, 0));
        let r = &rows[0];
        assert_eq!(r.request_id.as_deref(), Some("chatcmpl-otel-3"));
        assert_eq!(r.ts_micros, 1_717_243_320_000_000);
        assert_eq!(r.model, "gpt-4o-mini-2024-07-18");
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.cache_write_tokens),
            (Some(2048), 512, 0, 0)
        );
        assert_eq!((r.reasoning_tokens, r.max_tokens, r.ttft_ms, r.latency_ms), (None, Some(512), None, Some(9000.0)));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("length"));
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role":"user","content":"Tell me a long story."}]"#));
        assert_eq!(r.model_output.as_deref(), Some("Once upon a time"));
        assert_eq!(extra(r)["provider"], "openai", "gen_ai.system is the older name of the provider");
    }

    #[test]
    fn span_events_of_older_conventions() {
        let (rows, _, _) = line(4);
        let r = &rows[0];
        assert_eq!(r.request_id.as_deref(), Some("0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"));
        assert_eq!((r.ts_micros, r.model.as_ref()), (1_717_243_380_000_000, "gpt-3.5-turbo-instruct"));
        assert_eq!((r.prompt_tokens, r.completion_tokens, r.latency_ms), (Some(50), 16, Some(800.0)));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("stop"));
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role": "user", "content": "Say hello"}]"#));
        assert_eq!(r.model_output.as_deref(), Some("Hello there!"));
    }

    #[test]
    fn vllm_engine_spans_v0_and_v1() {
        let (rows, _, _) = line(5);
        let r = &rows[0];
        assert_eq!(r.request_id.as_deref(), Some("cmpl-vllm-5"));
        assert_eq!((r.ts_micros, r.model.as_ref()), (1_717_243_440_000_000, "meta-llama/Llama-3.1-8B-Instruct"));
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.max_tokens),
            (Some(900), 128, 0, Some(128))
        );
        assert_eq!((r.ttft_ms, r.latency_ms, r.finish_reason_raw.as_deref()), (Some(85.0), Some(2125.0), None));
        let x = extra(r);
        assert_eq!((x["queue_ms"].as_f64(), x["scheduler_ms"].as_f64()), (Some(12.0), Some(4.0)));
        assert_eq!((x["model_forward_ms"].as_f64(), x["model_execute_ms"].as_f64()), (Some(1900.0), Some(1950.0)));
        // The attributes no column holds, as logged (n and num_sequences are OTLP's 64-bit strings).
        assert_eq!(
            (x["gen_ai.request.temperature"].as_f64(), x["gen_ai.request.top_p"].as_f64()),
            (Some(0.0), Some(1.0))
        );
        assert_eq!((x["gen_ai.request.n"].as_f64(), x["gen_ai.usage.num_sequences"].as_f64()), (Some(1.0), Some(1.0)));
        assert_eq!(x.get("gen_ai.latency.e2e"), None, "read into latency_ms");
        assert_eq!(x.get("gen_ai.request.id"), None, "read into request_id");

        let (rows, _, _) = line(6);
        let r = &rows[0];
        assert_eq!(r.request_id.as_deref(), Some("cmpl-vllm-6"));
        assert_eq!((r.ts_micros, r.model.as_ref()), (1_717_243_500_000_000, "otel:otel"), "v1 names no model");
        assert_eq!((r.prompt_tokens, r.completion_tokens, r.max_tokens), (Some(3000), 200, Some(512)));
        assert_eq!((r.ttft_ms, r.latency_ms, r.prefill_latency_ms), (Some(310.0), Some(4310.0), Some(250.0)));
        assert_eq!(r.finish_reason_raw.as_deref(), Some("stop"), "a JSON-encoded array in a string");
        let x = extra(r);
        assert_eq!(
            (x["decode_ms"].as_f64(), x["queue_ms"].as_f64(), x["inference_ms"].as_f64()),
            (Some(3980.0), Some(50.0), Some(4230.0))
        );
    }

    #[test]
    fn failed_spans_keep_usage_or_are_rejected_alone() {
        let (rows, rejects, skipped) = line(7);
        assert_eq!((rows.len(), rejects.len(), skipped), (1, 1, 0));
        let r = &rows[0];
        assert_eq!(r.request_id.as_deref(), Some("d4cda95b652f4a1592b449d5929fda1b-6e0c63257de34c92"));
        assert_eq!((r.ts_micros, r.model.as_ref()), (1_717_243_560_000_000, "gpt-4o"));
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.ttft_ms, r.latency_ms),
            (Some(300), 40, Some(900.0), Some(30000.0))
        );
        assert_eq!(r.finish_reason_raw.as_deref(), Some("error"), "status ERROR without a finish reason");
        assert_eq!(extra(r)["error.type"], "timeout");
        let (record, error) = &rejects[0];
        assert_eq!(record, "6e0c63257de34c93");
        assert!(
            error.contains("without token usage") && error.contains("429") && error.contains("Rate limit"),
            "{error}"
        );
    }

    #[test]
    fn lines_without_model_calls_and_broken_lines() {
        let (rows, rejects, skipped) = line(8);
        assert_eq!((rows.len(), rejects.len(), skipped), (0, 0, 2));
        let last = SAMPLE.lines().nth(8).unwrap();
        assert!(parse(last.as_bytes(), &ctx()).unwrap_err().contains("invalid OTLP/JSON"));
        assert_eq!(SAMPLE.lines().count(), 9);
        assert!(parse(b"\x00\x00\x01\x2a\x0a\x0b", &ctx()).unwrap_err().contains("format: json"));
    }

    fn one_span(attrs: &str) -> Result<RequestRecord<'static>, String> {
        let line = format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"t","spanId":"s","name":"chat m","startTimeUnixNano":1717243200000000000,"endTimeUnixNano":"1717243200500000000","attributes":[{attrs}]}}]}}]}}]}}"#
        );
        match parse(line.as_bytes(), &ctx())? {
            Parsed::Rows { mut rows, .. } => match rows.pop() {
                Some(Row::Request(r)) => Ok(r.into_owned()),
                Some(Row::Reject(r)) => Err(r.error),
                None => Err("skipped".into()),
                Some(other) => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    fn int(key: &str, v: i64) -> String {
        format!(r#"{{"key":"{key}","value":{{"intValue":"{v}"}}}}"#)
    }

    #[test]
    fn cache_write_under_its_new_name_and_other_producers_names() {
        let chat = r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}"#;
        let base = [chat.to_string(), int("gen_ai.usage.input_tokens", 1000), int("gen_ai.usage.output_tokens", 10)];
        for (name, read, write) in [
            ("gen_ai.usage.cache_write.input_tokens", 0, 300),
            ("gen_ai.usage.cache_creation.input_tokens", 0, 300),
            ("gen_ai.usage.cache_creation_input_tokens", 0, 300),
            ("gen_ai.usage.input_tokens.cache_write", 0, 300),
            ("gen_ai.usage.cache_read.input_tokens", 300, 0),
            ("gen_ai.usage.cache_read_input_tokens", 300, 0),
            ("gen_ai.usage.cached_tokens", 300, 0),
            ("gen_ai.usage.input_tokens.cached", 300, 0),
        ] {
            let r = one_span(&[base.join(","), int(name, 300)].join(",")).unwrap();
            assert_eq!((r.prompt_tokens, r.cached_tokens, r.cache_write_tokens), (Some(1000), read, write), "{name}");
        }
        for name in
            ["gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens", "llm.usage.reasoning_tokens"]
        {
            let r = one_span(&[base.join(","), int(name, 7)].join(",")).unwrap();
            assert_eq!(r.reasoning_tokens, Some(7), "{name}");
        }
        // Without gen_ai.response.id the request id is the trace and span ids;
        // without a model, --model (or otel:<file stem>); the span's own duration.
        let r = one_span(&base.join(",")).unwrap();
        assert_eq!((r.request_id.as_deref(), r.model.as_ref(), r.latency_ms), (Some("t-s"), "otel:otel", Some(500.0)));
    }

    #[test]
    fn input_that_excludes_the_cache_is_repaired_and_flagged() {
        let attrs = [
            r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}"#.to_string(),
            int("gen_ai.usage.input_tokens", 100),
            int("gen_ai.usage.output_tokens", 20),
            int("gen_ai.usage.cache_read.input_tokens", 500),
            int("gen_ai.usage.cache_write.input_tokens", 30),
        ];
        let r = one_span(&attrs.join(",")).unwrap();
        assert_eq!((r.prompt_tokens, r.cached_tokens, r.cache_write_tokens), (Some(630), 500, 30));
        assert_eq!(extra(&r)["input_tokens_excluded_cache"], true);
    }

    #[test]
    fn bad_values_reject_the_span() {
        let chat = r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}"#;
        let bad = [
            chat,
            r#"{"key":"gen_ai.usage.input_tokens","value":{"stringValue":"many"}}"#,
            &int("gen_ai.usage.output_tokens", 1),
        ];
        assert!(one_span(&bad.join(",")).unwrap_err().contains("not a number"));
        let negative = [chat, &int("gen_ai.usage.input_tokens", -5), &int("gen_ai.usage.output_tokens", 1)];
        assert!(one_span(&negative.join(",")).unwrap_err().contains("non-negative"));
        let only_output = [chat, &int("gen_ai.usage.output_tokens", 1)];
        assert!(one_span(&only_output.join(",")).unwrap_err().contains("without token usage"));
        // An embeddings span is not a request, whatever it holds.
        let embed = [
            r#"{"key":"gen_ai.operation.name","value":{"stringValue":"embeddings"}}"#,
            &int("gen_ai.usage.input_tokens", 3),
        ];
        assert_eq!(one_span(&embed.join(",")).unwrap_err(), "skipped");
    }
}
