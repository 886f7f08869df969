//! The two parts of an ingest measured alone, for `bench/ingest.sh`: any
//! ingest of a JSON-lines log into Parquet reads and parses the log, and
//! writes the columns it keeps. Neither part alone is an ingest; together they
//! are a floor of tokscope's own design (its derived columns, partitions and
//! `request_counts` are on top of them).
//!
//! ```text
//! ingest_floors parse LOG THREADS
//!     Reads the log at THREADS positions at once (as tokscope reads a local
//!     file in blocks) and parses every line's JSON into a null sink
//!     (serde_json into IgnoredAny: every byte and escape validated, nothing
//!     kept). Fails when a line is not JSON.
//! ingest_floors write TABLE_DIR OUT_DIR THREADS
//!     Reads every Parquet file under TABLE_DIR (a table of a dataset) into
//!     memory, untimed, then writes the same rows with tokscope's writer
//!     properties for that table (zstd(1), its row-group size, dictionaries
//!     and statistics as its catalog says): row groups handed to THREADS
//!     writers in turn, one file each, as ingest's writer threads do.
//! ```
//!
//! Prints one JSON line: `{"seconds": S, ...}`, the timed part alone.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use rayon::prelude::*;
use tokscope::catalog;
use tokscope::dataset::writer::{default_compression, writer_props, Integers};
use tokscope::ingest::budget::ROW_GROUP_ROWS;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Bytes each parsing task reads at once (tokscope's blocks are of this order).
const BLOCK: u64 = 8 << 20;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("parse") if args.len() == 4 => parse(Path::new(&args[2]), args[3].parse()?),
        Some("write") if args.len() == 5 => write(Path::new(&args[2]), Path::new(&args[3]), args[4].parse()?),
        _ => Err("usage: ingest_floors parse LOG THREADS | write TABLE_DIR OUT_DIR THREADS".into()),
    }
}

fn pool(threads: usize) -> Res<rayon::ThreadPool> {
    Ok(rayon::ThreadPoolBuilder::new().num_threads(threads.max(1)).build()?)
}

fn parse(log: &Path, threads: usize) -> Res<()> {
    let pool = pool(threads)?;
    let start = Instant::now();
    let file = File::open(log)?;
    let len = file.metadata()?.len();
    let ranges: Vec<(u64, u64)> = (0..len.div_ceil(BLOCK)).map(|i| (i * BLOCK, ((i + 1) * BLOCK).min(len))).collect();
    let counts =
        pool.install(|| ranges.par_iter().map(|&(a, b)| parse_range(&file, a, b, len)).collect::<Res<Vec<u64>>>())?;
    let seconds = start.elapsed().as_secs_f64();
    println!("{{\"seconds\": {seconds}, \"lines\": {}, \"bytes\": {len}}}", counts.iter().sum::<u64>());
    Ok(())
}

/// Parses the lines that start in `[a, b)`: reads from the byte before `a`
/// (to know whether a line starts at `a`) up to the newline that ends the
/// line running past `b`.
fn parse_range(file: &File, a: u64, b: u64, len: u64) -> Res<u64> {
    let from = a.saturating_sub(1);
    let mut buf = vec![0u8; (b - from) as usize];
    file.read_exact_at(&mut buf, from)?;
    let mut pos = b;
    while pos < len && buf.last() != Some(&b'\n') {
        let mut more = vec![0u8; (64 << 10).min(len - pos) as usize];
        file.read_exact_at(&mut more, pos)?;
        pos += more.len() as u64;
        match more.iter().position(|&c| c == b'\n') {
            Some(i) => {
                buf.extend_from_slice(&more[..=i]);
                break;
            }
            None => buf.extend_from_slice(&more),
        }
    }
    let body = if a == 0 {
        &buf[..]
    } else {
        match buf.iter().position(|&c| c == b'\n') {
            Some(i) => &buf[i + 1..],
            None => &buf[buf.len()..],
        }
    };
    let mut lines = 0;
    for line in body.split(|&c| c == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        serde_json::from_slice::<serde::de::IgnoredAny>(line)?;
        lines += 1;
    }
    Ok(lines)
}

fn write(table_dir: &Path, out: &Path, threads: usize) -> Res<()> {
    let name = table_dir.file_name().and_then(|n| n.to_str()).ok_or("TABLE_DIR names no table")?;
    let table = catalog::table(name)?;
    let mut files = Vec::new();
    parquet_files(table_dir, &mut files)?;
    files.sort();
    let mut batches = Vec::new();
    for f in &files {
        for batch in ParquetRecordBatchReaderBuilder::try_new(File::open(f)?)?.with_batch_size(8192).build()? {
            batches.push(batch?);
        }
    }
    let schema = batches.first().ok_or("no rows under TABLE_DIR")?.schema();
    let all = concat_batches(&schema, &batches)?;
    drop(batches);
    // Row groups of ingest's size, handed to the writers in turn.
    let groups: Vec<RecordBatch> = (0..all.num_rows())
        .step_by(ROW_GROUP_ROWS)
        .map(|at| all.slice(at, ROW_GROUP_ROWS.min(all.num_rows() - at)))
        .collect();
    let leaves = ArrowSchemaConverter::new().convert(&schema)?;
    let props = writer_props(table, &leaves, default_compression(), Integers::Plain, ROW_GROUP_ROWS);
    std::fs::create_dir_all(out)?;
    let writers = threads.max(1).min(groups.len().max(1));
    let pool = pool(threads)?;
    let start = Instant::now();
    let bytes = pool.install(|| {
        (0..writers)
            .into_par_iter()
            .map(|w| -> Res<u64> {
                let path = out.join(format!("part-{w}.parquet"));
                let mut writer =
                    ArrowWriter::try_new(BufWriter::new(File::create(&path)?), schema.clone(), Some(props.clone()))?;
                for group in groups.iter().skip(w).step_by(writers) {
                    writer.write(group)?;
                    writer.flush()?;
                }
                writer.into_inner()?.flush()?;
                Ok(std::fs::metadata(&path)?.len())
            })
            .collect::<Res<Vec<u64>>>()
    })?;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{{\"seconds\": {seconds}, \"rows\": {}, \"row_groups\": {}, \"files\": {writers}, \"bytes\": {}}}",
        all.num_rows(),
        groups.len(),
        bytes.iter().sum::<u64>()
    );
    Ok(())
}

fn parquet_files(dir: &Path, out: &mut Vec<PathBuf>) -> Res<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            parquet_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "parquet")
            && !path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'))
        {
            out.push(path);
        }
    }
    Ok(())
}
