//! The query engine: one function registers a dataset's tables (and, as
//! jobs grow, tokscope's UDFs) in any DataFusion `SessionContext`, so ad-hoc
//! SQL, the SQL jobs and distributed executors all see the same catalog.

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::datasource::MemTable;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::dataset::{DatasetRoot, TABLES};
use crate::error::Result;
use crate::schema::{self, DATE_PARTITION};

/// A session with tokscope's defaults (information schema on, so
/// `SHOW TABLES` and `information_schema.columns` work).
pub fn new_session() -> SessionContext {
    let config = SessionConfig::new().with_information_schema(true);
    SessionContext::new_with_config(config)
}

/// Registers every table of `dataset` in `ctx`: `requests`, `tokens`,
/// `rejects` (ingest), `replay_verdicts` (replay) and `interventions`
/// (mediation). A table the dataset does not have yet is registered empty,
/// with its schema, so SQL can always name and join it.
pub async fn register_dataset(ctx: &SessionContext, dataset: &DatasetRoot) -> Result<()> {
    if let DatasetRoot::Remote { url, store, .. } = dataset {
        let base = url::Url::parse(&format!("{}://{}", url.scheme(), url.authority()))
            .map_err(|e| crate::Error::Config(format!("bad dataset URL {url}: {e}")))?;
        ctx.register_object_store(&base, Arc::clone(store));
    }
    for table in TABLES {
        let (file_schema, partitioned) = match table {
            "requests" => (schema::requests_schema(), true),
            "tokens" => (schema::tokens_schema(), true),
            _ => (schema::rejects_schema(), false),
        };
        register_parquet_table(ctx, dataset, table, file_schema, partitioned)?;
    }
    register_parquet_table(ctx, dataset, crate::replay::verdicts::TABLE, schema::replay_verdicts_schema(), false)?;
    register_parquet_table(ctx, dataset, crate::mediation::table::TABLE, crate::mediation::table::schema(), false)
}

/// Registers one table directory of the dataset as a Parquet listing table
/// (with the `date` hive partition when `partitioned`).
fn register_parquet_table(
    ctx: &SessionContext,
    dataset: &DatasetRoot,
    table: &str,
    file_schema: SchemaRef,
    partitioned: bool,
) -> Result<()> {
    let missing = matches!(dataset, DatasetRoot::Local(p) if !p.join(table).is_dir());
    if missing {
        let mut fields: Vec<_> = file_schema.fields().iter().cloned().collect();
        if partitioned {
            fields.push(Arc::new(arrow::datatypes::Field::new(DATE_PARTITION, DataType::Date32, true)));
        }
        let s = Arc::new(arrow::datatypes::Schema::new(fields));
        ctx.register_table(table, Arc::new(MemTable::try_new(s, vec![vec![]])?))?;
        return Ok(());
    }
    let mut options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    if partitioned {
        options = options.with_table_partition_cols(vec![(DATE_PARTITION.to_string(), DataType::Date32)]);
    }
    let url = ListingTableUrl::parse(dataset.table_url(table)?)?;
    let config = ListingTableConfig::new(url).with_listing_options(options).with_schema(file_schema);
    ctx.register_table(table, Arc::new(ListingTable::try_new(config)?))?;
    Ok(())
}

/// Runs SQL. Unless `allow_write`, only queries are accepted: no DDL, DML or
/// `SET`, so ad-hoc SQL over a shared dataset cannot change it.
pub async fn run_sql(ctx: &SessionContext, sql: &str, allow_write: bool) -> Result<Vec<RecordBatch>> {
    let options = SQLOptions::new().with_allow_ddl(allow_write).with_allow_dml(allow_write).with_allow_statements(allow_write);
    let df = ctx.sql_with_options(sql, options).await?;
    Ok(df.collect().await?)
}
