//! Engine profiling records: one JSON object per request, written by the
//! serving engine (`request_id`, `prefill_latency_ms`, `decode_latency_ms`
//! with one entry per generated token, and optionally `ts` on the engine's
//! clock, `engine_id`, `gpu_id`, `model`, `inference_steps`,
//! `kv_cache_hit_ratio`, `cuda_kernel_avg_us`, `queue_ms`). A line becomes a `profiles`
//! row and one `tokens` row per decode step (`source = 'engine'`); the join to
//! the gateway's request happens in SQL.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical::extra_json;
use super::fields::{self, TsValue};
use super::{LineContext, LogFormat, Parsed, Probe, Row};
use crate::derive::BAD_DECODE_LATENCY;
use crate::record::ProfileRecord;

/// Parses one profile line.
pub fn parse(line: &[u8]) -> Result<ProfileRecord<'_>, String> {
    let raw: ProfileLine<'_> = fields::from_json(line).map_err(|e| format!("invalid JSON object: {e}"))?;
    raw.into_record()
}

/// The keys of a profile line, as logged (before validation).
#[derive(Default)]
struct ProfileLine<'a> {
    request_id: Option<Cow<'a, str>>,
    ts: Option<TsValue<'a>>,
    engine_id: Option<Cow<'a, str>>,
    gpu_id: Option<f64>,
    model: Option<Cow<'a, str>>,
    inference_steps: Option<f64>,
    kv_cache_hit_ratio: Option<f64>,
    cuda_kernel_avg_us: Option<f64>,
    queue_ms: Option<f64>,
    prefill_latency_ms: Option<f64>,
    decode_latency_ms: Option<&'a RawValue>,
    extra: Vec<fields::Member<'a>>,
}

impl<'de> Deserialize<'de> for ProfileLine<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProfileLine<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut p = ProfileLine::default();
                while let Some(fields::Text(key)) = map.next_key()? {
                    match key.as_ref() {
                        "request_id" => p.request_id = fields::next_text(&mut map)?,
                        "ts" => p.ts = map.next_value()?,
                        "engine_id" | "engine" => p.engine_id = fields::next_text(&mut map)?,
                        "gpu_id" | "gpu" => p.gpu_id = map.next_value()?,
                        "model" => p.model = fields::next_text(&mut map)?,
                        "inference_steps" => p.inference_steps = map.next_value()?,
                        "kv_cache_hit_ratio" => p.kv_cache_hit_ratio = map.next_value()?,
                        "cuda_kernel_avg_us" => p.cuda_kernel_avg_us = map.next_value()?,
                        "queue_ms" => p.queue_ms = map.next_value()?,
                        "prefill_latency_ms" => p.prefill_latency_ms = map.next_value()?,
                        "decode_latency_ms" => p.decode_latency_ms = Some(map.next_value()?),
                        _ => {
                            let v: &'de RawValue = map.next_value()?;
                            p.extra.extend(fields::kept_member(key, v));
                        }
                    }
                }
                Ok(p)
            }
        }
        d.deserialize_map(V)
    }
}

/// A finite, non-negative number, or an error naming the field and its unit.
fn non_negative(field: &str, unit: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !x.is_finite() || x < 0.0 => {
            Err(format!("{field} must be a non-negative number of {unit}, got {x}"))
        }
        other => Ok(other),
    }
}

/// `decode_latency_ms`: an array, one entry per generated token. An entry that
/// is not a finite, non-negative number is kept as `None` and flags the record
/// `bad_decode_latency`; anything but an array rejects the line.
fn decode_latencies(raw: &RawValue, issues: &mut Vec<String>) -> Result<Vec<Option<f64>>, String> {
    let entries: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|_| {
        format!("decode_latency_ms must be an array (one latency per generated token), got {}", raw.get())
    })?;
    let values: Vec<Option<f64>> = entries
        .iter()
        .map(|e| serde_json::from_str::<f64>(e.get()).ok().filter(|v| v.is_finite() && *v >= 0.0))
        .collect();
    if values.iter().any(Option::is_none) {
        issues.push(BAD_DECODE_LATENCY.to_string());
    }
    Ok(values)
}

impl<'a> ProfileLine<'a> {
    fn into_record(self) -> Result<ProfileRecord<'a>, String> {
        let request_id = self.request_id.ok_or("missing required field request_id")?;
        if request_id.trim().is_empty() {
            return Err("request_id is empty".into());
        }
        let prefill_latency_ms = non_negative("prefill_latency_ms", "milliseconds", self.prefill_latency_ms)?
            .ok_or("missing required field prefill_latency_ms")?;
        let mut issues = Vec::new();
        let decode_latency_ms =
            decode_latencies(self.decode_latency_ms.ok_or("missing required field decode_latency_ms")?, &mut issues)?;
        let kv_cache_hit_ratio = match self.kv_cache_hit_ratio {
            Some(r) if !(0.0..=1.0).contains(&r) => {
                return Err(format!("kv_cache_hit_ratio must be in [0, 1], got {r}"))
            }
            other => other,
        };
        Ok(ProfileRecord {
            request_id,
            ts_micros: self.ts.map(|t| t.to_micros()).transpose()?,
            engine_id: self.engine_id,
            gpu_id: fields::opt_token_count("gpu_id", self.gpu_id)?,
            model: self.model.filter(|m| !m.trim().is_empty()),
            inference_steps: fields::opt_token_count("inference_steps", self.inference_steps)?,
            kv_cache_hit_ratio,
            cuda_kernel_avg_us: non_negative("cuda_kernel_avg_us", "microseconds", self.cuda_kernel_avg_us)?,
            queue_ms: non_negative("queue_ms", "milliseconds", self.queue_ms)?,
            prefill_latency_ms,
            decode_latency_ms,
            extra: extra_json(&self.extra),
            issues,
            ..Default::default()
        })
    }
}

/// Engine profiling records, recognised by per-request engine timings without
/// the token counts of a request log.
pub struct Profile;

impl LogFormat for Profile {
    fn name(&self) -> &'static str {
        "profile"
    }

    fn about(&self) -> &'static str {
        "inference-engine profiling records (prefill and per-token decode latencies), joined to requests by request_id"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(|o| {
            o.contains_key("decode_latency_ms")
                && o.contains_key("prefill_latency_ms")
                && ["inference_steps", "cuda_kernel_avg_us", "kv_cache_hit_ratio"].iter().any(|k| o.contains_key(*k))
                && !o.contains_key("prompt_tokens")
                && !o.contains_key("completion_tokens")
        })
    }

    fn parse<'a>(&self, line: &'a [u8], _ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line).map(|p| Parsed::Rows { rows: vec![Row::Profile(p)], skipped: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_record_parses() {
        let line = br#"{"request_id":"gw-03","ts":"2024-06-01T12:00:10.251Z","engine_id":"vllm-0","gpu_id":1,"model":"m","inference_steps":4,"kv_cache_hit_ratio":0.25,"cuda_kernel_avg_us":180.5,"queue_ms":4.25,"prefill_latency_ms":30,"decode_latency_ms":[10,7.5,8],"batch":3}"#;
        let p = parse(line).unwrap();
        assert_eq!(p.queue_ms, Some(4.25));
        assert_eq!(p.request_id, "gw-03");
        assert_eq!(p.ts_micros, Some(1_717_243_210_251_000));
        assert_eq!((p.engine_id.as_deref(), p.gpu_id, p.model.as_deref()), (Some("vllm-0"), Some(1), Some("m")));
        assert_eq!((p.inference_steps, p.kv_cache_hit_ratio, p.cuda_kernel_avg_us), (Some(4), Some(0.25), Some(180.5)));
        assert_eq!(p.decode_latency_ms, vec![Some(10.0), Some(7.5), Some(8.0)]);
        assert_eq!(p.extra.as_deref(), Some(r#"{"batch":3}"#));
        assert!(p.issues.is_empty());
    }

    #[test]
    fn ts_and_model_are_optional_and_engine_gpu_are_aliases() {
        let p = parse(br#"{"request_id":"r","engine":"e1","gpu":0,"prefill_latency_ms":1,"decode_latency_ms":[]}"#)
            .unwrap();
        assert_eq!((p.ts_micros, p.model, p.engine_id.as_deref(), p.gpu_id), (None, None, Some("e1"), Some(0)));
        assert!(p.decode_latency_ms.is_empty());
    }

    #[test]
    fn bad_entries_are_kept_and_flagged() {
        let p = parse(br#"{"request_id":"r","prefill_latency_ms":1,"decode_latency_ms":[5,"n/a",null,-1,3]}"#).unwrap();
        assert_eq!(p.decode_latency_ms, vec![Some(5.0), None, None, None, Some(3.0)]);
        assert_eq!(p.issues, vec!["bad_decode_latency"]);
    }

    #[test]
    fn missing_and_invalid_fields_reject_the_line() {
        let err = |line: &str| parse(line.as_bytes()).unwrap_err();
        assert!(err(r#"{"prefill_latency_ms":1,"decode_latency_ms":[1]}"#).contains("request_id"));
        assert!(err(r#"{"request_id":"r","decode_latency_ms":[1]}"#).contains("prefill_latency_ms"));
        assert!(err(r#"{"request_id":"r","prefill_latency_ms":1}"#).contains("decode_latency_ms"));
        assert!(err(r#"{"request_id":"r","prefill_latency_ms":"x","decode_latency_ms":[1]}"#).contains("invalid"));
        assert!(err(r#"{"request_id":"r","prefill_latency_ms":-2,"decode_latency_ms":[1]}"#).contains("non-negative"));
        assert!(err(r#"{"request_id":"r","queue_ms":-1,"prefill_latency_ms":1,"decode_latency_ms":[1]}"#)
            .contains("queue_ms must be a non-negative number of milliseconds"));
        assert!(err(r#"{"request_id":"r","prefill_latency_ms":1,"decode_latency_ms":"12,13"}"#).contains("array"));
        assert!(err(r#"{"request_id":"r","prefill_latency_ms":1,"decode_latency_ms":{"0":1}}"#).contains("array"));
        assert!(err(r#"{"request_id":"r","ts":"soon","prefill_latency_ms":1,"decode_latency_ms":[1]}"#)
            .contains("timestamp"));
        assert!(err(r#"{"request_id":"r","kv_cache_hit_ratio":1.5,"prefill_latency_ms":1,"decode_latency_ms":[1]}"#)
            .contains("[0, 1]"));
        assert!(err(r#"{"request_id":" ","prefill_latency_ms":1,"decode_latency_ms":[1]}"#).contains("empty"));
    }

    #[test]
    fn detection_needs_engine_fields_and_no_token_counts() {
        let probe = |line: &str| Profile.detect(&Probe::new(line.as_bytes()));
        assert!(probe(r#"{"request_id":"r","inference_steps":3,"prefill_latency_ms":1,"decode_latency_ms":[1]}"#));
        assert!(!probe(r#"{"request_id":"r","prefill_latency_ms":1,"decode_latency_ms":[1]}"#));
        assert!(!probe(r#"{"prompt_tokens":1,"inference_steps":3,"prefill_latency_ms":1,"decode_latency_ms":[1]}"#));
    }
}
