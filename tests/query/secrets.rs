//! Secrets never leave through an output: credentials planted in the
//! environment (AWS keys, a session token, the redaction key) and in input
//! URLs (a pre-signed URL's signature, a password in the user information)
//! appear in no stdout, stderr, dataset file, manifest, summary or export,
//! whether the commands succeed or fail. (Over S3 with real credentials in
//! play: tests/cluster/scheduled.rs, `no_credential_appears_in_any_output_or_file`.)

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{bin, repo};

const PLANTED: &[&str] = &[
    "AKIAPLANTED7EXAMPLE",
    "SecretPlanted/K7MDENG/bPxRfiCY",
    "SessionTokenPlanted9",
    "redact-key-planted-0123456789",
    "SigPlanted4242",
    "PwPlanted77",
];

fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("AWS_ACCESS_KEY_ID", PLANTED[0]),
        ("AWS_SECRET_ACCESS_KEY", PLANTED[1]),
        ("AWS_SESSION_TOKEN", PLANTED[2]),
        ("TOKSCOPE_REDACT_KEY", PLANTED[3]),
        // No instance metadata lookups from the test machine.
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_REGION", "us-east-1"),
    ]
}

fn all_bytes(dir: &Path, out: &mut Vec<u8>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_bytes(&p, out);
        } else {
            out.extend(std::fs::read(&p).unwrap());
        }
    }
}

#[test]
fn planted_credentials_appear_in_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let site = dir.path().join("site");
    let d = data.to_str().unwrap();
    let signed =
        format!("https://127.0.0.1:9/logs/x.jsonl?X-Amz-Signature={}&X-Amz-Security-Token={}", PLANTED[4], PLANTED[2]);
    let userinfo = format!("http://admin:{}@127.0.0.1:9/logs/y.jsonl", PLANTED[5]);
    let sample = repo().join("sample_logs/canonical.jsonl");
    let runs: Vec<(Vec<String>, bool)> = vec![
        (
            vec![
                "ingest".into(),
                "--json".into(),
                "--redact".into(),
                "hash".into(),
                "--out".into(),
                d.into(),
                sample.to_str().unwrap().into(),
            ],
            true,
        ),
        (vec!["ingest".into(), "--out".into(), d.into(), signed.clone()], false),
        (vec!["ingest".into(), "--out".into(), d.into(), userinfo.clone()], false),
        (
            vec![
                "ingest".into(),
                "--out".into(),
                format!("s3://bucket/ds?X-Amz-Signature={}", PLANTED[4]),
                sample.to_str().unwrap().into(),
            ],
            false,
        ),
        (vec!["query".into(), "--data".into(), d.into(), "SELECT count(*) FROM requests".into()], true),
        (vec!["query".into(), "--data".into(), signed.clone(), "SELECT 1".into()], false),
        (vec!["job".into(), "report".into(), "--data".into(), d.into()], true),
        (vec!["export".into(), "--data".into(), d.into(), "--to".into(), site.to_str().unwrap().into()], true),
    ];
    let mut haystack = Vec::new();
    for (args, ok) in &runs {
        let o = Command::new(bin()).args(args).envs(env()).output().unwrap();
        assert_eq!(o.status.success(), *ok, "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        if !ok {
            // The failure names the input, without its secret parts.
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("REDACTED") || err.contains("127.0.0.1") || err.contains("bucket"), "{err}");
        }
        haystack.extend(o.stdout);
        haystack.extend(o.stderr);
    }
    all_bytes(&data, &mut haystack);
    all_bytes(&site, &mut haystack);
    assert!(site.join("latest").is_dir(), "the export ran");
    for secret in PLANTED {
        assert!(!haystack.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} leaked");
    }
}

#[test]
fn an_ingested_url_is_stored_without_its_query_string() {
    let dir = tempfile::tempdir().unwrap();
    let s3 = common::S3Server::start();
    s3.put("logs", &[("y.jsonl", &repo().join("sample_logs/canonical.jsonl"))]);
    let data = dir.path().join("ds");
    let ingest = |url: &str| {
        Command::new(bin())
            .args(["ingest", "--json", "--out", data.to_str().unwrap(), url])
            .envs(s3.env())
            .output()
            .unwrap()
    };
    // A password in an http URL is refused before any request, without echoing it.
    let refused = ingest(&format!("http://admin:{}@127.0.0.1:9/y.jsonl", PLANTED[5]));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("user information"), "{err}");
    let o = ingest(&format!("s3://logs/y.jsonl?X-Amz-Signature={}", PLANTED[4]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = common::query(&data, "SELECT DISTINCT source_file FROM requests");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["source_file"], "s3://logs/y.jsonl");
    let mut haystack = [refused.stdout, refused.stderr, o.stdout, o.stderr].concat();
    all_bytes(&data, &mut haystack);
    for secret in &PLANTED[4..] {
        assert!(!haystack.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} stored");
    }
}
