//! PyTorch profiler / Chrome trace-event JSON: one document
//! `{"traceEvents": [...], ...}` (or a bare array of events), read event by
//! event ([`crate::event_array`]), never whole.
//!
//! Each event is a record. Complete events (`ph: "X"`, `ts` + `dur`) become
//! `kernels` rows; begin/end events (`B`, `E`) are paired by the reader per
//! (`pid`, `tid`) as a stack and each pair becomes one row
//! ([`SpanEvent`], [`pair`]); every other phase (metadata, instants,
//! counters, flows, async, samples) is skipped and counted. `ts` and `dur`
//! are microseconds, kept as floats. An attention kernel is one whose `args`
//! hold integer `layer` and `head` (or decimal strings), or whose name
//! contains `layer_<l>.attn_head_<h>`.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::canonical::extra_json;
use super::{fields, Framing, LineContext, LogFormat, Parsed, Probe, Row};
use crate::catalog::kernels::KernelRow;
use crate::event_array::{head_first_element, head_object_keys};

/// Top-level keys that identify a trace document (Chrome / Kineto).
const DOCUMENT_KEYS: [&str; 4] = ["traceEvents", "schemaVersion", "deviceProperties", "displayTimeUnit"];

/// One event's members, read in one pass: the keys `kernels` has columns
/// for, and the others (`id`, `bp`, `tts`, `cname`, flow ids, ...) kept for
/// `extra` as [`fields::kept_member`] keeps them.
#[derive(Default)]
struct RawEvent<'a> {
    ph: Option<&'a RawValue>,
    name: Option<&'a RawValue>,
    cat: Option<&'a RawValue>,
    ts: Option<&'a RawValue>,
    dur: Option<&'a RawValue>,
    pid: Option<&'a RawValue>,
    tid: Option<&'a RawValue>,
    args: Option<&'a RawValue>,
    extra: Vec<fields::Member<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawEvent<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawEvent<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a trace event object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut e = RawEvent::default();
                while let Some(fields::Text(key)) = map.next_key()? {
                    let value: &'de RawValue = map.next_value()?;
                    let slot = match key.as_ref() {
                        "ph" => &mut e.ph,
                        "name" => &mut e.name,
                        "cat" => &mut e.cat,
                        "ts" => &mut e.ts,
                        "dur" => &mut e.dur,
                        "pid" => &mut e.pid,
                        "tid" => &mut e.tid,
                        "args" => &mut e.args,
                        _ => {
                            e.extra.extend(fields::kept_member(key, value));
                            continue;
                        }
                    };
                    *slot = Some(value);
                }
                Ok(e)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A begin (`B`) or end (`E`) event, waiting for its partner.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    /// True for `B`.
    pub begin: bool,
    /// Event name (an `E` may have none).
    pub name: Option<String>,
    /// Categories.
    pub cat: Option<String>,
    /// Process id as text.
    pub pid: Option<String>,
    /// Thread id as text.
    pub tid: Option<String>,
    /// Time, microseconds.
    pub ts_us: f64,
    /// The event's `args`.
    pub args: Option<Map<String, Value>>,
    /// The event's keys that no column holds (`extra`).
    pub extra: Map<String, Value>,
}

fn string(field: &str, raw: Option<&RawValue>) -> Result<Option<String>, String> {
    match raw.map(|r| serde_json::from_str::<Value>(r.get())) {
        None | Some(Ok(Value::Null)) => Ok(None),
        Some(Ok(Value::String(s))) => Ok(Some(s)),
        Some(Ok(other)) => Err(format!("{field} must be a string, got {other}")),
        Some(Err(e)) => Err(format!("{field}: {e}")),
    }
}

/// `pid` / `tid`: a number (kept as its decimal text) or a string.
fn id(field: &str, raw: Option<&RawValue>) -> Result<Option<String>, String> {
    match raw.map(|r| serde_json::from_str::<Value>(r.get())) {
        None | Some(Ok(Value::Null)) => Ok(None),
        Some(Ok(Value::String(s))) => Ok(Some(s)),
        Some(Ok(Value::Number(n))) => Ok(Some(n.to_string())),
        Some(Ok(other)) => Err(format!("{field} must be a number or a string, got {other}")),
        Some(Err(e)) => Err(format!("{field}: {e}")),
    }
}

/// A finite number of microseconds.
fn micros(field: &str, phase: &str, raw: Option<&RawValue>) -> Result<f64, String> {
    let raw = raw.ok_or_else(|| format!("a {phase} event needs a numeric {field} (missing)"))?;
    match serde_json::from_str::<f64>(raw.get()) {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("a {phase} event needs a numeric {field}, got {}", raw.get())),
    }
}

/// A non-negative integer from `args` (a number or a decimal string).
fn arg_index(args: &Map<String, Value>, key: &str) -> Result<Option<i32>, String> {
    let bad = |v: &Value| format!("args.{key} must be a non-negative integer, got {v}");
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(n)) => n.as_u64().and_then(|x| i32::try_from(x).ok()).map(Some).ok_or_else(|| bad(v)),
        Some(v @ Value::String(s)) => {
            s.trim().parse::<u32>().ok().and_then(|x| i32::try_from(x).ok()).map(Some).ok_or_else(|| bad(v))
        }
        Some(v) => Err(bad(v)),
    }
}

/// `(layer, head)` from a name containing `layer_<l>.attn_head_<h>`.
pub fn layer_head_from_name(name: &str) -> Result<Option<(i32, i32)>, String> {
    fn digits(s: &str) -> (&str, &str) {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s.split_at(end)
    }
    let mut rest = name;
    while let Some(at) = rest.find("layer_") {
        let (layer, after) = digits(&rest[at + "layer_".len()..]);
        if let Some(head_part) = after.strip_prefix(".attn_head_") {
            let (head, _) = digits(head_part);
            if !layer.is_empty() && !head.is_empty() {
                let parse = |what: &str, v: &str| {
                    v.parse::<i32>().map_err(|_| format!("{what} {v} in the name {name:?} is out of range"))
                };
                return Ok(Some((parse("layer", layer)?, parse("head", head)?)));
            }
        }
        rest = &rest[at + "layer_".len()..];
    }
    Ok(None)
}

/// A kernel interval from its name and `args`: the attention layer and head
/// (`args` first, then the name) and `args.flops`.
fn interval(
    name: Option<String>,
    cat: Option<String>,
    phase: &'static str,
    (pid, tid): (Option<String>, Option<String>),
    (ts_us, dur_us): (f64, f64),
    args: Option<Map<String, Value>>,
    extra: Option<String>,
) -> Result<KernelRow, String> {
    let empty = Map::new();
    let a = args.as_ref().unwrap_or(&empty);
    let (layer, head) = match (arg_index(a, "layer")?, arg_index(a, "head")?) {
        (Some(l), Some(h)) => (Some(l), Some(h)),
        _ => match name.as_deref().map(layer_head_from_name).transpose()?.flatten() {
            Some((l, h)) => (Some(l), Some(h)),
            None => (None, None),
        },
    };
    let flops = match a.get("flops") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Some(f),
            _ => return Err(format!("args.flops must be a non-negative number, got {v}")),
        },
    };
    Ok(KernelRow {
        name,
        cat,
        phase,
        pid,
        tid,
        ts_us,
        dur_us,
        layer,
        head,
        flops,
        args: args.map(|a| Value::Object(a).to_string()),
        extra,
    })
}

/// The interval of a matched begin/end pair: name and categories of the
/// begin event (the end's when the begin has none), `args` and the keys no
/// column holds merged (the end's keys win), duration `end.ts - begin.ts`,
/// which must not be negative.
pub fn pair(begin: SpanEvent, end: SpanEvent) -> Result<KernelRow, String> {
    let dur = end.ts_us - begin.ts_us;
    if dur < 0.0 {
        return Err(format!("the E event at ts {} ends before its B event at ts {}", end.ts_us, begin.ts_us));
    }
    let args = match (begin.args, end.args) {
        (Some(mut b), Some(e)) => {
            b.extend(e);
            Some(b)
        }
        (b, e) => b.or(e),
    };
    let mut extra = begin.extra;
    extra.extend(end.extra);
    let extra = (!extra.is_empty()).then(|| Value::Object(extra).to_string());
    let ids = (begin.pid, begin.tid);
    interval(begin.name.or(end.name), begin.cat.or(end.cat), "B", ids, (begin.ts_us, dur), args, extra)
}

/// Parses one event.
pub fn parse_event(event: &[u8]) -> Result<Parsed<'static>, String> {
    let raw: RawEvent<'_> = fields::from_json(event).map_err(|e| format!("invalid trace event: {e}"))?;
    let phase = string("ph", raw.ph)?.ok_or("a trace event needs a phase (ph)")?;
    if !matches!(phase.as_str(), "X" | "B" | "E") {
        return Ok(Parsed::Skip);
    }
    let args = match raw.args {
        None => None,
        Some(r) => match serde_json::from_str::<Value>(r.get()) {
            Ok(Value::Object(m)) => Some(m),
            Ok(Value::Null) => None,
            Ok(other) => return Err(format!("args must be an object, got {other}")),
            Err(e) => return Err(format!("args: {e}")),
        },
    };
    let (name, cat) = (string("name", raw.name)?, string("cat", raw.cat)?);
    let ids = (id("pid", raw.pid)?, id("tid", raw.tid)?);
    let ts = micros("ts", &phase, raw.ts)?;
    let row = if phase == "X" {
        let dur = micros("dur", "X", raw.dur)?;
        if dur < 0.0 {
            return Err(format!("an X event needs a non-negative dur, got {dur}"));
        }
        Row::table(interval(name, cat, "X", ids, (ts, dur), args, extra_json(&raw.extra))?)
    } else {
        let (pid, tid) = ids;
        let extra = fields::members_to_values(raw.extra);
        Row::KernelSpan(SpanEvent { begin: phase == "B", name, cat, pid, tid, ts_us: ts, args, extra })
    };
    Ok(Parsed::Rows { rows: vec![row], skipped: 0 })
}

/// Whether `head`, a file's first bytes, starts a trace document: an object
/// with one of the trace keys among its first keys, or an array whose first
/// element is an object with `ph` and `ts`.
pub fn is_trace_head(head: &[u8]) -> bool {
    let keys = head_object_keys(head);
    // Bedrock's invocation log records have a `schemaVersion` too, beside their `schemaType`.
    if keys.iter().any(|k| DOCUMENT_KEYS.contains(&k.as_str())) && !keys.iter().any(|k| k == "schemaType") {
        return true;
    }
    head_first_element(head)
        .and_then(|e| serde_json::from_slice::<Map<String, Value>>(e).ok())
        .is_some_and(|e| e.contains_key("ph") && e.contains_key("ts"))
}

/// PyTorch profiler (Kineto) / Chrome trace-event JSON.
pub struct KernelTrace;

impl LogFormat for KernelTrace {
    fn name(&self) -> &'static str {
        "kernel_trace"
    }

    fn about(&self) -> &'static str {
        "PyTorch profiler / Chrome trace-event JSON ({\"traceEvents\": [...]}), streamed event by event"
    }

    /// Never from a line: a trace is recognised from the file head.
    fn detect(&self, _line: &Probe<'_>) -> bool {
        false
    }

    fn detect_head(&self, head: &[u8]) -> bool {
        is_trace_head(head)
    }

    fn framing(&self) -> Framing {
        Framing::JsonEventArray { key: "traceEvents" }
    }

    fn parse<'a>(&self, line: &'a [u8], _ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse_event(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(event: &str) -> Result<KernelRow, String> {
        match parse_event(event.as_bytes())? {
            Parsed::Rows { rows, .. } => match rows.last().and_then(Row::as_table_row::<KernelRow>) {
                Some(k) => Ok(k.clone()),
                None => panic!("{rows:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    fn span(event: &str) -> SpanEvent {
        match parse_event(event.as_bytes()) {
            Ok(Parsed::Rows { mut rows, .. }) => match rows.pop() {
                Some(Row::KernelSpan(s)) => s,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn complete_events_with_layer_and_head_from_args_or_name() {
        let k = kernel(r#"{"ph":"X","cat":"kernel","name":"layer_0.attn_head_1","pid":0,"tid":7,"ts":215.0,"dur":10.0,"args":{"flops":1800000}}"#).unwrap();
        assert_eq!((k.layer, k.head, k.flops, k.ts_us, k.dur_us), (Some(0), Some(1), Some(1.8e6), 215.0, 10.0));
        assert_eq!((k.pid.as_deref(), k.tid.as_deref(), k.phase), (Some("0"), Some("7"), "X"));
        let k = kernel(r#"{"ph":"X","name":"flash_fwd_kernel","pid":"p","tid":"stream 7","ts":255,"dur":18,"args":{"layer":"1","head":"1"}}"#).unwrap();
        assert_eq!((k.layer, k.head, k.flops, k.tid.as_deref()), (Some(1), Some(1), None, Some("stream 7")));
        assert_eq!(k.args.as_deref(), Some(r#"{"head":"1","layer":"1"}"#));
        let k = kernel(r#"{"ph":"X","name":"aten::mm","ts":1.5,"dur":0.25}"#).unwrap();
        assert_eq!((k.layer, k.head), (None, None));
    }

    #[test]
    fn keys_no_column_holds_are_kept_in_extra() {
        let k =
            kernel(r#"{"ph":"X","name":"k","ts":1,"dur":2,"tts":7,"cname":"good","id":"0x1","args":{},"token":"t"}"#)
                .unwrap();
        assert_eq!(
            k.extra.as_deref(),
            Some(r#"{"tts":7,"cname":"good","id":"0x1"}"#),
            "the credential-named key never"
        );
        assert_eq!(k.args.as_deref(), Some("{}"));
        assert_eq!(kernel(r#"{"ph":"X","name":"k","ts":1,"dur":2}"#).unwrap().extra, None);
        let b = span(r#"{"ph":"B","name":"step","pid":0,"tid":1,"ts":10,"tts":3,"sf":4}"#);
        let e = span(r#"{"ph":"E","pid":0,"tid":1,"ts":12,"tts":5}"#);
        assert_eq!(pair(b, e).unwrap().extra.as_deref(), Some(r#"{"sf":4,"tts":5}"#), "the end's keys win");
        let (b, e) = (span(r#"{"ph":"B","ts":10}"#), span(r#"{"ph":"E","ts":12}"#));
        assert_eq!(pair(b, e).unwrap().extra, None);
    }

    #[test]
    fn malformed_events_are_errors() {
        assert!(kernel(r#"{"ph":"X","name":"layer_0.attn_head_1","dur":"n/a"}"#)
            .unwrap_err()
            .contains("numeric ts (missing)"));
        assert!(kernel(r#"{"ph":"X","ts":1,"dur":"n/a"}"#).unwrap_err().contains("numeric dur, got \"n/a\""));
        assert!(kernel(r#"{"ph":"X","ts":1,"dur":-2}"#).unwrap_err().contains("non-negative dur"));
        assert!(kernel(r#"{"ph":"X","ts":1,"dur":2,"args":{"layer":1.5,"head":0}}"#)
            .unwrap_err()
            .contains("args.layer"));
        assert!(kernel(r#"{"ph":"X","ts":1,"dur":2,"args":{"flops":"many"}}"#).unwrap_err().contains("args.flops"));
        assert!(parse_event(br#"{"name":"x"}"#).unwrap_err().contains("phase"));
        assert!(parse_event(b"[1]").is_err());
    }

    #[test]
    fn other_phases_are_skipped() {
        for ph in ["M", "i", "I", "C", "s", "t", "f", "b", "n", "e", "P"] {
            let event = format!(r#"{{"ph":"{ph}","name":"x","ts":1}}"#);
            assert!(matches!(parse_event(event.as_bytes()), Ok(Parsed::Skip)), "{ph}");
        }
    }

    #[test]
    fn pairs_merge_args_and_take_the_begin_name() {
        let b = span(
            r#"{"ph":"B","cat":"kernel","name":"layer_0.attn_head_0","pid":0,"tid":8,"ts":300.0,"args":{"flops":2000000,"x":1}}"#,
        );
        let e = span(r#"{"ph":"E","pid":0,"tid":8,"ts":311.5,"args":{"x":2}}"#);
        assert!(b.begin && !e.begin);
        let k = pair(b.clone(), e.clone()).unwrap();
        assert_eq!((k.layer, k.head, k.flops, k.dur_us, k.phase), (Some(0), Some(0), Some(2e6), 11.5, "B"));
        assert_eq!(k.args.as_deref(), Some(r#"{"flops":2000000,"x":2}"#));
        assert!(pair(e, b).unwrap_err().contains("ends before"));
    }

    #[test]
    fn names_give_layer_and_head() {
        assert_eq!(layer_head_from_name("model.layer_12.attn_head_3.fwd"), Ok(Some((12, 3))));
        assert_eq!(layer_head_from_name("layer_x layer_2.attn_head_5"), Ok(Some((2, 5))));
        assert_eq!(layer_head_from_name("layer_2.mlp"), Ok(None));
        assert!(layer_head_from_name("layer_99999999999.attn_head_1").is_err());
    }

    #[test]
    fn trace_heads_are_recognised() {
        assert!(is_trace_head(b"{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": ["));
        assert!(is_trace_head(b"{\"traceEvents\": [{\"ph\":\"X\""));
        assert!(is_trace_head(b"[{\"ph\":\"X\",\"ts\":1,\"dur\":2}, {"));
        assert!(!is_trace_head(b"{\"prompt_tokens\":1,\"completion_tokens\":2}\n{\"traceEvents\":1}"));
        assert!(!is_trace_head(b"[1,2]\n"));
        assert!(!is_trace_head(b"{\n  \"schemaType\": \"ModelInvocationLog\",\n  \"schemaVersion\": \"1.0\""));
        assert!(!is_trace_head(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"));
    }
}
