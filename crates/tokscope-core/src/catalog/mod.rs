//! The table catalog: every table of a tokscope dataset, declared once.
//!
//! Each table lives in its own module as one `table!` declaration (see
//! [`columns`]): name, key, partitioning, who writes it, and per column its
//! Arrow type, nullability, Parquet hints, documentation and the expression
//! that fills it. The query engine registers [`CATALOG`], the writers take
//! their schemas and hints from it, and `schemas/<table>.json` is generated
//! from it (a test keeps the files equal).
//!
//! Adding a table: a module here with one `table!` declaration, and one line
//! in [`CATALOG`]; a table that formats fill also gives its row type a
//! [`append::TableRow`] impl, so that the reader appends its rows unnamed.

pub mod append;
pub mod columns;
pub mod evals;
pub mod interventions;
pub mod kernels;
pub mod moe_routing;
pub mod profiles;
pub mod rejects;
pub mod replay_verdicts;
pub mod request_counts;
pub mod requests;
pub mod tokens;

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::error::Result;

/// A batch plus the `date` partition (days since the epoch) of each row;
/// `days` is empty for tables without partitions.
pub struct DatedBatch {
    /// The rows.
    pub batch: RecordBatch,
    /// Partition day per row.
    pub days: Vec<i32>,
}

/// Every table, in the order `SHOW TABLES` and the docs list them.
pub const CATALOG: &[TableDef] = &[
    requests::RequestsBuilder::DEF,
    request_counts::RequestCountsBuilder::DEF,
    tokens::TokensBuilder::DEF,
    profiles::ProfilesBuilder::DEF,
    rejects::RejectsBuilder::DEF,
    replay_verdicts::VerdictsBuilder::DEF,
    interventions::InterventionsBuilder::DEF,
    kernels::KernelsBuilder::DEF,
    moe_routing::MoeRoutingBuilder::DEF,
    evals::EvalsBuilder::DEF,
];

/// Each table's entry as a constant, for code that names tables (a job's
/// inputs): a misspelt table is a compile error, not a missing table at run time.
pub mod tables {
    use super::TableDef;

    /// `requests`.
    pub const REQUESTS: &TableDef = &super::requests::RequestsBuilder::DEF;
    /// `request_counts`.
    pub const REQUEST_COUNTS: &TableDef = &super::request_counts::RequestCountsBuilder::DEF;
    /// `tokens`.
    pub const TOKENS: &TableDef = &super::tokens::TokensBuilder::DEF;
    /// `profiles`.
    pub const PROFILES: &TableDef = &super::profiles::ProfilesBuilder::DEF;
    /// `rejects`.
    pub const REJECTS: &TableDef = &super::rejects::RejectsBuilder::DEF;
    /// `replay_verdicts`.
    pub const REPLAY_VERDICTS: &TableDef = &super::replay_verdicts::VerdictsBuilder::DEF;
    /// `interventions`.
    pub const INTERVENTIONS: &TableDef = &super::interventions::InterventionsBuilder::DEF;
    /// `kernels`.
    pub const KERNELS: &TableDef = &super::kernels::KernelsBuilder::DEF;
    /// `moe_routing`.
    pub const MOE_ROUTING: &TableDef = &super::moe_routing::MoeRoutingBuilder::DEF;
    /// `evals`.
    pub const EVALS: &TableDef = &super::evals::EvalsBuilder::DEF;
}

/// Name of the hive partition column (`date=YYYY-MM-DD`) of partitioned tables.
/// It is a directory level, not a column inside the Parquet files.
pub const DATE_PARTITION: &str = "date";

/// How a table's files are laid out in directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// All files in the table's directory.
    None,
    /// One directory per UTC day: `date=YYYY-MM-DD` (a `date32` column when read).
    Date,
}

/// A Parquet writer hint for one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnFlag {
    /// Few distinct values: dictionary-encode. Other columns are written
    /// plain, since a dictionary attempt on nearly unique values is wasted work.
    Dictionary,
    /// Long free text or unique ids: no min/max statistics (they never prune).
    NoStatistics,
    /// Floating-point values with full mantissas (ratios, logprobs,
    /// entropies): a general-purpose codec saves about 5 % of their bytes and
    /// triples the time to read them, so the column's floating-point leaves
    /// are written uncompressed whatever the codec of the rest of the file.
    Incompressible,
}

/// One column of a table.
#[derive(Debug, Clone, Copy)]
pub struct ColumnDef {
    /// Column name.
    pub name: &'static str,
    /// Its Arrow type.
    pub data_type: fn() -> DataType,
    /// Whether it may be null.
    pub nullable: bool,
    /// What it holds (the doc comment of its declaration).
    pub doc: &'static str,
    /// Parquet writer hints.
    pub flags: &'static [ColumnFlag],
}

impl ColumnDef {
    /// The Arrow field.
    pub fn field(&self) -> Field {
        Field::new(self.name, (self.data_type)(), self.nullable)
    }

    /// The description: the doc comment's lines joined with spaces.
    pub fn description(&self) -> String {
        join_doc(self.doc)
    }

    /// Whether the column carries `flag`.
    pub fn has(&self, flag: ColumnFlag) -> bool {
        self.flags.contains(&flag)
    }
}

/// The command that writes a table: ingest's tables exist in every dataset
/// (empty when no input filled them); the others once their command ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrittenBy {
    /// `tokscope ingest` (and `run`), from the input formats.
    Ingest,
    /// `tokscope replay`.
    Replay,
    /// `tokscope mediate`.
    Mediate,
}

impl WrittenBy {
    /// The command line that writes the table (`tokscope ingest`).
    pub fn command(self) -> &'static str {
        match self {
            WrittenBy::Ingest => "tokscope ingest",
            WrittenBy::Replay => "tokscope replay",
            WrittenBy::Mediate => "tokscope mediate",
        }
    }
}

impl std::fmt::Display for WrittenBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.command())
    }
}

/// Whether a table's files are compressed with the codec of
/// `--compression` (zstd(1) by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableCodec {
    /// The codec `--compression` names.
    Given,
    /// None, whatever `--compression` says: for a table of a few thousand
    /// rows per file, whose column chunks of a few kilobytes a codec barely
    /// shrinks, while reading each compressed one costs more than reading
    /// its bytes (parquet-rs creates a compressor and a decompressor for
    /// every column chunk it reads, each asking the CPU for its features:
    /// on a virtual machine an exit to the host).
    None,
}

/// One table of a dataset.
#[derive(Debug, Clone, Copy)]
pub struct TableDef {
    /// Table name, also its directory in the dataset.
    pub name: &'static str,
    /// What one row is.
    pub about: &'static str,
    /// The columns that identify a row.
    pub key: &'static [&'static str],
    /// Directory layout.
    pub partition: Partition,
    /// The command that writes it.
    pub written_by: WrittenBy,
    /// Whether its files take the codec of `--compression`.
    pub codec: TableCodec,
    /// The columns stored in its files, in order.
    pub columns: &'static [ColumnDef],
}

impl TableDef {
    /// The schema of the table's files (without the partition column).
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.columns.iter().map(ColumnDef::field).collect::<Vec<_>>()))
    }

    /// What one row is: the doc comment's lines joined with spaces.
    pub fn description(&self) -> String {
        join_doc(self.about)
    }

    /// The column by name.
    pub fn column(&self, name: &str) -> Option<&'static ColumnDef> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The table's documentation as written to `schemas/<table>.json`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut columns: Vec<serde_json::Value> = self
            .columns
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.name,
                    "type": type_name(&(c.data_type)()),
                    "nullable": c.nullable,
                    "description": c.description(),
                })
            })
            .collect();
        let (partitioned_by, path) = match self.partition {
            Partition::None => (None, format!("<DATASET>/{}/part-<run>-<n>.parquet", self.name)),
            Partition::Date => {
                columns.push(serde_json::json!({
                    "name": DATE_PARTITION,
                    "type": "date32 (hive partition)",
                    "nullable": false,
                    "description": "UTC date of the row; a directory level `date=YYYY-MM-DD`, not stored inside the files.",
                }));
                (Some(DATE_PARTITION), format!("<DATASET>/{}/date=YYYY-MM-DD/part-<run>-<n>.parquet", self.name))
            }
        };
        serde_json::json!({
            "table": self.name,
            "about": join_doc(self.about),
            "key": self.key,
            "partitioned_by": partitioned_by,
            "path": path,
            "written_by": self.written_by.command(),
            "compression": match self.codec {
                TableCodec::Given => "zstd",
                TableCodec::None => "none",
            },
            "columns": columns,
        })
    }
}

/// Looks a table up by name.
pub fn table(name: &str) -> Result<&'static TableDef> {
    CATALOG.iter().find(|t| t.name == name).ok_or_else(|| {
        let names: Vec<_> = CATALOG.iter().map(|t| t.name).collect();
        config_err!("unknown table {name:?}; tables: {}", names.join(", "))
    })
}

fn join_doc(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The short type names used in `schemas/*.json`.
fn type_name(t: &DataType) -> String {
    match t {
        DataType::Utf8 => "utf8".into(),
        DataType::Binary => "binary".into(),
        DataType::Boolean => "bool".into(),
        DataType::Int32 => "int32".into(),
        DataType::Int64 => "int64".into(),
        DataType::UInt64 => "uint64".into(),
        DataType::Float64 => "float64".into(),
        DataType::Date32 => "date32".into(),
        DataType::Timestamp(unit, tz) => {
            let unit = match unit {
                arrow_schema::TimeUnit::Second => "s",
                arrow_schema::TimeUnit::Millisecond => "ms",
                arrow_schema::TimeUnit::Microsecond => "us",
                arrow_schema::TimeUnit::Nanosecond => "ns",
            };
            match tz {
                Some(tz) => format!("timestamp[{unit}, {tz}]"),
                None => format!("timestamp[{unit}]"),
            }
        }
        DataType::List(item) => format!("list<{}>", type_name(item.data_type())),
        DataType::Struct(fields) => {
            let inner: Vec<String> =
                fields.iter().map(|f| format!("{}: {}", f.name(), type_name(f.data_type()))).collect();
            format!("struct<{}>", inner.join(", "))
        }
        other => other.to_string().to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_a_documented_key_and_columns() {
        for t in CATALOG {
            assert!(!t.columns.is_empty(), "{}", t.name);
            for k in t.key {
                assert!(t.column(k).is_some(), "{}: key column {k} is not a column", t.name);
            }
            for c in t.columns {
                assert!(!c.description().is_empty(), "{}.{} has no description", t.name, c.name);
            }
        }
    }

    #[test]
    fn table_names_are_unique_and_looked_up() {
        let mut names: Vec<_> = CATALOG.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOG.len());
        assert_eq!(table("requests").map(|t| t.name).ok(), Some("requests"));
        assert!(table("nope").is_err());
    }
}
