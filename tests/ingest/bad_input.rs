//! Bad input never crashes ingest and nothing is lost: every line becomes a
//! row or a reject, and the summary reconciles (asserted in `common::ingest`).

use crate::common;

use std::io::Write;
use std::path::Path;

use common::{ingest, query};

const GOOD: &str = r#"{"ts":"2024-06-01T00:00:00Z","request_id":"ok-1","model":"m","prompt_tokens":10,"completion_tokens":5,"model_output":"hi</s>"}"#;
const GOOD2: &str =
    r#"{"ts":"2024-06-01T00:00:01Z","request_id":"ok-2","model":"m","prompt_tokens":20,"completion_tokens":6}"#;

use common::write_file as write;

fn totals(s: &serde_json::Value) -> (u64, u64, u64) {
    let t = &s["totals"];
    (t["lines_read"].as_u64().unwrap(), t["rows_written"].as_u64().unwrap(), t["lines_rejected"].as_u64().unwrap())
}

fn reject_errors(data: &Path) -> Vec<(u64, String)> {
    query(data, "SELECT source_line, error FROM rejects ORDER BY source_line")
        .iter()
        .map(|r| (r["source_line"].as_u64().unwrap(), r["error"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn invalid_utf8_and_nul_bytes_are_rejected_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = format!("{GOOD}\n").into_bytes();
    bytes.extend_from_slice(
        b"{\"ts\":1717200000000,\"model\":\"m\xff\xfe\",\"prompt_tokens\":1,\"completion_tokens\":1}\n",
    );
    bytes.extend_from_slice(b"{\"ts\":1717200000000,\"model\":\"m\0\",\"prompt_tokens\":1,\"completion_tokens\":1}\n");
    bytes.extend_from_slice(b"\0\0\0\n");
    bytes.extend_from_slice(format!("{GOOD2}\n").as_bytes());
    let input = write(dir.path(), "bad.jsonl", &bytes);
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &["--format", "canonical"]);
    assert_eq!(totals(&s), (5, 2, 3));
    let errs = reject_errors(&out);
    assert_eq!(errs.iter().map(|e| e.0).collect::<Vec<_>>(), vec![2, 3, 4]);
    // The raw bytes are kept exactly, invalid UTF-8 included.
    let raw = query(&out, "SELECT encode(raw_line, 'hex') AS h FROM rejects WHERE source_line = 2");
    assert!(raw[0]["h"].as_str().unwrap().contains("fffe"));
}

#[test]
fn a_100_mb_line_is_rejected_without_stopping_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(f, "{GOOD}").unwrap();
    write!(f, "{{\"ts\":1717200000000,\"model\":\"m\",\"prompt_tokens\":1,\"completion_tokens\":1,\"model_output\":\"")
        .unwrap();
    let block = vec![b'x'; 1 << 20];
    for _ in 0..100 {
        f.write_all(&block).unwrap();
    }
    writeln!(f, "\"}}").unwrap();
    writeln!(f, "{GOOD2}").unwrap();
    drop(f);
    let out = dir.path().join("ds");
    let s = ingest(&[path.to_str().unwrap()], &out, &[]);
    assert_eq!(totals(&s), (3, 2, 1));
    let r = &query(&out, "SELECT source_line, byte_offset, error, length(CAST(raw_line AS VARCHAR)) AS kept, raw_line_truncated FROM rejects")[0];
    assert_eq!(r["source_line"], 2);
    assert_eq!(r["byte_offset"].as_u64(), Some(GOOD.len() as u64 + 1));
    assert!(r["error"].as_str().unwrap().contains("longer than --max-line-bytes"));
    assert_eq!(r["kept"], 65536);
    assert_eq!(r["raw_line_truncated"], true);
    let ids = query(&out, "SELECT request_id, source_line FROM requests ORDER BY source_line");
    assert_eq!(ids[1]["request_id"], "ok-2");
    assert_eq!(ids[1]["source_line"], 3);
}

#[test]
fn truncated_gzip_keeps_what_was_readable_and_rejects_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..2000 {
        text.push_str(&GOOD.replace("ok-1", &format!("id-{i}")));
        text.push('\n');
    }
    let gz = common::gzip(text.as_bytes(), flate2::Compression::default());
    let cut = &gz[..gz.len() * 2 / 3];
    let input = write(dir.path(), "cut.jsonl.gz", cut);
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    let (read, rows, rejected) = totals(&s);
    assert!(rows > 100 && rows < 2000, "rows before the cut are kept: {rows}");
    assert_eq!(rejected, 1, "the unreadable tail is one reject");
    assert_eq!(read, rows + 1);
    let errs = reject_errors(&out);
    assert!(errs[0].1.contains("input stream failed"), "{errs:?}");
}

#[test]
fn gzip_and_zstd_inputs_are_decompressed() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{GOOD}\n{GOOD2}\n");
    let gz = write(dir.path(), "a.jsonl.gz", common::gzip(text.as_bytes(), flate2::Compression::default()));
    let zst = write(dir.path(), "b.jsonl.zst", zstd::encode_all(text.replace("ok-", "z-").as_bytes(), 3).unwrap());
    let out = dir.path().join("ds");
    let s = ingest(&[&gz, &zst], &out, &[]);
    assert_eq!(totals(&s), (4, 4, 0));
}

#[test]
fn empty_file_reads_zero_lines() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "empty.jsonl", b"");
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    assert_eq!(totals(&s), (0, 0, 0));
    assert_eq!(query(&out, "SELECT count(*) AS n FROM requests")[0]["n"], 0);
}

#[test]
fn arrays_and_scalars_instead_of_objects_are_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "shapes.jsonl", format!("{GOOD}\n[1,2,3]\n42\n\"text\"\nnull\n{GOOD2}\n").as_bytes());
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    assert_eq!(totals(&s), (6, 2, 4));
    assert!(reject_errors(&out).iter().all(|(_, e)| e.contains("invalid JSON object")));
}

#[test]
fn utf8_bom_and_crlf_endings_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = [b"\xEF\xBB\xBF".as_slice(), GOOD.as_bytes(), b"\r\n", GOOD2.as_bytes(), b"\r\n\r\n"].concat();
    let input = write(dir.path(), "bom.jsonl", &bytes);
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    assert_eq!(totals(&s), (2, 2, 0));
    assert_eq!(s["totals"]["lines_skipped"], 1, "the blank CRLF line");
    let r = query(&out, "SELECT request_id, eos_status FROM requests ORDER BY request_id");
    assert_eq!(r[0]["eos_status"], "eos");
}

#[test]
fn missing_required_fields_and_bad_counts_are_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        GOOD,
        r#"{"model":"m","prompt_tokens":1,"completion_tokens":1}"#,
        r#"{"ts":1717200000000,"prompt_tokens":1,"completion_tokens":1}"#,
        r#"{"ts":1717200000000,"model":"m","completion_tokens":1}"#,
        r#"{"ts":1717200000000,"model":"m","prompt_tokens":-4,"completion_tokens":1}"#,
        r#"{"ts":1717200000000,"model":"m","prompt_tokens":4.5,"completion_tokens":1}"#,
        r#"{"ts":1717200000000,"model":"m","prompt_tokens":1e15,"completion_tokens":1}"#,
        r#"{"ts":"not a time","model":"m","prompt_tokens":1,"completion_tokens":1}"#,
        r#"{"ts":1717200000000,"model":"m","prompt_tokens":1,"completion_tokens":1,"latency_ms":1e300}"#,
        r#"{"ts":1717200000000,"model":"m","prompt_tokens":1,"completion_tokens":1,"ttft_ms":-3}"#,
    ];
    let input = write(dir.path(), "missing.jsonl", (lines.join("\n") + "\n").as_bytes());
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &["--format", "canonical"]);
    assert_eq!(totals(&s), (10, 1, 9));
    let errs = reject_errors(&out);
    for (line, want) in [
        (2, "ts"),
        (3, "model"),
        (4, "prompt_tokens"),
        (5, "non-negative"),
        (6, "integer"),
        (7, "plausible"),
        (8, "timestamp"),
        (9, "latency_ms = 1e300 ms exceeds the plausible maximum"),
        (10, "ttft_ms must be a non-negative number"),
    ] {
        let e = &errs.iter().find(|e| e.0 == line).unwrap().1;
        assert!(e.contains(want), "line {line}: {e}");
    }
}

#[test]
fn undetectable_file_rejects_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "noise.txt", b"hello\nworld\n");
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    assert_eq!(totals(&s), (2, 0, 2));
    assert!(reject_errors(&out)[0].1.contains("--format"));
}
