//! Ingest of the real public traces in `shared/real_logs/`: row counts and
//! token sums are computed independently here, from the raw files.

use crate::common;

use common::{data_dir, ingest, query};

/// `(rows, sum ContextTokens, sum GeneratedTokens, rows at exactly 1000 generated)` read straight from the CSV.
fn azure_truth(path: &std::path::Path) -> (u64, i64, i64, u64) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut rows = 0;
    let (mut ctx, mut gen, mut at_1000) = (0i64, 0i64, 0u64);
    for line in text.split("\r\n").skip(1).filter(|l| !l.is_empty()) {
        let cols: Vec<&str> = line.split(',').collect();
        rows += 1;
        ctx += cols[1].parse::<i64>().unwrap();
        let g = cols[2].parse::<i64>().unwrap();
        gen += g;
        at_1000 += (g == 1000) as u64;
    }
    (rows, ctx, gen, at_1000)
}

#[test]
fn azure_traces_ingest_every_row_with_exact_token_sums() {
    let dir = tempfile::tempdir().unwrap();
    let azure = data_dir().join("real_logs/azure_llm_2023");
    let code = azure.join("AzureLLMInferenceTrace_code.csv");
    let conv = azure.join("AzureLLMInferenceTrace_conv.csv");
    let summary = ingest(&[azure.to_str().unwrap()], dir.path(), &[]);
    let (code_rows, code_ctx, code_gen, _) = azure_truth(&code);
    let (conv_rows, conv_ctx, conv_gen, conv_1000) = azure_truth(&conv);
    assert_eq!((code_rows, conv_rows), (8819, 19366), "README's row counts");
    assert_eq!(summary["totals"]["rows_written"], code_rows + conv_rows);
    assert_eq!(summary["totals"]["lines_rejected"], 0);
    assert_eq!(summary["totals"]["lines_skipped"], 2, "one header per file");

    let rows = query(
        dir.path(),
        "SELECT model, count(*) AS n, sum(prompt_tokens) AS p, sum(completion_tokens) AS c, \
         min(ts) AS first, max(ts) AS last, count(*) FILTER (WHERE completion_tokens = 1000) AS at_1000, \
         max(prompt_tokens) AS max_p, count(DISTINCT eos_status) AS statuses \
         FROM requests GROUP BY model ORDER BY model",
    );
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["model"], "azure_csv:AzureLLMInferenceTrace_code");
    assert_eq!(
        (rows[0]["n"].as_u64(), rows[0]["p"].as_i64(), rows[0]["c"].as_i64()),
        (Some(code_rows), Some(code_ctx), Some(code_gen))
    );
    assert_eq!(
        (rows[1]["n"].as_u64(), rows[1]["p"].as_i64(), rows[1]["c"].as_i64()),
        (Some(conv_rows), Some(conv_ctx), Some(conv_gen))
    );
    assert_eq!(rows[1]["at_1000"].as_u64(), Some(conv_1000));
    assert_eq!(conv_1000, 11);
    // All prompts < 16K; stamped 2023-11-16 18:15-19:14 (zone-less, taken as UTC).
    assert!(rows.iter().all(|r| r["max_p"].as_i64().unwrap() < 16384));
    assert!(rows.iter().all(|r| r["first"].as_str().unwrap().starts_with("2023-11-16T18:1")));
    assert!(rows.iter().all(|r| r["last"].as_str().unwrap().starts_with("2023-11-16T19:1")));
    // No raw output and no finish reason: the trace cannot tell EOS from truncation.
    let status = query(dir.path(), "SELECT DISTINCT eos_status, has_eos_marker FROM requests");
    assert_eq!(status.len(), 1);
    assert_eq!(status[0]["eos_status"], "unknown");
    assert!(status[0].get("has_eos_marker").is_none_or(|v| v.is_null()));
    // Seven-digit fractions survive at microsecond precision.
    let first = query(
        dir.path(),
        "SELECT CAST(ts AS VARCHAR) AS ts FROM requests WHERE source_line = 2 AND model LIKE '%code'",
    );
    assert_eq!(first[0]["ts"], "2023-11-16T18:17:03.979960Z");
}

#[test]
fn mooncake_trace_ingests_with_base_time_and_bins() {
    let dir = tempfile::tempdir().unwrap();
    let path = data_dir().join("real_logs/mooncake_fast25/conversation_trace.jsonl");
    // Independent truth from the raw JSON lines.
    let text = std::fs::read_to_string(&path).unwrap();
    let (mut rows, mut input, mut output, mut at_2000, mut in_64k_128k, mut max_ts) =
        (0u64, 0i64, 0i64, 0u64, 0u64, 0i64);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let i = v["input_length"].as_i64().unwrap();
        let o = v["output_length"].as_i64().unwrap();
        rows += 1;
        input += i;
        output += o;
        at_2000 += (o == 2000) as u64;
        in_64k_128k += (65536..131072).contains(&i) as u64;
        max_ts = max_ts.max(v["timestamp"].as_i64().unwrap());
    }
    assert_eq!((rows, at_2000, in_64k_128k), (12031, 30, 254), "README's facts");

    let summary =
        ingest(&[path.to_str().unwrap()], dir.path(), &["--base-time", "2025-02-25T00:00:00Z", "--model", "kimi"]);
    assert_eq!(summary["totals"]["rows_written"], rows);
    let r = &query(
        dir.path(),
        "SELECT count(*) AS n, sum(prompt_tokens) AS p, sum(completion_tokens) AS c, \
         count(*) FILTER (WHERE context_bin = '64K-128K') AS big, count(*) FILTER (WHERE completion_tokens = 2000) AS at_2000, \
         CAST(min(ts) AS VARCHAR) AS first, CAST(max(ts) AS VARCHAR) AS last, min(model) AS model, \
         count(*) FILTER (WHERE extra LIKE '{\"hash_ids\":[%') AS with_hashes FROM requests",
    )[0];
    assert_eq!((r["n"].as_u64(), r["p"].as_i64(), r["c"].as_i64()), (Some(rows), Some(input), Some(output)));
    assert_eq!((r["big"].as_u64(), r["at_2000"].as_u64()), (Some(254), Some(30)));
    assert_eq!(r["first"], "2025-02-25T00:00:00Z");
    let last = chrono::DateTime::parse_from_rfc3339("2025-02-25T00:00:00Z").unwrap().timestamp_millis() + max_ts;
    assert_eq!(chrono::DateTime::parse_from_rfc3339(r["last"].as_str().unwrap()).unwrap().timestamp_millis(), last);
    assert_eq!(r["model"], "kimi");
    assert_eq!(r["with_hashes"].as_u64(), Some(rows));
}
