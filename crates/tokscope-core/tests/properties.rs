//! Property tests over generated inputs:
//! - accounting: any mix of valid lines (from each format's samples), damaged
//!   ones and arbitrary bytes, in every line-framed format, read in chunks
//!   of any size, gives `lines_read = lines_ingested + lines_rejected`, and
//!   each line's fate is the one it has when read alone (lines are independent);
//! - bins and EOS status: generated canonical records end with the
//!   `context_bin`, `has_eos_marker`, `finish_reason` and `eos_status` of the
//!   reference definitions written out here from docs/metrics.md.

use std::path::{Path, PathBuf};

use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray};
use proptest::prelude::*;
use tokscope_core::catalog::tables;
use tokscope_core::formats::{Format, Framing};
use tokscope_core::fuzz::read_checked;
use tokscope_core::reader::{LineCounts, ReaderBuilder};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Sample files per format: (format, file, whether its first line is a CSV header).
const SAMPLES: &[(&str, &str, bool)] = &[
    ("anthropic", "sample_logs/anthropic.jsonl", false),
    ("azure_csv", "sample_logs/azure_conv_head.csv", true),
    ("canonical", "sample_logs/canonical.jsonl", false),
    ("helicone", "sample_logs/helicone.jsonl", false),
    ("langfuse", "sample_logs/langfuse.jsonl", false),
    ("litellm", "sample_logs/litellm.jsonl", false),
    ("litellm", "sample_logs/litellm_spendlogs.csv", true),
    ("mooncake", "sample_logs/mooncake_head.jsonl", false),
    ("openai_batch", "sample_logs/openai_batch.jsonl", false),
    ("openai_chat", "sample_logs/openai_chat.jsonl", false),
    ("openai_responses", "sample_logs/openai_responses.jsonl", false),
    ("otel", "sample_logs/otel.jsonl", false),
    ("profile", "sample_logs/profile.jsonl", false),
    ("tgi", "sample_logs/tgi.jsonl", false),
    ("vllm", "sample_logs/vllm.jsonl", false),
    ("eval", "tests/data/formats/eval.sample.jsonl", false),
    ("moe_routing", "tests/data/formats/moe_routing.sample.csv", true),
    ("bedrock", "tests/data/real/bedrock_invocation_built.jsonl", false),
    ("bedrock", "tests/data/real/bedrock_converse.jsonl", false),
    ("gemini", "tests/data/real/gemini_generate_content.jsonl", false),
    ("gemini", "tests/data/real/gemini_stream_chunks.jsonl", false),
    ("ollama", "tests/data/real/ollama_responses.jsonl", false),
    ("ollama", "tests/data/real/ollama_chat_stream.ndjson", false),
    ("cohere", "tests/data/real/cohere_chat.jsonl", false),
    ("cohere", "tests/data/real/cohere_stream_chunks.jsonl", false),
];

struct Sample {
    format: Format,
    header: Option<Vec<u8>>,
    lines: Vec<Vec<u8>>,
}

fn samples() -> Vec<Sample> {
    SAMPLES
        .iter()
        .map(|(format, path, has_header)| {
            let text = std::fs::read(repo().join(path)).expect("sample file");
            let mut lines: Vec<Vec<u8>> =
                text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect();
            let header = has_header.then(|| lines.remove(0));
            let format: Format = format.parse().expect("registered format");
            // The valid lines: some samples hold a line a format rejects on purpose.
            lines.retain(|l| {
                read_checked(&file(header.as_deref(), std::slice::from_ref(l)), Some(format), 1 << 16, 1 << 20)
                    .lines_ingested
                    == 1
            });
            lines.truncate(24);
            assert!(!lines.is_empty(), "{path}: no valid line");
            Sample { format, header, lines }
        })
        .collect()
}

/// Every format that reads newline-framed lines has a sample here.
#[test]
fn every_line_format_has_a_sample() {
    for format in Format::all().filter(|f| f.framing() == Framing::Lines) {
        assert!(SAMPLES.iter().any(|(name, ..)| *name == format.name()), "{} has no sample", format.name());
    }
}

/// How a generated line is made from a sample line.
#[derive(Debug, Clone)]
enum LineGen {
    /// A sample line as it is.
    Valid(usize),
    /// A sample line cut after `at` bytes (of its length, modulo).
    Truncated(usize, usize),
    /// A sample line with one byte replaced.
    Flipped(usize, usize, u8),
    /// Arbitrary bytes.
    Bytes(Vec<u8>),
    /// A blank line.
    Blank,
}

fn line_gen() -> impl Strategy<Value = LineGen> {
    prop_oneof![
        4 => any::<usize>().prop_map(LineGen::Valid),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(i, at)| LineGen::Truncated(i, at)),
        2 => (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(i, at, b)| LineGen::Flipped(i, at, b)),
        1 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(LineGen::Bytes),
        1 => Just(LineGen::Blank),
    ]
}

/// The line `g` makes from `lines`: never holding a newline, never
/// starting with a byte-order mark (both change how lines are framed, not
/// how they parse).
fn make_line(g: &LineGen, lines: &[Vec<u8>]) -> Vec<u8> {
    let pick = |i: usize| &lines[i % lines.len()];
    let mut line = match g {
        LineGen::Valid(i) => pick(*i).clone(),
        LineGen::Truncated(i, at) => {
            let l = pick(*i);
            l[..at % (l.len() + 1)].to_vec()
        }
        LineGen::Flipped(i, at, b) => {
            let mut l = pick(*i).clone();
            let n = l.len();
            l[at % n] = *b;
            l
        }
        LineGen::Bytes(b) => b.clone(),
        LineGen::Blank => Vec::new(),
    };
    line.retain(|&b| b != b'\n');
    if line.starts_with(b"\xEF\xBB\xBF") {
        line.insert(0, b' ');
    }
    line
}

fn file(header: Option<&[u8]>, lines: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in header.into_iter().chain(lines.iter().map(Vec::as_slice)) {
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out
}

fn minus(a: &LineCounts, b: &LineCounts) -> [u64; 8] {
    [
        a.lines_read - b.lines_read,
        a.lines_ingested - b.lines_ingested,
        a.lines_rejected - b.lines_rejected,
        a.lines_skipped - b.lines_skipped,
        a.rows_written - b.rows_written,
        a.records_rejected - b.records_rejected,
        a.tokens_written - b.tokens_written,
        a.profiles_written - b.profiles_written,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_mix_of_lines_is_accounted_for_line_by_line(
        sample in 0..SAMPLES.len(),
        gens in proptest::collection::vec(line_gen(), 1..40),
        chunk_bytes in 1usize..4096,
    ) {
        let all = samples();
        let s = &all[sample];
        let lines: Vec<Vec<u8>> = gens.iter().map(|g| make_line(g, &s.lines)).collect();
        let header = s.header.as_deref();
        // Each line read alone (after the header when the format has one).
        let base = read_checked(&file(header, &[]), Some(s.format), 1 << 16, 1 << 20);
        let mut expected = [0u64; 8];
        for line in &lines {
            let alone = read_checked(&file(header, std::slice::from_ref(line)), Some(s.format), 1 << 16, 1 << 20);
            for (e, d) in expected.iter_mut().zip(minus(&alone, &base)) {
                *e += d;
            }
        }
        // The mixed file, in chunks of any size (read_checked also checks
        // that the counts reconcile and equal the rows in the batches).
        let mixed = read_checked(&file(header, &lines), Some(s.format), chunk_bytes, 1 << 20);
        prop_assert!(mixed.reconciles());
        prop_assert_eq!(minus(&mixed, &base), expected, "{} {:?}", s.format.name(), mixed);
        let valid = gens.iter().filter(|g| matches!(g, LineGen::Valid(_))).count() as u64;
        prop_assert!(mixed.lines_ingested >= valid, "every sample line is ingested: {:?}", mixed);
    }
}

// ---- bins and EOS status against their reference definitions ----

/// The default EOS markers, as docs/metrics.md lists them.
const MARKERS: &[&str] = &[
    "<|endoftext|>",
    "<|im_end|>",
    "</s>",
    "<|eot_id|>",
    "<|end|>",
    "[EOS]",
    "<|end▁of▁sentence|>",
    "<｜end▁of▁sentence｜>",
];

/// Reference `context_bin` over the default edges 0, 1K, ..., 128K: the
/// largest edge at most `prompt_tokens`, labelled `lo-hi` or `128K+`.
fn reference_bin(prompt_tokens: i64) -> (String, i64) {
    let edges: Vec<i64> = [0, 1, 2, 4, 8, 16, 32, 64, 128].iter().map(|k| k * 1024).collect();
    let i = edges.iter().rposition(|&e| e <= prompt_tokens).unwrap();
    let k = |e: i64| if e == 0 { "0".to_string() } else { format!("{}K", e / 1024) };
    let label = match edges.get(i + 1) {
        Some(&hi) => format!("{}-{}", k(edges[i]), k(hi)),
        None => format!("{}+", k(edges[i])),
    };
    (label, edges[i])
}

/// Reference finish-reason normalisation for the raw values generated here.
fn reference_finish(raw: &str) -> Option<&'static str> {
    Some(match raw {
        "stop" | "eos_token" | "end_turn" | "stop_sequence" | "STOP" => "stop",
        "length" | "max_tokens" | "max_new_tokens" | "MAX_TOKENS" => "length",
        "tool_calls" | "tool_use" | "tool_call" | "tool-calls" | "function_call" => "tool_calls",
        "content_filter" | "SAFETY" => "content_filter",
        "error" | "cancelled" => "error",
        "" => return None,
        _ => "other",
    })
}

/// Reference `eos_status` (docs/metrics.md).
fn reference_eos(
    output: Option<&str>,
    finish: Option<&str>,
    completion: i64,
    max_tokens: Option<i64>,
) -> (Option<bool>, &'static str) {
    let marker = output.map(|o| {
        let t = o.trim_end_matches([' ', '\n', '\t', '\r']);
        MARKERS.iter().any(|m| t.ends_with(m))
    });
    let length_stop = finish == Some("length") || max_tokens.is_some_and(|m| completion >= m);
    let status = match marker {
        Some(true) => "eos",
        Some(false) if length_stop => "length",
        Some(false) => "implicit_truncation",
        None if matches!(finish, Some("stop") | Some("tool_calls")) => "eos",
        None if length_stop => "length",
        None => "unknown",
    };
    (marker, status)
}

#[derive(Debug, Clone)]
struct Req {
    prompt_tokens: i64,
    completion_tokens: i64,
    max_tokens: Option<i64>,
    finish: Option<String>,
    output: Option<String>,
}

fn req() -> impl Strategy<Value = Req> {
    let edge = prop::sample::select(vec![0i64, 1, 2, 4, 8, 16, 32, 64, 128]);
    let prompt = prop_oneof![(edge, -1i64..=1).prop_map(|(k, d)| (k * 1024 + d).max(0)), 0i64..10_000_000,];
    let finish = prop::option::of(prop::sample::select(vec![
        "stop",
        "eos_token",
        "end_turn",
        "stop_sequence",
        "length",
        "max_tokens",
        "max_new_tokens",
        "tool_calls",
        "tool_use",
        "content_filter",
        "error",
        "cancelled",
        "tool_call",
        "tool-calls",
        "function_call",
        "STOP",
        "MAX_TOKENS",
        "SAFETY",
        "weird",
        "",
    ]));
    let piece = prop_oneof![
        prop::sample::select(MARKERS.to_vec()).prop_map(str::to_string),
        prop::sample::select(vec![" ", "\n", "\t", "\r\n", "end", "s>", "<|", "é", "世界"]).prop_map(str::to_string),
        "[a-z ]{0,8}",
    ];
    let output = prop::option::of(proptest::collection::vec(piece, 0..6).prop_map(|p| p.concat()));
    (prompt, 0i64..5000, prop::option::of(0i64..5000), finish, output).prop_map(|(p, c, m, f, o)| Req {
        prompt_tokens: p,
        completion_tokens: c,
        max_tokens: m,
        finish: f.map(str::to_string),
        output: o,
    })
}

fn requests_batches(input: &[u8]) -> Vec<RecordBatch> {
    let format: Format = "canonical".parse().unwrap();
    let mut reader =
        ReaderBuilder::new().with_format(Some(format)).build(std::io::Cursor::new(input.to_vec()), "p.jsonl");
    let mut batches = Vec::new();
    for slices in &mut reader {
        for slice in slices.expect("slices") {
            assert_eq!(slice.counts.lines_rejected, 0, "generated lines are valid");
            batches.extend(slice.batch(tables::REQUESTS).cloned());
        }
    }
    batches
}

fn col<'b, T: 'static>(batch: &'b RecordBatch, name: &str) -> &'b T {
    batch.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<T>()).expect(name)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn bins_and_eos_status_equal_their_reference_definitions(reqs in proptest::collection::vec(req(), 1..30)) {
        let mut input = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            let mut v = serde_json::json!({
                "ts": 1717200000000i64, "request_id": format!("r{i}"), "model": "m",
                "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            });
            if let Some(m) = r.max_tokens { v["max_tokens"] = m.into(); }
            if let Some(f) = &r.finish { v["finish_reason"] = f.as_str().into(); }
            if let Some(o) = &r.output { v["model_output"] = o.as_str().into(); }
            input.extend_from_slice(v.to_string().as_bytes());
            input.push(b'\n');
        }
        let batches = requests_batches(&input);
        prop_assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), reqs.len());
        for batch in &batches {
        let (bin, lo) = (col::<StringArray>(batch, "context_bin"), col::<Int64Array>(batch, "context_bin_lo"));
        let (marker, status) = (col::<BooleanArray>(batch, "has_eos_marker"), col::<StringArray>(batch, "eos_status"));
        let finish = col::<StringArray>(batch, "finish_reason");
        let ids = col::<StringArray>(batch, "request_id");
        for row in 0..batch.num_rows() {
            let i: usize = ids.value(row)[1..].parse().unwrap();
            let r = &reqs[i];
            let (want_bin, want_lo) = reference_bin(r.prompt_tokens);
            prop_assert_eq!((bin.value(row), lo.value(row)), (want_bin.as_str(), want_lo), "{:?}", r);
            let norm = r.finish.as_deref().and_then(|f| reference_finish(f.trim()));
            prop_assert_eq!(finish.is_valid(row).then(|| finish.value(row)), norm, "{:?}", r);
            let (want_marker, want_status) = reference_eos(r.output.as_deref(), norm, r.completion_tokens, r.max_tokens);
            prop_assert_eq!(marker.is_valid(row).then(|| marker.value(row)), want_marker, "{:?}", r);
            prop_assert_eq!(status.value(row), want_status, "{:?}", r);
        }
        }
    }
}

// ---- floats survive ingest bit for bit ----

/// Any finite f64 in `[0, max]`, drawn across bit patterns (subnormals,
/// integers, long mantissas), not only uniformly.
fn non_negative(max: f64) -> impl Strategy<Value = f64> {
    use proptest::num::f64::{NORMAL, POSITIVE, SUBNORMAL, ZERO};
    (POSITIVE | ZERO | NORMAL | SUBNORMAL).prop_filter("in range", move |v| v.is_finite() && *v <= max)
}

fn any_finite() -> impl Strategy<Value = f64> {
    proptest::num::f64::ANY.prop_filter("finite", |v| v.is_finite())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every float a canonical line carries (durations, ratio, cost, logprobs,
    /// token times) is stored with the same bits it was written with: the
    /// line is read with serde_json's `float_roundtrip`, never through text
    /// again.
    #[test]
    fn every_float_field_survives_ingest_bit_for_bit(
        ttft in non_negative(2_592_000_000.0),
        latency in non_negative(2_592_000_000.0),
        prefill in non_negative(2_592_000_000.0),
        ratio in any_finite(),
        cost in non_negative(f64::MAX),
        logprob in any_finite(),
        top in any_finite(),
        emitted in any_finite(),
    ) {
        let line = serde_json::json!({
            "ts": 1717200000000i64, "request_id": "r", "model": "m", "prompt_tokens": 3, "completion_tokens": 1,
            "ttft_ms": ttft, "latency_ms": latency, "prefill_latency_ms": prefill, "kv_cache_hit_ratio": ratio,
            "logged_cost_usd": cost, "token_times_ms": [emitted],
            "logprobs": [{"token": "a", "logprob": logprob, "top_logprobs": [{"token": "a", "logprob": top}]}],
        })
        .to_string();
        let format: Format = "canonical".parse().unwrap();
        let mut reader = ReaderBuilder::new().with_format(Some(format)).build(std::io::Cursor::new(line.into_bytes()), "f.jsonl");
        let (mut requests, mut tokens) = (Vec::new(), Vec::new());
        for slices in &mut reader {
            for s in slices.expect("slices") {
                prop_assert_eq!(s.counts.lines_rejected, 0);
                requests.extend(s.batch(tables::REQUESTS).cloned());
                tokens.extend(s.batch(tables::TOKENS).cloned());
            }
        }
        let bits = |batch: &RecordBatch, name: &str| col::<arrow_array::Float64Array>(batch, name).value(0).to_bits();
        let r = &requests[0];
        for (name, want) in [("ttft_ms", ttft), ("latency_ms", latency), ("prefill_latency_ms", prefill),
            ("kv_cache_hit_ratio", ratio), ("logged_cost_usd", cost), ("last_token_logprob", logprob),
            ("first_token_emitted_ms", emitted)] {
            prop_assert_eq!(bits(r, name), want.to_bits(), "{} = {:e}", name, want);
        }
        let t = &tokens[0];
        prop_assert_eq!(bits(t, "logprob"), logprob.to_bits());
        prop_assert_eq!(bits(t, "emitted_ms"), emitted.to_bits());
        let top_list = col::<arrow_array::ListArray>(t, "top_logprobs").value(0);
        let top_struct = top_list.as_any().downcast_ref::<arrow_array::StructArray>().expect("struct");
        let top_lp = top_struct.column_by_name("logprob").expect("logprob");
        let top_lp = top_lp.as_any().downcast_ref::<arrow_array::Float64Array>().expect("f64");
        prop_assert_eq!(top_lp.value(0).to_bits(), top.to_bits());
    }
}
