//! Hugging Face TGI `/generate` responses with `details`, bare (as TGI
//! returns them: no model, no time, usually no prompt tokens) or inside a
//! gateway envelope that supplies `ts`, `model` and `prompt_tokens`.
//! `details.tokens[]` carries the raw tokens with a `special` flag, so the
//! EOS marker can be checked whatever else the response lacks.

use std::borrow::Cow;

use serde::Deserialize;

use super::canonical::extra_json;
use super::envelope;
use super::fields;
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::record::{RequestRecord, TokenRecord};

#[derive(Deserialize)]
struct Generate<'a> {
    #[serde(borrow, default)]
    generated_text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    details: Option<Details<'a>>,
}

#[derive(Deserialize)]
struct Details<'a> {
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    generated_tokens: Option<f64>,
    #[serde(borrow, default)]
    prefill: Vec<Token<'a>>,
    #[serde(borrow, default)]
    tokens: Vec<Token<'a>>,
    #[serde(borrow, default)]
    top_tokens: Option<Vec<Vec<Token<'a>>>>,
}

#[derive(Deserialize)]
struct Token<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    logprob: Option<f64>,
    #[serde(default)]
    special: Option<bool>,
}

/// Parses one `/generate` response line.
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<RequestRecord<'a>, String> {
    let (env, body) = envelope::open(line)?;
    let g: Generate<'_> = fields::from_json(body).map_err(|e| format!("invalid TGI response: {e}"))?;
    let details = g.details.ok_or("missing required field details (request TGI with details=true)")?;
    let completion_tokens = match details.generated_tokens {
        Some(n) => fields::token_count("details.generated_tokens", n)?,
        None => details.tokens.len() as i64,
    };
    // TGI returns the prompt's tokens only when asked (`decoder_input_details`):
    // without them the prompt length is unknown, and the row is kept without it.
    let prompt_tokens = match (env.prompt_tokens, details.prefill.len()) {
        (Some(n), _) => Some(fields::token_count("prompt_tokens", n)?),
        (None, 0) => None,
        (None, n) => Some(n as i64),
    };
    let model = env
        .model
        .clone()
        .or_else(|| env.request.as_ref().and_then(|r| r.model.clone()))
        .unwrap_or_else(|| Cow::Owned(ctx.default_model.to_string()));
    let last_special = details.tokens.last().map(|t| t.special.unwrap_or(false));
    let (output, raw) = if details.tokens.is_empty() {
        (g.generated_text, false)
    } else {
        (Some(Cow::Owned(details.tokens.iter().filter_map(|t| t.text.as_deref()).collect::<String>())), true)
    };
    let mut top = details.top_tokens.unwrap_or_default().into_iter();
    let tokens = details
        .tokens
        .into_iter()
        .map(|t| TokenRecord {
            token: t.text,
            logprob: t.logprob,
            is_special: t.special,
            top_logprobs: top.next().map(|alts| {
                alts.into_iter().map(|a| (a.text.unwrap_or_default(), a.logprob.unwrap_or(f64::NEG_INFINITY))).collect()
            }),
            ..Default::default()
        })
        .collect();
    let (ttft_ms, latency_ms) = env.timings()?;
    let (max_tokens, invalid_max) = env.max_tokens();
    // What no column holds: `details.seed`, `details.best_of_sequences`, the envelope's other keys.
    let unread = envelope::unread(line, body, &["generated_text", "details"], &[("details", DETAILS_KEYS)]);
    Ok(fields::with_invalid(
        RequestRecord {
            request_id: env.request_id.clone(),
            ts_micros: env.ts_micros(None, ctx)?,
            session_id: env.session_id.clone(),
            variant: env.variant(),
            model,
            status: env.status()?,
            prompt_tokens,
            completion_tokens,
            max_tokens,
            ttft_ms,
            latency_ms,
            finish_reason_raw: details.finish_reason,
            prompt: env.prompt()?,
            model_output: output,
            output_is_raw: raw,
            last_token_special: last_special,
            tokens,
            extra: extra_json(&unread),
            attribution: env.attribution(Some("tgi")),
            ..Default::default()
        },
        "max_tokens",
        invalid_max,
    ))
}

/// The `details` keys read into columns and `tokens` rows (the prompt's
/// tokens, `prefill`, give its length only).
const DETAILS_KEYS: &[&str] = &["finish_reason", "generated_tokens", "prefill", "tokens", "top_tokens"];

/// TGI `/generate` responses with details, bare or in an envelope.
pub struct Tgi;

impl LogFormat for Tgi {
    fn name(&self) -> &'static str {
        "tgi"
    }

    fn about(&self) -> &'static str {
        "Hugging Face TGI /generate responses with details (raw tokens with their special flag)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.response().is_some_and(|r| {
            r.contains_key("generated_text") || r.get("details").is_some_and(|d| d.get("finish_reason").is_some())
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
    fn tokens_rebuild_raw_output_with_special_eos() {
        let line = br#"{"ts":"2024-06-01T00:00:00Z","model":"llama-3-8b","request":{"inputs":"Hi","parameters":{"max_new_tokens":20}},"response":{"generated_text":"Hello!","details":{"finish_reason":"eos_token","generated_tokens":3,"prefill":[{"id":1,"text":"<s>","logprob":null},{"id":2,"text":"Hi","logprob":-3.2}],"tokens":[{"id":5,"text":"Hello","logprob":-0.2,"special":false},{"id":6,"text":"!","logprob":-0.5,"special":false},{"id":2,"text":"</s>","logprob":-0.01,"special":true}]}}}"#;
        let r = parse(line, &LineContext::default()).unwrap();
        assert_eq!((r.prompt_tokens, r.completion_tokens, r.max_tokens), (Some(2), 3, Some(20)));
        assert_eq!(r.model_output.as_deref(), Some("Hello!</s>"));
        assert!(r.output_is_raw);
        assert_eq!(r.last_token_special, Some(true));
        assert_eq!(r.tokens.len(), 3);
        assert_eq!(r.tokens[2].is_special, Some(true));
        assert_eq!(r.prompt.as_deref(), Some("Hi"));
    }

    #[test]
    fn a_bare_response_without_a_model_takes_the_default_model() {
        // As TGI returns it: no model, no ts; the envelope supplies ts only.
        let line = br#"{"ts":"2024-06-01T00:00:00Z","response":{"generated_text":"Hi","details":{"finish_reason":"length","generated_tokens":1,"prefill":[{"id":1,"text":"<s>"}],"tokens":[{"id":5,"text":"Hi","logprob":-0.2,"special":false}]}}}"#;
        let ctx = LineContext { default_model: "tgi:bare", ..Default::default() };
        let r = parse(line, &ctx).unwrap();
        assert_eq!((r.model.as_ref(), r.prompt_tokens, r.completion_tokens), ("tgi:bare", Some(1), 1));
    }

    #[test]
    fn a_response_without_prefill_has_no_prompt_length_and_the_base_time() {
        // As TGI returns it by default: no prefill, no envelope.
        let line = br#"{"generated_text":"Hi","details":{"finish_reason":"eos_token","generated_tokens":2,"prefill":[],"seed":null,"tokens":[{"id":5,"text":"Hi","logprob":-0.2,"special":false},{"id":2,"text":"</s>","logprob":0.0,"special":true}]}}"#;
        let ctx =
            LineContext { default_model: "tgi:bare", base_time_micros: 1_717_200_000_000_000, ..Default::default() };
        let r = parse(line, &ctx).unwrap();
        assert_eq!((r.prompt_tokens, r.completion_tokens, r.ts_micros), (None, 2, 1_717_200_000_000_000));
        assert_eq!((r.last_token_special, r.finish_reason_raw.as_deref()), (Some(true), Some("eos_token")));
    }
}
