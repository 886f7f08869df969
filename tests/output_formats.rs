//! Snapshots of each text output format: the report of the bundled sample
//! logs as `table`, `csv` and `json`. A change in layout is a reviewed diff
//! of `tests/snapshots/` (regenerate with `TOKSCOPE_BLESS=1 cargo test --test
//! output_formats`), never an accident. The job runs on one partition: float
//! sums then add up in one order, so the last digit is the same every run.

mod common;

#[test]
fn report_of_the_samples_in_every_text_format() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    common::ingest(&[common::repo().join("sample_logs").to_str().unwrap()], &data, &[]);
    let pricing = common::repo().join("config/pricing.example.toml");
    for format in ["table", "csv", "json"] {
        let out = common::tokscope_with_env(
            &[("DATAFUSION_EXECUTION_TARGET_PARTITIONS", "1")],
            &[
                "job",
                "report",
                "--data",
                data.to_str().unwrap(),
                "--pricing",
                pricing.to_str().unwrap(),
                "--format",
                format,
            ],
        );
        let path = common::repo().join(format!("tests/snapshots/report.{format}"));
        common::assert_snapshot(&path, &out, "cargo test --test output_formats");
    }
}
