//! Field-level parsing shared by every input format: timestamps, token counts,
//! and the serde shapes that several formats share (OpenAI-style logprobs).

use std::borrow::Cow;
use std::fmt;

use chrono::{DateTime, NaiveDateTime};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use serde_json::value::RawValue;

use super::secrets;
use crate::record::{RequestRecord, TokenRecord};

/// Token counts above this are "absurd" and rejected: no model has a context
/// window of 100M tokens, so such a value is a logging bug.
pub const MAX_TOKEN_COUNT: f64 = 100_000_000.0;

/// Durations of a request (time to first token, latency) above this, 30
/// days in milliseconds, are rejected: no request waits that long for a
/// model, so such a value is a unit or clock mistake (and the load jobs
/// would spread the request over millions of time windows).
pub const MAX_DURATION_MS: f64 = 30.0 * 86_400_000.0;

/// `ms` if it is at most [`MAX_DURATION_MS`].
fn plausible_ms(field: &str, ms: f64) -> Result<f64, String> {
    if ms > MAX_DURATION_MS {
        // `{}` writes every digit of a float: 1e300 as 301 of them.
        let shown = if ms < 1e15 { ms.to_string() } else { format!("{ms:e}") };
        return Err(format!("{field} = {shown} ms exceeds the plausible maximum of {MAX_DURATION_MS} ms (30 days)"));
    }
    Ok(ms)
}

/// A validated token count: a non-negative integer no larger than [`MAX_TOKEN_COUNT`].
pub fn token_count(field: &str, v: f64) -> Result<i64, String> {
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{field} must be a non-negative integer, got {v}"));
    }
    if v.fract() != 0.0 {
        return Err(format!("{field} must be an integer, got {v}"));
    }
    if v > MAX_TOKEN_COUNT {
        return Err(format!("{field} = {v} exceeds the plausible maximum of {MAX_TOKEN_COUNT}"));
    }
    Ok(v as i64)
}

/// An optional token count (an output cap) read leniently: the count, or
/// `None` with the value as logged when it is no token count (see
/// [`with_invalid`]).
pub fn lenient_token_count(field: &str, v: Option<f64>) -> (Option<i64>, Option<f64>) {
    match v.map(|x| token_count(field, x)) {
        Some(Ok(n)) => (Some(n), None),
        Some(Err(_)) => (None, v),
        None => (None, None),
    }
}

/// `rec` with its optional `field` nulled for the value `raw` that did not
/// fit (none: `rec` as it is): the value kept in `extra.invalid_fields`, and
/// the issue [`issue::INVALID_OPTIONAL_FIELD`], which ingest counts.
pub fn with_invalid<'a>(mut rec: RequestRecord<'a>, field: &str, raw: Option<f64>) -> RequestRecord<'a> {
    let Some(raw) = raw else { return rec };
    let mut extra: serde_json::Map<String, serde_json::Value> =
        rec.extra.as_deref().and_then(|e| serde_json::from_str(e).ok()).unwrap_or_default();
    let value = serde_json::Number::from_f64(raw).map_or(serde_json::Value::Null, serde_json::Value::Number);
    match extra.entry("invalid_fields").or_insert_with(|| serde_json::Value::Object(serde_json::Map::new())) {
        serde_json::Value::Object(m) => {
            m.insert(field.to_string(), value);
        }
        other => *other = serde_json::json!({ field: value }),
    }
    rec.extra = Some(serde_json::Value::Object(extra).to_string());
    if !rec.token_issues.iter().any(|i| i == issue::INVALID_OPTIONAL_FIELD) {
        rec.token_issues.push(issue::INVALID_OPTIONAL_FIELD.to_string());
    }
    rec
}

/// Optional token count: `None` stays `None`.
pub fn opt_token_count(field: &str, v: Option<f64>) -> Result<Option<i64>, String> {
    v.map(|x| token_count(field, x)).transpose()
}

/// A non-negative, finite duration in milliseconds, at most [`MAX_DURATION_MS`].
pub fn duration_ms(field: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !x.is_finite() || x < 0.0 => {
            Err(format!("{field} must be a non-negative number of milliseconds, got {x}"))
        }
        Some(x) => plausible_ms(field, x).map(Some),
        None => Ok(None),
    }
}

/// A non-negative, finite amount of US dollars (a cost the log carries).
pub fn cost_usd(field: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !x.is_finite() || x < 0.0 => Err(format!("{field} must be a non-negative amount of USD, got {x}")),
        other => Ok(other),
    }
}

named_enum! {
    /// The unit of durations logged as bare numbers whose unit the log does
    /// not say (`--time-unit`).
    #[derive(Default)]
    pub enum TimeUnit as "time unit" {
        /// Seconds.
        #[default]
        Seconds = "s",
        /// Milliseconds.
        Milliseconds = "ms",
    }
}

impl TimeUnit {
    /// `v` in this unit, as milliseconds (see [`seconds_to_ms`]).
    pub fn to_ms(self, field: &str, v: Option<f64>) -> Result<Option<f64>, String> {
        match self {
            TimeUnit::Seconds => seconds_to_ms(field, v),
            TimeUnit::Milliseconds => duration_ms(field, v),
        }
    }
}

/// A duration in seconds as milliseconds, rounded to the microsecond so that
/// binary noise does not show (`0.085 s` is 85 ms, not 85.00000000000001).
pub fn seconds_to_ms(field: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !x.is_finite() || x < 0.0 => {
            Err(format!("{field} must be a non-negative number of seconds, got {x}"))
        }
        Some(x) => plausible_ms(field, (x * 1e6).round() / 1e3).map(Some),
        None => Ok(None),
    }
}

/// Epoch seconds (a float, as Python's `time.time()` logs them) as
/// microseconds, rounded: times are rounded before they are subtracted, so
/// `1717243201.8 - 1717243200.0` is 1800 ms, not 1799.99995.
pub fn epoch_seconds_to_micros(field: &str, secs: f64) -> Result<i64, String> {
    // Years 1970..=2200 in seconds: anything else is a unit mistake.
    if !(0.0..=7_258_118_400.0).contains(&secs) {
        return Err(format!("{field} = {secs} is not plausible epoch seconds"));
    }
    Ok((secs * 1e6).round() as i64)
}

/// The time from `from` to `to` (microseconds since the epoch) in
/// milliseconds; an error when `to` is before `from` or more than
/// [`MAX_DURATION_MS`] after it.
pub fn elapsed_ms(what: &str, from_micros: i64, to_micros: i64) -> Result<f64, String> {
    // In i128: two far-apart times (a clock or unit mistake) overflow an i64 difference.
    let micros = i128::from(to_micros) - i128::from(from_micros);
    if micros < 0 {
        return Err(format!("{what} is negative: the end is {} ms before the start", -micros as f64 / 1e3));
    }
    plausible_ms(what, micros as f64 / 1e3)
}

/// Deserialises a number given as a JSON number or as a decimal string
/// (ClickHouse quotes 64-bit integers, OTLP/JSON writes them as strings);
/// `null` and an absent field are `None`. Use with
/// `#[serde(default, deserialize_with = "fields::opt_number")]`.
pub fn opt_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_option(QuotedNumber::<f64>(std::marker::PhantomData))
}

/// [`opt_number`] for integers that an f64 cannot hold exactly (nanosecond
/// timestamps): read as `i64`.
pub fn opt_integer<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_option(QuotedNumber::<i64>(std::marker::PhantomData))
}

/// A number type [`QuotedNumber`] reads.
trait FromLogged: Sized + std::str::FromStr {
    const WHAT: &'static str;
    fn from_u64(v: u64) -> Option<Self>;
    fn from_i64(v: i64) -> Option<Self>;
    fn from_f64(v: f64) -> Option<Self>;
}

impl FromLogged for f64 {
    const WHAT: &'static str = "a number or a decimal string";
    fn from_u64(v: u64) -> Option<Self> {
        Some(v as f64)
    }
    fn from_i64(v: i64) -> Option<Self> {
        Some(v as f64)
    }
    fn from_f64(v: f64) -> Option<Self> {
        Some(v)
    }
}

impl FromLogged for i64 {
    const WHAT: &'static str = "an integer or a decimal string";
    fn from_u64(v: u64) -> Option<Self> {
        i64::try_from(v).ok()
    }
    fn from_i64(v: i64) -> Option<Self> {
        Some(v)
    }
    fn from_f64(v: f64) -> Option<Self> {
        (v.fract() == 0.0 && v.abs() < 9.0e15).then_some(v as i64)
    }
}

/// A number, or a string holding one; null is `None`.
struct QuotedNumber<T>(std::marker::PhantomData<T>);

impl<'de, T: FromLogged> Visitor<'de> for QuotedNumber<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::WHAT)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        T::from_u64(v).map(Some).ok_or_else(|| E::custom(format!("{v} is out of range")))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        T::from_i64(v).map(Some).ok_or_else(|| E::custom(format!("{v} is out of range")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        T::from_f64(v).map(Some).ok_or_else(|| E::custom(format!("{v} is not {}", T::WHAT)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        v.trim().parse::<T>().map(Some).map_err(|_| E::custom(format!("not a number: {v:?}")))
    }
}

/// Deserializes one JSON document (a log line, a record, a response body).
/// The text's UTF-8 is checked once, with SIMD, and the JSON then read as a
/// `str`; serde_json's byte-slice reader instead checks each string on its
/// own, keys included, which was 5 % of an ingest's instructions. Bytes that
/// are not UTF-8 go to the byte-slice reader, so what it accepts (invalid
/// bytes inside a skipped value) and the error it gives are unchanged.
pub fn from_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// A JSON string borrowed from the line when it holds no escapes (the common
/// case) and unescaped into an owned copy otherwise. serde's own
/// `Cow<str>` always copies, which for a log line means one allocation and
/// one copy per key and per text value. Derived structs borrow with
/// `#[serde(borrow)]`; this is for hand-written visitors and
/// `serde_json::from_str`.
#[derive(Debug, Clone, PartialEq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// The next value of a hand-written map visitor as an optional [`Text`]
/// (`null` is `None`).
pub fn next_text<'de, A: de::MapAccess<'de>>(map: &mut A) -> Result<Option<Cow<'de, str>>, A::Error> {
    Ok(map.next_value::<Option<Text<'de>>>()?.map(|t| t.0))
}

/// The members of a JSON object, each key with its value's raw text, in
/// their order; only the keys are decoded. What `extra` is made of.
pub struct Members<'a>(pub Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(Text(key)) = map.next_key()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// One member of a record kept in `extra`: its key (with the prefix of the
/// object it came from) and its value's JSON text, borrowed from the line
/// unless credentials had to be taken out of it.
pub type Member<'a> = (Cow<'a, str>, Cow<'a, RawValue>);

/// The members of the JSON object `raw` whose keys are not in `read`, each
/// key written `{prefix}{key}` (`usage.` for the members of a `usage`
/// object); none when `raw` is not an object. The one definition of what a
/// record keeps in `extra`: keys naming credentials
/// ([`secrets::is_credential_key`]) are left out, and inside a kept object
/// or array the string values of such keys become `REDACTED`.
pub fn unread_members<'a>(raw: &'a str, read: &[&str], prefix: &str) -> Vec<Member<'a>> {
    unread_nested(raw, read, &[], prefix)
}

/// [`unread_members`] of `raw`, the objects `nested` names taken one level
/// down (whether or not `read` names them): each such object's members less
/// the keys read of it, written `{prefix}{object}.{key}` (an object logged
/// as JSON text in a string too; any other value is kept as logged unless
/// `read` names it).
pub fn unread_nested<'a>(raw: &'a str, read: &[&str], nested: &[(&str, &[&str])], prefix: &str) -> Vec<Member<'a>> {
    let Ok(Members(members)) = serde_json::from_str::<Members<'a>>(raw) else { return Vec::new() };
    let mut out = Vec::new();
    for (key, value) in members {
        if secrets::is_credential_key(&key) {
            continue;
        }
        match nested.iter().find(|(name, _)| *name == key.as_ref()) {
            Some((name, inner)) if value.get().starts_with('{') => {
                out.extend(unread_nested(value.get(), inner, &[], &format!("{prefix}{name}.")));
            }
            // An object exported as JSON text in a string is that object.
            Some((name, inner)) if value.get().starts_with("\"{") => {
                let Ok(object) = serde_json::from_str::<String>(value.get()) else { continue };
                let members = unread_nested(&object, inner, &[], &format!("{prefix}{name}."));
                out.extend(members.into_iter().map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned()))));
            }
            _ if read.contains(&key.as_ref()) => {}
            _ => {
                let key = if prefix.is_empty() { key } else { Cow::Owned(format!("{prefix}{key}")) };
                out.extend(kept_member(key, value));
            }
        }
    }
    out
}

/// A member of a record as `extra` keeps it: none when its key names
/// credentials; else the value, the string values of credential keys inside
/// it replaced by `REDACTED` (none if that could not be done). For formats
/// that collect unknown keys themselves (canonical, profile).
pub fn kept_member<'a>(key: Cow<'a, str>, v: &'a RawValue) -> Option<Member<'a>> {
    if secrets::is_credential_key(&key) {
        return None;
    }
    // Objects and arrays, and strings that hold one (a column exported as JSON text).
    let text = v.get();
    if !(text.starts_with(['{', '[']) || text.starts_with("\"{") || text.starts_with("\"[")) {
        return Some((key, Cow::Borrowed(v)));
    }
    let value = match secrets::scrub_json(v.get().as_bytes(), secrets::is_credential_key) {
        Cow::Borrowed(_) => Cow::Borrowed(v),
        Cow::Owned(bytes) => Cow::Owned(RawValue::from_string(String::from_utf8(bytes).ok()?).ok()?),
    };
    Some((key, value))
}

/// The JSON array of the values `items` (each one's JSON text), for the
/// parts of a logged array that `extra` keeps; `None` when there is none.
pub fn json_array(items: &[&str]) -> Option<Box<RawValue>> {
    (!items.is_empty()).then(|| RawValue::from_string(format!("[{}]", items.join(","))).ok()).flatten()
}

/// Whether a logged value says nothing: `null`, `""`, `[]` or `{}`.
pub fn is_empty_value(v: &RawValue) -> bool {
    // Also an empty array or object exported as JSON text in a string.
    matches!(v.get(), "null" | "\"\"" | "[]" | "{}" | "\"[]\"" | "\"{}\"")
}

/// [`unread_members`] of a record as JSON values, for an `extra` built as a
/// map (with values of the format's own added); none when `raw` is not UTF-8.
pub fn unread_values(raw: &[u8], read: &[&str]) -> serde_json::Map<String, serde_json::Value> {
    let Ok(text) = simdutf8::basic::from_utf8(raw) else { return serde_json::Map::new() };
    members_to_values(unread_members(text, read, ""))
}

/// Kept members as a map of JSON values (a later key replaces an earlier one).
pub fn members_to_values(members: Vec<Member<'_>>) -> serde_json::Map<String, serde_json::Value> {
    members
        .into_iter()
        .map(|(k, v)| (k.into_owned(), serde_json::from_str(v.get()).unwrap_or(serde_json::Value::Null)))
        .collect()
}

/// A timestamp as logged: epoch milliseconds or a date-time string.
#[derive(Debug, Clone, PartialEq)]
pub enum TsValue<'a> {
    /// Milliseconds since the Unix epoch.
    EpochMillis(f64),
    /// RFC 3339, or a zone-less date-time taken as UTC.
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for TsValue<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = TsValue<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("epoch milliseconds or a date-time string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(TsValue::EpochMillis(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(TsValue::EpochMillis(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(TsValue::EpochMillis(v))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(TsValue::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TsValue::Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl TsValue<'_> {
    /// Microseconds since the Unix epoch, UTC.
    pub fn to_micros(&self) -> Result<i64, String> {
        match self {
            TsValue::EpochMillis(ms) => millis_to_micros(*ms),
            TsValue::Text(s) => parse_datetime_micros(s),
        }
    }
}

fn millis_to_micros(ms: f64) -> Result<i64, String> {
    // Years 1970..=2200 in milliseconds: anything else is a unit mistake.
    if !(0.0..=7_258_118_400_000.0).contains(&ms) {
        return Err(format!("timestamp {ms} is not plausible epoch milliseconds"));
    }
    Ok((ms * 1000.0).round() as i64)
}

/// A time logged as epoch seconds (a number, or a decimal string) or as a
/// date-time text (RFC 3339, or zone-less taken as UTC: `2025-01-24
/// 09:20:46.847371`, what Python's `str(datetime)` writes). LiteLLM's
/// payloads carry either, depending on the logger that serialised them. Use
/// with `#[serde(default, deserialize_with = "fields::opt_epoch_seconds_or_text")]`.
pub fn opt_epoch_seconds_or_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SecondsOrText>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<SecondsOrText>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("epoch seconds or a date-time")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(SecondsOrText::Seconds(v as f64)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(SecondsOrText::Seconds(v as f64)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(SecondsOrText::Seconds(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(match v.trim().parse::<f64>() {
                Ok(secs) => SecondsOrText::Seconds(secs),
                Err(_) => SecondsOrText::Text(v.to_string()),
            }))
        }
    }
    d.deserialize_option(V)
}

/// A time as [`opt_epoch_seconds_or_text`] read it.
#[derive(Debug, Clone, PartialEq)]
pub enum SecondsOrText {
    /// Epoch seconds.
    Seconds(f64),
    /// A date-time text.
    Text(String),
}

impl SecondsOrText {
    /// Microseconds since the epoch, UTC (`field` names the value in errors).
    pub fn to_micros(&self, field: &str) -> Result<i64, String> {
        match self {
            SecondsOrText::Seconds(secs) => epoch_seconds_to_micros(field, *secs),
            SecondsOrText::Text(text) => parse_datetime_micros(text).map_err(|e| format!("{field}: {e}")),
        }
    }
}

/// Parses RFC 3339 (`2024-05-01T12:00:00.5+02:00`), a zone-less date-time
/// taken as UTC (`2023-11-16 18:17:03.9799600`, any fraction length), or
/// digits meaning epoch milliseconds.
pub fn parse_datetime_micros(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<f64>().map_err(|e| e.to_string()).and_then(millis_to_micros);
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Ok(dt.timestamp_micros());
    }
    for fmt in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, fmt) {
            return Ok(dt.and_utc().timestamp_micros());
        }
    }
    Err(format!("unparseable timestamp {s:?}"))
}

/// A string value, or any other JSON value (chat messages, content blocks)
/// kept as its JSON text; `null` is `None`.
pub fn text_or_json<'a>(raw: &'a RawValue) -> Result<Option<Cow<'a, str>>, serde_json::Error> {
    let text = raw.get();
    if text == "null" {
        Ok(None)
    } else if text.starts_with('"') {
        let s: Text<'a> = serde_json::from_str(text)?;
        Ok(Some(s.0))
    } else if text.contains('\n') {
        // From a pretty-printed document: kept compact, keys in their order.
        Ok(Some(Cow::Owned(compact_json(text))))
    } else {
        Ok(Some(Cow::Borrowed(text)))
    }
}

/// JSON text without the whitespace between its tokens (strings untouched,
/// keys kept in their order, unlike a round trip through `Value`).
pub fn compact_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

/// The keys that name an experiment arm, in order of precedence: the
/// first one logged with a string (or number) value is the request's `variant`.
pub const VARIANT_KEYS: [&str; 3] = ["variant", "arm", "experiment"];

/// An experiment-arm label: a string, or a number written as it was logged.
/// Any other value (an object such as `{"id": ..., "arm": ...}`, an array,
/// `null`, an empty string) names no arm; the formats that keep unknown keys
/// keep it in `extra`.
pub fn arm_label(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'"') => serde_json::from_str::<Text<'_>>(text).ok().map(|t| t.0).filter(|s| !s.trim().is_empty()),
        Some(b'-' | b'0'..=b'9') => Some(Cow::Borrowed(text)),
        _ => None,
    }
}

/// Codes of the `token_issues` column (docs/metrics.md).
pub mod issue {
    /// An optional field held a value that does not fit (a `max_tokens` of
    /// -1, meaning no cap): the field is null, the value kept in
    /// `extra.invalid_fields`, and the request is not rejected.
    pub const INVALID_OPTIONAL_FIELD: &str = "invalid_optional_field";
    /// The line held `NaN`/`Infinity`, read as null.
    pub const NON_FINITE_NUMBER: &str = "non_finite_number";
    /// The per-token arrays (logprobs, token_times_ms, decode_latency_ms) differ in length.
    pub const ARRAY_LENGTH_MISMATCH: &str = "array_length_mismatch";
}

/// True when a line holds a bare `NaN` or `Infinity` token somewhere (cheap pre-check).
pub fn has_non_finite_literal(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"NaN").is_some() || memchr::memmem::find(line, b"Infinity").is_some()
}

/// Replaces the bare tokens `NaN`, `Infinity`, `-Infinity` outside strings with `null`.
pub fn null_non_finite_literals(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let (mut i, mut in_str, mut escaped) = (0, false, false);
    while i < line.len() {
        let b = line[i];
        if in_str {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        let rest = &line[i..];
        if let Some(len) =
            [&b"-Infinity"[..], b"Infinity", b"NaN"].iter().find(|t| rest.starts_with(t)).map(|t| t.len())
        {
            out.extend_from_slice(b"null");
            i += len;
            continue;
        }
        in_str = b == b'"';
        out.push(b);
        i += 1;
    }
    out
}

/// One alternative in an OpenAI-style `top_logprobs` list.
#[derive(Debug, Deserialize)]
pub struct TopLogprob<'a> {
    /// Token text.
    #[serde(borrow)]
    pub token: Cow<'a, str>,
    /// Natural-log probability.
    pub logprob: Option<f64>,
}

/// One entry of an OpenAI-style per-token `logprobs` list
/// (`choices[].logprobs.content[]`, and the canonical log's `logprobs`).
#[derive(Debug, Deserialize)]
pub struct LogprobEntry<'a> {
    /// Token text.
    #[serde(borrow, default)]
    pub token: Option<Cow<'a, str>>,
    /// Natural-log probability of the token.
    #[serde(default)]
    pub logprob: Option<f64>,
    /// UTF-8 bytes of the token.
    #[serde(default)]
    pub bytes: Option<Vec<u8>>,
    /// Most likely alternatives.
    #[serde(borrow, default)]
    pub top_logprobs: Option<Vec<TopLogprob<'a>>>,
}

impl<'a> LogprobEntry<'a> {
    /// Into a token row (timing filled in elsewhere).
    pub fn into_token(self) -> TokenRecord<'a> {
        TokenRecord {
            token: self.token,
            token_bytes: self.bytes,
            logprob: self.logprob,
            top_logprobs: self
                .top_logprobs
                .map(|v| v.into_iter().map(|t| (t.token, t.logprob.unwrap_or(f64::NEG_INFINITY))).collect()),
            ..Default::default()
        }
    }
}

/// Merges per-token logprobs with emission times and inter-token latencies
/// (any of them may be absent) into token rows, by position.
/// Arrays of different lengths are padded with nulls and reported in `issues`.
pub fn merge_token_data<'a>(
    logprobs: Option<Vec<LogprobEntry<'a>>>,
    token_times_ms: Option<Vec<Option<f64>>>,
    decode_latency_ms: Option<Vec<Option<f64>>>,
    issues: &mut Vec<String>,
) -> Vec<TokenRecord<'a>> {
    let lens: Vec<usize> = [
        logprobs.as_ref().map(Vec::len),
        token_times_ms.as_ref().map(Vec::len),
        decode_latency_ms.as_ref().map(Vec::len),
    ]
    .into_iter()
    .flatten()
    .collect();
    if lens.windows(2).any(|w| w[0] != w[1]) {
        issues.push(issue::ARRAY_LENGTH_MISMATCH.to_string());
    }
    let mut tokens: Vec<TokenRecord<'a>> =
        logprobs.unwrap_or_default().into_iter().map(LogprobEntry::into_token).collect();
    let times = token_times_ms.unwrap_or_default();
    let itls = decode_latency_ms.unwrap_or_default();
    let n = tokens.len().max(times.len()).max(itls.len());
    tokens.resize_with(n, TokenRecord::default);
    for (i, tok) in tokens.iter_mut().enumerate() {
        tok.emitted_ms = times.get(i).copied().flatten();
        tok.itl_ms = match itls.get(i) {
            Some(&v) => v,
            None if i > 0 => match (times.get(i).copied().flatten(), times.get(i - 1).copied().flatten()) {
                (Some(t), Some(p)) => Some(t - p),
                _ => None,
            },
            None => None,
        };
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `from_json` reads what serde_json's byte reader reads, borrows the same
    /// way, and fails where and as it fails.
    #[test]
    fn from_json_agrees_with_the_byte_reader() {
        #[derive(Deserialize, Debug, PartialEq)]
        struct Line<'a> {
            #[serde(borrow)]
            model: Text<'a>,
            n: Option<i64>,
        }
        fn agree(bytes: &[u8]) -> Result<Line<'_>, String> {
            let ours = from_json::<Line<'_>>(bytes).map_err(|e| e.to_string());
            let theirs = serde_json::from_slice::<Line<'_>>(bytes).map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(bytes));
            ours
        }
        let ok = agree(br#"{"model":"llama \u00e9","n":3,"skip":"x"}"#).unwrap();
        assert_eq!(ok.model.0, "llama \u{e9}");
        let borrowed = agree("{\"model\":\"caf\u{e9}\"}".as_bytes()).unwrap();
        assert!(matches!(borrowed.model.0, Cow::Borrowed("caf\u{e9}")));
        // Not UTF-8 inside a kept string, outside any string, and inside a
        // value nobody reads (which the byte reader skips without checking).
        assert!(agree(b"{\"model\":\"a\xff\"}").is_err());
        assert!(agree(b"{\"model\":\"a\"}\xff").is_err());
        assert_eq!(agree(b"{\"model\":\"a\",\"skip\":\"\xff\"}").unwrap().model.0, "a");
        assert!(agree(b"{\"model\":").is_err());
    }

    #[test]
    fn unread_members_keep_what_no_column_holds_and_never_credentials() {
        let kept = |raw: &str, read: &[&str], nested: &[(&str, &[&str])]| {
            unread_nested(raw, read, nested, "x.")
                .into_iter()
                .map(|(k, v)| format!("{k}={}", v.get()))
                .collect::<Vec<_>>()
        };
        let raw = r#"{"id":"r","api_key":"sk-1","headers":{"a":"b"},"meta":{"user_api_key_hash":"88dc","user_api_key_alias":"ci","n":1},"usage":{"in":3,"extra":4,"x-api-key":"k"},"tools":[{"token":"t"}],"usage_n":null}"#;
        assert_eq!(
            kept(raw, &["id", "usage"], &[("usage", &["in"])]),
            [
                r#"x.meta={"user_api_key_hash":"REDACTED","user_api_key_alias":"ci","n":1}"#,
                "x.usage.extra=4",
                r#"x.tools=[{"token":"REDACTED"}]"#,
                "x.usage_n=null",
            ]
        );
        // A nested name whose value is no object is kept as logged, unless read;
        // an object in a string is that object, and credentials in strings never pass.
        assert_eq!(kept(r#"{"usage":7}"#, &[], &[("usage", &[])]), ["x.usage=7"]);
        assert_eq!(
            kept(r#"{"meta":"{\"api_key\": \"k\", \"in\": 1, \"n\": 2}"}"#, &[], &[("meta", &["in"])]),
            ["x.meta.n=2"]
        );
        assert_eq!(
            kept(r#"{"meta":"{\"api_key\": \"k\", \"n\": 2}"}"#, &[], &[]),
            [r#"x.meta="{\"api_key\": \"REDACTED\", \"n\": 2}""#]
        );
        assert!(kept(r#"{"usage":7}"#, &["usage"], &[("usage", &[])]).is_empty());
        assert!(kept("[1]", &[], &[]).is_empty());
        let empty = |v: &str| is_empty_value(&serde_json::from_str::<Box<RawValue>>(v).unwrap());
        assert!(empty("null") && empty(r#""""#) && empty("[]") && empty("{}"));
        assert!(!empty("0") && !empty("false") && !empty(r#"" ""#) && !empty("[null]"));
    }

    #[test]
    fn token_counts_reject_bad_values() {
        assert_eq!(token_count("p", 12.0), Ok(12));
        assert!(token_count("p", -1.0).is_err());
        assert!(token_count("p", 1.5).is_err());
        assert!(token_count("p", 1e12).is_err());
    }

    #[test]
    fn pretty_printed_json_text_is_kept_compact_in_order() {
        let raw: Box<RawValue> =
            serde_json::from_str("[\n  {\"role\": \"user\",\n   \"content\": \"a \\\" b \\n c\"}\n]").unwrap();
        assert_eq!(text_or_json(&raw).unwrap().as_deref(), Some(r#"[{"role":"user","content":"a \" b \n c"}]"#));
        assert_eq!(compact_json("{ \"z\" : 1 ,\n \"a\": [ ] }"), r#"{"z":1,"a":[]}"#);
    }

    #[test]
    fn epoch_seconds_date_times_and_iso_8601_are_all_times() {
        #[derive(Deserialize)]
        struct T {
            #[serde(default, deserialize_with = "opt_epoch_seconds_or_text")]
            t: Option<SecondsOrText>,
        }
        let micros = |json: &str| {
            let t: T = serde_json::from_str(json).map_err(|e| e.to_string())?;
            t.t.map(|t| t.to_micros("startTime")).transpose()
        };
        let want = Ok(Some(1_737_710_446_847_371)); // 2025-01-24T09:20:46.847371Z
        assert_eq!(micros(r#"{"t": 1737710446.847371}"#), want);
        assert_eq!(micros(r#"{"t": "1737710446.847371"}"#), want);
        assert_eq!(micros(r#"{"t": "2025-01-24 09:20:46.847371"}"#), want);
        assert_eq!(micros(r#"{"t": "2025-01-24T09:20:46.847371Z"}"#), want);
        assert_eq!(micros(r#"{"t": "2025-01-24T10:20:46.847371+01:00"}"#), want);
        assert_eq!(micros(r#"{"t": null}"#), Ok(None));
        assert_eq!(micros(r#"{}"#), Ok(None));
        assert!(micros(r#"{"t": "yesterday"}"#).unwrap_err().contains("startTime"));
        assert!(micros(r#"{"t": 1737710446847.0}"#).unwrap_err().contains("epoch seconds"));
    }

    #[test]
    fn timestamps_in_every_accepted_form() {
        let want = 1_700_158_623_979_960; // 2023-11-16T18:17:03.979960Z
        assert_eq!(parse_datetime_micros("2023-11-16 18:17:03.9799600"), Ok(want));
        assert_eq!(parse_datetime_micros("2023-11-16T18:17:03.97996Z"), Ok(want));
        assert_eq!(parse_datetime_micros("2023-11-16T19:17:03.97996+01:00"), Ok(want));
        assert_eq!(TsValue::EpochMillis(1_700_158_623_979.96).to_micros(), Ok(want));
        assert_eq!(parse_datetime_micros("1700158623979"), Ok(1_700_158_623_979_000));
        assert!(parse_datetime_micros("yesterday").is_err());
        assert!(TsValue::EpochMillis(-5.0).to_micros().is_err());
    }

    #[test]
    fn token_data_merges_by_position() {
        let mut issues = Vec::new();
        let t = merge_token_data(None, Some(vec![Some(100.0), Some(130.0), Some(170.0)]), None, &mut issues);
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].itl_ms, None);
        assert_eq!(t[1].itl_ms, Some(30.0));
        assert_eq!(t[2].itl_ms, Some(40.0));
        let t = merge_token_data(None, None, Some(vec![Some(5.0), Some(6.0)]), &mut issues);
        assert_eq!((t[0].itl_ms, t[1].itl_ms, t[1].emitted_ms), (Some(5.0), Some(6.0), None));
        assert!(issues.is_empty());
        merge_token_data(None, Some(vec![Some(1.0)]), Some(vec![Some(1.0), Some(2.0)]), &mut issues);
        assert_eq!(issues, vec!["array_length_mismatch"]);
    }

    #[test]
    fn seconds_and_epoch_seconds_round_to_the_microsecond() {
        assert_eq!(seconds_to_ms("t", Some(0.085)), Ok(Some(85.0)));
        assert_eq!(seconds_to_ms("t", Some(4.31)), Ok(Some(4310.0)));
        assert!(seconds_to_ms("t", Some(-1.0)).is_err());
        assert_eq!(TimeUnit::Milliseconds.to_ms("t", Some(2500.0)), Ok(Some(2500.0)));
        assert_eq!(TimeUnit::Seconds.to_ms("t", Some(2.5)), Ok(Some(2500.0)));
        let (a, b) =
            (epoch_seconds_to_micros("s", 1717243200.0).unwrap(), epoch_seconds_to_micros("e", 1717243201.8).unwrap());
        assert_eq!((a, b), (1_717_243_200_000_000, 1_717_243_201_800_000));
        assert_eq!(elapsed_ms("latency", a, b), Ok(1800.0));
        assert!(elapsed_ms("latency", b, a).unwrap_err().contains("negative"));
        assert!(epoch_seconds_to_micros("s", 1717243200000.0).is_err());
    }

    #[test]
    fn durations_over_thirty_days_are_rejected() {
        let day_ms = 86_400_000.0;
        assert_eq!(duration_ms("latency_ms", Some(30.0 * day_ms)), Ok(Some(30.0 * day_ms)));
        let e = duration_ms("latency_ms", Some(1e300)).unwrap_err();
        assert!(e.contains("latency_ms") && e.contains("30 days"), "{e}");
        assert!(duration_ms("ttft_ms", Some(30.0 * day_ms + 1.0)).is_err());
        assert_eq!(seconds_to_ms("t", Some(30.0 * 86_400.0)), Ok(Some(30.0 * day_ms)));
        assert!(seconds_to_ms("t", Some(30.0 * 86_400.0 + 0.001)).is_err());
        let start = 1_717_243_200_000_000;
        assert_eq!(elapsed_ms("latency", start, start + 30 * 86_400_000_000), Ok(30.0 * day_ms));
        assert!(elapsed_ms("latency", start, start + 30 * 86_400_000_000 + 1).unwrap_err().contains("latency"));
        assert!(elapsed_ms("latency", i64::MIN, i64::MAX).unwrap_err().contains("plausible"));
        assert!(elapsed_ms("latency", i64::MAX, i64::MIN).unwrap_err().contains("negative"));
    }

    #[test]
    fn numbers_may_be_quoted() {
        #[derive(Deserialize)]
        struct N {
            #[serde(default, deserialize_with = "opt_number")]
            n: Option<f64>,
        }
        let n = |s: &str| serde_json::from_str::<N>(s).map(|v| v.n).map_err(|e| e.to_string());
        assert_eq!(n(r#"{"n":"476"}"#), Ok(Some(476.0)));
        assert_eq!(n(r#"{"n":12}"#), Ok(Some(12.0)));
        assert_eq!(n(r#"{"n":null}"#), Ok(None));
        assert_eq!(n(r#"{}"#), Ok(None));
        assert!(n(r#"{"n":"ten"}"#).unwrap_err().contains("not a number"));
        #[derive(Deserialize)]
        struct I {
            #[serde(default, deserialize_with = "opt_integer")]
            i: Option<i64>,
        }
        let i = |s: &str| serde_json::from_str::<I>(s).map(|v| v.i).map_err(|e| e.to_string());
        // Nanoseconds since the epoch, exact (an f64 would round the last digits).
        assert_eq!(i(r#"{"i":"1717243200010000001"}"#), Ok(Some(1_717_243_200_010_000_001)));
        assert_eq!(i(r#"{"i":1717243200010000001}"#), Ok(Some(1_717_243_200_010_000_001)));
        assert!(i(r#"{"i":1.5}"#).is_err());
    }

    #[test]
    fn arm_labels_are_strings_or_numbers() {
        let label = |json: &str| {
            let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
            arm_label(&raw).map(|c| c.into_owned())
        };
        assert_eq!(label(r#""B""#).as_deref(), Some("B"));
        assert_eq!(label(r#""tre\u0061tment""#).as_deref(), Some("treatment"));
        assert_eq!(label("2").as_deref(), Some("2"));
        assert_eq!(label(r#"{"arm":"B"}"#), None);
        assert_eq!(label("\"\""), None);
        assert_eq!(label("null"), None);
    }

    #[test]
    fn non_finite_literals_become_null_outside_strings() {
        let line = br#"{"a":NaN,"b":[-Infinity,Infinity],"c":"NaN \" Infinity","d":1}"#;
        assert!(has_non_finite_literal(line));
        let fixed = null_non_finite_literals(line);
        assert_eq!(std::str::from_utf8(&fixed).unwrap(), r#"{"a":null,"b":[null,null],"c":"NaN \" Infinity","d":1}"#);
    }
}
