//! The terminal table: values rounded for reading, numbers right-aligned,
//! fitted to the terminal's width. How a column is shown is decided in one
//! place, [`ColumnKind::of`], from its name and type, so every job and every
//! ad-hoc query reads the same way. CSV, JSON and Parquet keep full precision.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use arrow::array::{Array, Float64Array};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::error::{Error, Result};

/// Space between two columns.
const GAP: &str = "  ";

/// Text cells longer than this are cut (with `…`) when the table is fitted to a width.
const TEXT_CAP: usize = 60;

/// How a terminal table is laid out. The other formats ignore it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableLayout {
    /// The columns shown unless `wide` (in result order); empty: every column.
    pub key_columns: Vec<String>,
    /// Every column, and no width limit.
    pub wide: bool,
    /// The width to fit, in terminal cells; `None`: no limit.
    pub width: Option<usize>,
}

impl TableLayout {
    /// A table for standard output: fitted to `$COLUMNS` when it is set to a
    /// positive number, else to the terminal when stdout is one, else not
    /// limited; `wide` lifts the limit and shows every column.
    pub fn for_stdout(wide: bool) -> Self {
        let width = if wide { None } else { terminal_width() };
        TableLayout { key_columns: Vec::new(), wide, width }
    }

    /// The same layout showing only `columns` by default (all with `wide`).
    pub fn with_key_columns(mut self, columns: &[&str]) -> Self {
        self.key_columns = columns.iter().map(|c| c.to_string()).collect();
        self
    }
}

/// The width to fit standard output to: `$COLUMNS`, else the terminal's.
pub fn terminal_width() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&n| n > 0) {
        return Some(n);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    console::Term::stdout().size_checked().map(|(_rows, cols)| cols as usize)
}

/// How a column's values are shown: decided by [`ColumnKind::of`] alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Strings, booleans, dates, lists: as Arrow displays them, left-aligned.
    Text,
    /// Integers: thousands separators (`12,345`).
    Count,
    /// A fraction shown as a percentage with one decimal (`0.7857` -> `78.6%`):
    /// float columns named `*_rate` or `*_share`.
    Percent,
    /// Milliseconds to one decimal with thousands separators: float columns named `*_ms`.
    Millis,
    /// US dollars to four significant digits: float columns named `*_usd`.
    Usd,
    /// A cost per 1K tokens (`*_per_1k_tokens`) shown per 1M tokens, the unit
    /// providers quote prices in, to four significant digits; the header says `1m`.
    UsdPerMillionTokens,
    /// Any other number: four significant digits.
    Number,
}

impl ColumnKind {
    /// The kind of the column `name` of type `data_type`: the one rule every
    /// table follows (suffixes for floats; integers are counts).
    pub fn of(name: &str, data_type: &DataType) -> ColumnKind {
        if data_type.is_integer() {
            return ColumnKind::Count;
        }
        if !data_type.is_floating() && !matches!(data_type, DataType::Decimal128(..) | DataType::Decimal256(..)) {
            return ColumnKind::Text;
        }
        if name.ends_with("_rate") || name.ends_with("_share") {
            ColumnKind::Percent
        } else if name.ends_with("_ms") {
            ColumnKind::Millis
        } else if name.ends_with("_usd") {
            ColumnKind::Usd
        } else if name.ends_with(PER_1K_TOKENS) {
            ColumnKind::UsdPerMillionTokens
        } else {
            ColumnKind::Number
        }
    }

    /// The header shown for the column `name`.
    pub fn header(self, name: &str) -> String {
        match self {
            ColumnKind::UsdPerMillionTokens => format!("{}_per_1m_tokens", &name[..name.len() - PER_1K_TOKENS.len()]),
            _ => name.to_string(),
        }
    }

    /// Whether values are right-aligned.
    fn numeric(self) -> bool {
        self != ColumnKind::Text
    }

    /// One float value as shown.
    pub fn format_float(self, x: f64) -> String {
        if !x.is_finite() {
            return x.to_string();
        }
        match self {
            ColumnKind::Percent => format!("{}%", group_thousands(&format!("{:.1}", x * 100.0))),
            ColumnKind::Millis if x.abs() >= HUGE => significant(x, 4),
            ColumnKind::Millis => group_thousands(&format!("{x:.1}")),
            ColumnKind::Usd | ColumnKind::Number => significant(x, 4),
            ColumnKind::UsdPerMillionTokens => significant(x * 1000.0, 4),
            ColumnKind::Count | ColumnKind::Text => x.to_string(),
        }
    }
}

const PER_1K_TOKENS: &str = "_per_1k_tokens";

/// From here on a float is shown in scientific notation: its integer digits
/// would run to 16 or more, past what an f64 holds exactly.
const HUGE: f64 = 1e15;

/// `x` to `digits` significant digits, never dropping integer digits
/// (`12345.6` -> `12,346`), thousands grouped; scientific below 1e-4 and
/// from [`HUGE`] on.
pub fn significant(x: f64, digits: i32) -> String {
    if x == 0.0 {
        return "0".to_string();
    }
    if x.abs() < 1e-4 || x.abs() >= HUGE {
        return format!("{:.*e}", (digits - 1) as usize, x);
    }
    let magnitude = x.abs().log10().floor() as i32;
    let mut decimals = (digits - 1 - magnitude).max(0) as usize;
    let mut text = format!("{x:.decimals$}");
    // Rounding up can add a digit (9.99996 -> 10.000): one decimal fewer then.
    let rounded_magnitude = text.parse::<f64>().map_or(magnitude, |r| r.abs().log10().floor() as i32);
    if decimals > 0 && rounded_magnitude > magnitude {
        decimals -= 1;
        text = format!("{x:.decimals$}");
    }
    group_thousands(&text)
}

/// Inserts `,` every three digits of the integer part of a decimal number.
pub fn group_thousands(number: &str) -> String {
    let (sign, rest) = number.strip_prefix('-').map_or(("", number), |r| ("-", r));
    let (int, frac) = rest.split_once('.').map_or((rest, None), |(i, f)| (i, Some(f)));
    if !int.bytes().all(|b| b.is_ascii_digit()) {
        return number.to_string();
    }
    let mut out = String::with_capacity(number.len() + int.len() / 3);
    out.push_str(sign);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// One column ready to print.
struct Column {
    header: String,
    kind: ColumnKind,
    cells: Vec<String>,
}

impl Column {
    fn value_width(&self) -> usize {
        self.cells.iter().map(|c| text_width(c)).max().unwrap_or(0)
    }

    /// The narrowest width its header can wrap to (at `_`, which stays at the line end).
    fn min_width(&self) -> usize {
        self.value_width().max(header_pieces(&self.header).map(text_width).max().unwrap_or(0))
    }

    fn natural_width(&self) -> usize {
        self.value_width().max(text_width(&self.header))
    }
}

fn text_width(s: &str) -> usize {
    console::measure_text_width(s)
}

/// `a_b_c` -> `a_`, `b_`, `c`.
fn header_pieces(header: &str) -> impl Iterator<Item = &str> {
    header.split_inclusive('_')
}

/// The header's lines at `width`: pieces joined greedily while they fit.
fn wrap_header(header: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for piece in header_pieces(header) {
        match lines.last_mut() {
            Some(line) if text_width(line) + text_width(piece) <= width => line.push_str(piece),
            _ => lines.push(piece.to_string()),
        }
    }
    lines
}

/// Writes `batches` as a terminal table laid out by `layout`.
pub fn write_table(batches: &[RecordBatch], layout: &TableLayout, out: &mut dyn Write) -> Result<()> {
    let text = render(batches, layout)?;
    out.write_all(text.as_bytes()).map_err(|e| Error::io("output", e))
}

/// The table as text (every line ends with a newline).
pub fn render(batches: &[RecordBatch], layout: &TableLayout) -> Result<String> {
    let Some(schema) = batches.first().map(|b| b.schema()) else {
        return Ok("(0 rows)\n".to_string());
    };
    let shown = shown_columns(&schema, layout);
    let mut columns = Vec::with_capacity(shown.len());
    for &i in &shown {
        let field = schema.field(i);
        let kind = ColumnKind::of(field.name(), field.data_type());
        let mut cells = Vec::new();
        for batch in batches {
            cells.extend(format_cells(batch.column(i), kind)?);
        }
        if layout.width.is_some() && kind == ColumnKind::Text {
            cells.iter_mut().for_each(|c| cut(c, TEXT_CAP));
        }
        columns.push(Column { header: kind.header(field.name()), kind, cells });
    }
    let rows = batches.iter().map(|b| b.num_rows()).sum::<usize>();
    let (widths, kept) = fit(&columns, layout.width);
    let mut text = String::new();
    let header_lines: Vec<Vec<String>> = columns[..kept]
        .iter()
        .zip(&widths)
        .map(|(c, &w)| if text_width(&c.header) <= w { vec![c.header.clone()] } else { wrap_header(&c.header, w) })
        .collect();
    let height = header_lines.iter().map(Vec::len).max().unwrap_or(1);
    for line in 0..height {
        // Short headers sit on the last line, next to the values.
        let cells: Vec<&str> = header_lines
            .iter()
            .map(|h| h.get((line + h.len()).wrapping_sub(height)).map_or("", String::as_str))
            .collect();
        push_row(&mut text, &columns[..kept], &widths, &cells);
    }
    let rules: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    push_row(&mut text, &columns[..kept], &widths, &rules.iter().map(String::as_str).collect::<Vec<_>>());
    for r in 0..rows {
        let cells: Vec<&str> = columns[..kept].iter().map(|c| c.cells[r].as_str()).collect();
        push_row(&mut text, &columns[..kept], &widths, &cells);
    }
    if rows == 0 {
        text.push_str("(0 rows)\n");
    }
    let hidden = &columns[kept..];
    if !hidden.is_empty() {
        let names: Vec<&str> = hidden.iter().map(|c| c.header.as_str()).collect();
        let note = format!(
            "({} more column{} past the terminal's width: {}; --wide shows every column)",
            hidden.len(),
            if hidden.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
        for line in wrap_words(&note, layout.width.unwrap_or(usize::MAX)) {
            let _ = writeln!(text, "{line}");
        }
    }
    Ok(text)
}

/// `text` broken at spaces into lines of at most `width` characters (a
/// word longer than `width` stays whole on its own line).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// Indices of the columns shown: the layout's key columns that the result
/// has (in result order) unless wide or none given, else all.
fn shown_columns(schema: &SchemaRef, layout: &TableLayout) -> Vec<usize> {
    let all = 0..schema.fields().len();
    if layout.wide || layout.key_columns.is_empty() {
        return all.collect();
    }
    let keys: Vec<usize> =
        all.clone().filter(|&i| layout.key_columns.iter().any(|k| k == schema.field(i).name())).collect();
    if keys.is_empty() {
        all.collect()
    } else {
        keys
    }
}

/// Column widths within `limit`, and how many leading columns fit: headers
/// wrap first (the columns that gain most first), then trailing columns go.
fn fit(columns: &[Column], limit: Option<usize>) -> (Vec<usize>, usize) {
    let mut widths: Vec<usize> = columns.iter().map(Column::natural_width).collect();
    let total = |w: &[usize]| w.iter().sum::<usize>() + GAP.len() * w.len().saturating_sub(1);
    let Some(limit) = limit else { return (widths, columns.len()) };
    let mut by_gain: Vec<usize> = (0..columns.len()).collect();
    by_gain.sort_by_key(|&i| std::cmp::Reverse(widths[i] - columns[i].min_width()));
    for i in by_gain {
        if total(&widths) <= limit {
            break;
        }
        widths[i] = columns[i].min_width();
    }
    let mut kept = columns.len();
    while kept > 1 && total(&widths[..kept]) > limit {
        kept -= 1;
    }
    widths.truncate(kept);
    (widths, kept)
}

fn push_row(text: &mut String, columns: &[Column], widths: &[usize], cells: &[&str]) {
    let mut line = String::new();
    for (i, ((column, &width), cell)) in columns.iter().zip(widths).zip(cells).enumerate() {
        if i > 0 {
            line.push_str(GAP);
        }
        let pad = " ".repeat(width.saturating_sub(text_width(cell)));
        if column.kind.numeric() {
            line.push_str(&pad);
            line.push_str(cell);
        } else {
            line.push_str(cell);
            line.push_str(&pad);
        }
    }
    text.push_str(line.trim_end());
    text.push('\n');
}

/// Cuts `cell` to `cap` terminal cells, the last one `…`.
fn cut(cell: &mut String, cap: usize) {
    if text_width(cell) > cap {
        *cell = format!("{}…", console::truncate_str(cell, cap - 1, ""));
    }
}

/// The cells of one column: nulls empty, control characters escaped so a
/// row stays on one line.
fn format_cells(array: &dyn Array, kind: ColumnKind) -> Result<Vec<String>> {
    let n = array.len();
    let mut cells = Vec::with_capacity(n);
    match kind {
        ColumnKind::Text | ColumnKind::Count => {
            let options = FormatOptions::default();
            let formatter = ArrayFormatter::try_new(array, &options)?;
            for i in 0..n {
                if array.is_null(i) {
                    cells.push(String::new());
                    continue;
                }
                let value = formatter.value(i).to_string();
                cells.push(if kind == ColumnKind::Count { group_thousands(&value) } else { escape(&value) });
            }
        }
        _ => {
            let floats = arrow::compute::cast(array, &DataType::Float64)?;
            let floats = floats
                .as_any()
                .downcast_ref::<Float64Array>()
                .ok_or_else(|| internal_err!("a cast to Float64 gave another array type"))?;
            for i in 0..n {
                cells.push(if floats.is_null(i) { String::new() } else { kind.format_float(floats.value(i)) });
            }
        }
    }
    Ok(cells)
}

fn escape(value: &str) -> String {
    if !value.chars().any(char::is_control) {
        return value.to_string();
    }
    value.chars().flat_map(char::escape_debug).collect::<String>().replace("\\'", "'").replace("\\\"", "\"")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    #[test]
    fn kinds_come_from_the_name_and_type() {
        let f = DataType::Float64;
        assert_eq!(ColumnKind::of("eos_compliance_rate", &f), ColumnKind::Percent);
        assert_eq!(ColumnKind::of("cached_share", &f), ColumnKind::Percent);
        assert_eq!(ColumnKind::of("ttft_p50_ms", &f), ColumnKind::Millis);
        assert_eq!(ColumnKind::of("cost_usd", &f), ColumnKind::Usd);
        assert_eq!(ColumnKind::of("cost_per_1k_tokens", &f), ColumnKind::UsdPerMillionTokens);
        assert_eq!(ColumnKind::of("decode_tps_p50", &f), ColumnKind::Number);
        assert_eq!(ColumnKind::of("requests", &DataType::Int64), ColumnKind::Count);
        assert_eq!(ColumnKind::of("latency_ms", &DataType::Int64), ColumnKind::Count);
        assert_eq!(ColumnKind::of("model", &DataType::Utf8), ColumnKind::Text);
        assert_eq!(ColumnKind::UsdPerMillionTokens.header("cost_per_1k_tokens"), "cost_per_1m_tokens");
    }

    #[test]
    fn values_are_rounded_for_reading() {
        assert_eq!(ColumnKind::Percent.format_float(0.7857142857142857), "78.6%");
        assert_eq!(ColumnKind::Percent.format_float(1.0), "100.0%");
        assert_eq!(ColumnKind::Percent.format_float(0.0), "0.0%");
        assert_eq!(ColumnKind::Millis.format_float(14431.139999999996), "14,431.1");
        assert_eq!(ColumnKind::Millis.format_float(41.615), "41.6");
        assert_eq!(ColumnKind::Usd.format_float(0.023045999999999997), "0.02305");
        assert_eq!(ColumnKind::Usd.format_float(0.1324788), "0.1325");
        assert_eq!(ColumnKind::Usd.format_float(12345.6), "12,346");
        assert_eq!(ColumnKind::Usd.format_float(9.99996), "10.00");
        assert_eq!(ColumnKind::Usd.format_float(0.0000239), "2.390e-5");
        // 0.005293... USD per 1K tokens = 5.293 USD per 1M tokens.
        assert_eq!(ColumnKind::UsdPerMillionTokens.format_float(0.005293063849333945), "5.293");
        assert_eq!(ColumnKind::UsdPerMillionTokens.format_float(0.00005003172985154426), "0.05003");
        assert_eq!(ColumnKind::Number.format_float(-1.234567), "-1.235");
        assert_eq!(ColumnKind::Number.format_float(49.74247545469177), "49.74");
        assert_eq!(ColumnKind::Number.format_float(f64::NAN), "NaN");
        assert_eq!(ColumnKind::Number.format_float(999_999_999_999_999.0), "999,999,999,999,999");
        assert_eq!(ColumnKind::Number.format_float(1e300), "1.000e300");
        assert_eq!(ColumnKind::Millis.format_float(-2.5e18), "-2.500e18");
        assert_eq!(ColumnKind::UsdPerMillionTokens.format_float(1e13), "1.000e16");
        assert_eq!(group_thousands("-1234567"), "-1,234,567");
        assert_eq!(group_thousands("999"), "999");
    }

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("model", DataType::Utf8, true),
            Field::new("requests", DataType::Int64, true),
            Field::new("eos_compliance_rate", DataType::Float64, true),
            Field::new("ttft_p50_ms", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![Some("gpt-4o"), Some("line\nbreak")])),
                Arc::new(Int64Array::from(vec![Some(12345), None])),
                Arc::new(Float64Array::from(vec![Some(0.5), None])),
                Arc::new(Float64Array::from(vec![Some(1044.3), Some(7.24)])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn an_unlimited_table_keeps_one_line_headers_and_right_aligns_numbers() {
        let text = render(&[batch()], &TableLayout::default()).unwrap();
        assert_eq!(
            text,
            "model        requests  eos_compliance_rate  ttft_p50_ms\n\
             -----------  --------  -------------------  -----------\n\
             gpt-4o         12,345                50.0%      1,044.3\n\
             line\\nbreak                                         7.2\n"
        );
    }

    #[test]
    fn a_narrow_table_wraps_headers_then_drops_trailing_columns() {
        // 11 + 8 + 11 + 7 cells and three gaps of 2: 43.
        let layout = TableLayout { width: Some(43), ..Default::default() };
        assert_eq!(
            render(&[batch()], &layout).unwrap(),
            "                              eos_\n\
             \x20                      compliance_    ttft_\n\
             model        requests         rate   p50_ms\n\
             -----------  --------  -----------  -------\n\
             gpt-4o         12,345        50.0%  1,044.3\n\
             line\\nbreak                             7.2\n"
        );
        let layout = TableLayout { width: Some(42), ..Default::default() };
        let text = render(&[batch()], &layout).unwrap();
        assert!(
            text.ends_with(
                "gpt-4o         12,345        50.0%\nline\\nbreak\n(1 more column past the terminal's width:\n\
                 ttft_p50_ms; --wide shows every column)\n"
            ),
            "{text}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= 42), "{text}");
    }

    #[test]
    fn key_columns_unless_wide() {
        let layout = TableLayout::default().with_key_columns(&["model", "ttft_p50_ms"]);
        assert!(render(&[batch()], &layout).unwrap().starts_with("model        ttft_p50_ms\n"));
        let wide = TableLayout { wide: true, ..layout };
        assert!(render(&[batch()], &wide).unwrap().starts_with("model        requests"));
    }
}
