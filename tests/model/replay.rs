//! `tokscope replay` end to end: a dataset ingested from canonical JSON lines
//! built from golden.json cases of the reference model, replayed into
//! `replay_verdicts`, read back through SQL and the `replay` job, and
//! replayed again without duplicating rows.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

fn model_dir() -> PathBuf {
    common::data_dir().join("models/tiny-stories-a")
}

fn golden() -> Value {
    let text = std::fs::read_to_string(model_dir().join("golden.json")).expect("golden.json");
    serde_json::from_str(&text).expect("golden JSON")
}

/// One canonical log line whose output has no EOS marker and is under the cap,
/// so ingest derives `eos_status = 'implicit_truncation'` (unless it ends in `</s>`).
fn line(id: &str, prompt: &str, output: &str) -> String {
    json!({
        "ts": "2024-06-01T00:00:00Z", "request_id": id, "model": "any-logged-name",
        "prompt_tokens": 12, "completion_tokens": 9, "max_tokens": 256, "finish_reason": "stop",
        "prompt": prompt, "model_output": output,
    })
    .to_string()
}

fn build_dataset(dir: &Path) -> (PathBuf, Value) {
    let g = golden();
    let cases = g["cases"].as_array().expect("cases");
    let text = |i: usize, k: &str| cases[i][k].as_str().expect("string").to_string();
    // (a) case 0's greedy output cut after its first words: the model goes on.
    let cut = text(0, "greedy_text");
    let cut = cut.split(' ').take(3).collect::<Vec<_>>().join(" "); // " saw a"
                                                                    // (b) case 1's complete greedy output, its `</s>` dropped: P(EOS) there is ~0.999.
                                                                    // (c) a prompt far beyond the 256-token context window.
    let long = "Once upon a time, the old cat saw a bright star. ".repeat(40);
    let lines = [
        line("a-cut", &text(0, "prompt"), &cut),
        line("b-complete", &text(1, "prompt"), &text(1, "greedy_text")),
        line("c-long", &long, " and went home."),
        // (d) a blank prompt cannot be replayed: an `error` verdict with its reason.
        line("d-blank", "   ", " a bright star."),
        // (e) a complete output that logged its `</s>`: not a suspect by default.
        line("e-eos", &text(2, "prompt"), &format!("{}</s>", text(2, "greedy_text"))),
    ];
    let log = dir.join("log.jsonl");
    std::fs::write(&log, lines.join("\n") + "\n").expect("write log");
    let data = dir.join("data");
    common::ingest(&[log.to_str().unwrap()], &data, &[]);
    (data, g)
}

fn replay(data: &Path, extra: &[&str]) -> Value {
    let model = model_dir();
    let mut args = vec![
        "replay",
        "--data",
        data.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
        "--device",
        "cpu",
        "--json",
    ];
    args.extend_from_slice(extra);
    serde_json::from_str(&common::tokscope(&args)).expect("summary JSON")
}

fn verdicts(data: &Path) -> Vec<Value> {
    common::query(data, "SELECT * FROM replay_verdicts ORDER BY request_id")
}

#[test]
fn replay_classifies_suspects_and_reruns_replace_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, g) = build_dataset(tmp.path());
    // Before any replay the dataset has no verdicts: naming the table is an
    // error that says which command writes it, never an empty result.
    for args in [
        vec!["query", "--data", data.to_str().unwrap(), "SELECT * FROM replay_verdicts"],
        vec!["job", "replay", "--data", data.to_str().unwrap()],
    ] {
        let o = common::tokscope_output(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && o.stdout.is_empty(), "{args:?}: {err}");
        assert!(err.starts_with("error: dataset ") && err.contains("has no table `replay_verdicts`"), "{err}");
        assert!(err.contains("hint: `tokscope replay` writes it"), "{err}");
    }

    let summary = replay(&data, &["--repeat", "2"]);
    assert_eq!(summary["suspects"], 4, "{summary}");
    for key in ["natural_stop", "confirmed_truncation", "prompt_truncated", "error"] {
        assert_eq!(summary[key], 1, "{key}: {summary}");
    }
    assert_eq!(summary["nondeterministic"], 0);
    assert_eq!(summary["device"], "cpu");
    assert_eq!(summary["model"], "tiny-stories-a");

    let rows = verdicts(&data);
    let by_id =
        |id: &str| rows.iter().find(|r| r["request_id"] == id).unwrap_or_else(|| panic!("{id} in {rows:?}")).clone();
    assert_eq!(rows.len(), 4, "{rows:?}");

    let a = by_id("a-cut");
    assert_eq!(a["verdict"], "confirmed_truncation", "{a}");
    // The cut output is case 0's first two greedy tokens (" saw", " a"): P(EOS) there is
    // golden's P(EOS) before the third, 8.5e-5 (transformers, float32, written to 6
    // decimals: the rounding is at most 5e-7, the decoders' float32 error far less).
    assert_eq!(a["output_tokens_replayed"], 2, "{a}");
    let p_golden = g["cases"][0]["p_eos_before_each_greedy_token"][2].as_f64().unwrap();
    assert!((a["p_eos_at_cut"].as_f64().unwrap() - p_golden).abs() < 1e-6, "{a} vs golden {p_golden}");
    // The greedy continuation picks up where the cut left off.
    let full = g["cases"][0]["greedy_text"].as_str().unwrap();
    let cont = a["continuation"].as_str().unwrap();
    assert!(full.ends_with(cont) && !cont.is_empty(), "{cont:?} should finish {full:?}");
    assert_eq!(a["continuation_ended_with_eos"], true);
    assert_eq!(a["deterministic"], true);

    let b = by_id("b-complete");
    assert_eq!(b["verdict"], "natural_stop", "{b}");
    // Teacher forcing the complete output reproduces golden P(EOS) before the `</s>` token.
    let p_golden = g["cases"][1]["p_eos_before_each_greedy_token"].as_array().unwrap();
    let p_golden = p_golden[p_golden.len() - 2].as_f64().unwrap();
    assert!((b["p_eos_at_cut"].as_f64().unwrap() - p_golden).abs() < 1e-4, "{b} vs {p_golden}");
    let golden_len = g["cases"][1]["input_ids"].as_array().unwrap().len() as i64;
    assert_eq!(b["prompt_tokens_replayed"], golden_len);
    assert_eq!(b["output_tokens_replayed"], g["cases"][1]["greedy_ids"].as_array().unwrap().len() as i64 - 1);

    let c = by_id("c-long");
    assert_eq!(c["verdict"], "prompt_truncated", "{c}");
    assert!(c["reason"].as_str().unwrap().contains("context window is 256"), "{c}");
    assert!(c["p_eos_at_cut"].is_null());
    assert_eq!(c["cut_in_utf8_char"], false);

    let d = by_id("d-blank");
    assert_eq!(d["verdict"], "error");
    assert_eq!(d["reason"], "empty prompt");

    for r in &rows {
        assert_eq!(r["device"], "cpu");
        assert_eq!(r["model"], "tiny-stories-a");
        assert!(r["replayed_at"].is_string(), "{r}");
    }

    // The `replay` job (sql/replay.sql) joins verdicts with requests per model x context bin.
    let job = std::fs::read_to_string(common::repo().join("sql/replay.sql")).unwrap();
    // Leading `--` comment lines would read as a flag to clap.
    let job: String = job.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n");
    let report = common::query(&data, &job);
    assert_eq!(report.len(), 1, "{report:?}");
    assert_eq!(report[0]["model"], "any-logged-name");
    assert_eq!(report[0]["replayed"], 4);
    assert_eq!(report[0]["confirmed_truncation"], 1);
    assert_eq!(report[0]["natural_stop"], 1);
    assert_eq!(report[0]["confirmed_truncation_rate"], 0.5);

    // Rerunning replaces, never duplicates.
    replay(&data, &[]);
    let again = verdicts(&data);
    assert_eq!(again.len(), 4, "{again:?}");
    // A narrower rerun replaces only its own request ids; `</s>` at the end is stripped first.
    let summary = replay(&data, &["--where", "request_id IN ('e-eos', 'a-cut')"]);
    assert_eq!(summary["suspects"], 2);
    let rows = verdicts(&data);
    assert_eq!(rows.len(), 5, "{rows:?}");
    let e = rows.iter().find(|r| r["request_id"] == "e-eos").unwrap();
    assert_eq!(e["verdict"], "natural_stop", "{e}");
    assert!(e["deterministic"].is_null(), "no --repeat: nothing compared");
    let distinct = common::query(&data, "SELECT count(DISTINCT request_id) AS n, count(*) AS m FROM replay_verdicts");
    assert_eq!((distinct[0]["n"].as_i64(), distinct[0]["m"].as_i64()), (Some(5), Some(5)));
}

#[test]
fn replay_limit_and_bad_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, _) = build_dataset(tmp.path());
    let summary = replay(&data, &["--limit", "1"]);
    assert_eq!(summary["suspects"], 1);
    assert_eq!(verdicts(&data)[0]["request_id"], "a-cut", "limit takes request_id order");

    let d = data.to_str().unwrap();
    let m = model_dir();
    let m = m.to_str().unwrap();
    let out = common::tokscope_output(&["replay", "--data", d, "--model", m, "--threshold", "1.5"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threshold 1.5"));
}

#[test]
fn batched_replay_gives_each_suspect_the_verdict_it_gets_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let g = golden();
    let cases = g["cases"].as_array().expect("cases");
    // Every golden case cut after 1, 2 and 4 words and whole (its `</s>`
    // dropped): prompts and outputs of many lengths, some natural stops.
    let mut lines = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let prompt = case["prompt"].as_str().unwrap();
        let text = case["greedy_text"].as_str().unwrap();
        let words: Vec<&str> = text.split(' ').collect();
        for take in [1, 2, 4, words.len()] {
            let output = words[..take.min(words.len())].join(" ");
            lines.push(line(&format!("{i}-{take}"), prompt, &output));
        }
    }
    lines.push(line("z-blank", "  ", " a star."));
    let log = tmp.path().join("log.jsonl");
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let data = tmp.path().join("data");
    common::ingest(&[log.to_str().unwrap()], &data, &[]);
    let columns = "request_id, verdict, reason, p_eos_at_cut, continuation, continuation_ended_with_eos, \
                   prompt_tokens_replayed, output_tokens_replayed, deterministic";
    let sql = format!("SELECT {columns} FROM replay_verdicts ORDER BY request_id");
    let alone = replay(&data, &["--repeat", "2"]);
    let want = common::query(&data, &sql);
    assert_eq!(alone["suspects"], lines.len(), "{alone}");
    assert!(alone["natural_stop"].as_u64() > Some(0) && alone["confirmed_truncation"].as_u64() > Some(0), "{alone}");
    for batch in ["3", "64"] {
        let summary = replay(&data, &["--repeat", "2", "--batch", batch]);
        assert_eq!(summary["nondeterministic"], 0, "{summary}");
        // Bit for bit: P(EOS) is compared as the JSON number it is written as.
        assert_eq!(common::query(&data, &sql), want, "--batch {batch}");
    }
    let zero = common::tokscope_output(&["replay", "--data", data.to_str().unwrap(), "--batch", "0"]);
    assert!(!zero.status.success() && String::from_utf8_lossy(&zero.stderr).contains("--batch"));
}

/// Whether this process can see a CUDA GPU (only possible with the feature).
fn gpu_present() -> bool {
    #[cfg(feature = "cuda")]
    {
        tokscope::replay::cuda::probe().is_ok()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

#[test]
fn device_auto_falls_back_to_the_cpu_with_one_line() {
    if gpu_present() {
        eprintln!("skip: a GPU is present, auto does not fall back");
        return;
    }
    let m = model_dir();
    let m = m.to_str().unwrap();
    let out = common::tokscope_output(&[
        "decode",
        "--model",
        m,
        "--prompt",
        "Once upon a time,",
        "--max-new-tokens",
        "2",
        "--device",
        "auto",
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<_> = stderr.lines().filter(|l| l.contains("device auto")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("device auto: using the CPU ("), "{stderr}");
    if cfg!(feature = "cuda") {
        assert!(!lines[0].contains("built without the cuda feature"), "{stderr}");
    } else {
        assert!(lines[0].contains("built without the cuda feature"), "{stderr}");
    }
    // --device cpu is silent; --device cuda without a usable GPU fails clearly.
    let out = common::tokscope_output(&[
        "decode",
        "--model",
        m,
        "--prompt",
        "Once",
        "--max-new-tokens",
        "1",
        "--device",
        "cpu",
    ]);
    assert!(out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("device auto"));
    let out = common::tokscope_output(&["decode", "--model", m, "--prompt", "Once", "--device", "cuda"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--device cuda: "), "{stderr}");
}

/// `trace` and `mediate` intervene inside the forward pass, which only the
/// CPU decoder supports: `--device cuda` is refused with the reason (on any
/// machine, GPU or not), `auto` runs on the CPU and says so in the same line
/// format as every other command.
#[test]
fn interventions_refuse_cuda_and_run_auto_on_the_cpu() {
    let m = model_dir();
    let m = m.to_str().unwrap();
    let out = common::tokscope_output(&["trace", "--model", m, "--prompt", "Once upon a time,", "--device", "cuda"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--device cuda: causal tracing and mediation patch hidden states"), "{stderr}");
    assert!(stderr.contains("use --device cpu"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let out =
        common::tokscope_output(&["mediate", "--data", dir.path().to_str().unwrap(), "--model", m, "--device", "cuda"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--device cuda: causal tracing"));
    let out = common::tokscope_output(&[
        "trace",
        "--model",
        m,
        "--prompt",
        "Once upon a time,",
        "--device",
        "auto",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<_> = stderr.lines().filter(|l| l.contains("device auto")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("device auto: using the CPU (causal tracing and mediation"), "{stderr}");
}

/// `decode-bench` runs the ids 1..=P then greedy steps: its ids must be what
/// greedy decoding of the same ids gives through the library.
#[test]
fn decode_bench_reports_rates_and_the_greedy_ids_of_its_prompt() {
    let m = model_dir();
    let out = common::tokscope(&[
        "decode-bench",
        "--model",
        m.to_str().unwrap(),
        "--prompt-tokens",
        "5",
        "--new-tokens",
        "4",
        "--json",
    ]);
    let report: Value = serde_json::from_str(&out).expect("decode-bench JSON");
    assert!(report["prefill_tps"].as_f64().unwrap() > 0.0 && report["decode_tps"].as_f64().unwrap() > 0.0);
    let model = tokscope::replay::LlamaModel::from_dir(&m).unwrap();
    assert_eq!(report["params"].as_u64().unwrap() as usize, model.parameter_count());
    // An f32 checkpoint with an untied head: every parameter is read once per token, 4 bytes
    // each, except the input embeddings (384 x 64), of which a token reads one row.
    assert_eq!(report["weight_bytes"].as_u64().unwrap() as usize, 4 * (model.parameter_count() - 384 * 64));
    if cfg!(target_os = "linux") {
        assert!(report["peak_rss_bytes"].as_u64().unwrap() > 0);
    }
    let want = tokscope::replay::greedy_decode(&model, &[1, 2, 3, 4, 5], 4).unwrap();
    let got: Vec<u32> = serde_json::from_value(report["greedy_ids"].clone()).unwrap();
    // greedy_decode stops at EOS; decode-bench never does, so compare the common prefix.
    assert_eq!(got[..want.greedy_ids.len()], want.greedy_ids[..]);
}
