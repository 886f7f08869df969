//! End-to-end ingest: derived columns on hand-checked rows, every sample
//! format, re-ingest idempotency, independent Parquet readers, object store.

use crate::common;

use common::{ingest, python, query, repo, tokscope, tokscope_with_env, S3Server};

use common::write_file as write;

/// Hand-checked rows: each line states the value every derived column must take.
#[test]
fn derived_columns_match_their_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        // exactly 1024 prompt tokens: bin 1K-2K; marker then whitespace: eos.
        r#"{"ts":"2024-06-01T00:00:00Z","request_id":"a","model":"m","prompt_tokens":1024,"completion_tokens":11,"max_tokens":100,"ttft_ms":100,"latency_ms":600,"finish_reason":"stop","model_output":"done<|im_end|>  \n"}"#,
        // 1023: bin 0-1K; no marker, below cap, stop: implicit truncation.
        r#"{"ts":"2024-06-01T00:00:01Z","request_id":"b","model":"m","prompt_tokens":1023,"completion_tokens":50,"max_tokens":100,"finish_reason":"stop","model_output":"cut mid sent"}"#,
        // exactly 131072: 128K+; at the cap without marker: length.
        r#"{"ts":"2024-06-01T00:00:02Z","request_id":"c","model":"m","prompt_tokens":131072,"completion_tokens":100,"max_tokens":100,"finish_reason":"stop","model_output":"long"}"#,
        // 131071: 64K-128K; finish_reason length without marker: length.
        r#"{"ts":"2024-06-01T00:00:03Z","request_id":"d","model":"m","prompt_tokens":131071,"completion_tokens":7,"finish_reason":"length","model_output":"x"}"#,
        // no raw output: stop-like finish reason gives eos, marker is null.
        r#"{"ts":"2024-06-01T00:00:04Z","request_id":"e","model":"m","prompt_tokens":0,"completion_tokens":1,"finish_reason":"end_turn","ttft_ms":50,"latency_ms":50}"#,
        // no raw output and no finish reason: unknown; all optional fields missing.
        r#"{"ts":"2024-06-01T00:00:05Z","request_id":"f","model":"m","prompt_tokens":5,"completion_tokens":2}"#,
        // marker in the middle only: implicit truncation.
        r#"{"ts":"2024-06-01T00:00:06Z","request_id":"g","model":"m","prompt_tokens":5,"completion_tokens":2,"max_tokens":10,"model_output":"</s> tail"}"#,
    ];
    let input = write(dir.path(), "hand.jsonl", &(lines.join("\n") + "\n"));
    let out = dir.path().join("ds");
    ingest(&[&input], &out, &[]);
    let rows = query(
        &out,
        "SELECT request_id, context_bin, context_bin_lo, has_eos_marker, eos_status, finish_reason, cached_tokens, \
         total_tokens, tpot_ms, decode_tps, e2e_tps, CAST(date AS VARCHAR) AS date FROM requests ORDER BY request_id",
    );
    let get = |i: usize, c: &str| rows[i].get(c).cloned().unwrap_or(serde_json::Value::Null);
    let want = [
        ("a", "1K-2K", 1024, Some(true), "eos"),
        ("b", "0-1K", 0, Some(false), "implicit_truncation"),
        ("c", "128K+", 131072, Some(false), "length"),
        ("d", "64K-128K", 65536, Some(false), "length"),
        ("e", "0-1K", 0, None, "eos"),
        ("f", "0-1K", 0, None, "unknown"),
        ("g", "0-1K", 0, Some(false), "implicit_truncation"),
    ];
    for (i, (id, bin, lo, marker, status)) in want.iter().enumerate() {
        assert_eq!(get(i, "request_id"), *id);
        assert_eq!(get(i, "context_bin"), *bin, "{id}");
        assert_eq!(get(i, "context_bin_lo"), *lo, "{id}");
        assert_eq!(get(i, "has_eos_marker").as_bool(), *marker, "{id}");
        assert_eq!(get(i, "eos_status"), *status, "{id}");
        assert_eq!(get(i, "cached_tokens"), 0, "{id}: absent cached_tokens is 0");
        assert_eq!(get(i, "date"), "2024-06-01");
    }
    // a: tpot = (600 - 100) / (11 - 1) = 50 ms; decode_tps = 20; e2e_tps = 11 * 1000 / 600.
    assert_eq!(get(0, "tpot_ms"), 50.0);
    assert_eq!(get(0, "decode_tps"), 20.0);
    assert!((get(0, "e2e_tps").as_f64().unwrap() - 18.333333333333332).abs() < 1e-12);
    assert_eq!(get(0, "total_tokens"), 1035);
    assert_eq!(get(0, "finish_reason"), "stop");
    // e: one completion token: no tpot; latency 50 -> e2e 20 tok/s.
    assert!(get(4, "tpot_ms").is_null());
    assert_eq!(get(4, "e2e_tps"), 20.0);
    assert_eq!(get(4, "finish_reason"), "stop");
    // f: no timings at all.
    assert!(get(5, "tpot_ms").is_null() && get(5, "e2e_tps").is_null() && get(5, "finish_reason").is_null());
}

#[test]
fn custom_bins_and_eos_marker_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "x.jsonl",
        concat!(
            r#"{"ts":1717200000000,"request_id":"a","model":"mine","prompt_tokens":600,"completion_tokens":3,"model_output":"ok<END>"}"#,
            "\n",
            r#"{"ts":1717200000000,"request_id":"b","model":"other","prompt_tokens":5000,"completion_tokens":3,"model_output":"ok<END>"}"#,
            "\n"
        ),
    );
    let markers = write(dir.path(), "markers.json", r#"{"mine": ["<END>"]}"#);
    let out = dir.path().join("ds");
    ingest(&[&input], &out, &["--bins", "0,512,4K", "--eos-markers", &markers]);
    let rows = query(&out, "SELECT request_id, context_bin, eos_status FROM requests ORDER BY request_id");
    assert_eq!((rows[0]["context_bin"].as_str(), rows[0]["eos_status"].as_str()), (Some("512-4K"), Some("eos")));
    assert_eq!(
        (rows[1]["context_bin"].as_str(), rows[1]["eos_status"].as_str()),
        (Some("4K+"), Some("implicit_truncation"))
    );
}

#[test]
fn every_sample_format_is_detected_and_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let samples = repo().join("sample_logs");
    let s = ingest(&[samples.to_str().unwrap()], &out, &["--base-time", "2024-06-01T00:00:00Z"]);
    let files = s["files"].as_array().unwrap();
    let fmt =
        |name: &str| files.iter().find(|f| f["location"].as_str().unwrap().ends_with(name)).unwrap()["format"].clone();
    assert_eq!(fmt("canonical.jsonl"), "canonical");
    assert_eq!(fmt("openai_chat.jsonl"), "openai_chat");
    assert_eq!(fmt("openai_batch.jsonl"), "openai_batch");
    assert_eq!(fmt("anthropic.jsonl"), "anthropic");
    assert_eq!(fmt("tgi.jsonl"), "tgi");
    assert_eq!(fmt("azure_conv_head.csv"), "azure_csv");
    assert_eq!(fmt("mooncake_head.jsonl"), "mooncake");
    assert_eq!(fmt("otel.jsonl"), "otel");
    assert_eq!(fmt("openai_responses.jsonl"), "openai_responses");
    assert_eq!(fmt("openai_stream.sse"), "openai_stream");
    assert_eq!(fmt("helicone.jsonl"), "helicone");
    assert_eq!(fmt("langfuse.jsonl"), "langfuse");
    assert_eq!(fmt("litellm.jsonl"), "litellm");
    assert_eq!(fmt("litellm_spendlogs.csv"), "litellm");
    assert_eq!(fmt("profile.jsonl"), "profile");
    assert_eq!(fmt("vllm.jsonl"), "vllm");
    // The engine profiles are profiles, not requests: 11 rows, 46 engine token rows; and
    // vllm.jsonl's three finished records (the fourth, a streamed delta, is rejected) are too.
    assert_eq!(s["totals"]["profiles_written"], 11 + 3);
    let engine = query(&out, "SELECT count(*) AS n FROM tokens WHERE source = 'engine'");
    assert_eq!(engine[0]["n"], 46);
    // Independent line counts of the samples: non-blank lines minus the two CSV headers; a
    // stream of server-sent events is one record however many lines it spans (one per `[DONE]`).
    let mut lines = 0u64;
    for e in std::fs::read_dir(&samples).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        lines += match path.extension().and_then(|x| x.to_str()) {
            Some("sse") => text.lines().filter(|l| l.trim() == "data: [DONE]").count() as u64,
            _ => text.lines().filter(|l| !l.trim().is_empty()).count() as u64,
        };
    }
    assert_eq!(s["totals"]["lines_read"].as_u64().unwrap() + 2, lines);
    // The malformed lines planted in the samples: 5 canonical, 1 OpenAI, 1 batch error,
    // 1 OTel line cut short (and, inside a good OTel line, 1 span of a failed call without usage),
    // 2 Responses (a failure without usage, a cut line), 3 Helicone (HTTP 429, uncounted stream, bad row),
    // 2 LiteLLM payloads and 2 spend-log rows (a failure without usage, a cut object or short row),
    // 2 Langfuse (a generation without usage, a cut row), 1 stream that ends with an error event,
    // 1 vLLM RequestOutput not finished (a streamed delta).
    // (A bare Anthropic message without a time is a row, at --base-time.)
    assert_eq!(s["totals"]["lines_rejected"], 21);
    assert_eq!(s["totals"]["records_rejected"], 1);
    let per_format =
        query(&out, "SELECT source_format, count(*) AS n FROM requests GROUP BY source_format ORDER BY source_format");
    let n = |f: &str| per_format.iter().find(|r| r["source_format"] == f).map(|r| r["n"].as_u64().unwrap());
    assert_eq!(n("canonical"), Some(80));
    assert_eq!(n("azure_csv"), Some(100));
    assert_eq!(n("mooncake"), Some(50));
    assert_eq!(n("tgi"), Some(15));
    assert_eq!(n("otel"), Some(7));
    assert_eq!(n("openai_responses"), Some(6));
    assert_eq!(n("helicone"), Some(5));
    assert_eq!(n("litellm"), Some(8));
    assert_eq!(n("langfuse"), Some(6));
    assert_eq!(n("openai_stream"), Some(2));
    assert_eq!(n("vllm"), Some(3));
    // TGI rows with a special </s> last token are eos, the others not.
    let tgi = query(&out, "SELECT count(*) FILTER (WHERE eos_status = 'eos') AS eos, count(*) FILTER (WHERE has_eos_marker) AS marked FROM requests WHERE source_format = 'tgi'");
    assert_eq!(tgi[0]["eos"], tgi[0]["marked"]);
    // Per-token data landed in `tokens` and joins back to requests.
    let t = query(&out, "SELECT count(*) AS n, count(DISTINCT t.request_id) AS reqs FROM tokens t JOIN requests r ON t.request_id = r.request_id");
    assert!(t[0]["n"].as_u64().unwrap() > 0);
}

#[test]
fn reingest_adds_no_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let input = repo().join("sample_logs/canonical.jsonl");
    let first = ingest(&[input.to_str().unwrap()], &out, &[]);
    let again = ingest(&[input.to_str().unwrap()], &out, &[]);
    assert_eq!(first["totals"]["rows_written"], 80);
    assert_eq!(again["totals"]["rows_written"], 0);
    assert_eq!(again["files_skipped"].as_array().unwrap().len(), 1);
    assert_eq!(query(&out, "SELECT count(*) AS n FROM requests")[0]["n"], 80);
}

#[test]
fn parquet_is_read_back_unchanged_by_pyarrow_and_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    ingest(&[repo().join("sample_logs").to_str().unwrap()], &out, &[]);
    let ours = &query(
        &out,
        "SELECT count(*) AS n, sum(prompt_tokens) AS p, sum(completion_tokens) AS c, \
         count(*) FILTER (WHERE eos_status = 'implicit_truncation') AS trunc, \
         sum(length(model_output)) AS out_chars, count(DISTINCT date) AS days FROM requests",
    )[0];
    let script = format!(
        r#"
import pyarrow.dataset as ds, pyarrow.compute as pc, duckdb, json
t = ds.dataset({root:?} + "/requests", format="parquet", partitioning="hive").to_table()
pa_row = dict(n=t.num_rows, p=pc.sum(t["prompt_tokens"]).as_py(), c=pc.sum(t["completion_tokens"]).as_py(),
    trunc=pc.sum(pc.equal(t["eos_status"], "implicit_truncation")).as_py(),
    out_chars=pc.sum(pc.utf8_length(t["model_output"])).as_py(), days=len(pc.unique(t["date"])))
con = duckdb.connect()
r = con.execute("SELECT count(*), sum(prompt_tokens), sum(completion_tokens), count(*) FILTER (WHERE eos_status = 'implicit_truncation'), sum(length(model_output)), count(DISTINCT date), min(typeof(ts)) FROM read_parquet(?, hive_partitioning=true)", [{root:?} + "/requests/*/*.parquet"]).fetchone()
print(json.dumps(dict(pyarrow=pa_row, duckdb=dict(n=r[0], p=int(r[1]), c=int(r[2]), trunc=r[3], out_chars=int(r[4]), days=r[5]), duck_ts=r[6])))
"#,
        root = out.to_str().unwrap()
    );
    let v: serde_json::Value = serde_json::from_str(python(&script).trim()).unwrap();
    for reader in ["pyarrow", "duckdb"] {
        for col in ["n", "p", "c", "trunc", "out_chars", "days"] {
            assert_eq!(v[reader][col].as_i64(), ours[col].as_i64(), "{reader}.{col}");
        }
    }
    assert_eq!(v["duck_ts"], "TIMESTAMP WITH TIME ZONE");
}

/// `--compression`: each codec is the one pyarrow finds in every column chunk
/// of every file, except the floating-point columns with full mantissas
/// (docs/ARCHITECTURE.md, "Parquet layout") and the few rows of
/// `request_counts` (its `TableCodec::None`), which are uncompressed
/// whatever the codec; and the rows read back are the same.
#[test]
fn compression_is_the_codec_readers_find() {
    let dir = tempfile::tempdir().unwrap();
    let sample = repo().join("sample_logs/canonical.jsonl");
    let uncompressed = [
        "requests.tpot_ms",
        "requests.decode_tps",
        "requests.e2e_tps",
        "requests.itl_std_ms",
        "requests.last_token_logprob",
        "tokens.logprob",
        "tokens.entropy_bits",
        "tokens.top1_margin",
        "tokens.top_logprobs.list.item.logprob",
    ];
    for (flag, codec) in [("zstd(3)", "ZSTD"), ("lz4", "LZ4"), ("snappy", "SNAPPY"), ("none", "UNCOMPRESSED")] {
        let out = dir.path().join(flag.replace(['(', ')'], ""));
        ingest(&[sample.to_str().unwrap()], &out, &["--compression", flag]);
        let got = common::parquet_chunks(&out);
        let n = query(&out, "SELECT count(*) AS n FROM requests")[0]["n"].as_i64().unwrap();
        assert_eq!(got["rows"]["requests"].as_i64(), Some(n), "{flag}");
        let codecs = got["leaves"].as_object().unwrap();
        for leaf in uncompressed.iter().chain(&["request_counts.model", "request_counts.requests"]) {
            assert!(codecs.contains_key(*leaf), "{flag}: no column {leaf} in {:?}", codecs.keys());
        }
        for (leaf, found) in codecs {
            let plain = uncompressed.contains(&leaf.as_str()) || leaf.starts_with("request_counts.");
            let want = if plain { "UNCOMPRESSED" } else { codec };
            assert_eq!(found["codecs"], serde_json::json!([want]), "{flag}: {leaf}");
        }
    }
    let bad = common::tokscope_output(&[
        "ingest",
        "--compression",
        "gzip",
        "--out",
        dir.path().join("bad").to_str().unwrap(),
        sample.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("unknown compression \"gzip\""), "{err}");
    assert!(!dir.path().join("bad/requests").exists());
}

/// The key every redaction test uses (`TOKSCOPE_REDACT_KEY`).
const REDACT_KEY: &str = "test-key-0123456789abcdef";

#[test]
fn redaction_stores_keyed_hashes_and_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "r.jsonl",
        "{\"ts\":1717200000000,\"model\":\"m\",\"prompt_tokens\":1,\"completion_tokens\":1,\"prompt\":\"secret\",\"model_output\":\"abc</s>\"}\n",
    );
    let out = dir.path().join("ds");
    let args = ["ingest", "--quiet", "--json", "--redact", "hash", "--out", out.to_str().unwrap(), &input];
    // Without a key, hashing is refused with a message naming the variable.
    let o = common::tokscope_output(&args);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("TOKSCOPE_REDACT_KEY"));
    tokscope_with_env(&[("TOKSCOPE_REDACT_KEY", REDACT_KEY)], &args);
    let r = &query(&out, "SELECT prompt, prompt_bytes, model_output, model_output_bytes, eos_status FROM requests")[0];
    // HMAC-SHA-256 under the key, computed by Python's hmac module.
    let oracle = python(&format!(
        "import hmac,hashlib\nfor t in [b'secret', b'abc</s>']: print(hmac.new(b'{REDACT_KEY}', t, hashlib.sha256).hexdigest())"
    ));
    let want: Vec<&str> = oracle.lines().collect();
    assert_eq!(r["prompt"], want[0]);
    assert_eq!(r["model_output"], want[1]);
    assert_eq!((r["prompt_bytes"].as_i64(), r["model_output_bytes"].as_i64()), (Some(6), Some(7)));
    // The EOS marker is still detected: it was looked for before hashing.
    assert_eq!(r["eos_status"], "eos");
}

/// Every logged text (prompt, output, unknown keys, token texts, top
/// alternatives, a rejected line) carries a marker; under `hash` and `drop`
/// no marker may appear in any file of the dataset: neither in its bytes
/// (manifests, Parquet metadata and statistics) nor in any decoded value
/// (pyarrow reads every column of every Parquet file, compressed pages too).
#[test]
fn redacted_text_appears_in_no_dataset_file() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"ts":1717200000000,"request_id":"a","model":"m","prompt_tokens":3,"completion_tokens":2,"prompt":"SECRETPROMPT one","model_output":"SECRETOUTPUT</s>","note":"SECRETEXTRA","logprobs":[{"token":"SECRETTOKEN","logprob":-0.1,"top_logprobs":[{"token":"SECRETTOKEN","logprob":-0.1},{"token":"SECRETALT","logprob":-2.5}]},{"token":"</s>","logprob":-0.01}]}"#,
        r#"{"ts":1717200000000,"request_id":"b","model":"m","prompt_tokens":"SECRETREJECT","prompt":"SECRETREJECTPROMPT"}"#,
        r#"{"SECRETBROKEN json"#,
    ];
    let input = write(dir.path(), "r.jsonl", lines.join("\n") + "\n");
    for mode in ["hash", "drop"] {
        let out = dir.path().join(mode);
        let stdout = tokscope_with_env(
            &[("TOKSCOPE_REDACT_KEY", REDACT_KEY)],
            &[
                "ingest",
                "--quiet",
                "--json",
                "--format",
                "canonical",
                "--redact",
                mode,
                "--out",
                out.to_str().unwrap(),
                &input,
            ],
        );
        let summary: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(summary["totals"]["lines_rejected"], 2, "{mode}: {summary}");
        assert!(!stdout.contains("SECRET"), "{mode}: the summary holds a logged text");
        // The rows are there, with their lengths and derived columns.
        let r = &query(&out, "SELECT prompt_bytes, eos_status, output_token_count FROM requests")[0];
        assert_eq!((r["prompt_bytes"].as_i64(), r["output_token_count"].as_i64()), (Some(16), Some(2)), "{mode}");
        assert_eq!(r["eos_status"], "eos", "{mode}");
        let n = query(&out, "SELECT count(*) AS n, sum(raw_line_bytes) AS b FROM rejects");
        assert_eq!((n[0]["n"].as_i64(), n[0]["b"].as_i64()), (Some(2), Some((lines[1].len() + lines[2].len()) as i64)));
        let mut files = 0;
        for entry in walk(&out) {
            files += 1;
            let bytes = std::fs::read(&entry).unwrap();
            assert!(!bytes.windows(6).any(|w| w == b"SECRET"), "{mode}: {} holds a logged text", entry.display());
            assert!(!bytes.windows(REDACT_KEY.len()).any(|w| w == REDACT_KEY.as_bytes()), "{mode}: the key leaked");
        }
        assert!(files >= 3, "{mode}: only {files} files");
        let script = format!(
            "import pathlib, pyarrow.parquet as pq\n\
             n = 0\n\
             for p in pathlib.Path({root:?}).rglob('*.parquet'):\n\
             \x20   t = pq.read_table(p)\n\
             \x20   n += t.num_rows\n\
             \x20   text = repr(t.to_pylist()) + repr(pq.read_metadata(p).metadata) + repr(pq.read_metadata(p).schema)\n\
             \x20   assert 'SECRET' not in text, (str(p), text)\n\
             print(n)",
            root = out.to_str().unwrap()
        );
        // 1 request + 2 token rows + 2 rejects, at least.
        assert!(python(&script).trim().parse::<u64>().unwrap() >= 5, "{mode}");
    }
}

/// Every file under `dir`, recursively.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn ad_hoc_sql_is_read_only_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    ingest(&[repo().join("sample_logs/tgi.jsonl").to_str().unwrap()], &out, &[]);
    let o = common::tokscope_output(&["query", "--data", out.to_str().unwrap(), "CREATE TABLE x AS SELECT 1"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not supported")
            || String::from_utf8_lossy(&o.stderr).contains("DDL")
    );
}

#[test]
fn run_uses_the_bundled_samples_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let stdout = tokscope(&["run", "--quiet", "--out", out.to_str().unwrap(), "--report-format", "csv"]);
    let header = stdout.lines().next().unwrap();
    assert_eq!(
        header,
        "model,context_bin,requests,eos,length,implicit_truncation,unknown,eos_compliance_rate,implicit_truncation_rate,\
         ttft_p50_ms,ttft_p95_ms,ttft_p99_ms,tpot_p50_ms,tpot_p95_ms,latency_p50_ms,latency_p95_ms,decode_tps_p50,e2e_tps_mean,\
         unpriced_requests,uncosted_requests,cost_source,cost_usd,logged_cost_share,cost_per_1k_tokens,input_share,\
         cached_share,output_share",
        "run prints the report job"
    );
    assert!(stdout.contains("llama-3.1-8b-instruct,0-1K,"));
    // The bundled example prices apply to the bundled samples: gpt-4o rows have a cost.
    let gpt = stdout.lines().find(|l| l.starts_with("gpt-4o-2024-08-06,")).unwrap();
    let cols: Vec<&str> = gpt.split(',').collect();
    let cost_idx = header.split(',').position(|c| c == "cost_usd").unwrap();
    assert!(cols[cost_idx].parse::<f64>().unwrap() > 0.0, "{gpt}");
}

#[test]
fn generated_logs_ingest_with_independently_counted_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let gen = dir.path().join("gen.jsonl");
    tokscope(&["generate", "--requests", "3000", "--seed", "7", "--token-data", "--out", gen.to_str().unwrap()]);
    // Count expected statuses straight from the JSON (definitions in docs/metrics.md).
    let markers = ["<|eot_id|>", "<|im_end|>", "<｜end▁of▁sentence｜>", "</s>"];
    let (mut eos, mut length, mut trunc, mut tokens, mut big) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for line in std::fs::read_to_string(&gen).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let out = v["model_output"].as_str().unwrap().trim_end();
        if markers.iter().any(|m| out.ends_with(m)) {
            eos += 1;
        } else if v["finish_reason"] == "length" || v["completion_tokens"].as_i64() >= v["max_tokens"].as_i64() {
            length += 1;
        } else {
            trunc += 1;
        }
        tokens += v["logprobs"].as_array().map_or(0, |a| a.len() as u64);
        big += (v["prompt_tokens"].as_i64().unwrap() >= 131072) as u64;
    }
    let out = dir.path().join("ds");
    let s = ingest(&[gen.to_str().unwrap()], &out, &[]);
    assert_eq!(s["totals"]["tokens_written"].as_u64(), Some(tokens));
    let r = &query(
        &out,
        "SELECT count(*) FILTER (WHERE eos_status='eos') AS eos, count(*) FILTER (WHERE eos_status='length') AS length, \
         count(*) FILTER (WHERE eos_status='implicit_truncation') AS trunc, count(*) FILTER (WHERE context_bin='128K+') AS big FROM requests",
    )[0];
    assert_eq!(
        (r["eos"].as_u64(), r["length"].as_u64(), r["trunc"].as_u64(), r["big"].as_u64()),
        (Some(eos), Some(length), Some(trunc), Some(big))
    );
    assert!(trunc > 100 && big > 0, "the generator makes silent truncations and 128K+ prompts");
    let t = &query(&out, "SELECT count(*) AS n FROM tokens")[0];
    assert_eq!(t["n"].as_u64(), Some(tokens));
}

#[test]
fn object_store_inputs_and_dataset_over_s3() {
    let s3 = S3Server::start();
    let samples = repo().join("sample_logs");
    s3.put(
        "logs",
        &[
            ("2024/06/canonical.jsonl", &samples.join("canonical.jsonl")),
            ("2024/06/tgi.jsonl", &samples.join("tgi.jsonl")),
            ("other/anthropic.jsonl", &samples.join("anthropic.jsonl")),
        ],
    );
    s3.put("lake", &[]);
    // A prefix ("directory") of a bucket in, a dataset in another bucket out.
    let out = s3.tokscope(&["ingest", "--quiet", "--json", "--out", "s3://lake/tokscope", "s3://logs/2024/"]);
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["totals"]["rows_written"], 95);
    assert_eq!(summary["totals"]["lines_rejected"], 5);
    // A glob, then the same inputs again: the manifest prevents duplicates.
    let out = s3.tokscope(&["ingest", "--quiet", "--json", "--out", "s3://lake/tokscope", "s3://logs/*/*/*.jsonl"]);
    let again: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(again["totals"]["rows_written"], 0);
    assert_eq!(again["files_skipped"].as_array().unwrap().len(), 2);
    let rows = s3.tokscope(&[
        "query",
        "--format",
        "csv",
        "--data",
        "s3://lake/tokscope",
        "SELECT count(*) AS n FROM requests",
    ]);
    assert_eq!(rows.trim(), "n\n95");
    // The bucket root lists every object (95 + 21 Anthropic rows, one a bare message without a time; 5 rejects).
    let out = s3.tokscope(&["ingest", "--quiet", "--json", "--out", "s3://lake/all", "s3://logs/"]);
    let root: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (root["totals"]["rows_written"].as_u64(), root["totals"]["lines_rejected"].as_u64()),
        (Some(116), Some(5))
    );
}

/// An object's body that stalls past the client's request timeout and its
/// retry budget (an input read ahead waits, its queue full, while the one
/// before it is parsed) is asked again for the rest, of the same version:
/// every row of both objects arrives and none is rejected.
#[test]
fn a_remote_body_that_outlasts_the_request_timeout_is_resumed() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    // About 116 MB: a debug build parses it for well over the 1 s timeout,
    // and the object read ahead is more than its queue holds (32 MiB).
    tokscope(&["generate", "--requests", "100000", "--output-chars", "700", "--out", log.to_str().unwrap()]);
    s3.put("logs", &[("big/a.jsonl", &log), ("big/b.jsonl", &log)]);
    let data = dir.path().join("ds");
    let config = format!(
        "dataset = {:?}\nsources = [\"s3://logs/big/\"]\nthreads = 2\n[store]\ntimeout_s = 1\nretry_timeout_s = 1\n",
        data.to_str().unwrap()
    );
    let config = write(dir.path(), "run.toml", config);
    s3.tokscope(&["run", "--config", &config]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("_ingest_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["memory"]["inputs_ahead"], 1, "{summary}");
    assert_eq!(
        (summary["totals"]["rows_written"].as_u64(), summary["totals"]["lines_rejected"].as_u64()),
        (Some(200_000), Some(0)),
        "{summary}"
    );
}

#[test]
fn schema_files_document_every_column_in_order() {
    for table in tokscope::catalog::CATALOG {
        let name = table.name;
        let schema = table.schema();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(repo().join(format!("schemas/{name}.json"))).unwrap())
                .unwrap();
        let documented: Vec<&str> = doc["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .filter(|n| *n != "date")
            .collect();
        let actual: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(documented, actual, "schemas/{name}.json");
        for (c, f) in doc["columns"].as_array().unwrap().iter().zip(schema.fields()) {
            assert_eq!(c["nullable"].as_bool(), Some(f.is_nullable()), "{name}.{}", f.name());
        }
    }
}

/// A plain web server (Python's `http.server` on a loopback port), stopped on drop.
struct WebServer(std::process::Child);

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An http:// URL is read like a local file of the same bytes (object_store's
/// HTTP client refuses plain http unless told to allow it, which it is for
/// http URLs), and `source_file` names the URL.
#[test]
fn an_http_url_is_read_like_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let served = repo().join("sample_logs");
    let _server = WebServer(
        std::process::Command::new("python3")
            .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "--directory"])
            .arg(&served)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m http.server"),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "http.server did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/canonical.jsonl");
    let remote = ingest(&[&url], &dir.path().join("remote"), &[]);
    let local = ingest(&[served.join("canonical.jsonl").to_str().unwrap()], &dir.path().join("local"), &[]);
    assert_eq!(remote["totals"]["rows_written"], local["totals"]["rows_written"]);
    assert_eq!(remote["totals"]["lines_rejected"], local["totals"]["lines_rejected"]);
    let sql = "SELECT request_id, model, prompt_tokens, eos_status FROM requests ORDER BY request_id";
    assert_eq!(query(&dir.path().join("remote"), sql), query(&dir.path().join("local"), sql));
    let files = query(&dir.path().join("remote"), "SELECT DISTINCT source_file FROM requests");
    assert_eq!(files, vec![serde_json::json!({ "source_file": url })]);
    // A missing file: the server's answer to reading it, not to listing (it cannot list).
    let missing = format!("http://127.0.0.1:{port}/missing.jsonl");
    let o = common::tokscope_output(&["ingest", "--out", dir.path().join("x").to_str().unwrap(), &missing]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains(&format!("reading {missing}")) && err.contains("not found"), "{err}");
}

/// The Parquet files under `out` by table directory, writer and sequence
/// number (`part-<run id>-<writer>-<n>.parquet`: the run id left out, as
/// it differs between runs), each with its batches.
pub(crate) fn files_by_writer(
    out: &std::path::Path,
) -> std::collections::BTreeMap<String, Vec<arrow::array::RecordBatch>> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut files = std::collections::BTreeMap::new();
    for path in walk(out).into_iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")) {
        let rel = path.strip_prefix(out).unwrap().to_str().unwrap().to_string();
        let (dir, file) = rel.rsplit_once('/').unwrap_or(("", &rel));
        let tail: Vec<&str> = file.trim_end_matches(".parquet").rsplitn(3, '-').collect();
        let key = format!("{dir}/{}-{}", tail[1], tail[0]);
        let file = std::fs::File::open(&path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
        let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
        assert!(files.insert(key, batches).is_none(), "two files named alike in {rel}");
    }
    files
}

/// Parsed slices go to the writer threads in turn, so the same log ingested
/// twice with the same thread count puts the same rows, in the same order, in
/// the same files: sums over a dataset do not change from one ingest to the
/// next (a writer taking whatever slice is free would split them by timing).
#[test]
fn the_same_log_ingested_twice_gives_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    // ~20 MB: several 4 MiB slices for each of two writers, over 10 days.
    let args = ["generate", "--requests", "12000", "--output-chars", "1500", "--days", "10", "--seed", "3", "--out"];
    tokscope(&[&args[..], &[log.to_str().unwrap()]].concat());
    let files = |name: &str| {
        let out = dir.path().join(name);
        let ingest = ["ingest", "--quiet", "--out", out.to_str().unwrap(), log.to_str().unwrap()];
        tokscope_with_env(&[("RAYON_NUM_THREADS", "2")], &ingest);
        files_by_writer(&out)
    };
    let (first, second) = (files("first"), files("second"));
    let requests_by = |w: &str| first.keys().filter(|k| k.starts_with("requests/") && k.contains(w)).count();
    assert!(requests_by("w0-") > 0 && requests_by("w1-") > 0, "both writers wrote: {:?}", first.keys());
    assert_eq!(first.keys().collect::<Vec<_>>(), second.keys().collect::<Vec<_>>());
    for (key, batches) in &first {
        assert!(batches == &second[key], "{key} differs between two ingests of the same log");
    }
}

/// Inputs read ahead are still parsed one after another in their order: a
/// folder of gzipped logs ingested with one input read ahead (a 2 GiB
/// budget at 2 threads) gives the files of a run that reads none ahead (700
/// MiB: the same two writers, too little left for an input ahead).
#[test]
fn reading_inputs_ahead_writes_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    for n in 0..6 {
        let log = dir.path().join(format!("{n}.jsonl"));
        let seed = n.to_string();
        let args =
            ["generate", "--requests", "3000", "--output-chars", "1500", "--days", "3", "--seed", &seed, "--out"];
        tokscope(&[&args[..], &[log.to_str().unwrap()]].concat());
        let gz = common::gzip(&std::fs::read(&log).unwrap(), flate2::Compression::fast());
        std::fs::write(logs.join(format!("{n}.jsonl.gz")), gz).unwrap();
    }
    let files = |limit: &str, ahead: u64| {
        let out = dir.path().join(limit);
        let ingest =
            ["ingest", "--quiet", "--memory-limit", limit, "--out", out.to_str().unwrap(), logs.to_str().unwrap()];
        tokscope_with_env(&[("RAYON_NUM_THREADS", "2")], &ingest);
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("_ingest_summary.json")).unwrap()).unwrap();
        let memory = &summary["memory"];
        assert_eq!(
            (memory["inputs_ahead"].as_u64(), memory["writer_threads"].as_u64()),
            (Some(ahead), Some(2)),
            "{memory}"
        );
        assert_eq!(summary["totals"]["rows_written"], 18000);
        files_by_writer(&out)
    };
    let (none, one) = (files("700M", 0), files("2G", 1));
    assert!(none.keys().any(|k| k.contains("w1-")), "both writers wrote: {:?}", none.keys());
    assert_eq!(none.keys().collect::<Vec<_>>(), one.keys().collect::<Vec<_>>());
    for (key, batches) in &none {
        assert!(batches == &one[key], "{key} differs with an input read ahead");
    }
}

/// A local log stored as is is read in blocks at their positions, one
/// reading thread per eight threads (`ingest-read`), the blocks handed to the
/// splitter in order: with one reading thread (2 threads) and with eight (64
/// threads, more than the log has blocks) it gives the rows, rejects, line
/// numbers and offsets of the same log gzipped, which is read as a stream.
/// The log has a byte-order mark, CRLF lines, rejected lines, and lines
/// longer than the room kept in front of a block for a carried line.
#[test]
fn a_log_read_in_blocks_gives_the_rows_of_its_stream() {
    let dir = tempfile::tempdir().unwrap();
    let gen = |name: &str, args: &[&str]| {
        let out = dir.path().join(name);
        tokscope(&[&["generate", "--out", out.to_str().unwrap()], args].concat());
        std::fs::read_to_string(out).unwrap()
    };
    let short = gen("short.jsonl", &["--requests", "6000", "--output-chars", "1500", "--seed", "4"]);
    let long = gen("long.jsonl", &["--requests", "12", "--output-chars", "400000", "--seed", "5"]);
    let mut log = b"\xEF\xBB\xBF".to_vec();
    let mut long = long.lines();
    for (i, line) in short.lines().enumerate() {
        log.extend_from_slice(line.as_bytes());
        log.extend_from_slice(if i % 2 == 0 { b"\r\n" } else { b"\n" });
        if i % 500 == 7 {
            log.extend_from_slice(b"not json\n");
            log.extend_from_slice(long.next().unwrap_or("").as_bytes());
            log.push(b'\n');
        }
    }
    assert!(log.len() > 12 << 20, "{} bytes: several 4 MiB blocks", log.len());
    let (plain, gz) = (dir.path().join("plain"), dir.path().join("gz"));
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::create_dir_all(&gz).unwrap();
    std::fs::write(plain.join("log.jsonl"), &log).unwrap();
    std::fs::write(gz.join("log.jsonl.gz"), common::gzip(&log, flate2::Compression::fast())).unwrap();
    let run = |input: &std::path::Path, threads: &str, readers: u64| {
        let out = dir.path().join(format!("ds-{}-{threads}", input.file_name().unwrap().to_str().unwrap()));
        tokscope(&["--threads", threads, "ingest", "--quiet", "--out", out.to_str().unwrap(), input.to_str().unwrap()]);
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("_ingest_summary.json")).unwrap()).unwrap();
        assert_eq!(summary["memory"]["read_threads"].as_u64(), Some(readers), "{}", summary["memory"]);
        assert_eq!(summary["totals"]["bytes_read"].as_u64(), Some(log.len() as u64));
        let rows =
            |table: &str| query(&out, &format!("SELECT * EXCLUDE (source_file) FROM {table} ORDER BY source_line"));
        (rows("requests"), rows("rejects"))
    };
    // The gzipped log is one stream, inflated by the splitter: the plan holds no reading thread for it.
    let (requests, rejects) = run(&gz, "2", 0);
    assert_eq!((requests.len(), rejects.len()), (6000 + 12, 12), "{rejects:?}");
    for (threads, readers) in [("2", 1), ("64", 8)] {
        let (r, j) = run(&plain, threads, readers);
        assert!(r == requests, "requests differ from the stream's at {threads} threads");
        assert!(j == rejects, "rejects differ from the stream's at {threads} threads");
    }
}

/// Every table ingest fills (the catalog's `WrittenBy::Ingest` tables) gets
/// the rows of an input that holds some: a table the reader parses but does
/// not hand to the writers would come out empty here.
#[test]
fn every_table_ingest_fills_gets_rows() {
    use tokscope::catalog::{WrittenBy, CATALOG};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let bad = write(dir.path(), "bad.jsonl", "{\"ts\": \"2024-06-01T00:00:00Z\", \"prompt_tokens\": \"many\"}\n");
    let formats = repo().join("tests/data/formats");
    let samples = repo().join("sample_logs");
    ingest(&[samples.to_str().unwrap(), formats.to_str().unwrap(), &bad], &data, &[]);
    let tables: Vec<&str> = CATALOG.iter().filter(|t| t.written_by == WrittenBy::Ingest).map(|t| t.name).collect();
    assert!(tables.len() >= 8, "{tables:?}");
    for table in tables {
        let rows = query(&data, &format!("SELECT count(*) AS n FROM {table}"));
        assert!(rows[0]["n"].as_u64().unwrap() > 0, "table {table} got no rows");
    }
}
