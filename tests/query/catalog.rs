//! The catalog, its generated docs and the registries stay in step:
//! `schemas/<table>.json` is the catalog's rendering (regenerate with
//! `TOKSCOPE_BLESS=1 cargo test --test query catalog::`), every format, job and table
//! is named in ARCHITECTURE.md and the README, and `--help` lists them.

use crate::common;

use tokscope::catalog::CATALOG;
use tokscope::formats::Format;
use tokscope::jobs::JOBS;

#[test]
fn schema_files_are_the_catalog_rendered() {
    let dir = common::repo().join("schemas");
    for table in CATALOG {
        let path = dir.join(format!("{}.json", table.name));
        let rendered = format!("{}\n", serde_json::to_string_pretty(&table.to_json()).unwrap());
        common::assert_snapshot(&path, &rendered, "cargo test --test query catalog::");
    }
    let mut files: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    let mut tables: Vec<String> = CATALOG.iter().map(|t| format!("{}.json", t.name)).collect();
    tables.sort();
    assert_eq!(files, tables, "schemas/ holds exactly one file per catalog table");
}

#[test]
fn docs_name_every_format_job_and_table() {
    let arch = std::fs::read_to_string(common::repo().join("docs/ARCHITECTURE.md")).unwrap();
    let readme = std::fs::read_to_string(common::repo().join("README.md")).unwrap();
    for name in Format::names() {
        assert!(arch.contains(&format!("`{name}`")), "ARCHITECTURE.md does not name the format `{name}`");
        assert!(readme.contains(&format!("`{name}`")), "README.md does not name the format `{name}`");
    }
    for job in JOBS {
        assert!(arch.contains(&format!("`{}`", job.name)), "ARCHITECTURE.md does not name the job `{}`", job.name);
        assert!(readme.contains(&format!("`{}`", job.name)), "README.md does not name the job `{}`", job.name);
    }
    for table in CATALOG {
        assert!(
            arch.contains(&format!("`{}`", table.name)),
            "ARCHITECTURE.md does not name the table `{}`",
            table.name
        );
    }
}

#[test]
fn help_lists_the_registered_formats_and_jobs() {
    let ingest = common::tokscope(&["ingest", "--help"]);
    for name in Format::names() {
        assert!(ingest.contains(name), "ingest --help does not list {name}:\n{ingest}");
    }
    let job = common::tokscope(&["job", "--help"]);
    for j in JOBS {
        assert!(job.contains(j.name) && job.contains(j.about), "job --help does not list {}:\n{job}", j.name);
    }
}
