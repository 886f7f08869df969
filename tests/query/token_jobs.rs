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

/// The per-token columns of `requests` as docs/metrics.md defines them, read
/// by DuckDB straight from the log lines (`logged`: `token_times_ms`,
/// `decode_latency_ms` and `logprobs` as logged): the token rows (the arrays
/// aligned by position, padded with nulls; `itl_ms` the logged decode latency,
/// else the difference of emission times), then each request's count, ITL
/// standard deviation, first and last emission and last token. Canonical
/// lines carry no `special` flag (TGI's), so `last_token_is_special` is null.
const TOKEN_COLUMNS_BY_DEFINITION: &str = r#"
CREATE VIEW token_rows AS
SELECT
  l.request_id,
  p.position,
  l.times[p.position + 1] AS emitted_ms,
  CASE WHEN p.position < len(l.decode) THEN l.decode[p.position + 1]
       WHEN p.position > 0 THEN l.times[p.position + 1] - l.times[p.position] END AS itl_ms,
  l.logprobs[p.position + 1] ->> 'token' AS token,
  CAST(l.logprobs[p.position + 1] ->> 'logprob' AS DOUBLE) AS logprob
FROM logged l, range(greatest(len(l.logprobs), len(l.times), len(l.decode))) AS p(position);
CREATE VIEW per_token_by_definition AS
SELECT
  l.request_id, l.model, l.ttft_ms, l.latency_ms,
  coalesce(b.context_bin, 'unknown') AS context_bin, b.lo AS context_bin_lo,
  t.output_token_count, t.itl_std_ms, t.first_token_emitted_ms, t.last_token_emitted_ms,
  t.last_token, t.last_token_logprob, CAST(NULL AS BOOLEAN) AS last_token_is_special
FROM logged l
LEFT JOIN context_bins b ON l.prompt_tokens >= b.lo AND (b.hi IS NULL OR l.prompt_tokens < b.hi)
LEFT JOIN (
  SELECT
    request_id,
    count(*) AS output_token_count,
    stddev_samp(itl_ms) AS itl_std_ms,
    max(emitted_ms) FILTER (WHERE position = 0) AS first_token_emitted_ms,
    arg_max_null(emitted_ms, position) AS last_token_emitted_ms,
    arg_max_null(token, position) AS last_token,
    arg_max_null(logprob, position) AS last_token_logprob
  FROM token_rows
  GROUP BY request_id
) t ON t.request_id = l.request_id
"#;

/// jitter_requests and jitter (docs/metrics.md#jitter) over the columns above.
const JITTER_BY_DEFINITION: [&str; 2] = [
    "SELECT request_id, model, context_bin, output_token_count AS tokens, itl_std_ms,
       coalesce(first_token_emitted_ms, ttft_ms) AS first_token_ms,
       coalesce(last_token_emitted_ms, latency_ms) AS last_token_ms
     FROM per_token_by_definition WHERE output_token_count IS NOT NULL
     ORDER BY model, context_bin_lo NULLS LAST, request_id",
    "WITH timed AS (
       SELECT model, context_bin, context_bin_lo, itl_std_ms,
         coalesce(first_token_emitted_ms, ttft_ms) AS first_token_ms,
         coalesce(last_token_emitted_ms, latency_ms) AS last_token_ms
       FROM per_token_by_definition WHERE output_token_count IS NOT NULL)
     SELECT model, context_bin, count(*) AS requests,
       quantile_cont(itl_std_ms, 0.50) AS itl_std_p50_ms, quantile_cont(itl_std_ms, 0.95) AS itl_std_p95_ms,
       quantile_cont(first_token_ms, 0.50) AS first_token_p50_ms, quantile_cont(first_token_ms, 0.95) AS first_token_p95_ms,
       quantile_cont(first_token_ms, 0.99) AS first_token_p99_ms,
       quantile_cont(last_token_ms, 0.50) AS last_token_p50_ms, quantile_cont(last_token_ms, 0.95) AS last_token_p95_ms,
       quantile_cont(last_token_ms, 0.99) AS last_token_p99_ms,
       stddev_samp(last_token_ms - first_token_ms) AS tail_token_jitter_ms
     FROM timed GROUP BY model, context_bin, context_bin_lo ORDER BY model, context_bin_lo NULLS LAST",
];

/// eos_logprob (docs/metrics.md#eos_logprob): the last token an EOS marker
/// (trimmed; no special flags here), else the request's eos_status (from
/// `requests_by_definition`) implicit_truncation; other requests left out.
const EOS_LOGPROB_BY_DEFINITION: &str = "
WITH classified AS (
  SELECT t.model, t.context_bin, t.context_bin_lo, t.last_token_logprob AS logprob,
    CASE WHEN EXISTS (SELECT 1 FROM eos_markers m WHERE m.marker = regexp_replace(t.last_token, '^\\s+|\\s+$', '', 'g')) THEN 'eos_token'
         WHEN r.eos_status = 'implicit_truncation' THEN 'implicit_truncation' END AS last_token_kind
  FROM per_token_by_definition t JOIN requests_by_definition r USING (request_id)
  WHERE t.output_token_count IS NOT NULL)
SELECT model, context_bin, last_token_kind, count(*) AS requests, avg(logprob) AS logprob_mean,
  quantile_cont(logprob, 0.10) AS logprob_p10, quantile_cont(logprob, 0.50) AS logprob_p50,
  quantile_cont(logprob, 0.90) AS logprob_p90
FROM classified WHERE last_token_kind IS NOT NULL
GROUP BY model, context_bin, context_bin_lo, last_token_kind
ORDER BY model, context_bin_lo NULLS LAST, last_token_kind";

/// The jitter jobs and eos_logprob read each request's timings and last token
/// from `requests` columns derived at ingest. DuckDB computes those columns
/// from the log lines themselves by their definitions, and the three jobs from
/// them (the statements above, nothing from sql/), on generated requests plus
/// hand-made edge cases: token rows without times, a single token, logged
/// decode latencies (all or some positions), a missing time, arrays of
/// different lengths, EOS-marker last tokens, and a request without per-token
/// data (left out of the jobs). Every cell must agree.
#[test]
fn per_token_columns_and_jobs_agree_with_duckdb_reading_the_log() {
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
        // Logged decode latencies are the ITLs (12, 8, 10; not the times' 8, 10).
        r#"{"ts":"2024-06-01T00:00:03Z","request_id":"decoded","model":"m","prompt_tokens":10,"completion_tokens":3,"ttft_ms":100,"latency_ms":118,"token_times_ms":[100,108,118],"decode_latency_ms":[12,8,10]}"#,
        // Decode latencies for the first two positions only: the times' differences after.
        r#"{"ts":"2024-06-01T00:00:04Z","request_id":"decoded-short","model":"m","prompt_tokens":10,"completion_tokens":4,"ttft_ms":50,"latency_ms":80,"token_times_ms":[50,55,70,80],"decode_latency_ms":[5,7]}"#,
        // A missing time: no ITL on either side of it.
        r#"{"ts":"2024-06-01T00:00:05Z","request_id":"gappy","model":"m","prompt_tokens":10,"completion_tokens":5,"ttft_ms":10,"latency_ms":55,"token_times_ms":[10,20,null,40,55],"logprobs":[{"token":"a","logprob":-0.1},{"token":"b","logprob":-0.2},{"token":"c","logprob":-0.3},{"token":"d","logprob":-0.4},{"token":"e","logprob":-0.5}]}"#,
        // More logprobs than times: the last token has no time (latency_ms instead).
        r#"{"ts":"2024-06-01T00:00:06Z","request_id":"padded","model":"m","prompt_tokens":10,"completion_tokens":3,"ttft_ms":10,"latency_ms":95,"token_times_ms":[10,30],"logprobs":[{"token":"a","logprob":-0.1},{"token":"b","logprob":-0.2},{"token":"c","logprob":-0.3}]}"#,
        // More times than logprobs: the last token has no text or logprob.
        r#"{"ts":"2024-06-01T00:00:07Z","request_id":"times-longer","model":"m","prompt_tokens":10,"completion_tokens":4,"ttft_ms":10,"latency_ms":45,"token_times_ms":[10,20,30,45],"logprobs":[{"token":"a","logprob":-0.1},{"token":"b","logprob":-0.2}]}"#,
        // Last tokens that are EOS markers (one behind spaces): eos_token rows of eos_logprob.
        r#"{"ts":"2024-06-01T00:00:08Z","request_id":"eos-1","model":"m","prompt_tokens":2000,"completion_tokens":2,"max_tokens":10,"ttft_ms":10,"latency_ms":20,"model_output":"a</s>","token_times_ms":[10,20],"logprobs":[{"token":"a","logprob":-0.4},{"token":"</s>","logprob":-0.05}]}"#,
        r#"{"ts":"2024-06-01T00:00:09Z","request_id":"eos-2","model":"m","prompt_tokens":2001,"completion_tokens":2,"max_tokens":10,"ttft_ms":10,"latency_ms":30,"model_output":"a<|im_end|>","token_times_ms":[10,30],"logprobs":[{"token":"a","logprob":-0.3},{"token":" <|im_end|> ","logprob":-0.15}]}"#,
        // A silent truncation of the same bin.
        r#"{"ts":"2024-06-01T00:00:10Z","request_id":"cut","model":"m","prompt_tokens":2002,"completion_tokens":2,"max_tokens":10,"ttft_ms":10,"latency_ms":25,"model_output":"a b","token_times_ms":[10,25],"logprobs":[{"token":"a","logprob":-0.3},{"token":"b","logprob":-1.25}]}"#,
    ];
    let hand = write_file(dir.path(), "edge.jsonl", edge.join("\n") + "\n");
    let out = dir.path().join("ds");
    let summary = ingest(&[log.to_str().unwrap(), &hand], &out, &[]);
    assert_eq!(summary["totals"]["rows_written"].as_u64(), Some(400 + edge.len() as u64), "{summary}");
    let columns = "request_id, output_token_count, itl_std_ms, first_token_emitted_ms, last_token_emitted_ms, \
                   last_token, last_token_logprob, last_token_is_special";
    let logged = format!(
        "CREATE VIEW logged AS SELECT json ->> 'request_id' AS request_id, json ->> 'model' AS model, \
         CAST(json ->> 'prompt_tokens' AS BIGINT) AS prompt_tokens, CAST(json ->> 'ttft_ms' AS DOUBLE) AS ttft_ms, \
         CAST(json ->> 'latency_ms' AS DOUBLE) AS latency_ms, CAST(json -> 'token_times_ms' AS DOUBLE[]) AS times, \
         CAST(json -> 'decode_latency_ms' AS DOUBLE[]) AS decode, CAST(json -> 'logprobs' AS JSON[]) AS logprobs \
         FROM read_ndjson_objects(['{}', '{}'])",
        log.display(),
        hand
    );
    let mut setup = common::request_metrics_oracle(&out);
    setup.push(logged);
    setup.extend(TOKEN_COLUMNS_BY_DEFINITION.split(";\n").map(str::to_string));
    let queries = [
        format!("SELECT {columns} FROM per_token_by_definition ORDER BY request_id"),
        JITTER_BY_DEFINITION[0].to_string(),
        JITTER_BY_DEFINITION[1].to_string(),
        EOS_LOGPROB_BY_DEFINITION.to_string(),
    ];
    let oracle = common::duckdb_rows(&setup, &queries);
    let stored = query(&out, &format!("SELECT {columns} FROM requests ORDER BY request_id"));
    assert_eq!(stored.len(), 400 + edge.len(), "every request, with per-token data or not");
    for (name, theirs) in ["columns", "jitter_requests", "jitter", "eos_logprob"].into_iter().zip(&oracle) {
        let ours = if name == "columns" { stored.clone() } else { job(&out, name, &[]) };
        common::assert_rows_match(name, &ours, theirs, 1e-9);
    }
    let kinds: Vec<(&str, i64)> =
        oracle[3].iter().map(|r| (r["last_token_kind"].as_str().unwrap(), r["requests"].as_i64().unwrap())).collect();
    assert!(kinds.iter().any(|k| k == &("eos_token", 2)), "both marker last tokens in one group: {kinds:?}");
    assert!(kinds.iter().filter(|k| k.0 == "implicit_truncation").map(|k| k.1).sum::<i64>() > 20, "{kinds:?}");
    let per = job(&out, "jitter_requests", &[]);
    let row = |id: &str| per.iter().find(|r| r["request_id"] == id).cloned();
    let untimed = row("untimed").expect("untimed request listed");
    assert!(untimed["itl_std_ms"].is_null());
    assert_eq!((untimed["first_token_ms"].as_f64(), untimed["last_token_ms"].as_f64()), (Some(40.0), Some(70.0)));
    let single = row("single").expect("single-token request listed");
    assert!(single["itl_std_ms"].is_null());
    assert_eq!((single["tokens"].as_i64(), single["first_token_ms"].as_f64()), (Some(1), Some(31.0)));
    // ITLs 12, 8, 10: sample standard deviation 2.
    assert_eq!(row("decoded").expect("decoded listed")["itl_std_ms"].as_f64(), Some(2.0));
    assert!(row("plain").is_none(), "a request without per-token data is not a jitter row");
    assert_eq!(per.len(), 400 + edge.len() - 1);
}
