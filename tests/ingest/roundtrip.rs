//! Property test: any valid canonical record, ingested through the real
//! writer, reads back from the dataset's Parquet files (with the `parquet`
//! crate's own reader, not through DataFusion) with every logged field
//! unchanged: ids, model, timestamps to the microsecond, counts, timings,
//! and prompt and output texts of any Unicode.

use std::collections::HashMap;
use std::path::Path;

use arrow::array::{Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;
use tokscope::ingest::{ingest, IngestOptions};
use tokscope::reader::ReaderBuilder;

#[derive(Debug, Clone, PartialEq)]
struct Rec {
    request_id: String,
    model: String,
    session_id: Option<String>,
    ts_micros: i64,
    prompt_tokens: i64,
    completion_tokens: i64,
    cached_tokens: i64,
    max_tokens: Option<i64>,
    ttft_ms: Option<f64>,
    latency_ms: Option<f64>,
    prompt: Option<String>,
    model_output: Option<String>,
}

/// Milliseconds with microsecond precision, as gateways log them, or any
/// float of the range with all 17 significant digits (each must come back
/// to the bit: the JSON parser rounds correctly).
fn millis() -> impl Strategy<Value = f64> {
    prop_oneof![(0i64..100_000_000).prop_map(|us| us as f64 / 1000.0), 0.0f64..1e8]
}

fn rec() -> impl Strategy<Value = Rec> {
    // Token counts up to the plausible maximum (10^8) a line may hold.
    let counts = (0i64..=100_000_000, 0i64..1 << 20).prop_flat_map(|(p, c)| (Just(p), Just(c), 0..=p));
    (
        // A model name has a character other than white space (a blank one is rejected).
        ("\\PC{1,20}", "\\PC{0,5}[^\\s\\p{C}]\\PC{0,6}", prop::option::of(any::<String>())),
        // 2001-09-09 .. 2033-05-18, to the microsecond.
        1_000_000_000_000_000i64..2_000_000_000_000_000,
        counts,
        prop::option::of(0i64..1 << 20),
        (prop::option::of(millis()), prop::option::of(millis())),
        (prop::option::of(any::<String>()), prop::option::of(any::<String>())),
    )
        .prop_map(
            |((request_id, model, session_id), ts_micros, (p, c, cached), max_tokens, (ttft, lat), (prompt, out))| {
                Rec {
                    request_id,
                    model,
                    session_id,
                    ts_micros,
                    prompt_tokens: p,
                    completion_tokens: c,
                    cached_tokens: cached,
                    max_tokens,
                    ttft_ms: ttft,
                    latency_ms: lat,
                    prompt,
                    model_output: out,
                }
            },
        )
}

fn line(r: &Rec) -> String {
    let ts = chrono::DateTime::from_timestamp_micros(r.ts_micros).unwrap();
    let mut v = serde_json::json!({
        "ts": ts.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "request_id": r.request_id, "model": r.model,
        "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens, "cached_tokens": r.cached_tokens,
    });
    let opt = |v: &mut serde_json::Value, k: &str, x: Option<serde_json::Value>| {
        if let Some(x) = x {
            v[k] = x;
        }
    };
    opt(&mut v, "session_id", r.session_id.clone().map(Into::into));
    opt(&mut v, "max_tokens", r.max_tokens.map(Into::into));
    opt(&mut v, "ttft_ms", r.ttft_ms.map(Into::into));
    opt(&mut v, "latency_ms", r.latency_ms.map(Into::into));
    opt(&mut v, "prompt", r.prompt.clone().map(Into::into));
    opt(&mut v, "model_output", r.model_output.clone().map(Into::into));
    v.to_string()
}

fn parquet_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            parquet_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
}

fn column<T: Clone + 'static>(b: &RecordBatch, name: &str, ty: DataType) -> T {
    let c = cast(b.column_by_name(name).unwrap_or_else(|| panic!("{name}")), &ty).unwrap();
    c.as_any().downcast_ref::<T>().unwrap_or_else(|| panic!("{name} as {ty}")).clone()
}

fn read_back(dataset: &Path) -> Vec<Rec> {
    let mut files = Vec::new();
    parquet_files(&dataset.join("requests"), &mut files);
    let mut out = Vec::new();
    for f in files {
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f).unwrap()).unwrap().build().unwrap();
        for batch in reader {
            let b = batch.unwrap();
            let s = |n: &str| column::<StringArray>(&b, n, DataType::Utf8);
            let i = |n: &str| column::<Int64Array>(&b, n, DataType::Int64);
            let f = |n: &str| column::<Float64Array>(&b, n, DataType::Float64);
            let (id, model, session, prompt, output) =
                (s("request_id"), s("model"), s("session_id"), s("prompt"), s("model_output"));
            let (pt, ct, cached, max) =
                (i("prompt_tokens"), i("completion_tokens"), i("cached_tokens"), i("max_tokens"));
            let (ttft, lat) = (f("ttft_ms"), f("latency_ms"));
            let ts = column::<TimestampMicrosecondArray>(&b, "ts", DataType::Timestamp(TimeUnit::Microsecond, None));
            let str_opt = |a: &StringArray, r: usize| a.is_valid(r).then(|| a.value(r).to_string());
            for r in 0..b.num_rows() {
                out.push(Rec {
                    request_id: id.value(r).to_string(),
                    model: model.value(r).to_string(),
                    session_id: str_opt(&session, r),
                    ts_micros: ts.value(r),
                    prompt_tokens: pt.value(r),
                    completion_tokens: ct.value(r),
                    cached_tokens: cached.value(r),
                    max_tokens: max.is_valid(r).then(|| max.value(r)),
                    ttft_ms: ttft.is_valid(r).then(|| ttft.value(r)),
                    latency_ms: lat.is_valid(r).then(|| lat.value(r)),
                    prompt: str_opt(&prompt, r),
                    model_output: str_opt(&output, r),
                });
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn valid_records_round_trip_through_parquet_unchanged(recs in proptest::collection::vec(rec(), 1..40)) {
        // Request ids are the key: one record per id.
        let mut by_id: HashMap<String, Rec> = HashMap::new();
        for r in recs {
            by_id.entry(r.request_id.clone()).or_insert(r);
        }
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.jsonl");
        let text: Vec<String> = by_id.values().map(line).collect();
        std::fs::write(&input, text.join("\n") + "\n").unwrap();
        let opts = IngestOptions {
            reader: ReaderBuilder::new().with_format(Some("canonical".parse().unwrap())),
            ..Default::default()
        };
        let out = dir.path().join("ds");
        let summary = ingest(&[input.to_str().unwrap().to_string()], out.to_str().unwrap(), &opts).unwrap();
        prop_assert_eq!(summary.totals.counts.lines_rejected, 0);
        let back = read_back(&out);
        prop_assert_eq!(back.len(), by_id.len());
        for r in back {
            prop_assert_eq!(Some(&r), by_id.get(&r.request_id));
        }
    }
}
