//! AWS Bedrock: model invocation logs (`schemaType: ModelInvocationLog`, as
//! Bedrock delivers them to S3 or CloudWatch Logs, or a CloudWatch export's
//! events whose message is the record) and Converse responses. Bedrock
//! counts cache reads and writes apart from the input tokens; tokscope folds
//! them in, so that `prompt_tokens` is the whole prompt.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::fields;
use super::{LineContext, LogFormat, Parsed, Probe};
use crate::attribution::{self, AttributionKeys};
use crate::record::{Attribution, RequestRecord};

/// The record's fields that name who made the call: the IAM principal's
/// ARN as the user, `requestMetadata` (the caller's own key-value pairs) as
/// `key:value` tags.
const ATTRIBUTION: AttributionKeys =
    AttributionKeys { user_id: &["identity.arn"], tags: &["requestMetadata"], ..AttributionKeys::NONE };

/// Who made an invocation log record's call; Bedrock served it.
fn record_attribution(record: &Map<String, Value>) -> Attribution<'static> {
    Attribution { provider: Some(Cow::Borrowed("bedrock")), ..attribution::from_members(record, &ATTRIBUTION) }
}

/// The record's keys read into columns; the others go to `extra`.
const RECORD_KEYS: &[&str] = &["requestId", "timestamp", "modelId", "input", "output"];
/// The `input` keys read into columns.
const INPUT_KEYS: &[&str] =
    &["inputTokenCount", "cacheReadInputTokenCount", "cacheWriteInputTokenCount", "inputBodyJson", "inputContentType"];
/// The `output` keys read into columns.
const OUTPUT_KEYS: &[&str] = &["outputTokenCount", "outputBodyJson", "outputContentType"];
/// The Converse response keys read into columns.
const CONVERSE_KEYS: &[&str] = &["output", "stopReason", "usage", "metrics"];

/// Whether `obj` is an invocation log record.
fn is_invocation_log(obj: &Map<String, Value>) -> bool {
    obj.get("schemaType").and_then(Value::as_str) == Some("ModelInvocationLog")
}

/// A CloudWatch Logs event's record: its `@message` (Logs Insights) or
/// `message` (`FilterLogEvents`), as JSON text or an object.
fn event_message(obj: &Map<String, Value>) -> Option<Cow<'_, Map<String, Value>>> {
    match obj.get("@message").or_else(|| obj.get("message"))? {
        Value::Object(m) => Some(Cow::Borrowed(m)),
        Value::String(s) if s.trim_start().starts_with('{') => match serde_json::from_str(s) {
            Ok(Value::Object(m)) => Some(Cow::Owned(m)),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `obj` is a Converse response: `stopReason` with Bedrock's
/// camelCase `usage.inputTokens`.
fn is_converse(obj: &Map<String, Value>) -> bool {
    obj.get("stopReason").is_some_and(Value::is_string) && obj.get("usage").and_then(|u| u.get("inputTokens")).is_some()
}

/// A number at `path` below `v`, if it is one.
fn number(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_f64()
}

/// A string at `path` below `v`, if it is one.
fn text<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str()
}

/// A body logged as an object, or as JSON text in a string.
fn body(v: Option<&Value>) -> Cow<'_, Value> {
    match v {
        Some(Value::String(s)) => Cow::Owned(serde_json::from_str(s).unwrap_or(Value::Null)),
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(Value::Null),
    }
}

/// The model's own finish reason in its response body: Converse's
/// `stopReason`, Anthropic's and Meta's `stop_reason`, Titan's
/// `completionReason`, Cohere's and Mistral's `finish_reason`.
fn finish_reason(out: &Value) -> Option<&str> {
    text(out, &["stopReason"])
        .or_else(|| text(out, &["stop_reason"]))
        .or_else(|| text(out, &["finish_reason"]))
        .or_else(|| out.get("results")?.get(0)?.get("completionReason")?.as_str())
        .or_else(|| out.get("choices")?.get(0)?.get("finish_reason")?.as_str())
        .or_else(|| out.get("outputs")?.get(0)?.get("stop_reason")?.as_str())
        .or_else(|| out.get("generations")?.get(0)?.get("finish_reason")?.as_str())
}

/// The text of the response body: Converse's message, Anthropic's text
/// blocks, Meta's `generation`, Titan's first result.
fn output_text(out: &Value) -> Option<String> {
    let blocks =
        out.get("output").and_then(|o| o.get("message")).and_then(|m| m.get("content")).or_else(|| {
            (out.get("type").and_then(Value::as_str) == Some("message")).then(|| out.get("content")).flatten()
        });
    if let Some(Value::Array(blocks)) = blocks {
        let parts: Vec<&str> = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str).is_none_or(|t| t == "text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        return (!parts.is_empty()).then(|| parts.concat());
    }
    text(out, &["generation"]).or_else(|| out.get("results")?.get(0)?.get("outputText")?.as_str()).map(str::to_string)
}

/// The output cap of the request body: Converse's `inferenceConfig.maxTokens`,
/// Anthropic's `max_tokens`, Meta's `max_gen_len`, Titan's `maxTokenCount`.
fn max_tokens(input: &Value) -> Result<Option<i64>, String> {
    let cap = number(input, &["inferenceConfig", "maxTokens"])
        .or_else(|| number(input, &["max_tokens"]))
        .or_else(|| number(input, &["max_gen_len"]))
        .or_else(|| number(input, &["textGenerationConfig", "maxTokenCount"]));
    fields::opt_token_count("max_tokens", cap)
}

/// Prompt tokens (cache reads and writes folded in), cached, cache writes
/// and output tokens of a Converse `usage` object, where Bedrock counts
/// `inputTokens` apart from `cacheReadInputTokens` and `cacheWriteInputTokens`.
fn converse_usage(usage: &Value) -> Result<(i64, i64, i64, i64), String> {
    let input =
        fields::token_count("usage.inputTokens", number(usage, &["inputTokens"]).ok_or("missing usage.inputTokens")?)?;
    let output = fields::token_count(
        "usage.outputTokens",
        number(usage, &["outputTokens"]).ok_or("missing usage.outputTokens")?,
    )?;
    let read =
        fields::opt_token_count("usage.cacheReadInputTokens", number(usage, &["cacheReadInputTokens"]))?.unwrap_or(0);
    let write =
        fields::opt_token_count("usage.cacheWriteInputTokens", number(usage, &["cacheWriteInputTokens"]))?.unwrap_or(0);
    Ok((input + read + write, read, write, output))
}

/// The model of a `modelId`: an ARN's resource id (a foundation model, a
/// system inference profile such as `us.anthropic.claude-...`), or the id.
fn model_of(model_id: &str) -> &str {
    match model_id.strip_prefix("arn:") {
        Some(arn) => arn.rsplit_once('/').map_or(arn, |(_, id)| id),
        None => model_id,
    }
}

/// `extra` of a record: its members that no column holds, and for an ARN
/// model id the ARN itself.
fn record_extra(raw: &str, model_id: Option<&str>) -> Option<String> {
    let mut extra = fields::members_to_values(fields::unread_nested(
        raw,
        RECORD_KEYS,
        &[("input", INPUT_KEYS), ("output", OUTPUT_KEYS)],
        "",
    ));
    if let Some(arn) = model_id.filter(|m| m.starts_with("arn:")) {
        extra.insert("modelId".to_string(), Value::String(arn.to_string()));
    }
    (!extra.is_empty()).then(|| Value::Object(extra).to_string())
}

/// One invocation log record.
fn parse_invocation(record: &Map<String, Value>, raw: &str) -> Result<RequestRecord<'static>, String> {
    let input = record.get("input").cloned().unwrap_or(Value::Null);
    let output = record.get("output").cloned().unwrap_or(Value::Null);
    let in_body = body(input.get("inputBodyJson"));
    let out_body = body(output.get("outputBodyJson"));
    let model_id = record.get("modelId").and_then(Value::as_str);
    let counts = (number(&input, &["inputTokenCount"]), number(&output, &["outputTokenCount"]));
    let (prompt, cached, cache_write, completion) = match counts {
        (Some(i), Some(o)) => {
            let read = fields::opt_token_count(
                "input.cacheReadInputTokenCount",
                number(&input, &["cacheReadInputTokenCount"]),
            )?
            .unwrap_or(0);
            let write = fields::opt_token_count(
                "input.cacheWriteInputTokenCount",
                number(&input, &["cacheWriteInputTokenCount"]),
            )?
            .unwrap_or(0);
            let i = fields::token_count("input.inputTokenCount", i)?;
            (i + read + write, read, write, fields::token_count("output.outputTokenCount", o)?)
        }
        // A Converse body carries its own usage when the record's counts are missing.
        _ if out_body.get("usage").and_then(|u| u.get("inputTokens")).is_some() => converse_usage(&out_body["usage"])?,
        _ => {
            let why = record
                .get("errorCode")
                .and_then(Value::as_str)
                .map(|c| format!("errorCode {c}"))
                .or_else(|| finish_reason(&out_body).map(|r| format!("stop reason {r}")))
                .unwrap_or_else(|| "no error code".to_string());
            return Err(format!(
                "invocation log record without input.inputTokenCount and output.outputTokenCount ({why}): \
                 a call that was blocked or failed"
            ));
        }
    };
    let ts = record.get("timestamp").and_then(Value::as_str).ok_or("missing timestamp")?;
    let latency =
        fields::duration_ms("outputBodyJson.metrics.latencyMs", number(&out_body, &["metrics", "latencyMs"]))?;
    Ok(RequestRecord {
        request_id: record.get("requestId").and_then(Value::as_str).map(|s| Cow::Owned(s.to_string())),
        ts_micros: fields::parse_datetime_micros(ts)?,
        model: Cow::Owned(model_id.map_or("unknown", model_of).to_string()),
        prompt_tokens: Some(prompt),
        completion_tokens: completion,
        cached_tokens: cached,
        cache_write_tokens: cache_write,
        max_tokens: max_tokens(&in_body)?,
        latency_ms: latency,
        finish_reason_raw: finish_reason(&out_body).map(|r| Cow::Owned(r.to_string())),
        model_output: output_text(&out_body).map(Cow::Owned),
        extra: record_extra(raw, model_id),
        attribution: record_attribution(record),
        ..Default::default()
    })
}

/// One Converse response: no id, time or model in the body (the model is in
/// the request's URI), so the model is `--model` and the time the file's.
fn parse_converse(
    resp: &Map<String, Value>,
    raw: &str,
    ctx: &LineContext<'_>,
) -> Result<RequestRecord<'static>, String> {
    let resp_value = Value::Object(resp.clone());
    let (prompt, cached, cache_write, completion) = converse_usage(&resp_value["usage"])?;
    let extra = fields::members_to_values(fields::unread_members(raw, CONVERSE_KEYS, ""));
    Ok(RequestRecord {
        ts_micros: ctx.base_time_micros,
        model: Cow::Owned(ctx.default_model.to_string()),
        prompt_tokens: Some(prompt),
        completion_tokens: completion,
        cached_tokens: cached,
        cache_write_tokens: cache_write,
        latency_ms: fields::duration_ms("metrics.latencyMs", number(&resp_value, &["metrics", "latencyMs"]))?,
        finish_reason_raw: text(&resp_value, &["stopReason"]).map(|r| Cow::Owned(r.to_string())),
        model_output: output_text(&resp_value).map(Cow::Owned),
        extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        attribution: Attribution { provider: Some(Cow::Borrowed("bedrock")), ..Default::default() },
        ..Default::default()
    })
}

/// One record of any of the shapes: an invocation log record, a CloudWatch
/// event holding one, a Converse response.
fn parse_record(raw: &str, ctx: &LineContext<'_>) -> Result<Parsed<'static>, String> {
    let obj: Map<String, Value> =
        fields::from_json(raw.as_bytes()).map_err(|e| format!("invalid Bedrock record: {e}"))?;
    if is_invocation_log(&obj) {
        return parse_invocation(&obj, raw).map(Parsed::Request);
    }
    if let Some(Value::Array(events)) = obj.get("events") {
        let mut rows = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let text = event.to_string();
            match parse_record(&text, ctx) {
                Ok(Parsed::Request(r)) => rows.push(super::Row::Request(r)),
                Ok(_) => {}
                Err(error) => rows.push(super::Row::Reject(super::RecordReject {
                    record: format!("events[{i}]"),
                    error,
                    raw: Cow::Owned(text.into_bytes()),
                })),
            }
        }
        return Ok(Parsed::Rows { rows, skipped: 0 });
    }
    if let Some(message) = event_message(&obj) {
        if is_invocation_log(&message) {
            let text = Value::Object(message.into_owned()).to_string();
            let obj: Map<String, Value> = fields::from_json(text.as_bytes()).map_err(|e| e.to_string())?;
            return parse_invocation(&obj, &text).map(Parsed::Request);
        }
        // Another event of the log group (Bedrock writes only records; a
        // group shared with other producers): not a request.
        return Ok(Parsed::not_a_request());
    }
    if is_converse(&obj) {
        return parse_converse(&obj, raw, ctx).map(Parsed::Request);
    }
    Err("neither a Bedrock invocation log record nor a Converse response".to_string())
}

/// AWS Bedrock invocation logs and Converse responses.
pub struct Bedrock;

impl LogFormat for Bedrock {
    fn name(&self) -> &'static str {
        "bedrock"
    }

    fn about(&self) -> &'static str {
        "AWS Bedrock model invocation logs (S3, CloudWatch Logs or its exports) and Converse responses"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        line.record().is_some_and(|r| {
            is_invocation_log(r)
                || event_message(r).is_some_and(|m| is_invocation_log(&m))
                || r.get("events")
                    .and_then(|e| e.get(0))
                    .and_then(Value::as_object)
                    .and_then(event_message)
                    .is_some_and(|m| is_invocation_log(&m))
                || is_converse(r)
        })
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        let text = simdutf8::basic::from_utf8(line).map_err(|_| "invalid UTF-8".to_string())?;
        if line.trim_ascii_start().first() == Some(&b'[') {
            return super::parse_array_line(line, |item| {
                let text = simdutf8::basic::from_utf8(item).map_err(|_| "invalid UTF-8".to_string())?;
                parse_record(text, ctx)
            });
        }
        parse_record(text, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> RequestRecord<'static> {
        match Bedrock.parse(line.as_bytes(), &LineContext::default()) {
            Ok(Parsed::Request(r)) => r.into_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_inference_profile_arn_names_its_model_and_is_kept() {
        let r = one(
            r#"{"schemaType":"ModelInvocationLog","timestamp":"2025-01-01T00:00:00Z","requestId":"r","modelId":"arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0","input":{"inputTokenCount":4,"cacheReadInputTokenCount":10,"cacheWriteInputTokenCount":20},"output":{"outputTokenCount":5}}"#,
        );
        assert_eq!(r.model, "us.anthropic.claude-3-5-haiku-20241022-v1:0");
        assert_eq!(
            (r.prompt_tokens, r.cached_tokens, r.cache_write_tokens, r.completion_tokens),
            (Some(34), 10, 20, 5)
        );
        let extra: Value = serde_json::from_str(r.extra.as_deref().unwrap()).unwrap();
        assert_eq!(
            extra["modelId"],
            "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0"
        );
        assert_eq!(extra["schemaType"], "ModelInvocationLog");
    }

    #[test]
    fn a_record_without_counts_is_rejected_with_its_reason() {
        let err = Bedrock
            .parse(
                br#"{"schemaType":"ModelInvocationLog","timestamp":"2025-01-01T00:00:00Z","modelId":"m","errorCode":"ValidationException","input":{},"output":{}}"#,
                &LineContext::default(),
            )
            .unwrap_err();
        assert!(err.contains("without input.inputTokenCount") && err.contains("ValidationException"), "{err}");
    }

    #[test]
    fn a_filter_log_events_output_gives_each_event_s_record() {
        // `aws logs filter-log-events` output: the records are the events' `message`s.
        let record = r#"{\"schemaType\":\"ModelInvocationLog\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"requestId\":\"r1\",\"modelId\":\"m\",\"input\":{\"inputTokenCount\":3},\"output\":{\"outputTokenCount\":4}}"#;
        let line = format!(
            r#"{{"events":[{{"logStreamName":"s","timestamp":1735689600000,"message":"{record}","eventId":"1"}},{{"message":"{{\"schemaType\":\"ModelInvocationLog\"}}"}}]}}"#
        );
        assert!(Bedrock.detect(&Probe::new(line.as_bytes())));
        let Ok(Parsed::Rows { rows, skipped: 0 }) = Bedrock.parse(line.as_bytes(), &LineContext::default()) else {
            panic!()
        };
        assert!(
            matches!(&rows[0], super::super::Row::Request(r) if r.request_id.as_deref() == Some("r1") && r.prompt_tokens == Some(3) && r.completion_tokens == 4)
        );
        assert!(
            matches!(&rows[1], super::super::Row::Reject(r) if r.record == "events[1]" && r.error.contains("without input.inputTokenCount"))
        );
    }

    #[test]
    fn other_events_of_a_log_group_are_skipped() {
        let line = br#"{"@timestamp":"2025-01-01 00:00:00.000","@message":"{\"hello\":1}"}"#;
        assert!(matches!(Bedrock.parse(line, &LineContext::default()), Ok(Parsed::Rows { skipped: 1, .. })));
    }
}
