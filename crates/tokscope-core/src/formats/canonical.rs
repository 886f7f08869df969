//! The canonical full-token access log: one JSON object per request, with
//! token counts, timings, the raw output (special tokens kept) and optional
//! per-token data. Unknown keys are kept, verbatim, in `extra`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::fields::{self, LogprobEntry, TsValue};
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::attribution;
use crate::record::{Attribution, RequestRecord};

/// Parses one canonical line into a request.
pub fn parse(line: &[u8]) -> Result<RequestRecord<'_>, String> {
    let raw: CanonicalLine<'_> = fields::from_json(line).map_err(|e| format!("invalid JSON object: {e}"))?;
    raw.into_record()
}

/// The keys of a canonical line, as logged (before validation).
#[derive(Default)]
struct CanonicalLine<'a> {
    ts: Option<TsValue<'a>>,
    request_id: Option<Cow<'a, str>>,
    session_id: Option<Cow<'a, str>>,
    model: Option<Cow<'a, str>>,
    model_version: Option<Cow<'a, str>>,
    /// Experiment-arm keys as logged, in [`fields::VARIANT_KEYS`] order.
    arm_keys: [Option<(Cow<'a, str>, &'a RawValue)>; 3],
    status: Option<f64>,
    prompt_tokens: Option<f64>,
    completion_tokens: Option<f64>,
    cached_tokens: Option<f64>,
    cache_write_tokens: Option<f64>,
    reasoning_tokens: Option<f64>,
    max_tokens: Option<f64>,
    ttft_ms: Option<f64>,
    latency_ms: Option<f64>,
    prefill_latency_ms: Option<f64>,
    kv_cache_hit_ratio: Option<f64>,
    logged_cost_usd: Option<f64>,
    finish_reason: Option<Cow<'a, str>>,
    prompt: Option<Cow<'a, str>>,
    model_output: Option<Cow<'a, str>>,
    token_times_ms: Option<Vec<Option<f64>>>,
    decode_latency_ms: Option<Vec<Option<f64>>>,
    logprobs: Option<Vec<LogprobEntry<'a>>>,
    attribution: Attribution<'a>,
    extra: Vec<fields::Member<'a>>,
}

impl<'de> Deserialize<'de> for CanonicalLine<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CanonicalLine<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut c = CanonicalLine::default();
                while let Some(fields::Text(key)) = map.next_key()? {
                    match key.as_ref() {
                        "ts" => c.ts = map.next_value()?,
                        "request_id" => c.request_id = fields::next_text(&mut map)?,
                        "session_id" => c.session_id = fields::next_text(&mut map)?,
                        "model" => c.model = fields::next_text(&mut map)?,
                        "model_version" => c.model_version = fields::next_text(&mut map)?,
                        k if fields::VARIANT_KEYS.contains(&k) => {
                            let v: &'de RawValue = map.next_value()?;
                            let slot = fields::VARIANT_KEYS.iter().position(|n| *n == k).unwrap_or(0);
                            c.arm_keys[slot] = Some((key, v));
                        }
                        "status" => c.status = map.next_value()?,
                        "prompt_tokens" => c.prompt_tokens = map.next_value()?,
                        "completion_tokens" => c.completion_tokens = map.next_value()?,
                        "cached_tokens" => c.cached_tokens = map.next_value()?,
                        "cache_write_tokens" => c.cache_write_tokens = map.next_value()?,
                        "reasoning_tokens" => c.reasoning_tokens = map.next_value()?,
                        "max_tokens" => c.max_tokens = map.next_value()?,
                        "ttft_ms" => c.ttft_ms = map.next_value()?,
                        "latency_ms" => c.latency_ms = map.next_value()?,
                        "prefill_latency_ms" => c.prefill_latency_ms = map.next_value()?,
                        "kv_cache_hit_ratio" => c.kv_cache_hit_ratio = map.next_value()?,
                        "logged_cost_usd" => c.logged_cost_usd = map.next_value()?,
                        "finish_reason" => c.finish_reason = fields::next_text(&mut map)?,
                        "prompt" => {
                            let raw: &'de RawValue = map.next_value()?;
                            c.prompt = fields::text_or_json(raw).map_err(de::Error::custom)?;
                        }
                        "model_output" => c.model_output = fields::next_text(&mut map)?,
                        "token_times_ms" => c.token_times_ms = map.next_value()?,
                        "decode_latency_ms" => c.decode_latency_ms = map.next_value()?,
                        "logprobs" => c.logprobs = map.next_value()?,
                        "user_id" => c.attribution.user_id = lenient_label(&mut map)?,
                        "team" => c.attribution.team = lenient_label(&mut map)?,
                        "project" => c.attribution.project = lenient_label(&mut map)?,
                        "environment" => c.attribution.environment = lenient_label(&mut map)?,
                        "key_alias" => c.attribution.key_alias = lenient_label(&mut map)?,
                        "provider" => c.attribution.provider = lenient_label(&mut map)?,
                        "tags" => {
                            let v: serde_json::Value = map.next_value()?;
                            c.attribution.tags = attribution::tags_of(&v);
                        }
                        _ => {
                            let v: &'de RawValue = map.next_value()?;
                            c.extra.extend(fields::kept_member(key, v));
                        }
                    }
                }
                Ok(c)
            }
        }
        d.deserialize_map(V)
    }
}

/// An attribution field: a string, number or boolean as written; anything
/// else (null, a list, an object) says nothing rather than rejecting the request.
fn lenient_label<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Cow<'de, str>>, A::Error> {
    let value: serde_json::Value = map.next_value()?;
    Ok(attribution::scalar(&value).map(Cow::Owned))
}

/// Serialises unknown keys back into one compact JSON object.
pub(crate) fn extra_json<V: std::ops::Deref<Target = RawValue>>(extra: &[(Cow<'_, str>, V)]) -> Option<String> {
    if extra.is_empty() {
        return None;
    }
    // Room for the braces, and each key quoted with its value and separators:
    // one allocation unless a key needs escapes.
    let room = 2 + extra.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum::<usize>();
    let mut out = Vec::with_capacity(room);
    out.push(b'{');
    for (i, (k, v)) in extra.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // Writing a string into a Vec cannot fail.
        serde_json::to_writer(&mut out, k.as_ref()).ok()?;
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
    }
    out.push(b'}');
    // Every piece is UTF-8, so the whole is.
    String::from_utf8(out).ok()
}

impl<'a> CanonicalLine<'a> {
    fn into_record(self) -> Result<RequestRecord<'a>, String> {
        let ts = self.ts.ok_or("missing required field ts")?.to_micros()?;
        let model = self.model.ok_or("missing required field model")?;
        if model.trim().is_empty() {
            return Err("model is empty".into());
        }
        let prompt_tokens =
            fields::token_count("prompt_tokens", self.prompt_tokens.ok_or("missing required field prompt_tokens")?)?;
        let completion_tokens = fields::token_count(
            "completion_tokens",
            self.completion_tokens.ok_or("missing required field completion_tokens")?,
        )?;
        let cached_tokens = fields::opt_token_count("cached_tokens", self.cached_tokens)?.unwrap_or(0);
        let cache_write_tokens = fields::opt_token_count("cache_write_tokens", self.cache_write_tokens)?.unwrap_or(0);
        if cached_tokens + cache_write_tokens > prompt_tokens {
            return Err(format!(
                "cached_tokens ({cached_tokens}) + cache_write_tokens ({cache_write_tokens}) exceed prompt_tokens ({prompt_tokens})"
            ));
        }
        let status = self.status.map(|s| fields::token_count("status", s)).transpose()?.map(|s| s as i32);
        let has_output = self.model_output.is_some();
        let mut token_issues = Vec::new();
        let tokens =
            fields::merge_token_data(self.logprobs, self.token_times_ms, self.decode_latency_ms, &mut token_issues);
        // The first arm key with a label names the variant; values that name
        // no arm (objects, arrays) stay in `extra`, as before they were known.
        let mut extra = self.extra;
        let mut variant = None;
        for (key, raw) in self.arm_keys.into_iter().flatten() {
            match fields::arm_label(raw) {
                Some(label) if variant.is_none() => variant = Some(label),
                Some(_) => {}
                None => extra.extend(fields::kept_member(key, raw)),
            }
        }
        Ok(RequestRecord {
            request_id: self.request_id,
            ts_micros: ts,
            session_id: self.session_id,
            model,
            model_version: self.model_version,
            variant,
            status,
            prompt_tokens: Some(prompt_tokens),
            completion_tokens,
            cached_tokens,
            cache_write_tokens,
            reasoning_tokens: fields::opt_token_count("reasoning_tokens", self.reasoning_tokens)?,
            max_tokens: fields::opt_token_count("max_tokens", self.max_tokens)?,
            ttft_ms: fields::duration_ms("ttft_ms", self.ttft_ms)?,
            latency_ms: fields::duration_ms("latency_ms", self.latency_ms)?,
            prefill_latency_ms: fields::duration_ms("prefill_latency_ms", self.prefill_latency_ms)?,
            kv_cache_hit_ratio: self.kv_cache_hit_ratio,
            logged_cost_usd: fields::cost_usd("logged_cost_usd", self.logged_cost_usd)?,
            finish_reason_raw: self.finish_reason,
            prompt: self.prompt,
            model_output: self.model_output,
            output_is_raw: has_output,
            last_token_special: None,
            tokens,
            extra: extra_json(&extra),
            token_issues,
            attribution: self.attribution,
        })
    }
}

/// tokscope's canonical lines, recognised by token counts at the top level (the last format tried).
pub struct Canonical;

impl LogFormat for Canonical {
    fn name(&self) -> &'static str {
        "canonical"
    }

    fn about(&self) -> &'static str {
        "tokscope's canonical full-token JSON lines (token counts, timings, raw output, per-token data)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        // `ts` is required: other formats' records with token counts (Helicone
        // rows, LiteLLM payloads) have none, so canonical never claims them.
        line.object().is_some_and(|o| {
            o.contains_key("ts") && (o.contains_key("prompt_tokens") || o.contains_key("completion_tokens"))
        })
    }

    fn parse<'a>(&self, line: &'a [u8], _ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line).map(Parsed::Request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_line_parses_with_extra_keys() {
        let line = br#"{"ts":"2024-05-01T00:00:00Z","request_id":"r1","model":"m","prompt_tokens":10,"completion_tokens":3,"cached_tokens":4,"max_tokens":3,"ttft_ms":50,"latency_ms":90,"finish_reason":"length","prompt":[{"role":"user","content":"hi"}],"model_output":"a b c","region":"eu","tags":{"a":1}}"#;
        let r = parse(line).unwrap();
        assert_eq!(r.request_id.as_deref(), Some("r1"));
        assert_eq!(r.ts_micros, 1_714_521_600_000_000);
        assert_eq!((r.prompt_tokens, r.completion_tokens, r.cached_tokens), (Some(10), 3, 4));
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role":"user","content":"hi"}]"#));
        assert!(r.output_is_raw);
        assert_eq!(r.extra.as_deref(), Some(r#"{"region":"eu"}"#));
        assert_eq!(r.attribution.tags, vec!["a:1"]);
    }

    #[test]
    fn attribution_fields_of_the_columns_names() {
        let line = br#"{"ts":1,"model":"m","prompt_tokens":1,"completion_tokens":1,"user_id":"u-1","team":"search","project":42,"environment":"prod","tags":["a","k:v"],"key_alias":"ci-key","provider":"vllm"}"#;
        let a = parse(line).unwrap().attribution;
        let got = [&a.user_id, &a.team, &a.project, &a.environment, &a.key_alias, &a.provider].map(|v| v.as_deref());
        assert_eq!(got, [Some("u-1"), Some("search"), Some("42"), Some("prod"), Some("ci-key"), Some("vllm")]);
        assert_eq!(a.tags, vec!["a", "k:v"]);
        // A value that names nothing (a list, an object, null) is no reason to lose the request.
        let odd = br#"{"ts":1,"model":"m","prompt_tokens":1,"completion_tokens":1,"team":["x"],"user_id":null,"provider":{}}"#;
        let a = parse(odd).unwrap().attribution;
        assert_eq!((a.team, a.user_id, a.provider), (None, None, None));
    }

    #[test]
    fn extra_keys_are_escaped_again() {
        let line = br#"{"ts":1,"model":"m","prompt_tokens":1,"completion_tokens":1,"re\"gi\u00f3n":"eu","n":[1, 2]}"#;
        let r = parse(line).unwrap();
        assert_eq!(r.extra.as_deref(), Some(r#"{"re\"gión":"eu","n":[1, 2]}"#));
        let back: serde_json::Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(back["re\"gión"], "eu");
    }

    #[test]
    fn missing_and_invalid_fields_are_errors() {
        assert!(parse(br#"{"model":"m","prompt_tokens":1,"completion_tokens":1}"#).unwrap_err().contains("ts"));
        assert!(parse(br#"{"ts":1,"model":"m","prompt_tokens":-1,"completion_tokens":1}"#)
            .unwrap_err()
            .contains("non-negative"));
        assert!(parse(br#"{"ts":1,"model":"m","prompt_tokens":1.5,"completion_tokens":1}"#)
            .unwrap_err()
            .contains("integer"));
        assert!(parse(br#"[1,2]"#).is_err());
        assert!(parse(br#"42"#).is_err());
    }

    #[test]
    fn variant_comes_from_the_first_arm_key_with_a_label() {
        let base = r#""ts":1,"model":"m","prompt_tokens":1,"completion_tokens":1"#;
        let rec = |keys: &str| parse(format!("{{{base},{keys}}}").as_bytes()).map(RequestRecord::into_owned).unwrap();
        assert_eq!(rec(r#""arm":"B","variant":"treatment""#).variant.as_deref(), Some("treatment"));
        assert_eq!(rec(r#""experiment":"exp-7""#).variant.as_deref(), Some("exp-7"));
        let nested = rec(r#""experiment":{"id":"e1","arm":"B"},"arm":"A""#);
        assert_eq!(nested.variant.as_deref(), Some("A"));
        assert_eq!(nested.extra.as_deref(), Some(r#"{"experiment":{"id":"e1","arm":"B"}}"#));
        assert_eq!(rec(r#""region":"eu""#).variant, None);
    }

    #[test]
    fn escaped_strings_are_unescaped() {
        let r = parse(
            br#"{"ts":1700000000000,"model":"m","prompt_tokens":1,"completion_tokens":1,"model_output":"a\nb</s>"}"#,
        )
        .unwrap();
        assert_eq!(r.model_output.as_deref(), Some("a\nb</s>"));
    }

    #[test]
    fn text_borrows_from_the_line_unless_escaped() {
        let line = br#"{"ts":1700000000000,"mod\u0065l":"m","prompt_tokens":1,"completion_tokens":1,"prompt":"p q","model_output":"a b</s>","finish_reason":"st\u006fp"}"#;
        let r = parse(line).unwrap();
        // An escaped key still names its field.
        assert_eq!(r.model, "m");
        assert!(matches!(r.model, Cow::Borrowed(_)));
        assert!(matches!(r.model_output, Some(Cow::Borrowed("a b</s>"))));
        assert!(matches!(r.prompt, Some(Cow::Borrowed("p q"))));
        assert!(matches!(r.finish_reason_raw, Some(Cow::Owned(ref s)) if s == "stop"));
        let err = parse(br#"{"ts":1,"model":5,"prompt_tokens":1,"completion_tokens":1}"#).unwrap_err();
        assert!(err.contains("invalid type: integer `5`, expected a string"), "{err}");
    }
}
