//! The `tokens` table from every source with per-token data, with
//! hand-checked values, and bad per-token data that never drops a request.

use crate::common;

use common::{ingest, query};

use common::write_file as write;

fn close(a: &serde_json::Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() < 1e-9
}

#[test]
fn canonical_logprobs_and_token_times_fill_tokens() {
    let dir = tempfile::tempdir().unwrap();
    // top_logprobs ln(0.5), ln(0.25): renormalised to 2/3, 1/3 -> entropy 0.9182958340544896 bits; margin ln 2.
    let line = r#"{"ts":"2024-06-01T00:00:00Z","request_id":"r","model":"m","prompt_tokens":10,"completion_tokens":3,
"logprobs":[{"token":"A","logprob":-0.6931471805599453,"top_logprobs":[{"token":"A","logprob":-0.6931471805599453},{"token":"B","logprob":-1.3862943611198906}]},
{"token":"b","logprob":-0.1,"top_logprobs":[{"token":"b","logprob":-0.1}]},{"token":"</s>","logprob":-0.01,"top_logprobs":[{"token":"</s>","logprob":-0.01},{"token":"c","logprob":-5.01}]}],
"token_times_ms":[120.0,150.5,190.0]}"#
        .replace('\n', "");
    let input = write(dir.path(), "c.jsonl", &(line + "\n"));
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    assert_eq!(s["totals"]["tokens_written"], 3);
    let t = query(
        &out,
        "SELECT position, token, logprob, entropy_bits, top1_margin, emitted_ms, itl_ms, context_bin, model, \
        array_length(top_logprobs) AS k FROM tokens ORDER BY position",
    );
    assert_eq!(t.len(), 3);
    assert_eq!(t[0]["token"], "A");
    assert!(close(&t[0]["entropy_bits"], 0.9182958340544896));
    assert!(close(&t[0]["top1_margin"], std::f64::consts::LN_2));
    assert_eq!(t[0]["k"], 2);
    assert!(t[0].get("itl_ms").is_none_or(|v| v.is_null()), "no ITL for the first token");
    assert!(close(&t[1]["itl_ms"], 30.5));
    assert!(close(&t[2]["itl_ms"], 39.5));
    assert!(close(&t[1]["entropy_bits"], 0.0), "a single alternative has zero entropy");
    assert!(t[1].get("top1_margin").is_none_or(|v| v.is_null()));
    assert!(close(&t[2]["top1_margin"], 5.0));
    assert_eq!(t[2]["context_bin"], "0-1K");
    let r = &query(&out, "SELECT token_issues, output_token_count FROM requests")[0];
    assert!(r.get("token_issues").is_none_or(|v| v.is_null()));
    assert_eq!(r["output_token_count"], 3);
}

#[test]
fn openai_logprob_content_fills_tokens_with_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let line = r#"{"id":"c1","object":"chat.completion","created":1717200000,"model":"gpt-4o","choices":[{"index":0,"message":{"content":"Hi!"},"finish_reason":"stop","logprobs":{"content":[{"token":"Hi","logprob":-0.2,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.2},{"token":"Hey","logprob":-1.7}]},{"token":"!","logprob":-0.05,"bytes":[33],"top_logprobs":[{"token":"!","logprob":-0.05},{"token":".","logprob":-3.05}]}]}}],"usage":{"prompt_tokens":9,"completion_tokens":2}}"#;
    let input = write(dir.path(), "o.jsonl", format!("{line}\n"));
    let out = dir.path().join("ds");
    ingest(&[&input], &out, &[]);
    let t = query(&out, "SELECT request_id, position, token, encode(token_bytes, 'hex') AS hex, logprob, top1_margin FROM tokens ORDER BY position");
    assert_eq!((t[0]["request_id"].as_str(), t[0]["hex"].as_str()), (Some("c1"), Some("4869")));
    assert!(close(&t[0]["top1_margin"], 1.5));
    assert!(close(&t[1]["top1_margin"], 3.0));
    assert!(close(&t[1]["logprob"], -0.05));
}

#[test]
fn tgi_tokens_fill_tokens_with_special_flags() {
    let dir = tempfile::tempdir().unwrap();
    let line = r#"{"ts":"2024-06-03T08:00:00Z","model":"mistral","request_id":"t1","response":{"generated_text":"Hi","details":{"finish_reason":"eos_token","generated_tokens":2,"prefill":[{"id":1,"text":"<s>","logprob":null},{"id":9,"text":"Q","logprob":-2.0}],"tokens":[{"id":5,"text":"Hi","logprob":-0.3,"special":false},{"id":2,"text":"</s>","logprob":-0.02,"special":true}]}}}"#;
    let input = write(dir.path(), "t.jsonl", format!("{line}\n"));
    let out = dir.path().join("ds");
    ingest(&[&input], &out, &[]);
    let t = query(&out, "SELECT position, token, logprob, is_special FROM tokens ORDER BY position");
    assert_eq!((t[0]["is_special"].as_bool(), t[1]["is_special"].as_bool()), (Some(false), Some(true)));
    assert_eq!(t[1]["token"], "</s>");
    let r = &query(&out, "SELECT prompt_tokens, eos_status FROM requests")[0];
    assert_eq!((r["prompt_tokens"].as_i64(), r["eos_status"].as_str()), (Some(2), Some("eos")));
}

#[test]
fn bad_token_data_keeps_the_request_and_flags_it() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        // 2 logprobs for 3 completion tokens.
        r#"{"ts":1717200000000,"request_id":"len","model":"m","prompt_tokens":1,"completion_tokens":3,"logprobs":[{"token":"a","logprob":-1},{"token":"b","logprob":-1}]}"#,
        // time goes backwards.
        r#"{"ts":1717200000000,"request_id":"time","model":"m","prompt_tokens":1,"completion_tokens":3,"token_times_ms":[10,30,20]}"#,
        // Python's json.dumps wrote NaN and -Infinity.
        r#"{"ts":1717200000000,"request_id":"nan","model":"m","prompt_tokens":1,"completion_tokens":2,"logprobs":[{"token":"a","logprob":NaN},{"token":"b","logprob":-Infinity}]}"#,
        // top_logprobs on one token only.
        r#"{"ts":1717200000000,"request_id":"top","model":"m","prompt_tokens":1,"completion_tokens":2,"logprobs":[{"token":"a","logprob":-1,"top_logprobs":[{"token":"a","logprob":-1}]},{"token":"b","logprob":-1}]}"#,
        // arrays of different lengths.
        r#"{"ts":1717200000000,"request_id":"arr","model":"m","prompt_tokens":1,"completion_tokens":2,"logprobs":[{"token":"a","logprob":-1},{"token":"b","logprob":-1}],"token_times_ms":[5]}"#,
    ];
    let input = write(dir.path(), "bad.jsonl", &(lines.join("\n") + "\n"));
    let out = dir.path().join("ds");
    let s = ingest(&[&input], &out, &[]);
    assert_eq!(s["totals"]["rows_written"], 5, "no request is dropped");
    assert_eq!(s["totals"]["lines_rejected"], 0);
    let rows = query(
        &out,
        "SELECT request_id, array_to_string(token_issues, ',') AS issues FROM requests ORDER BY request_id",
    );
    let issues =
        |id: &str| rows.iter().find(|r| r["request_id"] == id).unwrap()["issues"].as_str().unwrap().to_string();
    assert_eq!(issues("len"), "token_count_mismatch");
    assert_eq!(issues("time"), "non_monotonic_token_times,negative_itl");
    assert_eq!(issues("nan"), "non_finite_number,missing_logprob");
    assert_eq!(issues("top"), "missing_top_logprobs");
    assert_eq!(issues("arr"), "array_length_mismatch");
    let nan = query(&out, "SELECT logprob FROM tokens WHERE request_id = 'nan' ORDER BY position");
    assert!(nan.iter().all(|r| r.get("logprob").is_none_or(|v| v.is_null())));
}
