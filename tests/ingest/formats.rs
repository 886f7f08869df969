//! The observability-stack formats end to end: each sample in `sample_logs/`
//! is ingested alone and its `requests` rows (parsed and derived columns),
//! skips and rejects are compared with values worked out by hand from the
//! sample's lines (the expected table of each format is in the unit tests of
//! its module too; here they go through the reader, derive and Parquet).

use crate::common;

use std::path::Path;

use common::{ingest, query, repo};
use serde_json::Value;

/// Ingests one sample into its own dataset; returns the summary totals.
fn ingest_sample(name: &str, dir: &Path, extra: &[&str]) -> Value {
    let input = repo().join("sample_logs").join(name);
    let s = ingest(&[input.to_str().unwrap()], &dir.join("ds"), extra);
    s["totals"].clone()
}

/// The requests of the dataset, ordered by arrival.
fn requests(dir: &Path, columns: &str) -> Vec<Value> {
    query(&dir.join("ds"), &format!("SELECT {columns} FROM requests ORDER BY ts, request_id"))
}

/// Asserts one column of every row, in order.
fn column(rows: &[Value], name: &str, want: &[Value]) {
    let got: Vec<Value> = rows.iter().map(|r| r.get(name).cloned().unwrap_or(Value::Null)).collect();
    assert_eq!(got, want, "column {name}");
}

/// Asserts a float column within 1e-9 (nulls exactly).
fn floats(rows: &[Value], name: &str, want: &[Option<f64>]) {
    let got: Vec<Option<f64>> = rows.iter().map(|r| r.get(name).and_then(Value::as_f64)).collect();
    assert_eq!(got.len(), want.len(), "column {name}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        match (g, w) {
            (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{name}[{i}] = {g}, want {w}"),
            _ => assert_eq!(g, w, "{name}[{i}]"),
        }
    }
}

fn counts(t: &Value) -> [u64; 7] {
    [
        "lines_read",
        "lines_ingested",
        "rows_written",
        "lines_rejected",
        "lines_skipped",
        "records_skipped",
        "records_rejected",
    ]
    .map(|k| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {t}")))
}

/// The expected values of a column, as JSON (`null` for SQL NULL).
macro_rules! vals {
    ($($v:tt)*) => { serde_json::json!([$($v)*]).as_array().unwrap().clone() };
}

#[test]
fn otel_sample_one_request_per_inference_span() {
    let dir = tempfile::tempdir().unwrap();
    let t = ingest_sample("otel.jsonl", dir.path(), &[]);
    // 9 lines, the last cut short; 13 spans in the others: 7 requests, 5 spans
    // that are no model call, 1 failed call without usage.
    assert_eq!(counts(&t), [9, 8, 7, 1, 0, 5, 1]);
    let rows = requests(
        dir.path(),
        "request_id, CAST(ts AS VARCHAR) AS ts, model, session_id, prompt_tokens, completion_tokens, cached_tokens, \
         cache_write_tokens, reasoning_tokens, total_tokens, max_tokens, ttft_ms, latency_ms, prefill_latency_ms, \
         finish_reason_raw, finish_reason, eos_status, context_bin, has_eos_marker, tpot_ms, e2e_tps, \
         logged_cost_usd, model_output, source_format, source_line",
    );
    column(
        &rows,
        "request_id",
        &vals![
            "chatcmpl-otel-1",
            "msg_otel_2",
            "chatcmpl-otel-3",
            "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "cmpl-vllm-5",
            "cmpl-vllm-6",
            "d4cda95b652f4a1592b449d5929fda1b-6e0c63257de34c92"
        ],
    );
    column(
        &rows,
        "ts",
        &vals![
            "2024-06-01T12:00:00.010Z",
            "2024-06-01T12:01:00Z",
            "2024-06-01T12:02:00Z",
            "2024-06-01T12:03:00Z",
            "2024-06-01T12:04:00Z",
            "2024-06-01T12:05:00Z",
            "2024-06-01T12:06:00Z"
        ],
    );
    column(
        &rows,
        "model",
        &vals![
            "gpt-4o-2024-08-06",
            "claude-sonnet-4-5-20250929",
            "gpt-4o-mini-2024-07-18",
            "gpt-3.5-turbo-instruct",
            "meta-llama/Llama-3.1-8B-Instruct",
            "otel:otel",
            "gpt-4o"
        ],
    );
    column(&rows, "session_id", &vals!["conv-otel-1", "sess-otel-a", null, null, null, null, null]);
    column(&rows, "prompt_tokens", &vals![1200, 5000, 2048, 50, 900, 3000, 300]);
    column(&rows, "completion_tokens", &vals![85, 400, 512, 16, 128, 200, 40]);
    column(&rows, "cached_tokens", &vals![1024, 3000, 0, 0, 0, 0, 0]);
    column(&rows, "cache_write_tokens", &vals![0, 500, 0, 0, 0, 0, 0]);
    column(&rows, "reasoning_tokens", &vals![null, 120, null, null, null, null, null]);
    column(&rows, "total_tokens", &vals![1285, 5400, 2560, 66, 1028, 3200, 340]);
    column(&rows, "max_tokens", &vals![256, 1024, 512, null, 128, 512, null]);
    floats(&rows, "ttft_ms", &[Some(350.0), Some(1250.0), None, None, Some(85.0), Some(310.0), Some(900.0)]);
    floats(
        &rows,
        "latency_ms",
        &[Some(1400.0), Some(6250.0), Some(9000.0), Some(800.0), Some(2125.0), Some(4310.0), Some(30000.0)],
    );
    floats(&rows, "prefill_latency_ms", &[None, None, None, None, None, Some(250.0), None]);
    column(&rows, "finish_reason_raw", &vals!["stop", "end_turn", "length", "stop", null, "stop", "error"]);
    column(&rows, "finish_reason", &vals!["stop", "stop", "length", "stop", null, "stop", "error"]);
    // No raw output: stop gives eos; length, or 128 of max 128, gives length; an error is unknown.
    column(&rows, "eos_status", &vals!["eos", "eos", "length", "eos", "length", "eos", "unknown"]);
    column(&rows, "context_bin", &vals!["1K-2K", "4K-8K", "2K-4K", "0-1K", "0-1K", "2K-4K", "0-1K"]);
    column(&rows, "has_eos_marker", &vals![null, null, null, null, null, null, null]);
    // tpot = (latency - ttft) / (completion - 1); e2e = completion * 1000 / latency.
    floats(
        &rows,
        "tpot_ms",
        &[
            Some(1050.0 / 84.0),
            Some(5000.0 / 399.0),
            None,
            None,
            Some(2040.0 / 127.0),
            Some(4000.0 / 199.0),
            Some(29100.0 / 39.0),
        ],
    );
    floats(
        &rows,
        "e2e_tps",
        &[
            Some(85000.0 / 1400.0),
            Some(64.0),
            Some(512000.0 / 9000.0),
            Some(20.0),
            Some(128000.0 / 2125.0),
            Some(200000.0 / 4310.0),
            Some(40000.0 / 30000.0),
        ],
    );
    column(&rows, "logged_cost_usd", &vals![null, null, null, null, null, null, null]);
    column(
        &rows,
        "model_output",
        &vals![
            "Paris is the capital of France.",
            "The answer is 42.",
            "Once upon a time",
            "Hello there!",
            null,
            null,
            null
        ],
    );
    column(&rows, "source_line", &vals![1, 2, 3, 4, 5, 6, 7]);
    let rejects = query(&dir.path().join("ds"), "SELECT source_line, record, error FROM rejects ORDER BY source_line");
    assert_eq!(rejects.len(), 2);
    assert_eq!(
        (rejects[0]["source_line"].as_u64(), rejects[0]["record"].as_str()),
        (Some(7), Some("6e0c63257de34c93"))
    );
    assert!(rejects[0]["error"].as_str().unwrap().contains("error.type 429"));
    assert_eq!((rejects[1]["source_line"].as_u64(), rejects[1]["record"].as_str()), (Some(9), None));
}

#[test]
fn openai_responses_sample_status_as_finish_reason() {
    let dir = tempfile::tempdir().unwrap();
    let t = ingest_sample("openai_responses.jsonl", dir.path(), &[]);
    // 9 lines: 6 responses, 1 in-progress snapshot skipped, 1 failure without usage and 1 cut line rejected.
    assert_eq!(counts(&t), [9, 7, 6, 2, 0, 1, 0]);
    let rows = requests(
        dir.path(),
        "request_id, CAST(ts AS VARCHAR) AS ts, model, session_id, status, prompt_tokens, completion_tokens, \
         cached_tokens, cache_write_tokens, reasoning_tokens, total_tokens, max_tokens, ttft_ms, latency_ms, \
         finish_reason_raw, finish_reason, eos_status, context_bin, tpot_ms, e2e_tps, output_token_count, prompt, \
         model_output",
    );
    column(&rows, "request_id", &vals!["gw-resp-1", "resp_002", "gw-resp-3", "resp_004", "resp_006", "resp_007"]);
    column(
        &rows,
        "ts",
        &vals![
            "2024-06-01T12:00:00Z",
            "2024-06-01T12:01:00Z",
            "2024-06-01T12:02:00Z",
            "2024-06-01T12:03:00Z",
            "2024-06-01T12:05:00Z",
            "2024-06-01T12:06:00Z"
        ],
    );
    column(
        &rows,
        "model",
        &vals![
            "gpt-4o-2024-08-06",
            "o3-mini-2025-01-31",
            "gpt-4o-mini-2024-07-18",
            "gpt-4o-2024-08-06",
            "gpt-4o-2024-08-06",
            "gpt-4o-2024-08-06"
        ],
    );
    column(&rows, "session_id", &vals!["sess-r-1", null, null, null, null, null]);
    column(&rows, "status", &vals![200, null, null, null, null, null]);
    column(&rows, "prompt_tokens", &vals![1500, 200, 900, 50, 80, 40]);
    column(&rows, "completion_tokens", &vals![2, 900, 256, 3, 18, 9]);
    column(&rows, "cached_tokens", &vals![1024, 0, 0, 0, 0, 0]);
    column(&rows, "cache_write_tokens", &vals![0, 0, 0, 0, 0, 0]);
    column(&rows, "reasoning_tokens", &vals![0, 700, 0, 0, 0, 0]);
    column(&rows, "total_tokens", &vals![1502, 1100, 1156, 53, 98, 49]);
    column(&rows, "max_tokens", &vals![256, null, 256, 1024, null, null]);
    floats(&rows, "ttft_ms", &[Some(420.0), None, Some(300.0), None, None, None]);
    floats(&rows, "latency_ms", &[Some(1800.0), None, Some(5500.0), None, None, None]);
    column(
        &rows,
        "finish_reason_raw",
        &vals!["stop", "stop", "max_output_tokens", "content_filter", "tool_calls", "refusal"],
    );
    column(&rows, "finish_reason", &vals!["stop", "stop", "length", "content_filter", "tool_calls", "content_filter"]);
    column(&rows, "eos_status", &vals!["eos", "eos", "length", "unknown", "eos", "unknown"]);
    column(&rows, "context_bin", &vals!["1K-2K", "0-1K", "0-1K", "0-1K", "0-1K", "0-1K"]);
    floats(&rows, "tpot_ms", &[Some(1380.0), None, Some(5200.0 / 255.0), None, None, None]);
    floats(&rows, "e2e_tps", &[Some(2000.0 / 1800.0), None, Some(256000.0 / 5500.0), None, None, None]);
    column(&rows, "output_token_count", &vals![2, null, null, null, null, null]);
    column(
        &rows,
        "prompt",
        &vals![
            "What is the capital of France?",
            null,
            r#"[{"role":"user","content":"Tell me a long story."}]"#,
            null,
            null,
            null
        ],
    );
    column(&rows, "model_output", &vals!["Paris.", "42", "Once upon a time", "I can", null, null]);
    let tokens = query(
        &dir.path().join("ds"),
        "SELECT position, token, logprob, top1_margin FROM tokens WHERE request_id = 'gw-resp-1' ORDER BY position",
    );
    column(&tokens, "token", &vals!["Paris", "."]);
    floats(&tokens, "logprob", &[Some(-0.01), Some(-0.2)]);
    // top1_margin = logprob(top1) - logprob(top2): -0.01 - -4.7 and -0.2 - -1.8.
    floats(&tokens, "top1_margin", &[Some(4.69), Some(1.6)]);
    let rejects = query(&dir.path().join("ds"), "SELECT source_line, record, error FROM rejects ORDER BY source_line");
    column(&rejects, "source_line", &vals![5, 9]);
    assert!(rejects[0]["error"].as_str().unwrap().contains("server_error"));
}

#[test]
fn helicone_sample_adds_the_cache_back_to_prompt_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let t = ingest_sample("helicone.jsonl", dir.path(), &[]);
    // 10 lines: 5 requests, a cache hit and an embeddings call skipped, an HTTP 429, an
    // uncounted stream (-1) and a malformed row rejected.
    assert_eq!(counts(&t), [10, 7, 5, 3, 0, 2, 0]);
    let rows = requests(
        dir.path(),
        "request_id, CAST(ts AS VARCHAR) AS ts, model, status, prompt_tokens, completion_tokens, cached_tokens, \
         cache_write_tokens, reasoning_tokens, total_tokens, max_tokens, ttft_ms, latency_ms, finish_reason_raw, \
         finish_reason, eos_status, context_bin, tpot_ms, e2e_tps, logged_cost_usd, model_output, extra",
    );
    column(
        &rows,
        "request_id",
        &vals![
            "a0e1b2c3-0000-4000-8000-000000000001",
            "a0e1b2c3-0000-4000-8000-000000000002",
            "a0e1b2c3-0000-4000-8000-000000000003",
            "a0e1b2c3-0000-4000-8000-000000000004",
            "a0e1b2c3-0000-4000-8000-000000000005"
        ],
    );
    column(
        &rows,
        "ts",
        &vals![
            "2024-06-01T12:00:00Z",
            "2024-06-01T12:01:00Z",
            "2024-06-01T12:02:00Z",
            "2024-06-01T12:03:00Z",
            "2024-06-01T12:04:00.250Z"
        ],
    );
    column(
        &rows,
        "model",
        &vals![
            "gpt-4o-2024-08-06",
            "claude-sonnet-4-5-20250929",
            "gpt-4o-mini-2024-07-18",
            "o3-mini-2025-01-31",
            "gpt-4o-mini-2024-07-18"
        ],
    );
    column(&rows, "status", &vals![200, 200, 200, 200, 200]);
    // Helicone's prompt_tokens (476, 500, 1500, 200, 900) plus cache reads and writes.
    column(&rows, "prompt_tokens", &vals![1500, 4600, 1500, 200, 900]);
    column(&rows, "completion_tokens", &vals![85, 300, 60, 900, 256]);
    column(&rows, "cached_tokens", &vals![1024, 4000, 0, 0, 0]);
    column(&rows, "cache_write_tokens", &vals![0, 100, 0, 0, 0]);
    column(&rows, "reasoning_tokens", &vals![null, null, null, 700, null]);
    column(&rows, "total_tokens", &vals![1585, 4900, 1560, 1100, 1156]);
    column(&rows, "max_tokens", &vals![null, 1024, null, null, 256]);
    floats(&rows, "ttft_ms", &[Some(420.0), Some(950.0), None, Some(4500.0), None]);
    floats(&rows, "latency_ms", &[Some(1800.0), Some(5500.0), Some(3000.0), Some(6000.0), Some(5500.0)]);
    column(&rows, "finish_reason_raw", &vals![null, "end_turn", null, "stop", "length"]);
    column(&rows, "finish_reason", &vals![null, "stop", null, "stop", "length"]);
    column(&rows, "eos_status", &vals!["unknown", "eos", "unknown", "eos", "length"]);
    column(&rows, "context_bin", &vals!["1K-2K", "4K-8K", "1K-2K", "0-1K", "0-1K"]);
    floats(&rows, "tpot_ms", &[Some(1380.0 / 84.0), Some(4550.0 / 299.0), None, Some(1500.0 / 899.0), None]);
    floats(
        &rows,
        "e2e_tps",
        &[Some(85000.0 / 1800.0), Some(300000.0 / 5500.0), Some(20.0), Some(150.0), Some(256000.0 / 5500.0)],
    );
    floats(&rows, "logged_cost_usd", &[Some(0.00332), Some(0.0141), Some(0.000297), Some(0.00418), Some(0.0002885)]);
    column(&rows, "model_output", &vals![null, "Here is the summary.", null, "42", "Once upon a time"]);
    // The pre-signed body URL is never stored.
    let all = query(&dir.path().join("ds"), "SELECT count(*) AS n FROM requests WHERE extra LIKE '%amazonaws%'");
    assert_eq!(all[0]["n"], 0);
    let rejects = query(&dir.path().join("ds"), "SELECT source_line, error FROM rejects ORDER BY source_line");
    column(&rejects, "source_line", &vals![6, 7, 10]);
}

/// No column of any table holds the sample's hashed API keys.
fn assert_no_api_key_hashes(data: &Path) {
    for hash in [
        "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",
        "1b4f0e9851971998e732078544c96b36c3d01cedf7caa332359d6f1d83567014",
    ] {
        let found = query(
            data,
            &format!(
                "SELECT (SELECT count(*) FROM requests WHERE concat_ws('|', request_id, session_id, model, prompt, model_output, extra) LIKE '%{hash}%') \
                 + (SELECT count(*) FROM rejects WHERE CAST(raw_line AS VARCHAR) LIKE '%{hash}%' OR error LIKE '%{hash}%') AS n"
            ),
        );
        assert_eq!(found[0]["n"], 0, "hash {hash} stored");
    }
}

#[test]
fn litellm_payloads_from_bucket_logging() {
    let dir = tempfile::tempdir().unwrap();
    let t = ingest_sample("litellm.jsonl", dir.path(), &[]);
    // 9 objects: 4 calls; a response-cache hit, an embedding call and an audit-log object
    // skipped; a failure without usage and a cut object rejected.
    assert_eq!(counts(&t), [9, 7, 4, 2, 0, 3, 0]);
    let rows = requests(
        dir.path(),
        "request_id, CAST(ts AS VARCHAR) AS ts, model, status, prompt_tokens, completion_tokens, cached_tokens, \
         cache_write_tokens, reasoning_tokens, total_tokens, max_tokens, ttft_ms, latency_ms, finish_reason_raw, \
         finish_reason, eos_status, context_bin, tpot_ms, e2e_tps, logged_cost_usd, prompt, model_output",
    );
    column(&rows, "request_id", &vals!["chatcmpl-ll-1", "chatcmpl-ll-2", "chatcmpl-ll-3", "chatcmpl-ll-4"]);
    column(
        &rows,
        "ts",
        &vals!["2024-06-01T12:00:00Z", "2024-06-01T12:01:00Z", "2024-06-01T12:02:00Z", "2024-06-01T12:03:00.250Z"],
    );
    column(
        &rows,
        "model",
        &vals!["gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929", "o3-mini-2025-01-31", "gpt-4o-mini-2024-07-18"],
    );
    column(&rows, "status", &vals![null, null, null, null]);
    column(&rows, "prompt_tokens", &vals![1500, 4600, 200, 900]);
    column(&rows, "completion_tokens", &vals![120, 300, 900, 256]);
    column(&rows, "cached_tokens", &vals![1024, 4000, 0, 0]);
    column(&rows, "cache_write_tokens", &vals![0, 100, 0, 0]);
    column(&rows, "reasoning_tokens", &vals![0, null, 700, null]);
    column(&rows, "total_tokens", &vals![1620, 4900, 1100, 1156]);
    column(&rows, "max_tokens", &vals![256, null, null, 256]);
    // Only streamed calls have a time to first token (completionStartTime - startTime).
    floats(&rows, "ttft_ms", &[None, Some(950.0), Some(4500.0), None]);
    // endTime - startTime, each rounded to the microsecond first: 1717243201.8 - 1717243200.0 is 1800.
    floats(&rows, "latency_ms", &[Some(1800.0), Some(5500.0), Some(6000.0), Some(5500.0)]);
    column(&rows, "finish_reason_raw", &vals!["stop", "stop", "stop", "length"]);
    column(&rows, "finish_reason", &vals!["stop", "stop", "stop", "length"]);
    column(&rows, "eos_status", &vals!["eos", "eos", "eos", "length"]);
    column(&rows, "context_bin", &vals!["1K-2K", "4K-8K", "0-1K", "0-1K"]);
    floats(&rows, "tpot_ms", &[None, Some(4550.0 / 299.0), Some(1500.0 / 899.0), None]);
    floats(&rows, "e2e_tps", &[Some(120000.0 / 1800.0), Some(300000.0 / 5500.0), Some(150.0), Some(256000.0 / 5500.0)]);
    floats(&rows, "logged_cost_usd", &[Some(0.00367), Some(0.0141), Some(0.00418), Some(0.0002885)]);
    column(
        &rows,
        "prompt",
        &vals![
            r#"[{"role": "user", "content": "What is the capital of France?"}]"#,
            r#"[{"role": "user", "content": "Summarise this document."}]"#,
            r#"[{"role": "user", "content": "What is 6 times 7?"}]"#,
            r#"[{"role": "user", "content": "Tell me a long story."}]"#
        ],
    );
    column(&rows, "model_output", &vals!["Paris.", "Here is the summary.", "42", "Once upon a time"]);
    let rejects = query(&dir.path().join("ds"), "SELECT source_line, error FROM rejects ORDER BY source_line");
    column(&rejects, "source_line", &vals![6, 9]);
    assert!(rejects[0]["error"].as_str().unwrap().contains("RateLimitError 429"));
    assert_no_api_key_hashes(&dir.path().join("ds"));
}

#[test]
fn litellm_spend_logs_csv_read_by_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let t = ingest_sample("litellm_spendlogs.csv", dir.path(), &[]);
    // A header and 8 rows: 4 calls; a cache hit and an embedding call skipped; a failure
    // without usage and a short row rejected.
    assert_eq!(counts(&t), [8, 6, 4, 2, 1, 2, 0]);
    let rows = requests(
        dir.path(),
        "request_id, CAST(ts AS VARCHAR) AS ts, model, session_id, prompt_tokens, completion_tokens, cached_tokens, \
         cache_write_tokens, reasoning_tokens, ttft_ms, latency_ms, finish_reason_raw, eos_status, logged_cost_usd, \
         prompt, model_output",
    );
    column(&rows, "request_id", &vals!["chatcmpl-sl-1", "chatcmpl-sl-2", "chatcmpl-sl-3", "chatcmpl-sl-4"]);
    column(
        &rows,
        "ts",
        &vals!["2024-06-01T12:00:00Z", "2024-06-01T12:01:00Z", "2024-06-01T12:02:00Z", "2024-06-01T12:03:00.250Z"],
    );
    column(
        &rows,
        "model",
        &vals!["gpt-4o", "claude-sonnet-4-5-20250929", "o3-mini-2025-01-31", "gpt-4o-mini-2024-07-18"],
    );
    column(&rows, "session_id", &vals!["sess-a", "sess-b", null, null]);
    column(&rows, "prompt_tokens", &vals![1500, 4600, 200, 900]);
    column(&rows, "completion_tokens", &vals![120, 300, 900, 256]);
    column(&rows, "cached_tokens", &vals![1024, 4000, 0, 0]);
    column(&rows, "cache_write_tokens", &vals![0, 100, 0, 0]);
    column(&rows, "reasoning_tokens", &vals![0, null, 700, null]);
    floats(&rows, "ttft_ms", &[None, Some(950.0), Some(4500.0), None]);
    floats(&rows, "latency_ms", &[Some(1800.0), Some(5500.0), Some(6000.0), Some(5500.0)]);
    column(&rows, "finish_reason_raw", &vals![null, null, null, "length"]);
    column(&rows, "eos_status", &vals!["unknown", "unknown", "unknown", "length"]);
    floats(&rows, "logged_cost_usd", &[Some(0.00367), Some(0.0141), Some(0.00418), Some(0.0002885)]);
    column(&rows, "prompt", &vals![null, null, null, r#"[{"role": "user", "content": "Tell me a long story."}]"#]);
    column(&rows, "model_output", &vals![null, null, null, "Once upon a time"]);
    let rejects = query(&dir.path().join("ds"), "SELECT source_line, error FROM rejects ORDER BY source_line");
    column(&rejects, "source_line", &vals![7, 9]);
    assert!(rejects[1]["error"].as_str().unwrap().contains("expected 29 cells"));
    assert_no_api_key_hashes(&dir.path().join("ds"));
}

#[test]
fn langfuse_generations_from_an_observations_export() {
    let dir = tempfile::tempdir().unwrap();
    let t = ingest_sample("langfuse.jsonl", dir.path(), &[]);
    // 10 observations: 6 generations, a span and an event skipped, an errored generation
    // without usage and a cut row rejected.
    assert_eq!(counts(&t), [10, 8, 6, 2, 0, 2, 0]);
    let rows = requests(
        dir.path(),
        "request_id, CAST(ts AS VARCHAR) AS ts, model, session_id, prompt_tokens, completion_tokens, cached_tokens, \
         cache_write_tokens, reasoning_tokens, total_tokens, max_tokens, ttft_ms, latency_ms, finish_reason_raw, \
         eos_status, context_bin, tpot_ms, e2e_tps, logged_cost_usd, prompt, model_output",
    );
    column(
        &rows,
        "request_id",
        &vals!["obs-gen-1", "obs-gen-3", "obs-gen-4", "obs-gen-5", "obs-gen-6", "a1b2c3d4e5f60708"],
    );
    column(
        &rows,
        "ts",
        &vals![
            "2024-06-01T12:00:00Z",
            "2024-06-01T12:01:00Z",
            "2024-06-01T12:02:00Z",
            "2024-06-01T12:03:00Z",
            "2024-06-01T12:04:00.250Z",
            "2024-06-01T12:07:00Z"
        ],
    );
    column(
        &rows,
        "model",
        &vals![
            "gpt-4o-2024-08-06",
            "claude-sonnet-4-5-20250929",
            "claude-3-5-haiku-20241022",
            "o3-mini-2025-01-31",
            "gpt-4o-mini-2024-07-18",
            "gpt-4o-mini-2024-07-18"
        ],
    );
    column(&rows, "session_id", &vals![null, null, null, null, null, "sess-lf-1"]);
    // usage_details.input excludes the cache: input + input_* + Anthropic's cache keys.
    column(&rows, "prompt_tokens", &vals![1500, 4600, 2000, 200, 900, 1200]);
    column(&rows, "completion_tokens", &vals![85, 300, 150, 900, 256, 64]);
    column(&rows, "cached_tokens", &vals![1024, 4000, 1800, 0, 0, 0]);
    column(&rows, "cache_write_tokens", &vals![0, 100, 0, 0, 0, 0]);
    column(&rows, "reasoning_tokens", &vals![null, null, null, 700, null, null]);
    column(&rows, "total_tokens", &vals![1585, 4900, 2150, 1100, 1156, 1264]);
    column(&rows, "max_tokens", &vals![256, 1024, 64, null, 256, 128]);
    floats(&rows, "ttft_ms", &[Some(420.0), Some(950.0), None, Some(4500.0), None, Some(300.0)]);
    floats(&rows, "latency_ms", &[Some(1800.0), Some(5500.0), Some(3000.0), Some(6000.0), Some(5500.0), Some(2500.0)]);
    column(&rows, "finish_reason_raw", &vals![null, null, null, null, "length", null]);
    // No finish reason: length when completion_tokens >= max_tokens (150 >= 64), else unknown.
    column(&rows, "eos_status", &vals!["unknown", "unknown", "length", "unknown", "length", "unknown"]);
    column(&rows, "context_bin", &vals!["1K-2K", "4K-8K", "1K-2K", "0-1K", "0-1K", "1K-2K"]);
    floats(
        &rows,
        "tpot_ms",
        &[Some(1380.0 / 84.0), Some(4550.0 / 299.0), None, Some(1500.0 / 899.0), None, Some(2200.0 / 63.0)],
    );
    floats(
        &rows,
        "e2e_tps",
        &[
            Some(85000.0 / 1800.0),
            Some(300000.0 / 5500.0),
            Some(50.0),
            Some(150.0),
            Some(256000.0 / 5500.0),
            Some(25.6),
        ],
    );
    floats(
        &rows,
        "logged_cost_usd",
        &[Some(0.00332), Some(0.007575), Some(0.000904), Some(0.00418), Some(0.0002885), Some(0.0002184)],
    );
    column(
        &rows,
        "prompt",
        &vals![
            r#"[{"role":"user","content":"What is the capital of France?"}]"#,
            r#"[{"role":"user","content":"Summarise this document."}]"#,
            r#"[{"role":"user","content":"Say sure."}]"#,
            r#"[{"role":"user","content":"What is 6 times 7?"}]"#,
            r#"[{"role":"user","content":"Tell me a long story."}]"#,
            "hi"
        ],
    );
    column(
        &rows,
        "model_output",
        &vals!["Paris.", "Here is the summary.", "Sure.", "42", "Once upon a time", "Hello! How can I help?"],
    );
    let rejects = query(&dir.path().join("ds"), "SELECT source_line, error FROM rejects ORDER BY source_line");
    column(&rejects, "source_line", &vals![7, 10]);
}

#[test]
fn langfuse_csv_and_gzipped_json_array_exports_with_time_unit() {
    let dir = tempfile::tempdir().unwrap();
    let csv = concat!(
        r#""id","trace_id","type","start_time","end_time","completion_start_time","provided_model_name","usage_details","total_cost","latency","time_to_first_token","input","output","metadata""#,
        "\n",
        r#""g1","t1","GENERATION","2024-06-01 12:00:00.000","2024-06-01 12:00:01.000","2024-06-01 12:00:00.200","gpt-4o","{""input"":""40"",""input_cached_tokens"":""60"",""output"":""5""}","0.001","1000","200","""hello""","{""role"":""assistant"",""content"":""hi there""}","{""finish_reason"":""stop""}""#,
        "\n",
        r#""s1","t1","SPAN","2024-06-01 12:00:00.000","","","","{}","","","","","","{}""#,
        "\n",
    );
    let csv_path = common::write_file(dir.path(), "observations.csv", csv);
    // A JSON-format export: one array on one line, gzip-compressed; the second generation
    // has no end or first-token timestamps, so its duration columns are read in --time-unit.
    let array = r#"[{"id":"g2","trace_id":"t2","type":"GENERATION","start_time":"2024-06-01 13:00:00.000","provided_model_name":"gpt-4o","usage_details":{"input":7,"output":3},"latency":2500,"time_to_first_token":300},{"id":"e1","trace_id":"t2","type":"EVENT","start_time":"2024-06-01 13:00:00.000","usage_details":{}},{"id":"g3","trace_id":"t2","type":"GENERATION","level":"ERROR","status_message":"boom","start_time":"2024-06-01 13:00:01.000","usage_details":{}}]"#;
    let gz = common::gzip(array.as_bytes(), flate2::Compression::default());
    let gz_path = common::write_file(dir.path(), "observations.json.gz", gz);
    let s = ingest(&[&csv_path, &gz_path], &dir.path().join("ds"), &["--time-unit", "ms"]);
    // CSV: a header, a generation, a span; JSON: one line of three observations.
    assert_eq!(counts(&s["totals"]), [3, 3, 2, 0, 1, 2, 1]);
    let rows = requests(dir.path(), "request_id, source_format, prompt_tokens, cached_tokens, completion_tokens, ttft_ms, latency_ms, finish_reason_raw, logged_cost_usd, prompt, model_output");
    column(&rows, "request_id", &vals!["g1", "g2"]);
    column(&rows, "source_format", &vals!["langfuse", "langfuse"]);
    column(&rows, "prompt_tokens", &vals![100, 7]);
    column(&rows, "cached_tokens", &vals![60, 0]);
    column(&rows, "completion_tokens", &vals![5, 3]);
    // g1 from its timestamps; g2 from its columns, in milliseconds as --time-unit says.
    floats(&rows, "ttft_ms", &[Some(200.0), Some(300.0)]);
    floats(&rows, "latency_ms", &[Some(1000.0), Some(2500.0)]);
    column(&rows, "finish_reason_raw", &vals!["stop", null]);
    floats(&rows, "logged_cost_usd", &[Some(0.001), None]);
    column(&rows, "prompt", &vals!["hello", null]);
    column(&rows, "model_output", &vals!["hi there", null]);
    let rejects = query(&dir.path().join("ds"), "SELECT source_line, record, error FROM rejects");
    column(&rejects, "record", &vals!["[2]"]);
    assert!(rejects[0]["error"].as_str().unwrap().contains("boom"));
}

#[test]
fn langfuse_parquet_export_reads_as_its_json_lines() {
    // pyarrow writes the sample's parseable lines as a typed Parquet export (UTC and naive
    // timestamps, maps for usage/cost/metadata, 4-row row groups); each must ingest to the
    // same requests and rejects as the same lines as JSON.
    let dir = tempfile::tempdir().unwrap();
    let sample = repo().join("sample_logs/langfuse.jsonl");
    let text = std::fs::read_to_string(&sample).unwrap();
    let valid: String =
        text.lines().filter(|l| serde_json::from_str::<Value>(l).is_ok()).map(|l| format!("{l}\n")).collect();
    let jsonl = common::write_file(dir.path(), "valid.jsonl", valid.as_str());
    let script = repo().join("tests/support/langfuse_parquet.py");
    let columns = "request_id, ts, model, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, \
                   ttft_ms, latency_ms, finish_reason_raw, eos_status, logged_cost_usd, max_tokens, prompt, model_output, \
                   source_format, source_line";
    let from_json = {
        ingest(&[&jsonl], &dir.path().join("json"), &[]);
        query(&dir.path().join("json"), &format!("SELECT {columns} FROM requests ORDER BY request_id"))
    };
    let json_rejects = query(&dir.path().join("json"), "SELECT source_line, error FROM rejects ORDER BY source_line");
    assert!(from_json.len() >= 6 && !json_rejects.is_empty());
    for (name, flags) in [("utc.parquet", ""), ("naive.parquet", "--naive")] {
        let out = dir.path().join(name);
        let mut cmd = std::process::Command::new("python3");
        cmd.arg(&script).arg(&jsonl).arg(&out);
        if !flags.is_empty() {
            cmd.arg(flags);
        }
        let made = cmd.output().expect("python3 with pyarrow");
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let ds = dir.path().join(format!("ds-{name}"));
        let s = ingest(&[out.to_str().unwrap()], &ds, &[]);
        assert_eq!(s["totals"]["lines_read"], valid.lines().count() as u64, "{name}: one line per row");
        let rows = query(&ds, &format!("SELECT {columns} FROM requests ORDER BY request_id"));
        assert_eq!(rows, from_json, "{name}");
        assert_eq!(query(&ds, "SELECT source_line, error FROM rejects ORDER BY source_line"), json_rejects, "{name}");
    }
    // A file with Parquet's magic but no footer is an error naming it, not a panic.
    let bad = common::write_file(dir.path(), "cut.parquet", "PAR1 not a footer");
    let out = common::tokscope_output(&["ingest", &bad, "--out", dir.path().join("bad").to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cut.parquet") && err.contains("not a readable Parquet file"), "{err}");
}

/// `tokscope formats --check` over the files the tools wrote themselves
/// (`tests/data/real/`): one row per file, as ingest would read it.
#[test]
fn the_conformance_report_over_the_real_files() {
    let real: Vec<String> = ["*.json", "*.jsonl", "*.ndjson", "*.sse"]
        .iter()
        .map(|g| repo().join("tests/data/real").join(g).to_str().unwrap().to_string())
        .collect();
    let mut args = vec!["formats", "--check"];
    args.extend(real.iter().map(String::as_str));
    let out = std::process::Command::new(common::bin()).args(&args).current_dir(repo()).output().unwrap();
    // Langfuse's page holds a failed generation without usage: one record
    // rejected; Bedrock's log a call a guardrail blocked, without counts.
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    let want = "\
file                                                        format         framing       lines  rows  rejected  records_rejected  unmapped  first_error
tests/data/real/anthropic_sdk_messages.jsonl                anthropic      lines             3     3         0                 0         0  -
tests/data/real/bedrock_cloudwatch_insights.json            bedrock        json_records      1     1         0                 0         0  -
tests/data/real/bedrock_converse.jsonl                      bedrock        lines             4     4         0                 0         0  -
tests/data/real/bedrock_invocation_built.jsonl              bedrock        lines             3     2         1                 0         0  invocation log record without input.inputTokenCount and output.outputTokenCount (stop reason guardrail_intervened): a call that was blocked or failed
tests/data/real/bedrock_invocation_log.json                 bedrock        json_records      1     1         0                 0         0  -
tests/data/real/cohere_chat.jsonl                           cohere         lines             4     4         0                 0         0  -
tests/data/real/cohere_stream_chunks.jsonl                  cohere         lines            11     1         0                 0         0  -
tests/data/real/cohere_vercel.jsonl                         cohere         lines             3     3         0                 0         0  -
tests/data/real/gemini_generate_content.jsonl               gemini         lines             2     2         0                 0         0  -
tests/data/real/gemini_stream.sse                           gemini_stream  event_stream      1     1         0                 0         0  -
tests/data/real/gemini_stream_array.json                    gemini         lines             1     1         0                 0         0  -
tests/data/real/gemini_stream_chunks.jsonl                  gemini         lines             3     1         0                 0         0  -
tests/data/real/gemini_vercel.jsonl                         gemini         lines             2     2         0                 0         0  -
tests/data/real/groq_chat.jsonl                             openai_chat    lines             2     2         0                 0         0  -
tests/data/real/groq_stream.sse                             openai_stream  event_stream      1     1         0                 0         0  -
tests/data/real/groq_stream_x_groq.sse                      openai_stream  event_stream      1     1         0                 0         0  -
tests/data/real/langfuse_api_observations.json              langfuse       json_records      1     1         0                 1         0  generation without usage_details (level ERROR: 429 Rate limit reached)
tests/data/real/langfuse_api_observations_attribution.json  langfuse       json_records      1     2         0                 0         0  -
tests/data/real/litellm_gcs.ndjson                          litellm        lines             4     4         0                 0         0  -
tests/data/real/litellm_gcs_attribution.ndjson              litellm        lines             2     2         0                 0         0  -
tests/data/real/litellm_pubsub_v1.ndjson                    litellm        lines             4     4         0                 0         0  -
tests/data/real/litellm_pubsub_v1_attribution.ndjson        litellm        lines             2     2         0                 0         0  -
tests/data/real/mistral_chat.jsonl                          openai_chat    lines             2     2         0                 0         0  -
tests/data/real/mixed_providers.jsonl                       openai_chat    lines             8     8         0                 0         0  -
tests/data/real/ollama_chat_stream.ndjson                   ollama_stream  event_stream      1     1         0                 0         0  -
tests/data/real/ollama_responses.jsonl                      ollama         lines             3     3         0                 0         0  -
tests/data/real/openai_stream.sse                           openai_stream  event_stream      2     2         0                 0         0  -
tests/data/real/otel_langfuse_attribution.jsonl             otel           lines             1     2         0                 0         0  -
tests/data/real/otel_openinference.jsonl                    otel           lines             3     3         0                 0         0  -
tests/data/real/otel_openinference_attribution.jsonl        otel           lines             2     2         0                 0         0  -
tests/data/real/otel_openllmetry.jsonl                      otel           lines             3     3         0                 0         0  -
tests/data/real/otel_openllmetry_attribution.jsonl          otel           lines             2     2         0                 0         0  -
tests/data/real/otel_vllm.jsonl                             otel           lines             2     2         0                 0         0  -
tests/data/real/tgi_flash_llama.json                        tgi            json_records      1     1         0                 0         0  -
tests/data/real/tgi_flash_llama_all_params.json             tgi            json_records      1     1         0                 0         0  -
tests/data/real/tgi_flash_llama_grammar_json.json           tgi            json_records      1     1         0                 0         0  -
tests/data/real/vllm_request_outputs.jsonl                  vllm           lines             2     2         0                 0         0  -
37 file(s), 2 with rejects
";
    assert_eq!(table, want);
    // Without the file that rejects: exit 0; --json gives each file's counts.
    let clean = repo().join("tests/data/real/tgi_flash_llama.json");
    let out = common::tokscope_output(&["formats", "--check", clean.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let checks: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &checks[0];
    assert_eq!((c["format"].as_str(), c["framing"].as_str()), (Some("tgi"), Some("json_records")));
    assert_eq!((c["rows_written"].as_u64(), c["tokens_written"].as_u64()), (Some(1), Some(10)));
    assert!(c["file"].as_str().unwrap().ends_with("tgi_flash_llama.json"));
    // A format forced on a file that is not in it: every line rejected, exit 4.
    let out = common::tokscope_output(&["formats", "--check", clean.to_str().unwrap(), "--format", "canonical"]);
    assert_eq!(out.status.code(), Some(4));
    // No input: the registered formats, one per line.
    let list = common::tokscope(&["formats"]);
    assert!(list.lines().any(|l| l.starts_with("openai_stream ")), "{list}");
    assert_eq!(list.lines().count(), tokscope::formats::Format::names().len());
}

/// The ingest summary names the requests kept with an optional field nulled.
#[test]
fn the_summary_line_counts_nulled_fields() {
    let dir = tempfile::tempdir().unwrap();
    let line = |cap: &str| {
        format!("{{\"ts\":0,\"request\":{{\"max_tokens\":{cap}}},\"response\":{{\"object\":\"chat.completion\",\"choices\":[],\"usage\":{{\"prompt_tokens\":1,\"completion_tokens\":2}}}}}}\n")
    };
    let log = common::write_file(dir.path(), "f.jsonl", [line("-1"), line("64")].concat());
    let out = common::tokscope_output(&["ingest", &log, "--out", dir.path().join("a").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("rows_written=2 lines_rejected=0") && err.contains(" fields_nulled=1 in "),
        "{err}"
    );
}

/// The ingest summary names finish reasons outside the table when there are some.
#[test]
fn the_summary_line_counts_unmapped_finish_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let line = |f: &str| {
        format!("{{\"ts\":0,\"model\":\"m\",\"prompt_tokens\":1,\"completion_tokens\":2,\"finish_reason\":\"{f}\"}}\n")
    };
    let log = common::write_file(dir.path(), "f.jsonl", [line("stop"), line("SOMETHING_NEW")].concat());
    let out = common::tokscope_output(&["ingest", &log, "--out", dir.path().join("a").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains(" finish_reasons_unmapped=1 in "), "{err}");
    let clean = common::write_file(dir.path(), "g.jsonl", line("stop"));
    let out = common::tokscope_output(&["ingest", &clean, "--out", dir.path().join("b").to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("finish_reasons_unmapped"));
}
