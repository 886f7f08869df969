//! LiteLLM proxy logs, in the two shapes teams keep them:
//! - `StandardLoggingPayload` objects as LiteLLM's S3/GCS bucket logging
//!   writes them (one JSON object per bucket object, no trailing newline;
//!   concatenated objects are JSON lines), times in epoch seconds;
//! - the `LiteLLM_SpendLogs` table exported as CSV (header naming the
//!   columns, JSON columns quoted) or JSON (objects, one per line or one array
//!   on one line), times as date-times.
//!
//! LiteLLM normalises every provider to OpenAI's usage, so `prompt_tokens`
//! includes cache reads (for Anthropic too); one release left cache writes
//! out, which shows as reads + writes exceeding it and is repaired and
//! flagged. The cost LiteLLM computed is kept in `logged_cost_usd`. Hashed API
//! keys (`api_key`, `metadata.user_api_key*`) are never read, so never stored.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::csv::CsvHeader;
use super::fields::{self, SecondsOrText, TsValue};
use super::openai::{self, ChatChoice};
use super::{parse_array_line, secrets, LineContext, LogFormat, Parsed, Probe};
use crate::attribution::{self, AttributionKeys};
use crate::record::{RequestRecord, TokenRecord};

/// Call types that generate no text (substrings of LiteLLM's `call_type`).
const NON_GENERATION_CALLS: &[&str] = &[
    "embedding",
    "image",
    "moderation",
    "transcription",
    "speech",
    "rerank",
    "file",
    "batch",
    "fine_tuning",
    "vector_store",
];

/// OpenAI-shaped usage as LiteLLM builds it (in `response.usage`, or in the
/// spend logs' `metadata.usage_object` / `additional_usage_values`).
#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default, deserialize_with = "fields::opt_number")]
    prompt_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    completion_tokens: Option<f64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// Anthropic's names, which LiteLLM also keeps.
    #[serde(default, deserialize_with = "fields::opt_number")]
    cache_read_input_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    cache_creation_input_tokens: Option<f64>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default, deserialize_with = "fields::opt_number")]
    cached_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    cache_creation_tokens: Option<f64>,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    #[serde(default, deserialize_with = "fields::opt_number")]
    reasoning_tokens: Option<f64>,
}

impl Usage {
    fn cache_read(&self) -> Option<f64> {
        self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).or(self.cache_read_input_tokens)
    }

    fn cache_write(&self) -> Option<f64> {
        self.prompt_tokens_details.as_ref().and_then(|d| d.cache_creation_tokens).or(self.cache_creation_input_tokens)
    }

    fn reasoning(&self) -> Option<f64> {
        self.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens)
    }
}

/// The OpenAI-shaped response LiteLLM logs (`{}` on failures).
#[derive(Deserialize, Default)]
struct Response<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Vec<ChatChoice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
}

/// Request parameters (`model_parameters` of older payloads, the spend
/// logs' `proxy_server_request`).
#[derive(Deserialize, Default)]
struct Parameters {
    #[serde(default, deserialize_with = "fields::opt_number")]
    max_completion_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    max_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    max_output_tokens: Option<f64>,
}

impl Parameters {
    fn max_tokens(&self) -> Option<f64> {
        self.max_completion_tokens.or(self.max_tokens).or(self.max_output_tokens)
    }
}

/// `error_information` of payloads and of the spend logs' metadata.
#[derive(Deserialize, Default)]
struct ErrorInformation {
    #[serde(default)]
    error_code: Option<Value>,
    #[serde(default)]
    error_class: Option<String>,
    #[serde(default)]
    error_message: Option<String>,
}

/// The spend logs' `metadata` column (the hashed key it holds is not read).
#[derive(Deserialize, Default)]
struct SpendMetadata {
    #[serde(default)]
    usage_object: Option<Usage>,
    #[serde(default)]
    additional_usage_values: Option<Usage>,
    #[serde(default)]
    error_information: Option<ErrorInformation>,
    #[serde(default)]
    status: Option<String>,
}

/// One LiteLLM call, whichever shape logged it; strings owned, since CSV
/// cells holding JSON are unescaped into buffers of their own.
#[derive(Default)]
struct Call {
    id: Option<String>,
    call_type: Option<String>,
    start_us: i64,
    end_us: Option<i64>,
    completion_start_us: Option<i64>,
    /// The spend logs' `request_duration_ms`.
    duration_ms: Option<f64>,
    stream: Option<bool>,
    model: Option<String>,
    prompt_tokens: Option<f64>,
    completion_tokens: Option<f64>,
    cost: Option<f64>,
    cache_hit: bool,
    failed: bool,
    error: Option<ErrorInformation>,
    error_text: Option<String>,
    session_id: Option<String>,
    prompt: Option<String>,
    max_tokens: Option<f64>,
    response_model: Option<String>,
    model_version: Option<String>,
    finish_reason: Option<String>,
    output: Option<String>,
    tokens: Vec<TokenRecord<'static>>,
    /// Usage sources, most specific first.
    usages: Vec<Usage>,
    extra: Map<String, Value>,
}

impl Call {
    /// Reads the logged `response` (an object, or JSON text).
    fn read_response(&mut self, raw: &str) -> Result<(), String> {
        let Ok(resp) = serde_json::from_str::<Response<'_>>(raw) else { return Ok(()) };
        self.response_model = resp.model.map(Cow::into_owned);
        self.model_version = resp.system_fingerprint.map(Cow::into_owned);
        if let Some(choice) = resp.choices.into_iter().next() {
            let parts = choice.into_parts()?.into_owned();
            self.finish_reason = parts.finish_reason.map(Cow::into_owned);
            self.output = parts.output.map(Cow::into_owned);
            self.tokens = parts.tokens;
        }
        if let Some(u) = resp.usage {
            self.usages.insert(0, u);
        }
        Ok(())
    }

    /// Reads the logged messages: text as is, anything else as JSON; `{}`
    /// and `[]` (prompt storage off) are no prompt.
    fn read_messages(&mut self, raw: &RawValue) -> Result<(), String> {
        if !matches!(raw.get(), "{}" | "[]") {
            self.prompt = fields::text_or_json(raw).map_err(|e| e.to_string())?.map(Cow::into_owned);
        }
        Ok(())
    }

    /// Keeps in `extra` what no column holds of a record (`raw`, JSON
    /// text): its keys but `read`, the objects `nested` names one level down
    /// (`metadata.<key>`), the logged `response` as `openai_chat` keeps a
    /// completion (`response.<key>`), and the requested model as
    /// `requested_model`. LiteLLM writes every field of its schema, most of
    /// them empty: empty values say nothing and are left out.
    fn keep_unread(&mut self, raw: &str, read: &[&str], nested: &[(&str, &[&str])]) {
        let mut members = fields::unread_nested(raw, read, nested, "");
        #[derive(Deserialize)]
        struct Logged<'a> {
            #[serde(borrow, default)]
            model: Option<&'a RawValue>,
            #[serde(borrow, default)]
            response: Option<&'a RawValue>,
        }
        let logged = serde_json::from_str::<Logged<'_>>(raw).ok();
        members.extend(
            logged.as_ref().and_then(|l| l.model).and_then(|m| fields::kept_member("requested_model".into(), m)),
        );
        // The response as logged: an object, or (CSV, some exports) JSON text in a string.
        let response = logged.and_then(|l| l.response).map(json_text);
        let response = response.as_deref().unwrap_or("");
        if response.starts_with('{') {
            members.extend(fields::unread_nested(
                response,
                RESPONSE_KEYS,
                &[("usage", RESPONSE_USAGE_KEYS)],
                "response.",
            ));
            members.extend(openai::first_choice_unread(response.as_bytes(), "response."));
        }
        let members = members.into_iter().filter(|(_, v)| !fields::is_empty_value(v)).collect();
        self.extra.extend(fields::members_to_values(members));
    }

    /// The call as a request, a skip (not a model call, a response-cache
    /// hit), or the reason it is rejected.
    fn into_parsed(mut self) -> Result<Parsed<'static>, String> {
        let call_type = self.call_type.as_deref().unwrap_or("");
        if NON_GENERATION_CALLS.iter().any(|t| call_type.contains(t)) {
            return Ok(Parsed::not_a_request());
        }
        // Served from LiteLLM's response cache: no model was called.
        if self.cache_hit || self.id.as_deref().is_some_and(|id| id.contains("_cache_hit")) {
            return Ok(Parsed::not_a_request());
        }
        let from_usage = |f: fn(&Usage) -> Option<f64>, usages: &[Usage]| usages.iter().find_map(f);
        let prompt = self.prompt_tokens.or_else(|| from_usage(|u| u.prompt_tokens, &self.usages));
        let completion = self.completion_tokens.or_else(|| from_usage(|u| u.completion_tokens, &self.usages));
        let prompt = fields::opt_token_count("prompt_tokens", prompt)?;
        let completion = fields::opt_token_count("completion_tokens", completion)?;
        let status = self.error.as_ref().and_then(|e| match &e.error_code {
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => s.parse().ok(),
            _ => None,
        });
        let (prompt, completion) = match (prompt, completion) {
            (Some(p), Some(c)) if !(self.failed && p == 0 && c == 0) => (p, c),
            _ if self.failed => {
                let e = self.error.unwrap_or_default();
                let what = [e.error_class, e.error_code.map(|c| c.as_str().map_or(c.to_string(), str::to_string))]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" ");
                let msg = e.error_message.or(self.error_text).unwrap_or_else(|| "no error message".into());
                return Err(format!("LiteLLM call failed without usage ({what}): {msg}"));
            }
            _ => return Err("missing prompt_tokens or completion_tokens".into()),
        };
        let cached =
            fields::opt_token_count("cached_tokens", from_usage(Usage::cache_read, &self.usages))?.unwrap_or(0);
        let cache_write =
            fields::opt_token_count("cache_creation_tokens", from_usage(Usage::cache_write, &self.usages))?
                .unwrap_or(0);
        let reasoning = fields::opt_token_count("reasoning_tokens", from_usage(Usage::reasoning, &self.usages))?;
        if cached > prompt {
            return Err(format!("cached_tokens ({cached}) exceed prompt_tokens ({prompt})"));
        }
        // LiteLLM counts cache reads in prompt_tokens; one release left the
        // writes out, which shows here.
        let prompt = if cached + cache_write > prompt {
            self.extra.insert("prompt_tokens_excluded_cache_writes".into(), Value::Bool(true));
            prompt + cache_write
        } else {
            prompt
        };
        // request_duration_ms is LiteLLM's whole milliseconds of endTime -
        // startTime: the times give the microseconds when they agree with it
        // (an export that rounded the times to the second does not).
        let elapsed = self.end_us.map(|end| fields::elapsed_ms("endTime - startTime", self.start_us, end));
        let latency_ms = match (self.duration_ms, elapsed) {
            (Some(ms), Some(Ok(exact))) if (exact - ms).abs() < 1.0 => Some(exact),
            (Some(ms), _) => fields::duration_ms("request_duration_ms", Some(ms))?,
            (None, elapsed) => elapsed.transpose()?,
        };
        // Without streaming LiteLLM logs completionStartTime = endTime: that is no first token.
        let ttft_ms = match (self.completion_start_us, self.stream, self.end_us) {
            (Some(first), Some(true), _) => {
                Some(fields::elapsed_ms("completionStartTime - startTime", self.start_us, first)?)
            }
            (Some(first), None, Some(end)) if first < end => {
                Some(fields::elapsed_ms("completionStartTime - startTime", self.start_us, first)?)
            }
            _ => None,
        };
        let finish = self.finish_reason.or_else(|| self.failed.then(|| "error".to_string()));
        let model = self.response_model.or(self.model).ok_or("missing required field model")?;
        let attribution = attribution::from_members(&self.extra, &ATTRIBUTION);
        Ok(Parsed::Request(RequestRecord {
            request_id: self.id.map(Cow::Owned),
            ts_micros: self.start_us,
            session_id: self.session_id.filter(|s| !s.is_empty()).map(Cow::Owned),
            model: Cow::Owned(model),
            model_version: self.model_version.map(Cow::Owned),
            status: status.filter(|_| self.failed).map(|s| s as i32),
            prompt_tokens: Some(prompt),
            completion_tokens: completion,
            cached_tokens: cached,
            cache_write_tokens: cache_write,
            reasoning_tokens: reasoning,
            max_tokens: fields::opt_token_count("max_tokens", self.max_tokens)?,
            ttft_ms,
            latency_ms,
            finish_reason_raw: finish.map(Cow::Owned),
            prompt: self.prompt.map(Cow::Owned),
            model_output: self.output.map(Cow::Owned),
            output_is_raw: false,
            tokens: self.tokens,
            logged_cost_usd: fields::cost_usd("response_cost", self.cost)?,
            extra: (!self.extra.is_empty()).then(|| Value::Object(self.extra).to_string()),
            attribution,
            ..Default::default()
        }))
    }
}

/// Attribution from a payload's or spend-logs row's members (docs/metrics.md,
/// "Attribution"): the end user the caller named before the key's owner (a
/// payload of an SDK call has it only as the request's `user` parameter,
/// `model_parameters.user`), a team's alias before its id; the hashed key is
/// never read.
const ATTRIBUTION: AttributionKeys = AttributionKeys {
    user_id: &[
        "end_user",
        "metadata.user_api_key_end_user_id",
        "model_parameters.user",
        "user",
        "metadata.user_api_key_user_id",
    ],
    team: &[
        "metadata.user_api_key_team_alias",
        "metadata.team_alias",
        "metadata.user_api_key_team_id",
        "metadata.team_id",
        "team_id",
    ],
    project: &["metadata.user_api_key_project_alias", "metadata.user_api_key_project_id"],
    environment: &[],
    tags: &["request_tags", "metadata.tags"],
    key_alias: &["metadata.user_api_key_alias"],
    provider: &["custom_llm_provider"],
};

/// A `StandardLoggingPayload`.
#[derive(Deserialize)]
struct Payload<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    call_type: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    response_cost: Option<f64>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    prompt_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    completion_tokens: Option<f64>,
    #[serde(default, rename = "startTime", deserialize_with = "fields::opt_epoch_seconds_or_text")]
    start_time: Option<SecondsOrText>,
    #[serde(default, rename = "endTime", deserialize_with = "fields::opt_epoch_seconds_or_text")]
    end_time: Option<SecondsOrText>,
    #[serde(default, rename = "completionStartTime", deserialize_with = "fields::opt_epoch_seconds_or_text")]
    completion_start_time: Option<SecondsOrText>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    cache_hit: Option<bool>,
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    response: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error_str: Option<Cow<'a, str>>,
    #[serde(default)]
    error_information: Option<ErrorInformation>,
    #[serde(default)]
    model_parameters: Option<Parameters>,
}

/// A payload's keys read into columns, or that repeat a column
/// (`total_tokens`, `response_time`); `model` is kept as `requested_model`,
/// `response` by [`Call::keep_unread`].
const PAYLOAD_KEYS: &[&str] = &[
    "id",
    "startTime",
    "endTime",
    "completionStartTime",
    "response_time",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "response_cost",
    "model",
    "messages",
    "response",
    "session_id",
    "status",
    "cache_hit",
];

/// The output cap's names, read from a request's parameters.
const MAX_TOKENS_KEYS: &[&str] = &["max_completion_tokens", "max_tokens", "max_output_tokens"];

/// A payload's objects kept one level down, each less the keys read of it.
/// `model_map_information` keeps only `model_map_key`: its `model_map_value`
/// is the model's entry of LiteLLM's price map (9 KB for `gpt-4o-mini`, the
/// same in every row of the model), which LiteLLM publishes per release and
/// `--pricing litellm:` reads; the costs it gave this request are in
/// `cost_breakdown`, which is kept.
const PAYLOAD_NESTED: &[(&str, &[&str])] = &[
    ("metadata", &["usage_object"]),
    ("hidden_params", &["response_cost", "usage_object"]),
    ("model_parameters", MAX_TOKENS_KEYS),
    ("error_information", &[]),
    ("model_map_information", &["model_map_value"]),
];

/// The logged response's keys read into columns (`id`: the request id).
const RESPONSE_KEYS: &[&str] = &["id", "model", "system_fingerprint", "choices"];
/// Its usage's keys read into columns: OpenAI's, and Anthropic's names for
/// the cache, which LiteLLM also keeps.
const RESPONSE_USAGE_KEYS: &[&str] = &[
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "prompt_tokens_details",
    "completion_tokens_details",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
];

fn payload_call(raw: &str) -> Result<Call, String> {
    let p: Payload<'_> = serde_json::from_str(raw).map_err(|e| format!("invalid LiteLLM logging payload: {e}"))?;
    let start = p.start_time.ok_or("missing required field startTime")?;
    let mut call = Call {
        id: p.id.map(Cow::into_owned),
        call_type: p.call_type.map(Cow::into_owned),
        start_us: start.to_micros("startTime")?,
        end_us: p.end_time.map(|t| t.to_micros("endTime")).transpose()?,
        completion_start_us: p.completion_start_time.map(|t| t.to_micros("completionStartTime")).transpose()?,
        stream: p.stream,
        model: p.model.map(Cow::into_owned),
        prompt_tokens: p.prompt_tokens,
        completion_tokens: p.completion_tokens,
        cost: p.response_cost,
        cache_hit: p.cache_hit == Some(true),
        failed: p.status.as_deref() == Some("failure") || p.error_str.is_some(),
        error: p.error_information,
        error_text: p.error_str.map(Cow::into_owned),
        session_id: p.session_id.map(Cow::into_owned),
        max_tokens: p.model_parameters.and_then(|m| m.max_tokens()),
        ..Default::default()
    };
    if let Some(raw) = p.response {
        call.read_response(raw.get())?;
    }
    if let Some(raw) = p.messages {
        call.read_messages(raw)?;
    }
    call.keep_unread(raw, PAYLOAD_KEYS, PAYLOAD_NESTED);
    Ok(call)
}

/// A `LiteLLM_SpendLogs` row, exported as JSON or read from a CSV row as the
/// same object.
#[derive(Deserialize)]
struct SpendLog<'a> {
    #[serde(borrow)]
    request_id: Cow<'a, str>,
    #[serde(borrow, default)]
    call_type: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    spend: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    prompt_tokens: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    completion_tokens: Option<f64>,
    #[serde(borrow, default, rename = "startTime")]
    start_time: Option<TsValue<'a>>,
    #[serde(borrow, default, rename = "endTime")]
    end_time: Option<TsValue<'a>>,
    #[serde(borrow, default, rename = "completionStartTime")]
    completion_start_time: Option<TsValue<'a>>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    request_duration_ms: Option<f64>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    #[serde(default)]
    cache_hit: Option<Value>,
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    response: Option<&'a RawValue>,
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    proxy_server_request: Option<&'a RawValue>,
}

/// A spend-logs row's columns read into columns, or that repeat one
/// (`total_tokens`); `model` is kept as `requested_model`, `response` by
/// [`Call::keep_unread`]; the hashed `api_key` is a credential, never kept.
const SPEND_LOG_KEYS: &[&str] = &[
    "request_id",
    "spend",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "startTime",
    "endTime",
    "completionStartTime",
    "request_duration_ms",
    "model",
    "messages",
    "response",
    "session_id",
    "status",
    "cache_hit",
];

/// A spend-logs row's JSON columns kept one level down, less the keys read of
/// them (the usage the row's counts come from; the request's output cap and
/// messages, which are columns).
const SPEND_LOG_NESTED: &[(&str, &[&str])] = &[
    ("metadata", &["usage_object", "additional_usage_values"]),
    ("proxy_server_request", &["max_completion_tokens", "max_tokens", "max_output_tokens", "messages"]),
];

fn spend_log_call(raw: &str) -> Result<Call, String> {
    let r: SpendLog<'_> = serde_json::from_str(raw).map_err(|e| format!("invalid LiteLLM spend-logs row: {e}"))?;
    let micros = |v: &Option<TsValue<'_>>| v.as_ref().map(TsValue::to_micros).transpose();
    let metadata: SpendMetadata =
        r.metadata.map(json_text).and_then(|m| serde_json::from_str(&m).ok()).unwrap_or_default();
    let status = r.status.as_deref().or(metadata.status.as_deref());
    let mut call = Call {
        id: Some(r.request_id.into_owned()),
        call_type: r.call_type.map(Cow::into_owned),
        start_us: micros(&r.start_time)?.ok_or("missing required field startTime")?,
        end_us: micros(&r.end_time)?,
        completion_start_us: micros(&r.completion_start_time)?,
        duration_ms: r.request_duration_ms,
        model: r.model.map(Cow::into_owned),
        prompt_tokens: r.prompt_tokens,
        completion_tokens: r.completion_tokens,
        cost: r.spend,
        cache_hit: match &r.cache_hit {
            Some(Value::Bool(b)) => *b,
            // CSV and some exports hold Python's str(bool).
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        },
        failed: status == Some("failure"),
        session_id: r.session_id.map(Cow::into_owned),
        max_tokens: r
            .proxy_server_request
            .map(json_text)
            .and_then(|r| serde_json::from_str::<Parameters>(&r).ok())
            .and_then(|p| p.max_tokens()),
        ..Default::default()
    };
    call.error = metadata.error_information;
    call.usages.extend(metadata.usage_object);
    call.usages.extend(metadata.additional_usage_values);
    if let Some(r) = r.response {
        call.read_response(&json_text(r))?;
    }
    if let Some(m) = r.messages {
        call.read_messages(m)?;
    }
    call.keep_unread(raw, SPEND_LOG_KEYS, SPEND_LOG_NESTED);
    // The price-map entry in metadata: only its key, as a payload keeps it.
    if let Some(Value::Object(mut map)) = call.extra.remove("metadata.model_map_information") {
        if let Some(key) = map.remove("model_map_key").filter(|k| !k.is_null()) {
            call.extra.insert("metadata.model_map_information.model_map_key".into(), key);
        }
    }
    Ok(call)
}

/// A JSON column: an object, or (as CSV and some exports hold it) JSON text in a string.
fn json_text(raw: &RawValue) -> Cow<'_, str> {
    match serde_json::from_str::<Cow<'_, str>>(raw.get()) {
        Ok(inner) => inner,
        Err(_) => Cow::Borrowed(raw.get()),
    }
}

/// A record's text (its UTF-8 was checked when it was read as a JSON object).
fn text(raw: &[u8]) -> Result<&str, String> {
    simdutf8::basic::from_utf8(raw).map_err(|_| "invalid UTF-8".to_string())
}

/// Which LiteLLM record a JSON object is.
enum Kind {
    Payload,
    SpendLog,
    /// An audit-log object of the same bucket (`action`, `table_name`): not a request.
    Audit,
}

fn kind(o: &Map<String, Value>) -> Option<Kind> {
    let has = |k: &str| o.contains_key(k);
    if has("startTime") && (has("response_cost") || has("hidden_params") || has("model_map_information")) {
        Some(Kind::Payload)
    } else if has("request_id") && has("spend") && has("startTime") {
        Some(Kind::SpendLog)
    } else if has("action") && has("table_name") && has("changed_by") {
        Some(Kind::Audit)
    } else {
        None
    }
}

/// One JSON object: a payload, a spend-logs row, or an audit-log object.
fn parse_object(raw: &[u8]) -> Result<Parsed<'_>, String> {
    let obj: Map<String, Value> = fields::from_json(raw).map_err(|e| format!("invalid JSON object: {e}"))?;
    match kind(&obj) {
        Some(Kind::Payload) => payload_call(text(raw)?)?.into_parsed(),
        Some(Kind::SpendLog) => spend_log_call(text(raw)?)?.into_parsed(),
        Some(Kind::Audit) => Ok(Parsed::not_a_request()),
        None => Err("neither a LiteLLM logging payload (startTime, response_cost) nor a spend-logs row \
                     (request_id, spend, startTime)"
            .into()),
    }
}

/// Parses one line: a payload or spend-logs object, a one-line JSON array of
/// them, or a row of a spend-logs CSV (whose header names the columns).
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
    if let Some(header) = ctx.header {
        if header.is_header_line(line) {
            return Ok(Parsed::Skip);
        }
        return spend_log_call(&header.row(line)?.to_json_object())?.into_parsed();
    }
    match line.trim_ascii_start().first() {
        Some(b'[') => parse_array_line(line, parse_object),
        Some(b'{') => parse_object(line),
        _ => Err("not a LiteLLM JSON object (a spend-logs CSV needs its header line first)".into()),
    }
}

/// The spend-logs CSV header: it names `request_id`, `spend` and `startTime`.
fn spend_log_header(line: &[u8]) -> Option<CsvHeader> {
    if line.trim_ascii_start().first().is_some_and(|b| matches!(b, b'{' | b'[')) {
        return None;
    }
    let header = CsvHeader::parse(line).ok()?;
    ["request_id", "spend", "startTime"].iter().all(|c| header.has(c)).then_some(header)
}

/// Hashed API keys: `api_key` (spend logs), `user_api_key`, `user_api_key_hash`,
/// `changed_by_api_key` (audit logs); never stored.
fn is_secret_key(key: &str) -> bool {
    key.contains("api_key")
}

/// A spend-logs CSV row without its hashed keys: the `api_key` cell
/// redacted, the keys inside JSON cells too.
fn scrub_csv_row<'a>(raw: &'a [u8], header: &CsvHeader) -> Cow<'a, [u8]> {
    let Ok(cells) = super::csv::split_record(raw.strip_suffix(b"\r").unwrap_or(raw)) else {
        return secrets::scrub_hex_hashes(raw);
    };
    let scrubbed: Vec<String> = cells
        .iter()
        .enumerate()
        .map(|(i, cell)| match header.columns().get(i) {
            Some(column) if is_secret_key(column) && !cell.is_empty() => secrets::REDACTED.to_string(),
            _ => String::from_utf8_lossy(&secrets::scrub_json(cell.as_bytes(), is_secret_key)).into_owned(),
        })
        .collect();
    let line = super::csv::join_record(&scrubbed);
    if line.as_bytes() == raw {
        Cow::Borrowed(raw)
    } else {
        Cow::Owned(line.into_bytes())
    }
}

/// LiteLLM logging payloads and spend logs.
pub struct LiteLlm;

impl LogFormat for LiteLlm {
    fn name(&self) -> &'static str {
        "litellm"
    }

    fn about(&self) -> &'static str {
        "LiteLLM StandardLoggingPayload objects (S3/GCS bucket logging) and LiteLLM_SpendLogs exports (CSV or JSON)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        match line.record() {
            Some(o) => kind(o).is_some(),
            None => spend_log_header(line.line()).is_some(),
        }
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx)
    }

    fn header(&self, first_line: &[u8]) -> Option<CsvHeader> {
        spend_log_header(first_line)
    }

    fn reject_raw<'a>(&self, raw: &'a [u8], ctx: &LineContext<'_>) -> Cow<'a, [u8]> {
        match (raw.trim_ascii_start().first(), ctx.header) {
            (Some(b'{' | b'['), _) => secrets::scrub_json(raw, is_secret_key),
            (_, Some(header)) => scrub_csv_row(raw, header),
            _ => secrets::scrub_hex_hashes(raw),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::summary;
    use super::*;

    const PAYLOADS: &str = include_str!("../../../../sample_logs/litellm.jsonl");
    const SPEND_LOGS: &str = include_str!("../../../../sample_logs/litellm_spendlogs.csv");

    fn payload(n: usize) -> Result<Parsed<'static>, String> {
        parse(PAYLOADS.lines().nth(n - 1).expect("sample line").as_bytes(), &LineContext::default())
    }

    fn spend_log(n: usize) -> Result<Parsed<'static>, String> {
        let header = spend_log_header(SPEND_LOGS.lines().next().unwrap().as_bytes()).expect("header");
        let ctx = LineContext { header: Some(&header), ..Default::default() };
        parse(SPEND_LOGS.lines().nth(n).expect("sample row").as_bytes(), &ctx)
    }

    fn request(p: Result<Parsed<'_>, String>) -> RequestRecord<'_> {
        match p {
            Ok(Parsed::Request(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn is_skip(p: Result<Parsed<'_>, String>) -> bool {
        matches!(p, Ok(Parsed::Rows { ref rows, skipped: 1 }) if rows.is_empty())
    }

    #[test]
    fn payloads_old_and_new_fields() {
        let r = request(payload(1));
        assert_eq!(
            summary(&r),
            (
                ("chatcmpl-ll-1", 1_717_243_200_000_000, "gpt-4o-2024-08-06", 1500, 120, 1024, 0, Some(0), Some(256)),
                (None, Some(1800.0), Some("stop"), Some(0.00367), None)
            )
        );
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role": "user", "content": "What is the capital of France?"}]"#));
        assert_eq!((r.model_output.as_deref(), r.status, r.session_id.as_deref()), (Some("Paris."), None, None));
        // Every key no column holds, one level down in metadata, hidden_params,
        // model_parameters and the response; not the hashed key, not the headers,
        // not the empty ones.
        assert_eq!(
            r.extra.as_deref(),
            Some(concat!(
                r#"{"api_base":"https://api.openai.com/v1","call_type":"acompletion","#,
                r#""hidden_params.api_base":"https://api.openai.com/v1","hidden_params.model_id":"a1b2c3","#,
                r#""metadata.requester_ip_address":"10.0.0.7","metadata.user_api_key_alias":"prod-key","#,
                r#""metadata.user_api_key_team_alias":"search","metadata.user_api_key_team_id":"team-1","#,
                r#""metadata.user_api_key_user_id":"u-1","model_group":"gpt-4o","model_id":"a1b2c3","#,
                r#""model_map_information.model_map_key":"gpt-4o","model_parameters.temperature":0.2,"#,
                r#""request_tags":["prod"],"requested_model":"gpt-4o","requester_ip_address":"10.0.0.7","#,
                r#""response.created":1717243201,"response.message.role":"assistant","#,
                r#""response.object":"chat.completion","saved_cache_cost":0.0}"#
            ))
        );

        // Anthropic through LiteLLM: prompt_tokens already holds the 4000 read and 100 written.
        let r = request(payload(2));
        assert_eq!(
            summary(&r),
            (
                (
                    "chatcmpl-ll-2",
                    1_717_243_260_000_000,
                    "claude-sonnet-4-5-20250929",
                    4600,
                    300,
                    4000,
                    100,
                    None,
                    None
                ),
                (Some(950.0), Some(5500.0), Some("stop"), Some(0.0141), None)
            )
        );
        assert_eq!(r.model_output.as_deref(), Some("Here is the summary."));
        let x: Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(
            (x["trace_id"].as_str(), x["stream"].as_bool()),
            (Some("3f2c1d9e-2b1a-4c5d-9e8f-000000000002"), Some(true))
        );
        assert_eq!(x["hidden_params.litellm_overhead_time_ms"].as_f64(), Some(3.2));
        assert_eq!(x["status_fields"]["guardrail_status"], "not_run");
        assert_eq!(x["user_agent"], "python-httpx/0.27.0");
        assert!(x.get("response.usage.cache_read_input_tokens").is_none(), "read into cached_tokens");
    }

    #[test]
    fn the_end_user_of_an_sdk_call_is_its_user_parameter() {
        // LiteLLM's SDK logs `completion(user=...)` in model_parameters only
        // (end_user null); the key's owner comes after it.
        let line = r#"{"id":"c1","startTime":1717243200.0,"response_cost":0.0,"model":"gpt-4o","prompt_tokens":3,"completion_tokens":1,"end_user":null,"model_parameters":{"user":"sdk-user"},"metadata":{"user_api_key_user_id":"owner"}}"#;
        let r = request(parse(line.as_bytes(), &LineContext::default()));
        assert_eq!(r.attribution.user_id.as_deref(), Some("sdk-user"));
        let line = line.replace(r#""model_parameters":{"user":"sdk-user"},"#, "");
        let r = request(parse(line.as_bytes(), &LineContext::default()));
        assert_eq!(r.attribution.user_id.as_deref(), Some("owner"));
    }

    #[test]
    fn payload_reasoning_and_length() {
        let r = request(payload(3));
        assert_eq!(
            summary(&r),
            (
                ("chatcmpl-ll-3", 1_717_243_320_000_000, "o3-mini-2025-01-31", 200, 900, 0, 0, Some(700), None),
                (Some(4500.0), Some(6000.0), Some("stop"), Some(0.00418), None)
            )
        );
        // Not streamed: completionStartTime is endTime, which is no time to first token.
        let r = request(payload(4));
        assert_eq!(
            summary(&r),
            (
                ("chatcmpl-ll-4", 1_717_243_380_250_000, "gpt-4o-mini-2024-07-18", 900, 256, 0, 0, None, Some(256)),
                (None, Some(5500.0), Some("length"), Some(0.0002885), None)
            )
        );
        assert_eq!(r.model_output.as_deref(), Some("Once upon a time"));
    }

    #[test]
    fn payload_cache_hits_embeddings_audit_logs_failures() {
        assert!(is_skip(payload(5)), "response-cache hit");
        let err = payload(6).unwrap_err();
        assert!(err.contains("RateLimitError") && err.contains("429") && err.contains("Rate limit reached"), "{err}");
        assert!(is_skip(payload(7)), "embedding call");
        assert!(is_skip(payload(8)), "audit log");
        assert!(payload(9).unwrap_err().contains("invalid JSON"));
        assert_eq!(PAYLOADS.lines().count(), 9);
    }

    #[test]
    fn spend_logs_csv_rows() {
        let r = request(spend_log(1));
        assert_eq!(
            summary(&r),
            (
                ("chatcmpl-sl-1", 1_717_243_200_000_000, "gpt-4o", 1500, 120, 1024, 0, Some(0), None),
                (None, Some(1800.0), None, Some(0.00367), Some("sess-a"))
            )
        );
        assert_eq!(r.session_id.as_deref(), Some("sess-a"));
        // The CSV row read as the JSON object of the same row: the JSON cells one
        // level down, the hashed key neither as a column nor in metadata.
        assert_eq!(
            r.extra.as_deref(),
            Some(concat!(
                r#"{"api_base":"https://api.openai.com/v1","call_type":"acompletion","#,
                r#""custom_llm_provider":"openai","metadata.status":"success","#,
                r#""metadata.user_api_key_alias":"prod-key","model_group":"gpt-4o","model_id":"a1b2c3","#,
                r#""request_tags":["prod"],"requested_model":"gpt-4o","requester_ip_address":"10.0.0.7","#,
                r#""team_id":"team-1","user":"u-1"}"#
            ))
        );
        let r = request(spend_log(2));
        assert_eq!(
            summary(&r),
            (
                (
                    "chatcmpl-sl-2",
                    1_717_243_260_000_000,
                    "claude-sonnet-4-5-20250929",
                    4600,
                    300,
                    4000,
                    100,
                    None,
                    None
                ),
                (Some(950.0), Some(5500.0), None, Some(0.0141), Some("sess-b"))
            )
        );
        assert_eq!(r.session_id.as_deref(), Some("sess-b"));
        let r = request(spend_log(3));
        assert_eq!(
            summary(&r),
            (
                ("chatcmpl-sl-3", 1_717_243_320_000_000, "o3-mini-2025-01-31", 200, 900, 0, 0, Some(700), None),
                (Some(4500.0), Some(6000.0), None, Some(0.00418), None)
            )
        );
        let r = request(spend_log(4));
        assert_eq!(
            summary(&r),
            (
                ("chatcmpl-sl-4", 1_717_243_380_250_000, "gpt-4o-mini-2024-07-18", 900, 256, 0, 0, None, None),
                (None, Some(5500.0), Some("length"), Some(0.0002885), None)
            )
        );
        assert_eq!(r.model_output.as_deref(), Some("Once upon a time"));
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role": "user", "content": "Tell me a long story."}]"#));
        assert!(is_skip(spend_log(5)), "cache_hit True");
        assert!(spend_log(6).unwrap_err().contains("RateLimitError 429"));
        assert!(is_skip(spend_log(7)), "aembedding");
        assert!(spend_log(8).unwrap_err().contains("expected 29 cells"));
        assert_eq!(SPEND_LOGS.lines().count(), 9);
    }

    #[test]
    fn spend_logs_json_objects_and_arrays() {
        let one = r#"{"request_id":"r1","call_type":"acompletion","spend":0.5,"prompt_tokens":10,"completion_tokens":2,"startTime":"2024-06-01T12:00:00Z","endTime":"2024-06-01T12:00:02Z","model":"gpt-4o","metadata":{"additional_usage_values":{"prompt_tokens_details":{"cached_tokens":4}}},"cache_hit":"False","session_id":"s"}"#;
        let r = request(parse(one.as_bytes(), &LineContext::default()));
        assert_eq!(
            summary(&r),
            (
                ("r1", 1_717_243_200_000_000, "gpt-4o", 10, 2, 4, 0, None, None),
                (None, Some(2000.0), None, Some(0.5), Some("s"))
            )
        );
        let hit = one.replace(r#""cache_hit":"False""#, r#""cache_hit":true"#);
        let array = format!("[{one},{hit},{{\"request_id\":\"r3\"}}]");
        match parse(array.as_bytes(), &LineContext::default()).unwrap() {
            Parsed::Rows { rows, skipped } => {
                assert_eq!(skipped, 1, "the cache hit");
                assert_eq!(rows.len(), 2);
                assert!(matches!(&rows[0], super::super::Row::Request(r) if r.request_id.as_deref() == Some("r1")));
                assert!(matches!(&rows[1], super::super::Row::Reject(r) if r.record == "[2]"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn extra_keeps_what_no_column_holds_but_keys_headers_and_the_price_map() {
        let payload = r#"{"id":"c1","call_type":"acompletion","session_id":"s-1","startTime":1717243200.0,"endTime":1717243201.0,"response_cost":0.5,"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"model":"gpt-4o","model_map_information":{"model_map_key":"gpt-4o","model_map_value":{"input_cost_per_token":2.5e-6,"max_tokens":16384}},"metadata":{"user_api_key_hash":"88dc","user_api_key":"88dc","requester_custom_headers":{"x-team":"a"},"spend_logs_metadata":{"job":"nightly","api_key":"sk-1"}},"hidden_params":{"additional_headers":{"llm_provider-x-request-id":"r"},"response_cost":0.5},"error_information":{"error_code":"","error_class":""},"error_str":null,"response":{"id":"c1","model":"gpt-4o-2024-08-06","system_fingerprint":"fp_9","service_tier":"default","choices":[{"index":0,"finish_reason":"stop","message":{"content":"ok"}}],"usage":{"prompt_tokens":10,"completion_tokens":2,"audio_tokens":0}}}"#;
        let r = request(parse(payload.as_bytes(), &LineContext::default()));
        assert_eq!((r.session_id.as_deref(), r.model_version.as_deref()), (Some("s-1"), Some("fp_9")));
        assert_eq!(
            r.extra.as_deref(),
            Some(concat!(
                r#"{"call_type":"acompletion","metadata.spend_logs_metadata":{"api_key":"REDACTED","job":"nightly"},"#,
                r#""model_map_information.model_map_key":"gpt-4o","requested_model":"gpt-4o","#,
                r#""response.service_tier":"default","response.usage.audio_tokens":0}"#
            ))
        );
        // A spend-logs row in JSON: the proxy's request less its output cap and
        // messages, one level down; the hashed key column never.
        let row = r#"{"request_id":"r1","api_key":"88dc","spend":0.5,"prompt_tokens":10,"completion_tokens":2,"startTime":"2024-06-01 12:00:00+00:00","endTime":"2024-06-01 12:00:02+00:00","model":"gpt-4o","proxy_server_request":"{\"max_tokens\": 9, \"temperature\": 0, \"messages\": []}","end_user":"","cache_key":"k1","session_id":""}"#;
        let r = request(parse(row.as_bytes(), &LineContext::default()));
        assert_eq!(
            (r.ts_micros, r.latency_ms, r.max_tokens, r.session_id.as_deref()),
            (1_717_243_200_000_000, Some(2000.0), Some(9), None)
        );
        assert_eq!(
            r.extra.as_deref(),
            Some(r#"{"cache_key":"k1","proxy_server_request.temperature":0,"requested_model":"gpt-4o"}"#),
            "a JSON column held as text in a string is read as its object"
        );
    }

    #[test]
    fn hashed_keys_never_reach_rejects() {
        let hash = "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b";
        let ctx = LineContext::default();
        let payload = format!(
            r#"{{"id":"x","startTime":1.0,"response_cost":0,"metadata":{{"user_api_key_hash":"{hash}"}},"status":"failure"}}"#
        );
        let kept = String::from_utf8(LiteLlm.reject_raw(payload.as_bytes(), &ctx).into_owned()).unwrap();
        assert!(!kept.contains(hash) && kept.contains(r#""user_api_key_hash":"REDACTED""#), "{kept}");
        let cut = &payload[..payload.len() - 20];
        assert!(!String::from_utf8_lossy(&LiteLlm.reject_raw(cut.as_bytes(), &ctx)).contains(&hash[..40]));
        // The sample's first CSV row carries the hash in api_key and in metadata.user_api_key.
        let header = spend_log_header(SPEND_LOGS.lines().next().unwrap().as_bytes()).unwrap();
        let ctx = LineContext { header: Some(&header), ..Default::default() };
        let row = SPEND_LOGS.lines().nth(1).unwrap();
        assert_eq!(row.matches(hash).count(), 2);
        let kept = String::from_utf8(LiteLlm.reject_raw(row.as_bytes(), &ctx).into_owned()).unwrap();
        assert!(!kept.contains(hash), "{kept}");
        let cells = super::super::csv::split_record(kept.as_bytes()).unwrap();
        assert_eq!((cells[0].as_ref(), cells[2].as_ref(), cells[3].as_ref()), ("chatcmpl-sl-1", "REDACTED", "0.00367"));
        assert!(cells[17].contains(r#""user_api_key": "REDACTED""#), "{}", cells[17]);
        let broken = format!("id,\"{hash}");
        assert_eq!(String::from_utf8_lossy(&LiteLlm.reject_raw(broken.as_bytes(), &ctx)), "id,\"REDACTED");
    }

    #[test]
    fn cache_writes_left_out_of_prompt_tokens_are_added_and_flagged() {
        let line = r#"{"id":"x","call_type":"acompletion","response_cost":0.1,"prompt_tokens":4500,"completion_tokens":5,"startTime":1717243200.0,"endTime":1717243201.0,"model":"claude","response":{"model":"claude-x","choices":[],"usage":{"prompt_tokens":4500,"completion_tokens":5,"cache_read_input_tokens":4000,"cache_creation_input_tokens":600}}}"#;
        let r = request(parse(line.as_bytes(), &LineContext::default()));
        assert_eq!((r.prompt_tokens, r.cached_tokens, r.cache_write_tokens), (Some(5100), 4000, 600));
        let x: Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(x["prompt_tokens_excluded_cache_writes"], true);
        let no_start = line.replace(r#""startTime":1717243200.0,"#, "");
        assert!(parse(no_start.as_bytes(), &LineContext::default()).unwrap_err().contains("startTime"));
        let ms = line.replace("1717243200.0", "1717243200000.0");
        assert!(parse(ms.as_bytes(), &LineContext::default()).unwrap_err().contains("epoch seconds"));
        // Loggers that serialise with `default=str` write Python's datetime text; ISO 8601 too.
        let text = line
            .replace("1717243200.0", r#""2024-06-01 12:00:00.250000""#)
            .replace("1717243201.0", r#""2024-06-01T12:00:01.5Z""#);
        let r = request(parse(text.as_bytes(), &LineContext::default()));
        assert_eq!((r.ts_micros, r.latency_ms), (1_717_243_200_250_000, Some(1250.0)));
        let bad = line.replace("1717243200.0", r#""noon""#);
        assert!(parse(bad.as_bytes(), &LineContext::default()).unwrap_err().contains("startTime"));
    }
}
