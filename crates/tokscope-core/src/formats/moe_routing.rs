//! MoE router logs (tokscope's own layout): one record per layer x expert
//! (optionally per request) with the token assignments the router sent
//! there. JSON lines with the keys below, or CSV whose header names the
//! columns in any order:
//!
//! `request_id` (optional), `layer`, `expert_id`, `tokens` (required),
//! `k` (experts per token) and `num_experts` (optional).
//!
//! Each record is checked on its own: integers, `layer`, `expert_id`,
//! `tokens` >= 0, `k`, `num_experts` >= 1, `expert_id < num_experts` and
//! `k <= num_experts` when logged. The `moe_load` job sums records per layer
//! and expert and takes `k` and `num_experts` from the layer's records.

use serde_json::{Map, Value};

use super::csv::CsvHeader;
use super::{fields, LineContext, LogFormat, Parsed, Probe, Row};
use crate::catalog::moe_routing::MoeRoutingRow;

/// The columns, in the order the CSV sample and the docs list them.
pub const COLUMNS: [&str; 6] = ["request_id", "layer", "expert_id", "tokens", "k", "num_experts"];
const REQUIRED: [&str; 3] = ["layer", "expert_id", "tokens"];

/// The file's header when `line` is a router-log CSV header: every
/// required column named, every name one of [`COLUMNS`], none twice.
pub fn moe_header(line: &[u8]) -> Option<CsvHeader> {
    if line.trim_ascii_start().first().is_some_and(|b| matches!(b, b'{' | b'[')) {
        return None;
    }
    let header = CsvHeader::parse(line).ok()?;
    let columns = header.columns();
    let known = columns.iter().all(|c| COLUMNS.contains(&c.as_str()));
    let unique = columns.iter().enumerate().all(|(i, c)| !columns[..i].contains(c));
    (known && unique && REQUIRED.iter().all(|r| header.has(r))).then_some(header)
}

/// An integer field: a JSON integer (or a number with no fraction), or a CSV
/// field of digits; `None` when absent or empty.
fn int_value(field: &str, value: Option<&Value>) -> Result<Option<i64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Some(i)),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
            _ => Err(format!("{field} must be an integer, got {n}")),
        },
        Some(other) => Err(format!("{field} must be an integer, got {other}")),
    }
}

fn int_text(field: &str, text: &str) -> Result<Option<i64>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>().map(Some).map_err(|_| format!("{field} must be an integer, got {text:?}"))
}

/// The checked record from its fields.
fn record(
    request_id: Option<String>,
    get: impl Fn(&str) -> Result<Option<i64>, String>,
) -> Result<MoeRoutingRow, String> {
    let required = |field: &str| get(field)?.ok_or_else(|| format!("missing required field {field}"));
    let small = |field: &str, v: i64, min: i64| {
        if v < min {
            return Err(format!("{field} must be >= {min}, got {v}"));
        }
        i32::try_from(v).map_err(|_| format!("{field} {v} is out of range"))
    };
    let layer = small("layer", required("layer")?, 0)?;
    let expert_id = small("expert_id", required("expert_id")?, 0)?;
    let tokens = required("tokens")?;
    if tokens < 0 {
        return Err(format!("tokens must be >= 0, got {tokens}"));
    }
    let k = get("k")?.map(|v| small("k", v, 1)).transpose()?;
    let num_experts = get("num_experts")?.map(|v| small("num_experts", v, 1)).transpose()?;
    if let Some(n) = num_experts {
        if expert_id >= n {
            return Err(format!("expert_id {expert_id} is not below num_experts {n}"));
        }
        if let Some(k) = k.filter(|k| *k > n) {
            return Err(format!("k {k} exceeds num_experts {n}"));
        }
    }
    Ok(MoeRoutingRow { request_id: request_id.filter(|id| !id.is_empty()), layer, expert_id, tokens, k, num_experts })
}

fn parse_json(line: &[u8]) -> Result<MoeRoutingRow, String> {
    let obj: Map<String, Value> = fields::from_json(line).map_err(|e| format!("invalid MoE routing JSON line: {e}"))?;
    let request_id = match obj.get("request_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => return Err(format!("request_id must be a string, got {other}")),
    };
    record(request_id, |field| int_value(field, obj.get(field)))
}

fn parse_csv(line: &[u8], header: Option<&CsvHeader>) -> Result<MoeRoutingRow, String> {
    let header = header
        .ok_or_else(|| format!("a MoE routing CSV starts with a header naming its columns ({})", COLUMNS.join(",")))?;
    let row = header.row(line)?;
    let value = |name: &str| row.get(name).map(str::trim);
    record(value("request_id").map(str::to_string), |field| int_text(field, value(field).unwrap_or("")))
}

/// Parses one line: a JSON object, the CSV header (skipped) or a CSV row
/// read with the file's header.
pub fn parse(line: &[u8], ctx: &LineContext<'_>) -> Result<Parsed<'static>, String> {
    let row = if line.trim_ascii_start().starts_with(b"{") {
        parse_json(line)?
    } else if ctx.header.is_some_and(|h| h.is_header_line(line)) || (ctx.header.is_none() && moe_header(line).is_some())
    {
        return Ok(Parsed::Skip);
    } else {
        parse_csv(line, ctx.header)?
    };
    Ok(Parsed::Rows { rows: vec![Row::table(row)], skipped: 0 })
}

/// MoE router logs, recognised by a CSV header or JSON keys naming `layer`,
/// `expert_id` and `tokens`.
pub struct MoeRouting;

impl LogFormat for MoeRouting {
    fn name(&self) -> &'static str {
        "moe_routing"
    }

    fn about(&self) -> &'static str {
        "MoE router logs, JSON lines or CSV: layer, expert_id, tokens routed (request_id, k, num_experts optional)"
    }

    fn detect(&self, line: &Probe<'_>) -> bool {
        if moe_header(line.line()).is_some() {
            return true;
        }
        line.object().is_some_and(|o| REQUIRED.iter().all(|k| o.contains_key(*k)) && !o.contains_key("prompt_tokens"))
    }

    fn parse<'a>(&self, line: &'a [u8], ctx: &LineContext<'_>) -> Result<Parsed<'a>, String> {
        parse(line, ctx)
    }

    fn header(&self, first_line: &[u8]) -> Option<CsvHeader> {
        moe_header(first_line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &[u8] = b"request_id,layer,expert_id,tokens,k,num_experts";

    fn row(line: &str, header: &[u8]) -> Result<MoeRoutingRow, String> {
        let header = moe_header(header);
        let ctx = LineContext { default_model: "m", header: header.as_ref(), ..Default::default() };
        match parse(line.as_bytes(), &ctx)? {
            Parsed::Rows { rows, skipped: 0 } if rows.len() == 1 => match rows[0].as_table_row::<MoeRoutingRow>() {
                Some(m) => Ok(m.clone()),
                None => panic!("{rows:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn csv_rows_follow_their_header_in_any_order() {
        let header = moe_header(HEADER);
        assert!(header.is_some());
        let ctx = LineContext { header: header.as_ref(), ..Default::default() };
        assert!(matches!(parse(HEADER, &ctx), Ok(Parsed::Skip)));
        let m = row(",1,2,10,,", HEADER).unwrap();
        assert_eq!(
            m,
            MoeRoutingRow { request_id: None, layer: 1, expert_id: 2, tokens: 10, k: None, num_experts: None }
        );
        let reordered = b"tokens, expert_id ,layer,num_experts";
        let m = row("7,3,0,8", reordered).unwrap();
        assert_eq!((m.layer, m.expert_id, m.tokens, m.num_experts, m.k), (0, 3, 7, Some(8), None));
        let m = row("\"req,1\",0,0,5,2,4", HEADER).unwrap();
        assert_eq!(m.request_id.as_deref(), Some("req,1"));
    }

    #[test]
    fn json_lines_carry_the_same_fields() {
        let m = row(r#"{"request_id":"r1","layer":3,"expert_id":5,"tokens":12,"k":2,"num_experts":8}"#, b"").unwrap();
        assert_eq!(
            m,
            MoeRoutingRow {
                request_id: Some("r1".into()),
                layer: 3,
                expert_id: 5,
                tokens: 12,
                k: Some(2),
                num_experts: Some(8)
            }
        );
    }

    #[test]
    fn bad_values_are_errors_naming_the_field() {
        let err = |line: &str| row(line, HEADER).unwrap_err();
        assert!(err(",1,3,abc,2,8").contains("tokens must be an integer"));
        assert!(err(",-1,3,4,2,8").contains("layer must be >= 0"));
        assert!(err(",1,8,4,2,8").contains("expert_id 8 is not below num_experts 8"));
        assert!(err(",1,0,4,9,8").contains("k 9 exceeds num_experts 8"));
        assert!(err(",1,0,4,0,8").contains("k must be >= 1"));
        assert!(err(",1,0,,2,8").contains("missing required field tokens"));
        assert!(err(",1,0,4").contains("expected 6 cells"));
        assert!(row(r#"{"layer":1.5,"expert_id":0,"tokens":1}"#, b"")
            .unwrap_err()
            .contains("layer must be an integer"));
        assert!(row("0,0,1", b"layer,expert,tokens").unwrap_err().contains("starts with a header"));
    }

    #[test]
    fn detected_by_header_or_keys() {
        let detect = |l: &str| MoeRouting.detect(&Probe::new(l.as_bytes()));
        assert!(detect("request_id,layer,expert_id,tokens,k,num_experts"));
        assert!(detect("layer,expert_id,tokens"));
        assert!(detect(r#"{"layer":0,"expert_id":1,"tokens":3}"#));
        assert!(!detect(r#"{"layer":0,"expert_id":1,"tokens":3,"prompt_tokens":4}"#));
        assert!(!detect("layer,expert_id,count"));
        assert!(!detect("layer,expert_id,tokens,tokens"));
    }
}
