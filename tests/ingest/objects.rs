//! A bucket of many small objects, one LiteLLM payload each (as LiteLLM's S3
//! logger writes them), behind a relay that adds a round trip to every
//! request: the objects are fetched many at a time and parsed in their order.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{self, FaultProxy, S3Server};

/// Objects in the bucket.
const OBJECTS: usize = 200;

/// Puts `OBJECTS` objects under `logs/litellm/`: the first call of
/// tests/data/real/litellm_gcs.ndjson (LiteLLM's own `StandardLoggingPayload`,
/// without its `model_map_information`: about 2 KB), each with its own `id`
/// (`chatcmpl-00000`, ...) and a start one second after the one before.
fn put_payloads(s3: &S3Server) {
    let endpoint = s3.env().into_iter().find(|(k, _)| *k == "AWS_ENDPOINT_URL").unwrap().1;
    let payloads = common::data_dir().join("real/litellm_gcs.ndjson");
    let script = format!(
        r#"
import boto3, json
s3 = boto3.client('s3', endpoint_url={endpoint:?}, aws_access_key_id='testing', aws_secret_access_key='testing', region_name='us-east-1')
s3.create_bucket(Bucket='logs')
payload = json.loads(open({payloads:?}).readline())
payload.pop('model_map_information', None)
for i in range({OBJECTS}):
    p = dict(payload, id='chatcmpl-%05d' % i)
    for key in ('startTime', 'endTime', 'completionStartTime'):
        p[key] = payload[key] + i
    s3.put_object(Bucket='logs', Key='litellm/2026/12/04/%05d.json' % i, Body=json.dumps(p).encode())
"#,
        payloads = payloads.display().to_string()
    );
    common::python(&script);
}

/// The ingest of the bucket at `concurrency` requests in flight into `out`.
fn ingest_args(out: &Path, concurrency: &str) -> Vec<String> {
    let args =
        ["ingest", "--quiet", "--io-concurrency", concurrency, "--out", out.to_str().unwrap(), "s3://logs/litellm/"];
    args.map(String::from).to_vec()
}

/// Ingests the bucket through `proxy` at `concurrency` requests in flight
/// into `out` (2 threads); the wall time.
fn ingest_through(proxy: &FaultProxy, s3: &S3Server, out: &Path, concurrency: usize) -> Duration {
    let env = proxy.env(s3);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("RAYON_NUM_THREADS", "2"));
    let args = ingest_args(out, &concurrency.to_string());
    let started = Instant::now();
    common::tokscope_with_env(&env, &args.iter().map(String::as_str).collect::<Vec<_>>());
    started.elapsed()
}

/// Every object's row, once, in the objects' order: the dataset's
/// `requests` rows as written (one day, one file), their ids and source objects.
fn assert_rows_exact(out: &Path) {
    let files = crate::ingest::files_by_writer(out);
    let requests: Vec<_> = files.iter().filter(|(k, _)| k.starts_with("requests/")).collect();
    assert_eq!(requests.len(), 1, "one requests file: {:?}", files.keys());
    let column = |name: &str| -> Vec<String> {
        requests[0]
            .1
            .iter()
            .flat_map(|b| {
                let c =
                    arrow::compute::cast(b.column_by_name(name).unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
                let c = c.as_any().downcast_ref::<arrow::array::StringArray>().unwrap().clone();
                c.iter().map(|v| v.unwrap_or_default().to_string()).collect::<Vec<_>>()
            })
            .collect()
    };
    let want_ids: Vec<String> = (0..OBJECTS).map(|i| format!("chatcmpl-{i:05}")).collect();
    let want_files: Vec<String> = (0..OBJECTS).map(|i| format!("s3://logs/litellm/2026/12/04/{i:05}.json")).collect();
    assert_eq!(column("request_id"), want_ids);
    assert_eq!(column("source_file"), want_files);
}

/// 200 objects behind 40 ms a request: one at a time the ingest waits 200
/// round trips (8 s at least), 64 at a time under half of that and a
/// quarter of the time one at a time took (the rest is the process's own
/// start, listing, parsing and commit, on a machine the suite keeps busy); the
/// rows are every object's, once, in the objects' order, and the two
/// datasets' files hold the same rows in the same order.
#[test]
fn small_objects_are_fetched_many_at_a_time_and_parsed_in_order() {
    let s3 = S3Server::start();
    put_payloads(&s3);
    let proxy = FaultProxy::start(&s3, &["--delay-first", "1000000", "--delay", "0.04"]);
    let dir = tempfile::tempdir().unwrap();
    let (one, many) = (dir.path().join("one"), dir.path().join("many"));
    let serial = ingest_through(&proxy, &s3, &one, 1);
    let concurrent = ingest_through(&proxy, &s3, &many, 64);
    let round_trips = Duration::from_millis(40) * OBJECTS as u32;
    assert!(serial >= round_trips, "one at a time took {serial:?}, less than {OBJECTS} round trips");
    assert!(
        concurrent < round_trips / 2 && concurrent < serial / 4,
        "64 at a time took {concurrent:?} ({serial:?} one at a time)"
    );
    assert_rows_exact(&one);
    assert_rows_exact(&many);
    let (one, many) = (crate::ingest::files_by_writer(&one), crate::ingest::files_by_writer(&many));
    assert_eq!(one.keys().collect::<Vec<_>>(), many.keys().collect::<Vec<_>>());
    for (key, batches) in &one {
        assert!(batches == &many[key], "{key} differs between 1 and 64 requests in flight");
    }
}

/// A relay that answers a tenth of the requests with a server error or a
/// delay, or drops the connection after the store answered: every object
/// is retried to its row, once, in order; a rerun ingests nothing again.
#[test]
fn objects_fetched_at_once_through_faults_are_ingested_once_in_order() {
    let s3 = S3Server::start();
    put_payloads(&s3);
    let faults = ["--fault-rate", "0.1", "--seed", "7", "--faults", "500,503,delay,drop-reply", "--delay", "0.3"];
    let proxy = FaultProxy::start(&s3, &faults);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    ingest_through(&proxy, &s3, &out, 64);
    assert_rows_exact(&out);
    ingest_through(&proxy, &s3, &out, 64);
    assert_rows_exact(&out);
    let log = proxy.log();
    assert!(log.contains("(injected"), "the relay injected faults:\n{log}");
}

/// A run dead after appending its manifest lines, before its commit record
/// went: the next run finishes the commit, which adds none of those lines
/// again, and ingests nothing twice; the manifest lists each object once.
#[test]
fn a_commit_dead_after_its_manifest_lines_adds_them_once() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let line = |i: usize| {
        format!("{{\"ts\":\"2024-06-01T00:00:0{i}Z\",\"model\":\"m\",\"prompt_tokens\":{i},\"completion_tokens\":1}}\n")
    };
    for i in 0..3 {
        std::fs::write(logs.join(format!("{i}.jsonl")), line(i)).unwrap();
    }
    let data = dir.path().join("ds");
    let o = std::process::Command::new(common::bin())
        .args(["ingest", "--quiet", "--out", data.to_str().unwrap(), logs.to_str().unwrap()])
        .env("TOKSCOPE_CRASH_AT", "manifested")
        .output()
        .unwrap();
    assert!(!o.status.success(), "the run must have died");
    let manifest = |data: &Path| std::fs::read_to_string(data.join("_manifest.jsonl")).unwrap().lines().count();
    assert_eq!(manifest(&data), 3);
    std::fs::write(logs.join("3.jsonl"), line(3)).unwrap();
    common::ingest(&[logs.to_str().unwrap()], &data, &[]);
    assert_eq!(manifest(&data), 4, "each object listed once");
    let rows = common::query(&data, "SELECT count(*) AS n, sum(prompt_tokens) AS p FROM requests");
    assert_eq!((rows[0]["n"].as_u64(), rows[0]["p"].as_u64()), (Some(4), Some(6)));
}

/// `kill -9` at eight points spread over an ingest of the bucket through the
/// relay (8 requests in flight, so that a run lasts), each next run over
/// what the last left: after each kill a query sees none of the objects'
/// rows or all of them; then two reruns (the second finds nothing new) hold
/// every object's row exactly once.
#[test]
#[ignore = "hung once with no process left to wait for (cargo test -- --ignored runs it); see docs/RELIABILITY.md"]
fn kill_9_mid_bucket_then_a_rerun_ingests_every_object_once() {
    let s3 = S3Server::start();
    put_payloads(&s3);
    let proxy = FaultProxy::start(&s3, &["--delay-first", "1000000", "--delay", "0.04"]);
    let dir = tempfile::tempdir().unwrap();
    let full = ingest_through(&proxy, &s3, &dir.path().join("timing"), 8);
    let out = dir.path().join("ds");
    let env = proxy.env(&s3);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = ingest_args(&out, "8");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let visible = || match out.join("_files.json").exists() {
        true => common::query(&out, "SELECT count(*) AS n FROM requests")[0]["n"].as_u64().unwrap(),
        false => 0,
    };
    let mut points = common::kill_points(full, 1.2, 8, 0x2545f4914f6cdd1d);
    points.sort();
    for at in points {
        let status = common::kill_after_with_env(&env, &args, at);
        let rows = visible();
        assert!(rows == 0 || rows == OBJECTS as u64, "killed at {at:?} ({status}): {rows} rows visible");
    }
    ingest_through(&proxy, &s3, &out, 8);
    ingest_through(&proxy, &s3, &out, 8);
    let mut ids: Vec<String> = crate::ingest::files_by_writer(&out)
        .iter()
        .filter(|(k, _)| k.starts_with("requests/"))
        .flat_map(|(_, batches)| batches.iter())
        .flat_map(|b| {
            let c = b.column_by_name("request_id").unwrap();
            let c = c.as_any().downcast_ref::<arrow::array::StringArray>().unwrap().clone();
            c.iter().map(|v| v.unwrap().to_string()).collect::<Vec<_>>()
        })
        .collect();
    ids.sort();
    let want: Vec<String> = (0..OBJECTS).map(|i| format!("chatcmpl-{i:05}")).collect();
    assert_eq!(ids, want, "every object once after the kills");
}
