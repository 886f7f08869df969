//! The optional gateway envelope around provider responses (OpenAI Chat
//! Completions and Responses, Anthropic, TGI): `{"ts", "latency_ms", "ttft_ms", "request", "response"}`.
//! Providers' response bodies lack arrival time and latency; gateways add them.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use serde_json::Value;

use super::fields::{self, Member, TsValue};
use super::LineContext;
use crate::attribution;
use crate::record::Attribution;

/// What the envelope adds to a response. A bare response parses as an empty envelope.
#[derive(Debug, Default, Deserialize)]
pub struct Envelope<'a> {
    /// Arrival time.
    #[serde(borrow, default)]
    pub ts: Option<TsValue<'a>>,
    /// End-to-end latency.
    #[serde(default)]
    pub latency_ms: Option<f64>,
    /// Time to first token.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Gateway request id.
    #[serde(borrow, default)]
    pub request_id: Option<Cow<'a, str>>,
    /// Session / conversation id.
    #[serde(borrow, default)]
    pub session_id: Option<Cow<'a, str>>,
    /// HTTP status (a bare response may have a `status` of its own: see [`Envelope::status`]).
    #[serde(borrow, default)]
    pub status: Option<&'a RawValue>,
    /// Experiment arm (the first of these with a label, see [`fields::arm_label`]).
    #[serde(borrow, default)]
    pub variant: Option<&'a RawValue>,
    /// Experiment arm, second choice.
    #[serde(borrow, default)]
    pub arm: Option<&'a RawValue>,
    /// Experiment arm, third choice.
    #[serde(borrow, default)]
    pub experiment: Option<&'a RawValue>,
    /// Model, for responses that do not name it (TGI).
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// Prompt length, for responses that do not report it (TGI without prefill details).
    #[serde(default)]
    pub prompt_tokens: Option<f64>,
    /// The request as sent.
    #[serde(borrow, default)]
    pub request: Option<RequestSide<'a>>,
    /// The provider's response body.
    #[serde(borrow, default)]
    pub response: Option<&'a RawValue>,
    /// End user, as a gateway logs it under the column's name.
    #[serde(default)]
    pub user_id: Option<Value>,
    /// Team.
    #[serde(default)]
    pub team: Option<Value>,
    /// Project.
    #[serde(default)]
    pub project: Option<Value>,
    /// Environment.
    #[serde(default)]
    pub environment: Option<Value>,
    /// Tags.
    #[serde(default)]
    pub tags: Option<Value>,
    /// API key name.
    #[serde(default)]
    pub key_alias: Option<Value>,
    /// Provider.
    #[serde(default)]
    pub provider: Option<Value>,
}

/// The parts of the request body that matter for analytics.
#[derive(Debug, Default, Deserialize)]
pub struct RequestSide<'a> {
    /// Output cap (OpenAI, Anthropic).
    #[serde(default)]
    pub max_tokens: Option<f64>,
    /// Output cap (OpenAI, newer name).
    #[serde(default)]
    pub max_completion_tokens: Option<f64>,
    /// Output cap (OpenAI Responses).
    #[serde(default)]
    pub max_output_tokens: Option<f64>,
    /// Chat messages (OpenAI, Anthropic).
    #[serde(borrow, default)]
    pub messages: Option<&'a RawValue>,
    /// Prompt text (completions-style APIs).
    #[serde(borrow, default)]
    pub prompt: Option<&'a RawValue>,
    /// Input text or items (OpenAI Responses).
    #[serde(borrow, default)]
    pub input: Option<&'a RawValue>,
    /// Prompt text (TGI).
    #[serde(borrow, default)]
    pub inputs: Option<Cow<'a, str>>,
    /// TGI generation parameters.
    #[serde(default)]
    pub parameters: Option<TgiParameters>,
    /// Model requested.
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// The end user the caller named (OpenAI's `user`).
    #[serde(default)]
    pub user: Option<Value>,
    /// Request metadata: OpenAI's key-value pairs, Anthropic's `user_id`.
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// TGI's `parameters` object.
#[derive(Debug, Default, Deserialize)]
pub struct TgiParameters {
    /// Output cap.
    #[serde(default)]
    pub max_new_tokens: Option<f64>,
}

/// The envelope's keys [`Envelope`] reads.
const ENVELOPE_KEYS: &[&str] = &[
    "ts",
    "latency_ms",
    "ttft_ms",
    "request_id",
    "session_id",
    "status",
    "variant",
    "arm",
    "experiment",
    "model",
    "prompt_tokens",
    "request",
    "response",
    "user_id",
    "team",
    "project",
    "environment",
    "tags",
    "key_alias",
    "provider",
];

/// The keys of the envelope's `request` read into columns.
const REQUEST_KEYS: &[&str] = &[
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "messages",
    "prompt",
    "input",
    "inputs",
    "model",
    "user",
];

/// What no column holds, for `extra`: the envelope's other keys, its
/// request's (`request.<key>`: sampling parameters, tools), the response
/// body's keys that `body_keys` does not name, and inside the body each
/// object of `nested` (`usage`) less the keys read of it (`usage.<key>`);
/// credentials never ([`fields::unread_members`]). `extra_json` of the
/// result is the `extra` column.
pub fn unread<'x>(line: &'x [u8], body: &'x [u8], body_keys: &[&str], nested: &[(&str, &[&str])]) -> Vec<Member<'x>> {
    let (Ok(line), Ok(body)) = (std::str::from_utf8(line), std::str::from_utf8(body)) else { return Vec::new() };
    let bare = std::ptr::eq(line, body);
    let mut out = Vec::new();
    if !bare {
        out = fields::unread_nested(line, ENVELOPE_KEYS, &[("request", REQUEST_KEYS)], "");
    }
    // A bare response's own keys with the envelope's names are read as the envelope's.
    let read: Vec<&str> =
        if bare { body_keys.iter().chain(ENVELOPE_KEYS).copied().collect() } else { body_keys.to_vec() };
    out.extend(fields::unread_nested(body, &read, nested, ""));
    out
}

/// Splits a line into its envelope and the response body (the line itself when bare).
pub fn open(line: &[u8]) -> Result<(Envelope<'_>, &[u8]), String> {
    let env: Envelope<'_> = fields::from_json(line).map_err(|e| format!("invalid JSON object: {e}"))?;
    let body = match env.response {
        Some(r) if r.get().starts_with('{') => r.get().as_bytes(),
        _ => line,
    };
    Ok((env, body))
}

impl<'a> Envelope<'a> {
    /// Arrival time from the envelope, else `fallback_secs` (a response's
    /// `created`), else the run's `--base-time`: a response saved as the
    /// provider returned it may carry no time at all (TGI's `/generate`, an
    /// Anthropic message), and is placed there, as a trace with relative times is.
    pub fn ts_micros(&self, fallback_secs: Option<f64>, ctx: &LineContext<'_>) -> Result<i64, String> {
        match (&self.ts, fallback_secs) {
            (Some(ts), _) => ts.to_micros(),
            (None, Some(secs)) => TsValue::EpochMillis(secs * 1000.0).to_micros(),
            (None, None) => Ok(ctx.base_time_micros),
        }
    }

    /// The request's output cap, and the value as logged when it is none
    /// (`-1`, meaning no cap: see [`fields::with_invalid`]).
    pub fn max_tokens(&self) -> (Option<i64>, Option<f64>) {
        let req = self.request.as_ref();
        let v = req.and_then(|r| {
            r.max_completion_tokens
                .or(r.max_tokens)
                .or(r.max_output_tokens)
                .or(r.parameters.as_ref().and_then(|p| p.max_new_tokens))
        });
        fields::lenient_token_count("max_tokens", v)
    }

    /// The prompt (messages as JSON, or text).
    pub fn prompt(&self) -> Result<Option<Cow<'a, str>>, String> {
        let Some(req) = self.request.as_ref() else { return Ok(None) };
        if let Some(inputs) = &req.inputs {
            return Ok(Some(inputs.clone()));
        }
        match req.messages.or(req.prompt).or(req.input) {
            Some(raw) => fields::text_or_json(raw).map_err(|e| e.to_string()),
            None => Ok(None),
        }
    }

    /// The experiment arm the gateway logged, if any (`variant`, else `arm`,
    /// else `experiment`, whichever first holds a label).
    pub fn variant(&self) -> Option<Cow<'a, str>> {
        [self.variant, self.arm, self.experiment].into_iter().flatten().find_map(fields::arm_label)
    }

    /// HTTP status as an integer. On a bare response (no envelope around it)
    /// a text `status` is the response's own (Responses API: `completed`),
    /// not an HTTP status.
    pub fn status(&self) -> Result<Option<i32>, String> {
        let Some(raw) = self.status else { return Ok(None) };
        match serde_json::from_str::<Option<f64>>(raw.get()) {
            Ok(code) => Ok(fields::opt_token_count("status", code)?.map(|s| s as i32)),
            Err(_) if self.response.is_none() && raw.get().starts_with('"') => Ok(None),
            Err(_) => Err(format!("status must be an HTTP status code, got {}", raw.get())),
        }
    }

    /// Who the request ran for: the envelope's fields of the columns' names,
    /// else the request's `user` (OpenAI) or `metadata.user_id` (Anthropic)
    /// and its other `metadata` members as `key:value` tags; `provider` when
    /// the envelope names none.
    pub fn attribution(&self, provider: Option<&'static str>) -> Attribution<'static> {
        let a = self;
        let label = |v: &Option<Value>| v.as_ref().and_then(attribution::scalar).map(Cow::Owned);
        let req = self.request.as_ref();
        let metadata = req.and_then(|r| r.metadata.as_ref()).and_then(Value::as_object);
        let user = req
            .and_then(|r| r.user.as_ref())
            .or_else(|| metadata.and_then(|m| m.get("user_id")))
            .and_then(attribution::scalar);
        let tags = match (&a.tags, metadata) {
            (Some(t), _) => attribution::tags_of(t),
            (None, Some(m)) => attribution::member_tags(m.iter().filter(|(k, _)| *k != "user_id")),
            (None, None) => Vec::new(),
        };
        Attribution {
            user_id: label(&a.user_id).or(user.map(Cow::Owned)),
            team: label(&a.team),
            project: label(&a.project),
            environment: label(&a.environment),
            tags,
            key_alias: label(&a.key_alias),
            provider: label(&a.provider).map(|p| Cow::Owned(p.to_lowercase())).or(provider.map(Cow::Borrowed)),
        }
    }

    /// Timings, validated.
    pub fn timings(&self) -> Result<(Option<f64>, Option<f64>), String> {
        Ok((fields::duration_ms("ttft_ms", self.ttft_ms)?, fields::duration_ms("latency_ms", self.latency_ms)?))
    }
}
