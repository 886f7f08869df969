//! The distributed engine: a real Ballista cluster (`tokscope scheduler` and
//! two `tokscope executor`s, child processes on loopback ports) computes what
//! the local engine computes. Every job whose tables the dataset holds, and
//! an ad-hoc query per tokscope SQL function, run on both; results are the
//! same rows (floats within 1e-9 relative; seeded bootstrap results exactly).
//! Then the same on a dataset on a loopback S3 server (moto), through the CLI,
//! with the scheduler and executors reading it with their own environment's
//! credentials.

use crate::common;
use crate::loopback::{assert_same_rows, csv_rows, generated_logs, json_lines, rows, Cluster};

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use common::{bin, data_dir, free_port, ingest, S3Server};
use tokscope::dataset::DatasetRoot;
use tokscope::engine::distributed::Remote;
use tokscope::engine::{self, udfs, UdfConfig};
use tokscope::jobs::{self, JOBS};

/// Prices for three of the generated models (the fourth stays unpriced), and for LiteLLM's
/// logged calls other than LiteLLM's, so that `reconcile_requests` has rows to compare.
const PRICES: &str = r#"
[[model]]
pattern = "gpt-4o-mini.*"
input = 0.2
output = 0.7
[[model]]
model = "llama-3.1-8b-instruct"
input = 0.18
output = 0.18
[[model]]
pattern = "qwen2\\.5-.*"
input = 0.9
output = 0.9
cached_input = 0.45
[[model]]
model = "deepseek-v3"
input = 0.27
output = 1.1
"#;

/// A dataset of several files over several days with every table a job
/// reads except the ones other commands write (`replay_verdicts`, `interventions`).
fn build_dataset(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("lake");
    let logs = generated_logs(dir, 1800, 3, 3, &["--token-data", "--arms", "control,candidate"]);
    let logs: Vec<&str> = logs.iter().map(String::as_str).collect();
    ingest(&logs, &out, &[]);
    let d = data_dir();
    let samples = [
        d.join("profile/gateway.jsonl"),
        d.join("profile/profile.jsonl"),
        d.join("formats/kernel_trace.sample.json"),
        d.join("formats/moe_routing.sample.csv"),
        d.join("formats/eval.sample.jsonl"),
        // Calls with the cost LiteLLM logged for them (`reconcile`).
        d.join("real/litellm_gcs.ndjson"),
    ];
    let samples: Vec<&str> = samples.iter().map(|p| p.to_str().unwrap()).collect();
    ingest(&samples, &out, &[]);
    out
}

/// One ad-hoc query per tokscope function, run where its table has rows.
/// `exact`: seeded results that must be bit-identical.
const QUERIES: &[(&str, bool)] = &[
    // Attribution: a request under each of its tags, and fields of `extra` read as --attribute reads them.
    ("SELECT tag, count(*) AS n, count(extra_field(extra, 'metadata.team')) AS teams, \
      sum(cardinality(extra_tags(extra, 'metadata.tags'))) AS extra_tags \
      FROM (SELECT *, unnest(group_tags(tags, NULL)) AS tag FROM requests) GROUP BY tag", true),
    // quantile_cont over shuffled groups (partial states merged across executors).
    ("SELECT model, context_bin, quantile_cont(latency_ms, 0.3333333333) AS q, quantile_cont(ttft_ms, 0.95) AS q95 \
      FROM requests GROUP BY model, context_bin", false),
    // Several quantiles of one column (merged into one quantiles_cont by the optimizer), and
    // quantiles_cont called directly.
    ("SELECT model, quantile_cont(ttft_ms, 0.5) AS p50, quantile_cont(ttft_ms, 0.99) AS p99, \
      quantiles_cont(latency_ms, 0.25, 0.75)[2] AS l75 FROM requests GROUP BY model", true),
    ("SELECT model, sum(price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens)['total_usd']) AS usd, \
      count(price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens)) AS priced \
      FROM requests GROUP BY model", false),
    ("SELECT model, sum(kv_cache_bytes(model, prompt_tokens + completion_tokens)) AS kv, \
      max(kv_cache_bytes(model, prompt_tokens, 4)) AS kv4, min(kv_tensor_parallel(model, 0)) AS tp \
      FROM requests GROUP BY model", false),
    ("SELECT model, count(*) FILTER (WHERE is_eos_marker(token)) AS markers, \
      count(*) FILTER (WHERE is_eos_marker(token, model)) AS own FROM tokens GROUP BY model", false),
    ("SELECT layer, redundancy_bound(avg(tokens), max(k), max(num_experts)) AS bound FROM moe_routing GROUP BY layer", false),
    ("SELECT model, bootstrap_mean_ci(latency_ms, 200, 7) AS ci FROM requests GROUP BY model", true),
    ("SELECT task, sum(kl_divergence(relevance_true, relevance_model)) AS kl, count(*) AS n FROM evals GROUP BY task", false),
    ("SELECT r.model, avg(bleu4(r.model_output, e.reference)) AS bleu FROM requests r JOIN evals e USING (request_id) \
      GROUP BY r.model", false),
    ("SELECT model, sum(last_user_words(prompt)) AS words, count(*) AS n FROM requests GROUP BY model", false),
    ("SELECT model, max_overlap(CAST(ts AS BIGINT), CAST(ts AS BIGINT) + CAST(latency_ms * 1000 AS BIGINT)) AS peak \
      FROM requests GROUP BY model", false),
    ("SELECT request_id, longest_run(position) FILTER (WHERE logprob < -0.5) AS low_span, longest_run(position) AS span \
      FROM tokens GROUP BY request_id", false),
    // Called directly, and as the optimizer writes last_value(x ORDER BY an integer).
    ("SELECT request_id, first_last_by(token, position, 1, 0, 0) AS last_token, \
      last_value(logprob ORDER BY position) AS last_logprob FROM tokens GROUP BY request_id", false),
    ("SELECT model, compare_proportions(sum(CASE WHEN eos_status = 'eos' THEN 1 ELSE 0 END), count(*), 30, 100) AS p, \
      compare_medians(array_agg(ttft_ms ORDER BY request_id), array_agg(latency_ms ORDER BY request_id), 300, 11) AS m, \
      compare_cost_per_1k(array_agg(latency_ms ORDER BY request_id), array_agg(prompt_tokens ORDER BY request_id), \
                          array_agg(ttft_ms ORDER BY request_id), array_agg(completion_tokens ORDER BY request_id), 300, 11) AS c \
      FROM requests WHERE ttft_ms IS NOT NULL GROUP BY model", true),
    ("SELECT model, compare_quantiles(array_agg(ttft_ms ORDER BY request_id), array_agg(latency_ms ORDER BY request_id), \
      0.95, 300, 11) AS q, compare_std_devs(array_agg(ttft_ms ORDER BY request_id), \
      array_agg(latency_ms ORDER BY request_id), 300, 11) AS s, sample_ratio_test(count(*), 40, 0.25) AS srm \
      FROM requests WHERE ttft_ms IS NOT NULL GROUP BY model", true),
    ("SELECT model, context_bin, holm_adjust(p) OVER (PARTITION BY model) AS adjusted FROM \
      (SELECT model, context_bin, 1.0 / (1 + count(*)) AS p FROM requests GROUP BY model, context_bin)", false),
];

/// Parameters jobs need on this dataset.
fn params(job: &str) -> Vec<(String, String)> {
    match job {
        "ab" => vec![("a".into(), "control".into()), ("b".into(), "candidate".into())],
        _ => Vec::new(),
    }
}

#[test]
fn jobs_and_every_function_on_a_cluster_equal_the_local_engine() {
    let dir = tempfile::tempdir().unwrap();
    let lake = build_dataset(dir.path());
    let pricing = common::write_file(dir.path(), "prices.toml", PRICES);
    let udf = UdfConfig::load(Some(&pricing), None, None).unwrap();
    let dataset = DatasetRoot::parse(lake.to_str().unwrap()).unwrap();
    let cluster = Cluster::start(&[]);

    // Every tokscope function has an ad-hoc query here.
    let names: Vec<String> = udfs::Plain::ALL
        .iter()
        .map(|p| p.build().name().to_string())
        .chain(udfs::CONFIGURED.iter().map(|s| s.to_string()))
        .collect();
    for name in &names {
        assert!(QUERIES.iter().any(|(q, _)| q.contains(&format!("{name}("))), "no query exercises {name}");
    }

    let rt = tokscope::engine::distributed::runtime().unwrap();
    rt.block_on(async {
        let tables = dataset.contents().await.unwrap().tables;
        for t in ["requests", "tokens", "profiles", "kernels", "moe_routing", "evals"] {
            assert!(tables.contains(&t), "the dataset lacks {t}");
        }
        let local = engine::open(&dataset, &udf, None, &Default::default()).await.unwrap();
        let remote = engine::open(&dataset, &udf, Some(&Remote::new(&cluster.url)), &Default::default()).await.unwrap();

        let mut ran = Vec::new();
        for job in JOBS.iter().filter(|j| j.tables.iter().all(|t| tables.contains(&t.name))) {
            let p = params(job.name);
            let want =
                jobs::run_job_with(&local, job, &p).await.unwrap_or_else(|e| panic!("{} locally: {e}", job.name));
            let got = jobs::run_job_with(&remote, job, &p)
                .await
                .unwrap_or_else(|e| panic!("{} on the cluster: {e}\n{}", job.name, cluster.logs()));
            let (want, got) = (rows(&want), rows(&got));
            assert!(!want.is_empty() || job.name == "composite", "job {} has no rows: a vacuous comparison", job.name);
            assert_same_rows(&format!("job {}", job.name), want, got, 1e-9);
            ran.push(job.name);
        }
        // Only the jobs over tables other commands write are left out.
        let skipped: Vec<_> = JOBS.iter().map(|j| j.name).filter(|n| !ran.contains(n)).collect();
        for name in &skipped {
            let job = jobs::job(name).unwrap();
            assert!(
                job.tables.iter().any(|t| ["replay_verdicts", "interventions"].contains(&t.name)),
                "job {name} did not run"
            );
        }

        for (sql, exact) in QUERIES {
            let want = engine::run_sql(&local, sql, false).await.unwrap_or_else(|e| panic!("{sql} locally: {e}"));
            let got = engine::run_sql(&remote, sql, false)
                .await
                .unwrap_or_else(|e| panic!("{sql} on the cluster: {e}\n{}", cluster.logs()));
            let (want, got) = (rows(&want), rows(&got));
            assert!(!want.is_empty(), "{sql}: no rows");
            assert_same_rows(sql, want, got, if *exact { 0.0 } else { 1e-9 });
        }

        // The executors load no prices: priced rows on the cluster came with the plan.
        let priced = rows(
            &engine::run_sql(
                &remote,
                "SELECT count(*) AS n FROM requests WHERE price_usd(model, ts, prompt_tokens, cached_tokens, \
                 cache_write_tokens, completion_tokens) IS NOT NULL AND model = 'deepseek-v3'",
                false,
            )
            .await
            .unwrap(),
        );
        assert!(priced[0]["n"].as_u64().unwrap() > 0, "{priced:?}");

        // tokscope's quantile_cont, not DataFusion's percentile_cont (whose
        // alias it replaces): for 0 and 1e9 at p = 0.3333333333, type 7 gives
        // 0 + 0.3333333333 * 1e9 = 333333333.3; percentile_cont truncates the
        // weight to 0.333333 (333333000).
        let sql = "SELECT quantile_cont(v, 0.3333333333) AS q, percentile_cont(v, 0.3333333333) AS pc \
                   FROM (VALUES (0.0), (1000000000.0)) AS t(v)";
        let got = rows(&engine::run_sql(&remote, sql, false).await.unwrap());
        let q = got[0]["q"].as_f64().unwrap();
        let pc = got[0]["pc"].as_f64().unwrap();
        assert!((q - 333_333_333.3).abs() < 1e-3, "quantile_cont on the cluster: {q} (percentile_cont: {pc})");
        assert!((pc - q).abs() > 1.0, "the case does not tell the two functions apart: {q} vs {pc}");
    });
    rt.shutdown_background();
    drop(cluster);
}

#[test]
fn a_dataset_on_s3_runs_on_the_cluster_as_locally() {
    let s3 = S3Server::start();
    let env = s3.env();
    s3.put("lake", &[]);
    let dir = tempfile::tempdir().unwrap();
    let logs = generated_logs(dir.path(), 1000, 2, 2, &[]);
    let mut args = vec!["ingest", "--quiet", "--out", "s3://lake/llm"];
    args.extend(logs.iter().map(String::as_str));
    s3.tokscope(&args);
    let pricing = common::write_file(dir.path(), "prices.toml", PRICES);
    let cluster = Cluster::start(&env);

    let run = |args: &[&str], engine: Option<&str>| -> Vec<Value> {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--format", "json", "--data", "s3://lake/llm", "--pricing", &pricing]);
        if let Some(e) = engine {
            all.extend(["--engine", e]);
        }
        let out = Command::new(bin()).args(&all).envs(env.iter().map(|(k, v)| (*k, v.as_str()))).output().unwrap();
        assert!(out.status.success(), "tokscope {all:?}: {}\n{}", String::from_utf8_lossy(&out.stderr), cluster.logs());
        json_lines(&out.stdout)
    };
    for args in [
        vec!["job", "report"],
        vec!["job", "daily"],
        vec![
            "query",
            "SELECT date, model, quantile_cont(latency_ms, 0.3333333333) AS q, \
             sum(price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens)['total_usd']) AS usd \
             FROM requests WHERE date = DATE '2024-06-02' GROUP BY date, model",
        ],
    ] {
        let want = run(&args, None);
        let got = run(&args, Some(&cluster.url));
        assert!(!want.is_empty(), "{args:?}: no rows");
        assert_same_rows(&format!("{args:?} on s3"), want, got, 1e-9);
    }

    // `engine` in a scheduled run's file: the export's jobs run on the cluster.
    let config = |engine: &str| {
        let sources: Vec<String> = logs.iter().map(|l| format!("{l:?}")).collect();
        let text = format!(
            "dataset = \"s3://lake/scheduled\"\nsources = [{}]\npricing = {pricing:?}\nengine = {engine:?}\n\
             [export]\nto = {:?}\njobs = [\"report\", \"daily\"]\n",
            sources.join(", "),
            dir.path().join("site").display().to_string()
        );
        common::write_file(dir.path(), "job.toml", text)
    };
    let scheduled = |engine: &str| {
        Command::new(bin())
            .args(["run", "--config", &config(engine), "--quiet", "--date", "2024-06-03"])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap()
    };
    // Nothing listens there: the run must say so, not quietly run locally.
    let dead = scheduled(&format!("ballista://127.0.0.1:{}", free_port()));
    let err = String::from_utf8_lossy(&dead.stderr);
    assert!(!dead.status.success() && err.contains("no Ballista scheduler answers"), "{err}");
    // The failed run ingested before its export failed: this one has nothing
    // new (exit code 3) and exports again.
    let done = scheduled(&cluster.url);
    assert_eq!(done.status.code(), Some(3), "{}\n{}", String::from_utf8_lossy(&done.stderr), cluster.logs());
    for job in ["report", "daily"] {
        let exported = std::fs::read_to_string(dir.path().join(format!("site/latest/{job}.csv"))).unwrap();
        let local =
            s3.tokscope(&["job", job, "--format", "csv", "--data", "s3://lake/scheduled", "--pricing", &pricing]);
        let (want, got) = (csv_rows(&local), csv_rows(&exported));
        assert!(!want.is_empty(), "{job}: no rows");
        assert_same_rows(&format!("exported {job}"), want, got, 1e-9);
    }
}
