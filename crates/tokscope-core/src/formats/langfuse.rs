//! Langfuse blob-storage exports of observations (the `observations` and
//! `observations_v2` / events exports): JSONL, JSON (one array on one line),
//! CSV (header naming the columns), gzip-compressed or not. `GENERATION`
//! rows are requests; spans, events and the other observation types are
//! skipped and counted.
//!
//! Langfuse stores `usage_details.input` without the cache: it moves every
//! `prompt_tokens_details.<k>` to its own key `input_<k>` (and Anthropic
//! SDKs report `cache_read_input_tokens` beside an exclusive `input`), so
//! the whole prompt is the sum of the input keys. ClickHouse may quote
//! 64-bit integers. Timings come from the timestamps; the `latency` and
//! `time_to_first_token` columns, whose unit changed between exports, are
//! only a fallback read with `--time-unit`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::csv::CsvHeader;
use super::fields::{self, TimeUnit, TsValue};
use super::{parse_array_line, parse_records, LineContext, LogFormat, Parsed, Probe};
use crate::attribution::{self, AttributionKeys};
use crate::record::RequestRecord;

/// An observation as JSON: a blob-storage export row (snake_case), or an
/// observation of the public API and the UI's trace export (camelCase, the
/// API models' aliases; the model is `model` there).
#[derive(Deserialize)]
struct ObservationJson<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "startTime")]
    start_time: Option<TsValue<'a>>,
    #[serde(borrow, default, alias = "endTime")]
    end_time: Option<TsValue<'a>>,
    #[serde(borrow, default, alias = "completionStartTime")]
    completion_start_time: Option<TsValue<'a>>,
    #[serde(borrow, default)]
    provided_model_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default, alias = "usageDetails")]
    usage_details: Option<Map<String, Value>>,
    #[serde(default, alias = "costDetails")]
    cost_details: Option<Map<String, Value>>,
    #[serde(default, alias = "totalCost", deserialize_with = "fields::opt_number")]
    total_cost: Option<f64>,
    #[serde(default, deserialize_with = "fields::opt_number")]
    latency: Option<f64>,
    #[serde(default, alias = "timeToFirstToken", deserialize_with = "fields::opt_number")]
    time_to_first_token: Option<f64>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output: Option<&'a RawValue>,
    #[serde(borrow, default, alias = "modelParameters")]
    model_parameters: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    #[serde(borrow, default, alias = "sessionId")]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    level: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "statusMessage")]
    status_message: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "traceId")]
    trace_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "parentObservationId")]
    parent_observation_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    environment: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    version: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "promptName")]
    prompt_name: Option<Cow<'a, str>>,
    #[serde(default, alias = "promptVersion")]
    prompt_version: Option<Value>,
    #[serde(borrow, default, alias = "userId")]
    user_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "traceName")]
    trace_name: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "modelId")]
    model_id: Option<Cow<'a, str>>,
}

/// Attribution from an observation's members (docs/metrics.md,
/// "Attribution"): the trace's user, project, environment and tags; the
/// provider a LangChain integration notes in `metadata.ls_provider`.
const ATTRIBUTION: AttributionKeys = AttributionKeys {
    user_id: &["user_id"],
    project: &["project_id", "projectId"],
    environment: &["environment"],
    tags: &["tags", "metadata.tags"],
    provider: &["metadata.ls_provider"],
    ..AttributionKeys::NONE
};

/// The keys of an observation [`ObservationJson`] reads into columns (or
/// keeps under their exports' names), by both their exports' names (snake
/// case) and the public API's (camel case). `model_parameters` and
/// `metadata`, of which a column holds one member each (the output cap, the
/// finish reason), are kept whole in `extra` as logged.
const OBSERVATION_KEYS: &[&str] = &[
    "id",
    "type",
    "start_time",
    "startTime",
    "end_time",
    "endTime",
    "completion_start_time",
    "completionStartTime",
    "provided_model_name",
    "model",
    "usage_details",
    "usageDetails",
    "cost_details",
    "costDetails",
    "total_cost",
    "totalCost",
    "latency",
    "time_to_first_token",
    "timeToFirstToken",
    "input",
    "output",
    "session_id",
    "sessionId",
    "level",
    "status_message",
    "statusMessage",
    "trace_id",
    "traceId",
    "parent_observation_id",
    "parentObservationId",
    "name",
    "environment",
    "version",
    "prompt_name",
    "promptName",
    "prompt_version",
    "promptVersion",
    "user_id",
    "userId",
    "trace_name",
    "traceName",
    "model_id",
    "modelId",
];

/// One observation, from a JSON or a CSV row.
#[derive(Default)]
struct Observation<'a> {
    id: Option<Cow<'a, str>>,
    kind: Option<Cow<'a, str>>,
    start_us: Option<i64>,
    end_us: Option<i64>,
    completion_start_us: Option<i64>,
    model: Option<Cow<'a, str>>,
    usage: Vec<(String, f64)>,
    cost_details: Map<String, Value>,
    total_cost: Option<f64>,
    latency: Option<f64>,
    time_to_first_token: Option<f64>,
    /// The `input` column's text: JSON text as logged, or plain text.
    input: Option<Cow<'a, str>>,
    output: Option<Cow<'a, str>>,
    model_parameters: Option<Cow<'a, str>>,
    metadata: Map<String, Value>,
    session_id: Option<Cow<'a, str>>,
    level: Option<Cow<'a, str>>,
    status_message: Option<Cow<'a, str>>,
    /// Columns kept in `extra` as they are.
    extra: Map<String, Value>,
}

/// `usage_details` (`Map(String, UInt64)`): numbers, or decimal strings.
fn usage_map(map: Map<String, Value>) -> Result<Vec<(String, f64)>, String> {
    map.into_iter()
        .map(|(k, v)| {
            let n = match &v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            n.map(|n| (k.clone(), n)).ok_or_else(|| format!("usage_details.{k} is not a number: {v}"))
        })
        .collect()
}

/// A JSON column's text: a string's content, or the JSON text of anything else.
fn column_text(raw: Option<&RawValue>) -> Result<Option<Cow<'_, str>>, String> {
    match raw {
        Some(raw) => fields::text_or_json(raw).map_err(|e| e.to_string()),
        None => Ok(None),
    }
}

/// An object column (`metadata`): an object, or JSON text holding one.
fn object_column(text: Option<&str>) -> Map<String, Value> {
    match text.map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(m))) => m,
        _ => Map::new(),
    }
}

impl<'a> Observation<'a> {
    fn from_json(raw: &'a [u8]) -> Result<Self, String> {
        let o: ObservationJson<'a> =
            fields::from_json(raw).map_err(|e| format!("invalid Langfuse observation: {e}"))?;
        let micros = |v: &Option<TsValue<'_>>| v.as_ref().map(TsValue::to_micros).transpose();
        let metadata = column_text(o.metadata)?;
        let mut obs = Observation {
            id: o.id,
            kind: o.kind,
            start_us: micros(&o.start_time)?,
            end_us: micros(&o.end_time)?,
            completion_start_us: micros(&o.completion_start_time)?,
            model: o.provided_model_name.or(o.model),
            usage: usage_map(o.usage_details.unwrap_or_default())?,
            cost_details: o.cost_details.unwrap_or_default(),
            total_cost: o.total_cost,
            latency: o.latency,
            time_to_first_token: o.time_to_first_token,
            input: column_text(o.input)?,
            output: column_text(o.output)?,
            model_parameters: column_text(o.model_parameters)?,
            metadata: object_column(metadata.as_deref()),
            session_id: o.session_id,
            level: o.level,
            status_message: o.status_message,
            extra: Map::new(),
        };
        for (key, v) in [
            ("trace_id", o.trace_id),
            ("parent_observation_id", o.parent_observation_id),
            ("name", o.name),
            ("environment", o.environment),
            ("version", o.version),
            ("prompt_name", o.prompt_name),
            ("user_id", o.user_id),
            ("trace_name", o.trace_name),
            ("model_id", o.model_id),
        ] {
            obs.note(key, v.map(|s| Value::String(s.into_owned())));
        }
        obs.note("prompt_version", o.prompt_version);
        // Every other key as logged (projectId, isRootObservation, calculated
        // costs, modelParameters, metadata, ...); the empty ones say nothing.
        if let Ok(text) = std::str::from_utf8(raw) {
            let members = fields::unread_members(text, OBSERVATION_KEYS, "");
            let members = members.into_iter().filter(|(_, v)| !fields::is_empty_value(v)).collect();
            obs.extra.extend(fields::members_to_values(members));
        }
        Ok(obs)
    }

    fn note(&mut self, key: &str, v: Option<Value>) {
        if let Some(v) = v.filter(|v| !v.is_null() && v.as_str() != Some("")) {
            self.extra.insert(key.into(), v);
        }
    }

    /// The value of usage key `key`.
    fn usage(&self, key: &str) -> Option<f64> {
        self.usage.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    fn into_parsed(mut self, ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        match self.kind.as_deref() {
            Some("GENERATION") => {}
            Some(_) => return Ok(Parsed::not_a_request()),
            None => return Err("missing required field type".into()),
        }
        let is_input = |k: &str| {
            k == "input"
                || k.starts_with("input_")
                || k == "cache_read_input_tokens"
                || k == "cache_creation_input_tokens"
        };
        let is_output = |k: &str| k == "output" || k.starts_with("output_");
        if !self.usage.iter().any(|(k, _)| is_input(k) || is_output(k)) {
            let level = self.level.as_deref().unwrap_or("DEFAULT");
            let msg = self.status_message.as_deref().unwrap_or("no status message");
            return Err(format!("generation without usage_details (level {level}: {msg})"));
        }
        let sum = |keep: &dyn Fn(&str) -> bool, name: &str| -> Result<i64, String> {
            let total: f64 = self.usage.iter().filter(|(k, _)| keep(k)).map(|(_, v)| v).sum();
            fields::token_count(name, total)
        };
        for (k, v) in &self.usage {
            fields::token_count(&format!("usage_details.{k}"), *v)?;
        }
        let prompt = sum(&is_input, "input usage")?;
        let completion = sum(&is_output, "output usage")?;
        let count = |keys: &[&str]| -> Result<Option<i64>, String> {
            let present: Vec<f64> = keys.iter().filter_map(|k| self.usage(k)).collect();
            if present.is_empty() {
                Ok(None)
            } else {
                fields::token_count(keys[0], present.iter().sum()).map(Some)
            }
        };
        let cached = count(&["input_cached_tokens"])?
            .or(count(&["cache_read_input_tokens"])?)
            .or(count(&["input_cache_read"])?)
            .unwrap_or(0);
        // Langfuse moves the TTL breakdown out of input_cache_creation: the sum is the total.
        let cache_write = count(&["input_cache_creation", "input_cache_creation_5m", "input_cache_creation_1h"])?
            .or(count(&["cache_creation_input_tokens"])?)
            .or(count(&["input_cache_write"])?)
            .unwrap_or(0);
        let reasoning = count(&["output_reasoning_tokens"])?.or(count(&["output_reasoning"])?);
        if let Some(total) = self.usage("total") {
            if total != (prompt + completion) as f64 {
                self.extra.insert("usage_total_mismatch".into(), Value::from(total));
            }
        }

        let start = self.start_us.ok_or("missing required field start_time")?;
        let unit = ctx.time_unit;
        let latency_ms = match self.end_us {
            Some(end) => {
                let ms = fields::elapsed_ms("end_time - start_time", start, end)?;
                self.latency_unit(ms);
                Some(ms)
            }
            None => unit.to_ms("latency", self.latency)?,
        };
        let ttft_ms = match self.completion_start_us {
            Some(first) => Some(fields::elapsed_ms("completion_start_time - start_time", start, first)?),
            None => unit.to_ms("time_to_first_token", self.time_to_first_token)?,
        };
        let max_tokens = match self.model_parameters.as_deref().map(serde_json::from_str::<Map<String, Value>>) {
            Some(Ok(params)) => ["max_tokens", "max_completion_tokens", "max_output_tokens", "maxTokens"]
                .iter()
                .find_map(|k| match params.get(*k)? {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                }),
            _ => None,
        };
        let (max_tokens, invalid_max) = fields::lenient_token_count("max_tokens", max_tokens);
        // Langfuse has no finish-reason column: integrations that log one put it in metadata.
        let finish = ["finish_reason", "stop_reason"]
            .iter()
            .find_map(|k| self.metadata.get(*k).and_then(Value::as_str).map(str::to_string))
            .or_else(|| (self.level.as_deref() == Some("ERROR")).then(|| "error".to_string()));
        self.note("level", self.level.clone().map(|l| Value::String(l.into_owned())));
        self.note("status_message", self.status_message.clone().map(|m| Value::String(m.into_owned())));
        let logged_cost = self.total_cost.or_else(|| self.cost_details.get("total").and_then(Value::as_f64));
        if !self.cost_details.is_empty() {
            self.extra.insert("cost_details".into(), Value::Object(std::mem::take(&mut self.cost_details)));
        }
        let model = self.model.take().unwrap_or_else(|| Cow::Owned(ctx.default_model.to_string()));
        let attribution = attribution::from_members(&self.extra, &ATTRIBUTION);
        Ok(Parsed::Request(fields::with_invalid(
            RequestRecord {
                request_id: self.id.take(),
                ts_micros: start,
                session_id: self.session_id.take(),
                model,
                prompt_tokens: Some(prompt),
                completion_tokens: completion,
                cached_tokens: cached,
                cache_write_tokens: cache_write,
                reasoning_tokens: reasoning,
                max_tokens,
                ttft_ms,
                latency_ms,
                finish_reason_raw: finish.map(Cow::Owned),
                prompt: self.input.take().map(unquote),
                model_output: self.output.take().map(output_text),
                output_is_raw: false,
                logged_cost_usd: fields::cost_usd("total_cost", logged_cost)?,
                extra: (!self.extra.is_empty()).then(|| Value::Object(std::mem::take(&mut self.extra)).to_string()),
                attribution,
                ..Default::default()
            },
            "max_tokens",
            invalid_max,
        )))
    }

    /// Records which unit the `latency` column is in, from the timestamps'
    /// difference (`ms`), when both are logged: the column's unit changed
    /// between export versions.
    fn latency_unit(&mut self, from_timestamps_ms: f64) {
        let Some(column) = self.latency.filter(|c| *c > 0.0) else { return };
        let unit = if (column * 1000.0 - from_timestamps_ms).abs() <= 1.0 {
            TimeUnit::Seconds
        } else if (column - from_timestamps_ms).abs() <= 1.0 {
            TimeUnit::Milliseconds
        } else {
            self.extra.insert("latency_column_mismatch".into(), Value::from(column));
            return;
        };
        self.extra.insert("latency_unit".into(), Value::String(unit.name().to_string()));
    }
}

/// Text logged as a JSON string literal (`"hi"`) unquoted; anything else as logged.
fn unquote(text: Cow<'_, str>) -> Cow<'_, str> {
    if text.starts_with('"') {
        if let Ok(s) = serde_json::from_str::<String>(&text) {
            return Cow::Owned(s);
        }
    }
    text
}

/// The text of a logged output: a JSON string; a message's string `content`;
/// the `text` of content blocks of type `text`; plain text as is; any other
/// JSON (a tool call) as logged.
fn output_text(text: Cow<'_, str>) -> Cow<'_, str> {
    fn blocks(items: &[Value]) -> Option<String> {
        let texts: Vec<&str> = items
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str).unwrap_or("text") == "text")
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        (!texts.is_empty()).then(|| texts.concat())
    }
    let found = match serde_json::from_str::<Value>(&text) {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Object(m)) => match m.get("content") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(items)) => blocks(items),
            _ => None,
        },
        Ok(Value::Array(items)) => blocks(&items),
        _ => None,
    };
    found.map_or(text, Cow::Owned)
}

fn parse_object<'a>(raw: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
    #[derive(Deserialize)]
    struct Container<'a> {
        #[serde(borrow, default)]
        observations: Option<Vec<&'a RawValue>>,
        #[serde(borrow, default)]
        data: Option<Vec<&'a RawValue>>,
    }
    let container = fields::from_json::<Container<'a>>(raw).ok();
    match container {
        Some(Container { observations: Some(items), .. }) => parse_observations(items, "observations", ctx),
        Some(Container { data: Some(items), .. }) => parse_observations(items, "data", ctx),
        _ => Observation::from_json(raw)?.into_parsed(ctx),
    }
}

/// The observations of a trace export (`{"trace": ..., "observations": [...]}`)
/// or of an API response page (`{"data": [...], "meta": ...}`): each one a
/// request, a skip, or a reject named `<key>[i]` while the others are kept.
fn parse_observations<'a>(items: Vec<&'a RawValue>, key: &str, ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
    Ok(parse_records(items, |i| format!("{key}[{i}]"), |raw| Observation::from_json(raw)?.into_parsed(ctx)))
}

/// Whether a JSON object is an observation: a blob export row, or an API one (camelCase).
fn is_observation(o: &Map<String, Value>) -> bool {
    (o.contains_key("usage_details")
        && (o.contains_key("provided_model_name") || (o.contains_key("trace_id") && o.contains_key("type"))))
        || (o.contains_key("traceId") && o.contains_key("type") && o.contains_key("startTime"))
}

/// Parses one line: an observation object, a one-line JSON array of them
/// (the JSON export), or a CSV row read by the file's header.
pub fn parse<'a>(line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
    if let Some(header) = ctx.header {
        if header.is_header_line(line) {
            return Ok(Parsed::Skip);
        }
        // The row as the JSON export holds it, read by the same reader.
        let row = header.row(line)?.to_json_object();
        return Ok(Observation::from_json(row.as_bytes())?.into_parsed(ctx)?.into_owned());
    }
    match line.trim_ascii_start().first() {
        Some(b'[') => parse_array_line(line, |raw| parse_object(raw, ctx)),
        Some(b'{') => parse_object(line, ctx),
        _ => Err("not a Langfuse observation (a CSV export needs its header line first)".into()),
    }
}

/// The CSV export's header: its first row's keys, `trace_id`, `type`, `usage_details` and `start_time` among them.
fn observations_header(line: &[u8]) -> Option<CsvHeader> {
    if line.trim_ascii_start().first().is_some_and(|b| matches!(b, b'{' | b'[')) {
        return None;
    }
    let header = CsvHeader::parse(line).ok()?;
    ["trace_id", "type", "usage_details", "start_time"].iter().all(|c| header.has(c)).then_some(header)
}

/// Langfuse observations exports.
pub struct Langfuse;

impl LogFormat for Langfuse {
    fn name(&self) -> &'static str {
        "langfuse"
    }

    fn about(&self) -> &'static str {
        "Langfuse observations: blob-storage exports (JSONL, JSON, CSV), the public API's and the UI's trace exports (camelCase): one request per GENERATION"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        match line.record() {
            Some(o) => {
                let first = |key: &str| o.get(key).and_then(|v| v.get(0)).and_then(Value::as_object);
                is_observation(o)
                    || (o.contains_key("trace") && first("observations").is_some_and(is_observation))
                    || first("data").is_some_and(is_observation)
            }
            None => observations_header(line.line()).is_some(),
        }
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx)
    }

    fn header(&self, first_line: &[u8]) -> Option<CsvHeader> {
        observations_header(first_line)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::summary;
    use super::*;

    const SAMPLE: &str = include_str!("../../../../sample_logs/langfuse.jsonl");

    fn ctx() -> LineContext<'static> {
        LineContext { default_model: "langfuse:langfuse", ..Default::default() }
    }

    fn line(n: usize) -> Result<Parsed<'static>, String> {
        parse(SAMPLE.lines().nth(n - 1).expect("sample line").as_bytes(), &ctx())
    }

    fn request(p: Result<Parsed<'_>, String>) -> RequestRecord<'_> {
        match p {
            Ok(Parsed::Request(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn extra(r: &RequestRecord<'_>) -> Value {
        serde_json::from_str(r.extra.as_deref().unwrap_or("{}")).unwrap()
    }

    #[test]
    fn openai_generation_input_excludes_the_cache() {
        let r = request(line(1));
        // input 476 + input_cached_tokens 1024, given as strings.
        assert_eq!(
            summary(&r),
            (
                ("obs-gen-1", 1_717_243_200_000_000, "gpt-4o-2024-08-06", 1500, 85, 1024, 0, None, Some(256)),
                (Some(420.0), Some(1800.0), None, Some(0.00332), None)
            )
        );
        assert_eq!(r.prompt.as_deref(), Some(r#"[{"role":"user","content":"What is the capital of France?"}]"#));
        assert_eq!(r.model_output.as_deref(), Some("Paris."));
        let x = extra(&r);
        assert_eq!((x["latency_unit"].as_str(), x["trace_id"].as_str()), (Some("s"), Some("trace-lf-1")));
        assert_eq!(x.get("usage_total_mismatch"), None, "1500 + 85 = total 1585");
    }

    #[test]
    fn anthropic_keys_content_blocks_and_old_columns() {
        let r = request(line(3));
        assert_eq!(
            summary(&r),
            (
                (
                    "obs-gen-3",
                    1_717_243_260_000_000,
                    "claude-sonnet-4-5-20250929",
                    4600,
                    300,
                    4000,
                    100,
                    None,
                    Some(1024)
                ),
                (Some(950.0), Some(5500.0), None, Some(0.007575), None)
            )
        );
        assert_eq!(r.model_output.as_deref(), Some("Here is the summary."));
        // The first exports had no total_cost, latency or time_to_first_token columns.
        let r = request(line(4));
        assert_eq!(
            summary(&r),
            (
                ("obs-gen-4", 1_717_243_320_000_000, "claude-3-5-haiku-20241022", 2000, 150, 1800, 0, None, Some(64)),
                (None, Some(3000.0), None, Some(0.000904), None)
            )
        );
        assert_eq!(r.model_output.as_deref(), Some("Sure."), "plain text is kept as is");
        assert_eq!(extra(&r)["prompt_name"], "say-sure");
    }

    #[test]
    fn reasoning_and_length_from_metadata() {
        let r = request(line(5));
        assert_eq!(
            summary(&r),
            (
                ("obs-gen-5", 1_717_243_380_000_000, "o3-mini-2025-01-31", 200, 900, 0, 0, Some(700), None),
                (Some(4500.0), Some(6000.0), None, Some(0.00418), None)
            )
        );
        assert_eq!(r.model_output.as_deref(), Some("42"));
        let r = request(line(6));
        assert_eq!(
            summary(&r),
            (
                ("obs-gen-6", 1_717_243_440_250_000, "gpt-4o-mini-2024-07-18", 900, 256, 0, 0, None, Some(256)),
                (None, Some(5500.0), Some("length"), Some(0.0002885), None)
            )
        );
    }

    #[test]
    fn events_export_row_with_session_and_millisecond_columns() {
        let r = request(line(9));
        assert_eq!(
            summary(&r),
            (
                ("a1b2c3d4e5f60708", 1_717_243_620_000_000, "gpt-4o-mini-2024-07-18", 1200, 64, 0, 0, None, Some(128)),
                (Some(300.0), Some(2500.0), None, Some(0.0002184), Some("sess-lf-1"))
            )
        );
        assert_eq!((r.prompt.as_deref(), r.model_output.as_deref()), (Some("hi"), Some("Hello! How can I help?")));
        let x = extra(&r);
        assert_eq!((x["latency_unit"].as_str(), x["user_id"].as_str()), (Some("ms"), Some("user-9")));
    }

    #[test]
    fn other_types_are_skipped_and_errors_rejected() {
        for n in [2, 8] {
            assert!(matches!(line(n), Ok(Parsed::Rows { ref rows, skipped: 1 }) if rows.is_empty()), "line {n}");
        }
        let err = line(7).unwrap_err();
        assert!(err.contains("without usage_details") && err.contains("ERROR") && err.contains("429"), "{err}");
        assert!(line(10).unwrap_err().contains("invalid"));
        assert_eq!(SAMPLE.lines().count(), 10);
    }

    #[test]
    fn duration_columns_follow_the_time_unit_without_timestamps() {
        let obs = r#"{"id":"g","type":"GENERATION","start_time":"2024-06-01 12:00:00.000","end_time":null,"usage_details":{"input":10,"output":2},"latency":2.5,"time_to_first_token":0.3}"#;
        let r = request(parse(obs.as_bytes(), &ctx()));
        assert_eq!((r.latency_ms, r.ttft_ms), (Some(2500.0), Some(300.0)), "seconds by default");
        let ms = LineContext { time_unit: TimeUnit::Milliseconds, ..ctx() };
        let r = request(parse(obs.as_bytes(), &ms));
        assert_eq!((r.latency_ms, r.ttft_ms), (Some(2.5), Some(0.3)));
        assert_eq!(r.model, "langfuse:langfuse", "no provided_model_name: the default model");
    }

    #[test]
    fn cache_creation_ttl_breakdown_sums_and_bad_usage_rejects() {
        let obs = r#"{"id":"g","type":"GENERATION","start_time":"2024-06-01 12:00:00.000","usage_details":{"input":"10","input_cache_creation":"100","input_cache_creation_1h":"50","input_cache_read":"30","output":"2","total":"999"}}"#;
        let r = request(parse(obs.as_bytes(), &ctx()));
        assert_eq!(
            (r.prompt_tokens, r.cached_tokens, r.cache_write_tokens, r.completion_tokens),
            (Some(190), 30, 150, 2)
        );
        assert_eq!(extra(&r)["usage_total_mismatch"].as_f64(), Some(999.0));
        let bad = obs.replace(r#""output":"2""#, r#""output":"two""#);
        assert!(parse(bad.as_bytes(), &ctx()).unwrap_err().contains("usage_details.output"));
        let negative = obs.replace(r#""output":"2""#, r#""output":-2"#);
        assert!(parse(negative.as_bytes(), &ctx()).unwrap_err().contains("non-negative"));
        let no_start = obs.replace(r#""start_time":"2024-06-01 12:00:00.000","#, "");
        assert!(parse(no_start.as_bytes(), &ctx()).unwrap_err().contains("start_time"));
    }

    #[test]
    fn a_max_tokens_of_minus_one_is_null_not_a_reject() {
        // Agent frameworks log -1 for "no cap": the generation is kept, the
        // cap null, the value in `extra.invalid_fields`, the issue counted.
        let obs = r#"{"id":"g1","traceId":"t1","type":"GENERATION","startTime":"2025-01-24T09:20:46.000Z","model":"m","usageDetails":{"input":3,"output":2},"modelParameters":{"max_tokens":-1,"temperature":0.5}}"#;
        let Parsed::Request(r) = parse(obs.as_bytes(), &ctx()).unwrap() else { panic!() };
        assert_eq!((r.max_tokens, r.prompt_tokens, r.completion_tokens), (None, Some(3), 2));
        assert_eq!(extra(&r)["invalid_fields"]["max_tokens"].as_f64(), Some(-1.0));
        assert_eq!(r.token_issues, ["invalid_optional_field"]);
    }

    #[test]
    fn trace_export_in_camel_case_gives_its_generations() {
        let doc = r#"{"trace": {"id": "t1", "sessionId": "s1"}, "observations": [
            {"id": "g1", "traceId": "t1", "type": "GENERATION", "startTime": "2025-01-24T09:20:46.000Z",
             "endTime": "2025-01-24T09:20:47.500Z", "completionStartTime": "2025-01-24T09:20:46.250Z",
             "model": "claude-sonnet-4-5", "usageDetails": {"input": 10, "cache_read_input_tokens": 90, "output": 7},
             "costDetails": {"total": 0.002}, "sessionId": "s1", "modelParameters": {"max_tokens": "64"},
             "metadata": {"stop_reason": "end_turn"}},
            {"id": "e1", "traceId": "t1", "type": "EVENT", "startTime": "2025-01-24T09:20:46.000Z"},
            {"id": "g2", "traceId": "t1", "type": "GENERATION", "usageDetails": {"input": 1, "output": 1}}]}"#;
        assert!(Langfuse.detect(&Probe::new(doc.as_bytes())));
        match parse(doc.as_bytes(), &ctx()).unwrap() {
            Parsed::Rows { rows, skipped } => {
                assert_eq!((rows.len(), skipped), (2, 1));
                let super::super::Row::Request(r) = &rows[0] else { panic!("{:?}", rows[0]) };
                assert_eq!(
                    summary(r),
                    (
                        ("g1", 1_737_710_446_000_000, "claude-sonnet-4-5", 100, 7, 90, 0, None, Some(64)),
                        (Some(250.0), Some(1500.0), Some("end_turn"), Some(0.002), Some("s1"))
                    )
                );
                assert!(
                    matches!(&rows[1], super::super::Row::Reject(r) if r.record == "observations[2]" && r.error.contains("start_time"))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn csv_rows_keep_every_column_no_column_holds() {
        let csv = concat!(
            r#"id,trace_id,project_id,type,start_time,end_time,provided_model_name,usage_details,model_parameters,environment,user_id,prompt_name,prompt_version,is_deleted,metadata,input,output,internal_model_id"#,
            "\n",
            r#"g1,t1,p1,GENERATION,2024-06-01 12:00:00.000,2024-06-01 12:00:01.000,gpt-4o,"{""input"":3,""output"":1}","{""max_tokens"":""64"",""temperature"":0.2}",prod,u-7,qa,3,false,"{""api_key"":""sk-1"",""app"":""search""}",hi,there,"#,
        );
        let header = observations_header(csv.lines().next().unwrap().as_bytes()).expect("header");
        let ctx = LineContext { header: Some(&header), ..ctx() };
        let r = request(parse(csv.lines().nth(1).unwrap().as_bytes(), &ctx));
        assert_eq!(
            (r.max_tokens, r.prompt.as_deref(), r.model_output.as_deref()),
            (Some(64), Some("hi"), Some("there"))
        );
        assert_eq!(
            r.extra.as_deref(),
            Some(concat!(
                r#"{"environment":"prod","is_deleted":"false","metadata":{"api_key":"REDACTED","app":"search"},"#,
                r#""model_parameters":{"max_tokens":"64","temperature":0.2},"project_id":"p1","prompt_name":"qa","#,
                r#""prompt_version":"3","trace_id":"t1","user_id":"u-7"}"#
            ))
        );
    }

    #[test]
    fn csv_and_json_array_exports() {
        let csv = concat!(
            r#""id","trace_id","type","start_time","end_time","completion_start_time","provided_model_name","usage_details","cost_details","total_cost","input","output","metadata""#,
            "\n",
            r#""g1","t1","GENERATION","2024-06-01 12:00:00.000","2024-06-01 12:00:01.000","2024-06-01 12:00:00.200","gpt-4o","{""input"":""40"",""input_cached_tokens"":""60"",""output"":""5""}","{""total"":0.001}","0.001","""hello""","{""role"":""assistant"",""content"":""hi there""}","{""finish_reason"":""stop""}""#,
            "\n",
            r#""s1","t1","SPAN","2024-06-01 12:00:00.000","","","","{}","{}","","","","{}""#,
        );
        let mut lines = csv.lines();
        let header = observations_header(lines.next().unwrap().as_bytes()).expect("header");
        let ctx = LineContext { header: Some(&header), ..ctx() };
        assert!(matches!(parse(csv.lines().next().unwrap().as_bytes(), &ctx), Ok(Parsed::Skip)));
        let r = request(parse(lines.next().unwrap().as_bytes(), &ctx));
        assert_eq!(
            summary(&r),
            (
                ("g1", 1_717_243_200_000_000, "gpt-4o", 100, 5, 60, 0, None, None),
                (Some(200.0), Some(1000.0), Some("stop"), Some(0.001), None)
            )
        );
        assert_eq!((r.prompt.as_deref(), r.model_output.as_deref()), (Some("hello"), Some("hi there")));
        // The row read as the JSON export's object: its JSON cells as JSON.
        assert_eq!(
            r.extra.as_deref(),
            Some(r#"{"cost_details":{"total":0.001},"metadata":{"finish_reason":"stop"},"trace_id":"t1"}"#)
        );
        assert!(matches!(parse(lines.next().unwrap().as_bytes(), &ctx), Ok(Parsed::Rows { skipped: 1, .. })));

        let array = format!(
            "[{},{},{}]",
            SAMPLE.lines().next().unwrap(),
            SAMPLE.lines().nth(1).unwrap(),
            SAMPLE.lines().nth(6).unwrap()
        );
        match parse(array.as_bytes(), &self::ctx()).unwrap() {
            Parsed::Rows { rows, skipped } => {
                assert_eq!((rows.len(), skipped), (2, 1));
                assert!(
                    matches!(&rows[0], super::super::Row::Request(r) if r.request_id.as_deref() == Some("obs-gen-1"))
                );
                assert!(
                    matches!(&rows[1], super::super::Row::Reject(r) if r.record == "[2]" && r.error.contains("usage_details"))
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
