//! OpenAI Chat Completions responses (bare or in a gateway envelope) and
//! OpenAI Batch API output lines. OpenAI counts cached tokens inside
//! `prompt_tokens` and reasoning tokens inside `completion_tokens`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical::extra_json;
use super::envelope::{self, Envelope};
use super::fields::{self, LogprobEntry};
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::record::{RequestRecord, TokenRecord};

#[derive(Deserialize)]
struct ChatCompletion<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    created: Option<f64>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Vec<ChatChoice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    timings: Option<LlamaTimings>,
    /// Groq's own object (its request id; its usage in a stream).
    #[serde(borrow, default)]
    x_groq: Option<&'a RawValue>,
}

/// llama.cpp server's `timings`: the prompt tokens read (`prompt_n`) and
/// taken from its cache (`cache_n`), the milliseconds spent on each part.
#[derive(Deserialize, Default)]
struct LlamaTimings {
    #[serde(default, deserialize_with = "lenient_number")]
    cache_n: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    prompt_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    predicted_ms: Option<f64>,
}

impl LlamaTimings {
    /// The first token comes once the prompt is read; the last after the
    /// prediction (llama.cpp does not time the queue).
    fn server(&self) -> ServerTimes {
        let ms = |v: Option<f64>| fields::duration_ms("timings", v).ok().flatten();
        let prompt = ms(self.prompt_ms);
        let total = prompt.zip(ms(self.predicted_ms)).map(|(p, d)| p + d);
        ServerTimes { ttft_ms: prompt, latency_ms: total, prefill_ms: prompt }
    }
}

/// One choice of a Chat Completions response (LiteLLM and Helicone log the
/// same shape).
#[derive(Deserialize)]
pub(crate) struct ChatChoice<'a> {
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
    #[serde(borrow, default)]
    logprobs: Option<ChoiceLogprobs<'a>>,
}

/// What a choice says.
pub(crate) struct ChoiceParts<'a> {
    /// The finish reason as logged.
    pub finish_reason: Option<Cow<'a, str>>,
    /// The message's text; other content (parts, tool calls) as JSON.
    pub output: Option<Cow<'a, str>>,
    /// Per-token logprobs as token rows.
    pub tokens: Vec<TokenRecord<'a>>,
}

impl<'a> ChatChoice<'a> {
    /// The finish reason, output and token rows of this choice.
    pub(crate) fn into_parts(self) -> Result<ChoiceParts<'a>, String> {
        let output = match self.message.and_then(|m| m.content) {
            Some(raw) => fields::text_or_json(raw).map_err(|e| e.to_string())?,
            None => None,
        };
        let logprobs = self.logprobs.and_then(|l| l.content);
        Ok(ChoiceParts {
            finish_reason: self.finish_reason,
            output,
            tokens: fields::merge_token_data(logprobs, None, None, &mut Vec::new()),
        })
    }
}

impl ChoiceParts<'_> {
    /// The same parts with their strings copied (for a body parsed from a buffer of its own).
    pub(crate) fn into_owned(self) -> ChoiceParts<'static> {
        ChoiceParts {
            finish_reason: self.finish_reason.map(|f| Cow::Owned(f.into_owned())),
            output: self.output.map(|o| Cow::Owned(o.into_owned())),
            tokens: self.tokens.into_iter().map(TokenRecord::into_owned).collect(),
        }
    }
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// A choice's `logprobs` (of a response, or of a stream's chunk).
#[derive(Deserialize)]
pub(crate) struct ChoiceLogprobs<'a> {
    /// One entry per output token.
    #[serde(borrow, default)]
    pub content: Option<Vec<LogprobEntry<'a>>>,
}

/// A Chat Completions `usage` object (of a response, or of a stream's last
/// chunk), with what OpenAI-compatible providers add to it: each optional
/// addition that does not fit is left out of the columns (and kept in
/// `extra` with the rest of `usage`), never a reject.
#[derive(Deserialize)]
pub(crate) struct Usage {
    prompt_tokens: Option<f64>,
    completion_tokens: Option<f64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// Mistral's cached prompt tokens.
    #[serde(default, deserialize_with = "lenient_number")]
    num_cached_tokens: Option<f64>,
    /// OpenRouter's billed cost, in USD.
    #[serde(default, deserialize_with = "lenient_number")]
    cost: Option<f64>,
    /// Groq's server times, in seconds: waiting, reading the prompt, the whole.
    #[serde(default, deserialize_with = "lenient_number")]
    queue_time: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    prompt_time: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    total_time: Option<f64>,
}

/// An optional number that is `None` when it is anything else (a provider's
/// addition to `usage` that does not fit is no reason to lose the request).
fn lenient_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(serde_json::Value::deserialize(d)?.as_f64())
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<f64>,
}

/// The counts of a `usage` object, validated.
pub(crate) struct UsageCounts {
    /// `prompt_tokens` (cached ones included).
    pub prompt_tokens: i64,
    /// `completion_tokens` (reasoning included).
    pub completion_tokens: i64,
    /// `prompt_tokens_details.cached_tokens`, 0 when absent.
    pub cached_tokens: i64,
    /// `completion_tokens_details.reasoning_tokens`.
    pub reasoning_tokens: Option<i64>,
    /// The billed cost the provider logged (OpenRouter's `cost`).
    pub logged_cost_usd: Option<f64>,
    /// The provider's server times (Groq), when it logs them.
    pub server: ServerTimes,
}

/// Times a provider's server measured, in milliseconds (Groq's `usage`, llama.cpp's `timings`).
#[derive(Default, Clone, Copy)]
pub(crate) struct ServerTimes {
    /// From the request's arrival to its first token.
    pub ttft_ms: Option<f64>,
    /// From the request's arrival to its last token.
    pub latency_ms: Option<f64>,
    /// Reading the prompt.
    pub prefill_ms: Option<f64>,
}

impl ServerTimes {
    /// Groq's: the first token comes after the queue and the prompt; the
    /// whole is the queue and `total_time`. A time that is not a plausible
    /// duration is left out.
    fn groq(queue: Option<f64>, prompt: Option<f64>, total: Option<f64>) -> ServerTimes {
        let ms = |v: Option<f64>| fields::seconds_to_ms("usage", v).ok().flatten();
        let sum = |a: Option<f64>, b: Option<f64>| Some(ms(a)? + ms(b)?);
        ServerTimes { ttft_ms: sum(queue, prompt), latency_ms: sum(queue, total), prefill_ms: ms(prompt) }
    }
}

impl Usage {
    /// The counts, each a plausible token count, cached within the prompt.
    pub(crate) fn counts(self) -> Result<UsageCounts, String> {
        let prompt_tokens =
            fields::token_count("usage.prompt_tokens", self.prompt_tokens.ok_or("missing usage.prompt_tokens")?)?;
        let completion_tokens = fields::token_count(
            "usage.completion_tokens",
            self.completion_tokens.ok_or("missing usage.completion_tokens")?,
        )?;
        let cached = self.prompt_tokens_details.and_then(|d| d.cached_tokens).or(self.num_cached_tokens);
        let cached_tokens = fields::opt_token_count("cached_tokens", cached)?.unwrap_or(0);
        if cached_tokens > prompt_tokens {
            return Err(format!("cached_tokens ({cached_tokens}) exceed prompt_tokens ({prompt_tokens})"));
        }
        let reasoning_tokens = fields::opt_token_count(
            "reasoning_tokens",
            self.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        )?;
        Ok(UsageCounts {
            prompt_tokens,
            completion_tokens,
            cached_tokens,
            reasoning_tokens,
            logged_cost_usd: fields::cost_usd("usage.cost", self.cost).ok().flatten(),
            server: ServerTimes::groq(self.queue_time, self.prompt_time, self.total_time),
        })
    }
}

/// Parses a Chat Completions response line.
pub fn parse_chat<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<RequestRecord<'a>, String> {
    let (env, body) = envelope::open(line)?;
    chat_record(line, env, body, ctx)
}

/// The request of `body` (a completion), in the envelope `env` of `line` (`line` is `body` when bare).
fn chat_record<'a>(
    line: &'a [u8],
    env: Envelope<'a>,
    body: &'a [u8],
    ctx: &LineContext<'_>,
) -> Result<RequestRecord<'a>, String> {
    let resp: ChatCompletion<'a> = fields::from_json(body).map_err(|e| format!("invalid chat completion: {e}"))?;
    let mut usage = resp.usage.ok_or("missing required field usage")?.counts()?;
    // Who served it, when the body says so (OpenAI's shape is everyone's).
    let provider = if resp.x_groq.is_some() {
        Some("groq")
    } else if resp.timings.is_some() {
        Some("llama.cpp")
    } else if usage.logged_cost_usd.is_some() && resp.id.as_deref().is_some_and(|id| id.starts_with("gen-")) {
        Some("openrouter")
    } else {
        None
    };
    let timings = resp.timings.unwrap_or_default();
    if usage.cached_tokens == 0 {
        // llama.cpp's prompt tokens reused from its cache, when it says so and they fit.
        let cache_n = fields::opt_token_count("timings.cache_n", timings.cache_n).ok().flatten().unwrap_or(0);
        usage.cached_tokens = if cache_n <= usage.prompt_tokens { cache_n } else { 0 };
    }
    let server = if usage.server.latency_ms.is_some() { usage.server } else { timings.server() };
    let choice = match resp.choices.into_iter().next() {
        Some(c) => c.into_parts()?,
        None => ChoiceParts { finish_reason: None, output: None, tokens: Vec::new() },
    };
    let model = resp
        .model
        .or_else(|| env.request.as_ref().and_then(|r| r.model.clone()))
        .unwrap_or_else(|| Cow::Owned(ctx.default_model.to_string()));
    let (ttft_ms, latency_ms) = env.timings()?;
    let (ttft_ms, latency_ms) = (ttft_ms.or(server.ttft_ms), latency_ms.or(server.latency_ms));
    let (max_tokens, invalid_max) = env.max_tokens();
    let unread = chat_unread(line, body);
    let attribution = env.attribution(provider);
    Ok(fields::with_invalid(
        RequestRecord {
            request_id: env.request_id.clone().or(resp.id),
            ts_micros: env.ts_micros(resp.created, ctx)?,
            session_id: env.session_id.clone(),
            variant: env.variant(),
            model,
            model_version: resp.system_fingerprint,
            status: env.status()?,
            prompt_tokens: Some(usage.prompt_tokens),
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cached_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            max_tokens,
            ttft_ms,
            latency_ms,
            prefill_latency_ms: server.prefill_ms,
            logged_cost_usd: usage.logged_cost_usd,
            finish_reason_raw: choice.finish_reason,
            prompt: env.prompt()?,
            model_output: choice.output,
            output_is_raw: false,
            tokens: choice.tokens,
            extra: extra_json(&unread),
            attribution,
            ..Default::default()
        },
        "max_tokens",
        invalid_max,
    ))
}

/// A completion's keys read into columns.
pub(crate) const COMPLETION_KEYS: &[&str] =
    &["id", "object", "created", "model", "system_fingerprint", "choices", "usage"];
/// The usage keys read into columns.
pub(crate) const USAGE_KEYS: &[&str] =
    &["prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"];

/// What no column holds: the envelope's, completion's and usage's other keys
/// ([`envelope::unread`]), and the first choice's ([`first_choice_unread`]).
fn chat_unread<'x>(line: &'x [u8], body: &'x [u8]) -> Vec<fields::Member<'x>> {
    let mut unread = envelope::unread(line, body, COMPLETION_KEYS, &[("usage", USAGE_KEYS)]);
    unread.extend(first_choice_unread(body, ""));
    unread
}

/// What no column holds of a completion's first choice: its message but
/// the text (`message.tool_calls`, `message.refusal`, ...) and its other keys
/// (`choice.<key>`), each key after `prefix`. For the completions that
/// gateways log inside their own records too (LiteLLM, Helicone).
pub(crate) fn first_choice_unread<'x>(body: &'x [u8], prefix: &str) -> Vec<fields::Member<'x>> {
    #[derive(Deserialize)]
    struct Choices<'a> {
        #[serde(borrow, default)]
        choices: Vec<&'a RawValue>,
    }
    let Some(first) = fields::from_json::<Choices<'_>>(body).ok().and_then(|c| c.choices.into_iter().next()) else {
        return Vec::new();
    };
    let read = ["index", "finish_reason", "logprobs", "message"];
    fields::unread_nested(first.get(), &read, &[("message", &["content"])], "")
        .into_iter()
        .map(|(key, raw)| {
            let under = if key.starts_with("message.") { "" } else { "choice." };
            (Cow::Owned(format!("{prefix}{under}{key}")), raw)
        })
        .collect()
}

#[derive(Deserialize)]
struct BatchLine<'a> {
    #[serde(borrow)]
    custom_id: Cow<'a, str>,
    #[serde(borrow, default)]
    response: Option<BatchResponse<'a>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct BatchResponse<'a> {
    #[serde(default)]
    status_code: Option<f64>,
    #[serde(borrow, default)]
    body: Option<&'a RawValue>,
}

/// Parses a Batch API output line; failed requests (no body) are rejects with the API's error.
pub fn parse_batch<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<RequestRecord<'a>, String> {
    let b: BatchLine<'_> = fields::from_json(line).map_err(|e| format!("invalid batch output line: {e}"))?;
    let resp = b.response.as_ref();
    let body = resp.and_then(|r| r.body).filter(|raw| raw.get().starts_with('{'));
    let Some(body) = body else {
        let err = b.error.map(|e| e.get().to_string()).unwrap_or_else(|| "no response body".into());
        return Err(format!("batch request {} failed: {err}", b.custom_id));
    };
    let body = body.get().as_bytes();
    let mut rec = chat_record(body, Envelope::default(), body, ctx)?;
    rec.request_id = Some(b.custom_id);
    rec.status = fields::opt_token_count("status_code", resp.and_then(|r| r.status_code))?.map(|s| s as i32);
    rec.extra = extra_json(&batch_unread(line, body));
    Ok(rec)
}

/// What no column holds of a Batch API line: the completion's as
/// `openai_chat` keeps it, with its own `id` (the request id is the
/// line's `custom_id`), and the line's other keys under `batch.` (`batch.id`,
/// `batch.error`, `batch.response.request_id`: OpenAI's id of the call).
fn batch_unread<'x>(line: &'x [u8], body: &'x [u8]) -> Vec<fields::Member<'x>> {
    let read: Vec<&str> = COMPLETION_KEYS.iter().copied().filter(|k| *k != "id").collect();
    let mut unread = envelope::unread(body, body, &read, &[("usage", USAGE_KEYS)]);
    unread.extend(first_choice_unread(body, ""));
    if let Ok(line) = std::str::from_utf8(line) {
        unread.extend(fields::unread_nested(line, &["custom_id"], &[("response", &["status_code", "body"])], "batch."));
    }
    unread
}

/// OpenAI Chat Completions responses, bare or in an envelope.
pub struct OpenAiChat;

impl LogFormat for OpenAiChat {
    fn name(&self) -> &'static str {
        "openai_chat"
    }

    fn about(&self) -> &'static str {
        "OpenAI Chat Completions response objects (bare or in a gateway envelope)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.response().is_some_and(|r| {
            r.get("object").and_then(|o| o.as_str()) == Some("chat.completion")
                || (r.contains_key("choices") && r.contains_key("usage"))
        })
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse_chat(line, ctx).map(Parsed::Request)
    }
}

/// OpenAI Batch API output lines, recognised by `custom_id` with a `response`.
pub struct OpenAiBatch;

impl LogFormat for OpenAiBatch {
    fn name(&self) -> &'static str {
        "openai_batch"
    }

    fn about(&self) -> &'static str {
        "OpenAI Batch API output lines (custom_id + response.body)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(|o| o.contains_key("custom_id") && o.contains_key("response"))
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse_batch(line, ctx).map(Parsed::Request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_completion_with_envelope() {
        let line = br#"{"ts":"2024-06-01T10:00:00Z","latency_ms":900,"ttft_ms":120,"request":{"max_tokens":50,"messages":[{"role":"user","content":"hi"}]},"response":{"id":"chatcmpl-1","object":"chat.completion","created":1717236000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"logprobs":{"content":[{"token":"Hello","logprob":-0.1,"bytes":[72,101,108,108,111],"top_logprobs":[{"token":"Hello","logprob":-0.1},{"token":"Hi","logprob":-2.5}]}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":0}}}}"#;
        let r = parse_chat(line, &LineContext::default()).unwrap();
        assert_eq!(r.request_id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.reasoning_tokens),
            (Some(20), 1, 8, Some(0))
        );
        assert_eq!(r.max_tokens, Some(50));
        assert_eq!((r.ttft_ms, r.latency_ms), (Some(120.0), Some(900.0)));
        assert_eq!(r.model_output.as_deref(), Some("Hello"));
        assert!(!r.output_is_raw);
        assert_eq!(r.tokens.len(), 1);
        assert_eq!(r.tokens[0].token_bytes.as_deref(), Some(&b"Hello"[..]));
        assert_eq!(r.tokens[0].top_logprobs.as_ref().map(|t| t.len()), Some(2));
    }

    #[test]
    fn bare_chat_completion_uses_created() {
        let line = br#"{"id":"c2","object":"chat.completion","created":1717236000,"model":"gpt-4o-mini","choices":[{"message":{"content":null},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#;
        let r = parse_chat(line, &LineContext::default()).unwrap();
        assert_eq!(r.ts_micros, 1_717_236_000_000_000);
        assert_eq!(r.finish_reason_raw.as_deref(), Some("tool_calls"));
        assert_eq!(r.model_output, None);
    }

    #[test]
    fn what_no_column_holds_goes_to_extra() {
        let line = br#"{"ts":1,"gateway":"gw-1","headers":{"Authorization":"Bearer sk-x"},"request":{"model":"m","api_key":"sk-y","temperature":0.2,"messages":[]},"response":{"id":"c","object":"chat.completion","created":1,"model":"m","service_tier":"default","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1"}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"queue_ms":5}}}"#;
        let r = parse_chat(line, &LineContext::default()).unwrap();
        assert_eq!(
            r.extra.as_deref(),
            Some(
                r#"{"gateway":"gw-1","request.temperature":0.2,"service_tier":"default","usage.queue_ms":5,"message.role":"assistant","message.tool_calls":[{"id":"t1"}]}"#
            )
        );
    }

    #[test]
    fn batch_success_and_failure() {
        let ok = br#"{"id":"batch_req_1","custom_id":"req-7","response":{"status_code":200,"request_id":"x","body":{"id":"c","object":"chat.completion","created":1717236000,"model":"gpt-4o","choices":[{"message":{"content":"ok"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}},"error":null}"#;
        let r = parse_batch(ok, &LineContext::default()).unwrap();
        assert_eq!((r.request_id.as_deref(), r.status), (Some("req-7"), Some(200)));
        // The completion's id (the request id is custom_id), then the line's own keys.
        assert_eq!(
            r.extra.as_deref(),
            Some(r#"{"id":"c","batch.id":"batch_req_1","batch.response.request_id":"x","batch.error":null}"#)
        );
        let bad = br#"{"id":"batch_req_2","custom_id":"req-8","response":null,"error":{"code":"server_error","message":"boom"}}"#;
        assert!(parse_batch(bad, &LineContext::default()).unwrap_err().contains("req-8 failed"));
    }
}

#[cfg(test)]
mod provider_usage_tests {
    use super::*;

    fn chat(usage_and_more: &str) -> RequestRecord<'static> {
        let line = format!(
            r#"{{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{{"index":0,"finish_reason":"stop","native_finish_reason":"end_turn","message":{{"content":"x"}}}}],{usage_and_more}}}"#
        );
        parse_chat(line.as_bytes(), &LineContext::default()).unwrap().into_owned()
    }

    #[test]
    fn openrouter_cost_is_the_logged_cost_and_its_native_finish_reason_is_kept() {
        let r = chat(r#""usage":{"prompt_tokens":9,"completion_tokens":10,"cost":0.00000735,"is_byok":false}"#);
        assert_eq!(r.logged_cost_usd, Some(0.00000735));
        let extra: serde_json::Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(extra["choice.native_finish_reason"], "end_turn");
    }

    #[test]
    fn mistral_num_cached_tokens_are_cached() {
        let r = chat(r#""usage":{"prompt_tokens":20,"completion_tokens":18,"num_cached_tokens":10}"#);
        assert_eq!((r.prompt_tokens, r.cached_tokens), (Some(20), 10));
    }

    #[test]
    fn llama_cpp_timings_give_the_times_and_the_cache() {
        let r = chat(
            r#""usage":{"prompt_tokens":30,"completion_tokens":5},"timings":{"cache_n":24,"prompt_n":6,"prompt_ms":12.5,"predicted_n":5,"predicted_ms":40.25}"#,
        );
        assert_eq!(r.cached_tokens, 24);
        assert_eq!((r.ttft_ms, r.latency_ms, r.prefill_latency_ms), (Some(12.5), Some(52.75), Some(12.5)));
    }

    #[test]
    fn an_envelope_max_tokens_of_minus_one_is_null_not_a_reject() {
        let line = br#"{"ts":1717236000000,"request":{"max_tokens":-1},"response":{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}}"#;
        let r = parse_chat(line, &LineContext::default()).unwrap();
        assert_eq!((r.max_tokens, r.completion_tokens), (None, 2));
        let extra: serde_json::Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(extra["invalid_fields"]["max_tokens"], -1.0);
        assert_eq!(r.token_issues, ["invalid_optional_field"]);
    }

    #[test]
    fn an_invalid_provider_addition_is_left_out_not_a_reject() {
        let r = chat(r#""usage":{"prompt_tokens":9,"completion_tokens":10,"cost":"n/a","queue_time":-1}"#);
        assert_eq!((r.logged_cost_usd, r.latency_ms), (None, None));
        let extra: serde_json::Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(extra["usage.cost"], "n/a");
    }
}
