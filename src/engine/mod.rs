//! The query engine: one function registers a dataset's tables and
//! tokscope's UDFs in any DataFusion `SessionContext`, so ad-hoc SQL, the SQL
//! jobs, the SQL shell and distributed executors all see the same catalog.

pub mod architectures;
pub mod pricing;
pub mod udfs;

use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::datasource::MemTable;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::{SessionConfig, SessionContext};

use tokscope_core::catalog::{Partition, TableDef, CATALOG, DATE_PARTITION};
use tokscope_core::derive::EosMarkers;

use crate::dataset::DatasetRoot;
use crate::error::Result;
use architectures::Architectures;
use pricing::Pricing;

/// A session with tokscope's defaults (information schema on, so
/// `SHOW TABLES` and `information_schema.columns` work), tunable with
/// DataFusion's `DATAFUSION_*` environment variables (e.g.
/// `DATAFUSION_EXECUTION_TARGET_PARTITIONS=8`), as in datafusion-cli.
pub fn new_session() -> Result<SessionContext> {
    let config = SessionConfig::from_env()?.with_information_schema(true);
    Ok(SessionContext::new_with_config(config))
}

/// What tokscope's UDFs need beyond their arguments: prices, model shapes
/// and EOS markers.
#[derive(Debug, Clone)]
pub struct UdfConfig {
    /// Prices for `price_usd` (none by default: every request is unpriced).
    pub pricing: Arc<Pricing>,
    /// Model shapes for `kv_cache_bytes` (the bundled `config/architectures.toml` by default).
    pub architectures: Arc<Architectures>,
    /// Markers for `is_eos_marker` (the defaults plus `--eos-markers`, as at ingest).
    pub markers: Arc<EosMarkers>,
}

impl UdfConfig {
    /// The defaults: no prices, the bundled architectures, the default EOS markers.
    pub fn new() -> Result<Self> {
        Self::load(None, None, None)
    }

    /// Loads `--pricing` (TOML or `litellm:FILE`), `--architectures` (TOML over
    /// the bundled file) and `--eos-markers` (JSON over the defaults) when given.
    pub fn load(pricing: Option<&str>, architectures: Option<&Path>, eos_markers: Option<&Path>) -> Result<Self> {
        Ok(UdfConfig {
            pricing: Arc::new(match pricing {
                Some(p) => Pricing::load(p)?,
                None => Pricing::default(),
            }),
            architectures: Arc::new(match architectures {
                Some(p) => Architectures::load_over_bundled(p)?,
                None => Architectures::bundled()?,
            }),
            markers: Arc::new(match eos_markers {
                Some(p) => EosMarkers::from_file(p)?,
                None => EosMarkers::default(),
            }),
        })
    }
}

/// A multi-threaded runtime for driving the engine's async calls from
/// synchronous commands (the one every command uses).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| crate::Error::io("tokio runtime", e))
}

/// Registers tokscope's SQL functions (see [`udfs`]) in `ctx`; registering
/// again replaces them, e.g. with other prices.
pub fn register_udfs(ctx: &SessionContext, config: &UdfConfig) {
    ctx.register_udaf(udfs::quantile_cont());
    ctx.register_udaf(udfs::bootstrap_mean_ci());
    ctx.register_udf(udfs::price_usd(Arc::clone(&config.pricing)));
    ctx.register_udf(udfs::kv_cache_bytes(Arc::clone(&config.architectures)));
    ctx.register_udf(udfs::is_eos_marker(Arc::clone(&config.markers)));
    ctx.register_udf(udfs::redundancy_bound());
    ctx.register_udaf(udfs::concurrency::max_overlap());
    ctx.register_udf(udfs::ab::compare_proportions());
    ctx.register_udf(udfs::ab::compare_medians());
    ctx.register_udf(udfs::ab::compare_cost_per_1k());
    ctx.register_udwf(udfs::ab::holm_adjust());
}

/// Registers every table of `dataset` and the UDFs with their defaults
/// ([`UdfConfig::new`]) in `ctx`.
pub async fn register_dataset(ctx: &SessionContext, dataset: &DatasetRoot) -> Result<()> {
    register_dataset_with(ctx, dataset, &UdfConfig::new()?).await
}

/// Registers the UDFs with `config` and every table of the catalog
/// (`tokscope_core::catalog::CATALOG`) that `dataset` holds in `ctx`: the one
/// call any session (CLI, shell, executor) makes. A table the dataset does not
/// have yet is registered empty, with its schema, so SQL can always name and
/// join it.
pub async fn register_dataset_with(ctx: &SessionContext, dataset: &DatasetRoot, config: &UdfConfig) -> Result<()> {
    register_udfs(ctx, config);
    if let DatasetRoot::Remote { url, store, .. } = dataset {
        let base = url::Url::parse(&format!("{}://{}", url.scheme(), url.authority()))
            .map_err(|e| config_err!("bad dataset URL {url}: {e}"))?;
        ctx.register_object_store(&base, Arc::clone(store));
    }
    for table in CATALOG {
        register_parquet_table(ctx, dataset, table)?;
    }
    Ok(())
}

/// Registers one table directory of the dataset as a Parquet listing table
/// (with the `date` hive partition for date-partitioned tables).
fn register_parquet_table(ctx: &SessionContext, dataset: &DatasetRoot, table: &TableDef) -> Result<()> {
    let file_schema = with_view_types(&table.schema());
    let partitioned = table.partition == Partition::Date;
    let missing = matches!(dataset, DatasetRoot::Local(p) if !p.join(table.name).is_dir());
    if missing {
        let mut fields: Vec<_> = file_schema.fields().iter().cloned().collect();
        if partitioned {
            fields.push(Arc::new(arrow::datatypes::Field::new(DATE_PARTITION, DataType::Date32, true)));
        }
        let s = Arc::new(arrow::datatypes::Schema::new(fields));
        ctx.register_table(table.name, Arc::new(MemTable::try_new(s, vec![vec![]])?))?;
        return Ok(());
    }
    let mut options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    if partitioned {
        options = options.with_table_partition_cols(vec![(DATE_PARTITION.to_string(), DataType::Date32)]);
    }
    let url = ListingTableUrl::parse(dataset.table_url(table.name)?)?;
    let config = ListingTableConfig::new(url).with_listing_options(options).with_schema(file_schema);
    ctx.register_table(table.name, Arc::new(ListingTable::try_new(config)?))?;
    Ok(())
}

/// The schema with top-level strings and binaries as view types, which
/// DataFusion reads from Parquet without copying each value into a new
/// offsets buffer; declaring plain `Utf8` forces that copy on every scan.
fn with_view_types(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
            DataType::Binary => Arc::new(f.as_ref().clone().with_data_type(DataType::BinaryView)),
            _ => Arc::clone(f),
        })
        .collect();
    Arc::new(arrow::datatypes::Schema::new(fields))
}

/// Runs SQL. Unless `allow_write`, only queries are accepted: no DDL, DML or
/// `SET`, so ad-hoc SQL over a shared dataset cannot change it.
pub async fn run_sql(ctx: &SessionContext, sql: &str, allow_write: bool) -> Result<Vec<RecordBatch>> {
    let options =
        SQLOptions::new().with_allow_ddl(allow_write).with_allow_dml(allow_write).with_allow_statements(allow_write);
    let df = ctx.sql_with_options(sql, options).await?;
    df.collect().await?.iter().map(without_view_types).collect()
}

/// Results leave the engine with plain `Utf8`/`Binary` columns: view types are
/// a scan-time optimisation, and every consumer (exports, replay, mediation)
/// then reads one string type.
fn without_view_types(batch: &RecordBatch) -> Result<RecordBatch> {
    if !batch.schema().fields().iter().any(|f| matches!(f.data_type(), DataType::Utf8View | DataType::BinaryView)) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        let plain = match f.data_type() {
            DataType::Utf8View => DataType::Utf8,
            DataType::BinaryView => DataType::Binary,
            other => other.clone(),
        };
        columns.push(arrow::compute::cast(c, &plain)?);
        fields.push(f.as_ref().clone().with_data_type(plain));
    }
    Ok(RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)?)
}
