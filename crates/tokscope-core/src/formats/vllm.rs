//! vLLM's own record of a request: a `RequestOutput` as the offline engine
//! (`LLM.generate`) or an `AsyncLLM` caller logs it, its fields as vLLM names
//! them (`vllm/outputs.py`): `request_id`, `prompt`, `prompt_token_ids`,
//! `outputs[]` (`text`, `token_ids`, `logprobs`, `finish_reason`,
//! `stop_reason`), `num_cached_tokens`, and `metrics`, the engine's timing:
//! V0's `RequestMetrics` (`vllm/sequence.py`: wall-clock `arrival_time`,
//! `first_scheduled_time`, `first_token_time`, `finished_time`, seconds
//! `time_in_queue`, ...) or V1's `RequestStateStats` (`vllm/v1/metrics/stats.py`:
//! wall-clock `arrival_time`, engine-core monotonic `queued_ts`,
//! `scheduled_ts`, `first_token_ts`, `last_token_ts`, and
//! `first_token_latency`). Times are read into `ts`, `ttft_ms`,
//! `latency_ms` and `prefill_latency_ms`; the queue, decode and engine step
//! times into `extra` in milliseconds. A record whose metrics give the
//! prefill time is also the engine's profile of the request: a `profiles` row
//! (queue, prefill and decode time, decoded tokens, prefix-cache hit ratio),
//! so the `engine` job analyses vLLM's own timings.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::fields;
use super::{LineContext, LogFormat, Parsed, Probe, Row};
use crate::record::{Attribution, ProfileRecord, RequestRecord, TokenRecord};

/// Keys of a `RequestOutput` that are read; the others go to `extra`.
const KNOWN_KEYS: &[&str] =
    &["request_id", "prompt", "prompt_token_ids", "outputs", "metrics", "num_cached_tokens", "finished"];

#[derive(Deserialize)]
struct RequestOutput<'a> {
    #[serde(borrow, default)]
    request_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    prompt: Option<Cow<'a, str>>,
    #[serde(default)]
    prompt_token_ids: Option<Vec<Value>>,
    #[serde(borrow, default)]
    outputs: Vec<CompletionOutput<'a>>,
    #[serde(default)]
    finished: Option<bool>,
    #[serde(default)]
    metrics: Option<Metrics>,
    #[serde(default)]
    num_cached_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct CompletionOutput<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    token_ids: Option<Vec<Value>>,
    /// Per position, the logprobs by token id: `{"<id>": {"logprob", "rank", "decoded_token"}}`.
    #[serde(borrow, default)]
    logprobs: Option<Vec<HashMap<Cow<'a, str>, Logprob<'a>>>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    stop_reason: Option<Value>,
}

#[derive(Deserialize)]
struct Logprob<'a> {
    #[serde(default)]
    logprob: Option<f64>,
    #[serde(borrow, default)]
    decoded_token: Option<Cow<'a, str>>,
}

/// V0's `RequestMetrics` and V1's `RequestStateStats` (seconds).
#[derive(Deserialize, Default)]
struct Metrics {
    arrival_time: Option<f64>,
    // V0.
    first_scheduled_time: Option<f64>,
    first_token_time: Option<f64>,
    last_token_time: Option<f64>,
    finished_time: Option<f64>,
    time_in_queue: Option<f64>,
    scheduler_time: Option<f64>,
    /// Milliseconds (vLLM keeps the forward pass's time in ms).
    model_forward_time: Option<f64>,
    model_execute_time: Option<f64>,
    // V1.
    queued_ts: Option<f64>,
    scheduled_ts: Option<f64>,
    first_token_ts: Option<f64>,
    last_token_ts: Option<f64>,
    first_token_latency: Option<f64>,
    num_generation_tokens: Option<f64>,
}

/// `to - from` seconds as milliseconds, when both are logged (V1 logs 0 for an event that did not happen).
fn span_ms(field: &str, from: Option<f64>, to: Option<f64>) -> Result<Option<f64>, String> {
    match (from.filter(|&t| t > 0.0), to.filter(|&t| t > 0.0)) {
        (Some(from), Some(to)) if to < from => Err(format!("{field} is negative: {to} is before {from}")),
        (Some(from), Some(to)) => fields::seconds_to_ms(field, Some(to - from)),
        _ => Ok(None),
    }
}

/// The request's timings: TTFT, latency, prefill, queue and decode, and
/// what goes to `extra`.
struct Timings {
    ttft_ms: Option<f64>,
    latency_ms: Option<f64>,
    prefill_ms: Option<f64>,
    queue_ms: Option<f64>,
    decode_ms: Option<f64>,
    extra: Vec<(&'static str, f64)>,
}

impl Metrics {
    fn timings(&self) -> Result<Timings, String> {
        let mut extra = Vec::new();
        let mut keep = |name: &'static str, ms: Option<f64>| {
            if let Some(ms) = ms {
                extra.push((name, ms));
            }
        };
        if self.queued_ts.is_some() || self.first_token_latency.is_some() {
            // V1: the engine core's timestamps are monotonic, apart from the
            // wall-clock arrival: intervals between them only.
            let ttft_ms = fields::seconds_to_ms("first_token_latency", self.first_token_latency.filter(|&t| t > 0.0))?;
            let decode_ms = span_ms("last_token_ts - first_token_ts", self.first_token_ts, self.last_token_ts)?;
            let queue_ms = span_ms("scheduled_ts - queued_ts", self.queued_ts, self.scheduled_ts)?;
            keep("queue_ms", queue_ms);
            keep("decode_ms", decode_ms);
            let latency_ms = match (ttft_ms, decode_ms) {
                (Some(t), Some(d)) => Some((t * 1e3 + d * 1e3).round() / 1e3),
                _ => None,
            };
            let prefill_ms = span_ms("first_token_ts - scheduled_ts", self.scheduled_ts, self.first_token_ts)?;
            return Ok(Timings { ttft_ms, latency_ms, prefill_ms, queue_ms, decode_ms, extra });
        }
        let end = self.finished_time.or(self.last_token_time);
        let queue_ms = fields::seconds_to_ms("time_in_queue", self.time_in_queue)?;
        let decode_ms = span_ms("last_token_time - first_token_time", self.first_token_time, self.last_token_time)?;
        keep("queue_ms", queue_ms);
        keep("decode_ms", decode_ms);
        keep("scheduler_ms", fields::seconds_to_ms("scheduler_time", self.scheduler_time)?);
        keep("model_forward_ms", fields::duration_ms("model_forward_time", self.model_forward_time)?);
        keep("model_execute_ms", fields::seconds_to_ms("model_execute_time", self.model_execute_time)?);
        Ok(Timings {
            ttft_ms: span_ms("first_token_time - arrival_time", self.arrival_time, self.first_token_time)?,
            latency_ms: span_ms("finished_time - arrival_time", self.arrival_time, end)?,
            prefill_ms: span_ms(
                "first_token_time - first_scheduled_time",
                self.first_scheduled_time,
                self.first_token_time,
            )?,
            queue_ms,
            decode_ms,
            extra,
        })
    }
}

/// One token row per position of the first output's `logprobs`: the sampled
/// token's entry (keyed by its id in `token_ids`) and every entry as an alternative.
fn token_rows<'a>(logprobs: Vec<HashMap<Cow<'a, str>, Logprob<'a>>>, token_ids: &[Value]) -> Vec<TokenRecord<'a>> {
    logprobs
        .into_iter()
        .enumerate()
        .map(|(i, entries)| {
            let id = token_ids.get(i).map(|v| v.to_string());
            let sampled = id.as_deref().and_then(|id| entries.get(id));
            let token = sampled.and_then(|l| l.decoded_token.clone());
            let logprob = sampled.and_then(|l| l.logprob);
            let mut top: Vec<(Cow<'a, str>, f64)> = entries
                .into_values()
                .map(|l| (l.decoded_token.unwrap_or_default(), l.logprob.unwrap_or(f64::NEG_INFINITY)))
                .collect();
            top.sort_by(|a, b| b.1.total_cmp(&a.1));
            TokenRecord { token, logprob, top_logprobs: (top.len() > 1).then_some(top), ..Default::default() }
        })
        .collect()
}

/// Parses one `RequestOutput` line: its request, and its engine profile
/// when the metrics give the prefill time and the record names its request.
pub fn parse<'a>(
    line: &'a [u8],
    ctx: &LineContext<'_>,
) -> Result<(RequestRecord<'a>, Option<ProfileRecord<'a>>), String> {
    let r: RequestOutput<'a> = fields::from_json(line).map_err(|e| format!("invalid vLLM RequestOutput: {e}"))?;
    if r.finished == Some(false) {
        return Err("an unfinished RequestOutput (a streamed delta): log the final one".into());
    }
    let metrics = r.metrics.ok_or("missing required field metrics (the engine's timing of the request)")?;
    let arrival = metrics.arrival_time.ok_or("missing required field metrics.arrival_time")?;
    let ts_micros = fields::epoch_seconds_to_micros("metrics.arrival_time", arrival)?;
    let timings = metrics.timings()?;
    let first = r.outputs.into_iter().next();
    let token_ids = first.as_ref().and_then(|o| o.token_ids.clone()).unwrap_or_default();
    let completion_tokens = match (&first, metrics.num_generation_tokens) {
        (Some(o), _) if o.token_ids.is_some() => token_ids.len() as i64,
        (_, Some(n)) => fields::token_count("metrics.num_generation_tokens", n)?,
        _ => return Err("no output token_ids and no metrics.num_generation_tokens".into()),
    };
    let prompt_tokens = r.prompt_token_ids.as_ref().map(|ids| ids.len() as i64);
    let cached_tokens = fields::opt_token_count("num_cached_tokens", r.num_cached_tokens)?.unwrap_or(0);
    if prompt_tokens.is_some_and(|p| cached_tokens > p) {
        return Err(format!("num_cached_tokens ({cached_tokens}) exceed the prompt's tokens"));
    }
    let mut extra = fields::unread_values(line, KNOWN_KEYS);
    for (name, ms) in timings.extra {
        extra.insert(name.into(), serde_json::Number::from_f64(ms).map_or(Value::Null, Value::Number));
    }
    let (output, finish_reason, tokens) = match first {
        Some(o) => {
            if let Some(stop) = o.stop_reason.filter(|s| !s.is_null()) {
                extra.insert("stop_reason".into(), stop);
            }
            let tokens = o.logprobs.map(|l| token_rows(l, &token_ids)).unwrap_or_default();
            (o.text, o.finish_reason, tokens)
        }
        None => (None, None, Vec::new()),
    };
    let profile = match (&r.request_id, timings.prefill_ms) {
        (Some(id), Some(prefill_latency_ms)) => Some(ProfileRecord {
            request_id: id.clone(),
            ts_micros: Some(ts_micros),
            kv_cache_hit_ratio: r
                .num_cached_tokens
                .and(prompt_tokens.filter(|&p| p > 0))
                .map(|p| cached_tokens as f64 / p as f64),
            queue_ms: timings.queue_ms,
            prefill_latency_ms,
            decode_total_ms: timings.decode_ms,
            decode_tokens: Some(completion_tokens),
            ..Default::default()
        }),
        _ => None,
    };
    let request = RequestRecord {
        request_id: r.request_id,
        ts_micros,
        model: Cow::Owned(ctx.default_model.to_string()),
        prompt_tokens,
        completion_tokens,
        cached_tokens,
        ttft_ms: timings.ttft_ms,
        latency_ms: timings.latency_ms,
        prefill_latency_ms: timings.prefill_ms,
        finish_reason_raw: finish_reason,
        prompt: r.prompt,
        model_output: output,
        output_is_raw: false,
        tokens,
        extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        attribution: Attribution { provider: Some(Cow::Borrowed("vllm")), ..Default::default() },
        ..Default::default()
    };
    Ok((request, profile))
}

/// vLLM `RequestOutput` records with their `metrics`.
pub struct Vllm;

impl LogFormat for Vllm {
    fn name(&self) -> &'static str {
        "vllm"
    }

    fn about(&self) -> &'static str {
        "vLLM RequestOutput records with the engine's metrics (arrival, queue, first token, finish)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.object().is_some_and(|o| {
            o.get("metrics").is_some_and(|m| m.get("arrival_time").is_some())
                && (o.contains_key("outputs") || o.contains_key("prompt_token_ids"))
        })
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        Ok(match parse(line, ctx)? {
            (request, None) => Parsed::Request(request),
            (request, Some(profile)) => {
                Parsed::Rows { rows: vec![Row::Request(request), Row::Profile(profile)], skipped: 0 }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V0: &str = r#"{"request_id":"r","prompt_token_ids":[1,2],"outputs":[{"index":0,"text":"Hi","token_ids":[5,2],"logprobs":[{"5":{"logprob":-0.5,"rank":1,"decoded_token":"Hi"},"6":{"logprob":-1.5,"rank":2,"decoded_token":"Yo"}},{"2":{"logprob":-0.25,"rank":1,"decoded_token":"</s>"}}],"finish_reason":"stop","stop_reason":null}],"finished":true,"metrics":{"arrival_time":1717243200.0,"first_scheduled_time":1717243200.25,"first_token_time":1717243200.5,"last_token_time":1717243201.0,"finished_time":1717243201.0,"time_in_queue":0.25}}"#;

    #[test]
    fn the_sampled_token_and_its_alternatives_by_position() {
        let (r, _) = parse(V0.as_bytes(), &LineContext::default()).unwrap();
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.ttft_ms, r.latency_ms),
            (Some(2), 2, Some(500.0), Some(1000.0))
        );
        assert_eq!(r.prefill_latency_ms, Some(250.0));
        assert_eq!((r.tokens[0].token.as_deref(), r.tokens[0].logprob), (Some("Hi"), Some(-0.5)));
        let top: Vec<(&str, f64)> =
            r.tokens[0].top_logprobs.as_ref().unwrap().iter().map(|(t, l)| (t.as_ref(), *l)).collect();
        assert_eq!(top, [("Hi", -0.5), ("Yo", -1.5)]);
        assert_eq!((r.tokens[1].token.as_deref(), r.tokens[1].top_logprobs.as_ref()), (Some("</s>"), None));
    }

    /// By hand from V0's metrics: queued 0.25 s, scheduled at +0.25 s, first
    /// token at +0.5 s, last at +1.0 s; two tokens generated.
    #[test]
    fn the_metrics_are_the_engines_profile_of_the_request() {
        let ctx = LineContext::default();
        let (_, p) = parse(V0.as_bytes(), &ctx).unwrap();
        let p = p.expect("a profile");
        assert_eq!((p.request_id.as_ref(), p.ts_micros), ("r", Some(1_717_243_200_000_000)));
        assert_eq!((p.queue_ms, p.prefill_latency_ms, p.decode_total_ms), (Some(250.0), 250.0, Some(500.0)));
        assert_eq!((p.decode_tokens, p.kv_cache_hit_ratio, p.model), (Some(2), None, None));
        assert!(p.decode_latency_ms.is_empty());
        // V1's stats, with a prefix-cache hit on one of two prompt tokens.
        let v1 = r#"{"request_id":"q","prompt_token_ids":[1,2],"num_cached_tokens":1,"outputs":[{"token_ids":[5,6,2]}],"metrics":{"arrival_time":1717243200.0,"queued_ts":10.0,"scheduled_ts":10.125,"first_token_ts":10.5,"last_token_ts":11.25,"first_token_latency":0.5}}"#;
        let (r, p) = parse(v1.as_bytes(), &ctx).unwrap();
        let p = p.expect("a profile");
        assert_eq!((r.ttft_ms, r.latency_ms), (Some(500.0), Some(1250.0)));
        assert_eq!((p.queue_ms, p.prefill_latency_ms, p.decode_total_ms), (Some(125.0), 375.0, Some(750.0)));
        assert_eq!((p.decode_tokens, p.kv_cache_hit_ratio), (Some(3), Some(0.5)));
        // Without the scheduling time there is no prefill, and no profile.
        let bare = r#"{"request_id":"b","outputs":[{"token_ids":[1]}],"metrics":{"arrival_time":1717243200.0,"first_token_time":1717243200.5}}"#;
        assert!(parse(bare.as_bytes(), &ctx).unwrap().1.is_none());
    }

    #[test]
    fn unfinished_outputs_records_without_metrics_and_backward_times_are_rejected() {
        let ctx = LineContext::default();
        let delta = V0.replace(r#""finished":true"#, r#""finished":false"#);
        assert!(parse(delta.as_bytes(), &ctx).unwrap_err().contains("unfinished"));
        let no_metrics = r#"{"request_id":"r","outputs":[{"text":"x","token_ids":[1]}],"prompt_token_ids":[1]}"#;
        assert!(parse(no_metrics.as_bytes(), &ctx).unwrap_err().contains("metrics"));
        let backwards = r#"{"outputs":[{"token_ids":[1]}],"metrics":{"arrival_time":1717243200.0,"queued_ts":9.0,"scheduled_ts":8.0}}"#;
        assert!(parse(backwards.as_bytes(), &ctx).unwrap_err().contains("negative"));
    }
}
