//! The token-level jobs (jitter, confidence, eos_logprob) and SQL functions
//! on a two-request dataset whose every number is computed by hand below.

use crate::common;

use common::{ingest, query, tokscope, write_file};

const R1: &str = r#"{"ts":"2024-06-01T00:00:00Z","request_id":"r1","model":"m","prompt_tokens":10,"completion_tokens":4,"max_tokens":10,"ttft_ms":100,"latency_ms":160,"model_output":"a b c</s>","token_times_ms":[100,110,130,160],"logprobs":[
{"token":"a","logprob":-0.1,"top_logprobs":[{"token":"a","logprob":-1.0986122886681098},{"token":"x","logprob":-1.0986122886681098},{"token":"y","logprob":-1.0986122886681098}]},
{"token":"b","logprob":-1.0,"top_logprobs":[{"token":"b","logprob":-1.0986122886681098},{"token":"x","logprob":-1.0986122886681098},{"token":"y","logprob":-1.0986122886681098}]},
{"token":"c","logprob":-2.0,"top_logprobs":[{"token":"c","logprob":-0.6931471805599453},{"token":"x","logprob":-0.6931471805599453}]},
{"token":"</s>","logprob":-0.05,"top_logprobs":[{"token":"</s>","logprob":-0.6931471805599453},{"token":"x","logprob":-0.6931471805599453}]}]}"#;
const R2: &str = r#"{"ts":"2024-06-01T00:00:01Z","request_id":"r2","model":"m","prompt_tokens":20,"completion_tokens":3,"max_tokens":10,"ttft_ms":50,"latency_ms":90,"model_output":"d e f","token_times_ms":[50,60,90],"logprobs":[{"token":"d","logprob":-1.5},{"token":"e","logprob":-0.2},{"token":"f","logprob":-0.9}]}"#;

fn dataset() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let input = write_file(dir.path(), "t.jsonl", format!("{}\n{}\n", R1.replace('\n', ""), R2));
    let out = dir.path().join("ds");
    ingest(&[&input], &out, &[]);
    (dir, out)
}

fn job(data: &std::path::Path, name: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["job", name, "--format", "json", "--data", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    tokscope(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn close(v: &serde_json::Value, want: f64) {
    let got = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
}

#[test]
fn jitter_per_request_and_per_bin() {
    let (_dir, data) = dataset();
    let per = job(&data, "jitter_requests", &[]);
    // r1 ITLs 10, 20, 30 -> sample std 10; r2 ITLs 10, 30 -> sqrt(200) = 14.142135623730951.
    close(&per[0]["itl_std_ms"], 10.0);
    close(&per[0]["first_token_ms"], 100.0);
    close(&per[0]["last_token_ms"], 160.0);
    close(&per[1]["itl_std_ms"], 14.142135623730951);
    close(&per[1]["last_token_ms"], 90.0);
    let bin = &job(&data, "jitter", &[])[0];
    assert_eq!(
        (bin["model"].as_str(), bin["context_bin"].as_str(), bin["requests"].as_i64()),
        (Some("m"), Some("0-1K"), Some(2))
    );
    // Type-7 quantiles of two values a <= b: a + p (b - a).
    close(&bin["itl_std_p50_ms"], 12.071067811865476);
    close(&bin["itl_std_p95_ms"], 10.0 + 0.95 * 4.142135623730951);
    close(&bin["first_token_p50_ms"], 75.0);
    close(&bin["first_token_p95_ms"], 97.5);
    close(&bin["first_token_p99_ms"], 99.5);
    close(&bin["last_token_p50_ms"], 125.0);
    close(&bin["last_token_p95_ms"], 156.5);
    close(&bin["last_token_p99_ms"], 159.3);
}

#[test]
fn confidence_by_eos_status_with_default_and_custom_thresholds() {
    let (_dir, data) = dataset();
    let rows = job(&data, "confidence", &[]);
    assert_eq!(rows.len(), 2);
    let eos = &rows[0];
    assert_eq!(eos["eos_status"], "eos");
    assert_eq!(eos["tokens"], 4);
    close(&eos["mean_logprob"], -0.7875);
    // Below ln 0.5: positions 1 and 2 -> share 0.5, one span of 2, first at 4 - 1 - 1 = 2 from the end.
    close(&eos["low_confidence_share"], 0.5);
    close(&eos["longest_low_span_mean"], 2.0);
    assert_eq!(eos["longest_low_span_max"], 2);
    close(&eos["first_low_from_end_p50"], 2.0);
    // Entropies log2(3), log2(3), 1, 1 bits: two are above 1.0.
    close(&eos["high_entropy_share"], 0.5);
    let trunc = &rows[1];
    assert_eq!(trunc["eos_status"], "implicit_truncation");
    close(&trunc["mean_logprob"], -2.6 / 3.0);
    close(&trunc["low_confidence_share"], 2.0 / 3.0);
    close(&trunc["longest_low_span_mean"], 1.0);
    close(&trunc["first_low_from_end_p50"], 2.0);
    assert!(trunc.get("high_entropy_share").is_none_or(|v| v.is_null()), "no top_logprobs, no entropy");
    // A stricter threshold: only -2.0 (r1) and -1.5 (r2) are below -1.2.
    let strict = job(&data, "confidence", &["--param", "low_logprob=-1.2"]);
    close(&strict[0]["low_confidence_share"], 0.25);
    close(&strict[1]["low_confidence_share"], 1.0 / 3.0);
    let bad = common::tokscope_output(&[
        "job",
        "confidence",
        "--data",
        data.to_str().unwrap(),
        "--param",
        "low_logprob=1;DROP",
    ]);
    assert!(!bad.status.success());
}

#[test]
fn eos_logprob_splits_eos_tokens_from_truncations() {
    let (_dir, data) = dataset();
    let rows = job(&data, "eos_logprob", &[]);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["last_token_kind"], "eos_token");
    close(&rows[0]["logprob_mean"], -0.05);
    close(&rows[0]["logprob_p50"], -0.05);
    assert_eq!(rows[1]["last_token_kind"], "implicit_truncation");
    close(&rows[1]["logprob_p10"], -0.9);
    close(&rows[1]["logprob_p90"], -0.9);
}

#[test]
fn redundancy_bound_and_is_eos_marker_in_sql() {
    let (_dir, data) = dataset();
    let r = &query(
        &data,
        "SELECT redundancy_bound(1.0, 2, 8) AS b, redundancy_bound(1.0, 2, 1) AS none, \
         is_eos_marker('<|im_end|>') AS m1, is_eos_marker('hello') AS m2",
    )[0];
    // 0.45 - 0.3 * 1 / log2(8) + 0.02 * 2 = 0.39.
    close(&r["b"], 0.39);
    assert!(r.get("none").is_none_or(|v| v.is_null()));
    assert_eq!((r["m1"].as_bool(), r["m2"].as_bool()), (Some(true), Some(false)));
}

/// The jitter jobs and eos_logprob read each request's timings and last token
/// from `requests` columns derived at ingest. DuckDB computes the same columns
/// from the token rows (`bench/duckdb/requests_from_tokens.sql`, the bench's
/// `requests` for these jobs) and runs the jitter jobs' own SQL over them, on
/// generated requests plus hand-made edge cases: token rows without times, a
/// single token, and a request without per-token data (left out of the jobs).
#[test]
fn per_token_columns_agree_with_duckdb_over_the_token_rows() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("gen.jsonl");
    tokscope(&["generate", "--requests", "400", "--token-data", "--seed", "5", "--out", log.to_str().unwrap()]);
    let edge = [
        // Logprobs without times: no ITLs, first/last fall back to ttft_ms and latency_ms.
        r#"{"ts":"2024-06-01T00:00:00Z","request_id":"untimed","model":"m","prompt_tokens":10,"completion_tokens":2,"ttft_ms":40,"latency_ms":70,"logprobs":[{"token":"a","logprob":-0.1},{"token":"b","logprob":-0.2}]}"#,
        // One token: one emission time, no ITL to spread.
        r#"{"ts":"2024-06-01T00:00:01Z","request_id":"single","model":"m","prompt_tokens":10,"completion_tokens":1,"ttft_ms":30,"latency_ms":30,"token_times_ms":[31]}"#,
        // No per-token data: not a row of either job.
        r#"{"ts":"2024-06-01T00:00:02Z","request_id":"plain","model":"m","prompt_tokens":10,"completion_tokens":3,"ttft_ms":20,"latency_ms":50}"#,
    ];
    let hand = write_file(dir.path(), "edge.jsonl", edge.join("\n") + "\n");
    let out = dir.path().join("ds");
    ingest(&[log.to_str().unwrap(), &hand], &out, &[]);
    let columns = "request_id, output_token_count, itl_std_ms, first_token_emitted_ms, last_token_emitted_ms, \
                   last_token, last_token_logprob, last_token_is_special";
    let sql = |name: &str| tokscope(&["job", name, "--show-sql"]);
    let view = std::fs::read_to_string(common::repo().join("bench/duckdb/requests_from_tokens.sql")).unwrap();
    let setup = [
        common::parquet_view(&out, "requests_files", "requests"),
        common::parquet_view(&out, "tokens", "tokens"),
        format!("CREATE VIEW requests AS {view}"),
    ];
    let queries =
        [format!("SELECT {columns} FROM requests ORDER BY request_id"), sql("jitter"), sql("jitter_requests")];
    let oracle = common::duckdb_rows(&setup, &queries);
    let stored = query(&out, &format!("SELECT {columns} FROM requests ORDER BY request_id"));
    assert_eq!(stored.len(), 403, "every request, with per-token data or not");
    for (name, theirs) in ["columns", "jitter", "jitter_requests"].into_iter().zip(&oracle) {
        let ours = if name == "columns" { stored.clone() } else { job(&out, name, &[]) };
        common::assert_rows_match(name, &ours, theirs, 1e-9);
    }
    let per = job(&out, "jitter_requests", &[]);
    let row = |id: &str| per.iter().find(|r| r["request_id"] == id).cloned();
    let untimed = row("untimed").expect("untimed request listed");
    assert!(untimed["itl_std_ms"].is_null());
    assert_eq!((untimed["first_token_ms"].as_f64(), untimed["last_token_ms"].as_f64()), (Some(40.0), Some(70.0)));
    let single = row("single").expect("single-token request listed");
    assert!(single["itl_std_ms"].is_null());
    assert_eq!((single["tokens"].as_i64(), single["first_token_ms"].as_f64()), (Some(1), Some(31.0)));
    assert!(row("plain").is_none(), "a request without per-token data is not a jitter row");
    assert_eq!(per.len(), 402);
}
