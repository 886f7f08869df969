//! The query engine: one function registers a dataset's tables and
//! tokscope's UDFs in any DataFusion `SessionContext`, so ad-hoc SQL, the SQL
//! jobs, the SQL shell and distributed executors all see the same catalog.

pub mod distributed;
pub mod first_last;
pub mod merge_quantiles;
pub mod plan_cache;
pub mod schema;
pub mod udfs;

// Prices and model shapes are parsed in the engine-free core (fuzzed there);
// the UDFs here use them.
pub use tokscope_core::{architectures, pricing};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::common::Statistics;
use datafusion::common::TableReference;
use datafusion::datasource::empty::EmptyTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::execution::cache::cache_manager::{CachedFileList, CachedFileMetadata};
use datafusion::execution::cache::{SchemaFingerprint, TableScopedPath};
use datafusion::execution::context::SQLOptions;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};

use tokscope_core::attribution::{AttributeMap, AttributionColumn};
use tokscope_core::catalog::request_counts::RequestCountsBuilder;
use tokscope_core::catalog::requests::RequestsBuilder;
use tokscope_core::catalog::{Partition, TableDef, WrittenBy, CATALOG, DATE_PARTITION};
use tokscope_core::derive::EosMarkers;

use crate::dataset::files::FileList;
use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};
use architectures::Architectures;
use pricing::Pricing;

/// A session with tokscope's defaults (information schema on, so
/// `SHOW TABLES` and `information_schema.columns` work), tunable with
/// DataFusion's `DATAFUSION_*` environment variables (e.g.
/// `DATAFUSION_EXECUTION_TARGET_PARTITIONS=8`), as in datafusion-cli.
pub fn new_session() -> Result<SessionContext> {
    new_session_with(&MemoryLimit::default())
}

/// Bytes read from a Parquet file's end to get its footer in one read.
/// tokscope's footers (and the page index before them) are 8-40 KiB;
/// DataFusion's default, 512 KiB, made `SELECT count(*)` over 60 files read
/// 32 MB and spend most of its time zeroing and copying those buffers.
const METADATA_SIZE_HINT: usize = 64 << 10;

/// The variable that overrides [`METADATA_SIZE_HINT`], as in DataFusion.
const METADATA_SIZE_HINT_VAR: &str = "DATAFUSION_EXECUTION_PARQUET_METADATA_SIZE_HINT";

/// The variable that turns DataFusion's leaf-expression pushdown back on.
/// It is off by default: it moves struct-field reads (`get_field`) towards
/// the scan so that Parquet reads only the fields used, but no tokscope
/// table has a struct column, so all it does is re-project computed
/// structs (`price_usd(..)['total_usd']`): planning the report took
/// 7.3-7.4 ms with it and 5.7 ms without, the A/B job 18.4-18.6 and
/// 14.5 ms, for the same execution (docs/performance-history.md, "Planning
/// each job, rule by rule; a fresh process measured again").
const LEAF_PUSHDOWN_VAR: &str = "DATAFUSION_OPTIMIZER_ENABLE_LEAF_EXPRESSION_PUSHDOWN";

/// The least of the pool each partition of a query gets: DataFusion gives
/// every partition's sort its own reservation (10 MiB to merge what it
/// spilled, `sort_spill_reservation_bytes`) out of the pool, so a small pool
/// split among many partitions fails sorts that would spill fine with fewer.
const POOL_BYTES_PER_PARTITION: usize = 64 << 20;

/// The variable that sets the partitions of a query, as in DataFusion.
const TARGET_PARTITIONS_VAR: &str = "DATAFUSION_EXECUTION_TARGET_PARTITIONS";

/// A query's partitions: the thread count (`--threads`), fewer when the
/// pool would give each less than [`POOL_BYTES_PER_PARTITION`].
pub fn target_partitions(pool_bytes: usize) -> usize {
    let threads = crate::resources::threads();
    if pool_bytes == 0 {
        return threads;
    }
    threads.min(pool_bytes / POOL_BYTES_PER_PARTITION).max(1)
}

/// The session's list-files cache: 64 MiB, the lists of ~300k files.
const LIST_CACHE_BYTES: usize = 64 << 20;

/// How much memory a query may hold, and where operators that can spill
/// (sorts, aggregations, joins) write what does not fit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryLimit {
    /// The pool's size in bytes; `None`: [`MemoryLimit::default_bytes`].
    /// `Some(0)`: no limit.
    pub bytes: Option<usize>,
    /// The spill directory; `None`: the system's temporary directory.
    pub spill_dir: Option<PathBuf>,
}

impl MemoryLimit {
    /// The default pool: half the memory available to the process (its
    /// cgroup's limit included: `resources::Machine`), at least 256 MiB.
    pub fn default_bytes() -> usize {
        crate::resources::memory_share(0.5, 256 << 20, u64::MAX) as usize
    }

    /// The pool size in bytes; 0 for none.
    pub fn pool_bytes(&self) -> usize {
        self.bytes.unwrap_or_else(Self::default_bytes)
    }
}

/// A session like [`new_session`], whose queries hold at most `limit`:
/// operators that can spill do so to `limit.spill_dir`, the others fail with
/// DataFusion's "Resources exhausted" (shown with a hint) instead of the
/// process being killed.
pub fn new_session_with(limit: &MemoryLimit) -> Result<SessionContext> {
    let mut config = SessionConfig::from_env()?.with_information_schema(true);
    let bytes = limit.pool_bytes();
    if std::env::var_os(TARGET_PARTITIONS_VAR).is_none() {
        config = config.with_target_partitions(target_partitions(bytes));
    }
    if std::env::var_os(METADATA_SIZE_HINT_VAR).is_none() {
        config.options_mut().execution.parquet.metadata_size_hint = Some(METADATA_SIZE_HINT);
    }
    if std::env::var_os(LEAF_PUSHDOWN_VAR).is_none() {
        config.options_mut().optimizer.enable_leaf_expression_pushdown = false;
    }
    // Room for the file lists of big datasets (DataFusion's default is 1 MiB,
    // ~5k files), which `register_dataset_with` puts there.
    let mut runtime =
        datafusion::execution::runtime_env::RuntimeEnvBuilder::new().with_object_list_cache_limit(LIST_CACHE_BYTES);
    if bytes > 0 {
        runtime = runtime.with_memory_pool(Arc::new(datafusion::execution::memory_pool::FairSpillPool::new(bytes)));
    }
    if let Some(dir) = &limit.spill_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
        runtime = runtime.with_temp_file_path(dir);
    }
    Ok(SessionContext::new_with_config_rt(config, runtime.build_arc()?))
}

/// What tokscope's UDFs need beyond their arguments: prices, model shapes
/// and EOS markers.
#[derive(Debug, Clone)]
pub struct UdfConfig {
    /// Prices for `price_usd` (by default the bundled snapshot of LiteLLM's table).
    pub pricing: Arc<Pricing>,
    /// Model shapes for `kv_cache_bytes` (the bundled `config/architectures.toml` by default).
    pub architectures: Arc<Architectures>,
    /// Markers for `is_eos_marker` (the defaults plus `--eos-markers`, as at ingest).
    pub markers: Arc<EosMarkers>,
    /// Your own fields read into attribution columns at query time
    /// (`--attribute`, `[attribution]`): see [`attributed_requests_sql`].
    pub attributes: AttributeMap,
}

impl UdfConfig {
    /// The defaults: the bundled prices and architectures, the default EOS markers.
    pub fn new() -> Result<Self> {
        Self::load(None, None, None)
    }

    /// Loads `--pricing` (TOML, `litellm:FILE` or `none`; the bundled LiteLLM
    /// prices without it), `--architectures` (TOML over the bundled file) and
    /// `--eos-markers` (JSON over the defaults) when given.
    pub fn load(pricing: Option<&str>, architectures: Option<&Path>, eos_markers: Option<&Path>) -> Result<Self> {
        Ok(UdfConfig {
            pricing: Arc::new(match pricing {
                Some(p) => Pricing::load(p)?,
                None => Pricing::bundled(),
            }),
            architectures: Arc::new(match architectures {
                Some(p) => Architectures::load_over_bundled(p)?,
                None => Architectures::bundled()?,
            }),
            markers: Arc::new(match eos_markers {
                Some(p) => EosMarkers::from_file(p)?,
                None => EosMarkers::default(),
            }),
            attributes: AttributeMap::default(),
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
    for function in udfs::Function::all(config) {
        match function.build() {
            udfs::Udf::Scalar(f) => ctx.register_udf(f),
            udfs::Udf::Aggregate(f) => ctx.register_udaf(f),
            udfs::Udf::Window(f) => ctx.register_udwf(f),
        }
    }
    // With tokscope's quantile_cont, the rule that shares its values between calls.
    ctx.add_optimizer_rule(Arc::new(merge_quantiles::MergeQuantiles));
    // first_value / last_value ordered by one integer, through first_last_by.
    ctx.add_optimizer_rule(Arc::new(first_last::FirstLastByInteger));
}

/// Registers every table of `dataset` and the UDFs with their defaults
/// ([`UdfConfig::new`]) in `ctx`.
pub async fn register_dataset(ctx: &SessionContext, dataset: &DatasetRoot) -> Result<()> {
    register_dataset_with(ctx, dataset, &UdfConfig::new()?).await
}

/// A session over `dataset` with the UDFs `config` sets up: the local
/// engine, or the Ballista cluster `engine` names.
pub async fn open(
    dataset: &DatasetRoot,
    config: &UdfConfig,
    engine: Option<&distributed::Remote>,
    limit: &MemoryLimit,
) -> Result<SessionContext> {
    match engine {
        Some(remote) => distributed::connect(remote, dataset, config).await,
        None => {
            let ctx = new_session_with(limit)?;
            register_dataset_with(&ctx, dataset, config).await?;
            Ok(ctx)
        }
    }
}

/// How string columns are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableTypes {
    /// Strings and binaries as view types (the local engine: no copy per value).
    Views,
    /// Plain `Utf8`/`Binary` (a distributed engine: view arrays that point
    /// into large Parquet pages would travel whole through shuffles).
    Plain,
}

/// `request_counts` defined over `requests` (`sql/views/request_counts.sql`).
pub const REQUEST_COUNTS_VIEW: &str = include_str!("../../sql/views/request_counts.sql");

/// Registers the UDFs with `config` and the catalog's tables
/// (`tokscope_core::catalog::CATALOG`) that `dataset` holds in `ctx`: the one
/// call any local session (CLI, shell) makes.
///
/// Missing things are errors, never empty results: a root that is not a
/// dataset fails here ([`DatasetRoot::contents`]); a table written by another
/// command than ingest (`replay_verdicts`, `interventions`) that the dataset
/// lacks is not registered, and a query naming it fails while it is planned,
/// with a message naming the table and the command that writes it. Tables
/// ingest writes are registered even without files (empty, with their
/// schema): an ingested dataset without a `rejects` directory had no rejected
/// line, which is a real zero. Jobs still refuse to run over an empty input
/// table ([`crate::jobs::run_job_with`]).
pub async fn register_dataset_with(ctx: &SessionContext, dataset: &DatasetRoot, config: &UdfConfig) -> Result<()> {
    register_dataset_for(ctx, dataset, config, TableTypes::Views).await
}

/// [`register_dataset_with`], choosing how strings are read.
pub async fn register_dataset_for(
    ctx: &SessionContext,
    dataset: &DatasetRoot,
    config: &UdfConfig,
    types: TableTypes,
) -> Result<()> {
    register_udfs(ctx, config);
    if let DatasetRoot::Remote { url, store, .. } = dataset {
        let base = url::Url::parse(&format!("{}://{}", url.scheme(), url.authority()))
            .map_err(|e| config_err!("bad dataset URL {url}: {e}"))?;
        ctx.register_object_store(&base, Arc::clone(store));
    }
    let contents = dataset.contents().await?;
    let (store, root) = dataset.store_and_root()?;
    let files = FileList::load(store.as_ref(), &root).await?;
    if let (Some(files), DatasetRoot::Local(dir)) = (&files, dataset) {
        files.check_local(dir)?;
    }
    let mut absent = HashMap::new();
    for table in CATALOG {
        if contents.tables.contains(&table.name) {
            register_parquet_table(ctx, dataset, table, types, files.as_ref())?;
        } else if table.name == RequestCountsBuilder::DEF.name && contents.tables.contains(&RequestsBuilder::DEF.name) {
            // requests written before ingest counted them: the same rows, computed at query time.
            let view = ctx.sql(REQUEST_COUNTS_VIEW).await?.into_view();
            ctx.register_table(table.name, view)?;
        } else if table.written_by == WrittenBy::Ingest {
            ctx.register_table(table.name, Arc::new(EmptyTable::new(table_schema(table, types))))?;
        } else {
            let what = format!("dataset {} has no table `{}`", dataset.display(), table.name);
            let hint = format!(
                "`{}` writes it ({})",
                table.written_by,
                lowercase_first(table.description().trim_end_matches('.'))
            );
            absent.insert(table.name.to_string(), (what, hint));
        }
    }
    if let Some(sql) = attributed_requests_sql(&config.attributes) {
        // `requests` with the mapped fields in place of their columns, for every query of the session.
        let view = ctx.sql(&sql).await?.into_view();
        ctx.deregister_table(RequestsBuilder::DEF.name)?;
        ctx.register_table(RequestsBuilder::DEF.name, view)?;
    }
    refuse_absent_tables(ctx, absent)
}

/// The query that reads `requests` with `--attribute` mappings applied, as
/// ingest applies them: each mapped column is the field of `extra` where
/// the row's `extra` holds it (`extra_field`, `extra_tags`), else the
/// column as stored; `None` without mappings. Rows ingested before a
/// mapping was added get it this way without their raw logs (their `extra`
/// must be stored as logged: `--redact hash` or `drop` leaves nothing to read).
pub fn attributed_requests_sql(attributes: &AttributeMap) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    let replaced: Vec<String> = attributes
        .mappings()
        .iter()
        .map(|m| {
            let path = m.path.replace('\'', "''");
            match m.column {
                AttributionColumn::Tags => format!("coalesce(extra_tags(extra, '{path}'), tags) AS tags"),
                column => format!("coalesce(extra_field(extra, '{path}'), CAST({column} AS VARCHAR)) AS {column}"),
            }
        })
        .collect();
    Some(format!("SELECT * REPLACE ({}) FROM requests", replaced.join(", ")))
}

/// `text` with its first letter in lower case, to run on inside a sentence.
pub fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

/// Makes the session's default schema refuse the names in `absent` (see
/// [`schema::DatasetSchema`]), keeping whatever it already holds.
fn refuse_absent_tables(ctx: &SessionContext, absent: HashMap<String, (String, String)>) -> Result<()> {
    let options = ctx.state().config().options().catalog.clone();
    let catalog = ctx
        .catalog(&options.default_catalog)
        .ok_or_else(|| internal_err!("the session has no catalog {}", options.default_catalog))?;
    let inner = catalog
        .schema(&options.default_schema)
        .ok_or_else(|| internal_err!("the session has no schema {}", options.default_schema))?;
    let any: &dyn std::any::Any = inner.as_ref();
    let inner = match any.downcast_ref::<schema::DatasetSchema>() {
        // Registered again (other prices, another dataset): wrap the tables, not the old wrapper.
        Some(wrapped) => wrapped.inner(),
        None => inner,
    };
    catalog.register_schema(&options.default_schema, Arc::new(schema::DatasetSchema::new(inner, absent)))?;
    Ok(())
}

/// A table's schema as queries see it: the file columns (strings as views)
/// and, for date-partitioned tables, the `date` partition column.
fn table_schema(table: &TableDef, types: TableTypes) -> SchemaRef {
    let file_schema = match types {
        TableTypes::Views => with_view_types(&table.schema()),
        TableTypes::Plain => table.schema(),
    };
    if table.partition != Partition::Date {
        return file_schema;
    }
    let mut fields: Vec<_> = file_schema.fields().iter().cloned().collect();
    fields.push(Arc::new(arrow::datatypes::Field::new(DATE_PARTITION, DataType::Date32, true)));
    Arc::new(arrow::datatypes::Schema::new(fields))
}

/// Registers one table directory of the dataset as a Parquet listing table
/// (with the `date` hive partition for date-partitioned tables). With the
/// dataset's file list (`dataset::files`), the table reads the files it
/// names: they go into the session's list-files cache under the table's
/// key, so DataFusion takes them instead of listing the directory.
fn register_parquet_table(
    ctx: &SessionContext,
    dataset: &DatasetRoot,
    table: &TableDef,
    types: TableTypes,
    files: Option<&FileList>,
) -> Result<()> {
    let file_schema = match types {
        TableTypes::Views => with_view_types(&table.schema()),
        TableTypes::Plain => table.schema(),
    };
    let partitioned = table.partition == Partition::Date;
    // The session's Parquet options (its `DATAFUSION_EXECUTION_PARQUET_*` settings and
    // tokscope's footer read size), which a table made here would not take by itself.
    let format = ParquetFormat::default().with_options(ctx.state().table_options().parquet.clone());
    let mut options = ListingOptions::new(Arc::new(format)).with_file_extension(".parquet");
    if partitioned {
        options = options.with_table_partition_cols(vec![(DATE_PARTITION.to_string(), DataType::Date32)]);
    }
    let table_ref = TableReference::bare(table.name);
    let url = ListingTableUrl::parse(dataset.table_url(table.name)?)?.with_table_ref(table_ref.clone());
    let files = files.map(|f| f.table_files(table.name, url.prefix()));
    let runtime = ctx.runtime_env();
    if let (Some(files), Some(cache)) = (&files, runtime.cache_manager.get_list_files_cache()) {
        let key = TableScopedPath { table: Some(table_ref.clone()), path: url.prefix().clone() };
        cache.put(&key, CachedFileList::new(files.iter().map(|(meta, _)| meta.clone()).collect()));
    }
    let config = ListingTableConfig::new(url).with_listing_options(options).with_schema(Arc::clone(&file_schema));
    let mut listing = ListingTable::try_new(config)?;
    if let (Some(files), Some(cache)) = (&files, runtime.cache_manager.get_file_statistic_cache()) {
        // The row counts the file list keeps: planning reads no footer, and
        // `count(*)` opens no file. Column statistics stay unknown (pruning
        // uses each footer's row-group statistics when the file is read).
        let fingerprint = Arc::new(SchemaFingerprint::from_schema(&file_schema));
        for (meta, rows) in files {
            let Some(rows) = rows else { continue };
            let mut statistics = Statistics::new_unknown(&file_schema);
            statistics.num_rows = Precision::Exact(*rows as usize);
            let key = TableScopedPath { table: Some(table_ref.clone()), path: meta.location.clone() };
            let value = CachedFileMetadata::new(meta.clone(), Arc::clone(&fingerprint), Arc::new(statistics), None);
            cache.put(&key, value);
        }
        listing = listing.with_cache(Some(cache));
    }
    ctx.register_table(table.name, Arc::new(listing))?;
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
    let plan = plan_sql(ctx, sql, allow_write).await?;
    run_plan(ctx, plan).await
}

/// Plans `sql` as [`run_sql`] does (parse, analyse, optimise, physical
/// plan) without running it; `query --timing` reports this time apart.
/// Read-only SQL run again in the same session reuses its plans
/// ([`plan_cache`]): the physical plan where it can run again, else the
/// optimized logical plan.
pub async fn plan_sql(ctx: &SessionContext, sql: &str, allow_write: bool) -> Result<Arc<dyn ExecutionPlan>> {
    if !allow_write {
        if let Some(kept) = plan_cache::get(&ctx.session_id(), sql) {
            if let Some(physical) = kept.physical() {
                return Ok(physical?);
            }
            let state = ctx.state();
            return Ok(state.query_planner().create_physical_plan(&kept.logical, &state).await?);
        }
    }
    let options =
        SQLOptions::new().with_allow_ddl(allow_write).with_allow_dml(allow_write).with_allow_statements(allow_write);
    let (state, plan) = ctx.sql_with_options(sql, options).await?.into_parts();
    let optimized = state.optimize(&plan)?;
    let physical = state.query_planner().create_physical_plan(&optimized, &state).await?;
    if !allow_write {
        plan_cache::put(&ctx.session_id(), sql, optimized, &physical);
    }
    Ok(physical)
}

/// Runs a plan from [`plan_sql`]; results with plain string types.
pub async fn run_plan(ctx: &SessionContext, plan: Arc<dyn ExecutionPlan>) -> Result<Vec<RecordBatch>> {
    match datafusion::physical_plan::collect(plan, ctx.task_ctx()).await {
        Ok(batches) => batches.iter().map(without_view_types).collect(),
        Err(e) => Err(name_corrupt_files(ctx, e).await),
    }
}

/// How many times a reader opens the dataset again when a file it was told
/// of vanished ([`retry_vanished`]).
const VANISHED_RETRIES: usize = 3;

/// Runs `attempt` (open a dataset, run queries over it) again when it fails
/// on a data file that vanished: the dataset's file list named the file
/// when the attempt opened it, and a commit (a compaction, which deletes the
/// files it merged) replaced it before it was read. The next attempt reads
/// the new list, so a reader sees every row once, before or after the
/// commit, and no error. Other errors return at once.
pub async fn retry_vanished<T, F, Fut>(mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        match attempt().await {
            Err(e) if e.is_vanished_file() && tries < VANISHED_RETRIES => tries += 1,
            result => return result,
        }
    }
}

/// Runs `sql` (a query of tokscope's own), handing each result batch to
/// `each` as it comes; a failure on a corrupt dataset file names the file,
/// as [`run_plan`]'s do.
pub async fn for_each_batch(
    ctx: &SessionContext,
    sql: &str,
    mut each: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    use futures::StreamExt;
    let stream = match ctx.sql(sql).await {
        Ok(df) => df.execute_stream().await,
        Err(e) => Err(e),
    };
    let mut stream = match stream {
        Ok(stream) => stream,
        Err(e) => return Err(name_corrupt_files(ctx, e).await),
    };
    while let Some(batch) = stream.next().await {
        match batch {
            Ok(batch) => each(batch)?,
            Err(e) => return Err(name_corrupt_files(ctx, e).await),
        }
    }
    Ok(())
}

/// A query that failed on a Parquet error: when dataset files fail to open
/// or decode, the error names them (a corrupt or truncated part, not a bug
/// in the query); otherwise DataFusion's error as it is.
async fn name_corrupt_files(ctx: &SessionContext, e: datafusion::error::DataFusionError) -> Error {
    use datafusion::error::DataFusionError as E;
    // A file gone is not a corrupt one: a commit may have replaced it since
    // the session opened (`retry_vanished` opens the dataset again), or it
    // was deleted by hand (the error says what to do).
    if crate::error::names_a_missing_file(&e) {
        if let E::ObjectStore(inner) = e.find_root() {
            if let object_store::Error::NotFound { path, .. } = inner.as_ref() {
                return crate::dataset::files::gone(path);
            }
        }
        let text = e.to_string();
        let named = text.split_once("Object at location ").and_then(|(_, rest)| rest.split_once(" not found"));
        return match named {
            Some((path, _)) => crate::dataset::files::gone(path),
            None => e.into(),
        };
    }
    if !matches!(e.find_root(), E::ParquetError(_) | E::ObjectStore(_) | E::IoError(_)) {
        return e.into();
    }
    let mut files = Vec::new();
    for table in crate::catalog::CATALOG {
        let Ok(provider) = ctx.table_provider(table.name).await else { continue };
        let Some(listing) = provider.downcast_ref::<ListingTable>() else { continue };
        for url in listing.table_paths() {
            if url.scheme() == "file" {
                parquet_files(Path::new(&format!("/{}", url.prefix())), &mut files);
            }
        }
    }
    let bad: Vec<String> = files.iter().filter_map(|f| check_parquet_file(f).err()).collect();
    if bad.is_empty() {
        return e.into();
    }
    config_err!(
        "corrupt dataset file{}: {} (restore it from a backup, or delete it and ingest its input again with --force)",
        if bad.len() > 1 { "s" } else { "" },
        bad.join("; ")
    )
}

/// The visible `.parquet` files under `dir`.
fn parquet_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if path.is_dir() && !hidden {
            parquet_files(&path, out);
        } else if !hidden && path.extension().is_some_and(|x| x == "parquet") {
            out.push(path);
        }
    }
}

/// Opens and decodes a whole Parquet file; the error names it.
fn check_parquet_file(path: &Path) -> std::result::Result<(), String> {
    let named = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(|e| named(&e))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| named(&e))?;
    for batch in reader {
        batch.map_err(|e| named(&e))?;
    }
    Ok(())
}

/// Results leave the engine with plain `Utf8`/`Binary` columns: view types are
/// a scan-time optimisation, and every consumer (exports, replay, mediation)
/// then reads one string type.
fn without_view_types(batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    let plain = plain_schema(&schema);
    if Arc::ptr_eq(&plain, &schema) {
        return Ok(batch.clone());
    }
    let columns = batch
        .columns()
        .iter()
        .zip(plain.fields())
        .map(|(c, f)| arrow::compute::cast(c, f.data_type()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(plain, columns)?)
}

/// `schema` with top-level view types as plain `Utf8`/`Binary`: the schema
/// of the batches [`run_plan`] returns for a plan of schema `schema` (what a
/// client is told a result or a table will hold).
pub fn plain_schema(schema: &SchemaRef) -> SchemaRef {
    if !schema.fields().iter().any(|f| matches!(f.data_type(), DataType::Utf8View | DataType::BinaryView)) {
        return Arc::clone(schema);
    }
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| {
            let plain = match f.data_type() {
                DataType::Utf8View => DataType::Utf8,
                DataType::BinaryView => DataType::Binary,
                other => other.clone(),
            };
            f.as_ref().clone().with_data_type(plain)
        })
        .collect();
    Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone()))
}
