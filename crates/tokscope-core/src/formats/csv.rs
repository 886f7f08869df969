//! CSV exports whose header names the columns (LiteLLM spend logs, Langfuse
//! observations): the header, read once per file ([`super::LogFormat::header`]),
//! and one line split into cells with RFC 4180 quoting (`"a,b"`, `""` for a
//! quote). Lines are read one at a time, so a quoted cell that holds a line
//! break cannot be read: its record is rejected with a message saying so.

use std::borrow::Cow;

/// The column names of a CSV file, from its header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvHeader {
    line: Vec<u8>,
    columns: Vec<String>,
    /// Whether each column is the first of its name (a later one is not read).
    first: Vec<bool>,
}

impl CsvHeader {
    /// Reads a header line (a UTF-8 byte-order mark is dropped).
    pub fn parse(line: &[u8]) -> Result<CsvHeader, String> {
        let line = trim_line(line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line));
        let columns: Vec<String> = split_record(line)?.into_iter().map(|c| c.trim().to_string()).collect();
        let first = columns.iter().enumerate().map(|(i, c)| !columns[..i].contains(c)).collect();
        Ok(CsvHeader { line: line.to_vec(), columns, first })
    }

    /// The column names, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Whether the file has this column.
    pub fn has(&self, name: &str) -> bool {
        self.columns.iter().any(|c| c == name)
    }

    /// True for the header line itself (which carries no row).
    pub fn is_header_line(&self, line: &[u8]) -> bool {
        trim_line(line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)) == self.line
    }

    /// One data line, its cells named by the header.
    pub fn row<'a>(&'a self, line: &'a [u8]) -> Result<CsvRow<'a>, String> {
        let cells = split_record(trim_line(line))?;
        if cells.len() != self.columns.len() {
            return Err(format!("expected {} cells (the header's columns), found {}", self.columns.len(), cells.len()));
        }
        Ok(CsvRow { header: self, cells })
    }
}

/// One CSV record with its cells named.
#[derive(Debug)]
pub struct CsvRow<'a> {
    header: &'a CsvHeader,
    cells: Vec<Cow<'a, str>>,
}

impl<'a> CsvRow<'a> {
    /// The cell of column `name`; `None` when the file has no such column or the cell is empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        let i = self.header.columns.iter().position(|c| c == name)?;
        Some(self.cells[i].as_ref()).filter(|v| !v.is_empty())
    }

    /// The cell of column `name` as a number (`None` when absent or empty).
    pub fn number(&self, name: &str) -> Result<Option<f64>, String> {
        self.get(name)
            .map(|v| v.trim().parse::<f64>().map_err(|_| format!("{name} is not a number: {v:?}")))
            .transpose()
    }
}

impl CsvRow<'_> {
    /// The row as the JSON object a JSON export of the same table holds:
    /// each non-empty cell under its column's name (the first column of a
    /// name), a cell holding a JSON object or array as that JSON, any other
    /// as a string. The formats whose tables are exported both ways
    /// (LiteLLM's spend logs, Langfuse's observations) read a CSV row as
    /// this object, so both exports are read by one reader.
    pub fn to_json_object(&self) -> String {
        let mut out = String::from("{");
        let cells = self.header.columns.iter().zip(&self.header.first).zip(&self.cells);
        for ((name, _), cell) in cells.filter(|((_, first), cell)| **first && !cell.is_empty()) {
            if out.len() > 1 {
                out.push(',');
            }
            push_json_string(&mut out, name);
            out.push(':');
            let trimmed = cell.trim();
            let is_json =
                trimmed.starts_with(['{', '[']) && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok();
            if is_json {
                out.push_str(trimmed);
            } else {
                push_json_string(&mut out, cell);
            }
        }
        out.push('}');
        out
    }
}

/// `text` as a JSON string literal.
fn push_json_string(out: &mut String, text: &str) {
    // Serialising a str cannot fail.
    out.push_str(&serde_json::to_string(text).unwrap_or_default());
}

/// Joins cells into one CSV line, quoting those that need it.
pub fn join_record<S: AsRef<str>>(cells: &[S]) -> String {
    let mut out = String::new();
    for (i, cell) in cells.iter().enumerate() {
        let cell = cell.as_ref();
        if i > 0 {
            out.push(',');
        }
        if cell.contains([',', '"', '\r', '\n']) {
            out.push('"');
            out.push_str(&cell.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(cell);
        }
    }
    out
}

/// A line without its line break (`\n` is already gone; `\r` of CRLF files is dropped here).
fn trim_line(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Splits one CSV line into cells, unquoting quoted ones.
pub fn split_record(line: &[u8]) -> Result<Vec<Cow<'_, str>>, String> {
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8: {e}"))?;
    let bytes = text.as_bytes();
    let mut cells = Vec::new();
    let mut i = 0;
    loop {
        if bytes.get(i) == Some(&b'"') {
            // Quoted: up to the quote not doubled; `""` inside stands for `"`.
            let start = i + 1;
            let (mut j, mut flushed) = (start, start);
            let mut unescaped: Option<String> = None;
            loop {
                match bytes.get(j) {
                    None => {
                        return Err(format!(
                            "unterminated quoted cell {} (a cell holding a line break cannot be read line by line)",
                            cells.len() + 1
                        ))
                    }
                    Some(b'"') if bytes.get(j + 1) == Some(&b'"') => {
                        // Keep the text so far and one of the two quotes.
                        unescaped.get_or_insert_with(String::new).push_str(&text[flushed..=j]);
                        j += 2;
                        flushed = j;
                    }
                    Some(b'"') => break,
                    Some(_) => j += 1,
                }
            }
            cells.push(match unescaped {
                Some(mut s) => {
                    s.push_str(&text[flushed..j]);
                    Cow::Owned(s)
                }
                None => Cow::Borrowed(&text[start..j]),
            });
            i = j + 1;
            match bytes.get(i) {
                None => return Ok(cells),
                Some(b',') => i += 1,
                Some(_) => return Err(format!("text after the closing quote of cell {}", cells.len())),
            }
        } else {
            let end = text[i..].find(',').map_or(bytes.len(), |k| i + k);
            cells.push(Cow::Borrowed(&text[i..end]));
            if end == bytes.len() {
                return Ok(cells);
            }
            i = end + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_cells_unquote_and_keep_commas() {
        let cells = split_record(br#"a,"b,c","say ""hi""",,"""",x"#).unwrap();
        assert_eq!(cells, vec!["a", "b,c", r#"say "hi""#, "", "\"", "x"]);
        assert_eq!(split_record(b"").unwrap(), vec![""]);
        assert_eq!(split_record(b"a,").unwrap(), vec!["a", ""]);
    }

    #[test]
    fn joined_cells_split_back() {
        let cells = ["a", "b,c", r#"say "hi""#, "", "x"];
        let line = join_record(&cells);
        assert_eq!(line, r#"a,"b,c","say ""hi""",,x"#);
        assert_eq!(split_record(line.as_bytes()).unwrap(), cells);
    }

    #[test]
    fn broken_quoting_is_an_error() {
        assert!(split_record(br#"a,"open"#).unwrap_err().contains("line break"));
        assert!(split_record(br#""a"b,c"#).unwrap_err().contains("after the closing quote"));
    }

    #[test]
    fn rows_are_read_by_column_name() {
        let h = CsvHeader::parse(b"\xEF\xBB\xBFid,spend,note\r").unwrap();
        assert_eq!(h.columns(), ["id", "spend", "note"]);
        assert!(h.is_header_line(b"id,spend,note"));
        let row = h.row(br#"r1,0.5,"x, y""#).unwrap();
        assert_eq!((row.get("id"), row.get("note"), row.get("missing")), (Some("r1"), Some("x, y"), None));
        assert_eq!(row.number("spend"), Ok(Some(0.5)));
        assert!(h.row(b"r1,0.5").unwrap_err().contains("expected 3 cells"));
        assert!(h.row(b"r1,abc,z").unwrap().number("spend").unwrap_err().contains("not a number"));
    }

    #[test]
    fn rows_read_as_the_json_object_of_a_json_export() {
        let h = CsvHeader::parse(b"id,spend,meta,tags,note,empty,id").unwrap();
        let row = h.row(br#"r1,0.5,"{""a"": [1]}","[""x""]","{not json",,r2"#).unwrap();
        assert_eq!(
            row.to_json_object(),
            r#"{"id":"r1","spend":"0.5","meta":{"a": [1]},"tags":["x"],"note":"{not json"}"#
        );
    }
}
